/* The interoperable text receipt: "CIS-2-RECEIPT v1" then 13 "key value"
 * lines in a fixed order. The parser is strict: unknown, duplicate, missing,
 * reordered or malformed lines are errors, as is a gen-toks that disagrees
 * with the number of generated ids. */
#include "engine/sample.h"
#include "model/model.h"
#include "verify/verify.h"
#include <stdlib.h>
#include <string.h>

static const char *KEYS[13] = {
    "spec-version",
    "weights-sha256",
    "config-sha256",
    "tokenizer-sha256",
    "prompt-hex",
    "prompt-token-ids",
    "gen-toks",
    "dtype",
    "table-digest",
    "inv-freq-table-digest",
    "generated-token-ids",
    "argmax-digest",
    "witness-digest",
};

void cis2_receipt_from_run(cis2_receipt *rc, const cis2_model *m, const cis2_result *r,
                           const uint8_t *prompt_bytes, size_t prompt_len)
{
    memset(rc, 0, sizeof *rc);
    strcpy(rc->spec_version, CIS2_SPEC_VERSION);
    snprintf(rc->dtype, sizeof rc->dtype, "%s", cis2_model_dtype(m));
    memcpy(rc->weights_sha, m->dg.weights_sha256, 32);
    memcpy(rc->config_sha, m->dg.config_sha256, 32);
    memcpy(rc->tokenizer_sha, m->dg.tokenizer_sha256, 32);
    rc->prompt_bytes = (uint8_t *)prompt_bytes;
    rc->prompt_len = prompt_len;
    rc->prompt_ids = r->prompt;
    rc->n_prompt = r->n_prompt;
    rc->gen_toks = r->n_gen;
    memcpy(rc->table_digest, m->dg.table_digest, 32);
    memcpy(rc->inv_freq_digest, m->dg.inv_freq_digest, 32);
    rc->gen_ids = r->gen;
    rc->n_gen = r->n_gen;
    memcpy(rc->argmax_digest, r->argmax, 32);
    memcpy(rc->witness_digest, r->witness, 32);
}

int cis2_receipt_prompt_bytes(const cis2_tokenizer *t, const int32_t *ids, int n, char **bytes,
                              size_t *len, char *err)
{
    cis2_sb b = { 0 };
    int vocab = cis2_tokenizer_vocab_size(t);
    for (int i = 0, j; i < n; i = j) {
        if (ids[i] < 0) {
            snprintf(err, CIS2_ERR_LEN, "prompt id %d is negative", (int)ids[i]);
            cis2_sb_free(&b);
            return 1;
        }
        for (j = i; j < n && ids[j] >= 0 && ids[j] < vocab;) j++;
        if (j == i) { /* an id the model has but tokenizer.json names no token for */
            j++;
            continue;
        }
        char *s;
        size_t l;
        int rc = cis2_tokenizer_decode(t, ids + i, j - i, &s, &l, err);
        if (rc) {
            cis2_sb_free(&b);
            return rc;
        }
        cis2_sb_put(&b, s, l);
        free(s);
    }
    if (!(*bytes = cis2_sb_take(&b, len))) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return -1;
    }
    return 0;
}

/* A receipt struct the caller filled itself, checked before it is rendered
 * or verified: the text form (§12) must stay 14 lines whose values parse
 * back (a dtype or spec-version holding a newline would add a line), and
 * the counts must describe the arrays. */
int cis2_receipt_check(const cis2_receipt *r, char *err)
{
    const char *dt = r->dtype;
    if (!memchr(r->spec_version, 0, sizeof r->spec_version) ||
        strcmp(r->spec_version, CIS2_SPEC_VERSION) != 0) {
        snprintf(err, CIS2_ERR_LEN, "receipt: spec_version must be \"%s\"", CIS2_SPEC_VERSION);
        return 1;
    }
    if (!memchr(dt, 0, sizeof r->dtype) ||
        (dt[0] && strcmp(dt, "fp32") != 0 && strcmp(dt, "int8-row") != 0)) {
        snprintf(err, CIS2_ERR_LEN, "receipt: dtype must be \"fp32\" or \"int8-row\"");
        return 1;
    }
    if (r->n_prompt < 1 || !r->prompt_ids) {
        snprintf(err, CIS2_ERR_LEN, "receipt: no prompt ids (n_prompt %d)", r->n_prompt);
        return 1;
    }
    if (r->n_gen < 0 || (r->n_gen > 0 && !r->gen_ids)) {
        snprintf(err, CIS2_ERR_LEN, "receipt: n_gen %d without ids", r->n_gen);
        return 1;
    }
    if (r->prompt_len > 0 && !r->prompt_bytes) {
        snprintf(err, CIS2_ERR_LEN, "receipt: prompt_len %zu without bytes", r->prompt_len);
        return 1;
    }
    return 0;
}

int cis2_receipt_format(const cis2_receipt *r, char **out, size_t *len)
{
    return cis2_receipt_format_sampled(r, NULL, out, len);
}

/* docs/sampling.md §6: a sampled run's receipt is the v1 lines under its own
 * first line, then the sampler and the seed; a greedy one is v1 exactly. */
int cis2_receipt_format_sampled(const cis2_receipt *r, const cis2_sampler *smp, char **out,
                                size_t *len)
{
    char e[CIS2_ERR_LEN];
    if (smp && smp->temperature == 0.0f) smp = NULL;
    if (smp && cis2_sampler_check(smp, e)) {
        *out = NULL;
        *len = 0;
        return 1;
    }
    *out = NULL;
    *len = 0;
    if (cis2_receipt_check(r, e)) return 1;
    char *pids = cis2_format_ids(r->prompt_ids, r->n_prompt),
         *gids = cis2_format_ids(r->gen_ids, r->n_gen);
    size_t cap = 2048 + 2 * r->prompt_len + (pids ? strlen(pids) : 0) + (gids ? strlen(gids) : 0);
    char *b = malloc(cap), *phex = malloc(2 * r->prompt_len + 1);
    if (!pids || !gids || !b || !phex) {
        free(pids);
        free(gids);
        free(b);
        free(phex);
        return 1;
    }
    char w[65], c[65], t[65], td[65], fd[65], ad[65], wd[65];
    cis2_hex(r->weights_sha, 32, w);
    cis2_hex(r->config_sha, 32, c);
    cis2_hex(r->tokenizer_sha, 32, t);
    cis2_hex(r->table_digest, 32, td);
    cis2_hex(r->inv_freq_digest, 32, fd);
    cis2_hex(r->argmax_digest, 32, ad);
    cis2_hex(r->witness_digest, 32, wd);
    cis2_hex(r->prompt_bytes, r->prompt_len, phex);
    int n = snprintf(
        b, cap,
        "CIS-2-RECEIPT %s\nspec-version %s\nweights-sha256 %s\nconfig-sha256 %s\ntokenizer-sha256 "
        "%s\n"
        "prompt-hex %s\nprompt-token-ids %s\ngen-toks %d\ndtype %s\ntable-digest %s\n"
        "inv-freq-table-digest %s\ngenerated-token-ids %s\nargmax-digest %s\nwitness-digest %s\n",
        smp ? "v1+sampling" : "v1", r->spec_version, w, c, t, phex, pids, r->n_gen,
        r->dtype[0] ? r->dtype : "fp32", td, fd, gids, ad, wd);
    free(pids);
    free(gids);
    free(phex);
    if (smp) {
        char sl[160];
        smp_format(smp, sl, sizeof sl);
        n += snprintf(b + n, cap - (size_t)n, "sampler %s\nseed %llu\n", sl,
                      (unsigned long long)smp->seed);
    }
    *out = b;
    *len = (size_t)n;
    return 0;
}

static int cis2_receipt_write_impl(const cis2_receipt *r, const cis2_sampler *smp, const char *path,
                                   char *err)
{
    char *b;
    size_t n;
    if (cis2_receipt_check(r, err)) return 1;
    if (smp && cis2_sampler_check(smp, err)) return 1;
    if (cis2_receipt_format_sampled(r, smp, &b, &n)) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory formatting the receipt", path);
        return 1;
    }
    int rc = cis2_write_file_atomic(path, b, n, err);
    free(b);
    return rc;
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* "temperature=T top-k=K top-p=P min-p=M", those keys in that order. */
static int parse_sampler(char *val, cis2_sampler *smp)
{
    static const char *key[4] = { "temperature=", "top-k=", "top-p=", "min-p=" };
    char *save = NULL, *tok = strtok_r(val, " ", &save);
    for (int k = 0; k < 4; k++, tok = strtok_r(NULL, " ", &save)) {
        size_t kl = strlen(key[k]);
        if (!tok || strncmp(tok, key[k], kl) != 0) return 1;
        const char *v = tok + kl;
        if (k == 1) {
            uint64_t kv;
            if (smp_parse_seed(v, &kv) || kv > 0x7FFFFFFF) return 1;
            smp->top_k = (int)kv;
        } else if (smp_parse_num(v, k == 0   ? &smp->temperature
                                    : k == 2 ? &smp->top_p
                                             : &smp->min_p))
            return 1;
    }
    char e[CIS2_ERR_LEN];
    return tok != NULL || cis2_sampler_check(smp, e) || smp->temperature == 0.0f;
}

static int receipt_parse(const char *text, size_t len, const char *path, cis2_receipt *r,
                         cis2_sampler *smp, char *err)
{
    memset(r, 0, sizeof *r);
    int sampled = 0;
    if (smp) memset(smp, 0, sizeof *smp);
    if (!path) path = "receipt";
    /* the source's name is the caller's (a file name): escaped, so the
     * message stays one line (docs/errors.md) */
    char ep[160];
    cis2_escape(path, strlen(path), ep, sizeof ep, CIS2_ESC_TEXT);
    if (!text && len) {
        snprintf(err, CIS2_ERR_LEN, "%s: %zu bytes of text at NULL", ep, len);
        return 1;
    }
    if (!text) text = "";
    const char *p = text, *end = text + len;
    int lineno = 0;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        char m_[300];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        snprintf(err, CIS2_ERR_LEN, "%s: line %d: %s", ep, lineno, m_);                            \
        goto fail;                                                                                 \
    } while (0)
    for (int i = -1; i < 13 + 2 * sampled; i++) {
        lineno++;
        if (p >= end) {
            if (i < 0) FAIL("empty file, expected \"CIS-2-RECEIPT v1\"");
            FAIL("missing line \"%s\"", i < 13 ? KEYS[i] : i == 13 ? "sampler" : "seed");
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t ll = (size_t)(le - p);
        if (memchr(p, '\r', ll)) FAIL("carriage return in line (use \\n line endings)");
        if (memchr(p, 0, ll)) FAIL("NUL byte in line");
        if (ll > 4 * 1024 * 1024) FAIL("line too long");
        char *line = strndup(p, ll);
        if (!line) FAIL("out of memory");
        p = nl ? nl + 1 : end;
        if (i < 0) {
            int ok = strcmp(line, "CIS-2-RECEIPT v1") == 0;
            sampled = smp && strcmp(line, "CIS-2-RECEIPT v1+sampling") == 0;
            free(line);
            if (!ok && !sampled && smp)
                FAIL("first line must be \"CIS-2-RECEIPT v1\" or \"CIS-2-RECEIPT v1+sampling\"");
            if (!ok && !sampled) FAIL("first line must be \"CIS-2-RECEIPT v1\"");
            continue;
        }
        char *sp = strchr(line, ' ');
        if (!sp) {
            free(line);
            FAIL("expected \"key value\"");
        }
        *sp = 0;
        const char *key = line, *val = sp + 1;
        if (i >= 13) { /* docs/sampling.md §6: "sampler ..." then "seed S" */
            const char *want = i == 13 ? "sampler" : "seed";
            int ok = strcmp(key, want) == 0 &&
                     (i == 13 ? !parse_sampler(sp + 1, smp) : !smp_parse_seed(val, &smp->seed));
            free(line);
            if (!ok) FAIL("expected \"%s\" line as docs/sampling.md gives it", want);
            continue;
        }
        if (strcmp(key, KEYS[i]) != 0) {
            int known = -1;
            for (int k = 0; k < 13; k++)
                if (strcmp(key, KEYS[k]) == 0) known = k;
            char kk[64];
            cis2_escape(key, strlen(key), kk, sizeof kk, CIS2_ESC_TEXT);
            free(line);
            if (known < 0) FAIL("unknown key \"%s\" (expected \"%s\")", kk, KEYS[i]);
            if (known < i) FAIL("duplicate key \"%s\"", kk);
            FAIL("key \"%s\" out of order (expected \"%s\")", kk, KEYS[i]);
        }
        int bad = 0;
        switch (i) {
        case 0:
            bad = strcmp(val, CIS2_SPEC_VERSION) != 0;
            if (!bad) strcpy(r->spec_version, val);
            break;
        case 1: bad = cis2_unhex32(val, r->weights_sha); break;
        case 2: bad = cis2_unhex32(val, r->config_sha); break;
        case 3: bad = cis2_unhex32(val, r->tokenizer_sha); break;
        case 4: {
            size_t hl = strlen(val);
            if (hl % 2) {
                bad = 1;
                break;
            }
            r->prompt_bytes = malloc(hl / 2 + 1);
            if (!r->prompt_bytes) {
                bad = 2; /* memory, not the text */
                break;
            }
            for (size_t k = 0; k < hl / 2; k++) {
                int hi = hexval(val[2 * k]), lo = hexval(val[2 * k + 1]);
                if (hi < 0 || lo < 0) {
                    bad = 1;
                    break;
                }
                r->prompt_bytes[k] = (uint8_t)(hi << 4 | lo);
            }
            r->prompt_len = hl / 2;
            break;
        }
        case 5:
        case 10: {
            char e2[CIS2_ERR_LEN];
            bad = cis2_parse_ids(val, i == 5 ? &r->prompt_ids : &r->gen_ids,
                                 i == 5 ? &r->n_prompt : &r->n_gen, e2);
            if (bad < 0) bad = 2; /* memory, not the text */
            break;
        }
        case 6: {
            char *e2;
            long v = strtol(val, &e2, 10);
            bad = *val < '0' || *val > '9' || *e2 || (val[0] == '0' && val[1]) || v < 1 ||
                  v > 1000000;
            r->gen_toks = (int)v;
            break;
        }
        case 7: /* int8-row: the linears are int8 (docs/quantization.md §2) */
            bad = strcmp(val, "fp32") != 0 && strcmp(val, "int8-row") != 0;
            if (!bad) strcpy(r->dtype, val);
            break;
        case 8: bad = cis2_unhex32(val, r->table_digest); break;
        case 9: bad = cis2_unhex32(val, r->inv_freq_digest); break;
        case 11: bad = cis2_unhex32(val, r->argmax_digest); break;
        case 12: bad = cis2_unhex32(val, r->witness_digest); break;
        }
        free(line);
        if (bad) {
            if (bad == 2) FAIL("out of memory reading \"%s\"", KEYS[i]);
            if (i == 0) FAIL("spec-version must be %s", CIS2_SPEC_VERSION);
            if (i == 7) FAIL("dtype must be fp32 or int8-row");
            FAIL("malformed value for \"%s\"", KEYS[i]);
        }
    }
    if (p < end) {
        lineno++;
        FAIL("unexpected data after the last line");
    }
    if (r->gen_toks != r->n_gen) {
        snprintf(err, CIS2_ERR_LEN, "%s: gen-toks %d disagrees with the %d generated-token-ids", ep,
                 r->gen_toks, r->n_gen);
        goto fail;
    }
    return 0;
fail:
    cis2_receipt_free(r);
    if (smp) memset(smp, 0, sizeof *smp);
    return 1;
#undef FAIL
}

int cis2_receipt_parse(const char *text, size_t len, const char *path, cis2_receipt *r, char *err)
{
    return receipt_parse(text, len, path, r, NULL, err);
}

int cis2_receipt_parse_sampled(const char *text, size_t len, const char *path, cis2_receipt *r,
                               cis2_sampler *smp, char *err)
{
    cis2_sampler dummy;
    return receipt_parse(text, len, path, r, smp ? smp : &dummy, err);
}

void cis2_receipt_free(cis2_receipt *r)
{
    free(r->prompt_bytes);
    free(r->prompt_ids);
    free(r->gen_ids);
    r->prompt_bytes = NULL;
    r->prompt_ids = r->gen_ids = NULL;
}

/* ---- public entry points: the message stays one line whatever the caller's
 * strings (paths, names) held (docs/errors.md: file names are escaped;
 * SANITIZE leaves what is escaped already as it is). */
int cis2_receipt_write(const cis2_receipt *r, const char *path, char *err)
{
    return cis2_receipt_write_sampled(r, NULL, path, err);
}

int cis2_receipt_write_sampled(const cis2_receipt *r, const cis2_sampler *smp, const char *path,
                               char *err)
{
    int rc = cis2_receipt_write_impl(r, smp, path, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}
