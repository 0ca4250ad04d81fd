/* Arm D of the divergence method: APPROXIMATE int8 linears — int8 dot
 * products (AVX-512 VNNI vpdpbusd, AVX-VNNI, AVX2 pmaddubsw, NEON sdot)
 * over per-token dynamically quantized activations. Not CIS-2: results
 * differ from the exact int8 semantics (docs/quantization.md §6 bounds by
 * how much) and FMA is allowed here. Everything lives in approx_int8.c, whose
 * symbols all start with approx_ so the FMA gate can allow them by name; the
 * exact paths never call into it. */
#ifndef CIS2_APPROX_INT8_H
#define CIS2_APPROX_INT8_H
#include "core/core.h"

/* Weights for arm D: tiles of 16 rows, k in groups of 4 (K4 = ceil(cols/4),
 * padded with zeros): w[((i*K4 + g)*16 + lane)*4 + j] = q[16i + lane][4g + j];
 * s and wsum (the row's sum of q) per row, 16 per tile, pad rows 0. */
typedef struct {
    int rows, cols, ntiles, k4;
    int8_t *w;
    float *s;
    int32_t *wsum;
} approx_i8_packed;

/* Per-call activation buffers (grown on demand; free with approx_i8_scratch_free). */
typedef struct {
    int8_t *xq; /* [T][4*K4] */
    float *sx;  /* [T] */
    size_t cap_xq, cap_sx;
} approx_i8_scratch;

typedef struct {
    const char *name; /* "avx512vnni", "avxvnni", "avx2", "neon-dotprod", "scalar" */
    /* Tiles [0, ntiles) of W (already offset), nrows rows from there: for
     * token t < T, Y[t*ldy + r] = (sx[t] * s[r]) * isum, or
     * fma(isum, sx[t] * s[r], bias[r]) with a bias, where isum is the exact
     * integer sum of q[r][k] * xq[t][k] (XQ rows 4*K4 bytes apart). */
    void (*mm)(const int8_t *W, const float *S, const int32_t *wsum, const float *bias, int k4,
               int ntiles, int nrows, const int8_t *XQ, const float *SX, int T, float *Y, int ldy);
} approx_i8_kernel;

/* The paths this CPU runs, best first; returns how many (at most max). */
int approx_i8_paths(const char **names, int max);
/* A path by name, or the best for NULL; NULL when unknown or unsupported. */
const approx_i8_kernel *approx_i8_pick(const char *name);

/* Pack q [rows, cols] (row-major) and s [rows]; cols <= 65536 (int32 sums). */
int approx_i8_pack(const int8_t *q, const float *s, int rows, int cols, approx_i8_packed *p,
                   char *err);
void approx_i8_packed_free(approx_i8_packed *p);

/* Per-token dynamic symmetric quantization of X [T, K]: sx[t] = max|x|/127,
 * xq = clamp(rne(x * (127/max|x|)), -127, 127), rows padded with zeros to
 * 4*k4 bytes. A non-finite row gets sx = NaN (its outputs are NaN). */
void approx_i8_quantize_act(const float *X, int T, int K, int k4, int8_t *xq, float *sx);

/* The whole linear on one thread: Y [T, rows] = arm D of X [T, cols], plus
 * bias [rows] fused into the epilogue when non-NULL. */
int approx_i8_matmul(const approx_i8_kernel *k, const approx_i8_packed *p, const float *X, int T,
                     const float *bias, float *Y, approx_i8_scratch *sc, char *err);
void approx_i8_scratch_free(approx_i8_scratch *sc);
#endif
