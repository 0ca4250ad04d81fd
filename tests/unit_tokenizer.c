/* Tokenizer tests (spec §3.1): a synthetic tokenizer.json for the merge loop
 * and every malformed-file error, then the real SmolLM2 file (skipped, and
 * reported so, when absent). Golden ids are from the spec (§3.1.7) or were
 * cross-checked against ../shared/tools/bpe_oracle.py on the real file. */
#include "unit.h"
#include "model/pretok.h"
#include "model/unicode_tables.h"
#include <stdint.h>

/* ------------------------------------------------------------ helpers */

static char *subst(const char *s, const char *from, const char *to)
{
    const char *p = strstr(s, from);
    if (!p) {
        printf("FAIL subst: '%s' not in the base json\n", from);
        unit_failed++;
        p = s + strlen(s);
        from = "";
    }
    size_t a = (size_t)(p - s), fl = strlen(from), tl = strlen(to), n = strlen(s);
    char *o = malloc(n - fl + tl + 1);
    memcpy(o, s, a);
    memcpy(o + a, to, tl);
    memcpy(o + a + tl, p + fl, n - a - fl + 1);
    return o;
}

static int ids_eq(const int32_t *a, int na, const char *want)
{
    char *s = cis2_format_ids(a, na);
    int eq = s && strcmp(s, want) == 0;
    if (!eq) printf("  got %s want %s\n", s ? s : "(null)", want);
    free(s);
    return eq;
}

/* Encode, compare with `want` ids and check decode gives the text back. */
static void check_enc(const char *name, const cis2_tokenizer *t, const char *text, size_t len,
                      const char *want)
{
    char err[CIS2_ERR_LEN] = "", n2[160];
    int32_t *ids = NULL;
    int n = 0;
    int rc = cis2_tokenizer_encode(t, text, len, &ids, &n, err);
    CHECK(name, rc == 0 && ids_eq(ids, n, want), "rc=%d %s", rc, err);
    char *back = NULL;
    size_t bl = 0;
    rc = rc ? rc : cis2_tokenizer_decode(t, ids, n, &back, &bl, err);
    snprintf(n2, sizeof n2, "%s round trip", name);
    CHECK(n2, rc == 0 && bl == len && memcmp(back, text, len) == 0, "rc=%d %s", rc, err);
    free(ids);
    free(back);
}

static void check_enc_err(const char *name, const cis2_tokenizer *t, const char *text, size_t len,
                          const char *want)
{
    char err[CIS2_ERR_LEN] = "";
    int32_t *ids = (int32_t *)1;
    int n = -1;
    int rc = cis2_tokenizer_encode(t, text, len, &ids, &n, err);
    CHECK(name, rc != 0 && ids == NULL && strstr(err, want) && !strchr(err, '\n'),
          "rc=%d err='%s' want '%s'", rc, err, want);
    if (!rc) free(ids);
}

/* ------------------------------------------------- synthetic tokenizer */

/* §3.1.5.a byte map, written out independently of src/model/tokenizer_load.c. */
static uint32_t b2u(int b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return (uint32_t)b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
    return (uint32_t)(256 + n);
}

#define PRETOK                                                                                     \
    "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "      \
    "\"individual_digits\": true}, "                                                               \
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "              \
    "\"use_regex\": true}]}"
#define DECODER                                                                                    \
    "\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, "  \
    "\"use_regex\": true}"

/* Replace from the first `from` up to (not including) the next `upto`. */
static char *subst_span(const char *s, const char *from, const char *upto, const char *to)
{
    const char *a = strstr(s, from), *b = a ? strstr(a, upto) : NULL;
    if (!b) {
        printf("FAIL subst_span: '%s' not in the base json\n", from);
        unit_failed++;
        a = b = s;
    }
    size_t n = strlen(s), tl = strlen(to);
    char *o = malloc(n + tl + 1);
    memcpy(o, s, (size_t)(a - s));
    memcpy(o + (a - s), to, tl);
    memcpy(o + (a - s) + tl, b, n - (size_t)(b - s) + 1);
    return o;
}

/* Llama 3.1's post_processor (meta-llama's tokenizer.json), with <|end|> for
 * <|begin_of_text|>: it adds the token only with add_special_tokens=true. */
#define LLAMA3_POST                                                                                \
    "\"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\", "     \
    "\"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true}, {\"type\": "       \
    "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|end|>\", \"type_id\": "  \
    "0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [{\"SpecialToken\": "        \
    "{\"id\": "                                                                                    \
    "\"<|end|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "             \
    "{\"SpecialToken\": {\"id\": \"<|end|>\", \"type_id\": 1}}, {\"Sequence\": {\"id\": \"B\", "   \
    "\"type_id\": 1}}], \"special_tokens\": {\"<|end|>\": {\"id\": \"<|end|>\", \"ids\": [268], "  \
    "\"tokens\": [\"<|end|>\"]}}}]}"

/* merges over {a,b,c}, in rank order; each result joins the vocab. */
static const char *const MERGES[][2] = {
    { "a", "a" },   { "b", "c" }, { "a", "b" },    { "aa", "a" }, { "c", "c" },     { "ab", "c" },
    { "aa", "aa" }, { "b", "a" }, { "aaa", "bc" }, { "cc", "a" }, { "abc", "abc" }, { "ba", "ba" },
};
#define NMERGES (int)(sizeof MERGES / sizeof MERGES[0])

/* The base synthetic file: bytes are ids 0..255 (id = byte value), merge
 * results 256.., "<|end|>" is in the vocab; "<extra>" (special) and "hello"
 * (normalized, not special) are added tokens outside it. */
static char *synth_json(int array_merges)
{
    size_t cap = 1 << 16, o = 0;
    char *s = malloc(cap);
    o += (size_t)snprintf(
        s + o, cap - o,
        "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
        " \"added_tokens\": [{\"id\": %d, \"content\": \"<|end|>\", \"single_word\": false, "
        "\"lstrip\": false, "
        "\"rstrip\": false, \"normalized\": false, \"special\": true},\n"
        "  {\"id\": %d, \"content\": \"<extra>\", \"special\": true, \"normalized\": false},\n"
        "  {\"id\": %d, \"content\": \"hello\", \"special\": false}],\n"
        " \"normalizer\": null,\n"
        " " PRETOK ",\n"
        " \"post_processor\": null,\n"
        " " DECODER ",\n"
        " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
        "\"continuing_subword_prefix\": null, "
        "\"end_of_word_suffix\": null, \"fuse_unk\": false, \"byte_fallback\": false, "
        "\"ignore_merges\": false,\n"
        "  \"vocab\": {",
        256 + NMERGES, 257 + NMERGES, 258 + NMERGES);
    for (int b = 0; b < 256; b++) /* letters and digits plain, the rest as \\u escapes */
        o += (size_t)snprintf(s + o, cap - o,
                              (b < 128 && (b | 0x20) >= 'a' && (b | 0x20) <= 'z') ||
                                      (b >= '0' && b <= '9')
                                  ? "\"%c\": %d, "
                                  : "\"\\u%04x\": %d, ",
                              (int)b2u(b), b);
    for (int m = 0; m < NMERGES; m++)
        o +=
            (size_t)snprintf(s + o, cap - o, "\"%s%s\": %d, ", MERGES[m][0], MERGES[m][1], 256 + m);
    o += (size_t)snprintf(s + o, cap - o, "\"<|end|>\": %d},\n  \"merges\": [", 256 + NMERGES);
    for (int m = 0; m < NMERGES; m++)
        o += (size_t)snprintf(s + o, cap - o, array_merges ? "%s[\"%s\", \"%s\"]" : "%s\"%s %s\"",
                              m ? ", " : "", MERGES[m][0], MERGES[m][1]);
    snprintf(s + o, cap - o, "]}}\n");
    return s;
}

/* Naive §3.1.5.c: rescan for the lowest rank, leftmost; strings, not ids. */
static int naive_bpe(const char *w, int32_t *out)
{
    char sym[64][64];
    int n = 0;
    for (; w[n]; n++) {
        sym[n][0] = w[n];
        sym[n][1] = 0;
    }
    for (;;) {
        int best = -1, at = -1;
        for (int i = 0; i + 1 < n; i++)
            for (int m = 0; m < NMERGES; m++)
                if (!strcmp(sym[i], MERGES[m][0]) && !strcmp(sym[i + 1], MERGES[m][1]) &&
                    (best < 0 || m < best)) {
                    best = m;
                    at = i;
                }
        if (best < 0) break;
        size_t la = strlen(sym[at]), lb = strlen(sym[at + 1]);
        memcpy(&sym[at][la], &sym[at + 1][0], lb + 1);
        memmove(sym[at + 1], sym[at + 2], sizeof sym[0] * (size_t)(n - at - 2));
        n--;
    }
    for (int i = 0; i < n; i++) {
        if (!sym[i][1]) {
            out[i] = (uint8_t)sym[i][0];
            continue;
        }
        for (int m = 0; m < NMERGES; m++) {
            char c[64];
            snprintf(c, sizeof c, "%s%s", MERGES[m][0], MERGES[m][1]);
            if (!strcmp(c, sym[i])) out[i] = 256 + m;
        }
    }
    return n;
}

static void test_synthetic(void)
{
    char err[CIS2_ERR_LEN] = "";
    char *js = synth_json(0), *ja = synth_json(1);
    cis2_tokenizer *t = NULL, *ta = NULL;
    int rc = cis2_tokenizer_parse(&t, js, strlen(js), "synth.json", err);
    CHECK("synthetic tokenizer.json loads", rc == 0, "%s", err);
    rc = cis2_tokenizer_parse(&ta, ja, strlen(ja), "synth-array.json", err);
    CHECK("synthetic tokenizer.json with [\"a\",\"b\"] merges loads", rc == 0, "%s", err);
    if (!t || !ta) {
        cis2_tokenizer_free(t);
        cis2_tokenizer_free(ta);
        free(js);
        free(ja);
        return;
    }
    CHECK("synthetic vocab size counts added tokens outside the vocab",
          cis2_tokenizer_vocab_size(t) == 259 + NMERGES, "%d", cis2_tokenizer_vocab_size(t));
    {
        /* a negative count or a NULL array is an error, not an empty text */
        char *txt = NULL;
        size_t tl;
        int32_t *eids = NULL, one = 97;
        int en, r1 = cis2_tokenizer_decode(t, &one, -1, &txt, &tl, err);
        int r2 = cis2_tokenizer_decode(t, NULL, 2, &txt, &tl, err);
        int r3 = cis2_tokenizer_encode(t, NULL, 3, &eids, &en, err);
        int r4 = cis2_tokenizer_encode(t, NULL, 0, &eids, &en, err);
        CHECK("api.tokenizer-negative-or-null-refused", r1 && r2 && r3 && !r4 && en == 0,
              "decode n=-1 rc %d, decode NULL rc %d, encode NULL rc %d, empty encode rc %d", r1, r2,
              r3, r4);
        cis2_free(eids);
    }

    /* Heap merge loop vs the naive rescan, seeded random words over {a,b,c}. */
    uint64_t rng = 12345;
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        char w[48];
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int len = 1 + (int)((rng >> 33) % 40);
        for (int i = 0; i < len; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int r = (int)((rng >> 33) % 10);
            w[i] = r < 6 ? 'a' : r < 8 ? 'b' : 'c';
        }
        w[len] = 0;
        int32_t want[64], *got = NULL, *got2 = NULL;
        int nw = naive_bpe(w, want), ng = 0, ng2 = 0;
        if (cis2_tokenizer_encode(t, w, (size_t)len, &got, &ng, err) ||
            cis2_tokenizer_encode(ta, w, (size_t)len, &got2, &ng2, err) || ng != nw || ng2 != nw ||
            memcmp(got, want, sizeof *got * (size_t)nw) ||
            memcmp(got2, want, sizeof *got * (size_t)nw)) {
            if (!bad) printf("  first mismatch on '%s'\n", w);
            bad++;
        }
        free(got);
        free(got2);
    }
    CHECK("heap merge loop == naive lowest-rank-leftmost rescan (3000 seeded words, both merge "
          "forms)",
          bad == 0, "%d mismatches", bad);

    /* ids by construction: a=97 b=98 c=99, merges 256.., "<|end|>"=268, "<extra>"=269,
     * "hello"=270 */
    check_enc("synthetic: aaaa -> aa+aa (rank 6)", t, "aaaa", 4, "262");
    check_enc("synthetic: added tokens leftmost-longest, text between encoded", t,
              "aa<|end|>bc<extra>a", 19, "256,268,257,269,97");
    check_enc("synthetic: normalized added token split after the special ones", t,
              "xhello<extra>hello", 18, "120,270,269,270");
    check_enc("synthetic: partial added token is plain text", t, "<|end|", 6,
              "60,124,101,110,100,124");
    check_enc("synthetic: empty text -> no ids", t, "", 0, "");
    cis2_tokenizer_free(t);
    cis2_tokenizer_free(ta);
    free(ja);

    /* A vocab without the symbol for byte 'z' loads; text needing it is refused. */
    char *jz = subst(js, "\"z\": 122, ", "\"zzz\": 122, ");
    rc = cis2_tokenizer_parse(&t, jz, strlen(jz), "noz.json", err);
    CHECK("vocab missing a byte symbol still loads (SmolLM2 lacks 21)", rc == 0, "%s", err);
    if (!rc) {
        check_enc("missing byte symbol: text without it encodes", t, "abc", 3, "97,257");
        check_enc_err("missing byte symbol: text needing it is refused, not dropped", t, "a z", 3,
                      "no symbol for byte 0x7a");
        cis2_tokenizer_free(t);
    }
    free(jz);

    /* ignore_merges (tokenizers' BPE::tokenize_with_cache): a word that is a
     * vocab token is that token, merges unapplied; "baba" (267) and "abcabc"
     * (266) are in the vocab, but the merges make b+ab+a and a+bc+a+bc. */
    char *ji = subst(js, "\"ignore_merges\": false", "\"ignore_merges\": true");
    rc = cis2_tokenizer_parse(&t, js, strlen(js), "synth.json", err);
    if (!rc) {
        check_enc("ignore_merges false: baba by merges", t, "baba", 4, "98,258,97");
        check_enc("ignore_merges false: abcabc by merges", t, "abcabc", 6, "97,257,97,257");
        cis2_tokenizer_free(t);
    }
    rc = cis2_tokenizer_parse(&t, ji, strlen(ji), "im.json", err);
    CHECK("ignore_merges true loads", rc == 0, "%s", err);
    if (!rc) {
        check_enc("ignore_merges: a vocab word is its own token (baba)", t, "baba", 4, "267");
        check_enc("ignore_merges: a vocab word is its own token (abcabc)", t, "abcabc", 6, "266");
        check_enc("ignore_merges: other words merge as before (babab)", t, "babab", 5,
                  "98,258,258");
        check_enc("ignore_merges: one byte, added tokens unchanged", t, "a<|end|>aaaa", 12,
                  "97,268,262");
        cis2_tokenizer_free(t);
    }
    free(ji);

    /* ---- malformed files: each a clear one-line error naming the problem */
    static const char *const bad_cases[][4] = {
        /* name, from, to, expected error substring */
        { "truncated file", "\"merges\"", "", "invalid JSON" },
        { "top level not an object", "{\"version\"", "[{\"version\"", "invalid JSON" },
        { "NFKC normalizer", "\"normalizer\": null", "\"normalizer\": {\"type\": \"NFKC\"}",
          "normalizer: unsupported type \"NFKC\" (only null and NFC are implemented)" },
        { "(legal) NFC normalizer (Qwen2)", "\"normalizer\": null",
          "\"normalizer\": {\"type\": \"NFC\"}", NULL },
        { "NFC normalizer with an unknown key", "\"normalizer\": null",
          "\"normalizer\": {\"type\": \"NFC\", \"x\": 1}", "normalizer: unsupported key \"x\"" },
        { "Split with a regex we have no matcher for",
          "{\"type\": \"Digits\", \"individual_digits\": true}",
          "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"x\\\\d\\n\"}, \"behavior\": "
          "\"Isolated\", \"invert\": false}",
          "pre_tokenizer.pretokenizers[0].pattern.Regex \"x\\x5cd\\x0a\" is not one this tokenizer "
          "implements exactly" },
        { "Split with a String pattern", "{\"type\": \"Digits\", \"individual_digits\": true}",
          "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": \"Isolated\", "
          "\"invert\": false}",
          "pretokenizers[0].pattern: unsupported" },
        { "Split with behavior Removed", "{\"type\": \"Digits\", \"individual_digits\": true}",
          "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": "
          "\"Removed\", \"invert\": false}",
          "pretokenizers[0].behavior: unsupported" },
        { "Split inverted", "{\"type\": \"Digits\", \"individual_digits\": true}",
          "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": "
          "\"Isolated\", \"invert\": true}",
          "pretokenizers[0].invert = true is unsupported" },
        { "Metaspace pre_tokenizer step", "{\"type\": \"Digits\", \"individual_digits\": true}",
          "{\"type\": \"Metaspace\"}",
          "pretokenizers[0]: unsupported type \"Metaspace\" (only Digits, Split and ByteLevel" },
        { "Digits alone (no ByteLevel)", PRETOK,
          "\"pre_tokenizer\": {\"type\": \"Digits\", \"individual_digits\": true}",
          "byte-level BPE needs a ByteLevel step" },
        { "(legal) ByteLevel-only pre_tokenizer (GPT-2)", PRETOK,
          "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}", NULL },
        { "null pre_tokenizer", PRETOK, "\"pre_tokenizer\": null",
          "pre_tokenizer: null is unsupported" },
        { "three pre_tokenizers", "\"use_regex\": true}]}",
          "\"use_regex\": true}, {\"type\": \"Digits\"}]}", "pretokenizers: unsupported" },
        { "individual_digits false", "\"individual_digits\": true", "\"individual_digits\": false",
          "individual_digits = false is unsupported" },
        { "individual_digits absent (default false)", "\"Digits\", \"individual_digits\": true}",
          "\"Digits\"}", "individual_digits = false is unsupported" },
        { "unknown Digits key", "\"individual_digits\": true",
          "\"individual_digits\": true, \"x\": 1", "pretokenizers[0]: unsupported key \"x\"" },
        { "add_prefix_space true", "\"add_prefix_space\": false", "\"add_prefix_space\": true",
          "add_prefix_space = true is unsupported" },
        { "(legal) Digits then ByteLevel without its regex", "\"use_regex\": true}]",
          "\"use_regex\": false}]", NULL },
        { "(legal) ByteLevel post_processor (ids unchanged)", "\"post_processor\": null",
          "\"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
          "\"trim_offsets\": false, \"use_regex\": false}",
          NULL },
        { "(legal) empty continuing_subword_prefix (Qwen2)", "\"continuing_subword_prefix\": null",
          "\"continuing_subword_prefix\": \"\"", NULL },
        { "model type WordPiece", "\"type\": \"BPE\"", "\"type\": \"WordPiece\"",
          "model: unsupported type \"WordPiece\"" },
        { "dropout set", "\"dropout\": null", "\"dropout\": 0.1", "model.dropout: unsupported" },
        { "continuing_subword_prefix set", "\"continuing_subword_prefix\": null",
          "\"continuing_subword_prefix\": \"##\"", "model.continuing_subword_prefix" },
        { "end_of_word_suffix set", "\"end_of_word_suffix\": null",
          "\"end_of_word_suffix\": \"</w>\"", "model.end_of_word_suffix" },
        { "fuse_unk true", "\"fuse_unk\": false", "\"fuse_unk\": true", "model.fuse_unk = true" },
        { "byte_fallback true", "\"byte_fallback\": false", "\"byte_fallback\": true",
          "model.byte_fallback = true" },
        { "(legal) ignore_merges true (Llama 3)", "\"ignore_merges\": false",
          "\"ignore_merges\": true", NULL },
        { "ignore_merges wrong type", "\"ignore_merges\": false", "\"ignore_merges\": 0",
          "model.ignore_merges: expected true or false" },
        { "unknown model key", "\"dropout\": null", "\"dropout\": null, \"cache_capacity\": 10",
          "model: unsupported key \"cache_capacity\"" },
        { "truncation set", "\"truncation\": null", "\"truncation\": {\"max_length\": 8}",
          "truncation: unsupported" },
        { "padding set", "\"padding\": null", "\"padding\": {}", "padding: unsupported" },
        { "TemplateProcessing post_processor without its fields", "\"post_processor\": null",
          "\"post_processor\": {\"type\": \"TemplateProcessing\"}",
          "post_processor: TemplateProcessing needs arrays single and pair" },
        { "(legal) Llama 3.1's post_processor: Sequence[ByteLevel, TemplateProcessing]",
          "\"post_processor\": null", LLAMA3_POST, NULL },
        { "post_processor Sequence with a BertProcessing", "\"post_processor\": null",
          "\"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": "
          "\"BertProcessing\"}]}",
          "post_processor.processors[0]: unsupported type \"BertProcessing\"" },
        { "post_processor Sequence empty", "\"post_processor\": null",
          "\"post_processor\": {\"type\": \"Sequence\", \"processors\": []}",
          "post_processor.processors: unsupported (an array of 1 to 4 steps)" },
        { "post_processor RobertaProcessing", "\"post_processor\": null",
          "\"post_processor\": {\"type\": \"RobertaProcessing\"}",
          "post_processor: unsupported type \"RobertaProcessing\"" },
        { "no decoder", DECODER, "\"decoder\": null", "decoder: null is unsupported" },
        { "Metaspace decoder", "\"decoder\": {\"type\": \"ByteLevel\"",
          "\"decoder\": {\"type\": \"Metaspace\"", "decoder: unsupported type \"Metaspace\"" },
        { "unknown top-level key", "\"version\": \"1.0\"", "\"version\": \"1.0\", \"extra\": 1",
          "tokenizer.json: unsupported key \"extra\"" },
        { "duplicate top-level key", "\"normalizer\": null",
          "\"normalizer\": null, \"normalizer\": null", "duplicate key \"normalizer\"" },
        { "unknown model key", "\"model\": {", "\"modelx\": {", "unsupported key \"modelx\"" },
        { "vocab id not an integer", "\"a\": 97,", "\"a\": \"97\",",
          "model.vocab[\"a\"]: id is not an integer" },
        { "vocab id fractional", "\"a\": 97,", "\"a\": 97.0,", "id is not an integer" },
        { "vocab id out of range", "\"a\": 97,", "\"a\": 100000,", "id 100000 out of range" },
        { "vocab id negative", "\"a\": 97,", "\"a\": -1,", "id -1 out of range" },
        { "duplicate vocab id", "\"b\": 98,", "\"b\": 97,", "id 97 is also used" },
        { "duplicate vocab token", "\"b\": 98,", "\"a\": 98,", "duplicate token \"a\"" },
        { "merge references unknown token", "\"a a\"", "\"a q1\"",
          "model.merges[0]: token \"q1\" is not in model.vocab" },
        { "merged token not in vocab", "\"a a\"", "\"c b\"",
          "model.merges[0]: merged token \"cb\" is not in model.vocab" },
        { "merge without a space", "\"a a\"", "\"aa\"", "model.merges[0]: \"aa\" has no space" },
        { "merge is a number", "\"a a\"", "7", "model.merges[0]: expected" },
        { "merge array of 3", "\"a a\"", "[\"a\", \"a\", \"a\"]", "model.merges[0]: expected" },
        { "duplicate merge", "\"b c\"", "\"a a\"",
          "model.merges[1]: duplicate of model.merges[0]" },
        { "added token lstrip", "\"lstrip\": false", "\"lstrip\": true",
          "added_tokens[0].lstrip = true is unsupported" },
        { "added token single_word", "\"single_word\": false", "\"single_word\": true",
          "added_tokens[0].single_word" },
        { "added token without id", "{\"id\": 268, ", "{", "added_tokens[0].id: missing" },
        { "added token empty content", "\"content\": \"<extra>\"", "\"content\": \"\"",
          "added_tokens[1].content: empty" },
        { "added token content not a string", "\"content\": \"<extra>\"", "\"content\": 5",
          "added_tokens[1].content: missing or not a string" },
        { "added token wrong id (in vocab)", "{\"id\": 268, ", "{\"id\": 3, ",
          "id 3 for \"<|end|>\", but tokenizers v0.23.1 would give it id 268" },
        { "added token wrong id (outside vocab)", "{\"id\": 269, ", "{\"id\": 400, ",
          "would give it id 269" },
        { "added token repeated", "\"content\": \"hello\"", "\"content\": \"<extra>\"",
          "repeats added_tokens[1]" },
        { "added token unknown key", "\"special\": false}", "\"special\": false, \"x\": 1}",
          "added_tokens[2]: unsupported key \"x\"" },
        { "(legal) a second special token outside the vocab",
          "\"content\": \"hello\", \"special\": false", "\"content\": \"hello\", \"special\": true",
          NULL },
        { "(legal) unk_token a string", "\"unk_token\": null", "\"unk_token\": \"a\"", NULL },
        { "(legal) optional model fields absent",
          "\"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": null, "
          "\"end_of_word_suffix\": null, \"fuse_unk\": false, \"byte_fallback\": false, "
          "\"ignore_merges\": false,",
          "", NULL },
        { "unk_token a number", "\"unk_token\": null", "\"unk_token\": 3",
          "model.unk_token: expected a string or null" },
    };
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const char *const *c = bad_cases[i];
        char name[200];
        snprintf(name, sizeof name, "malformed tokenizer.json: %s", c[0]);
        char *j = subst(js, c[1], c[2]);
        if (i == 0) j[strlen(j) / 2] = 0; /* truncated */
        cis2_tokenizer *tb = (cis2_tokenizer *)1;
        err[0] = 0;
        rc = cis2_tokenizer_parse(&tb, j, strlen(j), "bad.json", err);
        if (!c[3]) { /* a legal variant: must load */
            CHECK(name, rc == 0, "%s", err);
            if (!rc) cis2_tokenizer_free(tb);
        } else {
            CHECK(name,
                  rc != 0 && tb == NULL && strncmp(err, "bad.json: ", 10) == 0 &&
                      strstr(err, c[3]) && !strchr(err, '\n'),
                  "rc=%d err='%s' want '%s'", rc, err, c[3]);
            if (!rc) cis2_tokenizer_free(tb);
        }
        free(j);
    }
    static const char *const spans[][5] = {
        { "no model", ",\n \"model\": {", "}\n", "", "missing \"model\"" },
        { "added_tokens not an array", "\"added_tokens\": [", ",\n \"normalizer\"",
          "\"added_tokens\": 5", "added_tokens: expected an array" },
        { "added token not an object", "\"added_tokens\": [", ",\n \"normalizer\"",
          "\"added_tokens\": [[]]", "added_tokens[0]: expected an object" },
        { "vocab not an object", "\"vocab\": {", ",\n  \"merges\"", "\"vocab\": []",
          "model.vocab: missing or not an object" },
        { "vocab too small", "\"vocab\": {", ",\n  \"merges\"", "\"vocab\": {\"a\": 0}",
          "model.vocab: 1 entries" },
        { "merges not an array", "\"merges\": [", "}}\n", "\"merges\": {}",
          "model.merges: missing or not an array" },
        { "no merges", ",\n  \"merges\": [", "}}\n", "", "model.merges: missing or not an array" },
    };
    for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++) {
        char name[200];
        snprintf(name, sizeof name, "malformed tokenizer.json: %s", spans[i][0]);
        char *j = subst_span(js, spans[i][1], spans[i][2], spans[i][3]);
        cis2_tokenizer *tb = NULL;
        rc = cis2_tokenizer_parse(&tb, j, strlen(j), "bad.json", err);
        CHECK(name, rc != 0 && strstr(err, spans[i][4]) && !strchr(err, '\n'),
              "rc=%d err='%s' want '%s'", rc, err, spans[i][4]);
        if (!rc) cis2_tokenizer_free(tb);
        free(j);
    }
    /* A special token outside the vocab after a non-special one: tokenizers
     * numbers added tokens in file order, special or not (Qwen2.5's
     * <tool_call> comes before its special <|fim_prefix|>). */
    {
        char *j1 = subst(js, "{\"id\": 269, \"content\": \"<extra>\", \"special\": true",
                         "{\"id\": 269, \"content\": \"<extra>\", \"special\": false");
        char *j2 = subst(j1, "\"content\": \"hello\", \"special\": false",
                         "\"content\": \"hello\", \"special\": true");
        cis2_tokenizer *tb = NULL;
        rc = cis2_tokenizer_parse(&tb, j2, strlen(j2), "ok.json", err);
        CHECK("added tokens: a special one after a non-special one keeps file-order ids", rc == 0,
              "%s", err);
        if (!rc) {
            check_enc("added tokens in file order: <extra> 269, hello 270", tb, "<extra>hello", 12,
                      "269,270");
            cis2_tokenizer_free(tb);
        }
        free(j1);
        free(j2);
    }
    CHECK("missing file is an error naming it",
          cis2_tokenizer_load(&t, "/nonexistent/tokenizer.json", err) != 0 &&
              strstr(err, "/nonexistent/tokenizer.json"),
          "%s", err);
    CHECK("empty file is an error",
          cis2_tokenizer_parse(&t, "", 0, "empty.json", err) != 0 && strstr(err, "empty.json"),
          "%s", err);

    /* Loader fuzz: seeded truncations and byte flips never crash; errors are one line. */
    size_t jl = strlen(js);
    int fuzz_bad = 0, loaded = 0;
    for (int it = 0; it < 3000; it++) {
        char *j = malloc(jl + 1);
        memcpy(j, js, jl + 1);
        size_t n = jl;
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        if (it % 3 == 0) n = (size_t)(rng >> 33) % jl;
        else
            for (int k = 0; k < 1 + it % 4; k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                j[(rng >> 33) % jl] = "\"{}[],: 0a\\u9-"[(rng >> 20) % 15];
            }
        cis2_tokenizer *tf = NULL;
        err[0] = 0;
        if (cis2_tokenizer_parse(&tf, j, n, "fuzz.json", err) == 0) {
            loaded++;
            int32_t *ids;
            int ni;
            if (cis2_tokenizer_encode(tf, "abc aab<|end|>12", 16, &ids, &ni, err) == 0) free(ids);
            cis2_tokenizer_free(tf);
        } else if (!err[0] || strchr(err, '\n') || tf) fuzz_bad++;
        free(j);
    }
    CHECK("loader fuzz: 3000 damaged files, each loads or gives one error line", fuzz_bad == 0,
          "%d bad", fuzz_bad);
    printf("  (loader fuzz: %d of 3000 damaged files still loaded)\n", loaded);
    free(js);
}

/* --------------------------------------------------------- unicode tables */

static void test_unicode(void)
{
    static const struct {
        uint32_t cp;
        int cls;
        const char *what;
    } c[] = {
        { 'a', CIS2_UC_L, "a" },
        { '7', CIS2_UC_N, "7" },
        { ' ', CIS2_UC_WS, "space" },
        { '\'', CIS2_UC_OTHER, "apostrophe" },
        { 0x1C, CIS2_UC_OTHER, "U+001C is not White_Space" },
        { 0x1F, CIS2_UC_OTHER, "U+001F is not White_Space" },
        { 0x85, CIS2_UC_WS, "U+0085 NEL" },
        { 0xA0, CIS2_UC_WS, "U+00A0" },
        { 0x180E, CIS2_UC_OTHER, "U+180E (Cf since 6.3)" },
        { 0x200B, CIS2_UC_OTHER, "U+200B ZWSP" },
        { 0x2028, CIS2_UC_WS, "U+2028" },
        { 0x3000, CIS2_UC_WS, "U+3000" },
        { 0xFEFF, CIS2_UC_OTHER, "U+FEFF" },
        { 0x01C5, CIS2_UC_L, "U+01C5 Lt" },
        { 0x02B0, CIS2_UC_L, "U+02B0 Lm" },
        { 0x0301, CIS2_UC_OTHER, "U+0301 Mn" },
        { 0x00B2, CIS2_UC_N, "U+00B2 No" },
        { 0x2167, CIS2_UC_N, "U+2167 Nl" },
        { 0x0663, CIS2_UC_N, "U+0663 Nd" },
        { 0x4E00, CIS2_UC_L, "U+4E00 CJK" },
        { 0xAC00, CIS2_UC_L, "U+AC00 Hangul" },
        { 0x1F642, CIS2_UC_OTHER, "U+1F642 emoji" },
        { 0x11F50, CIS2_UC_N, "U+11F50 Kawi digit (UCD 15.0)" },
        { 0x31350, CIS2_UC_L, "U+31350 CJK Ext H (UCD 15.0)" },
        { 0x2EBF0, CIS2_UC_L, "U+2EBF0 CJK Ext I (UCD 15.1)" },
        { 0x2EE5D, CIS2_UC_L, "U+2EE5D CJK Ext I end" },
        { 0x2EE5E, CIS2_UC_OTHER, "U+2EE5E unassigned" },
        { 0x10FFFF, CIS2_UC_OTHER, "U+10FFFF" },
    };
    int bad = 0, nws = 0;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (cis2_uc_class(c[i].cp) != c[i].cls) {
            printf("  %s: class %d\n", c[i].what, cis2_uc_class(c[i].cp));
            bad++;
        }
    for (uint32_t cp = 0; cp < 0x110000; cp++) nws += cis2_uc_class(cp) == CIS2_UC_WS;
    CHECK("unicode classes (UCD 15.1: L, N, White_Space)", bad == 0, "%d wrong", bad);
    CHECK("exactly 25 White_Space code points", nws == 25, "%d", nws);
}

/* ------------------------------------------------------------------- NFC */

static size_t cps_utf8(const char *f, uint8_t *out)
{
    size_t n = 0;
    char *e;
    for (;;) {
        while (*f == ' ') f++;
        if (!*f) break;
        unsigned long v = strtoul(f, &e, 16);
        if (e == f) break;
        n += cis2_utf8_enc((uint32_t)v, out + n);
        f = e;
    }
    return n;
}

/* UAX #15's conformance file, NormalizationTest.txt (UCD 15.0, Debian
 * unicode-data): for every line c1..c5, NFC(c1) = NFC(c2) = NFC(c3) = c2 and
 * NFC(c4) = NFC(c5) = c4; every code point not in part 1 is its own NFC. */
static void test_nfc(void)
{
    static const struct {
        const char *in, *want, *what;
    } c[] = {
        { "e\xcc\x81", "\xc3\xa9", "e + U+0301 composes" },
        { "a\xcc\x82\xcc\xa3", "\xe1\xba\xad", "marks reordered by ccc, then composed" },
        { "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81", "Hangul L V T" },
        { "\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc", "U+0958 is a composition exclusion" },
        { "\xe2\x84\xa6", "\xce\xa9", "U+2126 OHM is a singleton" },
        { "\xf0\x9d\x85\xa0", "\xf0\x9d\x85\x98\xf0\x9d\x85\xa5\xf0\x9d\x85\xae",
          "U+1D160 decomposes to three" },
        { "\xcc\x81"
          "e",
          "\xcc\x81"
          "e",
          "a leading mark stays" },
        { "\xe3\x81\x8b\xe3\x82\x99", "\xe3\x81\x8c", "kana + dakuten" },
    };
    cis2_nfc_buf b = { 0 };
    int bad = 0;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        size_t l;
        if (cis2_nfc((const uint8_t *)c[i].in, strlen(c[i].in), &b, &l) || l != strlen(c[i].want) ||
            memcmp(b.out, c[i].want, l)) {
            printf("  NFC: %s\n", c[i].what);
            bad++;
        }
    }
    CHECK("NFC: composition, reordering, Hangul, exclusions, singletons", bad == 0, "%d wrong",
          bad);
    /* 20000 combining marks after a base: linear (counting sort), right order */
    {
        size_t n = 20000, l;
        uint8_t *s = malloc(1 + 2 * n);
        s[0] = 'a';
        for (size_t i = 0; i < n; i++) {
            s[1 + 2 * i] = 0xCC;
            s[2 + 2 * i] = i % 2 ? 0x81 /* U+0301, 230 */ : 0xA3; /* U+0323, 220 */
        }
        int rc = cis2_nfc(s, 1 + 2 * n, &b, &l);
        /* a + U+0323 -> U+1EA1, then 9999 x U+0323, then 10000 x U+0301 */
        int ok = rc == 0 && l == 3 + 2 * (n - 1) && !memcmp(b.out, "\xe1\xba\xa1", 3) &&
                 b.out[3] == 0xCC && b.out[4] == 0xA3 && b.out[l - 1] == 0x81 &&
                 b.out[3 + 2 * (n / 2 - 2) + 1] == 0xA3 && b.out[3 + 2 * (n / 2 - 1) + 1] == 0x81;
        CHECK("NFC: a long run of marks is sorted stably by combining class", ok, "rc=%d l=%zu", rc,
              l);
        free(s);
    }
    FILE *p = NULL;
    const char *f = "/usr/share/unicode/NormalizationTest.txt.bz2";
    FILE *probe = fopen(f, "rb");
    if (probe) {
        fclose(probe);
        p = popen("bzcat /usr/share/unicode/NormalizationTest.txt.bz2 2>/dev/null", "r");
    }
    if (!p) {
        SKIP("NFC conformance (NormalizationTest.txt)",
             "no " /**/
             "/usr/share/unicode/NormalizationTest.txt.bz2 "
             "(apt-get install unicode-data)");
        cis2_nfc_buf_free(&b);
        return;
    }
    static uint8_t part1[0x110000];
    char line[2048];
    int part = 0, lines = 0, fails = 0;
    while (fgets(line, sizeof line, p)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (line[0] == '@') {
            part = atoi(line + 5);
            continue;
        }
        char *col[5], *q = line;
        int ok = 1;
        for (int i = 0; i < 5; i++) {
            col[i] = q;
            q = q ? strchr(q, ';') : NULL;
            if (!q) {
                ok = 0;
                break;
            }
            *q++ = 0;
        }
        if (!ok) continue;
        if (part == 1) part1[strtoul(col[0], NULL, 16) & 0x1FFFFF] = 1;
        uint8_t x[5][256];
        size_t xl[5];
        for (int i = 0; i < 5; i++) xl[i] = cps_utf8(col[i], x[i]);
        for (int i = 0; i < 5; i++) {
            int w = i < 3 ? 1 : 3;
            size_t l;
            if (cis2_nfc(x[i], xl[i], &b, &l) || l != xl[w] || memcmp(b.out, x[w], l)) {
                if (fails++ < 3) printf("  NormalizationTest: %s column %d\n", col[0], i + 1);
            }
        }
        lines++;
    }
    pclose(p);
    int inv = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (part1[cp] || (cp >= 0xD800 && cp < 0xE000)) continue;
        uint8_t u[4];
        size_t n = cis2_utf8_enc(cp, u), l;
        if (cis2_nfc(u, n, &b, &l) || l != n || memcmp(u, b.out, n)) inv++;
    }
    CHECK("NFC conformance: NormalizationTest.txt, every line and column",
          fails == 0 && lines > 1e4, "%d failures in %d lines", fails, lines);
    CHECK("NFC conformance: every other code point is its own NFC", inv == 0, "%d changed", inv);
    cis2_nfc_buf_free(&b);
}

/* ---------------------------------------------------------- real SmolLM2 */

static const char *real_path(void)
{
    static char p[1100];
    const char *env = getenv("CIS2_SMOLLM2_DIR");
    const char *dirs[] = { env ? env : "", "models/SmolLM2-135M", "../shared/models/SmolLM2-135M" };
    for (int i = 0; i < 3; i++) {
        if (!dirs[i][0]) continue;
        snprintf(p, sizeof p, "%s/tokenizer.json", dirs[i]);
        FILE *f = fopen(p, "rb");
        if (f) {
            fclose(f);
            return p;
        }
    }
    return NULL;
}

static void test_real(void)
{
    const char *path = real_path();
    if (!path) {
        SKIP("SmolLM2 tokenizer tests", "no tokenizer.json in $CIS2_SMOLLM2_DIR, "
                                        "models/SmolLM2-135M or ../shared/models/SmolLM2-135M");
        return;
    }
    char err[CIS2_ERR_LEN] = "";
    cis2_tokenizer *t = NULL;
    double t0 = cis2_now_ms();
    int rc = cis2_tokenizer_load(&t, path, err);
    CHECK("SmolLM2 tokenizer.json loads", rc == 0, "%s", err);
    if (rc) return;
    printf("  (load %.1f ms)\n", cis2_now_ms() - t0);
    CHECK("SmolLM2 vocab size 49152", cis2_tokenizer_vocab_size(t) == 49152, "%d",
          cis2_tokenizer_vocab_size(t));

    /* §3.1.7 worked example (spec). */
    check_enc("spec §3.1.7: \"Once upon a time\" -> 6403,1980,253,655", t, "Once upon a time", 16,
              "6403,1980,253,655");
    /* The rest: cross-checked against ../shared/tools/bpe_oracle.py (same ids). */
    static const char *const g[][3] = {
        { "digits split one by one, contractions", "Hello world 12345 it's they'll 'S",
          "19556,905,216,33,34,35,36,37,357,506,502,3060,637,67" },
        { "two spaces between words", "a  b", "81,216,278" },
        { "trailing spaces", "trailing   ", "4861,4966,333" },
        { "\\n\\n", "\n\n", "1116" },
        { "tabs", "a\tb\t\tc", "81,197,82,197,197,83" },
        { "mixed scripts, emoji, combining mark",
          "H\xc3\xa9llo \xd0\xbc\xd0\xb8\xd1\x80 \xe4\xbd\xa0\xe5\xa5\xbd "
          "\xf0\x9f\x99\x82\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd e\xcc\x81",
          "56,2756,31394,41337,7872,9175,216,18645,250,48392,138,47526,10813,235,231,10813,233,138,"
          "297,151,219" },
        { "<|im_end|> inside a sentence", "x<|im_end|>y <|im_start|>user", "104,2,105,216,1,4093" },
        { "Unicode whitespace (NEL-free): NBSP, U+3000, U+2028",
          "  \n  x  \t\n\n y \xc2\xa0z\xe3\x80\x80 q \xe2\x80\xa8",
          "256,3805,1792,256,197,1116,329,216,15442,106,12109,218,7329,459,118" },
        { "numerics: No, Nl, Arabic-Indic, math digits",
          "\xc2\xbd \xe2\x85\xb7 \xd9\xa3\xd9\xa4 \xf0\x9d\x9f\x99 \xc2\xb2 1.5e10 $100,000",
          "16738,216,173,223,132,216,164,113,164,114,216,23159,249,243,216,19133,216,33,30,37,85,"
          "33,32,1885,33,32,32,28,32,32,32" },
        { "contractions and lookalikes", "don't DON'T we've I'm ''s ' 'll",
          "12420,982,422,2154,23,68,392,3543,339,5248,10922,99,637,637,764" },
        { "a long run (40 x a)", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
          "46880,46880,46880,46880,46880,46880,46880,46880,46880,46880" },
        { "U+001C/U+001F are punctuation here, not whitespace", "\x1c\x1f a\x1c b",
          "213,215,253,213,278" },
        { "repeated and partial special tokens", "<|endoftext|><|endoftext|><|im_start|",
          "0,0,44,108,306,79,3738,108" },
        { "titlecase, Greek, ligature, fullwidth",
          "\xc7\x85ungla \xce\xa9mega \xef\xac\x81ne "
          "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93",
          "146,223,2280,5825,5664,119,93,9005,40367,662,216,8083,111,8083,112,8083,113,8083,235,"
          "8083,236,8083,237" },
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        char name[200];
        snprintf(name, sizeof name, "SmolLM2: %s", g[i][0]);
        check_enc(name, t, g[i][1], strlen(g[i][1]), g[i][2]);
    }

    /* invalid UTF-8 is an error, never replaced */
    static const char *const inv[][2] = {
        { "lone 0xff", "ab\xff" },
        { "overlong NUL", "\xc0\x80" },
        { "overlong slash", "\xe0\x80\xaf" },
        { "surrogate", "\xed\xa0\x80" },
        { "above U+10FFFF", "\xf4\x90\x80\x80" },
        { "truncated", "x\xe4\xbd" },
        { "lone continuation", "\x80" },
    };
    for (size_t i = 0; i < sizeof inv / sizeof inv[0]; i++) {
        char name[120];
        snprintf(name, sizeof name, "invalid UTF-8 rejected: %s", inv[i][0]);
        check_enc_err(name, t, inv[i][1], strlen(inv[i][1]), "not valid UTF-8");
    }
    /* SmolLM2's vocab lacks 21 byte symbols; the reference drops such characters. */
    check_enc_err("U+0004 (no byte symbol in SmolLM2) refused", t,
                  "a\x04"
                  "b",
                  3, "no symbol for byte 0x04, needed by U+0004 at byte offset 1");
    check_enc_err("U+50000 (lead byte 0xf1 has no symbol) refused", t, "\xf1\x90\x80\x80", 4,
                  "no symbol for byte 0xf1");

    /* decode */
    {
        int32_t ids[] = { 49152 }, neg[] = { -1 }, half[] = { 10813 }, sp[] = { 1, 2 };
        char *s = NULL;
        size_t l = 0;
        rc = cis2_tokenizer_decode(t, ids, 1, &s, &l, err);
        CHECK("decode: id 49152 >= vocab rejected",
              rc != 0 && s == NULL && strstr(err, "outside the vocabulary"), "%s", err);
        rc = cis2_tokenizer_decode(t, neg, 1, &s, &l, err);
        CHECK("decode: id -1 rejected", rc != 0 && strstr(err, "outside the vocabulary"), "%s",
              err);
        rc = cis2_tokenizer_decode(t, half, 1, &s, &l, err);
        CHECK("decode: part of a multi-byte character gives its raw bytes (decoding is total)",
              rc == 0 && l >= 1 && (unsigned char)s[0] == 0xf0 && cis2_utf8_check(s, l) < l, "%s",
              rc ? err : "not the raw bytes");
        free(s);
        s = NULL;
        rc = cis2_tokenizer_decode(t, sp, 2, &s, &l, err);
        CHECK("decode: added tokens give their content",
              rc == 0 && l == 22 && !strcmp(s, "<|im_start|><|im_end|>"), "%s", rc ? err : s);
        free(s);
        s = NULL;
        rc = cis2_tokenizer_decode(t, sp, 0, &s, &l, err);
        CHECK("decode: no ids -> empty text", rc == 0 && l == 0 && s && !s[0], "%s", err);
        free(s);
    }

    /* Encoder fuzz: seeded random bytes and random code points. Each either
     * errors cleanly (invalid UTF-8 / missing byte symbol) or round-trips. */
    uint64_t rng = 42;
    int bad = 0, ok = 0, refused = 0;
    char buf[256];
    for (int it = 0; it < 4000; it++) {
        size_t n = 0;
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t want = 1 + (rng >> 33) % 60;
        while (n + 4 < want) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t r = (uint32_t)(rng >> 32);
            if (it % 4 == 0) {
                buf[n++] = (char)r;
                continue;
            } /* raw bytes */
            uint32_t cp = (r >> 8) % 8 == 0  ? r % 0x110000
                          : (r >> 8) % 8 < 5 ? 0x20 + r % 0x60
                                             : r % 0x3000;
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
            if (cp < 0x80) buf[n++] = (char)cp;
            else if (cp < 0x800) {
                buf[n++] = (char)(0xC0 | cp >> 6);
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                buf[n++] = (char)(0xE0 | cp >> 12);
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[n++] = (char)(0xF0 | cp >> 18);
                buf[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        int32_t *ids = NULL;
        int ni = 0;
        err[0] = 0;
        if (cis2_tokenizer_encode(t, buf, n, &ids, &ni, err)) {
            if (!strstr(err, "not valid UTF-8") && !strstr(err, "no symbol for byte")) {
                if (!bad) printf("  odd error: %s\n", err);
                bad++;
            }
            refused++;
            continue;
        }
        char *back = NULL;
        size_t bl = 0;
        if (cis2_tokenizer_decode(t, ids, ni, &back, &bl, err) || bl != n || memcmp(back, buf, n)) {
            if (!bad) printf("  round trip failed\n");
            bad++;
        } else ok++;
        free(ids);
        free(back);
    }
    CHECK("encoder fuzz: 4000 seeded inputs error cleanly or round-trip", bad == 0 && ok > 1000,
          "%d bad, %d ok", bad, ok);
    printf("  (encoder fuzz: %d round-tripped, %d refused)\n", ok, refused);
    cis2_tokenizer_free(t);
}

/* ------------------------------------- the second reading's fixtures */

static size_t unhex(const char *h, size_t n, uint8_t *out)
{
    size_t o = 0;
    for (size_t i = 0; i + 2 <= n; i += 2) {
        unsigned v;
        if (sscanf(h + i, "%2x", &v) != 1) return (size_t)-1;
        out[o++] = (uint8_t)v;
    }
    return o;
}

static char *read_text(const char *path, size_t *len)
{
    char *buf = NULL, err[CIS2_ERR_LEN];
    if (cis2_read_file(path, &buf, len, err)) return NULL;
    return buf;
}

/* tests/fixtures/tokenizer/NAME.{json,cases}: written by tools/tok_reference.py
 * (an independent reading: Python's re with explicit classes, unicodedata's
 * NFC, a naive merge loop); each line is hex(text), the reference's ids and
 * hex(the reference's decode of them). encode must give those ids, decode
 * those bytes. */
static void test_reference_cases(const char *name)
{
    char jp[200], cp[200], label[300], err[CIS2_ERR_LEN] = "";
    snprintf(jp, sizeof jp, "tests/fixtures/tokenizer/%s.json", name);
    snprintf(cp, sizeof cp, "tests/fixtures/tokenizer/%s.cases", name);
    cis2_tokenizer *t = NULL;
    size_t clen;
    char *cases = read_text(cp, &clen);
    int rc = cis2_tokenizer_load(&t, jp, err);
    snprintf(label, sizeof label, "reference: %s loads", jp);
    CHECK(label, rc == 0 && cases, "%s", cases ? err : "no cases file");
    if (rc || !cases) {
        cis2_tokenizer_free(t);
        free(cases);
        return;
    }
    int n = 0, bad_enc = 0, bad_dec = 0, bad_norm = 0;
    uint8_t *text = malloc(clen), *want = malloc(clen);
    for (char *line = cases; line < cases + clen;) {
        char *eol = strchr(line, '\n'), *t1 = strchr(line, '\t');
        char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!eol || !t2 || t2 > eol) {
            printf("  bad line %d in %s\n", n + 1, cp);
            bad_enc++;
            break;
        }
        *eol = *t2 = 0;
        size_t tl = unhex(line, (size_t)(t1 - line), text);
        size_t wl = unhex(t2 + 1, (size_t)(eol - t2 - 1), want);
        *t1 = 0;
        int32_t *ids = NULL;
        int ni = 0;
        char *got = NULL, *back = NULL;
        size_t bl = 0;
        if (cis2_tokenizer_encode(t, (const char *)text, tl, &ids, &ni, err) ||
            !(got = cis2_format_ids(ids, ni)) || strcmp(got, t1 + 1)) {
            if (bad_enc++ < 3)
                printf("  %s line %d: text %s: got %s want %s (%s)\n", name, n + 1, line,
                       got ? got : "-", t1 + 1, err);
        } else if (cis2_tokenizer_decode(t, ids, ni, &back, &bl, err) || bl != wl ||
                   memcmp(back, want, wl)) {
            if (bad_dec++ < 3) printf("  %s line %d: decode differs (%s)\n", name, n + 1, err);
        } else if (!memmem(text, tl, "au lait", 7)) { /* the one non-NFC added token */
            char *norm = NULL;
            size_t nl = 0;
            if (cis2_tokenizer_normalize(t, (const char *)text, tl, &norm, &nl, err) || nl != bl ||
                memcmp(norm, back, bl)) {
                if (bad_norm++ < 3) printf("  %s line %d: normalize differs\n", name, n + 1);
            }
            free(norm);
        }
        free(ids);
        free(got);
        free(back);
        n++;
        line = eol + 1;
    }
    snprintf(label, sizeof label, "reference: %s: %d strings encode to the reference's ids", name,
             n);
    CHECK(label, bad_enc == 0 && n >= 200, "%d of %d differ", bad_enc, n);
    snprintf(label, sizeof label, "reference: %s: decode gives the reference's bytes", name);
    CHECK(label, bad_dec == 0, "%d of %d differ", bad_dec, n);
    snprintf(label, sizeof label, "reference: %s: normalize gives what decode(encode()) gives",
             name);
    CHECK(label, bad_norm == 0, "%d of %d differ", bad_norm, n);
    free(text);
    free(want);
    free(cases);
    cis2_tokenizer_free(t);
}

typedef struct {
    size_t lens[4096];
    int n;
} pieces;

static int collect(void *ctx, const uint8_t *s, size_t n)
{
    (void)s;
    pieces *p = ctx;
    if (p->n < 4096) p->lens[p->n++] = n;
    return 0;
}

/* splits-KIND.txt: hex(text) and the byte lengths of the pieces Python's re
 * cuts it into with that regex (tools/tok_reference.py `check` compares the
 * same regexes with Oniguruma, tokenizers' engine, where libonig exists). */
static void test_reference_splits(const char *kind_name, cis2_pt_kind kind)
{
    char path[200], label[200];
    snprintf(path, sizeof path, "tests/fixtures/tokenizer/splits-%s.txt", kind_name);
    size_t len;
    char *buf = read_text(path, &len);
    if (!buf) {
        CHECK(path, 0, "cannot read");
        return;
    }
    cis2_pretok pt = { 1, { (uint8_t)kind } };
    uint8_t *text = malloc(len);
    static pieces got;
    int n = 0, bad = 0;
    for (char *line = buf; line < buf + len; n++) {
        char *eol = strchr(line, '\n'), *tab = strchr(line, '\t');
        if (!eol || !tab || tab > eol) break;
        *eol = 0;
        size_t tl = unhex(line, (size_t)(tab - line), text);
        got.n = 0;
        cis2_pretok_run(&pt, text, tl, collect, &got);
        char want[8192] = "", g[8192] = "";
        snprintf(want, sizeof want, "%s", tab + 1);
        size_t o = 0;
        for (int i = 0; i < got.n && o < sizeof g - 24; i++)
            o += (size_t)snprintf(g + o, sizeof g - o, "%s%zu", i ? "," : "", got.lens[i]);
        if (strcmp(g, want)) {
            if (bad++ < 3)
                printf("  %s: %.*s: got %s want %s\n", kind_name, (int)(tab - line), line, g, want);
        }
        line = eol + 1;
    }
    snprintf(label, sizeof label, "reference: %s regex: %d texts split as Python's re splits them",
             kind_name, n);
    CHECK(label, bad == 0 && n > 500, "%d differ", bad);
    free(text);
    free(buf);
}

int main(void)
{
    test_unicode();
    test_nfc();
    test_synthetic();
    test_reference_splits("gpt2", CIS2_PT_GPT2);
    test_reference_splits("qwen", CIS2_PT_QWEN);
    test_reference_splits("llama3", CIS2_PT_LLAMA3);
    test_reference_cases("qwen");
    test_reference_cases("llama3");
    test_reference_cases("gpt2split");
    test_reference_cases("smollm2");
    test_real();
    UNIT_END();
}
