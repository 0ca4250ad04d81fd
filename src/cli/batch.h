/* What `cis2 batch`, `cis2 merge` and `cis2 verify-batch` share (docs/scale.md):
 * the JSONL request parser (cli/batch/request.c, usable by any front end that turns
 * a JSON object into a sequence), the one result-line format
 * (cli/batch/result_line.c), a streaming JSONL reader (cli/batch/jsonl.c) and the
 * in-order pipeline over the multi-sequence API (cli/batch/seqpipe.c). */
#ifndef CIS2_CLI_BATCH_H
#define CIS2_CLI_BATCH_H
#include "cli/commands.h"
#include "core/json.h"

#define CIS2_BATCH_MAX_LINE   (16u << 20)       /* bytes in one input line */
#define CIS2_RESULT_MAX_LINE  (256u << 20)      /* bytes in one result line (ids up to max_pos) */
#define CIS2_BATCH_MAX_INPUT  ((size_t)1 << 30) /* a prompts file */
#define CIS2_BATCH_MAX_TOKENS 1000000           /* max_tokens, as `run -n` */
#define CIS2_BATCH_MAX_B      256               /* --batch */

/* One stderr note per result whose logits hold a NaN, in `cis2 run`'s
 * words, naming the input line and id (cmd_batch.c); the first 10 are
 * named, *count counts them all, and _total says how many were not named. */
void cis2_batch_nan_note(const char *cmd, long *count, int line, const char *id, size_t id_len,
                         const cis2_result *r);
void cis2_batch_nan_total(const char *cmd, long count);

/* ------------------------------------------------- requests (request.c) */
/* One input object: {"id": "...", "prompt": "..." | "prompt_ids": [...] |
 * "messages": [...], "max_tokens": N, "stop_at_eos": BOOL, "temperature": T,
 * "top_k": K, "top_p": P, "min_p": M, "seed": S} (sampling: docs/sampling.md;
 * docs/scale.md). Unknown and repeated fields are refused (nothing is
 * silently ignored). */
typedef struct {
    char *id; /* decoded; NULL when absent or not a string */
    size_t id_len;
    int32_t *ids; /* the prompt's token ids */
    int n_ids;
    char *prompt; /* the receipt's prompt bytes: what the ids decode to */
    size_t prompt_len;
    int max_tokens, stop_at_eos;
    const char *field; /* which gave the prompt: "prompt", "prompt_ids" or "messages" */
    /* temperature 0: greedy. A sampled line without "seed" gets
     * cis2_request_derived_seed of its id (docs/scale.md), so that a rerun,
     * a resume or another shard samples it the same way. */
    cis2_sampler smp;
} cis2_request;
/* The seed of a sampled line that names none: the first 8 bytes, read as a
 * little-endian u64, of SHA-256("CIS-2-BATCH-SEED" || the id's bytes). */
uint64_t cis2_request_derived_seed(const char *id, size_t id_len);
typedef struct {
    int max_tokens, stop_at_eos; /* when the object does not say */
    /* "messages" are rendered with this template (as `cis2 run --chat`); NULL
     * when there is none, and chat_err says why (such lines are errors) */
    const cis2_chat_template *chat;
    const char *chat_err;
} cis2_request_defaults;
/* Just the "id" of a JSON line (no model needed); 0 when the line is a JSON
 * object with a string "id" (malloc'd into *id), 1 when it is not, -1 when
 * memory ran out (no answer about the line). */
int cis2_request_id(const char *text, size_t len, char **id, size_t *id_len);
/* The whole request, checked against `m` (vocabulary, max_position_embeddings;
 * "prompt" is encoded with the model's tokenizer). 0, 1 with one line in err
 * (rq->id is still filled when it was readable), or -1 when memory ran out
 * (no fault of the request: err says "... out of memory"). Free with _free. */
int cis2_request_parse(const char *text, size_t len, const cis2_model *m,
                       const cis2_request_defaults *df, cis2_request *rq, char *err);
/* The same on an object already parsed (an HTTP body, say). */
int cis2_request_from_json(const json_doc *d, uint32_t obj, const cis2_model *m,
                           const cis2_request_defaults *df, cis2_request *rq, char *err);
void cis2_request_free(cis2_request *rq);

/* ------------------------------------------- the prompts file (batch_input.c) */
typedef struct {
    const char *text; /* into the file's buffer */
    size_t len;
    char *id; /* the line's "id" when it has a readable one */
    size_t id_len;
    int dup_of; /* the 1-based line that has this id first, or 0 */
} cis2_in_line;
typedef struct {
    const char *path;
    char *buf;
    size_t len;
    cis2_in_line *L;
    int n;
} cis2_batch_input;
/* Read a prompts file (at most CIS2_BATCH_MAX_INPUT bytes, UTF-16 refused),
 * split into lines, ids indexed. 0, or 2 after one line "cis2 CMD: ...". */
int cis2_batch_input_read(const char *cmd, const char *path, cis2_batch_input *in);
/* Input line i (0-based) as `cis2 batch` takes it: 0 a request, 1 with the
 * error line's message in err, -1 when memory ran out. */
int cis2_batch_input_request(const cis2_batch_input *in, int i, const cis2_model *m,
                             const cis2_request_defaults *df, cis2_request *rq, char *err);
void cis2_batch_input_free(cis2_batch_input *in);
/* The "messages" template as batch uses it (cis2_cli_chat_template), with
 * "MODEL/" cut out of the no-template reason: 0, or 1 after the error line. */
int cis2_batch_chat(const char *cmd, const char *model, const char *chat_format,
                    cis2_chat_template **tpl, char *chat_err);
/* Whether n_gen generated ids are what a request of max_tokens and
 * stop_at_eos gives (§3.4): exactly max_tokens, or with stop_at_eos up to
 * and with the first eos id. */
int cis2_batch_gen_ok(const cis2_model *m, const int32_t *gen, int n_gen, int max_tokens,
                      int stop_at_eos);

/* -------------------------------------------- result lines (result_line.c) */
/* The output line of input line `line` (1-based) of `lines`, '\n'-terminated,
 * malloc'd (NULL when out of memory):
 *   {"line":L,"lines":N,"id":ID,"prompt_token_ids":[..],"generated_token_ids":[..],
 *    "text":T,"table_digest":H,"inv_freq_table_digest":H,"argmax_digest":H,
 *    "cis2_ref":H,"receipt":R}
 * (a sampled run, s->temperature > 0: "temperature":T,"top_k":K,"top_p":P,
 * "min_p":M,"seed":S before "receipt", which is then v1+sampling)
 * or for a line that could not be run {"line":L,"lines":N,"id":ID,"error":MSG}.
 * `id` NULL writes null. The bytes depend on nothing but the arguments, so
 * any sharding, batch size or resume gives the same file. */
char *cis2_result_line(const cis2_model *m, int line, int lines, const char *id, size_t id_len,
                       const cis2_result *r, const uint8_t *prompt, size_t prompt_len,
                       const cis2_sampler *s, size_t *len);
char *cis2_result_error_line(int line, int lines, const char *id, size_t id_len, const char *msg,
                             size_t *len);
/* What every output line carries, read back (resume, merge, verify-batch). */
typedef struct {
    int line, lines;
    char *id; /* NULL for null */
    size_t id_len;
    int is_error;
} cis2_line_head;
/* 0, or 1 with the reason in err (no path or line number: the caller adds them).
 * A line ending in \r (CRLF: rewritten by another tool) is refused. */
int cis2_line_head_parse(const char *text, size_t len, cis2_line_head *h, char *err);
/* The same, keeping the parsed line in *d when it succeeds (json_free it):
 * for a caller that reads more of the line. */
int cis2_line_head_read(const char *text, size_t len, json_doc *d, cis2_line_head *h, char *err);
void cis2_line_head_free(cis2_line_head *h);
/* Whether h's input line is one of shard i/N's (0-based index i mod N); 1
 * with the reason in err when it is not. */
int cis2_line_head_in_shard(const cis2_line_head *h, int i, int n, char *err);
/* An id as it is printed in messages: JSON-quoted and escaped, at most ~80 bytes. */
void cis2_print_id(FILE *f, const char *id, size_t id_len);
/* The same appended to sb. */
void cis2_sb_id(cis2_sb *sb, const char *id, size_t id_len);

/* -------------------------------------------------- JSONL reader (jsonl.c) */
typedef struct {
    int fd;
    const char *path;
    char *buf;
    size_t cap, len, pos;
    uint64_t off;  /* file offset of buf[0] */
    uint64_t good; /* end of the last complete ('\n'-terminated) line */
    long lineno;
    int eof;
    size_t max_line; /* CIS2_RESULT_MAX_LINE unless the caller lowers it */
} cis2_jsonl;
/* Read `fd` (a regular file, opened by the caller, read from offset 0). */
void cis2_jsonl_init(cis2_jsonl *r, int fd, const char *path);
/* The next line without its '\n' (valid until the next call): 1 a line, 0 the
 * end, -1 a read error (err). *complete is 0 for a last line with no '\n' (an
 * interrupted write). A line longer than r->max_line is skipped and
 * returned with *line NULL and *len its length. */
int cis2_jsonl_next(cis2_jsonl *r, const char **line, size_t *len, int *complete, char *err);
void cis2_jsonl_free(cis2_jsonl *r);
/* json_parse of one line; the error reads "invalid JSON at col C: why" (the
 * caller names the file and line). 1, or -1 when memory ran out. */
int cis2_json_line_parse(json_doc *d, const char *text, size_t len, char *err);

/* ------------------------------------------- in-order pipeline (seqpipe.c) */
/* Jobs come from next() in order, run up to B at a time on one engine
 * (sequences join and leave between steps) and are handed to done() in the
 * order next() gave them, whatever order they finish in. */
typedef struct {
    const int32_t *ids; /* n_ids 0: nothing to run (done() gets r NULL) */
    int n_ids;
    cis2_gen_opts g;  /* on_step/ctx are the pipeline's (progress) */
    cis2_sampler smp; /* temperature 0 (all zero): greedy */
    void *user;
} cis2_pipe_job;
/* 1 a job, 0 no more, -1 stop (the callee printed why). */
typedef int (*cis2_pipe_next_fn)(void *ctx, cis2_pipe_job *job);
/* 0 go on, nonzero stop (the callee printed why). `r` is freed afterwards. */
typedef int (*cis2_pipe_done_fn)(void *ctx, cis2_pipe_job *job, cis2_result *r);
typedef struct {
    const char *cmd; /* "batch", for the progress line and errors */
    int progress;    /* draw "items done/total, tok/s, ETA" on stderr */
    long total;      /* jobs expected (progress only) */
    long done;       /* jobs handed to done() so far */
    long tokens;     /* tokens generated so far */
    double t0, drawn;
} cis2_pipe_stats;
/* 0 when every job went through; 1 when a callback stopped it or the engine
 * failed (printed as "cis2 CMD: ..."): running sequences are cancelled and
 * drop() (may be NULL) gets each job that never reached done(). */
int cis2_pipe_run(cis2_engine *e, int batch, cis2_pipe_next_fn next, cis2_pipe_done_fn done,
                  void (*drop)(void *ctx, cis2_pipe_job *job), void *ctx, cis2_pipe_stats *st);
#endif
