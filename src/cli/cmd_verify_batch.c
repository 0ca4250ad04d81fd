/* `cis2 verify-batch RESULTS.jsonl --model DIR`: every receipt in a `cis2
 * batch` output re-run on this machine, B at a time through the
 * multi-sequence engine, and checked field by field with the library's
 * receipt verification (§14.3, cis2_receipt_verify_begin/_finish); then the
 * whole line is rebuilt from the recomputed run and compared byte for byte,
 * so a doctored "text" or id list next to an intact receipt is caught too.
 * One line per mismatch or unreadable line, then a summary. */
#include "cli/batch.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RUN, SKIP, BAD };
typedef struct {
    long at; /* line number in RESULTS */
    int kind;
    cis2_line_head h;
    char *text; /* the line as read */
    size_t len;
    char *msg; /* BAD: why */
    cis2_receipt rc;
    cis2_verdict v;
} vjob;

typedef struct {
    cis2_jsonl r;
    const cis2_model *m;
    long lines, verified, mismatched, bad, skipped;
    int total;            /* "lines" of the first result line read: the input's count */
    int shard_i, shard_n; /* --shard: the input lines this file holds */
    int *seen;            /* the input line of every result line read */
    size_t n_seen, cap_seen;
} vctx;

/* Where a result line belongs: every line says the file's "lines" (the
 * first one's) and is in the --shard checked; its input line is noted, so
 * that input lines left out or given twice are found at the end. 0, 1 with
 * the reason in err (the line is unreadable), -1 when memory ran out. */
static int place_line(vctx *c, const cis2_line_head *h, char *err)
{
    if (!c->total) c->total = h->lines;
    if (h->lines != c->total) {
        snprintf(err, CIS2_ERR_LEN, "\"lines\" %d, but the file's first result line says %d",
                 h->lines, c->total);
        return 1;
    }
    if (cis2_line_head_in_shard(h, c->shard_i, c->shard_n, err)) return 1;
    if (c->n_seen == c->cap_seen) {
        size_t cap = c->cap_seen ? 2 * c->cap_seen : 1024;
        int *t = realloc(c->seen, cap * sizeof *t);
        if (!t) return -1;
        c->seen = t;
        c->cap_seen = cap;
    }
    c->seen[c->n_seen++] = h->line;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* After the last line: each input line given by more than one result line,
 * then the input lines of this file's shard that no line gave (the first
 * ten named). Returns how many lines were wrong so. */
static long report_gaps(vctx *c)
{
    long dups = 0;
    /* An empty file: only a line says how many input lines there are, so
     * it cannot be shown whole (a file emptied, or a shard not run, would
     * pass); as cis2 merge refuses shards that are all empty. */
    if (c->lines == 0) {
        printf("MISSING input line(s): the file holds no line, so nothing says how many input "
               "lines there are; nothing verified\n");
        return 1;
    }
    if (c->n_seen) qsort(c->seen, c->n_seen, sizeof *c->seen, cmp_int); /* never NULL, 0 */
    size_t distinct = 0;
    for (size_t k = 0; k < c->n_seen; k++) {
        size_t e = k;
        while (e + 1 < c->n_seen && c->seen[e + 1] == c->seen[k]) e++;
        if (e > k) {
            printf("DUPLICATE input line %d: %zu result lines\n", c->seen[k], e - k + 1);
            dups++;
        }
        distinct++;
        k = e;
    }
    /* the shard's input lines; every line seen is one of them (place_line) */
    int want = c->total > c->shard_i ? (c->total - c->shard_i + c->shard_n - 1) / c->shard_n : 0;
    long missing = want - (long)distinct;
    if (missing) {
        printf("MISSING input line(s)");
        size_t k = 0;
        int named = 0;
        for (long l = c->shard_i + 1; l <= c->total && named < 10; l += c->shard_n) {
            while (k < c->n_seen && c->seen[k] < l) k++;
            if (k < c->n_seen && c->seen[k] == l) continue;
            printf("%s %ld", named++ ? "," : "", l);
        }
        if (missing > named) printf(" and %ld more", missing - named);
        printf(" (%ld of the %d", missing, want);
        if (c->shard_n > 1) printf(" in shard %d/%d", c->shard_i, c->shard_n);
        printf("): no result line\n");
    }
    return dups + missing;
}

static void where(const vjob *j)
{
    printf("line %ld", j->at);
    if (j->h.line) {
        printf(" (input line %d, id ", j->h.line);
        cis2_print_id(stdout, j->h.id, j->h.id_len);
        printf(")");
    }
}

static void drop_job(void *ctx, cis2_pipe_job *job)
{
    vjob *j = job->user;
    cis2_line_head_free(&j->h);
    cis2_receipt_free(&j->rc);
    cis2_verdict_free(&j->v);
    free(j->text);
    free(j->msg);
    free(j);
}

/* Whether a line (parsed, its head read: an object) is an error line as
 * `cis2 batch` writes it: "line", "lines", "id" and a string "error", in that
 * order and nothing else. A line that merely has an "error" field, next to a
 * receipt say, is not skipped as one: that would keep a receipt unchecked. */
static int is_error_line(const json_doc *d)
{
    static const char *const keys[] = { "line", "lines", "id", "error" };
    int ok = d->nodes[0].count == 4, i = 0;
    for (uint32_t k = d->nodes[0].first; ok && k != JSON_NONE; k = d->nodes[d->nodes[k].next].next)
        ok = json_str_eq(d, k, keys[i++]);
    uint32_t v = json_get(d, 0, "error", NULL);
    return ok && v != JSON_NONE && d->nodes[v].type == JSON_STRING;
}

static int next_job(void *ctx, cis2_pipe_job *job)
{
    vctx *c = ctx;
    const char *line;
    size_t len;
    int complete;
    char err[CIS2_ERR_LEN] = "";
    int k = cis2_jsonl_next(&c->r, &line, &len, &complete, err);
    if (k <= 0) {
        if (k < 0) cis2_cli_usage_error("verify-batch", "%s", err);
        return k;
    }
    vjob *j = calloc(1, sizeof *j);
    if (!j || (line && !(j->text = malloc(len + 2)))) {
        free(j);
        cis2_cli_usage_error("verify-batch", "out of memory");
        return -1;
    }
    j->at = c->r.lineno;
    job->user = j;
    j->kind = BAD;
    if (!line) {
        snprintf(err, sizeof err, "a line of %zu bytes, more than the %u a line may have", len,
                 CIS2_RESULT_MAX_LINE);
    } else if (!complete) {
        snprintf(err, sizeof err, "incomplete last line (an interrupted write)");
    } else {
        memcpy(j->text, line, len);
        j->text[len] = '\n';
        j->len = len + 1;
        json_doc d = { 0 }; /* the line, parsed once: its head, then its receipt */
        int placed = 0;
        if (cis2_line_head_read(line, len, &d, &j->h, err)) {
            /* err says why */
        } else if ((placed = place_line(c, &j->h, err)) != 0) {
            if (placed < 0) {
                cis2_cli_usage_error("verify-batch", "out of memory");
                json_free(&d);
                drop_job(ctx, job);
                return -1;
            }
        } else if (j->h.is_error) {
            if (is_error_line(&d)) j->kind = SKIP;
            else
                snprintf(err, sizeof err,
                         "an \"error\" field, but not an error line as cis2 batch writes it "
                         "(other fields)");
        } else {
            uint32_t rv = json_get(&d, 0, "receipt", NULL);
            size_t rl;
            char *rt = NULL, e2[CIS2_ERR_LEN];
            if (rv == JSON_NONE || d.nodes[rv].type != JSON_STRING)
                snprintf(err, sizeof err, "no \"receipt\" string");
            else if (!(rt = json_str_dup(&d, rv, &rl))) snprintf(err, sizeof err, "out of memory");
            else if (cis2_receipt_parse(rt, rl, "receipt", &j->rc, e2))
                snprintf(err, sizeof err, "%s", e2);
            else j->kind = RUN;
            free(rt);
        }
        json_free(&d);
    }
    if (j->kind == BAD && !(j->msg = strdup(err))) j->kind = SKIP;
    if (j->kind != RUN) return 1;
    int run, b = cis2_receipt_verify_begin(c->m, &j->rc, &j->v, &job->g, &run, err);
    if (b == 2) {
        /* A receipt this model cannot re-run (more positions than it has:
         * one made with another model, or doctored) is that line's verdict,
         * not the end of the whole file's check. */
        if ((j->msg = strdup(err))) j->kind = BAD;
        else j->kind = SKIP;
        return 1;
    }
    if (b) {
        cis2_cli_usage_error("verify-batch", "%s", err);
        drop_job(ctx, job);
        return -1;
    }
    if (run) {
        job->ids = j->rc.prompt_ids;
        job->n_ids = j->rc.n_prompt;
    }
    return 1;
}

/* Names of the top-level fields whose values differ between two lines. */
static void diff_fields(const char *a, size_t al, const char *b, size_t bl, cis2_sb *out)
{
    json_doc x = { 0 }, y = { 0 };
    char err[CIS2_ERR_LEN];
    if (cis2_json_line_parse(&x, a, al, err) || cis2_json_line_parse(&y, b, bl, err)) {
        cis2_sb_str(out, "bytes");
        json_free(&x);
        return;
    }
    int n = 0;
    for (uint32_t k = x.nodes[0].first; k != JSON_NONE; k = x.nodes[x.nodes[k].next].next) {
        char *key = json_str_dup(&x, k, NULL);
        if (!key) break;
        uint32_t u = x.nodes[k].next, v = json_get(&y, 0, key, NULL);
        int same = v != JSON_NONE && x.nodes[u].type == y.nodes[v].type &&
                   x.nodes[u].len == y.nodes[v].len &&
                   memcmp(a + x.nodes[u].start, b + y.nodes[v].start, x.nodes[u].len) == 0;
        if (!same) cis2_sb_printf(out, "%s%s", n++ ? ", " : "", key);
        free(key);
    }
    if (x.nodes[0].count != y.nodes[0].count) {
        cis2_sb_printf(out, "%sset of fields", n ? ", " : "");
    } else if (!n) { /* the same values: either their order or the bytes around them differ */
        int order = 0;
        for (uint32_t k = x.nodes[0].first, l = y.nodes[0].first; k != JSON_NONE && l != JSON_NONE;
             k = x.nodes[x.nodes[k].next].next, l = y.nodes[y.nodes[l].next].next)
            order |= x.nodes[k].len != y.nodes[l].len ||
                     memcmp(a + x.nodes[k].start, b + y.nodes[l].start, x.nodes[k].len) != 0;
        cis2_sb_str(out, order ? "order of fields" : "bytes between the fields (whitespace)");
    }
    json_free(&x);
    json_free(&y);
}

static void short_val(const char *s)
{
    size_t n = strlen(s);
    cis2_cli_put_escaped(stdout, s, n > 64 ? 64 : n, CIS2_ESC_TEXT); /* a receipt's own bytes */
    if (n > 64) printf("...");
}

static int job_done(void *ctx, cis2_pipe_job *job, cis2_result *r)
{
    vctx *c = ctx;
    vjob *j = job->user;
    char err[CIS2_ERR_LEN];
    int rc = 0;
    c->lines++;
    if (j->kind == SKIP) {
        c->skipped++;
        printf("SKIP ");
        where(j);
        printf(": an error line, no receipt to verify\n");
    } else if (j->kind == BAD) {
        c->bad++;
        printf("UNREADABLE ");
        where(j);
        printf(": %s\n", j->msg);
    } else if (r && cis2_receipt_verify_finish(&j->rc, r, &j->v, err)) {
        rc = cis2_cli_usage_error("verify-batch", "%s", err);
    } else if (j->v.mismatches) {
        c->mismatched++;
        printf("MISMATCH ");
        where(j);
        printf(":");
        for (int i = 0, n = 0; i < j->v.n_fields; i++) {
            const cis2_verdict_field *f = &j->v.fields[i];
            if (f->status != CIS2_FIELD_MISMATCH) continue;
            printf("%s %s (receipt ", n++ ? ";" : "", f->name);
            short_val(f->receipt);
            printf(", recomputed ");
            short_val(f->recomputed);
            printf(")");
        }
        printf("\n");
    } else {
        size_t len = 0;
        char *want = cis2_result_line(c->m, j->h.line, j->h.lines, j->h.id, j->h.id_len, &j->v.run,
                                      j->rc.prompt_bytes, j->rc.prompt_len, &len);
        if (!want) {
            rc = cis2_cli_usage_error("verify-batch", "out of memory");
        } else if (len == j->len && memcmp(want, j->text, len) == 0) {
            c->verified++;
        } else {
            cis2_sb d = { 0 };
            diff_fields(want, len, j->text, j->len, &d);
            c->mismatched++;
            printf("MISMATCH ");
            where(j);
            printf(": the receipt verifies, but not the line's %s\n", d.b ? d.b : "fields");
            cis2_sb_free(&d);
        }
        free(want);
    }
    drop_job(ctx, job);
    return rc;
}

int cis2_cmd_verify_batch(int argc, char **argv)
{
    const char *model = NULL, *backend = NULL, *isa = NULL, *shard = NULL, *path[1] = { NULL };
    int batch = 8, threads = 0, npos = 0;
    const cis2_opt opts[] = {
        { "--model", NULL, CIS2_OPT_PATH, &model, 0, 0 },
        { "--batch", NULL, CIS2_OPT_INT, &batch, 1, CIS2_BATCH_MAX_B },
        { "--backend", NULL, CIS2_OPT_STR, &backend, 0, 0 },
        { "--isa", NULL, CIS2_OPT_STR, &isa, 0, 0 },
        { "--threads", NULL, CIS2_OPT_INT, &threads, 1, 1024 },
        { "--shard", NULL, CIS2_OPT_STR, &shard, 0, 0 },
    };
    if (cis2_cli_parse("verify-batch", argc, argv, opts, sizeof opts / sizeof opts[0], path, 1,
                       &npos, 0))
        return 2;
    if (!npos || !model)
        return cis2_cli_usage_error("verify-batch",
                                    "usage: cis2 verify-batch RESULTS.jsonl --model DIR");
    vctx c = { 0 };
    c.shard_n = 1;
    if (shard && cis2_cli_shard("verify-batch", shard, &c.shard_i, &c.shard_n)) return 2;
    cis2_engine_opts eo;
    if (cis2_cli_engine_opts("verify-batch", backend, isa, threads, &eo)) return 2;
    eo.max_seqs = batch;
    char err[CIS2_ERR_LEN];
    int fd;
    uint64_t size;
    if (cis2_open_input(path[0], &fd, &size, err))
        return cis2_cli_usage_error("verify-batch", "%s", err);
    cis2_model *m;
    cis2_engine *e;
    if (cis2_cli_open("verify-batch", model, &eo, &m, &e)) {
        close(fd);
        return 2;
    }
    c.m = m;
    cis2_jsonl_init(&c.r, fd, path[0]);
    cis2_pipe_stats st = { 0 };
    st.cmd = "verify-batch";
    int rc = 2;
    if (cis2_pipe_run(e, batch, next_job, job_done, drop_job, &c, &st) == 0) {
        long gaps = report_gaps(&c);
        printf("verify-batch: %ld line(s): %ld verified, %ld mismatched, %ld unreadable, %ld "
               "error line(s) without a receipt",
               c.lines, c.verified, c.mismatched, c.bad, c.skipped);
        if (gaps) printf("; input lines missing or given twice: %ld", gaps);
        printf("\n");
        rc = c.mismatched || c.bad || gaps ? 1 : 0;
    }
    free(c.seen);
    cis2_jsonl_free(&c.r);
    close(fd);
    cis2_engine_free(e);
    cis2_model_free(m);
    return rc;
}
