/* Op vectors (src/verify/kv.c + op.c): the key=value parser and every op on
 * arbitrary text. OP is the input's own "op=" value when it names a known op,
 * else chosen by the first byte. Every refusal is one line; an accepted
 * vector gives as many values as the op's output and re-parses identically
 * after CRLF line ends are swapped in (CRLF is presentation only). */
#include "fuzz.h"
#include "verify/conformance.h"
#include <stdio.h>

static void run_op(char *text, size_t size, int pick, float **out, size_t *n, int *rc)
{
    char err[CIS2_ERR_LEN] = "";
    cis2_kv_doc d;
    *out = NULL;
    *n = 0;
    if (cis2_kv_parse(text, size, "fuzz", CIS2_KV_TRIM, &d, err)) {
        fuzz_check_err(err);
        *rc = -1;
        return;
    }
    const char *vop = cis2_kv_get(&d, "op");
    int k = vop && cis2_op_find(vop) >= 0 ? cis2_op_find(vop) : pick % cis2_op_count();
    *rc = cis2_op_eval(k, &d, out, n, err);
    if (*rc) fuzz_check_err(err);
    cis2_kv_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16)) return 0;
    int pick = size ? data[0] : 0;
    char *a = fuzz_dup(data, size);
    float *o1, *o2;
    size_t n1, n2;
    int r1, r2;
    run_op(a, size, pick, &o1, &n1, &r1);
    size_t m;
    char *b = fuzz_crlf(data, size, &m);
    run_op(b, m, pick, &o2, &n2, &r2);
    /* a CR already before an LF may make the CRLF copy differ; otherwise equal */
    if (!memchr(data, '\r', size)) {
        FUZZ_ASSERT(r1 == r2);
        FUZZ_ASSERT(n1 == n2);
        FUZZ_ASSERT(n1 == 0 || memcmp(o1, o2, n1 * sizeof *o1) == 0);
    }
    FUZZ_ASSERT(r1 != 0 || n1 > 0);
    free(o1);
    free(o2);
    free(a);
    free(b);
    return 0;
}
