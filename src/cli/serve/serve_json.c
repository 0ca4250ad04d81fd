/* The JSON `cis2 serve` sends: OpenAI-shaped error objects, text_completion
 * and chat.completion objects and their stream chunks, the model list, and
 * the cis2 extensions (a completion's ids, digests and receipt; a receipt's
 * field-by-field verdict).
 * Strings go through cis2_sb_json_str, so nothing a client sent or a model
 * generated can break the JSON. */
#include "cli/serve.h"
#include <stdlib.h>
#include <string.h>

void serve_json_error(cis2_sb *sb, const serve_err *e)
{
    cis2_sb_str(sb, "{\"error\":{\"message\":");
    cis2_sb_json_str(sb, e->message, strlen(e->message));
    cis2_sb_str(sb, ",\"type\":");
    cis2_sb_json_str(sb, e->type, strlen(e->type));
    cis2_sb_str(sb, ",\"param\":");
    if (e->param[0]) cis2_sb_json_str(sb, e->param, strlen(e->param));
    else cis2_sb_str(sb, "null");
    cis2_sb_str(sb, ",\"code\":");
    if (e->code) cis2_sb_json_str(sb, e->code, strlen(e->code));
    else cis2_sb_str(sb, "null");
    cis2_sb_str(sb, "}}");
}

static void ids_array(cis2_sb *sb, const int32_t *ids, int n)
{
    cis2_sb_put(sb, "[", 1);
    for (int i = 0; i < n; i++) cis2_sb_printf(sb, i ? ",%d" : "%d", (int)ids[i]);
    cis2_sb_put(sb, "]", 1);
}

static void hex_member(cis2_sb *sb, const char *key, const uint8_t d[32])
{
    cis2_sb_printf(sb, ",\"%s\":\"", key);
    cis2_sb_hex(sb, d, 32);
    cis2_sb_put(sb, "\"", 1);
}

int serve_json_cis2(cis2_sb *sb, const serve_model_info *mi, const cis2_result *r,
                    const char *prompt_bytes, size_t prompt_len)
{
    const cis2_digests *dg = cis2_model_digests(mi->m);
    cis2_receipt rc;
    cis2_receipt_from_run(&rc, mi->m, r, (const uint8_t *)prompt_bytes, prompt_len);
    char *text = NULL;
    size_t tl = 0;
    if (cis2_receipt_format(&rc, &text, &tl)) return 1;
    cis2_sb_str(sb, "{\"prompt_token_ids\":");
    ids_array(sb, r->prompt, r->n_prompt);
    cis2_sb_str(sb, ",\"generated_token_ids\":");
    ids_array(sb, r->gen, r->n_gen);
    hex_member(sb, "weights_sha256", dg->weights_sha256);
    hex_member(sb, "config_sha256", dg->config_sha256);
    hex_member(sb, "tokenizer_sha256", dg->tokenizer_sha256);
    hex_member(sb, "table_digest", dg->table_digest);
    hex_member(sb, "inv_freq_table_digest", dg->inv_freq_digest);
    hex_member(sb, "argmax_digest", r->argmax);
    hex_member(sb, "witness_digest", r->witness);
    char wh[65];
    cis2_hex(r->witness, 32, wh);
    /* §12.1's line, as `cis2 run` prints it */
    cis2_sb_printf(sb,
                   ",\"cis2_ref\":\"CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d "
                   "dtype=%s\"",
                   wh, r->n_prompt, r->n_gen, cis2_model_dtype(mi->m));
    cis2_sb_printf(sb, ",\"stopped_at_eos\":%s", r->stopped_at_eos ? "true" : "false");
    if (r->nan_step >= 0)
        cis2_sb_printf(sb, ",\"nan_step\":%d,\"nan_index\":%d", r->nan_step, r->nan_index);
    cis2_sb_str(sb, ",\"receipt\":");
    cis2_sb_json_str(sb, text, tl);
    cis2_sb_put(sb, "}", 1);
    free(text);
    return 0;
}

void serve_json_completion_head(cis2_sb *sb, const char *id, long long created,
                                const char *model_id, const char *text, size_t len,
                                const char *finish_reason)
{
    cis2_sb_printf(sb,
                   "{\"id\":\"%s\",\"object\":\"text_completion\",\"created\":%lld,\"model\":", id,
                   created);
    cis2_sb_json_str(sb, model_id, strlen(model_id));
    cis2_sb_str(sb, ",\"choices\":[{\"text\":");
    cis2_sb_json_str(sb, text, len);
    cis2_sb_str(sb, ",\"index\":0,\"logprobs\":null,\"finish_reason\":");
    if (finish_reason) cis2_sb_printf(sb, "\"%s\"}]", finish_reason);
    else cis2_sb_str(sb, "null}]");
}

void serve_json_chat_head(cis2_sb *sb, const char *id, long long created, const char *model_id,
                          int chunk, int role, const char *text, size_t len,
                          const char *finish_reason)
{
    cis2_sb_printf(sb, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", id,
                   chunk ? "chat.completion.chunk" : "chat.completion", created);
    cis2_sb_json_str(sb, model_id, strlen(model_id));
    cis2_sb_str(sb, chunk ? ",\"choices\":[{\"index\":0,\"delta\":{"
                          : ",\"choices\":[{\"index\":0,\"message\":{");
    if (role || !chunk) cis2_sb_str(sb, "\"role\":\"assistant\"");
    if (text || !chunk) {
        cis2_sb_str(sb, role || !chunk ? ",\"content\":" : "\"content\":");
        cis2_sb_json_str(sb, text ? text : "", text ? len : 0);
    }
    cis2_sb_str(sb, "},\"logprobs\":null,\"finish_reason\":");
    if (finish_reason) cis2_sb_printf(sb, "\"%s\"}]", finish_reason);
    else cis2_sb_str(sb, "null}]");
}

void serve_json_usage(cis2_sb *sb, int prompt_tokens, int completion_tokens)
{
    cis2_sb_printf(sb,
                   "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}",
                   prompt_tokens, completion_tokens, prompt_tokens + completion_tokens);
}

static void model_object(cis2_sb *sb, const serve_model_info *mi, long long created)
{
    const cis2_digests *dg = cis2_model_digests(mi->m);
    const cis2_config *c = cis2_model_config(mi->m);
    static const char *const arch[] = { "llama", "qwen2", "qwen3" };
    cis2_sb_str(sb, "{\"id\":");
    cis2_sb_json_str(sb, mi->model_id, strlen(mi->model_id));
    cis2_sb_printf(sb, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"cis2\",\"cis2\":{",
                   created);
    cis2_sb_printf(sb, "\"spec_version\":\"%s\",\"dtype\":\"%s\",\"arch\":\"%s\"",
                   CIS2_SPEC_VERSION, cis2_model_dtype(mi->m),
                   (unsigned)c->arch < 3 ? arch[c->arch] : "?");
    hex_member(sb, "weights_sha256", dg->weights_sha256);
    hex_member(sb, "config_sha256", dg->config_sha256);
    hex_member(sb, "tokenizer_sha256", dg->tokenizer_sha256);
    hex_member(sb, "table_digest", dg->table_digest);
    hex_member(sb, "inv_freq_table_digest", dg->inv_freq_digest);
    cis2_sb_printf(sb, ",\"vocab_size\":%d,\"max_position_embeddings\":%d}}", c->vocab, c->max_pos);
}

void serve_json_models(cis2_sb *sb, const serve_model_info *mi, long long created, int one)
{
    if (one) {
        model_object(sb, mi, created);
        return;
    }
    cis2_sb_str(sb, "{\"object\":\"list\",\"data\":[");
    model_object(sb, mi, created);
    cis2_sb_str(sb, "]}");
}

void serve_json_verdict(cis2_sb *sb, const cis2_verdict *v)
{
    static const char *const st[] = { "match", "mismatch", "skipped" };
    cis2_sb_printf(sb,
                   "{\"object\":\"cis2.verdict\",\"verified\":%s,\"mismatches\":%d,\"fields\":[",
                   v->mismatches ? "false" : "true", v->mismatches);
    for (int i = 0; i < v->n_fields; i++) {
        const cis2_verdict_field *f = &v->fields[i];
        cis2_sb_str(sb, i ? ",{\"field\":" : "{\"field\":");
        cis2_sb_json_str(sb, f->name, strlen(f->name));
        cis2_sb_printf(
            sb, ",\"status\":\"%s\",\"receipt\":", (unsigned)f->status < 3 ? st[f->status] : "?");
        cis2_sb_json_str(sb, f->receipt, strlen(f->receipt));
        cis2_sb_str(sb, ",\"recomputed\":");
        cis2_sb_json_str(sb, f->recomputed, strlen(f->recomputed));
        cis2_sb_put(sb, "}", 1);
    }
    cis2_sb_str(sb, "]}");
}
