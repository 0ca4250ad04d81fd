/* §1.3 exactly as x86-64's MXCSR FTZ+DAZ, on every ISA.
 *
 * cis2_fadd/fsub/fmul/fdiv/fsqrt and the binary64 -> binary32 narrowing
 * cis2_f64_to_f32 are the decode path's binary32 operations. The canonical
 * semantics is x86-64's: an operand with a zero exponent field reads as a zero
 * of its sign (DAZ), and a result is flushed to a zero of its sign (FTZ) when
 * it is tiny AFTER rounding, i.e. when the exact value rounded to 24 bits with
 * an unbounded exponent lies below FLT_MIN, i.e. when |exact| < FLT_MIN - 2^-151
 * = CIS2_FTZ_EDGE (the midpoint of FLT_MIN and its predecessor in that
 * binade; RNE sends the midpoint up). Per ISA:
 *
 *  - x86-64: the plain C operators (the MXCSR pin does it in hardware; code
 *    generation is unchanged).
 *  - aarch64: FPCR.FZ flushes when the result is tiny BEFORE rounding, so an
 *    exact result in [CIS2_FTZ_EDGE, FLT_MIN) gives FLT_MIN on x86-64 and 0
 *    here. Which operations can land there (docs/conformance.md, "gap in
 *    §1.3/§13.2"): add/sub never (a sum of binary32 values is a multiple of
 *    2^-149, so a tiny exact sum is representable and tiny either way); div
 *    never (proof at cis2_fdiv below); sqrt never (never tiny); mul and the
 *    binary64 narrowing can: they get an exact fix-up on the (rare) zero result.
 *  - wasm32: no control register at all; DAZ and FTZ by bit pattern, with the
 *    edge decided exactly in binary64. Never a compare against FLT_MIN as a float.
 *
 * The vector forms for the SIMD kernels (NEON, wasm SIMD128) follow at the end. */
/* Hand-aligned, one spec operation per line: kept as written. */
/* clang-format off */
#ifndef CIS2_FPARITH_H
#define CIS2_FPARITH_H
#include "core/core.h"

/* The largest |exact| that x86-64 flushes is just below this (exact in binary64). */
#define CIS2_FTZ_EDGE 0x1.ffffffp-127

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
/* FTZ of an IEEE result `r` that may have rounded up to ±FLT_MIN from a
 * value that is tiny after rounding: `exact` is the exact result in binary64;
 * x86 flushes it when |exact| < CIS2_FTZ_EDGE. */
static inline float cis2_ftz_edge(float r, double exact)
{
    uint32_t b = cis2_f2u(r);
    if ((b & 0x7F800000u) == 0) return cis2_u2f(b & 0x80000000u);
    if ((b & 0x7FFFFFFFu) == 0x00800000u && __builtin_fabs(exact) < CIS2_FTZ_EDGE)
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
 * to ±FLT_MIN is never tiny after rounding, and none lies in
 * [CIS2_FTZ_EDGE, FLT_MIN) (relative width 2^-25): plain FTZ is exact here,
 * and aarch64's tiny-before-rounding FZ agrees with x86-64 (web/test/ftz_diff.sh
 * checks both against the hardware). */
static inline float cis2_fdiv(float a, float b)
{
    a = cis2_daz_f(a); b = cis2_daz_f(b);
    return cis2_ftz_f(a / b);
}
/* sqrt of a normal binary32 is never tiny. */
static inline float cis2_fsqrt(float a) { return __builtin_sqrtf(cis2_daz_f(a)); }
/* binary64 → binary32 narrowing (cvtsd2ss also obeys FTZ). */
static inline float cis2_f64_to_f32(double d) { return cis2_ftz_edge((float)d, d); }
#elif defined(__aarch64__)
/* FPCR.FZ (pinned by fpenv.c) gives DAZ and x86's FTZ for add, sub, div and
 * sqrt (see the top of this file), so those are the plain operators. */
#define CIS2_SOFT_FTZ 0
#define cis2_fadd(a, b) ((a) + (b))
#define cis2_fsub(a, b) ((a) - (b))
#define cis2_fdiv(a, b) ((a) / (b))
#define cis2_fsqrt(a) __builtin_sqrtf(a)
/* A ±0 from FZ whose exact value (binary64) is >= CIS2_FTZ_EDGE: x86-64 rounds
 * it to ±FLT_MIN and does not flush it (tiny after rounding: no). Any other
 * ±0 (a zero operand, a truly tiny result) is x86-64's too. */
static inline float cis2_fz_fixup(float r, double exact)
{
    if (__builtin_fabs(exact) < CIS2_FTZ_EDGE) return r;
    return cis2_u2f((cis2_f2u(r) & 0x80000000u) | 0x00800000u);
}
/* The binary64 product of two binary32 values is exact (48 significant bits,
 * exponents far from binary64's range); a subnormal operand reads as 0 here
 * as in the multiply (FZ flushes the conversion's input too). One compare
 * and a never-taken branch on the common path. */
static inline float cis2_fmul(float a, float b)
{
    float r = a * b;
    if (__builtin_expect(r == 0.0f, 0)) return cis2_fz_fixup(r, (double)a * (double)b);
    return r;
}
/* fcvt also flushes before rounding: the same fix-up with the binary64 itself. */
static inline float cis2_f64_to_f32(double d)
{
    float r = (float)d;
    if (__builtin_expect(r == 0.0f, 0)) return cis2_fz_fixup(r, d);
    return r;
}
#else
/* x86-64. Macros, not inline functions: the expression tree is literally the
 * one the plain operators give, so the native object code is byte-identical to
 * the code before these wrappers existed (checked in docs/wasm.md). Every
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

/* ------------------------------------------------------ vector forms (SIMD) */
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
/* x86-64's a*b in four lanes, given b2 = cis2_x2(b) = 2b (broadcast operands
 * hoist it). s = a*2b is formed with the exact product 2ab, which FZ sees
 * below FLT_MIN (and flushes) only when |ab| < FLT_MIN/2, where x86-64 flushes
 * too; otherwise s = round24(2ab) = 2 round24(ab) (scaling by 2 commutes with
 * rounding to 24 bits). Then s*0.5 is exactly round24(ab), flushed by FZ
 * exactly when it is below FLT_MIN — x86-64's result, sign included. Two
 * multiplies instead of one, no compare, no branch. The one exception is
 * overflow: when |2ab| (or 2b) reaches the binary32 range's top the lane is
 * ±inf or NaN where x86-64 may be finite, so a caller recomputes every
 * non-finite output with the scalar cis2_fmul (an inf or NaN term leaves a
 * non-finite sum, so outputs are enough to look at). */
static inline float cis2_x2(float b) { return b * 2.0f; }
static inline float32x4_t cis2_v4_mul2(float32x4_t a, float32x4_t b2)
{
    return vmulq_f32(vmulq_f32(a, b2), vdupq_n_f32(0.5f));
}
/* 1 when any of n floats is inf or NaN. */
static inline int cis2_any_nonfinite(const float *p, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) m |= (uint32_t)((cis2_f2u(p[i]) & 0x7F800000u) == 0x7F800000u);
    return (int)m;
}
#endif

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
/* DAZ (and FTZ, the same bit operation) of four lanes: exponent field 0 ->
 * zero of the lane's sign. */
static inline v128_t cis2_v4_daz(v128_t x)
{
    v128_t z = wasm_i32x4_eq(wasm_v128_and(x, wasm_i32x4_const_splat(0x7F800000)),
                             wasm_i32x4_const_splat(0));
    return wasm_v128_bitselect(wasm_v128_and(x, wasm_u32x4_const_splat(0x80000000u)), x, z);
}
/* cis2_fadd in four lanes (a tiny exact sum is representable: plain FTZ). */
static inline v128_t cis2_v4_add(v128_t a, v128_t b)
{
    return cis2_v4_daz(wasm_f32x4_add(cis2_v4_daz(a), cis2_v4_daz(b)));
}
/* Lanes whose |r| is in (0, FLT_MIN]: subnormal (flush) or ±FLT_MIN (maybe
 * tiny after rounding). |r| - 1 as an unsigned integer puts ±0 at the top. */
static inline v128_t cis2_v4_edge(v128_t r)
{
    v128_t a1 = wasm_i32x4_sub(wasm_v128_and(r, wasm_i32x4_const_splat(0x7FFFFFFF)),
                               wasm_i32x4_const_splat(1));
    return wasm_u32x4_lt(a1, wasm_i32x4_const_splat(0x00800000));
}
/* cis2_fmul in four lanes: the IEEE product of the DAZ'd operands is x86-64's
 * unless it lies in (0, FLT_MIN]; such (rare) lanes are redone by the scalar
 * cis2_fmul, which decides the edge exactly. */
static inline v128_t cis2_v4_mul(v128_t a, v128_t b)
{
    a = cis2_v4_daz(a);
    b = cis2_v4_daz(b);
    v128_t r = wasm_f32x4_mul(a, b);
    if (__builtin_expect(wasm_v128_any_true(cis2_v4_edge(r)), 0)) {
        float ra[4], aa[4], ba[4];
        wasm_v128_store(aa, a);
        wasm_v128_store(ba, b);
        for (int i = 0; i < 4; i++) ra[i] = cis2_fmul(aa[i], ba[i]);
        r = wasm_v128_load(ra);
    }
    return r;
}
/* The matmul fast path (kernels_wasm128.c): plain IEEE products and sums,
 * proven equal to x86-64's after the fact. If every product p of a block is
 * ±0 or has |p| >= 2^-102, no product is tiny, and every partial sum is a
 * multiple of 2^-125 (so are the products; floats >= 2^-102 are, and exact
 * sums of them below 2^-102 are representable), hence 0 or >= 2^-125 in
 * magnitude: never tiny either, so IEEE and x86-64 agree on every operation.
 * cis2_v4_track folds min(|p| - 1) (unsigned: ±0 wraps to the top) into a
 * tracker; cis2_v4_track_ok says the block passed. Operand DAZ is the
 * caller's: a subnormal weight times an |x| < 2^24 gives |p| < 2^-102. */
#define CIS2_V4_TRACK_INIT wasm_u32x4_const_splat(0xFFFFFFFFu)
static inline v128_t cis2_v4_track(v128_t *chk, v128_t p)
{
    v128_t a1 = wasm_i32x4_sub(wasm_v128_and(p, wasm_i32x4_const_splat(0x7FFFFFFF)),
                               wasm_i32x4_const_splat(1));
    *chk = wasm_u32x4_min(*chk, a1);
    return p;
}
static inline int cis2_v4_track_ok(v128_t chk)
{
    return wasm_i32x4_all_true(wasm_u32x4_ge(chk, wasm_i32x4_const_splat(0x0C800000 - 1)));
}
#endif
#endif
