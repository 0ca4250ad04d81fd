/* PLACEHOLDER — replaced by the fast-kernel work (issue 5). */
#include "commands.h"
int cis2_cmd_bench(int argc, char **argv) { (void)argc; (void)argv; return cis2_cli_usage_error("bench", "not built yet"); }
