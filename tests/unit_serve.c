/* `cis2 serve` below the HTTP layer: the request parser (accepted bodies and
 * one-line refusals naming the parameter), stop strings and sendable text,
 * ids to text across split UTF-8 characters, cis2_seq_finish (a sequence cut
 * short equals the same prompt run alone for that many tokens), and the
 * scheduler: concurrent jobs of mixed lengths, stop strings, cancellation,
 * the busy answer and verification — every result bit-identical to a solo
 * cis2_generate of the same prompt; and the request deadline's guard. */
#include "unit.h"
#include "cli/serve.h"
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

static const serve_limits LIM = { "fx", 320, 64 };

/* ------------------------------------------------------------ parser */
typedef struct {
    const char *name, *body;
    int status;        /* 0: accepted */
    const char *param; /* expected param ("" = null) */
    const char *msg;   /* substring of the message */
} bad_case;

static void check_parser(void)
{
    static const bad_case cases[] = {
        { "not-json", "{", 400, "", "invalid JSON" },
        { "array-root", "[1]", 400, "", "expected a JSON object" },
        { "no-model", "{\"prompt\":\"a\"}", 400, "model", "required" },
        { "model-type", "{\"model\":1,\"prompt\":\"a\"}", 400, "model", "expected a string" },
        { "wrong-model", "{\"model\":\"gpt\",\"prompt\":\"a\"}", 404, "model", "not served" },
        { "no-prompt", "{\"model\":\"fx\"}", 400, "prompt", "required" },
        { "prompt-num", "{\"model\":\"fx\",\"prompt\":5}", 400, "prompt", "expected a string" },
        { "prompt-object", "{\"model\":\"fx\",\"prompt\":{}}", 400, "prompt", "got an object" },
        { "stream-array", "{\"model\":\"fx\",\"prompt\":\"a\",\"stream\":[]}", 400, "stream",
          "expected a boolean, got an array" },
        { "prompt-empty", "{\"model\":\"fx\",\"prompt\":\"\"}", 400, "prompt", "empty" },
        { "prompt-nul", "{\"model\":\"fx\",\"prompt\":\"a\\u0000b\"}", 400, "prompt", "NUL" },
        { "ids-empty", "{\"model\":\"fx\",\"prompt\":[]}", 400, "prompt", "empty" },
        { "ids-vocab", "{\"model\":\"fx\",\"prompt\":[1,320]}", 400, "prompt", "vocabulary" },
        { "ids-neg", "{\"model\":\"fx\",\"prompt\":[-1]}", 400, "prompt", "vocabulary" },
        { "ids-float", "{\"model\":\"fx\",\"prompt\":[1.5]}", 400, "prompt", "integer" },
        { "two-prompts", "{\"model\":\"fx\",\"prompt\":[\"a\",\"b\"]}", 400, "prompt",
          "one prompt" },
        { "max-0", "{\"model\":\"fx\",\"prompt\":\"a\",\"max_tokens\":0}", 400, "max_tokens",
          "outside" },
        { "max-str", "{\"model\":\"fx\",\"prompt\":\"a\",\"max_tokens\":\"4\"}", 400, "max_tokens",
          "integer" },
        { "max-frac", "{\"model\":\"fx\",\"prompt\":\"a\",\"max_tokens\":4.5}", 400, "max_tokens",
          "max_tokens: expected an integer, got 4.5" },
        { "max-huge", "{\"model\":\"fx\",\"prompt\":\"a\",\"max_tokens\":1e400}", 400, "max_tokens",
          "max_tokens: 1e400 is outside [1, 64]" },
        { "max-int64-max", "{\"model\":\"fx\",\"prompt\":\"a\",\"max_tokens\":9223372036854775807}",
          400, "max_tokens", "max_tokens: 9223372036854775807 is outside [1, 64]" },
        { "max-tiny-exp", "{\"model\":\"fx\",\"prompt\":\"a\",\"max_tokens\":1e-3}", 400,
          "max_tokens", "max_tokens: expected an integer, got 1e-3" },
        { "n-frac", "{\"model\":\"fx\",\"prompt\":\"a\",\"n\":1.5}", 400, "n",
          "n: expected an integer, got 1.5" },
        { "n-huge", "{\"model\":\"fx\",\"prompt\":\"a\",\"n\":1e19}", 400, "n", "outside" },
        { "best-of-frac", "{\"model\":\"fx\",\"prompt\":\"a\",\"best_of\":1.25}", 400, "best_of",
          "best_of: expected an integer, got 1.25" },
        { "ids-frac-quoted", "{\"model\":\"fx\",\"prompt\":[1,2.5]}", 400, "prompt",
          "prompt[1]: expected an integer, got 2.5" },
        { "ids-str", "{\"model\":\"fx\",\"prompt\":[1,\"2\"]}", 400, "prompt",
          "prompt[1]: expected an integer, got a string" },
        { "ids-huge", "{\"model\":\"fx\",\"prompt\":[1,1e30]}", 400, "prompt",
          "prompt[1]: 1e30 is outside [0, 319]" },
        { "logprobs-frac", "{\"model\":\"fx\",\"prompt\":\"a\",\"logprobs\":1.5}", 400, "logprobs",
          "logprobs: expected an integer, got 1.5" },
        { "context", "{\"model\":\"fx\",\"prompt\":[1,2,3],\"max_tokens\":63}", 400, "max_tokens",
          "context" },
        { "temperature", "{\"model\":\"fx\",\"prompt\":\"a\",\"temperature\":-0.7}", 400,
          "temperature", "temperature: -0.7 is not 0 or a normal binary32 number above 0" },
        { "temperature-subnormal", "{\"model\":\"fx\",\"prompt\":\"a\",\"temperature\":1e-40}", 400,
          "temperature", "is not 0 or a normal" },
        { "top-p-range", "{\"model\":\"fx\",\"prompt\":\"a\",\"temperature\":1,\"top_p\":1.5}", 400,
          "top_p", "top_p: 1.5 is outside [0, 1]" },
        { "min-p-greedy", "{\"model\":\"fx\",\"prompt\":\"a\",\"min_p\":0.1}", 400, "min_p",
          "needs temperature above 0" },
        { "top-k-greedy", "{\"model\":\"fx\",\"prompt\":\"a\",\"top_k\":5}", 400, "top_k",
          "needs temperature above 0" },
        { "top-k-range", "{\"model\":\"fx\",\"prompt\":\"a\",\"temperature\":1,\"top_k\":-2}", 400,
          "top_k", "outside [-1, 2147483647]" },
        { "seed-negative-sampled",
          "{\"model\":\"fx\",\"prompt\":\"a\",\"temperature\":1,\"seed\":-1}", 400, "seed",
          "seed: -1 is outside [0, 18446744073709551615]" },
        { "n-17", "{\"model\":\"fx\",\"prompt\":\"a\",\"n\":17}", 400, "n",
          "n: 17 is outside [1, 16]" },
        { "temperature-str", "{\"model\":\"fx\",\"prompt\":\"a\",\"temperature\":\"0\"}", 400,
          "temperature", "expected a number" },
        { "top-p", "{\"model\":\"fx\",\"prompt\":\"a\",\"top_p\":0.9}", 400, "top_p",
          "top_p: 0.9 needs temperature above 0" },
        { "best-of", "{\"model\":\"fx\",\"prompt\":\"a\",\"best_of\":3}", 400, "best_of", "" },
        { "penalty", "{\"model\":\"fx\",\"prompt\":\"a\",\"presence_penalty\":1}", 400,
          "presence_penalty", "" },
        { "echo", "{\"model\":\"fx\",\"prompt\":\"a\",\"echo\":true}", 400, "echo", "false" },
        { "echo-type", "{\"model\":\"fx\",\"prompt\":\"a\",\"echo\":1}", 400, "echo", "boolean" },
        { "stream-type", "{\"model\":\"fx\",\"prompt\":\"a\",\"stream\":\"yes\"}", 400, "stream",
          "boolean" },
        { "logprobs", "{\"model\":\"fx\",\"prompt\":\"a\",\"logprobs\":21}", 400, "logprobs",
          "logprobs: 21 is outside [0, 20]" },
        { "logit-bias", "{\"model\":\"fx\",\"prompt\":\"a\",\"logit_bias\":{\"5\":1}}", 400,
          "logit_bias", "" },
        { "suffix", "{\"model\":\"fx\",\"prompt\":\"a\",\"suffix\":\"x\"}", 400, "suffix", "" },
        { "stop-type", "{\"model\":\"fx\",\"prompt\":\"a\",\"stop\":3}", 400, "stop", "string" },
        { "stop-five",
          "{\"model\":\"fx\",\"prompt\":\"a\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400,
          "stop", "at most 4" },
        { "stop-empty", "{\"model\":\"fx\",\"prompt\":\"a\",\"stop\":[\"\"]}", 400, "stop",
          "1 to 256" },
        { "stop-elem", "{\"model\":\"fx\",\"prompt\":\"a\",\"stop\":[\"a\",2]}", 400, "stop",
          "stop[1]" },
        { "unknown", "{\"model\":\"fx\",\"prompt\":\"a\",\"tools\":[]}", 400, "tools",
          "Unrecognized request argument supplied: tools" },
        { "unknown-ctl", "{\"model\":\"fx\",\"prompt\":\"a\",\"x\\ny\":1}", 400, "x?y",
          "Unrecognized" },
        { "duplicate", "{\"model\":\"fx\",\"prompt\":\"a\",\"prompt\":\"b\"}", 400, "prompt",
          "more than once" },
        { "stream-options", "{\"model\":\"fx\",\"prompt\":\"a\",\"stream_options\":{\"x\":1}}", 400,
          "stream_options", "include_usage" },
        { "stream-options-no-stream",
          "{\"model\":\"fx\",\"prompt\":\"a\",\"stream_options\":{\"include_usage\":true}}", 400,
          "stream_options", "only allowed with \"stream\": true" },
        { "stream-options-twice",
          "{\"model\":\"fx\",\"prompt\":\"a\",\"stream\":true,\"stream_options\":"
          "{\"include_usage\":true,\"include_usage\":false}}",
          400, "stream_options", "stream_options.include_usage: given more than once" },
        { "stream-options-obfuscation-type",
          "{\"model\":\"fx\",\"prompt\":\"a\",\"stream\":true,\"stream_options\":"
          "{\"include_obfuscation\":\"no\"}}",
          400, "stream_options.include_obfuscation", "expected a boolean" },
        { "stream-options-stream-false",
          "{\"model\":\"fx\",\"prompt\":\"a\",\"stream\":false,\"stream_options\":{}}", 400,
          "stream_options", "only allowed with" },
        { "seed-type", "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":\"1\"}", 400, "seed", "" },
        { "seed-frac", "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":1.5}", 400, "seed",
          "expected an integer, got 1.5" },
        { "seed-frac-exp", "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":1e-3}", 400, "seed",
          "got 1e-3" },
        { "seed-bool", "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":true}", 400, "seed",
          "seed: expected an integer, got a boolean" },
        { "user-type", "{\"model\":\"fx\",\"prompt\":\"a\",\"user\":5}", 400, "user", "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        serve_completion_req r;
        serve_err e;
        memset(&e, 0, sizeof e);
        int rc = serve_parse_completion(c->body, strlen(c->body), &LIM, &r, &e);
        char tn[96];
        snprintf(tn, sizeof tn, "serve.parse.refuses.%s", c->name);
        CHECK(tn,
              rc && e.status == c->status && !strcmp(e.param, c->param) &&
                  strstr(e.message, c->msg) && !strchr(e.message, '\n') && r.prompt == NULL &&
                  r.ids == NULL,
              "rc %d status %d param '%s' message '%s'", rc, e.status, e.param, e.message);
    }
    /* Accepted bodies, field by field. */
    const char *ok =
        "{\"model\":\"fx\",\"prompt\":\"h\\u00e9llo \\ud83d\\ude00\",\"max_tokens\":7,"
        "\"temperature\":0,\"top_p\":1,\"n\":1,\"stream\":true,\"stop\":[\"\\n\",\"ab\"],"
        "\"echo\":false,\"logprobs\":null,\"seed\":42,\"user\":\"u\",\"ignore_eos\":true,"
        "\"stream_options\":{\"include_usage\":true},\"logit_bias\":{},\"suffix\":null}";
    serve_completion_req r;
    serve_err e;
    int rc = serve_parse_completion(ok, strlen(ok), &LIM, &r, &e);
    CHECK("serve.parse.accepts-full", rc == 0, "%s", e.message);
    if (rc == 0) {
        CHECK("serve.parse.prompt-unescaped",
              r.prompt_len == 11 && !memcmp(r.prompt, "h\xc3\xa9llo \xf0\x9f\x98\x80", 11),
              "len %zu", r.prompt_len);
        CHECK("serve.parse.fields",
              r.max_tokens == 7 && r.stream && r.include_usage && r.ignore_eos && r.n_stop == 2 &&
                  r.stop_len[0] == 1 && r.stop[0][0] == '\n' && !strcmp(r.stop[1], "ab"),
              "max %d stream %d usage %d ignore %d stops %d", r.max_tokens, r.stream,
              r.include_usage, r.ignore_eos, r.n_stop);
        serve_completion_req_free(&r);
    }
    /* stream_options.include_obfuscation (OpenAI's padding field, which this
     * server never adds): either value is taken, and changes nothing. */
    const char *obf = "{\"model\":\"fx\",\"prompt\":\"a\",\"stream\":true,\"stream_options\":"
                      "{\"include_obfuscation\":false,\"include_usage\":true}}";
    rc = serve_parse_completion(obf, strlen(obf), &LIM, &r, &e);
    CHECK("serve.parse.stream-options-include-obfuscation", rc == 0 && r.include_usage, "rc %d %s",
          rc, rc ? e.message : "");
    if (rc == 0) serve_completion_req_free(&r);
    /* The context check names what is at fault: the prompt alone, or the member
     * that asked for the tokens (chat's default, the rest of the context, never). */
    serve_err ce;
    CHECK("serve.context.names-max-completion-tokens",
          serve_check_context(10, 60, "max_completion_tokens", "messages", &LIM, &ce) &&
              !strcmp(ce.param, "max_completion_tokens") && ce.code &&
              !strcmp(ce.code, "context_length_exceeded") &&
              strstr(ce.message, "and max_completion_tokens (60) need 69 positions"),
          "param '%s' message '%s'", ce.param, ce.message);
    CHECK("serve.context.chat-default-names-messages",
          serve_check_context(65, 1, NULL, "messages", &LIM, &ce) &&
              !strcmp(ce.param, "messages") &&
              !strcmp(ce.message, "messages: the prompt (65 tokens) is longer than this server's "
                                  "context of 64 positions"),
          "param '%s' message '%s'", ce.param, ce.message);
    CHECK("serve.context.long-prompt-names-prompt",
          serve_check_context(65, 4, "max_tokens", "prompt", &LIM, &ce) &&
              !strcmp(ce.param, "prompt"),
          "param '%s'", ce.param);
    CHECK("serve.context.edge", serve_check_context(60, 5, "max_tokens", "prompt", &LIM, &ce) == 0,
          "%s", ce.message);
    const char *ids = "{\"model\":\"fx\",\"prompt\":[[5,17,42]],\"stop\":\"x\"}";
    rc = serve_parse_completion(ids, strlen(ids), &LIM, &r, &e);
    CHECK("serve.parse.ids-and-defaults",
          rc == 0 && r.n_ids == 3 && r.ids[2] == 42 && r.max_tokens == SERVE_MAX_TOKENS_DEFAULT &&
              !r.stream && r.n_stop == 1 && !strcmp(r.stop[0], "x"),
          "rc %d %s", rc, rc ? e.message : "");
    if (rc == 0) serve_completion_req_free(&r);
    /* seed: never read, so any integer, also beyond int64 (a drawn 64-bit seed). */
    const char *seeds[] = { "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":9223372036854775807}",
                            "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":-9223372036854775808}",
                            "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":18446744073709551615}" };
    for (int i = 0; i < 3; i++) {
        rc = serve_parse_completion(seeds[i], strlen(seeds[i]), &LIM, &r, &e);
        CHECK(i == 0   ? "serve.parse.seed-int64-max"
              : i == 1 ? "serve.parse.seed-int64-min"
                       : "serve.parse.seed-uint64-max",
              rc == 0, "%s", e.message);
        if (rc == 0) serve_completion_req_free(&r);
    }
    /* One rule for every integer parameter: an integral value however it is
     * written is that integer (16.0, 1.6e1, 1600e-2), exactly, as pydantic's
     * int fields take it; only its value matters. */
    const char *integral =
        "{\"model\":\"fx\",\"prompt\":[1.0,2e0,300e-2],\"max_tokens\":1.6e1,\"n\":1.0,"
        "\"best_of\":1e0,\"seed\":1e3}";
    rc = serve_parse_completion(integral, strlen(integral), &LIM, &r, &e);
    CHECK("serve.parse.integral-values-are-integers",
          rc == 0 && r.max_tokens == 16 && r.n_ids == 3 && r.ids[0] == 1 && r.ids[1] == 2 &&
              r.ids[2] == 3,
          "rc %d %s", rc, rc ? e.message : "");
    if (rc == 0) serve_completion_req_free(&r);
    const char *mt2 = "{\"model\":\"fx\",\"prompt\":\"a\",\"max_tokens\":2.0}";
    rc = serve_parse_completion(mt2, strlen(mt2), &LIM, &r, &e);
    CHECK("serve.parse.max-tokens-2.0-like-n-1.0", rc == 0 && r.max_tokens == 2, "rc %d %s", rc,
          rc ? e.message : "");
    if (rc == 0) serve_completion_req_free(&r);
    const char *seed_big = "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":1.8446744073709551615e19}";
    rc = serve_parse_completion(seed_big, strlen(seed_big), &LIM, &r, &e);
    CHECK("serve.parse.seed-uint64-max-exp", rc == 0, "%s", e.message);
    if (rc == 0) serve_completion_req_free(&r);
    /* Sampling: the numbers as `cis2 run --temperature` reads them (the binary32
     * nearest the decimal), top_k -1 as off, a 64-bit seed, n and logprobs. */
    const char *smp = "{\"model\":\"fx\",\"prompt\":\"a\",\"temperature\":0.7,\"top_p\":0.95,"
                      "\"min_p\":0.05,\"top_k\":-1,\"seed\":18446744073709551615,\"n\":3,"
                      "\"logprobs\":5}";
    rc = serve_parse_completion(smp, strlen(smp), &LIM, &r, &e);
    CHECK("serve.parse.sampling",
          rc == 0 && r.smp.temperature == 0.7f && r.smp.top_p == 0.95f && r.smp.min_p == 0.05f &&
              r.smp.top_k == 0 && r.smp.seed == UINT64_MAX && r.seed_given && r.n == 3 &&
              r.logprobs && r.top_logprobs == 5,
          "rc %d %s", rc, rc ? e.message : "");
    if (rc == 0) serve_completion_req_free(&r);
    /* no seed: the server's, below 2^53 (exact as a JSON number anywhere), a new one each time */
    const char *noseed = "{\"model\":\"fx\",\"prompt\":\"a\",\"temperature\":1.0}";
    uint64_t s1 = 0, s2 = 0;
    int ok2 = 1;
    for (int i = 0; i < 2; i++) {
        rc = serve_parse_completion(noseed, strlen(noseed), &LIM, &r, &e);
        ok2 &= rc == 0 && !r.seed_given && r.smp.seed < (1ull << 53);
        if (rc == 0) {
            (i ? &s2 : &s1)[0] = r.smp.seed;
            serve_completion_req_free(&r);
        }
    }
    CHECK("serve.parse.server-seed", ok2 && s1 != s2, "%llu %llu", (unsigned long long)s1,
          (unsigned long long)s2);
    /* greedy: seed accepted and not read; n above 1 taken (n equal choices) */
    const char *gseed = "{\"model\":\"fx\",\"prompt\":\"a\",\"seed\":-5,\"n\":2,\"top_k\":0,"
                        "\"min_p\":0,\"top_p\":1}";
    rc = serve_parse_completion(gseed, strlen(gseed), &LIM, &r, &e);
    CHECK("serve.parse.greedy-seed-and-n",
          rc == 0 && r.smp.temperature == 0.0f && r.smp.seed == 0 && r.n == 2, "rc %d %s", rc,
          rc ? e.message : "");
    if (rc == 0) serve_completion_req_free(&r);
    /* The edge of the context: P + N - 1 positions, exactly as the engine counts (§3.4). */
    const char *edge = "{\"model\":\"fx\",\"prompt\":[1,2,3],\"max_tokens\":62}";
    rc = serve_parse_completion(edge, strlen(edge), &LIM, &r, &e);
    CHECK("serve.parse.context-edge-accepted", rc == 0, "%s", e.message);
    if (rc == 0) serve_completion_req_free(&r);
    /* /v1/verify bodies. */
    char *t;
    size_t tl;
    const char *vj = "{\"receipt\":\"CIS\\n\"}";
    rc = serve_parse_verify(vj, strlen(vj), &t, &tl, &e);
    CHECK("serve.parse-verify.json", rc == 0 && tl == 4 && !memcmp(t, "CIS\n", 4), "%s", e.message);
    if (!rc) free(t);
    rc = serve_parse_verify("CIS-2-RECEIPT v1\n", 17, &t, &tl, &e);
    CHECK("serve.parse-verify.text", rc == 0 && tl == 17, "%s", e.message);
    if (!rc) free(t);
    rc = serve_parse_verify("{\"receipt\":1}", 13, &t, &tl, &e);
    CHECK("serve.parse-verify.refuses-number", rc && !strcmp(e.param, "receipt"), "rc %d", rc);
    rc = serve_parse_verify("{\"receipt\":\"a\",\"x\":1}", 21, &t, &tl, &e);
    CHECK("serve.parse-verify.refuses-extra", rc && e.status == 400, "rc %d", rc);
    rc = serve_parse_verify(" \n", 2, &t, &tl, &e);
    CHECK("serve.parse-verify.refuses-empty", rc && e.status == 400, "rc %d", rc);
}

/* ------------------------------------------------------------ text */
/* /v1/chat/completions bodies: the chat members, the messages read by the
 * library's parser (cis2_chat_parse_messages), the completions-only members refused. */
static void check_chat_parser(void)
{
#define U "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
    static const bad_case cases[] = {
        { "no-messages", "{\"model\":\"fx\"}", 400, "messages", "required" },
        { "messages-str", "{\"model\":\"fx\",\"messages\":\"hi\"}", 400, "messages",
          "expected an array" },
        { "messages-object", "{\"model\":\"fx\",\"messages\":{}}", 400, "messages",
          "expected an array of messages, got an object" },
        { "messages-empty", "{\"model\":\"fx\",\"messages\":[]}", 400, "messages", "0 messages" },
        { "role-tool", "{\"model\":\"fx\",\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
          400, "messages", "messages[0].role: must be" },
        { "content-array",
          "{\"model\":\"fx\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
          400, "messages", "messages[0].content[0]: expected a text part" },
        { "message-name",
          "{\"model\":\"fx\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":\"b\"}]}",
          400, "messages", "unsupported key \"name\"" },
        { "prompt", "{\"model\":\"fx\"," U ",\"prompt\":\"a\"}", 400, "prompt", "Unrecognized" },
        { "echo", "{\"model\":\"fx\"," U ",\"echo\":false}", 400, "echo", "Unrecognized" },
        { "temperature", "{\"model\":\"fx\"," U ",\"temperature\":\"1\"}", 400, "temperature",
          "expected a number" },
        { "logprobs", "{\"model\":\"fx\"," U ",\"logprobs\":1}", 400, "logprobs", "boolean" },
        { "top-logprobs", "{\"model\":\"fx\"," U ",\"top_logprobs\":1}", 400, "top_logprobs",
          "needs \"logprobs\": true" },
        { "top-logprobs-21", "{\"model\":\"fx\"," U ",\"logprobs\":true,\"top_logprobs\":21}", 400,
          "top_logprobs", "outside [0, 20]" },
        { "max-both", "{\"model\":\"fx\"," U ",\"max_tokens\":2,\"max_completion_tokens\":3}", 400,
          "max_completion_tokens", "give one" },
        { "mct-0", "{\"model\":\"fx\"," U ",\"max_completion_tokens\":0}", 400,
          "max_completion_tokens", "outside" },
        { "mct-frac", "{\"model\":\"fx\"," U ",\"max_completion_tokens\":2.5}", 400,
          "max_completion_tokens", "max_completion_tokens: expected an integer, got 2.5" },
        { "top-logprobs-frac", "{\"model\":\"fx\"," U ",\"top_logprobs\":0.5}", 400, "top_logprobs",
          "top_logprobs: expected an integer, got 0.5" },
        { "max-both-integral",
          "{\"model\":\"fx\"," U ",\"max_tokens\":2.0,\"max_completion_tokens\":3}", 400,
          "max_completion_tokens", "3, but max_tokens is 2" },
        { "stream-options-no-stream",
          "{\"model\":\"fx\"," U ",\"stream_options\":{\"include_usage\":true}}", 400,
          "stream_options", "only allowed with" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        serve_completion_req r;
        serve_err e;
        memset(&e, 0, sizeof e);
        int rc = serve_parse_chat(c->body, strlen(c->body), &LIM, &r, &e);
        char tn[96];
        snprintf(tn, sizeof tn, "serve.parse-chat.refuses.%s", c->name);
        CHECK(tn,
              rc && e.status == c->status && !strcmp(e.param, c->param) &&
                  strstr(e.message, c->msg) && !strchr(e.message, '\n') && r.msgs == NULL,
              "rc %d status %d param '%s' message '%s'", rc, e.status, e.param, e.message);
    }
    const char *ok = "{\"model\":\"fx\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
                     "{\"role\":\"user\",\"content\":\"h\\u00e9\"}],\"max_completion_tokens\":9,"
                     "\"max_tokens\":9,\"logprobs\":false,\"stream\":true,\"stop\":\"x\"}";
    serve_completion_req r;
    serve_err e;
    int rc = serve_parse_chat(ok, strlen(ok), &LIM, &r, &e);
    CHECK("serve.parse-chat.accepts",
          rc == 0 && r.n_msgs == 2 && !strcmp(r.msgs[0].role, "system") &&
              !strcmp(r.msgs[1].role, "user") && r.msgs[1].content_len == 3 &&
              !memcmp(r.msgs[1].content, "h\xc3\xa9", 3) && r.max_tokens == 9 && r.stream &&
              r.n_stop == 1 && !r.prompt && !r.ids,
          "rc %d %s", rc, rc ? e.message : "");
    if (rc == 0) serve_completion_req_free(&r);
    const char *mct = "{\"model\":\"fx\"," U ",\"max_tokens\":5,\"max_completion_tokens\":5.0}";
    rc = serve_parse_chat(mct, strlen(mct), &LIM, &r, &e);
    CHECK("serve.parse-chat.max-completion-tokens-5.0-equals-5", rc == 0 && r.max_tokens == 5,
          "rc %d %s", rc, rc ? e.message : "");
    if (rc == 0) serve_completion_req_free(&r);
    rc = serve_parse_chat("{\"model\":\"fx\"," U "}", strlen("{\"model\":\"fx\"," U "}"), &LIM, &r,
                          &e);
    CHECK("serve.parse-chat.no-max-tokens-is-0", rc == 0 && r.max_tokens == 0 && r.n_msgs == 1,
          "rc %d max %d", rc, r.max_tokens);
    if (rc == 0) serve_completion_req_free(&r);
    /* the completions endpoint does not take messages */
    rc = serve_parse_completion("{\"model\":\"fx\"," U "}", strlen("{\"model\":\"fx\"," U "}"),
                                &LIM, &r, &e);
    CHECK("serve.parse.messages-refused", rc && !strcmp(e.param, "messages"), "rc %d", rc);
#undef U
}

static void check_text(void)
{
    const char *stops[] = { "\n\n", "END" };
    const size_t lens[] = { 2, 3 };
    serve_stops st = { stops, lens, 2 };
    CHECK("serve.stop.find-earliest", serve_stop_find(&st, "abEND\n\nx", 8) == 2, "mismatch");
    CHECK("serve.stop.find-none", serve_stop_find(&st, "abEN", 4) == -1, "mismatch");
    CHECK("serve.sendable.holds-stop-prefix", serve_sendable(&st, "abEN", 4) == 2, "%zu",
          serve_sendable(&st, "abEN", 4));
    CHECK("serve.sendable.holds-newline", serve_sendable(&st, "ab\n", 3) == 2, "mismatch");
    CHECK("serve.sendable.releases", serve_sendable(&st, "abENx", 5) == 5, "mismatch");
    serve_stops none = { NULL, NULL, 0 };
    CHECK("serve.sendable.holds-split-utf8-2", serve_sendable(&none, "a\xc3", 2) == 1, "mismatch");
    CHECK("serve.sendable.holds-split-utf8-4", serve_sendable(&none, "a\xf0\x9f\x98", 4) == 1,
          "mismatch");
    CHECK("serve.sendable.complete-utf8", serve_sendable(&none, "a\xf0\x9f\x98\x80", 5) == 5,
          "mismatch");
    CHECK("serve.sendable.invalid-passes", serve_sendable(&none, "a\x80", 2) == 2, "mismatch");
    CHECK("serve.sendable.empty", serve_sendable(&st, "", 0) == 0, "mismatch");
}

/* Ids to text, byte by byte: the text is the bytes decoded with one U+FFFD
 * per maximal invalid subpart (Python's bytes.decode("utf-8", "replace")),
 * whatever ids carried them. Each byte is its own id here (a byte-level
 * vocabulary has all 256), so a character is always split across ids. */
static void check_detok_bytes(const cis2_tokenizer *t)
{
    char err[CIS2_ERR_LEN];
    int32_t byte_id[256];
    for (int i = 0; i < 256; i++) byte_id[i] = -1;
    int nv = cis2_tokenizer_vocab_size(t);
    for (int32_t id = 0; id < nv; id++) {
        char *b;
        size_t bl;
        if (cis2_tokenizer_decode(t, &id, 1, &b, &bl, err)) continue;
        if (bl == 1 && byte_id[(unsigned char)b[0]] < 0) byte_id[(unsigned char)b[0]] = id;
        free(b);
    }
#define R "\xef\xbf\xbd" /* U+FFFD */
    static const struct {
        const char *name, *bytes, *want;
    } cases[] = {
        { "valid", "h\xc3\xa9llo \xe6\x97\xa5 \xf0\x9f\x98\x80",
          "h\xc3\xa9llo \xe6\x97\xa5 \xf0\x9f\x98\x80" },
        { "lone-continuation",
          "a\x80"
          "b",
          "a" R "b" },
        { "two-continuations", "\xa1\xa2", R R },
        { "cut-then-ascii-keeps-space",
          " \xe2\x80"
          "A",
          " " R "A" },
        { "cut-at-end", "ok\xf0\x9f\x98", "ok" R },
        { "overlong-e0", "\xe0\x80\x80", R R R },
        { "surrogate", "\xed\xa0\x80", R R R },
        { "c0-lead", "\xc0\xaf", R R },
        { "above-10ffff", "\xf4\x90\x80\x80", R R R R },
        { "ff-then-text",
          "\xff"
          "abcdefgh\xe6\x97\xa5",
          R "abcdefgh\xe6\x97\xa5" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        serve_detok d = { { 0 }, 0 };
        cis2_sb out = { 0 };
        int missing = 0;
        for (const unsigned char *p = (const unsigned char *)cases[i].bytes; *p; p++) {
            if (byte_id[*p] < 0) missing = 1;
            else serve_detok_feed(&d, t, byte_id[*p], &out);
        }
        serve_detok_feed(&d, t, -1, &out);
        char tn[96];
        snprintf(tn, sizeof tn, "serve.detok.bytes.%s", cases[i].name);
        size_t wl = strlen(cases[i].want);
        CHECK(tn, !missing && out.len == wl && !memcmp(out.b, cases[i].want, wl),
              "missing %d len %zu", missing, out.len);
        cis2_sb_free(&out);
    }
    /* Nothing is held but a character still incomplete. */
    serve_detok d = { { 0 }, 0 };
    cis2_sb out = { 0 };
    serve_detok_feed(&d, t, byte_id['a'], &out);
    int sent_at_once = out.len == 1;
    serve_detok_feed(&d, t, byte_id[0xe6], &out);
    serve_detok_feed(&d, t, byte_id[0x97], &out);
    int held = out.len == 1 && d.n == 2;
    serve_detok_feed(&d, t, byte_id[0xa5], &out);
    CHECK("serve.detok.bytes.holds-only-the-cut-character",
          sent_at_once && held && out.len == 4 && d.n == 0, "len %zu n %d", out.len, d.n);
    cis2_sb_free(&out);
    /* An id the tokenizer names no token for (a model vocabulary larger than
     * its tokenizer's) has no bytes, as in cis2_receipt_prompt_bytes: the
     * character around it is whole. */
    serve_detok d2 = { { 0 }, 0 };
    cis2_sb o2 = { 0 };
    serve_detok_feed(&d2, t, byte_id[0xe6], &o2);
    serve_detok_feed(&d2, t, nv, &o2);
    serve_detok_feed(&d2, t, byte_id[0x97], &o2);
    serve_detok_feed(&d2, t, byte_id[0xa5], &o2);
    serve_detok_feed(&d2, t, nv + 1, &o2);
    serve_detok_feed(&d2, t, -1, &o2);
    CHECK("serve.detok.bytes.unknown-id-no-bytes", o2.len == 3 && !memcmp(o2.b, "\xe6\x97\xa5", 3),
          "len %zu", o2.len);
    cis2_sb_free(&o2);
#undef R
}

/* One id that begins with the end of a character and ends with the start of
 * another (a byte-level BPE merge across a character boundary: the Qwen
 * fixture tokenizer learned "\xa5" "本の首都" "\xe3\x81"): repeated, as a
 * model may generate it, its text is never lost (it was all U+FFFD when ids
 * waited until they decoded to valid UTF-8 together, which these never do). */
static void check_detok_straddle(void)
{
    char err[CIS2_ERR_LEN];
    cis2_tokenizer *t;
    if (cis2_tokenizer_load(&t, "tests/fixtures/tokenizer/qwen.json", err)) {
        CHECK("serve.detok.straddle.load", 0, "%s", err);
        return;
    }
    int32_t s = -1;
    char *mid = NULL;
    size_t ml = 0;
    for (int32_t id = 0; id < cis2_tokenizer_vocab_size(t) && s < 0; id++) {
        char *b;
        size_t bl;
        if (cis2_tokenizer_decode(t, &id, 1, &b, &bl, err)) continue;
        const unsigned char *u = (const unsigned char *)b;
        size_t a = 0, z = bl;
        while (a < bl && (u[a] & 0xC0) == 0x80) a++;               /* the end of one */
        while (z > a && (u[z - 1] & 0xC0) == 0x80) z--;            /* the start of another: */
        if (a > 0 && z > a && u[z - 1] >= 0xC2 && z - 1 > a + 2 && /* a lead byte, then */
            cis2_utf8_check(b + a, z - 1 - a) == z - 1 - a) {      /* whole characters */
            s = id;
            ml = z - 1 - a;
            mid = malloc(ml);
            if (mid) memcpy(mid, b + a, ml);
        }
        free(b);
    }
    if (s < 0 || !mid) {
        CHECK("serve.detok.straddle.found", 0, "no such id in the Qwen fixture tokenizer");
        cis2_tokenizer_free(t);
        free(mid);
        return;
    }
    serve_detok d = { { 0 }, 0 };
    cis2_sb out = { 0 };
    for (int i = 0; i < 6; i++) serve_detok_feed(&d, t, s, &out);
    serve_detok_feed(&d, t, -1, &out);
    int found = 0;
    for (size_t i = 0; i + ml <= out.len; i++) found += !memcmp(out.b + i, mid, ml);
    CHECK("serve.detok.straddle.text-kept",
          found == 6 && cis2_utf8_check(out.b, out.len) == out.len, "id %d: %d of 6, len %zu",
          (int)s, found, out.len);
    cis2_sb_free(&out);
    free(mid);
    cis2_tokenizer_free(t);
}

/* Ids to text with the fixture tokenizer: "naïve" has a token 'a'+0xC3 whose
 * character ends in the next token (tools/make_model.py learns the merge "a Ã"). */
static void check_detok(const cis2_tokenizer *t)
{
    char err[CIS2_ERR_LEN];
    int32_t *ids = NULL;
    int n = 0;
    if (cis2_tokenizer_encode(t, "na\xc3\xafve", 6, &ids, &n, err)) {
        CHECK("serve.detok.encode", 0, "%s", err);
        return;
    }
    serve_detok d = { { 0 }, 0 };
    cis2_sb out = { 0 };
    int split = 0;
    for (int i = 0; i < n; i++) {
        serve_detok_feed(&d, t, ids[i], &out);
        if (d.n > 0) split = 1; /* bytes that waited for the next id */
    }
    serve_detok_feed(&d, t, -1, &out);
    CHECK("serve.detok.split-character-joined",
          split && out.len == 6 && !memcmp(out.b, "na\xc3\xafve", 6), "n %d split %d len %zu", n,
          split, out.len);
    /* Half a character alone at the end becomes U+FFFD; what comes before it
     * in the same id (the 'a' of 'a'+0xC3) is kept. */
    int i_a = -1;
    char *ab = NULL;
    size_t abl = 0;
    for (int i = 0; i < n && i_a < 0; i++) {
        if (cis2_tokenizer_decode(t, &ids[i], 1, &ab, &abl, err)) continue;
        if (cis2_utf8_check(ab, abl) != abl) i_a = i; /* half a character alone */
        else free(ab);
    }
    if (i_a >= 0) {
        serve_detok d2 = { { 0 }, 0 };
        cis2_sb o2 = { 0 };
        serve_detok_feed(&d2, t, ids[i_a], &o2);
        serve_detok_feed(&d2, t, -1, &o2);
        size_t keep = cis2_utf8_check(ab, abl);
        CHECK("serve.detok.lone-piece-is-replacement",
              keep + 1 == abl && o2.len == keep + 3 && !memcmp(o2.b, ab, keep) &&
                  !memcmp(o2.b + keep, "\xEF\xBF\xBD", 3),
              "len %zu keep %zu", o2.len, keep);
        cis2_sb_free(&o2);
        free(ab);
    } else {
        CHECK("serve.detok.has-split-token", 0, "no id of 'na\\xc3\\xafve' fails alone");
    }
    cis2_sb_free(&out);
    free(ids);
    check_detok_bytes(t);
}

/* ---------------------------------------------------- engine: finish */
static int same_run(const cis2_result *a, const cis2_result *b)
{
    return a->n_gen == b->n_gen && a->n_prompt == b->n_prompt &&
           !memcmp(a->gen, b->gen, (size_t)a->n_gen * 4) &&
           !memcmp(a->prompt, b->prompt, (size_t)a->n_prompt * 4) &&
           !memcmp(a->witness, b->witness, 32) && !memcmp(a->argmax, b->argmax, 32);
}

static void check_finish(cis2_engine *e)
{
    char err[CIS2_ERR_LEN];
    const int32_t p1[] = { 5, 17, 42, 7, 99 }, p2[] = { 3, 141, 59 };
    cis2_gen_opts g = { 12, 0, NULL, NULL, NULL, 0 };
    int s1, s2;
    int rc = cis2_seq_submit(e, p1, 5, &g, &s1, err) || cis2_seq_submit(e, p2, 3, &g, &s2, err);
    int fin_rc = 0;
    for (int k = 0; !rc && k < 4; k++) rc = cis2_engine_step(e, err);
    if (!rc) fin_rc = cis2_seq_finish(e, s1, err); /* s1 has 4 tokens; s2 runs on */
    CHECK("serve.seq-finish.done", !rc && !fin_rc && cis2_seq_done(e, s1) && !cis2_seq_done(e, s2),
          "%s", err);
    CHECK("serve.seq-finish.refuses-twice", cis2_seq_finish(e, s1, err) != 0, "accepted");
    cis2_result a, b, solo_a, solo_b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    rc = cis2_seq_take(e, s1, &a, err);
    while (!rc && !cis2_seq_done(e, s2)) rc = cis2_engine_step(e, err);
    if (!rc) rc = cis2_seq_take(e, s2, &b, err);
    cis2_gen_opts g4 = { 4, 0, NULL, NULL, NULL, 0 };
    int src = rc || cis2_generate(e, p1, 5, &g4, &solo_a, err) ||
              cis2_generate(e, p2, 3, &g, &solo_b, err);
    CHECK("serve.seq-finish.equals-solo-n4", !src && a.n_gen == 4 && same_run(&a, &solo_a), "%s",
          src ? err : "digests or ids differ");
    CHECK("serve.seq-finish.neighbour-unchanged", !src && same_run(&b, &solo_b), "differs");
    /* A lone sequence: its last step's row is still being hashed on the
     * backend's side thread (backend.h, side) when it is finished or
     * cancelled. */
    cis2_result c, d;
    memset(&c, 0, sizeof c);
    memset(&d, 0, sizeof d);
    int s3, lrc = src || cis2_seq_submit(e, p1, 5, &g, &s3, err);
    for (int k = 0; !lrc && k < 4; k++) lrc = cis2_engine_step(e, err);
    lrc = lrc || cis2_seq_finish(e, s3, err) || cis2_seq_take(e, s3, &c, err);
    CHECK("serve.seq-finish.lone-equals-solo-n4", !lrc && same_run(&c, &solo_a), "%s",
          lrc ? err : "digests or ids differ");
    lrc = src || cis2_seq_submit(e, p1, 5, &g, &s3, err);
    for (int k = 0; !lrc && k < 3; k++) lrc = cis2_engine_step(e, err);
    if (!lrc) cis2_seq_cancel(e, s3);
    lrc = lrc || cis2_generate(e, p1, 5, &g4, &d, err);
    CHECK("serve.seq-cancel.lone-then-solo-n4", !lrc && same_run(&d, &solo_a), "%s",
          lrc ? err : "digests or ids differ");
    cis2_result_free(&c);
    cis2_result_free(&d);
    if (!src) {
        cis2_result_free(&solo_a);
        cis2_result_free(&solo_b);
    }
    cis2_result_free(&a);
    cis2_result_free(&b);
}

/* ------------------------------------------------------ the scheduler */
static int utf8_valid(const char *s, size_t n)
{
    cis2_sb sb = { 0 }; /* cis2_sb_json_str turns invalid bytes into \ufffd escapes */
    cis2_sb_json_str(&sb, s, n);
    int ok = !sb.oom && !strstr(sb.b, "\\ufffd");
    cis2_sb_free(&sb);
    return ok;
}

static void check_sched(cis2_engine *e, const cis2_tokenizer *t)
{
    char err[CIS2_ERR_LEN];
    const cis2_model *m = cis2_engine_model(e);
    /* Solo runs first, while the engine is ours. */
    /* [2] is "hello world" (its text: " we' we' ..."); [3]'s ids are not UTF-8 text. */
    const int32_t pr[4][8] = { { 5, 17, 42, 7, 99 },
                               { 3, 141, 59 },
                               { 273, 284, 128, 279, 128, 131, 125, 117 },
                               { 273, 284, 128, 279 } };
    const int np[4] = { 5, 3, 8, 4 }, ng[4] = { 9, 17, 12, 5 };
    cis2_result solo[4];
    for (int i = 0; i < 4; i++) {
        cis2_gen_opts g = { ng[i], 0, NULL, NULL, NULL, 0 };
        if (cis2_generate(e, pr[i], np[i], &g, &solo[i], err)) {
            CHECK("serve.sched.solo", 0, "%s", err);
            return;
        }
    }
    /* The text of solo[2] and a stop string inside it (after its first token). */
    char *full = NULL;
    size_t fl = 0;
    int have_text = t && !cis2_tokenizer_decode(t, solo[2].gen, solo[2].n_gen, &full, &fl, err);
    serve_sched *s;
    if (serve_sched_new(&s, e, 3, 2, err)) {
        CHECK("serve.sched.new", 0, "%s", err);
        return;
    }
    serve_job *j[4] = { 0 };
    for (int i = 0; i < 4; i++) {
        serve_gen_params p = { pr[i], np[i], "", 0, ng[i], 0, { NULL, NULL, 0 }, NULL, 0, 0 };
        if (serve_sched_submit(s, &p, &j[i], err)) CHECK("serve.sched.submit", 0, "%s", err);
    }
    int all_same = 1, texts_ok = 1;
    for (int i = 0; i < 4; i++) {
        if (!j[i]) continue;
        cis2_sb text = { 0 };
        while (!serve_job_wait(s, j[i], 1000, &text)) {}
        serve_err je;
        const char *jt;
        size_t jl;
        int fin;
        const cis2_result *r = serve_job_result(j[i], &jt, &jl, &fin);
        all_same &=
            !serve_job_error(j[i], &je) && same_run(r, &solo[i]) && fin == SERVE_FINISH_LENGTH;
        /* the streamed pieces add up to the final text */
        texts_ok &= text.len == jl && (jl == 0 || !memcmp(text.b, jt, jl));
        if (i == 2 && have_text) texts_ok &= jl == fl && !memcmp(jt, full, fl);
        texts_ok &= utf8_valid(jt, jl); /* [3]: undecodable ids become U+FFFD */
        cis2_sb_free(&text);
        serve_job_release(s, j[i]);
    }
    CHECK("serve.sched.four-jobs-three-slots-equal-solo", all_same, "a result differs");
    CHECK("serve.sched.streamed-text-equals-final", texts_ok, "text differs");

    /* A stop string: the text ends before it, the run ends at the token that
     * completed it, and that run equals the prompt run alone for that many tokens. */
    if (have_text && fl > 2) {
        size_t at = 1;
        while (at < fl - 1 && full[at] == full[0]) at++; /* a stop that starts after byte 0 */
        char stop[3] = { full[at], full[at + 1], 0 };
        const char *sp[1] = { stop };
        size_t sl[1] = { 2 };
        serve_gen_params p = { pr[2], np[2], "", 0, ng[2], 0, { sp, sl, 1 }, NULL, 0, 0 };
        serve_job *js;
        if (serve_sched_submit(s, &p, &js, err) == 0) {
            while (!serve_job_wait(s, js, 1000, NULL)) {}
            const char *jt;
            size_t jl;
            int fin;
            const cis2_result *r = serve_job_result(js, &jt, &jl, &fin);
            char *pos = memmem(full, fl, stop, 2);
            cis2_result alone;
            cis2_gen_opts g = { r->n_gen, 0, NULL, NULL, NULL, 0 };
            /* the engine is the scheduler's: compare with a second engine on the same files */
            cis2_model *m2;
            cis2_engine *e2;
            int orc = cis2_model_open(&m2, getenv("SERVE_UNIT_MODEL"), NULL, err) ||
                      cis2_engine_new(&e2, m2, NULL, err) ||
                      cis2_generate(e2, pr[2], np[2], &g, &alone, err);
            CHECK("serve.sched.stop-string",
                  !orc && fin == SERVE_FINISH_STOP && pos && jl == (size_t)(pos - full) &&
                      !memcmp(jt, full, jl) && r->n_gen <= ng[2] && same_run(r, &alone),
                  "rc %d finish %d len %zu n_gen %d %s", orc, fin, jl, r->n_gen, orc ? err : "");
            if (!orc) {
                cis2_result_free(&alone);
                cis2_engine_free(e2);
                cis2_model_free(m2);
            }
            serve_job_release(s, js);
        }
    } else {
        SKIP("serve.sched.stop-string", "the fixture's text is too short");
    }

    /* Busy: 3 slots + 2 queued; the sixth request is refused. The five take seconds each
     * (8000 tokens), and the sixth goes in once the stats show all five in. */
    serve_job *lj[6] = { 0 };
    int accepted = 0;
    for (int i = 0; i < 5; i++) {
        serve_gen_params p = { pr[0], np[0], "", 0, 8000, 0, { NULL, NULL, 0 }, NULL, 0, 0 };
        accepted += serve_sched_submit(s, &p, &lj[i], err) == 0;
    }
    serve_stats st5 = { 0 };
    for (int k = 0; k < 1000; k++) {
        serve_sched_stats(s, &st5);
        if (st5.running == 3 && st5.queued == 2) break;
        usleep(10000);
    }
    serve_gen_params p6 = { pr[0], np[0], "", 0, 8000, 0, { NULL, NULL, 0 }, NULL, 0, 0 };
    int rc6 = serve_sched_submit(s, &p6, &lj[5], err);
    CHECK("serve.sched.busy-beyond-queue",
          accepted == 5 && st5.running == 3 && st5.queued == 2 && rc6 == SERVE_BUSY && !lj[5],
          "accepted %d, running %d queued %d, sixth rc %d", accepted, st5.running, st5.queued, rc6);
    /* Cancel them all: their slots come back. */
    for (int i = 0; i < 6; i++) serve_job_release(s, lj[i]);
    serve_stats stt = { 0 };
    for (int k = 0; k < 200; k++) {
        serve_sched_stats(s, &stt);
        if (stt.running == 0 && stt.queued == 0) break;
        usleep(10000);
    }
    CHECK("serve.sched.cancel-frees-slots", stt.running == 0 && stt.queued == 0,
          "running %d queued %d", stt.running, stt.queued);

    /* Verification through the scheduler: the solo receipt verifies; a doctored one does not. */
    for (int doctor = 0; doctor < 2; doctor++) {
        cis2_receipt rc0, rc;
        char *pb = NULL, *txt;
        size_t pl = 0, tl;
        /* prompt-hex: the bytes the prompt ids decode to, as every writer records it */
        cis2_receipt_prompt_bytes(cis2_model_tokenizer(m, NULL), solo[1].prompt, solo[1].n_prompt,
                                  &pb, &pl, err);
        cis2_receipt_from_run(&rc0, m, &solo[1], (const uint8_t *)pb, pl);
        cis2_receipt_format(&rc0, &txt, &tl);
        free(pb);
        if (doctor) txt[strstr(txt, "witness-digest ") - txt + 15] ^= 1;
        int prc = cis2_receipt_parse(txt, tl, "unit", &rc, err);
        free(txt);
        serve_job *jv = NULL;
        if (prc || serve_sched_verify(s, &rc, NULL, &jv, err)) {
            CHECK("serve.sched.verify", 0, "%s", err);
            continue;
        }
        while (!serve_job_wait(s, jv, 1000, NULL)) {}
        const cis2_verdict *v = serve_job_verdict(jv);
        if (doctor)
            CHECK("serve.sched.verify-doctored", v && v->mismatches == 1, "mismatches %d",
                  v ? v->mismatches : -1);
        else CHECK("serve.sched.verify-good", v && v->mismatches == 0, "no verdict or mismatch");
        serve_job_release(s, jv);
    }
    /* A shutdown ends running and queued jobs alike with a 503 whose code says
     * why (the code a submit refused for the same reason gets), not a null one. */
    serve_job *sj[4] = { 0 };
    for (int i = 0; i < 4; i++) {
        serve_gen_params p = { pr[0], np[0], "", 0, 8000, 0, { NULL, NULL, 0 }, NULL, 0, 0 };
        if (serve_sched_submit(s, &p, &sj[i], err))
            CHECK("serve.sched.shutdown-submit", 0, "%s", err);
    }
    for (int k = 0; k < 1000; k++) { /* 3 running, 1 queued */
        serve_sched_stats(s, &st5);
        if (st5.running == 3) break;
        usleep(10000);
    }
    serve_sched_stop(s);
    int coded = 0;
    serve_err se = { 0 };
    for (int i = 0; i < 4; i++) {
        if (!sj[i]) continue;
        while (!serve_job_wait(s, sj[i], 1000, NULL)) {}
        memset(&se, 0, sizeof se);
        coded += serve_job_error(sj[i], &se) && se.status == 503 && se.code &&
                 !strcmp(se.code, "shutting_down") && !strcmp(se.type, "server_error") &&
                 !strcmp(se.message, "the server is shutting down");
        serve_job_release(s, sj[i]);
    }
    CHECK("serve.sched.shutdown-503-shutting-down",
          coded == 4 && st5.running == 3 && st5.queued == 1,
          "%d of 4 jobs coded (running %d queued %d; last: %d %s '%s')", coded, st5.running,
          st5.queued, se.status, se.code ? se.code : "null", se.message);
    serve_sched_free(s);
    free(full);
    for (int i = 0; i < 4; i++) cis2_result_free(&solo[i]);
}

/* ------------------------------------------------ the request deadline */
/* Two connections (socket pairs): one waiting for its request past the
 * deadline is shut down (its peer reads the end of the stream) and counted;
 * one whose request is in (disarmed) stays open until it is armed again
 * (kept alive, waiting for the next request); a connection already shut down
 * is not counted twice. */
static void check_guard(void)
{
    serve_guard *g;
    char err[CIS2_ERR_LEN] = "", ch;
    int a[2], b[2];
    if (serve_guard_new(&g, 300, err)) {
        CHECK("serve.guard.new", 0, "%s", err);
        return;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, a) || socketpair(AF_UNIX, SOCK_STREAM, 0, b)) {
        CHECK("serve.guard.socketpair", 0, "%s", strerror(errno));
        serve_guard_free(g);
        return;
    }
    serve_conn *ca = serve_guard_add(g, a[0]), *cb = serve_guard_add(g, b[0]);
    serve_guard_disarm(g, cb);
    usleep(700 * 1000);
    ssize_t ra = recv(a[1], &ch, 1, MSG_DONTWAIT), rb = recv(b[1], &ch, 1, MSG_DONTWAIT);
    int eb = errno;
    CHECK("serve.guard.deadline-shuts-down", ra == 0 && serve_guard_timed_out(g) == 1,
          "recv %zd, %lld timed out", ra, serve_guard_timed_out(g));
    CHECK("serve.guard.disarmed-stays-open", rb < 0 && eb == EAGAIN, "recv %zd (%s)", rb,
          strerror(eb));
    serve_guard_arm(g, cb);
    serve_guard_arm(g, ca);
    usleep(700 * 1000);
    rb = recv(b[1], &ch, 1, MSG_DONTWAIT);
    CHECK("serve.guard.rearmed-shuts-down", rb == 0 && serve_guard_timed_out(g) == 2,
          "recv %zd, %lld timed out (the connection shut before counted twice?)", rb,
          serve_guard_timed_out(g));
    serve_guard_remove(g, ca);
    serve_guard_remove(g, cb);
    serve_guard_free(g);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        close(b[i]);
    }
}

int main(void)
{
    check_guard();
    check_parser();
    check_chat_parser();
    check_text();
    check_detok_straddle();
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], cmd[1024], err[CIS2_ERR_LEN];
    snprintf(dir, sizeof dir, "%s/unit-serve", tmp);
    snprintf(cmd, sizeof cmd,
             "python3 tools/make_model.py %s --arch llama --heads 9 --kv-heads 3 --hidden 72 "
             "--inter 100 --layers 3 --theta 100000 >/dev/null",
             dir);
    if (system(cmd)) {
        CHECK("serve.fixture", 0, "make_model.py failed");
        UNIT_END();
    }
    setenv("SERVE_UNIT_MODEL", dir, 1);
    cis2_model *m;
    cis2_engine *e;
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = CIS2_BACKEND_FAST;
    eo.threads = 2;
    eo.max_seqs = 3;
    if (cis2_model_open(&m, dir, NULL, err) || cis2_engine_new(&e, m, &eo, err)) {
        CHECK("serve.open", 0, "%s", err);
        UNIT_END();
    }
    const cis2_tokenizer *t = cis2_model_tokenizer(m, err);
    if (t) check_detok(t);
    else CHECK("serve.tokenizer", 0, "%s", err);
    check_finish(e);
    check_sched(e, t);
    cis2_engine_free(e);
    cis2_model_free(m);
    UNIT_END();
}
