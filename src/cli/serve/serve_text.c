/* One completion's text as it is streamed: ids turned into text as they come,
 * where a stop string matches, and how much of the text so far may be sent —
 * never half a UTF-8 character, never bytes that could still turn out to be
 * the start of a stop string (OpenAI: "the returned text will not contain
 * the stop sequence"). */
#include "cli/serve.h"
#include <stdlib.h>
#include <string.h>

long serve_stop_find(const serve_stops *s, const char *text, size_t len)
{
    long best = -1;
    for (int i = 0; i < s->n_stop; i++) {
        size_t l = s->stop_len[i];
        if (l == 0 || l > len) continue;
        const char *p = memmem(text, len, s->stop[i], l);
        if (p && (best < 0 || p - text < best)) best = p - text;
    }
    return best;
}

/* Bytes a UTF-8 sequence starting with lead byte c has (0: c cannot start one). */
static size_t utf8_need(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
}

size_t serve_sendable(const serve_stops *s, const char *text, size_t len)
{
    size_t hold = 0; /* the longest suffix that is a proper prefix of a stop string */
    for (int i = 0; i < s->n_stop; i++) {
        size_t l = s->stop_len[i], k = l - 1 < len ? l - 1 : len;
        for (; k > hold; k--)
            if (memcmp(text + len - k, s->stop[i], k) == 0) {
                hold = k;
                break;
            }
    }
    size_t end = len - hold;
    /* A trailing lead byte whose continuation bytes have not all arrived yet. */
    for (size_t back = 1; back <= 3 && back <= end; back++) {
        unsigned char c = (unsigned char)text[end - back];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        size_t need = utf8_need(c);
        if (need > back) end -= back;
        break;
    }
    return end;
}

/* The UTF-8 sequence that starts at p[0] (n >= 1 bytes there): 1 when it is
 * a whole character of *len bytes; 0 when p[0..n) is the start of one that the
 * end cuts (*len = n); -1 when it is invalid, *len being its maximal subpart
 * (the longest prefix that could start a well-formed sequence, at least 1
 * byte; Unicode §3.9, Table 3-7 for the second byte's range). */
static int utf8_seq(const unsigned char *p, size_t n, size_t *len)
{
    size_t need = utf8_need(p[0]);
    if (need == 0) {
        *len = 1;
        return -1;
    }
    for (size_t i = 1; i < need; i++) {
        if (i == n) {
            *len = n;
            return 0;
        }
        unsigned lo = 0x80, hi = 0xBF;
        if (i == 1) {
            if (p[0] == 0xE0) lo = 0xA0;      /* no overlong 3-byte form */
            else if (p[0] == 0xED) hi = 0x9F; /* no surrogates */
            else if (p[0] == 0xF0) lo = 0x90; /* no overlong 4-byte form */
            else if (p[0] == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
        }
        if (p[i] < lo || p[i] > hi) {
            *len = i;
            return -1;
        }
    }
    *len = need;
    return 1;
}

#define REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* b[0..n) into text: whole characters as they are, each maximal invalid
 * subpart as U+FFFD, a character cut by the end kept in d (unless at_end). */
static void detok_bytes(serve_detok *d, const unsigned char *b, size_t n, int at_end, cis2_sb *out)
{
    size_t i = 0, run = 0; /* b[run..i): whole characters not yet written */
    if (n == 0) return;
    while (i < n) {
        size_t k;
        int r = utf8_seq(b + i, n - i, &k);
        if (r > 0) {
            i += k;
            continue;
        }
        cis2_sb_put(out, (const char *)b + run, i - run);
        if (r == 0 && !at_end) { /* k <= 3: waits for the next id */
            memcpy(d->pending, b + i, k);
            d->n = (int)k;
            return;
        }
        cis2_sb_str(out, REPLACEMENT);
        i += k;
        run = i;
    }
    cis2_sb_put(out, (const char *)b + run, i - run);
}

void serve_detok_feed(serve_detok *d, const cis2_tokenizer *t, int32_t id, cis2_sb *out)
{
    char err[CIS2_ERR_LEN], *b = NULL;
    size_t bl = 0;
    unsigned char held[sizeof d->pending];
    size_t nh = (size_t)d->n;
    memcpy(held, d->pending, nh);
    d->n = 0;
    int rc = id >= 0 ? cis2_tokenizer_decode(t, &id, 1, &b, &bl, err) : 0;
    if (rc < 0) { /* out of memory */
        out->oom = 1;
        return;
    }
    if (rc) { /* an id tokenizer.json names no token for: no bytes (cis2_receipt_prompt_bytes) */
        memcpy(d->pending, held, nh);
        d->n = (int)nh;
        return;
    }
    if (nh == 0) {
        detok_bytes(d, (const unsigned char *)b, bl, id < 0, out);
    } else { /* the held bytes go first: the id may complete their character */
        unsigned char *all = malloc(nh + bl);
        if (!all) {
            out->oom = 1;
            free(b);
            return;
        }
        memcpy(all, held, nh);
        if (bl) memcpy(all + nh, b, bl);
        detok_bytes(d, all, nh + bl, id < 0, out);
        free(all);
    }
    free(b);
}
