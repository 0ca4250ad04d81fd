/* The Jinja lexer as Jinja2 3.1's (jinja2/lexer.py) with HF's environment:
 * line breaks (\r\n, \r, \n) become \n and one trailing break is dropped
 * (keep_trailing_newline=False); text ends at the first "{{", "{%" or "{#";
 * a "-" after the opening strips all whitespace before it, else lstrip_blocks
 * drops the spaces and tabs between a line's start and a block or comment tag;
 * a "-" before the closing strips all whitespace after it, else trim_blocks
 * drops one newline after a block or comment tag. Whitespace means Python's
 * str.isspace (Jinja2 uses str.rstrip and the regex \s). {% raw %} becomes
 * text; comments vanish. */
#include "model/jinja.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    jfail_ctx *f;
    const char *s;
    size_t n;
    jtok *t;
    size_t nt, cap;
} lexer;

static void emit(lexer *L, jtok t)
{
    if (L->nt == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        jtok *nt = jalloc(L->f, cap * sizeof *nt);
        if (L->nt) memcpy(nt, L->t, L->nt * sizeof *nt);
        L->t = nt;
        L->cap = cap;
    }
    L->t[L->nt++] = t;
}

static void emit_text(lexer *L, size_t a, size_t b)
{
    if (b > a) emit(L, (jtok){ .k = JT_TEXT, .pos = a, .s = L->s + a, .n = b - a });
}

/* The end of the whitespace run at i. */
static size_t skip_space(const lexer *L, size_t i)
{
    size_t l;
    while (i < L->n && ju_space(L->s + i, L->n - i, &l)) i += l;
    return i;
}

/* The start of the whitespace run that ends at b (not before a). */
static size_t rstrip(const lexer *L, size_t a, size_t b)
{
    for (;;) {
        size_t k = b, l = 0; /* step back one code point */
        if (k <= a) return b;
        k--;
        while (k > a && ((unsigned char)L->s[k] & 0xC0) == 0x80) k--;
        if (!ju_space(L->s + k, b - k, &l) || k + l != b) return b;
        b = k;
    }
}

static int at(const lexer *L, size_t i, const char *lit)
{
    size_t n = strlen(lit);
    return i + n <= L->n && !memcmp(L->s + i, lit, n);
}

static int is_name0(char c) { return c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A digit run with Python's single underscores between digits: its end. */
static size_t digits(const lexer *L, size_t i)
{
    if (i >= L->n || !is_digit(L->s[i])) return i;
    while (i < L->n) {
        if (is_digit(L->s[i])) i++;
        else if (L->s[i] == '_' && i + 1 < L->n && is_digit(L->s[i + 1])) i++;
        else break;
    }
    return i;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'                     ? c - '0'
           : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                    : -1;
}

static void put_cp(lexer *L, char *o, size_t *k, uint32_t cp, size_t pos)
{
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        jfail(L->f, pos, "string literal: escape for a surrogate or beyond U+10FFFF");
    if (cp < 0x80) o[(*k)++] = (char)cp;
    else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | cp >> 6);
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | cp >> 12);
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | cp >> 18);
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* A string literal at i (the quote), decoded as Python's unicode-escape does
 * (Jinja2: value.encode("ascii", "backslashreplace").decode("unicode-escape")). */
static size_t string_lit(lexer *L, size_t i)
{
    char q = L->s[i];
    size_t j = i + 1;
    while (j < L->n && L->s[j] != q) j += L->s[j] == '\\' ? 2 : 1;
    if (j >= L->n) jfail(L->f, i, "unterminated string literal");
    char *o = jalloc(L->f, j - i + 1);
    size_t k = 0;
    for (size_t p = i + 1; p < j;) {
        char c = L->s[p++];
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        char e = L->s[p++];
        const char *simple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
        const char *hit = NULL;
        for (const char *x = simple; *x; x += 2)
            if (*x == e) hit = x;
        if (hit) o[k++] = hit[1];
        else if (e == '\n') { /* a backslash-newline continues the line */
        } else if (e >= '0' && e <= '7') {
            uint32_t v = (uint32_t)(e - '0');
            for (int d = 0; d < 2 && p < j && L->s[p] >= '0' && L->s[p] <= '7'; d++)
                v = v * 8 + (uint32_t)(L->s[p++] - '0');
            put_cp(L, o, &k, v, p);
        } else if (e == 'x' || e == 'u' || e == 'U') {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int d = 0; d < nd; d++, p++) {
                int h = p < j ? hexval(L->s[p]) : -1;
                if (h < 0) jfail(L->f, p, "string literal: truncated \\%c escape", e);
                v = v << 4 | (uint32_t)h;
            }
            put_cp(L, o, &k, v, p);
        } else if (e == 'N') jfail(L->f, p, "string literal: \\N{...} escapes are not supported");
        else { /* unknown escapes stay as written */ o[k++] = '\\';
            p--;
        }
    }
    emit(L, (jtok){ .k = JT_STRING, .pos = i, .s = o, .n = k });
    return j + 1;
}

/* Tokens inside {{ }} or {% %} from i; returns the offset after the closing
 * (with trim_blocks' newline or a "-"'s whitespace), sets *nl to whether the
 * closing match ended in a newline (Jinja2's line_starting). */
static size_t tag(lexer *L, size_t i, int block, size_t open, int *nl)
{
    const char *close = block ? "%}" : "}}";
    int depth = 0; /* Jinja2 only ends a tag where brackets balance */
    for (;;) {
        if (i >= L->n)
            jfail(L->f, open, "unexpected end of template: the tag opened here is not closed");
        if (!depth) {
            size_t e = 0;
            if (L->s[i] == '+' && block && at(L, i + 1, close)) e = i + 3;
            else if (L->s[i] == '-' && at(L, i + 1, close)) e = skip_space(L, i + 3);
            else if (at(L, i, close)) e = i + 2 + (block && i + 2 < L->n && L->s[i + 2] == '\n');
            if (e) {
                emit(L, (jtok){ .k = block ? JT_BLOCK_END : JT_VAR_END, .pos = i });
                *nl = L->s[e - 1] == '\n';
                return e;
            }
        }
        size_t l;
        char c = L->s[i];
        if (ju_space(L->s + i, L->n - i, &l)) {
            i += l;
            continue;
        }
        if (is_digit(c)) { /* float before integer, as Jinja2's rules */
            size_t a = digits(L, i), b = a;
            int fl = 0;
            if (a < L->n && L->s[a] == '.' && digits(L, a + 1) > a + 1)
                b = digits(L, a + 1), fl = 1;
            if (b < L->n && L->s[b] == 'e') {
                size_t x = b + 1;
                if (x < L->n && (L->s[x] == '+' || L->s[x] == '-')) x++;
                if (digits(L, x) > x) b = digits(L, x), fl = 1;
            }
            char buf[64];
            size_t k = 0;
            for (size_t p = i; p < b && k < sizeof buf - 1; p++)
                if (L->s[p] != '_') buf[k++] = L->s[p];
            buf[k] = 0;
            if (b - i > 40) jfail(L->f, i, "number literal too long");
            jtok t = { .k = fl ? JT_FLOAT : JT_INT, .pos = i };
            if (fl) t.f = strtod(buf, NULL);
            else {
                int64_t v = 0;
                for (size_t p = 0; p < k; p++) {
                    if (v > (INT64_MAX - 9) / 10) jfail(L->f, i, "integer literal beyond 64 bits");
                    v = v * 10 + (buf[p] - '0');
                }
                t.i = v;
            }
            emit(L, t);
            i = b;
            continue;
        }
        if (is_name0(c)) {
            size_t b = i;
            while (b < L->n && (is_name0(L->s[b]) || is_digit(L->s[b]))) b++;
            emit(L, (jtok){ .k = JT_NAME, .pos = i, .s = L->s + i, .n = b - i });
            i = b;
            continue;
        }
        if (c == '\'' || c == '"') {
            i = string_lit(L, i);
            continue;
        }
        static const char *const two[] = { "//", "**", "==", "!=", ">=", "<=" };
        size_t ol = 0;
        for (size_t k = 0; k < sizeof two / sizeof two[0]; k++)
            if (at(L, i, two[k])) ol = 2;
        if (!ol && c && strchr("+-/*%~[](){}><=.:|,;", c)) ol = 1;
        if (!ol) {
            if ((unsigned char)c >= 0x80)
                jfail(L->f, i, "unexpected character in a tag (names are ASCII in this subset)");
            jfail(L->f, i, "unexpected character '%c' in a tag", c >= 0x20 && c < 0x7F ? c : '?');
        }
        if (c == '(' || c == '[' || c == '{') depth++;
        else if (c == ')' || c == ']' || c == '}') {
            if (!depth) jfail(L->f, i, "unexpected '%c'", c);
            depth--;
        }
        emit(L, (jtok){ .k = JT_OP, .pos = i, .s = L->s + i, .n = ol });
        i += ol;
    }
}

/* {% raw %} at i (the brace, sign already known)? Its end, or 0. */
static size_t raw_begin(const lexer *L, size_t i, int *nl)
{
    size_t p = i + 2;
    if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) p++;
    p = skip_space(L, p);
    if (!at(L, p, "raw")) return 0;
    p = skip_space(L, p + 3);
    size_t e = 0;
    if (at(L, p, "-%}")) e = skip_space(L, p + 3);
    else if (at(L, p, "%}")) e = p + 2;
    if (e) *nl = L->s[e - 1] == '\n';
    return e;
}

void jinja_lex(jfail_ctx *f, const char *in, size_t len, jtok **toks, size_t *ntoks)
{
    /* newline_re.split(source)[::2], the last empty line dropped, joined by \n */
    char *s = jalloc(f, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (in[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && in[i + 1] == '\n') i++;
        } else s[n++] = in[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    f->src = s;
    f->src_len = n;
    lexer L = { f, s, n, NULL, 0, 0 };
    size_t i = 0;
    int line_starting = 1;
    while (i < n) {
        size_t t = i;
        while (t + 1 < n &&
               !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#')))
            t++;
        if (t + 1 >= n) {
            emit_text(&L, i, n);
            break;
        }
        char kind = s[t + 1];
        char sign = t + 2 < n && (s[t + 2] == '-' || s[t + 2] == '+') ? s[t + 2] : 0;
        size_t a = i, b = t;
        if (sign == '-') b = rstrip(&L, a, b);
        else if (sign != '+' && kind != '{') { /* lstrip_blocks */ size_t l_pos = b;
            while (l_pos > a && s[l_pos - 1] != '\n') l_pos--;
            if ((l_pos > a || line_starting) && skip_space(&L, l_pos) == b && b > l_pos) b = l_pos;
        }
        int nl = 0;
        size_t rb = kind == '%' ? raw_begin(&L, t, &nl) : 0;
        emit_text(&L, a, b);
        if (rb) {               /* text up to {% endraw %}, with its own whitespace control */
            if (rb >= n) break; /* as "{#" at the end: Jinja2's lexer stops */
            size_t e = rb;
            for (;; e++) {
                if (e + 1 >= n) jfail(f, t, "missing end of raw directive");
                if (s[e] != '{' || s[e + 1] != '%') continue;
                size_t p = e + 2;
                char sg = p < n && (s[p] == '-' || s[p] == '+') ? s[p] : 0;
                p = skip_space(&L, p + !!sg);
                if (!at(&L, p, "endraw")) continue;
                p = skip_space(&L, p + 6);
                size_t end = 0;
                if (at(&L, p, "+%}")) end = p + 3;
                else if (at(&L, p, "-%}")) end = skip_space(&L, p + 3);
                else if (at(&L, p, "%}")) end = p + 2 + (p + 2 < n && s[p + 2] == '\n');
                if (!end) continue;
                size_t tb = e;
                if (sg == '-') tb = rstrip(&L, rb, tb);
                else if (sg != '+') {
                    size_t l_pos = tb;
                    while (l_pos > rb && s[l_pos - 1] != '\n') l_pos--;
                    if ((l_pos > rb || nl) && skip_space(&L, l_pos) == tb && tb > l_pos) tb = l_pos;
                }
                emit_text(&L, rb, tb);
                line_starting = s[end - 1] == '\n';
                i = end;
                break;
            }
            continue;
        }
        size_t in_at = t + 2 + !!sign;
        if (kind == '#') {
            /* "{#" ending the template opens nothing Jinja2 can fail on: its
             * lexer stops there, and comment tokens are dropped */
            if (in_at >= n) break;
            size_t e = in_at;
            for (;; e++) {
                if (e + 1 >= n) jfail(f, t, "missing end of comment tag");
                if (s[e] == '+' && at(&L, e + 1, "#}")) {
                    e += 3;
                    break;
                }
                if (s[e] == '-' && at(&L, e + 1, "#}")) {
                    e = skip_space(&L, e + 3);
                    break;
                }
                if (at(&L, e, "#}")) {
                    e += 2 + (e + 2 < n && s[e + 2] == '\n');
                    break;
                }
            }
            line_starting = s[e - 1] == '\n';
            i = e;
            continue;
        }
        int block = kind == '%';
        emit(&L, (jtok){ .k = block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, .pos = t });
        i = tag(&L, in_at, block, t, &nl);
        line_starting = nl;
    }
    emit(&L, (jtok){ .k = JT_EOF, .pos = n });
    *toks = L.t;
    *ntoks = L.nt;
}
