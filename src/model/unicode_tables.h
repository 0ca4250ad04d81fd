/* Unicode data for the tokenizer, UCD 15.1.0, generated into unicode_tables.c
 * by tools/gen_unicode_tables.py: the pre-tokenizer's character classes (spec
 * §3.1.4) and the canonical normalization data NFC needs (UAX #15); plus the
 * UTF-8 and NFC routines built on them (unicode.c). */
#ifndef CIS2_UNICODE_TABLES_H
#define CIS2_UNICODE_TABLES_H
#include <stddef.h>
#include <stdint.h>

enum { CIS2_UC_OTHER = 0, CIS2_UC_L = 1, CIS2_UC_N = 2, CIS2_UC_WS = 3 };

typedef struct {
    uint32_t lo, hi;
    uint8_t cls; /* the class, or the combining class in cis2_uc_ccc */
} cis2_uc_range;

typedef struct {
    uint32_t a, b, c;
} cis2_uc_triple;

extern const uint8_t cis2_uc_latin1[256];    /* class of U+0000..U+00FF */
extern const cis2_uc_range cis2_uc_ranges[]; /* sorted, disjoint, >= U+0100 */
extern const size_t cis2_uc_nranges;
extern const cis2_uc_range cis2_uc_ccc[]; /* Canonical_Combining_Class != 0 */
extern const size_t cis2_uc_nccc;
extern const cis2_uc_triple cis2_uc_decomp[]; /* {code point, first, second or 0} */
extern const size_t cis2_uc_ndecomp;
extern const cis2_uc_triple cis2_uc_comp[]; /* {first, second, primary composite} */
extern const size_t cis2_uc_ncomp;
extern const cis2_uc_range cis2_uc_nfc_active[]; /* ccc != 0 or NFC_QC No/Maybe */
extern const size_t cis2_uc_nnfc_active;

/* The range of `r` holding cp, or NULL. */
static inline const cis2_uc_range *cis2_uc_find(const cis2_uc_range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return &r[mid];
    }
    return NULL;
}

/* Class of code point cp: L (Lu/Ll/Lt/Lm/Lo), N (Nd/Nl/No), WS (White_Space), else OTHER. */
static inline int cis2_uc_class(uint32_t cp)
{
    if (cp < 256) return cis2_uc_latin1[cp];
    const cis2_uc_range *r = cis2_uc_find(cis2_uc_ranges, cis2_uc_nranges, cp);
    return r ? r->cls : CIS2_UC_OTHER;
}

/* ------------------------------------------------------- UTF-8 (unicode.c) */
/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no
 * surrogates, <= U+10FFFF), 0 when invalid; stores the code point. */
size_t cis2_utf8_dec(const uint8_t *s, size_t n, uint32_t *cp);
/* (Validity of a whole string: cis2_utf8_check in core/core.h.) */
/* Encode cp (<= U+10FFFF, not a surrogate) into b[0..4); returns the length. */
size_t cis2_utf8_enc(uint32_t cp, uint8_t *b);
/* s[0..n) quoted for a one-line error message: at most 40 input bytes, and
 * control characters (C0, DEL, C1, U+2028/9), quotes, backslashes and bytes
 * that are not UTF-8 as \xNN; returns out. */
const char *cis2_utf8_quote(const char *s, size_t n, char out[200]);

/* --------------------------------------------------------- NFC (unicode.c) */
/* Scratch space of cis2_nfc, reusable across calls; zero-initialise it. */
typedef struct {
    uint32_t *cp, *tmp; /* code points of one segment, sort scratch */
    size_t cap;
    uint8_t *out; /* the normalized text */
    size_t out_cap;
} cis2_nfc_buf;

/* Offset of the first byte of valid UTF-8 `s` where NFC might differ from the
 * input (the start of the segment around the first active code point), or n
 * when s is certainly in NFC (the quick check of UAX #15 §9). */
size_t cis2_nfc_quick(const uint8_t *s, size_t n);
/* NFC (UAX #15, canonical decomposition, canonical ordering, canonical
 * composition) of valid UTF-8 s[0..n) into b->out; *len its length.
 * Returns 0, or 1 when out of memory. */
int cis2_nfc(const uint8_t *s, size_t n, cis2_nfc_buf *b, size_t *len);
void cis2_nfc_buf_free(cis2_nfc_buf *b);
#endif
