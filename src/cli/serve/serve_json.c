/* The JSON `cis2 serve` sends: OpenAI-shaped error objects, text_completion
 * and chat.completion objects and their stream chunks, the model list, and
 * the cis2 extensions (a completion's ids, digests and receipt; a receipt's
 * field-by-field verdict).
 * Strings go through cis2_sb_json_str, so nothing a client sent or a model
 * generated can break the JSON. */
#include "cli/serve.h"
#include "engine/sample.h"
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
                    const char *prompt_bytes, size_t prompt_len, const cis2_sampler *smp)
{
    if (smp && smp->temperature == 0.0f) smp = NULL; /* greedy: today's object, byte for byte */
    const cis2_digests *dg = cis2_model_digests(mi->m);
    cis2_receipt rc;
    cis2_receipt_from_run(&rc, mi->m, r, (const uint8_t *)prompt_bytes, prompt_len);
    char *text = NULL;
    size_t tl = 0;
    if (cis2_receipt_format_sampled(&rc, smp, &text, &tl)) return 1;
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
    if (smp) { /* docs/sampling.md §6: what the receipt's sampler and seed lines say */
        char t[32], p[32], m[32];
        smp_format_num(smp->temperature, t, sizeof t);
        smp_format_num(smp->top_p, p, sizeof p);
        smp_format_num(smp->min_p, m, sizeof m);
        cis2_sb_printf(sb,
                       ",\"sampler\":{\"temperature\":%s,\"top_k\":%d,\"top_p\":%s,\"min_p\":%s},"
                       "\"seed\":%llu",
                       t, smp->top_k, p, m, (unsigned long long)smp->seed);
    }
    cis2_sb_str(sb, ",\"receipt\":");
    cis2_sb_json_str(sb, text, tl);
    cis2_sb_put(sb, "}", 1);
    free(text);
    return 0;
}

void serve_json_open(cis2_sb *sb, const char *id, const char *object, long long created,
                     const char *model_id, const uint64_t *seed)
{
    cis2_sb_printf(sb, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", id, object,
                   created);
    cis2_sb_json_str(sb, model_id, strlen(model_id));
    if (seed) cis2_sb_printf(sb, ",\"seed\":%llu", (unsigned long long)*seed);
    cis2_sb_str(sb, ",\"choices\":[");
}

static void choice_end(cis2_sb *sb, const char *logprobs, const char *finish_reason,
                       const char *extra)
{
    cis2_sb_str(sb, ",\"logprobs\":");
    cis2_sb_str(sb, logprobs ? logprobs : "null");
    cis2_sb_str(sb, ",\"finish_reason\":");
    if (finish_reason) cis2_sb_printf(sb, "\"%s\"", finish_reason);
    else cis2_sb_str(sb, "null");
    if (extra) cis2_sb_str(sb, extra);
    cis2_sb_put(sb, "}", 1);
}

void serve_json_completion_choice(cis2_sb *sb, int index, const char *text, size_t len,
                                  const char *logprobs, const char *finish_reason,
                                  const char *extra)
{
    cis2_sb_str(sb, "{\"text\":");
    cis2_sb_json_str(sb, text, len);
    cis2_sb_printf(sb, ",\"index\":%d", index);
    choice_end(sb, logprobs, finish_reason, extra);
}

void serve_json_chat_choice(cis2_sb *sb, int chunk, int index, int role, const char *text,
                            size_t len, const char *logprobs, const char *finish_reason,
                            const char *extra)
{
    cis2_sb_printf(sb, chunk ? "{\"index\":%d,\"delta\":{" : "{\"index\":%d,\"message\":{", index);
    if (role || !chunk) cis2_sb_str(sb, "\"role\":\"assistant\"");
    if (text || !chunk) {
        cis2_sb_str(sb, role || !chunk ? ",\"content\":" : "\"content\":");
        cis2_sb_json_str(sb, text ? text : "", text ? len : 0);
    }
    cis2_sb_put(sb, "}", 1);
    choice_end(sb, logprobs, finish_reason, extra);
}

void serve_json_completion_head(cis2_sb *sb, const char *id, long long created,
                                const char *model_id, const char *text, size_t len,
                                const char *finish_reason)
{
    serve_json_open(sb, id, "text_completion", created, model_id, NULL);
    serve_json_completion_choice(sb, 0, text, len, NULL, finish_reason, NULL);
    cis2_sb_put(sb, "]", 1);
}

void serve_json_chat_head(cis2_sb *sb, const char *id, long long created, const char *model_id,
                          int chunk, int role, const char *text, size_t len,
                          const char *finish_reason)
{
    serve_json_open(sb, id, chunk ? "chat.completion.chunk" : "chat.completion", created, model_id,
                    NULL);
    serve_json_chat_choice(sb, chunk, 0, role, text, len, NULL, finish_reason, NULL);
    cis2_sb_put(sb, "]", 1);
}

/* ------------------------------------------------------------ logprobs */
/* A log-probability as JSON: the shortest decimal that reads back to the same
 * binary32 (docs/sampling.md §6's rule), and -inf as -9999.0, as vLLM writes it
 * (JSON has no infinity). */
static void lp_num(cis2_sb *sb, float v)
{
    char b[32];
    if (cis2_f2u(v) == 0xFF800000u) {
        cis2_sb_str(sb, "-9999.0");
        return;
    }
    smp_format_num(v, b, sizeof b);
    cis2_sb_str(sb, b);
}

/* A token's bytes (none for an id tokenizer.json names no token for) and its
 * text: those bytes as UTF-8, each maximal invalid subpart U+FFFD. */
static int token_of(const cis2_tokenizer *t, int32_t id, char **b, size_t *bl, cis2_sb *text)
{
    char err[CIS2_ERR_LEN];
    *b = NULL;
    *bl = 0;
    int rc = t ? cis2_tokenizer_decode(t, &id, 1, b, bl, err) : 1;
    if (rc < 0) return 1;
    if (rc) *bl = 0;
    serve_detok d = { { 0 }, 0 };
    if (*bl) {
        serve_detok_feed(&d, t, id, text);
        serve_detok_feed(&d, t, -1, text);
    }
    return text->oom;
}

/* {"token", "logprob", "bytes"}: one entry of chat's logprobs.content. */
static int chat_entry(cis2_sb *sb, const cis2_tokenizer *t, int32_t id, float lp)
{
    char *b;
    size_t bl;
    cis2_sb text = { 0 };
    if (token_of(t, id, &b, &bl, &text)) {
        free(b);
        cis2_sb_free(&text);
        return 1;
    }
    cis2_sb_str(sb, "{\"token\":");
    cis2_sb_json_str(sb, text.b ? text.b : "", text.len);
    cis2_sb_str(sb, ",\"logprob\":");
    lp_num(sb, lp);
    cis2_sb_str(sb, ",\"bytes\":[");
    for (size_t i = 0; i < bl; i++) cis2_sb_printf(sb, i ? ",%u" : "%u", (unsigned char)b[i]);
    cis2_sb_put(sb, "]}", 2);
    free(b);
    cis2_sb_free(&text);
    return 0;
}

int serve_json_logprobs_chat(cis2_sb *sb, const cis2_tokenizer *t, const int32_t *ids,
                             const float *lp, const cis2_logprob *top, int k, int from, int to)
{
    cis2_sb_str(sb, "{\"content\":[");
    for (int i = from; i < to; i++) {
        if (i > from) cis2_sb_put(sb, ",", 1);
        if (chat_entry(sb, t, ids[i], lp[i]) || sb->oom) return 1;
        sb->len--; /* reopen the entry for its alternatives */
        cis2_sb_str(sb, ",\"top_logprobs\":[");
        for (int a = 0; a < k; a++) {
            const cis2_logprob *x = &top[(size_t)i * (size_t)k + (size_t)a];
            if (a) cis2_sb_put(sb, ",", 1);
            if (chat_entry(sb, t, x->id, x->logprob)) return 1;
        }
        cis2_sb_str(sb, "]}");
    }
    cis2_sb_str(sb, "],\"refusal\":null}");
    return sb->oom;
}

/* Code points in valid UTF-8 b[0..n): the bytes that are not continuation bytes. */
static size_t code_points(const char *b, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)b[i] & 0xC0) != 0x80;
    return c;
}

int serve_json_logprobs_legacy(cis2_sb *sb, const cis2_tokenizer *t, const int32_t *ids,
                               const float *lp, const cis2_logprob *top, int k, int from, int to,
                               serve_detok *dt, size_t *offset)
{
    cis2_sb tok = { 0 }, tlp = { 0 }, alt = { 0 }, off = { 0 };
    int bad = 0;
    for (int i = from; i < to && !bad; i++) {
        char *b;
        size_t bl;
        cis2_sb text = { 0 };
        bad = token_of(t, ids[i], &b, &bl, &text);
        if (i > from) {
            cis2_sb_put(&tok, ",", 1);
            cis2_sb_put(&tlp, ",", 1);
            cis2_sb_put(&alt, ",", 1);
            cis2_sb_put(&off, ",", 1);
        }
        cis2_sb_json_str(&tok, text.b ? text.b : "", text.len);
        lp_num(&tlp, lp[i]);
        cis2_sb_printf(&off, "%zu", *offset);
        cis2_sb piece = { 0 }; /* the text as the response has it: U+FFFD for what is invalid */
        if (t) serve_detok_feed(dt, t, ids[i], &piece);
        *offset += code_points(piece.b, piece.len);
        bad |= piece.oom;
        cis2_sb_free(&piece);
        free(b);
        cis2_sb_free(&text);
        /* {text: logprob}: an object, so a text two alternatives share (two
         * ids that decode alike) is there once, with the higher one's */
        char *seen[SERVE_MAX_LOGPROBS];
        size_t seen_len[SERVE_MAX_LOGPROBS];
        int n_seen = 0;
        cis2_sb_put(&alt, "{", 1);
        for (int a = 0; a < k && !bad && a < SERVE_MAX_LOGPROBS; a++) {
            const cis2_logprob *x = &top[(size_t)i * (size_t)k + (size_t)a];
            cis2_sb at = { 0 };
            char *ab;
            size_t abl;
            bad = token_of(t, x->id, &ab, &abl, &at);
            free(ab);
            int dup = 0;
            for (int q = 0; q < n_seen && !dup; q++)
                dup = seen_len[q] == at.len && (at.len == 0 || !memcmp(seen[q], at.b, at.len));
            if (!dup && !bad) {
                if (n_seen) cis2_sb_put(&alt, ",", 1);
                cis2_sb_json_str(&alt, at.b ? at.b : "", at.len);
                cis2_sb_put(&alt, ":", 1);
                lp_num(&alt, x->logprob);
                seen[n_seen] = at.b;
                seen_len[n_seen++] = at.len;
            } else {
                cis2_sb_free(&at);
            }
        }
        for (int q = 0; q < n_seen; q++) free(seen[q]);
        cis2_sb_put(&alt, "}", 1);
    }
    cis2_sb_str(sb, "{\"tokens\":[");
    if (tok.len) cis2_sb_put(sb, tok.b, tok.len);
    cis2_sb_str(sb, "],\"token_logprobs\":[");
    if (tlp.len) cis2_sb_put(sb, tlp.b, tlp.len);
    cis2_sb_str(sb, "],\"top_logprobs\":[");
    if (alt.len) cis2_sb_put(sb, alt.b, alt.len);
    cis2_sb_str(sb, "],\"text_offset\":[");
    if (off.len) cis2_sb_put(sb, off.b, off.len);
    cis2_sb_str(sb, "]}");
    bad |= tok.oom || tlp.oom || alt.oom || off.oom;
    cis2_sb_free(&tok);
    cis2_sb_free(&tlp);
    cis2_sb_free(&alt);
    cis2_sb_free(&off);
    return bad || sb->oom;
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
