/* The op-level conformance checker (docs/conformance.md "cis2 suite"): runs
 * any candidate once per vector as `CANDIDATE ARG... OP`, the vector's text on
 * its stdin, within a time limit (the candidate and all it spawns are one
 * process group, killed as a whole), and judges its stdout against the
 * vector's .expected file. Everything a candidate or a vector folder says is
 * escaped before it is printed. */
#include "verify/conformance.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_STDOUT ((size_t)64 << 20) /* candidate stdout kept by the checker */
#define MAX_STDERR CIS2_CHILD_STDERR

static void seterr(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void seterr(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CIS2_ERR_LEN, fmt, ap);
    va_end(ap);
}

/* Escaped for a one-line message: at most `cap` bytes. */
#define ESC(s, buf) cis2_escape((s), strlen(s), (buf), sizeof(buf), CIS2_ESC_TEXT)

typedef struct {
    char *name, *dir;
} vec_ent;

static int vec_cmp(const void *a, const void *b)
{
    const vec_ent *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->dir, y->dir);
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && !strcmp(s + n - m, suf);
}

static char *path_join(const char *dir, const char *name, const char *ext)
{
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, name, ext);
    return p;
}

/* Present at all (a FIFO or a device is found here and refused, without
 * blocking, when it is read). */
static int file_exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Every NAME.txt in DIR is a vector; a NAME.expected with no NAME.txt is
 * listed too, so that it fails rather than being skipped silently. */
static int collect(const char *dir, vec_ent **v, size_t *n, size_t *cap, char *err)
{
    DIR *dh = opendir(dir);
    if (!dh) {
        char ed[200];
        seterr(err, "cannot open vector folder %s: %s", ESC(dir, ed), strerror(errno));
        return 1;
    }
    struct dirent *de;
    while ((de = readdir(dh))) {
        const char *nm = de->d_name;
        size_t base;
        if (has_suffix(nm, ".txt")) base = strlen(nm) - 4;
        else if (has_suffix(nm, ".expected")) {
            base = strlen(nm) - 9;
            char *stem = strndup(nm, base);
            char *t = stem ? path_join(dir, stem, ".txt") : NULL;
            int ok = t && file_exists(t);
            free(stem);
            free(t);
            if (ok) continue;
        } else continue;
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            vec_ent *nv = realloc(*v, *cap * sizeof *nv);
            if (!nv) {
                closedir(dh);
                seterr(err, "out of memory");
                return 1;
            }
            *v = nv;
        }
        (*v)[*n].name = strndup(nm, base);
        (*v)[*n].dir = strdup(dir);
        if (!(*v)[*n].name || !(*v)[*n].dir) {
            closedir(dh);
            seterr(err, "out of memory");
            return 1;
        }
        (*n)++;
    }
    closedir(dh);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int set_flags(int fd, int cloexec, int nonblock)
{
    if (cloexec && fcntl(fd, F_SETFD, FD_CLOEXEC) == -1) return -1;
    if (nonblock) {
        int fl = fcntl(fd, F_GETFL);
        if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1) return -1;
    }
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static void kill_group(pid_t pid)
{
    kill(-pid, SIGKILL); /* the candidate leads its own process group */
    kill(pid, SIGKILL);
}

int cis2_run_child(char **cargv, const char *input, size_t in_len, double timeout_s,
                   cis2_child_result *r, char *err)
{
    int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
    memset(r, 0, sizeof *r);
    if (pipe(pin) || pipe(pout) || pipe(perr)) {
        seterr(err, "pipe: %s", strerror(errno));
        goto fail;
    }
    for (int i = 0; i < 2; i++)
        if (set_flags(pin[i], 1, 0) || set_flags(pout[i], 1, 0) || set_flags(perr[i], 1, 0)) {
            seterr(err, "fcntl: %s", strerror(errno));
            goto fail;
        }
    fflush(stdout);
    fflush(stderr);
    double deadline = now_s() + timeout_s;
    pid_t pid = fork();
    if (pid < 0) {
        seterr(err, "fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        setpgid(0, 0);
        /* The CLI ignores these (a broken pipe, a file over `ulimit -f` become errors it
         * reports); the candidate must not inherit that. */
        signal(SIGPIPE, SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        if (dup2(pin[0], 0) < 0 || dup2(pout[1], 1) < 0 || dup2(perr[1], 2) < 0) _exit(127);
        execvp(cargv[0], cargv);
        dprintf(2, "cannot run %s: %s\n", cargv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also from here: no race with the kill below */
    close_fd(&pin[0]);
    close_fd(&pout[1]);
    close_fd(&perr[1]);
    set_flags(pin[1], 0, 1);
    set_flags(pout[0], 0, 1);
    set_flags(perr[0], 0, 1);
    size_t sent = 0, cap = 0;
    if (in_len == 0) close_fd(&pin[1]);
    while (pout[0] >= 0 || perr[0] >= 0) {
        double left = deadline - now_s();
        if (left <= 0) {
            r->timed_out = 1;
            break;
        }
        struct pollfd pf[3];
        int np = 0, iin = -1, iout = -1, ierr = -1;
        if (pin[1] >= 0) {
            iin = np;
            pf[np].fd = pin[1];
            pf[np].events = POLLOUT;
            np++;
        }
        if (pout[0] >= 0) {
            iout = np;
            pf[np].fd = pout[0];
            pf[np].events = POLLIN;
            np++;
        }
        if (perr[0] >= 0) {
            ierr = np;
            pf[np].fd = perr[0];
            pf[np].events = POLLIN;
            np++;
        }
        int pr = poll(pf, (nfds_t)np, (int)(left * 1000.0) + 1);
        if (pr < 0) {
            if (errno == EINTR) continue;
            r->timed_out = 1;
            break;
        }
        if (iin >= 0 && pf[iin].revents) {
            ssize_t w = write(pin[1], input + sent, in_len - sent);
            if (w > 0) sent += (size_t)w;
            /* EPIPE: the candidate closed stdin without reading it all. The
             * protocol judges only its output, so that alone is no failure. */
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == in_len) close_fd(&pin[1]);
        }
        if (iout >= 0 && pf[iout].revents) {
            if (cap - r->out_len < 65536) {
                size_t nc = cap ? cap * 2 : 131072;
                char *nb = realloc(r->out, nc + 1);
                if (!nb) {
                    r->too_much = 1;
                    break;
                }
                r->out = nb;
                cap = nc;
            }
            ssize_t g = read(pout[0], r->out + r->out_len, cap - r->out_len);
            if (g > 0) r->out_len += (size_t)g;
            else if (g == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(&pout[0]);
            if (r->out_len > MAX_STDOUT) {
                r->too_much = 1;
                break;
            }
        }
        if (ierr >= 0 && pf[ierr].revents) {
            char tmp[4096];
            ssize_t g = read(perr[0], tmp, sizeof tmp);
            if (g > 0) {
                size_t room = MAX_STDERR - r->err_len, take = (size_t)g < room ? (size_t)g : room;
                memcpy(r->err + r->err_len, tmp, take);
                r->err_len += take;
            } else if (g == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(&perr[0]);
        }
    }
    close_fd(&pin[1]);
    close_fd(&pout[0]);
    close_fd(&perr[0]);
    if (r->timed_out || r->too_much) {
        kill_group(pid);
        waitpid(pid, &r->status, 0);
    } else {
        for (;;) {
            pid_t w = waitpid(pid, &r->status, WNOHANG);
            if (w == pid) break;
            if (w < 0 && errno != EINTR) {
                seterr(err, "waitpid: %s", strerror(errno));
                kill_group(pid);
                return 1;
            }
            if (now_s() >= deadline) {
                r->timed_out = 1;
                kill_group(pid);
                waitpid(pid, &r->status, 0);
                break;
            }
            struct timespec ts = { 0, 2000000 };
            nanosleep(&ts, NULL);
        }
    }
    if (!r->out) r->out = malloc(1);
    if (!r->out) {
        seterr(err, "out of memory");
        return 1;
    }
    r->out[r->out_len] = '\0';
    r->err[r->err_len] = '\0';
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        close_fd(&pin[i]);
        close_fd(&pout[i]);
        close_fd(&perr[i]);
    }
    return 1;
}

/* 64 hex digits; upper-case ones are folded to lower case in place. */
static int sha_hex_fold(char *s)
{
    size_t i = 0;
    for (; s[i]; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'F') s[i] = (char)(c - 'A' + 'a');
        else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
    }
    return i == 64;
}

static void bits_sha(const uint32_t *b, size_t n, char hex[65])
{
    cis2_sha256 s;
    uint8_t dig[32];
    cis2_sha256_init(&s);
    for (size_t i = 0; i < n; i++) {
        uint8_t le[4] = { (uint8_t)b[i], (uint8_t)(b[i] >> 8), (uint8_t)(b[i] >> 16),
                          (uint8_t)(b[i] >> 24) };
        cis2_sha256_update(&s, le, 4);
    }
    cis2_sha256_final(&s, dig);
    cis2_hex(dig, 32, hex);
}

int cis2_suite_parse_answer(char *out, size_t len, char sha[65], const char **bits, char *why)
{
    const char *got = NULL;
    *bits = NULL;
    sha[0] = 0;
    if (memchr(out, '\0', len)) {
        seterr(why, "stdout contains a NUL byte");
        return 1;
    }
    /* Each line is read as a vector line is: blanks around the key and the
     * value, and a CRLF ending, are presentation; nothing else is allowed. */
    for (char *s = out, *end = out + len; s < end;) {
        char *nl = memchr(s, '\n', (size_t)(end - s)), *le = nl ? nl : end, *line = s;
        s = nl ? nl + 1 : end;
        while (le > line && (le[-1] == '\r' || le[-1] == ' ' || le[-1] == '\t')) le--;
        *le = '\0';
        while (*line == ' ' || *line == '\t') line++;
        if (!*line) continue;
        char *eq = strchr(line, '='), *k = line, *v = eq ? eq + 1 : NULL;
        if (eq) {
            for (char *x = eq; x > k && (x[-1] == ' ' || x[-1] == '\t');) *--x = '\0';
            *eq = '\0';
            while (*v == ' ' || *v == '\t') v++;
        }
        const char **slot = !eq                        ? NULL
                            : !strcmp(k, "out_sha256") ? &got
                            : !strcmp(k, "out_bits")   ? bits
                                                       : NULL;
        if (!slot) {
            if (eq) *eq = '='; /* show the line as it was */
            char el[80];
            seterr(why, "unexpected stdout line '%s'", ESC(line, el));
            return 1;
        }
        if (*slot) {
            seterr(why, "more than one %s= line", k);
            return 1;
        }
        *slot = v;
    }
    if (!got) {
        seterr(why, "no out_sha256= line on stdout");
        return 1;
    }
    if (!sha_hex_fold((char *)got)) {
        char ev[100];
        seterr(why, "malformed out_sha256= line (want 64 hex digits): '%s'", ESC(got, ev));
        return 1;
    }
    memcpy(sha, got, 65);
    return 0;
}

/* The first line of the candidate's stderr, escaped. */
static void first_line(const char *s, char *dst, size_t cap)
{
    const char *nl = strchr(s, '\n');
    cis2_escape(s, nl ? (size_t)(nl - s) : strlen(s), dst, cap, CIS2_ESC_TEXT);
}

static void print_bits_line(FILE *out, const uint32_t *b, size_t n)
{
    const size_t show = 64;
    fprintf(out, "  candidate out_bits (%zu value%s)=", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n && i < show; i++) fprintf(out, i ? ",0x%08X" : "0x%08X", b[i]);
    if (n > show) fprintf(out, ",...(+%zu more)", n - show);
    fprintf(out, "\n");
}

/* One vector: 0 pass, 1 fail (line printed), -1 checker error (line printed). */
static int check_vector(FILE *out, const vec_ent *v, const cis2_suite_opts *o)
{
    char err[CIS2_ERR_LEN] = "", why[CIS2_ERR_LEN] = "", en[200];
    char *tpath = path_join(v->dir, v->name, ".txt"),
         *epath = path_join(v->dir, v->name, ".expected");
    char *txt = NULL, *txt_copy = NULL, *exp = NULL, **argvv = NULL;
    size_t txt_len = 0, exp_len = 0;
    cis2_kv_doc td = { 0 }, ed = { 0 };
    uint32_t *want_bits = NULL, *got_bits = NULL;
    size_t n_want = 0, n_got = 0;
    int have_want_bits = 0, have_got_bits = 0;
    cis2_child_result rr = { 0 };
    int res = 1;
    ESC(v->name, en);

    if (!tpath || !epath) {
        seterr(why, "out of memory");
        goto report;
    }
    if (!file_exists(tpath)) {
        seterr(why, "%s.expected has no matching .txt", en);
        goto report;
    }
    if (!file_exists(epath)) {
        seterr(why, "no %s.expected next to the .txt", en);
        goto report;
    }
    /* sizes first: a huge file is refused by fstat, unread */
    if (cis2_read_file_max(tpath, CIS2_CONF_MAX_INPUT, &txt, &txt_len, err) ||
        cis2_read_file_max(epath, CIS2_CONF_MAX_INPUT, &exp, &exp_len, err)) {
        seterr(why, "%s", err);
        goto report;
    }
    if (!(txt_copy = malloc(txt_len + 1))) {
        seterr(why, "out of memory");
        goto report;
    }
    memcpy(txt_copy, txt, txt_len + 1);
    if (cis2_kv_parse(txt_copy, txt_len, tpath, CIS2_KV_TRIM, &td, err)) {
        seterr(why, "bad vector: %s", err);
        goto report;
    }
    const char *op = cis2_kv_get(&td, "op");
    if (!op || !*op) {
        char ep[200];
        seterr(why, "bad vector: no op= field in %s", ESC(tpath, ep));
        goto report;
    }
    if (cis2_kv_parse(exp, exp_len, epath, CIS2_KV_TRIM, &ed, err)) {
        seterr(why, "bad expected file: %s", err);
        goto report;
    }
    char want_sha[65] = "";
    const char *ws = cis2_kv_get(&ed, "out_sha256");
    if (ws && strlen(ws) == 64) memcpy(want_sha, ws, 65); /* else stays "" and is refused */
    if (!sha_hex_fold(want_sha)) {
        char ep[200];
        seterr(why, "bad expected file: %s lacks a 64-hex out_sha256", ESC(epath, ep));
        goto report;
    }
    const char *wb = cis2_kv_get(&ed, "out_bits");
    if (wb) {
        char hex[65];
        if (cis2_parse_bits_list(wb, "expected out_bits", &want_bits, &n_want, err)) {
            seterr(why, "bad expected file: %s", err);
            goto report;
        }
        bits_sha(want_bits, n_want, hex);
        if (strcmp(hex, want_sha)) {
            seterr(why, "bad expected file: its out_bits do not hash to its out_sha256");
            goto report;
        }
        have_want_bits = 1;
    }

    if (!(argvv = calloc((size_t)o->ncand + 2, sizeof *argvv))) {
        seterr(why, "out of memory");
        goto report;
    }
    for (int i = 0; i < o->ncand; i++) argvv[i] = o->cand[i];
    argvv[o->ncand] = (char *)op;
    if (cis2_run_child(argvv, txt, txt_len, o->timeout_s, &rr, err)) {
        seterr(why, "checker: %s", err);
        res = -1;
        goto report;
    }
    char e1[200];
    first_line(rr.err, e1, sizeof e1);
    if (rr.timed_out) {
        seterr(why, "no result within %gs (killed)", o->timeout_s);
        goto report;
    }
    if (rr.too_much) {
        seterr(why, "more than 64 MiB on stdout (killed)");
        goto report;
    }
    if (WIFSIGNALED(rr.status)) {
        seterr(why, "killed by signal %d%s%s", WTERMSIG(rr.status), *e1 ? "; stderr: " : "", e1);
        goto report;
    }
    if (!WIFEXITED(rr.status) || WEXITSTATUS(rr.status) != 0) {
        seterr(why, "exited with status %d%s%s", WIFEXITED(rr.status) ? WEXITSTATUS(rr.status) : -1,
               *e1 ? "; stderr: " : "", e1);
        goto report;
    }
    char got_sha[65];
    const char *gb;
    if (cis2_suite_parse_answer(rr.out, rr.out_len, got_sha, &gb, why)) goto report;
    int bits_equal = 0;
    if (gb) {
        if (cis2_parse_bits_list(gb, "out_bits", &got_bits, &n_got, err)) {
            seterr(why, "malformed %s", err);
            goto report;
        }
        have_got_bits = 1;
        if (have_want_bits) {
            size_t m = n_got < n_want ? n_got : n_want;
            for (size_t i = 0; i < m; i++)
                if (got_bits[i] != want_bits[i]) {
                    seterr(why, "out_bits differ first at index %zu: got 0x%08X, want 0x%08X", i,
                           got_bits[i], want_bits[i]);
                    goto report;
                }
            if (n_got != n_want) {
                seterr(why, "out_bits has %zu values, want %zu", n_got, n_want);
                goto report;
            }
            bits_equal = 1;
        }
    }
    if (strcmp(got_sha, want_sha)) {
        seterr(why, "out_sha256 mismatch: got %s, want %s%s", got_sha, want_sha,
               !gb          ? " (candidate gave no out_bits)"
               : bits_equal ? " (its out_bits are right)"
                            : "");
        goto report;
    }
    if (gb) { /* digest right: the bits given beside it must be the ones hashed */
        char hex[65];
        bits_sha(got_bits, n_got, hex);
        if (strcmp(hex, got_sha)) {
            seterr(why, "candidate's out_bits do not hash to its own out_sha256");
            goto report;
        }
    }
    res = 0;
report:
    if (res == 0) fprintf(out, "PASS %s\n", en);
    else {
        cis2_sb line = { 0 };
        cis2_sb_escape(&line, why, strlen(why), CIS2_ESC_SANITIZE);
        fprintf(out, "FAIL %s: %s\n", en, line.b ? line.b : why);
        cis2_sb_free(&line);
        if (have_got_bits) print_bits_line(out, got_bits, n_got);
    }
    fflush(out);
    free(tpath);
    free(epath);
    free(txt);
    free(txt_copy);
    free(exp);
    free(argvv);
    cis2_kv_free(&td);
    cis2_kv_free(&ed);
    free(want_bits);
    free(got_bits);
    free(rr.out);
    return res;
}

int cis2_suite_run(FILE *out, const cis2_suite_opts *o, char *err)
{
    /* A candidate that exits without reading stdin must not kill the checker. */
    signal(SIGPIPE, SIG_IGN);
    vec_ent *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 2;
    for (int d = 0; d < o->ndirs; d++)
        if (collect(o->dirs[d], &v, &n, &cap, err)) goto out;
    if (n == 0) {
        /* named, so an empty or mistyped --vectors is seen for what it is */
        char ed[200];
        seterr(err, "no vectors (*.txt) found in %s%s", ESC(o->dirs[0], ed),
               o->ndirs > 1 ? " or the other --vectors folders" : "");
        goto out;
    }
    qsort(v, n, sizeof *v, vec_cmp);
    size_t failed = 0;
    int checker_err = 0;
    for (size_t k = 0; k < n; k++) {
        int r = check_vector(out, &v[k], o);
        if (r) failed++;
        if (r < 0) checker_err = 1;
    }
    if (failed == 0) fprintf(out, "all %zu vector(s) passed\n", n);
    else fprintf(out, "%zu of %zu vector(s) failed\n", failed, n);
    rc = checker_err ? 2 : failed ? 1 : 0;
    if (checker_err) seterr(err, "the checker itself failed on some vector (see its FAIL line)");
out:
    for (size_t k = 0; k < n; k++) {
        free(v[k].name);
        free(v[k].dir);
    }
    free(v);
    return rc;
}
