/* The prompts file of `cis2 batch` (docs/scale.md), as batch runs it and as
 * `cis2 verify-batch --in` holds results to it: read whole, refused when it
 * is UTF-16, split into lines, every line's "id" indexed (duplicates marked
 * the same way whatever the shard), and each line turned into its request or
 * into the error message batch writes for it. One code path for both, so
 * that verify-batch re-derives exactly what batch would run or refuse. */
#include "cli/batch.h"
#include <stdlib.h>
#include <string.h>

static int split_lines(const char *buf, size_t len, cis2_in_line **out, int *n)
{
    size_t cap = 1024;
    int k = 0;
    cis2_in_line *L = malloc(cap * sizeof *L);
    for (size_t p = 0; L && p < len;) {
        const char *nl = memchr(buf + p, '\n', len - p);
        size_t e = nl ? (size_t)(nl - buf) : len;
        if ((size_t)k == cap) {
            cis2_in_line *t = realloc(L, (cap *= 2) * sizeof *L);
            if (!t) { /* a failure, never a shorter input: "lines" would be wrong */
                free(L);
                L = NULL;
                k = 0;
                break;
            }
            L = t;
        }
        memset(&L[k], 0, sizeof L[k]);
        L[k].text = buf + p;
        L[k++].len = e - p;
        p = e + 1;
        if (k == 2000000000) break;
    }
    *out = L;
    *n = k;
    return !L;
}

typedef struct {
    const char *id;
    size_t len;
    int line;
} id_ref;

static int cmp_id(const void *a, const void *b)
{
    const id_ref *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->id, y->id, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->line - y->line;
}

/* Every line's id (the whole file, whatever the shard: duplicates are found
 * the same way by every shard), and which lines repeat an earlier id. 1 when
 * memory ran out (a line would lose its id, its result would say null). */
static int index_ids(cis2_in_line *L, int n)
{
    id_ref *r = malloc(((size_t)n + 1) * sizeof *r);
    if (!r) return 1;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (L[i].len > CIS2_BATCH_MAX_LINE) continue;
        int got = cis2_request_id(L[i].text, L[i].len, &L[i].id, &L[i].id_len);
        if (got < 0) {
            free(r);
            return 1;
        }
        if (got == 0) r[k++] = (id_ref){ L[i].id, L[i].id_len, i + 1 };
    }
    qsort(r, (size_t)k, sizeof *r, cmp_id);
    for (int j = 1, first = k ? r[0].line : 0; j < k; j++) {
        if (r[j].len == r[j - 1].len && memcmp(r[j].id, r[j - 1].id, r[j].len) == 0)
            L[r[j].line - 1].dup_of = first;
        else first = r[j].line;
    }
    free(r);
    return 0;
}

int cis2_batch_input_read(const char *cmd, const char *path, cis2_batch_input *in)
{
    char err[CIS2_ERR_LEN];
    memset(in, 0, sizeof *in);
    in->path = path;
    if (cis2_read_file_max(path, CIS2_BATCH_MAX_INPUT, &in->buf, &in->len, err))
        return cis2_cli_usage_error(cmd, "%s", err);
    /* A UTF-16 file (PowerShell's `>` writes one) is no line of JSON Lines,
     * which is UTF-8 (RFC 8259 §8.1): every line would be an error line,
     * the NUL after its last '\n' one more. The file's fault: refused. */
    const uint8_t *u = (const uint8_t *)in->buf;
    if (in->len >= 2 && ((u[0] == 0xFF && u[1] == 0xFE) || (u[0] == 0xFE && u[1] == 0xFF)))
        return cis2_cli_usage_error(
            cmd, "%s: UTF-16 text (a UTF-16 byte order mark): save it as UTF-8", path);
    if (split_lines(in->buf, in->len, &in->L, &in->n) || index_ids(in->L, in->n))
        return cis2_cli_usage_error(cmd, "%s: out of memory", path);
    return 0;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

int cis2_batch_input_request(const cis2_batch_input *in, int i, const cis2_model *m,
                             const cis2_request_defaults *df, cis2_request *rq, char *err)
{
    const cis2_in_line *l = &in->L[i];
    memset(rq, 0, sizeof *rq);
    if (l->len > CIS2_BATCH_MAX_LINE)
        snprintf(err, CIS2_ERR_LEN, "the line is %zu bytes, more than the %u a line may have",
                 l->len, CIS2_BATCH_MAX_LINE);
    else if (is_blank(l->text, l->len))
        snprintf(err, CIS2_ERR_LEN, "empty line (expected a JSON object)");
    else if (l->dup_of) snprintf(err, CIS2_ERR_LEN, "duplicate id (first at line %d)", l->dup_of);
    else return cis2_request_parse(l->text, l->len, m, df, rq, err);
    return 1;
}

void cis2_batch_input_free(cis2_batch_input *in)
{
    for (int i = 0; in->L && i < in->n; i++) free(in->L[i].id);
    free(in->L);
    free(in->buf);
    memset(in, 0, sizeof *in);
}

/* Every "DIR/" of --model DIR cut out of the no-template reason that each
 * "messages" line's error carries ("DIR/tokenizer_config.json: cannot
 * open"): the line names the model's file, not where the model is, so that
 * its bytes, and a resume's or verify-batch's check of them, do not depend on
 * how --model was spelt or where it is mounted (a kill, then a resume with
 * ./m for m; an auditor's copy of the model). */
static void drop_model_dir(char *s, const char *dir)
{
    size_t dl = strlen(dir);
    for (char *at = s; dl && (at = strstr(at, dir)) != NULL;) {
        /* a path starts the message or follows a blank: "m/" inside a
         * word (or a quoted template) is not the directory */
        if (at[dl] == '/' && (at == s || at[-1] == ' '))
            memmove(at, at + dl + 1, strlen(at + dl + 1) + 1);
        else at++;
    }
}

int cis2_batch_chat(const char *cmd, const char *model, const char *chat_format,
                    cis2_chat_template **tpl, char *chat_err)
{
    if (cis2_cli_chat_template(cmd, model, chat_format, tpl, chat_err)) return 1;
    drop_model_dir(chat_err, model);
    return 0;
}

int cis2_batch_gen_ok(const cis2_model *m, const int32_t *gen, int n_gen, int max_tokens,
                      int stop_at_eos)
{
    const cis2_config *c = cis2_model_config(m);
    int eos_at = -1;
    for (int k = 0; k < n_gen && eos_at < 0; k++)
        for (int q = 0; q < c->n_eos && eos_at < 0; q++)
            if (gen[k] == c->eos_ids[q]) eos_at = k;
    /* §3.4: exactly max_tokens ids, or with stop_at_eos up to the first eos */
    return stop_at_eos
               ? n_gen <= max_tokens && (eos_at < 0 ? n_gen == max_tokens : eos_at == n_gen - 1)
               : n_gen == max_tokens;
}
