/* The fast backend's internals (issue 5): packed weight tiles, the per-ISA
 * kernel table, the thread pool. Every kernel computes each output element as
 * the same sequence of separately rounded operations as the scalar reference:
 * one accumulator per output, terms added k = 0, 1, 2, ... in order; SIMD
 * lanes and threads only ever run ACROSS outputs (rows, keys, dims, tokens). */
#ifndef CIS2_FAST_H
#define CIS2_FAST_H
#include "backend.h"

/* Row-interleaved tiles: tile i holds rows 16i..16i+15; element k of those 16
 * rows is adjacent: data[(i*K + k)*16 + lane]. Rows past `rows` are zero. */
#define FAST_TILE 16

typedef struct {
    int rows, cols, ntiles;
    int bf16;          /* 1: uint16_t bf16 bits (widened in registers by <<16), 0: f32 */
    void *data;        /* 64-byte aligned */
    size_t bytes;
    size_t map_len;    /* nonzero: data is an anonymous mapping of this length */
    int borrowed;      /* data lies in a caller's arena (fast_pack_at): never freed here */
} fast_packed;

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
    void (*scores)(const float *q, const float *k, size_t stride, int n, int hd, float scale, float *out);
    /* ref_softmax, bit for bit. */
    void (*softmax)(float *s, int n);
    /* out[d] = sum over j in order of p[j] * v[j*stride + d]. */
    void (*vmix)(const float *p, const float *v, size_t stride, int n, int hd, float *out);
    /* ref_swiglu, bit for bit; NULL = the engine uses ref_swiglu. */
    void (*swiglu)(const float *gate, const float *up, float *out, int n);
    /* scores over transposed keys, kt[d*ld + j] (ld >= round_up(n, 8), pad
     * keys readable): bit for bit the `scores` kernel. NULL = not available. */
    void (*scores_t)(const float *q, const float *kt, size_t ld, int n, int hd, float scale, float *out);
    /* V-mix for g heads sharing one V (a GQA group), one pass over V:
     * out[h*ldo + d] = sum over j in order of p[h*ldp + j] * v[j*stride + d]
     * — for each head bit for bit the `vmix` kernel. NULL = not available. */
    void (*vmix_g)(const float *p, size_t ldp, int g, const float *v, size_t stride, int n, int hd, float *out, size_t ldo);
} fast_kernels;

/* NULL when the ISA is not compiled for this platform or the CPU lacks it. */
const fast_kernels *fast_kernels_scalar(void);
const fast_kernels *fast_kernels_sse2(void);
const fast_kernels *fast_kernels_avx2(void);
const fast_kernels *fast_kernels_avx512(void);
const fast_kernels *fast_kernels_neon(void);
/* By name ("scalar", "sse2", "avx2", "avx512", "neon") or the best available
 * for NULL. Writes a message into err when the name is unknown/unsupported. */
const fast_kernels *fast_kernels_pick(const char *isa, char *err);

/* Pack one linear (any dtype) into tiles. */
int  fast_pack(const cis2_linear *w, fast_packed *p, char *err);
/* Bytes (a multiple of 64) fast_pack_at writes for w; pack into caller
 * memory dst (64-byte aligned; returns 1 otherwise). Bit-identical to fast_pack. */
size_t fast_pack_bytes(const cis2_linear *w);
int  fast_pack_at(const cis2_linear *w, fast_packed *p, void *dst);
void fast_packed_free(fast_packed *p);

/* A fast backend over no model (tests): matmul reads w->packed. */
int  cis2_backend_fast_create(cis2_backend **b, const char *isa, int threads, char *err);

/* Persistent pthread pool. Every worker pins FTZ/DAZ and checks it before its
 * first task (aborts with a message otherwise). tp_run runs fn(ctx, task, tid)
 * for task = 0..ntasks-1 on all threads (the caller is thread 0) and returns
 * when every task is done. */
typedef struct tp_pool tp_pool;
typedef void (*tp_fn)(void *ctx, int task, int tid);
tp_pool *tp_new(int nthreads, char *err);
int      tp_threads(const tp_pool *p);
void     tp_run(tp_pool *p, int ntasks, tp_fn fn, void *ctx);
void     tp_free(tp_pool *p);
/* tp_start publishes tasks to the workers only and returns 1 at once (0: it
 * did nothing — one thread, <= 1 task — and the caller must tp_run
 * instead); the caller may block on something else meanwhile, then
 * tp_finish runs what is left on the caller too and waits for all. No other
 * tp_run may come between the two. */
int      tp_start(tp_pool *p, int ntasks, tp_fn fn, void *ctx);
void     tp_finish(tp_pool *p);
#endif
