/* The Jinja subset's filters, tests, methods and globals, each as Jinja2 3.1
 * (jinja2/filters.py, jinja2/tests.py) or Python's str/dict method it
 * stands for, plus transformers' tojson (json.dumps with ensure_ascii=False),
 * raise_exception and strftime_now (on the pinned date, never the clock).
 * Case mapping is ASCII-only: upper/lower/title/capitalize of text with
 * other characters is refused (their Unicode tables are not here). */
#include "model/jinja.h"
#include "core/core.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ builder */
typedef struct {
    jfail_ctx *f;
    char *b;
    size_t n, cap;
} jbuf;

static void bput(jbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        if (cap > JINJA_MAX_OUTPUT * 2)
            jfail(b->f, SIZE_MAX, "a string longer than %zu MiB", JINJA_MAX_OUTPUT >> 19);
        char *nb = jalloc(b->f, cap);
        if (b->n) memcpy(nb, b->b, b->n);
        b->b = nb;
        b->cap = cap;
    }
    if (n) memcpy(b->b + b->n, s, n);
    b->n += n;
    b->b[b->n] = 0;
}
static void bstr(jbuf *b, const char *s) { bput(b, s, strlen(s)); }
static jv bval(jbuf *b) { return jv_str(b->b ? b->b : "", b->n); }

/* ------------------------------------------------------------ str() */
/* Python's repr(float): the shortest digits that read back, fixed notation
 * for decimal exponents -4 < e <= 16, else d.ddde+XX. */
static void float_repr(jbuf *b, double x)
{
    if (x != x) {
        bstr(b, "nan");
        return;
    }
    if (x == 1.0 / 0.0 || x == -1.0 / 0.0) {
        bstr(b, x < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    char digits[20];
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int exp10 = atoi(q + 1), decpt = exp10 + 1;
    if (neg) bstr(b, "-");
    if (x == 0) {
        bstr(b, "0.0");
        return;
    }
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            bstr(b, "0.");
            for (int i = 0; i < -decpt; i++) bstr(b, "0");
            bput(b, digits, (size_t)nd);
        } else if (nd <= decpt) {
            bput(b, digits, (size_t)nd);
            for (int i = nd; i < decpt; i++) bstr(b, "0");
            bstr(b, ".0");
        } else {
            bput(b, digits, (size_t)decpt);
            bstr(b, ".");
            bput(b, digits + decpt, (size_t)(nd - decpt));
        }
        return;
    }
    bput(b, digits, 1);
    if (nd > 1) {
        bstr(b, ".");
        bput(b, digits + 1, (size_t)nd - 1);
    }
    char t[16];
    snprintf(t, sizeof t, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    bstr(b, t);
}

static void repr(jrender *r, jbuf *b, jv v, size_t pos, int depth);

static void str_into(jrender *r, jbuf *b, jv v, size_t pos, int depth)
{
    char t[32];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: bstr(b, "None"); return;
    case JV_BOOL: bstr(b, v.i ? "True" : "False"); return;
    case JV_INT:
        snprintf(t, sizeof t, "%lld", (long long)v.i);
        bstr(b, t);
        return;
    case JV_FLOAT: float_repr(b, v.f); return;
    case JV_STR: bput(b, v.s, v.n); return;
    case JV_LIST:
    case JV_TUPLE:
    case JV_DICT: repr(r, b, v, pos, depth); return;
    default: jfail(r->f, pos, "unsupported construct: printing a %s", jv_type_name(v));
    }
}

/* Python's repr() of containers; strings in them only where ASCII (the
 * printable-character table for the rest is not here). */
static void repr(jrender *r, jbuf *b, jv v, size_t pos, int depth)
{
    if (depth > 100) jfail(r->f, pos, "a value nested deeper than 100");
    if (v.t == JV_STR) {
        int sq = 0, dq = 0;
        for (size_t i = 0; i < v.n; i++) {
            unsigned char c = (unsigned char)v.s[i];
            if (c >= 0x80)
                jfail(r->f, pos,
                      "unsupported construct: printing a list or dict holding non-ASCII text");
            sq |= c == '\'', dq |= c == '"';
        }
        char q = sq && !dq ? '"' : '\'';
        bput(b, &q, 1);
        for (size_t i = 0; i < v.n; i++) {
            unsigned char c = (unsigned char)v.s[i];
            char t[8];
            if (c == '\\' || c == (unsigned char)q) {
                t[0] = '\\', t[1] = (char)c;
                bput(b, t, 2);
            } else if (c == '\n') bstr(b, "\\n");
            else if (c == '\r') bstr(b, "\\r");
            else if (c == '\t') bstr(b, "\\t");
            else if (c < 0x20 || c == 0x7F) {
                snprintf(t, sizeof t, "\\x%02x", c);
                bstr(b, t);
            } else bput(b, (const char *)&c, 1);
        }
        bput(b, &q, 1);
        return;
    }
    if (v.t == JV_LIST || v.t == JV_TUPLE) {
        if (v.n) jfail(r->f, pos, "unsupported construct: printing a generator or dict view");
        bstr(b, v.t == JV_LIST ? "[" : "(");
        for (size_t i = 0; i < v.a->n; i++) {
            if (i) bstr(b, ", ");
            repr(r, b, v.a->v[i], pos, depth + 1);
        }
        bstr(b, v.t == JV_TUPLE && v.a->n == 1 ? ",)" : v.t == JV_LIST ? "]" : ")");
        return;
    }
    if (v.t == JV_DICT) {
        bstr(b, "{");
        for (size_t i = 0; i < v.a->n; i++) {
            if (i) bstr(b, ", ");
            repr(r, b, v.a->k[i], pos, depth + 1);
            bstr(b, ": ");
            repr(r, b, v.a->v[i], pos, depth + 1);
        }
        bstr(b, "}");
        return;
    }
    if (v.t == JV_UNDEF)
        jfail(r->f, pos,
              "unsupported construct: printing a list or dict holding an undefined value");
    str_into(r, b, v, pos, depth);
}

jv jv_to_str(jrender *r, jv v, size_t pos)
{
    if (v.t == JV_STR) return v;
    jbuf b = { r->f, NULL, 0, 0 };
    str_into(r, &b, v, pos, 0);
    return bval(&b);
}

/* ------------------------------------------------------------ tojson */
static void json_str(jbuf *b, const char *s, size_t n, int ascii)
{
    bstr(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char t[16];
        if (c == '"') bstr(b, "\\\"");
        else if (c == '\\') bstr(b, "\\\\");
        else if (c == '\n') bstr(b, "\\n");
        else if (c == '\r') bstr(b, "\\r");
        else if (c == '\t') bstr(b, "\\t");
        else if (c == '\b') bstr(b, "\\b");
        else if (c == '\f') bstr(b, "\\f");
        else if (c < 0x20 || (ascii && c == 0x7F)) {
            snprintf(t, sizeof t, "\\u%04x", c);
            bstr(b, t);
        } else if (c >= 0x80 && ascii) {
            uint32_t cp;
            size_t l = 1;
            int k = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
            cp = c & (0x3F >> k);
            for (; l <= (size_t)k && i + l < n; l++)
                cp = cp << 6 | ((unsigned char)s[i + l] & 0x3F);
            i += (size_t)k;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else snprintf(t, sizeof t, "\\u%04x", cp);
            bstr(b, t);
        } else bput(b, (const char *)&c, 1);
    }
    bstr(b, "\"");
}

typedef struct {
    jrender *r;
    size_t pos;
    const char *indent; /* NULL: none */
    int sort, ascii;
} json_opts;

static void newline(jbuf *b, const json_opts *o, int level)
{
    bstr(b, "\n");
    for (int i = 0; i < level; i++) bstr(b, o->indent);
}

static void tojson_into(jbuf *b, const json_opts *o, jv v, int level)
{
    char t[32];
    if (level > 100) jfail(o->r->f, o->pos, "tojson: a value nested deeper than 100");
    switch (v.t) {
    case JV_NONE: bstr(b, "null"); return;
    case JV_BOOL: bstr(b, v.i ? "true" : "false"); return;
    case JV_INT:
        snprintf(t, sizeof t, "%lld", (long long)v.i);
        bstr(b, t);
        return;
    case JV_FLOAT:
        if (v.f != v.f) bstr(b, "NaN");
        else if (v.f == 1.0 / 0.0) bstr(b, "Infinity");
        else if (v.f == -1.0 / 0.0) bstr(b, "-Infinity");
        else float_repr(b, v.f);
        return;
    case JV_STR: json_str(b, v.s, v.n, o->ascii); return;
    case JV_LIST:
    case JV_TUPLE:
        if (!v.a->n) {
            bstr(b, "[]");
            return;
        }
        bstr(b, "[");
        for (size_t i = 0; i < v.a->n; i++) {
            if (i) bstr(b, o->indent ? "," : ", ");
            if (o->indent) newline(b, o, level + 1);
            tojson_into(b, o, v.a->v[i], level + 1);
        }
        if (o->indent) newline(b, o, level);
        bstr(b, "]");
        return;
    case JV_DICT: {
        if (!v.a->n) {
            bstr(b, "{}");
            return;
        }
        size_t *ord = jalloc(o->r->f, v.a->n * sizeof *ord);
        for (size_t i = 0; i < v.a->n; i++) ord[i] = i;
        if (o->sort) /* insertion sort by key; keys must be strings */
            for (size_t i = 1; i < v.a->n; i++) {
                for (size_t k = 0; k < v.a->n; k++)
                    if (v.a->k[k].t != JV_STR)
                        jfail(o->r->f, o->pos,
                              "unsupported construct: tojson sort_keys with non-string keys");
                for (size_t j = i; j > 0 && jv_cmp(v.a->k[ord[j]], v.a->k[ord[j - 1]]) < 0; j--) {
                    size_t x = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = x;
                }
            }
        bstr(b, "{");
        for (size_t i = 0; i < v.a->n; i++) {
            jv k = v.a->k[ord[i]];
            if (i) bstr(b, o->indent ? "," : ", ");
            if (o->indent) newline(b, o, level + 1);
            if (k.t == JV_STR) json_str(b, k.s, k.n, o->ascii);
            else {
                bstr(b, "\"");
                if (k.t == JV_NONE) bstr(b, "null");
                else if (k.t == JV_BOOL) bstr(b, k.i ? "true" : "false");
                else if (k.t == JV_INT) {
                    snprintf(t, sizeof t, "%lld", (long long)k.i);
                    bstr(b, t);
                } else jfail(o->r->f, o->pos, "tojson: keys must be str, int, float, bool or None");
                bstr(b, "\"");
            }
            bstr(b, ": ");
            tojson_into(b, o, v.a->v[ord[i]], level + 1);
        }
        if (o->indent) newline(b, o, level);
        bstr(b, "}");
        return;
    }
    default: jfail(o->r->f, o->pos, "tojson: a %s is not JSON serializable", jv_type_name(v));
    }
}

jv jinja_tojson(jrender *r, jv v, int indent, int sort, size_t pos)
{
    char *ind = NULL;
    if (indent >= 0) {
        ind = jalloc(r->f, (size_t)indent + 1);
        memset(ind, ' ', (size_t)indent);
    }
    json_opts o = { r, pos, ind, sort, 0 };
    jbuf b = { r->f, NULL, 0, 0 };
    tojson_into(&b, &o, v, 0);
    return bval(&b);
}

/* ------------------------------------------------------------ arguments */
typedef struct {
    jrender *r;
    const char *what; /* "filter 'x'" */
    const jv *args;
    size_t nargs;
    const char *const *kw;
    const jv *kwv;
    size_t nkw;
    size_t pos;
    unsigned used; /* keyword arguments taken */
} jargs;

/* Argument i (0-based after the value), by position or keyword; NULL where
 * absent. */
static const jv *arg(jargs *a, size_t i, const char *name)
{
    for (size_t k = 0; k < a->nkw && k < 32; k++)
        if (name && !strcmp(a->kw[k], name)) {
            if (i < a->nargs) jfail(a->r->f, a->pos, "%s got '%s' twice", a->what, name);
            a->used |= 1u << k;
            return &a->kwv[k];
        }
    return i < a->nargs ? &a->args[i] : NULL;
}

static void done(jargs *a, size_t max_pos)
{
    if (a->nargs > max_pos)
        jfail(a->r->f, a->pos, "%s takes at most %zu arguments, got %zu", a->what, max_pos,
              a->nargs);
    if (a->nkw > 32) jfail(a->r->f, a->pos, "%s: too many keyword arguments", a->what);
    for (size_t k = 0; k < a->nkw; k++)
        if (!(a->used >> k & 1))
            jfail(a->r->f, a->pos, "unsupported construct: %s with the argument '%s'", a->what,
                  a->kw[k]);
}

static jv need_str(jargs *a, const jv *v, const char *name)
{
    if (!v || v->t != JV_STR)
        jfail(a->r->f, a->pos, "%s: '%s' must be a string%s", a->what, name, v ? "" : " (missing)");
    return *v;
}

static int64_t need_int(jargs *a, const jv *v, const char *name)
{
    if (!v || (v->t != JV_INT && v->t != JV_BOOL))
        jfail(a->r->f, a->pos, "%s: '%s' must be an integer%s", a->what, name,
              v ? "" : " (missing)");
    return v->i;
}

/* ------------------------------------------------------------ strings */
static int ascii_only(jv s)
{
    for (size_t i = 0; i < s.n; i++)
        if ((unsigned char)s.s[i] >= 0x80) return 0;
    return 1;
}

static int is_lower(char c) { return c >= 'a' && c <= 'z'; }
static int is_upper(char c) { return c >= 'A' && c <= 'Z'; }

/* kind: 'u' upper, 'l' lower, 'c' capitalize, 't' Python's str.title,
 * 'T' Jinja's title filter (words start after -, whitespace, ( { [ <). */
static jv casemap(jrender *r, jv s, int kind, const char *what, size_t pos)
{
    if (!ascii_only(s)) {
        /* text without letters outside ASCII maps the same; anything else
         * needs Unicode's case tables */
        jfail(r->f, pos, "unsupported construct: %s of non-ASCII text", what);
    }
    char *o = jalloc(r->f, s.n + 1);
    int prev_cased = 0, word_start = 1;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.s[i];
        int up;
        switch (kind) {
        case 'u': up = 1; break;
        case 'l': up = 0; break;
        case 'c': up = i == 0; break;
        case 't': up = !prev_cased; break;
        default: up = word_start; break;
        }
        o[i] = up && is_lower(c) ? (char)(c - 32) : !up && is_upper(c) ? (char)(c + 32) : c;
        prev_cased = is_lower(c) || is_upper(c);
        word_start = kind == 'T' && (c == '-' || c == ' ' || (c >= 9 && c <= 13) || c == '(' ||
                                     c == '{' || c == '[' || c == '<' || (c >= 0x1C && c <= 0x1F));
    }
    return jv_str(o, s.n);
}

static int in_chars(const char *s, size_t l, jv chars)
{
    for (size_t i = 0; i + l <= chars.n;) {
        size_t e = i + 1;
        while (e < chars.n && ((unsigned char)chars.s[e] & 0xC0) == 0x80) e++;
        if (e - i == l && !memcmp(chars.s + i, s, l)) return 1;
        i = e;
    }
    return 0;
}

/* str.strip / lstrip / rstrip: whitespace (str.isspace) or the code points
 * in chars. */
static jv strip(jv s, const jv *chars, int left, int right)
{
    size_t a = 0, b = s.n, l;
    while (left && a < b) {
        size_t e = a + 1;
        while (e < b && ((unsigned char)s.s[e] & 0xC0) == 0x80) e++;
        if (chars ? in_chars(s.s + a, e - a, *chars) : ju_space(s.s + a, b - a, &l)) a = e;
        else break;
    }
    while (right && b > a) {
        size_t k = b - 1;
        while (k > a && ((unsigned char)s.s[k] & 0xC0) == 0x80) k--;
        if (chars ? in_chars(s.s + k, b - k, *chars) : ju_space(s.s + k, b - k, &l)) b = k;
        else break;
    }
    return jv_str(s.s + a, b - a);
}

static const char *find(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (!memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

static jv replace(jrender *r, jv s, jv old, jv new, int64_t count)
{
    jbuf b = { r->f, NULL, 0, 0 };
    if (!old.n) { /* Python inserts `new` before each character and at the end */
        size_t i = 0;
        int64_t done_n = 0;
        while (i <= s.n) {
            if (count < 0 || done_n < count) bput(&b, new.s, new.n), done_n++;
            if (i == s.n) break;
            size_t e = i + 1;
            while (e < s.n && ((unsigned char)s.s[e] & 0xC0) == 0x80) e++;
            bput(&b, s.s + i, e - i);
            i = e;
        }
        return bval(&b);
    }
    size_t i = 0;
    int64_t done_n = 0;
    while (i <= s.n) {
        const char *hit =
            (count < 0 || done_n < count) ? find(s.s + i, s.n - i, old.s, old.n) : NULL;
        if (!hit) {
            bput(&b, s.s + i, s.n - i);
            break;
        }
        bput(&b, s.s + i, (size_t)(hit - (s.s + i)));
        bput(&b, new.s, new.n);
        i = (size_t)(hit - s.s) + old.n;
        done_n++;
    }
    return bval(&b);
}

/* str.split(sep=None, maxsplit=-1) */
static jv split(jrender *r, jv s, const jv *sep, int64_t maxsplit)
{
    jarr *out = jarr_new(r->f, 4);
    if (sep && sep->t != JV_NONE) {
        size_t i = 0;
        int64_t n = 0;
        for (;;) {
            const char *hit =
                maxsplit < 0 || n < maxsplit ? find(s.s + i, s.n - i, sep->s, sep->n) : NULL;
            if (!hit) {
                jarr_push(r->f, out, jv_str(s.s + i, s.n - i));
                break;
            }
            jarr_push(r->f, out, jv_str(s.s + i, (size_t)(hit - (s.s + i))));
            i = (size_t)(hit - s.s) + sep->n;
            n++;
        }
        return (jv){ .t = JV_LIST, .a = out };
    }
    size_t i = 0, l;
    int64_t n = 0;
    for (;;) {
        while (i < s.n && ju_space(s.s + i, s.n - i, &l)) i += l;
        if (i >= s.n) break;
        if (maxsplit >= 0 && n >= maxsplit) { /* the rest, as it is */
            jarr_push(r->f, out, jv_str(s.s + i, s.n - i));
            break;
        }
        size_t e = i;
        while (e < s.n && !ju_space(s.s + e, s.n - e, &l)) {
            e++;
            while (e < s.n && ((unsigned char)s.s[e] & 0xC0) == 0x80) e++;
        }
        jarr_push(r->f, out, jv_str(s.s + i, e - i));
        n++;
        i = e;
    }
    return (jv){ .t = JV_LIST, .a = out };
}

/* str.splitlines(): Python's line boundaries, ends dropped. */
static size_t line_break(const char *s, size_t n)
{
    unsigned char c = (unsigned char)s[0];
    if (c == '\r') return n > 1 && s[1] == '\n' ? 2 : 1;
    if (c == '\n' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E)) return 1;
    if (n > 1 && c == 0xC2 && (unsigned char)s[1] == 0x85) return 2;
    if (n > 2 && c == 0xE2 && (unsigned char)s[1] == 0x80 &&
        ((unsigned char)s[2] == 0xA8 || (unsigned char)s[2] == 0xA9))
        return 3;
    return 0;
}

static jarr *splitlines(jrender *r, jv s)
{
    jarr *out = jarr_new(r->f, 4);
    size_t a = 0;
    for (size_t i = 0; i < s.n;) {
        size_t l = line_break(s.s + i, s.n - i);
        if (!l) {
            i++;
            continue;
        }
        jarr_push(r->f, out, jv_str(s.s + a, i - a));
        i += l;
        a = i;
    }
    if (a < s.n) jarr_push(r->f, out, jv_str(s.s + a, s.n - a));
    return out;
}

static int starts(jv s, jv p, int end)
{
    if (p.n > s.n) return 0;
    return !memcmp(end ? s.s + s.n - p.n : s.s, p.s, p.n);
}

/* ------------------------------------------------------------ sequences */
/* The elements `for` would walk (generators and views are lists here). */
static jarr *elements(jrender *r, jv v, const char *what, size_t pos)
{
    if (v.t == JV_LIST || v.t == JV_TUPLE) return v.a;
    jarr *a = jarr_new(r->f, 4);
    if (v.t == JV_UNDEF) return a;
    if (v.t == JV_DICT) {
        for (size_t i = 0; i < v.a->n; i++) jarr_push(r->f, a, v.a->k[i]);
        return a;
    }
    if (v.t == JV_STR) {
        jarr_push_chars(r->f, a, v.s, v.n);
        return a;
    }
    jfail(r->f, pos, "%s: cannot iterate over a value of type %s", what, jv_type_name(v));
}

static jv list_of(jarr *a) { return (jv){ .t = JV_LIST, .a = a }; }

/* Jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0. */
static jv get_path(jrender *r, jv v, jv path, size_t pos)
{
    size_t i = 0;
    while (i <= path.n) {
        size_t e = i;
        while (e < path.n && path.s[e] != '.') e++;
        int digit = e > i;
        for (size_t k = i; k < e; k++) digit &= path.s[k] >= '0' && path.s[k] <= '9';
        jv key = jv_str(path.s + i, e - i);
        if (digit) key = jv_int(strtoll(key.s, NULL, 10));
        if (v.t == JV_UNDEF) jfail(r->f, pos, "attribute access of an undefined value");
        if (v.t == JV_DICT || v.t == JV_NS) {
            jv *x = jdict_get(v.a, key);
            v = x ? *x : jv_undef(NULL);
        } else if ((v.t == JV_LIST || v.t == JV_TUPLE) && digit) {
            v = key.i < (int64_t)v.a->n ? v.a->v[key.i] : jv_undef(NULL);
        } else v = jv_undef(NULL);
        i = e + 1;
    }
    return v;
}

/* ------------------------------------------------------------ tests */
int jinja_test(jrender *r, const char *name, jv v, const jv *args, size_t nargs, size_t pos)
{
    jargs a = { r, "test", args, nargs, NULL, NULL, 0, pos, 0 };
    if (!strcmp(name, "defined")) return v.t != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == JV_UNDEF;
    if (!strcmp(name, "none")) return v.t == JV_NONE;
    if (!strcmp(name, "string")) return v.t == JV_STR;
    if (!strcmp(name, "mapping")) return v.t == JV_DICT;
    if (!strcmp(name, "number")) return v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT;
    if (!strcmp(name, "integer")) return v.t == JV_INT;
    if (!strcmp(name, "float")) return v.t == JV_FLOAT;
    if (!strcmp(name, "boolean")) return v.t == JV_BOOL;
    if (!strcmp(name, "true")) return v.t == JV_BOOL && v.i;
    if (!strcmp(name, "false")) return v.t == JV_BOOL && !v.i;
    if (!strcmp(name, "callable")) return v.t == JV_MACRO || v.t == JV_FUNC;
    if (!strcmp(name, "iterable") || !strcmp(name, "sequence"))
        return v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_LIST || v.t == JV_TUPLE ||
               v.t == JV_DICT;
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        int64_t x = need_int(&a, &v, "value"), d = 2;
        if (!strcmp(name, "divisibleby")) {
            d = need_int(&a, arg(&a, 0, NULL), "num");
            if (!d) jfail(r->f, pos, "divisibleby 0");
            done(&a, 1);
        } else done(&a, 0);
        int64_t m = d == -1 ? 0 : x % d;
        return !strcmp(name, "odd") ? m != 0 : m == 0;
    }
    static const struct {
        const char *name;
        int op;
    } cmps[] = { { "eq", JOP_EQ },       { "equalto", JOP_EQ }, { "==", JOP_EQ },
                 { "ne", JOP_NE },       { "!=", JOP_NE },      { "lt", JOP_LT },
                 { "lessthan", JOP_LT }, { "<", JOP_LT },       { "le", JOP_LE },
                 { "<=", JOP_LE },       { "gt", JOP_GT },      { "greaterthan", JOP_GT },
                 { ">", JOP_GT },        { "ge", JOP_GE },      { ">=", JOP_GE },
                 { "in", JOP_IN } };
    for (size_t k = 0; k < sizeof cmps / sizeof cmps[0]; k++) {
        if (strcmp(name, cmps[k].name)) continue;
        const jv *o = arg(&a, 0, NULL);
        if (!o) jfail(r->f, pos, "test '%s' needs an argument", name);
        done(&a, 1);
        int op = cmps[k].op;
        if (op == JOP_EQ) return jv_eq(v, *o);
        if (op == JOP_NE) return !jv_eq(v, *o);
        if (op == JOP_IN) {
            if (o->t == JV_STR && v.t == JV_STR) return find(o->s, o->n, v.s, v.n) != NULL || !v.n;
            if (o->t == JV_LIST || o->t == JV_TUPLE) {
                for (size_t i = 0; i < o->a->n; i++)
                    if (jv_eq(v, o->a->v[i])) return 1;
                return 0;
            }
            if (o->t == JV_DICT) return jdict_get(o->a, v) != NULL;
            jfail(r->f, pos, "unsupported construct: test 'in' on a %s", jv_type_name(*o));
        }
        int c = jv_cmp(v, *o);
        if (c == -3) return 0;
        if (c == -2)
            jfail(r->f, pos, "test '%s': %s and %s do not compare", name, jv_type_name(v),
                  jv_type_name(*o));
        return op == JOP_LT ? c < 0 : op == JOP_LE ? c <= 0 : op == JOP_GT ? c > 0 : c >= 0;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        jv s = jv_to_str(r, v, pos);
        if (!ascii_only(s))
            jfail(r->f, pos, "unsupported construct: test '%s' of non-ASCII text", name);
        int cased = 0, ok = 1, up = name[0] == 'u';
        for (size_t i = 0; i < s.n; i++) {
            if (is_lower(s.s[i]) || is_upper(s.s[i])) cased = 1;
            if (up ? is_lower(s.s[i]) : is_upper(s.s[i])) ok = 0;
        }
        return cased && ok;
    }
    jfail(r->f, pos, "unsupported construct: the test 'is %s'", name);
}

/* ------------------------------------------------------------ filters */
static jv select_items(jrender *r, jv v, jargs *a, int by_attr, int keep)
{
    jarr *in = elements(r, v, a->what, a->pos), *out = jarr_new(r->f, in->n);
    size_t first = by_attr ? 1 : 0;
    jv path = by_attr ? need_str(a, arg(a, 0, NULL), "attribute") : jv_str("", 0);
    const jv *test = arg(a, first, NULL);
    if (test && test->t != JV_STR) jfail(r->f, a->pos, "%s: the test must be a name", a->what);
    char *tname = test ? jstrdup(r->f, test->s, test->n) : NULL;
    size_t targs = a->nargs > first + 1 ? a->nargs - first - 1 : 0;
    done(a, a->nargs);
    for (size_t i = 0; i < in->n; i++) {
        jv x = by_attr ? get_path(r, in->v[i], path, a->pos) : in->v[i];
        int ok = tname ? jinja_test(r, tname, x, a->args + first + 1, targs, a->pos) : jv_truthy(x);
        if (ok == keep) jarr_push(r->f, out, in->v[i]);
    }
    return (jv){ .t = JV_LIST, .a = out, .n = 2 }; /* Jinja2 returns a generator */
}

jv jinja_filter(jrender *r, const char *name, jv v, const jv *args, size_t nargs,
                const char *const *kw, const jv *kwv, size_t nkw, size_t pos)
{
    char what[64];
    snprintf(what, sizeof what, "filter '%.40s'", name);
    jargs a = { r, what, args, nargs, kw, kwv, nkw, pos, 0 };
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        const jv *dv = arg(&a, 0, "default_value");
        const jv *bo = arg(&a, 1, "boolean");
        done(&a, 2);
        int use = bo && jv_truthy(*bo) ? !jv_truthy(v) : v.t == JV_UNDEF;
        return use ? (dv ? *dv : jv_str("", 0)) : v;
    }
    if (!strcmp(name, "trim")) {
        const jv *chars = arg(&a, 0, "chars");
        done(&a, 1);
        if (chars && chars->t != JV_NONE && chars->t != JV_STR)
            jfail(r->f, pos, "filter 'trim': chars must be a string");
        return strip(jv_to_str(r, v, pos), chars && chars->t == JV_STR ? chars : NULL, 1, 1);
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        done(&a, 0);
        if (v.t == JV_STR) return jv_int((int64_t)ju_count(v.s, v.n));
        if ((v.t == JV_LIST || v.t == JV_TUPLE) && v.n != 2) return jv_int((int64_t)v.a->n);
        if (v.t == JV_DICT) return jv_int((int64_t)v.a->n);
        if (v.t == JV_UNDEF) return jv_int(0);
        jfail(r->f, pos, "filter '%s': a %s has no length", name, jv_type_name(v));
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") ||
        !strcmp(name, "title")) {
        done(&a, 0);
        int kind = name[0] == 'u' ? 'u' : name[0] == 'l' ? 'l' : name[0] == 'c' ? 'c' : 'T';
        return casemap(r, jv_to_str(r, v, pos), kind, what, pos);
    }
    if (!strcmp(name, "string")) {
        done(&a, 0);
        return jv_to_str(r, v, pos);
    }
    if (!strcmp(name, "tojson")) {
        const jv *asc = arg(&a, 0, "ensure_ascii"), *ind = arg(&a, 1, "indent");
        const jv *sep = arg(&a, 2, "separators"), *sk = arg(&a, 3, "sort_keys");
        done(&a, 4);
        if (sep && sep->t != JV_NONE) jfail(r->f, pos, "unsupported construct: tojson separators");
        json_opts o = { r, pos, NULL, sk && jv_truthy(*sk), asc && jv_truthy(*asc) };
        if (ind && ind->t == JV_STR) o.indent = jstrdup(r->f, ind->s, ind->n);
        else if (ind && ind->t != JV_NONE) {
            int64_t n = need_int(&a, ind, "indent");
            if (n > 64) jfail(r->f, pos, "tojson: indent above 64");
            char *s = jalloc(r->f, (size_t)(n > 0 ? n : 0) + 1);
            for (int64_t i = 0; i < n; i++) s[i] = ' ';
            o.indent = s;
        }
        jbuf b = { r->f, NULL, 0, 0 };
        tojson_into(&b, &o, v, 0);
        return bval(&b);
    }
    if (!strcmp(name, "items")) {
        done(&a, 0);
        jarr *out = jarr_new(r->f, 4);
        if (v.t != JV_UNDEF) {
            if (v.t != JV_DICT)
                jfail(r->f, pos, "filter 'items': a %s is not a mapping", jv_type_name(v));
            for (size_t i = 0; i < v.a->n; i++) {
                jarr *p = jarr_new(r->f, 2);
                jarr_push(r->f, p, v.a->k[i]);
                jarr_push(r->f, p, v.a->v[i]);
                jarr_push(r->f, out, (jv){ .t = JV_TUPLE, .a = p });
            }
        }
        return (jv){ .t = JV_LIST, .a = out, .n = 2 }; /* a generator */
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        done(&a, 0);
        if (v.t == JV_LIST && v.n == 2 && name[0] == 'l')
            jfail(r->f, pos, "filter 'last' of a generator");
        jarr *e = elements(r, v, what, pos);
        if (!e->n) return jv_undef(NULL);
        return name[0] == 'f' ? e->v[0] : e->v[e->n - 1];
    }
    if (!strcmp(name, "list")) {
        done(&a, 0);
        jarr *e = elements(r, v, what, pos), *c = jarr_new(r->f, e->n);
        for (size_t i = 0; i < e->n; i++) jarr_push(r->f, c, e->v[i]);
        return list_of(c);
    }
    if (!strcmp(name, "reverse")) {
        done(&a, 0);
        if (v.t == JV_STR) {
            jarr *e = elements(r, v, what, pos);
            jbuf b = { r->f, NULL, 0, 0 };
            for (size_t i = e->n; i-- > 0;) bput(&b, e->v[i].s, e->v[i].n);
            return bval(&b);
        }
        jarr *e = elements(r, v, what, pos), *c = jarr_new(r->f, e->n);
        for (size_t i = e->n; i-- > 0;) jarr_push(r->f, c, e->v[i]);
        return (jv){ .t = JV_LIST, .a = c, .n = 2 }; /* an iterator */
    }
    if (!strcmp(name, "join")) {
        const jv *d = arg(&a, 0, "d"), *at = arg(&a, 1, "attribute");
        done(&a, 2);
        jv sep = d ? jv_to_str(r, *d, pos) : jv_str("", 0);
        jarr *e = elements(r, v, what, pos);
        jbuf b = { r->f, NULL, 0, 0 };
        for (size_t i = 0; i < e->n; i++) {
            if (i) bput(&b, sep.s, sep.n);
            jv x = at && at->t != JV_NONE ? get_path(r, e->v[i], jv_to_str(r, *at, pos), pos)
                                          : e->v[i];
            jv s = jv_to_str(r, x, pos);
            bput(&b, s.s, s.n);
        }
        return bval(&b);
    }
    if (!strcmp(name, "replace")) {
        jv s = jv_to_str(r, v, pos);
        const jv *o = arg(&a, 0, "old"), *n = arg(&a, 1, "new"), *c = arg(&a, 2, "count");
        done(&a, 3);
        if (!o || !n) jfail(r->f, pos, "filter 'replace' needs old and new");
        return replace(r, s, jv_to_str(r, *o, pos), jv_to_str(r, *n, pos),
                       c && c->t != JV_NONE ? need_int(&a, c, "count") : -1);
    }
    if (!strcmp(name, "int")) {
        const jv *d = arg(&a, 0, "default"), *base = arg(&a, 1, "base");
        done(&a, 2);
        if (base && !(base->t == JV_INT && base->i == 10))
            jfail(r->f, pos, "unsupported construct: filter 'int' with a base other than 10");
        if (v.t == JV_INT) return v;
        if (v.t == JV_BOOL) return jv_int(v.i);
        if (v.t == JV_UNDEF)
            jfail(r->f, pos, "filter 'int' of an undefined value"); /* int(Undefined) raises */
        if (v.t == JV_FLOAT && v.f > -9.2e18 && v.f < 9.2e18) return jv_int((int64_t)v.f);
        if (v.t == JV_STR) {
            jv s = strip(v, NULL, 1, 1);
            size_t i = 0;
            int neg = 0;
            if (i < s.n && (s.s[i] == '+' || s.s[i] == '-')) neg = s.s[i++] == '-';
            int64_t x = 0;
            int ok = i < s.n;
            for (; i < s.n && ok; i++) {
                if (s.s[i] < '0' || s.s[i] > '9' || x > (INT64_MAX - 9) / 10) ok = 0;
                else x = x * 10 + (s.s[i] - '0');
            }
            if (ok) return jv_int(neg ? -x : x);
            /* int(float(s)) and the other spellings Python reads: refused */
            for (size_t k = 0; k < s.n; k++)
                if (s.s[k] == '.' || s.s[k] == 'e' || s.s[k] == 'E' || s.s[k] == '_' ||
                    (unsigned char)s.s[k] >= 0x80 ||
                    ((s.s[k] | 0x20) >= 'a' && (s.s[k] | 0x20) <= 'z'))
                    jfail(r->f, pos, "unsupported construct: filter 'int' of the string this is");
        }
        if (v.t == JV_NONE || v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_TUPLE)
            return d ? *d : jv_int(0);
        jfail(r->f, pos, "unsupported construct: filter 'int' of a %s", jv_type_name(v));
    }
    if (!strcmp(name, "abs")) {
        done(&a, 0);
        if (v.t == JV_INT || v.t == JV_BOOL) {
            if (v.i == INT64_MIN) jfail(r->f, pos, "integer overflow beyond 64 bits");
            return jv_int(v.i < 0 ? -v.i : v.i);
        }
        if (v.t == JV_FLOAT) return (jv){ .t = JV_FLOAT, .f = v.f < 0 ? -v.f : v.f };
        jfail(r->f, pos, "filter 'abs' of a %s", jv_type_name(v));
    }
    if (!strcmp(name, "indent")) {
        const jv *w = arg(&a, 0, "width"), *first = arg(&a, 1, "first"),
                 *blank = arg(&a, 2, "blank");
        done(&a, 3);
        jv ind;
        if (w && w->t == JV_STR) ind = *w;
        else {
            int64_t n = w ? need_int(&a, w, "width") : 4;
            if (n > 1000) jfail(r->f, pos, "filter 'indent': width above 1000");
            char *s = jalloc(r->f, (size_t)(n > 0 ? n : 0) + 1);
            for (int64_t i = 0; i < n; i++) s[i] = ' ';
            ind = jv_str(s, (size_t)(n > 0 ? n : 0));
        }
        if (v.t != JV_STR) /* s += "\n" raises for anything but a string */
            jfail(r->f, pos, "filter 'indent' of a %s", jv_type_name(v));
        jv s = jv_to_str(r, v, pos);
        jv s2 = jv_str(jalloc(r->f, s.n + 2), s.n + 1); /* s += "\n" */
        memcpy((char *)s2.s, s.s, s.n);
        ((char *)s2.s)[s.n] = '\n';
        jarr *lines = splitlines(r, s2);
        jbuf b = { r->f, NULL, 0, 0 };
        if (first && jv_truthy(*first)) bput(&b, ind.s, ind.n);
        for (size_t i = 0; i < lines->n; i++) {
            jv l = lines->v[i];
            if (i) bstr(&b, "\n");
            if (i && (l.n || (blank && jv_truthy(*blank)))) bput(&b, ind.s, ind.n);
            bput(&b, l.s, l.n);
        }
        return bval(&b);
    }
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
        return select_items(r, v, &a, 1, name[0] == 's');
    if (!strcmp(name, "select") || !strcmp(name, "reject"))
        return select_items(r, v, &a, 0, name[0] == 's');
    if (!strcmp(name, "map")) {
        jarr *in = elements(r, v, what, pos), *out = jarr_new(r->f, in->n);
        if (nargs == 0) {
            const jv *at = arg(&a, 0, "attribute"), *df = arg(&a, 1, "default");
            done(&a, 0);
            if (!at) jfail(r->f, pos, "filter 'map' needs a filter name or attribute=");
            jv path = jv_to_str(r, *at, pos);
            for (size_t i = 0; i < in->n; i++) {
                jv x = get_path(r, in->v[i], path, pos);
                jarr_push(r->f, out, x.t == JV_UNDEF && df ? *df : x);
            }
        } else {
            jv fname = need_str(&a, arg(&a, 0, NULL), "filter");
            char *fn = jstrdup(r->f, fname.s, fname.n);
            for (size_t i = 0; i < in->n; i++)
                jarr_push(r->f, out,
                          jinja_filter(r, fn, in->v[i], args + 1, nargs - 1, kw, kwv, nkw, pos));
        }
        return (jv){ .t = JV_LIST, .a = out, .n = 2 }; /* a generator */
    }
    if (!strcmp(name, "attr")) {
        jv n = need_str(&a, arg(&a, 0, NULL), "name");
        done(&a, 1);
        if (v.t == JV_DICT) return jv_undef(NULL); /* attr() never reads items */
        (void)n;
        jfail(r->f, pos, "unsupported construct: filter 'attr' of a %s", jv_type_name(v));
    }
    jfail(r->f, pos, "unsupported construct: the filter '%s'", name);
}

/* ------------------------------------------------------------ methods */
int jinja_is_method(jv v, const char *name)
{
    static const char *const str_m[] = {
        "startswith", "endswith",   "strip",        "lstrip",       "rstrip",     "split",
        "rsplit",     "replace",    "upper",        "lower",        "title",      "capitalize",
        "find",       "rfind",      "index",        "rindex",       "count",      "join",
        "splitlines", "format",     "isdigit",      "isalpha",      "isspace",    "islower",
        "isupper",    "isalnum",    "isnumeric",    "isdecimal",    "zfill",      "center",
        "ljust",      "rjust",      "partition",    "rpartition",   "casefold",   "swapcase",
        "encode",     "expandtabs", "removeprefix", "removesuffix", "format_map", "translate",
        "maketrans",  "istitle",    "isidentifier", "isprintable",  "isascii",    NULL
    };
    static const char *const dict_m[] = { "get",   "items",   "keys",     "values",
                                          "pop",   "popitem", "update",   "setdefault",
                                          "clear", "copy",    "fromkeys", NULL };
    static const char *const list_m[] = { "append", "extend", "insert", "remove",  "pop",  "clear",
                                          "index",  "count",  "sort",   "reverse", "copy", NULL };
    const char *const *m = v.t == JV_STR     ? str_m
                           : v.t == JV_DICT  ? dict_m
                           : v.t == JV_LIST  ? list_m
                           : v.t == JV_TUPLE ? list_m + 7
                                             : NULL;
    if (v.t == JV_TUPLE) { /* tuples: index, count */
        return !strcmp(name, "index") || !strcmp(name, "count");
    }
    for (; m && *m; m++)
        if (!strcmp(*m, name)) return 1;
    return 0;
}

jv jinja_method(jrender *r, jv o, const char *name, const jv *args, size_t nargs,
                const char *const *kw, const jv *kwv, size_t nkw, size_t pos)
{
    char what[64];
    snprintf(what, sizeof what, "%s.%.30s()", jv_type_name(o), name);
    jargs a = { r, what, args, nargs, kw, kwv, nkw, pos, 0 };
    if (o.t == JV_STR) {
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            const jv *p = arg(&a, 0, NULL);
            done(&a, 1);
            if (p && (p->t == JV_TUPLE)) {
                for (size_t i = 0; i < p->a->n; i++) {
                    if (p->a->v[i].t != JV_STR)
                        jfail(r->f, pos, "%s: a tuple of strings expected", what);
                    if (starts(o, p->a->v[i], name[0] == 'e')) return jv_bool(1);
                }
                return jv_bool(0);
            }
            return jv_bool(starts(o, need_str(&a, p, "prefix"), name[0] == 'e'));
        }
        if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
            const jv *c = arg(&a, 0, NULL);
            done(&a, 1);
            if (c && c->t != JV_NONE) need_str(&a, c, "chars");
            return strip(o, c && c->t == JV_STR ? c : NULL, name[0] != 'r', name[0] != 'l');
        }
        if (!strcmp(name, "split")) {
            const jv *sep = arg(&a, 0, "sep"), *mx = arg(&a, 1, "maxsplit");
            done(&a, 2);
            if (sep && sep->t != JV_NONE) {
                need_str(&a, sep, "sep");
                if (!sep->n) jfail(r->f, pos, "%s: empty separator", what);
            }
            return split(r, o, sep, mx ? need_int(&a, mx, "maxsplit") : -1);
        }
        if (!strcmp(name, "replace")) {
            const jv *x = arg(&a, 0, NULL), *y = arg(&a, 1, NULL), *c = arg(&a, 2, "count");
            done(&a, 3);
            return replace(r, o, need_str(&a, x, "old"), need_str(&a, y, "new"),
                           c ? need_int(&a, c, "count") : -1);
        }
        if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") ||
            !strcmp(name, "capitalize")) {
            done(&a, 0);
            int kind = name[0] == 'u' ? 'u' : name[0] == 'l' ? 'l' : name[0] == 't' ? 't' : 'c';
            return casemap(r, o, kind, what, pos);
        }
        if (!strcmp(name, "find") || !strcmp(name, "count")) {
            jv n = need_str(&a, arg(&a, 0, NULL), "sub");
            done(&a, 1);
            if (name[0] == 'f') {
                const char *h = find(o.s, o.n, n.s, n.n);
                return jv_int(h ? (int64_t)ju_count(o.s, (size_t)(h - o.s)) : -1);
            }
            if (!n.n) return jv_int((int64_t)ju_count(o.s, o.n) + 1);
            int64_t c = 0;
            for (const char *h = o.s; (h = find(h, o.n - (size_t)(h - o.s), n.s, n.n)); h += n.n)
                c++;
            return jv_int(c);
        }
        if (!strcmp(name, "join")) {
            const jv *it = arg(&a, 0, NULL);
            done(&a, 1);
            if (!it) jfail(r->f, pos, "%s needs an iterable", what);
            jarr *e = elements(r, *it, what, pos);
            jbuf b = { r->f, NULL, 0, 0 };
            for (size_t i = 0; i < e->n; i++) {
                if (e->v[i].t != JV_STR)
                    jfail(r->f, pos, "%s: item %zu is a %s, not a string", what, i,
                          jv_type_name(e->v[i]));
                if (i) bput(&b, o.s, o.n);
                bput(&b, e->v[i].s, e->v[i].n);
            }
            return bval(&b);
        }
        if (!strcmp(name, "splitlines")) {
            done(&a, 0);
            return list_of(splitlines(r, o));
        }
    } else if (o.t == JV_DICT) {
        if (!strcmp(name, "get")) {
            const jv *k = arg(&a, 0, NULL), *d = arg(&a, 1, NULL);
            done(&a, 2);
            if (!k) jfail(r->f, pos, "%s needs a key", what);
            jv *x = jdict_get(o.a, *k);
            return x ? *x : d ? *d : jv_none();
        }
        if (!strcmp(name, "items") || !strcmp(name, "keys") || !strcmp(name, "values")) {
            done(&a, 0);
            jarr *out = jarr_new(r->f, o.a->n);
            for (size_t i = 0; i < o.a->n; i++) {
                if (name[0] == 'k') jarr_push(r->f, out, o.a->k[i]);
                else if (name[0] == 'v') jarr_push(r->f, out, o.a->v[i]);
                else {
                    jarr *p = jarr_new(r->f, 2);
                    jarr_push(r->f, p, o.a->k[i]);
                    jarr_push(r->f, p, o.a->v[i]);
                    jarr_push(r->f, out, (jv){ .t = JV_TUPLE, .a = p });
                }
            }
            return (jv){ .t = JV_LIST, .a = out, .n = 1 }; /* a view */
        }
        if (!strcmp(name, "pop") || !strcmp(name, "popitem") || !strcmp(name, "update") ||
            !strcmp(name, "setdefault") || !strcmp(name, "clear"))
            jfail(r->f, pos, "%s modifies a dict, which the sandbox forbids", what);
    } else if (o.t == JV_LIST || o.t == JV_TUPLE) {
        if (!strcmp(name, "append") || !strcmp(name, "extend") || !strcmp(name, "insert") ||
            !strcmp(name, "remove") || !strcmp(name, "pop") || !strcmp(name, "clear") ||
            !strcmp(name, "sort") || !strcmp(name, "reverse"))
            jfail(r->f, pos, "%s modifies a list, which the sandbox forbids", what);
        if (!strcmp(name, "count")) {
            const jv *x = arg(&a, 0, NULL);
            done(&a, 1);
            if (!x) jfail(r->f, pos, "%s needs a value", what);
            int64_t c = 0;
            for (size_t i = 0; i < o.a->n; i++) c += jv_eq(o.a->v[i], *x);
            return jv_int(c);
        }
    }
    jfail(r->f, pos, "unsupported construct: the method %s", what);
}

/* ------------------------------------------------------------ globals */
static const char *const MONTHS[] = { "January",   "February", "March",    "April",
                                      "May",       "June",     "July",     "August",
                                      "September", "October",  "November", "December" };
static const char *const DAYS[] = { "Sunday",   "Monday", "Tuesday", "Wednesday",
                                    "Thursday", "Friday", "Saturday" };

static jv strftime_pinned(jrender *r, jv fmt, size_t pos)
{
    static const int t[] = { 0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4 };
    int y = r->date_y, m = r->date_m, d = r->date_d, yy = m < 3 ? y - 1 : y;
    int wday = (yy + yy / 4 - yy / 100 + yy / 400 + t[m - 1] + d) % 7; /* 0: Sunday */
    static const int cum[] = { 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334 };
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    int yday = cum[m - 1] + d + (leap && m > 2);
    jbuf b = { r->f, NULL, 0, 0 };
    char tmp[32];
    for (size_t i = 0; i < fmt.n; i++) {
        if (fmt.s[i] != '%') {
            bput(&b, fmt.s + i, 1);
            continue;
        }
        if (++i >= fmt.n) jfail(r->f, pos, "strftime_now: a format ending in '%%'");
        int nopad = fmt.s[i] == '-' && i + 1 < fmt.n;
        if (nopad) i++;
        switch (fmt.s[i]) {
        case 'd': snprintf(tmp, sizeof tmp, nopad ? "%d" : "%02d", d); break;
        case 'm': snprintf(tmp, sizeof tmp, nopad ? "%d" : "%02d", m); break;
        case 'Y': snprintf(tmp, sizeof tmp, "%d", y); break;
        case 'y': snprintf(tmp, sizeof tmp, nopad ? "%d" : "%02d", y % 100); break;
        case 'j': snprintf(tmp, sizeof tmp, nopad ? "%d" : "%03d", yday); break;
        case 'B': snprintf(tmp, sizeof tmp, "%s", MONTHS[m - 1]); break;
        case 'b': snprintf(tmp, sizeof tmp, "%.3s", MONTHS[m - 1]); break;
        case 'A': snprintf(tmp, sizeof tmp, "%s", DAYS[wday]); break;
        case 'a': snprintf(tmp, sizeof tmp, "%.3s", DAYS[wday]); break;
        case '%': snprintf(tmp, sizeof tmp, "%%"); break;
        default:
            jfail(r->f, pos,
                  "unsupported construct: strftime_now format %%%c (the date is pinned; no time of "
                  "day)",
                  (unsigned char)fmt.s[i] >= 0x20 && (unsigned char)fmt.s[i] < 0x7F ? fmt.s[i]
                                                                                    : '?');
        }
        bstr(&b, tmp);
    }
    return bval(&b);
}

jv jinja_call_global(jrender *r, int fn, const jv *args, size_t nargs, const char *const *kw,
                     const jv *kwv, size_t nkw, size_t pos)
{
    static const char *const names[] = { "range()", "namespace()", "raise_exception()",
                                         "strftime_now()" };
    jargs a = { r, names[fn], args, nargs, kw, kwv, nkw, pos, 0 };
    switch (fn) {
    case JF_RANGE: {
        done(&a, 3);
        if (!nargs) jfail(r->f, pos, "range() needs an argument");
        int64_t lo = 0, hi, st = 1;
        if (nargs == 1) hi = need_int(&a, &args[0], "stop");
        else {
            lo = need_int(&a, &args[0], "start");
            hi = need_int(&a, &args[1], "stop");
            if (nargs == 3) st = need_int(&a, &args[2], "step");
        }
        if (!st) jfail(r->f, pos, "range() step must not be zero");
        jarr *out = jarr_new(r->f, 4);
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
            if (out->n >= 100000) /* the sandbox's MAX_RANGE */
                jfail(r->f, pos, "range() of more than 100000 items (the sandbox's limit)");
            jarr_push(r->f, out, jv_int(i));
            if ((st > 0 && i > INT64_MAX - st) || (st < 0 && i < INT64_MIN - st)) break;
        }
        return (jv){ .t = JV_LIST, .a = out, .n = 1 }; /* a range object */
    }
    case JF_NAMESPACE: {
        jarr *d = jarr_new(r->f, nkw + 1);
        if (nargs > 1) jfail(r->f, pos, "namespace() takes at most one positional argument");
        if (nargs == 1) {
            if (args[0].t != JV_DICT)
                jfail(r->f, pos, "namespace(): the positional argument must be a dict");
            for (size_t i = 0; i < args[0].a->n; i++)
                jdict_set(r->f, d, args[0].a->k[i], args[0].a->v[i]);
        }
        for (size_t i = 0; i < nkw; i++) jdict_set(r->f, d, jv_str(kw[i], strlen(kw[i])), kwv[i]);
        return (jv){ .t = JV_NS, .a = d };
    }
    case JF_RAISE: {
        const jv *m = arg(&a, 0, "message");
        done(&a, 1);
        jv s = m ? jv_to_str(r, *m, pos) : jv_str("", 0);
        jfail(r->f, pos, "the template raised an exception: %.*s", (int)(s.n > 300 ? 300 : s.n),
              s.s);
    }
    default: {
        jv f = need_str(&a, arg(&a, 0, "format"), "format");
        done(&a, 1);
        return strftime_pinned(r, f, pos);
    }
    }
}
