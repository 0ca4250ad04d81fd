/* A Jinja subset for chat templates (docs/chat_templates.md): lexer
 * (jinja_lex.c), parser to a tree (jinja_parse.c), values (jinja_value.c),
 * evaluator (jinja_eval.c), filters, tests and methods (jinja_filters.c).
 * The reference is Jinja2 3.1 as HF transformers sets it up for
 * apply_chat_template (ImmutableSandboxedEnvironment, trim_blocks,
 * lstrip_blocks, loopcontrols; tojson with ensure_ascii=False;
 * raise_exception, strftime_now). Whatever the subset cannot render exactly
 * as Jinja2 does is refused with one error naming the construct and its line
 * and column. Errors unwind with longjmp to the entry point; everything a
 * compile or a render allocates lives in one arena freed at once. */
#ifndef CIS2_JINJA_H
#define CIS2_JINJA_H
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ limits */
#define JINJA_MAX_DEPTH  200                 /* nesting: parse recursion and macro calls */
#define JINJA_MAX_STEPS  10000000LL          /* statements, loop iterations and calls per render */
#define JINJA_MAX_OUTPUT ((size_t)16 << 20)  /* rendered bytes */
#define JINJA_MAX_ARENA  ((size_t)256 << 20) /* bytes a compile or render allocates */
#define JINJA_MAX_SOURCE ((size_t)4 << 20)   /* template bytes */

/* ------------------------------------------------------------ arena */
typedef struct jarena_blk jarena_blk;
typedef struct {
    jarena_blk *head;
    size_t used, total;
} jarena;

/* The failure point shared by every stage: err gets the message. */
typedef struct {
    jmp_buf jb;
    char *err; /* CIS2_ERR_LEN bytes */
    jarena *arena;
    const char *src; /* the normalized source, for line:col */
    size_t src_len;
} jfail_ctx;

void *jalloc(jfail_ctx *f, size_t n);
char *jstrdup(jfail_ctx *f, const char *s, size_t n);
void jarena_free(jarena *a);
/* err = "line L col C: MESSAGE" (pos: offset in the normalized source, or
 * SIZE_MAX for no position), then longjmp. */
_Noreturn void jfail(jfail_ctx *f, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------ tokens */
typedef enum {
    JT_TEXT,        /* template text, whitespace control applied */
    JT_VAR_BEGIN,   /* {{ */
    JT_VAR_END,     /* }} */
    JT_BLOCK_BEGIN, /* {% */
    JT_BLOCK_END,   /* %} */
    JT_NAME,
    JT_STRING, /* decoded */
    JT_INT,
    JT_FLOAT,
    JT_OP, /* s: the operator's text */
    JT_EOF
} jtok_kind;

typedef struct {
    uint8_t k;
    size_t pos; /* offset in the normalized source */
    const char *s;
    size_t n;
    int64_t i;
    double f;
} jtok;

/* The normalized source (line breaks as \n, one trailing break dropped)
 * into *src, its tokens into *toks (JT_EOF last). */
void jinja_lex(jfail_ctx *f, const char *in, size_t len, jtok **toks, size_t *ntoks);

/* ------------------------------------------------------------ tree */
typedef enum {
    /* statements */
    JN_BODY,   /* v: statements */
    JN_TEXT,   /* s */
    JN_OUT,    /* a: expression */
    JN_IF,     /* a: test, b: body, c: else body (or NULL) */
    JN_FOR,    /* a: target, b: iterable, c: filter or NULL, d: body, e: else body */
    JN_SET,    /* a: target (name, ns.attr or tuple), b: value */
    JN_SETBLK, /* a: target, d: body, c: filter chain applied (JN_FILTER over JN_NAME "") */
    JN_MACRO,  /* s: name, v: parameters (JN_NAME), w: defaults (NULL where none), d: body */
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JN_CONST,  /* val */
    JN_NAME,   /* s */
    JN_ATTR,   /* a, s */
    JN_ITEM,   /* a, b */
    JN_SLICE,  /* a, b start, c stop, d step (each may be NULL) */
    JN_CALL,   /* a: callee, v: args, w: kwarg values, kw: names, nkw */
    JN_FILTER, /* a: operand, s: name, v/w/kw as a call */
    JN_TEST,   /* a: operand, s: name, v: args */
    JN_NOT,    /* a */
    JN_NEG,    /* a */
    JN_POS,    /* a */
    JN_BINOP,  /* op, a, b: + - * / // % ** ~ */
    JN_AND,    /* a, b */
    JN_OR,     /* a, b */
    JN_CMP,    /* a, then v[i] with ops[i]: a chain as Python's */
    JN_COND,   /* a: value, b: test, c: else value or NULL */
    JN_LIST,   /* v */
    JN_TUPLE,  /* v */
    JN_DICT    /* v: keys, w: values */
} jnode_kind;

/* Operators (JN_BINOP, JN_CMP). */
enum {
    JOP_ADD,
    JOP_SUB,
    JOP_MUL,
    JOP_DIV,
    JOP_FLOORDIV,
    JOP_MOD,
    JOP_POW,
    JOP_CONCAT,
    JOP_EQ,
    JOP_NE,
    JOP_LT,
    JOP_LE,
    JOP_GT,
    JOP_GE,
    JOP_IN,
    JOP_NOTIN
};

/* ------------------------------------------------------------ values */
typedef enum {
    JV_UNDEF, /* jinja2's default Undefined; s: the name, for messages */
    JV_NONE,
    JV_BOOL, /* i */
    JV_INT,  /* i */
    JV_FLOAT,
    JV_STR,   /* s, n: UTF-8 bytes */
    JV_LIST,  /* a */
    JV_TUPLE, /* a */
    JV_DICT,  /* a: keys k[], values v[] in insertion order */
    JV_NS,    /* a namespace(): a dict whose attributes `set` may assign */
    JV_LOOP,  /* a for loop's `loop`: i = index0 over the items a */
    JV_MACRO, /* m: the JN_MACRO node, env: the frame it was defined in */
    JV_FUNC   /* i: a global function (JF_*) */
} jv_type;

typedef struct jarr jarr;
typedef struct jframe jframe;
typedef struct jnode jnode;

typedef struct {
    uint8_t t;
    int64_t i;
    double f;
    const char *s;
    size_t n;
    jarr *a;
    const jnode *m;
    jframe *env;
} jv;

struct jarr {
    size_t n, cap;
    jv *v;
    jv *k; /* dicts: keys */
};

struct jnode {
    uint8_t k, op;
    size_t pos;
    jnode *a, *b, *c, *d, *e;
    jnode **v, **w;
    const char **kw;
    uint8_t *ops;
    size_t nv, nw, nkw;
    const char *s;
    size_t n;
    jv val;
};

/* The template's statements (JN_BODY). */
jnode *jinja_parse(jfail_ctx *f, const jtok *toks, size_t ntoks);

/* Global functions. */
enum { JF_RANGE, JF_NAMESPACE, JF_RAISE, JF_STRFTIME };

/* Value helpers (jinja_value.c). */
jv jv_str(const char *s, size_t n);
jv jv_int(int64_t i);
jv jv_bool(int b);
jv jv_none(void);
jv jv_undef(const char *name);
jarr *jarr_new(jfail_ctx *f, size_t cap);
void jarr_push(jfail_ctx *f, jarr *a, jv v);
/* Each UTF-8 character of s[0..n) as a one-character string, onto a (what
 * iterating a string gives, as Python's str). */
void jarr_push_chars(jfail_ctx *f, jarr *a, const char *s, size_t n);
void jdict_set(jfail_ctx *f, jarr *d, jv key, jv val);
/* The value at key, or NULL. */
jv *jdict_get(jarr *d, jv key);
int jv_truthy(jv v);
/* Python's ==. */
int jv_eq(jv a, jv b);
/* Python's <, <=, >, >= on numbers, strings and sequences; -2 when the
 * types do not compare (the caller fails). */
int jv_cmp(jv a, jv b);
const char *jv_type_name(jv v);
/* UTF-8 helpers over a string value: code points; the byte offset of code
 * point i (i <= count). */
size_t ju_count(const char *s, size_t n);
size_t ju_offset(const char *s, size_t n, size_t i);
/* Python's str.isspace for the code point at s (its length in *len). */
int ju_space(const char *s, size_t n, size_t *len);

/* ------------------------------------------------------------ evaluator */
/* What a render sees: its variables (a dict of the JSON context) and the
 * date strftime_now formats (NULL: strftime_now is undefined). */
typedef struct jrender jrender;
struct jframe {
    jframe *up;
    jarr *vars; /* a dict: name -> value */
};

struct jrender {
    jfail_ctx *f;
    jframe *globals;
    int date_y, date_m, date_d; /* strftime_now's date; date_y 0: none */
    struct {
        char *b;
        size_t len, cap;
    } out;
    long long steps;
    int depth;
};

/* Python's str(v) as a string value; fails (naming pos) for values whose
 * str() the subset does not reproduce. */
jv jv_to_str(jrender *r, jv v, size_t pos);
/* The filters, tests, methods and global functions (jinja_filters.c):
 * args[0..nargs) positional, kw/kwv[0..nkw) keyword. */
jv jinja_filter(jrender *r, const char *name, jv v, const jv *args, size_t nargs,
                const char *const *kw, const jv *kwv, size_t nkw, size_t pos);
int jinja_test(jrender *r, const char *name, jv v, const jv *args, size_t nargs, size_t pos);
jv jinja_method(jrender *r, jv obj, const char *name, const jv *args, size_t nargs,
                const char *const *kw, const jv *kwv, size_t nkw, size_t pos);
jv jinja_call_global(jrender *r, int fn, const jv *args, size_t nargs, const char *const *kw,
                     const jv *kwv, size_t nkw, size_t pos);
/* Does `name` name a method of values of v's type (str.strip, dict.items, ...)? */
int jinja_is_method(jv v, const char *name);
/* json.dumps(v, ensure_ascii=False, indent=indent (<0: none),
 * sort_keys=sort) into a new string. */
jv jinja_tojson(jrender *r, jv v, int indent, int sort, size_t pos);

/* Evaluate one expression (jinja_eval.c; the filters use it for map etc.). */
jv jinja_eval(jrender *r, jframe *fr, const jnode *n);
/* Run the template's statements into r->out. */
void jinja_exec(jrender *r, const jnode *body);

/* ------------------------------------------------------------ entry points */
typedef struct jinja_tpl jinja_tpl;
/* Compile a template's source: 0 with *t, or 1 with err ("line L col C: ...";
 * CIS2_ERR_LEN bytes). */
int jinja_compile(jinja_tpl **t, const char *src, size_t len, char *err);
void jinja_free(jinja_tpl *t);
/* Render with the variables of the JSON object ctx (messages,
 * add_generation_prompt, bos_token, kwargs...); date "YYYY-MM-DD" defines
 * strftime_now on that day (NULL: strftime_now is undefined). 0 with *out
 * (malloc'd, NUL-terminated), 1 with err. Thread-safe: a template is never
 * written after compiling. */
int jinja_render(const jinja_tpl *t, const char *ctx, size_t ctx_len, const char *date, char **out,
                 size_t *out_len, char *err);
#endif
