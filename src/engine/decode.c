/* The forward pass (§7–§11), KV cache (§3.5), greedy loop (§3.4, §11.2)
 * and the witness and argmax digests (§12.1, §12.2), for one or several
 * independent sequences per engine. */
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
    int pos;          /* positions computed so far */
    cis2_gen_opts g;  /* g.force points at force_copy */
    int32_t *force_copy;
    int32_t next; /* the last emitted id, fed at the next step */
    cis2_result r;
    cis2_sha256 w; /* §12.1 witness stream in progress */
} seq_t;

struct cis2_engine {
    const cis2_model *m; /* read only, shared with any other engine */
    cis2_weights w;      /* this engine's view of m->w (a fault may swap one tensor) */
    cis2_layer *layers;  /* w.layers, this engine's copy of the per-layer table */
    cis2_backend *be;
    cis2_engine_opts o;
    int n_seqs; /* slots in seqs[]; seqs[n_seqs] is the solo sequence of cis2_engine_forward */
    seq_t *seqs;
    float *logits; /* [vocab] */
    int t_cap;     /* tokens the scratch buffers hold */
    float *x, *xn, *q, *k, *v, *att, *proj, *gate, *up, *act;
    float *cos_v, *sin_v, *scores, *logits_in;
    float *rope_c,
        *rope_s;      /* [t_cap][head_dim/2]: each token's §7.3 table, built once per forward */
    cis2_fault fault; /* FAULT INJECTION (docs/divergence.md, debug only) */
};

static inline void rmsnorm(const cis2_engine *e, const float *x, const float *w, int n, float eps,
                           float *out)
{
    if (__builtin_expect(e->fault.kind == CIS2_FAULT_RMSNORM_ASSOC, 0))
        cis2_fault_rmsnorm_assoc(x, w, n, eps, out); /* FAULT */
    else ref_rmsnorm(x, w, n, eps, out);
}

static void trace(cis2_engine *e, int pos, int layer, const char *node, const float *v, size_t n)
{
    if (e->o.trace) e->o.trace(e->o.trace_ctx, pos, layer, node, v, n);
}

static int grow(float **p, size_t n)
{
    float *q = realloc(*p, n * sizeof(float));
    if (!q) return 1;
    *p = q;
    return 0;
}

static int ensure_tokens(cis2_engine *e, int T, char *err)
{
    if (T <= e->t_cap) return 0;
    const cis2_config *c = &e->m->cfg;
    size_t H = (size_t)c->hidden, qd = (size_t)c->n_heads * c->head_dim,
           kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t I = (size_t)c->inter, t = (size_t)T;
    size_t wide = H > qd ? H : qd;
    if (grow(&e->x, t * H) || grow(&e->xn, t * H) || grow(&e->q, t * qd) || grow(&e->k, t * kvd) ||
        grow(&e->v, t * kvd) || grow(&e->att, t * qd) || grow(&e->proj, t * wide) ||
        grow(&e->gate, t * I) || grow(&e->up, t * I) || grow(&e->act, t * I) ||
        grow(&e->rope_c, t * (size_t)(c->head_dim / 2 > 0 ? c->head_dim / 2 : 1)) ||
        grow(&e->rope_s, t * (size_t)(c->head_dim / 2 > 0 ? c->head_dim / 2 : 1))) {
        snprintf(err, CIS2_ERR_LEN, "out of memory for %d tokens of activations", T);
        return 1;
    }
    e->t_cap = T;
    return 0;
}

/* A sequence's KV cache grows on demand (doubling) up to max_position_embeddings. */
static int ensure_positions(cis2_engine *e, seq_t *s, int need, char *err)
{
    const cis2_config *c = &e->m->cfg;
    if (need > c->max_pos) {
        snprintf(err, CIS2_ERR_LEN, "position %d is beyond max_position_embeddings = %d", need - 1,
                 c->max_pos);
        return 1;
    }
    if (need <= s->kv_cap) return 0;
    if (!s->kc) {
        s->kc = calloc((size_t)c->n_layers, sizeof *s->kc);
        s->vc = calloc((size_t)c->n_layers, sizeof *s->vc);
        if (!s->kc || !s->vc) {
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            return 1;
        }
    }
    int cap = s->kv_cap ? s->kv_cap : 64;
    while (cap < need) cap *= 2;
    if (cap > c->max_pos) cap = c->max_pos;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    for (int l = 0; l < c->n_layers; l++)
        if (grow(&s->kc[l], (size_t)cap * kvd) || grow(&s->vc[l], (size_t)cap * kvd)) {
            snprintf(err, CIS2_ERR_LEN, "out of memory for a KV cache of %d positions", cap);
            return 1;
        }
    s->kv_cap = cap;
    return 0;
}

static void seq_release(const cis2_engine *e, seq_t *s)
{
    for (int l = 0; s->kc && l < e->m->cfg.n_layers; l++) {
        free(s->kc[l]);
        free(s->vc[l]);
    }
    free(s->kc);
    free(s->vc);
    free(s->force_copy);
    cis2_result_free(&s->r);
    memset(s, 0, sizeof *s);
}

int cis2_engine_new(cis2_engine **out, const cis2_model *m, const cis2_engine_opts *o, char *err)
{
    *out = NULL;
    cis2_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    e->m = m;
    if (o) e->o = *o;
    e->n_seqs = e->o.max_seqs > 0 ? e->o.max_seqs : 1;
    if (e->n_seqs > 4096) {
        snprintf(err, CIS2_ERR_LEN, "max_seqs %d is more than 4096", e->n_seqs);
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
    e->cos_v = malloc((size_t)c->head_dim / 2 * sizeof(float));
    e->sin_v = malloc((size_t)c->head_dim / 2 * sizeof(float));
    e->logits_in = malloc((size_t)c->hidden * sizeof(float));
    e->logits = malloc((size_t)c->vocab * sizeof(float));
    if (!e->seqs || !e->cos_v || !e->sin_v || !e->logits_in || !e->logits) {
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
    if (e->be) e->be->destroy(e->be);
    for (int i = 0; e->seqs && i <= e->n_seqs; i++) seq_release(e, &e->seqs[i]);
    free(e->seqs);
    free(e->x);
    free(e->xn);
    free(e->q);
    free(e->k);
    free(e->v);
    free(e->att);
    free(e->proj);
    free(e->gate);
    free(e->up);
    free(e->act);
    free(e->cos_v);
    free(e->sin_v);
    free(e->scores);
    free(e->logits_in);
    free(e->rope_c);
    free(e->rope_s);
    free(e->logits);
    cis2_fault_free(&e->fault);
    free(e->layers);
    free(e);
}

const cis2_model *cis2_engine_model(const cis2_engine *e) { return e->m; }

const char *cis2_engine_backend(const cis2_engine *e) { return e->be->name; }

/* Per-head RMSNorm over head_dim (Qwen3 q_norm/k_norm), same §8 procedure. */
static void head_norm(const cis2_engine *e, float *v, int n_heads, int hd, const float *w,
                      float eps)
{
    for (int h = 0; h < n_heads; h++)
        rmsnorm(e, v + (size_t)h * hd, w, hd, eps, v + (size_t)h * hd);
}

/* ---- per-token elementwise stages. Every stage touches only token t's
 * rows (and its own KV-cache slot), so tokens may run in any order or in
 * parallel (the fast backend's pool) with identical results; traced runs
 * stay serial so the trace callback sees nodes in the same order. */
enum { ST_EMBED, ST_ROPE, ST_ATTN_NORM, ST_QKV, ST_ATTN_OUT, ST_SWIGLU, ST_DOWN, ST_DOWN_NORM };
typedef struct {
    cis2_engine *e;
    seq_t *s;
    const int32_t *tokens;
    const cis2_layer *y;
    int l, pos0, stage;
    const cis2_layer *y_next; /* ST_DOWN_NORM: the next layer (its attn_norm) */
} tok_job;

static void tok_stage(void *ctx, int t)
{
    const tok_job *j = ctx;
    cis2_engine *e = j->e;
    const cis2_model *m = e->m;
    const cis2_config *c = &m->cfg;
    const cis2_layer *y = j->y;
    const int H = c->hidden, hd = c->head_dim, half = hd / 2, nh = c->n_heads, nkv = c->n_kv_heads;
    const int qd = nh * hd, kvd = nkv * hd, I = c->inter, l = j->l, pos = j->pos0 + t;
    const float eps = c->eps;
    float *x = e->x + (size_t)t * H, *xn = e->xn + (size_t)t * H;
    switch (j->stage) {
    case ST_EMBED:
        cis2_weight_row(&e->w.embed, j->tokens[t], x); /* §4.1: exact widening */
        trace(e, pos, -1, "embed", x, (size_t)H);
        break;
    case ST_ROPE: {
        int rpos = pos;
        if (__builtin_expect(e->fault.kind == CIS2_FAULT_ROPE_OFFSET, 0) && j->pos0 > 0)
            rpos = pos + 1; /* FAULT: decode positions off by one */
        ref_rope_table(m->inv_freq, half, rpos, e->rope_c + (size_t)t * half,
                       e->rope_s + (size_t)t * half);
        break;
    }
    case ST_ATTN_NORM:
        rmsnorm(e, x, y->attn_norm, H, eps, xn);
        trace(e, pos, l, "attn_norm", xn, (size_t)H);
        break;
    case ST_QKV: {
        float *q = e->q + (size_t)t * qd, *k = e->k + (size_t)t * kvd, *v = e->v + (size_t)t * kvd;
        /* §9.1: each bias the checkpoint carries, after the matvec, before RoPE */
        if (y->q_bias) ref_add(q, y->q_bias, qd);
        if (y->k_bias) ref_add(k, y->k_bias, kvd);
        if (y->v_bias) ref_add(v, y->v_bias, kvd);
        trace(e, pos, l, "q_proj", q, (size_t)qd);
        trace(e, pos, l, "k_proj", k, (size_t)kvd);
        trace(e, pos, l, "v_proj", v, (size_t)kvd);
        if (y->q_norm) { /* Qwen3: after projection, before RoPE */
            head_norm(e, q, nh, hd, y->q_norm, eps);
            head_norm(e, k, nkv, hd, y->k_norm, eps);
            trace(e, pos, l, "q_norm", q, (size_t)qd);
            trace(e, pos, l, "k_norm", k, (size_t)kvd);
        }
        const float *cv = e->rope_c + (size_t)t * half, *sv = e->rope_s + (size_t)t * half;
        for (int h = 0; h < nh; h++) ref_rope_rotate(q + (size_t)h * hd, hd, cv, sv);
        for (int h = 0; h < nkv; h++) ref_rope_rotate(k + (size_t)h * hd, hd, cv, sv);
        trace(e, pos, l, "q_rope", q, (size_t)qd);
        trace(e, pos, l, "k_rope", k, (size_t)kvd);
        if (__builtin_expect(e->fault.kind == CIS2_FAULT_KV_STALE, 0) && pos == e->fault.pos) {
            /* FAULT kv-stale: this slot is never written; it keeps stale
             * contents, made deterministic here as zeros. */
            memset(j->s->kc[l] + (size_t)pos * kvd, 0, (size_t)kvd * sizeof(float));
            memset(j->s->vc[l] + (size_t)pos * kvd, 0, (size_t)kvd * sizeof(float));
        } else {
            memcpy(j->s->kc[l] + (size_t)pos * kvd, k, (size_t)kvd * sizeof(float));
            memcpy(j->s->vc[l] + (size_t)pos * kvd, v, (size_t)kvd * sizeof(float));
        }
        break;
    }
    case ST_ATTN_OUT:
        trace(e, pos, l, "attn_out", e->att + (size_t)t * qd, (size_t)qd);
        trace(e, pos, l, "o_proj", e->proj + (size_t)t * H, (size_t)H);
        ref_add(x, e->proj + (size_t)t * H, H);
        trace(e, pos, l, "resid_attn", x, (size_t)H);
        rmsnorm(e, x, y->mlp_norm, H, eps, xn);
        trace(e, pos, l, "mlp_norm", xn, (size_t)H);
        break;
    case ST_SWIGLU: {
        size_t off = (size_t)t * I;
        if (e->be->swiglu)
            e->be->swiglu(e->gate + off, e->up + off, e->act + off,
                          I); /* bit-identical (unit_fast) */
        else ref_swiglu(e->gate + off, e->up + off, e->act + off, I);
        trace(e, pos, l, "gate", e->gate + off, (size_t)I);
        trace(e, pos, l, "up", e->up + off, (size_t)I);
        trace(e, pos, l, "act", e->act + off, (size_t)I);
        break;
    }
    case ST_DOWN:
    case ST_DOWN_NORM:
        trace(e, pos, l, "down", e->proj + (size_t)t * H, (size_t)H);
        ref_add(x, e->proj + (size_t)t * H, H);
        trace(e, pos, l, "resid_mlp", x, (size_t)H);
        /* untraced parallel runs: the next layer's attn_norm in the same step */
        if (j->stage == ST_DOWN_NORM) rmsnorm(e, x, j->y_next->attn_norm, H, eps, xn);
        break;
    }
}

static void run_tokens(cis2_engine *e, tok_job *j, int stage, int T)
{
    j->stage = stage;
    if (T == 1 || e->o.trace || !e->be->parallel_for) {
        for (int t = 0; t < T; t++) tok_stage(j, t);
    } else {
        e->be->parallel_for(e->be, T, tok_stage, j);
    }
}

/* The forward pass of T tokens of sequence s at positions pos0..pos0+T-1. */
static int forward(cis2_engine *e, seq_t *s, const int32_t *tokens, int T, int pos0, float *logits,
                   char *err)
{
    const cis2_model *m = e->m;
    const cis2_config *c = &m->cfg;
    if (T < 1) {
        snprintf(err, CIS2_ERR_LEN, "forward: no tokens");
        return 1;
    }
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab) {
            snprintf(err, CIS2_ERR_LEN, "token id %d is outside the vocabulary (vocab_size = %d)",
                     tokens[t], c->vocab);
            return 1;
        }
    if (ensure_tokens(e, T, err) || ensure_positions(e, s, pos0 + T, err)) return 1;
    if (__builtin_expect(e->fault.kind == CIS2_FAULT_NO_FTZ, 0))
        cis2_fpenv_unpin(); /* FAULT no-ftz: IEEE subnormals */
    else if (!cis2_fpenv_is_pinned()) {
        snprintf(err, CIS2_ERR_LEN, "FTZ/DAZ is not pinned on this thread (§1.3)");
        return 1;
    }
    const int H = c->hidden, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    const int qd = nh * hd, kvd = nkv * hd;
    const float eps = c->eps;
    const float scale = cis2_rsqrt((float)hd); /* §9.2: rsqrt(64) == 0.125 */
    cis2_backend *be = e->be;
    tok_job j = { e, s, tokens, NULL, -1, pos0, 0, NULL };
    /* Parallel prefill fuses a layer's last elementwise step with the next
     * layer's attn_norm (one synchronisation less per layer). */
    const int fuse = T > 1 && !e->o.trace && be->parallel_for;

    run_tokens(e, &j, ST_EMBED, T);
    run_tokens(e, &j, ST_ROPE,
               T); /* §7.3 tables depend on the position only: once, not per layer */
    for (int l = 0; l < c->n_layers; l++) {
        const cis2_layer *y = &e->w.layers[l];
        j.y = y;
        j.l = l;
        if (l == 0 || !fuse) run_tokens(e, &j, ST_ATTN_NORM, T);
        if (be->matmul_multi) {
            const cis2_weight *w3[3] = { &y->q, &y->k, &y->v };
            float *const y3[3] = { e->q, e->k, e->v };
            be->matmul_multi(be, 3, w3, e->xn, T, y3);
        } else {
            be->matmul(be, &y->q, e->xn, T, e->q);
            be->matmul(be, &y->k, e->xn, T, e->k);
            be->matmul(be, &y->v, e->xn, T, e->v);
        }
        run_tokens(e, &j, ST_QKV, T);
        if (e->o.trace) {
            /* Traced runs use the reference attention so scores and probs can
             * be captured; it is bit-identical to every backend's (tested). */
            int group = nh / nkv;
            for (int t = 0; t < T; t++) {
                int pos = pos0 + t, n_ctx = pos + 1;
                float *sc = malloc((size_t)nh * n_ctx * sizeof(float)),
                      *pr = malloc((size_t)nh * n_ctx * sizeof(float));
                if (!sc || !pr) {
                    free(sc);
                    free(pr);
                    snprintf(err, CIS2_ERR_LEN, "out of memory");
                    return 1;
                }
                for (int h = 0; h < nh; h++) {
                    const float *q = e->q + (size_t)t * qd + (size_t)h * hd;
                    const float *kb = s->kc[l] + (size_t)(h / group) * hd,
                                *vb = s->vc[l] + (size_t)(h / group) * hd;
                    for (int jj = 0; jj < n_ctx; jj++) {
                        float d = cis2_dot_seq(q, kb + (size_t)jj * kvd, (size_t)hd);
                        sc[(size_t)h * n_ctx + jj] = cis2_fmul(d, scale); /* §1.3 */
                    }
                    ref_attention_head(q, kb, vb, (size_t)kvd, n_ctx, hd, scale,
                                       pr + (size_t)h * n_ctx,
                                       e->att + (size_t)t * qd + (size_t)h * hd);
                }
                trace(e, pos, l, "attn_scores", sc, (size_t)nh * n_ctx);
                trace(e, pos, l, "attn_probs", pr, (size_t)nh * n_ctx);
                free(sc);
                free(pr);
            }
        } else {
            be->attention(be, e->q, s->kc[l], s->vc[l], T, pos0, nh, nkv, hd, scale, e->att);
        }
        be->matmul(be, &y->o, e->att, T, e->proj);
        run_tokens(e, &j, ST_ATTN_OUT, T);
        if (be->matmul_multi) {
            const cis2_weight *w2[2] = { &y->gate, &y->up };
            float *const y2[2] = { e->gate, e->up };
            be->matmul_multi(be, 2, w2, e->xn, T, y2);
        } else {
            be->matmul(be, &y->gate, e->xn, T, e->gate);
            be->matmul(be, &y->up, e->xn, T, e->up);
        }
        run_tokens(e, &j, ST_SWIGLU, T);
        be->matmul(be, &y->down, e->act, T, e->proj);
        if (fuse && l + 1 < c->n_layers) {
            j.y_next = &e->w.layers[l + 1];
            run_tokens(e, &j, ST_DOWN_NORM, T);
        } else {
            run_tokens(e, &j, ST_DOWN, T);
        }
    }
    if (logits) {
        /* §3.4: only the last position's logits are needed; the others are never computed. */
        rmsnorm(e, e->x + (size_t)(T - 1) * H, e->w.final_norm, H, eps, e->logits_in);
        trace(e, pos0 + T - 1, -1, "final_norm", e->logits_in, (size_t)H);
        be->matmul(be, cis2_head(&e->w), e->logits_in, 1, logits); /* §11.1 */
        trace(e, pos0 + T - 1, -1, "logits", logits, (size_t)c->vocab);
    }
    return 0;
}

int32_t cis2_argmax(const float *logits, int n)
{
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
static int fp_enter(fp_guard *g, char *err)
{
    g->saved = cis2_fpenv_read();
    if (cis2_fpenv_pin() != 0) {
        cis2_fpenv_write(g->saved);
        snprintf(err, CIS2_ERR_LEN,
                 "cannot pin FTZ/DAZ on this thread (control register 0x%llx, §1.3)",
                 (unsigned long long)g->saved);
        return 1;
    }
    return 0;
}
static void fp_leave(const fp_guard *g) { cis2_fpenv_write(g->saved); }

int cis2_engine_forward(cis2_engine *e, const int32_t *tokens, int n, int pos0, float *logits,
                        char *err)
{
    fp_guard fg;
    if (fp_enter(&fg, err)) return 1;
    int rc = forward(e, &e->seqs[e->n_seqs], tokens, n, pos0, logits, err);
    fp_leave(&fg);
    return rc;
}

int cis2_seq_submit(cis2_engine *e, const int32_t *prompt, int n_prompt, const cis2_gen_opts *g,
                    int *seq, char *err)
{
    const cis2_model *m = e->m;
    const cis2_config *c = &m->cfg;
    *seq = -1;
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
        seq_release(e, s);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    memcpy(s->r.prompt, prompt, (size_t)n_prompt * sizeof(int32_t));
    s->r.n_prompt = n_prompt;
    s->r.nan_step = s->r.nan_index = -1;
    /* §12.1: one continuous SHA-256 stream. */
    cis2_sha256_init(&s->w);
    cis2_sha256_update(&s->w, m->dg.weights_sha256, 32);
    cis2_sha256_update(&s->w, m->dg.tokenizer_sha256, 32);
    cis2_sha256_update(&s->w, m->dg.config_sha256, 32);
    cis2_sha256_update(&s->w, m->dg.table_digest, 32);
    cis2_sha256_update(&s->w, m->dg.inv_freq_digest, 32);
    for (int i = 0; i < n_prompt; i++) feed_u32(&s->w, (uint32_t)prompt[i]);
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

/* One generated token from this step's logits (§11.2 argmax, or forced). */
static void emit(cis2_engine *e, seq_t *s, const float *logits)
{
    const cis2_config *c = &e->m->cfg;
    int step = s->r.n_gen;
    int32_t next = step < s->g.n_force ? s->g.force[step] : cis2_argmax(logits, c->vocab);
    if (s->r.nan_step < 0)
        for (int i = 0; i < c->vocab; i++)
            if ((cis2_f2u(logits[i]) & 0x7FFFFFFFu) > 0x7F800000u) {
                s->r.nan_step = step;
                s->r.nan_index = i;
                break;
            }
    cis2_sha256_update(&s->w, logits, (size_t)c->vocab * sizeof(float)); /* LE bit patterns */
    feed_u32(&s->w, (uint32_t)next);
    s->r.gen[s->r.n_gen++] = next;
    s->next = next;
    if (s->g.on_step) s->g.on_step(s->g.ctx, step, logits, c->vocab, next);
    if (s->g.stop_at_eos && is_eos(c, next)) s->r.stopped_at_eos = 1;
    if (s->r.stopped_at_eos || s->r.n_gen == s->g.n_gen) seq_finalize(s);
}

int cis2_engine_step(cis2_engine *e, char *err)
{
    fp_guard fg;
    if (fp_enter(&fg, err)) return 1;
    int rc = 0;
    /* Sequences in slot order; each one's arithmetic depends on its own
     * tokens only, so the order (and who else runs) never changes a bit. */
    for (int i = 0; i < e->n_seqs && !rc; i++) {
        seq_t *s = &e->seqs[i];
        double t0 = cis2_now_ms();
        if (s->state == SEQ_QUEUED) {
            rc = forward(e, s, s->r.prompt, s->r.n_prompt, 0, e->logits, err);
            if (rc) break;
            s->pos = s->r.n_prompt;
            s->state = SEQ_RUNNING;
            emit(e, s, e->logits);
            s->r.prefill_ms += cis2_now_ms() - t0;
        } else if (s->state == SEQ_RUNNING) {
            rc = forward(e, s, &s->next, 1, s->pos, e->logits, err);
            if (rc) break;
            s->pos++;
            emit(e, s, e->logits);
            s->r.decode_ms += cis2_now_ms() - t0;
        }
    }
    fp_leave(&fg);
    return rc;
}

int cis2_engine_active(const cis2_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->n_seqs; i++)
        n += e->seqs[i].state == SEQ_QUEUED || e->seqs[i].state == SEQ_RUNNING;
    return n;
}

static int seq_valid(const cis2_engine *e, int seq)
{
    return seq >= 0 && seq < e->n_seqs && e->seqs[seq].state != SEQ_FREE;
}

int cis2_seq_done(const cis2_engine *e, int seq)
{
    return seq_valid(e, seq) && e->seqs[seq].state == SEQ_DONE;
}

int cis2_seq_take(cis2_engine *e, int seq, cis2_result *r, char *err)
{
    if (!cis2_seq_done(e, seq)) {
        snprintf(err, CIS2_ERR_LEN, "sequence %d is not finished", seq);
        return 1;
    }
    seq_t *s = &e->seqs[seq];
    *r = s->r;
    memset(&s->r, 0, sizeof s->r);
    seq_release(e, s);
    return 0;
}

void cis2_seq_cancel(cis2_engine *e, int seq)
{
    if (seq_valid(e, seq)) seq_release(e, &e->seqs[seq]);
}

int cis2_seq_finish(cis2_engine *e, int seq, char *err)
{
    if (!seq_valid(e, seq) || e->seqs[seq].state != SEQ_RUNNING) {
        snprintf(err, CIS2_ERR_LEN, "sequence %d is not running", seq);
        return 1;
    }
    /* The digests of a run of exactly this many tokens: the stream so far is
     * that run's stream (§12.1 feeds each step's logits and pick in order). */
    seq_finalize(&e->seqs[seq]);
    return 0;
}

int cis2_generate(cis2_engine *e, const int32_t *prompt, int n_prompt, const cis2_gen_opts *g,
                  cis2_result *r, char *err)
{
    memset(r, 0, sizeof *r);
    r->nan_step = r->nan_index = -1;
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
