/* A growable byte buffer for building output text: JSON objects (strings
 * escaped per RFC 8259, control characters and invalid UTF-8 never passed
 * through raw), hex digests and id lists. Allocation failure is sticky: the
 * builder keeps going and cis2_sb_take returns NULL at the end. */
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

void cis2_sb_json_str(cis2_sb *s, const char *str, size_t n)
{
    const unsigned char *p = (const unsigned char *)str;
    cis2_sb_put(s, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            cis2_sb_put(s, e, 2);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (e) cis2_sb_str(s, e);
            else cis2_sb_printf(s, "\\u%04x", c);
            i++;
        } else {
            size_t k = utf8_len(p + i, n - i);
            if (k) {
                cis2_sb_put(s, p + i, k);
                i += k;
            } else { /* not UTF-8: U+FFFD, never a raw byte in JSON text */
                cis2_sb_str(s, "\\ufffd");
                i++;
            }
        }
    }
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
