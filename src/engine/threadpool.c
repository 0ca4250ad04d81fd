/* A persistent pthread pool for the fast backend. Workers spin
 * briefly on a generation counter (decode issues hundreds of small parallel
 * regions per token), then sleep on a condition variable. Tasks are handed
 * out by an atomic counter; a task is a whole set of outputs, so no sum ever
 * crosses threads. Each worker pins FTZ/DAZ (§1.3) before its first task. */
#include "engine/fast.h"
#if defined(__wasm__)
/* wasm32-wasi (the browser verifier) has no threads: a pool of one thread,
 * the caller, which runs every task itself in order. */
#include <stdlib.h>
struct tp_pool {
    int n;
};
tp_pool *tp_new(int nthreads, char *err)
{
    (void)nthreads;
    tp_pool *p = calloc(1, sizeof *p);
    if (!p) snprintf(err, CIS2_ERR_LEN, "out of memory");
    else p->n = 1;
    return p;
}
int tp_threads(const tp_pool *p) { return p->n; }
void tp_run(tp_pool *p, int ntasks, tp_fn fn, void *ctx)
{
    (void)p;
    for (int k = 0; k < ntasks; k++) fn(ctx, k, 0);
}
void tp_run_split(tp_pool *p, int ntasks, tp_fn fn, void *ctx) { tp_run(p, ntasks, fn, ctx); }
void tp_prefetch(tp_pool *p, int n, const void *const *base, const size_t *len)
{
    (void)p, (void)n, (void)base, (void)len;
}
void tp_side(tp_pool *p, void (*fn)(void *ctx), void *ctx)
{
    (void)p;
    fn(ctx);
}
void tp_side_wait(tp_pool *p) { (void)p; }
void tp_free(tp_pool *p) { free(p); }
#else
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#define PREFETCH(a) _mm_prefetch((const char *)(a), _MM_HINT_T1)
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif
#ifndef PREFETCH
#define PREFETCH(a) __builtin_prefetch((const void *)(a), 0, 2)
#endif

#define SPIN_ITERS 20000

/* The claim word: generation (24 bits) | ntasks (20 bits) | next task (20 bits).
 * A task is claimed by CAS on the whole word, so a worker that wakes late
 * (descheduled on a busy machine) can never claim a task of a finished job,
 * and the caller never waits for idle workers to check in: it waits only for
 * its tasks to be done. Jobs with more tasks than fit run in rounds. */
#define GEN_SHIFT  40
#define NT_SHIFT   20
#define FIELD_MASK ((1ull << 20) - 1)
#define MAX_TASKS  ((int)FIELD_MASK)

struct tp_pool {
    int n; /* threads including the caller */
    pthread_t *th;
    int started;
    /* claim, done and the prefetch range on cache lines of their own: the
     * caller polls done while a worker claims and a waiting one prefetches */
    _Alignas(64) _Atomic uint64_t claim;
    _Atomic int sleepers;
    _Atomic int quit;
    _Alignas(64) _Atomic int done;
    /* Idle prefetch: ranges [pf_b[i], pf_e[i]) for pf_i <= i < pf_n, the
     * current one's bytes [pf_next, pf_end), that a waiting thread pulls
     * toward its cache, PF_CHUNK at a time (a hint: prefetches never fault,
     * so a torn read of these words costs at most a useless prefetch). */
    _Alignas(64) _Atomic uintptr_t pf_next, pf_end;
    _Atomic int pf_i, pf_n;
    _Atomic uintptr_t pf_b[TP_PF_MAX], pf_e[TP_PF_MAX];
    /* The side job (tp_side): SIDE_NONE, SIDE_POSTED, SIDE_RUNNING or SIDE_DONE. */
    _Alignas(64) _Atomic int side;
    void (*side_fn)(void *ctx);
    void *side_ctx;
    _Alignas(64) unsigned gen; /* caller only */
    int base;                  /* task index offset of this round */
    _Atomic int split;         /* this round is a split job */
    /* Split jobs (tp_run_split): thread t's run of tasks, one word per
     * thread on a line of its own: generation | front | back, the fields as
     * in the claim word. Its owner takes the front, others the back. */
    _Atomic uint64_t *run;
    /* Start-up (tp_new waits for it): workers that have checked their
     * FTZ/DAZ pin, and the first one that could not pin (its id, its
     * control register), or 0. */
    int checked, unpinned;
    uint64_t unpinned_reg;
    tp_fn fn;
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

typedef struct {
    tp_pool *p;
    int tid;
} worker_arg;

#define PF_CHUNK   2048

/* One chunk of the idle-prefetch ranges (moving to the next range when one
 * is used up); 0 when none is left. */
static int idle_prefetch(tp_pool *p)
{
    uintptr_t end = atomic_load_explicit(&p->pf_end, memory_order_relaxed);
    if (atomic_load_explicit(&p->pf_next, memory_order_relaxed) >= end) {
        int i = atomic_load_explicit(&p->pf_i, memory_order_relaxed);
        if (i >= atomic_load_explicit(&p->pf_n, memory_order_relaxed)) return 0;
        if (atomic_compare_exchange_strong_explicit(&p->pf_i, &i, i + 1, memory_order_relaxed,
                                                    memory_order_relaxed)) {
            atomic_store_explicit(&p->pf_end, 0, memory_order_relaxed);
            atomic_store_explicit(&p->pf_next, atomic_load(&p->pf_b[i]), memory_order_relaxed);
            atomic_store_explicit(&p->pf_end, atomic_load(&p->pf_e[i]), memory_order_relaxed);
        }
        return 1;
    }
    uintptr_t a = atomic_fetch_add_explicit(&p->pf_next, PF_CHUNK, memory_order_relaxed);
    if (a >= end) return 1;
    uintptr_t b = end - a < PF_CHUNK ? end : a + PF_CHUNK;
    for (; a < b; a += 64) PREFETCH(a);
    return 1;
}

void tp_prefetch(tp_pool *p, int n, const void *const *base, const size_t *len)
{
    if (n > TP_PF_MAX) n = TP_PF_MAX;
    atomic_store_explicit(&p->pf_n, 0, memory_order_relaxed);
    atomic_store_explicit(&p->pf_end, 0, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        atomic_store_explicit(&p->pf_b[i], (uintptr_t)base[i] & ~(uintptr_t)63,
                              memory_order_relaxed);
        atomic_store_explicit(&p->pf_e[i], (uintptr_t)base[i] + len[i], memory_order_relaxed);
    }
    atomic_store_explicit(&p->pf_i, 0, memory_order_relaxed);
    atomic_store_explicit(&p->pf_n, n, memory_order_relaxed);
}

enum { SIDE_NONE, SIDE_POSTED, SIDE_RUNNING, SIDE_DONE };

/* Runs the posted side job if no other thread has taken it; 0 if none. */
static int side_take(tp_pool *p)
{
    int want = SIDE_POSTED;
    if (atomic_load_explicit(&p->side, memory_order_relaxed) != SIDE_POSTED ||
        !atomic_compare_exchange_strong_explicit(&p->side, &want, SIDE_RUNNING,
                                                 memory_order_acquire, memory_order_relaxed))
        return 0;
    p->side_fn(p->side_ctx);
    atomic_store_explicit(&p->side, SIDE_DONE, memory_order_release);
    return 1;
}

void tp_side(tp_pool *p, void (*fn)(void *ctx), void *ctx)
{
    tp_side_wait(p);
    if (p->n == 1) {
        fn(ctx);
        return;
    }
    p->side_fn = fn;
    p->side_ctx = ctx;
    atomic_store(&p->side, SIDE_POSTED); /* seq_cst: before reading sleepers, as publish */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

void tp_side_wait(tp_pool *p)
{
    if (atomic_load_explicit(&p->side, memory_order_acquire) == SIDE_NONE) return;
    side_take(p); /* not started yet: the caller runs it */
    while (atomic_load_explicit(&p->side, memory_order_acquire) != SIDE_DONE) CPU_RELAX();
    atomic_store_explicit(&p->side, SIDE_NONE, memory_order_relaxed);
}

/* Claim and run tasks of generation `g`; returns when none are left. */
static void run_tasks(tp_pool *p, uint64_t g, int tid)
{
    uint64_t v = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if ((v >> GEN_SHIFT) != g) return;
        uint64_t nt = (v >> NT_SHIFT) & FIELD_MASK, i = v & FIELD_MASK;
        if (i >= nt) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        /* Task i of generation g is ours and not done, so the job is live. */
        p->fn(p->ctx, p->base + (int)i, tid);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        v = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

/* Thread t's run word: RUN_STRIDE words apart, a cache line each. */
#define RUN_STRIDE 8
static _Atomic uint64_t *run_word(tp_pool *p, int t) { return p->run + (size_t)t * RUN_STRIDE; }

/* Takes one task of generation g from run t: its front when run t is the
 * taking thread's own, else its back; -1 when the run is empty or the job
 * is over. */
static int take(tp_pool *p, uint64_t g, int t, int own)
{
    _Atomic uint64_t *w = run_word(p, t);
    uint64_t v = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        if ((v >> GEN_SHIFT) != g) return -1;
        uint64_t front = (v >> NT_SHIFT) & FIELD_MASK, back = v & FIELD_MASK;
        if (front >= back) return -1;
        uint64_t nv = own ? v + (1ull << NT_SHIFT) : v - 1;
        if (atomic_compare_exchange_weak_explicit(w, &v, nv, memory_order_acq_rel,
                                                  memory_order_acquire))
            return (int)(own ? front : back - 1);
    }
}

/* A split job of generation g: this thread's own run front to back, then
 * the others' runs from their backs, nearest thread first. */
static void run_split(tp_pool *p, uint64_t g, int tid)
{
    for (int k = 0; k < p->n; k++) {
        int t = (tid + k) % p->n, i;
        while ((i = take(p, g, t, k == 0)) >= 0) {
            p->fn(p->ctx, p->base + i, tid);
            atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        }
    }
}

static void *worker(void *arg)
{
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    tp_pool *p = wa.p;
    /* §1.3: a worker that cannot pin runs nothing; tp_new refuses the pool */
    int pinned = cis2_fpenv_pin() == 0 && cis2_fpenv_is_pinned();
    pthread_mutex_lock(&p->mu);
    if (!pinned && !p->unpinned) {
        p->unpinned = wa.tid;
        p->unpinned_reg = cis2_fpenv_read();
    }
    p->checked++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (!pinned) return NULL;
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        while ((atomic_load_explicit(&p->claim, memory_order_acquire) >> GEN_SHIFT) == seen &&
               !atomic_load(&p->quit)) {
            if (side_take(p) || idle_prefetch(p)) continue;
            if (++spins < SPIN_ITERS) {
                CPU_RELAX();
                if ((spins & 255) == 0) sched_yield();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((atomic_load(&p->claim) >> GEN_SHIFT) == seen && !atomic_load(&p->quit) &&
                   atomic_load(&p->side) != SIDE_POSTED)
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = atomic_load_explicit(&p->claim, memory_order_acquire) >> GEN_SHIFT;
        /* `split` may be a later job's already; then the word this thread
         * reads carries another generation, or is a split job's claim word
         * with no task left in it: it takes nothing */
        if (atomic_load_explicit(&p->split, memory_order_relaxed)) run_split(p, seen, wa.tid);
        else run_tasks(p, seen, wa.tid);
    }
    return NULL;
}

tp_pool *tp_new(int nthreads, char *err)
{
    if (nthreads < 1) nthreads = 1;
    tp_pool *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63); /* its _Alignas lines */
    if (p) memset(p, 0, sizeof *p);
    if (!p) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return NULL;
    }
    p->n = nthreads;
    p->run = aligned_alloc(64, (size_t)nthreads * RUN_STRIDE * sizeof *p->run);
    if (!p->run) {
        free(p);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return NULL;
    }
    for (int t = 0; t < nthreads; t++) atomic_init(run_word(p, t), 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (nthreads > 1) {
        p->th = calloc((size_t)nthreads, sizeof *p->th);
        if (!p->th) {
            tp_free(p);
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            return NULL;
        }
        for (int i = 1; i < nthreads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa) {
                tp_free(p);
                snprintf(err, CIS2_ERR_LEN, "out of memory");
                return NULL;
            }
            wa->p = p;
            wa->tid = i;
            int rc = pthread_create(&p->th[i], NULL, worker, wa);
            if (rc) {
                free(wa);
                tp_free(p);
                snprintf(err, CIS2_ERR_LEN, "cannot start worker thread %d: %s", i, strerror(rc));
                return NULL;
            }
            p->started = i;
        }
        pthread_mutex_lock(&p->mu);
        while (p->checked < p->started) pthread_cond_wait(&p->cv, &p->mu);
        int bad = p->unpinned;
        uint64_t reg = p->unpinned_reg;
        pthread_mutex_unlock(&p->mu);
        if (bad) {
            tp_free(p);
            snprintf(err, CIS2_ERR_LEN,
                     "worker thread %d cannot pin FTZ/DAZ (control register 0x%llx); refusing to "
                     "run (§1.3)",
                     bad, (unsigned long long)reg);
            return NULL;
        }
    }
    return p;
}

int tp_threads(const tp_pool *p) { return p->n; }

/* Publishes one round of tasks (nt <= MAX_TASKS), split into the threads'
 * runs or not; returns its generation. */
static uint64_t publish(tp_pool *p, int base, int nt, int split, tp_fn fn, void *ctx)
{
    p->fn = fn;
    p->ctx = ctx;
    p->base = base;
    atomic_store_explicit(&p->split, split, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    p->gen = (p->gen + 1) & 0xFFFFFFu;
    if (p->gen == 0) p->gen = 1; /* workers start with seen = 0 */
    uint64_t g = p->gen;
    for (int t = 0; split && t < p->n; t++) /* thread t: [nt*t/n, nt*(t+1)/n) */
        atomic_store_explicit(run_word(p, t),
                              (g << GEN_SHIFT) | ((uint64_t)nt * t / p->n << NT_SHIFT) |
                                  ((uint64_t)nt * (t + 1) / p->n),
                              memory_order_relaxed);
    /* A split job's claim word has no task left to claim (next = nt), so a
     * thread that read a later job's `split` = 0 claims nothing through it.
     * seq_cst: after `split` and the runs' words; pairs with sleepers. */
    atomic_store(&p->claim,
                 (g << GEN_SHIFT) | ((uint64_t)nt << NT_SHIFT) | (split ? (uint64_t)nt : 0));
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return g;
}

static void finish(tp_pool *p, uint64_t g, int nt)
{
    if (atomic_load_explicit(&p->split, memory_order_relaxed)) run_split(p, g, 0);
    else run_tasks(p, g, 0);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < nt) {
        if (idle_prefetch(p)) continue;
        CPU_RELAX();
        if ((++spins & 255) == 0) sched_yield();
    }
}

void tp_run(tp_pool *p, int ntasks, tp_fn fn, void *ctx)
{
    if (ntasks <= 0) return;
    if (p->n == 1 || ntasks == 1) {
        for (int k = 0; k < ntasks; k++) fn(ctx, k, 0);
        return;
    }
    for (int base = 0; base < ntasks; base += MAX_TASKS) {
        int nt = ntasks - base < MAX_TASKS ? ntasks - base : MAX_TASKS;
        finish(p, publish(p, base, nt, 0, fn, ctx), nt);
    }
}

void tp_run_split(tp_pool *p, int ntasks, tp_fn fn, void *ctx)
{
    if (p->n == 1 || ntasks <= 1 || ntasks > MAX_TASKS) tp_run(p, ntasks, fn, ctx);
    else finish(p, publish(p, 0, ntasks, 1, fn, ctx), ntasks);
}

void tp_free(tp_pool *p)
{
    if (!p) return;
    tp_side_wait(p);
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->quit, 1);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i <= p->started; i++) pthread_join(p->th[i], NULL);
    }
    free(p->th);
    free(p->run);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
#endif
