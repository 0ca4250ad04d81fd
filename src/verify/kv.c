/* The key=value text of conformance vectors (CONFORMANCE_SUITE.md "Protocol"):
 * one field per line, `_bits` lists of binary32 bit patterns and decimal
 * integers. The parser is strict where a lax one would guess (a duplicate
 * key, a bad key character, a NUL byte) and forgiving where the text is
 * only presentation (CRLF, comments, blank lines, blanks around items). */
#include "verify/conformance.h"
#include <stdlib.h>
#include <string.h>

static int is_blank(char c) { return c == ' ' || c == '\t'; }

int cis2_kv_parse(char *text, size_t len, const char *what, int flags, cis2_kv_doc *d, char *err)
{
    d->p = NULL;
    d->n = 0;
    char ew[128];
    cis2_escape(what, strlen(what), ew, sizeof ew, CIS2_ESC_TEXT);
    if (memchr(text, '\0', len)) {
        snprintf(err, CIS2_ERR_LEN, "%s: contains a NUL byte", ew);
        return 1;
    }
    size_t cap = 0;
    char *s = text, *end = text + len;
    int lineno = 0;
    while (s < end) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *le = nl ? nl : end;
        lineno++;
        char *next = nl ? nl + 1 : end;
        if (le > s && le[-1] == '\r') le--; /* CRLF: the CR belongs to the line end */
        *le = '\0';
        char *line = s;
        s = next;
        while (is_blank(*line)) line++;
        if (!*line || *line == '#') continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: expected key=value", ew, lineno);
            goto fail;
        }
        char *key = line, *val = eq + 1;
        *eq = '\0';
        if (flags & CIS2_KV_TRIM) {
            for (char *e = eq; e > key && is_blank(e[-1]);) *--e = '\0';
            while (is_blank(*val)) val++;
            for (char *e = val + strlen(val); e > val && is_blank(e[-1]);) *--e = '\0';
        }
        if (!*key) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: empty key", ew, lineno);
            goto fail;
        }
        for (const char *k = key; *k; k++) {
            char c = *k;
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-')) {
                snprintf(err, CIS2_ERR_LEN, "%s: line %d: bad character in key", ew, lineno);
                goto fail;
            }
        }
        for (int i = 0; i < d->n; i++)
            if (!strcmp(d->p[i].key, key)) {
                snprintf(err, CIS2_ERR_LEN, "%s: line %d: duplicate field '%.64s'", ew, lineno,
                         key);
                goto fail;
            }
        if (d->n == CIS2_CONF_MAX_FIELDS) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: more than %d fields", ew, lineno,
                     CIS2_CONF_MAX_FIELDS);
            goto fail;
        }
        if ((size_t)d->n == cap) {
            cap = cap ? cap * 2 : 16;
            cis2_kv_pair *np = realloc(d->p, cap * sizeof *np);
            if (!np) {
                snprintf(err, CIS2_ERR_LEN, "%s: out of memory", ew);
                goto fail;
            }
            d->p = np;
        }
        d->p[d->n++] = (cis2_kv_pair){ key, val, lineno };
    }
    return 0;
fail:
    cis2_kv_free(d);
    return 1;
}

const char *cis2_kv_get(const cis2_kv_doc *d, const char *key)
{
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->p[i].key, key)) return d->p[i].val;
    return NULL;
}

void cis2_kv_free(cis2_kv_doc *d)
{
    free(d->p);
    d->p = NULL;
    d->n = 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t count_items(const char *s)
{
    size_t cnt = 1;
    for (const char *p = s; *p; p++)
        if (*p == ',') cnt++;
    return cnt;
}

int cis2_parse_bits_list(const char *s, const char *name, uint32_t **out, size_t *n, char *err)
{
    size_t cnt = count_items(s);
    if (cnt > CIS2_CONF_MAX_VALUES) {
        snprintf(err, CIS2_ERR_LEN, "%s: more than %zu values", name, CIS2_CONF_MAX_VALUES);
        return 1;
    }
    uint32_t *v = malloc(cnt * sizeof *v);
    if (!v) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", name);
        return 1;
    }
    size_t i = 0;
    const char *p = s;
    for (;;) {
        while (is_blank(*p)) p++;
        if (p[0] != '0' || (p[1] != 'x' && p[1] != 'X')) {
            snprintf(err, CIS2_ERR_LEN, "%s: item %zu is not 0x-prefixed hex", name, i);
            goto fail;
        }
        p += 2;
        uint32_t b = 0;
        int nd = 0;
        for (int h; (h = hexval(*p)) >= 0; p++) {
            if (++nd > 8) {
                snprintf(err, CIS2_ERR_LEN, "%s: item %zu has more than 8 hex digits", name, i);
                goto fail;
            }
            b = (b << 4) | (uint32_t)h;
        }
        if (nd == 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: item %zu has no hex digits", name, i);
            goto fail;
        }
        while (is_blank(*p)) p++;
        v[i++] = b;
        if (*p == '\0') break;
        if (*p != ',') {
            char ch[16];
            snprintf(err, CIS2_ERR_LEN, "%s: item %zu: unexpected character '%s'", name, i - 1,
                     cis2_escape(p, 1, ch, sizeof ch, CIS2_ESC_TEXT));
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

int cis2_parse_uint(const char *s, const char *name, uint64_t lo, uint64_t hi, uint64_t *out,
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
        char es[48];
        snprintf(err, CIS2_ERR_LEN, "%s: expected a decimal integer in [%llu, %llu], got '%s'",
                 name, (unsigned long long)lo, (unsigned long long)hi,
                 cis2_escape(s, strlen(s), es, sizeof es, CIS2_ESC_TEXT));
        return 1;
    }
    *out = v;
    return 0;
}

int cis2_parse_uint_list(const char *s, const char *name, uint64_t hi, uint64_t **out, size_t *n,
                         char *err)
{
    size_t cnt = count_items(s);
    if (cnt > CIS2_CONF_MAX_VALUES) {
        snprintf(err, CIS2_ERR_LEN, "%s: more than %zu values", name, CIS2_CONF_MAX_VALUES);
        return 1;
    }
    uint64_t *v = malloc(cnt * sizeof *v);
    char *tmp = strdup(s);
    if (!v || !tmp) {
        free(v);
        free(tmp);
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", name);
        return 1;
    }
    size_t i = 0;
    char *p = tmp;
    for (;;) {
        char *c = strchr(p, ',');
        char *e = c ? c : p + strlen(p);
        while (is_blank(*p)) p++;
        while (e > p && is_blank(e[-1])) e--;
        *e = '\0';
        char iname[96];
        snprintf(iname, sizeof iname, "%s item %zu", name, i);
        if (cis2_parse_uint(p, iname, 0, hi, &v[i], err)) {
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
