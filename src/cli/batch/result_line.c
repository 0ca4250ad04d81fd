/* The one output line format of `cis2 batch` (docs/scale.md): a result or an
 * error object per input line, keys in a fixed order, built only from the
 * run itself (no timings, no host names), so that the merged output of any
 * sharding, batch size, resume or CPU is byte-identical. Also reads back the
 * fields that order and identify a line (resume, merge, verify-batch). */
#include "cli/batch.h"
#include "engine/sample.h"
#include <stdlib.h>
#include <string.h>

static void head(cis2_sb *sb, int line, int lines, const char *id, size_t id_len)
{
    cis2_sb_printf(sb, "{\"line\":%d,\"lines\":%d,\"id\":", line, lines);
    if (id) cis2_sb_json_str(sb, id, id_len);
    else cis2_sb_str(sb, "null");
}

static void ids(cis2_sb *sb, const char *key, const int32_t *v, int n)
{
    cis2_sb_printf(sb, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) cis2_sb_printf(sb, i ? ",%d" : "%d", (int)v[i]);
    cis2_sb_put(sb, "]", 1);
}

static void hex(cis2_sb *sb, const char *key, const uint8_t d[32])
{
    cis2_sb_printf(sb, ",\"%s\":\"", key);
    cis2_sb_hex(sb, d, 32);
    cis2_sb_put(sb, "\"", 1);
}

char *cis2_result_line(const cis2_model *m, int line, int lines, const char *id, size_t id_len,
                       const cis2_result *r, const uint8_t *prompt, size_t prompt_len,
                       const cis2_sampler *s, size_t *len)
{
    cis2_sb sb = { 0 };
    head(&sb, line, lines, id, id_len);
    ids(&sb, "prompt_token_ids", r->prompt, r->n_prompt);
    ids(&sb, "generated_token_ids", r->gen, r->n_gen);
    /* "text": the generated ids' bytes as JSON text when they are valid
     * UTF-8, else null (as `cis2 run` prints text_error=: never invented
     * characters). The ids are the exact record. */
    char terr[CIS2_ERR_LEN], *text = NULL;
    size_t tl = 0;
    const cis2_tokenizer *t = cis2_model_tokenizer(m, terr);
    cis2_sb_str(&sb, ",\"text\":");
    if (t && cis2_tokenizer_decode(t, r->gen, r->n_gen, &text, &tl, terr) == 0 &&
        cis2_utf8_check(text, tl) == tl)
        cis2_sb_json_str(&sb, text, tl);
    else cis2_sb_str(&sb, "null");
    free(text);
    /* §12: the three digests — §12.3 tables, §12.2 argmax, §12.1 witness */
    const cis2_digests *dg = cis2_model_digests(m);
    hex(&sb, "table_digest", dg->table_digest);
    hex(&sb, "inv_freq_table_digest", dg->inv_freq_digest);
    hex(&sb, "argmax_digest", r->argmax);
    hex(&sb, "cis2_ref", r->witness);
    /* a sampled run: its sampler as the input names it, each number in the
     * receipt's shortest form (docs/sampling.md §6), the seed (derived or
     * given) in full; a greedy line has none of these keys */
    if (s && s->temperature > 0.0f) {
        char tv[32], p[32], mp[32];
        smp_format_num(s->temperature, tv, sizeof tv);
        smp_format_num(s->top_p, p, sizeof p);
        smp_format_num(s->min_p, mp, sizeof mp);
        cis2_sb_printf(&sb,
                       ",\"temperature\":%s,\"top_k\":%d,\"top_p\":%s,\"min_p\":%s,\"seed\":%llu",
                       tv, s->top_k, p, mp, (unsigned long long)s->seed);
    }
    cis2_receipt rc;
    cis2_receipt_from_run(&rc, m, r, prompt, prompt_len);
    char *rt = NULL;
    size_t rl = 0;
    if (cis2_receipt_format_sampled(&rc, s, &rt, &rl)) sb.oom = 1;
    cis2_sb_str(&sb, ",\"receipt\":");
    if (rt) cis2_sb_json_str(&sb, rt, rl);
    free(rt);
    cis2_sb_str(&sb, "}\n");
    return cis2_sb_take(&sb, len);
}

char *cis2_result_error_line(int line, int lines, const char *id, size_t id_len, const char *msg,
                             size_t *len)
{
    cis2_sb sb = { 0 };
    head(&sb, line, lines, id, id_len);
    cis2_sb_str(&sb, ",\"error\":");
    cis2_sb_json_str(&sb, msg, strlen(msg));
    cis2_sb_str(&sb, "}\n");
    return cis2_sb_take(&sb, len);
}

static int get_pos_int(const json_doc *d, const char *key, int *out, char *err)
{
    int dups = 0;
    uint32_t v = json_get(d, 0, key, &dups);
    int64_t x;
    if (v == JSON_NONE || dups != 1 || json_num_i64(d, v, &x) || x < 1 || x > 2000000000) {
        snprintf(err, CIS2_ERR_LEN, "no positive integer \"%s\"", key);
        return 1;
    }
    *out = (int)x;
    return 0;
}

int cis2_line_head_read(const char *text, size_t len, json_doc *d, cis2_line_head *h, char *err)
{
    memset(h, 0, sizeof *h);
    memset(d, 0, sizeof *d);
    /* JSON takes a \r as whitespace, but cis2 batch never writes one: a line
     * copied on (merged, appended to) would keep a CRLF another tool made */
    if (len && text[len - 1] == '\r') {
        snprintf(err, CIS2_ERR_LEN, "a \\r\\n line ending: cis2 batch writes \\n alone");
        return 1;
    }
    if (cis2_json_line_parse(d, text, len, err)) return 1;
    int rc = 1, dups = 0;
    if (d->nodes[0].type != JSON_OBJECT) {
        snprintf(err, CIS2_ERR_LEN, "not a JSON object");
        goto out;
    }
    if (get_pos_int(d, "line", &h->line, err) || get_pos_int(d, "lines", &h->lines, err)) goto out;
    if (h->line > h->lines) {
        snprintf(err, CIS2_ERR_LEN, "\"line\" %d is beyond \"lines\" %d", h->line, h->lines);
        goto out;
    }
    uint32_t v = json_get(d, 0, "id", &dups);
    if (v == JSON_NONE || dups != 1 ||
        (d->nodes[v].type != JSON_STRING && d->nodes[v].type != JSON_NULL)) {
        snprintf(err, CIS2_ERR_LEN, "no \"id\" (a string or null)");
        goto out;
    }
    if (d->nodes[v].type == JSON_STRING) {
        h->id = json_str_dup(d, v, &h->id_len);
        if (!h->id) {
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            goto out;
        }
    }
    h->is_error = json_get(d, 0, "error", NULL) != JSON_NONE;
    rc = 0;
out:
    if (rc) { /* a head that fails is all unset: no half-read line or id */
        json_free(d);
        cis2_line_head_free(h);
    }
    return rc;
}

int cis2_line_head_parse(const char *text, size_t len, cis2_line_head *h, char *err)
{
    json_doc d;
    int rc = cis2_line_head_read(text, len, &d, h, err);
    json_free(&d);
    return rc;
}

int cis2_line_head_in_shard(const cis2_line_head *h, int i, int n, char *err)
{
    if ((h->line - 1) % n == i) return 0;
    snprintf(err, CIS2_ERR_LEN, "input line %d is not in shard %d/%d", h->line, i, n);
    return 1;
}

void cis2_line_head_free(cis2_line_head *h)
{
    free(h->id);
    memset(h, 0, sizeof *h);
}

void cis2_sb_id(cis2_sb *sb, const char *id, size_t id_len)
{
    if (!id) {
        cis2_sb_str(sb, "null");
        return;
    }
    /* the first 64 bytes, cut before a character's continuation bytes: a
     * character cut in two would print as a \ufffd the id does not hold */
    size_t n = id_len > 64 ? 64 : id_len;
    while (n > 0 && n < id_len && ((unsigned char)id[n] & 0xC0) == 0x80) n--;
    cis2_sb_json_str(sb, id, n);
    if (id_len > n) cis2_sb_str(sb, "...");
}

void cis2_print_id(FILE *f, const char *id, size_t id_len)
{
    cis2_sb sb = { 0 };
    cis2_sb_id(&sb, id, id_len);
    fputs(sb.b && !sb.oom ? sb.b : "\"\"", f);
    cis2_sb_free(&sb);
}

/* As `cis2 run` says it (cis2_cli_nan_note), per result line: a run whose
 * logits hold a NaN has a witness that other ISAs do not reproduce (§1.6,
 * docs/conformance.md). The first CIS2_BATCH_NAN_NAMED are named; the rest
 * are counted once at the end (a model that gives NaN everywhere would
 * otherwise print a line per input line). */
#define CIS2_BATCH_NAN_NAMED 10
void cis2_batch_nan_note(const char *cmd, long *count, int line, const char *id, size_t id_len,
                         const cis2_result *r)
{
    if (!r || r->nan_step < 0 || ++*count > CIS2_BATCH_NAN_NAMED) return;
    cis2_sb q = { 0 };
    cis2_sb_id(&q, id, id_len);
    cis2_cli_note(cmd,
                  "note: input line %d (id %s): the logits of step %d hold a NaN (first at "
                  "index %d): NaN bit patterns differ by ISA, so this witness is not portable "
                  "(docs/conformance.md)",
                  line, q.b && !q.oom ? q.b : "?", r->nan_step, r->nan_index);
    cis2_sb_free(&q);
}

void cis2_batch_nan_total(const char *cmd, long count)
{
    if (count > CIS2_BATCH_NAN_NAMED)
        cis2_cli_note(cmd,
                      "note: %ld more result(s) whose logits hold a NaN (%ld in all): their "
                      "witnesses are not portable either (docs/conformance.md)",
                      count - CIS2_BATCH_NAN_NAMED, count);
}
