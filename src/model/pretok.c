/* Pre-tokenizer steps (spec §3.1.4) as hand-written matchers, no regex engine:
 * each follows its regex's backtracking (Oniguruma, leftmost-first
 * alternation, greedy quantifiers) alternative by alternative, over the UCD
 * 15.1 classes \p{L}, \p{N} and \s (= White_Space, as Oniguruma's \s). Only
 * patterns spelled exactly as below are accepted; tools/tok_reference.py
 * cross-checks every one against Python's `re` and, where installed,
 * libonig, the engine tokenizers itself uses. */
#include "model/pretok.h"
#include "model/unicode_tables.h"
#include <stdlib.h>
#include <string.h>

static const char *const REGEX[CIS2_PT_NKINDS] = {
    [CIS2_PT_GPT2] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+"
                     "|\\s+(?!\\S)|\\s+",
    [CIS2_PT_QWEN] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                     "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [CIS2_PT_LLAMA3] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
                       "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

int cis2_pt_regex_kind(const char *pat, size_t len)
{
    for (int k = CIS2_PT_GPT2; k < CIS2_PT_NKINDS; k++) {
        const char *r = REGEX[k];
        size_t i = 0, j = 0;
        while (i < len && r[j]) {
            char c = pat[i];
            const char *esc = c == '\r' ? "\\r" : c == '\n' ? "\\n" : c == '\t' ? "\\t" : NULL;
            if (esc) {
                if (strncmp(r + j, esc, 2)) break;
                j += 2;
            } else {
                if (c != r[j]) break;
                j++;
            }
            i++;
        }
        if (i == len && !r[j]) return k;
    }
    return -1;
}

/* ---------------------------------------------------------------- classes */

static int cls_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    if (s[i] < 0x80) {
        *len = 1;
        return cis2_uc_latin1[s[i]];
    }
    uint32_t cp;
    *len = cis2_utf8_dec(s + i, n - i, &cp); /* the input was validated */
    return cis2_uc_class(cp);
}

/* End of the run of class `c` starting at i; *last = start of its last char. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, int c, size_t *last)
{
    size_t l;
    *last = i;
    while (i < n && cls_at(s, n, i, &l) == c) {
        *last = i;
        i += l;
    }
    return i;
}

/* The rest of the pipeline after one step: the next step, or the sink. */
typedef struct {
    const cis2_pretok *p;
    int k;
    cis2_piece_fn fn;
    void *ctx;
} chain;

static int run_from(const chain *c, const uint8_t *s, size_t n);

static int emit(const chain *c, const uint8_t *s, size_t n)
{
    chain next = *c;
    next.k++;
    return run_from(&next, s, n);
}

/* ------------------------------------------------------------------ GPT-2 */

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * The contractions are ASCII and case-sensitive; the optional prefix is
 * U+0020 only; \s+(?!\S) leaves the last white-space character of a run
 * followed by a non-space for the next match. */
static int split_gpt2(const chain *ch, const uint8_t *s, size_t n)
{
    size_t i = 0, l, last;
    while (i < n) {
        size_t st = i;
        if (s[i] == '\'' && i + 1 < n) {
            uint8_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
            size_t m =
                (a == 's' || a == 't' || a == 'm' || a == 'd')                                 ? 1
                : ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) ? 2
                                                                                               : 0;
            if (m) {
                int rc = emit(ch, s + st, 1 + m);
                if (rc) return rc;
                i += 1 + m;
                continue;
            }
        }
        size_t j = i;
        if (s[i] == ' ' && i + 1 < n) j = i + 1; /* the optional leading space */
        int c = cls_at(s, n, j, &l);
        if (c != CIS2_UC_WS) {
            i = run_end(s, n, j, c, &last); /* \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+ */
        } else {
            i = run_end(s, n, st, CIS2_UC_WS, &last);
            if (i < n && last > st) i = last; /* \s+(?!\S): leave one for the next word */
        }
        int rc = emit(ch, s + st, i - st);
        if (rc) return rc;
    }
    return 0;
}

/* ------------------------------------------------------- Qwen2 / Llama-3 */

/* Bytes after an apostrophe matched by (?i:'s|'t|'re|'ve|'m|'ll|'d), or 0.
 * Oniguruma's case folding adds exactly one non-ASCII member to these
 * letters' classes: U+017F LATIN SMALL LETTER LONG S folds to s. */
static size_t contraction(const uint8_t *s, size_t n)
{
    if (n >= 2 && s[0] == 0xC5 && s[1] == 0xBF) return 2; /* U+017F */
    if (n < 1) return 0;
    uint8_t a = s[0] | 0x20, b = n >= 2 ? s[1] | 0x20 : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1;
    if ((a == 'r' || a == 'v') && b == 'e') return 2;
    if (a == 'l' && b == 'l') return 2;
    return 0;
}

/* Qwen2 (nmax 1) and Llama-3 (nmax 3), alternatives in order:
 *  1 (?i:'s|'t|'re|'ve|'m|'ll|'d)
 *  2 [^\r\n\p{L}\p{N}]?\p{L}+      one optional non-letter, non-digit, non-CR/LF
 *  3 \p{N}{1,nmax}
 *  4  ?[^\s\p{L}\p{N}]+[\r\n]*
 *  5 \s*[\r\n]+                    backtracks to the last CR/LF of the run
 *  6 \s+(?!\S)                     a run at the end, or all but its last char
 *  7 \s+                           (a single white-space char before \S) */
static int split_qwen(const chain *ch, const uint8_t *s, size_t n, int nmax)
{
    size_t i = 0, l0, l1, last = 0;
    while (i < n) {
        size_t st = i, e;
        int c0 = cls_at(s, n, i, &l0);
        size_t m = s[i] == '\'' ? contraction(s + i + 1, n - i - 1) : 0;
        if (m) e = i + 1 + m;
        else if (c0 == CIS2_UC_L) e = run_end(s, n, i, CIS2_UC_L, &last);
        else if (c0 != CIS2_UC_N && s[i] != '\r' && s[i] != '\n' && i + l0 < n &&
                 cls_at(s, n, i + l0, &l1) == CIS2_UC_L)
            e = run_end(s, n, i + l0, CIS2_UC_L, &last);
        else if (c0 == CIS2_UC_N) {
            e = i + l0;
            for (int k = 1; k < nmax && e < n && cls_at(s, n, e, &l1) == CIS2_UC_N; k++) e += l1;
        } else {
            size_t j = i;
            if (s[i] == ' ' && i + 1 < n && cls_at(s, n, i + 1, &l1) == CIS2_UC_OTHER) j = i + 1;
            if (j > i || c0 == CIS2_UC_OTHER) {
                e = run_end(s, n, j, CIS2_UC_OTHER, &last);
                while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
            } else { /* c0 is white space */
                size_t nl = n, w = i;
                last = i;
                while (w < n && cls_at(s, n, w, &l1) == CIS2_UC_WS) {
                    if (s[w] == '\r' || s[w] == '\n') nl = w;
                    last = w;
                    w += l1;
                }
                if (nl < n) e = nl + 1;              /* 5 */
                else if (w == n || last == i) e = w; /* 6 at the end, or 7 */
                else e = last;                       /* 6 */
            }
        }
        if (e <= st) e = st + l0; /* every alternative consumes; never loop */
        int rc = emit(ch, s + st, e - st);
        if (rc) return rc;
        i = e;
    }
    return 0;
}

/* ----------------------------------------------------------------- Digits */

static int split_digits(const chain *ch, const uint8_t *s, size_t n)
{
    size_t i = 0, l = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && cls_at(s, n, j, &l) != CIS2_UC_N) j += l;
        int rc = j > i ? emit(ch, s + i, j - i) : 0;
        if (!rc && j < n) rc = emit(ch, s + j, l);
        if (rc) return rc;
        i = j < n ? j + l : j;
    }
    return 0;
}

static int run_from(const chain *c, const uint8_t *s, size_t n)
{
    if (!n) return 0;
    if (c->k == c->p->n) return c->fn(c->ctx, s, n);
    switch (c->p->kind[c->k]) {
    case CIS2_PT_DIGITS: return split_digits(c, s, n);
    case CIS2_PT_GPT2: return split_gpt2(c, s, n);
    case CIS2_PT_QWEN: return split_qwen(c, s, n, 1);
    default: return split_qwen(c, s, n, 3);
    }
}

int cis2_pretok_run(const cis2_pretok *p, const uint8_t *s, size_t n, cis2_piece_fn fn, void *ctx)
{
    chain c = { p, 0, fn, ctx };
    return run_from(&c, s, n);
}

/* ------------------------------------------------- leftmost-longest search */

typedef struct {
    uint32_t key, val; /* key = state << 8 | byte (never 0: the root is not here) */
} edge;

struct cis2_strmatch {
    uint32_t n_states;  /* state 0 is the root */
    uint32_t root[256]; /* root's child by byte, 0 = none */
    edge *edge;         /* the other states' edges, open addressing */
    uint32_t mask, bits;
    uint32_t *fail;
    int32_t *out; /* longest pattern that is a suffix of the state's string, -1 */
};

static uint32_t edge_slot(const cis2_strmatch *m, uint32_t key)
{
    uint32_t i = (uint32_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> (64 - m->bits));
    while (m->edge[i].key && m->edge[i].key != key) i = (i + 1) & m->mask;
    return i;
}

static uint32_t child(const cis2_strmatch *m, uint32_t st, uint8_t c)
{
    if (!st) return m->root[c];
    const edge *e = &m->edge[edge_slot(m, st << 8 | c)];
    return e->key ? e->val : 0;
}

void cis2_strmatch_free(cis2_strmatch *m)
{
    if (!m) return;
    free(m->edge);
    free(m->fail);
    free(m->out);
    free(m);
}

int cis2_strmatch_build(cis2_strmatch **mp, const char *const *pat, const uint32_t *len, uint32_t n)
{
    *mp = NULL;
    uint64_t total = 1;
    for (uint32_t k = 0; k < n; k++) total += len[k];
    if (total >= (1u << 24)) return 2;
    cis2_strmatch *m = calloc(1, sizeof *m);
    if (!m) return 1;
    uint32_t cap = 16; /* load factor <= 3/4 */
    m->bits = 4;
    while (3 * (uint64_t)cap < 4 * total) cap <<= 1, m->bits++;
    m->mask = cap - 1;
    m->edge = calloc(cap, sizeof *m->edge);
    m->fail = calloc(total, sizeof *m->fail);
    m->out = malloc(total * sizeof *m->out);
    /* BFS needs each state's children: first child / next sibling / edge byte */
    uint32_t *first = calloc(total, sizeof *first), *sib = calloc(total, sizeof *sib);
    uint8_t *byte = calloc(total, 1);
    uint32_t *queue = malloc(total * sizeof *queue);
    int rc = 1;
    if (!m->edge || !m->fail || !m->out || !first || !sib || !byte || !queue) goto out;
    for (uint64_t i = 0; i < total; i++) m->out[i] = -1;
    m->n_states = 1;
    for (uint32_t k = 0; k < n; k++) { /* the trie of the reversed patterns */
        uint32_t st = 0;
        for (uint32_t j = len[k]; j-- > 0;) {
            uint8_t c = (uint8_t)pat[k][j];
            uint32_t nx = child(m, st, c);
            if (!nx) {
                nx = m->n_states++;
                byte[nx] = c;
                sib[nx] = first[st];
                first[st] = nx;
                if (!st) m->root[c] = nx;
                else {
                    edge *e = &m->edge[edge_slot(m, st << 8 | c)];
                    e->key = st << 8 | c;
                    e->val = nx;
                }
            }
            st = nx;
        }
        m->out[st] = (int32_t)k;
    }
    /* failure links and outputs, breadth first (depth order) */
    uint32_t qh = 0, qt = 0;
    for (uint32_t v = first[0]; v; v = sib[v]) queue[qt++] = v; /* fail = root */
    while (qh < qt) {
        uint32_t u = queue[qh++];
        if (m->out[u] < 0) m->out[u] = m->out[m->fail[u]];
        for (uint32_t v = first[u]; v; v = sib[v]) {
            uint32_t f = m->fail[u], x;
            for (;;) {
                x = child(m, f, byte[v]);
                if (x || !f) break;
                f = m->fail[f];
            }
            m->fail[v] = x;
            queue[qt++] = v;
        }
    }
    rc = 0;
out:
    free(first);
    free(sib);
    free(byte);
    free(queue);
    if (rc) cis2_strmatch_free(m);
    else *mp = m;
    return rc;
}

void cis2_strmatch_longest(const cis2_strmatch *m, const uint8_t *s, size_t n, int32_t *best)
{
    uint32_t st = 0;
    for (size_t i = n; i-- > 0;) {
        uint8_t c = s[i];
        for (;;) {
            uint32_t x = child(m, st, c);
            if (x || !st) {
                st = x;
                break;
            }
            st = m->fail[st];
        }
        best[i] = m->out[st];
    }
}
