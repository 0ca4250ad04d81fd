/* `cis2 run`: one prompt through the model, key=value output lines, the
 * CIS2_REF line (§12.1) and optionally a receipt. */
#include "cli/commands.h"
#include <stdlib.h>
#include <string.h>

/* Prompt ids from --prompt-ids or by tokenizing --prompt with `t` (NULL when
 * tokenizer.json did not load; `terr` says why). Also returns the prompt's raw
 * bytes for the receipt (for ids: their decoded text when the tokenizer can
 * decode them, else empty). */
/* --chat FILE: OpenAI-style messages rendered with the model's chat template
 * (DIR/tokenizer_config.json) or --chat-format, plus the generation prompt;
 * the rendered bytes are the prompt and the receipt's prompt-hex. */
static int chat_prompt(const char *cmd, const cis2_run_opts *o, const cis2_tokenizer *t,
                       char **bytes, size_t *blen)
{
    char err[CIS2_ERR_LEN], *json = NULL;
    size_t len;
    cis2_chat_template *tpl = NULL;
    cis2_chat_msg *msgs = NULL;
    int n = 0, rc = 2;
    if (o->chat_format ? cis2_chat_template_builtin(&tpl, o->chat_format, err)
                       : cis2_chat_template_load(&tpl, o->model, err))
        cis2_cli_usage_error(cmd, "%s", err);
    else if (cis2_read_file_max(o->chat, (size_t)64 << 20, &json, &len, err) ||
             cis2_chat_parse_messages(json, len, o->chat, &msgs, &n, err) ||
             cis2_chat_render(tpl, msgs, n, 1, t, bytes, blen, err))
        cis2_cli_usage_error(cmd, "--chat: %s", err);
    else rc = 0;
    free(json);
    free(msgs);
    cis2_chat_template_free(tpl);
    return rc;
}

static int get_prompt(const char *cmd, const cis2_run_opts *o, const cis2_tokenizer *t,
                      const char *terr, int32_t **ids, int *n, char **bytes, size_t *blen)
{
    char err[CIS2_ERR_LEN];
    *bytes = NULL;
    *blen = 0;
    if (o->chat) {
        if (!t) return cis2_cli_usage_error(cmd, "--chat needs the tokenizer: %s", terr);
        if (chat_prompt(cmd, o, t, bytes, blen)) return 2;
        if (cis2_tokenizer_encode(t, *bytes, *blen, ids, n, err))
            return cis2_cli_usage_error(cmd, "--chat: %s", err);
        return 0;
    }
    if (o->prompt_ids) {
        if (cis2_parse_ids(o->prompt_ids, ids, n, err))
            return cis2_cli_usage_error(cmd, "--prompt-ids: %s", err);
        if (t && cis2_tokenizer_decode(t, *ids, *n, bytes, blen, err)) {
            *bytes = NULL;
            *blen = 0;
        }
        return 0;
    }
    if (!t) return cis2_cli_usage_error(cmd, "--prompt needs the tokenizer: %s", terr);
    if (cis2_tokenizer_encode(t, o->prompt, strlen(o->prompt), ids, n, err))
        return cis2_cli_usage_error(cmd, "--prompt: %s", err);
    if (*n == 0) return cis2_cli_usage_error(cmd, "--prompt: the prompt encodes to no tokens");
    *bytes = strdup(o->prompt);
    *blen = strlen(o->prompt);
    return 0;
}

int cis2_cmd_run(int argc, char **argv)
{
    cis2_run_opts o;
    if (cis2_cli_parse_opts(
            "run", argc, argv,
            " --model --prompt --prompt-ids --n --receipt --backend --isa --threads --stop-at-eos"
            " --check-determinism --fault --fault-arg --chat --chat-format ",
            &o, NULL))
        return 2;
    if (!o.model) return cis2_cli_usage_error("run", "--model DIR is required");
    if (!!o.prompt + !!o.prompt_ids + !!o.chat != 1)
        return cis2_cli_usage_error(
            "run", "give exactly one of --prompt TEXT, --prompt-ids 1,2,3 or --chat FILE.json");
    if (o.chat_format && !o.chat)
        return cis2_cli_usage_error("run", "--chat-format needs --chat FILE.json");
    cis2_engine_opts eo;
    if (cis2_cli_run_engine_opts("run", &o, &eo)) return 2;
    cis2_model *m;
    cis2_engine *e;
    if (cis2_cli_open("run", o.model, &eo, &m, &e)) return 2;
    int32_t *ids = NULL;
    int n = 0, rc = 2;
    char *bytes = NULL, err[CIS2_ERR_LEN];
    size_t blen = 0;
    cis2_result r = { 0 };
    /* The model's tokenizer, parsed from the bytes it hashed. */
    char terr[CIS2_ERR_LEN];
    const cis2_tokenizer *t = cis2_model_tokenizer(m, terr);
    if (get_prompt("run", &o, t, terr, &ids, &n, &bytes, &blen)) goto out;
    cis2_gen_opts g = { o.n, o.stop_at_eos, NULL, NULL, NULL, 0 };
    if (cis2_generate(e, ids, n, &g, &r, err)) {
        cis2_cli_usage_error("run", "%s", err);
        goto out;
    }
    if (o.check_det && cis2_cli_run_twice_check(e, ids, n, &g, &r, err)) {
        cis2_cli_usage_error("run", "%s", err);
        rc = 1;
        goto out;
    }
    char *p = cis2_format_ids(r.prompt, r.n_prompt), *gs = cis2_format_ids(r.gen, r.n_gen);
    printf("prompt_token_ids=%s\ngenerated_token_ids=%s\n", p, gs);
    free(p);
    free(gs);
    if (t) {
        char *text;
        size_t tl;
        if (cis2_tokenizer_decode(t, r.gen, r.n_gen, &text, &tl, err) == 0) {
            printf("text=\"");
            cis2_cli_print_json_escaped(stdout, text, tl);
            printf("\"\n");
            free(text);
        } else {
            printf("text_error=%s\n", err);
        }
    }
    cis2_cli_print_hex_line("table_digest", m->dg.table_digest);
    cis2_cli_print_hex_line("inv_freq_table_digest", m->dg.inv_freq_digest);
    cis2_cli_print_hex_line("argmax_digest", r.argmax);
    if (o.stop_at_eos) printf("stop_at_eos=1 stopped=%d\n", r.stopped_at_eos);
    if (o.check_det) printf("determinism=PASS\n");
    char wh[65];
    cis2_hex(r.witness, 32, wh);
    printf("CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=fp32\n", wh,
           r.n_prompt, r.n_gen);
    fflush(stdout);
    rc = 0;
    if (o.receipt) {
        cis2_receipt rec;
        cis2_receipt_from_run(&rec, m, &r, (const uint8_t *)bytes, blen);
        if (cis2_receipt_write(&rec, o.receipt, err)) {
            cis2_cli_usage_error("run", "%s", err);
            rc = 2;
        }
    }
out:
    cis2_result_free(&r);
    free(ids);
    free(bytes);
    cis2_engine_free(e);
    cis2_model_free(m);
    return rc;
}
