/* wasm32-only shims: what the native build gets from the OS or from files
 * that are excluded from the wasm build (see tools/build_wasm.sh).
 *
 *  - cis2_backend_fast_new: the fast backend (x86/ARM SIMD, threads) is not
 *    built for wasm32; asking for it is an ordinary error.
 *  - getpid: used only for the temporary name of an atomic file write. */
#include "engine/backend.h"
#include <unistd.h>

int cis2_backend_fast_new(cis2_backend **b, const cis2_engine_opts *o, char *err)
{
    (void)o;
    *b = NULL;
    snprintf(err, CIS2_ERR_LEN, "backend fast is not built for wasm32 (use the reference backend)");
    return 1;
}

pid_t getpid(void) { return 1; }
