/* A conformance candidate's answer (src/verify/suite.c
 * cis2_suite_parse_answer): arbitrary stdout. A refusal is one line; an
 * accepted answer yields a 64-digit lowercase digest. */
#include "fuzz.h"
#include "verify/conformance.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_dup(data, size), sha[65], why[CIS2_ERR_LEN] = "";
    const char *bits = NULL;
    if (cis2_suite_parse_answer(s, size, sha, &bits, why)) {
        fuzz_check_err(why);
    } else {
        FUZZ_ASSERT(strlen(sha) == 64);
        for (int i = 0; i < 64; i++)
            FUZZ_ASSERT((sha[i] >= '0' && sha[i] <= '9') || (sha[i] >= 'a' && sha[i] <= 'f'));
        FUZZ_ASSERT(!bits || (bits >= s && bits <= s + size));
    }
    free(s);
    return 0;
}
