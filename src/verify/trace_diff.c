/* The trace diff (docs/divergence.md): aligns two traces by name, measures
 * each node (max_abs, max_rel, mean_rel, cosine, ULP, FTZ flips, logits
 * top-5), judges it exactly or against a tolerance table, names the first
 * divergent node and walks the decision tree from it. Strings that come from
 * the trace files (paths, arm names, metadata) are printed escaped: a trace
 * cannot forge a line of this report. */
#include "verify/trace.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A string from a trace (or a user's path) made safe for one report line. */
#define ESC(s, buf) cis2_escape((s), strlen(s), (buf), sizeof(buf), CIS2_ESC_TEXT)

/* The default table (docs/divergence.md): for fp32 engines that are not
 * CIS-2 (different summation order, libm exp/sin/rsqrt, FMA). max_rel is
 * max|A-B| / max|A|; mean_rel is the mean of |A-B|/|A| over |A| >= 1e-3·max|A|. */
void cis2_tol_defaults(cis2_tol_table *t)
{
    for (int k = 0; k < CIS2_N_NODES; k++) t->row[k] = (cis2_tol_row){ 1e-4, 2e-3, 0.99999, 0, 0 };
    t->row[CIS2_N_SCORES] = (cis2_tol_row){ 5e-4, 2e-3, 0.99999, 0, 0 };
    t->row[CIS2_N_PROBS] = (cis2_tol_row){ 5e-4, 2e-3, 0.99999, 0, 0 };
    t->row[CIS2_N_LOGITS] = (cis2_tol_row){ 5e-4, 2e-3, 0.99999, 1, 0 };
    t->name = "fp32";
}

/* Arm D (approximate int8 dot products) against arm C, per node kind
 * (docs/divergence.md "Arm D's table", docs/quantization.md §6): twice the
 * worst value seen running D against C teacher-forced on every fixture and on
 * the 30-layer SmolLM2-135M-shaped checkpoint (1 - cos doubled), rounded up.
 * The drift compounds with depth; the worst is at the deepest layers, so the
 * table is the envelope of 30 layers. embed is exact (D shares C's lookup).
 * A flipped top-1 under a passing max_rel is a near-tie (C's margin is at
 * most 2·max_rel·max|C|), so only a rate of agreement is asked. */
static const struct {
    int node;
    cis2_tol_row r;
} armd_rows[] = {
    { CIS2_N_EMBED, { 0, 0, 0.999999, 0, 0 } }, /* bit for bit: max_rel 0 */
    { CIS2_N_ATTN_NORM, { 0.39, 1.6, 0.974, 0, 0 } },
    { CIS2_N_Q_PROJ, { 0.43, 1.5, 0.972, 0, 0 } },
    { CIS2_N_K_PROJ, { 0.41, 2.1, 0.97, 0, 0 } },
    { CIS2_N_V_PROJ, { 0.47, 2.3, 0.972, 0, 0 } },
    { CIS2_N_Q_NORM, { 0.43, 1.5, 0.972, 0, 0 } },
    { CIS2_N_K_NORM, { 0.41, 2.1, 0.97, 0, 0 } },
    { CIS2_N_Q_ROPE, { 0.44, 1.8, 0.972, 0, 0 } },
    { CIS2_N_K_ROPE, { 0.47, 2, 0.97, 0, 0 } },
    { CIS2_N_SCORES, { 0.5, 5.1, 0.953, 0, 0 } },
    { CIS2_N_PROBS, { 0.62, 0.22, 0.982, 0, 0 } },
    { CIS2_N_ATTN_OUT, { 0.25, 0.77, 0.9952, 0, 0 } },
    { CIS2_N_O_PROJ, { 0.18, 0.72, 0.9951, 0, 0 } },
    { CIS2_N_RESID_ATTN, { 0.38, 1.6, 0.975, 0, 0 } },
    { CIS2_N_MLP_NORM, { 0.43, 1.6, 0.974, 0, 0 } },
    { CIS2_N_GATE, { 0.34, 1.4, 0.975, 0, 0 } },
    { CIS2_N_UP, { 0.36, 1.3, 0.975, 0, 0 } },
    { CIS2_N_ACT, { 0.58, 1.7, 0.943, 0, 0 } },
    { CIS2_N_DOWN, { 0.66, 2.2, 0.946, 0, 0 } },
    { CIS2_N_RESID_MLP, { 0.39, 1.6, 0.974, 0, 0 } },
    { CIS2_N_FINAL_NORM, { 0.39, 1.4, 0.974, 0, 0 } },
    { CIS2_N_LOGITS, { 0.34, 1.2, 0.974, 0, 0.4 } },
};

int cis2_tol_named(cis2_tol_table *t, const char *name, char *err)
{
    cis2_tol_defaults(t);
    if (!strcmp(name, "fp32")) return 0;
    if (strcmp(name, "armd")) {
        char en[48];
        snprintf(err, CIS2_ERR_LEN, "--table: unknown table '%s' (fp32 or armd)", ESC(name, en));
        return 1;
    }
    for (size_t i = 0; i < sizeof armd_rows / sizeof armd_rows[0]; i++)
        t->row[armd_rows[i].node] = armd_rows[i].r;
    t->name = "armd";
    return 0;
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The next blank-separated word of *p (NUL-terminated in place), or NULL. */
static char *word(char **p)
{
    char *s = *p;
    while (blank(*s)) s++;
    if (!*s) return NULL;
    char *w = s;
    while (*s && !blank(*s)) s++;
    if (*s) *s++ = '\0';
    *p = s;
    return w;
}

/* A tolerance is written as a plain decimal (digits, an optional fraction and
 * exponent: 1e-5, 0.25, 3.): strtod alone would also take hex floats
 * (0x1p-3), signs, inf/nan and leading blanks, which no tolerance table in
 * docs/divergence.md uses and a reader would not expect. */
static int plain_decimal(const char *s)
{
    int digits = 0;
    while (*s >= '0' && *s <= '9') s++, digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++) digits++;
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == '\0';
}

/* Nonzero when the decimal s has a nonzero digit before its exponent. */
static int nonzero_decimal(const char *s)
{
    for (; *s && *s != 'e' && *s != 'E'; s++)
        if (*s >= '1' && *s <= '9') return 1;
    return 0;
}

enum { TOL_MAX_REL, TOL_MEAN_REL, TOL_MIN_COS, TOL_TOP1, TOL_TOP1_MIN, TOL_NKEYS };
static const char *const TOL_KEYS[TOL_NKEYS] = { "max_rel", "mean_rel", "min_cos", "top1",
                                                 "top1_min" };

int cis2_tol_parse(cis2_tol_table *t, char *text, size_t len, const char *path, char *err)
{
    int seen[CIS2_N_NODES + 1][TOL_NKEYS]; /* the line that set it; [0] is '*' */
    memset(seen, 0, sizeof seen);
    char ep[200], ew[48];
    cis2_escape(path, strlen(path), ep, sizeof ep, CIS2_ESC_TEXT);
#define W(s) cis2_escape((s), strlen(s), ew, sizeof ew, CIS2_ESC_TEXT)
    if (memchr(text, '\0', len)) {
        snprintf(err, CIS2_ERR_LEN, "%s: contains a NUL byte", ep);
        return 1;
    }
    int line = 0;
    for (char *s = text, *end = text + len; s < end;) {
        char *nl = memchr(s, '\n', (size_t)(end - s)), *ln = s;
        if (nl) *nl = '\0';
        s = nl ? nl + 1 : end;
        line++;
        char *hash = strchr(ln, '#');
        if (hash) *hash = '\0';
        char *tok = word(&ln);
        if (!tok) continue;
        int k = -1;
        if (strcmp(tok, "*") && (k = cis2_trace_node_index(tok, strlen(tok))) < 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: unknown node '%s' (a node name or *)", ep,
                     line, W(tok));
            return 1;
        }
        int nkv = 0;
        for (char *kv; (kv = word(&ln));) {
            char *eq = strchr(kv, '=');
            char *e = NULL;
            double v = eq && plain_decimal(eq + 1) ? strtod(eq + 1, &e) : 0;
            if (!eq || !e || e == eq + 1 || *e || !(v >= 0) || v > 1e30) {
                snprintf(err, CIS2_ERR_LEN,
                         "%s: line %d: expected key=number (a plain decimal such as 1e-5), got "
                         "'%s'",
                         ep, line, W(kv));
                return 1;
            }
            /* 1e-999 is not 0: a bound that silently became 0 (or lost its
             * digits to a subnormal) is not the one the file states */
            if (v < DBL_MIN && nonzero_decimal(eq + 1)) {
                snprintf(err, CIS2_ERR_LEN,
                         "%s: line %d: '%s' underflows to %s as a double; write 0 or a value "
                         "of at least 1e-300",
                         ep, line, W(kv), v == 0 ? "0" : "a subnormal");
                return 1;
            }
            *eq = 0;
            int key = 0;
            while (key < TOL_NKEYS && strcmp(kv, TOL_KEYS[key])) key++;
            if (key == TOL_NKEYS) {
                snprintf(err, CIS2_ERR_LEN,
                         "%s: line %d: unknown key '%s' (max_rel, mean_rel, min_cos, top1=0|1, "
                         "top1_min<=1)",
                         ep, line, W(kv));
                return 1;
            }
            /* a value the check can never meet, or a flag that is not one */
            const char *why = key == TOL_TOP1 && v != 0 && v != 1 ? "must be 0 or 1"
                              : (key == TOL_TOP1_MIN || key == TOL_MIN_COS) && v > 1
                                  ? "must be at most 1"
                                  : NULL;
            if (why) {
                snprintf(err, CIS2_ERR_LEN, "%s: line %d: %s %s, got '%s'", ep, line, kv, why,
                         W(eq + 1));
                return 1;
            }
            /* The same key for the same node twice would be settled by
             * order alone: refused. A node's own line after '*' is the
             * way to override a key for one node. */
            int *first = &seen[k + 1][key];
            if (*first) {
                snprintf(err, CIS2_ERR_LEN, "%s: line %d: %s for '%s' is given twice (line %d)", ep,
                         line, kv, W(tok), *first);
                return 1;
            }
            /* '*' after a node's own line would undo it by order alone */
            for (int j = 0; k < 0 && j < CIS2_N_NODES; j++)
                if (seen[j + 1][key]) {
                    snprintf(err, CIS2_ERR_LEN,
                             "%s: line %d: %s for '*' would override the one line %d gives %s; "
                             "put the '*' line first",
                             ep, line, kv, seen[j + 1][key], cis2_trace_node_name(j));
                    return 1;
                }
            *first = line;
            for (int j = (k < 0 ? 0 : k); j < (k < 0 ? CIS2_N_NODES : k + 1); j++) {
                cis2_tol_row *r = &t->row[j];
                if (key == TOL_MAX_REL) r->max_rel = v;
                else if (key == TOL_MEAN_REL) r->mean_rel = v;
                else if (key == TOL_MIN_COS) r->min_cos = v;
                else if (key == TOL_TOP1) r->top1 = (int)v;
                else r->top1_min = v;
            }
            nkv++;
        }
        if (!nkv) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: no key=value after '%s'", ep, line, W(tok));
            return 1;
        }
    }
    return 0;
#undef W
}

int cis2_tol_load(cis2_tol_table *t, const char *path, char *err)
{
    char *text;
    size_t len;
    if (cis2_read_file_max(path, CIS2_TOL_MAX, &text, &len, err)) return 1;
    int rc = cis2_tol_parse(t, text, len, path, err);
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
    if (k == CIS2_N_EMBED) return 0;
    if (k == CIS2_N_Q_PROJ || k == CIS2_N_K_PROJ || k == CIS2_N_V_PROJ || k == CIS2_N_O_PROJ ||
        k == CIS2_N_GATE || k == CIS2_N_UP || k == CIS2_N_DOWN || k == CIS2_N_LOGITS)
        return 1;
    return 2;
}

typedef struct {
    const cis2_tentry *a, *b;
    metrics mt;
    int have_mt, shape_bad;
} first_div;

/* Walk the decision tree for the first divergent node; prints and returns
 * the branch index. */
static int decide(FILE *out, const first_div *f, int p0_clean, int p0_seen, cis2_diff_sum *sum)
{
    const cis2_tentry *e = f->a;
    const metrics *mt = &f->mt;
    int k = e->node, br;
    int autoreg = e->pos > 0 && p0_seen && p0_clean && k != CIS2_N_EMBED;
    if (k == CIS2_N_EMBED) br = 0;
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
        if (k == CIS2_N_Q_ROPE || k == CIS2_N_K_ROPE)
            snprintf(cause, sizeof cause,
                     "RoPE position: position 0 matches and the projections before RoPE match at "
                     "position %d, but the rotation differs: decode positions are off (position "
                     "index bug)",
                     e->pos);
        else if (k == CIS2_N_SCORES || k == CIS2_N_PROBS || k == CIS2_N_ATTN_OUT)
            snprintf(cause, sizeof cause,
                     "KV cache: q_rope/k_rope match at position %d but attention over the cached "
                     "positions differs: a stale, misplaced or overwritten cache slot",
                     e->pos);
        else
            snprintf(cause, sizeof cause,
                     "state carried between positions (position 0 matches; first difference in %s "
                     "at position %d)",
                     cis2_trace_node_name(k), e->pos);
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
                     rows, k <= CIS2_N_V_PROJ ? ", or the q/k/v bias" : "");
        else
            snprintf(cause, sizeof cause,
                     "hashes differ (hash-only trace: no per-element detail): accumulation order, "
                     "FMA, layout or weights");
    } else {
        const char *what =
            (k == CIS2_N_ATTN_NORM || k == CIS2_N_MLP_NORM || k == CIS2_N_FINAL_NORM)
                ? "RMSNorm: operation order ((x*inv)*w vs x*(inv*w)), rsqrt, sum order, or eps"
            : (k == CIS2_N_Q_NORM || k == CIS2_N_K_NORM)
                ? "Qwen3 q/k-norm: per head over head_dim, after the projection and before RoPE"
            : (k == CIS2_N_Q_ROPE || k == CIS2_N_K_ROPE)
                ? "RoPE rotation itself (rotate-half pairing, cos/sin table)"
            : k == CIS2_N_SCORES
                ? "attention scores: dot order, the 1/sqrt(head_dim) scale, or causal masking"
            : k == CIS2_N_PROBS
                ? "softmax: max subtraction, exp, sum order, divide vs multiply, or masking"
            : k == CIS2_N_ATTN_OUT
                ? "attention output: P·V accumulation order or the GQA head mapping"
            : k == CIS2_N_ACT ? "activation: SiLU or the SwiGLU product"
                              : "residual add";
        snprintf(cause, sizeof cause, "%s%s%s", what, rounding ? " (rounding-level)" : "", rows);
    }
    fprintf(out, "decision tree:\n");
    fprintf(out, "  1. embedding/lookup ........... %s\n", br == 0 ? "DIVERGES here" : "pass");
    fprintf(out, "  2. linear projections ......... %s\n",
            br == 0   ? "-"
            : br == 1 ? "DIVERGES here (accumulation order, FMA, layout)"
                      : "pass");
    fprintf(out, "  3. normalization/attention .... %s\n",
            br < 2    ? "-"
            : br == 2 ? "DIVERGES here (q/k-norm, softmax, masking, FTZ)"
                      : "pass");
    fprintf(out, "  4. autoregressive state ....... %s\n",
            br == 3 ? "DIVERGES: position 0 matches, divergence starts at a later position (KV "
                      "cache or RoPE position)"
            : br == 0 || br == 1 || br == 2
                ? (e->pos == 0 ? "- (diverges already at position 0)"
                               : "- (position 0 not clean or not traced)")
                : "-");
    fprintf(out, "branch=%s\n", branch_names[br]);
    fprintf(out, "cause=%s\n", cause);
    sum->branch = br;
    snprintf(sum->branch_name, sizeof sum->branch_name, "%s", branch_names[br]);
    snprintf(sum->cause, sizeof sum->cause, "%s", cause);
    return br;
}

static void fmt_metric_line(FILE *out, const cis2_tentry *a, const cis2_tentry *b,
                            const metrics *mt, int ok)
{
    char ulp[32];
    if (mt->nan_ulp) snprintf(ulp, sizeof ulp, "nan");
    else snprintf(ulp, sizeof ulp, "%llu", (unsigned long long)mt->max_ulp);
    double rel = mt->max_a > 0 ? mt->max_abs / mt->max_a : (mt->max_abs > 0 ? INFINITY : 0);
    fprintf(out,
            "%-22s n=%-6lld max_abs=%.3e max_rel=%.3e mean_rel=%.3e cos=%.9f max_ulp=%s ndiff=%lld "
            "first=%lld %s\n",
            a->name, (long long)a->n, mt->max_abs, rel, mt->mean_rel, mt->cos, ulp,
            (long long)mt->ndiff, (long long)mt->first, ok ? "ok" : "DIVERGED");
    if (a->node == CIS2_N_LOGITS) {
        int64_t ta[5], tb[5];
        top5(a->v, a->n, ta);
        top5(b->v, b->n, tb);
        fprintf(out, "  top5 A=[%lld,%lld,%lld,%lld,%lld] B=[%lld,%lld,%lld,%lld,%lld]",
                (long long)ta[0], (long long)ta[1], (long long)ta[2], (long long)ta[3],
                (long long)ta[4], (long long)tb[0], (long long)tb[1], (long long)tb[2],
                (long long)tb[3], (long long)tb[4]);
        if (ta[1] >= 0 && tb[1] >= 0)
            fprintf(out, " margin A=%.6g B=%.6g", (double)a->v[ta[0]] - (double)a->v[ta[1]],
                    (double)b->v[tb[0]] - (double)b->v[tb[1]]);
        fprintf(out, " top1 %s\n", ta[0] == tb[0] ? "same" : "DIFFERS");
    }
}

int cis2_trace_diff(FILE *out, const cis2_trace *A, const cis2_trace *B, int exact,
                    const cis2_tol_table *tol, int brief, int only_b_names)
{
    return cis2_trace_diff_sum(out, A, B, exact, tol, brief, only_b_names, NULL);
}

/* One measured tensor into the per-kind summary. */
static void sum_add(cis2_diff_sum *s, const cis2_tentry *a, const cis2_tentry *b, const metrics *mt)
{
    cis2_diff_kind *k = &s->kind[a->node];
    double rel = mt->max_a > 0 ? mt->max_abs / mt->max_a : (mt->max_abs > 0 ? INFINITY : 0);
    if (!k->n || rel > k->max_rel) k->max_rel = rel;
    if (!k->n || mt->mean_rel > k->mean_rel_max) k->mean_rel_max = mt->mean_rel;
    if (!k->n || mt->cos < k->min_cos) k->min_cos = mt->cos;
    k->mean_rel_sum += mt->mean_rel;
    k->n++;
    if (mt->max_ulp > s->max_ulp) s->max_ulp = mt->max_ulp;
    s->nan_ulp |= mt->nan_ulp;
    s->ndiff += mt->ndiff;
    if (a->node == CIS2_N_LOGITS) {
        int64_t ta[5], tb[5];
        top5(a->v, a->n, ta);
        top5(b->v, b->n, tb);
        s->n_logits++;
        s->top1_same += ta[0] == tb[0];
    }
}

/* The core of diff, compare and arms. Returns 0 within bounds, 1 diverged. */
int cis2_trace_diff_sum(FILE *out, const cis2_trace *A, const cis2_trace *B, int exact,
                        const cis2_tol_table *tol, int brief, int only_b_names, cis2_diff_sum *sum)
{
    cis2_diff_sum scratch;
    if (!sum) sum = &scratch;
    memset(sum, 0, sizeof *sum);
    sum->branch = -1;
    const char *aa = cis2_trace_meta_get(A, "arm"), *ba = cis2_trace_meta_get(B, "arm");
    char pa[300], pb[300], ea[200], eb[200];
    ESC(A->path, pa);
    ESC(B->path, pb);
    int hash = A->hash_only || B->hash_only;
    if (hash && !exact) exact = 1;
    fprintf(out, "A: %s (arm %s)\nB: %s (arm %s)\n", pa, aa ? ESC(aa, ea) : "?", pb,
            ba ? ESC(ba, eb) : "?");
    fprintf(out, "mode: %s\n",
            exact ? (hash ? "exact (a hash-only trace can only be compared bit for bit)"
                          : "exact (bit for bit)")
                  : "tolerance (max_rel, mean_rel, min_cos; logits top1)");
    if (!exact) fprintf(out, "table: %s\n", tol->name ? tol->name : "fp32");
    int diverged = 0, structural = 0;
    static const char *must_match[] = { "token_ids", "prompt_ids" };
    for (int i = 0; i < 2; i++) {
        const char *x = cis2_trace_meta_get(A, must_match[i]),
                   *y = cis2_trace_meta_get(B, must_match[i]);
        if (x && y && strcmp(x, y)) {
            fprintf(out, "MISMATCH %s: A=%s B=%s (the traces fed different tokens)\n",
                    must_match[i], ESC(x, ea), ESC(y, eb));
            diverged = 1;
        }
    }
    static const char *notes[] = { "weights_sha256", "config_sha256" };
    for (int i = 0; i < 2; i++) {
        const char *x = cis2_trace_meta_get(A, notes[i]), *y = cis2_trace_meta_get(B, notes[i]);
        if (x && y && strcmp(x, y))
            fprintf(out, "note: %s differs (A %s…, B %s…): different checkpoints\n", notes[i],
                    cis2_escape(x, strnlen(x, 12), ea, sizeof ea, CIS2_ESC_TEXT),
                    cis2_escape(y, strnlen(y, 12), eb, sizeof eb, CIS2_ESC_TEXT));
    }
    first_div f;
    memset(&f, 0, sizeof f);
    int have_first = 0, p0_seen = 0, p0_clean = 1, compared = 0, skipped_a = 0;
    int i = 0, j = 0;
    while (i < A->n || j < B->n) {
        const cis2_tentry *a = i < A->n ? &A->t[i] : NULL, *b = j < B->n ? &B->t[j] : NULL;
        int c = !a ? 1 : !b ? -1 : cis2_trace_cmp(a, b);
        if (c < 0) {
            i++;
            if (only_b_names) {
                skipped_a++;
                continue;
            }
            fprintf(out, "%-22s ONLY IN A (%s)\n", a->name, pa);
            structural++;
            continue;
        }
        if (c > 0) {
            j++;
            fprintf(out, "%-22s ONLY IN B (%s)\n", b->name, pb);
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
            cis2_trace_dims(a, da, sizeof da);
            cis2_trace_dims(b, db, sizeof db);
            fprintf(out, "%-22s SHAPE MISMATCH A=[%s] B=[%s] DIVERGED\n", a->name, da, db);
            ok = 0;
            shape_bad = 1;
        } else if (!a->v || !b->v) {
            /* a hash-only side: the other side's values are hashed here, as
             * the capture hashed them (little-endian bit patterns), only for
             * the tensors such a comparison needs */
            uint8_t ha[32], hb[32];
            if (a->v) cis2_sha256_buf(a->v, (size_t)a->n * sizeof(float), ha);
            if (b->v) cis2_sha256_buf(b->v, (size_t)b->n * sizeof(float), hb);
            ok = memcmp(a->v ? ha : a->sha, b->v ? hb : b->sha, 32) == 0;
            if (a->node == CIS2_N_LOGITS) sum->n_logits++;
            fprintf(out, "%-22s n=%-6lld sha256 %s %s\n", a->name, (long long)a->n,
                    ok ? "equal" : "differs", ok ? "ok" : "DIVERGED");
        } else {
            measure(a->v, b->v, a->n, &mt);
            have_mt = 1;
            sum_add(sum, a, b, &mt);
            if (exact) ok = mt.ndiff == 0;
            else {
                const cis2_tol_row *r = &tol->row[a->node];
                double rel = mt.max_a > 0 ? mt.max_abs / mt.max_a : (mt.max_abs > 0 ? INFINITY : 0);
                ok = !mt.nan_ulp && rel <= r->max_rel && mt.mean_rel <= r->mean_rel &&
                     mt.cos >= r->min_cos;
                if (r->top1 && a->node == CIS2_N_LOGITS) {
                    int64_t ta[5], tb[5];
                    top5(a->v, a->n, ta);
                    top5(b->v, b->n, tb);
                    if (ta[0] != tb[0]) ok = 0;
                }
            }
            if (!brief || !ok) fmt_metric_line(out, a, b, &mt, ok);
        }
        if (a->pos == 0) {
            p0_seen = 1;
            if (!ok) p0_clean = 0;
        }
        if (!ok) {
            diverged = 1;
            sum->n_failed++;
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
        fprintf(
            out,
            "note: %d tensors of A have no counterpart in B (B captured fewer positions, layers "
            "or nodes) and were not compared\n",
            skipped_a);
    fprintf(out, "compared %d tensors", compared);
    if (structural) fprintf(out, "; %d names present on one side only", structural);
    fprintf(out, "\n");
    if (structural) diverged = 1;
    /* the table's top-1 agreement rate: at most floor((1 - top1_min) * n) flips */
    double t1 = exact ? 0 : tol->row[CIS2_N_LOGITS].top1_min;
    int flips = sum->n_logits - sum->top1_same, top1_low = 0;
    if (t1 > 0 && sum->n_logits) {
        int allowed = (int)floor((1 - t1) * sum->n_logits + 1e-9);
        top1_low = flips > allowed;
        fprintf(out, "top1 agreement %d/%d (the table allows %d flips at top1_min %g): %s\n",
                sum->top1_same, sum->n_logits, allowed, t1, top1_low ? "DIVERGED" : "ok");
        if (top1_low) diverged = 1;
    }
    if (have_first) {
        char lay[32] = "";
        if (f.a->layer >= 0) snprintf(lay, sizeof lay, "layer %d, ", f.a->layer);
        fprintf(out, "first_divergence=%s (position %d, %snode %s)\n", f.a->name, f.a->pos, lay,
                cis2_trace_node_name(f.a->node));
        /* the position-0 verdict needs every position-0 tensor, not just those before the first
         * divergence */
        decide(out, &f, p0_clean, p0_seen, sum);
        sum->have_first = 1;
        sum->first_pos = f.a->pos;
        sum->first_layer = f.a->layer;
        sum->first_node = f.a->node;
        snprintf(sum->first, sizeof sum->first, "%s", f.a->name);
    } else if (structural) {
        fprintf(out,
                "first_divergence=none among the compared tensors, but the traces hold different "
                "names\n");
    } else if (top1_low) {
        fprintf(out, "first_divergence=none in the tensors (top-1 agreement below top1_min)\n");
    } else if (diverged) {
        fprintf(out, "first_divergence=none in the tensors (inputs differ; see MISMATCH above)\n");
    } else {
        fprintf(out, "first_divergence=none\n");
    }
    fprintf(out, "verdict=%s\n", diverged ? "DIVERGED" : exact ? "IDENTICAL" : "WITHIN-TOLERANCE");
    sum->compared = compared;
    sum->structural = structural;
    sum->diverged = diverged;
    return diverged;
}
