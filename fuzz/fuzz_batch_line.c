/* The line layer of cis2 batch / merge / verify-batch (docs/scale.md) over
 * arbitrary bytes: the streaming JSONL reader (small line limit, so skips and
 * refills happen) must account for every byte, and each line through the
 * result-line head parser and the request id reader must give one error line
 * or a head that an error object built from it reads back identically. */
#include "fuzz.h"
#include "cli/batch.h"
#include <stdio.h>
#include <unistd.h>

static void one_line(const char *l, size_t n)
{
    char err[CIS2_ERR_LEN] = "";
    cis2_line_head h;
    if (cis2_line_head_parse(l, n, &h, err) == 0) {
        FUZZ_ASSERT(h.line >= 1 && h.line <= h.lines);
        size_t len;
        char *e = cis2_result_error_line(h.line, h.lines, h.id, h.id_len, "x", &len);
        FUZZ_ASSERT(e && len > 0 && e[len - 1] == '\n' && !memchr(e, '\n', len - 1));
        cis2_line_head g;
        FUZZ_ASSERT(cis2_line_head_parse(e, len - 1, &g, err) == 0);
        FUZZ_ASSERT(g.line == h.line && g.lines == h.lines && g.is_error && !g.id == !h.id);
        /* a parsed id is valid UTF-8 (the JSON parser checks), so it comes back unchanged */
        FUZZ_ASSERT(!h.id || (g.id_len == h.id_len && !memcmp(g.id, h.id, h.id_len)));
        cis2_line_head_free(&g);
        free(e);
    } else {
        fuzz_check_err(err);
    }
    cis2_line_head_free(&h);
    char *id = NULL;
    size_t il = 0;
    if (cis2_request_id(l, n, &id, &il) == 0) FUZZ_ASSERT(id != NULL);
    free(id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = tmpfile();
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) abort();
    fflush(f);
    rewind(f);
    cis2_jsonl r;
    cis2_jsonl_init(&r, fileno(f), "fuzz.jsonl");
    r.max_line = 64;
    const char *l;
    size_t n, seen = 0;
    int c, k;
    char err[CIS2_ERR_LEN];
    while ((k = cis2_jsonl_next(&r, &l, &n, &c, err)) == 1) {
        FUZZ_ASSERT(!l || n <= r.max_line);
        FUZZ_ASSERT(!l || !memchr(l, '\n', n));
        FUZZ_ASSERT(!l || !memcmp(l, data + seen, n));
        seen += n + (size_t)c;
        FUZZ_ASSERT(r.good == (c ? seen : seen - n));
        if (l) one_line(l, n);
    }
    FUZZ_ASSERT(k == 0 && seen == size);
    cis2_jsonl_free(&r);
    fclose(f);
    return 0;
}
