/* The ops of the op-level conformance tier (docs/conformance.md "Ops"): each
 * reads its fields from a parsed vector and computes one CIS-2 primitive with
 * the engine's own scalar reference kernels (src/core/pinned_math.c,
 * src/kernels/kernels_ref.c), so that `cis2 op` checks the code that runs
 * the model, not a second copy of it. The public suite's seven op names are
 * kept verbatim; seven more cover the rest of §5-§7. */
#include "verify/conformance.h"
#include "kernels/kernels.h"
#include <stdlib.h>
#include <string.h>

#define MAX_POS 16777216u /* 2^24: pos converts to f32 exactly (§7.3) */

typedef struct {
    const cis2_kv_doc *d;
    const char *op;
    char *err;
    /* everything allocated while reading fields, freed together */
    void *owned[8];
    int n_owned;
} op_ctx;

static int need(op_ctx *c, const char *key, const char **val)
{
    *val = cis2_kv_get(c->d, key);
    if (!*val) {
        snprintf(c->err, CIS2_ERR_LEN, "%s: missing field '%s'", c->op, key);
        return 1;
    }
    return 0;
}

static int get_uint(op_ctx *c, const char *key, uint64_t lo, uint64_t hi, uint64_t *out)
{
    const char *v;
    char name[96];
    if (need(c, key, &v)) return 1;
    snprintf(name, sizeof name, "%s: %s", c->op, key);
    return cis2_parse_uint(v, name, lo, hi, out, c->err);
}

/* A _bits field as floats; `want` (0 = any) is the required count. */
static int get_f32s(op_ctx *c, const char *key, size_t want, const char *want_desc, float **out,
                    size_t *n)
{
    const char *v;
    char name[96];
    uint32_t *b;
    if (need(c, key, &v)) return 1;
    snprintf(name, sizeof name, "%s: %s", c->op, key);
    if (cis2_parse_bits_list(v, name, &b, n, c->err)) return 1;
    if (want && *n != want) {
        snprintf(c->err, CIS2_ERR_LEN, "%s: %s has %zu values, expected %zu (%s)", c->op, key, *n,
                 want, want_desc);
        free(b);
        return 1;
    }
    /* Bit patterns go in unchanged: NaN payloads and subnormals intact (the
     * kernels apply DAZ themselves, §1.3). */
    float *f = malloc((*n ? *n : 1) * sizeof *f);
    if (!f) {
        free(b);
        snprintf(c->err, CIS2_ERR_LEN, "%s: out of memory", c->op);
        return 1;
    }
    for (size_t i = 0; i < *n; i++) f[i] = cis2_u2f(b[i]);
    free(b);
    c->owned[c->n_owned++] = f;
    *out = f;
    return 0;
}

static int get_theta(op_ctx *c, float *theta)
{
    float *t;
    size_t n;
    if (get_f32s(c, "rope_theta_bits", 1, "one value", &t, &n)) return 1;
    uint32_t b = cis2_f2u(t[0]);
    /* §7.1 takes ln_pinned(rope_theta): only a positive normal finite theta is meaningful. */
    if ((b >> 31) || ((b >> 23) & 0xFF) == 0 || ((b >> 23) & 0xFF) == 0xFF) {
        snprintf(c->err, CIS2_ERR_LEN,
                 "%s: rope_theta_bits 0x%08X is not a positive normal finite value", c->op, b);
        return 1;
    }
    *theta = t[0];
    return 0;
}

static int get_head_dim(op_ctx *c, uint64_t *hd)
{
    if (get_uint(c, "head_dim", 2, 65536, hd)) return 1;
    if (*hd % 2) {
        snprintf(c->err, CIS2_ERR_LEN, "%s: head_dim must be even (rotate-half, §7.4), got %llu",
                 c->op, (unsigned long long)*hd);
        return 1;
    }
    return 0;
}

static int check_product(op_ctx *c, uint64_t a, uint64_t b, const char *what, size_t *prod)
{
    if (a && b > CIS2_CONF_MAX_VALUES / a) {
        snprintf(c->err, CIS2_ERR_LEN, "%s: %s too large", c->op, what);
        return 1;
    }
    *prod = (size_t)(a * b);
    return 0;
}

typedef enum { EL_EXP, EL_LN, EL_SIN, EL_COS, EL_SILU, EL_RSQRT } elem_fn;

static float apply_elem(elem_fn f, float x)
{
    switch (f) {
    case EL_EXP: return cis2_exp_pinned(x); /* §6.2 */
    case EL_LN: return cis2_ln_pinned(x);   /* §6.5 */
    case EL_SIN: return cis2_sin_pinned(x); /* §6.3 */
    case EL_COS: return cis2_cos_pinned(x); /* §6.3 */
    case EL_SILU: return cis2_silu(x);      /* §6.4 */
    default: return cis2_rsqrt(x);          /* §6.1 */
    }
}

static const struct {
    const char *name;
    int elem;
    elem_fn fn;
} OPS[] = {
    { "rmsnorm", 0, 0 },         { "matvec", 0, 0 },          { "exp_pinned", 1, EL_EXP },
    { "softmax", 0, 0 },         { "attention_block", 0, 0 }, { "rope_table", 0, 0 },
    { "embed_lookup", 0, 0 },    { "ln_pinned", 1, EL_LN },   { "sin_pinned", 1, EL_SIN },
    { "cos_pinned", 1, EL_COS }, { "silu", 1, EL_SILU },      { "rsqrt", 1, EL_RSQRT },
    { "dot_seq", 0, 0 },         { "rope_rotate", 0, 0 },
};
#define N_OPS ((int)(sizeof OPS / sizeof OPS[0]))

static int compute(op_ctx *c, int k, float **outp, size_t *nout)
{
    const char *op = OPS[k].name;
    float *out = NULL;
    size_t n_out = 0;
    uint64_t n;
    size_t cnt;

    if (OPS[k].elem) { /* n, x_bits */
        float *x;
        if (get_uint(c, "n", 1, CIS2_CONF_MAX_VALUES, &n) ||
            get_f32s(c, "x_bits", n, "n", &x, &cnt))
            return 1;
        n_out = cnt;
        if (!(out = malloc(n_out * sizeof *out))) goto oom;
        for (size_t i = 0; i < n_out; i++) out[i] = apply_elem(OPS[k].fn, x[i]);
    } else if (!strcmp(op, "rmsnorm")) { /* §8 */
        float *eps, *x, *g;
        if (get_uint(c, "n", 1, CIS2_CONF_MAX_VALUES, &n) ||
            get_f32s(c, "eps_bits", 1, "one value", &eps, &cnt) ||
            get_f32s(c, "x_bits", n, "n", &x, &cnt) || get_f32s(c, "gamma_bits", n, "n", &g, &cnt))
            return 1;
        n_out = n;
        if (!(out = malloc(n_out * sizeof *out))) goto oom;
        ref_rmsnorm(x, g, (int)n, eps[0], out);
    } else if (!strcmp(op, "matvec")) { /* §5.2 */
        uint64_t rows, cols;
        size_t wn;
        float *w, *x;
        if (get_uint(c, "out_features", 1, CIS2_CONF_MAX_VALUES, &rows) ||
            get_uint(c, "in_features", 1, CIS2_CONF_MAX_VALUES, &cols) ||
            check_product(c, rows, cols, "out_features*in_features", &wn) ||
            get_f32s(c, "w_bits", wn, "out_features*in_features", &w, &cnt) ||
            get_f32s(c, "x_bits", cols, "in_features", &x, &cnt))
            return 1;
        n_out = rows;
        if (!(out = malloc(n_out * sizeof *out))) goto oom;
        ref_matvec(w, (int)rows, (int)cols, x, out);
    } else if (!strcmp(op, "softmax")) { /* §9.3 */
        float *s;
        if (get_uint(c, "n", 1, CIS2_CONF_MAX_VALUES, &n) ||
            get_f32s(c, "scores_bits", n, "n", &s, &cnt))
            return 1;
        n_out = n;
        if (!(out = malloc(n_out * sizeof *out))) goto oom;
        memcpy(out, s, n_out * sizeof *out);
        ref_softmax(out, (int)n);
    } else if (!strcmp(op, "dot_seq")) { /* §5.1 */
        float *a, *b;
        if (get_uint(c, "n", 1, CIS2_CONF_MAX_VALUES, &n) ||
            get_f32s(c, "a_bits", n, "n", &a, &cnt) || get_f32s(c, "b_bits", n, "n", &b, &cnt))
            return 1;
        n_out = 1;
        if (!(out = malloc(sizeof *out))) goto oom;
        out[0] = cis2_dot_seq(a, b, (size_t)n);
    } else if (!strcmp(op, "attention_block")) { /* §9.2-§9.4, one query head */
        uint64_t hd, sl;
        size_t kvn;
        float *q, *kk, *v, *scores;
        if (get_uint(c, "head_dim", 1, 65536, &hd) ||
            get_uint(c, "seq_len", 1, CIS2_CONF_MAX_VALUES, &sl) ||
            check_product(c, hd, sl, "seq_len*head_dim", &kvn) ||
            get_f32s(c, "q_head_bits", hd, "head_dim", &q, &cnt) ||
            get_f32s(c, "k_bits", kvn, "seq_len*head_dim", &kk, &cnt) ||
            get_f32s(c, "v_bits", kvn, "seq_len*head_dim", &v, &cnt))
            return 1;
        n_out = hd;
        out = malloc(n_out * sizeof *out);
        scores = malloc((size_t)sl * sizeof *scores);
        if (!out || !scores) {
            free(scores);
            goto oom;
        }
        float scale = cis2_rsqrt((float)hd); /* §9.2: rsqrt(head_dim) */
        ref_attention_head(q, kk, v, (size_t)hd, (int)sl, (int)hd, scale, scores, out);
        free(scores);
    } else if (!strcmp(op, "rope_table")) { /* §7.1-§7.3 */
        uint64_t hd, *pos;
        size_t npos, total;
        float theta;
        const char *pv;
        if (get_head_dim(c, &hd) || get_theta(c, &theta) || need(c, "positions", &pv)) return 1;
        char name[64];
        snprintf(name, sizeof name, "%s: positions", op);
        if (cis2_parse_uint_list(pv, name, MAX_POS, &pos, &npos, c->err)) return 1;
        size_t half = (size_t)hd / 2;
        if (npos > CIS2_CONF_MAX_VALUES / (2 * half + 1)) {
            free(pos);
            snprintf(c->err, CIS2_ERR_LEN, "%s: too many positions", op);
            return 1;
        }
        total = half + npos * 2 * half;
        if (!(out = malloc(total * sizeof *out))) {
            free(pos);
            goto oom;
        }
        n_out = total;
        cis2_inv_freq((int)hd, theta, out);
        for (size_t p = 0; p < npos; p++) {
            float *cv = out + half + p * 2 * half;
            ref_rope_table(out, (int)half, (int)pos[p], cv, cv + half); /* cos then sin */
        }
        free(pos);
    } else if (!strcmp(op, "rope_rotate")) { /* §7.4 on every head_dim slice */
        uint64_t hd, pos;
        float theta, *x;
        if (get_head_dim(c, &hd) || get_theta(c, &theta) || get_uint(c, "pos", 0, MAX_POS, &pos) ||
            get_f32s(c, "x_bits", 0, "", &x, &cnt))
            return 1;
        if (cnt % hd) {
            snprintf(c->err, CIS2_ERR_LEN,
                     "%s: x_bits has %zu values, not a multiple of head_dim=%llu", op, cnt,
                     (unsigned long long)hd);
            return 1;
        }
        size_t half = (size_t)hd / 2;
        float *tab = malloc(3 * half * sizeof *tab);
        out = malloc(cnt * sizeof *out);
        if (!tab || !out) {
            free(tab);
            goto oom;
        }
        n_out = cnt;
        cis2_inv_freq((int)hd, theta, tab);
        ref_rope_table(tab, (int)half, (int)pos, tab + half, tab + 2 * half);
        memcpy(out, x, cnt * sizeof *out);
        for (size_t h = 0; h < cnt; h += hd)
            ref_rope_rotate(out + h, (int)hd, tab + half, tab + 2 * half);
        free(tab);
    } else if (!strcmp(op, "embed_lookup")) { /* row copy, no arithmetic */
        uint64_t vocab, hidden, *ids;
        size_t en, nid;
        float *e;
        const char *iv;
        if (get_uint(c, "vocab", 1, CIS2_CONF_MAX_VALUES, &vocab) ||
            get_uint(c, "hidden", 1, CIS2_CONF_MAX_VALUES, &hidden) ||
            check_product(c, vocab, hidden, "vocab*hidden", &en) ||
            get_f32s(c, "embed_bits", en, "vocab*hidden", &e, &cnt) || need(c, "token_ids", &iv))
            return 1;
        char name[64];
        snprintf(name, sizeof name, "%s: token_ids", op);
        if (cis2_parse_uint_list(iv, name, 4294967295u, &ids, &nid, c->err)) return 1;
        for (size_t i = 0; i < nid; i++)
            if (ids[i] >= vocab) {
                snprintf(c->err, CIS2_ERR_LEN,
                         "%s: token_ids item %zu is %llu, not below vocab=%llu", op, i,
                         (unsigned long long)ids[i], (unsigned long long)vocab);
                free(ids);
                return 1;
            }
        if (nid > CIS2_CONF_MAX_VALUES / hidden) {
            free(ids);
            snprintf(c->err, CIS2_ERR_LEN, "%s: output too large", op);
            return 1;
        }
        n_out = nid * (size_t)hidden;
        if (!(out = malloc(n_out * sizeof *out))) {
            free(ids);
            goto oom;
        }
        for (size_t i = 0; i < nid; i++)
            memcpy(out + i * hidden, e + ids[i] * hidden, (size_t)hidden * sizeof *out);
        free(ids);
    }
    *outp = out;
    *nout = n_out;
    return 0;
oom:
    free(out);
    snprintf(c->err, CIS2_ERR_LEN, "%s: out of memory", op);
    return 1;
}

int cis2_op_count(void) { return N_OPS; }
const char *cis2_op_name(int k) { return k >= 0 && k < N_OPS ? OPS[k].name : NULL; }
int cis2_op_find(const char *name)
{
    for (int i = 0; i < N_OPS; i++)
        if (!strcmp(name, OPS[i].name)) return i;
    return -1;
}

int cis2_op_eval(int k, const cis2_kv_doc *d, float **out, size_t *n, char *err)
{
    *out = NULL;
    *n = 0;
    if (k < 0 || k >= N_OPS) {
        snprintf(err, CIS2_ERR_LEN, "unknown op %d", k);
        return 1;
    }
    op_ctx c = { .d = d, .op = OPS[k].name, .err = err };
    int bad = compute(&c, k, out, n);
    for (int i = 0; i < c.n_owned; i++) free(c.owned[i]);
    return bad;
}
