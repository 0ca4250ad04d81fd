/* One JSON request object -> a sequence to decode: the prompt's token ids
 * (from "prompt_ids", "prompt" encoded with the model's tokenizer, §3.3, or
 * "messages" rendered with the chat template, then encoded), the receipt's
 * prompt bytes, max_tokens and stop_at_eos. Strict: unknown or
 * repeated fields, wrong types and out-of-range values are one-line errors,
 * so nothing in a request is silently ignored. Used by `cis2 batch`; meant
 * for any front end that takes JSON requests. */
#include "cli/batch.h"
#include "core/core.h"
#include "engine/sample.h"
#include <stdlib.h>
#include <string.h>

static const char *FIELDS[] = { "id",          "prompt",   "prompt_ids",  "max_tokens",
                                "stop_at_eos", "messages", "temperature", "top_k",
                                "top_p",       "min_p",    "seed" };
#define N_FIELDS (int)(sizeof FIELDS / sizeof FIELDS[0])

/* rc 1: a fault of the request; -1: memory ran out (no fault of the request:
 * cis2 batch stops instead of writing an error line) */
#define FAIL_RC(rc, ...)                                                                           \
    do {                                                                                           \
        snprintf(err, CIS2_ERR_LEN, __VA_ARGS__);                                                  \
        return (rc);                                                                               \
    } while (0)
#define FAIL(...) FAIL_RC(1, __VA_ARGS__)
#define OOM()     FAIL_RC(-1, "out of memory")

int cis2_request_id(const char *text, size_t len, char **id, size_t *id_len)
{
    json_doc d = { 0 };
    char err[CIS2_ERR_LEN];
    *id = NULL;
    *id_len = 0;
    int rc = cis2_json_line_parse(&d, text, len, err);
    if (rc) return rc;
    int dups = 0;
    rc = 1;
    uint32_t v = json_get(&d, 0, "id", &dups);
    if (v != JSON_NONE && dups == 1 && d.nodes[v].type == JSON_STRING)
        rc = (*id = json_str_dup(&d, v, id_len)) ? 0 : -1;
    json_free(&d);
    return rc;
}

/* An integral value however it is spelled (16, 16.0, 1.6e1), as cis2 serve
 * reads its integer parameters (docs/serve.md, Integers): one rule for every
 * JSON integer a user sends. */
static int get_int(const json_doc *d, uint32_t v, const char *name, long lo, long hi, int *out,
                   char *err)
{
    int64_t x;
    if (d->nodes[v].type != JSON_NUMBER || json_num_int(d, v, &x) || x < lo || x > hi)
        FAIL("field \"%s\" must be an integer in [%ld, %ld]", name, lo, hi);
    *out = (int)x;
    return 0;
}

static int get_ids(const json_doc *d, uint32_t v, int vocab, cis2_request *rq, char *err)
{
    if (d->nodes[v].type != JSON_ARRAY) FAIL("field \"prompt_ids\" must be an array of token ids");
    if (d->nodes[v].count == 0) FAIL("field \"prompt_ids\" is empty");
    rq->ids = malloc((size_t)d->nodes[v].count * sizeof(int32_t));
    if (!rq->ids) OOM();
    int i = 0;
    for (uint32_t k = d->nodes[v].first; k != JSON_NONE; k = d->nodes[k].next, i++) {
        int64_t x;
        int bad = d->nodes[k].type != JSON_NUMBER ? JSON_NUM_NOT_INT : json_num_int(d, k, &x);
        if (bad == JSON_NUM_NOT_INT) FAIL("prompt_ids[%d] is not an integer", i);
        if (bad == JSON_NUM_RANGE)
            FAIL("prompt_ids[%d] is outside the vocabulary (vocab_size = %d)", i, vocab);
        if (x < 0 || x >= vocab)
            FAIL("prompt_ids[%d] = %lld is outside the vocabulary (vocab_size = %d)", i,
                 (long long)x, vocab);
        rq->ids[i] = (int32_t)x;
    }
    rq->n_ids = i;
    return 0;
}

static int encode(const json_doc *d, uint32_t v, const cis2_tokenizer *t, cis2_request *rq,
                  char *err)
{
    if (d->nodes[v].type != JSON_STRING) FAIL("field \"prompt\" must be a string");
    size_t len;
    char *text = json_str_dup(d, v, &len), e[CIS2_ERR_LEN];
    if (!text) OOM();
    int rc = cis2_tokenizer_encode(t, text, len, &rq->ids, &rq->n_ids, e);
    free(text);
    if (rc) FAIL_RC(rc, "field \"prompt\": %s", e);
    if (rq->n_ids == 0) FAIL("field \"prompt\" encodes to no tokens");
    return 0;
}

/* "messages": OpenAI-style turns, parsed, rendered with the generation
 * prompt and encoded exactly as `cis2 run --chat` does. */
static int chat(const json_doc *d, uint32_t v, const cis2_tokenizer *t,
                const cis2_request_defaults *df, cis2_request *rq, char *err)
{
    if (d->nodes[v].type != JSON_ARRAY) FAIL("field \"messages\" must be an array of messages");
    if (!df->chat) FAIL("field \"messages\": %s", df->chat_err ? df->chat_err : "no chat template");
    cis2_chat_msg *msgs = NULL;
    int n = 0;
    char *text = NULL, e[CIS2_ERR_LEN];
    size_t len = 0;
    int rc = cis2_chat_parse_messages(d->src + d->nodes[v].start, d->nodes[v].len,
                                      "field \"messages\"", &msgs, &n, e);
    if (!rc) rc = cis2_chat_render(df->chat, msgs, n, 1, t, &text, &len, e);
    if (!rc) rc = cis2_tokenizer_encode(t, text, len, &rq->ids, &rq->n_ids, e);
    cis2_free(msgs);
    free(text);
    if (rc) FAIL_RC(rc, "%s%s", strncmp(e, "field", 5) ? "field \"messages\": " : "", e);
    return 0;
}

uint64_t cis2_request_derived_seed(const char *id, size_t id_len)
{
    cis2_sha256 h;
    uint8_t dg[32];
    cis2_sha256_init(&h);
    cis2_sha256_update(&h, "CIS-2-BATCH-SEED", 16);
    cis2_sha256_update(&h, id, id_len);
    cis2_sha256_final(&h, dg);
    uint64_t s = 0;
    for (int i = 7; i >= 0; i--) s = s << 8 | dg[i];
    return s;
}

/* A JSON number's own text, read by the sampler's rule (docs/sampling.md §1:
 * the binary32 nearest the decimal, as `cis2 run --temperature` reads it). */
static int num_text(const json_doc *d, uint32_t v, char *buf, size_t cap)
{
    if (d->nodes[v].type != JSON_NUMBER || d->nodes[v].len >= cap) return 1;
    memcpy(buf, d->src + d->nodes[v].start, d->nodes[v].len);
    buf[d->nodes[v].len] = 0;
    return 0;
}

/* "temperature", "top_k", "top_p", "min_p", "seed" (f[6] .. f[10]) into
 * rq->smp, with `cis2 run`'s rules: temperature 0 or absent is greedy, and
 * the other four are refused then rather than ignored. */
static int sampling(const json_doc *d, const uint32_t *f, cis2_request *rq, char *err)
{
    cis2_sampler *s = &rq->smp;
    char t[64], e[CIS2_ERR_LEN];
    memset(s, 0, sizeof *s);
    if (f[6] != JSON_NONE && (num_text(d, f[6], t, sizeof t) || smp_parse_num(t, &s->temperature) ||
                              cis2_sampler_check(s, e)))
        FAIL("field \"temperature\" must be 0 or a normal number above 0 (a binary32)");
    s->top_p = 1.0f;
    for (int k = 7; k <= 10; k++)
        if (f[k] != JSON_NONE && s->temperature == 0.0f)
            FAIL("field \"%s\" needs \"temperature\" above 0 (temperature 0 is the greedy "
                 "argmax, which has no %s)",
                 FIELDS[k], FIELDS[k]);
    if (s->temperature == 0.0f) {
        s->top_p = 0.0f; /* greedy: the all-zero sampler, as a parsed v1 receipt gives */
        return 0;
    }
    if (f[7] != JSON_NONE && get_int(d, f[7], "top_k", 0, 2147483647, &s->top_k, err)) return 1;
    float *pm[2] = { &s->top_p, &s->min_p };
    for (int k = 8; k <= 9; k++)
        if (f[k] != JSON_NONE &&
            (num_text(d, f[k], t, sizeof t) || smp_parse_num(t, pm[k - 8]) || *pm[k - 8] > 1.0f ||
             (*pm[k - 8] != 0.0f && (cis2_f2u(*pm[k - 8]) & 0x7F800000u) == 0)))
            FAIL("field \"%s\" must be a number in [0, 1] (0 or a normal binary32)", FIELDS[k]);
    if (f[10] != JSON_NONE && (num_text(d, f[10], t, sizeof t) || smp_parse_seed(t, &s->seed)))
        FAIL("field \"seed\" must be an integer from 0 to 18446744073709551615");
    if (f[10] == JSON_NONE) s->seed = cis2_request_derived_seed(rq->id, rq->id_len);
    if (cis2_sampler_check(s, e)) FAIL("%s", e);
    return 0;
}

int cis2_request_from_json(const json_doc *d, uint32_t obj, const cis2_model *m,
                           const cis2_request_defaults *df, cis2_request *rq, char *err)
{
    memset(rq, 0, sizeof *rq);
    rq->max_tokens = df->max_tokens;
    rq->stop_at_eos = df->stop_at_eos;
    if (d->nodes[obj].type != JSON_OBJECT) FAIL("expected a JSON object");
    /* the id first, so that every later error can still name it */
    int dups = 0;
    uint32_t v = json_get(d, obj, "id", &dups);
    if (v != JSON_NONE && dups == 1 && d->nodes[v].type == JSON_STRING &&
        !(rq->id = json_str_dup(d, v, &rq->id_len)))
        OOM();
    for (uint32_t k = d->nodes[obj].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next) {
        int known = 0;
        for (int f = 0; f < N_FIELDS; f++) known |= json_str_eq(d, k, FIELDS[f]);
        if (!known) {
            char *name = json_str_dup(d, k, NULL);
            if (!name) OOM();
            cis2_sb sb = { 0 };
            cis2_sb_json_str(&sb, name, strlen(name));
            free(name);
            if (!sb.b) OOM();
            /* at most 80 bytes of the quoted name, cut between two characters
             * (a cut inside one would print as U+FFFD, a character the line
             * does not hold) */
            int cut = sb.b ? (int)strlen(sb.b) : 1;
            if (cut > 80) {
                cut = 80;
                while (cut > 0 && ((unsigned char)sb.b[cut] & 0xC0) == 0x80) cut--;
            }
            snprintf(err, CIS2_ERR_LEN,
                     "unknown field %.*s (expected id, prompt, prompt_ids or messages, "
                     "max_tokens, stop_at_eos, temperature, top_k, top_p, min_p, seed)",
                     cut, sb.b ? sb.b : "?");
            cis2_sb_free(&sb);
            return 1;
        }
    }
    uint32_t f[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) {
        f[i] = json_get(d, obj, FIELDS[i], &dups);
        if (dups > 1) FAIL("field \"%s\" appears more than once", FIELDS[i]);
    }
    if (f[0] == JSON_NONE) FAIL("field \"id\" is missing");
    if (!rq->id) FAIL("field \"id\" must be a string");
    if (rq->id_len == 0) FAIL("field \"id\" is empty");
    if ((f[1] != JSON_NONE) + (f[2] != JSON_NONE) + (f[5] != JSON_NONE) != 1)
        FAIL("give exactly one of \"prompt\", \"prompt_ids\" or \"messages\"");
    if (f[3] != JSON_NONE &&
        get_int(d, f[3], "max_tokens", 1, CIS2_BATCH_MAX_TOKENS, &rq->max_tokens, err))
        return 1;
    if (f[4] != JSON_NONE) {
        int t = d->nodes[f[4]].type;
        if (t != JSON_TRUE && t != JSON_FALSE) FAIL("field \"stop_at_eos\" must be true or false");
        rq->stop_at_eos = t == JSON_TRUE;
    }
    if (sampling(d, f, rq, err)) return 1;
    const cis2_config *c = cis2_model_config(m);
    int rc;
    const char *field = FIELDS[f[1] != JSON_NONE ? 1 : f[2] != JSON_NONE ? 2 : 5];
    rq->field = field;
    char e[CIS2_ERR_LEN];
    const cis2_tokenizer *t = cis2_model_tokenizer(m, e);
    if (f[2] != JSON_NONE) rc = get_ids(d, f[2], c->vocab, rq, err);
    else if (!t) FAIL("field \"%s\" needs the model's tokenizer: %s", field, e);
    else rc = f[1] != JSON_NONE ? encode(d, f[1], t, rq, err) : chat(d, f[5], t, df, rq, err);
    if (rc) return rc;
    /* positions 0 .. n_ids + max_tokens - 2 are computed (the last pick is never fed);
     * checked before the ids are decoded, which costs memory for a line refused anyway */
    if ((int64_t)rq->n_ids + rq->max_tokens - 1 > c->max_pos)
        FAIL("prompt (%d tokens) + max_tokens %d exceeds max_position_embeddings = %d", rq->n_ids,
             rq->max_tokens, c->max_pos);
    /* the receipt's prompt-hex: the bytes the ids decode to, never empty
     * (cis2_receipt_prompt_bytes, as `cis2 run --receipt` writes it; for an
     * NFC-normalizing tokenizer, the NFC form of a text or chat prompt) */
    if (!t) FAIL("field \"%s\": a receipt needs the bytes the ids decode to: %s", field, e);
    if ((rc = cis2_receipt_prompt_bytes(t, rq->ids, rq->n_ids, &rq->prompt, &rq->prompt_len, e)))
        FAIL_RC(rc, "field \"%s\": %s", field, e);
    if (rq->prompt_len == 0)
        FAIL("field \"%s\": the ids decode to no bytes (a receipt's prompt-hex may not be empty)",
             field);
    return 0;
}

int cis2_request_parse(const char *text, size_t len, const cis2_model *m,
                       const cis2_request_defaults *df, cis2_request *rq, char *err)
{
    memset(rq, 0, sizeof *rq);
    json_doc d = { 0 };
    int rc = cis2_json_line_parse(&d, text, len, err);
    if (rc) return rc;
    rc = cis2_request_from_json(&d, 0, m, df, rq, err);
    json_free(&d);
    return rc;
}

void cis2_request_free(cis2_request *rq)
{
    free(rq->id);
    free(rq->ids);
    free(rq->prompt);
    memset(rq, 0, sizeof *rq);
}
