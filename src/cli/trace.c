/* The divergence localizer (docs/divergence.md):
 *   cis2 trace   — run the model (teacher-forced or greedy) and write every
 *                  node's values to a safetensors trace;
 *   cis2 diff    — align two traces by name, measure each node, name the
 *                  first divergent node and walk the decision tree;
 *   cis2 compare — trace our engine and diff it against another engine's
 *                  trace, or against our other backend, in one command.
 *
 * Trace format: F32 tensors named p{pos}.embed, p{pos}.L{l}.{node},
 * p{pos}.final_norm, p{pos}.logits (attn_scores/attn_probs are
 * [n_heads, n_ctx], everything else 1-D), plus string __metadata__
 * (format "cis2-trace/1", arm, token ids, artifact hashes, node order).
 * --hash-only files hold no tensors: each captured tensor is a metadata
 * entry "sha256.NAME": "DIMS HEX" (DIMS like "4x5" or "64"; HEX the SHA-256
 * of the tensor's little-endian F32 bytes). */
#include "cli/commands.h"
#include "core/json.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_FORMAT "cis2-trace/1"

static const char *NODES[] = { "embed",      "attn_norm", "q_proj", "k_proj",     "v_proj",
                               "q_norm",     "k_norm",    "q_rope", "k_rope",     "attn_scores",
                               "attn_probs", "attn_out",  "o_proj", "resid_attn", "mlp_norm",
                               "gate",       "up",        "act",    "down",       "resid_mlp",
                               "final_norm", "logits" };
#define N_NODES 22
enum {
    N_EMBED = 0,
    N_ATTN_NORM,
    N_Q_PROJ,
    N_K_PROJ,
    N_V_PROJ,
    N_Q_NORM,
    N_K_NORM,
    N_Q_ROPE,
    N_K_ROPE,
    N_SCORES,
    N_PROBS,
    N_ATTN_OUT,
    N_O_PROJ,
    N_RESID_ATTN,
    N_MLP_NORM,
    N_GATE,
    N_UP,
    N_ACT,
    N_DOWN,
    N_RESID_MLP,
    N_FINAL_NORM,
    N_LOGITS
};

static int node_index(const char *s, size_t len)
{
    for (int i = 0; i < N_NODES; i++)
        if (strlen(NODES[i]) == len && !memcmp(NODES[i], s, len)) return i;
    return -1;
}
static int node_is_global(int k) { return k == N_EMBED || k == N_FINAL_NORM || k == N_LOGITS; }

/* ------------------------------------------------------------ trace model */
typedef struct {
    char *name;
    int pos, layer, node; /* layer -1 for embed/final_norm/logits */
    int ndim;
    int64_t shape[2], n;
    float *v; /* NULL for hash-only entries */
    uint8_t sha[32];
} tentry;

typedef struct {
    const char *path; /* for messages ("(our run)" for in-memory) */
    tentry *t;
    int n, cap;
    char **mk, **mv; /* metadata */
    int nm, mcap;
    int hash_only;
} trace_t;

static void trace_free(trace_t *tr)
{
    for (int i = 0; i < tr->n; i++) {
        free(tr->t[i].name);
        free(tr->t[i].v);
    }
    for (int i = 0; i < tr->nm; i++) {
        free(tr->mk[i]);
        free(tr->mv[i]);
    }
    free(tr->t);
    free(tr->mk);
    free(tr->mv);
    memset(tr, 0, sizeof *tr);
}

static int meta_set(trace_t *tr, const char *k, const char *v)
{
    if (tr->nm == tr->mcap) {
        int c = tr->mcap ? tr->mcap * 2 : 32;
        char **a = realloc(tr->mk, (size_t)c * sizeof *a);
        if (!a) return 1;
        tr->mk = a;
        char **b = realloc(tr->mv, (size_t)c * sizeof *b);
        if (!b) return 1;
        tr->mv = b;
        tr->mcap = c;
    }
    tr->mk[tr->nm] = strdup(k);
    tr->mv[tr->nm] = strdup(v ? v : "");
    if (!tr->mk[tr->nm] || !tr->mv[tr->nm]) {
        free(tr->mk[tr->nm]);
        free(tr->mv[tr->nm]);
        return 1;
    }
    tr->nm++;
    return 0;
}

static const char *meta_get(const trace_t *tr, const char *k)
{
    for (int i = 0; i < tr->nm; i++)
        if (!strcmp(tr->mk[i], k)) return tr->mv[i];
    return NULL;
}

static tentry *trace_add(trace_t *tr)
{
    if (tr->n == tr->cap) {
        int c = tr->cap ? tr->cap * 2 : 256;
        tentry *t = realloc(tr->t, (size_t)c * sizeof *t);
        if (!t) return NULL;
        tr->t = t;
        tr->cap = c;
    }
    tentry *e = &tr->t[tr->n++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Parse "p{pos}.embed" / "p{pos}.L{l}.{node}" / ".final_norm" / ".logits". */
static int parse_digits(const char **p, int *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9')) return 1;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > 100000000) return 1;
        s++;
    }
    *out = (int)v;
    *p = s;
    return 0;
}

static int parse_name(const char *name, int *pos, int *layer, int *node)
{
    const char *p = name;
    if (*p++ != 'p' || parse_digits(&p, pos) || *p++ != '.') return 1;
    *layer = -1;
    if (p[0] == 'L' && p[1] >= '0' && p[1] <= '9') {
        p++;
        if (parse_digits(&p, layer) || *p++ != '.') return 1;
    }
    *node = node_index(p, strlen(p));
    if (*node < 0) return 1;
    if ((*layer < 0) != node_is_global(*node)) return 1;
    return 0;
}

/* Execution order: position, then embed, layers in order, final_norm, logits. */
static int64_t order_key(const tentry *e)
{
    int64_t lk = e->layer >= 0 ? e->layer + 1 : (e->node == N_EMBED ? 0 : 1000000);
    return ((int64_t)e->pos * 1000001 + lk) * 64 + e->node;
}
static int cmp_entry(const void *a, const void *b)
{
    int64_t x = order_key(a), y = order_key(b);
    return x < y ? -1 : x > y;
}

static void dims_str(const tentry *e, char *out, size_t cap)
{
    if (e->ndim == 2)
        snprintf(out, cap, "%lldx%lld", (long long)e->shape[0], (long long)e->shape[1]);
    else snprintf(out, cap, "%lld", (long long)e->shape[0]);
}

/* ------------------------------------------------------------- capture */
typedef struct {
    trace_t *tr;
    const cis2_config *cfg;
    const uint8_t *layer_on; /* NULL = all */
    unsigned node_mask;      /* bit per NODES index */
    int hash_only, oom;
} capture;

static void capture_cb(void *ctx, int pos, int layer, const char *node, const float *v, size_t n)
{
    capture *c = ctx;
    int k = node_index(node, strlen(node));
    if (c->oom || k < 0 || !(c->node_mask & (1u << k))) return;
    if (layer >= 0 && c->layer_on && !c->layer_on[layer]) return;
    char name[64];
    if (layer >= 0) snprintf(name, sizeof name, "p%d.L%d.%s", pos, layer, node);
    else snprintf(name, sizeof name, "p%d.%s", pos, node);
    tentry *e = trace_add(c->tr);
    if (!e) {
        c->oom = 1;
        return;
    }
    e->name = strdup(name);
    e->pos = pos;
    e->layer = layer;
    e->node = k;
    e->n = (int64_t)n;
    if ((k == N_SCORES || k == N_PROBS) && c->cfg->n_heads > 0 &&
        n % (size_t)c->cfg->n_heads == 0) {
        e->ndim = 2;
        e->shape[0] = c->cfg->n_heads;
        e->shape[1] = (int64_t)n / c->cfg->n_heads;
    } else {
        e->ndim = 1;
        e->shape[0] = (int64_t)n;
    }
    if (c->hash_only) {
        cis2_sha256_buf(v, n * sizeof(float), e->sha); /* little-endian host (decode.c checks) */
    } else {
        e->v = malloc(n * sizeof(float) + 1);
        if (e->v) memcpy(e->v, v, n * sizeof(float));
    }
    if (!e->name || (!c->hash_only && !e->v)) c->oom = 1;
}

/* ------------------------------------------------------------- writer */
typedef struct {
    char *b;
    size_t n, cap;
    int oom;
} sbuf;
static void sb_put(sbuf *s, const void *p, size_t n)
{
    if (s->oom) return;
    if (s->n + n + 1 > s->cap) {
        size_t c = s->cap ? s->cap : 4096;
        while (c < s->n + n + 1) c *= 2;
        char *q = realloc(s->b, c);
        if (!q) {
            s->oom = 1;
            return;
        }
        s->b = q;
        s->cap = c;
    }
    memcpy(s->b + s->n, p, n);
    s->n += n;
    s->b[s->n] = 0;
}
static void sb_str(sbuf *s, const char *str) { sb_put(s, str, strlen(str)); }
static void sb_json(sbuf *s, const char *str)
{
    sb_str(s, "\"");
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        char tmp[8];
        if (*p == '"' || *p == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)*p;
            sb_put(s, tmp, 2);
        } else if (*p < 0x20 || *p == 0x7F) {
            snprintf(tmp, sizeof tmp, "\\u%04x", *p);
            sb_str(s, tmp);
        } else sb_put(s, p, 1);
    }
    sb_str(s, "\"");
}

static int trace_write(const trace_t *tr, const char *path, char *err)
{
    sbuf h = { 0 };
    sb_str(&h, "{\"__metadata__\":{");
    for (int i = 0; i < tr->nm; i++) {
        if (i) sb_str(&h, ",");
        sb_json(&h, tr->mk[i]);
        sb_str(&h, ":");
        sb_json(&h, tr->mv[i]);
    }
    sb_str(&h, "}");
    uint64_t off = 0;
    for (int i = 0; i < tr->n; i++) {
        const tentry *e = &tr->t[i];
        if (!e->v) continue;
        char tmp[160];
        sb_str(&h, ",");
        sb_json(&h, e->name);
        if (e->ndim == 2)
            snprintf(tmp, sizeof tmp,
                     ":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%llu,%llu]}",
                     (long long)e->shape[0], (long long)e->shape[1], (unsigned long long)off,
                     (unsigned long long)(off + (uint64_t)e->n * 4));
        else
            snprintf(tmp, sizeof tmp,
                     ":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%llu,%llu]}",
                     (long long)e->shape[0], (unsigned long long)off,
                     (unsigned long long)(off + (uint64_t)e->n * 4));
        sb_str(&h, tmp);
        off += (uint64_t)e->n * 4;
    }
    sb_str(&h, "}");
    while (h.n % 8) sb_str(&h, " "); /* tensor data 8-byte aligned */
    sbuf f = { 0 };
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    sb_put(&f, len8, 8);
    sb_put(&f, h.b ? h.b : "", h.n);
    for (int i = 0; i < tr->n; i++)
        if (tr->t[i].v) sb_put(&f, tr->t[i].v, (size_t)tr->t[i].n * 4);
    free(h.b);
    if (h.oom || f.oom) {
        free(f.b);
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory building the trace", path);
        return 1;
    }
    int rc = cis2_write_file_atomic(path, f.b, f.n, err);
    free(f.b);
    return rc;
}

/* ------------------------------------------------------------- reader */
static int trace_load(trace_t *tr, const char *path, char *err)
{
    memset(tr, 0, sizeof *tr);
    tr->path = path;
    cis2_safetensors st;
    if (cis2_st_open(&st, path, err)) return 1;
    int rc = 1;
    json_doc d;
    memset(&d, 0, sizeof d);
    if (st.metadata_json) {
        char jerr[CIS2_ERR_LEN];
        if (json_parse(&d, st.metadata_json, strlen(st.metadata_json), path, jerr)) {
            snprintf(err, CIS2_ERR_LEN, "%.400s (in __metadata__)", jerr);
            goto out;
        }
        for (uint32_t k = d.nodes[0].first; k != JSON_NONE; k = d.nodes[d.nodes[k].next].next) {
            char *key = json_str_dup(&d, k, NULL), *val = json_str_dup(&d, d.nodes[k].next, NULL);
            int bad = !key || !val || meta_set(tr, key, val);
            free(key);
            free(val);
            if (bad) {
                snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
                goto out;
            }
        }
    }
    const char *fmt = meta_get(tr, "format");
    if (fmt && strcmp(fmt, TRACE_FORMAT)) {
        snprintf(err, CIS2_ERR_LEN, "%s: __metadata__ format is \"%.60s\", expected \"%s\"", path,
                 fmt, TRACE_FORMAT);
        goto out;
    }
    for (int i = 0; i < st.n; i++) {
        const cis2_st_tensor *s = &st.t[i];
        tentry *e = trace_add(tr);
        if (!e) {
            snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
            goto out;
        }
        e->name = strdup(s->name);
        if (!e->name) {
            snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
            goto out;
        }
        if (parse_name(s->name, &e->pos, &e->layer, &e->node)) {
            snprintf(err, CIS2_ERR_LEN,
                     "%s: tensor \"%.120s\" is not a trace name (p{pos}.embed, p{pos}.L{l}.{node}, "
                     "p{pos}.final_norm, p{pos}.logits)",
                     path, s->name);
            goto out;
        }
        if (s->dtype != CIS2_DT_F32) {
            snprintf(err, CIS2_ERR_LEN, "%s: tensor \"%.120s\" is not F32 (traces hold F32 only)",
                     path, s->name);
            goto out;
        }
        if (s->ndim < 1 || s->ndim > 2 || s->numel < 1) {
            snprintf(err, CIS2_ERR_LEN, "%s: tensor \"%.120s\" must be 1-D or 2-D and non-empty",
                     path, s->name);
            goto out;
        }
        e->ndim = s->ndim;
        e->shape[0] = s->shape[0];
        e->shape[1] = s->ndim == 2 ? s->shape[1] : 0;
        e->n = s->numel;
        e->v = malloc((size_t)s->numel * sizeof(float));
        if (!e->v) {
            snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
            goto out;
        }
        cis2_st_to_f32(s, e->v); /* F32: a plain copy, no alignment assumption */
        cis2_sha256_buf(e->v, (size_t)e->n * 4, e->sha);
    }
    /* hash-only entries */
    for (int i = 0; i < tr->nm; i++) {
        if (strncmp(tr->mk[i], "sha256.", 7)) continue;
        const char *nm = tr->mk[i] + 7, *val = tr->mv[i];
        for (int j = 0; j < tr->n; j++)
            if (!strcmp(tr->t[j].name, nm)) {
                snprintf(err, CIS2_ERR_LEN, "%s: \"%.120s\" is both a tensor and a hash entry",
                         path, nm);
                goto out;
            }
        tentry *e = trace_add(tr);
        if (!e || !(e->name = strdup(nm))) {
            snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
            goto out;
        }
        const char *sp = strchr(val, ' ');
        long long a = 0, b = 0;
        char x = 0;
        int ok = parse_name(nm, &e->pos, &e->layer, &e->node) == 0 && sp && strlen(sp + 1) == 64 &&
                 cis2_unhex32(sp + 1, e->sha) == 0;
        if (ok) {
            int f = sscanf(val, "%lldx%lld%c", &a, &b, &x);
            if (f >= 2 && x == ' ') {
                e->ndim = 2;
                e->shape[0] = a;
                e->shape[1] = b;
            } else if (sscanf(val, "%lld%c", &a, &x) == 2 && x == ' ') {
                e->ndim = 1;
                e->shape[0] = a;
            } else ok = 0;
            ok = ok && a > 0 && a < (1LL << 40) && (e->ndim == 1 || (b > 0 && b < (1LL << 20)));
        }
        if (!ok) {
            snprintf(err, CIS2_ERR_LEN,
                     "%s: bad hash entry \"sha256.%.100s\" (want \"DIMS HEX\" with a trace name)",
                     path, nm);
            goto out;
        }
        e->n = e->ndim == 2 ? a * b : a;
        tr->hash_only = 1;
    }
    if (tr->n == 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: holds no trace tensors", path);
        goto out;
    }
    qsort(tr->t, (size_t)tr->n, sizeof *tr->t, cmp_entry);
    rc = 0;
out:
    json_free(&d);
    cis2_st_close(&st);
    if (rc) trace_free(tr);
    return rc;
}

/* ------------------------------------------------------------ options */
typedef struct {
    const char *model, *prompt_ids, *teacher_force, *out, *arm, *layers, *nodes, *fault, *fault_arg;
    const char *backends[2], *isa, *against, *tol;
    int nb, n, n_set, hash_only, threads, exact, brief;
} topts;

static int parse_topts(const char *cmd, int argc, char **argv, const char *allowed, topts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *name = strcmp(a, "-n") == 0 ? "--n" : strcmp(a, "-o") == 0 ? "--o" : a;
        char key[64];
        snprintf(key, sizeof key, " %s ", name);
        if (a[0] != '-' || strlen(name) > 40 || !strstr(allowed, key))
            return cis2_cli_usage_error(cmd, "unknown option or argument '%s' (see cis2 help)", a);
        if (!strcmp(name, "--hash-only")) {
            o->hash_only = 1;
            continue;
        }
        if (!strcmp(name, "--exact")) {
            o->exact = 1;
            continue;
        }
        if (!strcmp(name, "--brief")) {
            o->brief = 1;
            continue;
        }
        if (i + 1 >= argc) return cis2_cli_usage_error(cmd, "option '%s' needs a value", a);
        const char *v = argv[++i];
        const char **slot = NULL;
        if (!strcmp(name, "--model")) slot = &o->model;
        else if (!strcmp(name, "--prompt-ids")) slot = &o->prompt_ids;
        else if (!strcmp(name, "--teacher-force")) slot = &o->teacher_force;
        else if (!strcmp(name, "--o")) slot = &o->out;
        else if (!strcmp(name, "--arm")) slot = &o->arm;
        else if (!strcmp(name, "--layers")) slot = &o->layers;
        else if (!strcmp(name, "--nodes")) slot = &o->nodes;
        else if (!strcmp(name, "--fault")) slot = &o->fault;
        else if (!strcmp(name, "--fault-arg")) slot = &o->fault_arg;
        else if (!strcmp(name, "--isa")) slot = &o->isa;
        else if (!strcmp(name, "--against")) slot = &o->against;
        else if (!strcmp(name, "--tol")) slot = &o->tol;
        else if (!strcmp(name, "--backend")) {
            if (strcmp(v, "ref") && strcmp(v, "fast"))
                return cis2_cli_usage_error(cmd, "--backend must be ref or fast, got '%s'", v);
            if (o->nb == 2) return cis2_cli_usage_error(cmd, "--backend given more than twice");
            o->backends[o->nb++] = v;
            continue;
        } else if (!strcmp(name, "--threads")) {
            if (cis2_cli_int(v, 1, 1024, &o->threads))
                return cis2_cli_usage_error(
                    cmd, "--threads must be an integer in [1, 1024], got '%s'", v);
            continue;
        } else if (!strcmp(name, "--n")) {
            if (cis2_cli_int(v, 1, 1000000, &o->n))
                return cis2_cli_usage_error(cmd, "-n must be an integer in [1, 1000000], got '%s'",
                                            v);
            o->n_set = 1;
            continue;
        }
        if (slot) {
            if (*slot) return cis2_cli_usage_error(cmd, "option '%s' given twice", a);
            *slot = v;
        }
    }
    return 0;
}

/* "0-2,29" → flags[n_layers]. */
static int parse_layers(const char *s, int n_layers, uint8_t *on, char *err)
{
    memset(on, 0, (size_t)n_layers);
    const char *p = s;
    while (1) {
        int a, b;
        if (parse_digits(&p, &a)) {
            snprintf(err, CIS2_ERR_LEN,
                     "--layers '%.60s': expected a layer number or range like 0-2,29", s);
            return 1;
        }
        b = a;
        if (*p == '-') {
            p++;
            if (parse_digits(&p, &b) || b < a) {
                snprintf(err, CIS2_ERR_LEN, "--layers '%.60s': bad range (want A-B with A <= B)",
                         s);
                return 1;
            }
        }
        if (b >= n_layers) {
            snprintf(err, CIS2_ERR_LEN,
                     "--layers '%.60s': layer %d does not exist (the model has %d layers)", s, b,
                     n_layers);
            return 1;
        }
        for (int i = a; i <= b; i++) on[i] = 1;
        if (*p == 0) return 0;
        if (*p++ != ',') {
            snprintf(err, CIS2_ERR_LEN, "--layers '%.60s': expected ',' or end", s);
            return 1;
        }
    }
}

static int parse_nodes(const char *s, unsigned *mask, char *err)
{
    *mask = 0;
    const char *p = s;
    while (1) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        int k = node_index(p, len);
        if (k < 0) {
            snprintf(err, CIS2_ERR_LEN,
                     "--nodes: unknown node '%.*s' (known: embed, attn_norm, q_proj, ..., "
                     "final_norm, logits; see docs/divergence.md)",
                     (int)(len > 40 ? 40 : len), p);
            return 1;
        }
        *mask |= 1u << k;
        if (!c) return 0;
        p = c + 1;
    }
}

/* ------------------------------------------------------------ tracing */
typedef struct {
    const char *arm, *layers, *nodes;
    int hash_only;
    int greedy_n; /* > 0: cis2_generate (CIS-2 greedy; prints CIS2_REF) */
    int extend_n; /* > 0: token-at-a-time greedy extension (compare) */
} trace_req;

typedef struct {
    int32_t *tokens;
    int n_tokens; /* every token fed */
    int32_t *pred;
    int n_pred; /* argmax at each position with logits */
    uint8_t witness[32];
    int have_witness;
} trace_run;

static void hexmeta(trace_t *tr, const char *k, const uint8_t d[32])
{
    char h[65];
    cis2_hex(d, 32, h);
    meta_set(tr, k, h);
}

/* Run `prompt ++ force` (teacher-forced, one token per forward call so every
 * position has logits) or greedy -n, capturing into tr. */
static int do_trace(const char *cmd, cis2_model *m, cis2_engine *e, const int32_t *prompt, int np,
                    const int32_t *force, int nf, const trace_req *rq, trace_run *run)
{
    char err[CIS2_ERR_LEN];
    const cis2_config *c = &m->cfg;
    memset(run, 0, sizeof *run);
    int rc = 2;
    float *logits = NULL;
    cis2_result r;
    memset(&r, 0, sizeof r);
    int total =
        np + (rq->greedy_n ? rq->greedy_n - 1 : nf + (rq->extend_n > 0 ? rq->extend_n - 1 : 0));
    run->tokens = malloc((size_t)(total > 0 ? total : 1) * sizeof(int32_t));
    run->pred = malloc((size_t)(total > 0 ? total : 1) * sizeof(int32_t));
    logits = malloc((size_t)c->vocab * sizeof(float));
    if (!run->tokens || !run->pred || !logits) {
        cis2_cli_usage_error(cmd, "out of memory");
        goto out;
    }
    if ((int64_t)total > c->max_pos) {
        cis2_cli_usage_error(cmd, "%d positions exceed max_position_embeddings = %d", total,
                             c->max_pos);
        goto out;
    }
    if (rq->greedy_n) {
        cis2_gen_opts g = { rq->greedy_n, 0, NULL, NULL, NULL, 0 };
        if (cis2_generate(e, prompt, np, &g, &r, err)) {
            cis2_cli_usage_error(cmd, "%s", err);
            goto out;
        }
        memcpy(run->tokens, prompt, (size_t)np * sizeof(int32_t));
        memcpy(run->tokens + np, r.gen, (size_t)(r.n_gen - 1) * sizeof(int32_t));
        run->n_tokens = np + r.n_gen - 1;
        memcpy(run->pred, r.gen, (size_t)r.n_gen * sizeof(int32_t));
        run->n_pred = r.n_gen;
        memcpy(run->witness, r.witness, 32);
        run->have_witness = 1;
    } else {
        for (int i = 0; i < total; i++) {
            int32_t tok;
            if (i < np) tok = prompt[i];
            else if (i < np + nf) tok = force[i - np];
            else tok = run->pred[i - 1]; /* greedy extension */
            run->tokens[i] = tok;
            if (cis2_engine_forward(e, &tok, 1, i, logits, err)) {
                cis2_cli_usage_error(cmd, "%s", err);
                goto out;
            }
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

static char *node_order_for(const cis2_config *c)
{
    static char buf[512];
    buf[0] = 0;
    for (int k = 0; k < N_NODES; k++) {
        if ((k == N_Q_NORM || k == N_K_NORM) && !c->qk_norm) continue;
        if (buf[0]) strcat(buf, ",");
        strcat(buf, NODES[k]);
    }
    return buf;
}

static void fill_meta(trace_t *tr, const cis2_model *m, const char *backend, const char *arm,
                      const trace_req *rq, const int32_t *prompt, int np, const int32_t *force,
                      int nf, const trace_run *run, const char *fault, const char *fault_arg)
{
    const cis2_config *c = &m->cfg;
    char armbuf[80], num[32];
    snprintf(armbuf, sizeof armbuf, "cis2-%s", backend);
    meta_set(tr, "format", TRACE_FORMAT);
    meta_set(tr, "arm", arm ? arm : armbuf);
    meta_set(tr, "engine", "cis2 spec " CIS2_SPEC_VERSION);
    meta_set(tr, "backend", backend);
    meta_set(tr, "arch",
             c->arch == CIS2_ARCH_LLAMA   ? "llama"
             : c->arch == CIS2_ARCH_QWEN2 ? "qwen2"
                                          : "qwen3");
    snprintf(num, sizeof num, "%d", c->n_layers);
    meta_set(tr, "n_layers", num);
    hexmeta(tr, "weights_sha256", m->dg.weights_sha256);
    hexmeta(tr, "config_sha256", m->dg.config_sha256);
    hexmeta(tr, "tokenizer_sha256", m->dg.tokenizer_sha256);
    hexmeta(tr, "table_digest", m->dg.table_digest);
    hexmeta(tr, "inv_freq_table_digest", m->dg.inv_freq_digest);
    char *s = cis2_format_ids(prompt, np);
    meta_set(tr, "prompt_ids", s ? s : "");
    free(s);
    s = cis2_format_ids(force, nf);
    meta_set(tr, "teacher_force", s ? s : "");
    free(s);
    meta_set(tr, "mode", rq->greedy_n ? "greedy" : "teacher-force");
    s = cis2_format_ids(run->tokens, run->n_tokens);
    meta_set(tr, "token_ids", s ? s : "");
    free(s);
    s = cis2_format_ids(run->pred, run->n_pred);
    meta_set(tr, "predicted_ids", s ? s : "");
    free(s);
    meta_set(tr, "node_order", node_order_for(c));
    meta_set(tr, "layers", rq->layers ? rq->layers : "all");
    meta_set(tr, "nodes", rq->nodes ? rq->nodes : "all");
    meta_set(tr, "hash_only", rq->hash_only ? "1" : "0");
    if (fault) {
        meta_set(tr, "fault", fault);
        meta_set(tr, "fault_arg", fault_arg ? fault_arg : "");
    }
    if (run->have_witness) hexmeta(tr, "cis2_ref", run->witness);
    if (rq->hash_only) {
        for (int i = 0; i < tr->n; i++) {
            char k[80], v[120], d[40], h[65];
            snprintf(k, sizeof k, "sha256.%s", tr->t[i].name);
            dims_str(&tr->t[i], d, sizeof d);
            cis2_hex(tr->t[i].sha, 32, h);
            snprintf(v, sizeof v, "%s %s", d, h);
            meta_set(tr, k, v);
        }
    }
}

/* ------------------------------------------------------------- diff */
typedef struct {
    double max_rel, mean_rel, min_cos;
    int top1;
} tol_row;
typedef struct {
    tol_row row[N_NODES];
} tol_table;

/* The default table (docs/divergence.md): for fp32 engines that are not
 * CIS-2 (different summation order, libm exp/sin/rsqrt, FMA). max_rel is
 * max|A-B| / max|A|; mean_rel is the mean of |A-B|/|A| over |A| >= 1e-3·max|A|. */
static void tol_defaults(tol_table *t)
{
    for (int k = 0; k < N_NODES; k++) t->row[k] = (tol_row){ 1e-4, 2e-3, 0.99999, 0 };
    t->row[N_SCORES] = (tol_row){ 5e-4, 2e-3, 0.99999, 0 };
    t->row[N_PROBS] = (tol_row){ 5e-4, 2e-3, 0.99999, 0 };
    t->row[N_LOGITS] = (tol_row){ 5e-4, 2e-3, 0.99999, 1 };
}

static int tol_load(tol_table *t, const char *path, char *err)
{
    char *text;
    size_t len;
    if (cis2_read_file(path, &text, &len, err)) return 1;
    int line = 0, rc = 1;
    char *save = NULL;
    for (char *ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        line++;
        char *hash = strchr(ln, '#');
        if (hash) *hash = 0;
        char *s2 = NULL, *tok = strtok_r(ln, " \t\r", &s2);
        if (!tok) continue;
        int k = -1;
        if (strcmp(tok, "*") && (k = node_index(tok, strlen(tok))) < 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: unknown node '%.40s' (a node name or *)",
                     path, line, tok);
            goto out;
        }
        int nkv = 0;
        for (char *kv = strtok_r(NULL, " \t\r", &s2); kv; kv = strtok_r(NULL, " \t\r", &s2)) {
            char *eq = strchr(kv, '=');
            char *end = NULL;
            double v = eq ? strtod(eq + 1, &end) : 0;
            if (!eq || !end || end == eq + 1 || *end || !(v >= 0) || v > 1e30) {
                snprintf(err, CIS2_ERR_LEN, "%s: line %d: expected key=number, got '%.40s'", path,
                         line, kv);
                goto out;
            }
            *eq = 0;
            for (int j = (k < 0 ? 0 : k); j < (k < 0 ? N_NODES : k + 1); j++) {
                tol_row *r = &t->row[j];
                if (!strcmp(kv, "max_rel")) r->max_rel = v;
                else if (!strcmp(kv, "mean_rel")) r->mean_rel = v;
                else if (!strcmp(kv, "min_cos")) r->min_cos = v;
                else if (!strcmp(kv, "top1") && (v == 0 || v == 1)) r->top1 = (int)v;
                else {
                    snprintf(
                        err, CIS2_ERR_LEN,
                        "%s: line %d: unknown key '%.30s' (max_rel, mean_rel, min_cos, top1=0|1)",
                        path, line, kv);
                    goto out;
                }
            }
            nkv++;
        }
        if (!nkv) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: no key=value after '%.40s'", path, line, tok);
            goto out;
        }
    }
    rc = 0;
out:
    free(text);
    return rc;
}

typedef struct {
    double max_abs, mean_rel, cos, max_a;
    uint64_t max_ulp;
    int nan_ulp; /* a NaN differs: ULP distance undefined */
    int64_t ndiff, first, n_ftz;
} metrics;

static int64_t ord32(uint32_t u)
{
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7FFFFFFFu) : (int64_t)u;
}
static int is_nan32(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }
static int is_inf32(uint32_t u) { return (u & 0x7FFFFFFFu) == 0x7F800000u; }

static void measure(const float *a, const float *b, int64_t n, metrics *mt)
{
    memset(mt, 0, sizeof *mt);
    mt->first = -1;
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = a[i];
        if (!is_nan32(cis2_f2u(a[i])) && !is_inf32(cis2_f2u(a[i])) && fabs(x) > mt->max_a)
            mt->max_a = fabs(x);
    }
    double floor_ = 1e-3 * mt->max_a;
    double rel_sum = 0;
    int64_t rel_n = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t ua = cis2_f2u(a[i]), ub = cis2_f2u(b[i]);
        if (ua != ub) {
            mt->ndiff++;
            if (mt->first < 0) mt->first = i;
            int za = (ua & 0x7FFFFFFFu) == 0, zb = (ub & 0x7FFFFFFFu) == 0;
            if ((za && cis2_f32_is_subnormal(ub)) || (zb && cis2_f32_is_subnormal(ua))) mt->n_ftz++;
            if (is_nan32(ua) || is_nan32(ub)) {
                mt->nan_ulp = 1;
                mt->max_abs = INFINITY;
                continue;
            }
            int64_t d = ord32(ua) - ord32(ub);
            uint64_t ad = (uint64_t)(d < 0 ? -d : d);
            if (ad > mt->max_ulp) mt->max_ulp = ad;
        }
        double x = a[i], y = b[i];
        if (is_nan32(ua) || is_nan32(ub)) continue;
        double e = fabs(x - y);
        if (isinf(x) || isinf(y)) e = (ua == ub) ? 0 : INFINITY;
        if (e > mt->max_abs) mt->max_abs = e;
        if (fabs(x) >= floor_ && fabs(x) > 0 && !isinf(x)) {
            rel_sum += e / fabs(x);
            rel_n++;
        }
        if (!isinf(x) && !isinf(y)) {
            dot += x * y;
            na += x * x;
            nb += y * y;
        }
    }
    mt->mean_rel = rel_n ? rel_sum / (double)rel_n : 0;
    if (na == 0 && nb == 0) mt->cos = 1;
    else if (na == 0 || nb == 0) mt->cos = 0;
    else mt->cos = dot / (sqrt(na) * sqrt(nb));
    if (mt->nan_ulp) mt->cos = 0;
}

/* top-5 ids, strict > so the first occurrence wins (§11.2). */
static void top5(const float *v, int64_t n, int64_t ids[5])
{
    for (int j = 0; j < 5; j++) ids[j] = -1;
    for (int64_t i = 0; i < n; i++) {
        if (is_nan32(cis2_f2u(v[i]))) continue;
        for (int j = 0; j < 5; j++) {
            if (ids[j] < 0 || v[i] > v[ids[j]]) {
                for (int q = 4; q > j; q--) ids[q] = ids[q - 1];
                ids[j] = i;
                break;
            }
        }
    }
}

static const char *branch_names[] = { "embedding", "linear-projection", "normalization-attention",
                                      "autoregressive-state" };

static int node_branch(int k)
{
    if (k == N_EMBED) return 0;
    if (k == N_Q_PROJ || k == N_K_PROJ || k == N_V_PROJ || k == N_O_PROJ || k == N_GATE ||
        k == N_UP || k == N_DOWN || k == N_LOGITS)
        return 1;
    return 2;
}

typedef struct {
    const tentry *a, *b;
    metrics mt;
    int have_mt, shape_bad;
} first_div;

/* Walk the decision tree for the first divergent node; prints and returns
 * the branch index. */
static int decide(const first_div *f, int p0_clean, int p0_seen)
{
    const tentry *e = f->a;
    const metrics *mt = &f->mt;
    int k = e->node, br;
    int autoreg = e->pos > 0 && p0_seen && p0_clean && k != N_EMBED;
    if (k == N_EMBED) br = 0;
    else if (autoreg) br = 3;
    else br = node_branch(k);
    char cause[320];
    double rel = mt->max_a > 0 ? mt->max_abs / mt->max_a : INFINITY;
    int isolated = f->have_mt && mt->ndiff > 0 && mt->ndiff * 10 <= f->a->n;
    int rounding = f->have_mt && rel < 1e-4 && !mt->nan_ulp;
    char rows[96] = "";
    if (f->have_mt)
        snprintf(rows, sizeof rows, " (%lld of %lld elements differ, first at %lld)",
                 (long long)mt->ndiff, (long long)e->n, (long long)mt->first);
    if (f->shape_bad) {
        snprintf(cause, sizeof cause,
                 "shapes differ: a different model configuration, head count or context length");
    } else if (f->have_mt && mt->ndiff && mt->n_ftz == mt->ndiff) {
        snprintf(cause, sizeof cause,
                 "FTZ/DAZ: every differing element is a subnormal on one side and zero on the "
                 "other (denormals not flushed on one side)");
    } else if (br == 0) {
        snprintf(cause, sizeof cause,
                 "embedding lookup: wrong row for the token, dtype widening, or a "
                 "corrupted/aliased (tied) embedding%s",
                 rows);
    } else if (br == 3) {
        if (k == N_Q_ROPE || k == N_K_ROPE)
            snprintf(cause, sizeof cause,
                     "RoPE position: position 0 matches and the projections before RoPE match at "
                     "position %d, but the rotation differs: decode positions are off (position "
                     "index bug)",
                     e->pos);
        else if (k == N_SCORES || k == N_PROBS || k == N_ATTN_OUT)
            snprintf(cause, sizeof cause,
                     "KV cache: q_rope/k_rope match at position %d but attention over the cached "
                     "positions differs: a stale, misplaced or overwritten cache slot",
                     e->pos);
        else
            snprintf(cause, sizeof cause,
                     "state carried between positions (position 0 matches; first difference in %s "
                     "at position %d)",
                     NODES[k], e->pos);
    } else if (br == 1) {
        if (isolated)
            snprintf(cause, sizeof cause,
                     "isolated outputs differ%s: a corrupted or misloaded weight row, or a "
                     "row-index bug",
                     rows);
        else if (rounding)
            snprintf(cause, sizeof cause,
                     "rounding-level differences in most outputs (max %llu ulp, max_rel %.2e): "
                     "accumulation order or FMA contraction in the matvec",
                     (unsigned long long)mt->max_ulp, rel);
        else if (f->have_mt)
            snprintf(cause, sizeof cause,
                     "large differences across outputs%s: wrong weights, layout/transposition%s",
                     rows, k <= N_V_PROJ ? ", or the q/k/v bias" : "");
        else
            snprintf(cause, sizeof cause,
                     "hashes differ (hash-only trace: no per-element detail): accumulation order, "
                     "FMA, layout or weights");
    } else {
        const char *what =
            (k == N_ATTN_NORM || k == N_MLP_NORM || k == N_FINAL_NORM)
                ? "RMSNorm: operation order ((x*inv)*w vs x*(inv*w)), rsqrt, sum order, or eps"
            : (k == N_Q_NORM || k == N_K_NORM)
                ? "Qwen3 q/k-norm: per head over head_dim, after the projection and before RoPE"
            : (k == N_Q_ROPE || k == N_K_ROPE)
                ? "RoPE rotation itself (rotate-half pairing, cos/sin table)"
            : k == N_SCORES
                ? "attention scores: dot order, the 1/sqrt(head_dim) scale, or causal masking"
            : k == N_PROBS
                ? "softmax: max subtraction, exp, sum order, divide vs multiply, or masking"
            : k == N_ATTN_OUT ? "attention output: P·V accumulation order or the GQA head mapping"
            : k == N_ACT      ? "activation: SiLU or the SwiGLU product"
                              : "residual add";
        snprintf(cause, sizeof cause, "%s%s%s", what, rounding ? " (rounding-level)" : "", rows);
    }
    printf("decision tree:\n");
    printf("  1. embedding/lookup ........... %s\n", br == 0 ? "DIVERGES here" : "pass");
    printf("  2. linear projections ......... %s\n",
           br == 0   ? "-"
           : br == 1 ? "DIVERGES here (accumulation order, FMA, layout)"
                     : "pass");
    printf("  3. normalization/attention .... %s\n",
           br < 2    ? "-"
           : br == 2 ? "DIVERGES here (q/k-norm, softmax, masking, FTZ)"
                     : "pass");
    printf("  4. autoregressive state ....... %s\n",
           br == 3 ? "DIVERGES: position 0 matches, divergence starts at a later position (KV "
                     "cache or RoPE position)"
           : br == 0 || br == 1 || br == 2
               ? (e->pos == 0 ? "- (diverges already at position 0)"
                              : "- (position 0 not clean or not traced)")
               : "-");
    printf("branch=%s\n", branch_names[br]);
    printf("cause=%s\n", cause);
    return br;
}

static void fmt_metric_line(const tentry *a, const tentry *b, const metrics *mt, int ok)
{
    char ulp[32];
    if (mt->nan_ulp) snprintf(ulp, sizeof ulp, "nan");
    else snprintf(ulp, sizeof ulp, "%llu", (unsigned long long)mt->max_ulp);
    double rel = mt->max_a > 0 ? mt->max_abs / mt->max_a : (mt->max_abs > 0 ? INFINITY : 0);
    printf("%-22s n=%-6lld max_abs=%.3e max_rel=%.3e mean_rel=%.3e cos=%.9f max_ulp=%s ndiff=%lld "
           "first=%lld %s\n",
           a->name, (long long)a->n, mt->max_abs, rel, mt->mean_rel, mt->cos, ulp,
           (long long)mt->ndiff, (long long)mt->first, ok ? "ok" : "DIVERGED");
    if (a->node == N_LOGITS) {
        int64_t ta[5], tb[5];
        top5(a->v, a->n, ta);
        top5(b->v, b->n, tb);
        printf("  top5 A=[%lld,%lld,%lld,%lld,%lld] B=[%lld,%lld,%lld,%lld,%lld]", (long long)ta[0],
               (long long)ta[1], (long long)ta[2], (long long)ta[3], (long long)ta[4],
               (long long)tb[0], (long long)tb[1], (long long)tb[2], (long long)tb[3],
               (long long)tb[4]);
        if (ta[1] >= 0 && tb[1] >= 0)
            printf(" margin A=%.6g B=%.6g", (double)a->v[ta[0]] - (double)a->v[ta[1]],
                   (double)b->v[tb[0]] - (double)b->v[tb[1]]);
        printf(" top1 %s\n", ta[0] == tb[0] ? "same" : "DIFFERS");
    }
}

/* The core of diff and compare. Returns 0 within bounds, 1 diverged. */
static int diff_traces(const trace_t *A, const trace_t *B, int exact, const tol_table *tol,
                       int brief, int only_b_names)
{
    const char *aa = meta_get(A, "arm"), *ba = meta_get(B, "arm");
    int hash = A->hash_only || B->hash_only;
    if (hash && !exact) exact = 1;
    printf("A: %s (arm %s)\nB: %s (arm %s)\n", A->path, aa ? aa : "?", B->path, ba ? ba : "?");
    printf("mode: %s\n", exact
                             ? (hash ? "exact (a hash-only trace can only be compared bit for bit)"
                                     : "exact (bit for bit)")
                             : "tolerance (max_rel, mean_rel, min_cos; logits top1)");
    int diverged = 0, structural = 0;
    static const char *must_match[] = { "token_ids", "prompt_ids" };
    for (int i = 0; i < 2; i++) {
        const char *x = meta_get(A, must_match[i]), *y = meta_get(B, must_match[i]);
        if (x && y && strcmp(x, y)) {
            printf("MISMATCH %s: A=%s B=%s (the traces fed different tokens)\n", must_match[i], x,
                   y);
            diverged = 1;
        }
    }
    static const char *notes[] = { "weights_sha256", "config_sha256" };
    for (int i = 0; i < 2; i++) {
        const char *x = meta_get(A, notes[i]), *y = meta_get(B, notes[i]);
        if (x && y && strcmp(x, y))
            printf("note: %s differs (A %.12s…, B %.12s…): different checkpoints\n", notes[i], x,
                   y);
    }
    first_div f;
    memset(&f, 0, sizeof f);
    int have_first = 0, p0_seen = 0, p0_clean = 1, compared = 0, skipped_a = 0;
    int i = 0, j = 0;
    while (i < A->n || j < B->n) {
        const tentry *a = i < A->n ? &A->t[i] : NULL, *b = j < B->n ? &B->t[j] : NULL;
        int c = !a ? 1 : !b ? -1 : cmp_entry(a, b);
        if (c < 0) {
            i++;
            if (only_b_names) {
                skipped_a++;
                continue;
            }
            printf("%-22s ONLY IN A (%s)\n", a->name, A->path);
            structural++;
            continue;
        }
        if (c > 0) {
            j++;
            printf("%-22s ONLY IN B (%s)\n", b->name, B->path);
            structural++;
            continue;
        }
        i++;
        j++;
        compared++;
        int ok;
        metrics mt;
        memset(&mt, 0, sizeof mt);
        int have_mt = 0, shape_bad = 0;
        if (a->ndim != b->ndim || a->shape[0] != b->shape[0] ||
            (a->ndim == 2 && a->shape[1] != b->shape[1])) {
            char da[40], db[40];
            dims_str(a, da, sizeof da);
            dims_str(b, db, sizeof db);
            printf("%-22s SHAPE MISMATCH A=[%s] B=[%s] DIVERGED\n", a->name, da, db);
            ok = 0;
            shape_bad = 1;
        } else if (!a->v || !b->v) {
            ok = memcmp(a->sha, b->sha, 32) == 0;
            printf("%-22s n=%-6lld sha256 %s %s\n", a->name, (long long)a->n,
                   ok ? "equal" : "differs", ok ? "ok" : "DIVERGED");
        } else {
            measure(a->v, b->v, a->n, &mt);
            have_mt = 1;
            if (exact) ok = mt.ndiff == 0;
            else {
                const tol_row *r = &tol->row[a->node];
                double rel = mt.max_a > 0 ? mt.max_abs / mt.max_a : (mt.max_abs > 0 ? INFINITY : 0);
                ok = !mt.nan_ulp && rel <= r->max_rel && mt.mean_rel <= r->mean_rel &&
                     mt.cos >= r->min_cos;
                if (r->top1 && a->node == N_LOGITS) {
                    int64_t ta[5], tb[5];
                    top5(a->v, a->n, ta);
                    top5(b->v, b->n, tb);
                    if (ta[0] != tb[0]) ok = 0;
                }
            }
            if (!brief || !ok) fmt_metric_line(a, b, &mt, ok);
        }
        if (a->pos == 0) {
            p0_seen = 1;
            if (!ok) p0_clean = 0;
        }
        if (!ok) {
            diverged = 1;
            if (!have_first) {
                have_first = 1;
                f.a = a;
                f.b = b;
                f.mt = mt;
                f.have_mt = have_mt;
                f.shape_bad = shape_bad;
            }
        }
    }
    if (skipped_a)
        printf("note: %d tensors of A have no counterpart in B (B captured fewer positions, layers "
               "or nodes) and were not compared\n",
               skipped_a);
    printf("compared %d tensors", compared);
    if (structural) printf("; %d names present on one side only", structural);
    printf("\n");
    if (structural) diverged = 1;
    if (have_first) {
        char lay[32] = "";
        if (f.a->layer >= 0) snprintf(lay, sizeof lay, "layer %d, ", f.a->layer);
        printf("first_divergence=%s (position %d, %snode %s)\n", f.a->name, f.a->pos, lay,
               NODES[f.a->node]);
        /* the position-0 verdict needs every position-0 tensor, not just those before the first
         * divergence */
        decide(&f, p0_clean, p0_seen);
    } else if (structural) {
        printf("first_divergence=none among the compared tensors, but the traces hold different "
               "names\n");
    } else if (diverged) {
        printf("first_divergence=none in the tensors (inputs differ; see MISMATCH above)\n");
    } else {
        printf("first_divergence=none\n");
    }
    printf("verdict=%s\n", diverged ? "DIVERGED" : exact ? "IDENTICAL" : "WITHIN-TOLERANCE");
    return diverged;
}

int cis2_cmd_diff(int argc, char **argv)
{
    const char *pa = NULL, *pb = NULL, *tolp = NULL;
    int exact = 0, brief = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--exact")) exact = 1;
        else if (!strcmp(a, "--brief")) brief = 1;
        else if (!strcmp(a, "--tol")) {
            if (i + 1 >= argc) return cis2_cli_usage_error("diff", "option '--tol' needs a value");
            if (tolp) return cis2_cli_usage_error("diff", "option '--tol' given twice");
            tolp = argv[++i];
        } else if (a[0] == '-' && a[1])
            return cis2_cli_usage_error(
                "diff",
                "unknown option '%s' (usage: cis2 diff A B [--exact | --tol FILE] [--brief])", a);
        else if (!pa) pa = a;
        else if (!pb) pb = a;
        else
            return cis2_cli_usage_error(
                "diff", "unexpected argument '%s' (usage: cis2 diff A B [--exact | --tol FILE])",
                a);
    }
    if (!pa || !pb)
        return cis2_cli_usage_error("diff",
                                    "usage: cis2 diff A B [--exact | --tol FILE] [--brief]");
    if (exact && tolp) return cis2_cli_usage_error("diff", "--exact and --tol exclude each other");
    char err[CIS2_ERR_LEN];
    tol_table tol;
    tol_defaults(&tol);
    if (tolp && tol_load(&tol, tolp, err)) return cis2_cli_usage_error("diff", "%s", err);
    trace_t A, B;
    if (trace_load(&A, pa, err)) return cis2_cli_usage_error("diff", "%s", err);
    if (trace_load(&B, pb, err)) {
        trace_free(&A);
        return cis2_cli_usage_error("diff", "%s", err);
    }
    int rc = diff_traces(&A, &B, exact, &tol, brief, 0);
    trace_free(&A);
    trace_free(&B);
    return rc;
}

/* ------------------------------------------------------------- trace cmd */
static int open_model(const char *cmd, const char *dir, cis2_model *m)
{
    char err[CIS2_ERR_LEN];
    if (cis2_cli_fp_ready(cmd)) return 1;
    if (cis2_model_load(m, dir, NULL, err)) {
        cis2_cli_usage_error(cmd, "%s", err);
        return 1;
    }
    for (int i = 0; i < m->n_warnings; i++)
        fprintf(stderr, "cis2 %s: warning: %s\n", cmd, m->warnings[i]);
    return 0;
}

static int new_engine(const char *cmd, cis2_model *m, const char *backend, const topts *o,
                      capture *cap, cis2_engine **e)
{
    char err[CIS2_ERR_LEN];
    cis2_engine_opts eo;
    if (cis2_cli_engine_opts(cmd, backend, o->isa, o->threads, &eo)) return 1;
    eo.fault = o->fault;
    eo.fault_arg = o->fault_arg;
    eo.trace = capture_cb;
    eo.trace_ctx = cap;
    if (cis2_engine_new(e, m, &eo, err)) {
        cis2_cli_usage_error(cmd, "backend %s: %s", backend, err);
        return 1;
    }
    return 0;
}

/* Sets up the capture filter and runs one traced arm. */
static int trace_arm(const char *cmd, cis2_model *m, const char *backend, const topts *o,
                     const trace_req *rq, const int32_t *prompt, int np, const int32_t *force,
                     int nf, trace_t *tr, trace_run *run)
{
    char err[CIS2_ERR_LEN];
    const cis2_config *c = &m->cfg;
    uint8_t *lon = NULL;
    capture cap = { tr, c, NULL, (1u << N_NODES) - 1, rq->hash_only, 0 };
    if (rq->layers) {
        lon = malloc((size_t)c->n_layers);
        if (!lon) return cis2_cli_usage_error(cmd, "out of memory");
        if (parse_layers(rq->layers, c->n_layers, lon, err)) {
            free(lon);
            return cis2_cli_usage_error(cmd, "%s", err);
        }
        cap.layer_on = lon;
    }
    if (rq->nodes && parse_nodes(rq->nodes, &cap.node_mask, err)) {
        free(lon);
        return cis2_cli_usage_error(cmd, "%s", err);
    }
    cis2_engine *e;
    if (new_engine(cmd, m, backend, o, &cap, &e)) {
        free(lon);
        return 2;
    }
    trace_req r2 = *rq;
    r2.layers = NULL; /* already applied */
    r2.nodes = NULL;
    int rc = do_trace(cmd, m, e, prompt, np, force, nf, &r2, run);
    if (!rc && cap.oom) rc = cis2_cli_usage_error(cmd, "out of memory capturing the trace");
    cis2_engine_free(e);
    free(lon);
    if (rc) return rc;
    qsort(tr->t, (size_t)tr->n, sizeof *tr->t, cmp_entry);
    fill_meta(tr, m, backend, rq->arm, rq, prompt, np, force, nf, run, o->fault, o->fault_arg);
    tr->hash_only = rq->hash_only;
    return 0;
}

int cis2_cmd_trace(int argc, char **argv)
{
    topts o;
    if (parse_topts("trace", argc, argv,
                    " --model --prompt-ids --teacher-force --n --o --arm --layers --nodes "
                    "--hash-only --backend --isa"
                    " --threads --fault --fault-arg ",
                    &o))
        return 2;
    if (!o.model) return cis2_cli_usage_error("trace", "--model DIR is required");
    if (!o.prompt_ids) return cis2_cli_usage_error("trace", "--prompt-ids IDS is required");
    if (!o.out) return cis2_cli_usage_error("trace", "-o FILE is required");
    if (o.teacher_force && o.n_set)
        return cis2_cli_usage_error("trace", "--teacher-force and -n exclude each other");
    if (o.nb > 1) return cis2_cli_usage_error("trace", "give one --backend");
    char err[CIS2_ERR_LEN];
    int32_t *prompt = NULL, *force = NULL;
    int np = 0, nf = 0;
    if (cis2_parse_ids(o.prompt_ids, &prompt, &np, err))
        return cis2_cli_usage_error("trace", "--prompt-ids: %s", err);
    if (o.teacher_force && cis2_parse_ids(o.teacher_force, &force, &nf, err)) {
        free(prompt);
        return cis2_cli_usage_error("trace", "--teacher-force: %s", err);
    }
    const char *backend = o.nb ? o.backends[0] : "ref";
    cis2_model m;
    if (open_model("trace", o.model, &m)) {
        free(prompt);
        free(force);
        return 2;
    }
    for (int i = 0; i < np + nf; i++) {
        int32_t t = i < np ? prompt[i] : force[i - np];
        if (t >= m.cfg.vocab) {
            cis2_cli_usage_error("trace", "%s id %d is outside the vocabulary (vocab_size = %d)",
                                 i < np ? "--prompt-ids" : "--teacher-force", t, m.cfg.vocab);
            cis2_model_unload(&m);
            free(prompt);
            free(force);
            return 2;
        }
    }
    trace_req rq = { o.arm, o.layers, o.nodes, o.hash_only, o.n_set ? o.n : 0, 0 };
    trace_t tr;
    memset(&tr, 0, sizeof tr);
    tr.path = o.out;
    trace_run run;
    memset(&run, 0, sizeof run);
    int rc = trace_arm("trace", &m, backend, &o, &rq, prompt, np, force, nf, &tr, &run);
    if (!rc) {
        if (trace_write(&tr, o.out, err)) rc = cis2_cli_usage_error("trace", "%s", err);
    }
    if (!rc) {
        char *ti = cis2_format_ids(run.tokens, run.n_tokens),
             *pi = cis2_format_ids(run.pred, run.n_pred);
        printf("trace: wrote %s (%d %s, %d positions, arm %s)\n", o.out, tr.n,
               o.hash_only ? "tensor hashes" : "tensors", run.n_tokens, meta_get(&tr, "arm"));
        printf("token_ids=%s\npredicted_ids=%s\n", ti, pi);
        free(ti);
        free(pi);
        if (run.have_witness) {
            char wh[65];
            cis2_hex(run.witness, 32, wh);
            printf("CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=fp32\n", wh,
                   np, run.n_pred);
        }
    }
    free(run.tokens);
    free(run.pred);
    trace_free(&tr);
    cis2_model_unload(&m);
    free(prompt);
    free(force);
    return rc;
}

/* ------------------------------------------------------------- compare */
/* ids "1,2,3" from trace metadata (empty string → none). */
static int meta_ids(const trace_t *t, const char *k, int32_t **ids, int *n, char *err)
{
    const char *s = meta_get(t, k);
    *ids = NULL;
    *n = 0;
    if (!s) {
        snprintf(err, CIS2_ERR_LEN, "%s: __metadata__ has no \"%s\"", t->path, k);
        return 1;
    }
    if (!*s) return 0;
    char e2[CIS2_ERR_LEN];
    if (cis2_parse_ids(s, ids, n, e2)) {
        snprintf(err, CIS2_ERR_LEN, "%s: __metadata__ \"%s\": %.300s", t->path, k, e2);
        return 1;
    }
    return 0;
}

int cis2_cmd_compare(int argc, char **argv)
{
    topts o;
    if (parse_topts("compare", argc, argv,
                    " --model --prompt-ids --teacher-force --n --o --layers --nodes --backend "
                    "--isa --threads --against"
                    " --exact --tol --brief ",
                    &o))
        return 2;
    if (!o.model) return cis2_cli_usage_error("compare", "--model DIR is required");
    if (!!o.against == (o.nb == 2))
        return cis2_cli_usage_error(
            "compare",
            "give either --against TRACE or two backends (--backend ref --backend fast)");
    if (o.exact && o.tol)
        return cis2_cli_usage_error("compare", "--exact and --tol exclude each other");
    if (o.teacher_force && o.n_set)
        return cis2_cli_usage_error("compare", "--teacher-force and -n exclude each other");
    char err[CIS2_ERR_LEN];
    tol_table tol;
    tol_defaults(&tol);
    if (o.tol && tol_load(&tol, o.tol, err)) return cis2_cli_usage_error("compare", "%s", err);
    int32_t *prompt = NULL, *force = NULL;
    int np = 0, nf = 0, rc = 2;
    trace_t theirs, ours, ours2;
    memset(&theirs, 0, sizeof theirs);
    memset(&ours, 0, sizeof ours);
    memset(&ours2, 0, sizeof ours2);
    trace_run run1, run2;
    memset(&run1, 0, sizeof run1);
    memset(&run2, 0, sizeof run2);
    cis2_model m;
    memset(&m, 0, sizeof m);
    int have_model = 0;
    if (o.prompt_ids && cis2_parse_ids(o.prompt_ids, &prompt, &np, err)) {
        cis2_cli_usage_error("compare", "--prompt-ids: %s", err);
        goto out;
    }
    if (o.teacher_force && cis2_parse_ids(o.teacher_force, &force, &nf, err)) {
        cis2_cli_usage_error("compare", "--teacher-force: %s", err);
        goto out;
    }
    if (o.against) {
        if (o.n_set) {
            cis2_cli_usage_error("compare",
                                 "-n does not apply to --against (the tokens come from the trace)");
            goto out;
        }
        if (trace_load(&theirs, o.against, err)) {
            cis2_cli_usage_error("compare", "%s", err);
            goto out;
        }
        int32_t *tp, *tt;
        int ntp, ntt;
        if (meta_ids(&theirs, "token_ids", &tt, &ntt, err)) {
            cis2_cli_usage_error("compare",
                                 "%s (cannot teacher-force without the trace's token ids)", err);
            goto out;
        }
        if (meta_ids(&theirs, "prompt_ids", &tp, &ntp, err)) {
            free(tt);
            cis2_cli_usage_error("compare", "%s", err);
            goto out;
        }
        if (ntt == 0 || ntp == 0 || ntp > ntt || memcmp(tp, tt, (size_t)ntp * sizeof(int32_t))) {
            free(tp);
            free(tt);
            cis2_cli_usage_error(
                "compare", "%s: __metadata__ prompt_ids is not a non-empty prefix of token_ids",
                o.against);
            goto out;
        }
        if (prompt && (np != ntp || memcmp(prompt, tp, (size_t)np * sizeof(int32_t)))) {
            free(tp);
            free(tt);
            cis2_cli_usage_error(
                "compare", "--prompt-ids differ from the prompt_ids recorded in %s", o.against);
            goto out;
        }
        if (force && (nf != ntt - ntp || memcmp(force, tt + ntp, (size_t)nf * sizeof(int32_t)))) {
            free(tp);
            free(tt);
            cis2_cli_usage_error(
                "compare", "--teacher-force differs from the tokens recorded in %s", o.against);
            goto out;
        }
        free(prompt);
        free(force);
        prompt = tp;
        np = ntp;
        force = NULL;
        nf = ntt - ntp;
        if (nf) {
            force = malloc((size_t)nf * sizeof(int32_t));
            if (!force) {
                free(tt);
                cis2_cli_usage_error("compare", "out of memory");
                goto out;
            }
            memcpy(force, tt + ntp, (size_t)nf * sizeof(int32_t));
        }
        free(tt);
    } else if (!prompt) {
        cis2_cli_usage_error("compare", "--prompt-ids IDS is required");
        goto out;
    }
    const char *b1 = o.against ? (o.nb ? o.backends[0] : "ref") : o.backends[0];
    if (open_model("compare", o.model, &m)) goto out;
    have_model = 1;
    for (int i = 0; i < np + nf; i++) {
        int32_t t = i < np ? prompt[i] : force[i - np];
        if (t >= m.cfg.vocab) {
            cis2_cli_usage_error("compare",
                                 "token id %d is outside the vocabulary (vocab_size = %d)", t,
                                 m.cfg.vocab);
            goto out;
        }
    }
    trace_req rq = { NULL, o.layers, o.nodes, 0, 0, o.n_set ? o.n : 0 };
    ours.path = "(our run)";
    if ((rc = trace_arm("compare", &m, b1, &o, &rq, prompt, np, force, nf, &ours, &run1))) goto out;
    rc = 2;
    char lbl[64];
    snprintf(lbl, sizeof lbl, "(our run, backend %s)", b1);
    ours.path = lbl;
    if (o.out && trace_write(&ours, o.out, err)) {
        cis2_cli_usage_error("compare", "%s", err);
        goto out;
    }
    if (o.against) {
        rc = diff_traces(&ours, &theirs, o.exact, &tol, o.brief, 1);
    } else {
        /* second backend, teacher-forced with exactly the tokens the first fed */
        trace_req rq2 = { NULL, o.layers, o.nodes, 0, 0, 0 };
        int nf2 = run1.n_tokens - np;
        char lbl2[64];
        snprintf(lbl2, sizeof lbl2, "(our run, backend %s)", o.backends[1]);
        ours2.path = lbl2;
        if ((rc = trace_arm("compare", &m, o.backends[1], &o, &rq2, prompt, np, run1.tokens + np,
                            nf2, &ours2, &run2)))
            goto out;
        int exact = o.tol ? 0 : 1; /* two CIS-2 backends: bit for bit unless --tol */
        rc = diff_traces(&ours, &ours2, exact, &tol, o.brief, 0);
    }
out:
    free(run1.tokens);
    free(run1.pred);
    free(run2.tokens);
    free(run2.pred);
    trace_free(&theirs);
    trace_free(&ours);
    trace_free(&ours2);
    if (have_model) cis2_model_unload(&m);
    free(prompt);
    free(force);
    return rc;
}
