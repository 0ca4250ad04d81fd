/* The op vector parser and op inputs (src/cli/conformance.c): src/cli/conformance.c
 * exposes no parser API, so this drives `cis2 op OP` itself (cis2_cmd_op) with
 * stdin redirected to the input. OP is the input's own "op=" line when it
 * names a known op, else chosen by the first byte. stdout/stderr go to
 * /dev/null (errors are checked by the CLI tests). */
#include "fuzz.h"
#include "cli/commands.h"
#include <stdio.h>

static const char *OPS[] = { "rmsnorm",         "matvec",     "exp_pinned",   "softmax",
                             "attention_block", "rope_table", "embed_lookup", "ln_pinned",
                             "sin_pinned",      "cos_pinned", "silu",         "rsqrt",
                             "dot_seq",         "rope_rotate" };
#define N_OPS (int)(sizeof OPS / sizeof OPS[0])
static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
    const char *op = OPS[size ? data[0] % N_OPS : 0];
    for (size_t i = 0; i + 3 < size; i++) {
        if ((i == 0 || data[i - 1] == '\n') && !memcmp(data + i, "op=", 3)) {
            for (int k = 0; k < N_OPS; k++) {
                size_t l = strlen(OPS[k]);
                if (i + 3 + l <= size && !memcmp(data + i + 3, OPS[k], l) &&
                    (i + 3 + l == size || data[i + 3 + l] == '\n' || data[i + 3 + l] == '\r'))
                    op = OPS[k];
            }
            break;
        }
    }
    char *copy = fuzz_dup(data, size);
    FILE *in = size ? fmemopen(copy, size, "r") : fopen("/dev/null", "r");
    if (!in) abort();
    FILE *oin = stdin, *oout = stdout, *oerr = stderr;
    stdin = in;
    stdout = devnull;
    stderr = devnull;
    char *argv[] = { (char *)"op", (char *)op, NULL };
    int rc = cis2_cmd_op(2, argv);
    stdin = oin;
    stdout = oout;
    stderr = oerr;
    fclose(in);
    free(copy);
    FUZZ_ASSERT(rc == 0 || rc == 1 || rc == 2);
    return 0;
}
