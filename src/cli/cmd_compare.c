/* `cis2 compare`: trace our engine and diff it, in one command, against
 * another engine's trace (teacher-forced with the tokens that trace records)
 * or against our other backend (docs/divergence.md). */
#include "cli/commands.h"
#include "verify/trace.h"
#include <stdlib.h>
#include <string.h>

/* --against: the prompt and forced tokens come from the trace's metadata;
 * any --prompt-ids / --teacher-force given must agree with them. */
static int tokens_from(const cis2_trace *t, const char *path, int32_t **prompt, int *np,
                       int32_t **force, int *nf)
{
    char err[CIS2_ERR_LEN];
    int32_t *tp = NULL, *tt = NULL;
    int ntp = 0, ntt = 0, rc = 1;
    if (cis2_trace_meta_ids(t, "token_ids", &tt, &ntt, err)) {
        cis2_cli_usage_error("compare", "%s (cannot teacher-force without the trace's token ids)",
                             err);
        goto out;
    }
    if (cis2_trace_meta_ids(t, "prompt_ids", &tp, &ntp, err)) {
        cis2_cli_usage_error("compare", "%s", err);
        goto out;
    }
    if (ntt == 0 || ntp == 0 || ntp > ntt || memcmp(tp, tt, (size_t)ntp * sizeof(int32_t))) {
        cis2_cli_usage_error(
            "compare", "%s: __metadata__ prompt_ids is not a non-empty prefix of token_ids", path);
        goto out;
    }
    if (*prompt && (*np != ntp || memcmp(*prompt, tp, (size_t)ntp * sizeof(int32_t)))) {
        cis2_cli_usage_error("compare", "--prompt-ids differ from the prompt_ids recorded in %s",
                             path);
        goto out;
    }
    if (*force && (*nf != ntt - ntp || memcmp(*force, tt + ntp, (size_t)*nf * sizeof(int32_t)))) {
        cis2_cli_usage_error("compare", "--teacher-force differs from the tokens recorded in %s",
                             path);
        goto out;
    }
    free(*prompt);
    free(*force);
    *prompt = tp;
    *np = ntp;
    *nf = ntt - ntp;
    *force = NULL;
    tp = NULL;
    if (*nf) {
        if (!(*force = malloc((size_t)*nf * sizeof(int32_t)))) {
            cis2_cli_usage_error("compare", "out of memory");
            goto out;
        }
        memcpy(*force, tt + ntp, (size_t)*nf * sizeof(int32_t));
    }
    rc = 0;
out:
    free(tp);
    free(tt);
    return rc;
}

int cis2_cmd_compare(int argc, char **argv)
{
    cis2_run_opts o;
    if (cis2_cli_parse_opts(
            "compare", argc, argv,
            " --model --prompt-ids --teacher-force --n --output --layers --nodes "
            "--backend --backend+ --isa --threads --against --exact --tol --table --brief ",
            &o, NULL))
        return 2;
    const char *model = o.model, *pids = o.prompt_ids, *tf = o.teacher_force, *out = o.output,
               *against = o.against, *tolp = o.tol;
    const cis2_opt_list be = o.backends;
    int n = o.n_set ? o.n : 0, exact = o.exact;
    if (!model) return cis2_cli_usage_error("compare", "--model DIR is required");
    if (!!against == (be.n == 2))
        return cis2_cli_usage_error(
            "compare",
            "give either --against TRACE or two backends (--backend ref --backend fast)");
    if (exact && (tolp || o.table))
        return cis2_cli_usage_error("compare", "--exact and --%s exclude each other",
                                    tolp ? "tol" : "table");
    if (tf && n)
        return cis2_cli_usage_error("compare", "--teacher-force and -n exclude each other");
    if (against && n)
        return cis2_cli_usage_error("compare",
                                    "-n does not apply to --against (the tokens come from the "
                                    "trace)");
    if (out && cis2_cli_output_ok("compare", "-o", out, 0)) return 2;
    const cis2_cli_input ins[] = { { "--against", against }, { "--tol", tolp } };
    if (out && cis2_cli_output_not_input("compare", "-o", out, model, ins, 2)) return 2;
    cis2_engine_opts eo[2];
    const char *b1 = be.n ? be.v[0] : "ref";
    /* --isa is for the fast side of a ref/fast pair; a ref side takes none */
    int fast0 = !strcmp(b1, "fast"), fast1 = be.n == 2 && !strcmp(be.v[1], "fast");
    const char *isa0 = fast0 || !fast1 ? o.isa : NULL, *isa1 = fast1 || !fast0 ? o.isa : NULL;
    if (cis2_cli_engine_opts("compare", b1, isa0, o.threads, &eo[0])) return 2;
    if (be.n == 2 && cis2_cli_engine_opts("compare", be.v[1], isa1, o.threads, &eo[1])) return 2;
    /* arm D is judged by its own table (docs/divergence.md), never bit for bit */
    int armd =
        eo[0].backend == CIS2_BACKEND_APPROX || (be.n == 2 && eo[1].backend == CIS2_BACKEND_APPROX);
    if (armd && exact)
        return cis2_cli_usage_error("compare",
                                    "--exact: --backend approx (arm D) is approximate; it is "
                                    "judged by a tolerance table");
    char err[CIS2_ERR_LEN];
    cis2_tol_table tol;
    if (cis2_tol_named(&tol, o.table ? o.table : armd ? "armd" : "fp32", err))
        return cis2_cli_usage_error("compare", "%s", err);
    if (tolp && cis2_tol_load(&tol, tolp, err)) return cis2_cli_usage_error("compare", "%s", err);
    int32_t *prompt = NULL, *force = NULL;
    int np = 0, nf = 0, rc = 2;
    cis2_trace theirs, ours, ours2;
    cis2_trace_run run1, run2;
    memset(&theirs, 0, sizeof theirs);
    memset(&ours, 0, sizeof ours);
    memset(&ours2, 0, sizeof ours2);
    memset(&run1, 0, sizeof run1);
    memset(&run2, 0, sizeof run2);
    cis2_model *m = NULL;
    if (pids && cis2_parse_ids(pids, &prompt, &np, err)) {
        cis2_cli_usage_error("compare", "--prompt-ids: %s", err);
        goto out;
    }
    if (tf && cis2_parse_ids(tf, &force, &nf, err)) {
        cis2_cli_usage_error("compare", "--teacher-force: %s", err);
        goto out;
    }
    if (against) {
        if (cis2_trace_load(&theirs, against, err)) {
            cis2_cli_usage_error("compare", "%s", err);
            goto out;
        }
        if (theirs.hash_only && (tolp || o.table || armd)) {
            cis2_cli_usage_error("compare", "%s: %s%s", against, HASH_ONLY_NO_TOL,
                                 armd && !tolp && !o.table ? " (arm D is judged by its table)"
                                                           : "");
            goto out;
        }
        if (tokens_from(&theirs, against, &prompt, &np, &force, &nf)) goto out;
    } else if (!prompt) {
        cis2_cli_usage_error("compare", "--prompt-ids IDS is required");
        goto out;
    }
    if (cis2_cli_load_model("compare", model, &m)) goto out;
    /* ids read from the trace are named as the trace's, not as flags the
     * user never gave (cis2_trace_arm's message) */
    for (int i = 0; against && i < np + nf; i++) {
        int32_t t = i < np ? prompt[i] : force[i - np], v = cis2_model_config(m)->vocab;
        if (t < 0 || t >= v) {
            cis2_cli_usage_error("compare",
                                 "%s: __metadata__ token_ids: id %d is outside the vocabulary "
                                 "(vocab_size = %d)",
                                 against, t, v);
            goto out;
        }
    }
    cis2_trace_req rq = { NULL, o.layers, o.nodes, 0, 0, n };
    char lbl[64];
    snprintf(lbl, sizeof lbl, "(our run, backend %s)", b1);
    ours.path = lbl;
    if (cis2_trace_arm(m, &eo[0], &rq, prompt, np, force, nf, &ours, &run1, err)) {
        cis2_cli_usage_error("compare", "%s", err);
        goto out;
    }
    if (out) {
        char *bytes = NULL;
        size_t blen;
        int bad = cis2_trace_format(&ours, &bytes, &blen, err) ||
                  cis2_write_file_atomic(out, bytes, blen, err);
        free(bytes);
        if (bad) {
            cis2_cli_usage_error("compare", "%s", err);
            goto out;
        }
    }
    if (against) {
        rc = cis2_trace_diff(stdout, &ours, &theirs, exact, &tol, o.brief, 1);
    } else {
        /* the second backend, teacher-forced with exactly the tokens the first fed */
        cis2_trace_req rq2 = { NULL, o.layers, o.nodes, 0, 0, 0 };
        char lbl2[64];
        snprintf(lbl2, sizeof lbl2, "(our run, backend %s)", be.v[1]);
        ours2.path = lbl2;
        if (cis2_trace_arm(m, &eo[1], &rq2, prompt, np, run1.tokens + np, run1.n_tokens - np,
                           &ours2, &run2, err)) {
            cis2_cli_usage_error("compare", "%s", err);
            goto out;
        }
        /* two CIS-2 backends: bit for bit unless --tol/--table; arm D by its table */
        rc = cis2_trace_diff(stdout, &ours, &ours2, !tolp && !o.table && !armd, &tol, o.brief, 0);
    }
out:
    cis2_trace_run_free(&run1);
    cis2_trace_run_free(&run2);
    cis2_trace_free(&theirs);
    cis2_trace_free(&ours);
    cis2_trace_free(&ours2);
    cis2_model_free(m);
    free(prompt);
    free(force);
    return rc;
}
