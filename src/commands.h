/* CLI subcommands. Each returns the process exit status (0 ok, 1 a check
 * failed, 2 bad usage or input); errors are one line on stderr. */
#ifndef CIS2_COMMANDS_H
#define CIS2_COMMANDS_H
#include "cis2.h"

int cis2_cmd_tokenize(int argc, char **argv);    /* src/cmd_tokenizer.c */
int cis2_cmd_detokenize(int argc, char **argv);  /* src/cmd_tokenizer.c */
int cis2_cmd_op(int argc, char **argv);          /* src/conformance.c */
int cis2_cmd_suite(int argc, char **argv);       /* src/conformance.c */
int cis2_cmd_bench(int argc, char **argv);       /* src/cmd_bench.c */
int cis2_cmd_trace(int argc, char **argv);       /* src/trace.c */
int cis2_cmd_diff(int argc, char **argv);        /* src/trace.c */
int cis2_cmd_compare(int argc, char **argv);     /* src/trace.c */

/* Shared by commands (src/cli.c). */
/* Pin FTZ/DAZ on this thread and run the §1.3 self-test; prints the error. */
int cis2_cli_fp_ready(const char *cmd);
/* Load DIR and make an engine; prints "cis2 CMD: error" on failure. */
int cis2_cli_open(const char *cmd, const char *dir, const cis2_engine_opts *eo,
                  cis2_model *m, cis2_engine **e);
/* Print "cis2 CMD: message" to stderr, return 2. */
int cis2_cli_usage_error(const char *cmd, const char *fmt, ...);
/* Parse a decimal int in [lo, hi]; returns 0 on success. */
int cis2_cli_int(const char *s, long lo, long hi, int *out);
#endif
