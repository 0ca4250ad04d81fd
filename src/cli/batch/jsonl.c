/* A streaming reader of JSON Lines files (results files can be far larger
 * than memory should hold): one '\n'-terminated line at a time, a bounded
 * buffer (an over-long line is skipped and reported, never buffered whole),
 * and a final line without its '\n' — what an interrupted append leaves —
 * reported as incomplete, with the offset where the complete lines end. */
#include "cli/batch.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cis2_jsonl_init(cis2_jsonl *r, int fd, const char *path)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->path = path;
    r->max_line = CIS2_RESULT_MAX_LINE;
}

/* Append up to `want` more bytes of the file to buf; 0 at EOF. */
static int fill(cis2_jsonl *r, char *err)
{
    if (r->pos > 0) { /* drop what was consumed */
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->off += r->pos;
        r->pos = 0;
    }
    if (r->cap - r->len < 65536) {
        size_t cap = r->cap ? r->cap * 2 : 1 << 20;
        if (cap > r->max_line + (1 << 20)) cap = r->max_line + (1 << 20);
        if (cap > r->cap) {
            char *b = realloc(r->buf, cap);
            if (!b) {
                snprintf(err, CIS2_ERR_LEN, "%s: out of memory", r->path);
                return -1;
            }
            r->buf = b;
            r->cap = cap;
        }
    }
    if (r->len == r->cap) return 1; /* full: the caller handles the long line */
    ssize_t n;
    do n = read(r->fd, r->buf + r->len, r->cap - r->len);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: read failed: %s", r->path, strerror(errno));
        return -1;
    }
    if (n == 0) r->eof = 1;
    r->len += (size_t)n;
    return n > 0;
}

int cis2_jsonl_next(cis2_jsonl *r, const char **line, size_t *len, int *complete, char *err)
{
    *line = NULL;
    *len = 0;
    *complete = 1;
    size_t scanned = 0, skipped = 0; /* skipped: bytes of an over-long line already dropped */
    if (!r->buf && fill(r, err) < 0) return -1; /* never offset a NULL buffer */
    for (;;) {
        char *start = r->buf + r->pos;
        size_t have = r->len - r->pos;
        char *nl = have > scanned ? memchr(start + scanned, '\n', have - scanned) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - start);
            r->pos += n + 1;
            r->lineno++;
            r->good = r->off + r->pos;
            if (skipped || n > r->max_line) {
                *len = skipped + n;
                return 1;
            }
            *line = start;
            *len = n;
            return 1;
        }
        scanned = have;
        if (r->eof) {
            if (!have && !skipped) return 0;
            r->pos = r->len;
            r->lineno++;
            *complete = 0;
            if (skipped || have > r->max_line) {
                *len = skipped + have;
                return 1;
            }
            *line = start;
            *len = have;
            return 1;
        }
        if (have > r->max_line) { /* too long: drop what we have, keep looking */
            skipped += have;
            r->off += r->len;
            r->pos = r->len = 0;
            scanned = 0;
        }
        if (fill(r, err) < 0) return -1;
        /* fill moved the unread bytes to buf[0]: pos is 0, `scanned` still counts them */
    }
}

int cis2_json_line_parse(json_doc *d, const char *text, size_t len, char *err)
{
    char e[CIS2_ERR_LEN];
    int rc = json_parse(d, text, len, "", e);
    if (rc == 0) return 0;
    const char *col = strstr(e, " col ");
    snprintf(err, CIS2_ERR_LEN, "invalid JSON at%s", col ? col : e);
    return rc;
}

void cis2_jsonl_free(cis2_jsonl *r)
{
    free(r->buf);
    r->buf = NULL;
}
