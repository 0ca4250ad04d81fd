/* The hardware side of web/test/ftz_diff.sh: each stdin line "OP A B" (hex
 * bit patterns; OP as in cis2w_fp_op) evaluated with the FTZ/DAZ pin of this
 * CPU set (cis2_fpenv_pin), or with argument "raw" without it; each result
 * printed as 8 hex digits. */
#include "core/core.h"
#include <stdlib.h>

int main(int argc, char **argv)
{
    /* "raw": leave the control register at the IEEE default (gradual underflow). */
    if (argc > 1 && argv[1][0] == 'r') cis2_fpenv_unpin();
    else if (cis2_fpenv_pin() != 0) {
        fprintf(stderr, "cannot pin FTZ/DAZ\n");
        return 2;
    }
    int op;
    unsigned a, b;
    while (scanf("%d %x %x", &op, &a, &b) == 3) {
        volatile float x = cis2_u2f(a), y = cis2_u2f(b);
        volatile float r;
        switch (op) {
        case 0: r = x + y; break;
        case 1: r = x - y; break;
        case 2: r = x * y; break;
        case 3: r = x / y; break;
        case 4: r = __builtin_sqrtf(x); break;
        default: {
            union {
                double d;
                uint64_t u;
            } c;
            c.u = (uint64_t)a << 32 | b;
            volatile double d = c.d;
            r = (float)d;
        }
        }
        printf("%08x\n", (unsigned)cis2_f2u(r));
    }
    return 0;
}
