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

static const fast_kernels K_AVX512 = { "avx512", avx512_mm_bf16, avx512_mm_f32, fast_avx2_scores, fast_avx2_softmax,
                                       fast_avx2_vmix };

const fast_kernels *fast_kernels_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") ? &K_AVX512 : NULL;
}
#else
const fast_kernels *fast_kernels_avx512(void) { return NULL; }
#endif
