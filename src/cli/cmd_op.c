/* `cis2 op OP < vector.txt` (also `cis2-op OP`): the op-level conformance
 * candidate (docs/conformance.md). Reads one key=value vector on stdin,
 * computes OP with the engine's own scalar kernels, prints out_sha256= and
 * out_bits=. Exit 0 done, 1 a malformed vector, 2 usage, 3 FTZ/DAZ cannot
 * be pinned. */
#include "cli/commands.h"
#include "verify/conformance.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void op_list(cis2_sb *s)
{
    for (int i = 0; i < cis2_op_count(); i++)
        cis2_sb_printf(s, "%s%s", i ? ", " : "", cis2_op_name(i));
}

int cis2_cmd_op(int argc, char **argv)
{
    int help = 0;
    const cis2_opt opts[] = { { "--help", "-h", CIS2_OPT_FLAG, &help, 0, 0 } };
    const char *pos[1] = { NULL };
    int np = 0;
    if (cis2_cli_parse("op", argc, argv, opts, 1, pos, 1, &np, 0)) return 2;
    cis2_sb ops = { 0 };
    op_list(&ops);
    if (help) {
        printf("usage: cis2 op OP < vector.txt   (OP: %s)\n", ops.b ? ops.b : "");
        cis2_sb_free(&ops);
        return 0;
    }
    if (!np) {
        cis2_cli_usage_error("op", "usage: cis2 op OP < vector.txt (OP: %s)", ops.b ? ops.b : "");
        cis2_sb_free(&ops);
        return 2;
    }
    cis2_sb_free(&ops);
    int k = cis2_op_find(pos[0]);
    if (k < 0) return cis2_cli_usage_error("op", "unknown op '%.64s'", pos[0]);
    /* §1.3: pin FTZ/DAZ, read it back, and run the adversarial rows first. */
    if (cis2_cli_fp_ready("op")) return 3;
    char err[CIS2_ERR_LEN], *text;
    size_t len;
    if (cis2_read_fd_max(STDIN_FILENO, CIS2_CONF_MAX_INPUT, "stdin", &text, &len, err)) {
        cis2_cli_usage_error("op", "%s", err);
        return 1;
    }
    cis2_kv_doc d;
    if (cis2_kv_parse(text, len, "stdin", CIS2_KV_TRIM, &d, err)) {
        cis2_cli_usage_error("op", "%s", err);
        free(text);
        return 1;
    }
    int rc = 1;
    float *out = NULL;
    size_t n_out = 0;
    const char *vop = cis2_kv_get(&d, "op");
    if (vop && strcmp(vop, pos[0])) {
        cis2_cli_usage_error("op", "vector says op=%.64s but was asked for %s", vop, pos[0]);
    } else if (cis2_op_eval(k, &d, &out, &n_out, err)) {
        cis2_cli_usage_error("op", "%s", err);
    } else {
        uint8_t dig[32];
        char hex[65];
        cis2_f32_digest(out, n_out, dig); /* LE bytes, index order */
        cis2_hex(dig, 32, hex);
        printf("out_sha256=%s\nout_bits=", hex);
        for (size_t i = 0; i < n_out; i++) printf(i ? ",0x%08X" : "0x%08X", cis2_f2u(out[i]));
        printf("\n");
        rc = 0; /* a write error is main's to report (cli/main.c finish) */
    }
    free(out);
    cis2_kv_free(&d);
    free(text);
    return rc;
}
