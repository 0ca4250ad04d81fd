/* `cis2 batch`: a JSONL file of prompts through one engine, B sequences at a
 * time, one result (or error) object per input line appended to --out in
 * input order, one write and one fsync per line, so that a killed run
 * resumes where it stopped and the finished file is byte-identical to an
 * uninterrupted one (docs/scale.md). --shard i/N takes the lines whose
 * 0-based index is i mod N, for job arrays; `cis2 merge` joins the shards. */
#include "cli/batch.h"
#include "engine/sample.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int line, slot; /* slot: its place in the retry list (--retry-errors) */
    cis2_request rq;
    char *msg; /* why the line cannot run, or NULL */
} job_user;

typedef struct {
    const char *in_path, *out_path;
    cis2_batch_input in;
    cis2_in_line *L;              /* in.L */
    int n, shard_i, shard_n, cur; /* cur: the next 0-based line to run, n: in.n */
    const cis2_model *m;
    cis2_request_defaults df;
    int fd;
    uint64_t size;               /* bytes of --out */
    long written, errors, nans;  /* nans: results whose logits held a NaN */
    long kill_after, tear_after; /* test hooks (docs/scale.md), -1 = off */
    /* --retry-errors: the error lines already in --out (0-based input lines,
     * in order) run again first; their new lines wait in fresh[] until --out
     * is rewritten with them in place */
    int retry, retrying, *redo, n_redo, redo_at;
    char **fresh;
    size_t *fresh_len;
} batch_ctx;

/* ------------------------------------------------------------ the output */
static int same_id(const char *a, size_t al, const char *b, size_t bl)
{
    if (!a || !b) return !a && !b;
    return al == bl && memcmp(a, b, al) == 0;
}

static void fsync_dir(const char *path)
{
    char *d = strdup(path);
    if (!d) return;
    char *slash = strrchr(d, '/');
    if (slash == d) slash[1] = 0;
    else if (slash) *slash = 0;
    int fd = open(slash ? d : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(d);
}

/* Open --out for appending (a regular file or nothing, never followed
 * through a link), locked against a second writer. *created says whether
 * this call made it. */
static int open_out(batch_ctx *b, int *created)
{
    char err[CIS2_ERR_LEN];
    const char *p = b->out_path;
    if (cis2_check_output_path(p, err)) return cis2_cli_usage_error("batch", "%s", err);
    int fl = O_RDWR | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    b->fd = open(p, fl | O_CREAT | O_EXCL, 0644);
    *created = b->fd >= 0;
    if (b->fd < 0 && errno == EEXIST) b->fd = open(p, fl);
    if (b->fd < 0) return cis2_cli_usage_error("batch", "%s: cannot write: %s", p, strerror(errno));
    struct stat so, si;
    if (fstat(b->fd, &so) != 0 || !S_ISREG(so.st_mode))
        return cis2_cli_usage_error("batch", "%s: not a regular file", p);
    if (stat(b->in_path, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return cis2_cli_usage_error("batch", "%s: --out is the --in file", p);
    if (flock(b->fd, LOCK_EX | LOCK_NB) != 0) {
        *created = 0; /* not ours to remove */
        return cis2_cli_usage_error(
            "batch", "%s: %s", p,
            errno == EWOULDBLOCK ? "another cis2 batch is writing it (locked)" : strerror(errno));
    }
    if (*created) fsync_dir(p);
    return 0;
}

/* Resume: --out must hold the first lines of this shard, in input order (as
 * they are written), and the run goes on from the next one. A last line
 * without its '\n' (a write cut short by a kill or a crash) is cut off;
 * anything else is refused: a line of another input, of another shard, or
 * out of order (every line of shard 0/4 is one of shard 0/2's, so a file
 * written with another split passes every other check). */
static int scan_out(batch_ctx *b, long *n_done)
{
    char err[CIS2_ERR_LEN];
    cis2_jsonl r;
    cis2_jsonl_init(&r, b->fd, b->out_path);
    const char *line;
    size_t len;
    int complete, k, rc = 2, want = b->shard_i + 1; /* the next line of the shard, 1-based */
    *n_done = 0;
#define REFUSE(...)                                                                                \
    do {                                                                                           \
        char m_[CIS2_ERR_LEN];                                                                     \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        cis2_cli_usage_error("batch", "%s: line %ld: %s", b->out_path, r.lineno, m_);              \
        goto out;                                                                                  \
    } while (0)
    while ((k = cis2_jsonl_next(&r, &line, &len, &complete, err)) == 1) {
        if (!complete) {
            /* Only what a cut-short append leaves is cut off: a prefix of a
             * result line, which always starts {"line":, or NUL bytes (a
             * power cut can leave an unsynced append's new size with no
             * data). Anything else (a JSON file without its final '\n',
             * say) is not ours to shorten. */
            static const char head[] = "{\"line\":";
            size_t hl = len < sizeof head - 1 ? len : sizeof head - 1, z = 0;
            while (line && z < len && line[z] == 0) z++;
            if (!line || (z < len && memcmp(line, head, hl) != 0))
                REFUSE("not a cis2 batch result (an incomplete last line that does not start "
                       "like one); refusing to append to it");
            if (ftruncate(b->fd, (off_t)r.good) != 0)
                REFUSE("cannot cut off the incomplete last line: %s", strerror(errno));
            cis2_cli_note("batch",
                          "%s: dropped an incomplete last line (%zu bytes, an interrupted "
                          "write); resuming",
                          b->out_path, len);
            break;
        }
        cis2_line_head h;
        if (!line) REFUSE("a line of %zu bytes is not a cis2 batch result", len);
        if (cis2_line_head_parse(line, len, &h, err))
            REFUSE("not a cis2 batch result (%s); refusing to append to it", err);
        int bad = 1;
        if (h.lines != b->n)
            snprintf(err, sizeof err,
                     "a result for an input of %d lines, but %s has %d (use another --out)",
                     h.lines, b->in_path, b->n);
        else if (h.line != want)
            snprintf(err, sizeof err,
                     "input line %d, where input line %d was expected (the lines of a shard are "
                     "written in input order: a file of another --shard?)",
                     h.line, want);
        else if (!(b->retry && h.is_error) && /* a fixed line may have a readable id now */
                 !same_id(h.id, h.id_len, b->L[h.line - 1].id, b->L[h.line - 1].id_len))
            snprintf(err, sizeof err,
                     "the result's id differs from input line %d's: the input changed (use "
                     "another --out)",
                     h.line);
        else bad = 0;
        if (!bad && b->retry && h.is_error) {
            int *t = realloc(b->redo, ((size_t)b->n_redo + 1) * sizeof *t);
            if (!t) {
                cis2_line_head_free(&h);
                REFUSE("out of memory");
            }
            b->redo = t;
            b->redo[b->n_redo++] = h.line - 1;
        }
        if (!bad) {
            want += b->shard_n;
            b->errors += h.is_error;
            ++*n_done;
        }
        cis2_line_head_free(&h);
        if (bad) REFUSE("%s", err);
    }
    if (k < 0) {
        cis2_cli_usage_error("batch", "%s", err);
        goto out;
    }
    struct stat sb;
    if (fstat(b->fd, &sb) != 0) {
        cis2_cli_usage_error("batch", "%s: cannot stat: %s", b->out_path, strerror(errno));
        goto out;
    }
    b->size = (uint64_t)sb.st_size;
    b->cur = want - 1;
    rc = 0;
out:
#undef REFUSE
    cis2_jsonl_free(&r);
    return rc;
}

/* Whether --out is still the file this run opened: removed or replaced by
 * another (rm, a rename over it), the lines written to the open one are in
 * no file, and a run that went on would say done. */
static int out_is_ours(const batch_ctx *b)
{
    struct stat so, sp;
    return fstat(b->fd, &so) == 0 && so.st_nlink > 0 && stat(b->out_path, &sp) == 0 &&
           sp.st_dev == so.st_dev && sp.st_ino == so.st_ino;
}

/* 2 (one line) when --out is no longer this run's file. */
static int out_still_there(const batch_ctx *b)
{
    if (out_is_ours(b)) return 0;
    return cis2_cli_usage_error("batch",
                                "%s: removed or replaced while this run was writing it (the "
                                "lines written are in no file); rerun to resume",
                                b->out_path);
}

/* One line, one write (O_APPEND), then fdatasync: a line is either wholly
 * in the file or, after a crash, a torn tail that the next run cuts off. */
static int append(batch_ctx *b, const char *line, size_t len)
{
    if (out_still_there(b)) return 2;
    if (b->tear_after >= 0 && b->written == b->tear_after) { /* test hook */
        if (write(b->fd, line, len / 2) < 0) return 1;
        raise(SIGKILL);
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(b->fd, line + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            if (ftruncate(b->fd, (off_t)b->size) != 0) { /* leave no torn line behind */
            }
            return cis2_cli_usage_error("batch", "%s: write failed: %s", b->out_path, strerror(e));
        }
        done += (size_t)w;
    }
    if (fdatasync(b->fd) != 0 && errno != EINVAL)
        return cis2_cli_usage_error("batch", "%s: fsync failed: %s", b->out_path, strerror(errno));
    b->size += len;
    b->written++;
    if (b->kill_after >= 0 && b->written == b->kill_after) raise(SIGKILL); /* test hook */
    return 0;
}

/* ------------------------------------------------------------ the pipeline */
/* Input line i (0-based) as a request: 0, 1 with the error line's message in
 * err, -1 when memory ran out. */
static int line_request(const batch_ctx *b, int i, cis2_request *rq, char *err)
{
    return cis2_batch_input_request(&b->in, i, b->m, &b->df, rq, err);
}

/* Whether the result line d (already in --out) is the one this run would
 * write for its input line, as far as can be told without decoding it again:
 * the same model (the receipt's artifact hashes, §14.3), the same prompt ids,
 * a number of generated ids that this line's max_tokens and stop_at_eos allow,
 * or, for an error line, the same error. 0, 1 with why not in err, -1 when
 * memory ran out. */
static int same_config(const batch_ctx *b, const json_doc *d, const cis2_line_head *h, char *err)
{
    cis2_request rq = { 0 };
    char why[CIS2_ERR_LEN] = "";
    int rc = line_request(b, h->line - 1, &rq, why);
    if (rc < 0) return -1;
    uint32_t v;
    if (h->is_error) {
        v = json_get(d, 0, "error", NULL);
        if (rc == 0 || d->nodes[v].type != JSON_STRING || !json_str_eq(d, v, why)) {
            snprintf(err, CIS2_ERR_LEN,
                     "an error line for input line %d, which this run would not write (%s); the "
                     "input, the model or the options changed (use another --out, or "
                     "--retry-errors after fixing the input)",
                     h->line, rc == 0 ? "the line runs now" : "its error differs");
            rc = 1;
        } else rc = 0;
        cis2_request_free(&rq);
        return rc;
    }
    const cis2_config *c = cis2_model_config(b->m);
    const cis2_digests *dg = cis2_model_digests(b->m);
    uint32_t p = json_get(d, 0, "prompt_token_ids", NULL),
             g = json_get(d, 0, "generated_token_ids", NULL), r = json_get(d, 0, "receipt", NULL);
    char *rt = NULL;
    size_t rl = 0;
    if (rc) {
        snprintf(err, CIS2_ERR_LEN,
                 "a result for input line %d, which this run would make an error line (%s): the "
                 "input, the model or the options changed (use another --out)",
                 h->line, why);
        goto out;
    }
    if (p == JSON_NONE || g == JSON_NONE || r == JSON_NONE || d->nodes[p].type != JSON_ARRAY ||
        d->nodes[g].type != JSON_ARRAY || d->nodes[r].type != JSON_STRING) {
        snprintf(err, CIS2_ERR_LEN,
                 "not a cis2 batch result (no prompt_token_ids, "
                 "generated_token_ids or receipt); refusing to append to it");
        rc = 1;
        goto out;
    }
    if (!(rt = json_str_dup(d, r, &rl))) {
        rc = -1;
        goto out;
    }
    char want[256], *w = want;
    const uint8_t *hs[3] = { dg->weights_sha256, dg->config_sha256, dg->tokenizer_sha256 };
    static const char *const hn[3] = { "weights", "config", "tokenizer" };
    for (int k = 0; k < 3; k++) {
        w += sprintf(w, "\n%s-sha256 ", hn[k]);
        cis2_hex(hs[k], 32, w);
        w += 64;
    }
    *w++ = '\n';
    if (!memmem(rt, rl, want, (size_t)(w - want))) {
        snprintf(err, CIS2_ERR_LEN,
                 "its receipt names other model files than --model's (weights, config or "
                 "tokenizer sha256): a result of another model (use another --out)");
        rc = 1;
        goto out;
    }
    int same = d->nodes[p].count == (uint32_t)rq.n_ids, n_gen = (int)d->nodes[g].count, eos_at = -1;
    uint32_t e = d->nodes[p].first;
    for (int k = 0; same && k < rq.n_ids; k++, e = d->nodes[e].next) {
        int64_t x;
        same = json_num_i64(d, e, &x) == 0 && x == rq.ids[k];
    }
    e = d->nodes[g].first;
    for (int k = 0; k < n_gen; k++, e = d->nodes[e].next) {
        int64_t x;
        if (json_num_i64(d, e, &x) == 0)
            for (int q = 0; q < c->n_eos && eos_at < 0; q++)
                if (x == c->eos_ids[q]) eos_at = k;
    }
    /* §3.4: exactly max_tokens ids, or with stop_at_eos up to the first eos */
    int len_ok = rq.stop_at_eos ? n_gen <= rq.max_tokens &&
                                      (eos_at < 0 ? n_gen == rq.max_tokens : eos_at == n_gen - 1)
                                : n_gen == rq.max_tokens;
    if (!same)
        snprintf(err, CIS2_ERR_LEN,
                 "its prompt_token_ids are not what input line %d gives now: the input or "
                 "--chat-format changed (use another --out)",
                 h->line);
    else if (!len_ok)
        snprintf(err, CIS2_ERR_LEN,
                 "%d generated ids, where input line %d asks for max_tokens %d with stop_at_eos "
                 "%s: -n or --stop-at-eos changed (use another --out)",
                 n_gen, h->line, rq.max_tokens, rq.stop_at_eos ? "on" : "off");
    /* the sampler and seed this line gives now (docs/sampling.md §6: a
     * sampled receipt ends with them; a greedy one is v1) */
    char tail[256];
    int smp_ok;
    if (rq.smp.temperature > 0.0f) {
        char sl[160];
        smp_format(&rq.smp, sl, sizeof sl);
        int tl = snprintf(tail, sizeof tail, "\nsampler %s\nseed %llu\n", sl,
                          (unsigned long long)rq.smp.seed);
        smp_ok = rl > 26 && memcmp(rt, "CIS-2-RECEIPT v1+sampling\n", 26) == 0 &&
                 rl >= (size_t)tl && memcmp(rt + rl - tl, tail, (size_t)tl) == 0;
    } else smp_ok = rl > 17 && memcmp(rt, "CIS-2-RECEIPT v1\n", 17) == 0;
    if (same && len_ok && !smp_ok)
        snprintf(err, CIS2_ERR_LEN,
                 "its receipt's sampler or seed is not what input line %d gives now: its "
                 "temperature, top_k, top_p, min_p or seed changed (use another --out)",
                 h->line);
    rc = !same || !len_ok || !smp_ok;
out:
    free(rt);
    cis2_request_free(&rq);
    return rc;
}

/* Every line already in --out (scan_out found them in place) checked with
 * same_config, once the model is loaded: a resume must not append to lines
 * of another model, prompt, -n or --stop-at-eos. 2 when one is refused. */
static int check_done(batch_ctx *b)
{
    char err[CIS2_ERR_LEN];
    cis2_jsonl r;
    if (lseek(b->fd, 0, SEEK_SET) != 0) {
        return cis2_cli_usage_error("batch", "%s: cannot seek: %s", b->out_path, strerror(errno));
    }
    cis2_jsonl_init(&r, b->fd, b->out_path);
    const char *line;
    size_t len;
    int complete, k, rc = 0;
    while (rc == 0 && (k = cis2_jsonl_next(&r, &line, &len, &complete, err)) == 1) {
        json_doc d;
        cis2_line_head h;
        if (!line || !complete || cis2_line_head_read(line, len, &d, &h, err)) {
            rc = cis2_cli_usage_error("batch", "%s: line %ld: changed while being read",
                                      b->out_path, r.lineno);
            break;
        }
        int s = b->retry && h.is_error ? 0 : same_config(b, &d, &h, err);
        if (s < 0) rc = cis2_cli_usage_error("batch", "%s: out of memory", b->out_path);
        else if (s)
            rc = cis2_cli_usage_error("batch", "%s: line %ld: %s", b->out_path, r.lineno, err);
        json_free(&d);
        cis2_line_head_free(&h);
    }
    if (rc == 0 && k < 0) rc = cis2_cli_usage_error("batch", "%s", err);
    cis2_jsonl_free(&r);
    return rc;
}

static int next_job(void *ctx, cis2_pipe_job *job)
{
    batch_ctx *b = ctx;
    int i;
    if (b->retrying) {
        if (b->redo_at >= b->n_redo) return 0;
        i = b->redo[b->redo_at];
    } else {
        if (b->cur >= b->n) return 0;
        i = b->cur;
    }
    job_user *u = calloc(1, sizeof *u);
    if (!u) {
        cis2_cli_usage_error("batch", "out of memory");
        return -1;
    }
    u->line = i + 1;
    if (b->retrying) u->slot = b->redo_at++;
    else b->cur += b->shard_n;
    char err[CIS2_ERR_LEN] = "";
    int rc = line_request(b, i, &u->rq, err);
    if (rc == 0) {
        job->ids = u->rq.ids;
        job->n_ids = u->rq.n_ids;
        job->g.n_gen = u->rq.max_tokens;
        job->g.stop_at_eos = u->rq.stop_at_eos;
        job->smp = u->rq.smp;
    }
    /* spec (docs/scale.md): an error line is only ever a fault of the line,
     * which a rerun finds again; memory running out stops the run instead,
     * and the rerun retries the line */
    if (rc < 0) {
        cis2_cli_usage_error("batch", "%s: line %d: out of memory", b->in_path, u->line);
        cis2_request_free(&u->rq);
        free(u);
        return -1;
    }
    if (err[0] && !(u->msg = strdup(err))) {
        cis2_request_free(&u->rq);
        free(u);
        cis2_cli_usage_error("batch", "out of memory");
        return -1;
    }
    job->user = u;
    return 1;
}

static void drop_job(void *ctx, cis2_pipe_job *job)
{
    job_user *u = job->user;
    cis2_request_free(&u->rq);
    free(u->msg);
    free(u);
}

static int job_done(void *ctx, cis2_pipe_job *job, cis2_result *r)
{
    batch_ctx *b = ctx;
    job_user *u = job->user;
    const cis2_in_line *l = &b->L[u->line - 1];
    size_t len = 0;
    if (!u->msg) cis2_batch_nan_note("batch", &b->nans, u->line, l->id, l->id_len, r);
    char *line = u->msg ? cis2_result_error_line(u->line, b->n, l->id, l->id_len, u->msg, &len)
                        : cis2_result_line(b->m, u->line, b->n, l->id, l->id_len, r,
                                           (const uint8_t *)u->rq.prompt, u->rq.prompt_len,
                                           &u->rq.smp, &len);
    int slot = u->slot;
    b->errors += u->msg != NULL;
    drop_job(ctx, job);
    if (!line) return cis2_cli_usage_error("batch", "out of memory");
    if (b->retrying) { /* kept for rewrite_out */
        b->fresh[slot] = line;
        b->fresh_len[slot] = len;
        return 0;
    }
    int rc = append(b, line, len);
    free(line);
    return rc;
}

/* --retry-errors, after the retried lines ran: --out with each one's new line
 * in place of its error line, written whole and renamed into place (a kill
 * before the rename leaves the old file, and a rerun retries again), then
 * reopened, locked and scanned as any resume. --out is the shard's first
 * lines in order (scan_out), so input line L is its line (L - i) / N. */
static int rewrite_out(batch_ctx *b, long *n_done)
{
    char err[CIS2_ERR_LEN], *old = NULL, *nb = NULL;
    size_t olen = 0, nlen = 0, cap = 0;
    int rc = 2, created = 0;
    if (lseek(b->fd, 0, SEEK_SET) != 0 ||
        cis2_read_fd_max(b->fd, SIZE_MAX, b->out_path, &old, &olen, err)) {
        cis2_cli_usage_error("batch", "%s", err);
        goto out;
    }
    cap = olen;
    for (int k = 0; k < b->n_redo; k++) cap += b->fresh_len[k];
    if (!(nb = malloc(cap + 1))) {
        cis2_cli_usage_error("batch", "%s: out of memory", b->out_path);
        goto out;
    }
    int k = 0;
    for (size_t p = 0, j = 0; p < olen; j++) {
        const char *nl = memchr(old + p, '\n', olen - p);
        size_t e = nl ? (size_t)(nl - old) + 1 : olen;
        const char *src = old + p;
        size_t len = e - p;
        if (k < b->n_redo && (size_t)((b->redo[k] - b->shard_i) / b->shard_n) == j) {
            src = b->fresh[k];
            len = b->fresh_len[k++];
        }
        memcpy(nb + nlen, src, len);
        nlen += len;
        p = e;
    }
    if (cis2_write_file_atomic(b->out_path, nb, nlen, err)) {
        cis2_cli_usage_error("batch", "%s", err);
        goto out;
    }
    close(b->fd);
    b->fd = -1;
    b->retry = 0;
    b->errors = 0;
    rc = open_out(b, &created) || scan_out(b, n_done) ? 2 : 0;
out:
    free(old);
    free(nb);
    return rc;
}

/* ------------------------------------------------------------- the command */
static long env_long(const char *name)
{
    const char *v = getenv(name);
    int x;
    return v && cis2_cli_int(v, 0, 2000000000, &x) == 0 ? x : -1;
}

int cis2_cmd_batch(int argc, char **argv)
{
    const char *model = NULL, *in = NULL, *out = NULL, *shard = NULL, *backend = NULL, *isa = NULL,
               *chat_format = NULL;
    int batch = 8, n = 16, threads = 0, stop = 0, retry = 0;
    const cis2_opt opts[] = {
        { "--model", NULL, CIS2_OPT_PATH, &model, 0, 0 },
        { "--in", NULL, CIS2_OPT_PATH, &in, 0, 0 },
        { "--out", NULL, CIS2_OPT_PATH, &out, 0, 0 },
        { "--batch", NULL, CIS2_OPT_INT, &batch, 1, CIS2_BATCH_MAX_B },
        { "--shard", NULL, CIS2_OPT_STR, &shard, 0, 0 },
        { "--n", "-n", CIS2_OPT_INT, &n, 1, CIS2_BATCH_MAX_TOKENS },
        { "--stop-at-eos", NULL, CIS2_OPT_FLAG, &stop, 0, 0 },
        { "--backend", NULL, CIS2_OPT_STR, &backend, 0, 0 },
        { "--isa", NULL, CIS2_OPT_STR, &isa, 0, 0 },
        { "--threads", NULL, CIS2_OPT_INT, &threads, 1, 1024 },
        { "--chat-format", NULL, CIS2_OPT_STR, &chat_format, 0, 0 },
        { "--retry-errors", NULL, CIS2_OPT_FLAG, &retry, 0, 0 },
    };
    if (cis2_cli_parse("batch", argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, NULL, 0))
        return 2;
    if (!model || !in || !out)
        return cis2_cli_usage_error("batch", "--model DIR, --in FILE and --out FILE are required");
    batch_ctx b = { 0 };
    b.in_path = in;
    b.out_path = out;
    b.shard_n = 1;
    b.fd = -1;
    b.retry = retry;
    b.df.max_tokens = n;
    b.df.stop_at_eos = stop;
    b.kill_after = env_long("CIS2_BATCH_KILL_AFTER");
    b.tear_after = env_long("CIS2_BATCH_TEAR_AFTER");
    /* "-" is no standard output here: the file is appended to, locked,
     * cut back and resumed; a file named "-" made silently would be a guess */
    if (!strcmp(out, "-"))
        return cis2_cli_usage_error("batch", "--out -: the results file is appended to and "
                                             "resumed, which standard output cannot be; give a "
                                             "file (./- for one named -)");
    if (shard && cis2_cli_shard("batch", shard, &b.shard_i, &b.shard_n)) return 2;
    cis2_engine_opts eo;
    if (cis2_cli_engine_opts("batch", backend, isa, threads, &eo)) return 2;
    eo.max_seqs = batch;

    int rc = 2, created = 0;
    cis2_model *m = NULL;
    cis2_engine *e = NULL;
    /* "messages" lines: --chat-format, else the model's template; without
     * one, only such lines fail (with the reason) */
    cis2_chat_template *tpl = NULL;
    char chat_err[CIS2_ERR_LEN];
    if (cis2_batch_chat("batch", model, chat_format, &tpl, chat_err)) goto out;
    b.df.chat = tpl;
    b.df.chat_err = chat_err;
    if (cis2_batch_input_read("batch", in, &b.in)) goto out;
    b.L = b.in.L;
    b.n = b.in.n;
    long n_done = 0;
    if (open_out(&b, &created) || scan_out(&b, &n_done)) goto out;
    if (cis2_cli_open("batch", model, &eo, &m, &e)) goto out;
    b.m = m;
    if (n_done && check_done(&b)) goto out;
    const cis2_pipe_stats st0 = { .cmd = "batch", .progress = isatty(2) };
    cis2_pipe_stats st = st0;
    if (b.n_redo) {
        b.fresh = calloc((size_t)b.n_redo, sizeof *b.fresh);
        b.fresh_len = calloc((size_t)b.n_redo, sizeof *b.fresh_len);
        if (!b.fresh || !b.fresh_len) {
            cis2_cli_usage_error("batch", "out of memory");
            goto out;
        }
        st.total = b.n_redo;
        b.retrying = 1;
        if (st.progress) cis2_cli_note("batch", "%s: retrying %d error line(s)", out, b.n_redo);
        if (cis2_pipe_run(e, batch, next_job, job_done, drop_job, &b, &st)) goto out;
        b.retrying = 0;
        if (rewrite_out(&b, &n_done)) goto out;
        st = st0; /* the resume counts afresh */
    }
    st.total = (b.n - b.shard_i + b.shard_n - 1) / b.shard_n - n_done;
    if (st.progress && n_done)
        cis2_cli_note("batch", "%s: %ld line(s) already done, resuming", out, n_done);
    int stopped = cis2_pipe_run(e, batch, next_job, job_done, drop_job, &b, &st);
    cis2_batch_nan_total("batch", b.nans);
    if (stopped || out_still_there(&b)) goto out;
    rc = 0;
    if (b.errors) {
        cis2_cli_note("batch", "%ld line(s) failed: their error objects are in %s", b.errors, out);
        rc = 1;
    }
out:
    if (rc == 2 && created && b.fd >= 0 && b.size == 0 && out_is_ours(&b))
        unlink(out); /* made for nothing (and not replaced by another's since) */
    if (b.fd >= 0) close(b.fd);
    cis2_engine_free(e);
    cis2_model_free(m);
    cis2_chat_template_free(tpl);
    for (int k = 0; b.fresh && k < b.n_redo; k++) free(b.fresh[k]);
    free(b.fresh);
    free(b.fresh_len);
    free(b.redo);
    cis2_batch_input_free(&b.in);
    return rc;
}
