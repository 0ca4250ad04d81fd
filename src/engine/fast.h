/* The fast backend's internals: packed weight tiles and the persistent thread
 * pool. Threads, like SIMD lanes, only ever run ACROSS outputs (rows, keys,
 * dims, tokens), never inside a sum (§5.1). */
#ifndef CIS2_FAST_H
#define CIS2_FAST_H
#include "engine/backend.h"
#include "kernels/fast_kernels.h"

typedef struct {
    int rows, cols, ntiles;
    int bf16;   /* 1: uint16_t bf16 bits (widened in registers by <<16), 0: f32 */
    void *data; /* 64-byte aligned */
    size_t bytes;
    size_t map_len; /* nonzero: data is an anonymous mapping of this length */
    int borrowed;   /* data lies in a caller's arena (fast_pack_at): never freed here */
} fast_packed;

/* Pack one linear (any dtype) into tiles. */
int fast_pack(const cis2_linear *w, fast_packed *p, char *err);
/* Bytes (a multiple of 64) fast_pack_at writes for w; pack into caller
 * memory dst (64-byte aligned; returns 1 otherwise). Bit-identical to fast_pack. */
size_t fast_pack_bytes(const cis2_linear *w);
int fast_pack_at(const cis2_linear *w, fast_packed *p, void *dst);
void fast_packed_free(fast_packed *p);

/* A fast backend over no model (tests): matmul reads w->packed. */
int cis2_backend_fast_create(cis2_backend **b, const char *isa, int threads, char *err);

/* Persistent pthread pool. Every worker pins FTZ/DAZ and checks it before its
 * first task (aborts with a message otherwise). tp_run runs fn(ctx, task, tid)
 * for task = 0..ntasks-1 on all threads (the caller is thread 0) and returns
 * when every task is done. */
typedef struct tp_pool tp_pool;
typedef void (*tp_fn)(void *ctx, int task, int tid);
tp_pool *tp_new(int nthreads, char *err);
int tp_threads(const tp_pool *p);
void tp_run(tp_pool *p, int ntasks, tp_fn fn, void *ctx);
void tp_free(tp_pool *p);
/* tp_start publishes tasks to the workers only and returns 1 at once (0: it
 * did nothing — one thread, <= 1 task — and the caller must tp_run
 * instead); the caller may block on something else meanwhile, then
 * tp_finish runs what is left on the caller too and waits for all. No other
 * tp_run may come between the two. */
int tp_start(tp_pool *p, int ntasks, tp_fn fn, void *ctx);
void tp_finish(tp_pool *p);
#endif
