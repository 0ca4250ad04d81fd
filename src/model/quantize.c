/* The pinned int8 row rule (docs/quantization.md §1). Every step is one
 * binary32 operation or an exact bit manipulation, and DAZ/FTZ are applied
 * by bit pattern, so the bytes are the same on every ISA and in any FP
 * environment. */
#include "model/quant.h"
/* cis2_fdiv: the plain operator natively, §1.3 in software on wasm32 */
#include "core/fparith.h"

/* |x| as bits, subnormals as zero (DAZ, §1.3). */
static uint32_t abs_daz_bits(uint32_t b)
{
    uint32_t a = b & 0x7FFFFFFFu;
    return a < 0x00800000u ? 0 : a;
}

/* Nearest integer, ties to even, of |v| <= 2^23, by exact steps (no
 * dependence on the rounding mode): trunc, the exact fraction, compare. */
static int rne_int(float v)
{
    float a = cis2_u2f(cis2_f2u(v) & 0x7FFFFFFFu);
    int t = (int)a;            /* truncation, exact */
    float frac = a - (float)t; /* exact (Sterbenz, or t = 0) */
    if (frac > 0.5f || (frac == 0.5f && (t & 1))) t++;
    return (cis2_f2u(v) >> 31) ? -t : t;
}

int cis2_quantize_row(const float *w, int n, int8_t *q, float *s)
{
    uint32_t maxb = 0;
    for (int i = 0; i < n; i++) {
        uint32_t b = cis2_f2u(w[i]);
        if ((b & 0x7F800000u) == 0x7F800000u) return i; /* NaN or Inf: refused */
        uint32_t a = abs_daz_bits(b);
        if (a > maxb) maxb = a; /* non-negative floats order as their bits */
    }
    float sc = cis2_fdiv(cis2_u2f(maxb), 127.0f);   /* one f32 division, RNE */
    if (abs_daz_bits(cis2_f2u(sc)) == 0) sc = 0.0f; /* FTZ; an all-zero row */
    *s = sc;
    for (int i = 0; i < n; i++) {
        if (sc == 0.0f) {
            q[i] = 0;
            continue;
        }
        uint32_t b = cis2_f2u(w[i]);
        float wd = abs_daz_bits(b) ? w[i] : 0.0f;
        float v = cis2_fdiv(wd, sc); /* one f32 division; |v| <= 127 + 2^-16 */
        int r = rne_int(v);
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
    return -1;
}
