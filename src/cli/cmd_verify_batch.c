/* `cis2 verify-batch RESULTS.jsonl --model DIR [--in PROMPTS.jsonl]`: every
 * receipt in a `cis2 batch` output re-run on this machine, B at a time
 * through the multi-sequence engine, and checked field by field with the
 * library's receipt verification (§14.3, cis2_receipt_verify_begin/_finish);
 * then the whole line is rebuilt from the recomputed run and compared byte
 * for byte, so a doctored "text" or id list next to an intact receipt is
 * caught too. A receipt covers neither the line's "id" nor what was asked
 * for, so with --in every line is also held to its input line as `cis2
 * batch` reads it (cli/batch/batch_input.c): the id, the prompt's ids and bytes,
 * the number of ids max_tokens and stop_at_eos give, and for an error line
 * the very error batch writes for that input. One line per mismatch or
 * unreadable line, then a summary. */
#include "cli/batch.h"
#include "core/core.h"
#include "engine/sample.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* RUN: a receipt to re-run; SKIP: an error line (no --in); BAD: unreadable;
 * BOUND: an error line that --in's line gives, byte for byte; UNBOUND: a line
 * that is not what --in's line gives (msg says which field) */
enum { RUN, SKIP, BAD, BOUND, UNBOUND };
typedef struct {
    long at; /* line number in RESULTS */
    int kind;
    cis2_line_head h;
    char *text; /* the line as read */
    size_t len;
    char *msg; /* BAD: why */
    cis2_receipt rc;
    cis2_sampler smp; /* the receipt's (all zero: a v1, greedy receipt) */
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
    /* --in: the prompts file each line is held to, read as cis2 batch reads
     * it (with -n, --stop-at-eos and --chat-format as cis2 batch had them) */
    const char *in_path;
    cis2_batch_input in;
    cis2_request_defaults df;
    long bound; /* error lines that --in gives */
    long nans;  /* recomputed runs whose logits held a NaN */
} vctx;

/* Where a result line belongs: every line says the file's "lines" (the
 * first one's) and is in the --shard checked; its input line is noted, so
 * that input lines left out or given twice are found at the end. 0, 1 with
 * the reason in err (the line is unreadable), -1 when memory ran out. */
static int place_line(vctx *c, const cis2_line_head *h, char *err)
{
    if (!c->total && !c->in_path) c->total = h->lines; /* with --in: its line count */
    if (c->in_path && h->lines != c->in.n) {
        snprintf(err, CIS2_ERR_LEN, "\"lines\" %d, but --in %s has %d line(s)", h->lines,
                 c->in_path, c->in.n);
        return 1;
    }
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
    if (c->lines == 0 && !c->in_path) {
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

/* An id as messages quote it, into sb ("null" for none). */
static const char *quoted_id(cis2_sb *sb, const char *id, size_t id_len)
{
    cis2_sb_id(sb, id, id_len);
    return sb->b && !sb->oom ? sb->b : "?";
}

/* A message from a line or from cis2 batch, quoted as JSON (escaped: it may
 * hold anything) and cut at 120 bytes, into sb: two fit in one message line. */
static const char *quoted_msg(cis2_sb *sb, const char *s, size_t n)
{
    size_t k = n > 120 ? 120 : n;
    while (k > 0 && k < n && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    cis2_sb_json_str(sb, s, k);
    if (k < n) cis2_sb_str(sb, "...");
    return sb->b && !sb->oom ? sb->b : "?";
}

/* Line j (head read, its input line placed) held to its input line in --in:
 * 0 when it is what cis2 batch writes for that line as far as it goes here
 * (a result line's receipt is then re-run and the line rebuilt as without
 * --in), 1 with the field and why in err, -1 when memory ran out. `d` is the
 * parsed line; an error line is already known to be in batch's layout. */
static int bind_line(vctx *c, const json_doc *d, vjob *j, char *err)
{
    const cis2_in_line *l = &c->in.L[j->h.line - 1];
    cis2_request rq;
    char why[CIS2_ERR_LEN] = "";
    int rc = cis2_batch_input_request(&c->in, j->h.line - 1, c->m, &c->df, &rq, why);
    if (rc < 0) return -1;
    cis2_sb a = { 0 }, b = { 0 };
    int bad = 1;
    if (!(j->h.id ? l->id && j->h.id_len == l->id_len && !memcmp(j->h.id, l->id, l->id_len)
                  : !l->id)) {
        snprintf(err, CIS2_ERR_LEN, "id: the line says %s, but input line %d's id is %s",
                 quoted_id(&a, j->h.id, j->h.id_len), j->h.line, quoted_id(&b, l->id, l->id_len));
    } else if (j->h.is_error) {
        /* the error line cis2 batch writes for this input line, byte for byte */
        size_t len = 0, gl = 0;
        char *want =
            rc ? cis2_result_error_line(j->h.line, c->in.n, l->id, l->id_len, why, &len) : NULL;
        char *got = json_str_dup(d, json_get(d, 0, "error", NULL), &gl);
        if (!got || (rc && !want)) bad = -1;
        else if (!rc)
            snprintf(err, CIS2_ERR_LEN,
                     "error: the line says %s, but input line %d runs (cis2 batch writes a "
                     "result for it, not an error)",
                     quoted_msg(&a, got, gl), j->h.line);
        else if (len == j->len && !memcmp(want, j->text, len)) bad = 0;
        else if (gl != strlen(why) || memcmp(got, why, gl))
            snprintf(err, CIS2_ERR_LEN,
                     "error: the line says %s, but cis2 batch fails input line %d with %s",
                     quoted_msg(&a, got, gl), j->h.line, quoted_msg(&b, why, strlen(why)));
        else
            snprintf(err, CIS2_ERR_LEN,
                     "not the bytes of the error line cis2 batch writes for input line %d "
                     "(the same error, written otherwise)",
                     j->h.line);
        free(want);
        free(got);
    } else if (rc) {
        snprintf(err, CIS2_ERR_LEN,
                 "a result, but cis2 batch fails input line %d (it writes an error line: %s)",
                 j->h.line, quoted_msg(&a, why, strlen(why)));
    } else if (j->rc.n_prompt != rq.n_ids ||
               memcmp(j->rc.prompt_ids, rq.ids, (size_t)rq.n_ids * sizeof *rq.ids)) {
        int k = 0;
        while (k < rq.n_ids && k < j->rc.n_prompt && j->rc.prompt_ids[k] == rq.ids[k]) k++;
        snprintf(err, CIS2_ERR_LEN,
                 "prompt_token_ids: not what input line %d's \"%s\" gives (%d ids, where it "
                 "gives %d; the first difference at index %d)",
                 j->h.line, rq.field, j->rc.n_prompt, rq.n_ids, k);
    } else if (j->rc.prompt_len != rq.prompt_len ||
               memcmp(j->rc.prompt_bytes, rq.prompt, rq.prompt_len)) {
        snprintf(err, CIS2_ERR_LEN,
                 "receipt prompt-hex: not the bytes input line %d's \"%s\" gives", j->h.line,
                 rq.field);
    } else if (!cis2_batch_gen_ok(c->m, j->rc.gen_ids, j->rc.n_gen, rq.max_tokens,
                                  rq.stop_at_eos)) {
        snprintf(err, CIS2_ERR_LEN,
                 "generated_token_ids: %d, where input line %d asks for max_tokens %d with "
                 "stop_at_eos %s (from the line, else -n and --stop-at-eos: give verify-batch "
                 "the ones cis2 batch ran with)",
                 j->rc.n_gen, j->h.line, rq.max_tokens, rq.stop_at_eos ? "on" : "off");
    } else if (cis2_f2u(j->smp.temperature) != cis2_f2u(rq.smp.temperature) ||
               j->smp.top_k != rq.smp.top_k || cis2_f2u(j->smp.top_p) != cis2_f2u(rq.smp.top_p) ||
               cis2_f2u(j->smp.min_p) != cis2_f2u(rq.smp.min_p) || j->smp.seed != rq.smp.seed) {
        /* the receipt re-runs under its own sampler; the input decides which one
         * cis2 batch ran (docs/scale.md: a line without "seed" has its derived one) */
        char x[160] = "none (greedy)", y[160] = "none (greedy)";
        if (j->smp.temperature > 0.0f) {
            smp_format(&j->smp, x, sizeof x);
            snprintf(x + strlen(x), sizeof x - strlen(x), " seed %llu",
                     (unsigned long long)j->smp.seed);
        }
        if (rq.smp.temperature > 0.0f) {
            smp_format(&rq.smp, y, sizeof y);
            snprintf(y + strlen(y), sizeof y - strlen(y), " seed %llu",
                     (unsigned long long)rq.smp.seed);
        }
        snprintf(err, CIS2_ERR_LEN, "sampler: the receipt's is %s, where input line %d gives %s", x,
                 j->h.line, y);
    } else bad = 0;
    if (a.oom || b.oom) bad = -1;
    cis2_sb_free(&a);
    cis2_sb_free(&b);
    cis2_request_free(&rq);
    return bad;
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
            if (is_error_line(&d)) j->kind = c->in_path ? BOUND : SKIP;
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
            else if (cis2_receipt_parse_sampled(rt, rl, "receipt", &j->rc, &j->smp, e2))
                snprintf(err, sizeof err, "%s", e2);
            else j->kind = RUN;
            free(rt);
        }
        int tie = 0;
        if (c->in_path && (j->kind == RUN || j->kind == BOUND) &&
            (tie = bind_line(c, &d, j, err)) > 0)
            j->kind = UNBOUND;
        json_free(&d);
        if (tie < 0) {
            cis2_cli_usage_error("verify-batch", "out of memory");
            drop_job(ctx, job);
            return -1;
        }
    }
    if ((j->kind == BAD || j->kind == UNBOUND) && !(j->msg = strdup(err))) {
        cis2_cli_usage_error("verify-batch", "out of memory");
        drop_job(ctx, job);
        return -1;
    }
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
        job->smp = j->smp;
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
    } else if (j->kind == BOUND) {
        c->bound++;
    } else if (j->kind == UNBOUND) {
        c->mismatched++;
        printf("MISMATCH ");
        where(j);
        printf(": %s\n", j->msg);
    } else if (r && cis2_receipt_verify_finish_sampled(&j->rc, &j->smp, r, &j->v, err)) {
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
                                      j->rc.prompt_bytes, j->rc.prompt_len, &j->smp, &len);
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
    if (j->kind == RUN && r && !rc) /* as `cis2 verify` notes it */
        cis2_batch_nan_note("verify-batch", &c->nans, j->h.line, j->h.id, j->h.id_len, &j->v.run);
    drop_job(ctx, job);
    return rc;
}

int cis2_cmd_verify_batch(int argc, char **argv)
{
    const char *model = NULL, *backend = NULL, *isa = NULL, *shard = NULL, *path[1] = { NULL },
               *in = NULL, *chat_format = NULL;
    int batch = 8, threads = 0, npos = 0, n = 0, stop = 0;
    const cis2_opt opts[] = {
        { "--model", NULL, CIS2_OPT_PATH, &model, 0, 0 },
        { "--batch", NULL, CIS2_OPT_INT, &batch, 1, CIS2_BATCH_MAX_B },
        { "--backend", NULL, CIS2_OPT_STR, &backend, 0, 0 },
        { "--isa", NULL, CIS2_OPT_STR, &isa, 0, 0 },
        { "--threads", NULL, CIS2_OPT_INT, &threads, 1, 1024 },
        { "--shard", NULL, CIS2_OPT_STR, &shard, 0, 0 },
        { "--in", NULL, CIS2_OPT_PATH, &in, 0, 0 },
        { "--n", "-n", CIS2_OPT_INT, &n, 1, CIS2_BATCH_MAX_TOKENS },
        { "--stop-at-eos", NULL, CIS2_OPT_FLAG, &stop, 0, 0 },
        { "--chat-format", NULL, CIS2_OPT_STR, &chat_format, 0, 0 },
    };
    if (cis2_cli_parse("verify-batch", argc, argv, opts, sizeof opts / sizeof opts[0], path, 1,
                       &npos, 0))
        return 2;
    if (!npos || !model)
        return cis2_cli_usage_error(
            "verify-batch",
            "usage: cis2 verify-batch RESULTS.jsonl --model DIR [--in PROMPTS.jsonl]");
    /* they say how cis2 batch read PROMPTS: without --in they would be ignored */
    if (!in && (n || stop || chat_format))
        return cis2_cli_usage_error("verify-batch",
                                    "-n, --stop-at-eos and --chat-format say how cis2 batch read "
                                    "its input: give them with --in PROMPTS.jsonl");
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
    cis2_model *m = NULL;
    cis2_engine *e = NULL;
    cis2_chat_template *tpl = NULL;
    char chat_err[CIS2_ERR_LEN] = "";
    int rc = 2;
    if (in) { /* as cmd_batch.c reads it: the same template, defaults and lines */
        c.in_path = in;
        c.df.max_tokens = n ? n : 16;
        c.df.stop_at_eos = stop;
        if (cis2_batch_chat("verify-batch", model, chat_format, &tpl, chat_err) ||
            cis2_batch_input_read("verify-batch", in, &c.in))
            goto out;
        c.df.chat = tpl;
        c.df.chat_err = chat_err;
        c.total = c.in.n;
    }
    if (cis2_cli_open("verify-batch", model, &eo, &m, &e)) goto out;
    c.m = m;
    cis2_jsonl_init(&c.r, fd, path[0]);
    cis2_pipe_stats st = { 0 };
    st.cmd = "verify-batch";
    int stopped = cis2_pipe_run(e, batch, next_job, job_done, drop_job, &c, &st);
    cis2_batch_nan_total("verify-batch", c.nans);
    if (!stopped) {
        long gaps = report_gaps(&c);
        printf("verify-batch: %ld line(s): %ld verified, %ld mismatched, %ld unreadable, ", c.lines,
               c.verified, c.mismatched, c.bad);
        if (in) printf("%ld error line(s) checked against the input", c.bound);
        else printf("%ld error line(s) without a receipt", c.skipped);
        if (gaps) printf("; input lines missing or given twice: %ld", gaps);
        printf("\n");
        rc = c.mismatched || c.bad || gaps ? 1 : 0;
    }
out:
    free(c.seen);
    cis2_jsonl_free(&c.r);
    close(fd);
    cis2_engine_free(e);
    cis2_model_free(m);
    cis2_chat_template_free(tpl);
    cis2_batch_input_free(&c.in);
    return rc;
}
