/* `cis2 diff A B [--exact | --table NAME | --tol FILE] [--brief]`: two traces aligned by
 * name, every node measured, the first divergent node named and the decision
 * tree walked (docs/divergence.md). Exit 0 identical or within tolerance, 1
 * diverged, 2 bad input. */
#include "cli/commands.h"
#include "verify/trace.h"

#define USAGE "usage: cis2 diff A B [--exact | [--table fp32|armd] [--tol FILE]] [--brief]"

int cis2_cmd_diff(int argc, char **argv)
{
    const char *tolp = NULL, *table = NULL, *pos[2] = { NULL, NULL };
    int exact = 0, brief = 0, np = 0;
    const cis2_opt opts[] = {
        { "--exact", NULL, CIS2_OPT_FLAG, &exact, 0, 0 },
        { "--brief", NULL, CIS2_OPT_FLAG, &brief, 0, 0 },
        { "--tol", NULL, CIS2_OPT_PATH, &tolp, 0, 0 },
        { "--table", NULL, CIS2_OPT_STR, &table, 0, 0 },
    };
    if (cis2_cli_parse("diff", argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 2, &np,
                       0))
        return 2;
    if (np != 2) return cis2_cli_usage_error("diff", USAGE);
    if (exact && (tolp || table))
        return cis2_cli_usage_error("diff", "--exact and --%s exclude each other",
                                    tolp ? "tol" : "table");
    char err[CIS2_ERR_LEN];
    cis2_tol_table tol;
    if (cis2_tol_named(&tol, table ? table : "fp32", err))
        return cis2_cli_usage_error("diff", "%s", err);
    if (tolp && cis2_tol_load(&tol, tolp, err)) return cis2_cli_usage_error("diff", "%s", err);
    cis2_trace A, B;
    if (cis2_trace_load(&A, pos[0], err)) return cis2_cli_usage_error("diff", "%s", err);
    if (cis2_trace_load(&B, pos[1], err)) {
        cis2_trace_free(&A);
        return cis2_cli_usage_error("diff", "%s", err);
    }
    /* a tolerance asked for would silently become a bit-for-bit check */
    const char *hp = A.hash_only ? pos[0] : B.hash_only ? pos[1] : NULL;
    if (hp && (tolp || table)) {
        cis2_trace_free(&A);
        cis2_trace_free(&B);
        return cis2_cli_usage_error("diff", "%s: %s", hp, HASH_ONLY_NO_TOL);
    }
    int rc = cis2_trace_diff(stdout, &A, &B, exact, &tol, brief, 0);
    cis2_trace_free(&A);
    cis2_trace_free(&B);
    return rc;
}
