/* PLACEHOLDER — replaced by the divergence-localizer work (issue 6). */
#include "commands.h"
int cis2_cmd_trace(int argc, char **argv) { (void)argc; (void)argv; return cis2_cli_usage_error("trace", "not built yet"); }
int cis2_cmd_diff(int argc, char **argv) { (void)argc; (void)argv; return cis2_cli_usage_error("diff", "not built yet"); }
int cis2_cmd_compare(int argc, char **argv) { (void)argc; (void)argv; return cis2_cli_usage_error("compare", "not built yet"); }
