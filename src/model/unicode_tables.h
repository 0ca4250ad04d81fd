/* Unicode character classes for the tokenizer's pre-tokenizer (spec §3.1.4),
 * UCD 15.1.0, generated into unicode_tables.c by tools/gen_unicode_tables.py. */
#ifndef CIS2_UNICODE_TABLES_H
#define CIS2_UNICODE_TABLES_H
#include <stddef.h>
#include <stdint.h>

enum { CIS2_UC_OTHER = 0, CIS2_UC_L = 1, CIS2_UC_N = 2, CIS2_UC_WS = 3 };

typedef struct {
    uint32_t lo, hi;
    uint8_t cls;
} cis2_uc_range;

extern const uint8_t cis2_uc_latin1[256];    /* class of U+0000..U+00FF */
extern const cis2_uc_range cis2_uc_ranges[]; /* sorted, disjoint, >= U+0100 */
extern const size_t cis2_uc_nranges;

/* Class of code point cp: L (Lu/Ll/Lt/Lm/Lo), N (Nd/Nl/No), WS (White_Space), else OTHER. */
static inline int cis2_uc_class(uint32_t cp)
{
    if (cp < 256) return cis2_uc_latin1[cp];
    size_t lo = 0, hi = cis2_uc_nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < cis2_uc_ranges[mid].lo) hi = mid;
        else if (cp > cis2_uc_ranges[mid].hi) lo = mid + 1;
        else return cis2_uc_ranges[mid].cls;
    }
    return CIS2_UC_OTHER;
}
#endif
