/* UTF-8 decoding/validation and Unicode NFC (UAX #15) over the generated UCD
 * 15.1 tables: what Qwen2/Qwen3's `normalizer: NFC` does to the text before
 * pre-tokenization. Never the host's locale or C library. */
#include "model/unicode_tables.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ UTF-8 */

size_t cis2_utf8_dec(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t l;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        l = 2;
        v = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        l = 3;
        v = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        l = 4;
        v = c & 0x07;
        min = 0x10000;
    } else return 0;
    if (n < l) return 0;
    for (size_t i = 1; i < l; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return l;
}

size_t cis2_utf8_enc(uint32_t v, uint8_t *b)
{
    if (v < 0x80) {
        b[0] = (uint8_t)v;
        return 1;
    }
    if (v < 0x800) {
        b[0] = (uint8_t)(0xC0 | v >> 6);
        b[1] = (uint8_t)(0x80 | (v & 0x3F));
        return 2;
    }
    if (v < 0x10000) {
        b[0] = (uint8_t)(0xE0 | v >> 12);
        b[1] = (uint8_t)(0x80 | ((v >> 6) & 0x3F));
        b[2] = (uint8_t)(0x80 | (v & 0x3F));
        return 3;
    }
    b[0] = (uint8_t)(0xF0 | v >> 18);
    b[1] = (uint8_t)(0x80 | ((v >> 12) & 0x3F));
    b[2] = (uint8_t)(0x80 | ((v >> 6) & 0x3F));
    b[3] = (uint8_t)(0x80 | (v & 0x3F));
    return 4;
}

const char *cis2_utf8_quote(const char *s, size_t n, char out[200])
{
    size_t o = 0, i = 0;
    out[o++] = '"';
    while (i < n) {
        if (i >= 40 || o > 180) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        uint32_t cp = 0;
        size_t l = cis2_utf8_dec((const uint8_t *)s + i, n - i, &cp);
        if (!l || cp < 0x20 || cp == '"' || cp == '\\' || (cp >= 0x7F && cp < 0xA0) ||
            cp == 0x2028 || cp == 0x2029) {
            for (size_t k = 0; k < (l ? l : 1); k++)
                o += (size_t)snprintf(out + o, 8, "\\x%02x", (uint8_t)s[i + k]);
            i += l ? l : 1;
            continue;
        }
        memcpy(out + o, s + i, l);
        o += l;
        i += l;
    }
    out[o++] = '"';
    out[o] = 0;
    return out;
}

/* -------------------------------------------------------------- NFC data */

/* Hangul syllables are (de)composed arithmetically (Unicode §3.12). */
enum {
    SBASE = 0xAC00,
    LBASE = 0x1100,
    VBASE = 0x1161,
    TBASE = 0x11A7,
    LCOUNT = 19,
    VCOUNT = 21,
    TCOUNT = 28,
    NCOUNT = VCOUNT * TCOUNT,
    SCOUNT = LCOUNT * NCOUNT
};

static int ccc_of(uint32_t cp)
{
    if (cp < 0x300) return 0;
    const cis2_uc_range *r = cis2_uc_find(cis2_uc_ccc, cis2_uc_nccc, cp);
    return r ? r->cls : 0;
}

/* May NFC change the text at or around cp (ccc != 0, NFC_QC No or Maybe)?
 * Everything else starts a segment that normalizes independently. */
static int nfc_active(uint32_t cp)
{
    if (cp < 0x300) return 0;
    if ((cp >= 0x3400 && cp < 0xA000) || (cp >= SBASE && cp < SBASE + SCOUNT)) return 0;
    return cis2_uc_find(cis2_uc_nfc_active, cis2_uc_nnfc_active, cp) != NULL;
}

static const cis2_uc_triple *decomp_of(uint32_t cp)
{
    size_t lo = 0, hi = cis2_uc_ndecomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < cis2_uc_decomp[mid].a) hi = mid;
        else if (cp > cis2_uc_decomp[mid].a) lo = mid + 1;
        else return &cis2_uc_decomp[mid];
    }
    return NULL;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    size_t lo = 0, hi = cis2_uc_ncomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const cis2_uc_triple *t = &cis2_uc_comp[mid];
        if (a < t->a || (a == t->a && b < t->b)) hi = mid;
        else if (a > t->a || b > t->b) lo = mid + 1;
        else return t->c;
    }
    return 0;
}

/* ------------------------------------------------------------- NFC itself */

size_t cis2_nfc_quick(const uint8_t *s, size_t n)
{
    size_t i = 0, boundary = 0;
    while (i < n) {
        if (s[i] < 0xCC) { /* U+0000..U+02FF (or a continuation byte): never active */
            if ((s[i] & 0xC0) != 0x80) boundary = i;
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = cis2_utf8_dec(s + i, n - i, &cp);
        if (!l) return boundary; /* not UTF-8: the caller's bug; never loop */
        if (nfc_active(cp)) return boundary;
        boundary = i;
        i += l;
    }
    return n;
}

static int grow_cp(cis2_nfc_buf *b, size_t need)
{
    if (need <= b->cap) return 0;
    size_t c = b->cap ? b->cap : 64;
    while (c < need) c *= 2;
    uint32_t *p = realloc(b->cp, c * sizeof *p);
    if (!p) return 1;
    b->cp = p;
    p = realloc(b->tmp, c * sizeof *p);
    if (!p) return 1;
    b->tmp = p;
    b->cap = c;
    return 0;
}

static int grow_out(cis2_nfc_buf *b, size_t need)
{
    if (need <= b->out_cap) return 0;
    size_t c = b->out_cap ? b->out_cap : 256;
    while (c < need) c *= 2;
    uint8_t *p = realloc(b->out, c);
    if (!p) return 1;
    b->out = p;
    b->out_cap = c;
    return 0;
}

/* Full canonical decomposition of cp appended to b->cp[*n..] (D68). */
static int decompose(cis2_nfc_buf *b, size_t *n, uint32_t cp)
{
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        if (grow_cp(b, *n + 3)) return 1;
        b->cp[(*n)++] = LBASE + s / NCOUNT;
        b->cp[(*n)++] = VBASE + (s % NCOUNT) / TCOUNT;
        if (s % TCOUNT) b->cp[(*n)++] = TBASE + s % TCOUNT;
        return 0;
    }
    const cis2_uc_triple *d = cp >= 0xC0 ? decomp_of(cp) : NULL;
    if (!d) {
        if (grow_cp(b, *n + 1)) return 1;
        b->cp[(*n)++] = cp;
        return 0;
    }
    if (decompose(b, n, d->b)) return 1;
    return d->c ? decompose(b, n, d->c) : 0;
}

/* Canonical ordering (D109): each run of non-starters sorted stably by
 * combining class. Keys are ccc << 21 | cp; long runs by counting sort, so an
 * adversarial run of marks costs O(n), never O(n^2). */
static void reorder(cis2_nfc_buf *b, size_t n)
{
    uint32_t *k = b->cp;
    for (size_t i = 0; i < n; i++) k[i] |= (uint32_t)ccc_of(k[i]) << 21;
    size_t i = 0;
    while (i < n) {
        if (!(k[i] >> 21)) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && k[j] >> 21) j++;
        if (j - i <= 32) {
            for (size_t a = i + 1; a < j; a++) {
                uint32_t v = k[a];
                size_t p = a;
                while (p > i && k[p - 1] >> 21 > v >> 21) {
                    k[p] = k[p - 1];
                    p--;
                }
                k[p] = v;
            }
        } else {
            size_t count[257] = { 0 };
            for (size_t a = i; a < j; a++) count[(k[a] >> 21) + 1]++;
            for (int c = 1; c < 257; c++) count[c] += count[c - 1];
            for (size_t a = i; a < j; a++) b->tmp[count[k[a] >> 21]++] = k[a];
            memcpy(k + i, b->tmp, (j - i) * sizeof *k);
        }
        i = j;
    }
}

/* Canonical composition (D117) in place over keys (ccc << 21 | cp); returns
 * the new length. A character joins the last starter unless blocked by a
 * character in between of ccc 0 or >= its own. */
static size_t recompose(uint32_t *k, size_t n)
{
    size_t o = 0, starter = 0;
    int have_starter = 0, last = -1; /* ccc of the last kept char after the starter */
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = k[i] & 0x1FFFFF;
        int cc = (int)(k[i] >> 21);
        if (have_starter && (last < 0 || (last > 0 && last < cc))) {
            uint32_t c = compose(k[starter] & 0x1FFFFF, cp);
            if (c) {
                k[starter] = c; /* a primary composite is a starter */
                continue;
            }
        }
        if (cc == 0) {
            starter = o;
            have_starter = 1;
            last = -1;
        } else last = cc;
        k[o++] = k[i];
    }
    return o;
}

/* Normalize one segment (a boundary code point and the active ones after it)
 * and append its UTF-8 to b->out at *len. */
static int segment(const uint8_t *s, size_t n, cis2_nfc_buf *b, size_t *len)
{
    size_t m = 0, i = 0;
    while (i < n) {
        uint32_t cp = 0xFFFD;
        size_t l = cis2_utf8_dec(s + i, n - i, &cp);
        i += l ? l : 1; /* not UTF-8: the caller's bug; never loop */
        if (decompose(b, &m, cp)) return 1;
    }
    reorder(b, m);
    m = recompose(b->cp, m);
    if (grow_out(b, *len + 4 * m)) return 1;
    for (size_t j = 0; j < m; j++) *len += cis2_utf8_enc(b->cp[j] & 0x1FFFFF, b->out + *len);
    return 0;
}

int cis2_nfc(const uint8_t *s, size_t n, cis2_nfc_buf *b, size_t *len)
{
    *len = 0;
    if (grow_out(b, n + 1)) return 1;
    size_t i = 0;
    while (i < n) {
        size_t q = i + cis2_nfc_quick(s + i, n - i); /* start of the next segment to redo */
        if (grow_out(b, *len + (q - i) + 1)) return 1;
        memcpy(b->out + *len, s + i, q - i);
        *len += q - i;
        if (q == n) break;
        /* the segment: one code point, then every active one after it */
        uint32_t cp = 0;
        size_t l0 = cis2_utf8_dec(s + q, n - q, &cp), e = q + (l0 ? l0 : 1);
        while (e < n) {
            size_t l = cis2_utf8_dec(s + e, n - e, &cp);
            if (!l || !nfc_active(cp)) break;
            e += l;
        }
        if (segment(s + q, e - q, b, len)) return 1;
        i = e;
    }
    return 0;
}

void cis2_nfc_buf_free(cis2_nfc_buf *b)
{
    free(b->cp);
    free(b->tmp);
    free(b->out);
    memset(b, 0, sizeof *b);
}
