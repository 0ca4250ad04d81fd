/* Traces (src/verify/trace_file.c, trace_diff.c): the trace reader over
 * arbitrary bytes, and the diff over what it accepts. An accepted trace
 * writes back to a trace that reads again with the same entries, and a trace
 * diffed against itself is identical, bit for bit and within tolerance. */
#include "fuzz.h"
#include "verify/trace.h"
#include <stdio.h>

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) abort();
    if (size) memcpy(copy, data, size);
    cis2_trace a;
    char err[CIS2_ERR_LEN] = "";
    if (cis2_trace_parse(&a, copy, size, "fuzz.st", err)) {
        fuzz_check_err(err);
        free(copy);
        return 0;
    }
    FUZZ_ASSERT(a.n > 0);
    char *img = NULL;
    size_t len = 0;
    FUZZ_ASSERT(cis2_trace_format(&a, &img, &len, err) == 0);
    cis2_trace b;
    int rc = cis2_trace_parse(&b, (const uint8_t *)img, len, "again.st", err);
    FUZZ_ASSERT(rc == 0);
    FUZZ_ASSERT(b.n == a.n && b.nm == a.nm && b.hash_only == a.hash_only);
    for (int i = 0; i < a.n; i++) {
        FUZZ_ASSERT(!strcmp(a.t[i].name, b.t[i].name) && a.t[i].n == b.t[i].n);
        FUZZ_ASSERT(!memcmp(a.t[i].sha, b.t[i].sha, 32));
    }
    cis2_tol_table tol;
    cis2_tol_defaults(&tol);
    FUZZ_ASSERT(cis2_trace_diff(devnull, &a, &b, 1, &tol, 0, 0) == 0);
    FUZZ_ASSERT(cis2_trace_diff(devnull, &a, &a, 0, &tol, 1, 1) == 0);
    cis2_trace_free(&b);
    cis2_trace_free(&a);
    free(img);
    free(copy);
    return 0;
}
