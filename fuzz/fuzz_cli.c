/* The one option parser (src/cli/common.c cis2_cli_parse and the superset
 * table of cis2_cli_parse_opts): arbitrary argument vectors (NUL-separated
 * in the input; the first byte picks the command's flag set). It returns 0
 * or 2, never reads past argv, and an accepted INT is in its range. */
#include "fuzz.h"
#include <stdio.h>

static FILE *devnull;
static const char *SETS[] = {
    " --model --prompt --prompt-ids --n --receipt --backend --isa --threads --stop-at-eos"
    " --check-determinism --fault --fault-arg ",
    " --model --prompt-ids --teacher-force --n --output --arm --layers --nodes --hash-only"
    " --backend --isa --threads --fault --fault-arg ",
    " --model --prompt-ids --teacher-force --n --output --layers --nodes --backend --backend+"
    " --isa --threads --against --exact --tol --brief ",
    " --model --vector --backend --isa --threads --no-check-determinism ",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size || size > 4096) return 0;
    if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
    char *buf = fuzz_dup(data + 1, size - 1);
    char *argv[130];
    int argc = 0;
    argv[argc++] = (char *)"cmd";
    for (char *p = buf; p < buf + size - 1 && argc < 128; p += strlen(p) + 1) argv[argc++] = p;
    argv[argc] = NULL;
    FILE *oerr = stderr;
    stderr = devnull;
    int rc;
    if (data[0] & 4) {
        cis2_run_opts o;
        const char *pos = NULL;
        rc = cis2_cli_parse_opts("fuzz", argc, argv, SETS[data[0] % 4], &o,
                                 data[0] & 8 ? &pos : NULL);
        if (!rc) {
            FUZZ_ASSERT(o.n >= 1 && o.n <= 1000000);
            FUZZ_ASSERT(o.threads >= 0 && o.threads <= 1024);
            FUZZ_ASSERT(o.backends.n <= 2);
            FUZZ_ASSERT(!o.model || *o.model);
        }
    } else {
        int f = 0, n = 0;
        const char *s = NULL, *pth = NULL, *pos[4];
        cis2_opt_list l = { { 0 }, 0 };
        const cis2_opt opts[] = {
            { "--flag", "-f", CIS2_OPT_FLAG, &f, 0, 0 },
            { "--str", NULL, CIS2_OPT_STR, &s, 0, 0 },
            { "--path", "-o", CIS2_OPT_PATH, &pth, 0, 0 },
            { "--int", "-n", CIS2_OPT_INT, &n, -5, 7 },
            { "--list", NULL, CIS2_OPT_LIST, &l, 0, 0 },
        };
        int np = 0;
        rc = cis2_cli_parse("fuzz", argc, argv, opts, 5, pos, data[0] & 2 ? 4 : 1, &np,
                            data[0] & 1 ? CIS2_PARSE_REST : 0);
        if (!rc) {
            FUZZ_ASSERT(n >= -5 && n <= 7);
            FUZZ_ASSERT(np >= 0 && np <= 4 && l.n <= 16);
            FUZZ_ASSERT(!pth || *pth);
            for (int i = 0; i < np; i++) FUZZ_ASSERT(pos[i] >= buf && pos[i] < buf + size);
        }
    }
    stderr = oerr;
    FUZZ_ASSERT(rc == 0 || rc == 2);
    free(buf);
    return 0;
}
