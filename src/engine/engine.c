/* The engine object (cis2_engine_new/free), its activation memory, the
 * sequences' lifecycle and the greedy loop (§3.4, §11.2): a step decodes
 * every running sequence in one forward pass, then prefills the queued ones.
 * The public entry points pin FTZ/DAZ (§1.3). The forward pass is
 * forward.c's, the KV cache kv_cache.c's, the witness stream witness.c's;
 * the waits for the witness side job are here, around the passes. */
#include "engine/engine.h"
#include "core/fparith.h"
#include "engine/sample.h"
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- memory */
/* The per-row float buffers are carved from one huge-page mapping: a first
 * prefill touches megabytes of them, and 4 KiB page faults on a VM cost
 * ~10 us each (thousands per 256-token prompt). They hold nothing across
 * forward passes, so a larger arena starts empty. */
static int eng_ensure_rows(cis2_engine *e, int T, char *err)
{
    if (T <= e->t_cap) return 0;
    witness_wait(e); /* the logits move */
    const cis2_config *c = &e->m->cfg;
    if (eng_reserve(e, T, 0, err)) return 1;
    size_t H = (size_t)c->hidden, qd = (size_t)c->n_heads * c->head_dim,
           kvd = (size_t)c->n_kv_heads * c->head_dim, I = (size_t)c->inter, t = (size_t)T;
    size_t wide = H > qd ? H : qd, half = c->head_dim / 2 > 0 ? (size_t)c->head_dim / 2 : 1;
    const size_t f = sizeof(float);
    float **bufs[] = { &e->x,    &e->xn, &e->q,   &e->k,      &e->v,      &e->att, &e->proj,
                       &e->gate, &e->up, &e->act, &e->rope_c, &e->rope_s, &e->xf };
    const size_t len[] = { t * H, t * H, t * qd, t * kvd,  t * kvd,  t * qd, t * wide,
                           t * I, t * I, t * I,  t * half, t * half, t * H };
    size_t off[sizeof len / sizeof len[0]], total = 0, alen = 0;
    for (size_t i = 0; i < sizeof len / sizeof len[0]; i++) {
        off[i] = total;
        total += (len[i] * f + 63) & ~(size_t)63; /* each buffer cache-line aligned */
    }
    uint8_t *a = eng_buf_alloc(total, &alen);
    if (!a || eng_grow(&e->rows, t, sizeof *e->rows) ||
        eng_grow(&e->tokens, t, sizeof *e->tokens) || eng_grow(&e->spans, t, sizeof *e->spans) ||
        eng_grow(&e->logits, t * (size_t)c->vocab, f)) {
        eng_buf_free(a, alen);
        snprintf(err, CIS2_ERR_LEN, "out of memory for %d token%s of activations", T,
                 T == 1 ? "" : "s");
        return 1;
    }
    eng_buf_free(e->arena, e->arena_len);
    e->arena = a;
    e->arena_len = alen;
    for (size_t i = 0; i < sizeof len / sizeof len[0]; i++) *bufs[i] = (float *)(a + off[i]);
    e->t_cap = T;
    return 0;
}

/* A run ends (taken, cancelled or failed to start): its slot keeps the KV
 * arena for the slot's next run, which then faults in no fresh pages (on a
 * VM ~10 us per 4 KiB page, and 2 MiB pages are zeroed first). A run reads
 * only positions it wrote itself (§9.2: keys 0..pos), so what an earlier run
 * left past them changes nothing. */
static void seq_release(seq_t *s)
{
    seq_t keep = { .kv_cap = s->kv_cap,
                   .kc = s->kc,
                   .vc = s->vc,
                   .kb = s->kb,
                   .kb_cap = s->kb_cap,
                   .kv = s->kv,
                   .kv_len = s->kv_len };
    free(s->force_copy);
    free(s->smp_scratch);
    cis2_result_free(&s->r);
    *s = keep;
}

static int cis2_engine_new_impl(cis2_engine **out, const cis2_model *m, const cis2_engine_opts *o,
                                char *err)
{
    *out = NULL;
    if (!m) {
        snprintf(err, CIS2_ERR_LEN, "cis2_engine_new: no model (m is NULL)");
        return 1;
    }
    cis2_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    e->m = m;
    if (o) e->o = *o;
    e->n_seqs = e->o.max_seqs > 0 ? e->o.max_seqs : 1;
    /* Out-of-range counts are the caller's mistake, said as such: never a
     * silent clamp to a thread count or a queue the caller did not ask for. */
    if (e->o.max_seqs < 0 || e->n_seqs > 4096) {
        snprintf(err, CIS2_ERR_LEN, "max_seqs %d is outside [0, 4096] (0 = 1)", e->o.max_seqs);
        free(e);
        return 1;
    }
    if (e->o.threads < 0 || e->o.threads > 1024) {
        snprintf(err, CIS2_ERR_LEN, "threads %d is outside [0, 1024] (0 = every CPU it may run on)",
                 e->o.threads);
        free(e);
        return 1;
    }
    const char *bn = e->o.backend == CIS2_BACKEND_REF ? "ref" : "fast";
    if (e->o.backend != CIS2_BACKEND_REF && e->o.backend != CIS2_BACKEND_FAST &&
        e->o.backend != CIS2_BACKEND_APPROX) {
        snprintf(err, CIS2_ERR_LEN,
                 "unknown backend %d (expected CIS2_BACKEND_REF or CIS2_BACKEND_FAST)",
                 (int)e->o.backend);
        free(e);
        return 1;
    }
    const cis2_config *c = &m->cfg;
    e->w = m->w;
    e->layers = malloc((size_t)c->n_layers * sizeof *e->layers);
    if (!e->layers) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        free(e);
        return 1;
    }
    memcpy(e->layers, m->w.layers, (size_t)c->n_layers * sizeof *e->layers);
    e->w.layers = e->layers;
    /* FAULT: validated (and weight-bit applied to this engine's view) before the backend */
    int rc =
        e->o.fault ? cis2_fault_setup(&e->fault, e->o.fault, e->o.fault_arg, bn, c, &e->w, err) : 0;
    if (!rc) {
        if (e->o.backend == CIS2_BACKEND_REF)
            rc = cis2_backend_ref_new(&e->be, &e->w, &e->fault, err);
        else if (e->o.backend == CIS2_BACKEND_APPROX)
            rc = cis2_backend_armd_new(&e->be, &e->o, &e->w, err);
        else rc = cis2_backend_fast_new(&e->be, &e->o, err);
    }
    if (rc) {
        cis2_engine_free(e);
        return 1;
    }
    e->seqs = calloc((size_t)e->n_seqs + 1, sizeof *e->seqs);
    e->logits_side = malloc((size_t)c->vocab * sizeof(float));
    if (!e->seqs || !e->logits_side) snprintf(err, CIS2_ERR_LEN, "out of memory");
    if (!e->seqs || !e->logits_side || eng_ensure_rows(e, 1, err)) { /* each says its own line */
        cis2_engine_free(e);
        return 1;
    }
    *out = e;
    return 0;
}

void cis2_engine_free(cis2_engine *e)
{
    if (!e) return;
    if (e->be) {
        witness_wait(e);
        e->be->destroy(e->be);
    }
    for (int i = 0; e->seqs && i <= e->n_seqs; i++) {
        seq_release(&e->seqs[i]);
        eng_kv_free(&e->seqs[i]);
    }
    free(e->seqs);
    void *bufs[] = { e->rows, e->tokens, e->spans, e->logits, e->logits_side, e->scores, e->probs };
    eng_buf_free(e->arena, e->arena_len);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    cis2_fault_free(&e->fault);
    free(e->layers);
    free(e);
}

const cis2_model *cis2_engine_model(const cis2_engine *e) { return e->m; }

const char *cis2_engine_backend(const cis2_engine *e) { return e->be->name; }

static int is_eos(const cis2_config *c, int32_t id)
{
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == id) return 1;
    return 0;
}

/* ---- the public entry points pin FTZ/DAZ on the caller's thread and
 * restore its control register on the way out (§1.3). */
typedef struct {
    uint64_t saved;
} fp_guard;
static int fp_enter(fp_guard *g, char *err) { return cis2_fpenv_enter(&g->saved, err); }
static void fp_leave(const fp_guard *g) { cis2_fpenv_write(g->saved); }

/* A NULL engine, refused with the reason by every call that has an err. */
static int no_engine(const cis2_engine *e, const char *fn, char *err)
{
    if (e) return 0;
    snprintf(err, CIS2_ERR_LEN, "%s: no engine (e is NULL)", fn);
    return 1;
}

/* Rows for tokens[0..n) of sequence s at positions pos0..: one span, its
 * rows allocated first. */
static int forward_one(cis2_engine *e, seq_t *s, const int32_t *tokens, int n, int pos0,
                       float *logits, char *err)
{
    if (n < 1) {
        snprintf(err, CIS2_ERR_LEN, "forward: no tokens");
        return 1;
    }
    if (eng_ensure_rows(e, n, err)) return 1;
    memcpy(e->tokens, tokens, (size_t)n * sizeof *tokens);
    e->spans[0] = (span_t){ s, 0, n, pos0 };
    return eng_forward(e, e->spans, 1, n, logits, err);
}

int cis2_engine_forward(cis2_engine *e, const int32_t *tokens, int n, int pos0, float *logits,
                        char *err)
{
    if (no_engine(e, __func__, err)) return 1;
    fp_guard fg;
    if (fp_enter(&fg, err)) return 1;
    int rc = forward_one(e, &e->seqs[e->n_seqs], tokens, n, pos0, logits, err);
    fp_leave(&fg);
    return rc;
}

/* `fn`: the public call, named in a message about a NULL engine. */
static int seq_submit(const char *fn, cis2_engine *e, const int32_t *prompt, int n_prompt,
                      const cis2_gen_opts *g, const cis2_sampler *smp, int *seq, char *err)
{
    *seq = -1;
    if (no_engine(e, fn, err)) return 1;
    const cis2_model *m = e->m;
    const cis2_config *c = &m->cfg;
    if (!g || (n_prompt > 0 && !prompt)) {
        snprintf(err, CIS2_ERR_LEN, "%s is NULL", g ? "the prompt" : "the generation options (g)");
        return 1;
    }
    if (n_prompt < 1) {
        snprintf(err, CIS2_ERR_LEN, "the prompt has no tokens");
        return 1;
    }
    if (g->n_gen < 1) {
        snprintf(err, CIS2_ERR_LEN, "-n must be at least 1");
        return 1;
    }
    /* Positions computed: 0 .. n_prompt + n_gen - 2 (the last pick is never fed). */
    if ((int64_t)n_prompt + g->n_gen - 1 > c->max_pos) {
        snprintf(err, CIS2_ERR_LEN,
                 "prompt (%d tokens) + %d tokens to generate exceeds max_position_embeddings = %d",
                 n_prompt, g->n_gen, c->max_pos);
        return 1;
    }
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c->vocab) {
            snprintf(err, CIS2_ERR_LEN,
                     "prompt token id %d is outside the vocabulary (vocab_size = %d)", prompt[i],
                     c->vocab);
            return 1;
        }
    if (g->n_force < 0 || (g->n_force > 0 && !g->force)) {
        snprintf(err, CIS2_ERR_LEN, "teacher forcing: n_force %d without ids", g->n_force);
        return 1;
    }
    for (int i = 0; i < g->n_force; i++)
        if (g->force[i] < 0 || g->force[i] >= c->vocab) {
            snprintf(err, CIS2_ERR_LEN,
                     "forced token id %d is outside the vocabulary (vocab_size = %d)", g->force[i],
                     c->vocab);
            return 1;
        }
    if (smp && cis2_sampler_check(smp, err)) return 1;
    const int sampled = smp && smp->temperature > 0.0f;
    int slot = -1;
    for (int i = 0; i < e->n_seqs; i++)
        if (e->seqs[i].state == SEQ_FREE) {
            slot = i;
            break;
        }
    if (slot < 0) {
        snprintf(err, CIS2_ERR_LEN, "all %d sequence slots are in use", e->n_seqs);
        return 1;
    }
    seq_t *s = &e->seqs[slot];
    s->r.prompt = malloc((size_t)n_prompt * sizeof(int32_t));
    s->r.gen = malloc((size_t)g->n_gen * sizeof(int32_t));
    s->g = *g;
    if (g->n_force > 0) {
        s->force_copy = malloc((size_t)g->n_force * sizeof(int32_t));
        if (s->force_copy) memcpy(s->force_copy, g->force, (size_t)g->n_force * sizeof(int32_t));
    }
    s->g.force = s->force_copy;
    if (sampled) {
        s->smp = *smp;
        s->smp_scratch = malloc(smp_scratch_bytes(c->vocab));
    }
    if (!s->r.prompt || !s->r.gen || (g->n_force > 0 && !s->force_copy) ||
        (sampled && !s->smp_scratch)) {
        seq_release(s);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    memcpy(s->r.prompt, prompt, (size_t)n_prompt * sizeof(int32_t));
    s->r.n_prompt = n_prompt;
    s->r.nan_step = s->r.nan_index = -1;
    witness_begin(&s->w, &m->dg, prompt, n_prompt);
    if (sampled) { /* docs/sampling.md §5: the sampler, between prompt and steps */
        uint8_t rec[40];
        smp_record(smp, rec);
        cis2_sha256_update(&s->w, rec, sizeof rec);
    }
    s->state = SEQ_QUEUED;
    *seq = slot;
    return 0;
}

int cis2_seq_submit(cis2_engine *e, const int32_t *prompt, int n_prompt, const cis2_gen_opts *g,
                    int *seq, char *err)
{
    return seq_submit(__func__, e, prompt, n_prompt, g, NULL, seq, err);
}

int cis2_seq_submit_sampled(cis2_engine *e, const int32_t *prompt, int n_prompt,
                            const cis2_gen_opts *g, const cis2_sampler *smp, int *seq, char *err)
{
    return seq_submit(__func__, e, prompt, n_prompt, g, smp, seq, err);
}

/* The run ends here: close the §12.1 witness stream and compute the §12.2
 * argmax digest over prompt ++ generated ids. */
static void seq_finalize(seq_t *s)
{
    cis2_sha256_final(&s->w, s->r.witness);
    cis2_sha256 a;
    cis2_sha256_init(&a);
    for (int i = 0; i < s->r.n_prompt; i++) cis2_sha256_update_u32(&a, (uint32_t)s->r.prompt[i]);
    for (int i = 0; i < s->r.n_gen; i++) cis2_sha256_update_u32(&a, (uint32_t)s->r.gen[i]);
    cis2_sha256_final(&a, s->r.argmax);
    s->state = SEQ_DONE;
}

/* The part of emitting that reads only this sequence's state: the next id
 * (§11.2 argmax, or forced) and the NaN scan; returns the id. */
static int32_t emit_scan(cis2_engine *e, seq_t *s, const float *logits)
{
    const cis2_config *c = &e->m->cfg;
    int step = s->r.n_gen;
    int32_t next, nan_at = -1;
    if (e->be->scan) { /* bit-identical argmax and NaN index (unit_fast) */
        next = e->be->scan(logits, c->vocab, &nan_at);
    } else {
        next = cis2_argmax(logits, c->vocab);
        for (int i = 0; s->r.nan_step < 0 && i < c->vocab && nan_at < 0; i++)
            if ((cis2_f2u(logits[i]) & 0x7FFFFFFFu) > 0x7F800000u) nan_at = i;
    }
    if (step < s->g.n_force) next = s->g.force[step];
    else if (s->smp_scratch) /* docs/sampling.md: on the final logits, any thread */
        next = smp_pick(&s->smp, (uint64_t)step, logits, c->vocab, s->smp_scratch);
    if (s->r.nan_step < 0 && nan_at >= 0) {
        s->r.nan_step = step;
        s->r.nan_index = nan_at;
    }
    return next;
}

/* emit_scan, then the logits into the §12.1 witness stream. */
static int32_t emit_logits(cis2_engine *e, seq_t *s, const float *logits)
{
    int32_t next = emit_scan(e, s, logits);
    cis2_sha256_update(&s->w, logits,
                       (size_t)e->m->cfg.vocab * sizeof(float)); /* LE bit patterns */
    return next;
}

/* Whether `next`, s's next generated id, ends its run. */
static int ends_run(const cis2_engine *e, const seq_t *s, int32_t next)
{
    return s->r.n_gen + 1 == s->g.n_gen || (s->g.stop_at_eos && is_eos(&e->m->cfg, next));
}

/* One generated token from this step's logits; `next` is emit_logits's,
 * fed to the witness here unless a side job feeds it (!feed). */
static void emit_id(cis2_engine *e, seq_t *s, const float *logits, int32_t next, int feed)
{
    const cis2_config *c = &e->m->cfg;
    int step = s->r.n_gen, ends = ends_run(e, s, next);
    if (feed) cis2_sha256_update_u32(&s->w, (uint32_t)next);
    s->r.gen[s->r.n_gen++] = next;
    s->next = next;
    if (s->g.on_step) s->g.on_step(s->g.ctx, step, logits, c->vocab, next);
    if (s->cancelled) return; /* by its own on_step: never finalized, never taken */
    if (s->g.stop_at_eos && is_eos(c, next)) s->r.stopped_at_eos = 1;
    if (ends) {
        witness_wait(e);
        seq_finalize(s);
    }
}

static void emit(cis2_engine *e, seq_t *s, const float *logits)
{
    emit_id(e, s, logits, emit_logits(e, s, logits), 1);
}

/* emit_logits of decode rows (each sequence's own state only, so any
 * thread); the ids wait in s->next, already fed to this step. With `pairs`
 * task i takes rows 2i and 2i + 1 < n and updates their witnesses side by
 * side (cis2_sha256_update2: the states one at a time would reach, ~1.4x
 * faster); else task i takes row i, for two rows on two threads. */
typedef struct {
    cis2_engine *e;
    const float *logits; /* [n][vocab] */
    int n, pairs;
} emit_job;

static void emit_task(void *ctx, int i)
{
    const emit_job *j = ctx;
    cis2_engine *e = j->e;
    const size_t V = (size_t)e->m->cfg.vocab;
    int r = j->pairs ? 2 * i : i;
    seq_t *a = e->spans[r].s;
    const float *la = j->logits + (size_t)r * V;
    if (!j->pairs || r + 1 >= j->n) {
        a->next = emit_logits(e, a, la);
        return;
    }
    seq_t *b = e->spans[r + 1].s;
    const float *lb = la + V;
    a->next = emit_scan(e, a, la);
    b->next = emit_scan(e, b, lb);
    cis2_sha256_update2(&a->w, la, &b->w, lb, V * sizeof(float)); /* LE bit patterns */
}

/* The buffer for one row of logits that no side job may still be reading
 * (witness_job_run hashes the lone sequence's last row, e->logits or
 * e->logits_side, while the next step computes into the other one). */
static float *logits_free(const cis2_engine *e)
{
    return e->wj.row == e->logits ? e->logits_side : e->logits;
}

/* One decode step for every running sequence, all in one forward pass: one
 * row each, at its own position, over its own KV cache. */
static int decode_running(cis2_engine *e, char *err)
{
    int B = 0;
    for (int i = 0; i < e->n_seqs; i++) B += e->seqs[i].state == SEQ_RUNNING;
    if (B == 0) return 0;
    if (eng_ensure_rows(e, B, err)) return 1;
    double t0 = cis2_now_ms();
    int b = 0;
    for (int i = 0; i < e->n_seqs; i++) {
        seq_t *s = &e->seqs[i];
        if (s->state != SEQ_RUNNING) continue;
        e->tokens[b] = s->next;
        e->spans[b] = (span_t){ s, b, 1, s->pos };
        b++;
    }
    /* A lone row goes to the buffer the last step's side job is not
     * hashing; several rows need e->logits, which it may be hashing. */
    float *lg = B == 1 ? logits_free(e) : e->logits;
    if (lg == e->wj.row) witness_wait(e);
    if (eng_forward(e, e->spans, B, B, lg, err)) return 1;
    /* The last step's side job ends before this step's picks and rows
     * enter the streams (§12.1: in step order). */
    witness_wait(e);
    double ms = cis2_now_ms() - t0;
    const int side = B == 1 && e->be->side;
    if (side) {
        /* A lone sequence's row and pick are hashed on a side thread while
         * the next step runs, unless this step ends the run: the same bytes
         * in the same order, so the same witness. Its ~0.1 ms a token was
         * time the other threads only waited (measured: 1.6-2.3 % a token
         * at 256 keys). */
        seq_t *s = e->spans[0].s;
        s->next = emit_scan(e, s, lg);
        e->wj = (struct witness_job){ s, lg, (size_t)e->m->cfg.vocab * sizeof(float), s->next };
        if (ends_run(e, s, s->next)) witness_job_run(&e->wj);
        else e->be->side(e->be, witness_job_run, &e->wj);
    } else {
        emit_job ej = { e, lg, B, B > 2 };
        int ntask = ej.pairs ? (B + 1) / 2 : B;
        if (ntask > 1 && e->be->parallel_for) e->be->parallel_for(e->be, ntask, emit_task, &ej);
        else
            for (int i = 0; i < ntask; i++) emit_task(&ej, i);
    }
    for (int i = 0; i < B; i++) {
        seq_t *s = e->spans[i].s;
        if (s->cancelled) continue; /* by an earlier row's on_step */
        s->pos++;
        s->r.decode_ms += ms;
        emit_id(e, s, lg + (size_t)i * e->m->cfg.vocab, s->next, !side);
    }
    return 0;
}

int cis2_engine_step(cis2_engine *e, char *err)
{
    if (no_engine(e, __func__, err)) return 1;
    if (e->stepping) {
        snprintf(err, CIS2_ERR_LEN, "cis2_engine_step called from inside an on_step callback");
        return 1;
    }
    fp_guard fg;
    if (fp_enter(&fg, err)) return 1;
    e->stepping = 1;
    /* Each sequence's arithmetic depends on its own tokens only, so who else
     * runs in the step (and in which order) never changes a bit. */
    int rc = decode_running(e, err);
    for (int i = 0; i < e->n_seqs && !rc; i++) {
        seq_t *s = &e->seqs[i];
        if (s->state != SEQ_QUEUED || s->cancelled) continue;
        double t0 = cis2_now_ms();
        /* The positions this run can reach are known now. Allocating them
         * before the prompt, up to twice the prompt's, takes the cache's
         * growth (a copy and fresh page faults: 10-60 ms in one step on a
         * VM) out of the decode steps, and allocates no more than the first
         * doubling during decode would have. */
        int reach = s->r.n_prompt + s->g.n_gen - 1, twice = 2 * s->r.n_prompt;
        int want = reach < twice ? reach : twice;
        if (s->kv_cap < want) eng_kv_free(s); /* an earlier run's: nothing in it to copy */
        rc = eng_ensure_rows(e, s->r.n_prompt, err) || eng_ensure_positions(e, s, want, err);
        /* after ensure_rows, which may have moved e->logits; a side job may
         * still hash another sequence's row meanwhile (their streams apart) */
        float *lg = rc ? NULL : logits_free(e);
        rc = rc || forward_one(e, s, s->r.prompt, s->r.n_prompt, 0, lg, err);
        if (rc) break;
        s->pos = s->r.n_prompt;
        s->state = SEQ_RUNNING;
        emit(e, s, lg);
        s->r.prefill_ms += cis2_now_ms() - t0;
    }
    /* Sequences an on_step cancelled were skipped since; their slots free
     * only now, when nothing in this step can touch them again. */
    e->stepping = 0;
    for (int i = 0; i < e->n_seqs; i++)
        if (e->seqs[i].cancelled) {
            witness_wait(e);
            seq_release(&e->seqs[i]);
        }
    fp_leave(&fg);
    return rc;
}

int cis2_engine_active(const cis2_engine *e)
{
    int n = 0;
    if (!e) return 0;
    for (int i = 0; i < e->n_seqs; i++)
        n += (e->seqs[i].state == SEQ_QUEUED || e->seqs[i].state == SEQ_RUNNING) &&
             !e->seqs[i].cancelled;
    return n;
}

static int seq_valid(const cis2_engine *e, int seq)
{
    return e && seq >= 0 && seq < e->n_seqs && e->seqs[seq].state != SEQ_FREE &&
           !e->seqs[seq].cancelled;
}

int cis2_seq_done(const cis2_engine *e, int seq)
{
    return seq_valid(e, seq) && e->seqs[seq].state == SEQ_DONE;
}

int cis2_seq_take(cis2_engine *e, int seq, cis2_result *r, char *err)
{
    if (no_engine(e, __func__, err)) return 1;
    if (!cis2_seq_done(e, seq)) {
        snprintf(err, CIS2_ERR_LEN, "sequence %d is not finished", seq);
        return 1;
    }
    seq_t *s = &e->seqs[seq];
    *r = s->r;
    memset(&s->r, 0, sizeof s->r);
    seq_release(s);
    return 0;
}

void cis2_seq_cancel(cis2_engine *e, int seq)
{
    if (!seq_valid(e, seq)) return;
    /* From an on_step the step is still using the slot (its row, its
     * result): mark it, cis2_engine_step releases it at its end. */
    if (e->stepping) {
        e->seqs[seq].cancelled = 1;
        return;
    }
    witness_wait(e);
    seq_release(&e->seqs[seq]);
}

int cis2_seq_finish(cis2_engine *e, int seq, char *err)
{
    if (no_engine(e, __func__, err)) return 1;
    if (e->stepping) {
        snprintf(err, CIS2_ERR_LEN, "cis2_seq_finish called from inside an on_step callback");
        return 1;
    }
    if (!seq_valid(e, seq) || e->seqs[seq].state != SEQ_RUNNING) {
        snprintf(err, CIS2_ERR_LEN, "sequence %d is not running", seq);
        return 1;
    }
    /* The digests of a run of exactly this many tokens: the stream so far is
     * that run's stream (§12.1 feeds each step's logits and pick in order). */
    witness_wait(e);
    seq_finalize(&e->seqs[seq]);
    return 0;
}

static int generate(const char *fn, cis2_engine *e, const int32_t *prompt, int n_prompt,
                    const cis2_gen_opts *g, const cis2_sampler *smp, cis2_result *r, char *err)
{
    memset(r, 0, sizeof *r);
    r->nan_step = r->nan_index = -1;
    if (no_engine(e, fn, err)) return 1;
    if (cis2_engine_active(e)) {
        snprintf(err, CIS2_ERR_LEN, "the engine is decoding other sequences (use cis2_seq_submit)");
        return 1;
    }
    int seq;
    if (seq_submit(fn, e, prompt, n_prompt, g, smp, &seq, err)) return 1;
    while (!cis2_seq_done(e, seq))
        if (cis2_engine_step(e, err)) {
            cis2_seq_cancel(e, seq);
            return 1;
        }
    return cis2_seq_take(e, seq, r, err);
}

int cis2_generate(cis2_engine *e, const int32_t *prompt, int n_prompt, const cis2_gen_opts *g,
                  cis2_result *r, char *err)
{
    return generate(__func__, e, prompt, n_prompt, g, NULL, r, err);
}

int cis2_generate_sampled(cis2_engine *e, const int32_t *prompt, int n_prompt,
                          const cis2_gen_opts *g, const cis2_sampler *smp, cis2_result *r,
                          char *err)
{
    return generate(__func__, e, prompt, n_prompt, g, smp, r, err);
}

void cis2_result_free(cis2_result *r)
{
    free(r->prompt);
    free(r->gen);
    r->prompt = r->gen = NULL;
    r->n_prompt = r->n_gen = 0;
}

/* ---- public entry points: the message stays one line whatever the caller's
 * strings (paths, names) held (docs/errors.md: file names are escaped;
 * SANITIZE leaves what is escaped already as it is). */
int cis2_engine_new(cis2_engine **out, const cis2_model *m, const cis2_engine_opts *o, char *err)
{
    int rc = cis2_engine_new_impl(out, m, o, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}
