/* `cis2 trace`: run the model teacher-forced (or greedy with -n) and write
 * every selected node's values to a trace file (docs/divergence.md); `-o -`
 * writes the trace to standard output (never to a terminal) and the summary
 * to stderr. */
#include "cli/commands.h"
#include "verify/trace.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cis2_cmd_trace(int argc, char **argv)
{
    cis2_run_opts o;
    if (cis2_cli_parse_opts("trace", argc, argv,
                            " --model --prompt-ids --teacher-force --n --output --arm --layers "
                            "--nodes --hash-only --backend --isa --threads --fault --fault-arg ",
                            &o, NULL))
        return 2;
    const char *model = o.model, *pids = o.prompt_ids, *tf = o.teacher_force, *out = o.output;
    int n = o.n_set ? o.n : 0;
    if (!model) return cis2_cli_usage_error("trace", "--model DIR is required");
    if (!pids) return cis2_cli_usage_error("trace", "--prompt-ids IDS is required");
    if (!out) return cis2_cli_usage_error("trace", "-o FILE is required");
    if (tf && n) return cis2_cli_usage_error("trace", "--teacher-force and -n exclude each other");
    if (cis2_cli_output_ok("trace", "-o", out, 1)) return 2;
    if (cis2_cli_output_not_input("trace", "-o", out, model, NULL, 0)) return 2;
    int to_stdout = !strcmp(out, "-");
    if (to_stdout && isatty(STDOUT_FILENO))
        return cis2_cli_usage_error("trace",
                                    "-o -: refusing to write a binary trace to a terminal");
    cis2_engine_opts eo;
    if (cis2_cli_run_engine_opts("trace", &o, &eo)) return 2;
    char err[CIS2_ERR_LEN];
    int32_t *prompt = NULL, *force = NULL;
    int np = 0, nf = 0, rc = 2;
    cis2_model *m = NULL;
    cis2_trace tr;
    cis2_trace_run run;
    memset(&tr, 0, sizeof tr);
    memset(&run, 0, sizeof run);
    if (cis2_parse_ids(pids, &prompt, &np, err)) {
        cis2_cli_usage_error("trace", "--prompt-ids: %s", err);
        goto out;
    }
    if (tf && cis2_parse_ids(tf, &force, &nf, err)) {
        cis2_cli_usage_error("trace", "--teacher-force: %s", err);
        goto out;
    }
    if (cis2_cli_load_model("trace", model, &m)) goto out;
    cis2_trace_req rq = { o.arm, o.layers, o.nodes, o.hash_only, n, 0 };
    tr.path = out;
    if (cis2_trace_arm(m, &eo, &rq, prompt, np, force, nf, &tr, &run, err)) {
        cis2_cli_usage_error("trace", "%s", err);
        goto out;
    }
    char *bytes;
    size_t blen;
    if (cis2_trace_format(&tr, &bytes, &blen, err)) {
        cis2_cli_usage_error("trace", "%s", err);
        goto out;
    }
    int wbad = to_stdout ? cis2_write_fd(STDOUT_FILENO, bytes, blen, "standard output", err)
                         : cis2_write_file_atomic(out, bytes, blen, err);
    free(bytes);
    if (wbad) {
        cis2_cli_usage_error("trace", "%s", err);
        goto out;
    }
    /* the summary goes where the trace does not */
    FILE *sf = to_stdout ? stderr : stdout;
    char *ti = cis2_format_ids(run.tokens, run.n_tokens),
         *pi = cis2_format_ids(run.pred, run.n_pred);
    fprintf(sf, "trace: wrote ");
    cis2_cli_put_escaped(sf, to_stdout ? "standard output" : out,
                         strlen(to_stdout ? "standard output" : out), CIS2_ESC_TEXT);
    fprintf(sf, " (%d %s, %d positions, arm ", tr.n, o.hash_only ? "tensor hashes" : "tensors",
            run.n_tokens);
    const char *a = cis2_trace_meta_get(&tr, "arm");
    cis2_cli_put_escaped(sf, a, strlen(a), CIS2_ESC_TEXT);
    fprintf(sf, ")\ntoken_ids=%s\npredicted_ids=%s\n", ti ? ti : "", pi ? pi : "");
    free(ti);
    free(pi);
    if (run.have_witness) {
        char wh[65];
        cis2_hex(run.witness, 32, wh);
        fprintf(sf, "CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=%s\n", wh, np,
                run.n_pred, cis2_model_dtype(m));
    }
    rc = 0;
out:
    cis2_trace_run_free(&run);
    cis2_trace_free(&tr);
    cis2_model_free(m);
    free(prompt);
    free(force);
    return rc;
}
