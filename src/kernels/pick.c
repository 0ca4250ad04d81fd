/* Run-time choice of a fast-kernel ISA path, by name or the best this CPU
 * (and build platform) supports; and the public name <-> enum tables. */
#include "kernels/fast_kernels.h"
#include <string.h>

const fast_kernels *fast_kernels_pick(const char *isa, char *err)
{
    if (!isa || !*isa || !strcmp(isa, "auto")) {
        const fast_kernels *k;
        if ((k = fast_kernels_avx512()) || (k = fast_kernels_avx2()) || (k = fast_kernels_sse2()) ||
            (k = fast_kernels_neon()) || (k = fast_kernels_wasm128()))
            return k;
        return fast_kernels_scalar();
    }
    const fast_kernels *k = NULL;
    if (!strcmp(isa, "scalar")) return fast_kernels_scalar();
    else if (!strcmp(isa, "sse2")) k = fast_kernels_sse2();
    else if (!strcmp(isa, "avx2")) k = fast_kernels_avx2();
    else if (!strcmp(isa, "avx512")) k = fast_kernels_avx512();
    else if (!strcmp(isa, "neon")) k = fast_kernels_neon();
    else if (!strcmp(isa, "wasm128")) k = fast_kernels_wasm128();
    else {
        snprintf(err, CIS2_ERR_LEN,
                 "unknown ISA \"%.40s\" (expected sse2, avx2, avx512, neon or scalar)", isa);
        return NULL;
    }
    if (!k)
        snprintf(err, CIS2_ERR_LEN, "ISA %s: this CPU (or build platform) does not support it",
                 isa);
    return k;
}

static const char *const ISA_NAMES[] = { "auto",   "scalar", "sse2",   "avx2",
                                         "avx512", "neon",   "wasm128" };

const char *cis2_isa_to_name(cis2_isa isa)
{
    return (unsigned)isa < sizeof ISA_NAMES / sizeof ISA_NAMES[0] ? ISA_NAMES[isa] : "unknown";
}

int cis2_isa_from_name(const char *name, cis2_isa *out)
{
    for (size_t i = 0; name && i < sizeof ISA_NAMES / sizeof ISA_NAMES[0]; i++)
        if (!strcmp(name, ISA_NAMES[i])) {
            *out = (cis2_isa)i;
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
