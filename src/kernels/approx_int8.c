/* Arm D: approximate int8 linears (approx_int8.h, docs/quantization.md §6).
 * Activations are quantized per token, the dot products are exact integer
 * sums (so every path below gives the same integer), and the float epilogue
 * is (sx * s) * isum, or one FMA with a bias. The only object allowed to
 * hold FMA instructions (tests/fma_gate.sh allows approx_* functions); every
 * symbol here, static ones included, starts with approx_. */
#include "kernels/approx_int8.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

#define APPROX_MAX_COLS 65536 /* 255 * 128 * 65536 < 2^31: no int32 overflow */

/* ------------------------------------------------------------ packing */
int approx_i8_pack(const int8_t *q, const float *s, int rows, int cols, approx_i8_packed *p,
                   char *err)
{
    memset(p, 0, sizeof *p);
    if (rows < 1 || cols < 1 || cols > APPROX_MAX_COLS) {
        snprintf(err, CIS2_ERR_LEN, "arm D: a [%d, %d] weight is out of range (cols <= %d)", rows,
                 cols, APPROX_MAX_COLS);
        return 1;
    }
    p->rows = rows;
    p->cols = cols;
    p->ntiles = (rows + 15) / 16;
    p->k4 = (cols + 3) / 4;
    size_t nw = (size_t)p->ntiles * p->k4 * 64, nr = (size_t)p->ntiles * 16;
    p->w = aligned_alloc(64, (nw + 63) & ~(size_t)63);
    p->s = aligned_alloc(64, (nr * 4 + 63) & ~(size_t)63);
    p->wsum = aligned_alloc(64, (nr * 4 + 63) & ~(size_t)63);
    if (!p->w || !p->s || !p->wsum) {
        approx_i8_packed_free(p);
        snprintf(err, CIS2_ERR_LEN, "arm D: out of memory packing a [%d, %d] weight", rows, cols);
        return 1;
    }
    memset(p->w, 0, nw);
    memset(p->s, 0, nr * 4);
    memset(p->wsum, 0, nr * 4);
    for (int r = 0; r < rows; r++) {
        int i = r / 16, lane = r % 16;
        int32_t sum = 0;
        for (int k = 0; k < cols; k++) {
            int8_t v = q[(size_t)r * cols + k];
            p->w[(((size_t)i * p->k4 + k / 4) * 16 + lane) * 4 + k % 4] = v;
            sum += v;
        }
        p->s[r] = s[r];
        p->wsum[r] = sum;
    }
    return 0;
}

void approx_i8_packed_free(approx_i8_packed *p)
{
    free(p->w);
    free(p->s);
    free(p->wsum);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------- activation quantization */
void approx_i8_quantize_act(const float *X, int T, int K, int k4, int8_t *xq, float *sx)
{
    for (int t = 0; t < T; t++) {
        const float *x = X + (size_t)t * K;
        int8_t *o = xq + (size_t)t * 4 * k4;
        memset(o, 0, (size_t)4 * k4);
        float ax = 0.0f;
        int finite = 1;
        for (int k = 0; k < K; k++) {
            float a = fabsf(x[k]);
            if (!(a <= 3.40282347e38f)) finite = 0; /* NaN or Inf */
            else if (a > ax) ax = a;
        }
        if (!finite) {
            sx[t] = NAN;
            continue;
        }
        sx[t] = (float)((double)ax / 127.0); /* flushes to 0 for max|x| < 127 * 2^-126 */
        if (ax == 0.0f) continue;
        double inv = 127.0 / (double)ax;
        for (int k = 0; k < K; k++) {
            double v = nearbyint((double)x[k] * inv); /* ties to even */
            o[k] = (int8_t)(v > 127.0 ? 127 : v < -127.0 ? -127 : (int)v);
        }
    }
}

/* ---------------------------------------------------------- the epilogue */
static inline float approx_i8_out(int32_t isum, float sx, float s, const float *bias, int r)
{
    float scale = sx * s;
    return bias ? fmaf((float)isum, scale, bias[r]) : (float)isum * scale;
}

/* --------------------------------------------------------- scalar path */
static void approx_i8_mm_scalar(const int8_t *W, const float *S, const int32_t *wsum,
                                const float *bias, int k4, int ntiles, int nrows, const int8_t *XQ,
                                const float *SX, int T, float *Y, int ldy)
{
    (void)wsum;
    for (int i = 0; i < ntiles; i++)
        for (int lane = 0; lane < 16 && 16 * i + lane < nrows; lane++) {
            int r = 16 * i + lane;
            for (int t = 0; t < T; t++) {
                const int8_t *x = XQ + (size_t)t * 4 * k4;
                int32_t acc = 0;
                for (int g = 0; g < k4; g++) {
                    const int8_t *w = W + (((size_t)i * k4 + g) * 16 + lane) * 4;
                    for (int j = 0; j < 4; j++) acc += (int32_t)w[j] * x[4 * g + j];
                }
                Y[(size_t)t * ldy + r] = approx_i8_out(acc, SX[t], S[r], bias, r);
            }
        }
}

static int32_t approx_i8_ld4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Store 16 row outputs of one tile (lanes past nrows dropped). */
static void approx_i8_store16(float *dst, const float *v, int nr)
{
    memcpy(dst, v, (size_t)(nr < 16 ? nr : 16) * sizeof(float));
}

#define APPROX_TB 6 /* tokens per register block */

#if defined(__x86_64__)
/* ------------------------------------------------ AVX-512 VNNI (vpdpbusd) */
/* vpdpbusd multiplies unsigned by signed bytes: the activations go in as
 * xq + 128 (xq ^ 0x80), and 128 * sum(q) comes off the integer sum. */
__attribute__((target("avx512f,avx512vnni"))) static void
approx_i8_mm_avx512vnni(const int8_t *W, const float *S, const int32_t *wsum, const float *bias,
                        int k4, int ntiles, int nrows, const int8_t *XQ, const float *SX, int T,
                        float *Y, int ldy)
{
    for (int i = 0; i < ntiles; i++) {
        const int8_t *wt = W + (size_t)i * k4 * 64;
        __m512i off = _mm512_slli_epi32(_mm512_loadu_si512(wsum + 16 * i), 7);
        __m512 sv = _mm512_loadu_ps(S + 16 * i);
        __m512 bv = bias ? _mm512_loadu_ps(bias + 16 * i) : _mm512_setzero_ps();
        int nr = nrows - 16 * i;
        for (int t0 = 0; t0 < T; t0 += APPROX_TB) {
            int tb = T - t0 < APPROX_TB ? T - t0 : APPROX_TB;
            __m512i acc[APPROX_TB];
            for (int t = 0; t < APPROX_TB; t++) acc[t] = _mm512_setzero_si512();
            for (int g = 0; g < k4; g++) {
                __m512i w = _mm512_loadu_si512(wt + (size_t)g * 64);
                for (int t = 0; t < tb; t++) {
                    int32_t xv = approx_i8_ld4(XQ + (size_t)(t0 + t) * 4 * k4 + 4 * g);
                    __m512i xb = _mm512_set1_epi32(xv ^ (int32_t)0x80808080u);
                    acc[t] = _mm512_dpbusd_epi32(acc[t], xb, w);
                }
            }
            for (int t = 0; t < tb; t++) {
                __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[t], off));
                __m512 sc = _mm512_mul_ps(_mm512_set1_ps(SX[t0 + t]), sv);
                __m512 y = bias ? _mm512_fmadd_ps(f, sc, bv) : _mm512_mul_ps(f, sc);
                float tmp[16];
                _mm512_storeu_ps(tmp, y);
                approx_i8_store16(Y + (size_t)(t0 + t) * ldy + 16 * i, tmp, nr);
            }
        }
    }
}

/* ------------------------------------------- AVX-VNNI (vpdpbusd, VEX, 256) */
__attribute__((target("avx2,fma,avxvnni"))) static void
approx_i8_mm_avxvnni(const int8_t *W, const float *S, const int32_t *wsum, const float *bias,
                     int k4, int ntiles, int nrows, const int8_t *XQ, const float *SX, int T,
                     float *Y, int ldy)
{
    for (int i = 0; i < ntiles; i++) {
        const int8_t *wt = W + (size_t)i * k4 * 64;
        int nr = nrows - 16 * i;
        for (int t0 = 0; t0 < T; t0 += APPROX_TB) {
            int tb = T - t0 < APPROX_TB ? T - t0 : APPROX_TB;
            __m256i acc[APPROX_TB][2];
            for (int t = 0; t < APPROX_TB; t++) acc[t][0] = acc[t][1] = _mm256_setzero_si256();
            for (int g = 0; g < k4; g++) {
                __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(wt + g * 64));
                __m256i w1 = _mm256_loadu_si256((const __m256i *)(const void *)(wt + g * 64 + 32));
                for (int t = 0; t < tb; t++) {
                    int32_t xv = approx_i8_ld4(XQ + (size_t)(t0 + t) * 4 * k4 + 4 * g);
                    __m256i xb = _mm256_set1_epi32(xv ^ (int32_t)0x80808080u);
                    acc[t][0] = _mm256_dpbusd_avx_epi32(acc[t][0], xb, w0);
                    acc[t][1] = _mm256_dpbusd_avx_epi32(acc[t][1], xb, w1);
                }
            }
            for (int t = 0; t < tb; t++) {
                float tmp[16];
                for (int h = 0; h < 2; h++) {
                    __m256i off = _mm256_slli_epi32(
                        _mm256_loadu_si256((const __m256i *)(const void *)(wsum + 16 * i + 8 * h)),
                        7);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[t][h], off));
                    __m256 sc = _mm256_mul_ps(_mm256_set1_ps(SX[t0 + t]),
                                              _mm256_loadu_ps(S + 16 * i + 8 * h));
                    __m256 y = bias ? _mm256_fmadd_ps(f, sc, _mm256_loadu_ps(bias + 16 * i + 8 * h))
                                    : _mm256_mul_ps(f, sc);
                    _mm256_storeu_ps(tmp + 8 * h, y);
                }
                approx_i8_store16(Y + (size_t)(t0 + t) * ldy + 16 * i, tmp, nr);
            }
        }
    }
}

/* ------------------------------------------ AVX2 (pmaddubsw + pmaddwd) */
/* |w| (unsigned) times sign(w)*x (signed): pairs sum to at most 2*128*127 <
 * 2^15, so pmaddubsw never saturates; pmaddwd adds the pairs to int32. */
__attribute__((target("avx2,fma"))) static void
approx_i8_mm_avx2(const int8_t *W, const float *S, const int32_t *wsum, const float *bias, int k4,
                  int ntiles, int nrows, const int8_t *XQ, const float *SX, int T, float *Y,
                  int ldy)
{
    (void)wsum;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < ntiles; i++) {
        const int8_t *wt = W + (size_t)i * k4 * 64;
        int nr = nrows - 16 * i;
        for (int t0 = 0; t0 < T; t0 += APPROX_TB) {
            int tb = T - t0 < APPROX_TB ? T - t0 : APPROX_TB;
            __m256i acc[APPROX_TB][2];
            for (int t = 0; t < APPROX_TB; t++) acc[t][0] = acc[t][1] = _mm256_setzero_si256();
            for (int g = 0; g < k4; g++) {
                __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(wt + g * 64));
                __m256i w1 = _mm256_loadu_si256((const __m256i *)(const void *)(wt + g * 64 + 32));
                __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
                for (int t = 0; t < tb; t++) {
                    __m256i xb =
                        _mm256_set1_epi32(approx_i8_ld4(XQ + (size_t)(t0 + t) * 4 * k4 + 4 * g));
                    __m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(xb, w0));
                    __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(xb, w1));
                    acc[t][0] = _mm256_add_epi32(acc[t][0], _mm256_madd_epi16(p0, ones));
                    acc[t][1] = _mm256_add_epi32(acc[t][1], _mm256_madd_epi16(p1, ones));
                }
            }
            for (int t = 0; t < tb; t++) {
                float tmp[16];
                for (int h = 0; h < 2; h++) {
                    __m256 f = _mm256_cvtepi32_ps(acc[t][h]);
                    __m256 sc = _mm256_mul_ps(_mm256_set1_ps(SX[t0 + t]),
                                              _mm256_loadu_ps(S + 16 * i + 8 * h));
                    __m256 y = bias ? _mm256_fmadd_ps(f, sc, _mm256_loadu_ps(bias + 16 * i + 8 * h))
                                    : _mm256_mul_ps(f, sc);
                    _mm256_storeu_ps(tmp + 8 * h, y);
                }
                approx_i8_store16(Y + (size_t)(t0 + t) * ldy + 16 * i, tmp, nr);
            }
        }
    }
}
#endif

#if defined(__aarch64__)
/* ----------------------------------------------------- NEON sdot (dotprod) */
__attribute__((target("arch=armv8.2-a+dotprod"))) static void
approx_i8_mm_neon_dotprod(const int8_t *W, const float *S, const int32_t *wsum, const float *bias,
                          int k4, int ntiles, int nrows, const int8_t *XQ, const float *SX, int T,
                          float *Y, int ldy)
{
    (void)wsum;
    for (int i = 0; i < ntiles; i++) {
        const int8_t *wt = W + (size_t)i * k4 * 64;
        int nr = nrows - 16 * i;
        for (int t0 = 0; t0 < T; t0 += 4) {
            int tb = T - t0 < 4 ? T - t0 : 4;
            int32x4_t acc[4][4];
            for (int t = 0; t < 4; t++)
                for (int h = 0; h < 4; h++) acc[t][h] = vdupq_n_s32(0);
            for (int g = 0; g < k4; g++) {
                int8x16_t w[4];
                for (int h = 0; h < 4; h++) w[h] = vld1q_s8(wt + g * 64 + 16 * h);
                for (int t = 0; t < tb; t++) {
                    int32_t xv = approx_i8_ld4(XQ + (size_t)(t0 + t) * 4 * k4 + 4 * g);
                    int8x16_t xb = vreinterpretq_s8_s32(vdupq_n_s32(xv));
                    for (int h = 0; h < 4; h++) acc[t][h] = vdotq_s32(acc[t][h], w[h], xb);
                }
            }
            for (int t = 0; t < tb; t++) {
                float tmp[16];
                for (int h = 0; h < 4; h++) {
                    float32x4_t f = vcvtq_f32_s32(acc[t][h]);
                    float32x4_t sc =
                        vmulq_f32(vdupq_n_f32(SX[t0 + t]), vld1q_f32(S + 16 * i + 4 * h));
                    float32x4_t y = bias ? vfmaq_f32(vld1q_f32(bias + 16 * i + 4 * h), f, sc)
                                         : vmulq_f32(f, sc);
                    vst1q_f32(tmp + 4 * h, y);
                }
                approx_i8_store16(Y + (size_t)(t0 + t) * ldy + 16 * i, tmp, nr);
            }
        }
    }
}
#endif

/* ------------------------------------------------------------ selection */
static const approx_i8_kernel approx_i8_paths_all[] = {
#if defined(__x86_64__)
    { "avx512vnni", approx_i8_mm_avx512vnni },
    { "avxvnni", approx_i8_mm_avxvnni },
    { "avx2", approx_i8_mm_avx2 },
#endif
#if defined(__aarch64__)
    { "neon-dotprod", approx_i8_mm_neon_dotprod },
#endif
    { "scalar", approx_i8_mm_scalar },
};

static int approx_i8_supported(const approx_i8_kernel *k)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!strcmp(k->name, "avx512vnni"))
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
    if (!strcmp(k->name, "avxvnni"))
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("avxvnni");
    if (!strcmp(k->name, "avx2"))
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#if defined(__aarch64__)
    if (!strcmp(k->name, "neon-dotprod")) return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
    return !strcmp(k->name, "scalar");
}

int approx_i8_paths(const char **names, int max)
{
    int n = 0;
    for (size_t i = 0; i < sizeof approx_i8_paths_all / sizeof *approx_i8_paths_all; i++)
        if (n < max && approx_i8_supported(&approx_i8_paths_all[i]))
            names[n++] = approx_i8_paths_all[i].name;
    return n;
}

const approx_i8_kernel *approx_i8_pick(const char *name)
{
    for (size_t i = 0; i < sizeof approx_i8_paths_all / sizeof *approx_i8_paths_all; i++) {
        const approx_i8_kernel *k = &approx_i8_paths_all[i];
        if ((!name || !strcmp(name, k->name)) && approx_i8_supported(k)) return k;
    }
    return NULL;
}

/* ----------------------------------------------------------- one linear */
int approx_i8_matmul(const approx_i8_kernel *k, const approx_i8_packed *p, const float *X, int T,
                     const float *bias, float *Y, approx_i8_scratch *sc, char *err)
{
    size_t nxq = (size_t)T * 4 * p->k4, nsx = (size_t)T;
    if (nxq > sc->cap_xq) {
        int8_t *b = realloc(sc->xq, nxq);
        if (!b) goto oom;
        sc->xq = b;
        sc->cap_xq = nxq;
    }
    if (nsx > sc->cap_sx) {
        float *b = realloc(sc->sx, nsx * sizeof(float));
        if (!b) goto oom;
        sc->sx = b;
        sc->cap_sx = nsx;
    }
    approx_i8_quantize_act(X, T, p->cols, p->k4, sc->xq, sc->sx);
    k->mm(p->w, p->s, p->wsum, bias, p->k4, p->ntiles, p->rows, sc->xq, sc->sx, T, Y, p->rows);
    return 0;
oom:
    snprintf(err, CIS2_ERR_LEN, "arm D: out of memory for %d tokens of %d values", T, p->cols);
    return 1;
}

void approx_i8_scratch_free(approx_i8_scratch *sc)
{
    free(sc->xq);
    free(sc->sx);
    memset(sc, 0, sizeof *sc);
}
