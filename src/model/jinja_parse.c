/* The Jinja parser: tokens to a tree, with Jinja2 3.1's grammar
 * (jinja2/parser.py) and precedence, loosest first: a if b else c; or; and;
 * not; comparisons (chained, in, not in); + -; ~; * / // %; ** (left to
 * right, as Jinja2); unary - +; then primaries with postfix . [] () and the
 * filters | and tests `is` that follow them. Statements: if/elif/else, for
 * (tuple targets, `if` filter, else), set (name, ns.attr, tuple; block set),
 * macro, break, continue. Every other statement is refused by name. */
#include "model/jinja.h"
#include <stdio.h>
#include <string.h>

typedef struct {
    jfail_ctx *f;
    const jtok *t;
    size_t i, n;
    int depth;
} parser;

static const jtok *cur(parser *p) { return &p->t[p->i]; }
static const jtok *peek(parser *p, size_t k)
{
    return &p->t[p->i + k < p->n ? p->i + k : p->n - 1];
}

static int is_name(const jtok *t, const char *s)
{
    return t->k == JT_NAME && t->n == strlen(s) && !memcmp(t->s, s, t->n);
}
static int is_op(const jtok *t, const char *s)
{
    return t->k == JT_OP && t->n == strlen(s) && !memcmp(t->s, s, t->n);
}

static const char *describe(parser *p, const jtok *t)
{
    static const char *const kinds[] = { "text",  "'{{'",     "'}}'",           "'{%'",
                                         "'%}'",  "name",     "string",         "integer",
                                         "float", "operator", "end of template" };
    if (t->k == JT_NAME || t->k == JT_OP) {
        char *s = jalloc(p->f, t->n + 3);
        s[0] = '\'';
        memcpy(s + 1, t->s, t->n > 40 ? 40 : t->n);
        s[(t->n > 40 ? 40 : t->n) + 1] = '\'';
        return s;
    }
    return kinds[t->k];
}

_Noreturn static void unexpected(parser *p, const char *want)
{
    jfail(p->f, cur(p)->pos, "expected %s, got %s", want, describe(p, cur(p)));
}

static void expect_op(parser *p, const char *op)
{
    if (!is_op(cur(p), op)) {
        char w[8];
        snprintf(w, sizeof w, "'%s'", op);
        unexpected(p, w);
    }
    p->i++;
}

static const char *name_str(parser *p, const jtok *t) { return jstrdup(p->f, t->s, t->n); }

static const char *expect_name(parser *p)
{
    if (cur(p)->k != JT_NAME) unexpected(p, "a name");
    return name_str(p, &p->t[p->i++]);
}

static void expect_block_end(parser *p)
{
    if (cur(p)->k != JT_BLOCK_END) unexpected(p, "'%}'");
    p->i++;
}

static jnode *node(parser *p, int k, size_t pos)
{
    jnode *n = jalloc(p->f, sizeof *n);
    n->k = (uint8_t)k;
    n->pos = pos;
    return n;
}

/* A growing jnode* list. */
typedef struct {
    jnode **v;
    size_t n, cap;
} nlist;

static void nl_push(parser *p, nlist *l, jnode *x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4;
        jnode **v = jalloc(p->f, cap * sizeof *v);
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static void enter(parser *p)
{
    if (++p->depth > JINJA_MAX_DEPTH)
        jfail(p->f, cur(p)->pos, "nesting deeper than %d", JINJA_MAX_DEPTH);
}

static jnode *expression(parser *p, int with_cond);
static jnode *unary(parser *p, int with_filter);
static jnode *primary(parser *p);
static jnode *postfix(parser *p, jnode *n);

/* Call arguments after '(' (consumed here): positional, then name=value. */
static void call_args(parser *p, jnode *n)
{
    nlist args = { 0 }, kwv = { 0 };
    const char **kw = NULL;
    size_t nkw = 0, kcap = 0;
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (args.n + nkw) expect_op(p, ",");
        if (is_op(cur(p), ")")) break; /* a trailing comma */
        if (is_op(cur(p), "*") || is_op(cur(p), "**"))
            jfail(p->f, cur(p)->pos, "unsupported construct: *args / **kwargs in a call");
        if (cur(p)->k == JT_NAME && is_op(peek(p, 1), "=")) {
            const char *k = expect_name(p);
            p->i++;
            if (nkw == kcap) {
                kcap = kcap ? 2 * kcap : 4;
                const char **nk = jalloc(p->f, kcap * sizeof *nk);
                if (nkw) memcpy(nk, kw, nkw * sizeof *nk);
                kw = nk;
            }
            kw[nkw++] = k;
            nl_push(p, &kwv, expression(p, 1));
        } else {
            if (nkw) jfail(p->f, cur(p)->pos, "a positional argument after a keyword argument");
            nl_push(p, &args, expression(p, 1));
        }
    }
    p->i++;
    n->v = args.v, n->nv = args.n;
    n->w = kwv.v, n->nw = kwv.n;
    n->kw = kw, n->nkw = nkw;
}

static jnode *filters(parser *p, jnode *n)
{
    while (is_op(cur(p), "|")) {
        p->i++;
        jnode *f = node(p, JN_FILTER, cur(p)->pos);
        f->s = expect_name(p);
        if (is_op(cur(p), "."))
            jfail(p->f, cur(p)->pos, "unsupported construct: a dotted filter name");
        f->a = n;
        if (is_op(cur(p), "(")) call_args(p, f);
        n = f;
    }
    return n;
}

/* `is [not] name [arg | (args)]` */
static jnode *test(parser *p, jnode *n)
{
    size_t pos = cur(p)->pos;
    p->i++;
    int neg = 0;
    if (is_name(cur(p), "not")) p->i++, neg = 1;
    jnode *t = node(p, JN_TEST, pos);
    t->s = expect_name(p);
    t->a = n;
    if (is_op(cur(p), ".")) jfail(p->f, cur(p)->pos, "unsupported construct: a dotted test name");
    if (is_op(cur(p), "(")) {
        call_args(p, t);
        if (t->nkw) jfail(p->f, pos, "unsupported construct: keyword arguments to a test");
    } else {
        const jtok *c = cur(p);
        int arg = c->k == JT_NAME || c->k == JT_STRING || c->k == JT_INT || c->k == JT_FLOAT ||
                  is_op(c, "(") || is_op(c, "[") || is_op(c, "{");
        if (is_name(c, "else") || is_name(c, "or") || is_name(c, "and")) arg = 0;
        if (is_name(c, "is")) jfail(p->f, c->pos, "tests cannot be chained with 'is'");
        if (arg) {
            t->v = jalloc(p->f, sizeof *t->v);
            t->v[0] = postfix(p, primary(p));
            t->nv = 1;
        }
    }
    if (!neg) return t;
    jnode *x = node(p, JN_NOT, pos);
    x->a = t;
    return x;
}

static jnode *filter_expr(parser *p, jnode *n)
{
    for (;;) {
        if (is_op(cur(p), "|")) n = filters(p, n);
        else if (is_name(cur(p), "is")) n = test(p, n);
        else if (is_op(cur(p), "(")) {
            jnode *c = node(p, JN_CALL, cur(p)->pos);
            c->a = n;
            call_args(p, c);
            n = c;
        } else return n;
    }
}

/* [a], [a:b:c] and the like after '[' (consumed here). */
static jnode *subscript(parser *p, jnode *n)
{
    size_t pos = cur(p)->pos;
    expect_op(p, "[");
    jnode *part[3] = { NULL, NULL, NULL };
    int k = 0, sl = 0;
    for (;;) {
        if (!is_op(cur(p), ":") && !is_op(cur(p), "]") && !is_op(cur(p), ","))
            part[k] = expression(p, 1);
        if (is_op(cur(p), ","))
            jfail(p->f, cur(p)->pos, "unsupported construct: a tuple subscript");
        if (!is_op(cur(p), ":") || k == 2) break;
        p->i++;
        sl = 1;
        k++;
    }
    expect_op(p, "]");
    jnode *x;
    if (sl) {
        x = node(p, JN_SLICE, pos);
        x->b = part[0], x->c = part[1], x->d = part[2];
    } else {
        if (!part[0]) jfail(p->f, pos, "an empty subscript");
        x = node(p, JN_ITEM, pos);
        x->b = part[0];
    }
    x->a = n;
    return x;
}

static jnode *postfix(parser *p, jnode *n)
{
    for (;;) {
        if (is_op(cur(p), ".")) {
            size_t pos = cur(p)->pos;
            p->i++;
            if (cur(p)->k == JT_INT) { /* x.0 is x[0] */
                jnode *x = node(p, JN_ITEM, pos);
                x->a = n;
                x->b = node(p, JN_CONST, pos);
                x->b->val = jv_int(cur(p)->i);
                p->i++;
                n = x;
                continue;
            }
            jnode *x = node(p, JN_ATTR, pos);
            x->a = n;
            x->s = expect_name(p);
            n = x;
        } else if (is_op(cur(p), "[")) n = subscript(p, n);
        else if (is_op(cur(p), "(")) {
            jnode *c = node(p, JN_CALL, cur(p)->pos);
            c->a = n;
            call_args(p, c);
            n = c;
        } else return n;
    }
}

/* ( ... ) after '(' is seen: (), (x), (x,), (x, y) */
static jnode *paren(parser *p)
{
    size_t pos = cur(p)->pos;
    expect_op(p, "(");
    nlist items = { 0 };
    int comma = 0;
    while (!is_op(cur(p), ")")) {
        if (items.n) {
            expect_op(p, ",");
            comma = 1;
            if (is_op(cur(p), ")")) break;
        }
        nl_push(p, &items, expression(p, 1));
    }
    p->i++;
    if (items.n == 1 && !comma) return items.v[0];
    jnode *t = node(p, JN_TUPLE, pos);
    t->v = items.v, t->nv = items.n;
    return t;
}

static jnode *primary(parser *p)
{
    const jtok *t = cur(p);
    enter(p);
    jnode *n = NULL;
    if (t->k == JT_NAME) {
        n = node(p, JN_CONST, t->pos);
        if (is_name(t, "true") || is_name(t, "True")) n->val = jv_bool(1);
        else if (is_name(t, "false") || is_name(t, "False")) n->val = jv_bool(0);
        else if (is_name(t, "none") || is_name(t, "None")) n->val = jv_none();
        else {
            n->k = JN_NAME;
            n->s = name_str(p, t);
        }
        p->i++;
    } else if (t->k == JT_STRING) { /* adjacent literals concatenate */
        size_t len = 0, k = p->i;
        for (; p->t[k].k == JT_STRING; k++) len += p->t[k].n;
        char *s = jalloc(p->f, len + 1);
        len = 0;
        for (; p->t[p->i].k == JT_STRING; p->i++) {
            memcpy(s + len, p->t[p->i].s, p->t[p->i].n);
            len += p->t[p->i].n;
        }
        n = node(p, JN_CONST, t->pos);
        n->val = jv_str(s, len);
    } else if (t->k == JT_INT || t->k == JT_FLOAT) {
        n = node(p, JN_CONST, t->pos);
        if (t->k == JT_INT) n->val = jv_int(t->i);
        else n->val = (jv){ .t = JV_FLOAT, .f = t->f };
        p->i++;
    } else if (is_op(t, "(")) n = paren(p);
    else if (is_op(t, "[")) {
        n = node(p, JN_LIST, t->pos);
        nlist items = { 0 };
        p->i++;
        while (!is_op(cur(p), "]")) {
            if (items.n) {
                expect_op(p, ",");
                if (is_op(cur(p), "]")) break;
            }
            nl_push(p, &items, expression(p, 1));
        }
        p->i++;
        n->v = items.v, n->nv = items.n;
    } else if (is_op(t, "{")) {
        n = node(p, JN_DICT, t->pos);
        nlist keys = { 0 }, vals = { 0 };
        p->i++;
        while (!is_op(cur(p), "}")) {
            if (keys.n) {
                expect_op(p, ",");
                if (is_op(cur(p), "}")) break;
            }
            nl_push(p, &keys, expression(p, 1));
            expect_op(p, ":");
            nl_push(p, &vals, expression(p, 1));
        }
        p->i++;
        n->v = keys.v, n->nv = keys.n, n->w = vals.v, n->nw = vals.n;
    } else unexpected(p, "an expression");
    p->depth--;
    return n;
}

static jnode *unary(parser *p, int with_filter)
{
    const jtok *t = cur(p);
    jnode *n;
    enter(p);
    if (is_op(t, "-") || is_op(t, "+")) {
        p->i++;
        n = node(p, is_op(t, "-") ? JN_NEG : JN_POS, t->pos);
        n->a = unary(p, 0);
    } else n = primary(p);
    n = postfix(p, n);
    if (with_filter) n = filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *binop(parser *p, int op, jnode *a, jnode *b, size_t pos)
{
    jnode *n = node(p, JN_BINOP, pos);
    n->op = (uint8_t)op;
    n->a = a, n->b = b;
    return n;
}

static jnode *pow_expr(parser *p)
{
    jnode *l = unary(p, 1);
    while (is_op(cur(p), "**")) {
        size_t pos = cur(p)->pos;
        p->i++;
        l = binop(p, JOP_POW, l, unary(p, 1), pos);
    }
    return l;
}

static jnode *math2(parser *p)
{
    jnode *l = pow_expr(p);
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "*")    ? JOP_MUL
                 : is_op(t, "/")  ? JOP_DIV
                 : is_op(t, "//") ? JOP_FLOORDIV
                 : is_op(t, "%")  ? JOP_MOD
                                  : -1;
        if (op < 0) return l;
        p->i++;
        l = binop(p, op, l, pow_expr(p), t->pos);
    }
}

static jnode *concat(parser *p)
{
    jnode *l = math2(p);
    while (is_op(cur(p), "~")) {
        size_t pos = cur(p)->pos;
        p->i++;
        l = binop(p, JOP_CONCAT, l, math2(p), pos);
    }
    return l;
}

static jnode *math1(parser *p)
{
    jnode *l = concat(p);
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "+") ? JOP_ADD : is_op(t, "-") ? JOP_SUB : -1;
        if (op < 0) return l;
        p->i++;
        l = binop(p, op, l, concat(p), t->pos);
    }
}

static jnode *compare(parser *p)
{
    size_t pos = cur(p)->pos;
    jnode *l = math1(p);
    nlist rhs = { 0 };
    uint8_t ops[64];
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "==")                                   ? JOP_EQ
                 : is_op(t, "!=")                                 ? JOP_NE
                 : is_op(t, "<")                                  ? JOP_LT
                 : is_op(t, "<=")                                 ? JOP_LE
                 : is_op(t, ">")                                  ? JOP_GT
                 : is_op(t, ">=")                                 ? JOP_GE
                 : is_name(t, "in")                               ? JOP_IN
                 : is_name(t, "not") && is_name(peek(p, 1), "in") ? JOP_NOTIN
                                                                  : -1;
        if (op < 0) break;
        if (rhs.n == sizeof ops) jfail(p->f, t->pos, "a comparison chain longer than 64");
        p->i += op == JOP_NOTIN ? 2 : 1;
        ops[rhs.n] = (uint8_t)op;
        nl_push(p, &rhs, math1(p));
    }
    if (!rhs.n) return l;
    jnode *n = node(p, JN_CMP, pos);
    n->a = l;
    n->v = rhs.v, n->nv = rhs.n;
    n->ops = jalloc(p->f, rhs.n);
    memcpy(n->ops, ops, rhs.n);
    return n;
}

static jnode *not_expr(parser *p)
{
    if (is_name(cur(p), "not")) {
        jnode *n = node(p, JN_NOT, cur(p)->pos);
        p->i++;
        enter(p);
        n->a = not_expr(p);
        p->depth--;
        return n;
    }
    return compare(p);
}

static jnode *and_expr(parser *p)
{
    jnode *l = not_expr(p);
    while (is_name(cur(p), "and")) {
        jnode *n = node(p, JN_AND, cur(p)->pos);
        p->i++;
        n->a = l, n->b = not_expr(p);
        l = n;
    }
    return l;
}

static jnode *or_expr(parser *p)
{
    jnode *l = and_expr(p);
    while (is_name(cur(p), "or")) {
        jnode *n = node(p, JN_OR, cur(p)->pos);
        p->i++;
        n->a = l, n->b = and_expr(p);
        l = n;
    }
    return l;
}

static jnode *expression(parser *p, int with_cond)
{
    enter(p);
    jnode *l = or_expr(p);
    while (with_cond && is_name(cur(p), "if")) {
        jnode *n = node(p, JN_COND, cur(p)->pos);
        p->i++;
        n->a = l;
        n->b = or_expr(p);
        if (is_name(cur(p), "else")) {
            p->i++;
            n->c = expression(p, 1);
        }
        l = n;
    }
    p->depth--;
    return l;
}

/* An expression or a bare tuple of them (a, b), up to the tag's end or one
 * of the names in `stop`. */
static jnode *tuple(parser *p, int with_cond, const char *stop)
{
    size_t pos = cur(p)->pos;
    nlist items = { 0 };
    int comma = 0;
    for (;;) {
        if (items.n) {
            if (!is_op(cur(p), ",")) break;
            p->i++;
            comma = 1;
        }
        const jtok *t = cur(p);
        if (t->k == JT_VAR_END || t->k == JT_BLOCK_END || (stop && is_name(t, stop))) break;
        nl_push(p, &items, expression(p, with_cond));
    }
    if (!items.n) unexpected(p, "an expression");
    if (items.n == 1 && !comma) return items.v[0];
    jnode *n = node(p, JN_TUPLE, pos);
    n->v = items.v, n->nv = items.n;
    return n;
}

/* An assignment target: a name or a tuple of names (for, set). */
static jnode *target(parser *p, const char *stop)
{
    size_t pos = cur(p)->pos;
    nlist items = { 0 };
    int comma = 0;
    for (;;) {
        if (items.n) {
            if (!is_op(cur(p), ",")) break;
            p->i++;
            comma = 1;
            if (stop && is_name(cur(p), stop)) break;
        }
        if (is_op(cur(p), "("))
            jfail(p->f, cur(p)->pos, "unsupported construct: a parenthesized assignment target");
        jnode *x = node(p, JN_NAME, cur(p)->pos);
        if (cur(p)->k != JT_NAME) unexpected(p, "a name to assign to");
        x->s = expect_name(p);
        if (!strcmp(x->s, "true") || !strcmp(x->s, "false") || !strcmp(x->s, "none") ||
            !strcmp(x->s, "True") || !strcmp(x->s, "False") || !strcmp(x->s, "None"))
            jfail(p->f, x->pos, "cannot assign to '%s'", x->s);
        nl_push(p, &items, x);
    }
    if (items.n == 1 && !comma) return items.v[0];
    jnode *n = node(p, JN_TUPLE, pos);
    n->v = items.v, n->nv = items.n;
    return n;
}

static jnode *subparse(parser *p, const char *const *end);

static int name_in(const jtok *t, const char *const *names)
{
    for (; names && *names; names++)
        if (is_name(t, *names)) return 1;
    return 0;
}

static jnode *statement(parser *p)
{
    const jtok *t = cur(p);
    if (t->k != JT_NAME) unexpected(p, "a statement name");
    size_t pos = t->pos;
    enter(p);
    jnode *n;
    if (is_name(t, "if") || is_name(t, "elif")) {
        p->i++;
        n = node(p, JN_IF, pos);
        n->a = tuple(p, 1, NULL);
        expect_block_end(p);
        static const char *const ends[] = { "elif", "else", "endif", NULL };
        n->b = subparse(p, ends);
        if (is_name(cur(p), "elif")) {
            jnode *e = node(p, JN_BODY, cur(p)->pos);
            e->v = jalloc(p->f, sizeof *e->v);
            e->v[0] = statement(p); /* consumes through endif */
            e->nv = 1;
            n->c = e;
            p->depth--;
            return n;
        }
        if (is_name(cur(p), "else")) {
            p->i++;
            expect_block_end(p);
            static const char *const ends2[] = { "endif", NULL };
            n->c = subparse(p, ends2);
        }
        p->i++; /* endif */
        expect_block_end(p);
    } else if (is_name(t, "for")) {
        p->i++;
        n = node(p, JN_FOR, pos);
        n->a = target(p, "in");
        if (!is_name(cur(p), "in")) unexpected(p, "'in'");
        p->i++;
        n->b = tuple(p, 0, "recursive");
        if (is_name(cur(p), "if")) {
            p->i++;
            n->c = expression(p, 1);
        }
        if (is_name(cur(p), "recursive"))
            jfail(p->f, cur(p)->pos, "unsupported construct: recursive for loops");
        expect_block_end(p);
        static const char *const ends[] = { "endfor", "else", NULL };
        n->d = subparse(p, ends);
        if (is_name(cur(p), "else")) {
            p->i++;
            expect_block_end(p);
            static const char *const ends2[] = { "endfor", NULL };
            n->e = subparse(p, ends2);
        }
        p->i++;
        expect_block_end(p);
    } else if (is_name(t, "set")) {
        p->i++;
        if (cur(p)->k == JT_NAME && is_op(peek(p, 1), ".")) { /* ns.attr */
            n = node(p, JN_SET, pos);
            n->a = node(p, JN_ATTR, cur(p)->pos);
            n->a->a = node(p, JN_NAME, cur(p)->pos);
            n->a->a->s = expect_name(p);
            p->i++;
            n->a->s = expect_name(p);
        } else n = node(p, JN_SET, pos), n->a = target(p, NULL);
        if (is_op(cur(p), "=")) {
            p->i++;
            n->b = tuple(p, 1, NULL);
            expect_block_end(p);
        } else {
            if (n->a->k != JN_NAME)
                jfail(p->f, pos,
                      "unsupported construct: a block set of a namespace attribute or tuple");
            n->k = JN_SETBLK;
            if (is_op(cur(p), "|")) {
                jnode *hole = node(p, JN_NAME, cur(p)->pos);
                hole->s = "";
                n->c = filters(p, hole);
            }
            expect_block_end(p);
            static const char *const ends[] = { "endset", NULL };
            n->d = subparse(p, ends);
            p->i++;
            expect_block_end(p);
        }
    } else if (is_name(t, "macro")) {
        p->i++;
        n = node(p, JN_MACRO, pos);
        n->s = expect_name(p);
        expect_op(p, "(");
        nlist params = { 0 }, defs = { 0 };
        while (!is_op(cur(p), ")")) {
            if (params.n) expect_op(p, ",");
            if (is_op(cur(p), ")")) break;
            jnode *x = node(p, JN_NAME, cur(p)->pos);
            x->s = expect_name(p);
            nl_push(p, &params, x);
            jnode *d = NULL;
            if (is_op(cur(p), "=")) {
                p->i++;
                d = expression(p, 1);
            } else if (defs.n && defs.v[defs.n - 1])
                jfail(p->f, x->pos, "a macro parameter without a default after one with a default");
            nl_push(p, &defs, d);
        }
        p->i++;
        expect_block_end(p);
        static const char *const ends[] = { "endmacro", NULL };
        n->d = subparse(p, ends);
        p->i++;
        if (cur(p)->k == JT_NAME) p->i++; /* {% endmacro name %} */
        expect_block_end(p);
        n->v = params.v, n->nv = params.n, n->w = defs.v, n->nw = defs.n;
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        n = node(p, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, pos);
        p->i++;
        expect_block_end(p);
    } else {
        jfail(p->f, pos, "unsupported construct: the '{%% %.*s %%}' statement",
              (int)(t->n > 30 ? 30 : t->n), t->s);
    }
    p->depth--;
    return n;
}

/* Statements up to one of the names in `end` (left current) or the end. */
static jnode *subparse(parser *p, const char *const *end)
{
    jnode *body = node(p, JN_BODY, cur(p)->pos);
    nlist items = { 0 };
    enter(p);
    for (;;) {
        const jtok *t = cur(p);
        if (t->k == JT_EOF) {
            if (end) { /* the list ends with the block's closing name */
                size_t k = 0;
                while (end[k + 1]) k++;
                jfail(p->f, t->pos, "unexpected end of template: expected '{%% %s %%}'", end[k]);
            }
            break;
        }
        if (t->k == JT_TEXT) {
            jnode *x = node(p, JN_TEXT, t->pos);
            x->s = t->s, x->n = t->n;
            nl_push(p, &items, x);
            p->i++;
        } else if (t->k == JT_VAR_BEGIN) {
            p->i++;
            jnode *x = node(p, JN_OUT, t->pos);
            x->a = tuple(p, 1, NULL);
            if (cur(p)->k != JT_VAR_END) unexpected(p, "'}}'");
            p->i++;
            nl_push(p, &items, x);
        } else if (t->k == JT_BLOCK_BEGIN) {
            p->i++;
            if (name_in(cur(p), end)) break;
            const jtok *s = cur(p);
            static const char *const stray[] = { "endif", "endfor", "endset", "endmacro",
                                                 "elif",  "else",   NULL };
            if (name_in(s, stray))
                jfail(p->f, s->pos, "unexpected '{%% %.*s %%}'", (int)s->n, s->s);
            nl_push(p, &items, statement(p));
        } else unexpected(p, "text or a tag");
    }
    p->depth--;
    body->v = items.v, body->nv = items.n;
    return body;
}

jnode *jinja_parse(jfail_ctx *f, const jtok *toks, size_t ntoks)
{
    parser p = { f, toks, 0, ntoks, 0 };
    return subparse(&p, NULL);
}
