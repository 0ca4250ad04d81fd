/* The forward pass (§7–§11), KV cache (§3.5), greedy loop (§3.4, §11.2)
 * and the witness and argmax digests (§12.1, §12.2), for one or several
 * independent sequences per engine. A forward pass runs rows: one row is one
 * token of one sequence at its own position. A prefill is the rows of one
 * prompt; a decode step is one row per running sequence, so every linear
 * reads each weight once for all of them, and each output element is still
 * one §5.1 dot product over its own row (the bits never depend on the batch). */
#include "engine/backend.h"
#include "kernels/kernels.h"
#include "core/fparith.h"
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the witness chain hashes little-endian bit patterns straight from memory"
#endif

/* One sequence: its KV cache and its run in progress. */
enum { SEQ_FREE = 0, SEQ_QUEUED, SEQ_RUNNING, SEQ_DONE };
typedef struct {
    int state;
    int kv_cap;       /* positions allocated in the KV cache */
    float **kc, **vc; /* per layer: [kv_cap][n_kv*head_dim], post-RoPE K (§3.5) */
    float **kb;       /* per layer when the backend wants_kb: kc key-blocked (backend.h) */
    int kb_cap;       /* kv_cap rounded up to CIS2_KB */
    float *kv;        /* the arena kc[], vc[] and kb[] point into (huge pages) */
    size_t kv_len;
    int pos;         /* positions computed so far */
    cis2_gen_opts g; /* g.force points at force_copy */
    int32_t *force_copy;
    int32_t next; /* the last emitted id, fed at the next step */
    cis2_result r;
    cis2_sha256 w; /* §12.1 witness stream in progress */
    int cancelled; /* cis2_seq_cancel from an on_step: released when the step ends */
} seq_t;

/* Consecutive rows of one sequence at positions pos0..pos0+n-1: attention
 * reads and extends that sequence's KV cache. */
typedef struct {
    seq_t *s;
    int row0, n, pos0;
} span_t;

/* One row of the activation matrices. */
typedef struct {
    seq_t *s;
    int pos;     /* its position in its sequence */
    int in_step; /* its span starts after position 0 (FAULT rope-offset) */
} row_t;

struct cis2_engine {
    const cis2_model *m; /* read only, shared with any other engine */
    cis2_weights w;      /* this engine's view of m->w (a fault may swap one tensor) */
    cis2_layer *layers;  /* w.layers, this engine's copy of the per-layer table */
    cis2_backend *be;
    cis2_engine_opts o;
    int n_seqs; /* slots in seqs[]; seqs[n_seqs] is the solo sequence of cis2_engine_forward */
    seq_t *seqs;
    /* Activations, one row per token: x [T][hidden] is the residual stream. */
    int t_cap; /* rows the buffers below hold */
    row_t *rows;
    int32_t *tokens;
    span_t *spans;
    float *x, *xn, *q, *k, *v, *att, *proj, *gate, *up, *act;
    float *rope_c, *rope_s; /* [T][head_dim/2]: each row's §7.3 table, once per forward */
    float *xf;              /* [T][hidden]: final-normed rows (§11.1 head input) */
    void *arena;            /* the float buffers above: one huge-page mapping */
    size_t arena_len;
    float *logits;         /* [T][vocab]: one row per span (its last token, §3.4) */
    float *scores, *probs; /* traced attention: [n_heads][n_ctx] */
    size_t scores_cap;
    /* A lone sequence's last logits row and pick, hashed into its witness on
     * the backend's side thread (witness_job_run) while the next step runs. */
    struct witness_job {
        seq_t *s;
        const float *row;
        size_t len;
        int32_t id;
    } wj;
    cis2_fault fault; /* FAULT INJECTION (docs/divergence.md, debug only) */
    int stepping;     /* inside cis2_engine_step: on_step callbacks may run */
};

static void witness_wait(cis2_engine *e);

/* ------------------------------------------------------------ trace nodes */
static const char *const NODE_NAMES[CIS2_N_NODES] = {
    [CIS2_N_EMBED] = "embed",
    [CIS2_N_ATTN_NORM] = "attn_norm",
    [CIS2_N_Q_PROJ] = "q_proj",
    [CIS2_N_K_PROJ] = "k_proj",
    [CIS2_N_V_PROJ] = "v_proj",
    [CIS2_N_Q_NORM] = "q_norm",
    [CIS2_N_K_NORM] = "k_norm",
    [CIS2_N_Q_ROPE] = "q_rope",
    [CIS2_N_K_ROPE] = "k_rope",
    [CIS2_N_SCORES] = "attn_scores",
    [CIS2_N_PROBS] = "attn_probs",
    [CIS2_N_ATTN_OUT] = "attn_out",
    [CIS2_N_O_PROJ] = "o_proj",
    [CIS2_N_RESID_ATTN] = "resid_attn",
    [CIS2_N_MLP_NORM] = "mlp_norm",
    [CIS2_N_GATE] = "gate",
    [CIS2_N_UP] = "up",
    [CIS2_N_ACT] = "act",
    [CIS2_N_DOWN] = "down",
    [CIS2_N_RESID_MLP] = "resid_mlp",
    [CIS2_N_FINAL_NORM] = "final_norm",
    [CIS2_N_LOGITS] = "logits",
};

const char *cis2_trace_node_name(int k) { return k >= 0 && k < CIS2_N_NODES ? NODE_NAMES[k] : "?"; }

static void trace(cis2_engine *e, int pos, int layer, cis2_trace_node node, const float *v,
                  size_t n)
{
    if (e->o.trace) e->o.trace(e->o.trace_ctx, pos, layer, NODE_NAMES[node], v, n);
}

/* ---------------------------------------------------------------- memory */
static int grow(void *pp, size_t n, size_t size)
{
    void **p = pp, *q = realloc(*p, n * size);
    if (!q) return 1;
    *p = q;
    return 0;
}

/* Buffers of a megabyte or more take huge pages (model/weights.h); smaller
 * ones malloc (len 0), so small models and engines don't map 2 MiB each. */
static void *buf_alloc(size_t bytes, size_t *len)
{
    *len = 0;
    return bytes < ((size_t)1 << 20) ? malloc(bytes) : cis2_big_alloc(bytes, len);
}

static void buf_free(void *p, size_t len)
{
    if (len) cis2_big_free(p, len);
    else free(p);
}

/* The per-row float buffers are carved from one huge-page mapping: a first
 * prefill touches megabytes of them, and 4 KiB page faults on a VM cost
 * ~10 us each (thousands per 256-token prompt). They hold nothing across
 * forward passes, so a larger arena starts empty. */
static int ensure_rows(cis2_engine *e, int T, char *err)
{
    if (T <= e->t_cap) return 0;
    witness_wait(e); /* the logits move */
    const cis2_config *c = &e->m->cfg;
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
    uint8_t *a = buf_alloc(total, &alen);
    if (!a || grow(&e->rows, t, sizeof *e->rows) || grow(&e->tokens, t, sizeof *e->tokens) ||
        grow(&e->spans, t, sizeof *e->spans) || grow(&e->logits, t * (size_t)c->vocab, f)) {
        buf_free(a, alen);
        snprintf(err, CIS2_ERR_LEN, "out of memory for %d tokens of activations", T);
        return 1;
    }
    buf_free(e->arena, e->arena_len);
    e->arena = a;
    e->arena_len = alen;
    for (size_t i = 0; i < sizeof len / sizeof len[0]; i++) *bufs[i] = (float *)(a + off[i]);
    e->t_cap = T;
    return 0;
}

/* A sequence's KV cache grows on demand (doubling) up to max_position_embeddings,
 * every layer's K and V in one huge-page arena (see ensure_rows). A run's
 * prefill allocates ahead (cis2_engine_step) and a slot keeps its arena
 * from run to run (seq_release). */
static int ensure_positions(cis2_engine *e, seq_t *s, int need, char *err)
{
    const cis2_config *c = &e->m->cfg;
    if (need > c->max_pos) {
        snprintf(err, CIS2_ERR_LEN, "position %d is beyond max_position_embeddings = %d", need - 1,
                 c->max_pos);
        return 1;
    }
    if (need <= s->kv_cap) return 0;
    int want_kb = e->be->wants_kb;
    if (!s->kc) {
        s->kc = calloc((size_t)c->n_layers, sizeof *s->kc);
        s->vc = calloc((size_t)c->n_layers, sizeof *s->vc);
        s->kb = want_kb ? calloc((size_t)c->n_layers, sizeof *s->kb) : NULL;
        if (!s->kc || !s->vc || (want_kb && !s->kb)) {
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            return 1;
        }
    }
    int cap = s->kv_cap ? s->kv_cap : 16; /* small: short runs grow (and test growth) */
    while (cap < need) cap *= 2;
    if (cap > c->max_pos) cap = c->max_pos;
    int kb_cap = (cap + CIS2_KB - 1) / CIS2_KB * CIS2_KB;
    size_t hd = (size_t)c->head_dim, kvd = (size_t)c->n_kv_heads * hd, per = (size_t)cap * kvd;
    size_t kb_per = want_kb ? (size_t)kb_cap * kvd : 0, alen = 0;
    float *a = buf_alloc((size_t)c->n_layers * (2 * per + kb_per) * sizeof(float), &alen);
    if (!a) {
        snprintf(err, CIS2_ERR_LEN, "out of memory for a KV cache of %d positions", cap);
        return 1;
    }
    size_t keep = (size_t)s->kv_cap * kvd * sizeof(float);
    for (int l = 0; l < c->n_layers; l++) {
        float *k = a + (size_t)l * (2 * per + kb_per), *v = k + per;
        if (keep) {
            memcpy(k, s->kc[l], keep);
            memcpy(v, s->vc[l], keep);
        }
        s->kc[l] = k;
        s->vc[l] = v;
        if (!want_kb) continue;
        /* each KV head's blocks are one run of its kb_cap positions */
        float *kb = v + per;
        for (int h = 0; keep && h < c->n_kv_heads; h++)
            memcpy(kb + (size_t)h * kb_cap * hd, s->kb[l] + (size_t)h * s->kb_cap * hd,
                   (size_t)s->kb_cap * hd * sizeof(float));
        s->kb[l] = kb;
    }
    buf_free(s->kv, s->kv_len);
    s->kv = a;
    s->kv_len = alen;
    s->kv_cap = cap;
    s->kb_cap = kb_cap;
    return 0;
}

/* The KV arena back to the system. */
static void kv_free(seq_t *s)
{
    buf_free(s->kv, s->kv_len);
    free(s->kc);
    free(s->vc);
    free(s->kb);
    s->kv = NULL;
    s->kc = s->vc = s->kb = NULL;
    s->kv_len = 0;
    s->kv_cap = s->kb_cap = 0;
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
        snprintf(err, CIS2_ERR_LEN, "threads %d is outside [0, 1024] (0 = every online core)",
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
    if (!e->seqs || ensure_rows(e, 1, err)) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
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
        kv_free(&e->seqs[i]);
    }
    free(e->seqs);
    void *bufs[] = { e->rows, e->tokens, e->spans, e->logits, e->scores, e->probs };
    buf_free(e->arena, e->arena_len);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    cis2_fault_free(&e->fault);
    free(e->layers);
    free(e);
}

const cis2_model *cis2_engine_model(const cis2_engine *e) { return e->m; }

const char *cis2_engine_backend(const cis2_engine *e) { return e->be->name; }

/* ---------------------------------------------------- per-row operations */
/* h += x elementwise (§5.4): the backend's vectorized ref_add (bit-identical,
 * unit_fast) or ref_add. */
static void add(const cis2_engine *e, float *h, const float *x, int n)
{
    if (e->be->add) e->be->add(h, x, n);
    else ref_add(h, x, n);
}

static void rmsnorm(const cis2_engine *e, const float *x, const float *w, int n, float eps,
                    float *out)
{
    if (__builtin_expect(e->fault.kind == CIS2_FAULT_RMSNORM_ASSOC, 0))
        cis2_fault_rmsnorm_assoc(x, w, n, eps, out); /* FAULT */
    else ref_rmsnorm(x, w, n, eps, out);
}

/* Per-head RMSNorm over head_dim (Qwen3 q_norm/k_norm), same §8 procedure. */
static void head_norm(const cis2_engine *e, float *v, int n_heads, int hd, const float *w,
                      float eps)
{
    for (int h = 0; h < n_heads; h++)
        rmsnorm(e, v + (size_t)h * hd, w, hd, eps, v + (size_t)h * hd);
}

/* The arguments of the per-row stages of one forward pass. Every stage
 * touches only row t (and its own KV-cache slot), so rows may run in any
 * order or in parallel (the fast backend's pool) with identical results;
 * traced runs stay serial so the trace callback sees nodes in row order. */
typedef struct {
    cis2_engine *e;
    int l;                    /* the layer */
    const cis2_layer *y;      /* its weights */
    const cis2_layer *y_next; /* residual_mlp_norm_row: the next layer */
} pass_t;

typedef void row_fn(void *pass, int t);

static void for_rows(const pass_t *p, int T, row_fn *fn)
{
    cis2_engine *e = p->e;
    if (T == 1 || e->o.trace || !e->be->parallel_for)
        for (int t = 0; t < T; t++) fn((void *)p, t);
    else e->be->parallel_for(e->be, T, fn, (void *)p);
}

/* §4.1: the token's embedding row, widened exactly. */
static void embed_row(void *pp, int t)
{
    const pass_t *p = pp;
    cis2_engine *e = p->e;
    const int H = e->m->cfg.hidden;
    float *x = e->x + (size_t)t * H;
    cis2_weight_row(&e->w.embed, e->tokens[t], x);
    trace(e, e->rows[t].pos, -1, CIS2_N_EMBED, x, (size_t)H);
}

/* §7.3: the row's cos/sin table depends on its position only, so it is built
 * once per forward, not per layer. */
static void rope_table_row(void *pp, int t)
{
    const pass_t *p = pp;
    cis2_engine *e = p->e;
    const row_t *r = &e->rows[t];
    const int half = e->m->cfg.head_dim / 2;
    int rpos = r->pos;
    if (__builtin_expect(e->fault.kind == CIS2_FAULT_ROPE_OFFSET, 0) && r->in_step)
        rpos = r->pos + 1; /* FAULT: decode positions off by one */
    ref_rope_table(e->m->inv_freq, half, rpos, e->rope_c + (size_t)t * half,
                   e->rope_s + (size_t)t * half);
}

/* §8: the attention block's input norm. */
static void attn_norm_row(void *pp, int t)
{
    const pass_t *p = pp;
    cis2_engine *e = p->e;
    const cis2_config *c = &e->m->cfg;
    const size_t off = (size_t)t * c->hidden;
    rmsnorm(e, e->x + off, p->y->attn_norm, c->hidden, c->eps, e->xn + off);
    trace(e, e->rows[t].pos, p->l, CIS2_N_ATTN_NORM, e->xn + off, (size_t)c->hidden);
}

/* After the q/k/v projections: biases (§9.1), q/k norms (Qwen3), RoPE
 * (§7.4), and the row's K and V into its sequence's cache (§3.5). */
static void qkv_row(void *pp, int t)
{
    const pass_t *p = pp;
    cis2_engine *e = p->e;
    const cis2_config *c = &e->m->cfg;
    const cis2_layer *y = p->y;
    const int hd = c->head_dim, half = hd / 2, nh = c->n_heads, nkv = c->n_kv_heads, l = p->l;
    const int qd = nh * hd, kvd = nkv * hd, pos = e->rows[t].pos;
    float *q = e->q + (size_t)t * qd, *k = e->k + (size_t)t * kvd, *v = e->v + (size_t)t * kvd;
    /* §9.1: each bias the checkpoint carries, after the matvec, before RoPE */
    if (y->q_bias) add(e, q, y->q_bias, qd);
    if (y->k_bias) add(e, k, y->k_bias, kvd);
    if (y->v_bias) add(e, v, y->v_bias, kvd);
    trace(e, pos, l, CIS2_N_Q_PROJ, q, (size_t)qd);
    trace(e, pos, l, CIS2_N_K_PROJ, k, (size_t)kvd);
    trace(e, pos, l, CIS2_N_V_PROJ, v, (size_t)kvd);
    if (y->q_norm) { /* Qwen3: after projection, before RoPE */
        head_norm(e, q, nh, hd, y->q_norm, c->eps);
        head_norm(e, k, nkv, hd, y->k_norm, c->eps);
        trace(e, pos, l, CIS2_N_Q_NORM, q, (size_t)qd);
        trace(e, pos, l, CIS2_N_K_NORM, k, (size_t)kvd);
    }
    const float *cv = e->rope_c + (size_t)t * half, *sv = e->rope_s + (size_t)t * half;
    if (e->be->rope) { /* bit-identical (unit_fast) */
        e->be->rope(q, nh, hd, cv, sv);
        e->be->rope(k, nkv, hd, cv, sv);
    } else {
        for (int h = 0; h < nh; h++) ref_rope_rotate(q + (size_t)h * hd, hd, cv, sv);
        for (int h = 0; h < nkv; h++) ref_rope_rotate(k + (size_t)h * hd, hd, cv, sv);
    }
    trace(e, pos, l, CIS2_N_Q_ROPE, q, (size_t)qd);
    trace(e, pos, l, CIS2_N_K_ROPE, k, (size_t)kvd);
    seq_t *s = e->rows[t].s;
    float *kslot = s->kc[l] + (size_t)pos * kvd, *vslot = s->vc[l] + (size_t)pos * kvd;
    if (__builtin_expect(e->fault.kind == CIS2_FAULT_KV_STALE, 0) && pos == e->fault.pos) {
        /* FAULT kv-stale: this slot is never written; it keeps stale
         * contents, made deterministic here as zeros. */
        memset(kslot, 0, (size_t)kvd * sizeof(float));
        memset(vslot, 0, (size_t)kvd * sizeof(float));
    } else {
        memcpy(kslot, k, (size_t)kvd * sizeof(float));
        memcpy(vslot, v, (size_t)kvd * sizeof(float));
    }
    if (s->kb) cis2_kb_put(s->kb[l], s->kb_cap, nkv, hd, pos, kslot);
}

/* qkv_row of row i0 + i: attention_decode's pre step for its sequence i. */
typedef struct {
    pass_t *p;
    int i0;
} qkv_pre_t;

static void qkv_pre(void *ctx, int i)
{
    const qkv_pre_t *q = ctx;
    qkv_row(q->p, q->i0 + i);
}

/* The test-only cis2-toy stage (docs/architecture.md): o_proj's output times
 * a learned per-channel gain, one separately rounded multiply per element
 * (§1.2, §1.4; cis2_fmul keeps §1.3's flush the same on every ISA), before
 * the residual. The o_proj node is the matmul's output; resid_attn shows the gain. */
static void toy_gain(float *o, const float *g, int n)
{
    for (int i = 0; i < n; i++) o[i] = cis2_fmul(o[i], g[i]);
}

/* §5.4 residual after o_proj, then §8 the MLP block's input norm. */
static void attn_residual_row(void *pp, int t)
{
    const pass_t *p = pp;
    cis2_engine *e = p->e;
    const cis2_config *c = &e->m->cfg;
    const int H = c->hidden, qd = c->n_heads * c->head_dim, pos = e->rows[t].pos, l = p->l;
    float *x = e->x + (size_t)t * H, *xn = e->xn + (size_t)t * H, *o = e->proj + (size_t)t * H;
    trace(e, pos, l, CIS2_N_ATTN_OUT, e->att + (size_t)t * qd, (size_t)qd);
    trace(e, pos, l, CIS2_N_O_PROJ, o, (size_t)H);
    if (p->y->o_gain) toy_gain(o, p->y->o_gain, H);
    add(e, x, o, H);
    trace(e, pos, l, CIS2_N_RESID_ATTN, x, (size_t)H);
    rmsnorm(e, x, p->y->mlp_norm, H, c->eps, xn);
    trace(e, pos, l, CIS2_N_MLP_NORM, xn, (size_t)H);
}

/* The gate, up and act nodes of row t. */
static void swiglu_trace(const pass_t *p, int t)
{
    cis2_engine *e = p->e;
    const int I = e->m->cfg.inter, pos = e->rows[t].pos, l = p->l;
    const size_t off = (size_t)t * I;
    trace(e, pos, l, CIS2_N_GATE, e->gate + off, (size_t)I);
    trace(e, pos, l, CIS2_N_UP, e->up + off, (size_t)I);
    trace(e, pos, l, CIS2_N_ACT, e->act + off, (size_t)I);
}

/* §10: act = silu(gate) * up. */
static void swiglu_row(void *pp, int t)
{
    const pass_t *p = pp;
    cis2_engine *e = p->e;
    const size_t I = (size_t)e->m->cfg.inter, off = (size_t)t * I;
    if (e->be->swiglu) /* bit-identical (unit_fast) */
        e->be->swiglu(e->gate + off, e->up + off, e->act + off, (int)I);
    else ref_swiglu(e->gate + off, e->up + off, e->act + off, (int)I);
    swiglu_trace(p, t);
}

/* §5.4 residual after down_proj. */
static void mlp_residual_row(void *pp, int t)
{
    const pass_t *p = pp;
    cis2_engine *e = p->e;
    const int H = e->m->cfg.hidden, pos = e->rows[t].pos;
    float *x = e->x + (size_t)t * H, *d = e->proj + (size_t)t * H;
    trace(e, pos, p->l, CIS2_N_DOWN, d, (size_t)H);
    add(e, x, d, H);
    trace(e, pos, p->l, CIS2_N_RESID_MLP, x, (size_t)H);
}

/* Untraced parallel passes: the residual and the next layer's attn_norm in
 * one sweep over the rows (one synchronisation less per layer). */
static void mlp_residual_norm_row(void *pp, int t)
{
    const pass_t *p = pp;
    cis2_engine *e = p->e;
    const cis2_config *c = &e->m->cfg;
    mlp_residual_row(pp, t);
    const size_t off = (size_t)t * c->hidden;
    rmsnorm(e, e->x + off, p->y_next->attn_norm, c->hidden, c->eps, e->xn + off);
}

/* A few untraced rows (one token, or a decode step of a few sequences): the
 * residual steps run on the calling thread with the rows' norms side by
 * side (rmsnorm_rows, each row bit for bit ref_rmsnorm). Eight rows take
 * ~5 us there with two threads running (~2 us alone: the rest is fetching
 * the other core's half of the rows), where a parallel pass took ~10 us.
 * Traced runs keep the row-by-row passes, whose trace sees each row's nodes
 * in order; so does the rmsnorm-assoc fault. */
#define SERIAL_ROWS 16
static int rows_serial(const cis2_engine *e, int T)
{
    return T <= SERIAL_ROWS && !e->o.trace && e->be->rmsnorm_rows &&
           e->fault.kind != CIS2_FAULT_RMSNORM_ASSOC;
}

/* out[t] = rmsnorm(x[t], w) (§8) for the T consecutive hidden rows at x —
 * rows_serial's path. */
static void norm_rows(const cis2_engine *e, const float *x, const float *w, float *out, int T)
{
    const cis2_config *c = &e->m->cfg;
    e->be->rmsnorm_rows(x, (size_t)c->hidden, w, c->hidden, c->eps, out, (size_t)c->hidden, T);
}

/* Rows t < T: x[t] += d[t] (§5.4; toy gain first when g), then xn[t] =
 * rmsnorm(x[t], w) (§8) when w — rows_serial's path. */
static void residual_norm_rows(cis2_engine *e, int T, float *d, const float *g, const float *w)
{
    const cis2_config *c = &e->m->cfg;
    const int H = c->hidden;
    for (int t = 0; t < T; t++) {
        float *dt = d + (size_t)t * H;
        if (g) toy_gain(dt, g, H);
        add(e, e->x + (size_t)t * H, dt, H);
    }
    if (w) norm_rows(e, e->x, w, e->xn, T);
}

/* ------------------------------------------------------------- the blocks */
/* Linears sharing one input X [T][cols]: every weight read once for all T rows. */
static void linears(cis2_backend *be, int n, const cis2_weight *const *w, const float *X, int T,
                    float *const *Y)
{
    if (be->matmul_multi) be->matmul_multi(be, n, w, X, T, Y);
    else
        for (int i = 0; i < n; i++) be->matmul(be, w[i], X, T, Y[i]);
}

/* The weights the backend's next matmuls after this one read, in order (a
 * cache hint only: no value depends on it); NULLs end the list. Given for
 * one row only (a lone decode step streams its weights once per token, so
 * gaps in the stream are lost time; several rows' matmuls are not so
 * bound by the stream). */
static void hint(cis2_backend *be, int T, const cis2_weight *a, const cis2_weight *b,
                 const cis2_weight *c)
{
    const cis2_weight *w[3] = { a, b, c };
    int n = 0;
    while (n < 3 && w[n]) n++;
    if (T == 1 && be->prefetch) be->prefetch(be, n, w);
}

/* The first weight of the layer after p->l: its q, or the LM head. */
static const cis2_weight *next_q(const pass_t *p)
{
    cis2_engine *e = p->e;
    return p->l + 1 < e->m->cfg.n_layers ? &e->w.layers[p->l + 1].q : cis2_head(&e->w);
}

/* Traced attention of one span with the reference kernels (bit-identical to
 * every backend's, tests/unit_fast.c), so its scores and probabilities can
 * be captured: each computed once. */
static int traced_attention(cis2_engine *e, int l, const span_t *sp, float scale, char *err)
{
    const cis2_config *c = &e->m->cfg;
    const int hd = c->head_dim, nh = c->n_heads, group = nh / c->n_kv_heads;
    const size_t qd = (size_t)nh * hd, kvd = (size_t)c->n_kv_heads * hd;
    size_t need = (size_t)nh * (size_t)(sp->pos0 + sp->n);
    if (need > e->scores_cap) {
        if (grow(&e->scores, need, sizeof(float)) || grow(&e->probs, need, sizeof(float))) {
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            return 1;
        }
        e->scores_cap = need;
    }
    for (int i = 0; i < sp->n; i++) {
        int t = sp->row0 + i, pos = sp->pos0 + i, n_ctx = pos + 1;
        for (int h = 0; h < nh; h++) {
            const float *q = e->q + (size_t)t * qd + (size_t)h * hd;
            const float *kb = sp->s->kc[l] + (size_t)(h / group) * hd,
                        *vb = sp->s->vc[l] + (size_t)(h / group) * hd;
            float *sc = e->scores + (size_t)h * n_ctx, *pr = e->probs + (size_t)h * n_ctx;
            ref_attention_scores(q, kb, kvd, n_ctx, hd, scale, sc); /* §9.2 */
            memcpy(pr, sc, (size_t)n_ctx * sizeof(float));
            ref_softmax(pr, n_ctx); /* §9.3 */
            ref_attention_mix(pr, vb, kvd, n_ctx, hd, e->att + (size_t)t * qd + (size_t)h * hd);
        }
        trace(e, pos, l, CIS2_N_SCORES, e->scores, (size_t)nh * n_ctx);
        trace(e, pos, l, CIS2_N_PROBS, e->probs, (size_t)nh * n_ctx);
    }
    return 0;
}

/* §9: norm, q/k/v, their biases and norms, RoPE, the KV cache, causal
 * attention over each span's own sequence, o_proj and the residual. */
static int attention_block(pass_t *p, const span_t *sp, int n_sp, int T, int norm_done, char *err)
{
    cis2_engine *e = p->e;
    cis2_backend *be = e->be;
    const cis2_config *c = &e->m->cfg;
    const cis2_layer *y = p->y;
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd;
    const float scale = cis2_rsqrt((float)hd); /* §9.2: rsqrt(64) == 0.125 */
    if (!norm_done && rows_serial(e, T)) norm_rows(e, e->x, y->attn_norm, e->xn, T);
    else if (!norm_done) for_rows(p, T, attn_norm_row);
    const cis2_weight *wqkv[3] = { &y->q, &y->k, &y->v };
    float *const qkv[3] = { e->q, e->k, e->v };
    hint(be, T, &y->o, &y->gate, &y->up);
    linears(be, 3, wqkv, e->xn, T, qkv);
    int one_each = !e->o.trace && be->attention_decode && n_sp > 1;
    for (int i = 0; i < n_sp && one_each; i++) one_each = sp[i].n == 1 && sp[i].row0 == i;
    if (!one_each) for_rows(p, T, qkv_row);
    /* A decode step (one row per sequence, row i = span i): all sequences'
     * attention in one call, ATT_GROUP at a time, each row's qkv_row its
     * pre step (on the thread that then reads that sequence's cache). */
    enum { ATT_GROUP = 64 };
    for (int i0 = 0; one_each && i0 < n_sp; i0 += ATT_GROUP) {
        qkv_pre_t pre = { p, i0 };
        const float *kc[ATT_GROUP], *vc[ATT_GROUP], *kb[ATT_GROUP];
        int pos[ATT_GROUP], kb_cap[ATT_GROUP], n = n_sp - i0 < ATT_GROUP ? n_sp - i0 : ATT_GROUP;
        for (int i = 0; i < n; i++) {
            const seq_t *s = sp[i0 + i].s;
            kc[i] = s->kc[p->l];
            vc[i] = s->vc[p->l];
            kb[i] = s->kb ? s->kb[p->l] : NULL;
            kb_cap[i] = s->kb_cap;
            pos[i] = sp[i0 + i].pos0;
        }
        be->attention_decode(be, n, e->q + (size_t)i0 * qd, kc, vc, be->wants_kb ? kb : NULL,
                             kb_cap, pos, nh, nkv, hd, scale, e->att + (size_t)i0 * qd, qkv_pre,
                             &pre);
    }
    for (int i = 0; i < n_sp && !one_each; i++) {
        if (e->o.trace) {
            if (traced_attention(e, p->l, &sp[i], scale, err)) return 1;
        } else {
            size_t r0 = (size_t)sp[i].row0 * qd;
            const seq_t *s = sp[i].s;
            be->attention(be, e->q + r0, s->kc[p->l], s->vc[p->l], s->kb ? s->kb[p->l] : NULL,
                          s->kb_cap, sp[i].n, sp[i].pos0, nh, nkv, hd, scale, e->att + r0);
        }
    }
    hint(be, T, &y->gate, &y->up, &y->down);
    be->matmul(be, &y->o, e->att, T, e->proj);
    if (rows_serial(e, T)) residual_norm_rows(e, T, e->proj, y->o_gain, y->mlp_norm);
    else for_rows(p, T, attn_residual_row);
    return 0;
}

/* §10: gate and up, SwiGLU, down_proj and the residual (fused with the next
 * layer's attn_norm when `fuse_next`). */
static void mlp_block(pass_t *p, int T, const cis2_layer *fuse_next)
{
    cis2_engine *e = p->e;
    cis2_backend *be = e->be;
    const cis2_layer *y = p->y;
    hint(be, T, &y->down, next_q(p), NULL);
    if (be->matmul_swiglu) { /* one dispatch (unit_fast: bit-identical) */
        be->matmul_swiglu(be, &y->gate, &y->up, e->xn, T, e->gate, e->up, e->act);
        for (int t = 0; t < T; t++) swiglu_trace(p, t);
    } else {
        const cis2_weight *wgu[2] = { &y->gate, &y->up };
        float *const gu[2] = { e->gate, e->up };
        linears(be, 2, wgu, e->xn, T, gu);
        for_rows(p, T, swiglu_row);
    }
    hint(be, T, next_q(p), NULL, NULL);
    be->matmul(be, &y->down, e->act, T, e->proj);
    p->y_next = fuse_next;
    if (rows_serial(e, T))
        residual_norm_rows(e, T, e->proj, NULL, fuse_next ? fuse_next->attn_norm : NULL);
    else for_rows(p, T, fuse_next ? mlp_residual_norm_row : mlp_residual_row);
}

/* §11.1: each span's last row normed and through the LM head, all spans in
 * one matmul; §3.4: only those rows' logits are needed, the others are never
 * computed. logits: [n_sp][vocab]. */
static void final_norm_and_head(cis2_engine *e, const span_t *sp, int n_sp, float *logits)
{
    const cis2_config *c = &e->m->cfg;
    const int H = c->hidden;
    int last0 = sp[0].row0 + sp[0].n - 1, serial = rows_serial(e, n_sp);
    for (int i = 1; i < n_sp; i++) serial &= sp[i].row0 + sp[i].n - 1 == last0 + i;
    if (serial) /* the spans' last rows are consecutive (a decode step) */
        norm_rows(e, e->x + (size_t)last0 * H, e->w.final_norm, e->xf, n_sp);
    else
        for (int i = 0; i < n_sp; i++) {
            int t = sp[i].row0 + sp[i].n - 1, pos = sp[i].pos0 + sp[i].n - 1;
            float *xf = e->xf + (size_t)i * H;
            rmsnorm(e, e->x + (size_t)t * H, e->w.final_norm, H, c->eps, xf);
            trace(e, pos, -1, CIS2_N_FINAL_NORM, xf, (size_t)H);
        }
    /* the next step starts with layer 0's q, k, v: streamed while the
     * logits are hashed (emit) */
    const cis2_layer *y0 = &e->w.layers[0];
    hint(e->be, n_sp, &y0->q, &y0->k, &y0->v);
    witness_wait(e); /* the last step's row is hashed before it is overwritten */
    e->be->matmul(e->be, cis2_head(&e->w), e->xf, n_sp, logits);
    for (int i = 0; i < n_sp; i++)
        trace(e, sp[i].pos0 + sp[i].n - 1, -1, CIS2_N_LOGITS, logits + (size_t)i * c->vocab,
              (size_t)c->vocab);
}

/* The forward pass over e->tokens[0..T), laid out as n_sp spans (each span's
 * rows consecutive, spans in row order). logits (may be NULL) receives each
 * span's last-row logits, [n_sp][vocab]. */
static int forward(cis2_engine *e, const span_t *sp, int n_sp, int T, float *logits, char *err)
{
    const cis2_config *c = &e->m->cfg;
    for (int t = 0; t < T; t++)
        if (e->tokens[t] < 0 || e->tokens[t] >= c->vocab) {
            snprintf(err, CIS2_ERR_LEN, "token id %d is outside the vocabulary (vocab_size = %d)",
                     e->tokens[t], c->vocab);
            return 1;
        }
    for (int i = 0; i < n_sp; i++) {
        if (ensure_positions(e, sp[i].s, sp[i].pos0 + sp[i].n, err)) return 1;
        for (int j = 0; j < sp[i].n; j++)
            e->rows[sp[i].row0 + j] = (row_t){ sp[i].s, sp[i].pos0 + j, sp[i].pos0 > 0 };
    }
    if (__builtin_expect(e->fault.kind == CIS2_FAULT_NO_FTZ, 0))
        cis2_fpenv_unpin(); /* FAULT no-ftz: IEEE subnormals */
    else if (!cis2_fpenv_is_pinned()) {
        snprintf(err, CIS2_ERR_LEN, "FTZ/DAZ is not pinned on this thread (§1.3)");
        return 1;
    }
    pass_t p = { e, -1, NULL, NULL };
    /* Parallel passes fuse a layer's last row step with the next layer's attn_norm. */
    const int fuse = T > 1 && !e->o.trace && e->be->parallel_for;

    for_rows(&p, T, embed_row);
    for_rows(&p, T, rope_table_row);
    for (int l = 0; l < c->n_layers; l++) {
        p.l = l;
        p.y = &e->w.layers[l];
        if (attention_block(&p, sp, n_sp, T, fuse && l > 0, err)) return 1;
        mlp_block(&p, T, fuse && l + 1 < c->n_layers ? &e->w.layers[l + 1] : NULL);
    }
    if (logits) final_norm_and_head(e, sp, n_sp, logits);
    return 0;
}

/* Rows for tokens[0..n) of sequence s at positions pos0..: one span. */
static int forward_one(cis2_engine *e, seq_t *s, const int32_t *tokens, int n, int pos0,
                       float *logits, char *err)
{
    if (n < 1) {
        snprintf(err, CIS2_ERR_LEN, "forward: no tokens");
        return 1;
    }
    if (ensure_rows(e, n, err)) return 1;
    memcpy(e->tokens, tokens, (size_t)n * sizeof *tokens);
    e->spans[0] = (span_t){ s, 0, n, pos0 };
    return forward(e, e->spans, 1, n, logits, err);
}

int32_t cis2_argmax(const float *logits, int n)
{
    if (n < 1) return -1; /* no logits: no index (logits[0] is not there) */
    int32_t best = 0;
    float best_v = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > best_v) {
            best_v = logits[i];
            best = i;
        } /* strict >: first max wins (§11.2) */
    return best;
}

static void feed_u32(cis2_sha256 *s, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    cis2_sha256_update(s, b, 4);
}

/* §12.1: one continuous SHA-256 stream: the five artifact digests, the
 * prompt ids, then per step its logits row and its pick. */
static void witness_begin(cis2_sha256 *w, const cis2_digests *d, const int32_t *prompt,
                          int n_prompt)
{
    cis2_sha256_init(w);
    cis2_sha256_update(w, d->weights_sha256, 32);
    cis2_sha256_update(w, d->tokenizer_sha256, 32);
    cis2_sha256_update(w, d->config_sha256, 32);
    cis2_sha256_update(w, d->table_digest, 32);
    cis2_sha256_update(w, d->inv_freq_digest, 32);
    for (int i = 0; i < n_prompt; i++) feed_u32(w, (uint32_t)prompt[i]);
}

void cis2_witness_replay(const cis2_digests *d, const int32_t *prompt, int n_prompt,
                         const float *rows, const int32_t *ids, int n_steps, int vocab,
                         uint8_t out[32])
{
    cis2_sha256 w;
    witness_begin(&w, d, prompt, n_prompt);
    for (int i = 0; i < n_steps; i++) {
        cis2_sha256_update(&w, rows + (size_t)i * (size_t)vocab,
                           (size_t)vocab * sizeof(float)); /* LE bit patterns */
        feed_u32(&w, (uint32_t)ids[i]);
    }
    cis2_sha256_final(&w, out);
}

/* The side job: a step's logits row, then its pick, into the §12.1 stream
 * (the order emit_logits and emit_id feed them). */
static void witness_job_run(void *ctx)
{
    const struct witness_job *j = ctx;
    cis2_sha256_update(&j->s->w, j->row, j->len); /* LE bit patterns */
    feed_u32(&j->s->w, (uint32_t)j->id);
}

/* Before anything reads a witness stream or writes the logits: the side
 * job, if one is out, has run (side_wait returns at once when none is). */
static void witness_wait(cis2_engine *e)
{
    if (e->be->side_wait) e->be->side_wait(e->be);
}

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

int cis2_seq_submit(cis2_engine *e, const int32_t *prompt, int n_prompt, const cis2_gen_opts *g,
                    int *seq, char *err)
{
    *seq = -1;
    if (no_engine(e, __func__, err)) return 1;
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
                 "prompt (%d tokens) + -n %d exceeds max_position_embeddings = %d", n_prompt,
                 g->n_gen, c->max_pos);
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
    if (!s->r.prompt || !s->r.gen || (g->n_force > 0 && !s->force_copy)) {
        seq_release(s);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    memcpy(s->r.prompt, prompt, (size_t)n_prompt * sizeof(int32_t));
    s->r.n_prompt = n_prompt;
    s->r.nan_step = s->r.nan_index = -1;
    witness_begin(&s->w, &m->dg, prompt, n_prompt);
    s->state = SEQ_QUEUED;
    *seq = slot;
    return 0;
}

/* The run ends here: close the §12.1 witness stream and compute the §12.2
 * argmax digest over prompt ++ generated ids. */
static void seq_finalize(seq_t *s)
{
    cis2_sha256_final(&s->w, s->r.witness);
    cis2_sha256 a;
    cis2_sha256_init(&a);
    for (int i = 0; i < s->r.n_prompt; i++) feed_u32(&a, (uint32_t)s->r.prompt[i]);
    for (int i = 0; i < s->r.n_gen; i++) feed_u32(&a, (uint32_t)s->r.gen[i]);
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
    if (feed) feed_u32(&s->w, (uint32_t)next);
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
    int n, pairs;
} emit_job;

static void emit_task(void *ctx, int i)
{
    const emit_job *j = ctx;
    cis2_engine *e = j->e;
    const size_t V = (size_t)e->m->cfg.vocab;
    int r = j->pairs ? 2 * i : i;
    seq_t *a = e->spans[r].s;
    const float *la = e->logits + (size_t)r * V;
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

/* One decode step for every running sequence, all in one forward pass: one
 * row each, at its own position, over its own KV cache. */
static int decode_running(cis2_engine *e, char *err)
{
    int B = 0;
    for (int i = 0; i < e->n_seqs; i++) B += e->seqs[i].state == SEQ_RUNNING;
    if (B == 0) return 0;
    if (ensure_rows(e, B, err)) return 1;
    double t0 = cis2_now_ms();
    int b = 0;
    for (int i = 0; i < e->n_seqs; i++) {
        seq_t *s = &e->seqs[i];
        if (s->state != SEQ_RUNNING) continue;
        e->tokens[b] = s->next;
        e->spans[b] = (span_t){ s, b, 1, s->pos };
        b++;
    }
    if (forward(e, e->spans, B, B, e->logits, err)) return 1;
    double ms = cis2_now_ms() - t0;
    const int side = B == 1 && e->be->side;
    if (side) {
        /* A lone sequence's row and pick are hashed on a side thread while
         * the next step runs, unless this step ends the run: the same bytes
         * in the same order, so the same witness. Its ~0.1 ms a token was
         * time the other threads only waited (measured: 1.6-2.3 % a token
         * at 256 keys). */
        seq_t *s = e->spans[0].s;
        s->next = emit_scan(e, s, e->logits);
        e->wj =
            (struct witness_job){ s, e->logits, (size_t)e->m->cfg.vocab * sizeof(float), s->next };
        if (ends_run(e, s, s->next)) witness_job_run(&e->wj);
        else e->be->side(e->be, witness_job_run, &e->wj);
    } else {
        emit_job ej = { e, B, B > 2 };
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
        emit_id(e, s, e->logits + (size_t)i * e->m->cfg.vocab, s->next, !side);
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
        if (s->kv_cap < want) kv_free(s); /* an earlier run's: nothing in it to copy */
        /* e->logits is read after ensure_rows may have moved it */
        rc = ensure_rows(e, s->r.n_prompt, err) || ensure_positions(e, s, want, err) ||
             forward_one(e, s, s->r.prompt, s->r.n_prompt, 0, e->logits, err);
        if (rc) break;
        s->pos = s->r.n_prompt;
        s->state = SEQ_RUNNING;
        emit(e, s, e->logits);
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

int cis2_generate(cis2_engine *e, const int32_t *prompt, int n_prompt, const cis2_gen_opts *g,
                  cis2_result *r, char *err)
{
    memset(r, 0, sizeof *r);
    r->nan_step = r->nan_index = -1;
    if (no_engine(e, __func__, err)) return 1;
    if (cis2_engine_active(e)) {
        snprintf(err, CIS2_ERR_LEN, "the engine is decoding other sequences (use cis2_seq_submit)");
        return 1;
    }
    int seq;
    if (cis2_seq_submit(e, prompt, n_prompt, g, &seq, err)) return 1;
    while (!cis2_seq_done(e, seq))
        if (cis2_engine_step(e, err)) {
            cis2_seq_cancel(e, seq);
            return 1;
        }
    return cis2_seq_take(e, seq, r, err);
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
