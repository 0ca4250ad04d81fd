/* The receipt parser: cis2_receipt_parse over arbitrary bytes. An accepted
 * receipt must format back to exactly the same bytes (the format is canonical:
 * fixed order, lowercase hex, no leading zeros) and re-parse. */
#include "fuzz.h"
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = fuzz_dup(data, size);
    cis2_receipt r;
    memset(&r, 0, sizeof r);
    char err[CIS2_ERR_LEN] = "";
    if (cis2_receipt_parse(src, size, "fuzz.receipt", &r, err) == 0) {
        FUZZ_ASSERT(r.gen_toks == r.n_gen);
        char *out = NULL;
        size_t len = 0;
        FUZZ_ASSERT(cis2_receipt_format(&r, &out, &len) == 0);
        FUZZ_ASSERT(len == size && memcmp(out, src, size) == 0);
        cis2_receipt r2;
        memset(&r2, 0, sizeof r2);
        FUZZ_ASSERT(cis2_receipt_parse(out, len, "fuzz.receipt", &r2, err) == 0);
        cis2_receipt_free(&r2);
        free(out);
        cis2_receipt_free(&r);
    } else {
        fuzz_check_err(err);
        cis2_receipt_free(&r);
    }
    free(src);
    return 0;
}
