/* Engine properties through the library API on generated fixtures:
 * §3.5 KV-cache decode == full recompute (full logit vectors, bit for bit),
 * batched prefill == token-by-token prefill, §12.4 double run. */
#include "unit.h"
#include "kernels/fast_kernels.h"
#include <pthread.h>

static int make_fixture(const char *dir, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 tools/make_model.py %s %s >/dev/null", dir, args);
    return system(cmd);
}

static void check_arch(const char *name, const char *args)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN], tn[128];
    snprintf(dir, sizeof dir, "%s/unit-engine-%s", tmp, name);
    if (make_fixture(dir, args)) {
        snprintf(tn, sizeof tn, "engine.%s.fixture", name);
        CHECK(tn, 0, "make_model.py failed");
        return;
    }
    cis2_model m;
    cis2_load_opts lo = { 0 };
    if (cis2_model_load(&m, dir, &lo, err)) {
        snprintf(tn, sizeof tn, "engine.%s.load", name);
        CHECK(tn, 0, "%s", err);
        return;
    }
    int V = m.cfg.vocab, P = 7, N = 9;
    int32_t toks[16] = { 3, 141, 59, 26, 5, 35, 89 };
    float *la = malloc((size_t)V * 4), *lb = malloc((size_t)V * 4);
    cis2_engine *inc, *full;
    cis2_engine_new(&inc, &m, NULL, err);
    cis2_engine_new(&full, &m, NULL, err);
    /* incremental: prefill P, then one token at a time with the cache */
    int same = 1, prefill_same = 1;
    cis2_engine_forward(inc, toks, P, 0, la, err);
    /* token-by-token prefill on a fresh engine must give the same last logits */
    for (int t = 0; t < P; t++)
        cis2_engine_forward(full, &toks[t], 1, t, t == P - 1 ? lb : NULL, err);
    prefill_same = memcmp(la, lb, (size_t)V * 4) == 0;
    for (int s = P; s < P + N; s++) {
        toks[s] = cis2_argmax(la, V);
        cis2_engine_forward(inc, &toks[s], 1, s, la, err);
        /* recompute everything from position 0 with a cold pass */
        cis2_engine_forward(full, toks, s + 1, 0, lb, err);
        if (memcmp(la, lb, (size_t)V * 4) != 0) {
            same = 0;
            break;
        }
    }
    snprintf(tn, sizeof tn, "engine.%s.kv-cache-equals-full-recompute", name);
    CHECK(tn, same, "logits differ");
    snprintf(tn, sizeof tn, "engine.%s.batched-prefill-equals-sequential", name);
    CHECK(tn, prefill_same, "logits differ");
    cis2_result r1, r2;
    cis2_gen_opts g = { 5, 0, NULL, NULL, NULL, 0 };
    int rc1 = cis2_generate(inc, toks, 3, &g, &r1, err),
        rc2 = cis2_generate(inc, toks, 3, &g, &r2, err);
    snprintf(tn, sizeof tn, "engine.%s.double-run", name);
    CHECK(tn,
          !rc1 && !rc2 && !memcmp(r1.witness, r2.witness, 32) && !memcmp(r1.argmax, r2.argmax, 32),
          "%s", err);
    cis2_result_free(&r1);
    cis2_result_free(&r2);
    /* Positions 0 .. n + n_gen - 2 must fit max_position_embeddings (the
     * last pick is never fed); past that, the library's line names no
     * caller's flag (the CLI's -n, Python's max_tokens: each says its own). */
    char want[CIS2_ERR_LEN];
    snprintf(want, sizeof want,
             "prompt (2 tokens) + %d tokens to generate exceeds max_position_embeddings = %d",
             m.cfg.max_pos, m.cfg.max_pos);
    cis2_gen_opts gl = { m.cfg.max_pos, 0, NULL, NULL, NULL, 0 };
    int rcl = cis2_generate(inc, toks, 2, &gl, &r1, err);
    snprintf(tn, sizeof tn, "engine.%s.too-many-positions-message", name);
    CHECK(tn, rcl && !strcmp(err, want), "rc %d, message \"%s\"", rcl, rcl ? err : "");
    if (!rcl) cis2_result_free(&r1);
    /* The KV cache doubles (64 -> 128 -> 256 positions, each a new arena the
     * cached rows are copied into): 60 prompt tokens and 81 single steps must
     * give the last logits of one 141-token prefill (cache sized at once). */
    enum { GP = 60, GN = 141 };
    int32_t gt[GN];
    for (int i = 0; i < GN; i++) gt[i] = (int32_t)((i * 7919 + 13) % V);
    cis2_engine *g1, *g2;
    int grc = cis2_engine_new(&g1, &m, NULL, err) || cis2_engine_new(&g2, &m, NULL, err) ||
              cis2_engine_forward(g1, gt, GP, 0, la, err);
    for (int s = GP; s < GN && !grc; s++) grc = cis2_engine_forward(g1, &gt[s], 1, s, la, err);
    if (!grc) grc = cis2_engine_forward(g2, gt, GN, 0, lb, err);
    snprintf(tn, sizeof tn, "engine.%s.kv-cache-growth-keeps-rows", name);
    CHECK(tn, !grc && !memcmp(la, lb, (size_t)V * 4), "%s", grc ? err : "logits differ");
    cis2_engine_free(g1);
    cis2_engine_free(g2);
    free(la);
    free(lb);
    cis2_engine_free(inc);
    cis2_engine_free(full);
    cis2_model_unload(&m);
}

/* Several sequences in one engine (cis2_seq_submit / cis2_engine_step):
 * mixed prompt lengths, sequences joining late and finishing at different
 * steps, one cancelled — each result bit-identical to cis2_generate alone.
 * Through the public API only (cis2_model_open). */
static void check_multi(const char *name, const char *args, cis2_backend_kind bk)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN], tn[160];
    snprintf(dir, sizeof dir, "%s/unit-engine-multi-%s", tmp, name);
    char tr[160];
    snprintf(tr, sizeof tr, "engine.%s.reused-kv-%s", name,
             bk == CIS2_BACKEND_FAST ? "fast" : "ref");
    snprintf(tn, sizeof tn, "engine.%s.multi-seq-%s", name,
             bk == CIS2_BACKEND_FAST ? "fast" : "ref");
    if (make_fixture(dir, args)) {
        CHECK(tn, 0, "make_model.py failed");
        return;
    }
    cis2_model *m;
    if (cis2_model_open(&m, dir, NULL, err)) {
        CHECK(tn, 0, "%s", err);
        return;
    }
    const int V = cis2_model_config(m)->vocab;
    enum { NS = 6 };
    int32_t prompts[NS][12];
    int plen[NS] = { 1, 5, 12, 3, 7, 2 }, ngen[NS] = { 9, 4, 6, 11, 1, 7 };
    for (int i = 0; i < NS; i++)
        for (int j = 0; j < plen[i]; j++) prompts[i][j] = (int32_t)((i * 37 + j * 11 + 5) % V);
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = bk;
    eo.threads = 2;
    cis2_engine *solo, *multi;
    if (cis2_engine_new(&solo, m, &eo, err)) {
        CHECK(tn, 0, "%s", err);
        cis2_model_free(m);
        return;
    }
    eo.max_seqs = 4;
    if (cis2_engine_new(&multi, m, &eo, err)) {
        CHECK(tn, 0, "%s", err);
        cis2_engine_free(solo);
        cis2_model_free(m);
        return;
    }
    cis2_result want[NS], got[NS];
    int bad = 0, have[NS] = { 0 };
    for (int i = 0; i < NS; i++) {
        cis2_gen_opts g = { ngen[i], 0, NULL, NULL, NULL, 0 };
        if (cis2_generate(solo, prompts[i], plen[i], &g, &want[i], err)) {
            bad++;
            want[i].gen = NULL;
        }
    }
    /* The solo engine ran them one after another in its one slot, each over
     * the KV arena the previous run left (positions past its own hold the
     * earlier runs' keys): each must equal a run in an engine of its own. */
    int stale = 0;
    eo.max_seqs = 0;
    for (int i = 0; i < NS; i++) {
        cis2_engine *fresh;
        cis2_gen_opts g = { ngen[i], 0, NULL, NULL, NULL, 0 };
        cis2_result r;
        if (cis2_engine_new(&fresh, m, &eo, err)) {
            stale++;
            continue;
        }
        if (cis2_generate(fresh, prompts[i], plen[i], &g, &r, err)) stale++;
        else {
            stale += !want[i].gen || memcmp(r.witness, want[i].witness, 32) != 0;
            cis2_result_free(&r);
        }
        cis2_engine_free(fresh);
    }
    CHECK(tr, stale == 0, "%d of %d runs over a reused KV arena differ from fresh engines", stale,
          NS);
    eo.max_seqs = 4;
    /* 0..3 start together; 4 and 5 join when slots free up; 3 is cancelled
     * after two steps and then resubmitted. */
    int seq[NS], next = 0, steps = 0, cancelled = 0;
    for (; next < 4; next++) {
        cis2_gen_opts g = { ngen[next], 0, NULL, NULL, NULL, 0 };
        if (cis2_seq_submit(multi, prompts[next], plen[next], &g, &seq[next], err)) bad++;
    }
    while ((cis2_engine_active(multi) || next < NS) && steps < 100) {
        if (cis2_engine_step(multi, err)) {
            bad++;
            break;
        }
        steps++;
        if (steps == 2 && !cancelled) {
            cis2_seq_cancel(multi, seq[3]);
            cancelled = 1;
            cis2_gen_opts g = { ngen[3], 0, NULL, NULL, NULL, 0 };
            if (cis2_seq_submit(multi, prompts[3], plen[3], &g, &seq[3], err)) bad++;
        }
        for (int i = 0; i < next; i++)
            if (!have[i] && cis2_seq_done(multi, seq[i])) {
                if (cis2_seq_take(multi, seq[i], &got[i], err)) bad++;
                have[i] = 1;
                if (next < NS) {
                    cis2_gen_opts g = { ngen[next], 0, NULL, NULL, NULL, 0 };
                    if (cis2_seq_submit(multi, prompts[next], plen[next], &g, &seq[next], err))
                        bad++;
                    next++;
                }
            }
    }
    for (int i = 0; i < NS; i++) {
        if (!have[i] || !want[i].gen) {
            bad++;
            continue;
        }
        if (got[i].n_gen != want[i].n_gen ||
            memcmp(got[i].gen, want[i].gen, (size_t)want[i].n_gen * 4) ||
            memcmp(got[i].witness, want[i].witness, 32) ||
            memcmp(got[i].argmax, want[i].argmax, 32))
            bad++;
        cis2_result_free(&got[i]);
    }
    for (int i = 0; i < NS; i++) cis2_result_free(&want[i]);
    CHECK(tn, bad == 0 && cis2_engine_active(multi) == 0,
          "%d of %d sequences differ from solo runs (%s)", bad, NS, err);
    cis2_engine_free(multi);
    cis2_engine_free(solo);
    cis2_model_free(m);
}

/* Batched decode: each step runs every running sequence as one row of one
 * forward pass. For B = 1..16 slots over more sequences than slots (mixed
 * prompt lengths; some stop at an EOS, forced at different steps, others at
 * n_gen; late ones join as slots free up and one joins every other step),
 * every result is bit-identical (ids, witness, argmax digest) to the same
 * sequence run alone on the reference backend — on the reference backend and
 * on the fast one for every ISA this CPU runs, with 1, 2 and 3 threads. */
enum { BS_N = 20, BS_PCAP = 40 };
static int bs_pmax = 13; /* prompt lengths 1..bs_pmax (<= BS_PCAP) */
typedef struct {
    int32_t prompt[BS_PCAP], force[12];
    int plen, ngen, nforce, eos;
} bs_item;

static void bs_items(const cis2_model *m, bs_item *it)
{
    const cis2_config *c = cis2_model_config(m);
    for (int i = 0; i < BS_N; i++) {
        bs_item *x = &it[i];
        x->plen = 1 + (i * 5) % bs_pmax;
        x->ngen = 1 + (i * 7) % 11;
        for (int j = 0; j < x->plen; j++)
            x->prompt[j] = (int32_t)((i * 37 + j * 11 + 5) % c->vocab);
        x->eos = i % 3 == 0 && c->n_eos > 0 && x->ngen > 1;
        x->nforce = 0;
        if (x->eos) { /* forced ids ending in an EOS: the run stops there */
            x->nforce = 1 + (i / 3) % (x->ngen - 1);
            for (int j = 0; j < x->nforce; j++) x->force[j] = (int32_t)((i + 3 * j) % c->vocab);
            x->force[x->nforce - 1] = c->eos_ids[0];
        }
    }
}

static cis2_gen_opts bs_opts(const bs_item *x)
{
    cis2_gen_opts g = { x->ngen, x->eos, NULL, NULL, x->nforce ? x->force : NULL, x->nforce };
    return g;
}

static int bs_same(const cis2_result *a, const cis2_result *b)
{
    return a->n_gen == b->n_gen && !memcmp(a->gen, b->gen, (size_t)a->n_gen * 4) &&
           !memcmp(a->witness, b->witness, 32) && !memcmp(a->argmax, b->argmax, 32) &&
           a->stopped_at_eos == b->stopped_at_eos;
}

/* Runs every item through an engine of B slots; returns the number that differ. */
static int bs_run(const cis2_model *m, cis2_engine_opts eo, int B, const bs_item *it,
                  const cis2_result *want, char *err)
{
    cis2_engine *e;
    eo.max_seqs = B;
    if (cis2_engine_new(&e, m, &eo, err)) return BS_N;
    int seq[BS_N], have[BS_N] = { 0 }, next = 0, bad = 0, steps = 0;
    while ((next < BS_N || cis2_engine_active(e)) && steps < 400) {
        /* join: fill the free slots, but at most one new sequence on odd steps */
        int room = B - cis2_engine_active(e), joined = 0;
        while (next < BS_N && room > 0 && !(steps % 2 && joined)) {
            cis2_gen_opts g = bs_opts(&it[next]);
            if (cis2_seq_submit(e, it[next].prompt, it[next].plen, &g, &seq[next], err)) break;
            next++, room--, joined++;
        }
        if (cis2_engine_step(e, err)) break;
        steps++;
        for (int i = 0; i < next; i++)
            if (!have[i] && cis2_seq_done(e, seq[i])) {
                cis2_result r;
                have[i] = 1;
                bad += cis2_seq_take(e, seq[i], &r, err) || !bs_same(&r, &want[i]);
                cis2_result_free(&r);
            }
    }
    for (int i = 0; i < BS_N; i++) bad += !have[i];
    cis2_engine_free(e);
    return bad;
}

static void check_batched(const char *name, const char *args, int pmax)
{
    bs_pmax = pmax;
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN] = "", tn[200];
    snprintf(dir, sizeof dir, "%s/unit-engine-batched-%s", tmp, name);
    snprintf(tn, sizeof tn, "engine.%s.batched-decode", name);
    cis2_model *m;
    if (make_fixture(dir, args) || cis2_model_open(&m, dir, NULL, err)) {
        CHECK(tn, 0, "fixture: %s", err);
        return;
    }
    bs_item it[BS_N];
    bs_items(m, it);
    cis2_result want[BS_N];
    cis2_engine *solo;
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    int ok = !cis2_engine_new(&solo, m, &eo, err), n_eos = 0;
    for (int i = 0; i < BS_N; i++) {
        cis2_gen_opts g = bs_opts(&it[i]);
        memset(&want[i], 0, sizeof want[i]);
        ok = ok && !cis2_generate(solo, it[i].prompt, it[i].plen, &g, &want[i], err);
        n_eos += want[i].stopped_at_eos;
    }
    if (ok) cis2_engine_free(solo);
    /* the schedule really mixes EOS stops and n_gen ends */
    CHECK(tn, ok && n_eos >= 3 && n_eos < BS_N, "solo runs: %s (%d stopped at EOS)", err, n_eos);
    /* the reference backend, then every ISA path of the registry (kernels/pick.c) */
#define ISA_OF(k) ((k) ? fast_isas[(k)-1].name : "ref")
    for (size_t k = 0; ok && k <= FAST_N_ISAS; k++)
        for (int th = 1; th <= 3; th++) {
            memset(&eo, 0, sizeof eo);
            eo.threads = th;
            if (k > 0) {
                eo.backend = CIS2_BACKEND_FAST;
                cis2_isa_from_name(ISA_OF(k), &eo.isa);
                cis2_engine *probe;
                if (cis2_engine_new(&probe, m, &eo, err)) {
                    if (th == 1) SKIP(tn, "%s", err);
                    continue;
                }
                cis2_engine_free(probe);
            } else if (th > 1) continue; /* the reference backend is single-threaded */
            int bad = 0, first = 0;
            for (int B = 1; B <= 16; B++) {
                int b = bs_run(m, eo, B, it, want, err);
                if (b && !bad) first = B;
                bad += b;
            }
            char t2[260];
            snprintf(t2, sizeof t2, "%s.%s.threads-%d (B = 1..16, %d sequences each)", tn,
                     ISA_OF(k), th, BS_N);
            CHECK(t2, bad == 0, "%d results differ from solo runs, first at B = %d (%s)", bad,
                  first, err);
        }
    for (int i = 0; i < BS_N; i++) cis2_result_free(&want[i]);
    cis2_model_free(m);
}

/* One read-only model, many engines (include/cis2.h, thread safety): engines
 * on different threads at once give the single-engine digests; freeing one
 * engine never disturbs another; a fault injected into one engine's copy of
 * a weight is invisible to every other engine. */
typedef struct {
    const cis2_model *m;
    cis2_backend_kind bk;
    const char *fault, *fault_arg;
    cis2_result r;
    int rc;
    char err[CIS2_ERR_LEN];
} gen_job;

static const int32_t SHARED_PROMPT[9] = { 3, 141, 59, 26, 5, 35, 89, 79, 32 };

static void *gen_thread(void *arg)
{
    gen_job *j = arg;
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = j->bk;
    eo.threads = 2;
    eo.fault = j->fault;
    eo.fault_arg = j->fault_arg;
    cis2_engine *e;
    memset(&j->r, 0, sizeof j->r);
    j->rc = cis2_engine_new(&e, j->m, &eo, j->err);
    if (j->rc) return NULL;
    cis2_gen_opts g = { 8, 0, NULL, NULL, NULL, 0 };
    j->rc = cis2_generate(e, SHARED_PROMPT, 9, &g, &j->r, j->err);
    cis2_engine_free(e);
    return NULL;
}

static int same_run(const gen_job *j, const cis2_result *want)
{
    return !j->rc && j->r.n_gen == want->n_gen && !memcmp(j->r.witness, want->witness, 32) &&
           !memcmp(j->r.argmax, want->argmax, 32);
}

static void check_shared(const char *name, const char *args, const char *fault_arg)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN], tn[160];
    snprintf(dir, sizeof dir, "%s/unit-engine-shared-%s", tmp, name);
    cis2_model *m;
    snprintf(tn, sizeof tn, "shared.%s.fixture", name);
    if (make_fixture(dir, args) || cis2_model_open(&m, dir, NULL, err)) {
        CHECK(tn, 0, "%s", err);
        return;
    }
    gen_job base = { m, CIS2_BACKEND_REF, NULL, NULL, { 0 }, 0, "" };
    gen_thread(&base);
    if (base.rc) {
        CHECK(tn, 0, "%s", base.err);
        cis2_model_free(m);
        return;
    }
    /* two engines at once on two threads, three rounds, ref+fast and fast+fast */
    int bad = 0;
    for (int round = 0; round < 3; round++) {
        gen_job j[2] = {
            { m, round ? CIS2_BACKEND_FAST : CIS2_BACKEND_REF, NULL, NULL, { 0 }, 0, "" },
            { m, CIS2_BACKEND_FAST, NULL, NULL, { 0 }, 0, "" }
        };
        pthread_t th[2];
        for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, gen_thread, &j[i]);
        for (int i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            if (!same_run(&j[i], &base.r)) bad++;
            if (!j[i].rc) cis2_result_free(&j[i].r);
        }
    }
    snprintf(tn, sizeof tn, "shared.%s.two-engines-two-threads-give-the-single-engine-digests",
             name);
    CHECK(tn, bad == 0, "%d of 6 concurrent runs differ", bad);
    /* freeing one engine never disturbs another (both fast: the backends
     * used to keep their packed weights in the shared model, so freeing the
     * newer engine left the older one without weights) */
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = CIS2_BACKEND_FAST;
    eo.threads = 2;
    cis2_engine *e1 = NULL, *e2 = NULL;
    cis2_result r1, r2;
    cis2_gen_opts g = { 8, 0, NULL, NULL, NULL, 0 };
    int rc = cis2_engine_new(&e1, m, &eo, err) || cis2_engine_new(&e2, m, &eo, err) ||
             cis2_generate(e2, SHARED_PROMPT, 9, &g, &r2, err);
    cis2_engine_free(e2);
    rc = rc || cis2_generate(e1, SHARED_PROMPT, 9, &g, &r1, err);
    cis2_engine_free(e1);
    snprintf(tn, sizeof tn, "shared.%s.freeing-one-engine-leaves-the-other-intact", name);
    CHECK(tn,
          !rc && !memcmp(r1.witness, base.r.witness, 32) && !memcmp(r2.witness, base.r.witness, 32),
          "%s", rc ? err : "digests differ");
    if (!rc) {
        cis2_result_free(&r1);
        cis2_result_free(&r2);
    }
    /* a weight-bit fault lives in its engine: engines made before or after
     * it, used while it exists, see the model as loaded */
    cis2_engine *before = NULL, *faulty = NULL, *after = NULL;
    cis2_result rb, rf, ra;
    memset(&eo, 0, sizeof eo);
    rc = cis2_engine_new(&before, m, &eo, err);
    eo.fault = "weight-bit";
    eo.fault_arg = fault_arg;
    rc = rc || cis2_engine_new(&faulty, m, &eo, err);
    eo.fault = eo.fault_arg = NULL;
    rc = rc || cis2_engine_new(&after, m, &eo, err) ||
         cis2_generate(before, SHARED_PROMPT, 9, &g, &rb, err) ||
         cis2_generate(after, SHARED_PROMPT, 9, &g, &ra, err) ||
         cis2_generate(faulty, SHARED_PROMPT, 9, &g, &rf, err);
    cis2_engine_free(faulty);
    cis2_engine_free(before);
    cis2_engine_free(after);
    snprintf(tn, sizeof tn, "shared.%s.fault-stays-in-its-engine", name);
    CHECK(tn,
          !rc && !memcmp(rb.witness, base.r.witness, 32) &&
              !memcmp(ra.witness, base.r.witness, 32) && memcmp(rf.witness, base.r.witness, 32),
          "%s", rc ? err : "a digest is wrong");
    if (!rc) {
        cis2_result_free(&rb);
        cis2_result_free(&ra);
        cis2_result_free(&rf);
    }
    cis2_result_free(&base.r);
    cis2_model_free(m);
}

/* §1.2/§1.3: a caller's thread with an unusual FP environment (round toward
 * zero or upward, FTZ/DAZ off, FE_INVALID/FE_OVERFLOW/FE_DIVBYZERO traps
 * enabled) gets the bits of the pinned environment from cis2_model_open,
 * cis2_generate (ref and fast) and cis2_selftest, and its own control
 * register back unchanged. */
static void check_caller_fpenv(void)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN], tn[128];
    snprintf(dir, sizeof dir, "%s/unit-engine-fpenv", tmp);
    if (make_fixture(dir, "--arch llama --heads 2 --kv-heads 1 --hidden 64 --layers 2")) {
        CHECK("fpenv.caller.fixture", 0, "make_model.py failed");
        return;
    }
#if defined(__x86_64__)
    /* RC = 11 (toward zero) / 10 (up); FTZ/DAZ off; invalid, div-by-zero and
     * overflow unmasked (bits 7, 9, 10 clear) */
    const uint64_t odd[2] = { (0x1F80u & ~0x680u) | (3u << 13), 0x1F80u | (2u << 13) };
#elif defined(__aarch64__)
    /* RMode = 11 (toward zero) / 01 (up); FZ off; IOE, DZE, OFE requested
     * (trap enables read as zero where the CPU has none) */
    const uint64_t odd[2] = { (3ull << 22) | 0x700ull, 1ull << 22 };
#else
    SKIP("fpenv.caller", "no FP control register on this ISA");
    return;
#endif
    int32_t prompt[5] = { 1, 2, 3, 4, 5 };
    cis2_gen_opts g = { 8, 0, NULL, NULL, NULL, 0 };
    cis2_result base[2];
    cis2_model *m;
    int rc = cis2_model_open(&m, dir, NULL, err); /* the test's pinned thread */
    for (int b = 0; b < 2 && !rc; b++) {
        cis2_engine_opts o = { .backend = b ? CIS2_BACKEND_FAST : CIS2_BACKEND_REF, .threads = 2 };
        cis2_engine *e;
        rc = cis2_engine_new(&e, m, &o, err) || cis2_generate(e, prompt, 5, &g, &base[b], err);
        if (!rc) cis2_engine_free(e);
    }
    if (rc) {
        CHECK("fpenv.caller.baseline", 0, "%s", err);
        return;
    }
    const uint64_t pinned = cis2_fpenv_read();
    for (int k = 0; k < 2; k++) {
        cis2_model *m2 = NULL;
        cis2_result r[2];
        int ok[2] = { 0, 0 };
        cis2_fpenv_write(odd[k]);
        const uint64_t before = cis2_fpenv_read();
        int lrc = cis2_model_open(&m2, dir, NULL, err);
        const uint64_t after_open = cis2_fpenv_read();
        uint64_t after_gen = after_open;
        for (int b = 0; b < 2 && !lrc; b++) {
            cis2_engine_opts o = { .backend = b ? CIS2_BACKEND_FAST : CIS2_BACKEND_REF,
                                   .threads = 2 };
            cis2_engine *e;
            if (cis2_engine_new(&e, m2, &o, err)) continue;
            if (!cis2_generate(e, prompt, 5, &g, &r[b], err)) {
                ok[b] = !memcmp(r[b].witness, base[b].witness, 32);
                cis2_result_free(&r[b]);
            }
            if (cis2_fpenv_read() != before) after_gen = cis2_fpenv_read();
            cis2_engine_free(e);
        }
        FILE *nul = fopen("/dev/null", "w");
        int st = nul ? cis2_selftest(nul) : -1;
        if (nul) fclose(nul);
        const uint64_t after_selftest = cis2_fpenv_read();
        cis2_fpenv_write(pinned);
        const cis2_digests *d = m2 ? cis2_model_digests(m2) : NULL, *d0 = cis2_model_digests(m);
        snprintf(tn, sizeof tn, "fpenv.caller-%d.model-open-digests", k);
        CHECK(tn,
              !lrc && !memcmp(d->inv_freq_digest, d0->inv_freq_digest, 32) &&
                  !memcmp(d->table_digest, d0->table_digest, 32) &&
                  cis2_model_config(m2)->eps == cis2_model_config(m)->eps,
              "%s", lrc ? err : "the inv_freq/table digests or eps depend on the caller's mode");
        snprintf(tn, sizeof tn, "fpenv.caller-%d.generate-bit-identical", k);
        CHECK(tn, ok[0] && ok[1], "ref %s, fast %s", ok[0] ? "same" : "differs",
              ok[1] ? "same" : "differs");
        snprintf(tn, sizeof tn, "fpenv.caller-%d.control-register-restored", k);
        CHECK(tn, after_open == before && after_gen == before && after_selftest == before,
              "caller 0x%llx; after open 0x%llx, generate 0x%llx, selftest 0x%llx",
              (unsigned long long)before, (unsigned long long)after_open,
              (unsigned long long)after_gen, (unsigned long long)after_selftest);
        snprintf(tn, sizeof tn, "fpenv.caller-%d.selftest", k);
        CHECK(tn, st == 0, "%d failures", st);
        cis2_model_free(m2);
    }
    cis2_result_free(&base[0]);
    cis2_result_free(&base[1]);
    cis2_model_free(m);
}

/* cis2_seq_cancel from inside an on_step (a streaming client gone): of
 * another running sequence, of the calling sequence itself mid-run and at
 * its last step. The cancelled slot is neither done nor takeable, frees for
 * the next submit, and the sequences left run bit-identical to solo runs.
 * cis2_engine_step and cis2_seq_finish from inside on_step are refused. */
typedef struct {
    cis2_engine *e;
    int victim, at, inner_rc;
} cancel_ctx;

static void cancel_on_step(void *ctx, int step, const float *logits, int vocab, int32_t chosen)
{
    cancel_ctx *c = ctx;
    char err[CIS2_ERR_LEN];
    if (step != c->at) return;
    c->inner_rc = !cis2_engine_step(c->e, err) || !cis2_seq_finish(c->e, c->victim, err);
    cis2_seq_cancel(c->e, c->victim);
}

static void check_cancel_in_on_step(void)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN] = "", tn[128];
    snprintf(dir, sizeof dir, "%s/unit-engine-cancel", tmp);
    cis2_model *m;
    if (make_fixture(dir, "--arch llama --heads 2 --kv-heads 1 --hidden 32 --layers 1") ||
        cis2_model_open(&m, dir, NULL, err)) {
        CHECK("cancel-in-on-step.fixture", 0, "%s", err);
        return;
    }
    int32_t pa[3] = { 1, 2, 3 }, pb[4] = { 7, 8, 9, 10 };
    cis2_gen_opts g = { 6, 0, NULL, NULL, NULL, 0 };
    cis2_result want_b;
    for (int be = 0; be < 2; be++) {
        cis2_engine_opts o = { .backend = be ? CIS2_BACKEND_FAST : CIS2_BACKEND_REF,
                               .threads = 2,
                               .max_seqs = 2 };
        cis2_engine *e;
        if (cis2_engine_new(&e, m, &o, err) || cis2_generate(e, pb, 4, &g, &want_b, err)) {
            CHECK("cancel-in-on-step.solo", 0, "%s", err);
            break;
        }
        if (be == 0) { /* out-of-range counts: refused, never clamped */
            static const int bad[4][2] = { { 2000, 1 }, { -1, 1 }, { 2, -1 }, { 2, 5000 } };
            int refused = 0;
            for (int i = 0; i < 4; i++) {
                cis2_engine_opts ob = { .backend = CIS2_BACKEND_FAST,
                                        .threads = bad[i][0],
                                        .max_seqs = bad[i][1] };
                cis2_engine *eb = (cis2_engine *)1;
                char eb_err[CIS2_ERR_LEN] = "";
                int r = cis2_engine_new(&eb, m, &ob, eb_err);
                const char *want = i < 2 ? "is outside [0, 1024]" : "is outside [0, 4096]";
                refused += r && eb == NULL && strstr(eb_err, want) != NULL;
                if (!r) cis2_engine_free(eb);
                else if (!strstr(eb_err, want)) printf("  engine_new case %d: %s\n", i, eb_err);
            }
            CHECK("api.engine-new-out-of-range-refused", refused == 4, "%d of 4 refused", refused);
        }
        if (be == 0) { /* NULL options or prompt: refused, never read */
            cis2_result junk;
            int sq, r1 = cis2_generate(e, pb, 4, NULL, &junk, err),
                    r2 = cis2_seq_submit(e, NULL, 3, &g, &sq, err);
            CHECK("api.generate-null-options-or-prompt",
                  r1 && r2 && sq == -1 && strstr(err, "the prompt is NULL") &&
                      !cis2_engine_active(e),
                  "generate rc %d, submit rc %d: %s", r1, r2, err);
        }
        /* 0: a's on_step cancels b at step 2; 1: a cancels itself at step 2;
         * 2: a cancels itself at its last step (5) */
        for (int mode = 0; mode < 3; mode++) {
            cancel_ctx c = { e, -1, mode == 2 ? 5 : 2, 0 };
            cis2_gen_opts ga = { 6, 0, cancel_on_step, &c, NULL, 0 };
            int sa, sb,
                rc = cis2_seq_submit(e, pa, 3, &ga, &sa, err) ||
                     cis2_seq_submit(e, pb, 4, &g, &sb, err);
            c.victim = mode == 0 ? sb : sa;
            for (int i = 0; !rc && i < 20 && cis2_engine_active(e); i++)
                rc = cis2_engine_step(e, err);
            int survivor = mode == 0 ? sa : sb;
            cis2_result got, junk;
            int gone = !rc && !cis2_seq_done(e, c.victim) && cis2_seq_take(e, c.victim, &junk, err);
            int took = !rc && cis2_seq_done(e, survivor) && !cis2_seq_take(e, survivor, &got, err);
            int same = took && (mode == 0 || !memcmp(got.witness, want_b.witness, 32));
            if (took) cis2_result_free(&got);
            /* both slots free again: a fresh run matches the solo one */
            cis2_result again;
            int reuse = !cis2_engine_active(e) && !cis2_generate(e, pb, 4, &g, &again, err) &&
                        !cis2_seq_submit(e, pa, 3, &g, &sa, err);
            if (reuse) {
                reuse = !memcmp(again.witness, want_b.witness, 32);
                cis2_result_free(&again);
                cis2_seq_cancel(e, sa);
            }
            snprintf(tn, sizeof tn, "cancel-in-on-step.%s.mode%d", be ? "fast" : "ref", mode);
            CHECK(tn, !rc && gone && same && reuse && !c.inner_rc,
                  "rc %d (%s), cancelled one gone %d, survivor %d/%d, slots reusable %d, "
                  "reentrant step/finish refused %d",
                  rc, err, gone, took, same, reuse, !c.inner_rc);
        }
        cis2_result_free(&want_b);
        cis2_engine_free(e);
    }
    cis2_model_free(m);
}

/* A model whose tokenizer.json cannot be used still loads (ids-only runs
 * need none); cis2_model_tokenizer then returns NULL with the reason in err,
 * or leaves err alone when the caller passes NULL for it (cis2.h). */
/* cis2_witness_replay over a run recorded from on_step gives the run's
 * witness under the digests it ran with, greedy or with forced ids, and
 * cis2_witness_replay_sampled a sampled run's (its stream holds the sampler
 * record, docs/sampling.md §5); under another weights digest, or a sampled
 * run replayed as a greedy one, it gives another. */
typedef struct {
    float *rows;
    int32_t ids[16];
    int n, vocab;
} rec_ctx;

static void rec_on_step(void *ctx, int step, const float *logits, int vocab, int32_t chosen)
{
    rec_ctx *c = ctx;
    if (step != c->n || step >= 16 || vocab != c->vocab) return;
    memcpy(c->rows + (size_t)step * (size_t)vocab, logits, (size_t)vocab * sizeof(float));
    c->ids[c->n++] = chosen;
}

static void check_witness_replay(void)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN] = "";
    snprintf(dir, sizeof dir, "%s/unit-engine-replay", tmp);
    cis2_model *m;
    cis2_engine *e;
    if (make_fixture(dir, "--arch llama --heads 2 --kv-heads 1 --hidden 32 --layers 1") ||
        cis2_model_open(&m, dir, NULL, err)) {
        CHECK("witness-replay.fixture", 0, "%s", err);
        return;
    }
    if (cis2_engine_new(&e, m, NULL, err)) {
        CHECK("witness-replay.engine", 0, "%s", err);
        cis2_model_free(m);
        return;
    }
    const cis2_config *c = cis2_model_config(m);
    int32_t prompt[4] = { 7, 8, 9, 10 }, force[3] = { 1, 2, 3 };
    static const char *const name[3] = { "", "forced-ids-", "sampled-" };
    for (int k = 0; k < 3; k++) {
        rec_ctx rc = { malloc((size_t)16 * (size_t)c->vocab * sizeof(float)), { 0 }, 0, c->vocab };
        cis2_gen_opts g = { 9, 0, rec_on_step, &rc, k == 1 ? force : NULL, k == 1 ? 3 : 0 };
        const cis2_sampler smp = { 1.5f, 0, 0.95f, 0.0f, 3 }, *sp = k == 2 ? &smp : NULL;
        cis2_result r;
        if (!rc.rows || cis2_generate_sampled(e, prompt, 4, &g, sp, &r, err)) {
            CHECK("witness-replay.generate", 0, "%s", err);
            free(rc.rows);
            break;
        }
        uint8_t w[32], w2[32], w3[32];
        cis2_digests d = *cis2_model_digests(m);
        cis2_witness_replay_sampled(&d, sp, prompt, 4, rc.rows, rc.ids, rc.n, c->vocab, w);
        cis2_witness_replay(&d, prompt, 4, rc.rows, rc.ids, rc.n, c->vocab, w3);
        d.weights_sha256[0] ^= 1;
        cis2_witness_replay_sampled(&d, sp, prompt, 4, rc.rows, rc.ids, rc.n, c->vocab, w2);
        char nm[96];
        snprintf(nm, sizeof nm, "witness-replay.%sequals-run", name[k]);
        CHECK(nm, rc.n == r.n_gen && !memcmp(w, r.witness, 32), "%d of %d steps recorded", rc.n,
              r.n_gen);
        snprintf(nm, sizeof nm, "witness-replay.%sother-weights-digest-differs", name[k]);
        CHECK(nm, memcmp(w2, r.witness, 32) != 0, "the same witness");
        /* greedy: the sampled replay without a sampler is the plain one; sampled:
         * the plain replay (no sampler record) is not the run's witness */
        snprintf(nm, sizeof nm, "witness-replay.%s%s", name[k],
                 k == 2 ? "without-sampler-differs" : "no-sampler-is-plain-replay");
        CHECK(nm, (memcmp(w3, r.witness, 32) != 0) == (k == 2), "plain replay %s the run's",
              k == 2 ? "gives" : "does not give");
        cis2_result_free(&r);
        free(rc.rows);
    }
    cis2_engine_free(e);
    cis2_model_free(m);
}

static void check_unusable_tokenizer(void)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], path[600], err[CIS2_ERR_LEN] = "";
    snprintf(dir, sizeof dir, "%s/unit-engine-badtok", tmp);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = NULL;
    if (make_fixture(dir, "--arch llama --heads 2 --kv-heads 1 --hidden 32 --layers 1") ||
        !(f = fopen(path, "w")) || fputs("{}\n", f) < 0 || fclose(f)) {
        CHECK("api.model-tokenizer-unusable.fixture", 0, "cannot make %s", dir);
        return;
    }
    cis2_model *m = NULL;
    if (cis2_model_open(&m, dir, NULL, err)) {
        CHECK("api.model-tokenizer-unusable.load", 0, "%s", err);
        return;
    }
    CHECK("api.model-tokenizer-unusable.says-why", !cis2_model_tokenizer(m, err) && err[0],
          "no reason given");
    CHECK("api.model-tokenizer-unusable.null-err", !cis2_model_tokenizer(m, NULL),
          "a tokenizer from {}");
    cis2_model_free(m);
}

int main(void)
{
    if (cis2_fpenv_pin()) {
        CHECK("engine.pin", 0, "cannot pin");
        UNIT_END();
    }
    check_caller_fpenv();
    check_cancel_in_on_step();
    check_witness_replay();
    check_unusable_tokenizer();
    check_arch("llama", "--arch llama --heads 6 --kv-heads 2 --hidden 48 --layers 2");
    check_arch("qwen2", "--arch qwen2 --heads 4 --kv-heads 1 --hidden 32");
    check_arch("qwen3", "--arch qwen3 --heads 4 --kv-heads 2 --hidden 32 --head-dim 24 --untied");
    check_multi("llama", "--arch llama --heads 6 --kv-heads 2 --hidden 48 --layers 2",
                CIS2_BACKEND_REF);
    check_multi("llama", "--arch llama --heads 6 --kv-heads 2 --hidden 48 --layers 2",
                CIS2_BACKEND_FAST);
    check_multi("qwen2", "--arch qwen2 --heads 4 --kv-heads 1 --hidden 32", CIS2_BACKEND_FAST);
    check_batched("llama", "--arch llama --heads 6 --kv-heads 2 --hidden 48 --layers 2", 13);
    check_batched("qwen3", "--arch qwen3 --heads 4 --kv-heads 2 --hidden 32 --head-dim 24", 13);
    /* q/k/v biases; and 10 query heads per KV head (a group split over two
     * attention tasks) */
    check_batched("qwen2", "--arch qwen2 --heads 4 --kv-heads 1 --hidden 32", 13);
    check_batched("qwen3-g10", "--arch qwen3 --heads 20 --kv-heads 2 --hidden 40 --head-dim 8", 13);
    /* SmolLM2's head shape (hd 64: the V-mix's 64-dim blocks; 3 query heads
     * per KV head), contexts past the scores' 16-key blocks */
    check_batched("llama-hd64", "--arch llama --heads 3 --kv-heads 1 --hidden 192 --layers 1", 40);
    check_shared("llama", "--arch llama --heads 6 --kv-heads 2 --hidden 48 --layers 2 --vocab 800",
                 "model.embed_tokens.weight:700:30"); /* tied: the embedding and the head */
    check_shared("qwen3-untied", "--arch qwen3 --heads 4 --kv-heads 2 --hidden 32 --untied",
                 "lm_head.weight:700:30");
    UNIT_END();
}
