/* The in-order pipeline of `cis2 batch` and `cis2 verify-batch` over the
 * multi-sequence API: keep up to B sequences decoding on one engine (a new
 * one joins as soon as one finishes), and hand results back in input order
 * whatever order they finish in. Each sequence's ids and digests are its own
 * (cis2_seq_submit), so the batch size changes speed, never a byte. Also
 * draws the progress line (items, tokens/s, ETA) when asked. */
#include "cli/batch.h"
#include <stdlib.h>
#include <string.h>

enum { WAITING = 0, RUNNING, READY };
typedef struct {
    cis2_pipe_job job;
    int seq, state, ran;
    cis2_result r;
} entry;

static void count_token(void *ctx, int step, const float *logits, int vocab, int32_t chosen)
{
    ((cis2_pipe_stats *)ctx)->tokens++;
}

static void fmt_eta(char *out, size_t cap, double s)
{
    if (s < 0) {
        snprintf(out, cap, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, cap, "%ld:%02ld", t / 60, t % 60);
}

static void draw(cis2_pipe_stats *st, int final)
{
    if (!st->progress) return;
    double now = cis2_now_ms();
    if (!final && now - st->drawn < 250) return;
    st->drawn = now;
    double el = (now - st->t0) / 1000;
    double tps = el > 0 ? (double)st->tokens / el : 0;
    double eta = st->done > 0 ? el / (double)st->done * (double)(st->total - st->done) : -1;
    char e[32];
    fmt_eta(e, sizeof e, final ? 0 : eta);
    fprintf(stderr, "\rcis2 %s: %ld/%ld items, %.1f tok/s, ETA %s   ", st->cmd, st->done, st->total,
            tps, e);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

int cis2_pipe_run(cis2_engine *e, int batch, cis2_pipe_next_fn next, cis2_pipe_done_fn done,
                  void (*drop)(void *ctx, cis2_pipe_job *job), void *ctx, cis2_pipe_stats *st)
{
    /* jobs in input order, a ring; results wait here for the ones before
     * them, so its size bounds what one slow sequence can hold back */
    int cap = 4 * batch + 64, head = 0, count = 0, running = 0, end = 0, rc = 0;
    entry *w = calloc((size_t)cap, sizeof *w);
    char err[CIS2_ERR_LEN];
    if (!w) return cis2_cli_usage_error(st->cmd, "out of memory") != 0;
    st->t0 = cis2_now_ms();
    st->drawn = st->t0 - 1000; /* draw 0/N at once */
    st->done = st->tokens = 0;
    draw(st, 0);
    while (!rc) {
        while (!end && running < batch && count < cap) { /* fill the free slots */
            entry *x = &w[(head + count) % cap];
            memset(x, 0, sizeof *x);
            int k = next(ctx, &x->job);
            if (k <= 0) {
                end = 1;
                rc = k < 0;
                break;
            }
            count++;
            x->state = READY;
            if (x->job.n_ids == 0) continue;
            x->job.g.on_step = count_token;
            x->job.g.ctx = st;
            if (cis2_seq_submit_sampled(e, x->job.ids, x->job.n_ids, &x->job.g, &x->job.smp,
                                        &x->seq, err)) {
                rc = cis2_cli_usage_error(st->cmd, "%s", err) != 0;
                x->state = WAITING;
                break;
            }
            x->state = RUNNING;
            x->ran = 1;
            running++;
        }
        while (!rc && count > 0 && w[head].state == READY) { /* hand back in order */
            entry *x = &w[head];
            rc = done(ctx, &x->job, x->ran ? &x->r : NULL) != 0;
            cis2_result_free(&x->r);
            x->state = WAITING;
            head = (head + 1) % cap;
            count--;
            st->done++;
            draw(st, 0);
        }
        if (rc || (end && count == 0)) break;
        if (running == 0) continue;
        if (cis2_engine_step(e, err)) {
            rc = cis2_cli_usage_error(st->cmd, "%s", err) != 0;
            break;
        }
        for (int i = 0; i < count; i++) {
            entry *x = &w[(head + i) % cap];
            if (x->state != RUNNING || !cis2_seq_done(e, x->seq)) continue;
            if (cis2_seq_take(e, x->seq, &x->r, err)) {
                rc = cis2_cli_usage_error(st->cmd, "%s", err) != 0;
                break;
            }
            x->state = READY;
            running--;
        }
    }
    /* stopped early: cancel what still decodes, free what was not handed back */
    for (int i = 0; i < count; i++) {
        entry *x = &w[(head + i) % cap];
        if (x->state == RUNNING) cis2_seq_cancel(e, x->seq);
        cis2_result_free(&x->r);
        if (drop) drop(ctx, &x->job);
    }
    if (!rc) draw(st, 1);
    else if (st->progress) fputc('\n', stderr);
    free(w);
    return rc;
}
