/* `cis2 merge OUT SHARD...`: the outputs of `cis2 batch --shard i/N` (or any
 * pieces of one batch output) joined into input order by each line's "line"
 * field. Refuses what would make the result differ from a single-process
 * run: an unfinished shard (a torn last line), the same input line twice,
 * input lines no shard holds, pieces of different inputs, no line at all
 * (nothing says how many there should be). OUT is written atomically. */
#include "cli/batch.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    int line, shard;
    long at; /* line number in the shard file */
    const char *text;
    size_t len; /* with its '\n' */
} piece;

static int cmp_piece(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    return x->shard != y->shard ? (x->shard < y->shard ? -1 : 1) : (x->at < y->at ? -1 : 1);
}

/* Every line of one shard file into `p` (grown as needed). */
static int read_shard(const char *path, int si, char **buf, piece **p, size_t *np, size_t *cap,
                      int *lines, const char **lines_from)
{
    char err[CIS2_ERR_LEN];
    size_t len;
    if (cis2_read_file(path, buf, &len, err)) return cis2_cli_usage_error("merge", "%s", err);
    long k = 0;
    for (size_t pos = 0; pos < len; k++) {
        const char *s = *buf + pos, *nl = memchr(s, '\n', len - pos);
        if (!nl)
            return cis2_cli_usage_error(
                "merge",
                "%s: line %ld: incomplete last line (an interrupted write): "
                "finish that shard first (rerun its cis2 batch)",
                path, k + 1);
        size_t ll = (size_t)(nl - s);
        pos += ll + 1;
        cis2_line_head h;
        if (cis2_line_head_parse(s, ll, &h, err))
            return cis2_cli_usage_error("merge", "%s: line %ld: not a cis2 batch result (%s)", path,
                                        k + 1, err);
        int line = h.line, of = h.lines;
        cis2_line_head_free(&h);
        if (*lines_from && of != *lines)
            return cis2_cli_usage_error(
                "merge",
                "%s: line %ld: a result for an input of %d lines, but %s has %d: not "
                "shards of one input",
                path, k + 1, of, *lines_from, *lines);
        *lines = of;
        *lines_from = path;
        if (*np == *cap) {
            piece *t = realloc(*p, (*cap = *cap ? 2 * *cap : 1024) * sizeof *t);
            if (!t) return cis2_cli_usage_error("merge", "out of memory");
            *p = t;
        }
        (*p)[(*np)++] = (piece){ line, si, k + 1, s, ll + 1 };
    }
    return 0;
}

int cis2_cmd_merge(int argc, char **argv)
{
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int npos = 0, rc = 2, lines = 0;
    if (!pos) return cis2_cli_usage_error("merge", "out of memory");
    if (cis2_cli_parse("merge", argc, argv, NULL, 0, pos, argc, &npos, 0)) {
        free(pos);
        return 2;
    }
    if (npos < 2) {
        free(pos);
        return cis2_cli_usage_error("merge", "usage: cis2 merge OUT SHARD.jsonl...");
    }
    int ns = npos - 1;
    char **bufs = calloc((size_t)ns, sizeof *bufs);
    piece *p = NULL;
    size_t np = 0, cap = 0;
    const char *lines_from = NULL, *out = pos[0];
    cis2_sb sb = { 0 };
    char err[CIS2_ERR_LEN];
    if (!bufs) {
        cis2_cli_usage_error("merge", "out of memory");
        goto done;
    }
    if (!strcmp(out, "-")) { /* as batch --out -: never a file named "-" made silently */
        cis2_cli_usage_error("merge",
                             "OUT -: OUT is written whole and renamed into place, which "
                             "standard output cannot be; give a file (./- for one named -)");
        goto done;
    }
    if (cis2_check_output_path(out, err)) {
        cis2_cli_usage_error("merge", "%s", err);
        goto done;
    }
    /* OUT one of the shards (by any name): the merge would replace an input
     * that a rerun of its shard still needs. */
    struct stat so, si;
    for (int s = 0, have = stat(out, &so) == 0; s < ns && have; s++)
        if (stat(pos[s + 1], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            cis2_cli_usage_error("merge", "%s: OUT is one of the shards (%s)", out, pos[s + 1]);
            goto done;
        }
    for (int s = 0; s < ns; s++)
        if (read_shard(pos[s + 1], s, &bufs[s], &p, &np, &cap, &lines, &lines_from)) goto done;
    /* Only a line says how many input lines there are ("lines"). With none,
     * N shards not run yet and an empty input look the same: the result
     * cannot be shown complete (an empty input needs no merge). */
    if (!lines_from) {
        cis2_cli_usage_error("merge",
                             "none of the %d shard(s) holds a result line: the input's line count "
                             "is unknown, so the merge cannot be shown complete (shards not run?)",
                             ns);
        goto done;
    }
    qsort(p, np, sizeof *p, cmp_piece);
    for (size_t i = 1; i < np; i++)
        if (p[i].line == p[i - 1].line) {
            cis2_cli_usage_error("merge",
                                 "input line %d is twice in the shards: %s line %ld and %s "
                                 "line %ld",
                                 p[i].line, pos[p[i - 1].shard + 1], p[i - 1].at,
                                 pos[p[i].shard + 1], p[i].at);
            goto done;
        }
    if (np != (size_t)lines) { /* lines 1..N each once, sorted: find the holes */
        cis2_sb miss = { 0 };
        int shown = 0, want = 1;
        for (size_t i = 0; i <= np && shown < 5; i++) {
            int upto = i < np ? p[i].line : lines + 1;
            for (; want < upto && shown < 5; want++, shown++)
                cis2_sb_printf(&miss, "%s%d", shown ? ", " : "", want);
            want = upto + 1;
        }
        cis2_cli_usage_error("merge",
                             "%d of the %d input lines are in no shard (a shard not given, or not "
                             "finished): %s%s",
                             lines - (int)np, lines, miss.b ? miss.b : "?",
                             lines - (int)np > 5 ? ", ..." : "");
        cis2_sb_free(&miss);
        goto done;
    }
    for (size_t i = 0; i < np; i++) cis2_sb_put(&sb, p[i].text, p[i].len);
    size_t len = 0;
    char *all = cis2_sb_take(&sb, &len);
    if (!all) {
        cis2_cli_usage_error("merge", "out of memory");
        goto done;
    }
    if (cis2_write_file_atomic(out, all, len, err)) cis2_cli_usage_error("merge", "%s", err);
    else rc = 0;
    free(all);
done:
    cis2_sb_free(&sb);
    for (int s = 0; bufs && s < ns; s++) free(bufs[s]);
    free(bufs);
    free(p);
    free(pos);
    return rc;
}
