/* A C client of the installed libcis2 (tests/t_install.sh builds it with
 * pkg-config, shared and static): `client DIR PROMPT N RECEIPT` tokenizes
 * PROMPT, decodes N tokens greedily, writes the receipt as `cis2 run
 * --receipt` does, then verifies it field by field. */
#include <cis2.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *err)
{
    fprintf(stderr, "client: %s: %s\n", what, err);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: client DIR PROMPT N RECEIPT\n");
        return 2;
    }
    char err[CIS2_ERR_LEN];
    cis2_model *m;
    cis2_engine *e;
    if (cis2_model_open(&m, argv[1], NULL, err)) return fail("open", err);
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    if (cis2_engine_new(&e, m, &eo, err)) return fail("engine", err);
    const cis2_tokenizer *t = cis2_model_tokenizer(m, err);
    if (!t) return fail("tokenizer", err);
    int32_t *ids;
    int n;
    if (cis2_tokenizer_encode(t, argv[2], strlen(argv[2]), &ids, &n, err))
        return fail("encode", err);
    cis2_gen_opts g;
    memset(&g, 0, sizeof g);
    g.n_gen = atoi(argv[3]);
    cis2_result r;
    if (cis2_generate(e, ids, n, &g, &r, err)) return fail("generate", err);
    cis2_receipt rc;
    cis2_receipt_from_run(&rc, m, &r, (const uint8_t *)argv[2], strlen(argv[2]));
    if (cis2_receipt_write(&rc, argv[4], err)) return fail("receipt", err);

    /* Read it back and verify it: every field must match. */
    char *text;
    size_t len;
    if (cis2_receipt_format(&rc, &text, &len)) return fail("format", "failed");
    cis2_receipt back;
    if (cis2_receipt_parse(text, len, argv[4], &back, err)) return fail("parse", err);
    cis2_verdict v;
    if (cis2_receipt_verify(e, &back, NULL, NULL, &v, err)) return fail("verify", err);
    char *gen = cis2_format_ids(r.gen, r.n_gen);
    printf("libcis2 %s backend=%s generated=%s fields=%d mismatches=%d\n", cis2_version(),
           cis2_engine_backend(e), gen, v.n_fields, v.mismatches);
    int rc_exit = v.mismatches != 0 || strcmp(cis2_version(), CIS2_VERSION) != 0;
    cis2_free(gen);
    cis2_verdict_free(&v);
    cis2_receipt_free(&back);
    cis2_free(text);
    cis2_result_free(&r);
    cis2_free(ids);
    cis2_engine_free(e);
    cis2_model_free(m);
    return rc_exit;
}
