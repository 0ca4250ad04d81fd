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

void serve_detok_feed(serve_detok *d, const cis2_tokenizer *t, int32_t id, cis2_sb *out)
{
    char err[CIS2_ERR_LEN];
    int at_end = id < 0;
    if (!at_end) d->pending[d->n++] = id;
    while (d->n > 0) {
        char *b;
        size_t bl;
        if (cis2_tokenizer_decode(t, d->pending, d->n, &b, &bl, err) == 0) {
            if (cis2_utf8_check(b, bl) == bl) { /* whole characters only */
                cis2_sb_put(out, b, bl);
                free(b);
                d->n = 0;
                return;
            }
            free(b);
        }
        if (d->n < SERVE_DETOK_MAX && !at_end) return; /* may complete with the next id */
        cis2_sb_str(out, "\xEF\xBF\xBD");              /* U+FFFD for the first id */
        memmove(d->pending, d->pending + 1, (size_t)(d->n - 1) * sizeof d->pending[0]);
        d->n--;
    }
}
