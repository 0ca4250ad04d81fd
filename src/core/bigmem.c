/* Big allocations for weights and file images: 2 MiB-aligned anonymous
 * mappings with transparent huge pages (page faults are expensive on a VM;
 * 2 MiB pages cut them 512x), which can be made read-only or given back in
 * part; plain aligned malloc on wasm32, which has no mmap. */
#include "core/core.h"
#include <stdlib.h>
#if !defined(__wasi__)
#define CIS2_HAVE_MMAP 1
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)

void *cis2_big_alloc(size_t bytes, size_t *len)
{
    size_t n = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (!n) n = HUGE_PAGE;
#if CIS2_HAVE_MMAP
    void *m = mmap(NULL, n + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (a > (uintptr_t)m) munmap(m, a - (uintptr_t)m);
    uintptr_t end = (uintptr_t)m + n + HUGE_PAGE;
    if (end > a + n) munmap((void *)(a + n), end - (a + n));
#ifdef MADV_HUGEPAGE
    madvise((void *)a, n, MADV_HUGEPAGE);
#endif
    *len = n;
    return (void *)a;
#else
    *len = n; /* not zeroed (the mappings above are): callers write what they read */
    return aligned_alloc(64, n);
#endif
}

void cis2_big_protect(void *p, size_t len)
{
#if CIS2_HAVE_MMAP
    mprotect(p, len, PROT_READ);
#else
    (void)p;
    (void)len;
#endif
}

void cis2_big_free(void *p, size_t len)
{
    if (!p) return;
#if CIS2_HAVE_MMAP
    munmap(p, len);
#else
    (void)len;
    free(p);
#endif
}

uint64_t cis2_big_release(uint8_t *base, uint64_t a, uint64_t b)
{
    b &= ~(uint64_t)(HUGE_PAGE - 1);
    if (b <= a) return a;
#if CIS2_HAVE_MMAP && defined(MADV_DONTNEED)
    madvise(base + a, (size_t)(b - a), MADV_DONTNEED);
#else
    (void)base;
#endif
    return b;
}
