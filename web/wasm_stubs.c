/* wasm32-only shims: what the native build gets from the OS or from files
 * that are excluded from the wasm build (see tools/build_wasm.sh).
 *
 *  - cis2_backend_fast_new: the fast backend (x86/ARM SIMD, threads) is not
 *    built for wasm32; asking for it is an ordinary error.
 *  - mmap/munmap: wasi-libc has no mmap. The JS glue (web/cis2.js) keeps the
 *    three model files *in the wasm heap* (written there chunk by chunk
 *    while they are hashed) and serves them through a tiny WASI file system;
 *    mmap of such a file returns its heap bytes directly (no copy, so the
 *    269 MB SmolLM2 file is held once). Any other file falls back to
 *    malloc + read.
 *  - getpid: used only for the temporary name of an atomic file write. */
#include "engine/backend.h"
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int cis2_backend_fast_new(cis2_backend **b, const cis2_engine_opts *o, char *err)
{
    (void)o;
    *b = NULL;
    snprintf(err, CIS2_ERR_LEN, "backend fast is not built for wasm32 (use the reference backend)");
    return 1;
}

/* Imported from the JS glue: the heap address of the file open on `fd`, or 0. */
__attribute__((import_module("cis2"), import_name("fd_heap_ptr"))) extern uint32_t
cis2js_fd_heap_ptr(int fd, uint32_t len);

#define MAX_FALLBACK 16
static void *fallback[MAX_FALLBACK];

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    (void)addr;
    (void)prot;
    (void)flags;
    if (off != 0 || len == 0) {
        errno = EINVAL;
        return MAP_FAILED;
    }
    uint32_t p = cis2js_fd_heap_ptr(fd, (uint32_t)len);
    if (p) return (void *)(uintptr_t)p;
    int slot = -1;
    for (int i = 0; i < MAX_FALLBACK; i++)
        if (!fallback[i]) {
            slot = i;
            break;
        }
    if (slot < 0) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    uint8_t *buf = malloc(len);
    if (!buf) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)got);
        if (r <= 0) {
            free(buf);
            errno = r ? errno : EIO;
            return MAP_FAILED;
        }
        got += (size_t)r;
    }
    fallback[slot] = buf;
    return buf;
}

int munmap(void *addr, size_t len)
{
    (void)len;
    for (int i = 0; i < MAX_FALLBACK; i++)
        if (fallback[i] == addr) {
            free(addr);
            fallback[i] = NULL;
            return 0;
        }
    return 0; /* a heap-backed file: owned by the glue, freed when it is unloaded */
}

pid_t getpid(void) { return 1; }
