/* §1.3 in software, for targets without a flush-to-zero control (wasm32).
 *
 * cis2_fadd/fsub/fmul/fdiv/fsqrt are the decode path's binary32 operations.
 * On x86-64 and aarch64 they are exactly the plain C operator (the FTZ/DAZ
 * pin in the control register does the flushing, and code generation is
 * unchanged). On __wasm__, which has no such control, each operand is
 * flushed by bit pattern (DAZ: a subnormal becomes a zero of the same sign)
 * and each result is flushed by bit pattern (FTZ), reproducing x86-64's
 * MXCSR.FTZ+DAZ exactly, including its "tininess after rounding" rule: a
 * result that rounds to ±FLT_MIN is still flushed when the exact value,
 * rounded to 24 bits with an unbounded exponent, lies below FLT_MIN, i.e.
 * when |exact| < FLT_MIN - 2^-151 (decided exactly in binary64; see
 * docs/wasm.md). Never compares against FLT_MIN as a float. */
/* Hand-aligned, one spec operation per line: kept as written. */
/* clang-format off */
#ifndef CIS2_FPARITH_H
#define CIS2_FPARITH_H
#include "core/core.h"

#if defined(__wasm__)
#define CIS2_SOFT_FTZ 1
/* DAZ: subnormal operand → zero of the same sign. */
static inline float cis2_daz_f(float x)
{
    uint32_t b = cis2_f2u(x);
    return (b & 0x7F800000u) == 0 ? cis2_u2f(b & 0x80000000u) : x;
}
/* FTZ of an IEEE (gradual-underflow, RNE) result: subnormal → signed zero. */
static inline float cis2_ftz_f(float r)
{
    uint32_t b = cis2_f2u(r);
    return (b & 0x7F800000u) == 0 ? cis2_u2f(b & 0x80000000u) : r;
}
/* FTZ of a result `r` that may have rounded up to ±FLT_MIN from a value
 * that is tiny after rounding: `exact` is the exact result in binary64;
 * x86 flushes it when |exact| < FLT_MIN - 2^-151 = 0x1.ffffffp-127 (the
 * largest value that rounds to 24 bits below FLT_MIN, exact in binary64). */
static inline float cis2_ftz_edge(float r, double exact)
{
    uint32_t b = cis2_f2u(r);
    if ((b & 0x7F800000u) == 0) return cis2_u2f(b & 0x80000000u);
    if ((b & 0x7FFFFFFFu) == 0x00800000u && __builtin_fabs(exact) < 0x1.ffffffp-127)
        return cis2_u2f(b & 0x80000000u);
    return r;
}
/* Sums of binary32 values are multiples of 2^-149: a tiny exact sum is a
 * representable subnormal, so the IEEE result is exact and plain FTZ is enough. */
static inline float cis2_fadd(float a, float b)
{
    a = cis2_daz_f(a); b = cis2_daz_f(b);
    return cis2_ftz_f(a + b);
}
static inline float cis2_fsub(float a, float b)
{
    a = cis2_daz_f(a); b = cis2_daz_f(b);
    return cis2_ftz_f(a - b);
}
/* The binary64 product of two binary32 values is exact. */
static inline float cis2_fmul(float a, float b)
{
    a = cis2_daz_f(a); b = cis2_daz_f(b);
    float r = a * b;
    if ((cis2_f2u(r) & 0x7FFFFFFFu) > 0x00800000u) return r;   /* common: |r| > FLT_MIN, Inf, NaN */
    return cis2_ftz_edge(r, (double)a * (double)b);
}
/* A quotient of two normal binary32 values never lies within 2^-24 (relative)
 * below a power of two: with 24-bit integer significands, ma/mb in
 * (1 - 2^-24, 1) needs 0 < mb - ma < 1, and ma/mb in (2 - 2^-23, 2) needs
 * ma = 2mb - 1 with mb > 2^23, i.e. ma >= 2^24. So a quotient that rounds
 * to ±FLT_MIN is never tiny after rounding: plain FTZ is exact here too
 * (web/test/ftz_diff.sh checks it against the hardware). */
static inline float cis2_fdiv(float a, float b)
{
    a = cis2_daz_f(a); b = cis2_daz_f(b);
    return cis2_ftz_f(a / b);
}
/* sqrt of a normal binary32 is never tiny. */
static inline float cis2_fsqrt(float a) { return __builtin_sqrtf(cis2_daz_f(a)); }
/* binary64 → binary32 narrowing (cvtsd2ss also obeys FTZ). */
static inline float cis2_f64_to_f32(double d) { return cis2_ftz_edge((float)d, d); }
#else
/* Macros, not inline functions: the expression tree is literally the one the
 * plain operators give, so the native object code is byte-identical to the
 * code before these wrappers existed (checked in docs/wasm.md). Every
 * argument at every call site is a binary32 expression (binary64 for the
 * narrowing). */
#define CIS2_SOFT_FTZ 0
#define cis2_fadd(a, b) ((a) + (b))
#define cis2_fsub(a, b) ((a) - (b))
#define cis2_fmul(a, b) ((a) * (b))
#define cis2_fdiv(a, b) ((a) / (b))
#define cis2_fsqrt(a) __builtin_sqrtf(a)
#define cis2_f64_to_f32(d) ((float)(d))
#endif
#endif
