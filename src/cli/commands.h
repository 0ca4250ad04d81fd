/* CLI commands, one per file (cli/cmd_*.c), and the helpers they share
 * (cli/common.c). Each command returns the process exit status (0 ok, 1 a
 * check failed, 2 bad usage or input); errors are one line on stderr. */
#ifndef CIS2_COMMANDS_H
#define CIS2_COMMANDS_H
#include "verify/verify.h"
#include <stdarg.h>

int cis2_cmd_run(int argc, char **argv);
int cis2_cmd_verify(int argc, char **argv);
int cis2_cmd_selftest(int argc, char **argv);
int cis2_cmd_conform(int argc, char **argv);
int cis2_cmd_tokenize(int argc, char **argv);
int cis2_cmd_detokenize(int argc, char **argv);
int cis2_cmd_op(int argc, char **argv);
int cis2_cmd_suite(int argc, char **argv);
int cis2_cmd_bench(int argc, char **argv);
/* bench helpers: streaming read GB/s over `threads` threads; --peak's lines. */
double cis2_bench_read_gbs(int threads);
void cis2_bench_peak(int threads);
int cis2_cmd_trace(int argc, char **argv);
int cis2_cmd_diff(int argc, char **argv);
int cis2_cmd_compare(int argc, char **argv);
int cis2_cmd_batch(int argc, char **argv);        /* cli/cmd_batch.c, docs/scale.md */
int cis2_cmd_merge(int argc, char **argv);        /* cli/cmd_merge.c */
int cis2_cmd_verify_batch(int argc, char **argv); /* cli/cmd_verify_batch.c */
int cis2_cmd_quantize(int argc, char **argv);
int cis2_cmd_join_shards(int argc, char **argv);
int cis2_cmd_arms(int argc, char **argv); /* cli/cmd_arms.c, docs/divergence.md §7 */
int cis2_cmd_serve(int argc, char **argv);

/* ---- shared helpers (cli/common.c) */
/* Print "cis2 CMD: message" to stderr as one line, return 2. Every stderr
 * line goes through here: control characters, bidi controls and bytes
 * that are not UTF-8 in the message are escaped (docs/errors.md). */
int cis2_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same line for a note that is not an error (no status). */
void cis2_cli_note(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cis2_cli_vmessage(const char *cmd, const char *fmt, va_list ap);
/* Parse a decimal int in [lo, hi]; returns 0 on success. */
int cis2_cli_int(const char *s, long lo, long hi, int *out);
/* --shard "i/N" with 0 <= i < N <= 1000000 into *i, *n; 0, or cmd's usage
 * error (printed) and 2 when s is not that. */
int cis2_cli_shard(const char *cmd, const char *s, int *i, int *n);
/* Pin FTZ/DAZ on this thread and run the §1.3 self-test; prints the error. */
int cis2_cli_fp_ready(const char *cmd);
/* --backend/--isa/--threads into engine options; prints the error. */
int cis2_cli_engine_opts(const char *cmd, const char *backend, const char *isa, int threads,
                         cis2_engine_opts *eo);
/* The chat template of a command serving many prompts (batch, serve):
 * --chat-format NAME when given (a bad name prints the error and returns 1),
 * else DIR's own. *t is NULL when DIR has none it renders: `why` then says so
 * in one line (pointing at --chat-format), and only chat prompts fail. */
int cis2_cli_chat_template(const char *cmd, const char *dir, const char *format,
                           cis2_chat_template **t, char *why);
/* Load DIR (cis2_model_open); prints "cis2 CMD: error". Every command
 * loads its model here. */
int cis2_cli_load_model(const char *cmd, const char *dir, cis2_model **m);
/* Load DIR and make an engine; prints "cis2 CMD: error" on failure. The
 * model is freed with cis2_model_free after the engine. */
int cis2_cli_open(const char *cmd, const char *dir, const cis2_engine_opts *eo, cis2_model **m,
                  cis2_engine **e);
/* An output path checked before any work (docs/errors.md): a device, FIFO,
 * socket, directory or link is refused; "-" is standard output where the
 * command allows it (dash_ok), else refused. Prints the error. */
int cis2_cli_output_ok(const char *cmd, const char *flag, const char *path, int dash_ok);
/* Why --tol/--table (or arm D) cannot judge a hash-only trace (diff, compare). */
#define HASH_ONLY_NO_TOL                                                                           \
    "a hash-only trace can only be compared bit for bit (--tol and --table do not apply)"
/* A directory output (quantize --out, arms -o): "-" is refused, since a
 * directory of files cannot be standard output. Prints the error. */
int cis2_cli_dir_output_ok(const char *cmd, const char *flag, const char *path);
/* A directory input (serve --verifier-dir, suite --vectors): "-", when no
 * directory of that name exists, is refused as cis2_open_input refuses a
 * file named "-": a directory cannot be standard input. Prints the error. */
int cis2_cli_dir_input_ok(const char *cmd, const char *flag, const char *path);
/* An output path that names one of the command's inputs is refused before
 * any work (docs/errors.md out-is-input): the model directory's files
 * (model may be NULL) and in[0..n_in), each named by its flag. Prints the
 * error; an output that does not exist yet passes. */
typedef struct {
    const char *flag, *path;
} cis2_cli_input;
int cis2_cli_output_not_input(const char *cmd, const char *flag, const char *out, const char *model,
                              const cis2_cli_input *in, int n_in);
/* §12.4: run the whole decode a second time in this process and compare. */
int cis2_cli_run_twice_check_sampled(cis2_engine *e, const int32_t *ids, int n,
                                     const cis2_gen_opts *g, const cis2_sampler *s,
                                     const cis2_result *r1, char *err);
int cis2_cli_run_twice_check(cis2_engine *e, const int32_t *ids, int n, const cis2_gen_opts *g,
                             const cis2_result *r1, char *err);
/* One stderr line when a run's logits hold a NaN: its witness is not
 * portable (NaN bit patterns differ by ISA). */
void cis2_cli_nan_note(const char *cmd, const cis2_result *r);
/* s[0..n) escaped (core.h cis2_esc_mode): every string from a file, a peer
 * or a child process reaches stdout through here. */
void cis2_cli_put_escaped(FILE *f, const char *s, size_t n, cis2_esc_mode mode);
void cis2_cli_print_hex_line(const char *key, const uint8_t d[32]);

/* The one option parser. A table of the flags a command accepts; every
 * command refuses unknown flags, a flag given twice (except LIST), a missing
 * or empty value and an out-of-range integer, each with one line. */
/* STR takes any value; PATH and LIST refuse an empty one (--model ''). */
typedef enum {
    CIS2_OPT_FLAG = 0,
    CIS2_OPT_STR,
    CIS2_OPT_PATH,
    CIS2_OPT_INT,
    CIS2_OPT_LIST
} cis2_opt_kind;
typedef struct {
    const char *v[16];
    int n;
} cis2_opt_list;
typedef struct {
    const char *name;  /* "--model" */
    const char *alias; /* "-n", "-o" or NULL */
    cis2_opt_kind kind;
    void *dst;   /* FLAG, INT: int *; STR: const char **; LIST: cis2_opt_list * */
    long lo, hi; /* INT: the accepted range */
} cis2_opt;
#define CIS2_PARSE_REST 1 /* the first bare argument and all after it are positionals */
/* "--" ends the options: every argument after it is a positional. */
/* Bare arguments go to pos[0..max_pos); *npos (may be NULL) says how many. */
int cis2_cli_parse(const char *cmd, int argc, char **argv, const cis2_opt *opts, int nopts,
                   const char **pos, int max_pos, int *npos, int flags);

/* The options of the model-running commands (run, verify, conform, trace,
 * compare), one table: the same flag means the same thing everywhere. */
typedef struct {
    const char *model, *prompt, *prompt_ids, *teacher_force, *receipt, *output, *backend, *isa,
        *fault, *fault_arg, *vector, *arm, *layers, *nodes, *against, *tol, *table;
    cis2_opt_list backends; /* every --backend given; backend is the first */
    int n, n_set, threads, stop_at_eos, check_det, no_check_det, hash_only, exact, brief;
    const char *chat, *chat_format; /* run --chat FILE [--chat-format chatml] */
    /* run --chat-template FILE, --chat-template-kwarg KEY=JSON (repeatable),
     * --chat-date YYYY-MM-DD (docs/chat_templates.md) */
    const char *chat_template, *chat_date;
    cis2_opt_list chat_kwargs;
    /* run --temperature T --top-k K --top-p P --min-p M --seed S (docs/sampling.md) */
    const char *temperature, *top_k, *top_p, *min_p, *seed;
} cis2_run_opts;
/* `allowed` lists the accepted flags: " --model --prompt ... " (a space
 * around each; " --backend+ " also allows a second --backend). `positional`
 * (may be NULL) receives one bare argument. */
int cis2_cli_parse_opts(const char *cmd, int argc, char **argv, const char *allowed,
                        cis2_run_opts *o, const char **positional);
int cis2_cli_run_engine_opts(const char *cmd, const cis2_run_opts *o, cis2_engine_opts *eo);
/* The sampler from --temperature/--top-k/--top-p/--min-p/--seed, each value
 * checked (one line naming the flag); without --temperature (or with 0) it is
 * greedy and the other four are refused. Without --seed a sampled run gets
 * one from the system's randomness (printed, and in the receipt). */
int cis2_cli_sampler(const char *cmd, const cis2_run_opts *o, cis2_sampler *s);
#endif
