/* What every command shares: the one-line error, the option parser of the
 * model-running commands, FP readiness, model + engine opening, and output
 * helpers (JSON-escaped text, hex digests). */
#include "cli/commands.h"
#include "engine/sample.h"
#include <unistd.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The library words its messages about an engine option in its own terms (cis2.h: "the
 * fault", "the ISA", ...); a command's user gave a flag, so the line names the flag. A term
 * is rewritten where it opens a part of the message (the start, or after ": "), or anywhere
 * as one of the whole phrases below; longer terms first. */
static const struct {
    const char *term, *flag;
    int anywhere;
} FLAG_TERMS[] = {
    { "needs a fault argument", "needs --fault-arg", 1 },
    { "the fault argument", "--fault-arg", 1 },
    { "takes no fault argument", "takes no --fault-arg", 1 },
    { "needs the reference backend", "needs --backend ref", 1 },
    { "(cis2 join-shards)", "(cis2 join-shards --model DIR --out DIR/model.safetensors)", 1 },
    { "fault argument: ", "--fault-arg: ", 0 },
    { "unknown fault ", "unknown --fault ", 0 },
    { "fault ", "--fault ", 0 },
    { "unknown ISA ", "unknown --isa ", 0 },
    { "ISA ", "--isa ", 0 },
    { "backend approx", "--backend approx", 0 },
};

static void flag_terms(const char *msg, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = msg; *p && o + 1 < cap;) {
        int part = p == msg || (p - msg >= 2 && p[-2] == ':' && p[-1] == ' ');
        const char *flag = NULL;
        size_t tl = 0;
        for (size_t i = 0; !flag && i < sizeof FLAG_TERMS / sizeof *FLAG_TERMS; i++) {
            tl = strlen(FLAG_TERMS[i].term);
            if ((part || FLAG_TERMS[i].anywhere) && !strncmp(p, FLAG_TERMS[i].term, tl))
                flag = FLAG_TERMS[i].flag;
        }
        if (!flag) {
            out[o++] = *p++;
            continue;
        }
        for (const char *f = flag; *f && o + 1 < cap; f++) out[o++] = *f;
        p += tl;
    }
    out[o] = 0;
}

void cis2_cli_vmessage(const char *cmd, const char *fmt, va_list ap)
{
    /* The one funnel for stderr lines: whatever a message quotes (a path, a
     * key from a file, a peer's answer) cannot add a line or a terminal
     * escape; parts escaped already pass unchanged. The library's terms for
     * an option become its flag (flag_terms). */
    char raw[4 * CIS2_ERR_LEN], msg[4 * CIS2_ERR_LEN + 256];
    vsnprintf(raw, sizeof raw, fmt, ap);
    flag_terms(raw, msg, sizeof msg);
    cis2_sb line = { 0 };
    cis2_sb_str(&line, "cis2 ");
    cis2_sb_escape(&line, cmd, strlen(cmd), CIS2_ESC_TEXT);
    cis2_sb_str(&line, ": ");
    cis2_sb_escape(&line, msg, strlen(msg), CIS2_ESC_SANITIZE);
    cis2_sb_str(&line, "\n");
    fflush(stdout);
    fputs(line.b && !line.oom ? line.b : "cis2: out of memory formatting a message\n", stderr);
    cis2_sb_free(&line);
}

int cis2_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cis2_cli_vmessage(cmd, fmt, ap);
    va_end(ap);
    return 2;
}

void cis2_cli_note(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cis2_cli_vmessage(cmd, fmt, ap);
    va_end(ap);
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

int cis2_cli_shard(const char *cmd, const char *s, int *i, int *n)
{
    const char *slash = strchr(s, '/');
    char a[16];
    size_t al = slash ? (size_t)(slash - s) : 0;
    if (al > 0 && al < sizeof a) {
        memcpy(a, s, al);
        a[al] = 0;
        if (!cis2_cli_int(a, 0, 999999, i) && !cis2_cli_int(slash + 1, 1, 1000000, n) && *i < *n)
            return 0;
    }
    return cis2_cli_usage_error(cmd, "--shard must be i/N with 0 <= i < N, got '%s'", s);
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

int cis2_cli_load_model(const char *cmd, const char *dir, cis2_model **mp)
{
    char err[CIS2_ERR_LEN];
    *mp = NULL;
    if (cis2_cli_dir_input_ok(cmd, "--model", dir) || cis2_cli_fp_ready(cmd)) return 1;
    if (cis2_model_open(mp, dir, NULL, err)) return cis2_cli_usage_error(cmd, "%s", err) != 0;
    /* what Hugging Face would do silently, said once (e.g. an ignored lm_head) */
    for (int i = 0; i < cis2_model_warning_count(*mp); i++)
        cis2_cli_note(cmd, "warning: %s", cis2_model_warning(*mp, i));
    return 0;
}

int cis2_cli_open(const char *cmd, const char *dir, const cis2_engine_opts *eo, cis2_model **mp,
                  cis2_engine **e)
{
    char err[CIS2_ERR_LEN];
    *e = NULL;
    if (cis2_cli_load_model(cmd, dir, mp)) return 1;
    if (cis2_engine_new(e, *mp, eo, err)) {
        cis2_cli_usage_error(cmd, "%s", err);
        cis2_model_free(*mp);
        *mp = NULL;
        return 1;
    }
    return 0;
}

int cis2_cli_output_ok(const char *cmd, const char *flag, const char *path, int dash_ok)
{
    char err[CIS2_ERR_LEN];
    if (!strcmp(path, "-")) {
        if (dash_ok) return 0;
        return cis2_cli_usage_error(cmd,
                                    "%s -: standard output carries this command's results; "
                                    "give a file",
                                    flag) != 0;
    }
    if (cis2_check_output_path(path, err)) return cis2_cli_usage_error(cmd, "%s", err) != 0;
    return 0;
}

int cis2_cli_dir_output_ok(const char *cmd, const char *flag, const char *path)
{
    /* "-" names standard output elsewhere; a directory of files cannot go
     * there, and making one literally named "-" would be a guess. */
    if (!strcmp(path, "-"))
        return cis2_cli_usage_error(cmd,
                                    "%s -: this command writes a directory of files, not standard "
                                    "output; give a directory",
                                    flag) != 0;
    return 0;
}

int cis2_cli_dir_input_ok(const char *cmd, const char *flag, const char *path)
{
    /* Only a "-" that names nothing: a directory really called "-" is read
     * as before (cis2_open_input treats a file named "-" the same way). */
    struct stat st;
    if (!strcmp(path, "-") && lstat(path, &st) != 0 && errno == ENOENT)
        return cis2_cli_usage_error(cmd,
                                    "%s -: this command reads a directory, not standard input; "
                                    "give a directory (./- for one named -)",
                                    flag) != 0;
    return 0;
}

static int same_file(const struct stat *so, const char *path)
{
    struct stat si;
    return stat(path, &si) == 0 && si.st_dev == so->st_dev && si.st_ino == so->st_ino;
}

int cis2_cli_output_not_input(const char *cmd, const char *flag, const char *out, const char *model,
                              const cis2_cli_input *in, int n_in)
{
    /* The write replaces the file at the output path, so an output that is
     * one of the command's inputs (by device and inode: another spelling of
     * the path, a hard link, a link to it) would destroy it: a receipt
     * written over config.json leaves a model that no longer loads. An
     * output that does not exist yet cannot be an input. */
    static const char *const MODEL_FILES[] = { "config.json", "model.safetensors", "tokenizer.json",
                                               "tokenizer_config.json", "chat_template.jinja" };
    struct stat so;
    if (!out || !strcmp(out, "-") || stat(out, &so) != 0) return 0;
    for (size_t k = 0; model && k < sizeof MODEL_FILES / sizeof MODEL_FILES[0]; k++) {
        char p[4096];
        int w = snprintf(p, sizeof p, "%s/%s", model, MODEL_FILES[k]);
        if (w > 0 && (size_t)w < sizeof p && same_file(&so, p))
            return cis2_cli_usage_error(cmd, "%s: %s is the model's %s; give another file", out,
                                        flag, MODEL_FILES[k]) != 0;
    }
    for (int k = 0; k < n_in; k++)
        if (in[k].path && same_file(&so, in[k].path))
            return cis2_cli_usage_error(cmd, "%s: %s is the %s file; give another file", out, flag,
                                        in[k].flag) != 0;
    return 0;
}

int cis2_cli_engine_opts(const char *cmd, const char *backend, const char *isa, int threads,
                         cis2_engine_opts *eo)
{
    memset(eo, 0, sizeof *eo);
    if (backend && cis2_backend_from_name(backend, &eo->backend))
        return cis2_cli_usage_error(cmd, "--backend must be ref or fast, got '%s'", backend);
    /* Arm D is not reproducible (docs/quantization.md §6): only the commands
     * that write no receipt may run it. */
    if (eo->backend == CIS2_BACKEND_APPROX && strcmp(cmd, "run") && strcmp(cmd, "trace") &&
        strcmp(cmd, "bench") && strcmp(cmd, "arms") && strcmp(cmd, "compare"))
        return cis2_cli_usage_error(cmd,
                                    "--backend approx (arm D) is approximate and never receipted; "
                                    "%s needs ref or fast",
                                    cmd);
    if (isa && cis2_isa_from_name(isa, &eo->isa))
        return cis2_cli_usage_error(
            cmd, "unknown --isa \"%.40s\" (expected sse2, avx2, avx512, neon or scalar)", isa);
    /* --isa picks the fast backend's kernels; the ref backend has no SIMD
     * paths and arm D picks its own, so ignoring it there would let a run
     * claim an ISA (or one this CPU lacks) it never used. */
    if (isa && eo->isa != CIS2_ISA_AUTO && eo->backend != CIS2_BACKEND_FAST)
        return cis2_cli_usage_error(cmd, "--isa %s applies to --backend fast only (%s)", isa,
                                    eo->backend == CIS2_BACKEND_REF
                                        ? "the ref backend has no SIMD paths"
                                        : "arm D picks its own int8 kernels");
    eo->threads = threads;
    return 0;
}

int cis2_cli_chat_template(const char *cmd, const char *dir, const char *format,
                           cis2_chat_template **t, char *why)
{
    char err[CIS2_ERR_LEN];
    *t = NULL;
    why[0] = 0;
    if (format) {
        if (cis2_chat_template_builtin(t, format, err))
            return cis2_cli_usage_error(cmd, "--chat-format: %s", err);
        return 0;
    }
    if (cis2_chat_template_load(t, dir, err)) {
        *t = NULL;
        snprintf(why, CIS2_ERR_LEN, "%s%s", err,
                 strstr(err, "--chat-format") ? "" : " (or give --chat-format chatml)");
    }
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
    int seen[64] = { 0 }, np = 0, only_pos = 0;
    if (nopts > 64) return cis2_cli_usage_error(cmd, "internal: too many options");
    if (npos) *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && !strcmp(a, "--")) { /* the end of the options */
            only_pos = 1;
            continue;
        }
        if (only_pos || a[0] != '-' || a[1] == 0) {
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
        /* --threads=2: the GNU form of a long option, its value after the '=' */
        const char *eq = strchr(a, '='), *inl = NULL;
        char name[64];
        if (!o && eq && a[1] == '-' && eq - a < (ptrdiff_t)sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
            o = find_opt(opts, nopts, name);
            if (o && o->kind == CIS2_OPT_FLAG)
                return cis2_cli_usage_error(cmd, "option '%s' takes no value, got '%s'", name, a);
            if (o) {
                inl = eq + 1;
                a = name;
            }
        }
        if (!o) return cis2_cli_usage_error(cmd, "unknown option '%s' (see cis2 help)", a);
        int k = (int)(o - opts);
        if (seen[k]++ && o->kind != CIS2_OPT_LIST)
            return cis2_cli_usage_error(cmd, "option '%s' is given more than once", a);
        if (o->kind == CIS2_OPT_FLAG) {
            *(int *)o->dst = 1;
            continue;
        }
        if (!inl && i + 1 >= argc) return cis2_cli_usage_error(cmd, "option '%s' needs a value", a);
        const char *v = inl ? inl : argv[++i];
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
                return cis2_cli_usage_error(cmd, "option '%s' is given too many times", a);
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
    const cis2_opt all[] = {
        { "--model", NULL, CIS2_OPT_PATH, &o->model, 0, 0 },
        { "--prompt", NULL, CIS2_OPT_STR, &o->prompt, 0, 0 },
        { "--prompt-ids", NULL, CIS2_OPT_STR, &o->prompt_ids, 0, 0 },
        { "--teacher-force", NULL, CIS2_OPT_STR, &o->teacher_force, 0, 0 },
        { "--receipt", NULL, CIS2_OPT_PATH, &o->receipt, 0, 0 },
        { "--output", "-o", CIS2_OPT_PATH, &o->output, 0, 0 },
        { "--backend", NULL, CIS2_OPT_LIST, &o->backends, 0, 0 },
        { "--isa", NULL, CIS2_OPT_STR, &o->isa, 0, 0 },
        { "--fault", NULL, CIS2_OPT_STR, &o->fault, 0, 0 },
        { "--fault-arg", NULL, CIS2_OPT_STR, &o->fault_arg, 0, 0 },
        { "--vector", NULL, CIS2_OPT_PATH, &o->vector, 0, 0 },
        { "--arm", NULL, CIS2_OPT_STR, &o->arm, 0, 0 },
        { "--layers", NULL, CIS2_OPT_STR, &o->layers, 0, 0 },
        { "--nodes", NULL, CIS2_OPT_STR, &o->nodes, 0, 0 },
        { "--against", NULL, CIS2_OPT_PATH, &o->against, 0, 0 },
        { "--tol", NULL, CIS2_OPT_PATH, &o->tol, 0, 0 },
        { "--table", NULL, CIS2_OPT_STR, &o->table, 0, 0 },
        { "--threads", NULL, CIS2_OPT_INT, &o->threads, 1, 1024 },
        { "--n", "-n", CIS2_OPT_INT, &o->n, 1, 1000000 },
        { "--stop-at-eos", NULL, CIS2_OPT_FLAG, &o->stop_at_eos, 0, 0 },
        { "--check-determinism", NULL, CIS2_OPT_FLAG, &o->check_det, 0, 0 },
        { "--no-check-determinism", NULL, CIS2_OPT_FLAG, &o->no_check_det, 0, 0 },
        { "--hash-only", NULL, CIS2_OPT_FLAG, &o->hash_only, 0, 0 },
        { "--exact", NULL, CIS2_OPT_FLAG, &o->exact, 0, 0 },
        { "--brief", NULL, CIS2_OPT_FLAG, &o->brief, 0, 0 },
        { "--chat", NULL, CIS2_OPT_PATH, &o->chat, 0, 0 },
        { "--chat-format", NULL, CIS2_OPT_PATH, &o->chat_format, 0, 0 },
        { "--chat-template", NULL, CIS2_OPT_PATH, &o->chat_template, 0, 0 },
        { "--chat-template-kwarg", NULL, CIS2_OPT_LIST, &o->chat_kwargs, 0, 0 },
        { "--chat-date", NULL, CIS2_OPT_PATH, &o->chat_date, 0, 0 },
        { "--temperature", NULL, CIS2_OPT_STR, &o->temperature, 0, 0 },
        { "--top-k", NULL, CIS2_OPT_STR, &o->top_k, 0, 0 },
        { "--top-p", NULL, CIS2_OPT_STR, &o->top_p, 0, 0 },
        { "--min-p", NULL, CIS2_OPT_STR, &o->min_p, 0, 0 },
        { "--seed", NULL, CIS2_OPT_STR, &o->seed, 0, 0 },
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
    /* --backend repeats only where the command compares two ("--backend+") */
    int nb_max = strstr(allowed, " --backend+ ") ? 2 : 1;
    if (o->backends.n > nb_max)
        return cis2_cli_usage_error(cmd, "option '--backend' is given more than %s",
                                    nb_max == 2 ? "twice" : "once");
    o->backend = o->backends.n ? o->backends.v[0] : NULL;
    if (o->fault_arg && !o->fault) /* an argument with nothing to apply it to: no silent no-op */
        return cis2_cli_usage_error(cmd, "--fault-arg needs --fault");
    if (positional) *positional = np ? pos[0] : NULL;
    o->n_set = o->n != 0; /* the range starts at 1: 0 means not given */
    if (!o->n_set) o->n = 16;
    return 0;
}

int cis2_cli_run_engine_opts(const char *cmd, const cis2_run_opts *o, cis2_engine_opts *eo)
{
    if (cis2_cli_engine_opts(cmd, o->backend, o->isa, o->threads, eo)) return 1;
    eo->fault = o->fault;
    eo->fault_arg = o->fault_arg;
    return 0;
}

/* A flag's value in a message: escaped, one line (docs/errors.md). */
static const char *esc_val(const char *v, char *out, size_t cap)
{
    return cis2_escape(v, strlen(v), out, cap, CIS2_ESC_TEXT);
}

int cis2_cli_sampler(const char *cmd, const cis2_run_opts *o, cis2_sampler *s)
{
    char ev[96];
    memset(s, 0, sizeof *s);
    s->top_p = 1.0f;
    if (o->temperature) {
        if (smp_parse_num(o->temperature, &s->temperature))
            return cis2_cli_usage_error(cmd, "--temperature: expected a number like 0.7, got '%s'",
                                        esc_val(o->temperature, ev, sizeof ev));
        char err[CIS2_ERR_LEN];
        if (cis2_sampler_check(s, err))
            return cis2_cli_usage_error(cmd,
                                        "--temperature: must be 0 or a normal number above "
                                        "0, got '%s'",
                                        esc_val(o->temperature, ev, sizeof ev));
    }
    const char *flag[4] = { "--top-k", "--top-p", "--min-p", "--seed" };
    const char *val[4] = { o->top_k, o->top_p, o->min_p, o->seed };
    for (int k = 0; k < 4; k++) {
        if (!val[k]) continue;
        if (s->temperature == 0.0f)
            return cis2_cli_usage_error(cmd,
                                        "%s needs --temperature above 0 (temperature 0 is the "
                                        "greedy argmax, which has no %s)",
                                        flag[k], flag[k] + 2);
        esc_val(val[k], ev, sizeof ev);
        uint64_t u;
        float f;
        if (k == 0 && (smp_parse_seed(val[k], &u) || u > 0x7FFFFFFF))
            return cis2_cli_usage_error(cmd,
                                        "--top-k: expected an integer from 0 to 2147483647, "
                                        "got '%s'",
                                        ev);
        if (k == 0) s->top_k = (int)u;
        if ((k == 1 || k == 2) && (smp_parse_num(val[k], &f) || f > 1.0f ||
                                   (f != 0.0f && (cis2_f2u(f) & 0x7F800000u) == 0)))
            return cis2_cli_usage_error(cmd, "%s: expected a number in [0, 1]%s, got '%s'", flag[k],
                                        k == 1 ? " (1 = off)" : " (0 = off)", ev);
        if (k == 1) s->top_p = f;
        if (k == 2) s->min_p = f;
        if (k == 3 && smp_parse_seed(val[k], &s->seed))
            return cis2_cli_usage_error(cmd,
                                        "--seed: expected an integer from 0 to "
                                        "18446744073709551615, got '%s'",
                                        ev);
    }
    if (s->temperature > 0.0f && !o->seed && getentropy(&s->seed, sizeof s->seed) != 0)
        return cis2_cli_usage_error(cmd, "--seed: not given, and the system gave no randomness "
                                         "to choose one; give --seed N");
    return 0;
}

void cis2_cli_put_escaped(FILE *f, const char *s, size_t n, cis2_esc_mode mode)
{
    cis2_sb b = { 0 };
    cis2_sb_escape(&b, s, n, mode);
    if (b.b && !b.oom) fputs(b.b, f);
    cis2_sb_free(&b);
}

void cis2_cli_print_hex_line(const char *key, const uint8_t d[32])
{
    char h[65];
    cis2_hex(d, 32, h);
    printf("%s=%s\n", key, h);
}

/* §12.4: run the whole decode twice in this process and compare. The
 * environment hook CIS2_TEST_HOOK=det-mismatch makes the second run differ
 * (a negative control for tests/t_engine.sh; it changes no result). */
int cis2_cli_run_twice_check(cis2_engine *e, const int32_t *ids, int n, const cis2_gen_opts *g,
                             const cis2_result *r1, char *err)
{
    return cis2_cli_run_twice_check_sampled(e, ids, n, g, NULL, r1, err);
}

int cis2_cli_run_twice_check_sampled(cis2_engine *e, const int32_t *ids, int n,
                                     const cis2_gen_opts *g, const cis2_sampler *smp,
                                     const cis2_result *r1, char *err)
{
    cis2_result r2;
    if (cis2_generate_sampled(e, ids, n, g, smp, &r2, err)) return 1;
    const char *hook = getenv("CIS2_TEST_HOOK");
    if (hook && !strcmp(hook, "det-mismatch")) r2.witness[0] ^= 1;
    const char *what =
        memcmp(r1->witness, r2.witness, 32) ? "witness digest"
        : memcmp(r1->argmax, r2.argmax, 32) ? "argmax digest"
        : r1->n_gen != r2.n_gen || memcmp(r1->gen, r2.gen, (size_t)r1->n_gen * sizeof(int32_t))
            ? "generated token ids"
            : NULL;
    cis2_result_free(&r2);
    if (what) {
        snprintf(err, CIS2_ERR_LEN,
                 "determinism check failed: two runs in one process differ in their %s (§12.4)",
                 what);
        return 1;
    }
    return 0;
}

void cis2_cli_nan_note(const char *cmd, const cis2_result *r)
{
    if (r->nan_step < 0) return;
    cis2_cli_note(cmd,
                  "note: the logits of step %d hold a NaN (first at index %d): NaN bit patterns "
                  "differ by ISA, so this witness is not portable (docs/conformance.md)",
                  r->nan_step, r->nan_index);
}
