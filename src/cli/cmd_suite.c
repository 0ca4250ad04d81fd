/* `cis2 suite [--vectors DIR]... [--timeout S] [--] CANDIDATE [ARG...]`: the
 * op-level conformance checker (docs/conformance.md) over any candidate. */
#include "cli/commands.h"
#include "verify/conformance.h"
#include <stdlib.h>
#include <string.h>

#define USAGE "usage: cis2 suite [--vectors DIR]... [--timeout SECONDS] [--] CANDIDATE [ARG...]"

int cis2_cmd_suite(int argc, char **argv)
{
    cis2_opt_list dirs = { { 0 }, 0 };
    const char *timeout = NULL;
    int help = 0;
    const cis2_opt opts[] = {
        { "--vectors", NULL, CIS2_OPT_LIST, &dirs, 0, 0 },
        { "--timeout", NULL, CIS2_OPT_STR, &timeout, 0, 0 },
        { "--help", "-h", CIS2_OPT_FLAG, &help, 0, 0 },
    };
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    if (!pos) return cis2_cli_usage_error("suite", "out of memory");
    int np = 0, rc = 2;
    if (cis2_cli_parse("suite", argc, argv, opts, 3, pos, argc, &np, CIS2_PARSE_REST)) goto out;
    if (help) {
        printf("%s\n  runs `CANDIDATE ARG... OP` once per DIR/NAME.txt, the .txt on its stdin "
               "(default DIR:\n  tests/vectors, default timeout 10 s); exit 0 only if every vector "
               "passes\n",
               USAGE);
        rc = 0;
        goto out;
    }
    double timeout_s = 10.0;
    if (timeout) {
        char *e;
        timeout_s = strtod(timeout, &e);
        if (e == timeout || *e || !(timeout_s > 0.0 && timeout_s <= 3600.0)) {
            cis2_cli_usage_error("suite", "--timeout wants seconds in (0, 3600], got '%.32s'",
                                 timeout);
            goto out;
        }
    }
    for (int i = 0; i < dirs.n; i++)
        if (cis2_cli_dir_input_ok("suite", "--vectors", dirs.v[i])) goto out;
    if (!np) {
        cis2_cli_usage_error("suite", "%s", USAGE);
        goto out;
    }
    const char *def = "tests/vectors";
    cis2_suite_opts so = { dirs.n ? dirs.v : &def, dirs.n ? dirs.n : 1, (char *const *)pos, np,
                           timeout_s };
    char err[CIS2_ERR_LEN];
    rc = cis2_suite_run(stdout, &so, err);
    if (rc == 2) cis2_cli_usage_error("suite", "%s", err);
out:
    free(pos);
    return rc;
}
