/* The int8 reference kernel and the quantizer's row rule on the platform
 * they are built for: deterministic pseudo-random inputs (subnormals, +-0
 * and cancellations included) through ref_matvec_i8 and cis2_quantize_row,
 * one SHA-256 line per case. tests/t_quant.sh builds it natively and for
 * wasm32 (run under node's WASI) and requires identical lines: x86-64 =
 * aarch64 = wasm32 (§1.3 in software there, core/fparith.h); and a control
 * run without FTZ/DAZ natively must differ (the inputs do exercise §1.3). */
#include "core/core.h"
#include "kernels/kernels.h"
#include "model/quant.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t st = 0x1234ABCDull;
static uint32_t r32(void)
{
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(st >> 32);
}
static float rval(void)
{
    uint32_t r = r32();
    switch (r % 23) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return cis2_u2f(r & 0x807FFFFFu); /* subnormal */
    case 3: return (r & 1) ? 3e7f : -3e7f;
    case 4: return cis2_u2f(0x00800000u | (r & 0x80000000u)); /* +-FLT_MIN */
    default: return ((float)(r >> 8) / 16777216.0f - 0.5f) * (float)(1 << (r % 7));
    }
}

static void line(const char *what, int a, int b, const void *p, size_t n)
{
    uint8_t d[32];
    char h[65];
    cis2_sha256_buf(p, n, d);
    cis2_hex(d, 32, h);
    printf("%s %d %d %s\n", what, a, b, h);
}

int main(int argc, char **argv)
{
    /* --unpinned (a control): IEEE subnormals natively, so the lines must differ */
    if (argc > 1 && !strcmp(argv[1], "--unpinned")) cis2_fpenv_unpin();
    else if (cis2_fpenv_pin()) {
        printf("cannot pin FTZ/DAZ\n");
        return 1;
    }
    static const int R[] = { 1, 3, 16, 17, 40 }, C[] = { 1, 2, 7, 64, 129 };
    for (int ri = 0; ri < 5; ri++)
        for (int ci = 0; ci < 5; ci++) {
            int rows = R[ri], cols = C[ci];
            int8_t *q = malloc((size_t)rows * cols);
            float *s = malloc((size_t)rows * 4), *x = malloc((size_t)cols * 4),
                  *y = malloc((size_t)rows * 4), *w = malloc((size_t)rows * cols * 4);
            for (int i = 0; i < rows * cols; i++) q[i] = (int8_t)(r32() >> 24);
            for (int i = 0; i < rows; i++) s[i] = rval();
            for (int i = 0; i < cols; i++) x[i] = rval();
            ref_matvec_i8(q, s, rows, cols, x, y);
            line("ref_matvec_i8", rows, cols, y, (size_t)rows * 4);
            /* the quantizer's rule on rows with tiny, subnormal and mixed values */
            for (int i = 0; i < rows * cols; i++) w[i] = rval() * (i % 5 == 0 ? 1e-37f : 1.0f);
            for (int r = 0; r < rows; r++)
                if (cis2_quantize_row(w + (size_t)r * cols, cols, q + (size_t)r * cols, &s[r]) >= 0)
                    printf("unexpected refusal\n");
            line("quantize_row q", rows, cols, q, (size_t)rows * cols);
            line("quantize_row s", rows, cols, s, (size_t)rows * 4);
            free(q);
            free(s);
            free(x);
            free(y);
            free(w);
        }
    return 0;
}
