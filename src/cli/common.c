/* What every command shares: the one-line error, the option parser of the
 * model-running commands, FP readiness, model + engine opening, and output
 * helpers (JSON-escaped text, hex digests). */
#include "cli/commands.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cis2_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cis2 %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int cis2_cli_int(const char *s, long lo, long hi, int *out)
{
    if (!s || !*s) return 1;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi || (s[0] == '0' && s[1]) || s[0] == '+' || s[0] == ' ') return 1;
    *out = (int)v;
    return 0;
}

int cis2_cli_fp_ready(const char *cmd)
{
    if (cis2_fpenv_pin() != 0) {
        cis2_cli_usage_error(cmd,
                             "cannot pin FTZ/DAZ (control register 0x%llx); refusing to run (§1.3)",
                             (unsigned long long)cis2_fpenv_read());
        return 1;
    }
    if (cis2_fpenv_selftest(NULL) != 0) {
        cis2_cli_usage_error(
            cmd, "the §1.3 denormal self-test failed; refusing to run (see cis2 selftest)");
        return 1;
    }
    return 0;
}

int cis2_cli_open(const char *cmd, const char *dir, const cis2_engine_opts *eo, cis2_model **mp,
                  cis2_engine **e)
{
    char err[CIS2_ERR_LEN];
    *mp = NULL;
    *e = NULL;
    if (cis2_cli_fp_ready(cmd)) return 1;
    cis2_model *m;
    if (cis2_model_open(&m, dir, NULL, err)) {
        cis2_cli_usage_error(cmd, "%s", err);
        return 1;
    }
    for (int i = 0; i < cis2_model_warning_count(m); i++)
        fprintf(stderr, "cis2 %s: warning: %s\n", cmd, cis2_model_warning(m, i));
    if (cis2_engine_new(e, m, eo, err)) {
        cis2_cli_usage_error(cmd, "%s", err);
        cis2_model_free(m);
        return 1;
    }
    *mp = m;
    return 0;
}

int cis2_cli_engine_opts(const char *cmd, const char *backend, const char *isa, int threads,
                         cis2_engine_opts *eo)
{
    memset(eo, 0, sizeof *eo);
    if (backend && cis2_backend_from_name(backend, &eo->backend))
        return cis2_cli_usage_error(cmd, "--backend must be ref or fast, got '%s'", backend);
    if (isa && cis2_isa_from_name(isa, &eo->isa))
        return cis2_cli_usage_error(
            cmd, "unknown --isa \"%.40s\" (expected sse2, avx2, avx512, neon or scalar)", isa);
    eo->threads = threads;
    return 0;
}

/* ------------------------------------------------------------ options */
static const cis2_opt *find_opt(const cis2_opt *opts, int nopts, const char *a)
{
    for (int k = 0; k < nopts; k++)
        if (!strcmp(a, opts[k].name) || (opts[k].alias && !strcmp(a, opts[k].alias)))
            return &opts[k];
    return NULL;
}

int cis2_cli_parse(const char *cmd, int argc, char **argv, const cis2_opt *opts, int nopts,
                   const char **pos, int max_pos, int *npos, int flags)
{
    int seen[64] = { 0 }, np = 0;
    if (nopts > 64) return cis2_cli_usage_error(cmd, "internal: too many options");
    if (npos) *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) {
            if (np >= max_pos) return cis2_cli_usage_error(cmd, "unexpected argument '%s'", a);
            pos[np++] = a;
            if (flags & CIS2_PARSE_REST) { /* everything after the first positional is its own */
                while (++i < argc && np < max_pos) pos[np++] = argv[i];
                if (i < argc) return cis2_cli_usage_error(cmd, "too many arguments");
                break;
            }
            continue;
        }
        const cis2_opt *o = find_opt(opts, nopts, a);
        if (!o) return cis2_cli_usage_error(cmd, "unknown option '%s' (see cis2 help)", a);
        int k = (int)(o - opts);
        if (seen[k]++ && o->kind != CIS2_OPT_LIST)
            return cis2_cli_usage_error(cmd, "option '%s' is given more than once", o->name);
        if (o->kind == CIS2_OPT_FLAG) {
            *(int *)o->dst = 1;
            continue;
        }
        if (i + 1 >= argc) return cis2_cli_usage_error(cmd, "option '%s' needs a value", a);
        const char *v = argv[++i];
        if (o->kind == CIS2_OPT_INT) {
            if (cis2_cli_int(v, o->lo, o->hi, (int *)o->dst))
                return cis2_cli_usage_error(cmd, "%s must be an integer in [%ld, %ld], got '%s'",
                                            o->alias && o->alias[1] != '-' ? o->alias : o->name,
                                            o->lo, o->hi, v);
            continue;
        }
        if (!*v && o->kind != CIS2_OPT_STR)
            return cis2_cli_usage_error(cmd, "option '%s' needs a non-empty value", a);
        if (o->kind == CIS2_OPT_STR || o->kind == CIS2_OPT_PATH) {
            *(const char **)o->dst = v;
        } else {
            cis2_opt_list *l = o->dst;
            if (l->n >= (int)(sizeof l->v / sizeof l->v[0]))
                return cis2_cli_usage_error(cmd, "option '%s' is given too many times", o->name);
            l->v[l->n++] = v;
        }
    }
    if (npos) *npos = np;
    return 0;
}

int cis2_cli_parse_opts(const char *cmd, int argc, char **argv, const char *allowed,
                        cis2_run_opts *o, const char **positional)
{
    memset(o, 0, sizeof *o);
    o->n = 16;
    const cis2_opt all[] = {
        { "--model", NULL, CIS2_OPT_PATH, &o->model, 0, 0 },
        { "--prompt", NULL, CIS2_OPT_STR, &o->prompt, 0, 0 },
        { "--prompt-ids", NULL, CIS2_OPT_STR, &o->prompt_ids, 0, 0 },
        { "--receipt", NULL, CIS2_OPT_PATH, &o->receipt, 0, 0 },
        { "--backend", NULL, CIS2_OPT_STR, &o->backend, 0, 0 },
        { "--isa", NULL, CIS2_OPT_STR, &o->isa, 0, 0 },
        { "--fault", NULL, CIS2_OPT_STR, &o->fault, 0, 0 },
        { "--fault-arg", NULL, CIS2_OPT_STR, &o->fault_arg, 0, 0 },
        { "--vector", NULL, CIS2_OPT_PATH, &o->vector, 0, 0 },
        { "--threads", NULL, CIS2_OPT_INT, &o->threads, 1, 1024 },
        { "--n", "-n", CIS2_OPT_INT, &o->n, 1, 1000000 },
        { "--stop-at-eos", NULL, CIS2_OPT_FLAG, &o->stop_at_eos, 0, 0 },
        { "--check-determinism", NULL, CIS2_OPT_FLAG, &o->check_det, 0, 0 },
        { "--no-check-determinism", NULL, CIS2_OPT_FLAG, &o->no_check_det, 0, 0 },
    };
    /* the subset this command accepts: `allowed` is " --model --prompt ... " */
    cis2_opt use[sizeof all / sizeof all[0]];
    int nuse = 0;
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        char key[64];
        snprintf(key, sizeof key, " %s ", all[k].name);
        if (strstr(allowed, key)) use[nuse++] = all[k];
    }
    const char *pos[1] = { NULL };
    int np = 0;
    if (cis2_cli_parse(cmd, argc, argv, use, nuse, pos, positional ? 1 : 0, &np, 0)) return 2;
    if (positional) *positional = np ? pos[0] : NULL;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--n")) o->n_set = 1;
    return 0;
}

int cis2_cli_run_engine_opts(const char *cmd, const cis2_run_opts *o, cis2_engine_opts *eo)
{
    if (cis2_cli_engine_opts(cmd, o->backend, o->isa, o->threads, eo)) return 1;
    eo->fault = o->fault;
    eo->fault_arg = o->fault_arg;
    return 0;
}

/* JSON string body (without quotes): escapes ", \ and control characters. */
void cis2_cli_print_json_escaped(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') fputs("\\\"", f);
        else if (ch == '\\') fputs("\\\\", f);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch == '\r') fputs("\\r", f);
        else if (ch < 0x20 || ch == 0x7F) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
}

void cis2_cli_print_hex_line(const char *key, const uint8_t d[32])
{
    char h[65];
    cis2_hex(d, 32, h);
    printf("%s=%s\n", key, h);
}

/* Prompt ids from --prompt-ids or by tokenizing --prompt with `t` (NULL when
 * tokenizer.json did not load; `terr` says why). Also returns the prompt's raw
 * bytes for the receipt (for ids: their decoded text when the tokenizer can
 * decode them, else empty). */

/* §12.4: run the whole decode twice in this process and compare. */
int cis2_cli_run_twice_check(cis2_engine *e, const int32_t *ids, int n, const cis2_gen_opts *g,
                             const cis2_result *r1, char *err)
{
    cis2_result r2;
    if (cis2_generate(e, ids, n, g, &r2, err)) return 1;
    int same = memcmp(r1->witness, r2.witness, 32) == 0 && memcmp(r1->argmax, r2.argmax, 32) == 0 &&
               r1->n_gen == r2.n_gen &&
               memcmp(r1->gen, r2.gen, (size_t)r1->n_gen * sizeof(int32_t)) == 0;
    cis2_result_free(&r2);
    if (!same) {
        snprintf(err, CIS2_ERR_LEN,
                 "determinism check failed: two runs in one process differ (§12.4)");
        return 1;
    }
    return 0;
}
