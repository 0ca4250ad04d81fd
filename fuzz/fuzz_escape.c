/* The escaper every string from a file passes through (src/core/strbuf.c
 * cis2_sb_escape): arbitrary bytes in each mode. The output never holds a
 * byte a terminal acts on (C0, DEL, C1, bidi controls, LS/PS, invalid UTF-8);
 * TEXT reads back to the input; SANITIZE leaves escaped text unchanged; JSON
 * is a JSON string that reads back to valid UTF-8 input. */
#include "fuzz.h"
#include "core/json.h"

static int safe(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (cis2_utf8_check(s, n) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] == 0x7F) return 0;
        if (p[i] == 0xC2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F) return 0;
        if (p[i] == 0xE2 && i + 2 < n && p[i + 1] == 0x80 &&
            ((p[i + 2] >= 0xA8 && p[i + 2] <= 0xAE) || p[i + 2] == 0x8E || p[i + 2] == 0x8F))
            return 0;
        if (p[i] == 0xE2 && i + 2 < n && p[i + 1] == 0x81 && p[i + 2] >= 0xA6 && p[i + 2] <= 0xA9)
            return 0;
    }
    return 1;
}

static int hexd(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* Inverse of CIS2_ESC_TEXT. */
static size_t unescape(const char *s, size_t n, char *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            out[m++] = s[i];
            continue;
        }
        char c = s[++i];
        if (c == 'n') out[m++] = '\n';
        else if (c == 'r') out[m++] = '\r';
        else if (c == 't') out[m++] = '\t';
        else if (c == '\\') out[m++] = '\\';
        else if (c == 'x') {
            out[m++] = (char)(hexd(s[i + 1]) << 4 | hexd(s[i + 2]));
            i += 2;
        } else { /* \uHHHH: UTF-8 of the code point */
            unsigned cp = 0;
            for (int k = 1; k <= 4; k++) cp = cp << 4 | (unsigned)hexd(s[i + k]);
            i += 4;
            if (cp < 0x800) {
                out[m++] = (char)(0xC0 | cp >> 6);
                out[m++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[m++] = (char)(0xE0 | cp >> 12);
                out[m++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[m++] = (char)(0x80 | (cp & 0x3F));
            }
        }
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    cis2_sb t = { 0 }, z = { 0 }, zz = { 0 }, j = { 0 };
    cis2_sb_escape(&t, s, size, CIS2_ESC_TEXT);
    cis2_sb_escape(&z, s, size, CIS2_ESC_SANITIZE);
    cis2_sb_escape(&zz, t.b ? t.b : "", t.len, CIS2_ESC_SANITIZE);
    cis2_sb_json_str(&j, s, size);
    FUZZ_ASSERT(!t.oom && !z.oom && !zz.oom && !j.oom);
    FUZZ_ASSERT(safe(t.b ? t.b : "", t.len) && safe(z.b ? z.b : "", z.len));
    FUZZ_ASSERT(safe(j.b, j.len));
    FUZZ_ASSERT(zz.len == t.len && (!t.len || !memcmp(zz.b, t.b, t.len)));
    char *back = malloc(t.len + 1);
    if (!back) abort();
    size_t m = unescape(t.b ? t.b : "", t.len, back);
    FUZZ_ASSERT(m == size && (!size || !memcmp(back, s, size)));
    free(back);
    json_doc d;
    char err[CIS2_ERR_LEN];
    FUZZ_ASSERT(json_parse(&d, j.b, j.len, "fuzz.json", err) == 0);
    size_t l;
    char *v = json_str_dup(&d, 0, &l);
    FUZZ_ASSERT(v);
    if (cis2_utf8_check(s, size) == size) FUZZ_ASSERT(l == size && !memcmp(v, s, size));
    free(v);
    json_free(&d);
    char small[40];
    cis2_escape(s, size, small, sizeof small, CIS2_ESC_TEXT);
    FUZZ_ASSERT(strlen(small) < sizeof small && safe(small, strlen(small)));
    cis2_sb_free(&t);
    cis2_sb_free(&z);
    cis2_sb_free(&zz);
    cis2_sb_free(&j);
    return 0;
}
