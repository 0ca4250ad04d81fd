/* The whole-model test vector `cis2 conform` reproduces: §13.1 itself, or a
 * `--vector FILE` in the same key=value form (the tests/fixtures vectors pin
 * fixture checkpoints this way). Values are checked here, so that a FAIL
 * line later can only mean the run differs. */
#include "verify/conformance.h"
#include <stdlib.h>
#include <string.h>

/* §13.1, the normative test vector. */
const char cis2_spec_13_1[] =
    "weights_sha256=80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1\n"
    "config_sha256=1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843\n"
    "tokenizer_sha256=9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c\n"
    "prompt=Once upon a time\n"
    "prompt_token_ids=6403,1980,253,655\n"
    "gen_toks=16\n"
    "generated_token_ids=28,665,436,253,1838,8180,3365,14176,30,2306,4161,281,253,2066,2291,351\n"
    "table_digest=23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d\n"
    "inv_freq_table_digest=da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12\n"
    "argmax_digest=0b9c8f3ac90d0b9cd5f1719ac327dca1fc639fd87468305fccebbe3d56f67aff\n"
    "cis2_ref=d82743059d1db929e710236fe4ec37f89e6f932524801345a006980f7c3cc9df\n";

static const char *KEYS[CIS2_RV_N] = { "weights_sha256",
                                       "config_sha256",
                                       "tokenizer_sha256",
                                       "prompt",
                                       "prompt_token_ids",
                                       "gen_toks",
                                       "generated_token_ids",
                                       "table_digest",
                                       "inv_freq_table_digest",
                                       "argmax_digest",
                                       "cis2_ref" };

static int is_hash(cis2_rv_key k) { return k <= CIS2_RV_TOKENIZER || k >= CIS2_RV_TABLE; }

int cis2_run_vector_parse(cis2_run_vector *rv, const char *text, size_t len, const char *path,
                          char *err)
{
    memset(rv, 0, sizeof *rv);
    char ep[200];
    cis2_escape(path, strlen(path), ep, sizeof ep, CIS2_ESC_TEXT);
    if (!(rv->text = malloc(len + 1))) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", ep);
        return 1;
    }
    memcpy(rv->text, text, len);
    rv->text[len] = 0;
    cis2_kv_doc d;
    if (cis2_kv_parse(rv->text, len, path, 0, &d, err)) goto fail;
    int n_gen_ids = 0;
    for (int i = 0; i < d.n; i++) {
        const cis2_kv_pair *p = &d.p[i];
        int k = 0;
        while (k < CIS2_RV_N && strcmp(p->key, KEYS[k])) k++;
        char ek[80];
        if (k == CIS2_RV_N) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: unknown key '%s'", ep, p->line,
                     cis2_escape(p->key, strlen(p->key), ek, sizeof ek, CIS2_ESC_TEXT));
            goto fail_doc;
        }
        uint8_t h[32];
        int32_t *ids = NULL;
        int n = 0;
        char e2[CIS2_ERR_LEN];
        int bad = 0;
        if (is_hash(k)) bad = strlen(p->val) != 64 || cis2_unhex32(p->val, h);
        else if (k == CIS2_RV_PROMPT_IDS || k == CIS2_RV_GEN_IDS) {
            bad = cis2_parse_ids(p->val, &ids, &n, e2);
            free(ids);
            if (k == CIS2_RV_GEN_IDS) n_gen_ids = n;
        } else if (k == CIS2_RV_GEN_TOKS) {
            uint64_t g;
            bad = cis2_parse_uint(p->val, "gen_toks", 1, 1000000, &g, e2);
            rv->gen_toks = (int)g;
        }
        if (bad) {
            snprintf(err, CIS2_ERR_LEN, "%s: line %d: %s %s", ep, p->line, KEYS[k],
                     is_hash(k) ? "must be 64 lowercase hex digits" : "is malformed");
            goto fail_doc;
        }
        rv->v[k] = p->val;
    }
    for (int k = 0; k < CIS2_RV_N; k++)
        if (!rv->v[k] && k != CIS2_RV_PROMPT) {
            snprintf(err, CIS2_ERR_LEN, "%s: missing key '%s'", ep, KEYS[k]);
            goto fail_doc;
        }
    /* A vector whose counts disagree can never pass: refused here, before
     * a run of up to a million tokens ends in a FAIL that blames the
     * engine (receipts refuse the same, verify-gen-toks). */
    if (n_gen_ids != rv->gen_toks) {
        snprintf(err, CIS2_ERR_LEN, "%s: gen_toks %d disagrees with the %d generated_token_ids", ep,
                 rv->gen_toks, n_gen_ids);
        goto fail_doc;
    }
    cis2_kv_free(&d);
    return 0;
fail_doc:
    cis2_kv_free(&d);
fail:
    cis2_run_vector_free(rv);
    return 1;
}

void cis2_run_vector_free(cis2_run_vector *rv)
{
    free(rv->text);
    memset(rv, 0, sizeof *rv);
}
