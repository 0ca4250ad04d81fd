/* The request deadline of `cis2 serve` (docs/serve.md, Limits). libmicrohttpd
 * bounds only the time a connection is silent (--timeout), so a client that
 * sends one header line every few seconds keeps its connection for as long as
 * it likes, and enough such clients hold every connection slot ("slow
 * headers"). Every open connection is registered here; while it waits for a
 * request — from its accept, and again after each response on a kept-alive
 * connection — it has a deadline, and a sweep thread shuts down the socket of
 * one whose request has not completely arrived by then (RFC 9112 §9.5 lets a
 * server close a connection at any time): the connection's own thread then
 * reads the end of the stream and closes it. Sockets and a clock only: no
 * libmicrohttpd here. */
#include "cli/serve.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#define SWEEP_MS 100 /* how late past its deadline a connection may be closed */

struct serve_conn {
    int fd;
    int shut;        /* closed by the sweep: never armed again */
    double deadline; /* cis2_now_ms; 0: none (a request is being answered) */
    serve_conn *prev, *next;
};

struct serve_guard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int stop;
    double timeout_ms;
    serve_conn *head;
    atomic_llong timed_out;
};

static void *sweep(void *arg)
{
    serve_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = cis2_now_ms();
        for (serve_conn *c = g->head; c; c = c->next) {
            if (c->shut || c->deadline <= 0 || now < c->deadline) continue;
            /* Under the lock: serve_guard_remove, which the connection's owner
             * calls before it closes the descriptor, waits for this, so the
             * number is never one the kernel has given to another socket. */
            shutdown(c->fd, SHUT_RDWR);
            c->shut = 1;
            if (atomic_fetch_add(&g->timed_out, 1) == 0)
                cis2_cli_note("serve",
                              "closed a connection whose request had not arrived within "
                              "--request-timeout (%g s); further ones are counted in /health "
                              "(requests_timed_out), not logged",
                              g->timeout_ms / 1000);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SWEEP_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int serve_guard_new(serve_guard **out, int timeout_ms, char *err)
{
    serve_guard *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    g->timeout_ms = timeout_ms;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (pthread_create(&g->thread, NULL, sweep, g)) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        snprintf(err, CIS2_ERR_LEN, "cannot start the request-deadline thread");
        return 1;
    }
    *out = g;
    return 0;
}

serve_conn *serve_guard_add(serve_guard *g, int fd)
{
    serve_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    pthread_mutex_lock(&g->mu);
    c->deadline = cis2_now_ms() + g->timeout_ms;
    c->next = g->head;
    if (g->head) g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->mu);
    return c;
}

void serve_guard_arm(serve_guard *g, serve_conn *c)
{
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    c->deadline = cis2_now_ms() + g->timeout_ms;
    pthread_mutex_unlock(&g->mu);
}

void serve_guard_disarm(serve_guard *g, serve_conn *c)
{
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    c->deadline = 0;
    pthread_mutex_unlock(&g->mu);
}

void serve_guard_remove(serve_guard *g, serve_conn *c)
{
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (c->prev) c->prev->next = c->next;
    else g->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

long long serve_guard_timed_out(serve_guard *g) { return g ? atomic_load(&g->timed_out) : 0; }

void serve_guard_free(serve_guard *g)
{
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    for (serve_conn *c = g->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
