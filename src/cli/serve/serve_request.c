/* The request parser of `cis2 serve`: an OpenAI /v1/completions or
 * /v1/chat/completions body (or a /v1/verify body) into a validated struct,
 * strictly. Every refusal is one line naming the parameter, as an OpenAI-style
 * error (status, type, param, code). Greedy (§11.2) unless temperature is
 * above 0; then docs/sampling.md's sampler, read as `cis2 run`'s flags. Fuzzed by
 * fuzz/fuzz_serve_request.c. */
#include "cli/serve.h"
#include "core/json.h"
#include "engine/sample.h"
#include <unistd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int serve_fail(serve_err *e, int status, const char *param, const char *code, const char *fmt, ...)
{
    e->status = status;
    e->type = status >= 500   ? "server_error"
              : status == 401 ? "authentication_error"
                              : "invalid_request_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    for (char *p = e->message; *p; p++) /* one line, whatever a client sent */
        if (*p == '\n' || *p == '\r') *p = ' ';
    return 1;
}

/* A client-supplied name, printable and short, for an error message. */
static void printable(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = c >= 0x20 && c < 0x7F ? (char)c : '?';
    }
    if (n > 0 && o + 4 >= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
}

/* A JSON value's type with its article, for "got %s": "an object", never "a object". */
static const char *type_name(const json_doc *d, uint32_t v)
{
    static const char *const names[] = { "null",     "a boolean", "a boolean", "a number",
                                         "a string", "an array",  "an object" };
    return names[d->nodes[v].type];
}

static int is_null(const json_doc *d, uint32_t v)
{
    return v == JSON_NONE || d->nodes[v].type == JSON_NULL;
}

/* An optional boolean: absent/null leaves *out. */
static int get_bool(const json_doc *d, uint32_t v, const char *name, int *out, serve_err *e)
{
    if (is_null(d, v)) return 0;
    if (d->nodes[v].type != JSON_TRUE && d->nodes[v].type != JSON_FALSE)
        return serve_fail(e, 400, name, NULL, "%s: expected a boolean, got %s", name,
                          type_name(d, v));
    *out = d->nodes[v].type == JSON_TRUE;
    return 0;
}

/* An optional number that must equal `want` (the greedy value), when given. */
static int want_number(const json_doc *d, uint32_t v, const char *name, double want,
                       const char *why, serve_err *e)
{
    if (is_null(d, v)) return 0;
    double x;
    if (d->nodes[v].type != JSON_NUMBER || json_num_f64(d, v, &x))
        return serve_fail(e, 400, name, NULL, "%s: expected a number, got %s", name,
                          type_name(d, v));
    if (x != want)
        return serve_fail(e, 400, name, NULL, "%s: only %g is supported (%s)", name, want, why);
    return 0;
}

/* Every integer parameter is read here, so that all take the same numbers:
 * an integral value however it is written (16, 16.0, 1.6e1), as the pydantic
 * models of OpenAI-compatible servers do (an int field takes a float with no
 * fractional part), decided exactly on the number's text (json_num_int), never
 * through a double; 1.5, "16" or true is refused. Messages quote the number's
 * own text, never the body after it. out NULL: the value is never read (seed),
 * so any integer is taken, also one beyond int64; else it must lie in
 * [lo, hi], and note (or NULL) says what that range is. */
static int get_int(const json_doc *d, uint32_t v, const char *param, const char *name, int64_t lo,
                   int64_t hi, const char *note, int64_t *out, serve_err *e)
{
    if (d->nodes[v].type != JSON_NUMBER)
        return serve_fail(e, 400, param, NULL, "%s: expected an integer, got %s", name,
                          type_name(d, v));
    int64_t x = 0;
    int rc = json_num_int(d, v, &x);
    uint32_t n = d->nodes[v].len;
    int shown = (int)(n > 40 ? 40 : n);
    const char *text = d->src + d->nodes[v].start, *more = n > 40 ? "..." : "";
    if (rc == JSON_NUM_NOT_INT)
        return serve_fail(e, 400, param, NULL, "%s: expected an integer, got %.*s%s", name, shown,
                          text, more);
    if (!out) return 0;
    if (rc == JSON_NUM_RANGE || x < lo || x > hi)
        return serve_fail(e, 400, param, NULL, "%s: %.*s%s is outside [%lld, %lld]%s%s", name,
                          shown, text, more, (long long)lo, (long long)hi, note ? " " : "",
                          note ? note : "");
    *out = x;
    return 0;
}

/* An optional integer that must equal `want` (n, best_of: one completion). */
static int want_int(const json_doc *d, uint32_t v, const char *name, int64_t want, const char *why,
                    serve_err *e)
{
    int64_t x = 0;
    if (is_null(d, v)) return 0;
    if (get_int(d, v, name, name, INT64_MIN, INT64_MAX, NULL, &x, e)) return 1;
    if (x != want)
        return serve_fail(e, 400, name, NULL, "%s: only %lld is supported (%s)", name,
                          (long long)want, why);
    return 0;
}

/* An array of token ids, each in [0, vocab). */
static int get_ids(const json_doc *d, uint32_t arr, const serve_limits *lim,
                   serve_completion_req *r, serve_err *e)
{
    uint32_t n = d->nodes[arr].count;
    if (n == 0) return serve_fail(e, 400, "prompt", NULL, "prompt: the token-id array is empty");
    if (n > (uint32_t)lim->ctx)
        return serve_fail(e, 400, "prompt", "context_length_exceeded",
                          "prompt: %u token ids exceed this server's context of %d positions", n,
                          lim->ctx);
    r->ids = malloc((size_t)n * sizeof *r->ids);
    if (!r->ids) return serve_fail(e, 500, NULL, NULL, "out of memory");
    int k = 0;
    for (uint32_t c = d->nodes[arr].first; c != JSON_NONE; c = d->nodes[c].next) {
        int64_t x;
        char name[32];
        snprintf(name, sizeof name, "prompt[%d]", k);
        if (get_int(d, c, "prompt", name, 0, lim->vocab - 1, "(a token id of the vocabulary)", &x,
                    e))
            return 1;
        r->ids[k++] = (int32_t)x;
    }
    r->n_ids = k;
    return 0;
}

/* prompt: a string, an array of token ids, or a one-element array of either. */
static int get_prompt(const json_doc *d, uint32_t v, const serve_limits *lim,
                      serve_completion_req *r, serve_err *e)
{
    if (is_null(d, v)) return serve_fail(e, 400, "prompt", NULL, "prompt: required");
    if (d->nodes[v].type == JSON_ARRAY && d->nodes[v].count >= 1) {
        uint32_t c = d->nodes[v].first;
        int t = d->nodes[c].type;
        if (t == JSON_STRING || t == JSON_ARRAY) {
            if (d->nodes[v].count != 1)
                return serve_fail(e, 400, "prompt", NULL,
                                  "prompt: %u prompts given; this server completes one prompt "
                                  "per request",
                                  d->nodes[v].count);
            v = c; /* ["text"] or [[ids]] */
        }
    }
    if (d->nodes[v].type == JSON_STRING) {
        r->prompt = json_str_dup(d, v, &r->prompt_len);
        if (!r->prompt) return serve_fail(e, 500, NULL, NULL, "out of memory");
        if (r->prompt_len == 0) return serve_fail(e, 400, "prompt", NULL, "prompt: empty");
        if (memchr(r->prompt, 0, r->prompt_len))
            return serve_fail(e, 400, "prompt", NULL, "prompt: contains a NUL character");
        return 0;
    }
    if (d->nodes[v].type == JSON_ARRAY) return get_ids(d, v, lim, r, e);
    return serve_fail(e, 400, "prompt", NULL,
                      "prompt: expected a string or an array of token ids, got %s",
                      type_name(d, v));
}

/* messages: OpenAI-style turns, read by the library's own parser
 * (cis2_chat_parse_messages: system/user/assistant, string content), the same
 * one `cis2 run --chat` uses, so both refuse and accept alike. */
static int get_messages(const json_doc *d, uint32_t v, serve_completion_req *r, serve_err *e)
{
    if (is_null(d, v)) return serve_fail(e, 400, "messages", NULL, "messages: required");
    if (d->nodes[v].type != JSON_ARRAY)
        return serve_fail(e, 400, "messages", NULL,
                          "messages: expected an array of messages, got %s", type_name(d, v));
    char err[CIS2_ERR_LEN];
    if (cis2_chat_parse_messages(d->src + d->nodes[v].start, d->nodes[v].len, "request body",
                                 &r->msgs, &r->n_msgs, err))
        return serve_fail(e, 400, "messages", NULL, "%s", err);
    return 0;
}

/* stop: null, a string or up to 4 strings, each non-empty and at most 256 bytes. */
static int get_stop(const json_doc *d, uint32_t v, serve_completion_req *r, serve_err *e)
{
    if (is_null(d, v)) return 0;
    uint32_t first = v, n = 1;
    if (d->nodes[v].type == JSON_ARRAY) {
        first = d->nodes[v].first;
        n = d->nodes[v].count;
        if (n > SERVE_MAX_STOP)
            return serve_fail(e, 400, "stop", NULL, "stop: %u sequences given, at most %d", n,
                              SERVE_MAX_STOP);
    } else if (d->nodes[v].type != JSON_STRING) {
        return serve_fail(e, 400, "stop", NULL,
                          "stop: expected a string or an array of strings, got %s",
                          type_name(d, v));
    }
    for (uint32_t c = first; n > 0 && c != JSON_NONE; c = d->nodes[c].next) {
        if (d->nodes[c].type != JSON_STRING)
            return serve_fail(e, 400, "stop", NULL, "stop[%d]: expected a string, got %s",
                              r->n_stop, type_name(d, c));
        size_t l = json_str_len(d, c);
        if (l == 0 || l > SERVE_MAX_STOP_LEN)
            return serve_fail(e, 400, "stop", NULL, "stop[%d]: %zu bytes (must be 1 to %d)",
                              r->n_stop, l, SERVE_MAX_STOP_LEN);
        r->stop[r->n_stop] = json_str_dup(d, c, &r->stop_len[r->n_stop]);
        if (!r->stop[r->n_stop]) return serve_fail(e, 500, NULL, NULL, "out of memory");
        r->n_stop++;
        if (c == v) break; /* a single string */
    }
    return 0;
}

/* A JSON number's own text, for the sampler's reading of it (docs/sampling.md
 * §1: the binary32 nearest the decimal, as `cis2 run --temperature` reads it). */
static int num_text(const json_doc *d, uint32_t v, char *buf, size_t cap)
{
    if (d->nodes[v].type != JSON_NUMBER || d->nodes[v].len >= cap) return 1;
    memcpy(buf, d->src + d->nodes[v].start, d->nodes[v].len);
    buf[d->nodes[v].len] = 0;
    return 0;
}

/* top_p or min_p: a number in [0, 1], 0 or a normal binary32; under greedy
 * decoding only its "off" value. */
static int get_unit(const json_doc *d, const char *name, int sampled, float off, float *out,
                    serve_err *e)
{
    uint32_t v = json_get(d, 0, name, NULL);
    if (is_null(d, v)) return 0;
    char t[72], shown[48];
    if (d->nodes[v].type != JSON_NUMBER)
        return serve_fail(e, 400, name, NULL, "%s: expected a number, got %s", name,
                          type_name(d, v));
    printable(d->src + d->nodes[v].start, d->nodes[v].len, shown, sizeof shown);
    float f;
    if (num_text(d, v, t, sizeof t) || smp_parse_num(t, &f) || f > 1.0f ||
        (f != 0.0f && (cis2_f2u(f) & 0x7F800000u) == 0))
        return serve_fail(e, 400, name, NULL,
                          "%s: %s is outside [0, 1] (0 or a normal binary32 number, "
                          "docs/sampling.md §1)",
                          name, shown);
    if (!sampled && f != off)
        return serve_fail(e, 400, name, NULL,
                          "%s: %s needs temperature above 0 (temperature 0, the default here, is "
                          "the greedy argmax of §11.2; %s %g is off)",
                          name, shown, name, (double)off);
    *out = f;
    return 0;
}

/* temperature, top_p, top_k, min_p, seed and n (docs/serve.md, Sampling),
 * read as `cis2 run`'s flags are (docs/sampling.md §1). temperature 0 or
 * absent is greedy, as this server always was (OpenAI's default is 1); the
 * other parameters then take only their "off" values, and seed is accepted
 * and never read. A sampled request without a seed gets one here, from the
 * system's randomness, below 2^53 so that every JSON reader (JavaScript's
 * numbers included) reads it back exactly. */
static int get_sampling(const json_doc *d, serve_completion_req *r, serve_err *e)
{
    cis2_sampler *s = &r->smp;
    char t[72], shown[48], ce[CIS2_ERR_LEN];
    int64_t x;
    memset(s, 0, sizeof *s);
    s->top_p = 1.0f;
    uint32_t v = json_get(d, 0, "temperature", NULL);
    if (!is_null(d, v)) {
        if (d->nodes[v].type != JSON_NUMBER)
            return serve_fail(e, 400, "temperature", NULL, "temperature: expected a number, got %s",
                              type_name(d, v));
        printable(d->src + d->nodes[v].start, d->nodes[v].len, shown, sizeof shown);
        if (num_text(d, v, t, sizeof t) || smp_parse_num(t, &s->temperature) ||
            cis2_sampler_check(s, ce))
            return serve_fail(e, 400, "temperature", NULL,
                              "temperature: %s is not 0 or a normal binary32 number above 0 "
                              "(docs/sampling.md §1)",
                              shown);
    }
    const int sampled = s->temperature > 0.0f;
    if (get_unit(d, "top_p", sampled, 1.0f, &s->top_p, e) ||
        get_unit(d, "min_p", sampled, 0.0f, &s->min_p, e))
        return 1;
    v = json_get(d, 0, "top_k", NULL); /* vLLM's -1 and llama.cpp's 0 both mean off */
    if (!is_null(d, v)) {
        if (get_int(d, v, "top_k", "top_k", -1, 2147483647, "(-1 or 0 = off)", &x, e)) return 1;
        if (!sampled && x > 0)
            return serve_fail(e, 400, "top_k", NULL,
                              "top_k: %lld needs temperature above 0 (temperature 0, the "
                              "default here, is the greedy argmax of §11.2; top_k 0 is off)",
                              (long long)x);
        s->top_k = x > 0 ? (int)x : 0;
    }
    r->n = 1;
    v = json_get(d, 0, "n", NULL);
    if (!is_null(d, v)) {
        if (get_int(d, v, "n", "n", 1, SERVE_MAX_N, "(choices per request)", &x, e)) return 1;
        r->n = (int)x;
    }
    v = json_get(d, 0, "seed", NULL);
    if (!is_null(d, v)) { /* any integer, also one beyond int64 (clients draw 64-bit seeds) */
        if (get_int(d, v, "seed", "seed", 0, 0, NULL, NULL, e)) return 1;
        if (sampled) {
            printable(d->src + d->nodes[v].start, d->nodes[v].len, shown, sizeof shown);
            if (json_num_int(d, v, &x) == 0 && x >= 0) s->seed = (uint64_t)x;
            else if (num_text(d, v, t, sizeof t) || smp_parse_seed(t, &s->seed))
                return serve_fail(e, 400, "seed", NULL,
                                  "seed: %s is outside [0, 18446744073709551615] (a sampled "
                                  "request's seed, docs/sampling.md §1)",
                                  shown);
            r->seed_given = 1;
        }
    }
    if (sampled && !r->seed_given) {
        if (getentropy(&s->seed, sizeof s->seed) != 0)
            return serve_fail(e, 500, "seed", NULL,
                              "seed: not given, and the system gave no randomness to choose "
                              "one; give a seed");
        s->seed &= (1ull << 53) - 1;
    }
    return 0;
}

/* logprobs: completions take a count (the legacy API: the chosen token's
 * log-probability and that many alternatives), chat a boolean with
 * top_logprobs beside it. Both at most SERVE_MAX_LOGPROBS alternatives. */
static int get_logprobs(const json_doc *d, int chat, serve_completion_req *r, serve_err *e)
{
    int64_t x;
    uint32_t v = json_get(d, 0, "logprobs", NULL);
    if (chat) {
        if (get_bool(d, v, "logprobs", &r->logprobs, e)) return 1;
        uint32_t t = json_get(d, 0, "top_logprobs", NULL);
        if (is_null(d, t)) return 0;
        if (get_int(d, t, "top_logprobs", "top_logprobs", 0, SERVE_MAX_LOGPROBS, NULL, &x, e))
            return 1;
        if (!r->logprobs)
            return serve_fail(e, 400, "top_logprobs", NULL,
                              "top_logprobs: needs \"logprobs\": true");
        r->top_logprobs = (int)x;
        return 0;
    }
    if (is_null(d, v)) return 0;
    if (get_int(d, v, "logprobs", "logprobs", 0, SERVE_MAX_LOGPROBS, NULL, &x, e)) return 1;
    r->logprobs = 1;
    r->top_logprobs = (int)x;
    return 0;
}

/* The members each endpoint knows; anything else is refused by name. */
static const char *const KNOWN_COMPLETION[] = { "model",
                                                "prompt",
                                                "max_tokens",
                                                "temperature",
                                                "top_p",
                                                "top_k",
                                                "min_p",
                                                "n",
                                                "best_of",
                                                "stream",
                                                "stream_options",
                                                "stop",
                                                "echo",
                                                "logprobs",
                                                "presence_penalty",
                                                "frequency_penalty",
                                                "logit_bias",
                                                "suffix",
                                                "seed",
                                                "user",
                                                "ignore_eos",
                                                NULL };
static const char *const KNOWN_CHAT[] = { "model",
                                          "messages",
                                          "max_tokens",
                                          "max_completion_tokens",
                                          "temperature",
                                          "top_p",
                                          "top_k",
                                          "min_p",
                                          "n",
                                          "stream",
                                          "stream_options",
                                          "stop",
                                          "logprobs",
                                          "top_logprobs",
                                          "presence_penalty",
                                          "frequency_penalty",
                                          "logit_bias",
                                          "seed",
                                          "user",
                                          "ignore_eos",
                                          "chat_template_kwargs",
                                          NULL };

static int check_members(const json_doc *d, const char *const *known_names, serve_err *e)
{
    for (uint32_t k = d->nodes[0].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next) {
        size_t l;
        char *key = json_str_dup(d, k, &l);
        if (!key) return serve_fail(e, 500, NULL, NULL, "out of memory");
        int known = 0, dups = 0;
        for (size_t i = 0; known_names[i] && !known; i++)
            known = strlen(known_names[i]) == l && memcmp(known_names[i], key, l) == 0;
        char shown[48];
        printable(key, l, shown, sizeof shown);
        if (known) json_get(d, 0, key, &dups);
        free(key);
        if (!known)
            return serve_fail(e, 400, shown, NULL, "Unrecognized request argument supplied: %s",
                              shown);
        if (dups > 1) return serve_fail(e, 400, shown, NULL, "%s: given more than once", shown);
    }
    return 0;
}

static int parse_request(const char *body, size_t len, const serve_limits *lim, int chat,
                         serve_completion_req *r, serve_err *e)
{
    memset(r, 0, sizeof *r);
    r->max_tokens = chat ? 0 : SERVE_MAX_TOKENS_DEFAULT;
    r->max_param = chat ? NULL : "max_tokens"; /* chat's default is the rest of the context */
    json_doc d;
    char err[CIS2_ERR_LEN];
    if (json_parse(&d, body, len, "request body", err))
        return serve_fail(e, 400, NULL, NULL, "%s", err);
    int rc = 1;
    if (d.nodes[0].type != JSON_OBJECT) {
        serve_fail(e, 400, NULL, NULL, "request body: expected a JSON object, got %s",
                   type_name(&d, 0));
        goto out;
    }
    if (check_members(&d, chat ? KNOWN_CHAT : KNOWN_COMPLETION, e)) goto out;
    uint32_t v = json_get(&d, 0, "model", NULL);
    if (is_null(&d, v)) {
        serve_fail(e, 400, "model", NULL, "model: required (this server serves '%s')",
                   lim->model_id);
        goto out;
    }
    if (d.nodes[v].type != JSON_STRING) {
        serve_fail(e, 400, "model", NULL, "model: expected a string, got %s", type_name(&d, v));
        goto out;
    }
    if (!json_str_eq(&d, v, lim->model_id)) {
        char shown[48];
        printable(d.src + d.nodes[v].start, d.nodes[v].len, shown, sizeof shown);
        serve_fail(e, 404, "model", "model_not_found",
                   "model: '%s' is not served here (this server serves '%s')", shown,
                   lim->model_id);
        goto out;
    }
    if (chat ? get_messages(&d, json_get(&d, 0, "messages", NULL), r, e)
             : get_prompt(&d, json_get(&d, 0, "prompt", NULL), lim, r, e))
        goto out;
    int64_t x;
    v = json_get(&d, 0, "max_tokens", NULL);
    if (!is_null(&d, v)) {
        if (get_int(&d, v, "max_tokens", "max_tokens", 1, lim->ctx, NULL, &x, e)) goto out;
        r->max_tokens = (int)x;
        r->max_param = "max_tokens";
    }
    v = json_get(&d, 0, "max_completion_tokens", NULL); /* chat's newer name for it */
    int mct = 0;
    if (!is_null(&d, v)) {
        if (get_int(&d, v, "max_completion_tokens", "max_completion_tokens", 1, lim->ctx, NULL, &x,
                    e))
            goto out;
        mct = (int)x;
        if (r->max_tokens && r->max_tokens != mct) {
            serve_fail(e, 400, "max_completion_tokens", NULL,
                       "max_completion_tokens: %d, but max_tokens is %d (give one of them)", mct,
                       r->max_tokens);
            goto out;
        }
        if (!r->max_param) r->max_param = "max_completion_tokens";
        r->max_tokens = mct;
    }
    if (get_sampling(&d, r, e)) goto out;
    if (want_int(&d, json_get(&d, 0, "best_of", NULL), "best_of", 1,
                 "n choices are sampled, none "
                 "is picked from more",
                 e) ||
        want_number(&d, json_get(&d, 0, "presence_penalty", NULL), "presence_penalty", 0,
                    "docs/sampling.md has no penalties", e) ||
        want_number(&d, json_get(&d, 0, "frequency_penalty", NULL), "frequency_penalty", 0,
                    "docs/sampling.md has no penalties", e))
        goto out;
    if (get_bool(&d, json_get(&d, 0, "stream", NULL), "stream", &r->stream, e) ||
        get_bool(&d, json_get(&d, 0, "ignore_eos", NULL), "ignore_eos", &r->ignore_eos, e))
        goto out;
    int echo = 0;
    if (get_bool(&d, json_get(&d, 0, "echo", NULL), "echo", &echo, e)) goto out;
    if (echo) {
        serve_fail(e, 400, "echo", NULL, "echo: only false is supported");
        goto out;
    }
    v = json_get(&d, 0, "stream_options", NULL);
    if (!is_null(&d, v)) {
        if (d.nodes[v].type != JSON_OBJECT) {
            serve_fail(e, 400, "stream_options", NULL, "stream_options: expected an object, got %s",
                       type_name(&d, v));
            goto out;
        }
        /* include_obfuscation asks OpenAI for (or, false, to spare) a padding
         * field in each chunk; this server never adds one, so either is fine. */
        static const char *const opts[] = { "include_usage", "include_obfuscation" };
        for (uint32_t k = d.nodes[v].first; k != JSON_NONE; k = d.nodes[d.nodes[k].next].next)
            if (!json_str_eq(&d, k, opts[0]) && !json_str_eq(&d, k, opts[1])) {
                serve_fail(e, 400, "stream_options", NULL,
                           "stream_options: only include_usage and include_obfuscation are "
                           "supported");
                goto out;
            }
        int ignored = 0;
        for (int i = 0; i < 2; i++) {
            char name[48];
            int dups = 0;
            uint32_t o = json_get(&d, v, opts[i], &dups);
            snprintf(name, sizeof name, "stream_options.%s", opts[i]);
            if (dups > 1) {
                serve_fail(e, 400, "stream_options", NULL, "%s: given more than once", name);
                goto out;
            }
            if (get_bool(&d, o, name, i ? &ignored : &r->include_usage, e)) goto out;
        }
        /* It shapes a stream only; taken without one, the usage chunk the
         * client asked for would silently never come (OpenAI refuses it too). */
        if (!r->stream) {
            serve_fail(e, 400, "stream_options", NULL,
                       "stream_options: only allowed with \"stream\": true");
            goto out;
        }
    }
    if (get_stop(&d, json_get(&d, 0, "stop", NULL), r, e)) goto out;
    if (get_logprobs(&d, chat, r, e)) goto out;
    /* chat_template_kwargs (vLLM's name): further template variables, kept as
     * the object's text for cis2_chat_render_opts (docs/chat_templates.md) */
    v = chat ? json_get(&d, 0, "chat_template_kwargs", NULL) : JSON_NONE;
    if (!is_null(&d, v)) {
        if (d.nodes[v].type != JSON_OBJECT) {
            serve_fail(e, 400, "chat_template_kwargs", NULL,
                       "chat_template_kwargs: expected an object, got %s", type_name(&d, v));
            goto out;
        }
        r->chat_kwargs_len = d.nodes[v].len;
        r->chat_kwargs = malloc(r->chat_kwargs_len + 1);
        if (!r->chat_kwargs) {
            serve_fail(e, 500, NULL, NULL, "out of memory");
            goto out;
        }
        memcpy(r->chat_kwargs, d.src + d.nodes[v].start, r->chat_kwargs_len);
        r->chat_kwargs[r->chat_kwargs_len] = 0;
    }
    v = json_get(&d, 0, "logit_bias", NULL);
    if (!is_null(&d, v) && (d.nodes[v].type != JSON_OBJECT || d.nodes[v].count != 0)) {
        serve_fail(e, 400, "logit_bias", NULL, "logit_bias: not supported (only null or {})");
        goto out;
    }
    v = json_get(&d, 0, "suffix", NULL);
    if (!is_null(&d, v) && (d.nodes[v].type != JSON_STRING || d.nodes[v].len != 0)) {
        serve_fail(e, 400, "suffix", NULL, "suffix: not supported (only null or \"\")");
        goto out;
    }
    v = json_get(&d, 0, "user", NULL);
    if (!is_null(&d, v) && d.nodes[v].type != JSON_STRING) {
        serve_fail(e, 400, "user", NULL, "user: expected a string, got %s", type_name(&d, v));
        goto out;
    }
    if (r->ids && serve_check_context(r->n_ids, r->max_tokens, r->max_param, "prompt", lim, e))
        goto out;
    rc = 0;
out:
    json_free(&d);
    if (rc) serve_completion_req_free(r);
    return rc;
}

int serve_parse_completion(const char *body, size_t len, const serve_limits *lim,
                           serve_completion_req *r, serve_err *e)
{
    return parse_request(body, len, lim, 0, r, e);
}

int serve_parse_chat(const char *body, size_t len, const serve_limits *lim, serve_completion_req *r,
                     serve_err *e)
{
    return parse_request(body, len, lim, 1, r, e);
}

int serve_check_context(int n_prompt, int max_tokens, const char *max_param,
                        const char *prompt_param, const serve_limits *lim, serve_err *e)
{
    /* §3.4: positions 0 .. n_prompt + n_gen - 2 are computed (the last pick is never fed). */
    long need = (long)n_prompt + max_tokens - 1;
    if (need <= lim->ctx) return 0;
    if (!max_param) /* no max_tokens given: only the prompt can be at fault */
        return serve_fail(e, 400, prompt_param, "context_length_exceeded",
                          "%s: the prompt (%d tokens) is longer than this server's context of %d "
                          "positions",
                          prompt_param, n_prompt, lim->ctx);
    return serve_fail(e, 400, n_prompt > lim->ctx ? prompt_param : max_param,
                      "context_length_exceeded",
                      "the prompt (%d tokens) and %s (%d) need %ld positions; this server's "
                      "context is %d",
                      n_prompt, max_param, max_tokens, need, lim->ctx);
}

void serve_completion_req_free(serve_completion_req *r)
{
    free(r->prompt);
    free(r->ids);
    cis2_free(r->msgs);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->chat_kwargs);
    memset(r, 0, sizeof *r);
}

int serve_parse_verify(const char *body, size_t len, char **text, size_t *tlen, serve_err *e)
{
    *text = NULL;
    *tlen = 0;
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
        i++;
    if (i == len) return serve_fail(e, 400, "receipt", NULL, "receipt: the body is empty");
    if (body[i] != '{') { /* the receipt text itself */
        *text = malloc(len + 1);
        if (!*text) return serve_fail(e, 500, NULL, NULL, "out of memory");
        memcpy(*text, body, len);
        (*text)[len] = 0;
        *tlen = len;
        return 0;
    }
    json_doc d;
    char err[CIS2_ERR_LEN];
    if (json_parse(&d, body, len, "request body", err))
        return serve_fail(e, 400, NULL, NULL, "%s", err);
    int rc = 1, dups = 0;
    uint32_t v = json_get(&d, 0, "receipt", &dups);
    if (d.nodes[0].count != 1 || dups != 1)
        serve_fail(e, 400, "receipt", NULL,
                   "request body: expected exactly one member, \"receipt\" (the receipt text)");
    else if (d.nodes[v].type != JSON_STRING)
        serve_fail(e, 400, "receipt", NULL, "receipt: expected a string, got %s", type_name(&d, v));
    else if (!(*text = json_str_dup(&d, v, tlen))) serve_fail(e, 500, NULL, NULL, "out of memory");
    else rc = 0;
    json_free(&d);
    return rc;
}
