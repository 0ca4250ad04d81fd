/* NEON kernels (aarch64): four lanes, separate fmul/fadd (vmulq_f32 then
 * vaddq_f32; -ffp-contract=off keeps them apart, never fmla), one
 * accumulator per output. */
#include "kernels/fast_kernels.h"
#include "kernels/kernels.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

/* 4 int8 -> 4 f32, exactly (sign-extending widenings, then int -> float). */
static inline __attribute__((always_inline)) float32x4_t neon_i8x4(const int8_t *p)
{
    int32_t b;
    memcpy(&b, p, 4);
    int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(b)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}

#define ATTR
#define V              float32x4_t
#define VL             4
#define NV             4
#define V_ZERO()       vdupq_n_f32(0.0f)
#define V_ADD(a, b)    vaddq_f32(a, b)
#define V_MUL(a, b)    vmulq_f32(a, b)
#define V_SET1(x)      vdupq_n_f32(x)
#define V_LOADU(p)     vld1q_f32(p)
#define V_STOREU(p, v) vst1q_f32(p, v)
#define V_BF16(p)      vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16))
#define V_I8(p)        neon_i8x4(p)
#define NT1            2
#define NTB            1
#define TBB            4
#define PFX            neon_
#include "kernels/kernels_tmpl.h"

/* Scores: lanes over keys (4 keys per vector), each lane's terms in order. */
static void neon_scores(const float *q, const float *k, size_t stride, int n, int hd, float scale,
                        float *out)
{
    int j = 0;
    float32x4_t vs = vdupq_n_f32(scale);
    for (; j + 4 <= n; j += 4) {
        float32x4_t a = vdupq_n_f32(0.0f);
        const float *k0 = k + (size_t)j * stride;
        for (int d = 0; d < hd; d++) {
            float c[4] = { k0[d], k0[stride + d], k0[2 * stride + d], k0[3 * stride + d] };
            a = vaddq_f32(a, vmulq_f32(vld1q_f32(c), vdupq_n_f32(q[d])));
        }
        vst1q_f32(out + j, vmulq_f32(a, vs));
    }
    for (; j < n; j++) {
        float dd = cis2_dot_seq(q, k + (size_t)j * stride, (size_t)hd);
        out[j] = dd * scale;
    }
}

/* V-mix: lanes over output dims, keys in order. */
static void neon_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out)
{
    int d0 = 0;
    for (; d0 + 16 <= hd; d0 += 16) {
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (int j = 0; j < n; j++) {
            float32x4_t pj = vdupq_n_f32(p[j]);
            const float *vr = v + (size_t)j * stride + d0;
            a0 = vaddq_f32(a0, vmulq_f32(pj, vld1q_f32(vr)));
            a1 = vaddq_f32(a1, vmulq_f32(pj, vld1q_f32(vr + 4)));
            a2 = vaddq_f32(a2, vmulq_f32(pj, vld1q_f32(vr + 8)));
            a3 = vaddq_f32(a3, vmulq_f32(pj, vld1q_f32(vr + 12)));
        }
        vst1q_f32(out + d0, a0);
        vst1q_f32(out + d0 + 4, a1);
        vst1q_f32(out + d0 + 8, a2);
        vst1q_f32(out + d0 + 12, a3);
    }
    for (; d0 < hd; d0++) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++) {
            float pr = p[j] * v[(size_t)j * stride + d0];
            acc = acc + pr;
        }
        out[d0] = acc;
    }
}

static const fast_kernels K_NEON = {
    "neon",    neon_mm_bf16, neon_mm_f32, neon_scores, ref_softmax,
    neon_vmix, NULL,         NULL,        NULL,        neon_mm_i8
};
const fast_kernels *fast_kernels_neon(void) { return &K_NEON; }
#else
const fast_kernels *fast_kernels_neon(void) { return NULL; }
#endif
