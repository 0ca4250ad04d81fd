/* wasm32-only shims: what the native build gets from the OS.
 *
 *  - getpid: used only for the temporary name of an atomic file write.
 *
 * (No mmap shim: the loader packs model.safetensors from the copy the glue
 * holds in the heap, src/core/bigmem.c; the fast backend is built for
 * wasm32 with the SIMD128 kernels and a single-threaded pool.) */
#include "engine/backend.h"
#include <unistd.h>

pid_t getpid(void) { return 1; }
