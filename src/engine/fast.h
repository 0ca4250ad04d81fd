/* The fast backend's internals: a backend over no model (tests, bench) and
 * the persistent thread pool. Threads, like SIMD lanes, only ever run
 * ACROSS outputs (rows, keys, dims, tokens), never inside a sum (§5.1). */
#ifndef CIS2_FAST_H
#define CIS2_FAST_H
#include "engine/backend.h"
#include "kernels/fast_kernels.h"

/* A fast backend over no model (tests, bench): matmul reads w->tiles. */
int cis2_backend_fast_create(cis2_backend **b, const char *isa, int threads, char *err);

/* Persistent pthread pool. Every worker pins FTZ/DAZ and checks it before its
 * first task; tp_new waits for all of them and returns NULL with err when one
 * could not pin (§1.3). tp_run runs fn(ctx, task, tid)
 * for task = 0..ntasks-1 on all threads (the caller is thread 0) and returns
 * when every task is done. */
typedef struct tp_pool tp_pool;
typedef void (*tp_fn)(void *ctx, int task, int tid);
tp_pool *tp_new(int nthreads, char *err);
int tp_threads(const tp_pool *p);
void tp_run(tp_pool *p, int ntasks, tp_fn fn, void *ctx);
/* tp_run, with the tasks cut into one contiguous run per thread: thread t
 * runs the t-th run front to back, then takes what is left of the others'
 * runs from their backs. A thread's tasks stay neighbours (for a matmul, one
 * weight stream), and a late thread's are still done by the others. */
void tp_run_split(tp_pool *p, int ntasks, tp_fn fn, void *ctx);
/* A hint: threads waiting for work or for a job's last task pull bytes
 * [base[i], base[i] + len[i]) toward their caches, i = 0..n-1 in order
 * (n <= TP_PF_MAX), until the ranges are used up or replaced. Touches no
 * values, so no result depends on it. */
#define TP_PF_MAX 4
void tp_prefetch(tp_pool *p, int n, const void *const *base, const size_t *len);
/* One side job beside the jobs to come: a thread that would otherwise wait
 * for work runs fn(ctx) once (meanwhile the other threads claim every
 * task), and tp_side_wait returns once it has run (running it on the
 * caller if no thread has taken it yet). One at a time: tp_side first waits
 * for the last one. fn touches nothing those jobs touch. */
void tp_side(tp_pool *p, void (*fn)(void *ctx), void *ctx);
void tp_side_wait(tp_pool *p);
void tp_free(tp_pool *p);
#endif
