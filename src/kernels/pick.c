/* The ISA registry (fast_isas: every fast-kernel path's name, enum value,
 * availability check and table), and what reads it: the run-time choice of
 * a path by name or the best this CPU (and build platform) supports, and
 * the public name <-> enum mapping. */
#include "kernels/fast_kernels.h"
#include <string.h>

/* Every CPU of the platform has it (SSE2 on x86-64, NEON on aarch64,
 * SIMD128 where the module was built with it, and the scalar path). */
static int every_cpu(void) { return 1; }

const fast_isa fast_isas[FAST_N_ISAS] = {
    { .name = "scalar",
      .isa = CIS2_ISA_SCALAR,
      .available = every_cpu,
      .kernels = &fast_kernels_scalar },
#if defined(__x86_64__)
    { .name = "sse2", .isa = CIS2_ISA_SSE2, .available = every_cpu, .kernels = &fast_kernels_sse2 },
    { .name = "avx2",
      .isa = CIS2_ISA_AVX2,
      .available = fast_avx2_available,
      .kernels = &fast_kernels_avx2 },
    { .name = "avx512",
      .isa = CIS2_ISA_AVX512,
      .available = fast_avx512_available,
      .kernels = &fast_kernels_avx512 },
#else
    { .name = "sse2", .isa = CIS2_ISA_SSE2 },
    { .name = "avx2", .isa = CIS2_ISA_AVX2 },
    { .name = "avx512", .isa = CIS2_ISA_AVX512 },
#endif
#if defined(__aarch64__)
    { .name = "neon", .isa = CIS2_ISA_NEON, .available = every_cpu, .kernels = &fast_kernels_neon },
#else
    { .name = "neon", .isa = CIS2_ISA_NEON },
#endif
#if defined(__wasm_simd128__)
    { .name = "wasm128",
      .isa = CIS2_ISA_WASM128,
      .available = every_cpu,
      .kernels = &fast_kernels_wasm128 },
#else
    { .name = "wasm128", .isa = CIS2_ISA_WASM128 },
#endif
};

_Static_assert((int)FAST_N_ISAS == (int)CIS2_ISA_WASM128,
               "one registry entry per cis2_isa but auto");

const fast_kernels *fast_isa_kernels(const fast_isa *i)
{
    return i->kernels && i->available && i->available() ? i->kernels : NULL;
}

const fast_kernels *fast_kernels_pick(const char *isa, char *err)
{
    if (!isa || !*isa || !strcmp(isa, "auto")) {
        for (int i = FAST_N_ISAS - 1; i >= 0; i--) { /* the widest available */
            const fast_kernels *k = fast_isa_kernels(&fast_isas[i]);
            if (k) return k;
        }
        return &fast_kernels_scalar;
    }
    for (int i = 0; i < FAST_N_ISAS; i++) {
        if (strcmp(isa, fast_isas[i].name)) continue;
        const fast_kernels *k = fast_isa_kernels(&fast_isas[i]);
        if (!k)
            snprintf(err, CIS2_ERR_LEN, "ISA %s: this CPU (or build platform) does not support it",
                     isa);
        return k;
    }
    snprintf(err, CIS2_ERR_LEN,
             "unknown ISA \"%.40s\" (expected sse2, avx2, avx512, neon or scalar)", isa);
    return NULL;
}

const char *cis2_isa_to_name(cis2_isa isa)
{
    if (isa == CIS2_ISA_AUTO) return "auto";
    for (int i = 0; i < FAST_N_ISAS; i++)
        if (fast_isas[i].isa == isa) return fast_isas[i].name;
    return "unknown";
}

int cis2_isa_from_name(const char *name, cis2_isa *out)
{
    if (!name) return 1;
    if (!strcmp(name, "auto")) {
        *out = CIS2_ISA_AUTO;
        return 0;
    }
    for (int i = 0; i < FAST_N_ISAS; i++)
        if (!strcmp(name, fast_isas[i].name)) {
            *out = fast_isas[i].isa;
            return 0;
        }
    return 1;
}

int cis2_backend_from_name(const char *name, cis2_backend_kind *out)
{
    if (name && !strcmp(name, "ref")) {
        *out = CIS2_BACKEND_REF;
        return 0;
    }
    if (name && !strcmp(name, "fast")) {
        *out = CIS2_BACKEND_FAST;
        return 0;
    }
    if (name && !strcmp(name, "approx")) {
        *out = CIS2_BACKEND_APPROX;
        return 0;
    }
    return 1;
}
