/* The forward pass (§7–§11): rows of one or several sequences through the
 * embedding (§4.1), each layer's attention (§9) and MLP (§10) blocks with
 * their norms (§8) and residuals (§5.4), the final norm and the LM head
 * (§11.1), as named stages a trace can see. Attention reads and extends
 * each row's own sequence's KV cache (§3.5, engine.c). */
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "core/fparith.h"
#include <string.h>

/* ------------------------------------------------------------ trace nodes */
const char *const cis2_trace_node_names[CIS2_N_NODES] = {
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

static void trace(cis2_engine *e, int pos, int layer, cis2_trace_node node, const float *v,
                  size_t n)
{
    if (e->o.trace) e->o.trace(e->o.trace_ctx, pos, layer, cis2_trace_node_names[node], v, n);
}
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

/* Untraced rows take the residual steps a group at a time, each group's
 * norms side by side (rmsnorm_rows: each row bit for bit ref_rmsnorm, up to
 * eight rows' in-order sums at once, so their add latencies overlap; one row
 * alone is one chain of adds, latency-bound). A few rows (one token, or a
 * decode step of a few sequences) run on the calling thread: eight rows take
 * ~5 us there with two threads running (~2 us alone: the rest is fetching
 * the other core's half of the rows), where a parallel pass took ~10 us.
 * More rows (a prefill) run as parallel groups of NORM_GROUP rows: row by
 * row, the norms were ~2.5 % of a 256-token prefill's profile, and grouped
 * the prefill runs 3-4 % faster (in-process A/B, Zen 5). Traced runs keep the
 * row-by-row passes, whose trace sees each row's nodes in order; so does the
 * rmsnorm-assoc fault. */
#define SERIAL_ROWS 16
#define NORM_GROUP  8
static int rows_grouped(const cis2_engine *e)
{
    return !e->o.trace && e->be->rmsnorm_rows && e->fault.kind != CIS2_FAULT_RMSNORM_ASSOC;
}
static int rows_serial(const cis2_engine *e, int T) { return T <= SERIAL_ROWS && rows_grouped(e); }

/* out[t] = rmsnorm(x[t], w) (§8) for the T consecutive hidden rows at x,
 * side by side (rmsnorm_rows). */
static void norm_rows(const cis2_engine *e, const float *x, const float *w, float *out, int T)
{
    const cis2_config *c = &e->m->cfg;
    e->be->rmsnorm_rows(x, (size_t)c->hidden, w, c->hidden, c->eps, out, (size_t)c->hidden, T);
}

/* Rows t0 <= t < t0 + n: x[t] += d[t] when d (§5.4; toy gain first when g),
 * then xn[t] = rmsnorm(x[t], w) (§8) when w. */
static void residual_norm_rows(cis2_engine *e, int t0, int n, float *d, const float *g,
                               const float *w)
{
    const int H = e->m->cfg.hidden;
    for (int t = t0; d && t < t0 + n; t++) {
        float *dt = d + (size_t)t * H;
        if (g) toy_gain(dt, g, H);
        add(e, e->x + (size_t)t * H, dt, H);
    }
    if (w) norm_rows(e, e->x + (size_t)t0 * H, w, e->xn + (size_t)t0 * H, n);
}

typedef struct {
    cis2_engine *e;
    int T;
    float *d;
    const float *g, *w;
} resid_job;

static void resid_group(void *ctx, int i)
{
    const resid_job *j = ctx;
    int t0 = i * NORM_GROUP, n = j->T - t0 < NORM_GROUP ? j->T - t0 : NORM_GROUP;
    residual_norm_rows(j->e, t0, n, j->d, j->g, j->w);
}

/* residual_norm_rows over rows 0..T-1 (rows_grouped's path): on the calling
 * thread for a few rows, else groups in parallel. */
static void residual_norm(cis2_engine *e, int T, float *d, const float *g, const float *w)
{
    if (T <= SERIAL_ROWS || !e->be->parallel_for) residual_norm_rows(e, 0, T, d, g, w);
    else {
        resid_job j = { e, T, d, g, w };
        e->be->parallel_for(e->be, (T + NORM_GROUP - 1) / NORM_GROUP, resid_group, &j);
    }
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
        if (eng_grow(&e->scores, need, sizeof(float)) || eng_grow(&e->probs, need, sizeof(float))) {
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
    if (!norm_done && rows_grouped(e)) residual_norm(e, T, NULL, NULL, y->attn_norm);
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
    if (rows_grouped(e)) residual_norm(e, T, e->proj, y->o_gain, y->mlp_norm);
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
    if (rows_grouped(e))
        residual_norm(e, T, e->proj, NULL, fuse_next ? fuse_next->attn_norm : NULL);
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
    e->be->matmul(e->be, cis2_head(&e->w), e->xf, n_sp, logits);
    for (int i = 0; i < n_sp; i++)
        trace(e, sp[i].pos0 + sp[i].n - 1, -1, CIS2_N_LOGITS, logits + (size_t)i * c->vocab,
              (size_t)c->vocab);
}

/* The forward pass over e->tokens[0..T), laid out as n_sp spans (each span's
 * rows consecutive, spans in row order). logits (may be NULL) receives each
 * span's last-row logits, [n_sp][vocab]: a buffer no witness side job is
 * reading (the caller's to see to, engine.c). It computes only: the rows'
 * buffers are the caller's (eng_ensure_rows), each span's KV positions
 * are made to reach it (kv_cache.c). */
int eng_forward(cis2_engine *e, const span_t *sp, int n_sp, int T, float *logits, char *err)
{
    const cis2_config *c = &e->m->cfg;
    for (int t = 0; t < T; t++)
        if (e->tokens[t] < 0 || e->tokens[t] >= c->vocab) {
            snprintf(err, CIS2_ERR_LEN, "token id %d is outside the vocabulary (vocab_size = %d)",
                     e->tokens[t], c->vocab);
            return 1;
        }
    for (int i = 0; i < n_sp; i++) {
        if (eng_ensure_positions(e, sp[i].s, sp[i].pos0 + sp[i].n, err)) return 1;
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
