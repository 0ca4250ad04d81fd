/* The fast kernels' table: one instance per ISA path (kernels_<isa>.c), each
 * computing every output element as the same sequence of separately rounded
 * operations as the scalar reference (kernels_ref.c): one accumulator per
 * output, terms added k = 0, 1, 2, ... in order; SIMD lanes only ever run
 * ACROSS outputs (rows, keys, dims, tokens). */
#ifndef CIS2_FAST_KERNELS_H
#define CIS2_FAST_KERNELS_H
#include "core/core.h"
#include "model/weights.h"

/* Row-interleaved tiles (the model's, model/weights.h): tile i holds rows
 * 16i..16i+15; element k of those 16 rows is adjacent: data[(i*K + k)*16 +
 * lane]. Rows past `rows` are zero. bf16 tiles hold columns in pairs, each
 * lane's columns 2p, 2p+1 one 32-bit word: data[(i*K + 2p)*16 + 2*lane +
 * (k&1)] (cis2_bf16_tile_at), an odd last column a plain line. */
#define FAST_TILE 16

/* Kernel table for one ISA path. */
typedef struct {
    const char *name;
    /* Y[t*ldy + 16*i + lane] for tiles i < ntiles (rows < nrows only), t < T:
     * dot_seq(W row, X[t*ldx .. +K)). W points at tile 0 of the range. */
    void (*mm_bf16)(const uint16_t *W, int K, int ntiles, int nrows, const float *X, int ldx, int T,
                    float *Y, int ldy);
    void (*mm_f32)(const float *W, int K, int ntiles, int nrows, const float *X, int ldx, int T,
                   float *Y, int ldy);
    /* One query head over n keys (key j at k + j*stride): out[j] = dot_seq(q, k_j) * scale. */
    void (*scores)(const float *q, const float *k, size_t stride, int n, int hd, float scale,
                   float *out);
    /* ref_softmax, bit for bit. */
    void (*softmax)(float *s, int n);
    /* out[d] = sum over j in order of p[j] * v[j*stride + d]. */
    void (*vmix)(const float *p, const float *v, size_t stride, int n, int hd, float *out);
    /* ref_swiglu, bit for bit; NULL = the engine uses ref_swiglu. */
    void (*swiglu)(const float *gate, const float *up, float *out, int n);
    /* scores over transposed keys, kt[d*ld + j] (ld >= round_up(n, 8), pad
     * keys readable): bit for bit the `scores` kernel. NULL = not available. */
    void (*scores_t)(const float *q, const float *kt, size_t ld, int n, int hd, float scale,
                     float *out);
    /* V-mix for g heads sharing one V (a GQA group), one pass over V:
     * out[h*ldo + d] = sum over j in order of p[h*ldp + j] * v[j*stride + d]
     * — for each head bit for bit the `vmix` kernel. NULL = not available. */
    void (*vmix_g)(const float *p, size_t ldp, int g, const float *v, size_t stride, int n, int hd,
                   float *out, size_t ldo);
    /* Exact int8 (docs/quantization.md §2): W int8 tiles in the layout above,
     * S the row scales of those tiles, 16 per tile (cis2_weight_pack_i8); Y as
     * mm_f32 with each output s[r] * dot_seq((float)q[r, :], X[t]) — the
     * in-order sum, then one multiply. NULL = not available. */
    void (*mm_i8)(const int8_t *W, const float *S, int K, int ntiles, int nrows, const float *X,
                  int ldx, int T, float *Y, int ldy);
    /* Attention tiles (each NULL = not available; then the engine scores
     * and mixes one query at a time). kt_pack: kt[d*ld + j] = k[j*stride + d]
     * for j < n, d < hd, a pure copy. scores_tq: out[i*ldo + j] = dot_seq(q_i,
     * k_j) * scale for queries i < nq at q + i*ldq and keys j < n over kt as
     * kt_pack writes it (readable for j < round_up(n, 16); only j < n is
     * written) — for each output bit for bit the `scores` kernel. vmix_tq:
     * out[i*ldo + d] = sum over j < n0 + i*step, in order, of p[i*ldp + j] *
     * v[j*stride + d] — for each query bit for bit the `vmix` kernel. */
    void (*kt_pack)(const float *k, size_t stride, int n, int hd, float *kt, size_t ld);
    void (*scores_tq)(const float *q, size_t ldq, int nq, const float *kt, size_t ld, int n, int hd,
                      float scale, float *out, size_t ldo);
    void (*vmix_tq)(const float *p, size_t ldp, int nq, int n0, int step, const float *v,
                    size_t stride, int hd, float *out, size_t ldo);
    /* Decode V-mix over a slice of whole cache rows, one pass over V: the
     * row's 16-float vectors e0 <= e < e0 + ne (hd % 16 == 0); vector e is
     * dims 16e - kvh*hd.. of KV head kvh = 16e / hd, shared by query heads
     * kvh*g + i (i < g): out[h*ldo + d] = sum over j < n in order of
     * p[h*ldp + j] * v[j*stride + kvh*hd + d] — for each head bit for bit the
     * `vmix` kernel. NULL = not available (or g > 8: the engine's vmix_g). */
    void (*vmix_rows)(const float *p, size_t ldp, int g, const float *v, size_t stride, int n,
                      int hd, int e0, int ne, float *out, size_t ldo);
    /* The `softmax` kernel on rows i < m, row i at s + i*lds with n0 + i*step
     * entries (step >= 0): each row bit for bit ref_softmax. NULL = not
     * available (the engine runs `softmax` row by row). */
    void (*softmax_rows)(float *s, size_t lds, int m, int n0, int step);
    /* ref_add, bit for bit (h[i] + x[i], §5.4's residual). NULL = ref_add. */
    void (*add)(float *h, const float *x, int n);
    /* cis2_argmax(x, n) (§11.2: the first maximum; a NaN is never one) and,
     * in *first_nan, the index of the first NaN or -1. NULL = scalar loops. */
    int32_t (*scan)(const float *x, int n, int *first_nan);
    /* ref_rmsnorm (§8) on rows r < m: row r at x + r*ldx, its output at
     * out + r*ldo (out may alias x) — each row bit for bit. NULL = row by
     * row. */
    void (*rmsnorm_rows)(const float *x, size_t ldx, const float *w, int n, float eps, float *out,
                         size_t ldo, int m);
    /* ref_rope_rotate (§7.4) on nh consecutive heads of hd values at x, each
     * bit for bit. NULL = head by head. */
    void (*rope)(float *x, int nh, int hd, const float *cos_v, const float *sin_v);
} fast_kernels;

/* rmsnorm_rows for any ISA (kernels_scalar.c): each row's §5.3 sum of
 * squares one accumulator, strictly in order, up to 8 rows' sums side by
 * side (their add latencies overlap); then each row's last loop through
 * `scale` (out[i] = (x[i]*inv)*w[i], an ISA's vectorized form; NULL = the
 * scalar loop of cis2_fmul). */
void fast_rmsnorm_rows_by(const float *x, size_t ldx, const float *w, int n, float eps, float *out,
                          size_t ldo, int m,
                          void (*scale)(const float *x, float inv, const float *w, float *out,
                                        int n));
void fast_rmsnorm_rows(const float *x, size_t ldx, const float *w, int n, float eps, float *out,
                       size_t ldo, int m);

/* x86-64, AVX-512F CPUs only: x[i] = cis2_exp_pinned(x[i]) for i < n, 16
 * lanes at a time, bit for bit (the softmax's exp; tests sweep it). */
void fast_avx512_exp_pinned_n(float *x, int n);

/* Each ISA path's table, in its kernels_<isa>.c, and the CPU check of the
 * paths not every CPU of their platform has; each exists only on the
 * platform its file compiles code for (the same conditions as there). */
extern const fast_kernels fast_kernels_scalar;
#if defined(__x86_64__)
extern const fast_kernels fast_kernels_sse2, fast_kernels_avx2, fast_kernels_avx512;
int fast_avx2_available(void);
int fast_avx512_available(void); /* AVX-512F and AVX2 */
#endif
#if defined(__aarch64__)
extern const fast_kernels fast_kernels_neon;
#endif
#if defined(__wasm_simd128__)
extern const fast_kernels fast_kernels_wasm128; /* wasm32 with SIMD128 */
#endif

/* The ISA registry (pick.c): every ISA path, once, with its name (as
 * cis2_isa_to_name and cis2_isa_from_name spell it), its public enum value,
 * its availability check and its table — NULL both where this build's
 * platform has no code for it. In the public enum's order, which on each
 * platform goes from the plainest path to the widest: "auto" takes the last
 * one available. Whatever lists ISAs (names, picking, the tests' sweeps)
 * iterates it. */
typedef struct {
    const char *name;
    cis2_isa isa;
    int (*available)(void);
    const fast_kernels *kernels;
} fast_isa;
enum { FAST_N_ISAS = 6 };
extern const fast_isa fast_isas[FAST_N_ISAS];
/* i's table when this build and CPU can run it, else NULL. */
const fast_kernels *fast_isa_kernels(const fast_isa *i);
/* By name ("scalar", "sse2", "avx2", "avx512", "neon", "wasm128") or the best available
 * for NULL. Writes a message into err when the name is unknown/unsupported. */
const fast_kernels *fast_kernels_pick(const char *isa, char *err);

#endif
