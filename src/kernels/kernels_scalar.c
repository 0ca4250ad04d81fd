/* Portable scalar kernels over the packed tiles: the `--isa scalar` path and
 * the fallback on CPUs with nothing better. Plain C, one accumulator per
 * output, terms in order (the build's -ffp-contract=off keeps mul and add
 * separate). The operations are fparith.h's (§1.3 as on x86-64 on every ISA). */
#include "kernels/fast_kernels.h"
#include "kernels/kernels.h"
#include "core/fparith.h"

#define ATTR
#define V              float
#define VL             1
#define NV             16
#define V_ZERO()       0.0f
#define V_ADD(a, b)    cis2_fadd(a, b)
#define V_MUL(a, b)    cis2_fmul(a, b)
#define V_SET1(x)      (x)
#define V_LOADU(p)     (*(p))
#define V_STOREU(p, v) (*(p) = (v))
#define V_BF16(p)      cis2_bf16_to_f32(*(p))
#define V_BF16_LO(p)   cis2_bf16_to_f32((p)[0])
#define V_BF16_HI(p)   cis2_bf16_to_f32((p)[1])
#define V_I8(p)        ((float)*(p))
#define NT1            1
#define NTB            1
#define TBB            1
#define PFX            scalar_
#include "kernels/kernels_tmpl.h"

static void scalar_scores(const float *q, const float *k, size_t stride, int n, int hd, float scale,
                          float *out)
{
    for (int j = 0; j < n; j++) {
        float d = cis2_dot_seq(q, k + (size_t)j * stride, (size_t)hd);
        out[j] = cis2_fmul(d, scale);
    }
}

static void scalar_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out)
{
    for (int d = 0; d < hd; d++) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++) {
            float pr = cis2_fmul(p[j], v[(size_t)j * stride + d]);
            acc = cis2_fadd(acc, pr);
        }
        out[d] = acc;
    }
}

/* The sums of squares of rows r[c], c < NC, over n terms: each ref_rmsnorm's
 * first loop, its own accumulator in order (§5.3); NC chains side by side. */
#define RMS_SS(NC)                                                                                 \
    static void rms_ss##NC(const float *const *r, int n, float *ss)                                \
    {                                                                                              \
        float a[NC];                                                                               \
        _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) a[c] = 0.0f;                          \
        for (int i = 0; i < n; i++)                                                                \
            _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) a[c] =                            \
                cis2_fadd(a[c], cis2_fmul(r[c][i], r[c][i]));                                      \
        _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) ss[c] = a[c];                         \
    }
RMS_SS(1)
RMS_SS(2)
RMS_SS(4)
RMS_SS(8)
#undef RMS_SS

void fast_rmsnorm_rows_by(const float *x, size_t ldx, const float *w, int n, float eps, float *out,
                          size_t ldo, int m,
                          void (*scale)(const float *x, float inv, const float *w, float *out,
                                        int n))
{
    for (int r0 = 0; r0 < m; r0 += 8) {
        int nl = m - r0 < 8 ? m - r0 : 8;
        const float *r[8];
        float ss[8];
        for (int c = 0; c < 8; c++) /* spare chains repeat the first row, never read back */
            r[c] = x + (size_t)(r0 + (c < nl ? c : 0)) * ldx;
        if (nl == 1) rms_ss1(r, n, ss);
        else if (nl == 2) rms_ss2(r, n, ss);
        else if (nl <= 4) rms_ss4(r, n, ss);
        else rms_ss8(r, n, ss);
        for (int c = 0; c < nl; c++) {
            float mean = cis2_fdiv(ss[c], (float)n);
            float inv = cis2_rsqrt(cis2_fadd(mean, eps));
            const float *xr = r[c];
            float *o = out + (size_t)(r0 + c) * ldo;
            /* A row with a NaN or inf (or an infinite inv) goes to ref_rmsnorm:
             * there a product may meet two NaNs, and which payload survives is
             * the compiler's choice. Otherwise no product has two NaN operands. */
            if (!__builtin_isfinite(ss[c]) || !__builtin_isfinite(inv))
                ref_rmsnorm(xr, w, n, eps, o);
            else if (scale) scale(xr, inv, w, o, n);
            else
                for (int i = 0; i < n; i++) o[i] = cis2_fmul(cis2_fmul(xr[i], inv), w[i]);
        }
    }
}

void fast_rmsnorm_rows(const float *x, size_t ldx, const float *w, int n, float eps, float *out,
                       size_t ldo, int m)
{
    fast_rmsnorm_rows_by(x, ldx, w, n, eps, out, ldo, m, NULL);
}

const fast_kernels fast_kernels_scalar = {
    .name = "scalar",
    .mm_bf16 = scalar_mm_bf16,
    .mm_f32 = scalar_mm_f32,
    .scores = scalar_scores,
    .softmax = ref_softmax,
    .vmix = scalar_vmix,
    .mm_i8 = scalar_mm_i8,
    .rmsnorm_rows = fast_rmsnorm_rows,
};
