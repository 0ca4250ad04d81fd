/* --tol files (src/verify/trace_diff.c cis2_tol_parse): arbitrary text over
 * the default table. A refusal is one line; an accepted file leaves every
 * row's bounds non-negative numbers and top1 0 or 1, and its CRLF form reads
 * to the same table. */
#include "fuzz.h"
#include "verify/trace.h"

static int parse(const uint8_t *data, size_t size, int crlf, cis2_tol_table *t)
{
    size_t m = size;
    char *s = crlf ? fuzz_crlf(data, size, &m) : fuzz_dup(data, size), err[CIS2_ERR_LEN] = "";
    cis2_tol_defaults(t);
    int rc = cis2_tol_parse(t, s, m, "fuzz.tol", err);
    if (rc) fuzz_check_err(err);
    free(s);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cis2_tol_table a, b;
    int ra = parse(data, size, 0, &a), rb = parse(data, size, 1, &b);
    if (ra) return 0;
    for (int k = 0; k < CIS2_N_NODES; k++) {
        const cis2_tol_row *r = &a.row[k];
        FUZZ_ASSERT(r->max_rel >= 0 && r->mean_rel >= 0 && r->min_cos >= 0);
        FUZZ_ASSERT(r->top1 == 0 || r->top1 == 1);
    }
    /* a CR that is not before an LF is a blank, like the CRLF's */
    FUZZ_ASSERT(rb == 0);
    for (int k = 0; k < CIS2_N_NODES; k++) {
        const cis2_tol_row *x = &a.row[k], *y = &b.row[k];
        FUZZ_ASSERT(x->max_rel == y->max_rel && x->mean_rel == y->mean_rel &&
                    x->min_cos == y->min_cos && x->top1 == y->top1);
    }
    return 0;
}
