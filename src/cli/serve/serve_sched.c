/* The scheduler of `cis2 serve`: one decode thread owns the multi-sequence
 * engine (continuous batching: requests join the running batch between
 * steps, up to max_batch; queue_cap more may wait; beyond that submit says
 * SERVE_BUSY). HTTP threads never touch the engine: they submit jobs, wait on
 * the job's condition variable for text, and release the job when done
 * (an unfinished job is then cancelled and its slot freed at the next step).
 * Each sequence's ids and digests are those of the same prompt run alone
 * (cis2.h: cis2_seq_submit); a stop string ends a sequence with
 * cis2_seq_finish, so its receipt covers exactly the ids generated. */
#include "cli/serve.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { JOB_GEN, JOB_VERIFY };

struct serve_job {
    int kind, refs; /* refs: the HTTP side and the scheduler */
    int cancel, finished;
    pthread_cond_t cv;
    serve_job *next; /* in the queue, or in the running list */
    /* the request (GEN) */
    int32_t *prompt;
    int n_prompt, n_gen, stop_at_eos, n_stop;
    char *stop[SERVE_MAX_STOP];
    size_t stop_len[SERVE_MAX_STOP];
    cis2_sampler smp;  /* temperature 0: greedy; VERIFY: the receipt's */
    int want_lp, lp_k; /* log-probabilities (docs/sampling.md §9), lp_k alternatives */
    /* decode thread only, while running */
    int seq;
    int32_t *ids;      /* appended by on_step */
    float *lp;         /* the chosen ids' log-probabilities (want_lp), by on_step */
    cis2_logprob *top; /* lp_k alternatives per step */
    int n_ids, n_texted;
    serve_detok detok; /* ids -> text */
    cis2_sb text;
    long stop_at; /* byte offset of a matched stop string, or -1 */
    /* shared, under s->mu */
    cis2_sb pub; /* the sendable prefix of the text */
    size_t *seg; /* pub's growth step by step: segment k ends at seg[k] */
    int n_seg, cap_seg;
    int seg_taken; /* segments the HTTP side has copied */
    int n_pub;     /* ids (and their log-probabilities) the HTTP side may read */
    size_t taken;  /* = seg[seg_taken - 1] */
    /* results (read by the HTTP side once finished) */
    int finish, err_status;
    const char *err_code; /* OpenAI's error code (a literal), or NULL */
    char err[CIS2_ERR_LEN];
    cis2_result r;
    cis2_receipt rc; /* VERIFY */
    cis2_verdict v;
    int has_verdict;
};

struct serve_sched {
    cis2_engine *e;
    const cis2_model *m;
    const cis2_tokenizer *t; /* NULL: ids only */
    int max_batch, queue_cap;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the decode thread waits here for work */
    pthread_t thread;
    int started, stopping;
    serve_job *q_head, *q_tail; /* waiting for a slot */
    int n_queued;
    serve_job *running; /* decode thread only */
    int n_running;      /* read under mu by stats */
    long long completed, tokens;
};

static void job_free(serve_job *j)
{
    pthread_cond_destroy(&j->cv);
    free(j->prompt);
    free(j->ids);
    free(j->lp);
    free(j->top);
    free(j->seg);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    cis2_sb_free(&j->text);
    cis2_sb_free(&j->pub);
    cis2_result_free(&j->r);
    if (j->kind == JOB_VERIFY) { /* v may be half-filled: cancelled between its halves */
        cis2_receipt_free(&j->rc);
        cis2_verdict_free(&j->v);
    }
    free(j);
}

static void unref(serve_job *j) /* under s->mu */
{
    if (--j->refs == 0) job_free(j);
}

static void cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* Mark finished (under s->mu) and wake the HTTP side. */
static void finish_job(serve_job *j, int status, const char *err)
{
    if (err) {
        j->err_status = status;
        snprintf(j->err, sizeof j->err, "%s", err);
    }
    j->finished = 1;
    pthread_cond_broadcast(&j->cv);
}

/* A job the shutdown ends: 503 with the code a submit refused for the same
 * reason gets (serve_http.c), so that a client can tell it from an engine failure. */
static void shut_down(serve_job *j)
{
    j->err_code = "shutting_down";
    finish_job(j, 503, "the server is shutting down");
}

/* ------------------------------------------------------------ text */
static int is_eos(const cis2_config *c, int32_t id)
{
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == id) return 1;
    return 0;
}

/* New ids (and the end of the run) into text; stop strings; what may be sent. */
static size_t text_update(serve_sched *s, serve_job *j, int done)
{
    if (!s->t) return 0;
    const cis2_config *c = cis2_model_config(s->m);
    for (; j->n_texted < j->n_ids; j->n_texted++) {
        int32_t id = j->ids[j->n_texted];
        if (j->stop_at_eos && is_eos(c, id)) continue; /* the EOS ends the run, not the text */
        serve_detok_feed(&j->detok, s->t, id, &j->text);
    }
    if (done) serve_detok_feed(&j->detok, s->t, -1, &j->text);
    serve_stops st = { (const char *const *)j->stop, j->stop_len, j->n_stop };
    if (j->stop_at < 0 && j->n_stop) j->stop_at = serve_stop_find(&st, j->text.b, j->text.len);
    if (j->stop_at >= 0) return (size_t)j->stop_at;
    if (done) return j->text.len;
    return serve_sendable(&st, j->text.b, j->text.len);
}

static void on_step(void *ctx, int step, const float *logits, int vocab, int32_t chosen)
{
    serve_job *j = ctx;
    if (j->want_lp) /* §9 over this step's raw logits; the arrays have n_gen slots */
        cis2_logprobs(logits, vocab, chosen, &j->lp[j->n_ids], j->lp_k,
                      j->top + (size_t)j->n_ids * (size_t)j->lp_k);
    j->ids[j->n_ids++] = chosen; /* step == n_ids: ids has n_gen slots */
}

/* ----------------------------------------------------- decode thread */
/* A verification is a sequence like any other (cis2_receipt_verify in its two
 * halves), so that it shares the batch, and a client that goes away or a
 * shutdown stops it between two steps instead of waiting for its whole run. */
static void admit(serve_sched *s, serve_job *j) /* under s->mu */
{
    char err[CIS2_ERR_LEN];
    cis2_gen_opts g = { j->n_gen, j->stop_at_eos, on_step, j, NULL, 0 };
    const int32_t *prompt = j->prompt;
    int n_prompt = j->n_prompt, run = 1;
    if (j->kind == JOB_VERIFY) {
        if (cis2_receipt_verify_begin(s->m, &j->rc, &j->v, &g, &run, err)) {
            finish_job(j, 400, err);
            unref(j);
            return;
        }
        if (!run) { /* the verdict is complete already: a mismatch before the run */
            j->has_verdict = 1;
            s->completed++;
            finish_job(j, 0, NULL);
            unref(j);
            return;
        }
        prompt = j->rc.prompt_ids;
        n_prompt = j->rc.n_prompt;
    } else {
        j->ids = malloc((size_t)j->n_gen * sizeof *j->ids);
        j->cap_seg = j->n_gen + 1; /* a segment per step, and the flush at the end */
        j->seg = malloc((size_t)j->cap_seg * sizeof *j->seg);
        if (j->want_lp) {
            j->lp = malloc((size_t)j->n_gen * sizeof *j->lp);
            j->top = malloc((size_t)j->n_gen * (size_t)(j->lp_k ? j->lp_k : 1) * sizeof *j->top);
        }
        if (!j->ids || !j->seg || (j->want_lp && (!j->lp || !j->top))) {
            finish_job(j, 500, "out of memory");
            unref(j);
            return;
        }
    }
    if (cis2_seq_submit_sampled(s->e, prompt, n_prompt, &g, &j->smp, &j->seq, err)) {
        finish_job(j, 400, err);
        unref(j);
        return;
    }
    j->next = s->running;
    s->running = j;
    s->n_running++;
}

/* A verification's run is over: its verdict, from the second half. */
static void verify_done(serve_sched *s, serve_job *j) /* under s->mu */
{
    char err[CIS2_ERR_LEN];
    cis2_result res;
    int fail = cis2_seq_take(s->e, j->seq, &res, err);
    if (fail) cis2_seq_cancel(s->e, j->seq);
    else fail = cis2_receipt_verify_finish_sampled(&j->rc, &j->smp, &res, &j->v, err);
    j->has_verdict = !fail;
    s->completed++;
    finish_job(j, 500, fail ? err : NULL);
}

/* After a step: each running job's new text, stop strings and completion. */
static void after_step(serve_sched *s)
{
    char err[CIS2_ERR_LEN];
    for (serve_job **pp = &s->running; *pp;) {
        serve_job *j = *pp;
        int done = cis2_seq_done(s->e, j->seq);
        if (j->kind == JOB_VERIFY) {
            if (!done) {
                pp = &j->next;
                continue;
            }
            pthread_mutex_lock(&s->mu);
            verify_done(s, j);
            *pp = j->next;
            s->n_running--;
            unref(j);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        size_t send = text_update(s, j, done);
        int finish = SERVE_FINISH_LENGTH;
        int fail = 0;
        if (j->stop_at >= 0) { /* send == stop_at: the text ends before the stop string */
            finish = SERVE_FINISH_STOP;
            /* The run ends here too: the receipt covers exactly the ids generated. */
            if (!done) fail = cis2_seq_finish(s->e, j->seq, err);
            done = 1;
        }
        if (done && !fail) {
            fail = cis2_seq_take(s->e, j->seq, &j->r, err);
            if (!fail && j->r.stopped_at_eos) finish = SERVE_FINISH_STOP;
        }
        if (fail) cis2_seq_cancel(s->e, j->seq);
        pthread_mutex_lock(&s->mu);
        j->n_pub = j->n_ids;
        if (send > j->pub.len) { /* one segment per step */
            cis2_sb_put(&j->pub, j->text.b + j->pub.len, send - j->pub.len);
            if (j->n_seg == j->cap_seg) j->seg[j->n_seg - 1] = j->pub.len;
            else j->seg[j->n_seg++] = j->pub.len;
            pthread_cond_broadcast(&j->cv);
        }
        if (done) {
            j->finish = finish;
            s->completed++;
            s->tokens += j->n_ids;
            finish_job(j, 500, fail ? err : NULL);
            *pp = j->next;
            s->n_running--;
            unref(j);
        } else {
            pp = &j->next;
        }
        pthread_mutex_unlock(&s->mu);
    }
}

/* Cancelled jobs leave the queue and the batch (under s->mu). */
static void drop_cancelled(serve_sched *s)
{
    for (serve_job **pp = &s->q_head; *pp;) {
        serve_job *j = *pp;
        if (!j->cancel) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        s->n_queued--;
        finish_job(j, 499, "cancelled");
        unref(j);
    }
    s->q_tail = NULL;
    for (serve_job *j = s->q_head; j; j = j->next) s->q_tail = j;
    for (serve_job **pp = &s->running; *pp;) {
        serve_job *j = *pp;
        if (!j->cancel) {
            pp = &j->next;
            continue;
        }
        cis2_seq_cancel(s->e, j->seq);
        *pp = j->next;
        s->n_running--;
        finish_job(j, 499, "cancelled");
        unref(j);
    }
}

static serve_job *pop(serve_sched *s)
{
    serve_job *j = s->q_head;
    s->q_head = j->next;
    if (!s->q_head) s->q_tail = NULL;
    s->n_queued--;
    j->next = NULL;
    return j;
}

static void *decode_main(void *arg)
{
    serve_sched *s = arg;
    char err[CIS2_ERR_LEN];
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        drop_cancelled(s);
        /* Admission between steps, in the order of arrival. */
        while (s->q_head && s->n_running < s->max_batch) admit(s, pop(s));
        if (s->n_running == 0) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        int rc = cis2_engine_step(s->e, err);
        if (rc == 0) after_step(s);
        pthread_mutex_lock(&s->mu);
        if (rc) /* the engine failed: every running sequence ends with the error */
            while (s->running) {
                serve_job *j = s->running;
                s->running = j->next;
                s->n_running--;
                cis2_seq_cancel(s->e, j->seq);
                finish_job(j, 500, err);
                unref(j);
            }
    }
    /* Shutting down: every job ends now. */
    while (s->running) {
        serve_job *j = s->running;
        s->running = j->next;
        s->n_running--;
        cis2_seq_cancel(s->e, j->seq);
        shut_down(j);
        unref(j);
    }
    while (s->q_head) {
        serve_job *j = pop(s);
        shut_down(j);
        unref(j);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ------------------------------------------------------- public side */
int serve_sched_new(serve_sched **out, cis2_engine *e, int max_batch, int queue_cap, char *err)
{
    serve_sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    s->e = e;
    s->m = cis2_engine_model(e);
    char terr[CIS2_ERR_LEN];
    s->t = cis2_model_tokenizer(s->m, terr);
    s->max_batch = max_batch;
    s->queue_cap = queue_cap;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    int rc = pthread_create(&s->thread, NULL, decode_main, s);
    if (rc) {
        snprintf(err, CIS2_ERR_LEN, "cannot start the decode thread: %s", strerror(rc));
        serve_sched_free(s);
        return 1;
    }
    s->started = 1;
    *out = s;
    return 0;
}

void serve_sched_stop(serve_sched *s)
{
    if (!s || !s->started) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->started = 0;
}

void serve_sched_free(serve_sched *s)
{
    if (!s) return;
    serve_sched_stop(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static serve_job *job_new(int kind)
{
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->refs = 2;
    j->seq = -1;
    j->stop_at = -1;
    cond_init_monotonic(&j->cv);
    return j;
}

/* Queue j, or say why not (under no lock; takes s->mu). */
static int enqueue(serve_sched *s, serve_job *j, char *err)
{
    pthread_mutex_lock(&s->mu);
    int rc = SERVE_OK;
    if (s->stopping) {
        snprintf(err, CIS2_ERR_LEN, "the server is shutting down");
        rc = 1;
    } else if (s->n_queued + s->n_running >= s->max_batch + s->queue_cap) {
        snprintf(err, CIS2_ERR_LEN,
                 "the server is busy: %d sequences are decoding and %d requests are waiting "
                 "(the most it queues); retry later",
                 s->n_running, s->n_queued);
        rc = SERVE_BUSY;
    } else {
        if (s->q_tail) s->q_tail->next = j;
        else s->q_head = j;
        s->q_tail = j;
        s->n_queued++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int serve_sched_submit(serve_sched *s, const serve_gen_params *p, serve_job **out, char *err)
{
    *out = NULL;
    serve_job *j = job_new(JOB_GEN);
    if (!j || !(j->prompt = malloc((size_t)p->n_prompt * sizeof *j->prompt))) {
        if (j) job_free(j);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    memcpy(j->prompt, p->prompt, (size_t)p->n_prompt * sizeof *j->prompt);
    j->n_prompt = p->n_prompt;
    j->n_gen = p->n_gen;
    j->stop_at_eos = p->stop_at_eos;
    if (p->smp) j->smp = *p->smp;
    j->want_lp = p->logprobs;
    j->lp_k = p->top_logprobs;
    for (int i = 0; i < p->stops.n_stop && i < SERVE_MAX_STOP; i++) {
        j->stop[i] = malloc(p->stops.stop_len[i] + 1);
        if (!j->stop[i]) {
            job_free(j);
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            return 1;
        }
        memcpy(j->stop[i], p->stops.stop[i], p->stops.stop_len[i]);
        j->stop[i][p->stops.stop_len[i]] = 0;
        j->stop_len[i] = p->stops.stop_len[i];
        j->n_stop++;
    }
    int rc = enqueue(s, j, err);
    if (rc) {
        job_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

int serve_sched_verify(serve_sched *s, cis2_receipt *rc, const cis2_sampler *smp, serve_job **out,
                       char *err)
{
    *out = NULL;
    serve_job *j = job_new(JOB_VERIFY);
    if (!j) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    j->rc = *rc;
    memset(rc, 0, sizeof *rc);
    if (smp) j->smp = *smp;
    int r = enqueue(s, j, err);
    if (r) {
        job_free(j);
        return r;
    }
    *out = j;
    return 0;
}

int serve_job_wait(serve_sched *s, serve_job *j, int timeout_ms, cis2_sb *out)
{
    pthread_mutex_lock(&s->mu);
    if (!j->finished && j->seg_taken == j->n_seg) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (!j->finished && j->seg_taken == j->n_seg)
            if (pthread_cond_timedwait(&j->cv, &s->mu, &ts) == ETIMEDOUT) break;
    }
    if (j->seg_taken < j->n_seg) { /* the next step's text */
        size_t end = j->seg[j->seg_taken++];
        if (out) cis2_sb_put(out, j->pub.b + j->taken, end - j->taken);
        j->taken = end;
    }
    int fin = j->finished && j->seg_taken == j->n_seg;
    pthread_mutex_unlock(&s->mu);
    return fin;
}

int serve_job_error(const serve_job *j, serve_err *e)
{
    if (!j->err[0]) return 0;
    int st = j->err_status >= 400 && j->err_status < 600 ? j->err_status : 500;
    return serve_fail(e, st, NULL, j->err_code, "%s", j->err);
}

const cis2_result *serve_job_result(const serve_job *j, const char **text, size_t *len, int *finish)
{
    *text = j->pub.b ? j->pub.b : "";
    *len = j->pub.len;
    *finish = j->finish;
    return &j->r;
}

const cis2_verdict *serve_job_verdict(const serve_job *j) { return j->has_verdict ? &j->v : NULL; }

int serve_job_tokens(serve_sched *s, serve_job *j, const int32_t **ids, const float **lp,
                     const cis2_logprob **top)
{
    pthread_mutex_lock(&s->mu);
    int n = j->n_pub;
    pthread_mutex_unlock(&s->mu);
    *ids = j->ids;
    *lp = j->lp;
    *top = j->top;
    return n;
}

void serve_job_release(serve_sched *s, serve_job *j)
{
    if (!j) return;
    pthread_mutex_lock(&s->mu);
    if (!j->finished) {
        j->cancel = 1;
        pthread_cond_signal(&s->cv);
    }
    unref(j);
    pthread_mutex_unlock(&s->mu);
}

void serve_sched_stats(serve_sched *s, serve_stats *st)
{
    pthread_mutex_lock(&s->mu);
    st->max_batch = s->max_batch;
    st->running = s->n_running;
    st->queued = s->n_queued;
    st->queue_cap = s->queue_cap;
    st->completed = s->completed;
    st->tokens = s->tokens;
    pthread_mutex_unlock(&s->mu);
}
