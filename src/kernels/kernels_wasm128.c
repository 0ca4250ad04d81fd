/* WebAssembly SIMD128 kernels (wasm32, the browser verifier): four lanes,
 * separate f32x4.mul and f32x4.add (plain SIMD128; relaxed-SIMD's fused
 * madd is never used), one accumulator per output. wasm has no FTZ/DAZ
 * control, so §1.3 is fparith.h's software flush, vectorised:
 *
 *  - matmul (the hot loop): plain IEEE products and sums, with every product
 *    folded into a tracker (cis2_v4_track: three integer ops); a block whose
 *    products were all ±0 or >= 2^-102 in magnitude provably equals x86-64's
 *    FTZ+DAZ arithmetic (fparith.h), any other block (tiny products: almost
 *    never with real weights) is recomputed with the exact vector operations.
 *    Inputs x that are subnormal or >= 2^24 in magnitude (where a subnormal
 *    weight's product could escape the tracker) send the whole call to the
 *    exact path.
 *  - scores and V-mix: the exact vector operations throughout
 *    (cis2_v4_mul/cis2_v4_add: DAZ, IEEE, FTZ, the FLT_MIN edge decided
 *    exactly); their cost is small at the context lengths verified here.
 * Every output is bit-identical to the scalar reference (kernels_ref.c, which
 * uses the same software flush): web/test/wasm_kernels_check, tests/t_wasm.sh. */
#include "kernels/fast_kernels.h"
#include "kernels/kernels.h"
#include "core/fparith.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>

/* ---- the exact vector path of one register block (template signature) */
static inline v128_t w_bf16(const uint16_t *p)
{
    return wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(wasm_v128_load64_zero(p)), 16);
}
/* Of the 4 column pairs at p (the bf16 tiles' layout), the even / odd column. */
static inline v128_t w_bf16_lo(const uint16_t *p) { return wasm_i32x4_shl(wasm_v128_load(p), 16); }
static inline v128_t w_bf16_hi(const uint16_t *p)
{
    return wasm_v128_and(wasm_v128_load(p), wasm_i32x4_const_splat((int32_t)0xFFFF0000u));
}
/* Lanes 4j..4j+3 of column k of the tile at w (K columns), widened exactly. */
static inline v128_t w_bf16_at(const uint16_t *w, int K, int k, int j)
{
    if (k >= (K & ~1)) return w_bf16(w + (size_t)k * 16 + (size_t)j * 4);
    const uint16_t *p = w + (size_t)(k & ~1) * 16 + (size_t)j * 8;
    return k & 1 ? w_bf16_hi(p) : w_bf16_lo(p);
}
static inline v128_t w_f32_at(const float *w, int K, int k, int j)
{
    (void)K;
    return wasm_v128_load(w + (size_t)k * 16 + (size_t)j * 4);
}

#define WX_EXACT(NAME, WT, LOADW)                                                                  \
    static void NAME(const WT *W, size_t ts, int K, int nt, const float *X, int ldx, int tb,       \
                     float *Y, int ldy, int nrows)                                                 \
    {                                                                                              \
        for (int i = 0; i < nt; i++)                                                               \
            for (int t = 0; t < tb; t++)                                                           \
                for (int j = 0; j < 4; j++) {                                                      \
                    int r0 = 16 * i + 4 * j;                                                       \
                    if (r0 >= nrows) break;                                                        \
                    v128_t acc = wasm_f32x4_const_splat(0.0f);                                     \
                    const WT *w = W + (size_t)i * ts;                                              \
                    for (int k = 0; k < K; k++)                                                    \
                        acc = cis2_v4_add(acc,                                                     \
                                          cis2_v4_mul(LOADW(w, K, k, j),                           \
                                                      wasm_f32x4_splat(X[(size_t)t * ldx + k])));  \
                    float o[4];                                                                    \
                    wasm_v128_store(o, acc);                                                       \
                    float *dst = Y + (size_t)t * ldy + r0;                                         \
                    for (int l = 0; l < 4 && r0 + l < nrows; l++) dst[l] = o[l];                   \
                }                                                                                  \
    }
WX_EXACT(wasm_exact_blk_bf16, uint16_t, w_bf16_at)
WX_EXACT(wasm_exact_blk_f32, float, w_f32_at)

#define ATTR
#define V              v128_t
#define VL             4
#define NV             4
#define V_ZERO()       wasm_f32x4_const_splat(0.0f)
#define V_ADD(a, b)    wasm_f32x4_add(a, b)
#define V_MUL(a, b)    wasm_f32x4_mul(a, b)
#define V_SET1(x)      wasm_f32x4_splat(x)
#define V_LOADU(p)     wasm_v128_load(p)
#define V_STOREU(p, v) wasm_v128_store(p, v)
#define V_BF16(p)      w_bf16(p)
#define V_BF16_LO(p)   w_bf16_lo(p)
#define V_BF16_HI(p)   w_bf16_hi(p)
#define TM_CHK_INIT()  v128_t tm_chk = CIS2_V4_TRACK_INIT
#define TM_CHK(p)      cis2_v4_track(&tm_chk, p)
#define TM_CHK_END(KIND, W, ts, K, nt, X, ldx, tb, Y, ldy, nrows)                                  \
    if (!cis2_v4_track_ok(tm_chk)) {                                                               \
        wasm_exact_##KIND(W, ts, K, nt, X, ldx, tb, Y, ldy, nrows);                                \
        return;                                                                                    \
    }
#define NT1 1
#define NTB 1
#define TBB 2
#define PFX wasm128_
#include "kernels/kernels_tmpl.h"

/* 1 when some x is subnormal or has |x| >= 2^24 (inf and NaN included). */
static int x_needs_exact(const float *X, int ldx, int T, int K)
{
    uint32_t bad = 0;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            uint32_t a = cis2_f2u(X[(size_t)t * ldx + k]) & 0x7FFFFFFFu;
            bad |= (uint32_t)(a - 1u < 0x007FFFFFu) | (uint32_t)(a >= 0x4B800000u);
        }
    return (int)bad;
}

#define WX_DRIVER(NAME, WT, FAST, EXACT)                                                           \
    static void NAME(const WT *W, int K, int ntiles, int nrows, const float *X, int ldx, int T,    \
                     float *Y, int ldy)                                                            \
    {                                                                                              \
        if (!x_needs_exact(X, ldx, T, K)) {                                                        \
            FAST(W, K, ntiles, nrows, X, ldx, T, Y, ldy);                                          \
            return;                                                                                \
        }                                                                                          \
        size_t ts = (size_t)K * 16;                                                                \
        for (int i = 0; i < ntiles; i++)                                                           \
            EXACT(W + (size_t)i * ts, ts, K, 1, X, ldx, T, Y + (size_t)i * 16, ldy,                \
                  nrows - 16 * i);                                                                 \
    }
WX_DRIVER(wasm_mm_bf16, uint16_t, wasm128_mm_bf16, wasm_exact_blk_bf16)
WX_DRIVER(wasm_mm_f32, float, wasm128_mm_f32, wasm_exact_blk_f32)

/* Scores: lanes over keys, each lane's terms d = 0..hd-1 in order, then the
 * §9.2 scale; every operation exact (fparith.h's vector forms). */
static void wasm_scores(const float *q, const float *k, size_t stride, int n, int hd, float scale,
                        float *out)
{
    int j = 0;
    v128_t vs = wasm_f32x4_splat(scale);
    for (; j + 4 <= n; j += 4) {
        v128_t a = wasm_f32x4_const_splat(0.0f);
        const float *k0 = k + (size_t)j * stride;
        for (int d = 0; d < hd; d++) {
            v128_t c =
                wasm_f32x4_make(k0[d], k0[stride + d], k0[2 * stride + d], k0[3 * stride + d]);
            a = cis2_v4_add(a, cis2_v4_mul(wasm_f32x4_splat(q[d]), c));
        }
        wasm_v128_store(out + j, cis2_v4_mul(a, vs));
    }
    for (; j < n; j++)
        out[j] = cis2_fmul(cis2_dot_seq(q, k + (size_t)j * stride, (size_t)hd), scale);
}

/* V-mix: lanes over output dims, keys in order (§9.4), exact operations. */
static void wasm_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out)
{
    int d0 = 0;
    for (; d0 + 16 <= hd; d0 += 16) {
        v128_t a0 = wasm_f32x4_const_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (int j = 0; j < n; j++) {
            v128_t pj = wasm_f32x4_splat(p[j]);
            const float *vr = v + (size_t)j * stride + d0;
            a0 = cis2_v4_add(a0, cis2_v4_mul(pj, wasm_v128_load(vr)));
            a1 = cis2_v4_add(a1, cis2_v4_mul(pj, wasm_v128_load(vr + 4)));
            a2 = cis2_v4_add(a2, cis2_v4_mul(pj, wasm_v128_load(vr + 8)));
            a3 = cis2_v4_add(a3, cis2_v4_mul(pj, wasm_v128_load(vr + 12)));
        }
        wasm_v128_store(out + d0, a0);
        wasm_v128_store(out + d0 + 4, a1);
        wasm_v128_store(out + d0 + 8, a2);
        wasm_v128_store(out + d0 + 12, a3);
    }
    for (; d0 < hd; d0++) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++)
            acc = cis2_fadd(acc, cis2_fmul(p[j], v[(size_t)j * stride + d0]));
        out[d0] = acc;
    }
}

const fast_kernels fast_kernels_wasm128 = {
    .name = "wasm128",
    .mm_bf16 = wasm_mm_bf16,
    .mm_f32 = wasm_mm_f32,
    .scores = wasm_scores,
    .softmax = ref_softmax,
    .vmix = wasm_vmix,
    .rmsnorm_rows = fast_rmsnorm_rows,
    /* .mm_i8: no int8 wasm kernel yet (the engine uses the scalar one) */
};
#endif
