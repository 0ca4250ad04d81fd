/* cis2 quantize --model DIR --out QDIR [--lm-head] [--embed]: write DIR's
 * int8 twin (docs/quantization.md): row-wise symmetric int8 linears with
 * f32 scales, in the compressed-tensors layout. */
#include "cli/commands.h"
#include "model/quant.h"
#include <stdlib.h>
#include <string.h>

int cis2_cmd_quantize(int argc, char **argv)
{
    const char *model = NULL, *out = NULL;
    /* CIS2_TEST_HOOK=quantize-WHAT: tests/t_quant.sh stops the run at a point
     * of writing QDIR (cis2_quant_opts.test_hook) */
    const char *hook = getenv("CIS2_TEST_HOOK");
    cis2_quant_opts o = { 0, 0, hook && !strncmp(hook, "quantize-", 9) ? hook + 9 : NULL };
    const cis2_opt opts[] = {
        { "--model", NULL, CIS2_OPT_PATH, &model, 0, 0 },
        { "--out", "-o", CIS2_OPT_PATH, &out, 0, 0 },
        { "--lm-head", NULL, CIS2_OPT_FLAG, &o.lm_head, 0, 0 },
        { "--embed", NULL, CIS2_OPT_FLAG, &o.embed, 0, 0 },
    };
    if (cis2_cli_parse("quantize", argc, argv, opts, 4, NULL, 0, NULL, 0)) return 2;
    if (!model) return cis2_cli_usage_error("quantize", "--model DIR is required");
    if (!out) return cis2_cli_usage_error("quantize", "--out QDIR is required");
    if (cis2_cli_dir_input_ok("quantize", "--model", model) ||
        cis2_cli_dir_output_ok("quantize", "--out", out))
        return 2;
    char err[CIS2_ERR_LEN];
    cis2_quant_report r;
    if (cis2_quantize_checkpoint(model, out, &o, &r, err))
        return cis2_cli_usage_error("quantize", "%s", err);
    if (*r.note) cis2_cli_note("quantize", "note: %s", r.note);
    char esc[2 * CIS2_ERR_LEN]; /* the path as given, terminal-safe */
    printf("quantize: wrote %s (%d int8 linears, %d F32 norms/biases, %d copied; %llu -> %llu "
           "bytes)\n",
           cis2_escape(out, strlen(out), esc, sizeof esc, CIS2_ESC_TEXT), r.n_int8, r.n_f32,
           r.n_kept, (unsigned long long)r.in_bytes, (unsigned long long)r.out_bytes);
    printf("int8_tensors=%d\nint8_params=%llu\nzero_scale_rows=%d\n", r.n_int8,
           (unsigned long long)r.int8_params, r.zero_rows);
    printf("lm_head=%s\nembed=%s\n", o.lm_head ? "int8" : "float", o.embed ? "int8" : "float");
    cis2_cli_print_hex_line("weights_sha256", r.out_sha256);
    return 0;
}
