/* The trace file (verify/trace.h): safetensors with F32 tensors named by
 * position, layer and node, a string __metadata__, and hash-only entries.
 * The reader trusts nothing: names, dtype, shapes, the metadata's format and
 * hash entries are checked before any value is used. */
#include "verify/trace.h"
#include "core/json.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADER_MAX (100u << 20) /* the safetensors reader's own bound */

/* The names are the engine's (its trace callback receives them, forward.c); the lookups
 * by number and by name are the trace format's. */
const char *cis2_trace_node_name(int k)
{
    return k >= 0 && k < CIS2_N_NODES ? cis2_trace_node_names[k] : "?";
}

int cis2_trace_node_index(const char *s, size_t len)
{
    for (int i = 0; i < CIS2_N_NODES; i++) {
        const char *name = cis2_trace_node_name(i);
        if (strlen(name) == len && !memcmp(name, s, len)) return i;
    }
    return -1;
}

static int node_is_global(int k)
{
    return k == CIS2_N_EMBED || k == CIS2_N_FINAL_NORM || k == CIS2_N_LOGITS;
}

void cis2_trace_free(cis2_trace *tr)
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

int cis2_trace_meta_set(cis2_trace *tr, const char *k, const char *v)
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

const char *cis2_trace_meta_get(const cis2_trace *tr, const char *k)
{
    for (int i = 0; i < tr->nm; i++)
        if (!strcmp(tr->mk[i], k)) return tr->mv[i];
    return NULL;
}

int cis2_trace_meta_ids(const cis2_trace *tr, const char *k, int32_t **ids, int *n, char *err)
{
    const char *s = cis2_trace_meta_get(tr, k);
    *ids = NULL;
    *n = 0;
    if (!s) {
        snprintf(err, CIS2_ERR_LEN, "%s: __metadata__ has no \"%s\"", tr->path, k);
        return 1;
    }
    if (!*s) return 0;
    char e2[CIS2_ERR_LEN];
    if (cis2_parse_ids(s, ids, n, e2)) {
        char ee[300];
        snprintf(err, CIS2_ERR_LEN, "%s: __metadata__ \"%s\": %s", tr->path, k,
                 cis2_escape(e2, strlen(e2), ee, sizeof ee, CIS2_ESC_TEXT));
        return 1;
    }
    return 0;
}

cis2_tentry *cis2_trace_add(cis2_trace *tr)
{
    if (tr->n == tr->cap) {
        int c = tr->cap ? tr->cap * 2 : 256;
        cis2_tentry *t = realloc(tr->t, (size_t)c * sizeof *t);
        if (!t) return NULL;
        tr->t = t;
        tr->cap = c;
    }
    cis2_tentry *e = &tr->t[tr->n++];
    memset(e, 0, sizeof *e);
    return e;
}

/* "p{pos}.embed" / "p{pos}.L{l}.{node}" / ".final_norm" / ".logits". */
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
    *node = cis2_trace_node_index(p, strlen(p));
    if (*node < 0) return 1;
    if ((*layer < 0) != node_is_global(*node)) return 1;
    return 0;
}

static int64_t order_key(const cis2_tentry *e)
{
    int64_t lk = e->layer >= 0 ? e->layer + 1 : (e->node == CIS2_N_EMBED ? 0 : 1000000);
    return ((int64_t)e->pos * 1000001 + lk) * 64 + e->node;
}
int cis2_trace_cmp(const cis2_tentry *a, const cis2_tentry *b)
{
    int64_t x = order_key(a), y = order_key(b);
    return x < y ? -1 : x > y;
}
static int cmp_entry(const void *a, const void *b) { return cis2_trace_cmp(a, b); }
void cis2_trace_sort(cis2_trace *tr)
{
    if (tr->n) qsort(tr->t, (size_t)tr->n, sizeof *tr->t, cmp_entry);
}

void cis2_trace_dims(const cis2_tentry *e, char *out, size_t cap)
{
    if (e->ndim == 2)
        snprintf(out, cap, "%lldx%lld", (long long)e->shape[0], (long long)e->shape[1]);
    else snprintf(out, cap, "%lld", (long long)e->shape[0]);
}

/* ------------------------------------------------------------- writer */
/* The file up to the tensor data: its 8-byte length, the header JSON (padded
 * to 8 bytes). The data that follows is every entry with values, in order. */
int cis2_trace_format_header(const cis2_trace *tr, char **out, size_t *len, char *err)
{
    cis2_sb h = { 0 }, f = { 0 };
    cis2_sb_str(&h, "{\"__metadata__\":{");
    for (int i = 0; i < tr->nm; i++) {
        if (i) cis2_sb_str(&h, ",");
        cis2_sb_json_str(&h, tr->mk[i], strlen(tr->mk[i]));
        cis2_sb_str(&h, ":");
        cis2_sb_json_str(&h, tr->mv[i], strlen(tr->mv[i]));
    }
    cis2_sb_str(&h, "}");
    uint64_t off = 0;
    for (int i = 0; i < tr->n; i++) {
        const cis2_tentry *e = &tr->t[i];
        if (!e->v) continue;
        cis2_sb_str(&h, ",");
        cis2_sb_json_str(&h, e->name, strlen(e->name));
        cis2_sb_str(&h, ":{\"dtype\":\"F32\",\"shape\":[");
        if (e->ndim == 2)
            cis2_sb_printf(&h, "%lld,%lld", (long long)e->shape[0], (long long)e->shape[1]);
        else cis2_sb_printf(&h, "%lld", (long long)e->shape[0]);
        cis2_sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                       (unsigned long long)(off + (uint64_t)e->n * 4));
        off += (uint64_t)e->n * 4;
    }
    cis2_sb_str(&h, "}");
    while (h.len % 8) cis2_sb_str(&h, " "); /* tensor data 8-byte aligned */
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    cis2_sb_put(&f, len8, 8);
    cis2_sb_put(&f, h.b ? h.b : "", h.len);
    int oom = h.oom;
    cis2_sb_free(&h);
    *out = oom ? NULL : cis2_sb_take(&f, len);
    if (!*out) {
        cis2_sb_free(&f);
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory building the trace", tr->path);
        return 1;
    }
    return 0;
}

int cis2_trace_format(const cis2_trace *tr, char **out, size_t *len, char *err)
{
    if (cis2_trace_format_header(tr, out, len, err)) return 1;
    size_t total = *len;
    for (int i = 0; i < tr->n; i++)
        if (tr->t[i].v) total += (size_t)tr->t[i].n * 4;
    char *all = realloc(*out, total ? total : 1);
    if (!all) {
        free(*out);
        *out = NULL;
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory building the trace", tr->path);
        return 1;
    }
    for (int i = 0; i < tr->n; i++)
        if (tr->t[i].v) {
            memcpy(all + *len, tr->t[i].v, (size_t)tr->t[i].n * 4);
            *len += (size_t)tr->t[i].n * 4;
        }
    *out = all;
    return 0;
}

/* ------------------------------------------------------------- reader */
/* A "sha256.NAME": "DIMS HEX" metadata entry. */
static int hash_entry(cis2_trace *tr, const char *nm, const char *val, char *err)
{
    char en[140];
    cis2_escape(nm, strlen(nm), en, sizeof en, CIS2_ESC_TEXT);
    for (int j = 0; j < tr->n; j++)
        if (!strcmp(tr->t[j].name, nm)) {
            snprintf(err, CIS2_ERR_LEN, "%s: \"%s\" is both a tensor and a hash entry", tr->path,
                     en);
            return 1;
        }
    cis2_tentry *e = cis2_trace_add(tr);
    if (!e || !(e->name = strdup(nm))) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", tr->path);
        return 1;
    }
    const char *sp = strchr(val, ' ');
    long long a = 0, b = 0;
    char x = 0;
    int ok = parse_name(nm, &e->pos, &e->layer, &e->node) == 0 && sp && strlen(sp + 1) == 64 &&
             cis2_unhex32(sp + 1, e->sha) == 0 && val[0] >= '1' && val[0] <= '9';
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
                 "%s: bad hash entry \"sha256.%s\" (want \"DIMS HEX\" with a trace name)", tr->path,
                 en);
        return 1;
    }
    e->n = e->ndim == 2 ? a * b : a;
    tr->hash_only = 1;
    return 0;
}

int cis2_trace_parse(cis2_trace *tr, const uint8_t *buf, size_t len, const char *path, char *err)
{
    memset(tr, 0, sizeof *tr);
    tr->path = path;
    cis2_safetensors st;
    if (cis2_st_parse(&st, buf, len, path, err)) return 1;
    int rc = 1;
    char en[140];
    json_doc d;
    memset(&d, 0, sizeof d);
    if (st.metadata_json) {
        char jerr[CIS2_ERR_LEN];
        if (json_parse(&d, st.metadata_json, strlen(st.metadata_json), path, jerr)) {
            snprintf(err, CIS2_ERR_LEN, "%.400s (in __metadata__)", jerr);
            goto out;
        }
        for (uint32_t k = d.nodes[0].first; k != JSON_NONE; k = d.nodes[d.nodes[k].next].next) {
            size_t kl = 0, vl = 0;
            char *key = json_str_dup(&d, k, &kl), *val = json_str_dup(&d, d.nodes[k].next, &vl);
            int nul = key && val && (strlen(key) != kl || strlen(val) != vl);
            int bad = !key || !val || nul || cis2_trace_meta_set(tr, key, val);
            free(key);
            free(val);
            if (nul) {
                snprintf(err, CIS2_ERR_LEN, "%s: a __metadata__ string holds a NUL byte", path);
                goto out;
            }
            if (bad) {
                snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
                goto out;
            }
        }
    }
    const char *fmt = cis2_trace_meta_get(tr, "format");
    if (fmt && strcmp(fmt, CIS2_TRACE_FORMAT)) {
        snprintf(err, CIS2_ERR_LEN, "%s: __metadata__ format is \"%s\", expected \"%s\"", path,
                 cis2_escape(fmt, strlen(fmt), en, 64, CIS2_ESC_TEXT), CIS2_TRACE_FORMAT);
        goto out;
    }
    for (int i = 0; i < st.n; i++) {
        const cis2_st_tensor *s = &st.t[i];
        cis2_tentry *e = cis2_trace_add(tr);
        if (!e || !(e->name = strdup(s->name))) {
            snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
            goto out;
        }
        cis2_escape(s->name, strlen(s->name), en, sizeof en, CIS2_ESC_TEXT);
        if (parse_name(s->name, &e->pos, &e->layer, &e->node)) {
            snprintf(err, CIS2_ERR_LEN,
                     "%s: tensor \"%s\" is not a trace name (p{pos}.embed, p{pos}.L{l}.{node}, "
                     "p{pos}.final_norm, p{pos}.logits)",
                     path, en);
            goto out;
        }
        if (s->dtype != CIS2_DT_F32) {
            snprintf(err, CIS2_ERR_LEN, "%s: tensor \"%s\" is not F32 (traces hold F32 only)", path,
                     en);
            goto out;
        }
        if (s->ndim < 1 || s->ndim > 2 || s->numel < 1) {
            snprintf(err, CIS2_ERR_LEN, "%s: tensor \"%s\" must be 1-D or 2-D and non-empty", path,
                     en);
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
    }
    for (int i = 0; i < tr->nm; i++)
        if (!strncmp(tr->mk[i], "sha256.", 7) && hash_entry(tr, tr->mk[i] + 7, tr->mv[i], err))
            goto out;
    if (tr->n == 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: holds no trace tensors", path);
        goto out;
    }
    cis2_trace_sort(tr);
    rc = 0;
out:
    json_free(&d);
    cis2_st_close(&st);
    if (rc) cis2_trace_free(tr);
    return rc;
}

int cis2_trace_load(cis2_trace *tr, const char *path, char *err)
{
    memset(tr, 0, sizeof *tr);
    int fd;
    uint64_t size;
    if (cis2_open_input(path, &fd, &size, err)) return 1;
    /* cheap checks first: the size, and the header length the first 8
     * bytes claim, before the whole file is read */
    uint8_t len8[8];
    uint64_t hl = 0;
    int bad = size > CIS2_TRACE_MAX;
    if (bad)
        snprintf(err, CIS2_ERR_LEN, "%s: %llu bytes is more than the %llu a trace may have", path,
                 (unsigned long long)size, (unsigned long long)CIS2_TRACE_MAX);
    else if (size < 8)
        bad = snprintf(err, CIS2_ERR_LEN,
                       "%s: truncated safetensors file (%llu bytes, need at least 8)", path,
                       (unsigned long long)size) > 0;
    else if (!(bad = cis2_read_fd(fd, len8, 8, path, err))) {
        for (int i = 0; i < 8; i++) hl |= (uint64_t)len8[i] << (8 * i);
        if (hl > size - 8)
            bad = snprintf(err, CIS2_ERR_LEN,
                           "%s: safetensors header length %llu runs past the end of the file "
                           "(%llu bytes)",
                           path, (unsigned long long)hl, (unsigned long long)size) > 0;
        else if (hl < 2 || hl > HEADER_MAX)
            bad = snprintf(err, CIS2_ERR_LEN,
                           "%s: safetensors header length %llu is out of bounds [2, %u]", path,
                           (unsigned long long)hl, HEADER_MAX) > 0;
    }
    uint8_t *buf = bad ? NULL : malloc((size_t)size ? (size_t)size : 1);
    if (!bad && !buf) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory (%llu bytes)", path,
                 (unsigned long long)size);
        bad = 1;
    }
    if (!bad) {
        memcpy(buf, len8, 8);
        bad = cis2_read_fd(fd, buf + 8, 1, path, err);
        if (!bad && buf[8] != '{')
            bad = snprintf(err, CIS2_ERR_LEN, "%s: safetensors header does not start with '{'",
                           path) > 0;
        if (!bad) bad = cis2_read_fd(fd, buf + 9, (size_t)size - 9, path, err);
    }
    close(fd);
    if (!bad) bad = cis2_trace_parse(tr, buf, (size_t)size, path, err);
    free(buf);
    return bad;
}
