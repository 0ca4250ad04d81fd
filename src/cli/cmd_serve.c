/* `cis2 serve --model DIR`: an OpenAI-compatible HTTP server whose every
 * completion carries a CIS-2 receipt (docs/serve.md). Opens the model and a
 * multi-sequence engine, starts the decode thread and libmicrohttpd, prints
 * one "listening on" line, and runs until SIGINT, SIGTERM or SIGHUP. */
#include "cli/serve.h"
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_KEYS 16

/* --api-key-file: one key per line; blank lines and lines starting with '#' skipped. */
static int read_keys(const char *path, char **buf, const char *keys[MAX_KEYS], int *n)
{
    char err[CIS2_ERR_LEN];
    size_t len;
    *n = 0;
    if (cis2_read_file_max(path, 65536, buf, &len, err))
        return cis2_cli_usage_error("serve", "--api-key-file: %s", err);
    /* The lines below are C strings: a NUL would end a key, and the file,
     * there (a UTF-16 "mysecretkey" without a byte order mark would be the
     * key "m"). Refused whole, as a byte order mark is. */
    const char *nul = memchr(*buf, 0, len);
    if (nul)
        return cis2_cli_usage_error("serve",
                                    "--api-key-file %s: a NUL byte at offset %zu (UTF-16? save "
                                    "the keys as ASCII text, one a line)",
                                    path, (size_t)(nul - *buf));
    for (char *line = *buf, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t'))
            line[--l] = 0;
        if (!l || line[0] == '#') continue;
        for (size_t i = 0; i < l; i++)
            if ((unsigned char)line[i] <= 0x20 || (unsigned char)line[i] >= 0x7F)
                return cis2_cli_usage_error(
                    "serve", "--api-key-file %s: a key has a space or a non-ASCII byte", path);
        if (*n == MAX_KEYS)
            return cis2_cli_usage_error("serve", "--api-key-file %s: more than %d keys", path,
                                        MAX_KEYS);
        keys[(*n)++] = line;
    }
    if (!*n) return cis2_cli_usage_error("serve", "--api-key-file %s: no key in the file", path);
    return 0;
}

/* The model's name in the API: --alias, else the directory's last component.
 * Returns 1 when it does not fit in out (never cut: clients send it back). */
static int model_id(const char *dir, const char *alias, char *out, size_t cap)
{
    if (alias) return snprintf(out, cap, "%s", alias) >= (int)cap;
    size_t l = strlen(dir);
    while (l > 1 && dir[l - 1] == '/') l--;
    size_t b = l;
    while (b > 0 && dir[b - 1] != '/') b--;
    return snprintf(out, cap, "%.*s", (int)(l - b), dir + b) >= (int)cap;
}

/* What makes id unusable as a model name, or NULL. Clients send the name back
 * verbatim (and see it in /v1/models/NAME), so it is printable UTF-8: no '/',
 * no control character, bidi control or invalid byte (what the escaper would
 * change; a backslash is fine, so the SANITIZE mode is the test). */
static const char *name_problem(const char *id)
{
    char esc[1024];
    size_t n = strlen(id);
    if (!n) return "it is empty";
    if (strchr(id, '/')) return "it contains '/'";
    if (strcmp(cis2_escape(id, n, esc, sizeof esc, CIS2_ESC_SANITIZE), id))
        return "it has a control character, a bidi control or bytes that are not UTF-8";
    return NULL;
}

int cis2_cmd_serve(int argc, char **argv)
{
    const char *model = NULL, *host = "127.0.0.1", *backend = "fast", *isa = NULL, *key_file = NULL,
               *alias = NULL, *verifier_dir = NULL, *chat_format = NULL;
    int port = 8080, threads = 0, max_batch = 8, queue = 64, ctx = 0, max_body = 1 << 20,
        header_limit = 32768, timeout = 60, max_conn = 256, request_timeout = 10, per_ip = 64;
    const cis2_opt opts[] = {
        { "--model", NULL, CIS2_OPT_PATH, &model, 0, 0 },
        { "--host", NULL, CIS2_OPT_PATH, &host, 0, 0 },
        { "--port", NULL, CIS2_OPT_INT, &port, 0, 65535 },
        { "--threads", NULL, CIS2_OPT_INT, &threads, 1, 1024 },
        { "--backend", NULL, CIS2_OPT_STR, &backend, 0, 0 },
        { "--isa", NULL, CIS2_OPT_STR, &isa, 0, 0 },
        { "--max-batch", NULL, CIS2_OPT_INT, &max_batch, 1, 256 },
        { "--queue", NULL, CIS2_OPT_INT, &queue, 0, 100000 },
        { "--ctx", NULL, CIS2_OPT_INT, &ctx, 2, 1 << 24 },
        { "--max-body", NULL, CIS2_OPT_INT, &max_body, 1024, 1 << 30 },
        { "--header-limit", NULL, CIS2_OPT_INT, &header_limit, 4096, 1 << 20 },
        { "--timeout", NULL, CIS2_OPT_INT, &timeout, 1, 86400 },
        { "--max-connections", NULL, CIS2_OPT_INT, &max_conn, 1, 65536 },
        { "--request-timeout", NULL, CIS2_OPT_INT, &request_timeout, 1, 86400 },
        { "--max-connections-per-ip", NULL, CIS2_OPT_INT, &per_ip, 1, 65536 },
        { "--api-key-file", NULL, CIS2_OPT_PATH, &key_file, 0, 0 },
        { "--alias", NULL, CIS2_OPT_PATH, &alias, 0, 0 },
        { "--verifier-dir", NULL, CIS2_OPT_PATH, &verifier_dir, 0, 0 },
        { "--chat-format", NULL, CIS2_OPT_STR, &chat_format, 0, 0 },
    };
    if (cis2_cli_parse("serve", argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, NULL, 0))
        return 2;
    char err[CIS2_ERR_LEN];
    if (!serve_http_available(err)) return cis2_cli_usage_error("serve", "%s", err);
    if (!model) return cis2_cli_usage_error("serve", "--model DIR is required");
    char *key_buf = NULL;
    const char *keys[MAX_KEYS];
    int n_keys = 0;
    if (key_file && read_keys(key_file, &key_buf, keys, &n_keys)) {
        free(key_buf);
        return 2;
    }
    char id[256], esc[1024];
    const char *why =
        model_id(model, alias, id, sizeof id) ? "it is longer than 255 bytes" : name_problem(id);
    if (why) {
        free(key_buf);
        if (alias)
            return cis2_cli_usage_error(
                "serve", "--alias '%s': %s",
                cis2_escape(alias, strlen(alias), esc, sizeof esc, CIS2_ESC_TEXT), why);
        return cis2_cli_usage_error("serve",
                                    "the model directory's name '%s' cannot be the model's name "
                                    "(%s): give one with --alias NAME",
                                    cis2_escape(id, strlen(id), esc, sizeof esc, CIS2_ESC_TEXT),
                                    why);
    }
    /* Checked now, not at the first GET /verifier/: stat, so a FIFO is never opened. */
    struct stat vst;
    if (verifier_dir && cis2_cli_dir_input_ok("serve", "--verifier-dir", verifier_dir)) {
        free(key_buf);
        return 2;
    }
    int vbad = verifier_dir && stat(verifier_dir, &vst) != 0 ? errno : 0;
    if (verifier_dir && (vbad || !S_ISDIR(vst.st_mode))) {
        free(key_buf);
        return cis2_cli_usage_error(
            "serve", "--verifier-dir %s: %s",
            cis2_escape(verifier_dir, strlen(verifier_dir), esc, sizeof esc, CIS2_ESC_TEXT),
            vbad ? strerror(vbad) : "not a directory");
    }
    cis2_engine_opts eo;
    if (cis2_cli_engine_opts("serve", backend, isa, threads, &eo)) {
        free(key_buf);
        return 2;
    }
    eo.max_seqs = max_batch;
    /* The decode thread, the engine's workers and libmicrohttpd's threads
     * inherit this mask: the signals come to sigwait below, nowhere else. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP); /* the terminal or session went away: drain, as for SIGTERM */
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    cis2_model *m;
    cis2_engine *e;
    if (cis2_cli_open("serve", model, &eo, &m, &e)) {
        free(key_buf);
        return 2;
    }
    const cis2_config *c = cis2_model_config(m);
    serve_sched *s = NULL;
    serve_http *h = NULL;
    int rc = 2, bound = port;
    /* /v1/chat/completions' template: --chat-format, else the model's own
     * (tokenizer_config.json); without one the server still serves the rest */
    cis2_chat_template *tpl = NULL;
    char chat_err[CIS2_ERR_LEN];
    if (ctx > c->max_pos) { /* never a silent clamp: the client would get less than asked */
        cis2_cli_usage_error("serve", "--ctx %d: above this model's max_position_embeddings (%d)",
                             ctx, c->max_pos);
        goto out;
    }
    if (!ctx) ctx = c->max_pos;
    if (cis2_cli_chat_template("serve", model, chat_format, &tpl, chat_err)) goto out;
    if (serve_sched_new(&s, e, max_batch, queue, err)) {
        cis2_cli_usage_error("serve", "%s", err);
        goto out;
    }
    serve_model_info mi = { m, id, tpl, tpl ? NULL : chat_err };
    serve_limits lim = { id, c->vocab, ctx };
    serve_http_opts ho = { .host = host,
                           .port = port,
                           .max_body = max_body,
                           .header_limit = header_limit,
                           .idle_timeout = timeout,
                           .request_timeout = request_timeout,
                           .max_connections = max_conn,
                           .max_per_ip = per_ip,
                           .api_keys = key_file ? keys : NULL,
                           .n_api_keys = n_keys,
                           .verifier_dir = verifier_dir };
    char terr[CIS2_ERR_LEN];
    const cis2_tokenizer *t = cis2_model_tokenizer(m, terr);
    if (serve_http_start(&h, &ho, s, &mi, t, &lim, &bound, err)) {
        cis2_cli_usage_error("serve", "%s", err);
        goto out;
    }
    /* Through the one stderr funnel, which escapes: the host and the template's
     * path come from flags and directories (the id is printable already). */
    cis2_cli_note("serve",
                  "listening on http://%s%s%s:%d/ (model %s, backend %s, max-batch %d, "
                  "queue %d, ctx %d%s)",
                  strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", bound, id,
                  cis2_engine_backend(e), max_batch, queue, ctx,
                  key_file ? ", API key required" : "");
    if (!t) cis2_cli_note("serve", "prompts must be token ids: %s", terr);
    if (!tpl) cis2_cli_note("serve", "/v1/chat/completions answers 400: %s", chat_err);
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM";
    fprintf(stderr, "cis2 serve: %s: shutting down\n", name);
    serve_http_refuse_new(h); /* still listening, and answering 503, while it drains */
    rc = 0;
out:
    serve_sched_stop(s);       /* waiters wake with "shutting down" ... */
    serve_http_drain(h, 5000); /* ... and get to send it */
    long long refused, timed_out;
    serve_http_counts(h, &refused, &timed_out);
    if (refused || timed_out)
        cis2_cli_note("serve",
                      "%lld connection(s) refused over the connection limits, %lld closed past "
                      "--request-timeout",
                      refused, timed_out);
    serve_http_stop(h);
    serve_sched_free(s);
    cis2_engine_free(e);
    cis2_model_free(m);
    cis2_chat_template_free(tpl);
    free(key_buf);
    return rc;
}
