/* The HTTP side of `cis2 serve`, on libmicrohttpd (one thread per
 * connection, so a handler may block on its job): routing, the API key,
 * request-body limits, OpenAI-style errors, server-sent events for
 * `stream: true`, the page at /, and the browser verifier at /verifier/.
 * A client that goes away is noticed (a failed write, or the socket's EOF
 * while waiting) and its sequence is cancelled, freeing the slot. Built
 * without libmicrohttpd (cross builds), serve_http_start says so. */
#include "cli/serve.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef CIS2_HAVE_MHD
int serve_http_available(char *err)
{
    snprintf(err, CIS2_ERR_LEN,
             "this cis2 was built without libmicrohttpd (Debian: libmicrohttpd-dev; make MHD=1)");
    return 0;
}
int serve_http_start(serve_http **h, const serve_http_opts *o, serve_sched *s,
                     const serve_model_info *mi, const cis2_tokenizer *t, const serve_limits *lim,
                     int *port_out, char *err)
{
    *h = NULL;
    serve_http_available(err);
    return 2;
}
void serve_http_refuse_new(serve_http *h) {}
void serve_http_drain(serve_http *h, int timeout_ms) {}
void serve_http_counts(serve_http *h, long long *refused, long long *timed_out)
{
    *refused = *timed_out = 0;
}
void serve_http_stop(serve_http *h) {}
#else
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>

int serve_http_available(char *err) { return 1; }

struct serve_http {
    struct MHD_Daemon *d;
    serve_http_opts o;
    serve_sched *s;
    serve_model_info mi;
    const cis2_tokenizer *t;
    serve_limits lim;
    long long started;
    uint64_t id_seed;
    atomic_ullong n_ids;
    atomic_int in_flight; /* requests whose response is not completely sent yet */
    atomic_int draining;  /* shutting down: new requests get a 503 */
    atomic_llong refused; /* connections refused over the connection limits */
    serve_guard *guard;   /* the request deadline (serve_guard.c) */
    /* libmicrohttpd parses the request in place in its read buffer (0.9.75,
     * the version this was checked on): the framing checks that rely on
     * where it leaves the request line's and the headers' pieces are on */
    int in_place;
};

/* One per connection (libmicrohttpd's socket context). */
typedef struct {
    serve_conn *g;  /* its entry in the deadline guard */
    int target_nul; /* the current request's target decoded to a NUL byte */
} conn_ctx;

enum { R_NONE, R_PAGE, R_HEALTH, R_MODELS, R_MODEL, R_COMPLETIONS, R_CHAT, R_VERIFY, R_VERIFIER };

/* One per request, made by on_uri when its request line is in. */
typedef struct {
    int started; /* its headers are in: the access handler has seen it */
    int route;
    const char *raw_uri; /* the request target as sent (in libmicrohttpd's buffer) */
    size_t raw_len;      /* its length up to the first NUL byte */
    cis2_sb body;
} req_ctx;

/* ------------------------------------------------------------ responses */
/* `allow`: the methods the path takes (a 405 must list them, RFC 9110
 * §15.5.6); `close`: the connection ends after this response (a request whose
 * framing cannot be trusted). */
static enum MHD_Result send_buf(struct MHD_Connection *c, int status, const char *type,
                                const void *p, size_t n, int copy, const char *retry_after,
                                const char *allow, int close)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        n, (void *)p, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (allow) MHD_add_response_header(r, "Allow", allow);
    if (close) MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, cis2_sb *sb,
                                 const char *retry_after, int close)
{
    size_t n;
    char *b = cis2_sb_take(sb, &n);
    if (!b) return MHD_NO; /* out of memory: drop the connection */
    enum MHD_Result rc = send_buf(c, status, "application/json", b, n, 1, retry_after, NULL, close);
    free(b);
    return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *c, const serve_err *e, int close)
{
    cis2_sb sb = { 0 };
    serve_json_error(&sb, e);
    return send_json(c, e->status, &sb, e->status == 503 ? "1" : NULL, close);
}

static enum MHD_Result fail(struct MHD_Connection *c, int status, const char *param,
                            const char *code, const char *msg)
{
    serve_err e;
    serve_fail(&e, status, param, code, "%s", msg);
    return send_error(c, &e, 0);
}

/* A method the path does not take: 405, with the ones it does in Allow. */
static enum MHD_Result refuse_method(struct MHD_Connection *c, int want_post)
{
    serve_err e;
    serve_fail(&e, 405, NULL, NULL, "%s", want_post ? "use POST" : "use GET");
    cis2_sb sb = { 0 };
    serve_json_error(&sb, &e);
    size_t n;
    char *b = cis2_sb_take(&sb, &n);
    if (!b) return MHD_NO;
    enum MHD_Result rc =
        send_buf(c, 405, "application/json", b, n, 1, NULL, want_post ? "POST" : "GET, HEAD", 0);
    free(b);
    return rc;
}

/* The peer closed its end (EOF or an error on a peek), checked while we wait. */
static int peer_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void make_id(serve_http *h, const char *prefix, char out[48])
{
    unsigned long long k = atomic_fetch_add(&h->n_ids, 1);
    snprintf(out, 48, "%s-%016llx%08llx", prefix, (unsigned long long)h->id_seed,
             k & 0xFFFFFFFFull);
}

/* ------------------------------------------------------------ auth */
static int auth_ok(serve_http *h, struct MHD_Connection *c)
{
    if (!h->o.api_keys) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    /* RFC 9110 §11.1: the scheme is case-insensitive, and one or more spaces follow it. */
    if (!a || strncasecmp(a, "Bearer ", 7) != 0) return 0;
    for (a += 7; *a == ' ';) a++;
    size_t al = strlen(a);
    int ok = 0;
    for (int i = 0; i < h->o.n_api_keys; i++) { /* constant time in the key's bytes */
        const char *k = h->o.api_keys[i];
        size_t kl = strlen(k);
        unsigned diff = (unsigned)(al != kl);
        for (size_t j = 0; j < kl; j++) diff |= (unsigned char)(k[j] ^ (j < al ? a[j] : 0));
        ok |= diff == 0;
    }
    return ok;
}

/* ------------------------------------------------------- completions */
typedef struct {
    serve_http *h;
    int n; /* choices: one job (sequence) each */
    serve_job *j[SERVE_MAX_N];
    cis2_sampler smp[SERVE_MAX_N]; /* choice i's: the request's, seed + i */
    int fin[SERVE_MAX_N];          /* its final chunk is out */
    int sent[SERVE_MAX_N];         /* its tokens whose log-probabilities are out */
    size_t offset[SERVE_MAX_N];    /* text_offset of its next token (completions) */
    serve_detok dt[SERVE_MAX_N];   /* the text before it, for that offset */
    struct MHD_Connection *c;
    char id[48];
    long long created;
    int chat; /* /v1/chat/completions: chat.completion objects and chunks */
    int include_usage, done;
    int sampled; /* temperature above 0: the seed is in every object */
    uint64_t seed;
    int logprobs, top_k;
    int n_fin, gen_total; /* choices finished, their tokens */
    char *prompt_bytes;
    size_t prompt_len;
    cis2_sb out; /* SSE bytes not yet handed to libmicrohttpd */
    size_t off;
    double last_out; /* ms: a comment line keeps a silent stream alive */
    double ping_ms;  /* silence after which one is sent */
} stream_ctx;

/* A stream silent this long (queued, or a long prefill) gets a comment line.
 * sse_read blocks libmicrohttpd's connection thread while it waits, and on
 * its return libmicrohttpd closes a connection whose last send is older than
 * the idle timeout (--timeout) before sending what it returned: a stream
 * silent that long would lose its first text, or the shutdown's error event,
 * and end with no event at all. So it is never left silent for a third of
 * the timeout (the wait below adds at most a quarter second). */
#define SSE_PING_MS 15000.0
static double ping_interval_ms(int idle_timeout_s)
{
    double third = idle_timeout_s * 1000.0 / 3;
    return idle_timeout_s > 0 && third < SSE_PING_MS ? third : SSE_PING_MS;
}

static const char *finish_name(int f) { return f == SERVE_FINISH_STOP ? "stop" : "length"; }

/* The response object (or stream chunk, when chunk) with choice `index`, up
 * to its choices, left open: text_completion, or chat.completion whose first
 * chunk carries the role. A sampled request's objects carry its seed. */
static void head(const stream_ctx *st, cis2_sb *sb, int chunk, int role, int index,
                 const char *text, size_t len, const char *logprobs, const char *finish,
                 const char *extra)
{
    serve_json_open(sb, st->id,
                    st->chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                             : "text_completion",
                    st->created, st->h->mi.model_id, st->sampled ? &st->seed : NULL);
    if (st->chat)
        serve_json_chat_choice(sb, chunk, index, role, text, len, logprobs, finish, extra);
    else
        serve_json_completion_choice(sb, index, text ? text : "", text ? len : 0, logprobs, finish,
                                     extra);
    cis2_sb_put(sb, "]", 1);
}

/* The end of a chunk that is not the usage-only one. With
 * stream_options.include_usage, OpenAI gives every such chunk "usage": null
 * and the usage only in the extra chunk before [DONE]: a client that adds up
 * the usage of every chunk (LangChain's AIMessageChunk does) would otherwise
 * count the tokens twice. */
static void chunk_end(const stream_ctx *st, cis2_sb *sb)
{
    if (st->include_usage) cis2_sb_str(sb, ",\"usage\":null");
    cis2_sb_str(sb, "}\n\n");
}

/* Choice i's tokens from st->sent[i] up to `to` with their log-probabilities,
 * in the endpoint's shape, into lp (left empty when not asked for). */
static void logprobs_json(stream_ctx *st, int i, int to, cis2_sb *lp)
{
    if (!st->logprobs) return;
    const int32_t *ids;
    const float *l;
    const cis2_logprob *top;
    int n = serve_job_tokens(st->h->s, st->j[i], &ids, &l, &top);
    if (to > n) to = n;
    int bad = st->chat
                  ? serve_json_logprobs_chat(lp, st->h->t, ids, l, top, st->top_k, st->sent[i], to)
                  : serve_json_logprobs_legacy(lp, st->h->t, ids, l, top, st->top_k, st->sent[i],
                                               to, &st->dt[i], &st->offset[i]);
    if (bad) lp->oom = 1;
    st->sent[i] = to;
}

/* The cis2 object of a finished choice. */
static void cis2_obj(stream_ctx *st, cis2_sb *sb, int i, const cis2_result *r)
{
    if (serve_json_cis2(sb, &st->h->mi, r, st->prompt_bytes, st->prompt_len, &st->smp[i]))
        sb->oom = 1;
}

/* The final events of a finished choice: its last chunk (finish_reason, the
 * log-probabilities not sent yet, the cis2 object: top-level for one choice,
 * in the choice for several; usage with the last choice to finish — null when
 * the usage-only chunk follows —), then, after the last, the usage-only
 * chunk when asked for and [DONE]; or an error event, which ends the stream. */
static void sse_final(stream_ctx *st, int i)
{
    serve_http *h = st->h;
    serve_err e;
    if (serve_job_error(st->j[i], &e)) {
        cis2_sb_str(&st->out, "data: ");
        serve_json_error(&st->out, &e);
        cis2_sb_str(&st->out, "\n\n");
        st->done = 1;
        return;
    }
    const char *text;
    size_t tl;
    int finish;
    const cis2_result *r = serve_job_result(st->j[i], &text, &tl, &finish);
    st->fin[i] = 1;
    st->n_fin++;
    st->gen_total += r->n_gen;
    const int last = st->n_fin == st->n;
    cis2_sb lp = { 0 }, extra = { 0 };
    logprobs_json(st, i, r->n_gen, &lp);
    if (st->n > 1) {
        cis2_sb_str(&extra, ",\"cis2\":");
        cis2_obj(st, &extra, i, r);
    }
    cis2_sb_str(&st->out, "data: ");
    head(st, &st->out, 1, 0, i, NULL, 0, st->logprobs ? lp.b : NULL, finish_name(finish),
         st->n > 1 ? extra.b : NULL);
    if (lp.oom || extra.oom) st->out.oom = 1;
    cis2_sb_free(&lp);
    cis2_sb_free(&extra);
    if (st->include_usage) cis2_sb_str(&st->out, ",\"usage\":null");
    else if (last) {
        cis2_sb_put(&st->out, ",", 1);
        serve_json_usage(&st->out, r->n_prompt, st->gen_total);
    }
    if (st->n == 1) {
        cis2_sb_str(&st->out, ",\"cis2\":");
        cis2_obj(st, &st->out, i, r);
    }
    cis2_sb_str(&st->out, "}\n\n");
    if (!last) return;
    if (st->include_usage) {
        cis2_sb_printf(&st->out,
                       "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", st->id,
                       st->chat ? "chat.completion.chunk" : "text_completion", st->created);
        cis2_sb_json_str(&st->out, h->mi.model_id, strlen(h->mi.model_id));
        if (st->sampled) cis2_sb_printf(&st->out, ",\"seed\":%llu", (unsigned long long)st->seed);
        cis2_sb_str(&st->out, ",\"choices\":[],");
        serve_json_usage(&st->out, r->n_prompt, st->gen_total);
        cis2_sb_str(&st->out, "}\n\n");
    }
    cis2_sb_str(&st->out, "data: [DONE]\n\n");
    st->done = 1;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_ctx *st = cls;
    for (;;) {
        if (st->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (st->off < st->out.len) {
            size_t n = st->out.len - st->off < max ? st->out.len - st->off : max;
            memcpy(buf, st->out.b + st->off, n);
            st->off += n;
            return (ssize_t)n;
        }
        if (st->done) return MHD_CONTENT_READER_END_OF_STREAM;
        st->out.len = st->off = 0;
        /* The choices step together: wait on the first one still running,
         * then take what the others have. */
        int waited = 0;
        for (int i = 0; i < st->n && !st->done; i++) {
            if (st->fin[i]) continue;
            cis2_sb delta = { 0 };
            int fin = serve_job_wait(st->h->s, st->j[i], waited ? 0 : 250, &delta);
            waited = 1;
            if (delta.len) { /* one chunk per wake-up: a token's text, or a few when we lag */
                cis2_sb lp = { 0 };
                const int32_t *ids;
                const float *l;
                const cis2_logprob *top;
                logprobs_json(st, i, serve_job_tokens(st->h->s, st->j[i], &ids, &l, &top), &lp);
                cis2_sb_str(&st->out, "data: ");
                head(st, &st->out, 1, 0, i, delta.b, delta.len, st->logprobs ? lp.b : NULL, NULL,
                     NULL);
                chunk_end(st, &st->out);
                if (lp.oom) st->out.oom = 1;
                cis2_sb_free(&lp);
            }
            cis2_sb_free(&delta);
            if (fin) sse_final(st, i);
        }
        if (st->done) {
        } else if (st->out.len == 0 && peer_gone(st->c)) {
            return MHD_CONTENT_READER_END_WITH_ERROR; /* sse_free cancels the jobs */
        } else if (st->out.len == 0 && cis2_now_ms() - st->last_out > st->ping_ms) {
            cis2_sb_str(&st->out, ": ping\n\n"); /* queued for a slot */
        }
        if (st->out.len) st->last_out = cis2_now_ms();
    }
}

static void sse_free(void *cls)
{
    stream_ctx *st = cls;
    for (int i = 0; i < st->n; i++) serve_job_release(st->h->s, st->j[i]);
    cis2_sb_free(&st->out);
    free(st->prompt_bytes);
    free(st);
}

/* Chat messages rendered with the model's template (the generation prompt
 * added), then tokenized, as `cis2 run --chat` does. */
static int chat_ids(serve_http *h, const serve_completion_req *q, int32_t **ids, int *n,
                    serve_err *e)
{
    char err[CIS2_ERR_LEN], *text;
    size_t tl;
    if (!h->mi.chat)
        return serve_fail(e, 400, "messages", "chat_template_unavailable",
                          "messages: this server has no chat template for its model (the server "
                          "can be started with --chat-format chatml)");
    cis2_chat_opts co = { 1, q->chat_kwargs, q->chat_kwargs_len, NULL };
    if (cis2_chat_render_opts(h->mi.chat, q->msgs, q->n_msgs, &co, h->t, &text, &tl, err))
        return serve_fail(e, 400, strstr(err, "kwargs") ? "chat_template_kwargs" : "messages", NULL,
                          "%s", err);
    int rc = cis2_tokenizer_encode(h->t, text, tl, ids, n, err);
    free(text);
    return rc ? serve_fail(e, 400, "messages", NULL, "messages: %s", err) : 0;
}

/* The prompt's ids (text and chat prompts tokenized here) and the receipt's
 * prompt-hex: the bytes the ids decode to (cis2_receipt_prompt_bytes), as
 * `cis2 run` writes it, so that verification, which decodes the ids, agrees
 * (for an NFC tokenizer, the NFC form of the text). */
static int prompt_ids(serve_http *h, serve_completion_req *q, int32_t **ids, int *n, char **bytes,
                      size_t *blen, serve_err *e)
{
    char err[CIS2_ERR_LEN];
    const char *param = q->msgs ? "messages" : "prompt";
    *bytes = NULL;
    *blen = 0;
    if (!h->t)
        return serve_fail(e, 400, param, NULL,
                          "%s: this model's tokenizer.json cannot be used here%s", param,
                          q->ids ? ", and a receipt needs the bytes the ids decode to"
                                 : "; send token ids to /v1/completions");
    if (q->ids) {
        *ids = q->ids;
        *n = q->n_ids;
        q->ids = NULL;
    } else if (q->msgs) {
        if (chat_ids(h, q, ids, n, e)) return 1;
    } else if (cis2_tokenizer_encode(h->t, q->prompt, q->prompt_len, ids, n, err)) {
        return serve_fail(e, 400, param, NULL, "prompt: %s", err);
    }
    if (*n == 0) return serve_fail(e, 400, param, NULL, "%s: encodes to no tokens", param);
    if (cis2_receipt_prompt_bytes(h->t, *ids, *n, bytes, blen, err))
        return serve_fail(e, 400, param, NULL, "%s: %s", param, err);
    if (*blen == 0) /* never empty: a peer's strict receipt parser rejects it */
        return serve_fail(e, 400, param, NULL,
                          "%s: the token ids decode to no bytes (a receipt's prompt-hex may not "
                          "be empty)",
                          param);
    return 0;
}

/* The non-streamed response: every choice, the usage of all, and the cis2
 * object (top-level for one choice, as always; in each choice for several). */
static int full_response(stream_ctx *st, cis2_sb *sb, serve_err *e)
{
    for (int i = 0; i < st->n; i++)
        if (serve_job_error(st->j[i], e)) return 1;
    serve_json_open(sb, st->id, st->chat ? "chat.completion" : "text_completion", st->created,
                    st->h->mi.model_id, st->sampled ? &st->seed : NULL);
    const cis2_result *r = NULL;
    int gen = 0;
    for (int i = 0; i < st->n; i++) {
        const char *text;
        size_t tl;
        int finish;
        r = serve_job_result(st->j[i], &text, &tl, &finish);
        gen += r->n_gen;
        cis2_sb lp = { 0 }, extra = { 0 };
        logprobs_json(st, i, r->n_gen, &lp);
        if (st->n > 1) {
            cis2_sb_str(&extra, ",\"cis2\":");
            cis2_obj(st, &extra, i, r);
        }
        if (i) cis2_sb_put(sb, ",", 1);
        const char *l = st->logprobs ? lp.b : NULL, *x = st->n > 1 ? extra.b : NULL;
        if (st->chat) serve_json_chat_choice(sb, 0, i, 1, text, tl, l, finish_name(finish), x);
        else serve_json_completion_choice(sb, i, text, tl, l, finish_name(finish), x);
        if (lp.oom || extra.oom) sb->oom = 1;
        cis2_sb_free(&lp);
        cis2_sb_free(&extra);
    }
    cis2_sb_str(sb, "],");
    serve_json_usage(sb, r->n_prompt, gen);
    if (st->n == 1) {
        cis2_sb_str(sb, ",\"cis2\":");
        cis2_obj(st, sb, 0, r);
    }
    cis2_sb_put(sb, "}", 1);
    return 0;
}

/* POST /v1/completions, or /v1/chat/completions when chat. */
static enum MHD_Result do_completions(serve_http *h, struct MHD_Connection *c, req_ctx *rq,
                                      int chat)
{
    serve_completion_req q;
    serve_err e;
    const char *body = rq->body.b ? rq->body.b : "";
    if (chat ? serve_parse_chat(body, rq->body.len, &h->lim, &q, &e)
             : serve_parse_completion(body, rq->body.len, &h->lim, &q, &e))
        return send_error(c, &e, 0);
    int32_t *ids = NULL;
    int n = 0;
    char *bytes = NULL, err[CIS2_ERR_LEN];
    size_t blen = 0;
    int perr = prompt_ids(h, &q, &ids, &n, &bytes, &blen, &e);
    if (!perr && q.max_tokens == 0) /* chat without max_tokens: the rest of the context */
        q.max_tokens = n <= h->lim.ctx ? h->lim.ctx - n + 1 : 1;
    stream_ctx *st = NULL;
    int bad = perr || serve_check_context(n, q.max_tokens, q.max_param,
                                          chat ? "messages" : "prompt", &h->lim, &e);
    if (!bad && !(st = calloc(1, sizeof *st)))
        bad = serve_fail(&e, 500, NULL, NULL, "out of memory");
    if (bad) {
        free(ids);
        free(bytes);
        serve_completion_req_free(&q);
        return send_error(c, &e, 0);
    }
    st->h = h;
    st->c = c;
    st->chat = chat;
    st->n = q.n;
    st->created = (long long)time(NULL);
    st->include_usage = q.include_usage;
    st->sampled = q.smp.temperature > 0.0f;
    st->seed = q.smp.seed;
    st->logprobs = q.logprobs;
    st->top_k = q.top_logprobs;
    st->prompt_bytes = bytes;
    st->prompt_len = blen;
    st->last_out = cis2_now_ms();
    st->ping_ms = ping_interval_ms(h->o.idle_timeout);
    make_id(h, chat ? "chatcmpl" : "cmpl", st->id);
    /* n sequences, submitted together so that they join the batch at one step */
    int rc = 0, got = 0;
    for (int i = 0; i < q.n && !rc; i++) {
        st->smp[i] = q.smp;
        if (st->sampled) st->smp[i].seed = q.smp.seed + (uint64_t)i; /* mod 2^64 */
        serve_gen_params p = { ids,
                               n,
                               bytes,
                               blen,
                               q.max_tokens,
                               !q.ignore_eos,
                               { (const char *const *)q.stop, q.stop_len, q.n_stop },
                               &st->smp[i],
                               q.logprobs,
                               q.top_logprobs };
        rc = serve_sched_submit(h->s, &p, &st->j[i], err);
        if (!rc) got++;
    }
    int stream = q.stream;
    free(ids);
    serve_completion_req_free(&q);
    if (rc) {
        st->n = got; /* the ones queued are cancelled */
        sse_free(st);
        serve_fail(&e, 503, NULL, rc == SERVE_BUSY ? "server_busy" : "shutting_down", "%s", err);
        return send_error(c, &e, 0);
    }
    if (stream) {
        if (chat) /* OpenAI's first chunk of each choice: the role, empty content */
            for (int i = 0; i < st->n; i++) {
                cis2_sb_str(&st->out, "data: ");
                head(st, &st->out, 1, 1, i, "", 0, NULL, NULL, NULL);
                chunk_end(st, &st->out);
            }
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, st, sse_free);
        if (!r) {
            sse_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-store");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        enum MHD_Result mr = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return mr;
    }
    /* Not streaming: wait here (this connection's own thread), watching the peer. */
    for (int i = 0; i < st->n; i++)
        while (!serve_job_wait(h->s, st->j[i], 250, NULL))
            if (peer_gone(c)) {
                sse_free(st); /* cancels the jobs: their slots are free at the next step */
                return MHD_NO;
            }
    enum MHD_Result mr;
    cis2_sb sb = { 0 };
    if (full_response(st, &sb, &e)) {
        cis2_sb_free(&sb);
        mr = send_error(c, &e, 0);
    } else {
        mr = send_json(c, 200, &sb, NULL, 0);
    }
    sse_free(st);
    return mr;
}

/* ------------------------------------------------------------ verify */
static enum MHD_Result do_verify(serve_http *h, struct MHD_Connection *c, req_ctx *rq)
{
    serve_err e;
    char *text, err[CIS2_ERR_LEN];
    size_t tl;
    if (serve_parse_verify(rq->body.b ? rq->body.b : "", rq->body.len, &text, &tl, &e))
        return send_error(c, &e, 0);
    cis2_receipt rc;
    cis2_sampler smp; /* a v1 receipt: all zero, greedy (docs/sampling.md §6) */
    int prc = cis2_receipt_parse_sampled(text, tl, "receipt", &rc, &smp, err);
    free(text);
    if (prc) return fail(c, 400, "receipt", NULL, err);
    /* §3.4: positions 0 .. n_prompt + gen-toks - 2 are recomputed. Named as the
     * receipt's, not as the max_tokens of a completion this request is not. */
    long need = (long)rc.n_prompt + rc.gen_toks - 1;
    int bad = 0;
    if (rc.n_prompt < 1 || rc.gen_toks < 1)
        bad = serve_fail(&e, 400, "receipt", NULL, "receipt: no prompt or no generated tokens");
    else if (need > h->lim.ctx)
        bad = serve_fail(&e, 400, "receipt", "context_length_exceeded",
                         "receipt: the prompt (%d tokens) and gen-toks (%d) need %ld positions; "
                         "this server's context is %d",
                         rc.n_prompt, rc.gen_toks, need, h->lim.ctx);
    if (bad) {
        cis2_receipt_free(&rc);
        return send_error(c, &e, 0);
    }
    serve_job *j;
    int r = serve_sched_verify(h->s, &rc, &smp, &j, err);
    if (r) {
        cis2_receipt_free(&rc);
        return fail(c, 503, NULL, r == SERVE_BUSY ? "server_busy" : "shutting_down", err);
    }
    while (!serve_job_wait(h->s, j, 250, NULL))
        if (peer_gone(c)) {
            serve_job_release(h->s, j);
            return MHD_NO;
        }
    enum MHD_Result mr;
    const cis2_verdict *v = serve_job_verdict(j);
    int failed = serve_job_error(j, &e);
    if (!failed && !v) failed = serve_fail(&e, 500, NULL, NULL, "verification did not run");
    if (failed) {
        if (e.status < 500) snprintf(e.param, sizeof e.param, "receipt"); /* the receipt's fault */
        mr = send_error(c, &e, 0);
    } else {
        cis2_sb sb = { 0 };
        serve_json_verdict(&sb, v);
        mr = send_json(c, 200, &sb, NULL, 0);
    }
    serve_job_release(h->s, j);
    return mr;
}

/* ------------------------------------------------------- small routes */
static enum MHD_Result do_health(serve_http *h, struct MHD_Connection *c)
{
    serve_stats st;
    serve_sched_stats(h->s, &st);
    cis2_sb sb = { 0 };
    cis2_sb_printf(&sb,
                   "{\"status\":\"ok\",\"slots_total\":%d,\"slots_busy\":%d,\"queued\":%d,"
                   "\"queue_capacity\":%d,\"completed\":%lld,\"tokens_generated\":%lld,"
                   "\"connections_refused\":%lld,\"requests_timed_out\":%lld}",
                   st.max_batch, st.running, st.queued, st.queue_cap, st.completed, st.tokens,
                   (long long)atomic_load(&h->refused), serve_guard_timed_out(h->guard));
    return send_json(c, 200, &sb, NULL, 0);
}

static enum MHD_Result do_models(serve_http *h, struct MHD_Connection *c, const char *url, int one)
{
    if (one && strcmp(url + strlen("/v1/models/"), h->mi.model_id) != 0)
        return fail(c, 404, "model", "model_not_found", "no such model here");
    cis2_sb sb = { 0 };
    serve_json_models(&sb, &h->mi, h->started, one);
    return send_json(c, 200, &sb, NULL, 0);
}

/* /verifier/NAME: the wasm verifier's files (web/ after `make wasm`), by an
 * allow-list of names, never a path from the client. */
static enum MHD_Result do_verifier(serve_http *h, struct MHD_Connection *c, const char *url)
{
    static const char *const files[][2] = {
        { "index.html", "text/html; charset=utf-8" },
        { "app.js", "text/javascript" },
        { "cis2.js", "text/javascript" },
        { "worker.js", "text/javascript" },
        { "hash_worker.js", "text/javascript" },
        { "cis2.wasm", "application/wasm" },
    };
    const char *name = url + strlen("/verifier/");
    if (!*name) name = "index.html";
    if (!h->o.verifier_dir)
        return fail(c, 404, NULL, NULL,
                    "the browser verifier is not served here (start cis2 serve with "
                    "--verifier-dir web after make wasm)");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (strcmp(name, files[i][0])) continue;
        char path[4096], err[CIS2_ERR_LEN], *b;
        size_t n;
        snprintf(path, sizeof path, "%s/%s", h->o.verifier_dir, name);
        if (cis2_read_file_max(path, (size_t)64 << 20, &b, &n, err)) {
            /* The reason, with the server's path, goes to the operator only. */
            cis2_cli_note("serve", "GET /verifier/%s: %s", name, err);
            char m[160];
            snprintf(m, sizeof m, "the browser verifier's %s cannot be read here (make wasm?)",
                     name);
            return fail(c, 404, NULL, NULL, m);
        }
        enum MHD_Result rc = send_buf(c, 200, files[i][1], b, n, 1, NULL, NULL, 0);
        free(b);
        return rc;
    }
    return fail(c, 404, NULL, NULL, "no such file in the browser verifier");
}

/* The page (web/serve/, embedded at build time). */
typedef struct {
    const char *path, *type;
    const unsigned char *bytes;
    const size_t *len;
} page_asset;
static const page_asset *page_file(const char *url)
{
    static const page_asset pages[] = {
        { "/", "text/html; charset=utf-8", cis2_serve_index_html, &cis2_serve_index_html_len },
        { "/index.html", "text/html; charset=utf-8", cis2_serve_index_html,
          &cis2_serve_index_html_len },
        { "/serve.js", "text/javascript", cis2_serve_serve_js, &cis2_serve_serve_js_len },
        { "/sse.mjs", "text/javascript", cis2_serve_sse_mjs, &cis2_serve_sse_mjs_len },
    };
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++)
        if (!strcmp(url, pages[i].path)) return &pages[i];
    return NULL;
}

/* RFC 9110 §5.1, §5.6.2: a field name is a token: 1*tchar. */
static int field_name_ok(const char *k)
{
    if (!*k) return 0;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *k)))
            return 0;
    return 1;
}

/* libmicrohttpd 0.9.75 parses a header line in place: the name, the NUL that
 * replaced its colon, optional whitespace, the value. A continuation line
 * (obs-fold) is appended to the *name*, copied to a new block of its memory
 * pool ("Transfer-Encoding:" CRLF " chunked" becomes the field
 * "Transfer-Encodingchunked" with an empty value), so that name no longer
 * sits right before its value. */
static int folded(const char *key, const char *value, size_t limit)
{
    uintptr_t k = (uintptr_t)key + strlen(key) + 1, v = (uintptr_t)value;
    if (v < k || v - k > limit) return 1;
    for (const char *p = key + strlen(key) + 1; p < value; p++)
        if (*p != ' ' && *p != '\t') return 1;
    return 0;
}

typedef struct {
    const serve_http *h;
    int n_cl, n_te;
    const char *bad; /* the first field that cannot be trusted: why, or NULL */
} head_scan;

/* How many Content-Length and Transfer-Encoding fields the request has, and
 * whether a field's name or line cannot be trusted (RFC 9112 §5.1: "No
 * whitespace is allowed between the field name and colon"; a server MUST
 * reject such a request with 400, as a proxy in front may read the field
 * otherwise — "Transfer-Encoding : chunked" beside a Content-Length was
 * framed by the Content-Length here; §5.2: a server may reject obs-fold with
 * 400, which libmicrohttpd 0.9.75 glues into the field's name). */
static enum MHD_Result scan_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    head_scan *s = cls;
    if (!strcasecmp(key, "Content-Length")) s->n_cl++;
    if (!strcasecmp(key, "Transfer-Encoding")) s->n_te++;
    if (s->bad) return MHD_YES;
    if (!field_name_ok(key))
        s->bad = "a header field name holds whitespace or another character a name cannot have "
                 "(no space may come before the colon, RFC 9112 §5.1)";
    else if (s->h->in_place && folded(key, value ? value : key, (size_t)s->h->o.header_limit))
        s->bad = "a header field is continued on the next line (obsolete line folding, RFC 9112 "
                 "§5.2)";
    return MHD_YES;
}

/* RFC 9112 §6.3: several Content-Length fields make the body's end ambiguous
 * (libmicrohttpd would go by the first; a proxy in front may take another:
 * request smuggling), so the answer is 400 and the connection is closed. */
static enum MHD_Result refuse_content_length(struct MHD_Connection *c)
{
    serve_err e;
    serve_fail(&e, 400, NULL, NULL, "more than one Content-Length header");
    return send_error(c, &e, 1);
}

static int route_of(const char *url)
{
    if (page_file(url)) return R_PAGE;
    if (!strcmp(url, "/health")) return R_HEALTH;
    if (!strcmp(url, "/v1/models")) return R_MODELS;
    if (!strncmp(url, "/v1/models/", 11)) return R_MODEL;
    if (!strcmp(url, "/v1/completions")) return R_COMPLETIONS;
    if (!strcmp(url, "/v1/verify")) return R_VERIFY;
    if (!strncmp(url, "/verifier/", 10)) return R_VERIFIER;
    if (!strcmp(url, "/v1/chat/completions")) return R_CHAT;
    return R_NONE;
}

static conn_ctx *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The request target holds a NUL byte: decoded from %00 (on_unescape), or
 * sent raw, which libmicrohttpd cuts the target at — so that "/health%00x"
 * was routed as /health. With the in-place parse, the target as sent ends
 * right before the space that precedes the version. */
static int target_has_nul(const serve_http *h, struct MHD_Connection *c, const req_ctx *rq,
                          const char *version)
{
    const conn_ctx *x = conn_of(c);
    if (x && x->target_nul) return 1;
    return h->in_place && *version &&
           (uintptr_t)version != (uintptr_t)rq->raw_uri + rq->raw_len + 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    serve_http *h = cls;
    req_ctx *rq = *con_cls;
    if (!rq) return MHD_NO; /* on_uri was out of memory: drop the connection */
    /* The headers are in: route, method, auth and size before any body. */
    if (!rq->started) {
        rq->started = 1;
        atomic_fetch_add(&h->in_flight, 1);
        serve_err e;
        if (atomic_load(&h->draining)) {
            serve_fail(&e, 503, NULL, "shutting_down", "the server is shutting down");
            return send_error(c, &e, 1);
        }
        if (target_has_nul(h, c, rq, version)) {
            serve_fail(&e, 400, NULL, NULL, "the request target holds a NUL byte (%%00)");
            return send_error(c, &e, 1);
        }
        rq->route = route_of(url);
        head_scan hs = { h, 0, 0, NULL };
        MHD_get_connection_values(c, MHD_HEADER_KIND, scan_field, &hs);
        if (hs.bad) {
            serve_fail(&e, 400, NULL, NULL, "%s", hs.bad);
            return send_error(c, &e, 1);
        }
        if (hs.n_cl > 1) return refuse_content_length(c);
        if (hs.n_te) { /* the body's end must be unambiguous too: chunked, alone */
            const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
            /* RFC 9112 §6.1: both fields may be a smuggling attempt (a proxy in
             * front may go by the other one); libmicrohttpd would go by chunked
             * and keep the connection open for the next request. */
            if (hs.n_cl)
                serve_fail(&e, 400, NULL, NULL, "both Transfer-Encoding and Content-Length");
            /* Any other coding: libmicrohttpd would wait for a body it cannot
             * delimit until the idle timeout, and answer nothing. */
            else if (hs.n_te > 1 || !te || strcasecmp(te, "chunked"))
                serve_fail(&e, 501, NULL, NULL,
                           "Transfer-Encoding: only a single \"chunked\" is supported");
            else e.status = 0;
            if (e.status) return send_error(c, &e, 1);
        }
        /* HEAD is GET without the body (libmicrohttpd leaves it out): RFC 9110
         * §9.1 asks every server for it, and health checkers use it. */
        int post = !strcmp(method, "POST"), get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        if (rq->route == R_NONE) return fail(c, 404, NULL, NULL, "no such path");
        int want_post = rq->route == R_COMPLETIONS || rq->route == R_CHAT || rq->route == R_VERIFY;
        if (want_post ? !post : !get) return refuse_method(c, want_post);
        if (rq->route >= R_MODELS && rq->route <= R_VERIFY && !auth_ok(h, c))
            return fail(c, 401, NULL, "invalid_api_key",
                        "a valid API key is required: Authorization: Bearer KEY");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)h->o.max_body) {
            char m[128];
            snprintf(m, sizeof m, "the request body is larger than %d bytes", h->o.max_body);
            return fail(c, 413, NULL, "request_too_large", m);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (rq->body.len + *upload_data_size > (size_t)h->o.max_body)
            return MHD_NO; /* chunked past the limit: close the connection */
        cis2_sb_put(&rq->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return rq->body.oom ? MHD_NO : MHD_YES;
    }
    conn_ctx *x = conn_of(c); /* the whole request is in: its deadline is met */
    if (x) serve_guard_disarm(h->guard, x->g);
    switch (rq->route) {
    case R_PAGE: {
        const page_asset *a = page_file(url);
        return send_buf(c, 200, a->type, a->bytes, *a->len, 0, NULL, NULL, 0);
    }
    case R_HEALTH: return do_health(h, c);
    case R_MODELS: return do_models(h, c, url, 0);
    case R_MODEL: return do_models(h, c, url, 1);
    case R_COMPLETIONS: return do_completions(h, c, rq, 0);
    case R_CHAT: return do_completions(h, c, rq, 1);
    case R_VERIFY: return do_verify(h, c, rq);
    case R_VERIFIER: return do_verifier(h, c, url);
    default: return MHD_NO;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    serve_http *h = cls;
    req_ctx *rq = *con_cls;
    conn_ctx *x = conn_of(c); /* kept alive: the next request's deadline runs */
    if (x) serve_guard_arm(h->guard, x->g);
    if (!rq) return;
    if (rq->started) atomic_fetch_sub(&h->in_flight, 1);
    cis2_sb_free(&rq->body);
    free(rq);
    *con_cls = NULL;
}

/* A request line is in: its context, with the target as sent (before
 * libmicrohttpd splits off the query and decodes it in place). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    conn_ctx *x = conn_of(c);
    if (x) x->target_nul = 0;
    req_ctx *rq = calloc(1, sizeof *rq);
    if (rq) {
        rq->raw_uri = uri;
        rq->raw_len = strlen(uri);
    }
    return rq;
}

/* libmicrohttpd's own decoding of the path and of the query's names and
 * values (%XX), noting a NUL byte among the result: the path is used as a C
 * string, which would end there. */
static size_t on_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    size_t n = MHD_http_unescape(s);
    if (memchr(s, 0, n)) {
        conn_ctx *x = conn_of(c);
        if (x) x->target_nul = 1;
    }
    return n;
}

/* A connection opened or closed: its entry in the deadline guard. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    serve_http *h = cls;
    conn_ctx *x = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (x) serve_guard_remove(h->guard, x->g); /* before libmicrohttpd closes the fd */
        free(x);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    x = calloc(1, sizeof *x);
    if (x && ci) x->g = serve_guard_add(h->guard, ci->connect_fd);
    if (ci && (!x || !x->g)) shutdown(ci->connect_fd, SHUT_RDWR); /* no deadline: no service */
    *socket_context = x;
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
    serve_http *h = cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    /* A connection over --max-connections or --max-connections-per-ip: one
     * line each would let a flood of connections flood the log too; the
     * first is noted, every one counted (/health: connections_refused). */
    if (!strncmp(line, "Server reached connection limit", 31)) {
        if (atomic_fetch_add(&h->refused, 1) == 0)
            cis2_cli_note("serve",
                          "refused a connection over --max-connections (%d) or "
                          "--max-connections-per-ip (%d); further ones are counted in /health "
                          "(connections_refused), not logged",
                          h->o.max_connections, h->o.max_per_ip);
        return;
    }
    /* A client that went away in the middle of its request (or was closed by
     * the request deadline, which counts it): one line each is a line per
     * connection any client can open and drop. */
    if (!strncmp(line, "Connection socket is closed when reading request", 48) ||
        !strncmp(line, "Socket has been disconnected when reading request", 49) ||
        !strncmp(line, "Connection was closed by remote side with incomplete request", 60))
        return;
    cis2_cli_note("serve", "libmicrohttpd: %s", line); /* may quote what a client sent */
}

/* libmicrohttpd 0.9.x up to 0.9.75 (the version checked) parses in place. */
static int parses_in_place(void)
{
    unsigned a, b, v;
    const char *s = MHD_get_version();
    return s && sscanf(s, "%u.%u.%u", &a, &b, &v) == 3 && a == 0 && b == 9 && v <= 75;
}

int serve_http_start(serve_http **out, const serve_http_opts *o, serve_sched *s,
                     const serve_model_info *mi, const cis2_tokenizer *t, const serve_limits *lim,
                     int *port_out, char *err)
{
    *out = NULL;
    struct addrinfo hints = { 0 }, *ai = NULL;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    hints.ai_socktype = SOCK_STREAM;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai || !ai) {
        snprintf(err, CIS2_ERR_LEN, "--host %.100s: %s", o->host, gai ? gai_strerror(gai) : "?");
        return 1;
    }
    serve_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    h->o = *o;
    h->s = s;
    h->mi = *mi;
    h->t = t;
    h->lim = *lim;
    h->started = (long long)time(NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->id_seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
    h->in_place = parses_in_place();
    if (serve_guard_new(&h->guard, o->request_timeout * 1000, err)) {
        freeaddrinfo(ai);
        free(h);
        return 1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_log, h,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)o->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->idle_timeout,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_per_ip,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)o->header_limit, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_UNESCAPE_CALLBACK,
        on_unescape, h, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, CIS2_ERR_LEN,
                 "cannot listen on %.100s port %d (in use, or not an address "
                 "of this machine?)",
                 o->host, o->port);
        serve_guard_free(h->guard);
        free(h);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : o->port;
    *out = h;
    return 0;
}

void serve_http_refuse_new(serve_http *h)
{
    if (h) atomic_store(&h->draining, 1);
}

void serve_http_counts(serve_http *h, long long *refused, long long *timed_out)
{
    *refused = h ? atomic_load(&h->refused) : 0;
    *timed_out = h ? serve_guard_timed_out(h->guard) : 0;
}

void serve_http_drain(serve_http *h, int timeout_ms)
{
    struct timespec ts = { 0, 20 * 1000000L };
    for (int waited = 0; h && atomic_load(&h->in_flight) > 0 && waited < timeout_ms; waited += 20)
        nanosleep(&ts, NULL);
}

void serve_http_stop(serve_http *h)
{
    if (!h) return;
    MHD_stop_daemon(h->d); /* every connection closed, each removed from the guard */
    serve_guard_free(h->guard);
    free(h);
}
#endif
