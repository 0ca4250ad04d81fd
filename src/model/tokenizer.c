/* Byte-level BPE tokenizer at work (spec §3.1): the merge table's lookup,
 * encode (§3.1.4-§3.1.6), normalize, decode (§3.1.5.a inverse) and the public
 * entry points. tokenizer_load.c reads and validates the tokenizer.json this
 * runs on; where the spec is silent, HF `tokenizers` v0.23.1 is the
 * tie-breaker (§3.1.2).
 *
 * encode: added tokens with normalized=false (raw text, leftmost-longest)
 *         -> NFC of each piece between them -> added tokens with
 *         normalized=true -> pre-tokenizer steps -> byte->unicode symbols
 *         -> rank-ordered merges (heap, §3.1.5.c)
 * decode: token bytes (inverse byte map; added tokens: their content),
 *         concatenated; total, the bytes need not be UTF-8 (callers that
 *         print text check that themselves).
 */
#include "model/tokenizer.h"
#include "model/unicode_tables.h"
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- merge table */

uint32_t tok_merge_hash(uint64_t k, int bits)
{
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

static const merge_slot *merge_find(const cis2_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t mask = (1u << t->merge_bits) - 1, i = tok_merge_hash(k, t->merge_bits);
    for (;;) {
        const merge_slot *m = &t->merges[i];
        if (m->key == k) return m;
        if (m->key == MERGE_EMPTY) return NULL;
        i = (i + 1) & mask;
    }
}

uint64_t tok_fnv1a(const uint8_t *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* ignore_merges: the vocab id whose symbols spell exactly the word w, or -1. */
static int32_t whole_find(const cis2_tokenizer *t, const uint8_t *w, size_t n)
{
    uint32_t i = (uint32_t)tok_fnv1a(w, n) & t->whole_mask;
    for (int32_t s; (s = t->whole_slot[i]) != 0; i = (i + 1) & t->whole_mask) {
        uint32_t a = t->whole_off[s - 1], b = t->whole_off[s];
        if (b - a == n && !memcmp(t->whole_bytes + a, w, n)) return s - 1;
    }
    return -1;
}

int cis2_tokenizer_vocab_size(const cis2_tokenizer *t) { return t->n_ids; }

int cis2_tokenizer_scan_added(const cis2_tokenizer *t, const char *text, size_t n, cis2_added_fn fn,
                              void *ctx)
{
    const uint8_t *s = (const uint8_t *)text;
    int32_t *best = n ? malloc(n * sizeof *best) : NULL;
    cis2_nfc_buf nb = { 0 };
    int rc = n && !best ? -1 : 0;
    if (t->match[0] && best) cis2_strmatch_longest(t->match[0], s, n, best);
    size_t start = 0, i = 0;
    while (!rc && start < n) {
        while (i < n && !(t->match[0] && best[i] >= 0)) i++;
        /* the gap [start, i): normalized=true tokens in its NFC form */
        if (i > start && t->match[1]) {
            const uint8_t *g = s + start;
            size_t gl = i - start;
            if (t->nfc && cis2_nfc_quick(g, gl) < gl) {
                if (cis2_nfc(g, gl, &nb, &gl)) rc = -1;
                else g = nb.out;
            }
            int32_t *b2 = rc ? NULL : malloc(gl * sizeof *b2);
            if (!rc && !b2) rc = -1;
            if (!rc) cis2_strmatch_longest(t->match[1], g, gl, b2);
            for (size_t k = 0; !rc && k < gl;) {
                if (b2[k] < 0) {
                    k++;
                    continue;
                }
                const added_tok *a = &t->added[t->pat_tok[1][b2[k]]];
                rc = fn(ctx, a->s, a->special, 1, start, i);
                k += t->pat_len[1][b2[k]];
            }
            free(b2);
        }
        if (!rc && i < n) {
            const added_tok *a = &t->added[t->pat_tok[0][best[i]]];
            rc = fn(ctx, a->s, a->special, 0, i, i + a->len);
            i += a->len;
        }
        start = i;
    }
    cis2_nfc_buf_free(&nb);
    free(best);
    return rc;
}

/* ---------------------------------------------------------------- encode */

/* What every text input gets first: a size bound and a UTF-8 check. */
static int check_input(const char *what, const uint8_t *s, size_t len, char *err)
{
    if (len > INT32_MAX / 4) {
        snprintf(err, CIS2_ERR_LEN, "%s: input text too long (%zu bytes)", what, len);
        return 1;
    }
    size_t bad = cis2_utf8_check((const char *)s, len);
    if (bad < len) {
        snprintf(err, CIS2_ERR_LEN, "%s: input text is not valid UTF-8 (byte 0x%02x at offset %zu)",
                 what, s[bad], bad);
        return 1;
    }
    return 0;
}

typedef struct {
    const cis2_tokenizer *t;
    int32_t *out;
    size_t n, out_cap;
    size_t cap; /* scratch capacity in symbols */
    int32_t *sym, *next, *prev;
    uint64_t *heap;   /* (rank << 32 | position), min-heap */
    int32_t *best[2]; /* per pass: longest added token at each position */
    size_t best_cap[2];
    cis2_nfc_buf nfc;
    const uint8_t *base; /* the text being tokenized (the NFC form of a piece) */
    size_t base_off;     /* where that text starts in the input */
    int base_changed;    /* it differs from the input (NFC changed it) */
    size_t bad;          /* offset in base of a byte without a vocab symbol */
    uint8_t bad_byte;
    uint32_t bad_cp;
    /* words already encoded in this call (BPE is a function of the word's
     * bytes): open addressing by hash; the arena holds bytes, then ids */
    struct wc_slot {
        uint64_t h;
        uint32_t at, len, n_ids; /* arena offset, word bytes, ids after them */
    } * wc;
    uint8_t *wc_arena;
    size_t wc_used, wc_n;
    int wc_bits; /* table size, scaled to the text; 0: no cache (short text) */
    size_t wc_arena_cap;
} enc;

#define WC_BITS  15         /* at most 32768 slots, at most half filled */
#define WC_WORD  48         /* longer words are not cached */
#define WC_ARENA (4u << 20) /* bytes of words and ids */

static int emit_id(enc *e, int32_t id)
{
    if (e->n == e->out_cap) {
        size_t c = e->out_cap ? 2 * e->out_cap : 64;
        int32_t *o = realloc(e->out, c * sizeof *o);
        if (!o) return 1;
        e->out = o;
        e->out_cap = c;
    }
    e->out[e->n++] = id;
    return 0;
}

static int enc_reserve(enc *e, size_t n)
{
    if (n <= e->cap) return 0;
    size_t c = e->cap ? e->cap : 64;
    while (c < n) c *= 2;
    int32_t *s = realloc(e->sym, c * sizeof *s);
    if (!s) return 1;
    e->sym = s;
    s = realloc(e->next, c * sizeof *s);
    if (!s) return 1;
    e->next = s;
    s = realloc(e->prev, c * sizeof *s);
    if (!s) return 1;
    e->prev = s;
    uint64_t *h = realloc(e->heap, 3 * c * sizeof *h);
    if (!h) return 1;
    e->heap = h;
    e->cap = c;
    return 0;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

static void push_pair(enc *e, size_t *hn, int32_t pos)
{
    int32_t nx = e->next[pos];
    if (nx < 0) return;
    const merge_slot *m = merge_find(e->t, e->sym[pos], e->sym[nx]);
    if (m) heap_push(e->heap, hn, (uint64_t)m->rank << 32 | (uint32_t)pos);
}

/* §3.1.5.b-c: one word's bytes -> symbols -> rank-ordered merges.
 * A popped entry is applied only if its pair is still there (iii). */
static int bpe_word(void *ctx, const uint8_t *w, size_t n)
{
    enc *e = ctx;
    const cis2_tokenizer *t = e->t;
    /* ignore_merges: tokenizers looks the word's symbols up in the vocab
     * before anything else (BPE::tokenize_with_cache), so a vocab word is its
     * own token even where merges would split it. */
    if (t->ignore_merges) {
        int32_t id = whole_find(t, w, n);
        if (id >= 0) return emit_id(e, id);
    }
    for (size_t i = 0; i < n; i++)
        if (t->byte_id[w[i]] < 0) {
            size_t at = i;
            while (at > 0 && (w[at] & 0xC0) == 0x80) at--;
            e->bad = (size_t)(w + at - e->base);
            e->bad_byte = w[i];
            e->bad_cp = 0;
            cis2_utf8_dec(w + at, n - at, &e->bad_cp);
            return 2;
        }
    if (n == 1) return emit_id(e, t->byte_id[w[0]]);
    if (enc_reserve(e, n)) return 1;
    for (size_t i = 0; i < n; i++) {
        e->sym[i] = t->byte_id[w[i]];
        e->prev[i] = (int32_t)i - 1;
        e->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(e, &hn, (int32_t)i);
    while (hn) {
        uint64_t top = heap_pop(e->heap, &hn);
        uint32_t rank = (uint32_t)(top >> 32);
        int32_t pos = (int32_t)(uint32_t)top, nx = e->next[pos];
        if (e->sym[pos] < 0 || nx < 0) continue;
        const merge_slot *m = merge_find(t, e->sym[pos], e->sym[nx]);
        if (!m || m->rank != rank) continue; /* stale */
        e->sym[pos] = m->id;                 /* (iv) */
        e->sym[nx] = -1;
        e->next[pos] = e->next[nx];
        if (e->next[nx] >= 0) e->prev[e->next[nx]] = pos;
        if (e->prev[pos] >= 0) push_pair(e, &hn, e->prev[pos]);
        push_pair(e, &hn, pos);
    }
    for (int32_t i = 0; i >= 0; i = e->next[i])
        if (emit_id(e, e->sym[i])) return 1;
    return 0;
}

/* bpe_word through the per-call cache of short words. */
static int word(void *ctx, const uint8_t *w, size_t n)
{
    enc *e = ctx;
    if (n > WC_WORD || n < 2 || !e->wc_bits) return bpe_word(e, w, n);
    if (!e->wc) {
        e->wc = calloc((size_t)1 << e->wc_bits, sizeof *e->wc);
        e->wc_arena = malloc(e->wc_arena_cap);
        if (!e->wc || !e->wc_arena) return 1;
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ w[i]) * 1099511628211ull;
    h |= 1; /* 0 marks an empty slot */
    size_t mask = ((size_t)1 << e->wc_bits) - 1, i = (size_t)(h >> 20) & mask;
    while (e->wc[i].h) {
        struct wc_slot *c = &e->wc[i];
        if (c->h == h && c->len == n && !memcmp(e->wc_arena + c->at, w, n)) {
            const uint8_t *ids = e->wc_arena + c->at + c->len;
            for (uint32_t k = 0; k < c->n_ids; k++) {
                int32_t id;
                memcpy(&id, ids + 4 * k, 4);
                if (emit_id(e, id)) return 1;
            }
            return 0;
        }
        i = (i + 1) & mask;
    }
    size_t before = e->n;
    int rc = bpe_word(e, w, n);
    size_t nid = e->n - before, need = n + 4 * nid;
    if (!rc && e->wc_n < mask / 2 && e->wc_used + need <= e->wc_arena_cap) {
        struct wc_slot *c = &e->wc[i];
        c->h = h;
        c->at = (uint32_t)e->wc_used;
        c->len = (uint32_t)n;
        c->n_ids = (uint32_t)nid;
        memcpy(e->wc_arena + e->wc_used, w, n);
        memcpy(e->wc_arena + e->wc_used + n, e->out + before, 4 * nid);
        e->wc_used += need;
        e->wc_n++;
    }
    return rc;
}

/* What a pass does with the text between its matches: pass 0 normalizes it
 * and runs pass 1 on it; pass 1 pre-tokenizes it into BPE words. */
typedef int (*gap_fn)(enc *e, const uint8_t *s, size_t n, size_t off);

/* §3.1.6: split s at the leftmost-longest matches of the pass's added tokens
 * (as tokenizers' aho-corasick LeftmostLongest), emitting their ids; `gap`
 * gets the text between them. `off` is where s starts in the input. */
static int split_added(enc *e, int pass, const uint8_t *s, size_t n, size_t off, gap_fn gap)
{
    const cis2_tokenizer *t = e->t;
    if (!t->match[pass] || !n) return gap(e, s, n, off);
    if (n > e->best_cap[pass]) {
        int32_t *b = realloc(e->best[pass], n * sizeof *b);
        if (!b) return 1;
        e->best[pass] = b;
        e->best_cap[pass] = n;
    }
    int32_t *best = e->best[pass];
    cis2_strmatch_longest(t->match[pass], s, n, best);
    size_t start = 0, i = 0;
    while (i < n) {
        if (best[i] < 0) {
            i++;
            continue;
        }
        int32_t k = best[i];
        int rc = gap(e, s + start, i - start, off + start);
        if (rc || (rc = emit_id(e, t->added[t->pat_tok[pass][k]].id))) return rc;
        i += t->pat_len[pass][k]; /* pass 1: the length of the content's NFC form */
        start = i;
    }
    return gap(e, s + start, n - start, off + start);
}

static int gap_words(enc *e, const uint8_t *s, size_t n, size_t off)
{
    (void)off;
    return cis2_pretok_run(&e->t->pt, s, n, word, e);
}

static int gap_normalize(enc *e, const uint8_t *s, size_t n, size_t off)
{
    if (!n) return 0;
    const uint8_t *text = s;
    size_t len = n;
    e->base_changed = 0;
    if (e->t->nfc && cis2_nfc_quick(s, n) < n) {
        if (cis2_nfc(s, n, &e->nfc, &len)) return 1;
        text = e->nfc.out;
        e->base_changed = len != n || memcmp(text, s, n) != 0;
    }
    e->base = text;
    e->base_off = off;
    return split_added(e, 1, text, len, off, gap_words);
}

static int cis2_tokenizer_encode_impl(const cis2_tokenizer *t, const char *text, size_t len,
                                      int32_t **ids, int *n, char *err)
{
    *ids = NULL;
    *n = 0;
    const uint8_t *s = (const uint8_t *)text;
    if (!s && len) {
        snprintf(err, CIS2_ERR_LEN, "tokenize: %zu bytes of text at NULL", len);
        return 1;
    }
    if (check_input("tokenize", s, len, err)) return 1;
    enc e;
    memset(&e, 0, sizeof e);
    e.t = t;
    e.out_cap = len + 1; /* every token covers >= 1 byte (more only if NFC grows the text) */
    if (len >= 4096) {   /* the word cache pays off on longer texts; sized to them */
        e.wc_bits = 8;
        while (e.wc_bits < WC_BITS && ((size_t)1 << e.wc_bits) < len / 16) e.wc_bits++;
        e.wc_arena_cap = len < WC_ARENA / 2 ? 2 * len : WC_ARENA;
    }
    e.out = malloc(e.out_cap * sizeof *e.out);
    int rc = e.out ? split_added(&e, 0, s, len, 0, gap_normalize) : 1;
    free(e.sym);
    free(e.next);
    free(e.prev);
    free(e.heap);
    free(e.best[0]);
    free(e.best[1]);
    free(e.wc);
    free(e.wc_arena);
    cis2_nfc_buf_free(&e.nfc);
    if (rc == 2) {
        /* tokenizers v0.23.1 (unk_token null) would silently drop this
         * character; dropping breaks decode(encode(x)) == x, so refuse. */
        snprintf(err, CIS2_ERR_LEN,
                 "tokenize: %s has no symbol for byte 0x%02x, needed by U+%04X at byte offset "
                 "%zu%s (the reference would silently drop it; refusing)",
                 t->path, e.bad_byte, (unsigned)e.bad_cp,
                 e.base_changed ? e.base_off : e.base_off + e.bad,
                 e.base_changed ? " (in the NFC form of the text from there)" : "");
    } else if (rc) snprintf(err, CIS2_ERR_LEN, "tokenize: out of memory");
    if (rc) {
        free(e.out);
        return rc == 2 ? 1 : -1;
    }
    *ids = e.out;
    *n = (int)e.n;
    return 0;
}

/* normalize: the text between raw-matched added tokens in its normalized
 * form, the tokens as they are. */
typedef struct {
    const cis2_tokenizer *t;
    const uint8_t *s;
    size_t last; /* end of the previous raw match */
    cis2_nfc_buf nb;
    cis2_sb o;
} norm_ctx;

static int norm_gap(norm_ctx *c, size_t end)
{
    const uint8_t *g = c->s + c->last;
    size_t l = end - c->last;
    if (l && c->t->nfc && cis2_nfc_quick(g, l) < l) {
        if (cis2_nfc(g, l, &c->nb, &l)) return -1;
        g = c->nb.out;
    }
    cis2_sb_put(&c->o, g, l);
    return c->o.oom ? -1 : 0;
}

static int norm_match(void *ctx, const char *content, int special, int pass, size_t start,
                      size_t end)
{
    norm_ctx *c = ctx;
    (void)special;
    if (pass) return 0; /* inside a gap, which is normalized as a whole */
    if (norm_gap(c, start)) return -1;
    cis2_sb_str(&c->o, content);
    c->last = end;
    return c->o.oom ? -1 : 0;
}

static int cis2_tokenizer_normalize_impl(const cis2_tokenizer *t, const char *text, size_t len,
                                         char **out, size_t *out_len, char *err)
{
    *out = NULL;
    *out_len = 0;
    norm_ctx c = { t, (const uint8_t *)text, 0, { 0 }, { 0 } };
    if (check_input("normalize", c.s, len, err)) return 1;
    int rc = cis2_tokenizer_scan_added(t, text, len, norm_match, &c);
    if (!rc) rc = norm_gap(&c, len);
    char *o = rc ? NULL : cis2_sb_take(&c.o, out_len);
    cis2_sb_free(&c.o);
    cis2_nfc_buf_free(&c.nb);
    if (!o) {
        snprintf(err, CIS2_ERR_LEN, "normalize: out of memory");
        return -1;
    }
    *out = o;
    return 0;
}

/* ---------------------------------------------------------------- decode */

static int cis2_tokenizer_decode_impl(const cis2_tokenizer *t, const int32_t *ids, int n,
                                      char **text, size_t *len, char *err)
{
    *text = NULL;
    *len = 0;
    if (n < 0 || (n > 0 && !ids)) {
        snprintf(err, CIS2_ERR_LEN, "decode: %d ids%s", n,
                 n < 0 ? " (a negative count)" : " at NULL");
        return 1;
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids) {
            snprintf(err, CIS2_ERR_LEN,
                     "%s: token id %d (position %d) is outside the vocabulary 0..%d", t->path,
                     (int)ids[i], i, t->n_ids - 1);
            return 1;
        }
        total += t->tok_off[ids[i] + 1] - t->tok_off[ids[i]];
    }
    char *o = malloc(total + 1);
    if (!o) {
        snprintf(err, CIS2_ERR_LEN, "detokenize: out of memory");
        return -1;
    }
    size_t p = 0;
    for (int i = 0; i < n; i++) {
        uint32_t a = t->tok_off[ids[i]], b = t->tok_off[ids[i] + 1];
        memcpy(o + p, t->tok_bytes + a, b - a);
        p += b - a;
    }
    o[p] = 0; /* byte-level BPE decoding is total: the bytes need not be UTF-8 (cis2.h) */
    *text = o;
    *len = p;
    return 0;
}

/* ---- public entry points: the message stays one line whatever the caller's
 * strings (paths, names) held (docs/errors.md: file names are escaped;
 * SANITIZE leaves what is escaped already as it is). */
int cis2_tokenizer_parse(cis2_tokenizer **out, const char *json, size_t len, const char *path,
                         char *err)
{
    int rc = cis2_tokenizer_parse_impl(out, json, len, path, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_tokenizer_load(cis2_tokenizer **t, const char *path, char *err)
{
    int rc = cis2_tokenizer_load_impl(t, path, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_tokenizer_encode(const cis2_tokenizer *t, const char *text, size_t len, int32_t **ids,
                          int *n, char *err)
{
    int rc = cis2_tokenizer_encode_impl(t, text, len, ids, n, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_tokenizer_normalize(const cis2_tokenizer *t, const char *text, size_t len, char **out,
                             size_t *out_len, char *err)
{
    int rc = cis2_tokenizer_normalize_impl(t, text, len, out, out_len, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_tokenizer_decode(const cis2_tokenizer *t, const int32_t *ids, int n, char **text,
                          size_t *len, char *err)
{
    int rc = cis2_tokenizer_decode_impl(t, ids, n, text, len, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}
