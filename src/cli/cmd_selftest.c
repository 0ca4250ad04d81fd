/* `cis2 selftest`: the §1.3 rows, §5.1 cancellation, rsqrt(64), digests. */
#include "cli/commands.h"

int cis2_cmd_selftest(int argc, char **argv)
{
    if (argc > 1) return cis2_cli_usage_error("selftest", "takes no arguments");
    return cis2_selftest(stdout) ? 1 : 0;
}
