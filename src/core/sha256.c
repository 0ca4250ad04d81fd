/* SHA-256 (FIPS 180-4): portable C plus an x86 SHA-NI block function chosen
 * at run time. Both are tested against the FIPS vectors and each other. */
#include "core/core.h"
#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* FIPS 180-4 §3.2 ROTR and the §4.1.2 functions. Ch (4.2) and Maj (4.3) are
 * written in equivalent forms with one operation fewer: Ch picks f where e
 * is set, g elsewhere; Maj is a bit's majority vote. */
#define ROR(x, n)    (((x) >> (n)) | ((x) << (32 - (n))))
#define CH(e, f, g)  ((g) ^ ((e) & ((f) ^ (g))))
#define MAJ(a, b, c) (((a) & (b)) | ((c) & ((a) | (b))))
#define BSIG0(x)     (ROR(x, 2) ^ ROR(x, 13) ^ ROR(x, 22))
#define BSIG1(x)     (ROR(x, 6) ^ ROR(x, 11) ^ ROR(x, 25))
#define SSIG0(x)     (ROR(x, 7) ^ ROR(x, 18) ^ ((x) >> 3))
#define SSIG1(x)     (ROR(x, 17) ^ ROR(x, 19) ^ ((x) >> 10))

/* §6.2.2 step 1: W[t] for t >= 16 needs only the 16 words before it, so the
 * schedule lives in 16 words, W[t] overwriting W[t - 16]. LOAD gives the
 * message's big-endian words (§3.1 item 3), NEXT computes the rest. */
#define LOAD(t)                                                                                    \
    (w[t] = (uint32_t)p[4 * (t)] << 24 | (uint32_t)p[4 * (t) + 1] << 16 |                          \
            (uint32_t)p[4 * (t) + 2] << 8 | p[4 * (t) + 3])
#define NEXT(t) (w[(t)&15] += SSIG1(w[((t)-2) & 15]) + w[((t)-7) & 15] + SSIG0(w[((t)-15) & 15]))
/* One round of §6.2.2 step 3 without its seven moves: T1 goes into d (the
 * next round's e) and T1 + T2 into h (the next round's a), and the next
 * round names the variables one place along; after eight rounds every name
 * is back in its place. */
#define ROUND(a, b, c, d, e, f, g, h, t, W)                                                        \
    do {                                                                                           \
        uint32_t t1 = h + BSIG1(e) + CH(e, f, g) + K[t] + W(t);                                    \
        d += t1;                                                                                   \
        h = t1 + BSIG0(a) + MAJ(a, b, c);                                                          \
    } while (0)
#define ROUNDS8(t, W)                                                                              \
    ROUND(a, b, c, d, e, f, g, hh, (t), W);                                                        \
    ROUND(hh, a, b, c, d, e, f, g, (t) + 1, W);                                                    \
    ROUND(g, hh, a, b, c, d, e, f, (t) + 2, W);                                                    \
    ROUND(f, g, hh, a, b, c, d, e, (t) + 3, W);                                                    \
    ROUND(e, f, g, hh, a, b, c, d, (t) + 4, W);                                                    \
    ROUND(d, e, f, g, hh, a, b, c, (t) + 5, W);                                                    \
    ROUND(c, d, e, f, g, hh, a, b, (t) + 6, W);                                                    \
    ROUND(b, c, d, e, f, g, hh, a, (t) + 7, W)

/* Rounds 16..63 stay a loop of 16: measured faster than all 64 unrolled,
 * most of all in wasm (the browser verifier's hash, web/hash_worker.js). */
static void blocks_portable(uint32_t h[8], const uint8_t *p, size_t nblk)
{
    while (nblk--) {
        uint32_t w[16];
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        ROUNDS8(0, LOAD);
        ROUNDS8(8, LOAD);
        for (int t = 16; t < 64; t += 16) {
            ROUNDS8(t, NEXT);
            ROUNDS8(t + 8, NEXT);
        }
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
        h[5] += f;
        h[6] += g;
        h[7] += hh;
        p += 64;
    }
}
#undef LOAD
#undef NEXT
#undef ROUND
#undef ROUNDS8

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <cpuid.h>
#define HAVE_SHANI_CODE 1
__attribute__((target("sha,sse4.1"))) static void blocks_shani(uint32_t h[8], const uint8_t *p,
                                                               size_t nblk)
{
    const __m128i MASK = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i st1 = _mm_loadu_si128((const __m128i *)&h[4]);
    tmp = _mm_shuffle_epi32(tmp, 0xB1);         /* CDAB */
    st1 = _mm_shuffle_epi32(st1, 0x1B);         /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8); /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);      /* CDGH */
    while (nblk--) {
        __m128i abef = st0, cdgh = st1, msg, m0, m1, m2, m3, t;
#define RND4(mi, kidx)                                                                             \
    msg = _mm_add_epi32(mi, _mm_loadu_si128((const __m128i *)&K[kidx]));                           \
    st1 = _mm_sha256rnds2_epu32(st1, st0, msg);                                                    \
    msg = _mm_shuffle_epi32(msg, 0x0E);                                                            \
    st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
        m0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 0)), MASK);
        m1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16)), MASK);
        m2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 32)), MASK);
        m3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 48)), MASK);
        RND4(m0, 0) RND4(m1, 4) RND4(m2, 8) RND4(m3, 12) for (int i = 16; i < 64; i += 16)
        {
            m0 = _mm_sha256msg1_epu32(m0, m1);
            t = _mm_alignr_epi8(m3, m2, 4);
            m0 = _mm_add_epi32(m0, t);
            m0 = _mm_sha256msg2_epu32(m0, m3);
            RND4(m0, i)
            m1 = _mm_sha256msg1_epu32(m1, m2);
            t = _mm_alignr_epi8(m0, m3, 4);
            m1 = _mm_add_epi32(m1, t);
            m1 = _mm_sha256msg2_epu32(m1, m0);
            RND4(m1, i + 4)
            m2 = _mm_sha256msg1_epu32(m2, m3);
            t = _mm_alignr_epi8(m1, m0, 4);
            m2 = _mm_add_epi32(m2, t);
            m2 = _mm_sha256msg2_epu32(m2, m1);
            RND4(m2, i + 8)
            m3 = _mm_sha256msg1_epu32(m3, m0);
            t = _mm_alignr_epi8(m2, m1, 4);
            m3 = _mm_add_epi32(m3, t);
            m3 = _mm_sha256msg2_epu32(m3, m2);
            RND4(m3, i + 12)
        }
#undef RND4
        st0 = _mm_add_epi32(st0, abef);
        st1 = _mm_add_epi32(st1, cdgh);
        p += 64;
    }
    tmp = _mm_shuffle_epi32(st0, 0x1B);    /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);    /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0); /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);    /* ABEF -> HGFE */
    _mm_storeu_si128((__m128i *)&h[0], st0);
    _mm_storeu_si128((__m128i *)&h[4], st1);
}
/* Two streams of nblk blocks each, their rounds interleaved: each state
 * goes through blocks_shani's operations on its own blocks; one stream's
 * rounds fill the other's round latency (~1.4x the blocks a second). */
#define S2_LOAD(X, h)                                                                              \
    do {                                                                                           \
        tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&(h)[0]), 0xB1);                  \
        st1##X = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&(h)[4]), 0x1B);               \
        st0##X = _mm_alignr_epi8(tmp, st1##X, 8);                                                  \
        st1##X = _mm_blend_epi16(st1##X, tmp, 0xF0);                                               \
    } while (0)
#define S2_STORE(X, h)                                                                             \
    do {                                                                                           \
        tmp = _mm_shuffle_epi32(st0##X, 0x1B);                                                     \
        st1##X = _mm_shuffle_epi32(st1##X, 0xB1);                                                  \
        _mm_storeu_si128((__m128i *)&(h)[0], _mm_blend_epi16(tmp, st1##X, 0xF0));                  \
        _mm_storeu_si128((__m128i *)&(h)[4], _mm_alignr_epi8(st1##X, tmp, 8));                     \
    } while (0)
/* four rounds of each stream */
#define S2_RND4(mi, kidx)                                                                          \
    do {                                                                                           \
        __m128i k4 = _mm_loadu_si128((const __m128i *)&K[kidx]);                                   \
        msga = _mm_add_epi32(mi##a, k4);                                                           \
        msgb = _mm_add_epi32(mi##b, k4);                                                           \
        st1a = _mm_sha256rnds2_epu32(st1a, st0a, msga);                                            \
        st1b = _mm_sha256rnds2_epu32(st1b, st0b, msgb);                                            \
        msga = _mm_shuffle_epi32(msga, 0x0E);                                                      \
        msgb = _mm_shuffle_epi32(msgb, 0x0E);                                                      \
        st0a = _mm_sha256rnds2_epu32(st0a, st1a, msga);                                            \
        st0b = _mm_sha256rnds2_epu32(st0b, st1b, msgb);                                            \
    } while (0)
/* the next four message words of each stream: ma from ma, mb, mc, md */
#define S2_MSG(ma, mb, mc, md)                                                                     \
    do {                                                                                           \
        ma##a = _mm_sha256msg1_epu32(ma##a, mb##a);                                                \
        ma##b = _mm_sha256msg1_epu32(ma##b, mb##b);                                                \
        ma##a = _mm_add_epi32(ma##a, _mm_alignr_epi8(md##a, mc##a, 4));                            \
        ma##b = _mm_add_epi32(ma##b, _mm_alignr_epi8(md##b, mc##b, 4));                            \
        ma##a = _mm_sha256msg2_epu32(ma##a, md##a);                                                \
        ma##b = _mm_sha256msg2_epu32(ma##b, md##b);                                                \
    } while (0)
#define S2_IN(i)                                                                                   \
    do {                                                                                           \
        m##i##a = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(pa + 16 * i)), MASK);         \
        m##i##b = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(pb + 16 * i)), MASK);         \
    } while (0)
__attribute__((target("sha,sse4.1"))) static void
blocks_shani2(uint32_t ha[8], const uint8_t *pa, uint32_t hb[8], const uint8_t *pb, size_t nblk)
{
    const __m128i MASK = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp, st0a, st1a, st0b, st1b;
    S2_LOAD(a, ha);
    S2_LOAD(b, hb);
    while (nblk--) {
        __m128i abefa = st0a, cdgha = st1a, abefb = st0b, cdghb = st1b;
        __m128i msga, msgb, m0a, m1a, m2a, m3a, m0b, m1b, m2b, m3b;
        S2_IN(0);
        S2_IN(1);
        S2_IN(2);
        S2_IN(3);
        S2_RND4(m0, 0);
        S2_RND4(m1, 4);
        S2_RND4(m2, 8);
        S2_RND4(m3, 12);
        for (int i = 16; i < 64; i += 16) {
            S2_MSG(m0, m1, m2, m3);
            S2_RND4(m0, i);
            S2_MSG(m1, m2, m3, m0);
            S2_RND4(m1, i + 4);
            S2_MSG(m2, m3, m0, m1);
            S2_RND4(m2, i + 8);
            S2_MSG(m3, m0, m1, m2);
            S2_RND4(m3, i + 12);
        }
        st0a = _mm_add_epi32(st0a, abefa);
        st1a = _mm_add_epi32(st1a, cdgha);
        st0b = _mm_add_epi32(st0b, abefb);
        st1b = _mm_add_epi32(st1b, cdghb);
        pa += 64;
        pb += 64;
    }
    S2_STORE(a, ha);
    S2_STORE(b, hb);
}
#undef S2_LOAD
#undef S2_STORE
#undef S2_RND4
#undef S2_MSG
#undef S2_IN

static int cpu_has_shani(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!(b & (1u << 29))) return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & (1u << 19)) != 0; /* SSE4.1 */
}
#endif

typedef void (*blocks_fn)(uint32_t *, const uint8_t *, size_t);
static blocks_fn g_fn; /* chosen on first use, or by cis2_sha256_use */
static blocks_fn pick(void)
{
    if (!g_fn) {
        blocks_fn f = blocks_portable;
#ifdef HAVE_SHANI_CODE
        const char *force = getenv("CIS2_SHA256");
        if (!(force && strcmp(force, "portable") == 0) && cpu_has_shani()) f = blocks_shani;
#endif
        g_fn = f;
    }
    return g_fn;
}

const char *cis2_sha256_impl(void)
{
#ifdef HAVE_SHANI_CODE
    if (pick() == blocks_shani) return "sha-ni";
#endif
    return "portable";
}

int cis2_sha256_use(const char *impl)
{
    if (strcmp(impl, "portable") == 0) {
        g_fn = blocks_portable;
        return 0;
    }
#ifdef HAVE_SHANI_CODE
    if (strcmp(impl, "sha-ni") == 0 && cpu_has_shani()) {
        g_fn = blocks_shani;
        return 0;
    }
#endif
    return 1;
}

void cis2_sha256_init(cis2_sha256 *s)
{
    static const uint32_t H0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    memcpy(s->h, H0, sizeof H0);
    s->nbytes = 0;
    s->buflen = 0;
}

/* An update's first part: count the bytes, then top up a partly filled
 * buffer (hashing it once full). Leaves what is left of the data. */
static void upd_head(cis2_sha256 *s, const uint8_t **pp, size_t *lenp, blocks_fn fn)
{
    const uint8_t *p = *pp;
    size_t len = *lenp;
    s->nbytes += len;
    if (s->buflen) {
        size_t take = 64 - s->buflen < len ? 64 - s->buflen : len;
        memcpy(s->buf + s->buflen, p, take);
        s->buflen += take;
        p += take;
        len -= take;
        if (s->buflen == 64) {
            fn(s->h, s->buf, 1);
            s->buflen = 0;
        }
    }
    *pp = p;
    *lenp = len;
}

/* The rest, with the buffer empty or the data used up: whole blocks
 * straight from the data, the tail into the buffer. */
static void upd_tail(cis2_sha256 *s, const uint8_t *p, size_t len, blocks_fn fn)
{
    if (len >= 64) {
        fn(s->h, p, len / 64);
        p += len & ~(size_t)63;
        len &= 63;
    }
    if (len) {
        memcpy(s->buf, p, len);
        s->buflen = len;
    }
}

void cis2_sha256_update(cis2_sha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    blocks_fn fn = pick();
    upd_head(s, &p, &len, fn);
    upd_tail(s, p, len, fn);
}

void cis2_sha256_update_u32(cis2_sha256 *s, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    cis2_sha256_update(s, b, 4);
}

void cis2_sha256_update2(cis2_sha256 *a, const void *da, cis2_sha256 *b, const void *db, size_t len)
{
#ifdef HAVE_SHANI_CODE
    blocks_fn fn = pick();
    if (fn == blocks_shani) {
        const uint8_t *pa = da, *pb = db;
        size_t la = len, lb = len;
        upd_head(a, &pa, &la, fn);
        upd_head(b, &pb, &lb, fn);
        size_t n = (la < lb ? la : lb) / 64; /* the blocks both have */
        if (n) blocks_shani2(a->h, pa, b->h, pb, n);
        upd_tail(a, pa + 64 * n, la - 64 * n, fn);
        upd_tail(b, pb + 64 * n, lb - 64 * n, fn);
        return;
    }
#endif
    cis2_sha256_update(a, da, len);
    cis2_sha256_update(b, db, len);
}

void cis2_sha256_final(cis2_sha256 *s, uint8_t out[32])
{
    uint64_t bits = s->nbytes * 8;
    uint8_t pad[72] = { 0x80 };
    size_t padlen = (s->buflen < 56) ? 56 - s->buflen : 120 - s->buflen;
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t keep = s->nbytes;
    cis2_sha256_update(s, pad, padlen);
    cis2_sha256_update(s, lenb, 8);
    s->nbytes = keep;
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void cis2_sha256_buf(const void *data, size_t len, uint8_t out[32])
{
    cis2_sha256 s;
    cis2_sha256_init(&s);
    cis2_sha256_update(&s, data, len);
    cis2_sha256_final(&s, out);
}

int cis2_sha256_file(const char *path, uint8_t out[32], char *err)
{
    int fd;
    uint64_t size;
    if (cis2_open_input(path, &fd, &size, err)) return 1; /* never blocks on a FIFO */
    cis2_sha256 s;
    cis2_sha256_init(&s);
    if (size > 0) {
        void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, CIS2_ERR_LEN, "%s: mmap failed: %s", path, strerror(errno));
            close(fd);
            return 1;
        }
        cis2_sha256_update(&s, m, (size_t)size);
        munmap(m, (size_t)size);
    }
    close(fd);
    cis2_sha256_final(&s, out);
    return 0;
}

void cis2_hex(const uint8_t *b, size_t n, char *out)
{
    static const char H[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = H[b[i] >> 4];
        out[2 * i + 1] = H[b[i] & 15];
    }
    out[2 * n] = 0;
}

int cis2_unhex32(const char *hex, uint8_t out[32])
{
    for (int i = 0; i < 64; i++) {
        char c = hex[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 1;
    }
    if (hex[64] != 0) return 1;
    for (int i = 0; i < 32; i++) {
        int hi = hex[2 * i] <= '9' ? hex[2 * i] - '0' : hex[2 * i] - 'a' + 10;
        int lo = hex[2 * i + 1] <= '9' ? hex[2 * i + 1] - '0' : hex[2 * i + 1] - 'a' + 10;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}
