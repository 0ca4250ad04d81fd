/* AVX-512F kernels (x86-64): the matmul with one 16-row tile per zmm.
 * target("avx512f") only, separate vmulps/vaddps (never FMA, §1.4).
 * Attention reuses the AVX2 kernels (every AVX-512F CPU has AVX2). */
#include "fast.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define ATTR __attribute__((target("avx512f")))
#define V __m512
#define VL 16
#define NV 1
#define V_ZERO() _mm512_setzero_ps()
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps(p, v)
#define V_BF16(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16))
#define NT1 8
#define NTB 2
#define TBB 12
#define PFX avx512_
#include "kernels_tmpl.h"

void fast_avx2_scores(const float *q, const float *k, size_t stride, int n, int hd, float scale, float *out);
void fast_avx2_softmax(float *s, int n);
void fast_avx2_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out);
void fast_avx2_swiglu(const float *g, const float *u, float *out, int n);
void fast_avx2_scores_t(const float *q, const float *kt, size_t ld, int n, int hd, float scale, float *out);

/* V-mix, 16 lanes: lanes over output dims; lane d adds p[j]*v[j][d] for
 * keys j in order (one mul, one add each) — fast_avx2_vmix's operations,
 * half the instructions. */
ATTR static void avx512_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out)
{
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
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
            a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v + (size_t)j * stride + d0)));
        _mm512_storeu_ps(out + d0, a);
    }
    if (d0 < hd) fast_avx2_vmix(p, v + d0, stride, n, hd - d0, out + d0);   /* per-dim lanes: any split is exact */
}

static const fast_kernels K_AVX512 = { "avx512", avx512_mm_bf16, avx512_mm_f32, fast_avx2_scores, fast_avx2_softmax,
                                       avx512_vmix, fast_avx2_swiglu, fast_avx2_scores_t };

const fast_kernels *fast_kernels_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") ? &K_AVX512 : NULL;
}
#else
const fast_kernels *fast_kernels_avx512(void) { return NULL; }
#endif
