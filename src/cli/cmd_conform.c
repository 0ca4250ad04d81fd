/* `cis2 conform`: the §13.1 vector (or a --vector file) reproduced bit for
 * bit: pinned artifact hashes first, then every digest, then §12.4. */
#include "cli/commands.h"
#include <stdlib.h>
#include <string.h>

/* §13.1, the normative test vector, in the same key=value form that
 * `--vector FILE` takes (tests pin fixture checkpoints this way). */
static const char SPEC_13_1[] =
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

static const char *VEC_KEYS[] = { "weights_sha256",
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
#define N_VEC_KEYS 11

static int parse_vector(const char *text, const char *path, char *vals[N_VEC_KEYS], char *err)
{
    memset(vals, 0, N_VEC_KEYS * sizeof *vals);
    const char *p = text;
    int line = 0;
    while (*p) {
        line++;
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        if (ll && p[0] != '#') {
            const char *eq = memchr(p, '=', ll);
            if (!eq) {
                snprintf(err, CIS2_ERR_LEN, "%s: line %d: expected key=value", path, line);
                return 1;
            }
            int k;
            for (k = 0; k < N_VEC_KEYS; k++)
                if (strlen(VEC_KEYS[k]) == (size_t)(eq - p) &&
                    !memcmp(p, VEC_KEYS[k], (size_t)(eq - p)))
                    break;
            if (k == N_VEC_KEYS) {
                snprintf(err, CIS2_ERR_LEN, "%s: line %d: unknown key '%.*s'", path, line,
                         (int)(eq - p), p);
                return 1;
            }
            if (vals[k]) {
                snprintf(err, CIS2_ERR_LEN, "%s: line %d: duplicate key '%s'", path, line,
                         VEC_KEYS[k]);
                return 1;
            }
            vals[k] = strndup(eq + 1, ll - (size_t)(eq + 1 - p));
        }
        p += ll + (nl ? 1 : 0);
    }
    for (int k = 0; k < N_VEC_KEYS; k++)
        if (!vals[k] && k != 3) {
            snprintf(err, CIS2_ERR_LEN, "%s: missing key '%s'", path, VEC_KEYS[k]);
            return 1;
        }
    return 0;
}

static int pf(const char *what, int ok, const char *got, const char *want)
{
    if (ok) printf("PASS %s = %s\n", what, got);
    else printf("FAIL %s: got %s, want %s\n", what, got, want);
    return !ok;
}

int cis2_cmd_conform(int argc, char **argv)
{
    cis2_run_opts o;
    if (cis2_cli_parse_opts("conform", argc, argv,
                            " --model --vector --backend --isa --threads --no-check-determinism ",
                            &o, NULL))
        return 2;
    if (!o.model) return cis2_cli_usage_error("conform", "--model DIR is required");
    char err[CIS2_ERR_LEN], *vtext = NULL, *v[N_VEC_KEYS];
    size_t vl;
    const char *vpath = o.vector ? o.vector : "(spec §13.1)";
    if (o.vector && cis2_read_file(o.vector, &vtext, &vl, err))
        return cis2_cli_usage_error("conform", "%s", err);
    int prc = parse_vector(vtext ? vtext : SPEC_13_1, vpath, v, err);
    free(vtext);
    int rc = 2, fails = 0;
    cis2_model *m = NULL;
    cis2_engine *e = NULL;
    int32_t *ids = NULL, *want_ids = NULL;
    int n = 0, nw = 0;
    if (prc) {
        cis2_cli_usage_error("conform", "%s", err);
        goto out;
    }
    printf("conform: vector %s, model %s\n", vpath, o.model);
    /* §2.1: verify the three pinned hashes before any forward pass. */
    const char *files[3] = { "model.safetensors", "config.json", "tokenizer.json" };
    for (int i = 0; i < 3; i++) {
        char path[1100], h[65];
        uint8_t d[32];
        snprintf(path, sizeof path, "%s/%s", o.model, files[i]);
        if (cis2_sha256_file(path, d, err)) {
            cis2_cli_usage_error("conform", "%s", err);
            goto out;
        }
        cis2_hex(d, 32, h);
        char what[64];
        snprintf(what, sizeof what, "%s sha256", files[i]);
        if (pf(what, strcmp(h, v[i]) == 0, h, v[i])) { fails++; }
    }
    if (fails) {
        printf("conform: FAIL: pinned artifact hash mismatch; refusing to run the model (§2.1)\n");
        rc = 1;
        goto out;
    }
    cis2_engine_opts eo;
    if (cis2_cli_run_engine_opts("conform", &o, &eo)) goto out;
    if (cis2_cli_open("conform", o.model, &eo, &m, &e)) goto out;
    if (cis2_parse_ids(v[4], &want_ids, &nw, err)) {
        cis2_cli_usage_error("conform", "%s: prompt_token_ids: %s", vpath, err);
        goto out;
    }
    if (v[3]) {
        const cis2_tokenizer *t = cis2_model_tokenizer(m, err);
        if (!t) {
            cis2_cli_usage_error("conform", "%s", err);
            goto out;
        }
        int erc = cis2_tokenizer_encode(t, v[3], strlen(v[3]), &ids, &n, err);
        if (erc) {
            cis2_cli_usage_error("conform", "%s", err);
            goto out;
        }
        char *g = cis2_format_ids(ids, n);
        fails += pf("prompt_token_ids (tokenized prompt)", strcmp(g, v[4]) == 0, g, v[4]);
        free(g);
    } else {
        ids = want_ids;
        n = nw;
        want_ids = NULL;
    }
    int gen_toks;
    if (cis2_cli_int(v[5], 1, 1000000, &gen_toks)) {
        cis2_cli_usage_error("conform", "%s: bad gen_toks", vpath);
        goto out;
    }
    cis2_result r1;
    cis2_gen_opts g = { gen_toks, 0, NULL, NULL, NULL, 0 };
    if (cis2_generate(e, ids, n, &g, &r1, err)) {
        cis2_cli_usage_error("conform", "%s", err);
        goto out;
    }
    char h[65], *gs = cis2_format_ids(r1.gen, r1.n_gen);
    fails += pf("generated_token_ids", strcmp(gs, v[6]) == 0, gs, v[6]);
    free(gs);
    cis2_hex(m->dg.table_digest, 32, h);
    fails += pf("table_digest", strcmp(h, v[7]) == 0, h, v[7]);
    cis2_hex(m->dg.inv_freq_digest, 32, h);
    fails += pf("inv_freq_table_digest", strcmp(h, v[8]) == 0, h, v[8]);
    cis2_hex(r1.argmax, 32, h);
    fails += pf("argmax_digest", strcmp(h, v[9]) == 0, h, v[9]);
    cis2_hex(r1.witness, 32, h);
    fails += pf("CIS2_REF", strcmp(h, v[10]) == 0, h, v[10]);
    if (!o.no_check_det) {
        int det = cis2_cli_run_twice_check(e, ids, n, &g, &r1, err) == 0;
        printf("%s determinism: second in-process run %s (§12.4)\n", det ? "PASS" : "FAIL",
               det ? "identical" : err);
        fails += !det;
    }
    printf("CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=fp32\n", h,
           r1.n_prompt, r1.n_gen);
    cis2_result_free(&r1);
    printf("conform: %s\n", fails ? "FAIL" : "PASS: every pinned value reproduced bit for bit");
    rc = fails ? 1 : 0;
out:
    for (int k = 0; !prc && k < N_VEC_KEYS; k++) free(v[k]);
    free(ids);
    free(want_ids);
    if (e) cis2_engine_free(e);
    cis2_model_free(m);
    return rc;
}
