/* `cis2 conform`: the §13.1 vector (or a --vector file) reproduced bit for
 * bit. The model's pinned artifact hashes are checked before any forward
 * pass (§2.1: they are the hashes of the bytes the model was loaded from);
 * then the decode runs twice and the two runs are compared before any
 * result line is printed (§12.4): a mismatch prints only the failure. */
#include "cli/commands.h"
#include <stdlib.h>
#include <string.h>

/* One PASS/FAIL line into the report; 1 when it failed. */
static int pf(cis2_sb *rep, const char *what, int ok, const char *got, const char *want)
{
    if (ok) cis2_sb_printf(rep, "PASS %s = ", what);
    else cis2_sb_printf(rep, "FAIL %s: got ", what);
    cis2_sb_escape(rep, got, strlen(got), CIS2_ESC_TEXT);
    if (!ok) {
        cis2_sb_str(rep, ", want ");
        cis2_sb_escape(rep, want, strlen(want), CIS2_ESC_TEXT);
    }
    cis2_sb_str(rep, "\n");
    return !ok;
}

static int pf_hash(cis2_sb *rep, const char *what, const uint8_t d[32], const char *want)
{
    char h[65];
    cis2_hex(d, 32, h);
    return pf(rep, what, !strcmp(h, want), h, want);
}

int cis2_cmd_conform(int argc, char **argv)
{
    cis2_run_opts o;
    if (cis2_cli_parse_opts("conform", argc, argv,
                            " --model --vector --backend --isa --threads --no-check-determinism ",
                            &o, NULL))
        return 2;
    if (!o.model) return cis2_cli_usage_error("conform", "--model DIR is required");
    char err[CIS2_ERR_LEN], *vtext = NULL;
    size_t vl = 0;
    const char *vpath = o.vector ? o.vector : "(spec §13.1)";
    if (o.vector && cis2_read_file_max(o.vector, CIS2_RUN_VECTOR_MAX, &vtext, &vl, err))
        return cis2_cli_usage_error("conform", "%s", err);
    cis2_run_vector rv;
    int prc = cis2_run_vector_parse(&rv, vtext ? vtext : cis2_spec_13_1,
                                    vtext ? vl : strlen(cis2_spec_13_1), vpath, err);
    free(vtext);
    if (prc) return cis2_cli_usage_error("conform", "%s", err);
    const char **v = rv.v;
    int rc = 2, fails = 0;
    cis2_model *m = NULL;
    cis2_engine *e = NULL;
    int32_t *ids = NULL;
    int n = 0;
    cis2_result r1;
    memset(&r1, 0, sizeof r1);
    cis2_sb rep = { 0 };
    cis2_sb_str(&rep, "conform: vector ");
    cis2_sb_escape(&rep, vpath, strlen(vpath), CIS2_ESC_TEXT);
    cis2_sb_str(&rep, ", model ");
    cis2_sb_escape(&rep, o.model, strlen(o.model), CIS2_ESC_TEXT);
    cis2_sb_str(&rep, "\n");
    cis2_engine_opts eo;
    if (cis2_cli_run_engine_opts("conform", &o, &eo)) goto out;
    if (cis2_cli_open("conform", o.model, &eo, &m, &e)) goto out;
    /* §2.1: the pinned hashes before any forward pass */
    const cis2_digests *dg = cis2_model_digests(m);
    fails += pf_hash(&rep, "model.safetensors sha256", dg->weights_sha256, v[CIS2_RV_WEIGHTS]);
    fails += pf_hash(&rep, "config.json sha256", dg->config_sha256, v[CIS2_RV_CONFIG]);
    fails += pf_hash(&rep, "tokenizer.json sha256", dg->tokenizer_sha256, v[CIS2_RV_TOKENIZER]);
    if (fails) {
        cis2_sb_str(&rep, "conform: FAIL: pinned artifact hash mismatch; refusing to run the "
                          "model (§2.1)\n");
        rc = 1;
        goto out;
    }
    if (v[CIS2_RV_PROMPT]) {
        const cis2_tokenizer *t = cis2_model_tokenizer(m, err);
        if (!t ||
            cis2_tokenizer_encode(t, v[CIS2_RV_PROMPT], strlen(v[CIS2_RV_PROMPT]), &ids, &n, err)) {
            cis2_cli_usage_error("conform", "%s", err);
            goto out;
        }
        char *g = cis2_format_ids(ids, n);
        fails += pf(&rep, "prompt_token_ids (tokenized prompt)",
                    g && !strcmp(g, v[CIS2_RV_PROMPT_IDS]), g ? g : "?", v[CIS2_RV_PROMPT_IDS]);
        free(g);
    } else if (cis2_parse_ids(v[CIS2_RV_PROMPT_IDS], &ids, &n, err)) {
        cis2_cli_usage_error("conform", "prompt_token_ids: %s", err);
        goto out;
    }
    cis2_gen_opts g = { rv.gen_toks, 0, NULL, NULL, NULL, 0 };
    if (cis2_generate(e, ids, n, &g, &r1, err)) {
        cis2_cli_usage_error("conform", "%s", err);
        goto out;
    }
    if (!o.no_check_det && cis2_cli_run_twice_check(e, ids, n, &g, &r1, err)) {
        /* §12.4: no result of a run that does not repeat itself */
        cis2_sb_free(&rep);
        printf("FAIL determinism: ");
        cis2_cli_put_escaped(stdout, err, strlen(err), CIS2_ESC_TEXT);
        printf("\nconform: FAIL\n");
        rc = 1;
        goto out;
    }
    cis2_cli_nan_note("conform", &r1);
    char *gs = cis2_format_ids(r1.gen, r1.n_gen), h[65];
    fails += pf(&rep, "generated_token_ids", gs && !strcmp(gs, v[CIS2_RV_GEN_IDS]), gs ? gs : "?",
                v[CIS2_RV_GEN_IDS]);
    free(gs);
    fails += pf_hash(&rep, "table_digest", dg->table_digest, v[CIS2_RV_TABLE]);
    fails += pf_hash(&rep, "inv_freq_table_digest", dg->inv_freq_digest, v[CIS2_RV_INV_FREQ]);
    fails += pf_hash(&rep, "argmax_digest", r1.argmax, v[CIS2_RV_ARGMAX]);
    fails += pf_hash(&rep, "CIS2_REF", r1.witness, v[CIS2_RV_REF]);
    if (!o.no_check_det)
        cis2_sb_str(&rep, "PASS determinism: second in-process run identical (§12.4)\n");
    cis2_hex(r1.witness, 32, h);
    cis2_sb_printf(&rep, "CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=%s\n", h,
                   r1.n_prompt, r1.n_gen, cis2_model_dtype(m));
    cis2_sb_printf(&rep, "conform: %s\n",
                   fails ? "FAIL" : "PASS: every pinned value reproduced bit for bit");
    rc = fails ? 1 : 0;
out:
    if (rep.b && rc != 2) fputs(rep.b, stdout);
    cis2_sb_free(&rep);
    cis2_result_free(&r1);
    cis2_run_vector_free(&rv);
    free(ids);
    cis2_engine_free(e);
    cis2_model_free(m);
    return rc;
}
