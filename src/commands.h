/* CLI subcommands implemented outside cli.c. Each returns the process exit
 * status; errors are one line on stderr. */
#ifndef CIS2_COMMANDS_H
#define CIS2_COMMANDS_H
int cis2_cmd_tokenize(int argc, char **argv);    /* src/cmd_tokenizer.c */
int cis2_cmd_detokenize(int argc, char **argv);  /* src/cmd_tokenizer.c */
int cis2_cmd_op(int argc, char **argv);          /* src/conformance.c */
int cis2_cmd_suite(int argc, char **argv);       /* src/conformance.c */
#endif
