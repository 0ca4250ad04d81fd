/* NEON kernels (aarch64): four lanes, separate multiplies and adds (never
 * fmla; -ffp-contract=off), one accumulator per output. FPCR.FZ flushes a
 * product that is tiny before rounding, x86-64 (the canonical §1.3) one that
 * is tiny after rounding, so every product here is fparith.h's
 * cis2_v4_mul2 (x86-64's bits in two fmul, the broadcast operand doubled
 * once), and an output that comes out inf or NaN (where doubling may have
 * overflowed) is recomputed by the scalar path: the bits are x86-64's
 * (docs/conformance.md, "gap in §1.3/§13.2"). */
#include "kernels/fast_kernels.h"
#include "kernels/kernels.h"
#include "core/fparith.h"

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
#define V_XSET1(x)     vdupq_n_f32(cis2_x2(x))
#define V_XMUL(w, xb)  cis2_v4_mul2(w, xb)
#define V_SMUL(a, s)   cis2_v4_mul2(a, vmulq_f32(s, vdupq_n_f32(2.0f)))
#define V_LOADU(p)     vld1q_f32(p)
#define V_STOREU(p, v) vst1q_f32(p, v)
#define V_BF16(p)      vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16))
#define V_BF16_W(p)    vreinterpretq_u32_u16(vld1q_u16(p))
#define V_BF16_LO(p)   vreinterpretq_f32_u32(vshlq_n_u32(V_BF16_W(p), 16))
#define V_BF16_HI(p)   vreinterpretq_f32_u32(vandq_u32(V_BF16_W(p), vdupq_n_u32(0xFFFF0000u)))
#define V_I8(p)        neon_i8x4(p)
#define NT1            2
#define NTB            1
#define TBB            4
#define PFX            neon_
#include "kernels/kernels_tmpl.h"

static inline int nonfinite(float v) { return (cis2_f2u(v) & 0x7F800000u) == 0x7F800000u; }

/* Outputs that came out inf/NaN, recomputed as the reference does: the row's
 * weights times x, fparith.h operations, k = 0, 1, ... in order (§5.1). */
#define NEON_REDO(NAME, WT, WIDEN, AT)                                                             \
    static void NAME(const WT *W, int K, int ntiles, int nrows, const float *X, int ldx, int T,    \
                     float *Y, int ldy)                                                            \
    {                                                                                              \
        int nr = nrows < ntiles * FAST_TILE ? nrows : ntiles * FAST_TILE;                          \
        for (int t = 0; t < T; t++) {                                                              \
            float *y = Y + (size_t)t * ldy;                                                        \
            const float *x = X + (size_t)t * ldx;                                                  \
            if (!cis2_any_nonfinite(y, (size_t)nr)) continue;                                      \
            for (int r = 0; r < nr; r++) {                                                         \
                if (!nonfinite(y[r])) continue;                                                    \
                float acc = 0.0f;                                                                  \
                for (int k = 0; k < K; k++)                                                        \
                    acc = cis2_fadd(acc, cis2_fmul(WIDEN(W[AT((size_t)K, r, (size_t)k)]), x[k]));  \
                y[r] = acc;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }
#define NEON_F32(v) (v)
NEON_REDO(neon_redo_bf16, uint16_t, cis2_bf16_to_f32, cis2_bf16_tile_at)
NEON_REDO(neon_redo_f32, float, NEON_F32, cis2_f32_tile_at)

static void neon_mm_bf16_x(const uint16_t *W, int K, int ntiles, int nrows, const float *X, int ldx,
                           int T, float *Y, int ldy)
{
    neon_mm_bf16(W, K, ntiles, nrows, X, ldx, T, Y, ldy);
    neon_redo_bf16(W, K, ntiles, nrows, X, ldx, T, Y, ldy);
}

static void neon_mm_f32_x(const float *W, int K, int ntiles, int nrows, const float *X, int ldx,
                          int T, float *Y, int ldy)
{
    neon_mm_f32(W, K, ntiles, nrows, X, ldx, T, Y, ldy);
    neon_redo_f32(W, K, ntiles, nrows, X, ldx, T, Y, ldy);
}

/* int8 (docs/quantization.md): an output that came out inf/NaN (a doubled
 * operand overflowed) is recomputed as ref_matvec_i8 does: the in-order sum
 * of widened q times x, then one multiply by the row's scale. */
static void neon_mm_i8_x(const int8_t *W, const float *S, int K, int ntiles, int nrows,
                         const float *X, int ldx, int T, float *Y, int ldy)
{
    neon_mm_i8(W, S, K, ntiles, nrows, X, ldx, T, Y, ldy);
    int nr = nrows < ntiles * FAST_TILE ? nrows : ntiles * FAST_TILE;
    for (int t = 0; t < T; t++) {
        float *y = Y + (size_t)t * ldy;
        const float *x = X + (size_t)t * ldx;
        if (!cis2_any_nonfinite(y, (size_t)nr)) continue;
        for (int r = 0; r < nr; r++) {
            if (!nonfinite(y[r])) continue;
            const int8_t *w = W + (size_t)(r / FAST_TILE) * K * FAST_TILE + r % FAST_TILE;
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc = cis2_fadd(acc, cis2_fmul((float)w[(size_t)k * FAST_TILE], x[k]));
            y[r] = cis2_fmul(S[r], acc);
        }
    }
}

/* Scores: lanes over keys (4 keys per vector), each lane's terms in order,
 * then the §9.2 scale. */
static void neon_scores(const float *q, const float *k, size_t stride, int n, int hd, float scale,
                        float *out)
{
    int j = 0;
    float32x4_t vs2 = vdupq_n_f32(cis2_x2(scale));
    for (; j + 4 <= n; j += 4) {
        float32x4_t a = vdupq_n_f32(0.0f);
        const float *k0 = k + (size_t)j * stride;
        for (int d = 0; d < hd; d++) {
            float c[4] = { k0[d], k0[stride + d], k0[2 * stride + d], k0[3 * stride + d] };
            a = vaddq_f32(a, cis2_v4_mul2(vld1q_f32(c), vdupq_n_f32(cis2_x2(q[d]))));
        }
        vst1q_f32(out + j, cis2_v4_mul2(a, vs2));
    }
    for (; j < n; j++)
        out[j] = cis2_fmul(cis2_dot_seq(q, k + (size_t)j * stride, (size_t)hd), scale);
    if (cis2_any_nonfinite(out, (size_t)n))
        for (j = 0; j < n; j++)
            if (nonfinite(out[j]))
                out[j] = cis2_fmul(cis2_dot_seq(q, k + (size_t)j * stride, (size_t)hd), scale);
}

/* One output dim of the V-mix, as the reference computes it (§9.4). */
static float vmix_dim(const float *p, const float *v, size_t stride, int n)
{
    float acc = 0.0f;
    for (int j = 0; j < n; j++) acc = cis2_fadd(acc, cis2_fmul(p[j], v[(size_t)j * stride]));
    return acc;
}

/* V-mix: lanes over output dims, keys in order. */
static void neon_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out)
{
    int d0 = 0;
    for (; d0 + 16 <= hd; d0 += 16) {
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (int j = 0; j < n; j++) {
            float32x4_t pj2 = vdupq_n_f32(cis2_x2(p[j]));
            const float *vr = v + (size_t)j * stride + d0;
            a0 = vaddq_f32(a0, cis2_v4_mul2(vld1q_f32(vr), pj2));
            a1 = vaddq_f32(a1, cis2_v4_mul2(vld1q_f32(vr + 4), pj2));
            a2 = vaddq_f32(a2, cis2_v4_mul2(vld1q_f32(vr + 8), pj2));
            a3 = vaddq_f32(a3, cis2_v4_mul2(vld1q_f32(vr + 12), pj2));
        }
        vst1q_f32(out + d0, a0);
        vst1q_f32(out + d0 + 4, a1);
        vst1q_f32(out + d0 + 8, a2);
        vst1q_f32(out + d0 + 12, a3);
    }
    for (; d0 < hd; d0++) out[d0] = vmix_dim(p, v + d0, stride, n);
    if (cis2_any_nonfinite(out, (size_t)hd))
        for (int d = 0; d < hd; d++)
            if (nonfinite(out[d])) out[d] = vmix_dim(p, v + d, stride, n);
}

const fast_kernels fast_kernels_neon = {
    .name = "neon",
    .mm_bf16 = neon_mm_bf16_x,
    .mm_f32 = neon_mm_f32_x,
    .scores = neon_scores,
    .softmax = ref_softmax,
    .vmix = neon_vmix,
    .mm_i8 = neon_mm_i8_x,
    .rmsnorm_rows = fast_rmsnorm_rows,
};
#endif
