/* A growable byte buffer for building output text: JSON objects (strings
 * escaped per RFC 8259, control characters and invalid UTF-8 never passed
 * through raw), hex digests and id lists; and the one escaper for every
 * string that came from a file or a peer before it reaches a terminal (a
 * name, a key, a metadata value may not inject a line or an escape
 * sequence). Allocation failure is sticky: the builder keeps going and
 * cis2_sb_take returns NULL at the end. */
#include "core/core.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void cis2_sb_put(cis2_sb *s, const void *p, size_t n)
{
    if (s->oom) return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 1) cap *= 2;
        char *b = realloc(s->b, cap);
        if (!b) {
            s->oom = 1;
            return;
        }
        s->b = b;
        s->cap = cap;
    }
    memcpy(s->b + s->len, p, n);
    s->len += n;
    s->b[s->len] = 0;
}

void cis2_sb_str(cis2_sb *s, const char *str) { cis2_sb_put(s, str, strlen(str)); }

void cis2_sb_printf(cis2_sb *s, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        cis2_sb_put(s, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        s->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    cis2_sb_put(s, big, (size_t)n);
    free(big);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (!k || k > n || c > 0xF4) return 0;
    for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0;  /* overlong */
    if (c == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
    if (c == 0xF0 && p[1] < 0x90) return 0;  /* overlong */
    if (c == 0xF4 && p[1] >= 0x90) return 0; /* > U+10FFFF */
    return k;
}

size_t cis2_utf8_check(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, k;
    while (i < n && (k = utf8_len(p + i, n - i))) i += k;
    return i;
}

static uint32_t code_point(const unsigned char *p, size_t k)
{
    if (k == 1) return p[0];
    uint32_t c = p[0] & (0x7Fu >> k);
    for (size_t i = 1; i < k; i++) c = c << 6 | (p[i] & 0x3Fu);
    return c;
}

/* Code points a terminal acts on or that reorder or break the visible line:
 * C0 and C1 controls, DEL, the Unicode line/paragraph separators and the
 * bidirectional formatting characters. */
static int unsafe_cp(uint32_t c)
{
    return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
           (c >= 0x2028 && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0xFEFF;
}

/* Where escaped text goes: a growable builder, or a fixed buffer that keeps
 * whole escapes only and ends in "..." when the text does not fit. */
typedef struct {
    cis2_sb *sb;
    char *out;
    size_t cap, len;
    int full;
} sink;

static void emit(sink *k, const void *p, size_t n)
{
    if (k->sb) {
        cis2_sb_put(k->sb, p, n);
        return;
    }
    if (k->full) return;
    if (k->len + n + 4 > k->cap) { /* room for "..." and the NUL */
        k->full = 1;
        size_t m = k->cap - 1 - k->len < 3 ? k->cap - 1 - k->len : 3;
        memcpy(k->out + k->len, "...", m);
        k->len += m;
        k->out[k->len] = 0;
        return;
    }
    memcpy(k->out + k->len, p, n);
    k->len += n;
    k->out[k->len] = 0;
}

static void escape_to(sink *k, const char *str, size_t n, cis2_esc_mode mode)
{
    const unsigned char *p = (const unsigned char *)str;
    char e[16];
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t len = utf8_len(p + i, n - i);
        uint32_t cp = len ? code_point(p + i, len) : 0;
        const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (c == '\\' && mode != CIS2_ESC_SANITIZE) {
            emit(k, "\\\\", 2);
        } else if (c == '"' && mode == CIS2_ESC_JSON) {
            emit(k, "\\\"", 2);
        } else if (named) {
            emit(k, named, 2);
        } else if (!len) { /* not UTF-8: its byte, or U+FFFD in JSON text */
            if (mode == CIS2_ESC_JSON) emit(k, "\\ufffd", 6);
            else emit(k, e, (size_t)snprintf(e, sizeof e, "\\x%02x", c));
            len = 1;
        } else if (unsafe_cp(cp)) {
            if (cp < 0x80 && mode != CIS2_ESC_JSON)
                emit(k, e, (size_t)snprintf(e, sizeof e, "\\x%02x", (unsigned)cp));
            else emit(k, e, (size_t)snprintf(e, sizeof e, "\\u%04x", (unsigned)cp));
        } else {
            emit(k, p + i, len);
        }
        i += len ? len : 1;
    }
}

void cis2_sb_escape(cis2_sb *s, const char *str, size_t n, cis2_esc_mode mode)
{
    sink k = { s, NULL, 0, 0, 0 };
    escape_to(&k, str, n, mode);
}

const char *cis2_escape(const char *str, size_t n, char *out, size_t cap, cis2_esc_mode mode)
{
    if (!cap) return out;
    out[0] = 0;
    sink k = { NULL, out, cap, 0, cap < 4 };
    escape_to(&k, str, n, mode);
    return out;
}

void cis2_sb_json_str(cis2_sb *s, const char *str, size_t n)
{
    cis2_sb_put(s, "\"", 1);
    cis2_sb_escape(s, str, n, CIS2_ESC_JSON);
    cis2_sb_put(s, "\"", 1);
}

void cis2_sb_hex(cis2_sb *s, const uint8_t *b, size_t n)
{
    static const char H[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        char h[2] = { H[b[i] >> 4], H[b[i] & 15] };
        cis2_sb_put(s, h, 2);
    }
}

char *cis2_sb_take(cis2_sb *s, size_t *len)
{
    if (s->oom) {
        free(s->b);
        memset(s, 0, sizeof *s);
        return NULL;
    }
    if (!s->b) cis2_sb_put(s, "", 0);
    if (s->oom) return NULL;
    char *b = s->b;
    if (len) *len = s->len;
    memset(s, 0, sizeof *s);
    return b;
}

void cis2_sb_free(cis2_sb *s)
{
    free(s->b);
    memset(s, 0, sizeof *s);
}

void cis2_err_one_line(char *err)
{
    char tmp[CIS2_ERR_LEN];
    cis2_escape(err, strnlen(err, CIS2_ERR_LEN - 1), tmp, sizeof tmp, CIS2_ESC_SANITIZE);
    memcpy(err, tmp, strlen(tmp) + 1);
}
