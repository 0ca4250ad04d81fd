/* PLACEHOLDER — replaced by the conformance work (issue 4). */
#include "commands.h"
#include <stdio.h>
int cis2_cmd_op(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "cis2 op: not built yet\n"); return 2; }
int cis2_cmd_suite(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "cis2 suite: not built yet\n"); return 2; }
