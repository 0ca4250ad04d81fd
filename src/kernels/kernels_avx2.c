/* AVX2 kernels (x86-64). target("avx2") only — never "fma": every multiply
 * and add is its own instruction (§1.4), one accumulator per output. */
#include "kernels/fast_kernels.h"
#include "kernels/kernels.h"
#include "kernels/kernels_x86.h"
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define ATTR           __attribute__((target("avx2")))
#define V              __m256
#define VL             8
#define NV             2
#define V_ZERO()       _mm256_setzero_ps()
#define V_ADD(a, b)    _mm256_add_ps(a, b)
#define V_MUL(a, b)    _mm256_mul_ps(a, b)
#define V_SET1(x)      _mm256_set1_ps(x)
#define V_LOADU(p)     _mm256_loadu_ps(p)
#define V_STOREU(p, v) _mm256_storeu_ps(p, v)
#define V_BF16(p)                                                                                  \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                                         \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))), 16))
#define V_BF16_W(p)  _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define V_BF16_LO(p) _mm256_castsi256_ps(_mm256_slli_epi32(V_BF16_W(p), 16))
#define V_BF16_HI(p) _mm256_castsi256_ps(_mm256_and_si256(V_BF16_W(p), _mm256_set1_epi32(-65536)))
#define V_I8(p)                                                                                    \
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))
#define NT1 4
#define NTB 1
#define TBB 6
#define PFX avx2_
#include "kernels/kernels_tmpl.h"

/* 8x8 transpose: r[i] holds row i (8 floats); afterwards r[d] holds column d. */
static ATTR inline __attribute__((always_inline)) void tr8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* kt[d*ld + j] = k[j*stride + d] for keys j < n, dims d < hd: a pure copy
 * (8x8 blocks through registers), so the scores can run lanes over keys.
 * The rows KT_PF keys ahead are prefetched even past n (a prefetch never
 * faults): decode calls this on short blocks of a long cache. */
#define KT_PF 64
ATTR void fast_avx2_kt_pack(const float *k, size_t stride, int n, int hd, float *kt, size_t ld)
{
    int j = 0, hd8 = hd & ~7;
    for (; j + 8 <= n; j += 8) {
        const float *k0 = k + (size_t)j * stride;
        for (int i = 0; i < 8; i++) { /* strided rows: fetch KT_PF keys ahead */
            const char *r = (const char *)((uintptr_t)(k0 + i * stride) + KT_PF * stride * 4);
            for (int o = 0; o < hd * 4; o += 64) _mm_prefetch(r + o, _MM_HINT_T0);
        }
        int d = 0;
        for (; d < hd8; d += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(k0 + i * stride + d);
            tr8(r);
            for (int e = 0; e < 8; e++) _mm256_storeu_ps(kt + (size_t)(d + e) * ld + j, r[e]);
        }
        for (; d < hd; d++)
            for (int i = 0; i < 8; i++) kt[(size_t)d * ld + j + i] = k0[i * stride + d];
    }
    for (; j < n; j++)
        for (int d = 0; d < hd; d++) kt[(size_t)d * ld + j] = k[(size_t)j * stride + d];
}

/* Scores: lanes over keys. Lane i of a vector owns key j+i and adds its
 * q[d]*k[d] terms d = 0..hd-1 in order; 16 keys (two chains) per step. */
#define SC_PF 128
ATTR void fast_avx2_scores(const float *q, const float *k, size_t stride, int n, int hd,
                           float scale, float *out)
{
    int j = 0;
    int hd8 = hd & ~7;
    __m256 vs = _mm256_set1_ps(scale);
    for (; j + 16 <= n; j += 16) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        const float *k0 = k + (size_t)j * stride, *k1 = k0 + 8 * stride;
        if (j + 16 + SC_PF <=
            n) /* strided rows outrun the hardware prefetcher: fetch SC_PF keys ahead */
            for (int i = 0; i < 16; i++) {
                const char *r = (const char *)(k0 + (size_t)(SC_PF + i) * stride);
                for (int o = 0; o < hd * 4; o += 64) _mm_prefetch(r + o, _MM_HINT_T0);
            }
        int d = 0;
        for (; d < hd8; d += 8) {
            __m256 r[8], s[8];
            for (int i = 0; i < 8; i++) {
                r[i] = _mm256_loadu_ps(k0 + i * stride + d);
                s[i] = _mm256_loadu_ps(k1 + i * stride + d);
            }
            tr8(r);
            tr8(s);
            for (int e = 0; e < 8; e++) {
                __m256 qv = _mm256_set1_ps(q[d + e]);
                a0 = _mm256_add_ps(a0, _mm256_mul_ps(r[e], qv));
                a1 = _mm256_add_ps(a1, _mm256_mul_ps(s[e], qv));
            }
        }
        for (; d < hd; d++) {
            __m256 qv = _mm256_set1_ps(q[d]);
            __m256 c0 = _mm256_set_ps(k0[7 * stride + d], k0[6 * stride + d], k0[5 * stride + d],
                                      k0[4 * stride + d], k0[3 * stride + d], k0[2 * stride + d],
                                      k0[1 * stride + d], k0[d]);
            __m256 c1 = _mm256_set_ps(k1[7 * stride + d], k1[6 * stride + d], k1[5 * stride + d],
                                      k1[4 * stride + d], k1[3 * stride + d], k1[2 * stride + d],
                                      k1[1 * stride + d], k1[d]);
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(c0, qv));
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(c1, qv));
        }
        _mm256_storeu_ps(out + j, _mm256_mul_ps(a0, vs)); /* §9.2: scale after the dot */
        _mm256_storeu_ps(out + j + 8, _mm256_mul_ps(a1, vs));
    }
    for (; j < n; j++) {
        float dd = cis2_dot_seq(q, k + (size_t)j * stride, (size_t)hd);
        out[j] = dd * scale;
    }
}

/* Scores over a transposed key block (prefill): kt[d*ld + j] = element d of
 * key j, for j < round_up(n, 8) (pad keys are computed and dropped). Lane i
 * owns key j+i and adds k[d]*q[d] for d = 0..hd-1 in order — the very
 * operations of fast_avx2_scores, without its in-register transposes; four
 * 8-key chains in flight. */
ATTR void fast_avx2_scores_t(const float *q, const float *kt, size_t ld, int n, int hd, float scale,
                             float *out)
{
    __m256 vs = _mm256_set1_ps(scale);
    int j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
               a3 = _mm256_setzero_ps();
        const float *c = kt + j;
        for (int d = 0; d < hd; d++, c += ld) {
            __m256 qv = _mm256_set1_ps(q[d]);
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_loadu_ps(c), qv));
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_loadu_ps(c + 8), qv));
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(_mm256_loadu_ps(c + 16), qv));
            a3 = _mm256_add_ps(a3, _mm256_mul_ps(_mm256_loadu_ps(c + 24), qv));
        }
        _mm256_storeu_ps(out + j, _mm256_mul_ps(a0, vs)); /* §9.2: scale after the dot */
        _mm256_storeu_ps(out + j + 8, _mm256_mul_ps(a1, vs));
        _mm256_storeu_ps(out + j + 16, _mm256_mul_ps(a2, vs));
        _mm256_storeu_ps(out + j + 24, _mm256_mul_ps(a3, vs));
    }
    for (; j < n; j += 8) {
        __m256 a0 = _mm256_setzero_ps();
        const float *c = kt + j;
        for (int d = 0; d < hd; d++, c += ld)
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_loadu_ps(c), _mm256_set1_ps(q[d])));
        a0 = _mm256_mul_ps(a0, vs);
        if (j + 8 <= n) _mm256_storeu_ps(out + j, a0);
        else {
            float tmp[8];
            _mm256_storeu_ps(tmp, a0);
            memcpy(out + j, tmp, (size_t)(n - j) * sizeof(float));
        }
    }
}

/* §6.2 exp_pinned, 8 lanes, every step the scalar routine's own operation. */
static ATTR inline __attribute__((always_inline)) __m256 exp8(__m256 x)
{
    const __m256i expmask = _mm256_set1_epi32(0x7F800000), mantmask = _mm256_set1_epi32(0x007FFFFF);
    const __m256i signmask = _mm256_set1_epi32((int)0x80000000u);
    __m256i xb = _mm256_castps_si256(x);
    /* daz by bit pattern: exponent 0 and mantissa != 0 -> signed zero */
    __m256i e0 = _mm256_cmpeq_epi32(_mm256_and_si256(xb, expmask), _mm256_setzero_si256());
    __m256i mnz =
        _mm256_xor_si256(_mm256_cmpeq_epi32(_mm256_and_si256(xb, mantmask), _mm256_setzero_si256()),
                         _mm256_set1_epi32(-1));
    __m256i sub = _mm256_and_si256(e0, mnz);
    xb = _mm256_blendv_epi8(xb, _mm256_and_si256(xb, signmask), sub);
    x = _mm256_castsi256_ps(xb);
    __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 big = _mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_GT_OQ);
    __m256 small = _mm256_cmp_ps(x, _mm256_set1_ps(-88.0f), _CMP_LT_OQ);
    __m256 t = _mm256_mul_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x3FB8AA3B)));
    __m256 z0 = _mm256_add_ps(t, _mm256_set1_ps(0.5f));
    /* floor_small: truncate, then minus one where that overshoots */
    __m256i zi = _mm256_cvttps_epi32(z0);
    __m256 fi = _mm256_cvtepi32_ps(zi);
    __m256 over = _mm256_cmp_ps(fi, z0, _CMP_GT_OQ);
    __m256 fim1 = _mm256_sub_ps(fi, _mm256_set1_ps(1.0f));
    __m256 kf = _mm256_blendv_ps(fi, fim1, over);
    __m256 kc1 = _mm256_mul_ps(kf, _mm256_castsi256_ps(_mm256_set1_epi32(0x3F318000)));
    __m256 r0 = _mm256_sub_ps(x, kc1);
    __m256 kc2 = _mm256_mul_ps(kf, _mm256_castsi256_ps(_mm256_set1_epi32((int)0xB95E8083u)));
    __m256 r = _mm256_sub_ps(r0, kc2);
    __m256 r2 = _mm256_mul_ps(r, r);
    static const uint32_t P[6] = { 0x39506967u, 0x3AB743CEu, 0x3C088908u,
                                   0x3D2AA9C1u, 0x3E2AAAAAu, 0x3F000000u };
    __m256 poly = _mm256_castsi256_ps(_mm256_set1_epi32((int)P[0]));
    for (int i = 1; i <= 5; i++) {
        __m256 pr = _mm256_mul_ps(poly, r);
        poly = _mm256_add_ps(pr, _mm256_castsi256_ps(_mm256_set1_epi32((int)P[i])));
    }
    __m256 m1 = _mm256_mul_ps(poly, r2);
    __m256 poly2 = _mm256_add_ps(m1, r);
    __m256 res = _mm256_add_ps(poly2, _mm256_set1_ps(1.0f));
    /* ldexp_exact(res, (int)k) */
    __m256i rb = _mm256_castps_si256(res);
    __m256i ki = _mm256_cvttps_epi32(kf);
    __m256i ex =
        _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(rb, 23), _mm256_set1_epi32(0xFF)), ki);
    __m256i scaled = _mm256_or_si256(_mm256_andnot_si256(expmask, rb), _mm256_slli_epi32(ex, 23));
    __m256i under = _mm256_cmpgt_epi32(_mm256_set1_epi32(1), ex);    /* ex <= 0 -> +0 */
    __m256i overf = _mm256_cmpgt_epi32(ex, _mm256_set1_epi32(0xFE)); /* ex >= 255 -> +-inf */
    __m256i inf = _mm256_or_si256(_mm256_and_si256(rb, signmask), expmask);
    scaled = _mm256_blendv_epi8(scaled, _mm256_setzero_si256(), under);
    scaled = _mm256_blendv_epi8(scaled, inf, overf);
    __m256i rzero = _mm256_cmpeq_epi32(_mm256_andnot_si256(signmask, rb), _mm256_setzero_si256());
    scaled = _mm256_blendv_epi8(scaled, rb, rzero);
    __m256 y = _mm256_castsi256_ps(scaled);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), small);
    y = _mm256_blendv_ps(y, _mm256_castsi256_ps(expmask), big);
    y = _mm256_blendv_ps(y, x, isnan);
    return y;
}

/* ref_swiglu bit for bit: out[i] = silu(g[i]) * u[i], silu(x) = x / (1 + exp_pinned(-x)),
 * each lane the scalar routine's own operations (sign flip, exp8, add, IEEE
 * divide, multiply). A block with a NaN input goes to the scalar routine (NaN
 * payload choice between two NaN operands is the compiler's there). */
ATTR void fast_avx2_swiglu(const float *g, const float *u, float *out, int n)
{
    const __m256 signmask = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u)),
                 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i), up = _mm256_loadu_ps(u + i);
        __m256 nan =
            _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(up, up, _CMP_UNORD_Q));
        if (_mm256_movemask_ps(nan)) {
            ref_swiglu(g + i, u + i, out + i, 8);
            continue;
        }
        __m256 e = exp8(_mm256_xor_ps(x, signmask));
        __m256 den = _mm256_add_ps(one, e);
        __m256 sl = _mm256_div_ps(x, den);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(sl, up));
    }
    if (i < n) ref_swiglu(g + i, u + i, out + i, n - i);
}

/* ref_add bit for bit, 8 lanes: each lane the one add of its element. A
 * block holding a NaN goes to ref_add (which NaN operand's payload survives
 * is the compiler's choice there). */
ATTR void fast_avx2_add(float *h, const float *x, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(h + i), b = _mm256_loadu_ps(x + i);
        __m256 nan =
            _mm256_or_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
        if (_mm256_movemask_ps(nan)) ref_add(h + i, x + i, 8);
        else _mm256_storeu_ps(h + i, _mm256_add_ps(a, b));
    }
    if (i < n) ref_add(h + i, x + i, n - i);
}

/* ref_rmsnorm's last loop, 8 lanes: out[i] = (x[i]*inv)*w[i], two
 * multiplies per element in that order (§8). */
ATTR static void avx2_rms_scale(const float *x, float inv, const float *w, float *out, int n)
{
    __m256 vi = _mm256_set1_ps(inv);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi),
                                                _mm256_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = (x[i] * inv) * w[i];
}

ATTR static void avx2_rmsnorm_rows(const float *x, size_t ldx, const float *w, int n, float eps,
                                   float *out, size_t ldo, int m)
{
    fast_rmsnorm_rows_by(x, ldx, w, n, eps, out, ldo, m, avx2_rms_scale);
}

/* ref_rope_rotate on nh heads, 8 pairs (i, i + half) a vector: each output
 * the same two products and one add (§7.4; -x2 a sign flip, as the scalar
 * negation). A head whose inputs hold a NaN goes to ref_rope_rotate (an add
 * of two NaNs keeps the compiler's choice of payload there); with none, a
 * NaN arises only as the default NaN, the same on either path. */
ATTR static void avx2_rope(float *x, int nh, int hd, const float *cos_v, const float *sin_v)
{
    int half = hd / 2;
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    int tnan = 0; /* the tables are the same for every head */
    for (int i = 0; i + 8 <= half; i += 8)
        tnan |= _mm256_movemask_ps(
            _mm256_cmp_ps(_mm256_loadu_ps(cos_v + i), _mm256_loadu_ps(sin_v + i), _CMP_UNORD_Q));
    for (int h = 0; h < nh; h++) {
        float *head = x + (size_t)h * hd;
        int nan = tnan;
        for (int i = 0; i + 8 <= half; i += 8)
            nan |= _mm256_movemask_ps(_mm256_cmp_ps(
                _mm256_loadu_ps(head + i), _mm256_loadu_ps(head + half + i), _CMP_UNORD_Q));
        if (half % 8 || nan) {
            ref_rope_rotate(head, hd, cos_v, sin_v);
            continue;
        }
        for (int i = 0; i < half; i += 8) {
            __m256 x1 = _mm256_loadu_ps(head + i), x2 = _mm256_loadu_ps(head + half + i);
            __m256 c = _mm256_loadu_ps(cos_v + i), s = _mm256_loadu_ps(sin_v + i);
            __m256 t1 = _mm256_mul_ps(x1, c), t2 = _mm256_mul_ps(_mm256_xor_ps(x2, sign), s);
            __m256 t3 = _mm256_mul_ps(x2, c), t4 = _mm256_mul_ps(x1, s);
            _mm256_storeu_ps(head + i, _mm256_add_ps(t1, t2));
            _mm256_storeu_ps(head + half + i, _mm256_add_ps(t3, t4));
        }
    }
}

/* cis2_argmax and the first NaN in two passes. Pass 1: per lane the largest
 * value that is not a NaN (max_ps(v, m) keeps m when v is a NaN, and the
 * earlier of two equal values: ordering only, no arithmetic), and whether any
 * lane met a NaN. Pass 2: the first index holding that maximum (== treats
 * -0 and +0 as equal, as the scalar `>` does: neither replaces the other). The
 * scalar argmax starts from x[0], so a leading NaN wins; handled first. */
ATTR int32_t fast_avx2_scan(const float *x, int n, int *first_nan)
{
    __m256 m = _mm256_set1_ps(-__builtin_inff()), nan = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        m = _mm256_max_ps(v, m);
    }
    float lanes[8], best = -__builtin_inff();
    _mm256_storeu_ps(lanes, m);
    for (int l = 0; l < 8; l++) best = lanes[l] > best ? lanes[l] : best;
    int any = _mm256_movemask_ps(nan) != 0;
    for (int j = i; j < n; j++) {
        any |= x[j] != x[j];
        best = x[j] > best ? x[j] : best;
    }
    *first_nan = -1;
    for (int j = 0; any && j < n; j++)
        if (x[j] != x[j]) {
            *first_nan = j;
            break;
        }
    if (x[0] != x[0]) return 0;
    __m256 b = _mm256_set1_ps(best);
    for (i = 0; i + 8 <= n; i += 8) {
        int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_EQ_OQ));
        if (eq) return i + __builtin_ctz((unsigned)eq);
    }
    for (; i < n; i++)
        if (x[i] == best) return i;
    return 0; /* not reached: best is one of x[] */
}

/* ref_softmax's max and exps of one row, in place: max (order independent),
 * then exp of s - max per lane. Returns 1, writing nothing, when the row is
 * short or holds a NaN (the caller runs ref_softmax on it). */
static ATTR int sm_max_exp(float *s, int n)
{
    if (n < 16) return 1;
    __m256 mx = _mm256_loadu_ps(s), nan = _mm256_cmp_ps(mx, mx, _CMP_UNORD_Q);
    int j = 8;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(s + j);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        mx = _mm256_max_ps(mx, v);
    }
    if (_mm256_movemask_ps(nan)) return 1;
    float lanes[8];
    _mm256_storeu_ps(lanes, mx);
    float max_v = lanes[0];
    for (int i = 1; i < 8; i++)
        if (lanes[i] > max_v) max_v = lanes[i];
    for (; j < n; j++) {
        if (s[j] != s[j]) return 1;
        if (s[j] > max_v) max_v = s[j];
    }
    /* The max's value is order independent; only the sign of a zero max can
     * differ, and s - (+0) == s - (-0) except for s = +-0, where exp gives 1
     * either way. */
    __m256 vm = _mm256_set1_ps(max_v);
    j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(s + j, exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm)));
    for (; j < n; j++) s[j] = cis2_exp_pinned(s[j] - max_v);
    return 0;
}

/* §5.3's last step: every entry divided by the row's sum. */
static ATTR void sm_div(float *s, int n, float acc)
{
    __m256 vd = _mm256_set1_ps(acc);
    int j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, _mm256_div_ps(_mm256_loadu_ps(s + j), vd));
    for (; j < n; j++) s[j] = s[j] / acc;
}

/* ref_softmax bit for bit: max (NaN anywhere -> the scalar routine), exp of
 * s - max per lane, the §5.3 sum strictly in order, then divide. */
ATTR static void fast_avx2_softmax(float *s, int n)
{
    if (sm_max_exp(s, n)) {
        ref_softmax(s, n);
        return;
    }
    float acc = 0.0f;
    for (int j = 0; j < n; j++) acc = acc + s[j];
    sm_div(s, n, acc);
}

/* Rows i < m of a tile, row i at s + i*lds with n0 + i*step entries: each
 * row ref_softmax bit for bit, given an ISA's max-and-exp of a row (returns
 * 1, writing nothing, for rows ref_softmax must take) and its divide. Each
 * row's §5.3 sum keeps its one accumulator, strictly in order; up to 8 rows'
 * sums run side by side over their shared first n0 entries, so their add
 * latencies overlap. */
void fast_softmax_rows_by(float *s, size_t lds, int m, int n0, int step,
                          int (*max_exp)(float *s, int n), void (*div)(float *s, int n, float acc))
{
    for (int i0 = 0; i0 < m; i0 += 8) {
        float *r[8];
        int len[8], nl = 0;
        for (int i = i0; i < m && i < i0 + 8; i++) {
            float *row = s + (size_t)i * lds;
            int n = n0 + i * step;
            if (max_exp(row, n)) ref_softmax(row, n);
            else {
                r[nl] = row;
                len[nl++] = n;
            }
        }
        if (!nl) continue;
        for (int i = nl; i < 8; i++) r[i] = r[0]; /* spare chains, never read back */
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f,
              a7 = 0.0f;
        int nc = n0 + i0 * step; /* every row of this group has at least nc entries */
        for (int j = 0; j < nc; j++) {
            a0 = a0 + r[0][j];
            a1 = a1 + r[1][j];
            a2 = a2 + r[2][j];
            a3 = a3 + r[3][j];
            a4 = a4 + r[4][j];
            a5 = a5 + r[5][j];
            a6 = a6 + r[6][j];
            a7 = a7 + r[7][j];
        }
        float acc[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };
        for (int l = 0; l < nl; l++) {
            for (int j = nc; j < len[l]; j++) acc[l] = acc[l] + r[l][j]; /* the row's rest */
            div(r[l], len[l], acc[l]);
        }
    }
}

ATTR static void fast_avx2_softmax_rows(float *s, size_t lds, int m, int n0, int step)
{
    fast_softmax_rows_by(s, lds, m, n0, step, sm_max_exp, sm_div);
}

/* V-mix: lanes over output dims; each lane adds p[j]*v[j][d] for j in order. */
ATTR void fast_avx2_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out)
{
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        __m256 a[8];
        for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
        for (int j = 0; j < n; j++) {
            __m256 pj = _mm256_set1_ps(p[j]);
            const float *vr = v + (size_t)j * stride + d0;
            for (int i = 0; i < 8; i++)
                a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(pj, _mm256_loadu_ps(vr + 8 * i)));
        }
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(out + d0 + 8 * i, a[i]);
    }
    for (; d0 + 8 <= hd; d0 += 8) {
        __m256 a = _mm256_setzero_ps();
        for (int j = 0; j < n; j++)
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(p[j]),
                                               _mm256_loadu_ps(v + (size_t)j * stride + d0)));
        _mm256_storeu_ps(out + d0, a);
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

const fast_kernels fast_kernels_avx2 = {
    .name = "avx2",
    .mm_bf16 = avx2_mm_bf16,
    .mm_f32 = avx2_mm_f32,
    .scores = fast_avx2_scores,
    .softmax = fast_avx2_softmax,
    .vmix = fast_avx2_vmix,
    .swiglu = fast_avx2_swiglu,
    .scores_t = fast_avx2_scores_t,
    .mm_i8 = avx2_mm_i8,
    .kt_pack = fast_avx2_kt_pack,
    .softmax_rows = fast_avx2_softmax_rows,
    .add = fast_avx2_add,
    .scan = fast_avx2_scan,
    .rmsnorm_rows = avx2_rmsnorm_rows,
    .rope = avx2_rope,
};

int fast_avx2_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#endif
