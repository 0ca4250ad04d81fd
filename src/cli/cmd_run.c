/* `cis2 run`: one prompt through the model, key=value output lines, the
 * CIS2_REF line (§12.1) and optionally a receipt. */
#include "cli/commands.h"
#include "core/json.h"
#include "engine/sample.h"
#include <stdlib.h>
#include <string.h>

/* --chat-template-kwarg KEY=JSON, each given: one JSON object of template
 * variables (*out malloc'd), or an error line naming the flag. */
static int chat_kwargs(const char *cmd, const cis2_opt_list *l, char **out)
{
    cis2_sb sb = { 0 };
    char err[CIS2_ERR_LEN], q[200];
    *out = NULL;
    cis2_sb_str(&sb, "{");
    for (int i = 0; i < l->n; i++) {
        const char *a = l->v[i], *eq = strchr(a, '=');
        if (!eq || eq == a) {
            cis2_sb_free(&sb);
            return cis2_cli_usage_error(cmd, "--chat-template-kwarg \"%s\": expected KEY=JSON",
                                        cis2_escape(a, strlen(a), q, sizeof q, CIS2_ESC_TEXT));
        }
        for (int k = 0; k < i; k++)
            if (!strncmp(l->v[k], a, (size_t)(eq - a) + 1)) {
                cis2_sb_free(&sb);
                return cis2_cli_usage_error(
                    cmd, "--chat-template-kwarg: \"%s\" given twice",
                    cis2_escape(a, (size_t)(eq - a), q, sizeof q, CIS2_ESC_TEXT));
            }
        json_doc d;
        if (json_parse(&d, eq + 1, strlen(eq + 1), "value", err)) {
            cis2_sb_free(&sb);
            return cis2_cli_usage_error(
                cmd, "--chat-template-kwarg \"%s\": the %s",
                cis2_escape(a, (size_t)(eq - a), q, sizeof q, CIS2_ESC_TEXT), err);
        }
        json_free(&d);
        if (i) cis2_sb_str(&sb, ", ");
        cis2_sb_json_str(&sb, a, (size_t)(eq - a));
        cis2_sb_str(&sb, ": ");
        cis2_sb_str(&sb, eq + 1);
    }
    cis2_sb_str(&sb, "}");
    size_t n;
    *out = sb.oom ? NULL : cis2_sb_take(&sb, &n);
    cis2_sb_free(&sb);
    if (!*out) return cis2_cli_usage_error(cmd, "out of memory");
    return 0;
}

/* --chat FILE: OpenAI-style messages rendered with the model's own chat
 * template (DIR/tokenizer_config.json or DIR/chat_template.jinja), or
 * --chat-template FILE (with DIR's special tokens), or --chat-format, plus
 * the generation prompt, the --chat-template-kwarg variables and the
 * --chat-date day; the rendered bytes are the prompt and the receipt's
 * prompt-hex. */
static int chat_prompt(const char *cmd, const cis2_run_opts *o, const cis2_tokenizer *t,
                       char **bytes, size_t *blen)
{
    char err[CIS2_ERR_LEN], *json = NULL, *kw = NULL;
    size_t len;
    cis2_chat_template *tpl = NULL;
    cis2_chat_msg *msgs = NULL;
    int n = 0, rc = 2;
    if (chat_kwargs(cmd, &o->chat_kwargs, &kw)) return 2;
    cis2_chat_opts co = { 1, o->chat_kwargs.n ? kw : NULL, o->chat_kwargs.n ? strlen(kw) : 0,
                          o->chat_date };
    if (o->chat_format     ? cis2_chat_template_builtin(&tpl, o->chat_format, err)
        : o->chat_template ? cis2_chat_template_load_file(&tpl, o->model, o->chat_template, err)
                           : cis2_chat_template_load(&tpl, o->model, err))
        cis2_cli_usage_error(
            cmd, "%s%s%s", o->chat_template ? "--chat-template: " : "", err,
            o->chat_format || o->chat_template ? "" : " (or give --chat-format chatml)");
    else if (cis2_read_file_max(o->chat, (size_t)64 << 20, &json, &len, err) ||
             cis2_chat_parse_messages(json, len, o->chat, &msgs, &n, err) ||
             cis2_chat_render_opts(tpl, msgs, n, &co, t, bytes, blen, err))
        cis2_cli_usage_error(cmd, "--chat: %s", err);
    else rc = 0;
    free(kw);
    free(json);
    free(msgs);
    cis2_chat_template_free(tpl);
    return rc;
}

/* Prompt ids from --prompt-ids or by tokenizing --prompt with `t` (NULL when
 * tokenizer.json did not load; `terr` says why), or from --chat. */
static int get_prompt(const char *cmd, const cis2_run_opts *o, const cis2_tokenizer *t,
                      const char *terr, int32_t **ids, int *n)
{
    char err[CIS2_ERR_LEN];
    if (o->chat) {
        /* the rendered bytes are the prompt; the receipt's prompt-hex is what
         * its ids decode to, the same bytes (cis2_receipt_prompt_bytes) */
        char *bytes = NULL;
        size_t blen = 0;
        if (!t) return cis2_cli_usage_error(cmd, "--chat needs the tokenizer: %s", terr);
        if (chat_prompt(cmd, o, t, &bytes, &blen)) return 2;
        int erc = cis2_tokenizer_encode(t, bytes, blen, ids, n, err);
        free(bytes);
        if (erc) return cis2_cli_usage_error(cmd, "--chat: %s", err);
        return 0;
    }
    if (o->prompt_ids) {
        if (cis2_parse_ids(o->prompt_ids, ids, n, err))
            return cis2_cli_usage_error(cmd, "--prompt-ids: %s", err);
        return 0;
    }
    if (!t) return cis2_cli_usage_error(cmd, "--prompt needs the tokenizer: %s", terr);
    if (cis2_tokenizer_encode(t, o->prompt, strlen(o->prompt), ids, n, err))
        return cis2_cli_usage_error(cmd, "--prompt: %s", err);
    if (*n == 0) return cis2_cli_usage_error(cmd, "--prompt: the prompt encodes to no tokens");
    return 0;
}

/* The receipt's prompt-hex: the bytes the prompt ids decode to
 * (cis2_receipt_prompt_bytes), for --prompt and --prompt-ids runs alike, so
 * that verify can check the relation. Never empty: a peer's strict parser
 * rejects a key without a value. */
static int prompt_bytes(const char *cmd, const cis2_tokenizer *t, const char *terr,
                        const int32_t *ids, int n, char **bytes, size_t *len)
{
    char err[CIS2_ERR_LEN];
    if (!t)
        return cis2_cli_usage_error(cmd,
                                    "--receipt: prompt-hex is the bytes the prompt ids decode to, "
                                    "and the tokenizer is not usable: %s",
                                    terr);
    if (cis2_receipt_prompt_bytes(t, ids, n, bytes, len, err))
        return cis2_cli_usage_error(cmd, "--receipt: prompt-hex: %s", err);
    if (*len == 0)
        return cis2_cli_usage_error(cmd, "--receipt: the prompt ids decode to no bytes, and a "
                                         "receipt's prompt-hex may not be empty");
    return 0;
}

/* The generated text as a JSON string when it is UTF-8 (text="..."), else
 * why not (text_error=...): never invented characters. */
static void print_text(const cis2_tokenizer *t, const cis2_result *r)
{
    char err[CIS2_ERR_LEN], *text;
    size_t tl;
    if (cis2_tokenizer_decode(t, r->gen, r->n_gen, &text, &tl, err)) {
        printf("text_error=");
        cis2_cli_put_escaped(stdout, err, strlen(err), CIS2_ESC_TEXT);
        printf("\n");
        return;
    }
    size_t bad = cis2_utf8_check(text, tl);
    if (bad < tl) {
        printf("text_error=the generated ids' bytes are not valid UTF-8 (byte 0x%02x at offset "
               "%zu)\n",
               (unsigned char)text[bad], bad);
    } else {
        printf("text=\"");
        cis2_cli_put_escaped(stdout, text, tl, CIS2_ESC_JSON);
        printf("\"\n");
    }
    free(text);
}

int cis2_cmd_run(int argc, char **argv)
{
    cis2_run_opts o;
    if (cis2_cli_parse_opts(
            "run", argc, argv,
            " --model --prompt --prompt-ids --n --receipt --backend --isa --threads --stop-at-eos"
            " --check-determinism --fault --fault-arg --chat --chat-format --chat-template"
            " --chat-template-kwarg --chat-date"
            " --temperature --top-k --top-p --min-p --seed ",
            &o, NULL))
        return 2;
    if (!o.model) return cis2_cli_usage_error("run", "--model DIR is required");
    if (!!o.prompt + !!o.prompt_ids + !!o.chat != 1)
        return cis2_cli_usage_error(
            "run", "give exactly one of --prompt TEXT, --prompt-ids 1,2,3 or --chat FILE.json");
    if (o.chat_format && !o.chat)
        return cis2_cli_usage_error("run", "--chat-format needs --chat FILE.json");
    if ((o.chat_template || o.chat_kwargs.n || o.chat_date) && !o.chat)
        return cis2_cli_usage_error("run", "%s needs --chat FILE.json",
                                    o.chat_template   ? "--chat-template"
                                    : o.chat_kwargs.n ? "--chat-template-kwarg"
                                                      : "--chat-date");
    if (o.chat_template && o.chat_format)
        return cis2_cli_usage_error("run", "--chat-template and --chat-format exclude each other");
    if (o.receipt && o.fault)
        return cis2_cli_usage_error("run", "--receipt and --fault exclude each other (a faulted "
                                           "run must not produce a normal-looking receipt)");
    if (o.receipt && cis2_cli_output_ok("run", "--receipt", o.receipt, 0)) return 2;
    const cis2_cli_input chat_in = { "--chat", o.chat };
    if (o.receipt && cis2_cli_output_not_input("run", "--receipt", o.receipt, o.model, &chat_in, 1))
        return 2;
    cis2_sampler smp;
    if (cis2_cli_sampler("run", &o, &smp)) return 2;
    cis2_engine_opts eo;
    if (cis2_cli_run_engine_opts("run", &o, &eo)) return 2;
    int armd = eo.backend == CIS2_BACKEND_APPROX;
    if (o.receipt && armd)
        return cis2_cli_usage_error("run", "--receipt: --backend approx (arm D) is approximate and "
                                           "not reproducible; its runs get no receipt");
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
    if (get_prompt("run", &o, t, terr, &ids, &n)) goto out;
    if (o.receipt && prompt_bytes("run", t, terr, ids, n, &bytes, &blen)) goto out;
    /* the library's bound (positions up to n + n_gen - 2), in this command's own words */
    int max_pos = cis2_model_config(m)->max_pos;
    if ((int64_t)n + o.n - 1 > max_pos) {
        cis2_cli_usage_error("run",
                             "prompt (%d tokens) + -n %d exceeds max_position_embeddings = %d", n,
                             o.n, max_pos);
        goto out;
    }
    cis2_gen_opts g = { o.n, o.stop_at_eos, NULL, NULL, NULL, 0 };
    if (cis2_generate_sampled(e, ids, n, &g, &smp, &r, err)) {
        cis2_cli_usage_error("run", "%s", err);
        goto out;
    }
    /* §12.4: both runs compared before any result line */
    if (o.check_det && cis2_cli_run_twice_check_sampled(e, ids, n, &g, &smp, &r, err)) {
        cis2_cli_usage_error("run", "%s", err);
        rc = 1;
        goto out;
    }
    cis2_cli_nan_note("run", &r);
    char *p = cis2_format_ids(r.prompt, r.n_prompt), *gs = cis2_format_ids(r.gen, r.n_gen);
    printf("prompt_token_ids=%s\ngenerated_token_ids=%s\n", p, gs);
    free(p);
    free(gs);
    if (t) print_text(t, &r);
    if (smp.temperature > 0.0f) { /* docs/sampling.md: what a re-run needs */
        char sl[160];
        smp_format(&smp, sl, sizeof sl);
        printf("sampler=%s\nseed=%llu\n", sl, (unsigned long long)smp.seed);
    }
    const cis2_digests *dg = cis2_model_digests(m);
    cis2_cli_print_hex_line("table_digest", dg->table_digest);
    cis2_cli_print_hex_line("inv_freq_table_digest", dg->inv_freq_digest);
    cis2_cli_print_hex_line("argmax_digest", r.argmax);
    if (o.stop_at_eos) printf("stop_at_eos=1 stopped=%d\n", r.stopped_at_eos);
    if (o.check_det) printf("determinism=PASS\n");
    char wh[65];
    cis2_hex(r.witness, 32, wh);
    if (armd) printf("arm=D approximate: no CIS2_REF (docs/quantization.md §6)\n");
    else
        printf("CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=%s\n", wh,
               r.n_prompt, r.n_gen, cis2_model_dtype(m));
    fflush(stdout);
    rc = 0;
    if (o.receipt) {
        cis2_receipt rec;
        cis2_receipt_from_run(&rec, m, &r, (const uint8_t *)bytes, blen);
        if (cis2_receipt_write_sampled(&rec, &smp, o.receipt, err)) {
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
