/* Strict JSON (RFC 8259): no comments, no trailing commas, no NaN/Infinity,
 * no leading zeros, no control characters or invalid UTF-8 inside strings,
 * no lone surrogates, nesting depth bounded, nothing after the value. */
#include "core/json.h"
#include "core/core.h"
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 256

typedef struct {
    json_doc *d;
    const char *s;
    size_t n, i;
    const char *path;
    char *err;
    int failed, oom; /* oom: the failure is memory running out, not the text */
} P;

static int fail(P *p, const char *why)
{
    if (p->failed) return 1;
    size_t line = 1, col = 1;
    for (size_t k = 0; k < p->i && k < p->n; k++) {
        if (p->s[k] == '\n') {
            line++;
            col = 1;
        } else col++;
    }
    snprintf(p->err, CIS2_ERR_LEN, "%s: invalid JSON at line %zu col %zu: %s", p->path, line, col,
             why);
    p->failed = 1;
    return 1;
}

static uint32_t new_node(P *p, json_type t)
{
    json_doc *d = p->d;
    if (d->n_nodes == d->cap) {
        uint32_t nc = d->cap ? d->cap * 2 : 64;
        if (nc < d->cap) {
            fail(p, "too many values");
            return JSON_NONE;
        }
        json_node *nn = realloc(d->nodes, (size_t)nc * sizeof *nn);
        if (!nn) {
            fail(p, "out of memory");
            p->oom = 1;
            return JSON_NONE;
        }
        d->nodes = nn;
        d->cap = nc;
    }
    json_node *x = &d->nodes[d->n_nodes];
    memset(x, 0, sizeof *x);
    x->type = (uint8_t)t;
    return d->n_nodes++;
}

static void ws(P *p)
{
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->i++;
        else break;
    }
}

static int hex4(P *p, size_t at, unsigned *v)
{
    if (at + 4 > p->n) return 1;
    unsigned r = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[at + k];
        r <<= 4;
        if (c >= '0' && c <= '9') r |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') r |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') r |= (unsigned)(c - 'A' + 10);
        else return 1;
    }
    *v = r;
    return 0;
}

/* Length of a valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0;
        if (c == 0xF4 && s[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

static int parse_string(P *p, uint32_t node)
{
    p->i++; /* opening quote */
    size_t start = p->i;
    int esc = 0;
    while (1) {
        if (p->i >= p->n) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') break;
        if (c < 0x20) return fail(p, "control character in string");
        if (c == '\\') {
            esc = 1;
            if (p->i + 1 >= p->n) return fail(p, "unterminated escape");
            char e = p->s[p->i + 1];
            if (e == 'u') {
                unsigned v;
                if (hex4(p, p->i + 2, &v)) return fail(p, "bad \\u escape");
                p->i += 6;
                if (v >= 0xD800 && v <= 0xDBFF) {
                    unsigned lo;
                    if (p->i + 1 >= p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                        hex4(p, p->i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                        return fail(p, "lone high surrogate in \\u escape");
                    p->i += 6;
                } else if (v >= 0xDC00 && v <= 0xDFFF) {
                    return fail(p, "lone low surrogate in \\u escape");
                }
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == 0) return fail(p, "bad escape");
            p->i += 2;
            continue;
        }
        size_t l = utf8_len((const unsigned char *)p->s + p->i, p->n - p->i);
        if (!l) return fail(p, "invalid UTF-8 in string");
        p->i += l;
    }
    if (p->i - start > 0xFFFFFFFFu) return fail(p, "string too long");
    p->d->nodes[node].start = (uint32_t)start;
    p->d->nodes[node].len = (uint32_t)(p->i - start);
    p->d->nodes[node].has_escape = (uint8_t)esc;
    p->i++;
    return 0;
}

static int parse_number(P *p, uint32_t node)
{
    size_t st = p->i;
    if (p->s[p->i] == '-') p->i++;
    if (p->i >= p->n) return fail(p, "bad number");
    if (p->s[p->i] == '0') {
        p->i++;
        if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            return fail(p, "leading zero in number");
    } else if (p->s[p->i] >= '1' && p->s[p->i] <= '9') {
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    } else return fail(p, "bad number");
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "bad fraction");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "bad exponent");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i - st > 4096) return fail(p, "number too long");
    p->d->nodes[node].start = (uint32_t)st;
    p->d->nodes[node].len = (uint32_t)(p->i - st);
    return 0;
}

static int lit(P *p, const char *w)
{
    size_t l = strlen(w);
    if (p->n - p->i < l || memcmp(p->s + p->i, w, l) != 0) return fail(p, "unexpected token");
    p->i += l;
    return 0;
}

static int parse_value(P *p, uint32_t *out, int depth);

static void link_child(P *p, uint32_t parent, uint32_t *last, uint32_t child)
{
    if (*last == JSON_NONE) p->d->nodes[parent].first = child;
    else p->d->nodes[*last].next = child;
    *last = child;
}

static int parse_value(P *p, uint32_t *out, int depth)
{
    if (depth > MAX_DEPTH) return fail(p, "nesting too deep");
    ws(p);
    if (p->i >= p->n) return fail(p, "unexpected end of input");
    char c = p->s[p->i];
    uint32_t node;
    if (c == '{' || c == '[') {
        int obj = c == '{';
        node = new_node(p, obj ? JSON_OBJECT : JSON_ARRAY);
        if (p->failed) return 1;
        size_t open_at = p->i;
        p->d->nodes[node].start = (uint32_t)open_at;
        p->i++;
        ws(p);
        uint32_t last = JSON_NONE, count = 0;
        char close = obj ? '}' : ']';
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            p->d->nodes[node].len = (uint32_t)(p->i - open_at);
            *out = node;
            return 0;
        }
        while (1) {
            ws(p);
            if (obj) {
                if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "expected string key");
                uint32_t k = new_node(p, JSON_STRING);
                if (p->failed || parse_string(p, k)) return 1;
                link_child(p, node, &last, k);
                ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') return fail(p, "expected ':'");
                p->i++;
            }
            uint32_t v;
            if (parse_value(p, &v, depth + 1)) return 1;
            link_child(p, node, &last, v);
            count++;
            ws(p);
            if (p->i >= p->n) return fail(p, "unexpected end of input");
            if (p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->s[p->i] == close) {
                p->i++;
                break;
            }
            return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        p->d->nodes[node].count = count;
        p->d->nodes[node].len = (uint32_t)(p->i - open_at);
        *out = node;
        return 0;
    }
    if (c == '"') {
        node = new_node(p, JSON_STRING);
        if (p->failed || parse_string(p, node)) return 1;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        node = new_node(p, JSON_NUMBER);
        if (p->failed || parse_number(p, node)) return 1;
    } else if (c == 't') {
        node = new_node(p, JSON_TRUE);
        if (lit(p, "true")) return 1;
    } else if (c == 'f') {
        node = new_node(p, JSON_FALSE);
        if (lit(p, "false")) return 1;
    } else if (c == 'n') {
        node = new_node(p, JSON_NULL);
        if (lit(p, "null")) return 1;
    } else if (p->i == 0 && p->n >= 3 && memcmp(p->s, "\xef\xbb\xbf", 3) == 0) {
        /* RFC 8259 §8.1: a parser may ignore a BOM; cis2 refuses it, as
         * Python's json does, but says what the invisible bytes are */
        return fail(p, "a UTF-8 byte order mark (BOM) before the JSON (save it without one)");
    } else return fail(p, "unexpected character");
    if (p->failed) return 1;
    *out = node;
    return 0;
}

int json_parse(json_doc *d, const char *src, size_t len, const char *path, char *err)
{
    memset(d, 0, sizeof *d);
    d->src = src;
    d->src_len = len;
    P p = { d, src, len, 0, path, err, 0, 0 };
    if (len >= 0xFFFFFFF0u) {
        fail(&p, "file too large");
        json_free(d);
        return 1;
    }
    uint32_t root;
    if (parse_value(&p, &root, 0)) {
        json_free(d);
        return p.oom ? -1 : 1;
    }
    ws(&p);
    if (p.i != len) {
        fail(&p, "trailing data after the value");
        json_free(d);
        return 1;
    }
    return 0;
}

void json_free(json_doc *d)
{
    free(d->nodes);
    d->nodes = NULL;
    d->n_nodes = d->cap = 0;
}

uint32_t json_get(const json_doc *d, uint32_t obj, const char *key, int *dups)
{
    uint32_t found = JSON_NONE;
    int n = 0;
    if (d->nodes[obj].type != JSON_OBJECT) {
        if (dups) *dups = 0;
        return JSON_NONE;
    }
    for (uint32_t k = d->nodes[obj].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next) {
        if (json_str_eq(d, k, key)) {
            if (!n) found = d->nodes[k].next;
            n++;
        }
    }
    if (dups) *dups = n;
    return found;
}

static unsigned hexv(char c)
{
    return c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

/* Decode escapes; out may be NULL to only count. Input was validated. */
static size_t decode(const json_doc *d, uint32_t n, char *out)
{
    const char *s = d->src + d->nodes[n].start;
    size_t len = d->nodes[n].len, o = 0;
    if (!d->nodes[n].has_escape) {
        if (out) memcpy(out, s, len);
        return len;
    }
    for (size_t i = 0; i < len;) {
        if (s[i] != '\\') {
            if (out) out[o] = s[i];
            o++;
            i++;
            continue;
        }
        char e = s[i + 1];
        if (e != 'u') {
            char r = e == 'b'   ? '\b'
                     : e == 'f' ? '\f'
                     : e == 'n' ? '\n'
                     : e == 'r' ? '\r'
                     : e == 't' ? '\t'
                                : e;
            if (out) out[o] = r;
            o++;
            i += 2;
            continue;
        }
        unsigned v =
            hexv(s[i + 2]) << 12 | hexv(s[i + 3]) << 8 | hexv(s[i + 4]) << 4 | hexv(s[i + 5]);
        i += 6;
        if (v >= 0xD800 && v <= 0xDBFF) {
            unsigned lo =
                hexv(s[i + 2]) << 12 | hexv(s[i + 3]) << 8 | hexv(s[i + 4]) << 4 | hexv(s[i + 5]);
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        }
        char b[4];
        size_t bl;
        if (v < 0x80) {
            b[0] = (char)v;
            bl = 1;
        } else if (v < 0x800) {
            b[0] = (char)(0xC0 | v >> 6);
            b[1] = (char)(0x80 | (v & 0x3F));
            bl = 2;
        } else if (v < 0x10000) {
            b[0] = (char)(0xE0 | v >> 12);
            b[1] = (char)(0x80 | ((v >> 6) & 0x3F));
            b[2] = (char)(0x80 | (v & 0x3F));
            bl = 3;
        } else {
            b[0] = (char)(0xF0 | v >> 18);
            b[1] = (char)(0x80 | ((v >> 12) & 0x3F));
            b[2] = (char)(0x80 | ((v >> 6) & 0x3F));
            b[3] = (char)(0x80 | (v & 0x3F));
            bl = 4;
        }
        if (out) memcpy(out + o, b, bl);
        o += bl;
    }
    return o;
}

size_t json_str_len(const json_doc *d, uint32_t n) { return decode(d, n, NULL); }
void json_str_decode(const json_doc *d, uint32_t n, char *out) { decode(d, n, out); }

char *json_str_dup(const json_doc *d, uint32_t n, size_t *len)
{
    size_t l = decode(d, n, NULL);
    char *o = malloc(l + 1);
    if (!o) return NULL;
    decode(d, n, o);
    o[l] = 0;
    if (len) *len = l;
    return o;
}

int json_str_eq(const json_doc *d, uint32_t n, const char *lit_s)
{
    if (d->nodes[n].type != JSON_STRING) return 0;
    size_t ll = strlen(lit_s);
    if (!d->nodes[n].has_escape)
        return d->nodes[n].len == ll && memcmp(d->src + d->nodes[n].start, lit_s, ll) == 0;
    size_t l = decode(d, n, NULL);
    if (l != ll) return 0;
    char *tmp = malloc(l + 1);
    if (!tmp) return 0;
    decode(d, n, tmp);
    int eq = memcmp(tmp, lit_s, l) == 0;
    free(tmp);
    return eq;
}

int json_num_f64(const json_doc *d, uint32_t n, double *out)
{
    if (d->nodes[n].type != JSON_NUMBER) return 1;
    char buf[4100];
    uint32_t l = d->nodes[n].len;
    memcpy(buf, d->src + d->nodes[n].start, l);
    buf[l] = 0;
    /* strtod is correctly rounded (glibc, musl); the parser already
     * guaranteed the C-locale JSON grammar, and we never call setlocale. */
    char *end;
    *out = strtod(buf, &end);
    return end != buf + l;
}

/* The integer a number's text denotes, decided on the decimal digits alone
 * (never through a double, which is inexact beyond 2^53): the significant
 * digits D and the power of ten s of D * 10^s, trailing zeros moved into s.
 * "12", "12.0", "1.2e1" and "1200e-2" are all 12; "1.5" and "1e-3" have a
 * fractional part. */
int json_num_int(const json_doc *d, uint32_t n, int64_t *out)
{
    if (d->nodes[n].type != JSON_NUMBER) return JSON_NUM_NOT_INT;
    const char *s = d->src + d->nodes[n].start;
    uint32_t l = d->nodes[n].len;
    int neg = l && s[0] == '-';
    /* s[m0, m1): the digits before the exponent, the dot and fraction among them */
    uint32_t m0 = (uint32_t)neg, m1 = m0, n_frac = 0;
    while (m1 < l && s[m1] != 'e' && s[m1] != 'E') m1++;
    long exp = 0; /* the written exponent, clamped: the text is at most 4096 bytes */
    if (m1 < l) {
        uint32_t k = m1 + 1;
        int eneg = k < l && s[k] == '-';
        if (k < l && (s[k] == '+' || s[k] == '-')) k++;
        for (; k < l; k++)
            if (exp < 100000) exp = exp * 10 + (s[k] - '0');
        if (eneg) exp = -exp;
    }
    const char *dot = memchr(s + m0, '.', m1 - m0);
    if (dot) n_frac = (uint32_t)(s + m1 - dot - 1);
    /* first and last significant digit (skipping the dot) */
    uint32_t first = m0, last = m1;
    while (first < m1 && (s[first] == '0' || s[first] == '.')) first++;
    if (first == m1) { /* every digit is 0: "0", "-0.0", "0e99" */
        *out = 0;
        return 0;
    }
    while (s[last - 1] == '0' || s[last - 1] == '.') last--;
    uint32_t tz = 0; /* the zeros after the last significant digit */
    for (uint32_t k = last; k < m1; k++) tz += s[k] != '.';
    long scale = exp - (long)n_frac + (long)tz; /* value = digits[first, last) * 10^scale */
    if (scale < 0) return JSON_NUM_NOT_INT;
    uint64_t v = 0, lim = neg ? UINT64_C(1) << 63 : (UINT64_C(1) << 63) - 1;
    for (uint32_t k = first; k < last; k++) {
        if (s[k] == '.') continue;
        unsigned dg = (unsigned)(s[k] - '0');
        if (v > (lim - dg) / 10) return JSON_NUM_RANGE;
        v = v * 10 + dg;
    }
    for (long k = 0; k < scale; k++) {
        if (v > lim / 10) return JSON_NUM_RANGE;
        v *= 10;
    }
    *out = !neg ? (int64_t)v : v == UINT64_C(1) << 63 ? INT64_MIN : -(int64_t)v;
    return 0;
}

int json_num_i64(const json_doc *d, uint32_t n, int64_t *out)
{
    if (d->nodes[n].type != JSON_NUMBER) return JSON_NUM_NOT_INT;
    const char *s = d->src + d->nodes[n].start;
    uint32_t l = d->nodes[n].len;
    for (uint32_t i = 0; i < l; i++) /* fraction/exponent: not an integer spelling */
        if (s[i] == '.' || s[i] == 'e' || s[i] == 'E') return JSON_NUM_NOT_INT;
    return json_num_int(d, n, out);
}
