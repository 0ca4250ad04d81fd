/* cis2 join-shards --model DIR --out FILE: a sharded Hugging Face checkpoint
 * (model.safetensors.index.json and its shards) as one safetensors file
 * (model/shards.h). §12.1 hashes one weights file, so the engine loads the
 * joined file; written as DIR/model.safetensors, DIR is then a model. */
#include "cli/commands.h"
#include "model/shards.h"
#include <string.h>

int cis2_cmd_join_shards(int argc, char **argv)
{
    const char *model = NULL, *out = NULL;
    const cis2_opt opts[] = {
        { "--model", NULL, CIS2_OPT_PATH, &model, 0, 0 },
        { "--out", "-o", CIS2_OPT_PATH, &out, 0, 0 },
    };
    if (cis2_cli_parse("join-shards", argc, argv, opts, 2, NULL, 0, NULL, 0)) return 2;
    if (!model) return cis2_cli_usage_error("join-shards", "--model DIR is required");
    if (!out) return cis2_cli_usage_error("join-shards", "--out FILE is required");
    if (cis2_cli_dir_input_ok("join-shards", "--model", model) ||
        cis2_cli_output_ok("join-shards", "--out", out, 0))
        return 2;
    char err[CIS2_ERR_LEN];
    cis2_join_report r;
    if (cis2_shards_join(model, out, &r, err))
        return cis2_cli_usage_error("join-shards", "%s", err);
    char esc[2 * CIS2_ERR_LEN]; /* the path as given, terminal-safe */
    printf("join-shards: wrote %s (%d tensors from %d shards, %llu bytes)\n",
           cis2_escape(out, strlen(out), esc, sizeof esc, CIS2_ESC_TEXT), r.n_tensors, r.n_shards,
           (unsigned long long)r.out_bytes);
    cis2_cli_print_hex_line("weights_sha256", r.out_sha256);
    return 0;
}
