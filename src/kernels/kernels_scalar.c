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

static const fast_kernels K_SCALAR = { "scalar",    scalar_mm_bf16, scalar_mm_f32, scalar_scores,
                                       ref_softmax, scalar_vmix,    NULL,          NULL,
                                       NULL,        scalar_mm_i8,   NULL,          NULL,
                                       NULL,        NULL,           NULL,          NULL,
                                       NULL };
const fast_kernels *fast_kernels_scalar(void) { return &K_SCALAR; }
