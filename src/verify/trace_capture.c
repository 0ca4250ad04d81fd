/* Capturing a traced run (verify/trace.h): an engine whose trace callback
 * copies (or hashes) every selected node, run teacher-forced one token per
 * forward call or greedy through cis2_generate, and the metadata that lets a
 * later diff check both sides fed the same tokens to the same checkpoint. */
#include "verify/trace.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    cis2_trace *tr;
    const cis2_config *cfg;
    const uint8_t *layer_on; /* NULL = all */
    unsigned node_mask;      /* bit per node */
    int hash_only, oom;
} capture;

static void capture_cb(void *ctx, int pos, int layer, const char *node, const float *v, size_t n)
{
    capture *c = ctx;
    int k = cis2_trace_node_index(node, strlen(node));
    if (c->oom || k < 0 || !(c->node_mask & (1u << k))) return;
    if (layer >= 0 && c->layer_on && !c->layer_on[layer]) return;
    char name[64];
    if (layer >= 0) snprintf(name, sizeof name, "p%d.L%d.%s", pos, layer, node);
    else snprintf(name, sizeof name, "p%d.%s", pos, node);
    cis2_tentry *e = cis2_trace_add(c->tr);
    if (!e) {
        c->oom = 1;
        return;
    }
    e->name = strdup(name);
    e->pos = pos;
    e->layer = layer;
    e->node = k;
    e->n = (int64_t)n;
    if ((k == CIS2_N_SCORES || k == CIS2_N_PROBS) && c->cfg->n_heads > 0 &&
        n % (size_t)c->cfg->n_heads == 0) {
        e->ndim = 2;
        e->shape[0] = c->cfg->n_heads;
        e->shape[1] = (int64_t)n / c->cfg->n_heads;
    } else {
        e->ndim = 1;
        e->shape[0] = (int64_t)n;
    }
    if (c->hash_only) {
        cis2_sha256_buf(v, n * sizeof(float), e->sha); /* little-endian host (engine.h checks) */
    } else {
        e->v = malloc(n * sizeof(float) + 1);
        if (e->v) memcpy(e->v, v, n * sizeof(float));
    }
    if (!e->name || (!c->hash_only && !e->v)) c->oom = 1;
}

/* "0-2,29" -> on[n_layers]. */
static int parse_layers(const char *s, int n_layers, uint8_t *on, char *err)
{
    memset(on, 0, (size_t)n_layers);
    const char *p = s;
    char es[80];
    cis2_escape(s, strlen(s), es, sizeof es, CIS2_ESC_TEXT);
    while (1) {
        uint64_t a, b;
        char *end;
        if (*p < '0' || *p > '9' || (a = strtoull(p, &end, 10)) > 100000000) {
            snprintf(err, CIS2_ERR_LEN,
                     "--layers '%s': expected a layer number or range like 0-2,29", es);
            return 1;
        }
        p = end;
        b = a;
        if (*p == '-') {
            p++;
            if (*p < '0' || *p > '9' || (b = strtoull(p, &end, 10)) < a || b > 100000000) {
                snprintf(err, CIS2_ERR_LEN, "--layers '%s': bad range (want A-B with A <= B)", es);
                return 1;
            }
            p = end;
        }
        if (b >= (uint64_t)n_layers) {
            snprintf(err, CIS2_ERR_LEN,
                     "--layers '%s': layer %llu does not exist (the model has %d layers)", es,
                     (unsigned long long)b, n_layers);
            return 1;
        }
        /* a layer named twice ("0,0", "0-2,1") is a typo for another one,
         * not a request: refused rather than silently merged */
        for (uint64_t i = a; i <= b; i++) {
            if (on[i]) {
                snprintf(err, CIS2_ERR_LEN, "--layers '%s': layer %llu is given twice", es,
                         (unsigned long long)i);
                return 1;
            }
            on[i] = 1;
        }
        if (*p == 0) return 0;
        if (*p++ != ',') {
            snprintf(err, CIS2_ERR_LEN, "--layers '%s': expected ',' or end", es);
            return 1;
        }
    }
}

static int parse_nodes(const char *s, int qk_norm, unsigned *mask, char *err)
{
    *mask = 0;
    const char *p = s;
    while (1) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        int k = cis2_trace_node_index(p, len);
        if (k < 0) {
            char en[64];
            snprintf(err, CIS2_ERR_LEN,
                     "--nodes: unknown node '%s' (known: embed, attn_norm, q_proj, ..., "
                     "final_norm, logits; see docs/divergence.md)",
                     cis2_escape(p, len > 40 ? 40 : len, en, sizeof en, CIS2_ESC_TEXT));
            return 1;
        }
        /* asking for a node the model does not have would capture nothing
         * for it: a trace of 0 tensors that diff then refuses */
        if ((k == CIS2_N_Q_NORM || k == CIS2_N_K_NORM) && !qk_norm) {
            snprintf(err, CIS2_ERR_LEN,
                     "--nodes: this model has no %s node (q_norm and k_norm exist in qwen3 "
                     "models only)",
                     cis2_trace_node_name(k));
            return 1;
        }
        /* named twice: a typo for another node, refused (as --layers) */
        if (*mask & 1u << k) {
            snprintf(err, CIS2_ERR_LEN, "--nodes: node %s is given twice", cis2_trace_node_name(k));
            return 1;
        }
        *mask |= 1u << k;
        if (!c) return 0;
        p = c + 1;
    }
}

void cis2_trace_run_free(cis2_trace_run *r)
{
    free(r->tokens);
    free(r->pred);
    memset(r, 0, sizeof *r);
}

/* Runs `prompt ++ force` (or greedy) on e, recording tokens and predictions. */
static int do_trace(cis2_engine *e, const cis2_config *c, const int32_t *prompt, int np,
                    const int32_t *force, int nf, const cis2_trace_req *rq, cis2_trace_run *run,
                    char *err)
{
    int rc = 1;
    float *logits = NULL;
    cis2_result r;
    memset(&r, 0, sizeof r);
    int total =
        np + (rq->greedy_n ? rq->greedy_n - 1 : nf + (rq->extend_n > 0 ? rq->extend_n - 1 : 0));
    run->tokens = malloc((size_t)(total > 0 ? total : 1) * sizeof(int32_t));
    run->pred = malloc((size_t)(total > 0 ? total : 1) * sizeof(int32_t));
    logits = malloc((size_t)c->vocab * sizeof(float));
    if (!run->tokens || !run->pred || !logits) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        goto out;
    }
    if ((int64_t)total > c->max_pos) {
        snprintf(err, CIS2_ERR_LEN, "%d positions exceed max_position_embeddings = %d", total,
                 c->max_pos);
        goto out;
    }
    if (rq->greedy_n) {
        cis2_gen_opts g = { rq->greedy_n, 0, NULL, NULL, NULL, 0 };
        if (cis2_generate(e, prompt, np, &g, &r, err)) goto out;
        memcpy(run->tokens, prompt, (size_t)np * sizeof(int32_t));
        memcpy(run->tokens + np, r.gen, (size_t)(r.n_gen - 1) * sizeof(int32_t));
        run->n_tokens = np + r.n_gen - 1;
        memcpy(run->pred, r.gen, (size_t)r.n_gen * sizeof(int32_t));
        run->n_pred = r.n_gen;
        memcpy(run->witness, r.witness, 32);
        run->have_witness = strncmp(cis2_engine_backend(e), "approx", 6) != 0; /* arm D: none */
    } else {
        for (int i = 0; i < total; i++) {
            int32_t tok;
            if (i < np) tok = prompt[i];
            else if (i < np + nf) tok = force[i - np];
            else tok = run->pred[i - 1]; /* greedy extension */
            run->tokens[i] = tok;
            if (cis2_engine_forward(e, &tok, 1, i, logits, err)) goto out;
            run->pred[i] = cis2_argmax(logits, c->vocab);
        }
        run->n_tokens = total;
        run->n_pred = total;
    }
    rc = 0;
out:
    cis2_result_free(&r);
    free(logits);
    return rc;
}

static int meta_hex(cis2_trace *tr, const char *k, const uint8_t d[32])
{
    char h[65];
    cis2_hex(d, 32, h);
    return cis2_trace_meta_set(tr, k, h);
}

static int meta_ids(cis2_trace *tr, const char *k, const int32_t *ids, int n)
{
    char *s = cis2_format_ids(ids, n);
    int rc = !s || cis2_trace_meta_set(tr, k, s);
    free(s);
    return rc;
}

static int fill_meta(cis2_trace *tr, const cis2_model *m, const char *backend,
                     const cis2_engine_opts *eo, const cis2_trace_req *rq, const int32_t *prompt,
                     int np, const int32_t *force, int nf, const cis2_trace_run *run)
{
    const cis2_config *c = cis2_model_config(m);
    const cis2_digests *dg = cis2_model_digests(m);
    char armbuf[80], num[32], order[512] = "";
    snprintf(armbuf, sizeof armbuf, "cis2-%s", backend);
    snprintf(num, sizeof num, "%d", c->n_layers);
    for (int k = 0; k < CIS2_N_NODES; k++) {
        if ((k == CIS2_N_Q_NORM || k == CIS2_N_K_NORM) && !c->qk_norm) continue;
        if (order[0]) strcat(order, ",");
        strcat(order, cis2_trace_node_name(k));
    }
    int bad = cis2_trace_meta_set(tr, "format", CIS2_TRACE_FORMAT);
    bad |= cis2_trace_meta_set(tr, "arm", rq->arm ? rq->arm : armbuf);
    bad |= cis2_trace_meta_set(tr, "engine", "cis2 spec " CIS2_SPEC_VERSION);
    bad |= cis2_trace_meta_set(tr, "backend", backend);
    bad |= cis2_trace_meta_set(tr, "arch", cis2_arch_name(c->arch));
    bad |= cis2_trace_meta_set(tr, "n_layers", num);
    bad |= meta_hex(tr, "weights_sha256", dg->weights_sha256);
    bad |= meta_hex(tr, "config_sha256", dg->config_sha256);
    bad |= meta_hex(tr, "tokenizer_sha256", dg->tokenizer_sha256);
    bad |= meta_hex(tr, "table_digest", dg->table_digest);
    bad |= meta_hex(tr, "inv_freq_table_digest", dg->inv_freq_digest);
    bad |= cis2_trace_meta_set(tr, "dtype", cis2_model_dtype(m));
    uint8_t i8d[32]; /* State 1: the int8 weights and scales computed with */
    if (!cis2_model_int8_digest(m, i8d)) bad |= meta_hex(tr, "int8_weights_sha256", i8d);
    bad |= meta_ids(tr, "prompt_ids", prompt, np);
    bad |= meta_ids(tr, "teacher_force", force, nf);
    bad |= cis2_trace_meta_set(tr, "mode", rq->greedy_n ? "greedy" : "teacher-force");
    bad |= meta_ids(tr, "token_ids", run->tokens, run->n_tokens);
    bad |= meta_ids(tr, "predicted_ids", run->pred, run->n_pred);
    bad |= cis2_trace_meta_set(tr, "node_order", order);
    bad |= cis2_trace_meta_set(tr, "layers", rq->layers ? rq->layers : "all");
    bad |= cis2_trace_meta_set(tr, "nodes", rq->nodes ? rq->nodes : "all");
    bad |= cis2_trace_meta_set(tr, "hash_only", rq->hash_only ? "1" : "0");
    if (eo->fault) {
        bad |= cis2_trace_meta_set(tr, "fault", eo->fault);
        bad |= cis2_trace_meta_set(tr, "fault_arg", eo->fault_arg ? eo->fault_arg : "");
    }
    if (run->have_witness) bad |= meta_hex(tr, "cis2_ref", run->witness);
    if (rq->hash_only) {
        for (int i = 0; i < tr->n; i++) {
            char k[80], v[120], d[40], h[65];
            snprintf(k, sizeof k, "sha256.%s", tr->t[i].name);
            cis2_trace_dims(&tr->t[i], d, sizeof d);
            cis2_hex(tr->t[i].sha, 32, h);
            snprintf(v, sizeof v, "%s %s", d, h);
            bad |= cis2_trace_meta_set(tr, k, v);
        }
    }
    return bad;
}

int cis2_trace_arm(const cis2_model *m, const cis2_engine_opts *eo, const cis2_trace_req *rq,
                   const int32_t *prompt, int np, const int32_t *force, int nf, cis2_trace *tr,
                   cis2_trace_run *run, char *err)
{
    const cis2_config *c = cis2_model_config(m);
    const char *backend = eo->backend == CIS2_BACKEND_FAST     ? "fast"
                          : eo->backend == CIS2_BACKEND_APPROX ? "approx"
                                                               : "ref";
    memset(run, 0, sizeof *run);
    for (int i = 0; i < np + nf; i++) {
        int32_t t = i < np ? prompt[i] : force[i - np];
        if (t < 0 || t >= c->vocab) {
            snprintf(err, CIS2_ERR_LEN, "%s id %d is outside the vocabulary (vocab_size = %d)",
                     i < np ? "--prompt-ids" : "--teacher-force", t, c->vocab);
            return 1;
        }
    }
    uint8_t *lon = NULL;
    capture cap = { tr, c, NULL, (1u << CIS2_N_NODES) - 1, rq->hash_only, 0 };
    if (rq->layers) {
        if (!(lon = malloc((size_t)c->n_layers))) {
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            return 1;
        }
        if (parse_layers(rq->layers, c->n_layers, lon, err)) {
            free(lon);
            return 1;
        }
        cap.layer_on = lon;
    }
    if (rq->nodes && parse_nodes(rq->nodes, c->qk_norm, &cap.node_mask, err)) {
        free(lon);
        return 1;
    }
    cis2_engine_opts o = *eo;
    o.trace = capture_cb;
    o.trace_ctx = &cap;
    cis2_engine *e;
    char e2[CIS2_ERR_LEN];
    if (cis2_engine_new(&e, m, &o, e2)) {
        snprintf(err, CIS2_ERR_LEN, "backend %s: %s", backend, e2);
        free(lon);
        return 1;
    }
    int rc = do_trace(e, c, prompt, np, force, nf, rq, run, err);
    if (!rc && cap.oom) rc = snprintf(err, CIS2_ERR_LEN, "out of memory capturing the trace") > 0;
    cis2_engine_free(e);
    free(lon);
    if (rc) {
        cis2_trace_run_free(run);
        return 1;
    }
    cis2_trace_sort(tr);
    if (fill_meta(tr, m, backend, eo, rq, prompt, np, force, nf, run)) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        cis2_trace_run_free(run);
        return 1;
    }
    tr->hash_only = rq->hash_only;
    return 0;
}
