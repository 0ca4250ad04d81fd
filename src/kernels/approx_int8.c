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
#include <cpuid.h>
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
            /* ties to even: adding and removing 1.5 * 2^52 rounds |v| <= 128 in binary64 */
            double v = ((double)x[k] * inv + 6755399441055744.0) - 6755399441055744.0;
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

/* Helpers of the SIMD paths (none on wasm32, where arm D is the scalar path). */
#if defined(__x86_64__) || defined(__aarch64__)
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

/* The bias of rows r0..r0+15 (NULL without one): the caller's array holds
 * `nrows` values only, so a ragged last tile reads a zero-padded copy. */
static const float *approx_i8_bias16(const float *bias, int r0, int nrows, float tmp[16])
{
    if (!bias || r0 + 16 <= nrows) return bias ? bias + r0 : NULL;
    memset(tmp, 0, 16 * sizeof(float));
    memcpy(tmp, bias + r0, (size_t)(nrows - r0) * sizeof(float));
    return tmp;
}
#endif

/* One call's operands, shared by every path's register blocks. */
typedef struct {
    const int8_t *W;
    const float *S, *bias, *SX;
    const int32_t *wsum;
    const int8_t *XQ;
    float *Y;
    int k4, nrows, ldy;
} approx_i8_args;

/* The blocking every SIMD path uses: nt1 tiles at a time for one token (the
 * decode case: independent chains hide the dot instruction's latency), ntb
 * tiles x tbb tokens otherwise; full blocks get constant sizes (unrolled),
 * the ragged edges the same code with run-time sizes. */
#define APPROX_DRIVE(BLK, A, ntiles, T, NT1, NTB, TBB)                                             \
    do {                                                                                           \
        int tbc_ = (T) == 1 ? 1 : (TBB), ntc_ = (T) == 1 ? (NT1) : (NTB);                          \
        for (int t0 = 0; t0 < (T); t0 += tbc_) {                                                   \
            int tb = (T)-t0 < tbc_ ? (T)-t0 : tbc_;                                                \
            for (int i0 = 0; i0 < (ntiles); i0 += ntc_) {                                          \
                int nt = (ntiles)-i0 < ntc_ ? (ntiles)-i0 : ntc_;                                  \
                if ((T) == 1 && nt == (NT1)) BLK(A, i0, NT1, t0, 1);                               \
                else if ((T) > 1 && nt == (NTB) && tb == (TBB)) BLK(A, i0, NTB, t0, TBB);          \
                else BLK(A, i0, nt, t0, tb);                                                       \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define APPROX_AI static inline __attribute__((always_inline))

/* Register blocks. Hand-aligned (the unroll pragmas confuse clang-format).
 * Every loop over tiles (i), tokens (t) and vector halves (h) has a constant
 * trip count after inlining and is unrolled: the accumulators live in
 * registers. The arrays are zeroed whole (the run-time-size edge blocks use
 * a part of them). */
/* clang-format off */
#if defined(__clang__)
/* clang unrolls constant-trip loops on its own and, at -O3, warns (an error
 * under -Werror) when a requested unroll of a run-time edge block fails. */
#define APPROX_UNROLL
#else
#define APPROX_UNROLL _Pragma("GCC unroll 16")
#endif

#if defined(__x86_64__)
#define APPROX_X512  __attribute__((target("avx512f,avx512vnni")))
#define APPROX_X256  __attribute__((target("avx2,fma")))
#define APPROX_XVNNI __attribute__((target("avx2,fma,avxvnni")))

/* ------------------------------------------------ AVX-512 VNNI (vpdpbusd) */
/* vpdpbusd multiplies unsigned by signed bytes: the activations go in as
 * xq + 128 (xq ^ 0x80), and 128 * sum(q) comes off the integer sum. */
APPROX_AI APPROX_X512 void approx_i8_blk512(const approx_i8_args *a, int i0, const int nt, int t0,
                                            const int tb)
{
    __m512i acc[8][4], xb[4];
    APPROX_UNROLL for (int i = 0; i < 8; i++)
    APPROX_UNROLL for (int t = 0; t < 4; t++) acc[i][t] = xb[t] = _mm512_setzero_si512();
    const int8_t *w0 = a->W + (size_t)i0 * a->k4 * 64;
    for (int g = 0; g < a->k4; g++) {
        APPROX_UNROLL for (int t = 0; t < tb; t++) {
            int32_t v = approx_i8_ld4(a->XQ + (size_t)(t0 + t) * 4 * a->k4 + 4 * g);
            xb[t] = _mm512_set1_epi32(v ^ (int32_t)0x80808080u);
        }
        APPROX_UNROLL for (int i = 0; i < nt; i++) {
            __m512i w = _mm512_loadu_si512(w0 + ((size_t)i * a->k4 + g) * 64);
            APPROX_UNROLL for (int t = 0; t < tb; t++)
                acc[i][t] = _mm512_dpbusd_epi32(acc[i][t], xb[t], w);
        }
    }
    APPROX_UNROLL for (int i = 0; i < nt; i++) {
        int r0 = 16 * (i0 + i);
        __m512i off = _mm512_slli_epi32(_mm512_loadu_si512(a->wsum + r0), 7);
        __m512 sv = _mm512_loadu_ps(a->S + r0);
        float bt[16];
        const float *bp = approx_i8_bias16(a->bias, r0, a->nrows, bt);
        APPROX_UNROLL for (int t = 0; t < tb; t++) {
            __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][t], off));
            __m512 sc = _mm512_mul_ps(_mm512_set1_ps(a->SX[t0 + t]), sv);
            __m512 y = bp ? _mm512_fmadd_ps(f, sc, _mm512_loadu_ps(bp)) : _mm512_mul_ps(f, sc);
            float tmp[16];
            _mm512_storeu_ps(tmp, y);
            approx_i8_store16(a->Y + (size_t)(t0 + t) * a->ldy + r0, tmp, a->nrows - r0);
        }
    }
}

APPROX_X512 static void approx_i8_mm_avx512vnni(const int8_t *W, const float *S,
                                                const int32_t *wsum, const float *bias, int k4,
                                                int ntiles, int nrows, const int8_t *XQ,
                                                const float *SX, int T, float *Y, int ldy)
{
    approx_i8_args a = { W, S, bias, SX, wsum, XQ, Y, k4, nrows, ldy };
    APPROX_DRIVE(approx_i8_blk512, &a, ntiles, T, 8, 4, 4);
}

/* The 256-bit epilogue of one tile and token: acc[0..1] are rows r0..r0+15;
 * a->wsum non-NULL: subtract 128 * sum(q) (the unsigned-activation offset). */
APPROX_AI APPROX_X256 void approx_i8_epi256(const approx_i8_args *a, const __m256i acc[2], int r0,
                                            int t)
{
    float tmp[16], bt[16];
    const float *bp = approx_i8_bias16(a->bias, r0, a->nrows, bt);
    APPROX_UNROLL for (int h = 0; h < 2; h++) {
        __m256i v = acc[h];
        if (a->wsum) {
            __m256i ws = _mm256_loadu_si256((const __m256i *)(const void *)(a->wsum + r0 + 8 * h));
            v = _mm256_sub_epi32(v, _mm256_slli_epi32(ws, 7));
        }
        __m256 f = _mm256_cvtepi32_ps(v);
        __m256 sc = _mm256_mul_ps(_mm256_set1_ps(a->SX[t]), _mm256_loadu_ps(a->S + r0 + 8 * h));
        __m256 y = bp ? _mm256_fmadd_ps(f, sc, _mm256_loadu_ps(bp + 8 * h)) : _mm256_mul_ps(f, sc);
        _mm256_storeu_ps(tmp + 8 * h, y);
    }
    approx_i8_store16(a->Y + (size_t)t * a->ldy + r0, tmp, a->nrows - r0);
}

/* ------------------------------------------- AVX-VNNI (vpdpbusd, VEX, 256) */
APPROX_AI APPROX_XVNNI void approx_i8_blkvnni(const approx_i8_args *a, int i0, const int nt, int t0,
                                              const int tb)
{
    __m256i acc[4][3][2], xb[3];
    APPROX_UNROLL for (int i = 0; i < 4; i++)
    APPROX_UNROLL for (int t = 0; t < 3; t++)
        acc[i][t][0] = acc[i][t][1] = xb[t] = _mm256_setzero_si256();
    const int8_t *w0 = a->W + (size_t)i0 * a->k4 * 64;
    for (int g = 0; g < a->k4; g++) {
        APPROX_UNROLL for (int t = 0; t < tb; t++) {
            int32_t v = approx_i8_ld4(a->XQ + (size_t)(t0 + t) * 4 * a->k4 + 4 * g);
            xb[t] = _mm256_set1_epi32(v ^ (int32_t)0x80808080u);
        }
        APPROX_UNROLL for (int i = 0; i < nt; i++) {
            const int8_t *wp = w0 + ((size_t)i * a->k4 + g) * 64;
            __m256i wa = _mm256_loadu_si256((const __m256i *)(const void *)wp);
            __m256i wb = _mm256_loadu_si256((const __m256i *)(const void *)(wp + 32));
            APPROX_UNROLL for (int t = 0; t < tb; t++) {
                acc[i][t][0] = _mm256_dpbusd_avx_epi32(acc[i][t][0], xb[t], wa);
                acc[i][t][1] = _mm256_dpbusd_avx_epi32(acc[i][t][1], xb[t], wb);
            }
        }
    }
    APPROX_UNROLL for (int i = 0; i < nt; i++)
    APPROX_UNROLL for (int t = 0; t < tb; t++)
        approx_i8_epi256(a, acc[i][t], 16 * (i0 + i), t0 + t);
}

APPROX_XVNNI static void approx_i8_mm_avxvnni(const int8_t *W, const float *S, const int32_t *wsum,
                                              const float *bias, int k4, int ntiles, int nrows,
                                              const int8_t *XQ, const float *SX, int T, float *Y,
                                              int ldy)
{
    approx_i8_args a = { W, S, bias, SX, wsum, XQ, Y, k4, nrows, ldy };
    APPROX_DRIVE(approx_i8_blkvnni, &a, ntiles, T, 4, 2, 3);
}

/* ------------------------------------------ AVX2 (pmaddubsw + pmaddwd) */
/* |w| (unsigned) times sign(w)*x (signed): pairs sum to at most 2*128*127 <
 * 2^15, so pmaddubsw never saturates; pmaddwd adds the pairs to int32. The
 * activations stay signed: no offset to take off. */
APPROX_AI APPROX_X256 void approx_i8_blk256(const approx_i8_args *a, int i0, const int nt, int t0,
                                            const int tb)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[4][2][2], xb[2];
    APPROX_UNROLL for (int i = 0; i < 4; i++)
    APPROX_UNROLL for (int t = 0; t < 2; t++)
        acc[i][t][0] = acc[i][t][1] = xb[t] = _mm256_setzero_si256();
    const int8_t *w0 = a->W + (size_t)i0 * a->k4 * 64;
    for (int g = 0; g < a->k4; g++) {
        APPROX_UNROLL for (int t = 0; t < tb; t++)
            xb[t] = _mm256_set1_epi32(approx_i8_ld4(a->XQ + (size_t)(t0 + t) * 4 * a->k4 + 4 * g));
        APPROX_UNROLL for (int i = 0; i < nt; i++) {
            const int8_t *wp = w0 + ((size_t)i * a->k4 + g) * 64;
            APPROX_UNROLL for (int h = 0; h < 2; h++) {
                __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(wp + 32 * h));
                __m256i aw = _mm256_abs_epi8(w);
                APPROX_UNROLL for (int t = 0; t < tb; t++) {
                    __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xb[t], w));
                    acc[i][t][h] = _mm256_add_epi32(acc[i][t][h], _mm256_madd_epi16(p, ones));
                }
            }
        }
    }
    approx_i8_args b = *a;
    b.wsum = NULL;
    APPROX_UNROLL for (int i = 0; i < nt; i++)
    APPROX_UNROLL for (int t = 0; t < tb; t++)
        approx_i8_epi256(&b, acc[i][t], 16 * (i0 + i), t0 + t);
}

APPROX_X256 static void approx_i8_mm_avx2(const int8_t *W, const float *S, const int32_t *wsum,
                                          const float *bias, int k4, int ntiles, int nrows,
                                          const int8_t *XQ, const float *SX, int T, float *Y,
                                          int ldy)
{
    approx_i8_args a = { W, S, bias, SX, wsum, XQ, Y, k4, nrows, ldy };
    APPROX_DRIVE(approx_i8_blk256, &a, ntiles, T, 4, 2, 2);
}
#endif

#if defined(__aarch64__)
/* ----------------------------------------------------- NEON sdot (dotprod) */
#define APPROX_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
APPROX_AI APPROX_DOTPROD void approx_i8_blksdot(const approx_i8_args *a, int i0, const int nt,
                                                int t0, const int tb)
{
    int32x4_t acc[4][3][4];
    int8x16_t xb[3];
    APPROX_UNROLL for (int i = 0; i < 4; i++)
    APPROX_UNROLL for (int t = 0; t < 3; t++) {
        xb[t] = vdupq_n_s8(0);
        APPROX_UNROLL for (int h = 0; h < 4; h++) acc[i][t][h] = vdupq_n_s32(0);
    }
    const int8_t *w0 = a->W + (size_t)i0 * a->k4 * 64;
    for (int g = 0; g < a->k4; g++) {
        APPROX_UNROLL for (int t = 0; t < tb; t++) {
            int32_t v = approx_i8_ld4(a->XQ + (size_t)(t0 + t) * 4 * a->k4 + 4 * g);
            xb[t] = vreinterpretq_s8_s32(vdupq_n_s32(v));
        }
        APPROX_UNROLL for (int i = 0; i < nt; i++)
        APPROX_UNROLL for (int h = 0; h < 4; h++) {
            int8x16_t w = vld1q_s8(w0 + ((size_t)i * a->k4 + g) * 64 + 16 * h);
            APPROX_UNROLL for (int t = 0; t < tb; t++)
                acc[i][t][h] = vdotq_s32(acc[i][t][h], w, xb[t]);
        }
    }
    APPROX_UNROLL for (int i = 0; i < nt; i++)
    APPROX_UNROLL for (int t = 0; t < tb; t++) {
        int r0 = 16 * (i0 + i);
        float tmp[16], bt[16];
        const float *bp = approx_i8_bias16(a->bias, r0, a->nrows, bt);
        APPROX_UNROLL for (int h = 0; h < 4; h++) {
            float32x4_t f = vcvtq_f32_s32(acc[i][t][h]);
            float32x4_t sc = vmulq_f32(vdupq_n_f32(a->SX[t0 + t]), vld1q_f32(a->S + r0 + 4 * h));
            float32x4_t y = bp ? vfmaq_f32(vld1q_f32(bp + 4 * h), f, sc) : vmulq_f32(f, sc);
            vst1q_f32(tmp + 4 * h, y);
        }
        approx_i8_store16(a->Y + (size_t)(t0 + t) * a->ldy + r0, tmp, a->nrows - r0);
    }
}

APPROX_DOTPROD static void approx_i8_mm_neon_dotprod(const int8_t *W, const float *S,
                                                     const int32_t *wsum, const float *bias,
                                                     int k4, int ntiles, int nrows,
                                                     const int8_t *XQ, const float *SX, int T,
                                                     float *Y, int ldy)
{
    approx_i8_args a = { W, S, bias, SX, wsum, XQ, Y, k4, nrows, ldy };
    APPROX_DRIVE(approx_i8_blksdot, &a, ntiles, T, 4, 2, 3);
}
#endif
/* clang-format on */

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
    if (!strcmp(k->name, "avxvnni")) { /* CPUID.(7,1):EAX bit 4 (older compilers lack the name) */
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
    }
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
