/* SSE2 kernels: the x86-64 baseline (every x86-64 CPU has SSE2). Four lanes,
 * separate mulps/addps, one accumulator per output. */
#include "kernels/fast_kernels.h"
#include "kernels/kernels.h"
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>

#define ATTR           __attribute__((target("sse2")))
#define V              __m128
#define VL             4
#define NV             4
#define V_ZERO()       _mm_setzero_ps()
#define V_ADD(a, b)    _mm_add_ps(a, b)
#define V_MUL(a, b)    _mm_mul_ps(a, b)
#define V_SET1(x)      _mm_set1_ps(x)
#define V_LOADU(p)     _mm_loadu_ps(p)
#define V_STOREU(p, v) _mm_storeu_ps(p, v)
#define V_BF16(p)                                                                                  \
    _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(),                                       \
                                        _mm_loadl_epi64((const __m128i *)(const void *)(p))))
#define V_BF16_W(p)  _mm_loadu_si128((const __m128i *)(const void *)(p))
#define V_BF16_LO(p) _mm_castsi128_ps(_mm_slli_epi32(V_BF16_W(p), 16))
#define V_BF16_HI(p) _mm_castsi128_ps(_mm_and_si128(V_BF16_W(p), _mm_set1_epi32(-65536)))
/* 4 int8 -> 4 f32, exactly: each byte to the top of a 32-bit lane, then an
 * arithmetic shift sign-extends it (SSE2 has no pmovsxbd). */
static ATTR inline __attribute__((always_inline)) __m128 sse2_i8x4(const int8_t *p)
{
    int32_t b;
    memcpy(&b, p, 4);
    __m128i x = _mm_cvtsi32_si128(b);
    x = _mm_unpacklo_epi8(x, x);
    x = _mm_unpacklo_epi16(x, x);
    return _mm_cvtepi32_ps(_mm_srai_epi32(x, 24));
}
#define V_I8(p) sse2_i8x4(p)
#define NT1     2
#define NTB     1
#define TBB     2
#define PFX     sse2_
#include "kernels/kernels_tmpl.h"

/* Scores: lanes over keys (4 keys per vector, two vectors in flight), each
 * lane adding its q[d]*k[d] terms in order. */
static ATTR void sse2_scores(const float *q, const float *k, size_t stride, int n, int hd,
                             float scale, float *out)
{
    int j = 0, hd4 = hd & ~3;
    __m128 vs = _mm_set1_ps(scale);
    for (; j + 8 <= n; j += 8) {
        __m128 a0 = _mm_setzero_ps(), a1 = _mm_setzero_ps();
        const float *k0 = k + (size_t)j * stride, *k1 = k0 + 4 * stride;
        int d = 0;
        for (; d < hd4; d += 4) {
            __m128 r0 = _mm_loadu_ps(k0 + d), r1 = _mm_loadu_ps(k0 + stride + d);
            __m128 r2 = _mm_loadu_ps(k0 + 2 * stride + d), r3 = _mm_loadu_ps(k0 + 3 * stride + d);
            __m128 s0 = _mm_loadu_ps(k1 + d), s1 = _mm_loadu_ps(k1 + stride + d);
            __m128 s2 = _mm_loadu_ps(k1 + 2 * stride + d), s3 = _mm_loadu_ps(k1 + 3 * stride + d);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _MM_TRANSPOSE4_PS(s0, s1, s2, s3);
            __m128 q0 = _mm_set1_ps(q[d]), q1 = _mm_set1_ps(q[d + 1]), q2 = _mm_set1_ps(q[d + 2]),
                   q3 = _mm_set1_ps(q[d + 3]);
            a0 = _mm_add_ps(a0, _mm_mul_ps(r0, q0));
            a1 = _mm_add_ps(a1, _mm_mul_ps(s0, q0));
            a0 = _mm_add_ps(a0, _mm_mul_ps(r1, q1));
            a1 = _mm_add_ps(a1, _mm_mul_ps(s1, q1));
            a0 = _mm_add_ps(a0, _mm_mul_ps(r2, q2));
            a1 = _mm_add_ps(a1, _mm_mul_ps(s2, q2));
            a0 = _mm_add_ps(a0, _mm_mul_ps(r3, q3));
            a1 = _mm_add_ps(a1, _mm_mul_ps(s3, q3));
        }
        for (; d < hd; d++) {
            __m128 qv = _mm_set1_ps(q[d]);
            __m128 c0 = _mm_set_ps(k0[3 * stride + d], k0[2 * stride + d], k0[stride + d], k0[d]);
            __m128 c1 = _mm_set_ps(k1[3 * stride + d], k1[2 * stride + d], k1[stride + d], k1[d]);
            a0 = _mm_add_ps(a0, _mm_mul_ps(c0, qv));
            a1 = _mm_add_ps(a1, _mm_mul_ps(c1, qv));
        }
        _mm_storeu_ps(out + j, _mm_mul_ps(a0, vs));
        _mm_storeu_ps(out + j + 4, _mm_mul_ps(a1, vs));
    }
    for (; j < n; j++) {
        float dd = cis2_dot_seq(q, k + (size_t)j * stride, (size_t)hd);
        out[j] = dd * scale;
    }
}

/* V-mix: lanes over output dims, keys in order. */
static ATTR void sse2_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out)
{
    int d0 = 0;
    for (; d0 + 16 <= hd; d0 += 16) {
        __m128 a0 = _mm_setzero_ps(), a1 = _mm_setzero_ps(), a2 = _mm_setzero_ps(),
               a3 = _mm_setzero_ps();
        for (int j = 0; j < n; j++) {
            __m128 pj = _mm_set1_ps(p[j]);
            const float *vr = v + (size_t)j * stride + d0;
            a0 = _mm_add_ps(a0, _mm_mul_ps(pj, _mm_loadu_ps(vr)));
            a1 = _mm_add_ps(a1, _mm_mul_ps(pj, _mm_loadu_ps(vr + 4)));
            a2 = _mm_add_ps(a2, _mm_mul_ps(pj, _mm_loadu_ps(vr + 8)));
            a3 = _mm_add_ps(a3, _mm_mul_ps(pj, _mm_loadu_ps(vr + 12)));
        }
        _mm_storeu_ps(out + d0, a0);
        _mm_storeu_ps(out + d0 + 4, a1);
        _mm_storeu_ps(out + d0 + 8, a2);
        _mm_storeu_ps(out + d0 + 12, a3);
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

const fast_kernels fast_kernels_sse2 = {
    .name = "sse2",
    .mm_bf16 = sse2_mm_bf16,
    .mm_f32 = sse2_mm_f32,
    .scores = sse2_scores,
    .softmax = ref_softmax,
    .vmix = sse2_vmix,
    .mm_i8 = sse2_mm_i8,
    .rmsnorm_rows = fast_rmsnorm_rows,
};
#endif
