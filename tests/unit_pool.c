/* The fast backend's thread pool (src/engine/threadpool.c), which every
 * parallel kernel and the engine's side-thread witness stand on: tp_run and
 * tp_run_split run every task exactly once, a split job's runs go front to
 * back and a slow thread's run is finished from its back, and a side job
 * runs exactly once, on an idle worker when there is one, its writes seen
 * by the caller after tp_side_wait. Plain (non-atomic) writes are used where
 * the pool promises ordering, so a ThreadSanitizer build (make test-tsan)
 * checks the promise. Native only: wasm32 has no threads, and its pool is
 * the caller alone (threadpool.c), which every wasm kernel test runs on. */
#include "unit.h"
#include "engine/fast.h"
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static const int THREADS[] = { 1, 2, 3, 7 };

static tp_pool *pool_or_fail(int nth)
{
    char err[CIS2_ERR_LEN];
    tp_pool *p = tp_new(nth, err);
    if (!p) {
        printf("FAIL tp_new(%d): %s\n", nth, err);
        unit_failed++;
    }
    return p;
}

/* tp_run_split: every task runs exactly once (threads 1, 2, 3, 7; 1..200
 * tasks; jobs back to back), each thread takes its own run front to back,
 * and a slow thread's run is finished from its back by the other. */
enum { SPLIT_MAX = 200, SPLIT_THREADS = 8 };
typedef struct {
    _Atomic int hits[SPLIT_MAX];
    int who[SPLIT_MAX];
    int seq[SPLIT_THREADS][SPLIT_MAX], nseq[SPLIT_THREADS];
    int slow_tid; /* this thread sleeps 3 ms in every task; -1: none */
} split_ctx;
static void split_task(void *ctx, int i, int tid)
{
    split_ctx *c = ctx;
    atomic_fetch_add(&c->hits[i], 1);
    c->who[i] = tid;
    c->seq[tid][c->nseq[tid]++] = i;
    if (tid == c->slow_tid) nanosleep(&(struct timespec){ 0, 3000000 }, NULL);
}
static void split_reset(split_ctx *c, int slow_tid)
{
    for (int i = 0; i < SPLIT_MAX; i++) atomic_store(&c->hits[i], 0);
    memset(c->who, -1, sizeof c->who);
    memset(c->nseq, 0, sizeof c->nseq);
    c->slow_tid = slow_tid;
}
/* Tasks of a thread's own run [n*t/nth, n*(t+1)/nth) out of order: counted. */
static int split_order_bad(const split_ctx *c, int n, int nth)
{
    int bad = 0;
    for (int t = 0; t < nth; t++) {
        int lo = n * t / nth, hi = n * (t + 1) / nth, last = -1;
        for (int k = 0; k < c->nseq[t]; k++) {
            int i = c->seq[t][k];
            if (i < lo || i >= hi) continue;
            if (i <= last) bad++;
            last = i;
        }
    }
    return bad;
}
static void test_pool_split(void)
{
    static split_ctx c;
    static const int N[] = { 1, 2, 3, 5, 8, 13, 64, 199, 200 };
    char name[160];
    for (size_t ti = 0; ti < sizeof THREADS / sizeof *THREADS; ti++) {
        int nth = THREADS[ti], bad = 0, order = 0, jobs = 0;
        tp_pool *p = pool_or_fail(nth);
        if (!p) continue;
        for (int rep = 0; rep < 20; rep++)
            for (size_t k = 0; k < sizeof N / sizeof *N; k++, jobs++) {
                split_reset(&c, -1);
                tp_run_split(p, N[k], split_task, &c);
                for (int i = 0; i < SPLIT_MAX; i++) bad += atomic_load(&c.hits[i]) != (i < N[k]);
                order += split_order_bad(&c, N[k], nth);
            }
        snprintf(name, sizeof name,
                 "pool split threads=%d: %d jobs of 1-200 tasks, each task once, each run in "
                 "order",
                 nth, jobs);
        CHECK(name, bad == 0 && order == 0, "%d tasks not run exactly once, %d out of order", bad,
              order);
        if (tp_threads(p) == 2) {
            /* a slow worker: the caller takes the back of its run (task 7);
             * a slow caller: the worker takes the back of the caller's (3).
             * Up to 3 tries each: a descheduled thread may take its own. */
            int stole[2] = { 0, 0 }, once = 1;
            for (int slow = 0; slow < 2; slow++)
                for (int tryn = 0; tryn < 3 && !stole[slow]; tryn++) {
                    split_reset(&c, slow);
                    tp_run_split(p, 8, split_task, &c);
                    for (int i = 0; i < 8; i++) once &= atomic_load(&c.hits[i]) == 1;
                    stole[slow] = c.who[slow ? 7 : 3] == !slow;
                }
            CHECK("pool split threads=2: a slow thread's run is finished by the other from its "
                  "back, each task once",
                  stole[0] && stole[1] && once,
                  "slow caller: worker took task 3 %s; slow worker: "
                  "caller took task 7 %s; each once %s",
                  stole[0] ? "yes" : "no", stole[1] ? "yes" : "no", once ? "yes" : "no");
        }
        tp_free(p);
    }
}

/* tp_run: every task exactly once, each writing only its own slot (plain
 * writes, read by the caller after tp_run returns); job sizes around a
 * multiple of the threads and one task. */
enum { RUN_MAX = 1000 };
typedef struct {
    int slot[RUN_MAX];
    int tid_ok;
    int nth;
} run_ctx;
static void run_task(void *ctx, int i, int tid)
{
    run_ctx *c = ctx;
    c->slot[i] += i + 1;
    if (tid < 0 || tid >= c->nth) c->tid_ok = 0; /* a benign race: only ever cleared */
}
static void test_pool_run(void)
{
    static run_ctx c;
    static const int N[] = { 1, 2, 3, 7, 8, 64, 999, 1000 };
    char name[160];
    for (size_t ti = 0; ti < sizeof THREADS / sizeof *THREADS; ti++) {
        tp_pool *p = pool_or_fail(THREADS[ti]);
        if (!p) continue;
        int bad = 0, jobs = 0;
        c.tid_ok = 1;
        c.nth = tp_threads(p);
        for (int rep = 0; rep < 10; rep++)
            for (size_t k = 0; k < sizeof N / sizeof *N; k++, jobs++) {
                memset(c.slot, 0, sizeof c.slot);
                tp_run(p, N[k], run_task, &c);
                for (int i = 0; i < RUN_MAX; i++) bad += c.slot[i] != (i < N[k] ? i + 1 : 0);
            }
        snprintf(name, sizeof name, "pool run threads=%d: %d jobs of 1-1000 tasks, each task once",
                 THREADS[ti], jobs);
        CHECK(name, bad == 0 && c.tid_ok, "%d slots wrong, thread ids in range %s", bad,
              c.tid_ok ? "yes" : "no");
        tp_free(p);
    }
}

/* Side jobs: each bumps a plain counter and records whether it ran on the
 * caller's thread. */
typedef struct {
    long count;
    unsigned long value;
    int on_caller;
    pthread_t caller;
} side_ctx;
static void side_job(void *ctx)
{
    side_ctx *c = ctx;
    c->count++;
    c->value = c->value * 31 + (unsigned long)c->count; /* reads the previous job's write */
    c->on_caller += pthread_equal(pthread_self(), c->caller) != 0;
}
static unsigned long side_expect(long n)
{
    unsigned long v = 0;
    for (long i = 1; i <= n; i++) v = v * 31 + (unsigned long)i;
    return v;
}
static void test_pool_side(void)
{
    static run_ctx rc;
    char name[200];
    for (size_t ti = 0; ti < sizeof THREADS / sizeof *THREADS; ti++) {
        int nth = THREADS[ti];
        tp_pool *p = pool_or_fail(nth);
        if (!p) continue;
        side_ctx c = { 0, 0, 0, pthread_self() };
        rc.nth = tp_threads(p);
        rc.tid_ok = 1;
        /* 1. A side job beside pool jobs, waited for after them; a side job
         *    posted while the previous one may still run (tp_side waits);
         *    tp_side_wait with none out. Every count seen exactly. */
        enum { ROUNDS = 2000 };
        int bad = 0;
        for (int r = 0; r < ROUNDS; r++) {
            tp_side(p, side_job, &c);
            if (r % 3 == 0) tp_side(p, side_job, &c);
            memset(rc.slot, 0, 64 * sizeof *rc.slot);
            if (r % 2) tp_run(p, 64, run_task, &rc);
            else tp_run_split(p, 64, run_task, &rc);
            tp_side_wait(p);
            tp_side_wait(p);
            long want = r + 1 + r / 3 + 1;
            bad += c.count != want;
            for (int i = 0; i < 64; i++) bad += rc.slot[i] != i + 1;
        }
        snprintf(name, sizeof name,
                 "pool side threads=%d: %d side jobs beside pool jobs, each run once and seen "
                 "by the caller after tp_side_wait",
                 nth, ROUNDS + (ROUNDS + 2) / 3);
        CHECK(name, bad == 0 && c.value == side_expect(c.count), "%d rounds wrong (count %ld)", bad,
              c.count);
        /* 2. With a worker idle (spinning or asleep), the worker takes it. */
        if (tp_threads(p) > 1) {
            int on_worker = 0;
            for (int tryn = 0; tryn < 5 && !on_worker; tryn++) {
                int before = c.on_caller;
                nanosleep(&(struct timespec){ 0, tryn % 2 ? 50000000 : 1000 }, NULL);
                tp_side(p, side_job, &c);
                nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
                tp_side_wait(p);
                on_worker = c.on_caller == before;
            }
            snprintf(name, sizeof name,
                     "pool side threads=%d: a side job posted while the workers idle runs on a "
                     "worker",
                     nth);
            CHECK(name, on_worker, "5 of 5 ran on the caller");
        } else {
            int before = c.on_caller;
            tp_side(p, side_job, &c);
            snprintf(name, sizeof name, "pool side threads=1: the caller runs it in tp_side");
            CHECK(name, c.on_caller == before + 1, "it had not run when tp_side returned");
            tp_side_wait(p);
        }
        /* 3. tp_free with a job out: it has run when tp_free returns. */
        long n0 = c.count;
        tp_side(p, side_job, &c);
        tp_free(p);
        snprintf(name, sizeof name, "pool side threads=%d: tp_free waits for a posted side job",
                 nth);
        CHECK(name, c.count == n0 + 1 && c.value == side_expect(c.count), "count %ld, wanted %ld",
              c.count, n0 + 1);
    }
}

int main(void)
{
    test_pool_split();
    test_pool_run();
    test_pool_side();
    UNIT_END();
}
