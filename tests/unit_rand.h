/* Shared inputs of the kernel tests (unit_fast.c, unit_int8.c): a seeded
 * splitmix64 stream, floats spanning magnitudes with zeros, -0, subnormals
 * and cancelling large values, and a bit-pattern comparison. */
#ifndef CIS2_UNIT_RAND_H
#define CIS2_UNIT_RAND_H
#include "core/core.h"

static uint64_t rs = 0x1234567;
static uint64_t rnd(void)
{
    rs += 0x9E3779B97F4A7C15ull;
    uint64_t z = rs;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Floats spanning magnitudes, with some zeros, -0, subnormals and big values. */
static float rval(void)
{
    uint64_t r = rnd();
    switch (r % 29) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return cis2_u2f((uint32_t)(r >> 8) & 0x807FFFFFu); /* subnormal */
    case 3: return (r >> 40) & 1 ? 1e8f : -1e8f;               /* cancellation */
    default: {
        float u = (float)((r >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
        int e = (int)((r >> 20) % 12) - 6;
        return cis2_ldexp_exact(u, e);
    }
    }
}

/* Moderate floats, uniform in [-1, 1): attention inputs whose softmax stays
 * spread over many keys (rval's 1e8s make it one-hot, so a lost or extra key
 * would rarely change a bit). Inline: unit_int8.c does not use it. */
static inline float rmod(void) { return (float)((rnd() >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f; }

/* Bit-for-bit, except under wasm32 where a NaN matches any NaN: wasm leaves the
 * payload of a NaN computed from NaN operands to the engine (an "arithmetic NaN"),
 * and node's V8 keeps one of two NaNs in its baseline tier and the other once the
 * function tiers up (seen: one ref_rmsnorm on the same row, two payloads in one run).
 * Natively the payload is the ISA's and is compared. */
static int same_bits(const float *a, const float *b, size_t n, size_t *where)
{
    for (size_t i = 0; i < n; i++)
        if (cis2_f2u(a[i]) != cis2_f2u(b[i])) {
#ifdef __wasm__
            if (a[i] != a[i] && b[i] != b[i]) continue;
#endif
            *where = i;
            return 0;
        }
    return 1;
}
#endif
