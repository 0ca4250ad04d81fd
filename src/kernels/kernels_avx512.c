/* AVX-512F kernels (x86-64): the matmul with one 16-row tile per zmm.
 * target("avx512f") only, separate vmulps/vaddps (never FMA, §1.4).
 * Attention reuses the AVX2 kernels (every AVX-512F CPU has AVX2). */
#include "kernels/fast_kernels.h"
#include "kernels/kernels.h"
#include "kernels/kernels_x86.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define ATTR           __attribute__((target("avx512f")))
#define V              __m512
#define VL             16
#define NV             1
#define V_ZERO()       _mm512_setzero_ps()
#define V_ADD(a, b)    _mm512_add_ps(a, b)
#define V_MUL(a, b)    _mm512_mul_ps(a, b)
#define V_SET1(x)      _mm512_set1_ps(x)
#define V_LOADU(p)     _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps(p, v)
#define V_BF16(p)                                                                                  \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                         \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16))
#define V_BF16_W(p)  _mm512_loadu_si512((const void *)(p))
#define V_BF16_LO(p) _mm512_castsi512_ps(_mm512_slli_epi32(V_BF16_W(p), 16))
#define V_BF16_HI(p) _mm512_castsi512_ps(_mm512_and_si512(V_BF16_W(p), _mm512_set1_epi32(-65536)))
#define V_I8(p)                                                                                    \
    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#define NT1      8
#define NTB      2
#define TBB      12
#define NTS      3
#define TBS      8
#define PFX      avx512_
#define TM_ACC_Y /* avx512_mm_f32y: the panel's long rows, a column range at a time */
#include "kernels/kernels_tmpl.h"

/* V-mix, 16 lanes: lanes over output dims; lane d adds p[j]*v[j][d] for
 * keys j in order (one mul, one add each) — fast_avx2_vmix's operations,
 * half the instructions. */
static inline __attribute__((always_inline)) __mmask16 tail_mask16(int left) /* lanes < left */
{
    return (__mmask16)(left >= 16 ? 0xFFFF : (1u << left) - 1u);
}

ATTR static void avx512_vmix(const float *p, const float *v, size_t stride, int n, int hd,
                             float *out)
{
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
               a3 = _mm512_setzero_ps();
        const float *vr = v + d0;
        for (int j = 0; j < n; j++, vr += stride) {
            __m512 pj = _mm512_set1_ps(p[j]);
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(pj, _mm512_loadu_ps(vr)));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(pj, _mm512_loadu_ps(vr + 16)));
            a2 = _mm512_add_ps(a2, _mm512_mul_ps(pj, _mm512_loadu_ps(vr + 32)));
            a3 = _mm512_add_ps(a3, _mm512_mul_ps(pj, _mm512_loadu_ps(vr + 48)));
        }
        _mm512_storeu_ps(out + d0, a0);
        _mm512_storeu_ps(out + d0 + 16, a1);
        _mm512_storeu_ps(out + d0 + 32, a2);
        _mm512_storeu_ps(out + d0 + 48, a3);
    }
    for (; d0 + 16 <= hd; d0 += 16) {
        __m512 a = _mm512_setzero_ps();
        for (int j = 0; j < n; j++)
            a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(p[j]),
                                               _mm512_loadu_ps(v + (size_t)j * stride + d0)));
        _mm512_storeu_ps(out + d0, a);
    }
    if (d0 < hd)
        fast_avx2_vmix(p, v + d0, stride, n, hd - d0,
                       out + d0); /* per-dim lanes: any split is exact */
}

/* Group V-mix: up to 4 heads x 4 dim vectors (16 dims each) per pass; lane
 * d of head h's accumulator adds p[h][j]*v[j][d] for keys j in order (one
 * mul, one add each) — avx512_vmix's operations per head, V read once. */
#define VG_PF 64
#define VG_BLOCK(NH, ND)                                                                           \
    do {                                                                                           \
        __m512 a[NH][ND];                                                                          \
        _Pragma("GCC unroll 4") for (int h = 0; h < NH; h++)                                       \
            _Pragma("GCC unroll 4") for (int e = 0; e < ND; e++) a[h][e] = _mm512_setzero_ps();    \
        const float *vr = v + d0;                                                                  \
        /* the first VG_PF keys' rows requested at once (a short context is \
         * all of them); later rows VG_PF keys ahead */                      \
        for (int j = 0; j < n && j < VG_PF; j++)                                                   \
            for (int o = 0; o < ND * 64; o += 64)                                                  \
                _mm_prefetch((const char *)(vr + (size_t)j * stride) + o, _MM_HINT_T0);            \
        for (int j = 0; j < n; j++, vr += stride) {                                                \
            if (j + VG_PF < n) /* strided rows: prefetch VG_PF keys ahead */                       \
                for (int o = 0; o < ND * 64; o += 64)                                              \
                    _mm_prefetch((const char *)(vr + VG_PF * stride) + o, _MM_HINT_T0);            \
            __m512 x[ND];                                                                          \
            _Pragma("GCC unroll 4") for (int e = 0; e < ND; e++) x[e] =                            \
                _mm512_loadu_ps(vr + 16 * e);                                                      \
            _Pragma("GCC unroll 4") for (int h = 0; h < NH; h++)                                   \
            {                                                                                      \
                __m512 pj = _mm512_set1_ps(p[(size_t)(h0 + h) * ldp + j]);                         \
                _Pragma("GCC unroll 4") for (int e = 0; e < ND; e++) a[h][e] =                     \
                    _mm512_add_ps(a[h][e], _mm512_mul_ps(pj, x[e]));                               \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 4") for (int h = 0; h < NH; h++)                                       \
            _Pragma("GCC unroll 4") for (int e = 0; e < ND; e++)                                   \
                _mm512_storeu_ps(out + (size_t)(h0 + h) * ldo + d0 + 16 * e, a[h][e]);             \
    } while (0)

ATTR static void avx512_vmix_g(const float *p, size_t ldp, int g, const float *v, size_t stride,
                               int n, int hd, float *out, size_t ldo)
{
    for (int h0 = 0; h0 < g; h0 += 4) {
        int nh = g - h0 >= 4 ? 4 : g - h0;
        int d0 = 0;
        for (; d0 + 64 <= hd; d0 += 64) {
            switch (nh) {
            case 1: VG_BLOCK(1, 4); break;
            case 2: VG_BLOCK(2, 4); break;
            case 3: VG_BLOCK(3, 4); break;
            default: VG_BLOCK(4, 4); break;
            }
        }
        for (; d0 + 32 <= hd; d0 += 32) {
            switch (nh) {
            case 1: VG_BLOCK(1, 2); break;
            case 2: VG_BLOCK(2, 2); break;
            case 3: VG_BLOCK(3, 2); break;
            default: VG_BLOCK(4, 2); break;
            }
        }
        for (; d0 + 16 <= hd; d0 += 16) {
            switch (nh) {
            case 1: VG_BLOCK(1, 1); break;
            case 2: VG_BLOCK(2, 1); break;
            case 3: VG_BLOCK(3, 1); break;
            default: VG_BLOCK(4, 1); break;
            }
        }
        if (d0 < hd) /* per-dim lanes: any split is exact */
            for (int h = h0; h < h0 + nh; h++)
                fast_avx2_vmix(p + (size_t)h * ldp, v + d0, stride, n, hd - d0,
                               out + (size_t)h * ldo + d0);
    }
}
#undef VG_BLOCK

/* Row-slice V-mix: NE consecutive 16-dim vectors of the cache row (they may
 * span KV heads) x the G heads sharing each, NE*G accumulators; per key one
 * load per vector and a broadcast of each head's p. Lane d of a head's
 * accumulator adds p[h][j]*v[j][d] for keys j in order (one mul, one add
 * each): avx512_vmix's operations per head, each cache row slice read once
 * and contiguously. */
#define VR_BLOCK(NE, G)                                                                            \
    do {                                                                                           \
        __m512 a[NE][G];                                                                           \
        const float *pe[NE];                                                                       \
        float *oe[NE];                                                                             \
        _Pragma("GCC unroll 8") for (int e = 0; e < NE; e++)                                       \
        {                                                                                          \
            int kvh = 16 * (e0 + e) / hd, d = 16 * (e0 + e) - kvh * hd;                            \
            pe[e] = p + (size_t)kvh * G * ldp;                                                     \
            oe[e] = out + (size_t)kvh * G * ldo + d;                                               \
            _Pragma("GCC unroll 8") for (int i = 0; i < G; i++) a[e][i] = _mm512_setzero_ps();     \
        }                                                                                          \
        const float *vr = v + 16 * e0;                                                             \
        for (int j = 0; j < n; j++, vr += stride) {                                                \
            if (j + VG_PF < n) /* strided rows: prefetch VG_PF keys ahead */                       \
                for (int o = 0; o < NE * 64; o += 64)                                              \
                    _mm_prefetch((const char *)(vr + VG_PF * stride) + o, _MM_HINT_T0);            \
            _Pragma("GCC unroll 8") for (int e = 0; e < NE; e++)                                   \
            {                                                                                      \
                __m512 x = _mm512_loadu_ps(vr + 16 * e);                                           \
                _Pragma("GCC unroll 8") for (int i = 0; i < G; i++) a[e][i] = _mm512_add_ps(       \
                    a[e][i], _mm512_mul_ps(_mm512_set1_ps(pe[e][(size_t)i * ldp + j]), x));        \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (int e = 0; e < NE; e++)                                       \
            _Pragma("GCC unroll 8") for (int i = 0; i < G; i++)                                    \
                _mm512_storeu_ps(oe[e] + (size_t)i * ldo, a[e][i]);                                \
    } while (0)

#define VR_G(G, M3)                                                                                \
    case G:                                                                                        \
        switch (m) {                                                                               \
        case 1: VR_BLOCK(1, G); break;                                                             \
        case 2: VR_BLOCK(2, G); break;                                                             \
        case 3: VR_BLOCK(3, G); break;                                                             \
        case 4: VR_BLOCK(4 - M3, G); break;                                                        \
        case 5: VR_BLOCK(5 - 2 * M3, G); break;                                                    \
        default: VR_BLOCK(6 - 3 * M3, G); break;                                                   \
        }                                                                                          \
        break;

/* g <= 8: at most 24 accumulators a pass, passes of about equal width. */
ATTR static void avx512_vmix_rows(const float *p, size_t ldp, int g, const float *v, size_t stride,
                                  int n, int hd, int e_first, int ne, float *out, size_t ldo)
{
    int most = g <= 4 ? 6 : 3, passes = (ne + most - 1) / most;
    for (int q = 0; q < passes; q++) {
        int e0 = e_first + ne * q / passes, m = e_first + ne * (q + 1) / passes - e0;
        switch (g) {
            VR_G(1, 0)
            VR_G(2, 0) VR_G(3, 0) VR_G(4, 0) VR_G(5, 1) VR_G(6, 1) VR_G(7, 1) default : VR_G(8, 1)
        }
    }
}
#undef VR_G
#undef VR_BLOCK

/* §6.2 exp_pinned, 16 lanes: every lane performs the scalar routine's own
 * IEEE operations in its order (bit-pattern DAZ, truncate-then-fix floor,
 * the same polynomial, the integer ldexp_exact), the special cases chosen by
 * masks; fast_avx2's exp8 operation for operation, twice the lanes. */
static ATTR inline __attribute__((always_inline)) __m512 exp16(__m512 x)
{
    const __m512i expmask = _mm512_set1_epi32(0x7F800000), mantmask = _mm512_set1_epi32(0x007FFFFF);
    const __m512i signmask = _mm512_set1_epi32((int)0x80000000u);
    __m512i xb = _mm512_castps_si512(x);
    /* daz by bit pattern: exponent 0 and mantissa != 0 -> signed zero */
    __mmask16 sub = _mm512_testn_epi32_mask(xb, expmask) & _mm512_test_epi32_mask(xb, mantmask);
    xb = _mm512_mask_mov_epi32(xb, sub, _mm512_and_si512(xb, signmask));
    x = _mm512_castsi512_ps(xb);
    __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __mmask16 big = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.0f), _CMP_GT_OQ);
    __mmask16 small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-88.0f), _CMP_LT_OQ);
    __m512 t = _mm512_mul_ps(x, _mm512_castsi512_ps(_mm512_set1_epi32(0x3FB8AA3B)));
    __m512 z0 = _mm512_add_ps(t, _mm512_set1_ps(0.5f));
    /* floor_small: truncate, then minus one where that overshoots */
    __m512 fi = _mm512_cvtepi32_ps(_mm512_cvttps_epi32(z0));
    __mmask16 over = _mm512_cmp_ps_mask(fi, z0, _CMP_GT_OQ);
    __m512 kf = _mm512_mask_sub_ps(fi, over, fi, _mm512_set1_ps(1.0f));
    __m512 kc1 = _mm512_mul_ps(kf, _mm512_castsi512_ps(_mm512_set1_epi32(0x3F318000)));
    __m512 r0 = _mm512_sub_ps(x, kc1);
    __m512 kc2 = _mm512_mul_ps(kf, _mm512_castsi512_ps(_mm512_set1_epi32((int)0xB95E8083u)));
    __m512 r = _mm512_sub_ps(r0, kc2);
    __m512 r2 = _mm512_mul_ps(r, r);
    static const uint32_t P[6] = { 0x39506967u, 0x3AB743CEu, 0x3C088908u,
                                   0x3D2AA9C1u, 0x3E2AAAAAu, 0x3F000000u };
    __m512 poly = _mm512_castsi512_ps(_mm512_set1_epi32((int)P[0]));
    for (int i = 1; i <= 5; i++) {
        __m512 pr = _mm512_mul_ps(poly, r);
        poly = _mm512_add_ps(pr, _mm512_castsi512_ps(_mm512_set1_epi32((int)P[i])));
    }
    __m512 m1 = _mm512_mul_ps(poly, r2);
    __m512 poly2 = _mm512_add_ps(m1, r);
    __m512 res = _mm512_add_ps(poly2, _mm512_set1_ps(1.0f));
    /* ldexp_exact(res, (int)k) */
    __m512i rb = _mm512_castps_si512(res);
    __m512i ki = _mm512_cvttps_epi32(kf);
    __m512i ex =
        _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(rb, 23), _mm512_set1_epi32(0xFF)), ki);
    __m512i y = _mm512_or_si512(_mm512_andnot_si512(expmask, rb), _mm512_slli_epi32(ex, 23));
    __mmask16 under = _mm512_cmplt_epi32_mask(ex, _mm512_set1_epi32(1));    /* ex <= 0 -> +0 */
    __mmask16 overf = _mm512_cmpgt_epi32_mask(ex, _mm512_set1_epi32(0xFE)); /* -> +-inf */
    y = _mm512_mask_mov_epi32(y, under, _mm512_setzero_si512());
    y = _mm512_mask_mov_epi32(y, overf, _mm512_or_si512(_mm512_and_si512(rb, signmask), expmask));
    y = _mm512_mask_mov_epi32(y, _mm512_testn_epi32_mask(rb, _mm512_set1_epi32(0x7FFFFFFF)), rb);
    y = _mm512_mask_mov_epi32(y, small, _mm512_setzero_si512());
    y = _mm512_mask_mov_epi32(y, big, expmask);
    y = _mm512_mask_mov_epi32(y, isnan, xb);
    return _mm512_castsi512_ps(y);
}

ATTR void fast_avx512_exp_pinned_n(float *x, int n)
{
    for (int j = 0; j < n; j += 16) {
        __mmask16 m = tail_mask16(n - j);
        _mm512_mask_storeu_ps(x + j, m, exp16(_mm512_maskz_loadu_ps(m, x + j)));
    }
}

/* ref_softmax's max and exps of one row, in place: max (order independent),
 * then exp of s - max per lane. Returns 1, writing nothing, when the row is
 * short or holds a NaN (the caller runs ref_softmax on it). */
ATTR static int avx512_sm_max_exp(float *s, int n)
{
    if (n < 32) return 1;
    __m512 mx = _mm512_loadu_ps(s);
    __mmask16 nan = _mm512_cmp_ps_mask(mx, mx, _CMP_UNORD_Q);
    int j = 16;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_loadu_ps(s + j);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        mx = _mm512_max_ps(mx, v);
    }
    if (nan) return 1;
    float lanes[16];
    _mm512_storeu_ps(lanes, mx);
    float max_v = lanes[0];
    for (int i = 1; i < 16; i++)
        if (lanes[i] > max_v) max_v = lanes[i];
    for (; j < n; j++) {
        if (s[j] != s[j]) return 1;
        if (s[j] > max_v) max_v = s[j];
    }
    /* The max's value is order independent; only the sign of a zero max can
     * differ, and s - (+0) == s - (-0) except for s = +-0, where exp gives 1
     * either way. */
    __m512 vm = _mm512_set1_ps(max_v);
    for (j = 0; j < n; j += 16) {
        __mmask16 m = tail_mask16(n - j);
        __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), vm);
        _mm512_mask_storeu_ps(s + j, m, exp16(d));
    }
    return 0;
}

/* §5.3's last step: every entry divided by the row's sum. */
ATTR static void avx512_sm_div(float *s, int n, float acc)
{
    __m512 vd = _mm512_set1_ps(acc);
    for (int j = 0; j < n; j += 16) {
        __mmask16 m = tail_mask16(n - j);
        _mm512_mask_storeu_ps(s + j, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, s + j), vd));
    }
}

/* Each row ref_softmax bit for bit (fast_softmax_rows_by: every row's sum one
 * in-order chain), exps and divides 16 lanes wide. */
ATTR static void avx512_softmax_rows(float *s, size_t lds, int m, int n0, int step)
{
    fast_softmax_rows_by(s, lds, m, n0, step, avx512_sm_max_exp, avx512_sm_div);
}

ATTR static void avx512_softmax(float *s, int n) { avx512_softmax_rows(s, 0, 1, n, 0); }

/* ref_swiglu bit for bit, 16 lanes (fast_avx2_swiglu's operations: sign
 * flip, exp16, add, IEEE divide, multiply); a block with a NaN input and
 * the tail go to the AVX2 routine, which hands NaN blocks to ref_swiglu. */
ATTR static void avx512_swiglu(const float *g, const float *u, float *out, int n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i signmask = _mm512_set1_epi32((int)0x80000000u);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(g + i), up = _mm512_loadu_ps(u + i);
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(up, up, _CMP_UNORD_Q)) {
            fast_avx2_swiglu(g + i, u + i, out + i, 16);
            continue;
        }
        __m512 nx = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), signmask));
        __m512 den = _mm512_add_ps(one, exp16(nx));
        __m512 sl = _mm512_div_ps(x, den);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(sl, up));
    }
    if (i < n) fast_avx2_swiglu(g + i, u + i, out + i, n - i);
}

/* ref_rmsnorm's last loop, 16 lanes: out[i] = (x[i]*inv)*w[i], two
 * multiplies per element in that order (§8). */
ATTR static void avx512_rms_scale(const float *x, float inv, const float *w, float *out, int n)
{
    __m512 vi = _mm512_set1_ps(inv);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask16(n - i);
        __m512 xi = _mm512_maskz_loadu_ps(m, x + i), wi = _mm512_maskz_loadu_ps(m, w + i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(xi, vi), wi));
    }
}

ATTR static void avx512_rmsnorm_rows(const float *x, size_t ldx, const float *w, int n, float eps,
                                     float *out, size_t ldo, int m)
{
    fast_rmsnorm_rows_by(x, ldx, w, n, eps, out, ldo, m, avx512_rms_scale);
}

/* ref_rope_rotate on nh heads, 16 pairs (i, i + half) a vector: each
 * output the same two products and one add (§7.4; -x2 a sign flip, as the
 * scalar negation). A head whose inputs hold a NaN goes to ref_rope_rotate
 * (an add of two NaNs keeps the compiler's choice of payload there); with
 * none, a NaN arises only as the default NaN, the same on either path. */
ATTR static void avx512_rope(float *x, int nh, int hd, const float *cos_v, const float *sin_v)
{
    int half = hd / 2;
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    __mmask16 tnan = 0; /* the tables are the same for every head */
    for (int i = 0; i + 16 <= half; i += 16)
        tnan |= _mm512_cmp_ps_mask(_mm512_loadu_ps(cos_v + i), _mm512_loadu_ps(sin_v + i),
                                   _CMP_UNORD_Q);
    for (int h = 0; h < nh; h++) {
        float *head = x + (size_t)h * hd;
        __mmask16 nan = tnan;
        for (int i = 0; i + 16 <= half; i += 16)
            nan |= _mm512_cmp_ps_mask(_mm512_loadu_ps(head + i), _mm512_loadu_ps(head + half + i),
                                      _CMP_UNORD_Q);
        if (half % 16 || nan) {
            ref_rope_rotate(head, hd, cos_v, sin_v);
            continue;
        }
        for (int i = 0; i < half; i += 16) {
            __m512 x1 = _mm512_loadu_ps(head + i), x2 = _mm512_loadu_ps(head + half + i);
            __m512 c = _mm512_loadu_ps(cos_v + i), s = _mm512_loadu_ps(sin_v + i);
            __m512 nx2 = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x2), sign));
            __m512 t1 = _mm512_mul_ps(x1, c), t2 = _mm512_mul_ps(nx2, s);
            __m512 t3 = _mm512_mul_ps(x2, c), t4 = _mm512_mul_ps(x1, s);
            _mm512_storeu_ps(head + i, _mm512_add_ps(t1, t2));
            _mm512_storeu_ps(head + half + i, _mm512_add_ps(t3, t4));
        }
    }
}

/* Many tokens (prefill): each pair of bf16 tiles is widened once into an f32
 * panel (exact, §4.1, column pairs back to plain lines) that stays in L2 while every token block
 * reads it, so the inner loop spends no vector operations on widening; the
 * f32 driver then runs the same blocks, each output the same in-order sum
 * (§5.1). The panel lives on the stack: 2 tiles of PANEL_K columns (192 KiB).
 * A longer row is done PANEL_K columns at a time: the first range's sums are
 * stored in Y and each later range goes on from them (mm_f32y), so every
 * output is still one accumulator over k = 0..K-1 in order. PANEL_K is even:
 * a range never splits a column pair. */
#define PANEL_K      1536
#define PANEL_FLOATS (2 * 16 * PANEL_K)
_Static_assert(PANEL_K % 2 == 0 && NTB <= 2, "the panel holds NTB tiles of whole column pairs");

/* The f32 driver over the panel's columns [c0, c0 + kc) of a strip: the first
 * range starts each sum, a later one goes on from the sums in Y. */
ATTR static void panel_range(const float *panel, int c0, int kc, int nt, int nr, const float *X,
                             int ldx, int T, float *Y, int ldy)
{
    if (c0 == 0) avx512_mm_f32(panel, kc, nt, nr, X, ldx, T, Y, ldy);
    else avx512_mm_f32y(panel, kc, nt, nr, X + c0, ldx, T, Y, ldy);
}
ATTR static void avx512_mm_bf16_panel(const uint16_t *W, int K, int ntiles, int nrows,
                                      const float *X, int ldx, int T, float *Y, int ldy)
{
    if (T <= 2 * TBS) {
        avx512_mm_bf16(W, K, ntiles, nrows, X, ldx, T, Y, ldy);
        return;
    }
    float panel[PANEL_FLOATS] __attribute__((aligned(64)));
    size_t ts = (size_t)K * 16;
    for (int i0 = 0; i0 < ntiles; i0 += NTB) {
        int nt = ntiles - i0 < NTB ? ntiles - i0 : NTB;
        for (int c0 = 0; c0 < K; c0 += PANEL_K) {
            int kc = K - c0 < PANEL_K ? K - c0 : PANEL_K;
            size_t ps = (size_t)kc * 16;
            for (int i = 0; i < nt; i++) { /* column pairs, then an odd last column */
                const uint16_t *src = W + (size_t)(i0 + i) * ts + (size_t)c0 * 16;
                float *dst = panel + (size_t)i * ps;
                int k = 0;
                for (; k + 1 < kc; k += 2) {
                    _mm512_store_ps(dst + (size_t)k * 16, V_BF16_LO(src + (size_t)k * 16));
                    _mm512_store_ps(dst + (size_t)k * 16 + 16, V_BF16_HI(src + (size_t)k * 16));
                }
                if (k < kc) _mm512_store_ps(dst + (size_t)k * 16, V_BF16(src + (size_t)k * 16));
            }
            panel_range(panel, c0, kc, nt, nrows - i0 * 16, X, ldx, T, Y + (size_t)i0 * 16, ldy);
        }
    }
}

/* Many tokens, int8 (docs/quantization.md §2): each pair of int8 tiles is
 * widened once into the same f32 panel ((float)q is exact, any int8), a
 * PANEL_K range of columns at a time as for bf16, the f32 driver runs every
 * token block over it, and once the last range is added each stored sum is
 * multiplied by its row's scale in a second pass over the strip's outputs.
 * The sum is avx512_mm_i8's: k = 0..K-1 in order, one mul, one add (§5.1).
 * The scale is its one multiply after the last term, s*acc as TM_STORE's
 * V_SMUL (the same operand order): a store and a load move the sum's bits
 * unchanged, and a sum out of an add under FTZ is never subnormal (§1.3),
 * so DAZ on the reload reads what the register held. Only the strip's nrows
 * rows are written, so only those are scaled. Few tokens: avx512_mm_i8,
 * widening in the block. */
ATTR static void avx512_mm_i8_panel(const int8_t *W, const float *S, int K, int ntiles, int nrows,
                                    const float *X, int ldx, int T, float *Y, int ldy)
{
    if (T <= 2 * TBS) {
        avx512_mm_i8(W, S, K, ntiles, nrows, X, ldx, T, Y, ldy);
        return;
    }
    float panel[PANEL_FLOATS] __attribute__((aligned(64)));
    size_t ts = (size_t)K * 16;
    for (int i0 = 0; i0 < ntiles; i0 += NTB) {
        int nt = ntiles - i0 < NTB ? ntiles - i0 : NTB;
        int nr = nrows - i0 * 16;
        for (int c0 = 0; c0 < K; c0 += PANEL_K) {
            int kc = K - c0 < PANEL_K ? K - c0 : PANEL_K;
            size_t ps = (size_t)kc * 16;
            for (int i = 0; i < nt; i++) { /* (float)q, 16 rows a line */
                const int8_t *src = W + (size_t)(i0 + i) * ts + (size_t)c0 * 16;
                float *dst = panel + (size_t)i * ps;
                for (int k = 0; k < kc; k++)
                    _mm512_store_ps(dst + (size_t)k * 16, V_I8(src + (size_t)k * 16));
            }
            panel_range(panel, c0, kc, nt, nr, X, ldx, T, Y + (size_t)i0 * 16, ldy);
        }
        for (int i = 0; i < nt && 16 * i < nr; i++) { /* y = s[r] * acc, written rows only */
            __mmask16 m = tail_mask16(nr - 16 * i);
            __m512 s = _mm512_maskz_loadu_ps(m, S + (size_t)(i0 + i) * 16);
            for (int t = 0; t < T; t++) {
                float *y = Y + (size_t)t * ldy + (size_t)(i0 + i) * 16;
                _mm512_mask_storeu_ps(y, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y), s));
            }
        }
    }
}
#undef PANEL_FLOATS
#undef PANEL_K

const fast_kernels fast_kernels_avx512 = {
    .name = "avx512",
    .mm_bf16 = avx512_mm_bf16_panel,
    .mm_f32 = avx512_mm_f32,
    .scores = fast_avx2_scores,
    .softmax = avx512_softmax,
    .vmix = avx512_vmix,
    .swiglu = avx512_swiglu,
    .scores_t = fast_avx2_scores_t,
    .vmix_g = avx512_vmix_g,
    .mm_i8 = avx512_mm_i8_panel,
    .kt_pack = fast_avx2_kt_pack,
    .scores_tq = fast_avx512_scores_tq,
    .vmix_tq = fast_avx512_vmix_tq,
    .vmix_rows = avx512_vmix_rows,
    .softmax_rows = avx512_softmax_rows,
    .add = fast_avx2_add,
    .scan = fast_avx2_scan,
    .rmsnorm_rows = avx512_rmsnorm_rows,
    .rope = avx512_rope,
};

int fast_avx512_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2");
}
#endif
