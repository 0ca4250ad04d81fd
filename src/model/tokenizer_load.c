/* Reading and validating a HuggingFace tokenizer.json (spec §3.1) into the
 * cis2_tokenizer of tokenizer.h: the pipeline's shape (§3.1.3, §3.1.4), the
 * vocab and byte symbols (§3.1.5.a-b), the merges (§3.1.5.c), the added
 * tokens and their matchers (§3.1.6), and each id's decoded bytes.
 *
 * Accepted are the pipelines we reproduce exactly (§3.1.3-§3.1.6): normalizer
 * null or NFC; a pre-tokenizer of Digits(individual_digits=true), Split
 * steps whose regex has a hand-written matcher (GPT-2's, Qwen2's, Llama-3's;
 * behavior Isolated) and a final ByteLevel(add_prefix_space=false); a plain
 * BPE model, ignore_merges false or true; a post-processor of ByteLevel and
 * TemplateProcessing steps (no ids change). Anything else is refused with an
 * error naming the field, never approximated. Where the spec is silent, HF
 * `tokenizers` v0.23.1 is the tie-breaker (§3.1.2).
 */
#include "model/tokenizer.h"
#include "core/json.h"
#include "model/unicode_tables.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* §3.1.5.a: GPT-2's bytes_to_unicode(). b2u[byte] = code point; u2b is its
 * inverse over code points 0..323 (-1 where no byte maps there). */
static void byte_map(uint32_t b2u[256], int16_t u2b[324])
{
    int n = 0;
    for (int i = 0; i < 324; i++) u2b[i] = -1;
    for (int b = 0; b < 256; b++) {
        int self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        b2u[b] = self ? (uint32_t)b : (uint32_t)(256 + n++);
        u2b[b2u[b]] = (int16_t)b;
    }
}

/* ---------------------------------------------------------------- errors */

static int ferr(char *err, const char *path, const char *fmt, ...)
{
    int k = snprintf(err, CIS2_ERR_LEN, "%s: ", path);
    if (k < 0) k = 0;
    if (k >= CIS2_ERR_LEN) k = CIS2_ERR_LEN - 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, (size_t)(CIS2_ERR_LEN - k), fmt, ap);
    va_end(ap);
    return 1;
}

/* Every allocation failure in this file says exactly "PATH: out of memory"
 * (ferr) and no other failure does: how a load tells memory running out
 * (-1) from a tokenizer.json it refuses (1), include/cis2.h. */
static int said_oom(const char *err, const char *path)
{
    char want[CIS2_ERR_LEN];
    ferr(want, path, "out of memory");
    return !strcmp(err, want);
}

static const char *show(const char *s, size_t n, char out[200])
{
    return cis2_utf8_quote(s, n, out);
}

/* ----------------------------------------------------- string -> id table */

typedef struct {
    const char *arena;
    const uint32_t *off, *len;
    int32_t *slot; /* id + 1, 0 = empty */
    uint32_t mask;
} str_table;

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Id of string s, or -1; *slot_out gets the slot where it is or would go. */
static int32_t str_find(const str_table *st, const char *s, size_t n, uint32_t *slot_out)
{
    uint32_t i = (uint32_t)fnv1a(s, n) & st->mask;
    while (st->slot[i]) {
        int32_t id = st->slot[i] - 1;
        if (st->len[id] == n && memcmp(st->arena + st->off[id], s, n) == 0) {
            if (slot_out) *slot_out = i;
            return id;
        }
        i = (i + 1) & st->mask;
    }
    if (slot_out) *slot_out = i;
    return -1;
}

/* --------------------------------------------------------- shape checks */

/* One pass over obj's members: vals[i] = the value of key allowed[i]
 * (NULL-terminated list, at most 16), JSON_NONE when absent; a key not in
 * `allowed`, or given twice, is an error naming it. */
static int members(const json_doc *d, uint32_t obj, const char *const *allowed, uint32_t *vals,
                   const char *where, const char *path, char *err)
{
    char buf[200];
    size_t alen[16];
    int na = 0;
    for (; allowed[na]; na++) {
        alen[na] = strlen(allowed[na]);
        vals[na] = JSON_NONE;
    }
    for (uint32_t k = d->nodes[obj].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next) {
        const json_node *kn = &d->nodes[k];
        int hit = -1;
        for (int a = 0; a < na && hit < 0; a++)
            if (kn->has_escape
                    ? json_str_eq(d, k, allowed[a])
                    : kn->len == alen[a] && memcmp(d->src + kn->start, allowed[a], alen[a]) == 0)
                hit = a;
        if (hit < 0 || vals[hit] != JSON_NONE) {
            size_t kl;
            char *key = json_str_dup(d, k, &kl);
            if (!key) return ferr(err, path, "out of memory");
            ferr(err, path, "%s: %s key %s", where, hit >= 0 ? "duplicate" : "unsupported",
                 show(key, kl, buf));
            free(key);
            return 1;
        }
        vals[hit] = kn->next;
    }
    return 0;
}

/* Every key of obj must be in `allowed` (NULL-terminated) and appear once. */
static int check_keys(const json_doc *d, uint32_t obj, const char *const *allowed,
                      const char *where, const char *path, char *err)
{
    uint32_t vals[16];
    return members(d, obj, allowed, vals, where, path, err);
}

static int is_null(const json_doc *d, uint32_t n)
{
    return n == JSON_NONE || d->nodes[n].type == JSON_NULL;
}

/* Optional boolean member: *out = def when absent; type error otherwise. */
static int node_bool(const json_doc *d, uint32_t v, const char *key, int def, int *out,
                     const char *where, const char *path, char *err)
{
    if (v == JSON_NONE) {
        *out = def;
        return 0;
    }
    if (d->nodes[v].type == JSON_TRUE) {
        *out = 1;
        return 0;
    }
    if (d->nodes[v].type == JSON_FALSE) {
        *out = 0;
        return 0;
    }
    return ferr(err, path, "%s.%s: expected true or false", where, key);
}

static int get_bool(const json_doc *d, uint32_t obj, const char *key, int def, int *out,
                    const char *where, const char *path, char *err)
{
    return node_bool(d, json_get(d, obj, key, NULL), key, def, out, where, path, err);
}

/* node_bool, and the value must be `want`. */
static int node_want(const json_doc *d, uint32_t v, const char *key, int def, int want,
                     const char *where, const char *path, char *err)
{
    int b = def;
    if (node_bool(d, v, key, def, &b, where, path, err)) return 1;
    if (b != want)
        return ferr(err, path, "%s.%s = %s is unsupported (only %s is implemented exactly)", where,
                    key, b ? "true" : "false", want ? "true" : "false");
    return 0;
}

/* Require obj.key == want (default `def` when absent). */
static int want_bool(const json_doc *d, uint32_t obj, const char *key, int def, int want,
                     const char *where, const char *path, char *err)
{
    return node_want(d, json_get(d, obj, key, NULL), key, def, want, where, path, err);
}

static int want_null(const json_doc *d, uint32_t obj, const char *key, const char *where,
                     const char *path, char *err)
{
    uint32_t v = json_get(d, obj, key, NULL);
    if (!is_null(d, v))
        return ferr(err, path, "%s.%s: unsupported (only null is implemented)", where, key);
    return 0;
}

static int want_type(const json_doc *d, uint32_t obj, const char *type, const char *where,
                     const char *path, char *err)
{
    char buf[200];
    if (d->nodes[obj].type != JSON_OBJECT) return ferr(err, path, "%s: expected an object", where);
    uint32_t t = json_get(d, obj, "type", NULL);
    if (t == JSON_NONE || d->nodes[t].type != JSON_STRING)
        return ferr(err, path, "%s.type: missing or not a string", where);
    if (!json_str_eq(d, t, type)) {
        size_t l;
        char *s = json_str_dup(d, t, &l);
        if (!s) return ferr(err, path, "out of memory");
        ferr(err, path, "%s: unsupported type %s (only %s is implemented)", where, show(s, l, buf),
             type);
        free(s);
        return 1;
    }
    return 0;
}

/* A string member that must be null (or absent) or "" (no prefix/suffix). */
static int want_null_or_empty(const json_doc *d, uint32_t obj, const char *key, const char *where,
                              const char *path, char *err)
{
    uint32_t v = json_get(d, obj, key, NULL);
    if (is_null(d, v) || (d->nodes[v].type == JSON_STRING && d->nodes[v].len == 0)) return 0;
    return ferr(err, path, "%s.%s: unsupported (only null or \"\" is implemented)", where, key);
}

/* One pre-tokenizer step (§3.1.4) into t->pt; *bytelevel set for the final
 * ByteLevel step. `where` names the step in messages. */
static int load_pretok_step(cis2_tokenizer *t, const json_doc *d, uint32_t st, int *bytelevel,
                            const char *where, const char *path, char *err)
{
    char buf[200];
    uint32_t ty = d->nodes[st].type == JSON_OBJECT ? json_get(d, st, "type", NULL) : JSON_NONE;
    if (ty == JSON_NONE || d->nodes[ty].type != JSON_STRING)
        return ferr(err, path, "%s: expected an object with a string \"type\"", where);
    int kind = -1;
    if (json_str_eq(d, ty, "Digits")) {
        static const char *const keys[] = { "type", "individual_digits", NULL };
        if (check_keys(d, st, keys, where, path, err) ||
            want_bool(d, st, "individual_digits", 0, 1, where, path, err))
            return 1;
        kind = CIS2_PT_DIGITS;
    } else if (json_str_eq(d, ty, "ByteLevel")) {
        static const char *const keys[] = { "type", "add_prefix_space", "trim_offsets", "use_regex",
                                            NULL };
        int regex = 1, dummy;
        if (check_keys(d, st, keys, where, path, err) ||
            want_bool(d, st, "add_prefix_space", 1, 0, where, path, err) ||
            get_bool(d, st, "use_regex", 1, &regex, where, path, err) ||
            get_bool(d, st, "trim_offsets", 1, &dummy, where, path, err)) /* offsets only */
            return 1;
        *bytelevel = 1;
        if (!regex) return 0;
        kind = CIS2_PT_GPT2; /* ByteLevel's own regex is GPT-2's */
    } else if (json_str_eq(d, ty, "Split")) {
        static const char *const keys[] = { "type", "pattern", "behavior", "invert", NULL };
        if (check_keys(d, st, keys, where, path, err) ||
            want_bool(d, st, "invert", 0, 0, where, path, err))
            return 1;
        uint32_t be = json_get(d, st, "behavior", NULL);
        if (be == JSON_NONE || d->nodes[be].type != JSON_STRING || !json_str_eq(d, be, "Isolated"))
            return ferr(err, path, "%s.behavior: unsupported (only \"Isolated\" is implemented)",
                        where);
        uint32_t pa = json_get(d, st, "pattern", NULL);
        uint32_t re = pa != JSON_NONE && d->nodes[pa].type == JSON_OBJECT && d->nodes[pa].count == 1
                          ? json_get(d, pa, "Regex", NULL)
                          : JSON_NONE;
        if (re == JSON_NONE || d->nodes[re].type != JSON_STRING)
            return ferr(err, path,
                        "%s.pattern: unsupported (only {\"Regex\": \"...\"} is implemented)",
                        where);
        size_t l;
        char *rx = json_str_dup(d, re, &l);
        if (!rx) return ferr(err, path, "out of memory");
        kind = cis2_pt_regex_kind(rx, l);
        if (kind < 0)
            ferr(err, path,
                 "%s.pattern.Regex %s is not one this tokenizer implements exactly (known: "
                 "GPT-2's, Qwen2's, Llama-3's)",
                 where, show(rx, l, buf));
        free(rx);
        if (kind < 0) return 1;
    } else {
        size_t l;
        char *s = json_str_dup(d, ty, &l);
        if (!s) return ferr(err, path, "out of memory");
        ferr(err, path,
             "%s: unsupported type %s (only Digits, Split and ByteLevel are implemented)", where,
             show(s, l, buf));
        free(s);
        return 1;
    }
    if (t->pt.n == CIS2_PT_MAX) return ferr(err, path, "%s: too many steps", where);
    t->pt.kind[t->pt.n++] = (uint8_t)kind;
    return 0;
}

/* §3.1.4: a ByteLevel step, or a Sequence of steps ending with one. */
static int load_pretok(cis2_tokenizer *t, const json_doc *d, const char *path, char *err)
{
    uint32_t pt = json_get(d, 0, "pre_tokenizer", NULL);
    if (is_null(d, pt))
        return ferr(err, path,
                    "pre_tokenizer: null is unsupported (byte-level BPE needs a ByteLevel step)");
    if (d->nodes[pt].type != JSON_OBJECT)
        return ferr(err, path, "pre_tokenizer: expected an object");
    int bytelevel = 0;
    uint32_t ty = json_get(d, pt, "type", NULL);
    if (ty == JSON_NONE || !json_str_eq(d, ty, "Sequence")) {
        if (load_pretok_step(t, d, pt, &bytelevel, "pre_tokenizer", path, err)) return 1;
        if (!bytelevel)
            return ferr(err, path,
                        "pre_tokenizer: unsupported type (byte-level BPE needs a "
                        "ByteLevel step, alone or last in a Sequence)");
        return 0;
    }
    static const char *const seq_keys[] = { "type", "pretokenizers", NULL };
    if (check_keys(d, pt, seq_keys, "pre_tokenizer", path, err)) return 1;
    uint32_t arr = json_get(d, pt, "pretokenizers", NULL);
    if (arr == JSON_NONE || d->nodes[arr].type != JSON_ARRAY || d->nodes[arr].count < 1 ||
        d->nodes[arr].count > CIS2_PT_MAX)
        return ferr(err, path,
                    "pre_tokenizer.pretokenizers: unsupported (an array of 1 to %d steps)",
                    CIS2_PT_MAX);
    uint32_t i = 0;
    for (uint32_t k = d->nodes[arr].first; k != JSON_NONE; k = d->nodes[k].next, i++) {
        char where[48];
        snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%u]", i);
        if (bytelevel)
            return ferr(err, path,
                        "pre_tokenizer.pretokenizers: unsupported order (ByteLevel must be the "
                        "last step)");
        if (load_pretok_step(t, d, k, &bytelevel, where, path, err)) return 1;
    }
    if (!bytelevel)
        return ferr(err, path,
                    "pre_tokenizer.pretokenizers: unsupported (byte-level BPE needs a final "
                    "ByteLevel step)");
    return 0;
}

/* One post-processor step. Neither kind changes the ids encode gives: the
 * ByteLevel one only adjusts offsets, and TemplateProcessing (Llama 3's,
 * adding <|begin_of_text|>) acts only when special tokens are added, which
 * encode never does (add_special_tokens=false, §3.3). */
static int check_post_step(const json_doc *d, uint32_t st, const char *where, const char *path,
                           char *err)
{
    static const char *const bl_keys[] = { "type", "add_prefix_space", "trim_offsets", "use_regex",
                                           NULL };
    static const char *const tp_keys[] = { "type", "single", "pair", "special_tokens", NULL };
    char buf[200];
    if (d->nodes[st].type != JSON_OBJECT) return ferr(err, path, "%s: expected an object", where);
    uint32_t ty = json_get(d, st, "type", NULL);
    if (ty == JSON_NONE || d->nodes[ty].type != JSON_STRING)
        return ferr(err, path, "%s.type: missing or not a string", where);
    if (json_str_eq(d, ty, "ByteLevel")) return check_keys(d, st, bl_keys, where, path, err);
    if (json_str_eq(d, ty, "TemplateProcessing")) {
        uint32_t v[4];
        if (members(d, st, tp_keys, v, where, path, err)) return 1;
        if (v[1] == JSON_NONE || d->nodes[v[1]].type != JSON_ARRAY || v[2] == JSON_NONE ||
            d->nodes[v[2]].type != JSON_ARRAY || v[3] == JSON_NONE ||
            d->nodes[v[3]].type != JSON_OBJECT)
            return ferr(err, path,
                        "%s: TemplateProcessing needs arrays single and pair and an object "
                        "special_tokens",
                        where);
        return 0;
    }
    size_t l;
    char *s = json_str_dup(d, ty, &l);
    if (!s) return ferr(err, path, "out of memory");
    ferr(err, path,
         "%s: unsupported type %s (only ByteLevel, TemplateProcessing and a Sequence of them are "
         "implemented)",
         where, show(s, l, buf));
    free(s);
    return 1;
}

/* post_processor: one step, or a Sequence of 1-4 (Llama 3.1: ByteLevel, then
 * TemplateProcessing). */
static int check_post(const json_doc *d, uint32_t pp, const char *path, char *err)
{
    static const char *const seq_keys[] = { "type", "processors", NULL };
    uint32_t ty = d->nodes[pp].type == JSON_OBJECT ? json_get(d, pp, "type", NULL) : JSON_NONE;
    if (ty == JSON_NONE || d->nodes[ty].type != JSON_STRING || !json_str_eq(d, ty, "Sequence"))
        return check_post_step(d, pp, "post_processor", path, err);
    uint32_t v[2];
    if (members(d, pp, seq_keys, v, "post_processor", path, err)) return 1;
    if (v[1] == JSON_NONE || d->nodes[v[1]].type != JSON_ARRAY || d->nodes[v[1]].count < 1 ||
        d->nodes[v[1]].count > 4)
        return ferr(err, path, "post_processor.processors: unsupported (an array of 1 to 4 steps)");
    uint32_t i = 0;
    for (uint32_t k = d->nodes[v[1]].first; k != JSON_NONE; k = d->nodes[k].next, i++) {
        char where[64];
        snprintf(where, sizeof where, "post_processor.processors[%u]", i);
        if (check_post_step(d, k, where, path, err)) return 1;
    }
    return 0;
}

/* §3.1.3: the pipeline around the pre-tokenizer and the BPE model's options. */
static int check_pipeline(cis2_tokenizer *t, const json_doc *d, const char *path, char *err)
{
    char buf[200];
    static const char *const top[] = {
        "version",       "truncation",     "padding", "added_tokens", "normalizer",
        "pre_tokenizer", "post_processor", "decoder", "model",        NULL
    };
    if (d->nodes[0].type != JSON_OBJECT)
        return ferr(err, path, "expected a JSON object at top level");
    if (check_keys(d, 0, top, "tokenizer.json", path, err)) return 1;
    if (json_get(d, 0, "model", NULL) == JSON_NONE) return ferr(err, path, "missing \"model\"");
    /* truncation/padding would change the ids. */
    if (want_null(d, 0, "truncation", "tokenizer", path, err) ||
        want_null(d, 0, "padding", "tokenizer", path, err))
        return 1;

    uint32_t no = json_get(d, 0, "normalizer", NULL);
    if (!is_null(d, no)) {
        static const char *const nfc_keys[] = { "type", NULL };
        uint32_t ty = d->nodes[no].type == JSON_OBJECT ? json_get(d, no, "type", NULL) : JSON_NONE;
        if (ty == JSON_NONE || d->nodes[ty].type != JSON_STRING || !json_str_eq(d, ty, "NFC")) {
            size_t l = 0;
            char *s = ty != JSON_NONE && d->nodes[ty].type == JSON_STRING ? json_str_dup(d, ty, &l)
                                                                          : NULL;
            ferr(err, path, "normalizer: unsupported type %s (only null and NFC are implemented)",
                 s ? show(s, l, buf) : "(none)");
            free(s);
            return 1;
        }
        if (check_keys(d, no, nfc_keys, "normalizer", path, err)) return 1;
        t->nfc = 1;
    }
    if (load_pretok(t, d, path, err)) return 1;

    static const char *const bl_keys[] = { "type", "add_prefix_space", "trim_offsets", "use_regex",
                                           NULL };
    uint32_t pp = json_get(d, 0, "post_processor", NULL);
    if (!is_null(d, pp) && check_post(d, pp, path, err)) return 1;

    /* decode (§3.1.5.a inverse map) is what the ByteLevel decoder does; its
     * options play no part in decoding. */
    uint32_t dec = json_get(d, 0, "decoder", NULL);
    if (is_null(d, dec)) return ferr(err, path, "decoder: null is unsupported (only ByteLevel)");
    if (want_type(d, dec, "ByteLevel", "decoder", path, err) ||
        check_keys(d, dec, bl_keys, "decoder", path, err))
        return 1;

    /* §3.1.5: the BPE model's options. */
    uint32_t m = json_get(d, 0, "model", NULL);
    static const char *const m_keys[] = { "type",
                                          "dropout",
                                          "unk_token",
                                          "continuing_subword_prefix",
                                          "end_of_word_suffix",
                                          "fuse_unk",
                                          "byte_fallback",
                                          "ignore_merges",
                                          "vocab",
                                          "merges",
                                          NULL };
    if (want_type(d, m, "BPE", "model", path, err) ||
        check_keys(d, m, m_keys, "model", path, err) ||
        want_null(d, m, "dropout", "model", path, err) ||
        want_null_or_empty(d, m, "continuing_subword_prefix", "model", path, err) ||
        want_null_or_empty(d, m, "end_of_word_suffix", "model", path, err) ||
        want_bool(d, m, "fuse_unk", 0, 0, "model", path, err) ||
        want_bool(d, m, "byte_fallback", 0, 0, "model", path, err) ||
        get_bool(d, m, "ignore_merges", 0, &t->ignore_merges, "model", path, err))
        return 1;
    /* unk_token is moot: a byte without a vocab symbol is refused at encode. */
    uint32_t unk = json_get(d, m, "unk_token", NULL);
    if (!is_null(d, unk) && d->nodes[unk].type != JSON_STRING)
        return ferr(err, path, "model.unk_token: expected a string or null");
    return 0;
}

/* ------------------------------------------------------------------ load */

typedef struct {
    char *arena;         /* decoded vocab strings */
    uint32_t *off, *len; /* by id */
    str_table st;
} vocab_tmp;

static void vocab_tmp_free(vocab_tmp *v)
{
    free(v->arena);
    free(v->off);
    free(v->len);
    free(v->st.slot);
}

static int load_vocab(cis2_tokenizer *t, const json_doc *d, uint32_t m, vocab_tmp *v,
                      const char *path, char *err)
{
    char buf[200];
    uint32_t vo = json_get(d, m, "vocab", NULL);
    if (vo == JSON_NONE || d->nodes[vo].type != JSON_OBJECT)
        return ferr(err, path, "model.vocab: missing or not an object");
    uint32_t n = d->nodes[vo].count;
    if (n < 256 || n > (1u << 30))
        return ferr(err, path, "model.vocab: %u entries (need at least the 256 byte symbols)", n);
    size_t total = 0;
    for (uint32_t k = d->nodes[vo].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next)
        total += d->nodes[k].len;
    uint32_t cap = 1;
    while (cap < 2 * n) cap <<= 1;
    v->arena = malloc(total + 1);
    v->off = calloc(n, sizeof *v->off);
    v->len = calloc(n, sizeof *v->len);
    v->st.slot = calloc(cap, sizeof *v->st.slot);
    if (!v->arena || !v->off || !v->len || !v->st.slot) return ferr(err, path, "out of memory");
    v->st.arena = v->arena;
    v->st.off = v->off;
    v->st.len = v->len;
    v->st.mask = cap - 1;
    size_t used = 0;
    for (uint32_t k = d->nodes[vo].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next) {
        uint32_t val = d->nodes[k].next;
        size_t l = json_str_len(d, k);
        json_str_decode(d, k, v->arena + used);
        int64_t id;
        if (json_num_i64(d, val, &id))
            return ferr(err, path, "model.vocab[%s]: id is not an integer",
                        show(v->arena + used, l, buf));
        if (id < 0 || id >= n)
            return ferr(err, path, "model.vocab[%s]: id %lld out of range 0..%u",
                        show(v->arena + used, l, buf), (long long)id, n - 1);
        if (l == 0)
            return ferr(err, path, "model.vocab: empty token string (id %lld)", (long long)id);
        if (v->len[id] != 0) /* lengths are never 0, so 0 = unused id */
            return ferr(err, path, "model.vocab[%s]: id %lld is also used by another token",
                        show(v->arena + used, l, buf), (long long)id);
        v->off[id] = (uint32_t)used;
        v->len[id] = (uint32_t)l;
        uint32_t slot;
        if (str_find(&v->st, v->arena + used, l, &slot) >= 0)
            return ferr(err, path, "model.vocab: duplicate token %s",
                        show(v->arena + used, l, buf));
        v->st.slot[slot] = (int32_t)id + 1;
        used += l;
    }
    /* n distinct ids in 0..n-1: dense. */
    t->n_vocab = (int)n;

    /* §3.1.5.b: each byte's one-character symbol. The spec says all 256 are
     * in the vocab, but SmolLM2's tokenizer.json lacks 21 (bytes 0x04 0x06
     * 0x13 0x14 0x16 0x1d 0xc0 0xc1 0xf1..0xff): byte_id -1, and encode
     * refuses text that needs one (see bpe_word). */
    uint32_t b2u[256];
    int16_t u2b[324];
    byte_map(b2u, u2b);
    int have = 0;
    for (int b = 0; b < 256; b++) {
        char s[4];
        size_t l = cis2_utf8_enc(b2u[b], (uint8_t *)s);
        t->byte_id[b] = str_find(&v->st, s, l, NULL);
        have += t->byte_id[b] >= 0;
    }
    if (!have)
        return ferr(
            err, path,
            "model.vocab: has none of the 256 byte-level symbols; not a byte-level BPE vocab");
    return 0;
}

static int load_merges(cis2_tokenizer *t, const json_doc *d, uint32_t m, const vocab_tmp *v,
                       const char *path, char *err)
{
    char buf[200];
    uint32_t mo = json_get(d, m, "merges", NULL);
    if (mo == JSON_NONE || d->nodes[mo].type != JSON_ARRAY)
        return ferr(err, path, "model.merges: missing or not an array");
    uint32_t n = d->nodes[mo].count;
    int bits = 4;
    while ((1u << bits) < 2 * n + 16) bits++;
    t->merge_bits = bits;
    t->merges = malloc(sizeof *t->merges << bits);
    if (!t->merges) return ferr(err, path, "out of memory");
    for (uint32_t i = 0; i < (1u << bits); i++) t->merges[i].key = MERGE_EMPTY;
    char *tmp = NULL;
    size_t cap = 0;
    uint32_t rank = 0;
    int rc = 1;
    for (uint32_t k = d->nodes[mo].first; k != JSON_NONE; k = d->nodes[k].next, rank++) {
        /* "a b" (split at the first space) or ["a", "b"] */
        uint32_t pa = k, pb = JSON_NONE;
        const json_node *nd = &d->nodes[k];
        if (nd->type == JSON_ARRAY) {
            if (nd->count != 2 || d->nodes[nd->first].type != JSON_STRING ||
                d->nodes[d->nodes[nd->first].next].type != JSON_STRING) {
                ferr(err, path, "model.merges[%u]: expected \"a b\" or [\"a\", \"b\"]", rank);
                goto out;
            }
            pa = nd->first;
            pb = d->nodes[pa].next;
        } else if (nd->type != JSON_STRING) {
            ferr(err, path, "model.merges[%u]: expected \"a b\" or [\"a\", \"b\"]", rank);
            goto out;
        }
        size_t la = json_str_len(d, pa), lb = pb != JSON_NONE ? json_str_len(d, pb) : 0;
        if (la + lb + 1 > cap) {
            cap = 2 * (la + lb + 1);
            char *nt = realloc(tmp, cap);
            if (!nt) {
                ferr(err, path, "out of memory");
                goto out;
            }
            tmp = nt;
        }
        json_str_decode(d, pa, tmp);
        if (pb != JSON_NONE) json_str_decode(d, pb, tmp + la);
        else {
            char *sp = memchr(tmp, ' ', la);
            if (!sp) {
                ferr(err, path, "model.merges[%u]: %s has no space between the two parts", rank,
                     show(tmp, la, buf));
                goto out;
            }
            memmove(sp, sp + 1, la - (size_t)(sp - tmp) - 1); /* "a b" -> "ab", a = first part */
            lb = la - (size_t)(sp - tmp) - 1;
            la = (size_t)(sp - tmp);
        }
        int32_t ia = str_find(&v->st, tmp, la, NULL), ib = str_find(&v->st, tmp + la, lb, NULL);
        int32_t ic = str_find(&v->st, tmp, la + lb, NULL);
        if (ia < 0) {
            ferr(err, path, "model.merges[%u]: token %s is not in model.vocab", rank,
                 show(tmp, la, buf));
            goto out;
        }
        if (ib < 0) {
            ferr(err, path, "model.merges[%u]: token %s is not in model.vocab", rank,
                 show(tmp + la, lb, buf));
            goto out;
        }
        if (ic < 0) {
            ferr(err, path, "model.merges[%u]: merged token %s is not in model.vocab", rank,
                 show(tmp, la + lb, buf));
            goto out;
        }
        uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
        uint32_t mask = (1u << bits) - 1, s = tok_merge_hash(key, bits);
        while (t->merges[s].key != MERGE_EMPTY && t->merges[s].key != key) s = (s + 1) & mask;
        if (t->merges[s].key == key) {
            ferr(err, path, "model.merges[%u]: duplicate of model.merges[%u]", rank,
                 t->merges[s].rank);
            goto out;
        }
        t->merges[s].key = key;
        t->merges[s].rank = rank;
        t->merges[s].id = ic;
    }
    rc = 0;
out:
    free(tmp);
    return rc;
}

/* A hash set over strings arena[off[i] .. +len[i]) for i < n: *dup = the
 * first j < i equal to i, else -1, for every i in turn (one pass, O(total)). */
static int first_dups(const char *arena, const uint32_t *off, const uint32_t *len, uint32_t n,
                      int32_t *dup)
{
    uint32_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    str_table st = { arena, off, len, calloc(cap, sizeof(int32_t)), cap - 1 };
    if (!st.slot) return 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t slot;
        dup[i] = str_find(&st, arena + off[i], len[i], &slot);
        if (dup[i] < 0) st.slot[slot] = (int32_t)i + 1;
    }
    free(st.slot);
    return 0;
}

/* The matcher of one pass over the patterns of the tokens with
 * normalized == pass; pass 1 patterns are their content's NFC under an NFC
 * normalizer (as tokenizers normalizes them when it adds them). */
static int build_pass(cis2_tokenizer *t, int pass, const char *path, char *err)
{
    char buf[200];
    uint32_t n = 0;
    size_t total = 0;
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].normalized == pass) n++, total += t->added[i].len;
    if (!n) return 0;
    const char **pat = malloc(n * sizeof *pat);
    uint32_t *off = malloc(n * sizeof *off), *len = malloc(n * sizeof *len);
    int32_t *dup = malloc(n * sizeof *dup);
    t->pat_tok[pass] = malloc(n * sizeof *t->pat_tok[pass]);
    t->pat_len[pass] = len;
    cis2_nfc_buf nb = { 0 };
    char *arena = NULL;
    int rc = 1;
    if (!pat || !off || !len || !dup || !t->pat_tok[pass]) {
        if (!len) t->pat_len[pass] = NULL;
        ferr(err, path, "out of memory");
        goto out;
    }
    int norm = pass == 1 && t->nfc;
    size_t cap = 3 * total + 1, used = 0; /* NFC grows text by at most 3x (UAX #15 §9) */
    if (norm && !(arena = t->pat_text = malloc(cap))) {
        ferr(err, path, "out of memory");
        goto out;
    }
    uint32_t k = 0;
    for (int i = 0; i < t->n_added; i++) {
        const added_tok *a = &t->added[i];
        if (a->normalized != pass) continue;
        size_t l = a->len;
        if (norm) { /* the pattern is the content's NFC, in the arena */
            if (cis2_nfc((const uint8_t *)a->s, a->len, &nb, &l) || used + l > cap) {
                ferr(err, path, "out of memory");
                goto out;
            }
            memcpy(arena + used, nb.out, l);
        }
        pat[k] = norm ? arena + used : a->s;
        off[k] = norm ? (uint32_t)used : (uint32_t)(a->s - t->added_text);
        len[k] = (uint32_t)l;
        t->pat_tok[pass][k] = i;
        used += l;
        k++;
    }
    if (first_dups(norm ? arena : t->added_text, off, len, n, dup)) {
        ferr(err, path, "out of memory");
        goto out;
    }
    for (uint32_t j = 0; j < n; j++)
        if (dup[j] >= 0) { /* only NFC can make two distinct contents equal */
            ferr(err, path, "added_tokens[%d]: its NFC form %s is also that of added_tokens[%d]",
                 t->pat_tok[pass][j], show(pat[j], len[j], buf), t->pat_tok[pass][dup[j]]);
            goto out;
        }
    int mrc = cis2_strmatch_build(&t->match[pass], pat, len, n);
    if (mrc) {
        ferr(err, path,
             mrc == 2 ? "added_tokens: too much text (16 MiB at most)" : "out of memory");
        goto out;
    }
    rc = 0;
out:
    cis2_nfc_buf_free(&nb);
    free(pat);
    free(off);
    free(dup);
    return rc;
}

/* §3.1.6: added_tokens. Ids follow tokenizers v0.23.1: a token whose content
 * is in the vocab has that id; the others get n_vocab, n_vocab+1, ... in file
 * order (special or not). Linear in the number of tokens. */
static int load_added(cis2_tokenizer *t, const json_doc *d, const vocab_tmp *v, const char *path,
                      char *err)
{
    char buf[200];
    uint32_t at = json_get(d, 0, "added_tokens", NULL);
    t->n_ids = t->n_vocab;
    if (is_null(d, at)) return 0;
    if (d->nodes[at].type != JSON_ARRAY) return ferr(err, path, "added_tokens: expected an array");
    uint32_t n = d->nodes[at].count;
    if (n > (1u << 24)) return ferr(err, path, "added_tokens: too many tokens");
    size_t total = 0;
    for (uint32_t k = d->nodes[at].first; k != JSON_NONE; k = d->nodes[k].next) {
        uint32_t c = d->nodes[k].type == JSON_OBJECT ? json_get(d, k, "content", NULL) : JSON_NONE;
        if (c != JSON_NONE && d->nodes[c].type == JSON_STRING) total += d->nodes[c].len + 1;
    }
    t->added = calloc(n ? n : 1, sizeof *t->added);
    t->added_text = malloc(total + 1);
    uint32_t *off = malloc((n ? n : 1) * sizeof *off), *len = malloc((n ? n : 1) * sizeof *len);
    int32_t *dup = malloc((n ? n : 1) * sizeof *dup);
    int rc = 1;
    if (!t->added || !t->added_text || !off || !len || !dup) {
        ferr(err, path, "out of memory");
        goto out;
    }
    static const char *const keys[] = { "id",     "content",    "single_word", "lstrip",
                                        "rstrip", "normalized", "special",     NULL };
    size_t used = 0;
    uint32_t i = 0;
    for (uint32_t k = d->nodes[at].first; k != JSON_NONE; k = d->nodes[k].next, i++) {
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%u]", i);
        if (d->nodes[k].type != JSON_OBJECT) {
            ferr(err, path, "%s: expected an object", where);
            goto out;
        }
        uint32_t val[8];
        if (members(d, k, keys, val, where, path, err)) goto out;
        uint32_t c = val[1], idn = val[0];
        int64_t id;
        if (c == JSON_NONE || d->nodes[c].type != JSON_STRING) {
            ferr(err, path, "%s.content: missing or not a string", where);
            goto out;
        }
        if (idn == JSON_NONE || json_num_i64(d, idn, &id)) {
            ferr(err, path, "%s.id: missing or not an integer", where);
            goto out;
        }
        int special = 0, normalized = 1;
        if (node_want(d, val[2], "single_word", 0, 0, where, path, err) ||
            node_want(d, val[3], "lstrip", 0, 0, where, path, err) ||
            node_want(d, val[4], "rstrip", 0, 0, where, path, err) ||
            node_bool(d, val[5], "normalized", 1, &normalized, where, path, err) ||
            node_bool(d, val[6], "special", 0, &special, where, path, err))
            goto out;
        added_tok *a = &t->added[i];
        a->s = t->added_text + used;
        json_str_decode(d, c, t->added_text + used);
        a->len = (uint32_t)json_str_len(d, c);
        off[i] = (uint32_t)used;
        len[i] = a->len;
        t->added_text[used + a->len] = 0;
        used += a->len + 1;
        a->normalized = normalized;
        a->special = special;
        if (a->len == 0) {
            ferr(err, path, "%s.content: empty", where);
            goto out;
        }
        int32_t vid = str_find(&v->st, a->s, a->len, NULL);
        int64_t want = vid >= 0 ? vid : t->n_ids;
        if (id != want) {
            ferr(err, path, "%s: id %lld for %s, but tokenizers v0.23.1 would give it id %lld",
                 where, (long long)id, show(a->s, a->len, buf), (long long)want);
            goto out;
        }
        if (vid < 0) t->n_ids++;
        a->id = (int32_t)id;
    }
    t->n_added = (int)n;
    if (first_dups(t->added_text, off, len, n, dup)) {
        ferr(err, path, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++)
        if (dup[i] >= 0) {
            ferr(err, path, "added_tokens[%u]: content %s repeats added_tokens[%d]", i,
                 show(t->added[i].s, t->added[i].len, buf), dup[i]);
            goto out;
        }
    rc = build_pass(t, 0, path, err) || build_pass(t, 1, path, err);
out:
    free(off);
    free(len);
    free(dup);
    return rc;
}

/* §3.1.5.a inverse map per token; added tokens contribute their content. A
 * vocab token with a character outside the byte map (never produced by
 * encode) keeps its own UTF-8 bytes, as the ByteLevel decoder does. */
static int build_decode(cis2_tokenizer *t, const vocab_tmp *v, const char *path, char *err)
{
    uint32_t b2u[256];
    int16_t u2b[324];
    byte_map(b2u, u2b);
    size_t total = 0;
    for (int i = 0; i < t->n_vocab; i++) total += v->len[i];
    for (int i = 0; i < t->n_added; i++) total += t->added[i].len;
    t->tok_off = calloc((size_t)t->n_ids + 1, sizeof *t->tok_off);
    t->tok_bytes = malloc(total + 1);
    if (!t->tok_off || !t->tok_bytes) return ferr(err, path, "out of memory");
    if (total > UINT32_MAX) return ferr(err, path, "tokens too large");
    /* place added tokens by id first (index into t->added) */
    int32_t *added_at = malloc(sizeof *added_at * (size_t)t->n_ids);
    if (!added_at) return ferr(err, path, "out of memory");
    for (int i = 0; i < t->n_ids; i++) added_at[i] = -1;
    for (int i = 0; i < t->n_added; i++) added_at[t->added[i].id] = i;
    size_t o = 0;
    for (int id = 0; id < t->n_ids; id++) {
        t->tok_off[id] = (uint32_t)o;
        if (added_at[id] >= 0) {
            const added_tok *a = &t->added[added_at[id]];
            memcpy(t->tok_bytes + o, a->s, a->len);
            o += a->len;
            continue;
        }
        const uint8_t *s = (const uint8_t *)v->arena + v->off[id];
        size_t n = v->len[id], i = 0, o0 = o;
        while (i < n) {
            uint32_t cp;
            size_t l = cis2_utf8_dec(s + i, n - i, &cp);
            if (!l || cp >= 324 || u2b[cp] < 0) break;
            t->tok_bytes[o++] = (uint8_t)u2b[cp];
            i += l;
        }
        if (i < n) {
            memcpy(t->tok_bytes + o0, s, n);
            o = o0 + n;
        }
    }
    t->tok_off[t->n_ids] = (uint32_t)o;
    free(added_at);
    return 0;
}

/* ignore_merges: each vocab token's bytes (the inverse byte map of its
 * string, whatever added tokens share its id), hashed, for bpe_word's
 * whole-word lookup. Strings are distinct and the map is a bijection, so the
 * byte strings are distinct too. */
static int build_whole(cis2_tokenizer *t, const vocab_tmp *v, const char *path, char *err)
{
    if (!t->ignore_merges) return 0;
    uint32_t b2u[256];
    int16_t u2b[324];
    byte_map(b2u, u2b);
    size_t total = 0;
    uint32_t cap = 1;
    for (int i = 0; i < t->n_vocab; i++) total += v->len[i];
    while (cap < 2 * (uint32_t)t->n_vocab) cap <<= 1;
    t->whole_bytes = malloc(total + 1);
    t->whole_off = calloc((size_t)t->n_vocab + 1, sizeof *t->whole_off);
    t->whole_slot = calloc(cap, sizeof *t->whole_slot);
    if (!t->whole_bytes || !t->whole_off || !t->whole_slot) return ferr(err, path, "out of memory");
    t->whole_mask = cap - 1;
    size_t o = 0;
    for (int id = 0; id < t->n_vocab; id++) {
        const uint8_t *s = (const uint8_t *)v->arena + v->off[id];
        size_t n = v->len[id], i = 0, o0 = o;
        t->whole_off[id] = (uint32_t)o;
        while (i < n) {
            uint32_t cp;
            size_t l = cis2_utf8_dec(s + i, n - i, &cp);
            if (!l || cp >= 324 || u2b[cp] < 0) break;
            t->whole_bytes[o++] = (uint8_t)u2b[cp];
            i += l;
        }
        if (i < n) { /* no word's symbols spell it */
            o = o0;
            continue;
        }
        uint32_t k = (uint32_t)tok_fnv1a(t->whole_bytes + o0, o - o0) & t->whole_mask;
        while (t->whole_slot[k]) k = (k + 1) & t->whole_mask;
        t->whole_slot[k] = id + 1;
    }
    t->whole_off[t->n_vocab] = (uint32_t)o;
    return 0;
}

int cis2_tokenizer_parse_impl(cis2_tokenizer **out, const char *json, size_t len, const char *path,
                              char *err)
{
    *out = NULL;
    json_doc d;
    int jrc = json_parse(&d, json, len, path, err);
    if (jrc) return jrc < 0 ? -1 : 1;
    cis2_tokenizer *t = calloc(1, sizeof *t);
    vocab_tmp v;
    memset(&v, 0, sizeof v);
    int rc = 1;
    if (!t) {
        ferr(err, path, "out of memory");
        goto out;
    }
    snprintf(t->path, sizeof t->path, "%s", path);
    if (check_pipeline(t, &d, path, err)) goto out;
    uint32_t m = json_get(&d, 0, "model", NULL);
    if (load_vocab(t, &d, m, &v, path, err) || load_merges(t, &d, m, &v, path, err) ||
        load_added(t, &d, &v, path, err) || build_decode(t, &v, path, err) ||
        build_whole(t, &v, path, err))
        goto out;
    rc = 0;
out:
    vocab_tmp_free(&v);
    json_free(&d);
    if (rc) cis2_tokenizer_free(t);
    else *out = t;
    return rc && said_oom(err, path) ? -1 : rc;
}

int cis2_tokenizer_load_impl(cis2_tokenizer **t, const char *path, char *err)
{
    char *buf;
    size_t len;
    *t = NULL;
    if (cis2_read_file_max(path, CIS2_TOKENIZER_MAX, &buf, &len, err)) return 1;
    int rc = cis2_tokenizer_parse(t, buf, len, path, err);
    free(buf);
    return rc;
}

void cis2_tokenizer_free(cis2_tokenizer *t)
{
    if (!t) return;
    free(t->tok_off);
    free(t->tok_bytes);
    free(t->merges);
    free(t->added);
    free(t->added_text);
    for (int p = 0; p < 2; p++) {
        cis2_strmatch_free(t->match[p]);
        free(t->pat_tok[p]);
        free(t->pat_len[p]);
    }
    free(t->pat_text);
    free(t->whole_bytes);
    free(t->whole_off);
    free(t->whole_slot);
    free(t);
}
