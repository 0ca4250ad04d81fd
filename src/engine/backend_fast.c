/* The fast backend: per-ISA SIMD kernels chosen at run time over the
 * model's resident 16-row interleaved tiles (model/weights.h: bf16 stays
 * bf16), a persistent thread pool, batched prefill. It reads the shared
 * weights and owns only its pool and scratch memory. Every output element is
 * still one §5.1 sequential dot product: SIMD lanes and threads only split
 * across rows, tokens, heads, keys and dims — never inside a sum — so the
 * results are bit-identical to the reference backend (tests/unit_fast.c,
 * tests/t_fast.sh). */
#include "core/fparith.h"
#include "engine/fast.h"
#include "kernels/kernels.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(FAST_TILE == CIS2_TILE, "the kernels read the model's tile layout");

/* ---------------------------------------------------------------- state */
typedef void (*mm_i8_fn)(const int8_t *W, const float *S, int K, int ntiles, int nrows,
                         const float *X, int ldx, int T, float *Y, int ldy);

typedef struct {
    const fast_kernels *k;
    mm_i8_fn k_i8; /* the ISA's int8 kernel, else the scalar path's */
    tp_pool *pool;
    char name[32];
    float **scratch; /* per thread: attention scores */
    int scratch_cap;
    float *kt; /* prefill: the layer's keys transposed, [n_kv][hd][ldkt] */
    size_t kt_cap;
    float *sall; /* decode: every head's scores, [n_heads][n] */
    size_t sall_cap;
    float **ktl; /* per thread: a transposed block of AT1_KB keys, [hd][AT1_KB] */
    int ktl_hd;
    int nth; /* threads: scratch[] and ktl[] entries */
} fast_state;

/* ---------------------------------------------------------------- matmul */
typedef struct {
    const fast_kernels *k;
    mm_i8_fn k_i8; /* the ISA's int8 kernel, else the scalar path's */
    const cis2_weight *p;
    const float *X;
    float *Y;
    int T, tiles_per_task, toks_per_task, n_tok_chunks;
    int n_row_tasks; /* T = 1: tiles split evenly into this many tasks (tiles_per_task 0) */
} mm_job;

/* T = 1: task rg's tiles [t0, t0 + nt), rg of n near-equal ranges. */
static void row_range(int ntiles, int rg, int n, int *t0, int *nt)
{
    *t0 = (int)((int64_t)ntiles * rg / n);
    *nt = (int)((int64_t)ntiles * (rg + 1) / n) - *t0;
}

/* Task `task`'s share of j: tiles [t0, t0 + nt) of tokens [k0, k0 + T). */
static void mm_task_range(const mm_job *j, int task, int *t0, int *nt, int *k0, int *T)
{
    const cis2_weight *p = j->p;
    int rg = task / j->n_tok_chunks, tc = task % j->n_tok_chunks;
    *t0 = rg * j->tiles_per_task;
    *nt = p->ntiles - *t0 < j->tiles_per_task ? p->ntiles - *t0 : j->tiles_per_task;
    if (!j->tiles_per_task) row_range(p->ntiles, rg, j->n_row_tasks, t0, nt);
    *k0 = tc * j->toks_per_task;
    *T = j->T - *k0 < j->toks_per_task ? j->T - *k0 : j->toks_per_task;
}

static void mm_task(void *ctx, int task, int tid)
{
    (void)tid;
    const mm_job *j = ctx;
    const cis2_weight *p = j->p;
    int t0, nt, k0, T;
    mm_task_range(j, task, &t0, &nt, &k0, &T);
    size_t K = (size_t)p->cols;
    int nrows = p->rows - t0 * FAST_TILE;
    const float *X = j->X + (size_t)k0 * K;
    float *Y = j->Y + (size_t)k0 * p->rows + (size_t)t0 * FAST_TILE;
    if (p->fmt == CIS2_WF_I8) /* docs/quantization.md §2 */
        j->k_i8((const int8_t *)p->tiles + (size_t)t0 * K * FAST_TILE,
                p->scales + (size_t)t0 * FAST_TILE, (int)K, nt, nrows, X, (int)K, T, Y, p->rows);
    else if (p->fmt == CIS2_WF_BF16)
        j->k->mm_bf16((const uint16_t *)p->tiles + (size_t)t0 * K * FAST_TILE, (int)K, nt, nrows, X,
                      (int)K, T, Y, p->rows);
    else
        j->k->mm_f32((const float *)p->tiles + (size_t)t0 * K * FAST_TILE, (int)K, nt, nrows, X,
                     (int)K, T, Y, p->rows);
}

/* T = 1 tasks hold at least this many tiles (the kernel's blocks of up to
 * 8 tiles are each tile's own in-order sum, §5.1: any split is exact). */
#define MM1_MIN 6
#define MM1_BIG 48

/* Splits one matmul into tasks; returns their number. */
static int mm_setup(const fast_state *s, const cis2_weight *p, const float *X, int T, float *Y,
                    mm_job *j)
{
    int nth = tp_threads(s->pool);
    *j = (mm_job){ s->k, s->k_i8, p, X, Y, T, 0, 0, 0, 0 };
    if (T == 1) {
        /* one token: the tiles in near-equal ranges, a multiple of the
         * threads' count of tasks (at least MM1_MIN tiles each; up to 4
         * each, or ranges of MM1_BIG tiles for a big matrix such as the LM
         * head, so a late thread leaves a short tail), so both threads
         * finish a dispatch together */
        int per = p->ntiles / (nth * MM1_MIN), cap = p->ntiles / (nth * MM1_BIG);
        if (cap < 4) cap = 4;
        int m = nth == 1 || per < 1 ? 1 : per > cap ? cap : per;
        j->n_row_tasks = nth * m < p->ntiles ? nth * m : p->ntiles;
        j->toks_per_task = 1;
        j->n_tok_chunks = 1;
        return j->n_row_tasks;
    }
    if (T <= 16) {
        /* a few sequences: rows only, ~4 tasks per thread, multiples of 6
         * tiles (1, 2 and 3 tile blocks fit evenly) */
        int want = nth == 1 ? 1 : nth * 4, mult = 6;
        int tpt = (p->ntiles + want - 1) / want;
        tpt = (tpt + mult - 1) / mult * mult;
        j->tiles_per_task = tpt;
        j->toks_per_task = T;
        j->n_tok_chunks = 1;
    } else {
        /* prefill: one panel's 2 tiles for up to 128 tokens. Each task
         * widens its tiles into the AVX-512 panel once, so longer token
         * runs widen less often: 4 tiles x 48 tokens widened each strip 6
         * times at T = 256 (a fifth of the matmul time in a 1-thread
         * profile); pp256 +11 %, pp1024 +5 % on the Zen 5 host */
        j->tiles_per_task = 2;
        j->toks_per_task = 128;
        j->n_tok_chunks = (T + 127) / 128;
    }
    int nrg = (p->ntiles + j->tiles_per_task - 1) / j->tiles_per_task;
    return nrg * j->n_tok_chunks;
}

/* Runs a matmul dispatch's n tasks. For T > 1 each thread first takes a
 * contiguous run of them (tp_run_split): its tiles then follow each other
 * in memory, one weight stream per thread, and a block's request for the
 * next block at its end (TM_PF_AT) is for the block this thread runs next;
 * a prefill thread's next task is mostly the same tiles for its next
 * tokens, still in cache. Measured against tasks handed out in order:
 * B = 8 decode ~5 % less time a step, pp256 ~4 % faster. T = 1 keeps
 * tp_run (no gain measured). Only which thread computes which rows
 * changes. */
static void mm_run(fast_state *s, int T, int n, tp_fn fn, void *ctx)
{
    if (T > 1) tp_run_split(s->pool, n, fn, ctx);
    else tp_run(s->pool, n, fn, ctx);
}

static void fast_mm(cis2_backend *b, const cis2_weight *w, const float *X, int T, float *Y)
{
    fast_state *s = b->impl;
    mm_job j;
    int n = mm_setup(s, w, X, T, Y, &j);
    mm_run(s, T, n, mm_task, &j);
}

/* Several matmuls over the same input in one pool dispatch (q/k/v, gate/up):
 * the tasks of all of them in one list, so there is one synchronisation. */
#define MM_MULTI_MAX 4
typedef struct {
    mm_job j[MM_MULTI_MAX];
    int first[MM_MULTI_MAX + 1];
    int n;
} mm_multi_job;

static void mm_multi_task(void *ctx, int task, int tid)
{
    const mm_multi_job *m = ctx;
    int i = 0;
    while (task >= m->first[i + 1]) i++;
    mm_task((void *)&m->j[i], task - m->first[i], tid);
}

static void fast_mm_multi(cis2_backend *b, int n, const cis2_weight *const *w, const float *X,
                          int T, float *const *Y)
{
    fast_state *s = b->impl;
    if (n > MM_MULTI_MAX) {
        for (int i = 0; i < n; i++) fast_mm(b, w[i], X, T, Y[i]);
        return;
    }
    mm_multi_job m;
    m.n = n;
    m.first[0] = 0;
    for (int i = 0; i < n; i++)
        m.first[i + 1] = m.first[i] + mm_setup(s, w[i], X, T, Y[i], &m.j[i]);
    mm_run(s, T, m.first[n], mm_multi_task, &m);
}

/* Gate and up projections and SwiGLU in one dispatch: task i computes the
 * same rows of both for the same tokens, then those rows' act elements
 * (each element depends on its own gate and up element only, §10). */
typedef struct {
    mm_job g, u;
    float *act;
} mmsw_job;

static void mmsw_task(void *ctx, int task, int tid)
{
    const mmsw_job *m = ctx;
    mm_task((void *)&m->g, task, tid);
    mm_task((void *)&m->u, task, tid);
    int t0, nt, k0, T, rows = m->g.p->rows;
    mm_task_range(&m->g, task, &t0, &nt, &k0, &T);
    int r0 = t0 * FAST_TILE, r1 = (t0 + nt) * FAST_TILE;
    if (r1 > rows) r1 = rows;
    for (int t = k0; t < k0 + T; t++) {
        size_t o = (size_t)t * rows + (size_t)r0;
        if (m->g.k->swiglu) m->g.k->swiglu(m->g.Y + o, m->u.Y + o, m->act + o, r1 - r0);
        else ref_swiglu(m->g.Y + o, m->u.Y + o, m->act + o, r1 - r0);
    }
}

static void fast_mm_swiglu(cis2_backend *b, const cis2_weight *wg, const cis2_weight *wu,
                           const float *X, int T, float *gate, float *up, float *act)
{
    fast_state *s = b->impl;
    mmsw_job m;
    int n = mm_setup(s, wg, X, T, gate, &m.g); /* wu has wg's shape: the same tasks */
    mm_setup(s, wu, X, T, up, &m.u);
    m.act = act;
    mm_run(s, T, n, mmsw_task, &m);
}

/* Up to PF_BYTES of the next matmuls' weights: a token's dispatches leave
 * DRAM idle while threads wait (attention, the serial steps, a job's last
 * task), and this fills those gaps with the weight stream. */
#define PF_BYTES ((size_t)1536 * 1024)

static void fast_prefetch(cis2_backend *b, int n, const cis2_weight *const *w)
{
    fast_state *s = b->impl;
    const void *base[TP_PF_MAX];
    size_t len[TP_PF_MAX], left = PF_BYTES;
    int m = 0;
    for (int i = 0; i < n && m < TP_PF_MAX && left; i++) {
        size_t bytes = cis2_weight_bytes(w[i]->rows, w[i]->cols, w[i]->fmt);
        base[m] = w[i]->tiles;
        len[m] = bytes < left ? bytes : left;
        left -= len[m++];
    }
    tp_prefetch(s->pool, m, base, len);
}

static void fast_side(cis2_backend *b, void (*fn)(void *ctx), void *ctx)
{
    tp_side(((fast_state *)b->impl)->pool, fn, ctx);
}

static void fast_side_wait(cis2_backend *b) { tp_side_wait(((fast_state *)b->impl)->pool); }

/* ------------------------------------------------------------- attention */
typedef struct {
    fast_state *s;
    const float *q, *kc, *vc;
    float *out;
    int T, pos0, nh, group, hd, qd, kvd;
    float scale;
    const float *kt; /* non-NULL: transposed keys (prefill) */
    size_t ldkt;
} at_job;

/* One query head of one token over its n keys: scores, softmax, V-mix
 * (§9.2–§9.4); q and out point at the head's hd values. */
static void at_head(const at_job *j, const float *q, const float *kc, const float *vc, int n, int h,
                    float *out, int tid)
{
    int kvh = h / j->group;
    float *sc = j->s->scratch[tid];
    if (j->kt)
        j->s->k->scores_t(q, j->kt + (size_t)kvh * j->hd * j->ldkt, j->ldkt, n, j->hd, j->scale,
                          sc);
    else j->s->k->scores(q, kc + (size_t)kvh * j->hd, (size_t)j->kvd, n, j->hd, j->scale, sc);
    j->s->k->softmax(sc, n);
    j->s->k->vmix(sc, vc + (size_t)kvh * j->hd, (size_t)j->kvd, n, j->hd, out);
}

static void at_task(void *ctx, int task, int tid)
{
    const at_job *j = ctx;
    int t = j->T - 1 - task / j->nh, h = task % j->nh; /* longest contexts first */
    size_t o = (size_t)t * j->qd + (size_t)h * j->hd;
    at_head(j, j->q + o, j->kc, j->vc, j->pos0 + t + 1, h, j->out + o, tid);
}

/* Prefill, register-blocked: a task is AT_TQ consecutive tokens of one
 * query head. Their scores are one tile of queries x keys over the
 * transposed keys (keys past a token's own context are computed and never
 * read), each row's softmax runs over exactly that token's keys in order,
 * and the V-mix is a tile of queries x dims, token i summing its own keys
 * in order (§9.2–§9.4). */
#define AT_TQ 8

static void at_tile_task(void *ctx, int task, int tid)
{
    const at_job *j = ctx;
    int ntile = (j->T + AT_TQ - 1) / AT_TQ;
    int tile = ntile - 1 - task / j->nh, h = task % j->nh; /* longest contexts first */
    int t0 = tile * AT_TQ, nq = j->T - t0 < AT_TQ ? j->T - t0 : AT_TQ;
    int n0 = j->pos0 + t0 + 1, kvh = h / j->group;
    size_t ldo = (size_t)j->s->scratch_cap;
    float *sc = j->s->scratch[tid];
    const fast_kernels *k = j->s->k;
    k->scores_tq(j->q + (size_t)t0 * j->qd + (size_t)h * j->hd, (size_t)j->qd, nq,
                 j->kt + (size_t)kvh * j->hd * j->ldkt, j->ldkt, n0 + nq - 1, j->hd, j->scale, sc,
                 ldo);
    if (k->softmax_rows) k->softmax_rows(sc, ldo, nq, n0, 1);
    else
        for (int i = 0; i < nq; i++) k->softmax(sc + (size_t)i * ldo, n0 + i);
    k->vmix_tq(sc, ldo, nq, n0, 1, j->vc + (size_t)kvh * j->hd, (size_t)j->kvd, j->hd,
               j->out + (size_t)t0 * j->qd + (size_t)h * j->hd, (size_t)j->qd);
}

/* Scores of query heads i < nq (q + i*hd, one KV group's: KV head kvh)
 * over keys a..a+n-1 of the key-blocked cache (a a multiple of CIS2_KB):
 * out[i*ldo + j]. The blocks are mm_f32's 16-row tiles with K = hd, so each
 * score is one dot_seq(k_j, q_i) (§5.1; each product commutes bit for bit),
 * then its §9.2 scale — ref_attention_scores' operations, with no transposed
 * copy. Keys past n in the last block are computed by no one (nrows = n). */
static void kb_scores(const fast_kernels *k, const float *kb, int kb_cap, int kvh, int a,
                      const float *q, int nq, int n, int hd, float scale, float *out, size_t ldo)
{
    k->mm_f32(kb + CIS2_KB_INDEX(kb_cap, hd, kvh, a, 0), hd, (n + CIS2_KB - 1) / CIS2_KB, n, q, hd,
              nq, out, (int)ldo);
    for (int i = 0; i < nq; i++) {
        float *o = out + (size_t)i * ldo;
        for (int j = 0; j < n; j++) o[j] = cis2_fmul(o[j], scale); /* §9.2 */
    }
}

/* Decode (T = 1), long contexts: the group's query heads share each key.
 * Phase 1 tasks are key ranges of every KV head: each key's score is its
 * own output (dot_seq then * scale), so a key range is any split; every head
 * of a group scores a block of keys while it is hot in cache, and a task
 * streams whole cache rows. Phase 2 tasks are heads: softmax over the head's
 * whole row (one in-order sum); then the V-mix (every output dim summed over
 * all keys in order), split by dims. */
typedef struct {
    fast_state *s;
    const float *q, *kc, *vc;
    float *out, *S;
    int n, group, hd, kvd, chunk, nchunks, dchunk;
    float scale;
    const float *kb; /* non-NULL: the keys key-blocked (backend.h), kb_cap per KV head */
    int kb_cap;
} at1_job;

/* Keys per transposed block in decode (AT1_KB x hd floats stay in L1). */
#define AT1_KB 64

static void at1_scores_task(void *ctx, int task, int tid)
{
    const at1_job *j = ctx;
    int a = task * j->chunk, len = j->n - a < j->chunk ? j->n - a : j->chunk;
    int nkv = j->kvd / j->hd;
    const float *k = j->kc + (size_t)a * j->kvd;
    if (j->kb) { /* a is a multiple of 16 (chunk) */
        for (int kvh = 0; kvh < nkv; kvh++) {
            int h0 = kvh * j->group;
            kb_scores(j->s->k, j->kb, j->kb_cap, kvh, a, j->q + (size_t)h0 * j->hd, j->group, len,
                      j->hd, j->scale, j->S + (size_t)h0 * j->n + a, (size_t)j->n);
        }
        return;
    }
    if (j->s->k->scores_tq) {
        /* Each key is read once for the whole group: a block of keys is
         * transposed (a copy) and the group's query heads score it as one
         * tile, lanes over keys, each score its own in-order sum. A task is
         * a key range of every KV head, so it streams whole cache rows. */
        float *kt = j->s->ktl[tid];
        for (int b = 0; b < len; b += AT1_KB) {
            int m = len - b < AT1_KB ? len - b : AT1_KB;
            for (int kvh = 0; kvh < nkv; kvh++) {
                int h0 = kvh * j->group;
                j->s->k->kt_pack(k + (size_t)b * j->kvd + (size_t)kvh * j->hd, (size_t)j->kvd, m,
                                 j->hd, kt, AT1_KB);
                j->s->k->scores_tq(j->q + (size_t)h0 * j->hd, (size_t)j->hd, j->group, kt, AT1_KB,
                                   m, j->hd, j->scale, j->S + (size_t)h0 * j->n + a + b,
                                   (size_t)j->n);
            }
        }
        return;
    }
    for (int h = 0; h < nkv * j->group; h++)
        j->s->k->scores(j->q + (size_t)h * j->hd, k + (size_t)(h / j->group) * j->hd,
                        (size_t)j->kvd, len, j->hd, j->scale, j->S + (size_t)h * j->n + a);
}

static void at1_softmax_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    j->s->k->softmax(j->S + (size_t)task * j->n, j->n);
}

/* Softmax of a contiguous run of heads, tasks = threads: every head's row is
 * its own softmax with its one in-order sum (§5.3), and up to 8 rows' sums
 * run side by side (softmax_rows), so their add latencies overlap instead of
 * one chain of n dependent adds per head. */
static void at1_softmax_rows_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    int nh = j->kvd / j->hd * j->group, h0 = nh * task / j->nchunks,
        h1 = nh * (task + 1) / j->nchunks;
    if (h1 > h0) j->s->k->softmax_rows(j->S + (size_t)h0 * j->n, (size_t)j->n, h1 - h0, j->n, 0);
}

/* V-mix of a whole group in one pass over V, tasks (KV group x dim range):
 * each output dim is its own in-order sum over all keys, so any dim split
 * is exact. */
static void at1_vmix_g_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    int nd = j->hd / j->dchunk, kvh = task / nd, d0 = (task % nd) * j->dchunk, h0 = kvh * j->group;
    j->s->k->vmix_g(j->S + (size_t)h0 * j->n, (size_t)j->n, j->group,
                    j->vc + (size_t)kvh * j->hd + d0, (size_t)j->kvd, j->n, j->dchunk,
                    j->out + (size_t)h0 * j->hd + d0, (size_t)j->hd);
}

/* V-mix over slices of whole cache rows, tasks = one contiguous run of the
 * row's 16-dim vectors per thread: each output dim is its own in-order sum
 * over all keys, so any dim split is exact, and a thread streams its slice
 * of every row once. */
static void at1_vmix_rows_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    int nv = j->kvd / 16, e0 = nv * task / j->nchunks, e1 = nv * (task + 1) / j->nchunks;
    if (e1 > e0)
        j->s->k->vmix_rows(j->S, (size_t)j->n, j->group, j->vc, (size_t)j->kvd, j->n, j->hd, e0,
                           e1 - e0, j->out, (size_t)j->hd);
}

static void at1_mix_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    int h = task, kvh = h / j->group;
    float *sc = j->S + (size_t)h * j->n;
    j->s->k->softmax(sc, j->n);
    j->s->k->vmix(sc, j->vc + (size_t)kvh * j->hd, (size_t)j->kvd, j->n, j->hd,
                  j->out + (size_t)h * j->hd);
}

/* One sequence's decode takes the key-range path from AT1_MIN_CTX keys (at
 * 256 keys it is ~1.5x faster on one thread than a task per head, and 9
 * heads split 5:4 over two threads). With key-blocked keys, one
 * sequence below AKB1_MAX_CTX and several at any context are one dispatch
 * of akb tasks (measured, 2 threads, SmolLM2-135M shape, `cis2 bench
 * --positions`: at 64-320 keys akb takes 0.6-0.8x the key-range path's
 * time, at 512-1024 keys 0.6-0.75x (its three dispatches cost more than
 * three KV groups on two threads), at 1536-2048 the two are within noise,
 * from 3072 akb is 1.1-1.25x slower; for 8 sequences at 1024 keys akb is
 * ~3% faster than a sequence at a time). */
#define AT1_MIN_CTX  256
#define AKB1_MAX_CTX 2048

/* backend.h's reserve: each thread's AT_TQ score rows (their capacity, the
 * rows' stride, doubling from 256 keys), the decode's every-head scores and
 * each thread's transposed key block (read from AT1_MIN_CTX keys), and the
 * prefill's transposed keys. */
static int fast_reserve(cis2_backend *b, int rows, int positions, int n_heads, int n_kv, int hd,
                        char *err)
{
    (void)rows; /* the matmuls need no scratch */
    fast_state *s = b->impl;
    if (positions > s->scratch_cap) {
        int cap = s->scratch_cap ? s->scratch_cap : 256;
        while (cap < positions) cap *= 2;
        for (int i = 0; i < s->nth; i++) {
            float *p = realloc(s->scratch[i], (size_t)AT_TQ * cap * sizeof(float));
            if (!p) goto oom; /* the rows grown so far hold scratch_cap keys as well */
            s->scratch[i] = p;
        }
        s->scratch_cap = cap;
    }
    if (positions >= AT1_MIN_CTX && s->k->scores_tq && hd > s->ktl_hd) {
        s->ktl_hd = 0; /* until every thread's block is there */
        for (int i = 0; i < s->nth; i++) {
            free(s->ktl[i]);
            s->ktl[i] = calloc((size_t)hd * AT1_KB, sizeof(float)); /* pad keys: zeros */
            if (!s->ktl[i]) goto oom;
        }
        s->ktl_hd = hd;
    }
    size_t want = (size_t)n_heads * (size_t)positions;
    if (positions >= AT1_MIN_CTX && want > s->sall_cap) {
        float *p = realloc(s->sall, want * sizeof(float));
        if (!p) goto oom;
        s->sall = p;
        s->sall_cap = want;
    }
    want = (size_t)n_kv * hd * (((size_t)positions + 15) & ~(size_t)15);
    if (s->k->scores_t && want > s->kt_cap) {
        float *p = realloc(s->kt, want * sizeof(float));
        if (!p) goto oom;
        s->kt = p;
        s->kt_cap = want;
    }
    return 0;
oom:
    snprintf(err, CIS2_ERR_LEN, "out of memory for the attention scratch of %d positions",
             positions);
    return 1;
}

/* Decode over key-blocked keys, one dispatch: a part is `per` query heads
 * of one KV group of one sequence — their scores in one mm_f32 over the
 * group's keys (each key read once for all of them), each head's softmax
 * (§9.3, softmax_rows: the heads' sums side by side, each in order), then
 * their V-mix in one pass over V (vmix_g; each output dim its own in-order
 * sum, §9.4). No transposed copies. A task is one part, or every part of
 * one sequence in order (`whole`). */
typedef struct {
    fast_state *s;
    const float *q; /* [n][nh*hd] */
    const float *const *vc, *const *kb;
    const int *kb_cap, *pos;
    float *out;
    int nh, nkv, group, hd, parts, per, whole;
    float scale;
    void (*pre)(void *ctx, int i); /* attention_decode's */
    void *pre_ctx;
} akb_job;

/* Part r (of nkv * parts) of sequence i. */
static void akb_part(const akb_job *j, int i, int r, int tid)
{
    const fast_kernels *k = j->s->k;
    int kvh = r / j->parts, h0 = kvh * j->group + r % j->parts * j->per, h1 = h0 + j->per;
    if (h1 > (kvh + 1) * j->group) h1 = (kvh + 1) * j->group;
    int nq = h1 - h0, n = j->pos[i] + 1, hd = j->hd;
    size_t ldo = (size_t)j->s->scratch_cap, kvd = (size_t)j->nkv * hd,
           o = (size_t)i * j->nh * hd + (size_t)h0 * hd;
    float *sc = j->s->scratch[tid];
    kb_scores(k, j->kb[i], j->kb_cap[i], kvh, 0, j->q + o, nq, n, hd, j->scale, sc, ldo);
    if (k->softmax_rows) k->softmax_rows(sc, ldo, nq, n, 0);
    else
        for (int h = 0; h < nq; h++) k->softmax(sc + (size_t)h * ldo, n);
    const float *v = j->vc[i] + (size_t)kvh * hd;
    if (k->vmix_g) k->vmix_g(sc, ldo, nq, v, kvd, n, hd, j->out + o, (size_t)hd);
    else
        for (int h = 0; h < nq; h++)
            k->vmix(sc + (size_t)h * ldo, v, kvd, n, hd, j->out + o + (size_t)h * hd);
}

static void akb_task(void *ctx, int task, int tid)
{
    const akb_job *j = ctx;
    int np = j->nkv * j->parts;
    if (j->whole) {
        if (j->pre) j->pre(j->pre_ctx, task);
        for (int r = 0; r < np; r++) akb_part(j, task, r, tid);
    } else akb_part(j, task / np, task % np, tid);
}

/* attention_decode's pre step of sequence `task`, as a task of its own. */
static void akb_pre_task(void *ctx, int task, int tid)
{
    (void)tid;
    const akb_job *j = ctx;
    j->pre(j->pre_ctx, task);
}

/* n sequences' decode attention as akb tasks, a whole KV group each (up
 * to AT_TQ heads per task: the score scratch holds AT_TQ rows). Even one
 * sequence's 3 groups on 2 threads beat a task per head (each head reading
 * its keys and values again): at 64-320 keys 25-40% faster (measured).
 * Several sequences take a task each when that makes no thread run more
 * parts: one thread then walks a sequence's key blocks and V rows (each
 * row's groups side by side in memory) in one pass, and B = 8 attention
 * takes ~0.8x the time (measured at 64-96 keys, both the scores and the
 * V-mix). */
static void akb_run(fast_state *s, int n, const float *q, const float *const *vc,
                    const float *const *kb, const int *kb_cap, const int *pos, int n_heads,
                    int n_kv, int hd, float scale, float *out, void (*pre)(void *ctx, int i),
                    void *pre_ctx)
{
    int group = n_heads / n_kv, per = group < AT_TQ ? group : AT_TQ, nth = tp_threads(s->pool);
    int parts = (group + per - 1) / per, np = n_kv * parts;
    int whole = n > 1 && (n + nth - 1) / nth * np <= (n * np + nth - 1) / nth;
    akb_job j = { s,     q,  vc,    kb,  kb_cap, pos,   out, n_heads, n_kv,
                  group, hd, parts, per, whole,  scale, pre, pre_ctx };
    /* A whole sequence's task runs its pre step first: one dispatch, and the
     * thread that writes its new key and value reads them. Otherwise the
     * pre steps are a dispatch of their own. */
    if (pre && !whole) tp_run(s->pool, n, akb_pre_task, &j);
    tp_run(s->pool, whole ? n : n * np, akb_task, &j);
}

static void fast_attn(cis2_backend *b, const float *q, const float *kc, const float *vc,
                      const float *kb, int kb_cap, int T, int pos0, int n_heads, int n_kv, int hd,
                      float scale, float *out)
{
    fast_state *s = b->impl;
    int need = pos0 + T, nth = tp_threads(s->pool); /* fast_reserve'd for need keys */
    if (T == 1 && kb && need < AKB1_MAX_CTX) {
        akb_run(s, 1, q, &vc, &kb, &kb_cap, &pos0, n_heads, n_kv, hd, scale, out, NULL, NULL);
        return;
    }
    if (T == 1 && need >= AT1_MIN_CTX) {
        /* ~4 tasks per thread, key ranges a multiple of 16 keys */
        int chunk = (need + 4 * nth - 1) / (4 * nth);
        chunk = (chunk + 15) & ~15;
        if (chunk < AT1_KB) chunk = AT1_KB; /* short contexts: more tasks split evenly */
        if (chunk > 1024) chunk = 1024;
        at1_job j1 = { s,   q,         kc,    vc,
                       out, s->sall,   need,  n_heads / n_kv,
                       hd,  n_kv * hd, chunk, (need + chunk - 1) / chunk,
                       hd,  scale,     kb,    kb_cap };
        tp_run(s->pool, j1.nchunks, at1_scores_task, &j1);
        if (s->k->vmix_rows && hd % 16 == 0 && n_heads / n_kv <= 8) {
            if (s->k->softmax_rows) {
                j1.nchunks = nth < n_heads ? nth : n_heads; /* softmax tasks */
                tp_run(s->pool, j1.nchunks, at1_softmax_rows_task, &j1);
            } else tp_run(s->pool, n_heads, at1_softmax_task, &j1);
            j1.nchunks = nth < n_kv * hd / 16 ? nth : n_kv * hd / 16; /* V-mix tasks */
            tp_run(s->pool, j1.nchunks, at1_vmix_rows_task, &j1);
        } else if (s->k->vmix_g) {
            if (hd % 32 == 0 && n_kv < 2 * nth) j1.dchunk = 32;
            tp_run(s->pool, n_heads, at1_softmax_task, &j1);
            tp_run(s->pool, n_kv * (hd / j1.dchunk), at1_vmix_g_task, &j1);
        } else tp_run(s->pool, n_heads, at1_mix_task, &j1);
        return;
    }
    at_job j = {
        s,         q,     kc,   vc, out, T, pos0, n_heads, n_heads / n_kv, hd, n_heads * hd,
        n_kv * hd, scale, NULL, 0
    };
    if (T > 1 && s->k->scores_t) {
        /* Prefill: every key is read by T x group queries, so transpose the
         * layer's keys once (a pure copy) and score without shuffles. */
        size_t ld = ((size_t)need + 15) & ~(size_t)15, kvd = (size_t)n_kv * hd;
        for (int h = 0; h < n_kv; h++) {
            float *kt = s->kt + (size_t)h * hd * ld;
            if (s->k->kt_pack) s->k->kt_pack(kc + (size_t)h * hd, kvd, need, hd, kt, ld);
            else
                for (int d = 0; d < hd; d++)
                    for (int p = 0; p < need; p++)
                        kt[(size_t)d * ld + p] = kc[p * kvd + h * hd + d];
            for (int d = 0; d < hd; d++)
                for (size_t p = (size_t)need; p < ld; p++) kt[(size_t)d * ld + p] = 0.0f;
        }
        j.kt = s->kt;
        j.ldkt = ld;
        if (s->k->scores_tq && s->k->vmix_tq) {
            tp_run(s->pool, (T + AT_TQ - 1) / AT_TQ * n_heads, at_tile_task, &j);
            return;
        }
    }
    tp_run(s->pool, T * n_heads, at_task, &j);
}

/* Decode of several sequences, one query token each: with key-blocked keys
 * one dispatch of akb tasks at every context (at 1024 keys ~3% faster than
 * a sequence at a time); without them (the engine gives them to this
 * backend, which wants_kb, so only a direct caller) a sequence at a time. */
static void fast_parallel_for(cis2_backend *b, int n, void (*fn)(void *ctx, int i), void *ctx);
static void fast_attn_decode(cis2_backend *b, int n, const float *q, const float *const *kc,
                             const float *const *vc, const float *const *kb, const int *kb_cap,
                             const int *pos, int n_heads, int n_kv, int hd, float scale, float *out,
                             void (*pre)(void *ctx, int i), void *pre_ctx)
{
    fast_state *s = b->impl;
    int qd = n_heads * hd; /* fast_reserve'd for every pos[i] + 1 keys */
    if (kb) {
        akb_run(s, n, q, vc, kb, kb_cap, pos, n_heads, n_kv, hd, scale, out, pre, pre_ctx);
        return;
    }
    if (pre) fast_parallel_for(b, n, pre, pre_ctx);
    for (int i = 0; i < n; i++)
        fast_attn(b, q + (size_t)i * qd, kc[i], vc[i], NULL, 0, 1, pos[i], n_heads, n_kv, hd, scale,
                  out + (size_t)i * qd);
}

/* ------------------------------------------------------ engine elementwise */
typedef struct {
    void (*fn)(void *ctx, int i);
    void *ctx;
    int n, per;
} pf_job;

static void pf_task(void *ctx, int task, int tid)
{
    (void)tid;
    const pf_job *j = ctx;
    int a = task * j->per, b = a + j->per < j->n ? a + j->per : j->n;
    for (int i = a; i < b; i++) j->fn(j->ctx, i);
}

static void fast_parallel_for(cis2_backend *b, int n, void (*fn)(void *ctx, int i), void *ctx)
{
    fast_state *s = b->impl;
    int nth = tp_threads(s->pool), want = nth == 1 ? 1 : nth * 4;
    pf_job j = { fn, ctx, n, (n + want - 1) / want };
    if (j.per < 1) j.per = 1;
    tp_run(s->pool, (n + j.per - 1) / j.per, pf_task, &j);
}

/* ---------------------------------------------------------------- set-up */
static void fast_destroy(cis2_backend *b)
{
    fast_state *s = b->impl;
    if (s) {
        tp_free(s->pool);
        for (int i = 0; s->scratch && i < s->nth; i++) free(s->scratch[i]);
        free(s->scratch);
        for (int i = 0; s->ktl && i < s->nth; i++) free(s->ktl[i]);
        free(s->ktl);
        free(s->kt);
        free(s->sall);
        free(s);
    }
    free(b);
}

static int make_backend(cis2_backend **out, const char *isa, int threads, char *err,
                        fast_state **sp)
{
    *out = NULL;
    const fast_kernels *k = fast_kernels_pick(isa, err);
    if (!k) return 1;
    if (threads <= 0) threads = cis2_cpu_count();
    if (threads > 1024) threads = 1024;
    cis2_backend *b = calloc(1, sizeof *b);
    fast_state *s = calloc(1, sizeof *s);
    if (!b || !s) {
        free(b);
        free(s);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    b->impl = s;
    b->matmul = fast_mm;
    b->attention = fast_attn;
    b->attention_decode = fast_attn_decode;
    b->wants_kb = 1;
    b->reserve = fast_reserve;
    b->destroy = fast_destroy;
    b->parallel_for = fast_parallel_for;
    b->matmul_multi = fast_mm_multi;
    b->matmul_swiglu = fast_mm_swiglu;
    b->swiglu = k->swiglu;
    b->add = k->add;
    b->rmsnorm_rows = k->rmsnorm_rows;
    b->rope = k->rope;
    b->scan = k->scan;
    b->prefetch = fast_prefetch;
    b->side = fast_side;
    b->side_wait = fast_side_wait;
    s->k = k;
    /* An ISA without an int8 kernel (wasm128) runs the scalar path's: the
     * same bits (tests/unit_int8.c), only slower. */
    s->k_i8 = k->mm_i8 ? k->mm_i8 : fast_kernels_scalar.mm_i8;
    snprintf(s->name, sizeof s->name, "fast/%s", k->name);
    b->name = s->name;
    s->scratch = calloc((size_t)threads, sizeof *s->scratch);
    s->ktl = calloc((size_t)threads, sizeof *s->ktl);
    s->nth = threads;
    if (!s->scratch || !s->ktl) {
        fast_destroy(b);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    s->pool = tp_new(threads, err);
    if (!s->pool) {
        fast_destroy(b);
        return 1;
    }
    *out = b;
    *sp = s;
    return 0;
}

int cis2_backend_fast_create(cis2_backend **b, const char *isa, int threads, char *err)
{
    fast_state *s;
    return make_backend(b, isa, threads, err, &s);
}

int cis2_backend_fast_new(cis2_backend **out, const cis2_engine_opts *o, char *err)
{
    fast_state *s;
    return make_backend(out, o ? cis2_isa_to_name(o->isa) : NULL, o ? o->threads : 0, err, &s);
}
