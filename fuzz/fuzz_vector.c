/* The §13.1 vector form `cis2 conform --vector` reads (src/verify/run_vector.c,
 * over kv.c). A refusal is one line; an accepted vector has every key but
 * prompt, lowercase 64-hex hashes and gen_toks in range, and reads the same
 * with CRLF line ends (a CR never ends up inside a value). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[CIS2_ERR_LEN] = "";
    cis2_run_vector a, b;
    if (cis2_run_vector_parse(&a, (const char *)data, size, "fuzz.vector", err)) {
        fuzz_check_err(err);
        return 0;
    }
    FUZZ_ASSERT(a.gen_toks >= 1 && a.gen_toks <= 1000000);
    for (int k = 0; k < CIS2_RV_N; k++) {
        if (k == CIS2_RV_PROMPT && !a.v[k]) continue;
        FUZZ_ASSERT(a.v[k] != NULL);
    }
    uint8_t h[32];
    FUZZ_ASSERT(cis2_unhex32(a.v[CIS2_RV_REF], h) == 0);
    size_t m;
    char *c = fuzz_crlf(data, size, &m);
    if (!memchr(data, '\r', size)) {
        FUZZ_ASSERT(cis2_run_vector_parse(&b, c, m, "crlf.vector", err) == 0);
        for (int k = 0; k < CIS2_RV_N; k++)
            FUZZ_ASSERT((!a.v[k] && !b.v[k]) || (a.v[k] && b.v[k] && !strcmp(a.v[k], b.v[k])));
        cis2_run_vector_free(&b);
    }
    free(c);
    cis2_run_vector_free(&a);
    return 0;
}
