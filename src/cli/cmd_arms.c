/* `cis2 arms`: the whole localization method in one command
 * (docs/divergence.md §7) — traces every available arm on the same
 * teacher-forced tokens, diffs each against arm B, and prints the matrix, the
 * state machine's verdicts and the ship/no-ship line. */
#include "cli/commands.h"
#include "model/quant.h"
#include "verify/conformance.h"
#include "verify/trace.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ESC(s, buf)  cis2_escape((s), strlen(s), (buf), sizeof(buf), CIS2_ESC_TEXT)
#define N_ARMS       6
#define PY_TIMEOUT_S 86400.0 /* arm B is a strict left-to-right loop: slow, but it ends */

enum { A_A, A_B, A_C, A_CF, A_D, A_E };
static const char *arm_label[N_ARMS] = { "A", "B", "C", "C'", "D", "E" };
static const char *arm_what[N_ARMS] = {
    "source fp32 (torch)",        "emulated int8 (torch, truth)", "exact int8, --backend ref",
    "exact int8, --backend fast", "approx int8 dot products",     "wasm32 build",
};
static const char *arm_file[N_ARMS] = { "A.st", "B.st", "C.st", "Cfast.st", "D.st", "E.st" };

typedef struct {
    int ran;       /* a trace is in tr */
    char why[300]; /* not available / failed: one line */
    cis2_trace tr;
    cis2_diff_sum s;     /* against B */
    int failed;          /* tried and failed (not "not available") */
    char note[160];      /* arm E: the script's own line (bytes, seconds, wasm memory) */
    cis2_diff_sum c;     /* arm E against arm C */
    int judged, outside; /* arm D: against arm C with its own table (diff-D-vs-C.txt) */
    cis2_diff_sum j;
} arm;

/* WORKDIR/NAME */
static void path_in(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* The first line of a child's stderr (its last line when the first is a
 * Python traceback header), escaped. */
static void child_reason(const cis2_child_result *r, char *out, size_t cap)
{
    const char *s = r->err, *line = s;
    for (const char *p = s; *p; p++)
        if (*p == '\n' && p[1]) line = p + 1;
    if (strncmp(s, "Traceback", 9)) line = s;
    size_t n = strcspn(line, "\n");
    cis2_escape(line, n > 200 ? 200 : n, out, cap, CIS2_ESC_TEXT);
}

/* Runs PY SCRIPT ARGS... (or NODE SCRIPT ARGS...); 0 when it exited 0, else
 * why[] says what happened. note (may be NULL): the first line of its stderr
 * when it exited 0. */
static int run_child(char **argv, char *why, size_t cap, char *note, size_t ncap)
{
    cis2_child_result r;
    char err[CIS2_ERR_LEN], rs[240];
    memset(&r, 0, sizeof r);
    int bad = cis2_run_child(argv, "", 0, PY_TIMEOUT_S, &r, err);
    if (bad) snprintf(why, cap, "%s", err);
    else if (r.timed_out) snprintf(why, cap, "no result within %gs (killed)", PY_TIMEOUT_S);
    else if (WIFSIGNALED(r.status)) snprintf(why, cap, "killed by signal %d", WTERMSIG(r.status));
    else if (!WIFEXITED(r.status) || WEXITSTATUS(r.status)) {
        child_reason(&r, rs, sizeof rs);
        snprintf(why, cap, "exit status %d%s%s", WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1,
                 *rs ? ": " : "", rs);
        bad = 1;
    }
    if (r.timed_out || WIFSIGNALED(r.status)) bad = 1;
    if (!bad && note) child_reason(&r, note, ncap);
    free(r.out);
    return bad;
}

/* REL (tools/torch_trace.py, web/cis2.wasm, ...) next to this binary: in its
 * directory (the checkout root) or the parent (build/cis2); *out empty when
 * neither holds it. */
static void find_tool(const char *relp, char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    out[0] = 0;
    if (n <= 0) return;
    exe[n] = 0;
    char *sl = strrchr(exe, '/');
    if (!sl) return;
    *sl = 0;
    for (int i = 0; i < 2; i++) {
        struct stat st;
        snprintf(out, cap, "%s/%s%s", exe, i ? "../" : "", relp);
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) return;
    }
    out[0] = 0;
}

/* The work directory: made when absent (mode 0755; *made set), used when it
 * is a directory, refused otherwise. */
static int work_dir(const char *dir, int *made)
{
    struct stat st;
    char ed[200];
    if (lstat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        return cis2_cli_usage_error("arms", "-o %s: exists and is not a directory", ESC(dir, ed));
    }
    if (errno != ENOENT || mkdir(dir, 0755))
        return cis2_cli_usage_error("arms", "-o %s: cannot create the directory: %s", ESC(dir, ed),
                                    strerror(errno));
    *made = 1;
    return 0;
}

/* A trace, or the report of a diff, written to WORKDIR/NAME (atomically). */
static int save(const char *dir, const char *name, const char *bytes, size_t len)
{
    char p[PATH_MAX + 64], err[CIS2_ERR_LEN];
    path_in(p, sizeof p, dir, name);
    if (cis2_write_file_atomic(p, bytes, len, err)) return cis2_cli_usage_error("arms", "%s", err);
    return 0;
}

/* One in-process arm: trace, keep the trace in the work directory. */
static int trace_ours(const cis2_model *m, int which, const char *backend, const char *fault,
                      const char *fault_arg, int threads, const int32_t *prompt, int np,
                      const int32_t *force, int nf, const char *dir, arm *a)
{
    cis2_engine_opts eo;
    char err[CIS2_ERR_LEN];
    if (cis2_cli_engine_opts("arms", backend, NULL, threads, &eo)) return 1;
    eo.fault = fault;
    eo.fault_arg = fault_arg;
    cis2_trace_req rq = { arm_label[which], NULL, NULL, 0, 0, 0 };
    cis2_trace_run run;
    memset(&run, 0, sizeof run);
    a->tr.path = arm_file[which];
    int bad = cis2_trace_arm(m, &eo, &rq, prompt, np, force, nf, &a->tr, &run, err);
    cis2_trace_run_free(&run);
    if (bad) return cis2_cli_usage_error("arms", "arm %s: %s", arm_label[which], err);
    char *bytes = NULL;
    size_t blen;
    if (cis2_trace_format(&a->tr, &bytes, &blen, err)) {
        free(bytes);
        return cis2_cli_usage_error("arms", "%s", err);
    }
    bad = save(dir, arm_file[which], bytes, blen);
    free(bytes);
    a->ran = !bad;
    return bad;
}

/* Arm E: WSCRIPT (web/test/wasm_trace.mjs) under NODE runs the wasm32 build
 * WASM teacher-forced on the int8 checkpoint and writes WORKDIR/E.st with the
 * native capture and writer compiled into it. Not available (never passed)
 * when node, the module or the script is missing; FAILED when it ran and did
 * not finish (running out of wasm32's 4 GiB included). */
static void trace_wasm(const char *node, const char *wasm, const char *wscript, const char *qdir,
                       const char *pids, const char *tf, const char *dir, arm *a)
{
    /* why is kept raw: the matrix and the ship line escape it once when printing */
    char why[300] = "", w2[300], err[CIS2_ERR_LEN];
    struct stat st;
    int se;
    if (!*wasm)
        snprintf(why, sizeof why,
                 "web/cis2.wasm not found next to this binary (bash tools/build_wasm.sh, or give "
                 "--wasm)");
    else if ((se = stat(wasm, &st) ? errno : 0) || !S_ISREG(st.st_mode))
        snprintf(why, sizeof why, "--wasm %s: %s", wasm, se ? strerror(se) : "not a regular file");
    else if (!*wscript)
        snprintf(why, sizeof why,
                 "web/test/wasm_trace.mjs not found next to this binary (give --wasm-script)");
    else if (stat(wscript, &st) || !S_ISREG(st.st_mode))
        snprintf(why, sizeof why, "--wasm-script %s: not a regular file", wscript);
    else {
        char *probe[] = { (char *)node, "--version", NULL };
        if (run_child(probe, w2, sizeof w2, NULL, 0))
            snprintf(why, sizeof why, "node %s cannot run (%s)", node, w2);
    }
    if (*why) {
        snprintf(a->why, sizeof a->why, "not available: %s", why);
        return;
    }
    char op[PATH_MAX + 64];
    path_in(op, sizeof op, dir, arm_file[A_E]);
    char *pa[] = { (char *)node,
                   (char *)wscript,
                   "--wasm",
                   (char *)wasm,
                   "--model",
                   (char *)qdir,
                   "--prompt-ids",
                   (char *)pids,
                   "--teacher-force",
                   (char *)tf,
                   "--out",
                   op,
                   "--arm",
                   "E",
                   NULL };
    if (run_child(pa, w2, sizeof w2, a->note, sizeof a->note)) {
        snprintf(a->why, sizeof a->why, "FAILED: wasm_trace.mjs %s", w2);
        a->failed = 1;
        return;
    }
    if (cis2_trace_load(&a->tr, op, err)) {
        snprintf(a->why, sizeof a->why, "FAILED: %s", err);
        a->failed = 1;
        return;
    }
    a->tr.path = arm_file[A_E]; /* the loader keeps `op`, which ends here */
    a->ran = 1;
}

/* The diff of `ref` against `a` with its full report in WORKDIR/NAME; *rc
 * its return value, *s its summary. */
static int diff_save(const cis2_trace *ref, const cis2_trace *a, int exact,
                     const cis2_tol_table *tol, const char *dir, const char *name, int *rc,
                     cis2_diff_sum *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return cis2_cli_usage_error("arms", "out of memory");
    *rc = cis2_trace_diff_sum(f, ref, a, exact, tol, 0, 0, s);
    fclose(f);
    int bad = save(dir, name, buf, len);
    free(buf);
    return bad;
}

/* arm X against REF (B, or C for E's second diff): the diff's full report to
 * WORKDIR/NAME, its summary in *s. */
static int diff_arm(const arm *ref, const arm *a, const char *name, int exact,
                    const cis2_tol_table *tol, const char *dir, cis2_diff_sum *s)
{
    int rc;
    return diff_save(&ref->tr, &a->tr, exact, tol, dir, name, &rc, s);
}

static const char *meta(const arm *a, const char *k)
{
    const char *v = a->ran ? cis2_trace_meta_get(&a->tr, k) : NULL;
    return v ? v : "";
}

/* A bit-for-bit diff in one phrase: "0 ULP on N tensors, top-1 a/b: IDENTICAL"
 * or where and by how much it diverged. */
static void exact_line(const cis2_diff_sum *s, char *v, size_t cap)
{
    char ef[80], u[24];
    if (s->nan_ulp) snprintf(u, sizeof u, "nan");
    else snprintf(u, sizeof u, "%llu", (unsigned long long)s->max_ulp);
    if (!s->diverged)
        snprintf(v, cap, "0 ULP on %d tensors, top-1 %d/%d: IDENTICAL", s->compared, s->top1_same,
                 s->n_logits);
    else
        snprintf(v, cap,
                 "max_ulp %s ndiff %lld in %d of %d tensors, top-1 %d/%d, first divergence %s: "
                 "DIVERGED",
                 u, (long long)s->ndiff, s->n_failed, s->compared, s->top1_same, s->n_logits,
                 s->have_first ? ESC(s->first, ef) : "none (names/tokens differ)");
}

/* The worst node kind of a tolerance diff, by max_rel. */
static void worst_line(const cis2_diff_sum *s, char *out, size_t cap)
{
    int wk = -1;
    double cmin = 1;
    for (int k = 0; k < CIS2_N_NODES; k++) {
        if (!s->kind[k].n) continue;
        if (wk < 0 || s->kind[k].max_rel > s->kind[wk].max_rel) wk = k;
        if (s->kind[k].min_cos < cmin) cmin = s->kind[k].min_cos;
    }
    if (wk < 0) {
        snprintf(out, cap, "no tensors compared");
        return;
    }
    snprintf(out, cap, "worst max_rel %.3e (%s), min cos %.6f, top-1 %d/%d", s->kind[wk].max_rel,
             cis2_trace_node_name(wk), cmin, s->top1_same, s->n_logits);
}

/* Prints States 1-5; returns State 1's result (-1 unknown, 0 fail, 1 pass). */
static int print_states(const arm *ar, int *c_exact)
{
    const arm *b = &ar[A_B], *c = &ar[A_C];
    const char *hb = meta(b, "int8_weights_sha256");
    int s1 = -1; /* -1 unknown, 0 fail, 1 pass */
    char names[64] = "";
    if (b->ran && *hb) {
        s1 = 1;
        for (int i = A_C; i <= A_E; i++) {
            if (!ar[i].ran) continue;
            if (strcmp(meta(&ar[i], "int8_weights_sha256"), hb)) s1 = 0;
            strcat(names, " ");
            strcat(names, arm_label[i]);
        }
    }
    printf("state machine (arm C against arm B; DIVERGENCE_LOCALIZATION.md's decision tree):\n");
    char hx[20], hs[80];
    snprintf(hx, sizeof hx, "%.12s", hb);
    if (s1 < 0)
        printf("  State 1 weight extraction ...... not checked (%s)\n",
               b->ran ? "arm B's trace carries no int8_weights_sha256" : "no arm B");
    else
        printf("  State 1 weight extraction ...... %s (int8_weights_sha256 of B vs%s: %s...)\n",
               s1 ? "pass" : "FAIL: the arms computed with different int8 weights or scales", names,
               ESC(hx, hs));
    static const char *st[4] = { "State 2 embedding ..............",
                                 "State 3 linear projections .....",
                                 "State 4 attention norm, FTZ ....",
                                 "State 5 autoregressive state ..." };
    int stop = s1 == 0 ? 0 : -1, br = -1;
    *c_exact = 0;
    if (s1 != 0 && b->ran && c->ran) {
        br = c->s.have_first ? c->s.branch : (c->s.diverged ? 4 : -1);
        *c_exact = !c->s.diverged;
    }
    for (int i = 0; i < 4; i++) {
        const char *v;
        char line[400];
        if (stop == 0) v = "- (stopped above)";
        else if (!b->ran || !c->ran) v = "not checked (arm B or C missing)";
        else if (br == 4) v = "FAIL: the traces differ in names or tokens (see diff-C.txt)";
        else if (br == i) {
            char ec[340];
            snprintf(line, sizeof line, "%s at %s: %s",
                     i == 3 ? "YES, divergence starts after position 0" : "FAIL",
                     ESC(c->s.first, hs), ESC(c->s.cause, ec));
            v = line;
            stop = 0;
        } else if (i == 3)
            v = br < 0 ? "pass (no divergence at any position)" : "- (stopped above)";
        else v = "pass";
        if (br == 4) stop = 0;
        printf("  %s %s\n", st[i], v);
    }
    return s1;
}

int cis2_cmd_arms(int argc, char **argv)
{
    const char *src = NULL, *qdir = NULL, *pids = NULL, *tf = NULL, *py = "/usr/bin/python3",
               *fault = NULL, *fault_arg = NULL, *out = NULL, *script = NULL, *node = "node",
               *wasm = NULL, *wscript = NULL;
    int threads = 0;
    const cis2_opt opts[] = {
        { "--source", NULL, CIS2_OPT_PATH, &src, 0, 0 },
        { "--quantized", NULL, CIS2_OPT_PATH, &qdir, 0, 0 },
        { "--prompt-ids", NULL, CIS2_OPT_STR, &pids, 0, 0 },
        { "--teacher-force", NULL, CIS2_OPT_STR, &tf, 0, 0 },
        { "--python", NULL, CIS2_OPT_PATH, &py, 0, 0 },
        { "--script", NULL, CIS2_OPT_PATH, &script, 0, 0 },
        { "--node", NULL, CIS2_OPT_PATH, &node, 0, 0 },
        { "--wasm", NULL, CIS2_OPT_PATH, &wasm, 0, 0 },
        { "--wasm-script", NULL, CIS2_OPT_PATH, &wscript, 0, 0 },
        { "--fault", NULL, CIS2_OPT_STR, &fault, 0, 0 },
        { "--fault-arg", NULL, CIS2_OPT_STR, &fault_arg, 0, 0 },
        { "--threads", NULL, CIS2_OPT_INT, &threads, 1, 1024 },
        { "--output", "-o", CIS2_OPT_PATH, &out, 0, 0 },
    };
    if (cis2_cli_parse("arms", argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL,
                       0))
        return 2;
    if (!src) return cis2_cli_usage_error("arms", "--source DIR is required (arm A)");
    if (!qdir) return cis2_cli_usage_error("arms", "--quantized QDIR is required (cis2 quantize)");
    if (!pids) return cis2_cli_usage_error("arms", "--prompt-ids IDS is required");
    if (!tf) return cis2_cli_usage_error("arms", "--teacher-force IDS is required");
    if (fault_arg && !fault) return cis2_cli_usage_error("arms", "--fault-arg needs --fault");
    if (out && cis2_cli_dir_output_ok("arms", "-o", out)) return 2;
    char spath[PATH_MAX];
    if (script) snprintf(spath, sizeof spath, "%s", script);
    else find_tool("tools/torch_trace.py", spath, sizeof spath);
    char wpath[PATH_MAX], wspath[PATH_MAX]; /* arm E: the module and its node driver */
    if (wasm) snprintf(wpath, sizeof wpath, "%s", wasm);
    else find_tool("web/cis2.wasm", wpath, sizeof wpath);
    if (wscript) snprintf(wspath, sizeof wspath, "%s", wscript);
    else find_tool("web/test/wasm_trace.mjs", wspath, sizeof wspath);

    char err[CIS2_ERR_LEN];
    int32_t *prompt = NULL, *force = NULL;
    int np = 0, nf = 0, rc = 2, made = 0;
    cis2_model *m = NULL;
    arm ar[N_ARMS];
    memset(ar, 0, sizeof ar);
    if (cis2_parse_ids(pids, &prompt, &np, err)) {
        cis2_cli_usage_error("arms", "--prompt-ids: %s", err);
        goto out;
    }
    if (cis2_parse_ids(tf, &force, &nf, err)) {
        cis2_cli_usage_error("arms", "--teacher-force: %s", err);
        goto out;
    }
    if (cis2_cli_load_model("arms", qdir, &m)) goto out;
    if (strcmp(cis2_model_dtype(m), "int8-row")) {
        char eq[200];
        cis2_cli_usage_error("arms", "--quantized %s: not an int8 checkpoint (cis2 quantize)",
                             ESC(qdir, eq));
        goto out;
    }
    /* --source is arm A's input, read only by the torch child: checked here
     * too, so that a missing or wrong one is refused before any work rather
     * than reported as a FAILED arm next to verdict=SHIP and exit 0. It is the
     * float checkpoint --quantized was made from (cis2 quantize --model). */
    {
        cis2_model *ms;
        cis2_model_opts mo = { CIS2_HASH_FULL }; /* its weights_sha256: the twin's source? */
        char es[200];
        if (cis2_model_open(&ms, src, &mo, err)) {
            cis2_cli_usage_error("arms", "--source: %s", err);
            goto out;
        }
        const cis2_config *a = cis2_model_config(ms), *b = cis2_model_config(m);
        const char *why = strcmp(cis2_model_dtype(ms), "fp32")
                              ? "an int8 checkpoint, not a float source"
                          : a->arch != b->arch || a->hidden != b->hidden || a->inter != b->inter ||
                                  a->n_layers != b->n_layers || a->n_heads != b->n_heads ||
                                  a->n_kv_heads != b->n_kv_heads || a->head_dim != b->head_dim ||
                                  a->vocab != b->vocab
                              ? "its config.json has another shape than --quantized's, so it is "
                                "not that checkpoint's source"
                              : NULL;
        char shex[65];
        cis2_hex(cis2_model_digests(ms)->weights_sha256, 32, shex);
        cis2_model_free(ms);
        if (why) {
            cis2_cli_usage_error("arms", "--source %s: %s", ESC(src, es), why);
            goto out;
        }
        /* The same shape is not the same model: `cis2 quantize` records the
         * source's SHA-256 in the twin (source_sha256), and another model's
         * twin gave every arm's verdict against the wrong arm A. A twin from
         * another quantizer records none and is taken as given. */
        char *rec = NULL;
        size_t rlen = 0;
        int has = cis2_quant_recorded_source(qdir, &rec, &rlen, err);
        if (has < 0) {
            cis2_cli_usage_error("arms", "--quantized: %s", err);
            goto out;
        }
        if (has && (rlen != 64 || memcmp(rec, shex, 64))) {
            char eq[200], er[80];
            cis2_cli_usage_error(
                "arms",
                "--source %s: not the checkpoint --quantized %s was made from (its "
                "source_sha256 is %s..., --source's model.safetensors is %.12s...)",
                ESC(src, es), ESC(qdir, eq),
                cis2_escape(rec, rlen < 12 ? rlen : 12, er, sizeof er, CIS2_ESC_TEXT), shex);
            free(rec);
            goto out;
        }
        free(rec);
    }
    /* the ids are the model's (every arm decodes them): checked before the
     * work directory exists, so that a refused run leaves none behind */
    const cis2_config *qc = cis2_model_config(m);
    for (int i = 0; i < np + nf; i++) {
        int32_t id = i < np ? prompt[i] : force[i - np];
        if (id < 0 || id >= qc->vocab) {
            cis2_cli_usage_error("arms", "%s id %d is outside the vocabulary (vocab_size = %d)",
                                 i < np ? "--prompt-ids" : "--teacher-force", (int)id, qc->vocab);
            goto out;
        }
    }
    /* the work directory: made only once the inputs are known good, and
     * removed again (when still empty) if an arm is refused before writing */
    char tmpl[] = "/tmp/cis2-arms-XXXXXX";
    if (!out && !(out = mkdtemp(tmpl))) {
        cis2_cli_usage_error("arms", "cannot create a work directory: %s", strerror(errno));
        goto out;
    }
    made = made || out == tmpl;
    if (work_dir(out, &made)) goto out;
    /* C (with the fault, if any), C' and D in this process */
    if (trace_ours(m, A_C, "ref", fault, fault_arg, threads, prompt, np, force, nf, out,
                   &ar[A_C]) ||
        trace_ours(m, A_CF, "fast", NULL, NULL, threads, prompt, np, force, nf, out, &ar[A_CF]) ||
        trace_ours(m, A_D, "approx", NULL, NULL, threads, prompt, np, force, nf, out, &ar[A_D]))
        goto out;

    /* A and B: tools/torch_trace.py under PY, when PY has torch */
    char *probe[] = { (char *)py, "-c", "import torch, numpy", NULL };
    char why[300] = "";
    if (!*spath) snprintf(why, sizeof why, "tools/torch_trace.py not found (give --script)");
    else if (run_child(probe, why, sizeof why, NULL, 0)) {
        char w2[300];
        snprintf(w2, sizeof w2, "%s cannot import torch and numpy (%s)", py, why);
        snprintf(why, sizeof why, "%s", w2);
    }
    for (int i = A_A; i <= A_B; i++) {
        if (*why) {
            snprintf(ar[i].why, sizeof ar[i].why, "not available: %s", why);
            continue;
        }
        char op[PATH_MAX + 64];
        path_in(op, sizeof op, out, arm_file[i]);
        char *pa[] = { (char *)py,
                       spath,
                       "--model",
                       (char *)(i ? qdir : src),
                       "--arm",
                       i ? "B" : "A",
                       "--prompt-ids",
                       (char *)pids,
                       "--teacher-force",
                       (char *)tf,
                       "-o",
                       op,
                       NULL };
        char w[300];
        if (run_child(pa, w, sizeof w, NULL, 0)) {
            snprintf(ar[i].why, sizeof ar[i].why, "FAILED: torch_trace.py %s", w);
            ar[i].failed = 1;
            continue;
        }
        if (cis2_trace_load(&ar[i].tr, op, err)) {
            snprintf(ar[i].why, sizeof ar[i].why, "FAILED: %s", err);
            ar[i].failed = 1;
            continue;
        }
        ar[i].tr.path = arm_file[i]; /* the loader keeps `op`, which ends with this loop */
        ar[i].ran = 1;
    }
    trace_wasm(node, wpath, wspath, qdir, pids, tf, out, &ar[A_E]);

    /* arm D against arm C with D's own table; C' (= C bit for bit, never faulted) stands
     * for C so that a fault injected into C is not blamed on D */
    cis2_tol_table tol;
    if (cis2_tol_named(&tol, "armd", err)) {
        cis2_cli_usage_error("arms", "%s", err);
        goto out;
    }
    if (ar[A_CF].ran && ar[A_D].ran) {
        if (diff_save(&ar[A_CF].tr, &ar[A_D].tr, 0, &tol, out, "diff-D-vs-C.txt", &ar[A_D].outside,
                      &ar[A_D].j))
            goto out;
        ar[A_D].judged = 1;
    }
    /* every arm against B */
    cis2_tol_defaults(&tol);
    if (ar[A_B].ran) {
        for (int i = A_A; i <= A_E; i++) {
            if (i == A_B || !ar[i].ran) continue;
            char name[32];
            snprintf(name, sizeof name, "diff-%s.txt", i == A_CF ? "Cfast" : arm_label[i]);
            if (diff_arm(&ar[A_B], &ar[i], name, i == A_C || i == A_CF || i == A_E, &tol, out,
                         &ar[i].s))
                goto out;
        }
    }
    /* E against C as well, bit for bit: the browser build must be the exact engine */
    if (ar[A_E].ran && ar[A_C].ran &&
        diff_arm(&ar[A_C], &ar[A_E], "diff-E-C.txt", 1, &tol, out, &ar[A_E].c))
        goto out;

    char eo_[400];
    printf("arms: work directory %s (traces, and each diff against B in diff-X.txt)\n",
           ESC(out, eo_));
    printf("window: %d prompt + %d teacher-forced tokens = %d positions\n", np, nf, np + nf);
    if (fault) {
        char ef[80], ea[160];
        printf("fault: %s%s%s injected into arm C\n", ESC(fault, ef), fault_arg ? " " : "",
               fault_arg ? ESC(fault_arg, ea) : "");
    }
    printf("%-3s %-29s %s\n", "arm", "what", "against B");
    for (int i = 0; i < N_ARMS; i++) {
        const arm *a = &ar[i];
        char v[400], ew[320];
        if (!a->ran) snprintf(v, sizeof v, "%s", ESC(a->why, ew));
        else if (i == A_B) snprintf(v, sizeof v, "the ground truth (%d tensors)", a->tr.n);
        else if (i == A_E) {
            char vc[200], ec[200];
            if (ar[A_B].ran) exact_line(&a->s, v, sizeof v);
            else snprintf(v, sizeof v, "ran; not compared (no arm B)");
            char u[24] = "nan";
            if (!a->c.nan_ulp) snprintf(u, sizeof u, "%llu", (unsigned long long)a->c.max_ulp);
            snprintf(vc, sizeof vc, "max_ulp %s, %lld elements differ, in %d of %d tensors", u,
                     (long long)a->c.ndiff, a->c.n_failed, a->c.compared);
            size_t l = strlen(v);
            snprintf(v + l, sizeof v - l, "; against C: %s (%s)", vc,
                     ESC(strncmp(a->note, "wasm_trace: ", 12) ? a->note : a->note + 12, ec));
        } else if (i == A_D && a->judged) {
            char wl[200], ef[80];
            const cis2_diff_sum *j = &a->j;
            if (ar[A_B].ran) worst_line(&a->s, wl, sizeof wl);
            else snprintf(wl, sizeof wl, "not compared with B (no arm B)");
            snprintf(v, sizeof v, "%s; against C: %s arm D's table (armd%s%s)", wl,
                     a->outside ? "OUTSIDE" : "within",
                     a->outside && j->have_first ? ", first " : "",
                     a->outside && j->have_first ? ESC(j->first, ef) : "");
        } else if (!ar[A_B].ran) snprintf(v, sizeof v, "ran; not compared (no arm B)");
        else if (i == A_C || i == A_CF) exact_line(&a->s, v, sizeof v);
        else {
            char wl[200];
            worst_line(&a->s, wl, sizeof wl);
            snprintf(v, sizeof v, "%s: %s", wl,
                     i == A_D ? "not judged against C (arm C' did not run)"
                              : "quantization error (statistical, not a gate)");
        }
        printf("%-3s %-29s %s\n", arm_label[i], arm_what[i], v);
    }
    if (ar[A_A].ran && ar[A_B].ran) {
        const cis2_diff_sum *s = &ar[A_A].s;
        printf("quantization error, arm A against arm B, per node (worst over positions and "
               "layers):\n");
        printf("  %-12s %5s %10s %10s %10s %12s\n", "node", "n", "max_rel", "mean_rel",
               "mean_rel_max", "min_cos");
        for (int k = 0; k < CIS2_N_NODES; k++) {
            const cis2_diff_kind *d = &s->kind[k];
            if (!d->n) continue;
            printf("  %-12s %5d %10.3e %10.3e %10.3e %12.9f\n", cis2_trace_node_name(k), d->n,
                   d->max_rel, d->mean_rel_sum / d->n, d->mean_rel_max, d->min_cos);
        }
        printf("  top-1 agreement A vs B: %d of %d positions\n", s->top1_same, s->n_logits);
    }
    int c_exact = 0;
    int s1 = print_states(ar, &c_exact);
    const arm *c = &ar[A_C], *cf = &ar[A_CF], *e = &ar[A_E];
    /* E not available leaves the method incomplete, as A does; E failed or not 0 ULP: no-ship */
    int e_missing = !e->ran && !e->failed;
    int incomplete = !ar[A_A].ran || !ar[A_B].ran || e_missing;
    if (!ar[A_B].ran) {
        printf("ship: cannot decide: arm B %s\n", ar[A_B].why);
        printf("verdict=INCOMPLETE\n");
        rc = 3;
        goto out;
    }
    int top1 = c->s.n_logits == np + nf && c->s.top1_same == c->s.n_logits;
    int e_ok = e->ran && !e->s.diverged && !e->c.diverged && e->s.n_logits == np + nf;
    int ship = top1 && c_exact && !cf->s.diverged && (e_ok || e_missing);
    char ew[320], es[360];
    if (e_ok)
        snprintf(es, sizeof es,
                 "ran the whole window without running out of memory, 0 ULP against B and C");
    else if (e->ran)
        snprintf(es, sizeof es,
                 "DIVERGED (against B: max_ulp %llu ndiff %lld; against C: "
                 "max_ulp %llu ndiff %lld)",
                 (unsigned long long)e->s.max_ulp, (long long)e->s.ndiff,
                 (unsigned long long)e->c.max_ulp, (long long)e->c.ndiff);
    else snprintf(es, sizeof es, "%s", ESC(e->why, ew));
    printf("ship criterion: arm C reproduces arm B's top-1 at every position (%d/%d)%s, C and C' "
           "0 ULP on every node (%s, %s), arm E %s\n",
           c->s.top1_same, np + nf, np + nf < 512 ? " [the document's window is 512]" : "",
           c->s.diverged ? "C DIVERGED" : "C yes", cf->s.diverged ? "C' DIVERGED" : "C' yes", es);
    if (!ship && s1 == 0)
        printf("no-ship: State 1: the arms computed with different int8 weights or scales\n");
    else if (!ship && c->s.have_first)
        printf("no-ship: first divergent node %s, branch=%s\n", ESC(c->s.first, ew),
               c->s.branch_name);
    else if (!ship && !e_ok && !e_missing) printf("no-ship: arm E (the wasm32 build) %s\n", es);
    const char *miss = !ar[A_A].ran && e_missing ? "arms A and E did not run"
                       : !ar[A_A].ran            ? "arm A did not run"
                                                 : "arm E did not run";
    printf("verdict=%s%s%s%s\n", ship ? "SHIP" : "NO-SHIP",
           incomplete ? " (the method is incomplete: " : "", incomplete ? miss : "",
           incomplete ? ")" : "");
    rc = !ship ? 1 : incomplete ? 3 : 0;
out:
    if (rc == 2 && made) rmdir(out); /* only an empty one: traces already written stay */
    for (int i = 0; i < N_ARMS; i++) cis2_trace_free(&ar[i].tr);
    cis2_model_free(m);
    free(prompt);
    free(force);
    return rc;
}
