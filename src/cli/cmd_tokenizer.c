/* cis2 tokenize / detokenize (spec §3.1; see docs/tokenizer.md).
 *
 *   cis2 tokenize   (--tokenizer FILE | --model DIR) TEXT     -> ids, comma-separated
 *   cis2 detokenize (--tokenizer FILE | --model DIR) IDS      -> text + "\n"
 *        (valid UTF-8 only; escaped when stdout is a terminal)
 *   cis2 tokenize   (--tokenizer FILE | --model DIR) --bench TEXTFILE
 *        -> load_ms (parse tokenizer.json + build tables), encode MB/s, round trip
 */
#include "cli/commands.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_TEXT_MAX ((size_t)256 << 20) /* --bench TEXTFILE */

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct {
    const char *tokenizer, *model, *arg;
    int bench;
} tok_opts;

/* The library names the operation in its messages ("tokenize: input text is
 * not valid UTF-8 ..."), which is context for `cis2 run: --prompt: ...`; here
 * the command is that operation and already says so. */
static const char *lib_err(const char *cmd, const char *err)
{
    size_t n = strlen(cmd);
    return !strncmp(err, cmd, n) && !strncmp(err + n, ": ", 2) ? err + n + 2 : err;
}

static int parse(const char *cmd, int argc, char **argv, int allow_bench, tok_opts *o)
{
    memset(o, 0, sizeof *o);
    const cis2_opt opts[] = {
        { "--tokenizer", NULL, CIS2_OPT_PATH, &o->tokenizer, 0, 0 },
        { "--model", NULL, CIS2_OPT_PATH, &o->model, 0, 0 },
        { "--bench", NULL, CIS2_OPT_FLAG, &o->bench, 0, 0 },
    };
    const char *pos[1] = { NULL };
    int np = 0;
    if (cis2_cli_parse(cmd, argc, argv, opts, allow_bench ? 3 : 2, pos, 1, &np, 0)) return 2;
    o->arg = pos[0];
    if (!!o->tokenizer == !!o->model)
        return cis2_cli_usage_error(cmd, "give exactly one of --tokenizer FILE or --model DIR");
    if (!o->arg)
        return cis2_cli_usage_error(cmd,
                                    o->bench ? "usage: cis2 %s --tokenizer FILE --bench TEXTFILE"
                                    : allow_bench ? "usage: cis2 %s --tokenizer FILE TEXT"
                                                  : "usage: cis2 %s --tokenizer FILE IDS",
                                    cmd);
    return 0;
}

static int load(const char *cmd, const tok_opts *o, cis2_tokenizer **t, double *ms)
{
    char err[CIS2_ERR_LEN], path[1100];
    if (o->model && cis2_cli_dir_input_ok(cmd, "--model", o->model)) return 2;
    if (o->model) snprintf(path, sizeof path, "%s/tokenizer.json", o->model);
    else snprintf(path, sizeof path, "%s", o->tokenizer);
    double t0 = cis2_now_ms();
    if (cis2_tokenizer_load(t, path, err)) return cis2_cli_usage_error(cmd, "%s", err);
    if (ms) *ms = cis2_now_ms() - t0;
    return 0;
}

/* Load time and encode throughput over TEXTFILE (no timed tests: numbers only). */
static int bench(const tok_opts *o)
{
    char err[CIS2_ERR_LEN];
    char *text;
    size_t len;
    if (cis2_read_file_max(o->arg, BENCH_TEXT_MAX, &text, &len, err))
        return cis2_cli_usage_error("tokenize", "%s", err);
    double load_ms = 1e30, load_cpu = 1e30;
    cis2_tokenizer *t = NULL;
    for (int r = 0; r < 5; r++) { /* best of 5 (page cache warm); wall and CPU time */
        double ms = 0, c0 = cpu_ms();
        cis2_tokenizer_free(t);
        if (load("tokenize", o, &t, &ms)) {
            free(text);
            return 2;
        }
        if (ms < load_ms) load_ms = ms;
        if (cpu_ms() - c0 < load_cpu) load_cpu = cpu_ms() - c0;
    }
    int32_t *ids = NULL;
    int n = 0;
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < 3; r++) {
        free(ids);
        double t0 = cis2_now_ms(), c0 = cpu_ms();
        if (cis2_tokenizer_encode(t, text, len, &ids, &n, err)) {
            cis2_tokenizer_free(t);
            free(text);
            return cis2_cli_usage_error("tokenize", "%s: %s", o->arg, lib_err("tokenize", err));
        }
        double ms = cis2_now_ms() - t0, cms = cpu_ms() - c0;
        if (ms < best) best = ms;
        if (cms < best_cpu) best_cpu = cms;
    }
    char *back = NULL;
    size_t bl = 0;
    int ok = cis2_tokenizer_decode(t, ids, n, &back, &bl, err) == 0 && bl == len &&
             memcmp(back, text, len) == 0;
    printf("load_ms=%.2f load_cpu_ms=%.2f\n", load_ms, load_cpu);
    printf(
        "encode_bytes=%zu tokens=%d encode_ms=%.2f encode_MB_per_s=%.2f encode_cpu_MB_per_s=%.2f\n",
        len, n, best, best > 0 ? (double)len / 1e6 / (best / 1e3) : 0.0,
        best_cpu > 0 ? (double)len / 1e6 / (best_cpu / 1e3) : 0.0);
    printf("round_trip=%s\n", ok ? "ok" : "MISMATCH");
    free(back);
    free(ids);
    free(text);
    cis2_tokenizer_free(t);
    return ok ? 0 : 1;
}

int cis2_cmd_tokenize(int argc, char **argv)
{
    tok_opts o;
    if (parse("tokenize", argc, argv, 1, &o)) return 2;
    if (o.bench) return bench(&o);
    cis2_tokenizer *t;
    if (load("tokenize", &o, &t, NULL)) return 2;
    char err[CIS2_ERR_LEN];
    int32_t *ids;
    int n;
    if (cis2_tokenizer_encode(t, o.arg, strlen(o.arg), &ids, &n, err)) {
        cis2_tokenizer_free(t);
        return cis2_cli_usage_error("tokenize", "%s", lib_err("tokenize", err));
    }
    char *s = cis2_format_ids(ids, n);
    if (s) printf("%s\n", s);
    free(s);
    free(ids);
    cis2_tokenizer_free(t);
    return s ? 0 : cis2_cli_usage_error("tokenize", "out of memory");
}

int cis2_cmd_detokenize(int argc, char **argv)
{
    tok_opts o;
    if (parse("detokenize", argc, argv, 0, &o)) return 2;
    char err[CIS2_ERR_LEN];
    int32_t *ids;
    int n;
    if (cis2_parse_ids(o.arg, &ids, &n, err)) return cis2_cli_usage_error("detokenize", "%s", err);
    cis2_tokenizer *t;
    if (load("detokenize", &o, &t, NULL)) {
        free(ids);
        return 2;
    }
    char *text;
    size_t len;
    int rc = cis2_tokenizer_decode(t, ids, n, &text, &len, err);
    free(ids);
    cis2_tokenizer_free(t);
    if (rc) return cis2_cli_usage_error("detokenize", "%s", lib_err("detokenize", err));
    /* Text, so valid UTF-8 only (the library's decode is total, for
     * receipts; this command prints characters). */
    size_t bad = cis2_utf8_check(text, len);
    if (bad < len) {
        cis2_cli_usage_error("detokenize",
                             "the ids' bytes are not valid UTF-8 (byte 0x%02x at offset %zu)",
                             (unsigned char)text[bad], bad);
        free(text);
        return 2;
    }
    /* The decoded text as it is (a filter's output), except on a terminal:
     * there control characters and escape sequences are shown escaped,
     * never acted on. */
    if (isatty(STDOUT_FILENO)) cis2_cli_put_escaped(stdout, text, len, CIS2_ESC_TEXT);
    else fwrite(text, 1, len, stdout);
    fputc('\n', stdout);
    free(text);
    return 0;
}
