/* The request parser of `cis2 serve` (src/cli/serve/serve_request.c) over arbitrary
 * bytes, as all three endpoint bodies: /v1/completions, /v1/chat/completions
 * and /v1/verify. An accepted completion request must be consistent (one
 * prompt form, ids in the vocabulary, max_tokens and the prompt within the
 * context, at most 4 stop strings of 1..256 bytes); an accepted chat request
 * holds only messages (system/user/assistant roles, NUL-terminated contents
 * of the stated length); a refusal must be one line with an HTTP status, and
 * its OpenAI-style error object must be valid JSON. The accepted prompt then
 * goes through the streaming text helpers as if it were generated text. */
#include "fuzz.h"
#include "cli/serve.h"
#include "core/json.h"

static void check_stops(const serve_completion_req *r)
{
    FUZZ_ASSERT(r->n_stop >= 0 && r->n_stop <= SERVE_MAX_STOP);
    for (int i = 0; i < r->n_stop; i++)
        FUZZ_ASSERT(r->stop_len[i] >= 1 && r->stop_len[i] <= SERVE_MAX_STOP_LEN);
}

static void check_refusal(const serve_err *e)
{
    fuzz_check_err(e->message);
    FUZZ_ASSERT(e->status == 400 || e->status == 404 || e->status == 500);
    FUZZ_ASSERT(strlen(e->param) < sizeof e->param);
    cis2_sb sb = { 0 };
    serve_json_error(&sb, e);
    json_doc d;
    char err[CIS2_ERR_LEN];
    FUZZ_ASSERT(!sb.oom);
    FUZZ_ASSERT(json_parse(&d, sb.b, sb.len, "error object", err) == 0);
    json_free(&d);
    cis2_sb_free(&sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const serve_limits lim = { "fx", 320, 64 };
    char *src = fuzz_dup(data, size);
    serve_completion_req r;
    serve_err e;
    memset(&e, 0, sizeof e);
    if (serve_parse_completion(src, size, &lim, &r, &e) == 0) {
        FUZZ_ASSERT(!r.prompt != !r.ids && !r.msgs);
        FUZZ_ASSERT(r.max_tokens >= 1 && r.max_tokens <= lim.ctx);
        check_stops(&r);
        if (r.ids) {
            FUZZ_ASSERT(r.n_ids >= 1 && r.n_ids + r.max_tokens - 1 <= lim.ctx);
            for (int i = 0; i < r.n_ids; i++) FUZZ_ASSERT(r.ids[i] >= 0 && r.ids[i] < lim.vocab);
        } else {
            FUZZ_ASSERT(r.prompt_len >= 1 && r.prompt[r.prompt_len] == '\0');
            FUZZ_ASSERT(memchr(r.prompt, 0, r.prompt_len) == NULL);
            serve_stops st = { (const char *const *)r.stop, r.stop_len, r.n_stop };
            long at = serve_stop_find(&st, r.prompt, r.prompt_len);
            size_t ok = serve_sendable(&st, r.prompt, r.prompt_len);
            FUZZ_ASSERT(ok <= r.prompt_len && (at < 0 || (size_t)at < r.prompt_len));
        }
        serve_completion_req_free(&r);
    } else {
        check_refusal(&e);
    }
    memset(&e, 0, sizeof e);
    if (serve_parse_chat(src, size, &lim, &r, &e) == 0) {
        FUZZ_ASSERT(r.msgs && r.n_msgs >= 1 && !r.prompt && !r.ids);
        FUZZ_ASSERT(r.max_tokens >= 0 && r.max_tokens <= lim.ctx); /* 0: the rest of the context */
        check_stops(&r);
        for (int i = 0; i < r.n_msgs; i++) {
            const cis2_chat_msg *m = &r.msgs[i];
            FUZZ_ASSERT(!strcmp(m->role, "system") || !strcmp(m->role, "user") ||
                        !strcmp(m->role, "assistant"));
            FUZZ_ASSERT(m->content && m->content[m->content_len] == '\0' && m->content_len < size);
        }
        serve_completion_req_free(&r);
    } else {
        FUZZ_ASSERT(r.msgs == NULL);
        check_refusal(&e);
    }
    char *text = NULL;
    size_t tl = 0;
    memset(&e, 0, sizeof e);
    if (serve_parse_verify(src, size, &text, &tl, &e) == 0) {
        FUZZ_ASSERT(text && tl <= size && text[tl] == '\0');
        free(text);
    } else {
        FUZZ_ASSERT(text == NULL);
        check_refusal(&e);
    }
    free(src);
    return 0;
}
