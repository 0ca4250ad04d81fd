/* The Jinja subset's arena, failure point and values: Python's truth,
 * equality and ordering over None, bool, int, float, str, list, tuple and
 * dict (jinja2 evaluates templates as Python expressions), and the UTF-8
 * helpers for Python's code-point view of strings. */
#include "model/jinja.h"
#include "cis2.h"
#include "core/core.h"
#include "model/unicode_tables.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jarena_blk {
    jarena_blk *next;
    size_t cap, used;
    max_align_t data[];
};

void *jalloc(jfail_ctx *f, size_t n)
{
    jarena *a = f->arena;
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > ((size_t)64 << 10) ? n : (size_t)64 << 10;
        if (n > JINJA_MAX_ARENA || a->total + cap > JINJA_MAX_ARENA)
            jfail(f, SIZE_MAX, "the template needs more than %zu MiB of memory",
                  JINJA_MAX_ARENA >> 20);
        jarena_blk *b = malloc(sizeof *b + cap);
        if (!b) jfail(f, SIZE_MAX, "out of memory");
        b->next = a->head;
        b->cap = cap;
        b->used = 0;
        a->head = b;
        a->total += cap;
    }
    void *p = (char *)a->head->data + a->head->used;
    a->head->used += n;
    memset(p, 0, n);
    return p;
}

char *jstrdup(jfail_ctx *f, const char *s, size_t n)
{
    char *p = jalloc(f, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void jarena_free(jarena *a)
{
    for (jarena_blk *b = a->head, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    a->head = NULL;
    a->total = 0;
}

void jfail(jfail_ctx *f, size_t pos, const char *fmt, ...)
{
    char msg[CIS2_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (pos != SIZE_MAX && f->src && pos <= f->src_len) {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < pos; i++) {
            if (f->src[i] == '\n') line++, col = 1;
            else if (((unsigned char)f->src[i] & 0xC0) != 0x80) col++;
        }
        snprintf(f->err, CIS2_ERR_LEN, "line %zu col %zu: %s", line, col, msg);
    } else snprintf(f->err, CIS2_ERR_LEN, "%s", msg);
    cis2_err_one_line(f->err); /* text from the template or its variables stays one line */
    longjmp(f->jb, 1);
}

/* ------------------------------------------------------------ values */
jv jv_str(const char *s, size_t n) { return (jv){ .t = JV_STR, .s = s ? s : "", .n = n }; }
jv jv_int(int64_t i) { return (jv){ .t = JV_INT, .i = i }; }
jv jv_bool(int b) { return (jv){ .t = JV_BOOL, .i = !!b }; }
jv jv_none(void) { return (jv){ .t = JV_NONE }; }
jv jv_undef(const char *name) { return (jv){ .t = JV_UNDEF, .s = name }; }

jarr *jarr_new(jfail_ctx *f, size_t cap)
{
    jarr *a = jalloc(f, sizeof *a);
    a->cap = cap ? cap : 4;
    a->v = jalloc(f, a->cap * sizeof(jv));
    return a;
}

static void grow(jfail_ctx *f, jarr *a, int keys)
{
    size_t cap = 2 * a->cap;
    jv *v = jalloc(f, cap * sizeof(jv));
    memcpy(v, a->v, a->n * sizeof(jv));
    a->v = v;
    if (keys) {
        jv *k = jalloc(f, cap * sizeof(jv));
        if (a->k) memcpy(k, a->k, a->n * sizeof(jv));
        a->k = k;
    }
    a->cap = cap;
}

void jarr_push(jfail_ctx *f, jarr *a, jv v)
{
    if (a->n == a->cap) grow(f, a, 0);
    a->v[a->n++] = v;
}

void jarr_push_chars(jfail_ctx *f, jarr *a, const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t e = i + 1;
        while (e < n && ((unsigned char)s[e] & 0xC0) == 0x80) e++; /* continuation bytes */
        jarr_push(f, a, jv_str(s + i, e - i));
        i = e;
    }
}

jv *jdict_get(jarr *d, jv key)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], key)) return &d->v[i];
    return NULL;
}

void jdict_set(jfail_ctx *f, jarr *d, jv key, jv val)
{
    jv *have = jdict_get(d, key);
    if (have) {
        *have = val;
        return;
    }
    if (!d->k) d->k = jalloc(f, d->cap * sizeof(jv));
    if (d->n == d->cap) grow(f, d, 1);
    d->k[d->n] = key;
    d->v[d->n++] = val;
}

int jv_truthy(jv v)
{
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL:
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.n != 0;
    case JV_LIST: /* a generator or iterator (n == 2) is true even when empty */
        return v.n == 2 || v.a->n != 0;
    case JV_TUPLE:
    case JV_DICT: return v.a->n != 0;
    default: return 1; /* namespaces, loops, macros, functions */
    }
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }

int jv_eq(jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = a.t == JV_FLOAT ? a.f : (double)a.i, y = b.t == JV_FLOAT ? b.f : (double)b.i;
            return x == y;
        }
        return a.i == b.i;
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.n == b.n && (!a.n || !memcmp(a.s, b.s, a.n));
    case JV_LIST:
    case JV_TUPLE:
        if (a.a->n != b.a->n) return 0;
        for (size_t i = 0; i < a.a->n; i++)
            if (!jv_eq(a.a->v[i], b.a->v[i])) return 0;
        return 1;
    case JV_DICT:
        if (a.a->n != b.a->n) return 0;
        for (size_t i = 0; i < a.a->n; i++) {
            jv *o = jdict_get(b.a, a.a->k[i]);
            if (!o || !jv_eq(a.a->v[i], *o)) return 0;
        }
        return 1;
    case JV_MACRO: return a.m == b.m;
    case JV_FUNC: return a.i == b.i;
    default: return a.a == b.a; /* identity */
    }
}

int jv_cmp(jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = a.t == JV_FLOAT ? a.f : (double)a.i, y = b.t == JV_FLOAT ? b.f : (double)b.i;
            if (x != x || y != y) return -3; /* NaN: every comparison false */
            return x < y ? -1 : x > y;
        }
        return a.i < b.i ? -1 : a.i > b.i;
    }
    if (a.t != b.t) return -2;
    if (a.t == JV_STR) { /* UTF-8 byte order is code point order */
        size_t m = a.n < b.n ? a.n : b.n;
        int c = m ? memcmp(a.s, b.s, m) : 0;
        if (c) return c < 0 ? -1 : 1;
        return a.n < b.n ? -1 : a.n > b.n;
    }
    if (a.t == JV_LIST || a.t == JV_TUPLE) {
        for (size_t i = 0; i < a.a->n && i < b.a->n; i++) {
            if (jv_eq(a.a->v[i], b.a->v[i])) continue;
            return jv_cmp(a.a->v[i], b.a->v[i]);
        }
        return a.a->n < b.a->n ? -1 : a.a->n > b.a->n;
    }
    return -2;
}

const char *jv_type_name(jv v)
{
    static const char *const names[] = { "undefined", "none",  "bool",    "int",  "float",
                                         "string",    "list",  "tuple",   "dict", "namespace",
                                         "loop",      "macro", "function" };
    return v.t < sizeof names / sizeof names[0] ? names[v.t] : "?";
}

/* ------------------------------------------------------------ UTF-8 */
size_t ju_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

size_t ju_offset(const char *s, size_t n, size_t i)
{
    size_t b = 0;
    while (i && b < n) {
        b++;
        while (b < n && ((unsigned char)s[b] & 0xC0) == 0x80) b++;
        i--;
    }
    return b;
}

int ju_space(const char *s, size_t n, size_t *len)
{
    uint32_t cp;
    size_t l = n ? cis2_utf8_dec((const uint8_t *)s, n, &cp) : 0;
    if (!l) return 0;
    *len = l;
    /* Python's str.isspace: bidirectional class WS, B or S, or category Zs */
    if ((cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
        cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return 1;
    return 0;
}
