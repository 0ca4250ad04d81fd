/* The hardware side of web/test/ftz_diff.sh (and tools/ci_aarch64.sh): each
 * stdin line "OP A B" (hex bit patterns; OP as in cis2w_fp_op) evaluated with
 * the FTZ/DAZ pin of this CPU set (cis2_fpenv_pin), or with argument "raw"
 * without it; each result printed as 8 hex digits. Argument "fparith": the
 * pinned decode-path operations of src/core/fparith.h instead of the bare
 * operators; "v4": the same, with products through the ISA's vector form
 * (aarch64: cis2_v4_mul2, a non-finite lane redone by cis2_fmul, as the NEON
 * kernels do). On x86-64 all three pinned modes are the bare operators. */
#include "core/fparith.h"
#include <stdlib.h>
#include <string.h>

static float v4_mul(float a, float b)
{
#if defined(__aarch64__) && defined(__ARM_NEON)
    float r[4];
    vst1q_f32(r, cis2_v4_mul2(vdupq_n_f32(a), vdupq_n_f32(cis2_x2(b))));
    return cis2_any_nonfinite(r, 1) ? cis2_fmul(a, b) : r[0];
#else
    return cis2_fmul(a, b);
#endif
}

int main(int argc, char **argv)
{
    /* "raw": leave the control register at the IEEE default (gradual underflow). */
    int mode = argc > 1 ? (!strcmp(argv[1], "fparith") ? 1 : !strcmp(argv[1], "v4") ? 2 : 0) : 0;
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
        union {
            double d;
            uint64_t u;
        } c;
        c.u = (uint64_t)a << 32 | b;
        volatile double d = c.d;
        switch (op) { /* mode 0: the bare operators; 1, 2: fparith.h's */
        case 0: r = mode ? cis2_fadd(x, y) : x + y; break;
        case 1: r = mode ? cis2_fsub(x, y) : x - y; break;
        case 2: r = mode == 2 ? v4_mul(x, y) : mode ? cis2_fmul(x, y) : x * y; break;
        case 3: r = mode ? cis2_fdiv(x, y) : x / y; break;
        case 4: r = mode ? cis2_fsqrt(x) : __builtin_sqrtf(x); break;
        default: r = mode ? cis2_f64_to_f32(d) : (float)d;
        }
        printf("%08x\n", (unsigned)cis2_f2u(r));
    }
    return 0;
}
