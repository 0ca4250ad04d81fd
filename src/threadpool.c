/* A persistent pthread pool for the fast backend (issue 5). Workers spin
 * briefly on a generation counter (decode issues hundreds of small parallel
 * regions per token), then sleep on a condition variable. Tasks are handed
 * out by an atomic counter; a task is a whole set of outputs, so no sum ever
 * crosses threads. Each worker pins FTZ/DAZ (§1.3) before its first task. */
#include "fast.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_ITERS 20000

struct tp_pool {
    int n;                       /* threads including the caller */
    pthread_t *th;
    int started;
    _Atomic unsigned gen;
    _Atomic int next;
    _Atomic int active;
    _Atomic int sleepers;
    _Atomic int quit;
    int ntasks;
    tp_fn fn;
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

typedef struct { tp_pool *p; int tid; } worker_arg;

static void run_tasks(tp_pool *p, int tid)
{
    int nt = p->ntasks;
    for (;;) {
        int k = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (k >= nt) break;
        p->fn(p->ctx, k, tid);
    }
}

static void *worker(void *arg)
{
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    tp_pool *p = wa.p;
    if (cis2_fpenv_pin() != 0 || !cis2_fpenv_is_pinned()) {
        fprintf(stderr, "cis2: worker thread %d cannot pin FTZ/DAZ (control register 0x%llx); refusing to run (§1.3)\n",
                wa.tid, (unsigned long long)cis2_fpenv_read());
        abort();
    }
    unsigned seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen && !atomic_load(&p->quit)) {
            if (++spins < SPIN_ITERS) {
                CPU_RELAX();
                if ((spins & 255) == 0) sched_yield();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        run_tasks(p, wa.tid);
        atomic_fetch_sub_explicit(&p->active, 1, memory_order_release);
    }
    return NULL;
}

tp_pool *tp_new(int nthreads, char *err)
{
    if (nthreads < 1) nthreads = 1;
    tp_pool *p = calloc(1, sizeof *p);
    if (!p) { snprintf(err, CIS2_ERR_LEN, "out of memory"); return NULL; }
    p->n = nthreads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (nthreads > 1) {
        p->th = calloc((size_t)nthreads, sizeof *p->th);
        if (!p->th) { tp_free(p); snprintf(err, CIS2_ERR_LEN, "out of memory"); return NULL; }
        for (int i = 1; i < nthreads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa) { tp_free(p); snprintf(err, CIS2_ERR_LEN, "out of memory"); return NULL; }
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
    }
    return p;
}

int tp_threads(const tp_pool *p) { return p->n; }

void tp_run(tp_pool *p, int ntasks, tp_fn fn, void *ctx)
{
    if (ntasks <= 0) return;
    if (p->n == 1 || ntasks == 1) {
        for (int k = 0; k < ntasks; k++) fn(ctx, k, 0);
        return;
    }
    p->ntasks = ntasks;
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->active, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1);   /* seq_cst: pairs with the sleepers check */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_tasks(p, 0);
    int spins = 0;
    while (atomic_load_explicit(&p->active, memory_order_acquire) > 0) {
        CPU_RELAX();
        if ((++spins & 255) == 0) sched_yield();
    }
}

void tp_free(tp_pool *p)
{
    if (!p) return;
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->quit, 1);
        atomic_fetch_add(&p->gen, 1);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i <= p->started; i++) pthread_join(p->th[i], NULL);
    }
    free(p->th);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
