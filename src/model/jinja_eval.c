/* The Jinja evaluator: statements and expressions over jinja.h's values with
 * Jinja2 3.1's semantics. Scopes as Jinja2's: each for-loop iteration and
 * each macro call gets a frame of its own (a `set` there is gone after it;
 * `if` opens none), lookups walk out to the render's variables and then the
 * globals; attribute and item lookup as Jinja2's sandbox getattr/getitem
 * (a missing key or attribute is Undefined; anything done to an Undefined
 * but printing, testing, iterating or comparing it fails, as jinja2's default
 * Undefined). Bounded: steps (statements, iterations, calls), macro depth,
 * output bytes and arena bytes. */
#include "model/jinja.h"
#include "cis2.h"
#include "core/core.h"
#include "core/json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jinja_tpl {
    jarena arena;
    const char *src;
    size_t src_len;
    jnode *body;
};

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static void step(jrender *r, size_t pos)
{
    if (++r->steps > JINJA_MAX_STEPS)
        jfail(r->f, pos, "the template runs more than %lld steps", (long long)JINJA_MAX_STEPS);
}

static void out_put(jrender *r, const char *s, size_t n, size_t pos)
{
    if (!n) return;
    if (r->out.len + n > JINJA_MAX_OUTPUT)
        jfail(r->f, pos, "the rendering is longer than %zu MiB", JINJA_MAX_OUTPUT >> 20);
    if (r->out.len + n + 1 > r->out.cap) {
        size_t cap = r->out.cap ? r->out.cap : 4096;
        while (cap < r->out.len + n + 1) cap *= 2;
        char *b = realloc(r->out.b, cap);
        if (!b) jfail(r->f, SIZE_MAX, "out of memory");
        r->out.b = b;
        r->out.cap = cap;
    }
    memcpy(r->out.b + r->out.len, s, n);
    r->out.len += n;
}

/* ------------------------------------------------------------ frames */
static jframe *frame_new(jrender *r, jframe *up)
{
    jframe *f = jalloc(r->f, sizeof *f);
    f->up = up;
    f->vars = jarr_new(r->f, 4);
    return f;
}

static jv *lookup(jframe *fr, const char *name)
{
    jv key = jv_str(name, strlen(name));
    for (; fr; fr = fr->up) {
        jv *v = jdict_get(fr->vars, key);
        if (v) return v;
    }
    return NULL;
}

static void assign(jrender *r, jframe *fr, const char *name, jv v)
{
    jdict_set(r->f, fr->vars, jv_str(name, strlen(name)), v);
}

/* ------------------------------------------------------------ errors */
_Noreturn static void undefined_use(jrender *r, jv v, size_t pos, const char *what)
{
    jfail(r->f, pos, "%s of an undefined value%s%s%s", what, v.s ? " ('" : "", v.s ? v.s : "",
          v.s ? "' is undefined)" : "");
}

/* ------------------------------------------------------------ lookups */
static jv attr(jrender *r, jv v, const char *name, size_t pos)
{
    if (name[0] == '_')
        jfail(r->f, pos,
              "unsupported construct: attribute '%s' (underscore names are unsafe in the sandbox)",
              name);
    if (v.t == JV_UNDEF) undefined_use(r, v, pos, "attribute access");
    if (jinja_is_method(v, name))
        jfail(r->f, pos, "unsupported construct: the method '%s' used as a value (call it)", name);
    jv key = jv_str(name, strlen(name));
    if (v.t == JV_DICT || v.t == JV_NS) {
        jv *x = jdict_get(v.a, key);
        return x ? *x : jv_undef(name);
    }
    if (v.t == JV_LOOP) {
        int64_t i = v.i, n = (int64_t)v.a->n;
        if (!strcmp(name, "index0")) return jv_int(i);
        if (!strcmp(name, "index")) return jv_int(i + 1);
        if (!strcmp(name, "revindex0")) return jv_int(n - i - 1);
        if (!strcmp(name, "revindex")) return jv_int(n - i);
        if (!strcmp(name, "first")) return jv_bool(i == 0);
        if (!strcmp(name, "last")) return jv_bool(i == n - 1);
        if (!strcmp(name, "length")) return jv_int(n);
        if (!strcmp(name, "depth")) return jv_int(1);
        if (!strcmp(name, "depth0")) return jv_int(0);
        if (!strcmp(name, "previtem")) return i > 0 ? v.a->v[i - 1] : jv_undef("previtem");
        if (!strcmp(name, "nextitem")) return i + 1 < n ? v.a->v[i + 1] : jv_undef("nextitem");
        jfail(r->f, pos, "unsupported construct: loop.%s", name);
    }
    if (v.t == JV_MACRO || v.t == JV_FUNC)
        jfail(r->f, pos, "unsupported construct: attribute '%s' of a %s", name, jv_type_name(v));
    return jv_undef(name); /* str, list, int, None...: Python has no such attribute */
}

static int64_t as_index(jrender *r, jv k, size_t pos, const char *what)
{
    if (k.t == JV_INT || k.t == JV_BOOL) return k.i;
    jfail(r->f, pos, "%s must be an integer, got %s", what, jv_type_name(k));
}

static jv item(jrender *r, jv v, jv k, size_t pos)
{
    if (v.t == JV_UNDEF) undefined_use(r, v, pos, "subscript");
    if (v.t == JV_DICT) {
        if (k.t != JV_STR && k.t != JV_INT && k.t != JV_BOOL && k.t != JV_NONE && k.t != JV_FLOAT &&
            k.t != JV_TUPLE)
            jfail(r->f, pos, "unsupported construct: a dict subscript by a %s", jv_type_name(k));
        jv *x = jdict_get(v.a, k);
        if (x) return *x;
    } else if ((v.t == JV_LIST || v.t == JV_TUPLE) && (k.t == JV_INT || k.t == JV_BOOL)) {
        int64_t i = k.i, n = (int64_t)v.a->n;
        if (i < 0) i += n;
        return i >= 0 && i < n ? v.a->v[i] : jv_undef(NULL);
    } else if (v.t == JV_STR && (k.t == JV_INT || k.t == JV_BOOL)) {
        int64_t i = k.i, n = (int64_t)ju_count(v.s, v.n);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return jv_undef(NULL);
        size_t a = ju_offset(v.s, v.n, (size_t)i), b = ju_offset(v.s, v.n, (size_t)i + 1);
        return jv_str(v.s + a, b - a);
    }
    /* getitem failed: a string key falls back to the attribute */
    if (k.t == JV_STR) return attr(r, v, jstrdup(r->f, k.s, k.n), pos);
    if (v.t == JV_NS || v.t == JV_LOOP || v.t == JV_MACRO || v.t == JV_FUNC)
        jfail(r->f, pos, "unsupported construct: a subscript of a %s", jv_type_name(v));
    return jv_undef(NULL);
}

/* Python's slice of a sequence of n elements: the chosen indices. */
static size_t slice_indices(jrender *r, int64_t n, const jv *b, const jv *c, const jv *d,
                            int64_t **idx, size_t pos)
{
    int64_t st = d && d->t != JV_NONE ? as_index(r, *d, pos, "a slice step") : 1;
    if (st == 0) jfail(r->f, pos, "slice step cannot be zero");
    int64_t lo, hi;
    int has_b = b && b->t != JV_NONE, has_c = c && c->t != JV_NONE;
    if (st > 0) {
        lo = has_b ? as_index(r, *b, pos, "a slice bound") : 0;
        hi = has_c ? as_index(r, *c, pos, "a slice bound") : n;
        if (lo < 0) lo = lo + n < 0 ? 0 : lo + n;
        if (lo > n) lo = n;
        if (hi < 0) hi = hi + n < 0 ? 0 : hi + n;
        if (hi > n) hi = n;
    } else {
        lo = has_b ? as_index(r, *b, pos, "a slice bound") : n - 1;
        hi = has_c ? as_index(r, *c, pos, "a slice bound") : -1;
        if (has_b && lo < 0) lo = lo + n < 0 ? -1 : lo + n;
        if (lo >= n) lo = n - 1;
        if (has_c && hi < 0) hi = hi + n < 0 ? -1 : hi + n;
        if (hi >= n) hi = n - 1;
    }
    size_t cnt = 0;
    if (st > 0 && lo < hi) cnt = (size_t)((hi - lo - 1) / st + 1);
    if (st < 0 && lo > hi) cnt = (size_t)((lo - hi - 1) / -st + 1);
    *idx = jalloc(r->f, (cnt ? cnt : 1) * sizeof **idx);
    for (size_t i = 0; i < cnt; i++) (*idx)[i] = lo + (int64_t)i * st;
    return cnt;
}

static jv slice(jrender *r, jv v, const jv *b, const jv *c, const jv *d, size_t pos)
{
    if (v.t == JV_UNDEF) undefined_use(r, v, pos, "slice");
    int64_t *idx;
    if (v.t == JV_LIST || v.t == JV_TUPLE) {
        size_t cnt = slice_indices(r, (int64_t)v.a->n, b, c, d, &idx, pos);
        jarr *a = jarr_new(r->f, cnt);
        for (size_t i = 0; i < cnt; i++) jarr_push(r->f, a, v.a->v[idx[i]]);
        return (jv){ .t = v.t, .a = a };
    }
    if (v.t == JV_STR) {
        size_t n = ju_count(v.s, v.n);
        size_t *off = jalloc(r->f, (n + 1) * sizeof *off);
        for (size_t i = 0, o = 0; i <= n; i++) {
            off[i] = o;
            if (o < v.n) {
                o++;
                while (o < v.n && ((unsigned char)v.s[o] & 0xC0) == 0x80) o++;
            }
        }
        size_t cnt = slice_indices(r, (int64_t)n, b, c, d, &idx, pos);
        char *s = jalloc(r->f, v.n + 1);
        size_t k = 0;
        for (size_t i = 0; i < cnt; i++) {
            size_t a = off[idx[i]], e = off[idx[i] + 1];
            memcpy(s + k, v.s + a, e - a);
            k += e - a;
        }
        return jv_str(s, k);
    }
    /* Jinja2 lets a slice's TypeError through: a dict's (unhashable slice),
     * None's, a number's (not subscriptable) */
    jfail(r->f, pos, "a %s cannot be sliced", jv_type_name(v));
}

/* ------------------------------------------------------------ operators */
static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double num_f(jv v) { return v.t == JV_FLOAT ? v.f : (double)v.i; }

_Noreturn static void bad_operands(jrender *r, const char *op, jv a, jv b, size_t pos)
{
    if (a.t == JV_UNDEF) undefined_use(r, a, pos, op);
    if (b.t == JV_UNDEF) undefined_use(r, b, pos, op);
    jfail(r->f, pos, "unsupported operand types for %s: %s and %s", op, jv_type_name(a),
          jv_type_name(b));
}

static jv cat(jrender *r, const char *a, size_t an, const char *b, size_t bn)
{
    char *s = jalloc(r->f, an + bn + 1);
    if (an) memcpy(s, a, an);
    if (bn) memcpy(s + an, b, bn);
    return jv_str(s, an + bn);
}

static jv repeat(jrender *r, jv seq, int64_t times, size_t pos)
{
    if (times < 0) times = 0;
    size_t unit = seq.t == JV_STR ? seq.n : seq.a->n;
    if (unit && (uint64_t)times > JINJA_MAX_OUTPUT / unit)
        jfail(r->f, pos, "a repetition longer than %zu MiB", JINJA_MAX_OUTPUT >> 20);
    if (seq.t == JV_STR) {
        char *s = jalloc(r->f, unit * (size_t)times + 1);
        for (int64_t i = 0; i < times; i++) memcpy(s + unit * (size_t)i, seq.s, unit);
        return jv_str(s, unit * (size_t)times);
    }
    jarr *a = jarr_new(r->f, unit * (size_t)times);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < unit; k++) jarr_push(r->f, a, seq.a->v[k]);
    return (jv){ .t = seq.t, .a = a };
}

static jv arith(jrender *r, int op, jv a, jv b, size_t pos)
{
    static const char *const names[] = { "+", "-", "*", "/", "//", "%", "**" };
    const char *on = names[op];
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT || op == JOP_DIV) {
            double x = num_f(a), y = num_f(b), z;
            switch (op) {
            case JOP_ADD: z = x + y; break;
            case JOP_SUB: z = x - y; break;
            case JOP_MUL: z = x * y; break;
            case JOP_DIV:
                if (y == 0) jfail(r->f, pos, "division by zero");
                z = x / y;
                break;
            default: jfail(r->f, pos, "unsupported construct: '%s' on floats", on);
            }
            return (jv){ .t = JV_FLOAT, .f = z };
        }
        int64_t x = a.i, y = b.i, z = 0;
        int ovf = 0;
        switch (op) {
        case JOP_ADD: ovf = __builtin_add_overflow(x, y, &z); break;
        case JOP_SUB: ovf = __builtin_sub_overflow(x, y, &z); break;
        case JOP_MUL: ovf = __builtin_mul_overflow(x, y, &z); break;
        case JOP_FLOORDIV:
        case JOP_MOD:
            if (y == 0) jfail(r->f, pos, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) ovf = 1;
            else {
                int64_t q = x / y, m = x % y;
                if (m && ((m < 0) != (y < 0))) q--, m += y; /* Python floors */
                z = op == JOP_MOD ? m : q;
            }
            break;
        case JOP_POW:
            if (y < 0) jfail(r->f, pos, "unsupported construct: a negative integer power");
            z = 1;
            for (int64_t i = 0; i < y && !ovf; i++) ovf = __builtin_mul_overflow(z, x, &z);
            break;
        }
        if (ovf) jfail(r->f, pos, "integer overflow beyond 64 bits in '%s'", on);
        return jv_int(z);
    }
    /* generators, iterators, ranges and dict views (n != 0) neither add nor repeat */
    if ((a.t == JV_LIST && a.n) || (b.t == JV_LIST && b.n)) bad_operands(r, on, a, b, pos);
    if (op == JOP_ADD && a.t == JV_STR && b.t == JV_STR) return cat(r, a.s, a.n, b.s, b.n);
    if (op == JOP_ADD && (a.t == JV_LIST || a.t == JV_TUPLE) && a.t == b.t) {
        jarr *x = jarr_new(r->f, a.a->n + b.a->n);
        for (size_t i = 0; i < a.a->n; i++) jarr_push(r->f, x, a.a->v[i]);
        for (size_t i = 0; i < b.a->n; i++) jarr_push(r->f, x, b.a->v[i]);
        return (jv){ .t = a.t, .a = x };
    }
    if (op == JOP_MUL) {
        int sa = a.t == JV_STR || a.t == JV_LIST || a.t == JV_TUPLE;
        int sb = b.t == JV_STR || b.t == JV_LIST || b.t == JV_TUPLE;
        if (sa && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(r, a, b.i, pos);
        if (sb && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(r, b, a.i, pos);
    }
    if (op == JOP_MOD && a.t == JV_STR)
        jfail(r->f, pos, "unsupported construct: string formatting with '%%'");
    bad_operands(r, on, a, b, pos);
}

static int contains(jrender *r, jv needle, jv hay, size_t pos)
{
    switch (hay.t) {
    case JV_UNDEF: return 0; /* Undefined iterates as empty */
    case JV_STR:
        if (needle.t != JV_STR)
            jfail(r->f, pos, "'in <string>' requires a string on the left, got %s",
                  jv_type_name(needle));
        if (!needle.n) return 1;
        for (size_t i = 0; i + needle.n <= hay.n; i++)
            if (!memcmp(hay.s + i, needle.s, needle.n)) return 1;
        return 0;
    case JV_LIST:
    case JV_TUPLE:
        for (size_t i = 0; i < hay.a->n; i++)
            if (jv_eq(needle, hay.a->v[i])) return 1;
        return 0;
    case JV_DICT:
        if (needle.t == JV_LIST || needle.t == JV_DICT || needle.t == JV_NS || needle.t == JV_LOOP)
            jfail(r->f, pos, "'in <dict>': a %s is unhashable", jv_type_name(needle));
        return jdict_get(hay.a, needle) != NULL;
    default: jfail(r->f, pos, "unsupported construct: 'in' on a %s", jv_type_name(hay));
    }
}

static int compare(jrender *r, int op, jv a, jv b, size_t pos)
{
    if (op == JOP_EQ) return jv_eq(a, b);
    if (op == JOP_NE) return !jv_eq(a, b);
    if (op == JOP_IN) return contains(r, a, b, pos);
    if (op == JOP_NOTIN) return !contains(r, a, b, pos);
    int c = jv_cmp(a, b);
    if (c == -3) return 0;
    if (c == -2) {
        static const char *const names[] = { "<", "<=", ">", ">=" };
        bad_operands(r, names[op - JOP_LT], a, b, pos);
    }
    switch (op) {
    case JOP_LT: return c < 0;
    case JOP_LE: return c <= 0;
    case JOP_GT: return c > 0;
    default: return c >= 0;
    }
}

/* ------------------------------------------------------------ calls */
static void exec_body(jrender *r, jframe *fr, const jnode *body, int *flow);

static jv capture(jrender *r, jframe *fr, const jnode *body)
{
    size_t mark = r->out.len;
    int flow = FLOW_NEXT;
    exec_body(r, fr, body, &flow);
    jv s = jv_str(jstrdup(r->f, r->out.b ? r->out.b + mark : "", r->out.len - mark),
                  r->out.len - mark);
    r->out.len = mark;
    return s;
}

static jv call_macro(jrender *r, jv m, const jv *args, size_t nargs, const char *const *kw,
                     const jv *kwv, size_t nkw, size_t pos)
{
    const jnode *d = m.m;
    if (nargs > d->nv)
        jfail(r->f, pos, "macro '%s' takes %zu arguments, got %zu (varargs are not supported)",
              d->s, d->nv, nargs);
    if (++r->depth > JINJA_MAX_DEPTH / 2)
        jfail(r->f, pos, "macro calls nested deeper than %d", JINJA_MAX_DEPTH / 2);
    jframe *fr = frame_new(r, m.env);
    for (size_t k = 0; k < nkw; k++) {
        size_t i = 0;
        while (i < d->nv && strcmp(d->v[i]->s, kw[k])) i++;
        if (i == d->nv)
            jfail(r->f, pos, "macro '%s' has no parameter '%s' (kwargs are not supported)", d->s,
                  kw[k]);
        if (i < nargs) jfail(r->f, pos, "macro '%s' got parameter '%s' twice", d->s, kw[k]);
    }
    for (size_t i = 0; i < d->nv; i++) {
        jv v;
        size_t k = 0;
        while (k < nkw && strcmp(d->v[i]->s, kw[k])) k++;
        if (i < nargs) v = args[i];
        else if (k < nkw) v = kwv[k];
        else if (d->w[i]) v = jinja_eval(r, fr, d->w[i]);
        else v = jv_undef(d->v[i]->s);
        assign(r, fr, d->v[i]->s, v);
    }
    jv out = capture(r, fr, d->d);
    r->depth--;
    return out;
}

static jv eval_call(jrender *r, jframe *fr, const jnode *n)
{
    step(r, n->pos);
    jv *args = jalloc(r->f, (n->nv + n->nw + 1) * sizeof *args), *kwv = args + n->nv;
    /* a method: obj.name(...) on a str, dict or list */
    if (n->a->k == JN_ATTR) {
        jv obj = jinja_eval(r, fr, n->a->a);
        if (jinja_is_method(obj, n->a->s)) {
            for (size_t i = 0; i < n->nv; i++) args[i] = jinja_eval(r, fr, n->v[i]);
            for (size_t i = 0; i < n->nw; i++) kwv[i] = jinja_eval(r, fr, n->w[i]);
            return jinja_method(r, obj, n->a->s, args, n->nv, n->kw, kwv, n->nkw, n->pos);
        }
    }
    jv f = jinja_eval(r, fr, n->a);
    for (size_t i = 0; i < n->nv; i++) args[i] = jinja_eval(r, fr, n->v[i]);
    for (size_t i = 0; i < n->nw; i++) kwv[i] = jinja_eval(r, fr, n->w[i]);
    if (f.t == JV_MACRO) return call_macro(r, f, args, n->nv, n->kw, kwv, n->nkw, n->pos);
    if (f.t == JV_FUNC)
        return jinja_call_global(r, (int)f.i, args, n->nv, n->kw, kwv, n->nkw, n->pos);
    if (f.t == JV_UNDEF) undefined_use(r, f, n->pos, "a call");
    jfail(r->f, n->pos, "a %s is not callable", jv_type_name(f));
}

static jv eval_filter(jrender *r, jframe *fr, const jnode *n, jv v)
{
    jv *args = jalloc(r->f, (n->nv + n->nw + 1) * sizeof *args), *kwv = args + n->nv;
    for (size_t i = 0; i < n->nv; i++) args[i] = jinja_eval(r, fr, n->v[i]);
    for (size_t i = 0; i < n->nw; i++) kwv[i] = jinja_eval(r, fr, n->w[i]);
    step(r, n->pos);
    return jinja_filter(r, n->s, v, args, n->nv, n->kw, kwv, n->nkw, n->pos);
}

/* A block set's filter chain over the captured value (the chain's innermost
 * operand is the hole, a JN_NAME ""). */
static jv apply_chain(jrender *r, jframe *fr, const jnode *n, jv v)
{
    if (n->k == JN_NAME) return v;
    return eval_filter(r, fr, n, apply_chain(r, fr, n->a, v));
}

jv jinja_eval(jrender *r, jframe *fr, const jnode *n)
{
    switch (n->k) {
    case JN_CONST: return n->val;
    case JN_NAME: {
        jv *v = lookup(fr, n->s);
        /* in a macro these are Jinja2's own (a tuple, a dict, the call block) */
        if (!v && r->depth > 0 &&
            (!strcmp(n->s, "varargs") || !strcmp(n->s, "kwargs") || !strcmp(n->s, "caller")))
            jfail(r->f, n->pos, "unsupported construct: '%s' in a macro", n->s);
        return v ? *v : jv_undef(n->s);
    }
    case JN_ATTR: return attr(r, jinja_eval(r, fr, n->a), n->s, n->pos);
    case JN_ITEM: {
        jv v = jinja_eval(r, fr, n->a);
        return item(r, v, jinja_eval(r, fr, n->b), n->pos);
    }
    case JN_SLICE: {
        jv v = jinja_eval(r, fr, n->a), b, c, d;
        if (n->b) b = jinja_eval(r, fr, n->b);
        if (n->c) c = jinja_eval(r, fr, n->c);
        if (n->d) d = jinja_eval(r, fr, n->d);
        return slice(r, v, n->b ? &b : NULL, n->c ? &c : NULL, n->d ? &d : NULL, n->pos);
    }
    case JN_CALL: return eval_call(r, fr, n);
    case JN_FILTER: return eval_filter(r, fr, n, jinja_eval(r, fr, n->a));
    case JN_TEST: {
        jv v = jinja_eval(r, fr, n->a);
        jv *args = jalloc(r->f, (n->nv + 1) * sizeof *args);
        for (size_t i = 0; i < n->nv; i++) args[i] = jinja_eval(r, fr, n->v[i]);
        return jv_bool(jinja_test(r, n->s, v, args, n->nv, n->pos));
    }
    case JN_NOT: return jv_bool(!jv_truthy(jinja_eval(r, fr, n->a)));
    case JN_NEG:
    case JN_POS: {
        jv v = jinja_eval(r, fr, n->a);
        if (v.t == JV_FLOAT) return (jv){ .t = JV_FLOAT, .f = n->k == JN_NEG ? -v.f : v.f };
        if (v.t == JV_INT || v.t == JV_BOOL) {
            if (n->k == JN_NEG && v.i == INT64_MIN)
                jfail(r->f, n->pos, "integer overflow beyond 64 bits");
            return jv_int(n->k == JN_NEG ? -v.i : v.i);
        }
        if (v.t == JV_UNDEF) undefined_use(r, v, n->pos, "unary minus/plus");
        jfail(r->f, n->pos, "bad operand type for unary %c: %s", n->k == JN_NEG ? '-' : '+',
              jv_type_name(v));
    }
    case JN_BINOP: {
        jv a = jinja_eval(r, fr, n->a), b = jinja_eval(r, fr, n->b);
        if (n->op != JOP_CONCAT) return arith(r, n->op, a, b, n->pos);
        jv x = jv_to_str(r, a, n->a->pos), y = jv_to_str(r, b, n->b->pos);
        return cat(r, x.s, x.n, y.s, y.n);
    }
    case JN_AND: {
        jv a = jinja_eval(r, fr, n->a);
        return jv_truthy(a) ? jinja_eval(r, fr, n->b) : a;
    }
    case JN_OR: {
        jv a = jinja_eval(r, fr, n->a);
        return jv_truthy(a) ? a : jinja_eval(r, fr, n->b);
    }
    case JN_CMP: {
        jv a = jinja_eval(r, fr, n->a);
        for (size_t i = 0; i < n->nv; i++) {
            jv b = jinja_eval(r, fr, n->v[i]);
            if (!compare(r, n->ops[i], a, b, n->v[i]->pos)) return jv_bool(0);
            a = b;
        }
        return jv_bool(1);
    }
    case JN_COND:
        if (jv_truthy(jinja_eval(r, fr, n->b))) return jinja_eval(r, fr, n->a);
        return n->c ? jinja_eval(r, fr, n->c) : jv_undef(NULL);
    case JN_LIST:
    case JN_TUPLE: {
        jarr *a = jarr_new(r->f, n->nv);
        for (size_t i = 0; i < n->nv; i++) jarr_push(r->f, a, jinja_eval(r, fr, n->v[i]));
        return (jv){ .t = n->k == JN_LIST ? JV_LIST : JV_TUPLE, .a = a };
    }
    case JN_DICT: {
        jarr *a = jarr_new(r->f, n->nv);
        for (size_t i = 0; i < n->nv; i++) {
            jv k = jinja_eval(r, fr, n->v[i]);
            if (k.t != JV_STR && k.t != JV_INT && k.t != JV_BOOL && k.t != JV_NONE)
                jfail(r->f, n->v[i]->pos, "unsupported construct: a dict key of type %s",
                      jv_type_name(k));
            jdict_set(r->f, a, k, jinja_eval(r, fr, n->w[i]));
        }
        return (jv){ .t = JV_DICT, .a = a };
    }
    default: jfail(r->f, n->pos, "internal error: not an expression");
    }
}

/* ------------------------------------------------------------ statements */
/* The elements a for loop walks: list and tuple items, dict keys, a
 * string's characters; Undefined is empty. */
static jarr *iter_items(jrender *r, jv v, size_t pos)
{
    switch (v.t) {
    case JV_LIST:
    case JV_TUPLE: return v.a;
    case JV_UNDEF: return jarr_new(r->f, 1);
    case JV_DICT: {
        jarr *a = jarr_new(r->f, v.a->n);
        for (size_t i = 0; i < v.a->n; i++) jarr_push(r->f, a, v.a->k[i]);
        return a;
    }
    case JV_STR: {
        jarr *a = jarr_new(r->f, v.n);
        jarr_push_chars(r->f, a, v.s, v.n);
        return a;
    }
    default: jfail(r->f, pos, "cannot iterate over a value of type %s", jv_type_name(v));
    }
}

static void bind(jrender *r, jframe *fr, const jnode *t, jv v)
{
    if (t->k == JN_NAME) {
        assign(r, fr, t->s, v);
        return;
    }
    /* tuple unpacking */
    jarr *items = v.t == JV_LIST || v.t == JV_TUPLE || v.t == JV_STR || v.t == JV_DICT
                      ? iter_items(r, v, t->pos)
                      : NULL;
    if (!items) jfail(r->f, t->pos, "cannot unpack a %s", jv_type_name(v));
    if (items->n != t->nv)
        jfail(r->f, t->pos, "cannot unpack %zu values into %zu names", items->n, t->nv);
    for (size_t i = 0; i < t->nv; i++) assign(r, fr, t->v[i]->s, items->v[i]);
}

static void exec_for(jrender *r, jframe *fr, const jnode *n)
{
    jarr *all = iter_items(r, jinja_eval(r, fr, n->b), n->b->pos), *items = all;
    jframe *it = frame_new(r, fr);
    if (n->c) { /* the loop filter, before loop.* is counted */
        items = jarr_new(r->f, all->n);
        for (size_t i = 0; i < all->n; i++) {
            step(r, n->pos);
            it->vars->n = 0;
            bind(r, it, n->a, all->v[i]);
            if (jv_truthy(jinja_eval(r, it, n->c))) jarr_push(r->f, items, all->v[i]);
        }
    }
    for (size_t i = 0; i < items->n; i++) {
        step(r, n->pos);
        /* a fresh scope each iteration (no macro can capture it: see the
         * parser's refusal of macros inside loops) */
        it->vars->n = 0;
        bind(r, it, n->a, items->v[i]);
        assign(r, it, "loop", (jv){ .t = JV_LOOP, .i = (int64_t)i, .a = items });
        int flow = FLOW_NEXT;
        exec_body(r, it, n->d, &flow);
        if (flow == FLOW_BREAK) break;
    }
    if (!items->n && n->e) { /* in a scope of its own too, as Jinja2 runs it */
        int flow = FLOW_NEXT;
        exec_body(r, frame_new(r, fr), n->e, &flow);
    }
}

static void exec_stmt(jrender *r, jframe *fr, const jnode *n, int *flow)
{
    step(r, n->pos);
    switch (n->k) {
    case JN_TEXT: out_put(r, n->s, n->n, n->pos); return;
    case JN_OUT: {
        jv s = jv_to_str(r, jinja_eval(r, fr, n->a), n->a->pos);
        out_put(r, s.s, s.n, n->pos);
        return;
    }
    case JN_IF:
        if (jv_truthy(jinja_eval(r, fr, n->a))) exec_body(r, fr, n->b, flow);
        else if (n->c) exec_body(r, fr, n->c, flow);
        return;
    case JN_FOR: exec_for(r, fr, n); return;
    case JN_SET: {
        jv v = jinja_eval(r, fr, n->b);
        if (n->a->k == JN_ATTR) {
            jv *ns = lookup(fr, n->a->a->s);
            if (!ns || ns->t != JV_NS)
                jfail(r->f, n->pos, "cannot assign attribute on a non-namespace object ('%s')",
                      n->a->a->s);
            jdict_set(r->f, ns->a, jv_str(n->a->s, strlen(n->a->s)), v);
        } else bind(r, fr, n->a, v);
        return;
    }
    case JN_SETBLK: {
        jv v = capture(r, fr, n->d);
        if (n->c) v = apply_chain(r, fr, n->c, v);
        assign(r, fr, n->a->s, v);
        return;
    }
    case JN_MACRO: assign(r, fr, n->s, (jv){ .t = JV_MACRO, .m = n, .env = fr }); return;
    case JN_BREAK: *flow = FLOW_BREAK; return;
    case JN_CONTINUE: *flow = FLOW_CONTINUE; return;
    default: jfail(r->f, n->pos, "internal error: not a statement");
    }
}

static void exec_body(jrender *r, jframe *fr, const jnode *body, int *flow)
{
    for (size_t i = 0; i < body->nv && *flow == FLOW_NEXT; i++) exec_stmt(r, fr, body->v[i], flow);
}

void jinja_exec(jrender *r, const jnode *body)
{
    int flow = FLOW_NEXT;
    exec_body(r, r->globals, body, &flow);
}

/* ------------------------------------------------------------ entry points */
/* Loops and macros may hold break/continue only inside a loop, and macros
 * only outside loops and macros (frames are reused across iterations). */
static void check_tree(jfail_ctx *f, const jnode *n, int in_loop, int in_scope)
{
    if (!n) return;
    if ((n->k == JN_BREAK || n->k == JN_CONTINUE) && !in_loop)
        jfail(f, n->pos, "'%s' outside a for loop", n->k == JN_BREAK ? "break" : "continue");
    if (n->k == JN_MACRO && in_scope)
        jfail(f, n->pos, "unsupported construct: a macro defined inside a for loop or a macro");
    if (n->k == JN_FOR) {
        check_tree(f, n->d, 1, 1);
        check_tree(f, n->e, in_loop, in_scope);
        return;
    }
    if (n->k == JN_MACRO) {
        check_tree(f, n->d, 0, 1);
        return;
    }
    if (n->k == JN_BODY || n->k == JN_IF || n->k == JN_SETBLK) {
        for (size_t i = 0; i < n->nv; i++) check_tree(f, n->v[i], in_loop, in_scope);
        check_tree(f, n->b, in_loop, in_scope);
        check_tree(f, n->c, in_loop, in_scope);
        check_tree(f, n->d, in_loop, in_scope);
    }
}

int jinja_compile(jinja_tpl **out, const char *src, size_t len, char *err)
{
    *out = NULL;
    jinja_tpl *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    jfail_ctx f = { .err = err, .arena = &t->arena };
    if (setjmp(f.jb)) {
        jinja_free(t);
        return 1;
    }
    if (len > JINJA_MAX_SOURCE)
        jfail(&f, SIZE_MAX, "the template is longer than %zu MiB", JINJA_MAX_SOURCE >> 20);
    if (cis2_utf8_check(src, len) < len) jfail(&f, SIZE_MAX, "the template is not valid UTF-8");
    jtok *toks;
    size_t nt;
    jinja_lex(&f, src, len, &toks, &nt);
    t->body = jinja_parse(&f, toks, nt);
    check_tree(&f, t->body, 0, 0);
    t->src = f.src;
    t->src_len = f.src_len;
    *out = t;
    return 0;
}

void jinja_free(jinja_tpl *t)
{
    if (!t) return;
    jarena_free(&t->arena);
    free(t);
}

/* A JSON value as a Jinja value (integers as int, other numbers float). */
static jv from_json(jfail_ctx *f, const json_doc *d, uint32_t n)
{
    const json_node *x = &d->nodes[n];
    switch (x->type) {
    case JSON_NULL: return jv_none();
    case JSON_FALSE: return jv_bool(0);
    case JSON_TRUE: return jv_bool(1);
    case JSON_NUMBER: {
        int64_t i;
        double v;
        if (!json_num_i64(d, n, &i)) return jv_int(i);
        if (json_num_f64(d, n, &v)) jfail(f, SIZE_MAX, "a number in the variables is out of range");
        return (jv){ .t = JV_FLOAT, .f = v };
    }
    case JSON_STRING: {
        size_t l = json_str_len(d, n);
        char *s = jalloc(f, l + 1);
        json_str_decode(d, n, s);
        return jv_str(s, l);
    }
    case JSON_ARRAY: {
        jarr *a = jarr_new(f, x->count);
        for (uint32_t e = x->first; e != JSON_NONE; e = d->nodes[e].next)
            jarr_push(f, a, from_json(f, d, e));
        return (jv){ .t = JV_LIST, .a = a };
    }
    default: {
        jarr *a = jarr_new(f, x->count);
        for (uint32_t k = x->first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next)
            jdict_set(f, a, from_json(f, d, k), from_json(f, d, d->nodes[k].next));
        return (jv){ .t = JV_DICT, .a = a };
    }
    }
}

int jinja_render(const jinja_tpl *t, const char *ctx, size_t ctx_len, const char *date, char **out,
                 size_t *out_len, char *err)
{
    *out = NULL;
    *out_len = 0;
    /* what the failure path frees lives on the heap: automatic objects
     * changed between setjmp and longjmp are indeterminate (C11 7.13.2.1) */
    struct state {
        jarena arena;
        jfail_ctx f;
        jrender r;
        json_doc d;
        int parsed;
    } *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    st->f = (jfail_ctx){ .err = err, .arena = &st->arena, .src = t->src, .src_len = t->src_len };
    st->r.f = &st->f;
    jfail_ctx *f = &st->f;
    jrender *r = &st->r;
    if (setjmp(f->jb)) {
        if (st->parsed) json_free(&st->d);
        jarena_free(&st->arena);
        free(st->r.out.b);
        free(st);
        return 1;
    }
    if (date) {
        char dq[64];
        int y = 0, m = 0, dd = 0;
        int ok = strlen(date) == 10;
        for (int i = 0; ok && i < 10; i++)
            ok = i == 4 || i == 7 ? date[i] == '-' : date[i] >= '0' && date[i] <= '9';
        if (ok) {
            y = atoi(date), m = atoi(date + 5), dd = atoi(date + 8);
            ok = y >= 1 && m >= 1 && m <= 12 && dd >= 1;
        }
        if (!ok)
            jfail(f, SIZE_MAX, "the date \"%s\" is not YYYY-MM-DD",
                  cis2_escape(date, strlen(date), dq, sizeof dq, CIS2_ESC_TEXT));
        static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        if (dd > mdays[m - 1] || (m == 2 && dd == 29 && !leap))
            jfail(f, SIZE_MAX, "the date \"%s\" does not exist", date);
        r->date_y = y, r->date_m = m, r->date_d = dd;
    }
    char jerr[CIS2_ERR_LEN];
    int rc = json_parse(&st->d, ctx, ctx_len, "template variables", jerr);
    if (rc) jfail(f, SIZE_MAX, "%s", jerr);
    st->parsed = 1;
    if (st->d.nodes[0].type != JSON_OBJECT) jfail(f, SIZE_MAX, "template variables: not an object");
    jframe *builtins = frame_new(r, NULL);
    assign(r, builtins, "range", (jv){ .t = JV_FUNC, .i = JF_RANGE });
    assign(r, builtins, "namespace", (jv){ .t = JV_FUNC, .i = JF_NAMESPACE });
    assign(r, builtins, "raise_exception", (jv){ .t = JV_FUNC, .i = JF_RAISE });
    if (date) assign(r, builtins, "strftime_now", (jv){ .t = JV_FUNC, .i = JF_STRFTIME });
    r->globals = frame_new(r, builtins);
    r->globals->vars = from_json(f, &st->d, 0).a;
    json_free(&st->d);
    st->parsed = 0;
    jinja_exec(r, t->body);
    char *o = malloc(r->out.len + 1);
    if (!o) jfail(f, SIZE_MAX, "out of memory");
    if (r->out.len) memcpy(o, r->out.b, r->out.len);
    o[r->out.len] = 0;
    *out = o;
    *out_len = r->out.len;
    free(r->out.b);
    jarena_free(&st->arena);
    free(st);
    return 0;
}
