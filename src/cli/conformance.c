/* Op-level conformance (CONFORMANCE_SUITE.md), both sides of one black-box protocol:
 *
 *   cis2 op OP < vector.txt     candidate: reads one key=value vector on stdin,
 *                               computes OP with the engine's own scalar kernels
 *                               and prints out_sha256= (and out_bits=).
 *   cis2 suite [--vectors DIR]... [--timeout S] CANDIDATE [ARG...]
 *                               checker: runs `CANDIDATE ARG... OP` once per
 *                               vector, feeding the .txt on stdin, and compares
 *                               against the .expected file.
 *
 * The wire contract and op table are in docs/conformance.md. The op-level tier
 * is the one spec §15's last paragraph says is missing; the public suite's
 * seven op names (../shared/spec/CONFORMANCE_SUITE.md) are kept verbatim. */
#include "cli/commands.h"
#include "kernels/kernels.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CONF_MAX_INPUT  ((size_t)64 << 20) /* bytes of one vector / one stdin */
#define CONF_MAX_VALUES ((size_t)1 << 24)  /* values in one list or one output */
#define CONF_MAX_STDOUT ((size_t)64 << 20) /* candidate stdout kept by the checker */
#define CONF_MAX_STDERR ((size_t)4096)     /* candidate stderr kept (for reasons) */
#define CONF_MAX_POS    16777216u          /* 2^24: pos converts to f32 exactly (§7.3) */

static void seterr(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CIS2_ERR_LEN, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ key=value text */

typedef struct {
    const char *key, *val;
} kv_pair;
typedef struct {
    kv_pair *p;
    int n;
} kv_doc;

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static char *trim(char *s, char *e) /* trims [s,e) in place, returns start; NUL-terminates */
{
    while (s < e && is_ws(*s)) s++;
    while (e > s && is_ws(e[-1])) e--;
    *e = '\0';
    return s;
}

/* Parses `key=value` lines; blank lines and lines starting with '#' are
 * skipped. Modifies `text` (NUL-terminated, `len` bytes). Keys are
 * [A-Za-z0-9_.-]+ and must be unique. */
static int kv_parse(char *text, size_t len, const char *what, kv_doc *d, char *err)
{
    d->p = NULL;
    d->n = 0;
    if (memchr(text, '\0', len)) {
        seterr(err, "%s: contains a NUL byte", what);
        return 1;
    }
    size_t cap = 0;
    char *s = text, *end = text + len;
    int lineno = 0;
    while (s < end) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *le = nl ? nl : end;
        lineno++;
        char *line = trim(s, le);
        s = nl ? nl + 1 : end;
        if (!*line || *line == '#') continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            seterr(err, "%s: line %d: expected key=value", what, lineno);
            goto fail;
        }
        char *key = trim(line, eq);
        char *val = trim(eq + 1, eq + 1 + strlen(eq + 1));
        if (!*key) {
            seterr(err, "%s: line %d: empty key", what, lineno);
            goto fail;
        }
        for (const char *k = key; *k; k++) {
            char c = *k;
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-')) {
                seterr(err, "%s: line %d: bad character in key", what, lineno);
                goto fail;
            }
        }
        for (int i = 0; i < d->n; i++)
            if (!strcmp(d->p[i].key, key)) {
                seterr(err, "%s: line %d: duplicate field '%.64s'", what, lineno, key);
                goto fail;
            }
        if ((size_t)d->n == cap) {
            cap = cap ? cap * 2 : 16;
            kv_pair *np = realloc(d->p, cap * sizeof *np);
            if (!np) {
                seterr(err, "%s: out of memory", what);
                goto fail;
            }
            d->p = np;
        }
        d->p[d->n].key = key;
        d->p[d->n].val = val;
        d->n++;
    }
    return 0;
fail:
    free(d->p);
    d->p = NULL;
    d->n = 0;
    return 1;
}

static const char *kv_get(const kv_doc *d, const char *key)
{
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->p[i].key, key)) return d->p[i].val;
    return NULL;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "0xHHHHHHHH,0x..." -> bit patterns. Each item is 0x/0X and 1..8 hex digits,
 * optionally surrounded by blanks; no empty items. */
static int parse_bits_list(const char *s, const char *name, uint32_t **out, size_t *n, char *err)
{
    size_t cnt = 1;
    for (const char *p = s; *p; p++)
        if (*p == ',') cnt++;
    if (cnt > CONF_MAX_VALUES) {
        seterr(err, "%s: more than %zu values", name, CONF_MAX_VALUES);
        return 1;
    }
    uint32_t *v = malloc(cnt * sizeof *v);
    if (!v) {
        seterr(err, "%s: out of memory", name);
        return 1;
    }
    size_t i = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (p[0] != '0' || (p[1] != 'x' && p[1] != 'X')) {
            seterr(err, "%s: item %zu is not 0x-prefixed hex", name, i);
            goto fail;
        }
        p += 2;
        uint32_t b = 0;
        int nd = 0;
        for (int h; (h = hexval(*p)) >= 0; p++) {
            if (++nd > 8) {
                seterr(err, "%s: item %zu has more than 8 hex digits", name, i);
                goto fail;
            }
            b = (b << 4) | (uint32_t)h;
        }
        if (nd == 0) {
            seterr(err, "%s: item %zu has no hex digits", name, i);
            goto fail;
        }
        while (*p == ' ' || *p == '\t') p++;
        v[i++] = b;
        if (*p == '\0') break;
        if (*p != ',') {
            seterr(err, "%s: item %zu: unexpected character '%c'", name, i - 1, *p);
            goto fail;
        }
        p++;
    }
    *out = v;
    *n = i;
    return 0;
fail:
    free(v);
    return 1;
}

/* Decimal unsigned integer: digits only, at most 10, value in [lo, hi]. */
static int parse_uint(const char *s, const char *name, uint64_t lo, uint64_t hi, uint64_t *out,
                      char *err)
{
    uint64_t v = 0;
    int nd = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++nd > 10) break;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (nd == 0 || nd > 10 || *p != '\0' || v < lo || v > hi) {
        seterr(err, "%s: expected a decimal integer in [%llu, %llu], got '%.32s'", name,
               (unsigned long long)lo, (unsigned long long)hi, s);
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_uint_list(const char *s, const char *name, uint64_t hi, uint64_t **out, size_t *n,
                           char *err)
{
    size_t cnt = 1;
    for (const char *p = s; *p; p++)
        if (*p == ',') cnt++;
    if (cnt > CONF_MAX_VALUES) {
        seterr(err, "%s: more than %zu values", name, CONF_MAX_VALUES);
        return 1;
    }
    uint64_t *v = malloc(cnt * sizeof *v);
    char *tmp = strdup(s);
    if (!v || !tmp) {
        free(v);
        free(tmp);
        seterr(err, "%s: out of memory", name);
        return 1;
    }
    size_t i = 0;
    char *p = tmp;
    for (;;) {
        char *c = strchr(p, ',');
        char *e = c ? c : p + strlen(p);
        char *item = trim(p, e);
        char iname[96];
        snprintf(iname, sizeof iname, "%s item %zu", name, i);
        if (parse_uint(item, iname, 0, hi, &v[i], err)) {
            free(v);
            free(tmp);
            return 1;
        }
        i++;
        if (!c) break;
        p = c + 1;
    }
    free(tmp);
    *out = v;
    *n = i;
    return 0;
}

/* ------------------------------------------------------------ candidate side */

typedef struct {
    const kv_doc *d;
    const char *op;
    char *err;
    /* everything allocated while reading fields, freed together */
    void *owned[8];
    int n_owned;
} op_ctx;

static int need(op_ctx *c, const char *key, const char **val)
{
    *val = kv_get(c->d, key);
    if (!*val) {
        seterr(c->err, "%s: missing field '%s'", c->op, key);
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
    return parse_uint(v, name, lo, hi, out, c->err);
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
    if (parse_bits_list(v, name, &b, n, c->err)) return 1;
    if (want && *n != want) {
        seterr(c->err, "%s: %s has %zu values, expected %zu (%s)", c->op, key, *n, want, want_desc);
        free(b);
        return 1;
    }
    /* Bit patterns go in unchanged: NaN payloads and subnormals intact (the
     * kernels apply DAZ themselves, §1.3). */
    float *f = malloc((*n ? *n : 1) * sizeof *f);
    if (!f) {
        free(b);
        seterr(c->err, "%s: out of memory", c->op);
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
        seterr(c->err, "%s: rope_theta_bits 0x%08X is not a positive normal finite value", c->op,
               b);
        return 1;
    }
    *theta = t[0];
    return 0;
}

static int get_head_dim(op_ctx *c, uint64_t *hd)
{
    if (get_uint(c, "head_dim", 2, 65536, hd)) return 1;
    if (*hd % 2) {
        seterr(c->err, "%s: head_dim must be even (rotate-half, §7.4), got %llu", c->op,
               (unsigned long long)*hd);
        return 1;
    }
    return 0;
}

static int check_product(op_ctx *c, uint64_t a, uint64_t b, const char *what, size_t *prod)
{
    if (a && b > CONF_MAX_VALUES / a) {
        seterr(c->err, "%s: %s too large", c->op, what);
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

/* Computes op `k` into a malloc'd output. */
static int compute_op(op_ctx *c, int k, float **outp, size_t *nout)
{
    const char *op = OPS[k].name;
    float *out = NULL;
    size_t n_out = 0;
    uint64_t n;
    size_t cnt;

    if (OPS[k].elem) { /* n, x_bits */
        float *x;
        if (get_uint(c, "n", 1, CONF_MAX_VALUES, &n) || get_f32s(c, "x_bits", n, "n", &x, &cnt))
            return 1;
        n_out = cnt;
        if (!(out = malloc(n_out * sizeof *out))) goto oom;
        for (size_t i = 0; i < n_out; i++) out[i] = apply_elem(OPS[k].fn, x[i]);
    } else if (!strcmp(op, "rmsnorm")) { /* §8 */
        float *eps, *x, *g;
        if (get_uint(c, "n", 1, CONF_MAX_VALUES, &n) ||
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
        if (get_uint(c, "out_features", 1, CONF_MAX_VALUES, &rows) ||
            get_uint(c, "in_features", 1, CONF_MAX_VALUES, &cols) ||
            check_product(c, rows, cols, "out_features*in_features", &wn) ||
            get_f32s(c, "w_bits", wn, "out_features*in_features", &w, &cnt) ||
            get_f32s(c, "x_bits", cols, "in_features", &x, &cnt))
            return 1;
        n_out = rows;
        if (!(out = malloc(n_out * sizeof *out))) goto oom;
        ref_matvec(w, (int)rows, (int)cols, x, out);
    } else if (!strcmp(op, "softmax")) { /* §9.3 */
        float *s;
        if (get_uint(c, "n", 1, CONF_MAX_VALUES, &n) ||
            get_f32s(c, "scores_bits", n, "n", &s, &cnt))
            return 1;
        n_out = n;
        if (!(out = malloc(n_out * sizeof *out))) goto oom;
        memcpy(out, s, n_out * sizeof *out);
        ref_softmax(out, (int)n);
    } else if (!strcmp(op, "dot_seq")) { /* §5.1 */
        float *a, *b;
        if (get_uint(c, "n", 1, CONF_MAX_VALUES, &n) || get_f32s(c, "a_bits", n, "n", &a, &cnt) ||
            get_f32s(c, "b_bits", n, "n", &b, &cnt))
            return 1;
        n_out = 1;
        if (!(out = malloc(sizeof *out))) goto oom;
        out[0] = cis2_dot_seq(a, b, (size_t)n);
    } else if (!strcmp(op, "attention_block")) { /* §9.2-§9.4, one query head */
        uint64_t hd, sl;
        size_t kvn;
        float *q, *kk, *v, *scores;
        if (get_uint(c, "head_dim", 1, 65536, &hd) ||
            get_uint(c, "seq_len", 1, CONF_MAX_VALUES, &sl) ||
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
        if (parse_uint_list(pv, name, CONF_MAX_POS, &pos, &npos, c->err)) return 1;
        size_t half = (size_t)hd / 2;
        if (npos > CONF_MAX_VALUES / (2 * half + 1)) {
            free(pos);
            seterr(c->err, "%s: too many positions", op);
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
        if (get_head_dim(c, &hd) || get_theta(c, &theta) ||
            get_uint(c, "pos", 0, CONF_MAX_POS, &pos) || get_f32s(c, "x_bits", 0, "", &x, &cnt))
            return 1;
        if (cnt % hd) {
            seterr(c->err, "%s: x_bits has %zu values, not a multiple of head_dim=%llu", op, cnt,
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
        if (get_uint(c, "vocab", 1, CONF_MAX_VALUES, &vocab) ||
            get_uint(c, "hidden", 1, CONF_MAX_VALUES, &hidden) ||
            check_product(c, vocab, hidden, "vocab*hidden", &en) ||
            get_f32s(c, "embed_bits", en, "vocab*hidden", &e, &cnt) || need(c, "token_ids", &iv))
            return 1;
        char name[64];
        snprintf(name, sizeof name, "%s: token_ids", op);
        if (parse_uint_list(iv, name, 4294967295u, &ids, &nid, c->err)) return 1;
        for (size_t i = 0; i < nid; i++)
            if (ids[i] >= vocab) {
                seterr(c->err, "%s: token_ids item %zu is %llu, not below vocab=%llu", op, i,
                       (unsigned long long)ids[i], (unsigned long long)vocab);
                free(ids);
                return 1;
            }
        if (nid > CONF_MAX_VALUES / hidden) {
            free(ids);
            seterr(c->err, "%s: output too large", op);
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
    seterr(c->err, "%s: out of memory", op);
    return 1;
}

static int read_stream(FILE *f, size_t max, char **buf, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *b = malloc(cap + 1);
    if (!b) return 1;
    for (;;) {
        if (n == cap) {
            if (cap > max) break;
            cap *= 2;
            char *nb = realloc(b, cap + 1);
            if (!nb) {
                free(b);
                return 1;
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f) || n > max) {
        free(b);
        return n > max ? 2 : 1;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

static void op_usage(FILE *f)
{
    fprintf(f, "usage: cis2 op OP < vector.txt   (OP: ");
    for (int i = 0; i < N_OPS; i++) fprintf(f, "%s%s", i ? ", " : "", OPS[i].name);
    fprintf(f, ")\n");
}

int cis2_cmd_op(int argc, char **argv)
{
    char err[CIS2_ERR_LEN] = "";
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        op_usage(stdout);
        return 0;
    }
    if (argc != 2) {
        op_usage(stderr);
        return 2;
    }
    int k = -1;
    for (int i = 0; i < N_OPS; i++)
        if (!strcmp(argv[1], OPS[i].name)) k = i;
    if (k < 0) {
        fprintf(stderr, "cis2 op: unknown op '%.64s'\n", argv[1]);
        return 2;
    }
    /* §1.3: pin FTZ/DAZ, read it back, and run the adversarial rows first. */
    if (cis2_fpenv_pin() != 0 || cis2_fpenv_selftest(NULL) != 0) {
        fprintf(stderr, "cis2 op: cannot pin FTZ/DAZ on %s (spec 1.3); refusing to run\n",
                cis2_isa_name());
        return 3;
    }
    char *text;
    size_t len;
    int rr = read_stream(stdin, CONF_MAX_INPUT, &text, &len);
    if (rr) {
        fprintf(stderr, "cis2 op: %s\n",
                rr == 2 ? "input larger than 64 MiB" : "cannot read stdin");
        return 1;
    }
    kv_doc d;
    if (kv_parse(text, len, "stdin", &d, err)) {
        fprintf(stderr, "cis2 op: %s\n", err);
        free(text);
        return 1;
    }
    int rc = 1;
    const char *vop = kv_get(&d, "op");
    if (vop && strcmp(vop, argv[1])) {
        fprintf(stderr, "cis2 op: vector says op=%.64s but was asked for %s\n", vop, argv[1]);
        goto done;
    }
    op_ctx c = { .d = &d, .op = OPS[k].name, .err = err };
    float *out = NULL;
    size_t n_out = 0;
    int bad = compute_op(&c, k, &out, &n_out);
    for (int i = 0; i < c.n_owned; i++) free(c.owned[i]);
    if (bad) {
        fprintf(stderr, "cis2 op: %s\n", err);
        goto done;
    }
    uint8_t dig[32];
    char hex[65];
    cis2_f32_digest(out, n_out, dig); /* LE bytes, index order */
    cis2_hex(dig, 32, hex);
    printf("out_sha256=%s\nout_bits=", hex);
    for (size_t i = 0; i < n_out; i++) printf(i ? ",0x%08X" : "0x%08X", cis2_f2u(out[i]));
    printf("\n");
    free(out);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cis2 op: cannot write stdout\n");
        goto done;
    }
    rc = 0;
done:
    free(d.p);
    free(text);
    return rc;
}

/* -------------------------------------------------------------- checker side */

typedef struct {
    char *name, *dir;
} vec_ent;

static int vec_cmp(const void *a, const void *b)
{
    const vec_ent *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->dir, y->dir);
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && !strcmp(s + n - m, suf);
}

static char *path_join(const char *dir, const char *name, const char *ext)
{
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, name, ext);
    return p;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Every NAME.txt in DIR is a vector; a NAME.expected with no NAME.txt is
 * listed too, so that it fails rather than being skipped silently. */
static int collect(const char *dir, vec_ent **v, size_t *n, size_t *cap, char *err)
{
    DIR *dh = opendir(dir);
    if (!dh) {
        seterr(err, "cannot open vector folder %s: %s", dir, strerror(errno));
        return 1;
    }
    struct dirent *de;
    while ((de = readdir(dh))) {
        const char *nm = de->d_name;
        size_t base;
        if (has_suffix(nm, ".txt")) base = strlen(nm) - 4;
        else if (has_suffix(nm, ".expected")) {
            base = strlen(nm) - 9;
            char *stem = strndup(nm, base);
            char *t = stem ? path_join(dir, stem, ".txt") : NULL;
            int ok = t && file_exists(t);
            free(stem);
            free(t);
            if (ok) continue;
        } else continue;
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            vec_ent *nv = realloc(*v, *cap * sizeof *nv);
            if (!nv) {
                closedir(dh);
                seterr(err, "out of memory");
                return 1;
            }
            *v = nv;
        }
        (*v)[*n].name = strndup(nm, base);
        (*v)[*n].dir = strdup(dir);
        if (!(*v)[*n].name || !(*v)[*n].dir) {
            closedir(dh);
            seterr(err, "out of memory");
            return 1;
        }
        (*n)++;
    }
    closedir(dh);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    char *out;
    size_t out_len;
    char err[CONF_MAX_STDERR + 1];
    size_t err_len;
    int status, timed_out, too_much;
} run_result;

static int set_flags(int fd, int cloexec, int nonblock)
{
    if (cloexec && fcntl(fd, F_SETFD, FD_CLOEXEC) == -1) return -1;
    if (nonblock) {
        int fl = fcntl(fd, F_GETFL);
        if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1) return -1;
    }
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static void kill_group(pid_t pid)
{
    kill(-pid, SIGKILL); /* the candidate leads its own process group */
    kill(pid, SIGKILL);
}

/* Runs cargv with `input` on stdin (then closed), collecting stdout/stderr,
 * within timeout_s seconds. The candidate and anything it spawns form one
 * process group, killed as a whole on timeout. */
static int run_candidate(char **cargv, const char *input, size_t in_len, double timeout_s,
                         run_result *r, char *err)
{
    int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
    memset(r, 0, sizeof *r);
    if (pipe(pin) || pipe(pout) || pipe(perr)) {
        seterr(err, "pipe: %s", strerror(errno));
        goto fail;
    }
    for (int i = 0; i < 2; i++)
        if (set_flags(pin[i], 1, 0) || set_flags(pout[i], 1, 0) || set_flags(perr[i], 1, 0)) {
            seterr(err, "fcntl: %s", strerror(errno));
            goto fail;
        }
    fflush(stdout);
    fflush(stderr);
    double deadline = now_s() + timeout_s;
    pid_t pid = fork();
    if (pid < 0) {
        seterr(err, "fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL); /* the checker ignores it; the candidate must not inherit that */
        if (dup2(pin[0], 0) < 0 || dup2(pout[1], 1) < 0 || dup2(perr[1], 2) < 0) _exit(127);
        execvp(cargv[0], cargv);
        dprintf(2, "cannot run %s: %s\n", cargv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also from here: no race with the kill below */
    close_fd(&pin[0]);
    close_fd(&pout[1]);
    close_fd(&perr[1]);
    set_flags(pin[1], 0, 1);
    set_flags(pout[0], 0, 1);
    set_flags(perr[0], 0, 1);
    size_t sent = 0, cap = 0;
    if (in_len == 0) close_fd(&pin[1]);
    while (pout[0] >= 0 || perr[0] >= 0) {
        double left = deadline - now_s();
        if (left <= 0) {
            r->timed_out = 1;
            break;
        }
        struct pollfd pf[3];
        int np = 0, iin = -1, iout = -1, ierr = -1;
        if (pin[1] >= 0) {
            iin = np;
            pf[np].fd = pin[1];
            pf[np].events = POLLOUT;
            np++;
        }
        if (pout[0] >= 0) {
            iout = np;
            pf[np].fd = pout[0];
            pf[np].events = POLLIN;
            np++;
        }
        if (perr[0] >= 0) {
            ierr = np;
            pf[np].fd = perr[0];
            pf[np].events = POLLIN;
            np++;
        }
        int pr = poll(pf, (nfds_t)np, (int)(left * 1000.0) + 1);
        if (pr < 0) {
            if (errno == EINTR) continue;
            r->timed_out = 1;
            break;
        }
        if (iin >= 0 && pf[iin].revents) {
            ssize_t w = write(pin[1], input + sent, in_len - sent);
            if (w > 0) sent += (size_t)w;
            /* EPIPE: the candidate closed stdin without reading it all. The
             * protocol judges only its output, so that alone is no failure. */
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == in_len) close_fd(&pin[1]);
        }
        if (iout >= 0 && pf[iout].revents) {
            if (cap - r->out_len < 65536) {
                size_t nc = cap ? cap * 2 : 131072;
                char *nb = realloc(r->out, nc + 1);
                if (!nb) {
                    r->too_much = 1;
                    break;
                }
                r->out = nb;
                cap = nc;
            }
            ssize_t g = read(pout[0], r->out + r->out_len, cap - r->out_len);
            if (g > 0) r->out_len += (size_t)g;
            else if (g == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(&pout[0]);
            if (r->out_len > CONF_MAX_STDOUT) {
                r->too_much = 1;
                break;
            }
        }
        if (ierr >= 0 && pf[ierr].revents) {
            char tmp[4096];
            ssize_t g = read(perr[0], tmp, sizeof tmp);
            if (g > 0) {
                size_t room = CONF_MAX_STDERR - r->err_len,
                       take = (size_t)g < room ? (size_t)g : room;
                memcpy(r->err + r->err_len, tmp, take);
                r->err_len += take;
            } else if (g == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(&perr[0]);
        }
    }
    close_fd(&pin[1]);
    close_fd(&pout[0]);
    close_fd(&perr[0]);
    if (r->timed_out || r->too_much) {
        kill_group(pid);
        waitpid(pid, &r->status, 0);
    } else {
        for (;;) {
            pid_t w = waitpid(pid, &r->status, WNOHANG);
            if (w == pid) break;
            if (w < 0 && errno != EINTR) {
                seterr(err, "waitpid: %s", strerror(errno));
                kill_group(pid);
                return 1;
            }
            if (now_s() >= deadline) {
                r->timed_out = 1;
                kill_group(pid);
                waitpid(pid, &r->status, 0);
                break;
            }
            struct timespec ts = { 0, 2000000 };
            nanosleep(&ts, NULL);
        }
    }
    if (!r->out) r->out = malloc(1);
    if (!r->out) {
        seterr(err, "out of memory");
        return 1;
    }
    r->out[r->out_len] = '\0';
    r->err[r->err_len] = '\0';
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        close_fd(&pin[i]);
        close_fd(&pout[i]);
        close_fd(&perr[i]);
    }
    return 1;
}

static int is_sha_hex(const char *s)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return i == 64;
}

static void bits_sha(const uint32_t *b, size_t n, char hex[65])
{
    cis2_sha256 s;
    uint8_t dig[32];
    cis2_sha256_init(&s);
    for (size_t i = 0; i < n; i++) {
        uint8_t le[4] = { (uint8_t)b[i], (uint8_t)(b[i] >> 8), (uint8_t)(b[i] >> 16),
                          (uint8_t)(b[i] >> 24) };
        cis2_sha256_update(&s, le, 4);
    }
    cis2_sha256_final(&s, dig);
    cis2_hex(dig, 32, hex);
}

/* The candidate's stdout: exactly one out_sha256= line, at most one out_bits=
 * line, nothing else (blank lines are ignored). */
static int parse_cand_out(char *out, size_t len, const char **sha, const char **bits, char *why)
{
    *sha = *bits = NULL;
    if (memchr(out, '\0', len)) {
        seterr(why, "stdout contains a NUL byte");
        return 1;
    }
    char *s = out, *end = out + len;
    while (s < end) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *le = nl ? nl : end;
        *le = '\0';
        char *line = s;
        s = le + 1;
        if (!*line) continue;
        if (!strncmp(line, "out_sha256=", 11)) {
            if (*sha) {
                seterr(why, "more than one out_sha256= line");
                return 1;
            }
            if (!is_sha_hex(line + 11)) {
                seterr(why, "malformed out_sha256= line (want 64 lowercase hex): '%.80s'", line);
                return 1;
            }
            *sha = line + 11;
        } else if (!strncmp(line, "out_bits=", 9)) {
            if (*bits) {
                seterr(why, "more than one out_bits= line");
                return 1;
            }
            *bits = line + 9;
        } else {
            seterr(why, "unexpected stdout line '%.60s'", line);
            return 1;
        }
    }
    if (!*sha) {
        seterr(why, "no out_sha256= line on stdout");
        return 1;
    }
    return 0;
}

static void first_line(const char *s, char *dst, size_t cap)
{
    size_t i = 0;
    while (s[i] && s[i] != '\n' && i + 1 < cap) {
        dst[i] = s[i];
        i++;
    }
    dst[i] = '\0';
}

static void print_bits_line(const uint32_t *b, size_t n)
{
    const size_t show = 64;
    printf("  candidate out_bits (%zu value%s)=", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n && i < show; i++) printf(i ? ",0x%08X" : "0x%08X", b[i]);
    if (n > show) printf(",...(+%zu more)", n - show);
    printf("\n");
}

/* One vector: 0 pass, 1 fail (line printed), -1 checker error (line printed). */
static int check_vector(const vec_ent *v, char **cand, int cand_n, double timeout_s)
{
    char err[CIS2_ERR_LEN] = "", why[CIS2_ERR_LEN] = "";
    char *tpath = path_join(v->dir, v->name, ".txt"),
         *epath = path_join(v->dir, v->name, ".expected");
    char *txt = NULL, *txt_copy = NULL, *exp = NULL, **argvv = NULL;
    size_t txt_len = 0, exp_len = 0;
    kv_doc td = { 0 }, ed = { 0 };
    uint32_t *want_bits = NULL, *got_bits = NULL;
    size_t n_want = 0, n_got = 0;
    int have_want_bits = 0, have_got_bits = 0;
    run_result rr = { 0 };
    int res = 1;

    if (!tpath || !epath) {
        seterr(why, "out of memory");
        goto report;
    }
    if (!file_exists(tpath)) {
        seterr(why, "%s.expected has no matching .txt", v->name);
        goto report;
    }
    if (!file_exists(epath)) {
        seterr(why, "no %s.expected next to the .txt", v->name);
        goto report;
    }
    if (cis2_read_file(tpath, &txt, &txt_len, err) || cis2_read_file(epath, &exp, &exp_len, err)) {
        seterr(why, "%s", err);
        goto report;
    }
    if (txt_len > CONF_MAX_INPUT) {
        seterr(why, "vector larger than 64 MiB");
        goto report;
    }
    if (!(txt_copy = malloc(txt_len + 1))) {
        seterr(why, "out of memory");
        goto report;
    }
    memcpy(txt_copy, txt, txt_len + 1);
    if (kv_parse(txt_copy, txt_len, tpath, &td, err)) {
        seterr(why, "bad vector: %s", err);
        goto report;
    }
    const char *op = kv_get(&td, "op");
    if (!op || !*op) {
        seterr(why, "bad vector: no op= field in %s", tpath);
        goto report;
    }
    if (kv_parse(exp, exp_len, epath, &ed, err)) {
        seterr(why, "bad expected file: %s", err);
        goto report;
    }
    const char *want_sha = kv_get(&ed, "out_sha256");
    if (!want_sha || !is_sha_hex(want_sha)) {
        seterr(why, "bad expected file: %s lacks a 64-hex out_sha256", epath);
        goto report;
    }
    const char *wb = kv_get(&ed, "out_bits");
    if (wb) {
        char hex[65];
        if (parse_bits_list(wb, "expected out_bits", &want_bits, &n_want, err)) {
            seterr(why, "bad expected file: %s", err);
            goto report;
        }
        bits_sha(want_bits, n_want, hex);
        if (strcmp(hex, want_sha)) {
            seterr(why, "bad expected file: its out_bits do not hash to its out_sha256");
            goto report;
        }
        have_want_bits = 1;
    }

    if (!(argvv = calloc((size_t)cand_n + 2, sizeof *argvv))) {
        seterr(why, "out of memory");
        goto report;
    }
    for (int i = 0; i < cand_n; i++) argvv[i] = cand[i];
    argvv[cand_n] = (char *)op;
    if (run_candidate(argvv, txt, txt_len, timeout_s, &rr, err)) {
        seterr(why, "checker: %s", err);
        res = -1;
        goto report;
    }
    char e1[200];
    first_line(rr.err, e1, sizeof e1);
    if (rr.timed_out) {
        seterr(why, "no result within %gs (killed)", timeout_s);
        goto report;
    }
    if (rr.too_much) {
        seterr(why, "more than 64 MiB on stdout (killed)");
        goto report;
    }
    if (WIFSIGNALED(rr.status)) {
        seterr(why, "killed by signal %d%s%s", WTERMSIG(rr.status), *e1 ? "; stderr: " : "", e1);
        goto report;
    }
    if (!WIFEXITED(rr.status) || WEXITSTATUS(rr.status) != 0) {
        seterr(why, "exited with status %d%s%s", WIFEXITED(rr.status) ? WEXITSTATUS(rr.status) : -1,
               *e1 ? "; stderr: " : "", e1);
        goto report;
    }
    const char *got_sha, *gb;
    if (parse_cand_out(rr.out, rr.out_len, &got_sha, &gb, why)) goto report;
    int bits_equal = 0;
    if (gb) {
        if (parse_bits_list(gb, "out_bits", &got_bits, &n_got, err)) {
            seterr(why, "malformed %s", err);
            goto report;
        }
        have_got_bits = 1;
        if (have_want_bits) {
            size_t m = n_got < n_want ? n_got : n_want;
            for (size_t i = 0; i < m; i++)
                if (got_bits[i] != want_bits[i]) {
                    seterr(why, "out_bits differ first at index %zu: got 0x%08X, want 0x%08X", i,
                           got_bits[i], want_bits[i]);
                    goto report;
                }
            if (n_got != n_want) {
                seterr(why, "out_bits has %zu values, want %zu", n_got, n_want);
                goto report;
            }
            bits_equal = 1;
        }
    }
    if (strcmp(got_sha, want_sha)) {
        seterr(why, "out_sha256 mismatch: got %.64s, want %.64s%s", got_sha, want_sha,
               !gb          ? " (candidate gave no out_bits)"
               : bits_equal ? " (its out_bits are right)"
                            : "");
        goto report;
    }
    if (gb) { /* digest right: the bits given beside it must be the ones hashed */
        char hex[65];
        bits_sha(got_bits, n_got, hex);
        if (strcmp(hex, got_sha)) {
            seterr(why, "candidate's out_bits do not hash to its own out_sha256");
            goto report;
        }
    }
    res = 0;
report:
    if (res == 0) printf("PASS %s\n", v->name);
    else {
        printf("FAIL %s: %s\n", v->name, why);
        if (have_got_bits) print_bits_line(got_bits, n_got);
    }
    fflush(stdout);
    free(tpath);
    free(epath);
    free(txt);
    free(txt_copy);
    free(exp);
    free(argvv);
    free(td.p);
    free(ed.p);
    free(want_bits);
    free(got_bits);
    free(rr.out);
    return res;
}

static void suite_usage(FILE *f, int full)
{
    fprintf(f,
            "usage: cis2 suite [--vectors DIR]... [--timeout SECONDS] [--] CANDIDATE [ARG...]\n");
    if (full)
        fprintf(f, "  runs `CANDIDATE ARG... OP` once per DIR/NAME.txt, the .txt on its stdin "
                   "(default DIR:\n"
                   "  tests/vectors, default timeout 10 s); exit 0 only if every vector passes\n");
}

int cis2_cmd_suite(int argc, char **argv)
{
    const char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
    int ndirs = 0, i = 1;
    double timeout_s = 10.0;
    if (!dirs) {
        fprintf(stderr, "cis2 suite: out of memory\n");
        return 2;
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            suite_usage(stdout, 1);
            free(dirs);
            return 0;
        }
        if (!strcmp(a, "--vectors") || !strcmp(a, "--timeout")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cis2 suite: %s needs a value\n", a);
                free(dirs);
                return 2;
            }
            const char *val = argv[++i];
            if (a[2] == 'v') dirs[ndirs++] = val;
            else {
                char *e;
                errno = 0;
                timeout_s = strtod(val, &e);
                if (errno || e == val || *e || !(timeout_s > 0.0 && timeout_s <= 3600.0)) {
                    fprintf(stderr,
                            "cis2 suite: --timeout wants seconds in (0, 3600], got '%.32s'\n", val);
                    free(dirs);
                    return 2;
                }
            }
            continue;
        }
        if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "cis2 suite: unknown option %.64s\n", a);
            free(dirs);
            return 2;
        }
        break;
    }
    if (i >= argc) {
        suite_usage(stderr, 0);
        free(dirs);
        return 2;
    }
    if (ndirs == 0) dirs[ndirs++] = "tests/vectors";

    /* A candidate that exits without reading stdin must not kill the checker. */
    signal(SIGPIPE, SIG_IGN);

    char err[CIS2_ERR_LEN];
    vec_ent *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 2;
    for (int d = 0; d < ndirs; d++)
        if (collect(dirs[d], &v, &n, &cap, err)) {
            fprintf(stderr, "cis2 suite: %s\n", err);
            goto out;
        }
    if (n == 0) {
        fprintf(stderr, "cis2 suite: no vectors (*.txt) found\n");
        goto out;
    }
    qsort(v, n, sizeof *v, vec_cmp);
    size_t failed = 0;
    int checker_err = 0;
    for (size_t k = 0; k < n; k++) {
        int r = check_vector(&v[k], argv + i, argc - i, timeout_s);
        if (r) failed++;
        if (r < 0) checker_err = 1;
    }
    if (failed == 0) printf("all %zu vector(s) passed\n", n);
    else printf("%zu of %zu vector(s) failed\n", failed, n);
    rc = checker_err ? 2 : failed ? 1 : 0;
out:
    for (size_t k = 0; k < n; k++) {
        free(v[k].name);
        free(v[k].dir);
    }
    free(v);
    free(dirs);
    return rc;
}
