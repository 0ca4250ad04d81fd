/* wasm32-only shims: what the native build gets from the OS.
 *
 *  - getpid: used only for the temporary name of an atomic file write.
 *
 * (The model loader reads each file once into memory it owns, as natively,
 * so no mmap shim is needed; the fast backend is built for wasm32 with the
 * SIMD128 kernels and a single-threaded pool.) */
#include "engine/backend.h"
#include <unistd.h>

pid_t getpid(void) { return 1; }
