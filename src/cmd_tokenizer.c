/* PLACEHOLDER — replaced by the tokenizer work (issue 3). */
#include "commands.h"
#include <stdio.h>
int cis2_cmd_tokenize(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "cis2 tokenize: not built yet\n"); return 2; }
int cis2_cmd_detokenize(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "cis2 detokenize: not built yet\n"); return 2; }
