/* `cis2 serve`, the OpenAI-style HTTP server, in its parts: the request parser
 * (serve_request.c), the response builders (serve_json.c), the text stream and
 * stop strings of one completion (serve_text.c), the scheduler that owns the
 * engine on one decode thread (serve_sched.c) and the libmicrohttpd glue
 * (serve_http.c). All of it is a client of the public API in cis2.h. */
#ifndef CIS2_SERVE_H
#define CIS2_SERVE_H
#include "cli/commands.h"

/* ------------------------------------------------------------ errors */
/* An OpenAI-style error object: {"error": {"message", "type", "param", "code"}}. */
typedef struct {
    int status;       /* HTTP status: 400, 401, 404, 405, 413, 500, 503 */
    const char *type; /* "invalid_request_error", "server_error", ... */
    const char *code; /* NULL (JSON null) or e.g. "context_length_exceeded" */
    char param[64];   /* "" = JSON null */
    char message[CIS2_ERR_LEN];
} serve_err;
/* Fill e; returns 1 so a parser can `return serve_fail(...)`. */
int serve_fail(serve_err *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ------------------------------------------------------ request parsing */
#define SERVE_MAX_STOP           4   /* OpenAI: up to 4 stop sequences */
#define SERVE_MAX_STOP_LEN       256 /* bytes per stop string */
#define SERVE_MAX_TOKENS_DEFAULT 16  /* OpenAI's default max_tokens for completions */
#define SERVE_MAX_N              16  /* choices per request */
#define SERVE_MAX_LOGPROBS       20  /* alternatives per token (OpenAI's top_logprobs bound) */

typedef struct {
    const char *model_id; /* the one model this server serves */
    int vocab;            /* prompt ids must be below it */
    int ctx;              /* positions per sequence: n_prompt + max_tokens - 1 <= ctx */
} serve_limits;

/* POST /v1/completions or /v1/chat/completions, validated. Exactly one of
 * prompt (text), ids and msgs is set: msgs for chat, never for completions. */
typedef struct {
    char *prompt; /* UTF-8 text (NUL-terminated), or NULL */
    size_t prompt_len;
    int32_t *ids; /* token ids, or NULL */
    int n_ids;
    cis2_chat_msg *msgs; /* chat messages (one block, strings inside), or NULL */
    int n_msgs;
    char *chat_kwargs; /* chat_template_kwargs: the JSON object's text, or NULL */
    size_t chat_kwargs_len;
    /* = n_gen (§3.4): exactly this many unless EOS or a stop string; 0 in a
     * chat request that gave none: the rest of the context (OpenAI's default) */
    int max_tokens;
    /* the member that gave max_tokens ("max_tokens", "max_completion_tokens"),
     * or NULL for the default: what a context error names */
    const char *max_param;
    int stream, include_usage, ignore_eos;
    /* docs/sampling.md's sampler (temperature 0: greedy); its seed is the
     * client's (seed_given) or the server's choice; choice i samples with
     * seed + i */
    cis2_sampler smp;
    int seed_given;
    int n;            /* choices, 1 .. SERVE_MAX_N */
    int logprobs;     /* per-token log-probabilities asked for */
    int top_logprobs; /* and this many alternatives each */
    int n_stop;
    char *stop[SERVE_MAX_STOP];
    size_t stop_len[SERVE_MAX_STOP];
} serve_completion_req;

/* Parse and validate a request body. Errors name the parameter (OpenAI's
 * `param`) in one line. Never reads past len; body need not be NUL-terminated. */
int serve_parse_completion(const char *body, size_t len, const serve_limits *lim,
                           serve_completion_req *r, serve_err *e);
/* The same for /v1/chat/completions: "messages" (system/user/assistant turns
 * with string content) instead of "prompt", max_completion_tokens as a
 * synonym of max_tokens, logprobs a boolean. */
int serve_parse_chat(const char *body, size_t len, const serve_limits *lim, serve_completion_req *r,
                     serve_err *e);
void serve_completion_req_free(serve_completion_req *r);
/* The context check once the prompt's token count is known (text prompts are
 * tokenized after parsing): n_prompt + max_tokens - 1 positions <= ctx. The
 * error names prompt_param ("prompt", or "messages" for chat) when the prompt
 * alone is too long, else max_param (NULL: max_tokens was the default). */
int serve_check_context(int n_prompt, int max_tokens, const char *max_param,
                        const char *prompt_param, const serve_limits *lim, serve_err *e);
/* POST /v1/verify: {"receipt": "CIS-2-RECEIPT v1\n..."}, or the receipt text
 * itself when the body does not start with '{'. *text is malloc'd. */
int serve_parse_verify(const char *body, size_t len, char **text, size_t *tlen, serve_err *e);

/* ------------------------------------------------- one completion's text */
/* The generated text as it grows, decoded from all ids so far; what may be
 * sent (never half a UTF-8 character, never the start of a possible stop
 * string) and where a stop string matched. */
typedef struct {
    const char *const *stop; /* borrowed */
    const size_t *stop_len;
    int n_stop;
} serve_stops;
/* Ids to text, one at a time: byte-level BPE text is the concatenation of the
 * tokens' bytes (§3.1.5), but one character's bytes may span several tokens,
 * and one token may end in the middle of a character and begin with the rest
 * of another. The text is exactly those bytes decoded as UTF-8 with one U+FFFD
 * for each maximal invalid subpart (Unicode §3.9, "U+FFFD substitution of
 * maximal subparts": Python's bytes.decode("utf-8", "replace"), WHATWG's
 * decoder): everything goes out at once except the bytes of a character still
 * incomplete at the end (at most 3), which wait for the next id (id < 0: the
 * end of the run, where they become U+FFFD). An id the tokenizer names no
 * token for (a model vocabulary larger than its tokenizer's) has no bytes, as
 * in cis2_receipt_prompt_bytes. */
typedef struct {
    unsigned char pending[3];
    int n;
} serve_detok;
void serve_detok_feed(serve_detok *d, const cis2_tokenizer *t, int32_t id, cis2_sb *out);
/* The earliest position in text[0..len) where a stop string starts, or -1. */
long serve_stop_find(const serve_stops *s, const char *text, size_t len);
/* How many bytes of text[0..len) may be sent now: not a trailing incomplete
 * UTF-8 sequence, not a suffix that is a prefix of a stop string. */
size_t serve_sendable(const serve_stops *s, const char *text, size_t len);

/* ------------------------------------------------------------ scheduler */
typedef struct serve_sched serve_sched;
typedef struct serve_job serve_job;
enum { SERVE_OK = 0, SERVE_BUSY = 2 };
enum { SERVE_FINISH_LENGTH = 0, SERVE_FINISH_STOP = 1 };

/* One completion to run; every array is copied by submit. */
typedef struct {
    const int32_t *prompt;
    int n_prompt;
    const char *prompt_bytes; /* the receipt's prompt-hex bytes */
    size_t prompt_len;
    int n_gen, stop_at_eos;
    serve_stops stops;
    const cis2_sampler *smp; /* NULL or temperature 0: greedy */
    int logprobs;            /* compute each step's log-probabilities (docs/sampling.md §9) */
    int top_logprobs;        /* and this many alternatives */
} serve_gen_params;

/* The engine (made with max_seqs = max_batch) and its model are used by the
 * decode thread only; queue_cap requests may wait for a slot. */
int serve_sched_new(serve_sched **s, cis2_engine *e, int max_batch, int queue_cap, char *err);
/* Fail every job (waiters wake with "shutting down"), stop and join the thread. */
void serve_sched_stop(serve_sched *s);
void serve_sched_free(serve_sched *s);
/* Queue work. SERVE_BUSY (no job made) when queue_cap requests already wait. */
int serve_sched_submit(serve_sched *s, const serve_gen_params *p, serve_job **j, char *err);
/* A verification is one more sequence in the batch (cis2_receipt_verify_begin,
 * the run, _finish): released or shut down, it stops between two steps.
 * *rc is moved in; smp (NULL or temperature 0: a v1 receipt) is its sampler. */
int serve_sched_verify(serve_sched *s, cis2_receipt *rc, const cis2_sampler *smp, serve_job **j,
                       char *err);
/* Wait at most timeout_ms for news: appends the next piece of sendable text
 * (what one decode step added) to out (may be NULL); returns 1 once the job is
 * finished and all its text has been taken. */
int serve_job_wait(serve_sched *s, serve_job *j, int timeout_ms, cis2_sb *out);
/* After serve_job_wait returned 1: 0 when it succeeded, else 1 with the error
 * in e (status, type, code: "shutting_down" when a shutdown ended it). */
int serve_job_error(const serve_job *j, serve_err *e);
/* A finished completion: its run (ids, digests), the full text, the finish reason. */
const cis2_result *serve_job_result(const serve_job *j, const char **text, size_t *len,
                                    int *finish);
const cis2_verdict *serve_job_verdict(const serve_job *j);
/* The ids generated so far and, when asked for, their log-probabilities and
 * top_logprobs alternatives each (arrays of the job, valid until it is
 * released): returns how many may be read. */
int serve_job_tokens(serve_sched *s, serve_job *j, const int32_t **ids, const float **lp,
                     const cis2_logprob **top);
/* The HTTP side is done with the job: a running one is cancelled (its slot
 * is freed at the next step). */
void serve_job_release(serve_sched *s, serve_job *j);

typedef struct {
    int max_batch, running, queued, queue_cap;
    long long completed, tokens;
} serve_stats;
void serve_sched_stats(serve_sched *s, serve_stats *st);

/* --------------------------------------------------------- JSON output */
typedef struct {
    const cis2_model *m;
    const char *model_id;
    /* /v1/chat/completions renders messages with this template; NULL when the
     * model has none cis2 renders (chat_err says why; chat requests get a 400) */
    const cis2_chat_template *chat;
    const char *chat_err;
} serve_model_info;
void serve_json_error(cis2_sb *sb, const serve_err *e);
/* The `cis2` object of a completion: ids, digests, CIS2_REF line, receipt;
 * for a sampled one (smp not NULL, temperature above 0) also its sampler and
 * seed, and the receipt is docs/sampling.md §6's v1+sampling form. */
int serve_json_cis2(cis2_sb *sb, const serve_model_info *mi, const cis2_result *r,
                    const char *prompt_bytes, size_t prompt_len, const cis2_sampler *smp);
/* A response object up to and including `"choices":[`: id, object, created,
 * model, and seed (NULL: none, as in a greedy request's). */
void serve_json_open(cis2_sb *sb, const char *id, const char *object, long long created,
                     const char *model_id, const uint64_t *seed);
/* One choice of a text_completion, or of a chat.completion (a chunk's delta
 * when chunk: the role when `role`, the content when text is not NULL).
 * logprobs: its JSON, or NULL for null; extra: members to add, or NULL. */
void serve_json_completion_choice(cis2_sb *sb, int index, const char *text, size_t len,
                                  const char *logprobs, const char *finish_reason,
                                  const char *extra);
void serve_json_chat_choice(cis2_sb *sb, int chunk, int index, int role, const char *text,
                            size_t len, const char *logprobs, const char *finish_reason,
                            const char *extra);
/* Tokens [from, to) of a run with their log-probabilities (docs/sampling.md
 * §9) and k alternatives each, in OpenAI's shapes: chat's {"content": [{token,
 * logprob, bytes, top_logprobs}], "refusal": null}; the completions API's
 * {tokens, token_logprobs, top_logprobs, text_offset}, *offset being the
 * code points of the text before token `from` and dt the decoder of the ids
 * before it (both advanced past token to - 1). 1 when out of memory. */
int serve_json_logprobs_chat(cis2_sb *sb, const cis2_tokenizer *t, const int32_t *ids,
                             const float *lp, const cis2_logprob *top, int k, int from, int to);
int serve_json_logprobs_legacy(cis2_sb *sb, const cis2_tokenizer *t, const int32_t *ids,
                               const float *lp, const cis2_logprob *top, int k, int from, int to,
                               serve_detok *dt, size_t *offset);
/* A text_completion object (stream chunk when finish is -1 and no result). */
void serve_json_completion_head(cis2_sb *sb, const char *id, long long created,
                                const char *model_id, const char *text, size_t len,
                                const char *finish_reason);
/* A chat.completion object (choices[0].message), or with chunk set a
 * chat.completion.chunk (choices[0].delta: the role when `role`, the content
 * when text is not NULL). Left open, like the text_completion head. */
void serve_json_chat_head(cis2_sb *sb, const char *id, long long created, const char *model_id,
                          int chunk, int role, const char *text, size_t len,
                          const char *finish_reason);
void serve_json_usage(cis2_sb *sb, int prompt_tokens, int completion_tokens);
void serve_json_models(cis2_sb *sb, const serve_model_info *mi, long long created, int one);
void serve_json_verdict(cis2_sb *sb, const cis2_verdict *v);

/* ------------------------------------------------------------- the page */
/* web/serve/ embedded by tools/embed_assets.sh at build time. */
extern const unsigned char cis2_serve_index_html[], cis2_serve_serve_js[], cis2_serve_sse_mjs[];
extern const size_t cis2_serve_index_html_len, cis2_serve_serve_js_len, cis2_serve_sse_mjs_len;

/* ------------------------------------------------- the request deadline */
/* serve_guard.c: every open connection has an entry; while it waits for a
 * request it has a deadline, and a sweep thread shuts down (shutdown(2)) the
 * socket of one that misses it. The owner of the descriptor calls
 * serve_guard_remove before it closes it. */
typedef struct serve_guard serve_guard;
typedef struct serve_conn serve_conn;
int serve_guard_new(serve_guard **g, int timeout_ms, char *err);
/* A new connection, armed (its first request's deadline runs); NULL when out of memory. */
serve_conn *serve_guard_add(serve_guard *g, int fd);
void serve_guard_arm(serve_guard *g, serve_conn *c);    /* waiting for a request again */
void serve_guard_disarm(serve_guard *g, serve_conn *c); /* the request is all in */
void serve_guard_remove(serve_guard *g, serve_conn *c);
long long serve_guard_timed_out(serve_guard *g); /* connections the sweep shut down */
void serve_guard_free(serve_guard *g);

/* --------------------------------------------------------------- HTTP */
typedef struct {
    const char *host;
    int port;
    int max_body;     /* bytes */
    int header_limit; /* bytes of request line + headers (per-connection memory) */
    int idle_timeout; /* seconds */
    /* seconds for a request's line, headers and body to arrive, from the
     * connection's accept or the end of the previous response */
    int request_timeout;
    int max_connections;
    int max_per_ip;              /* connections from one client address */
    const char *const *api_keys; /* NULL = no auth */
    int n_api_keys;
    const char *verifier_dir; /* NULL = /verifier/ is off */
} serve_http_opts;
typedef struct serve_http serve_http;
/* 0 (with the reason in err) when this binary was built without libmicrohttpd. */
int serve_http_available(char *err);
/* Start listening (the port actually bound goes to *port_out). Returns 0, or
 * 1 with err; 2 with err when this binary was built without libmicrohttpd. */
int serve_http_start(serve_http **h, const serve_http_opts *o, serve_sched *s,
                     const serve_model_info *mi, const cis2_tokenizer *t, const serve_limits *lim,
                     int *port_out, char *err);
/* The server is shutting down: from now on a new request is answered 503
 * shutting_down (Retry-After: 1, Connection: close), /health included; the
 * listening socket stays open until serve_http_stop. */
void serve_http_refuse_new(serve_http *h);
/* Wait (at most timeout_ms) until every request in progress has sent its
 * whole response — after serve_sched_stop, their final events. */
void serve_http_drain(serve_http *h, int timeout_ms);
/* Connections refused over --max-connections / --max-connections-per-ip, and
 * connections closed because their request missed --request-timeout. */
void serve_http_counts(serve_http *h, long long *refused, long long *timed_out);
void serve_http_stop(serve_http *h);
#endif
