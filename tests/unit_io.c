/* The file-system and terminal defences of the core layer (core/io.c,
 * core/strbuf.c): inputs that are not regular files refused without
 * blocking, sizes checked before reading, outputs never written over a
 * non-file nor through a planted temporary name, no temporary left after a
 * failed write, and the one escaper that keeps file-borne text from acting
 * on a terminal. */
#include "unit.h"
#include "core/json.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[512];

static const char *path(const char *name)
{
    static char p[4][700];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static int temps_left(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void write_text(const char *p, const char *s)
{
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(s, f);
        fclose(f);
    }
}

static char *slurp(const char *p)
{
    char *b;
    size_t n;
    char err[CIS2_ERR_LEN];
    return cis2_read_file(p, &b, &n, err) ? NULL : b;
}

/* ------------------------------------------------------------ escaping */
static void esc_eq(const char *name, const char *in, size_t n, cis2_esc_mode m, const char *want)
{
    cis2_sb s = { 0 };
    cis2_sb_escape(&s, in, n, m);
    const char *got = s.b ? s.b : "";
    CHECK(name, !strcmp(got, want), "got '%s' want '%s'", got, want);
    cis2_sb_free(&s);
}

/* No byte a terminal acts on: C0, DEL, C1 (as UTF-8), bidi controls, and
 * only valid UTF-8. */
static int terminal_safe(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (cis2_utf8_check(s, n) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] == 0x7F) return 0;
        if (p[i] == 0xC2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F) return 0;
        if (p[i] == 0xE2 && i + 2 < n && p[i + 1] == 0x80 && p[i + 2] >= 0xA8 && p[i + 2] <= 0xAE)
            return 0;
    }
    return 1;
}

static void test_escape(void)
{
    esc_eq("escape.text.newline", "a\nverdict=X", 11, CIS2_ESC_TEXT, "a\\nverdict=X");
    esc_eq("escape.text.csi", "\x1b[31mred", 8, CIS2_ESC_TEXT, "\\x1b[31mred");
    esc_eq("escape.text.c1-csi",
           "\xc2\x9b"
           "2J",
           4, CIS2_ESC_TEXT, "\\u009b2J");
    esc_eq("escape.text.bidi-override",
           "ab\xe2\x80\xae"
           "cd",
           7, CIS2_ESC_TEXT, "ab\\u202ecd");
    esc_eq("escape.text.invalid-utf8", "\xff\xc3(", 3, CIS2_ESC_TEXT, "\\xff\\xc3(");
    esc_eq("escape.text.utf8-passes", "\xc3\xa9\xe2\x9c\x93", 5, CIS2_ESC_TEXT,
           "\xc3\xa9\xe2\x9c\x93");
    esc_eq("escape.text.backslash", "a\\n", 3, CIS2_ESC_TEXT, "a\\\\n");
    esc_eq("escape.text.nul-del", "a\0b\x7f", 4, CIS2_ESC_TEXT, "a\\x00b\\x7f");
    esc_eq("escape.sanitize.keeps-backslash", "a\\nb\nc", 6, CIS2_ESC_SANITIZE, "a\\nb\\nc");
    esc_eq("escape.json", "\"q\"\\\n\x01\xc2\x85\xff", 9, CIS2_ESC_JSON,
           "\\\"q\\\"\\\\\\n\\u0001\\u0085\\ufffd");
    /* every 1- and 2-byte string, and a pseudo-random sample of longer ones */
    int bad_text = 0, bad_san = 0, bad_json = 0, bad_idem = 0;
    uint64_t x = 88172645463325252ull;
    for (int t = 0; t < 65536 + 20000; t++) {
        char in[24];
        size_t n;
        if (t < 256) in[0] = (char)t, n = 1;
        else if (t < 65536) in[0] = (char)(t >> 8), in[1] = (char)t, n = 2;
        else {
            n = 3 + (size_t)(x % 20);
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                in[i] = (char)(x >> 24);
            }
        }
        cis2_sb a = { 0 }, b = { 0 }, c = { 0 }, j = { 0 };
        cis2_sb_escape(&a, in, n, CIS2_ESC_TEXT);
        cis2_sb_escape(&b, in, n, CIS2_ESC_SANITIZE);
        cis2_sb_escape(&c, a.b, a.len, CIS2_ESC_SANITIZE);
        cis2_sb_json_str(&j, in, n);
        bad_text += !terminal_safe(a.b, a.len);
        bad_san += !terminal_safe(b.b, b.len);
        bad_idem += a.len != c.len || memcmp(a.b, c.b, a.len);
        json_doc d;
        char err[CIS2_ERR_LEN];
        if (!terminal_safe(j.b, j.len) || json_parse(&d, j.b, j.len, "json", err)) bad_json++;
        else {
            size_t l;
            char *back = json_str_dup(&d, 0, &l);
            /* valid UTF-8 round-trips exactly */
            if (cis2_utf8_check(in, n) == n && (!back || l != n || memcmp(back, in, n))) bad_json++;
            free(back);
            json_free(&d);
        }
        cis2_sb_free(&a);
        cis2_sb_free(&b);
        cis2_sb_free(&c);
        cis2_sb_free(&j);
    }
    CHECK("escape.text.always-terminal-safe", !bad_text, "%d inputs", bad_text);
    CHECK("escape.sanitize.always-terminal-safe", !bad_san, "%d inputs", bad_san);
    CHECK("escape.sanitize.idempotent-on-escaped-text", !bad_idem, "%d inputs", bad_idem);
    CHECK("escape.json.parses-and-round-trips", !bad_json, "%d inputs", bad_json);
    char out[16];
    cis2_escape("\n\n\n\n\n\n\n\n", 8, out, sizeof out, CIS2_ESC_TEXT);
    CHECK("escape.fixed-buffer-cut-between-escapes", !strcmp(out, "\\n\\n\\n\\n\\n\\n..."),
          "got '%s'", out);
    CHECK("utf8_check",
          cis2_utf8_check("ab\xc3\xa9\xed\xa0\x80", 7) == 4 &&
              cis2_utf8_check("\xf4\x90\x80\x80", 4) == 0,
          "offsets");
}

/* ------------------------------------------------------------ inputs */
static void test_inputs(void)
{
    char err[CIS2_ERR_LEN];
    int fd;
    uint64_t size;
    mkfifo(path("fifo"), 0600);
    alarm(10); /* a regression hangs on the FIFO: SIGALRM kills the test instead */
    int rc = cis2_open_input(path("fifo"), &fd, &size, err);
    alarm(0);
    CHECK("io.open-input.fifo-refused-without-blocking", rc && strstr(err, "a FIFO"), "%s", err);
    uint8_t d[32];
    alarm(10);
    rc = cis2_sha256_file(path("fifo"), d, err);
    alarm(0);
    CHECK("io.sha256-file.fifo-refused-without-blocking", rc && strstr(err, "a FIFO"), "%s", err);
    rc = cis2_open_input(dir, &fd, &size, err);
    CHECK("io.open-input.directory-refused", rc && strstr(err, "a directory"), "%s", err);
    rc = cis2_open_input(path("nope"), &fd, &size, err);
    CHECK("io.open-input.strerror", rc && strstr(err, "No such file or directory"), "%s", err);
    /* "-" is not standard input here: said so, not "No such file" */
    if (access("-", F_OK) != 0) {
        rc = cis2_open_input("-", &fd, &size, err);
        CHECK("io.open-input.dash", rc && strstr(err, "not read from standard input"), "%s", err);
    }
    /* a 1 GiB sparse file: refused by its size, never read */
    int big = open(path("big"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int ok = big >= 0 && ftruncate(big, (off_t)1 << 30) == 0;
    if (big >= 0) close(big);
    char *buf;
    size_t len;
    rc = ok ? cis2_read_file_max(path("big"), (size_t)64 << 20, &buf, &len, err) : 0;
    CHECK("io.read-max.1GiB-refused-by-size",
          ok && rc && strstr(err, "1073741824 bytes is more than the 67108864"), "%s", err);
    unlink(path("big"));
    int p[2];
    if (pipe(p) == 0) {
        char chunk[4096];
        memset(chunk, 'x', sizeof chunk);
        for (int i = 0; i < 8; i++) ok = write(p[1], chunk, sizeof chunk) == (ssize_t)sizeof chunk;
        close(p[1]);
        rc = cis2_read_fd_max(p[0], 10000, "pipe", &buf, &len, err);
        close(p[0]);
        CHECK("io.read-fd-max.stream-over-limit", ok && rc && strstr(err, "pipe: more than"), "%s",
              err);
    }
}

/* ------------------------------------------------------------ outputs */
static int half_then_fail(int fd, void *ctx, char *err)
{
    (void)ctx;
    if (write(fd, "half", 4) != 4) return 1;
    snprintf(err, CIS2_ERR_LEN, "body: failed on purpose");
    return 1;
}

static int two_parts(int fd, void *ctx, char *err)
{
    (void)ctx;
    return cis2_write_fd(fd, "one ", 4, "two_parts", err) ||
           cis2_write_fd(fd, "two\n", 4, "two_parts", err);
}

static void test_outputs(void)
{
    char err[CIS2_ERR_LEN];
    mkdir(path("d"), 0700);
    CHECK("io.output.directory-refused",
          cis2_check_output_path(path("d"), err) && strstr(err, "a directory"), "%s", err);
    CHECK("io.output.fifo-refused",
          cis2_check_output_path(path("fifo"), err) && strstr(err, "a FIFO"), "%s", err);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path("sock"));
    if (s >= 0 && strlen(path("sock")) < sizeof a.sun_path &&
        bind(s, (struct sockaddr *)&a, sizeof a) == 0)
        CHECK("io.output.socket-refused",
              cis2_check_output_path(path("sock"), err) && strstr(err, "a socket"), "%s", err);
    else SKIP("io.output.socket-refused", "cannot bind a UNIX socket here");
    if (s >= 0) close(s);
    if (mknod(path("null"), S_IFCHR | 0600, makedev(1, 3)) == 0) {
        int rc = cis2_write_file_atomic(path("null"), "x", 1, err);
        struct stat st;
        CHECK("io.output.device-refused-and-kept",
              rc && strstr(err, "a character device") && lstat(path("null"), &st) == 0 &&
                  S_ISCHR(st.st_mode),
              "%s", err);
    } else {
        SKIP("io.output.device-refused-and-kept", "mknod needs root");
    }
    write_text(path("target"), "target\n");
    symlink(path("target"), path("link"));
    CHECK("io.output.symlink-refused",
          cis2_check_output_path(path("link"), err) && strstr(err, "a symbolic link"), "%s", err);

    /* A link planted at the old predictable temporary name PATH.tmp.PID is
     * never followed: the victim keeps its bytes and the write succeeds. */
    write_text(path("victim"), "victim\n");
    char planted[700];
    snprintf(planted, sizeof planted, "%s.tmp.%d", path("out"), (int)getpid());
    symlink(path("victim"), planted);
    int rc = cis2_write_file_atomic(path("out"), "new\n", 4, err);
    char *v = slurp(path("victim")), *o = slurp(path("out"));
    struct stat st;
    CHECK("io.atomic.planted-symlink-not-followed",
          !rc && v && !strcmp(v, "victim\n") && o && !strcmp(o, "new\n") &&
              lstat(planted, &st) == 0 && S_ISLNK(st.st_mode),
          "rc=%d %s victim='%s' out='%s'", rc, err, v ? v : "?", o ? o : "?");
    free(v);
    free(o);
    unlink(planted);

    /* A failed write (the file-size limit) leaves the old file and no temporary. */
    write_text(path("keep"), "keep me\n");
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1000;
    signal(SIGXFSZ, SIG_IGN);
    char *big = calloc(1, 100000);
    int set = big && setrlimit(RLIMIT_FSIZE, &lim) == 0;
    rc = set ? cis2_write_file_atomic(path("keep"), big, 100000, err) : 0;
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    free(big);
    char *k = slurp(path("keep"));
    CHECK("io.atomic.failed-write-keeps-file-and-leaves-no-temp",
          set && rc && strstr(err, "write failed: File too large") && k &&
              !strcmp(k, "keep me\n") && temps_left() == 0,
          "rc=%d %s temps=%d", rc, err, temps_left());
    free(k);
    /* A body that writes part of the file and then fails: the old file
     * stays, no temporary is left, and the body's own message is kept. */
    rc = cis2_write_file_atomic_with(path("keep"), half_then_fail, NULL, err);
    k = slurp(path("keep"));
    CHECK("io.atomic-with.failed-body-keeps-file-and-leaves-no-temp",
          rc && !strcmp(err, "body: failed on purpose") && k && !strcmp(k, "keep me\n") &&
              temps_left() == 0,
          "rc=%d %s temps=%d", rc, err, temps_left());
    free(k);
    rc = cis2_write_file_atomic_with(path("streamed"), two_parts, NULL, err);
    k = slurp(path("streamed"));
    CHECK("io.atomic-with.body-written", !rc && k && !strcmp(k, "one two\n"), "rc=%d %s", rc, err);
    free(k);
    rc = cis2_write_file_atomic(path("d/../nodir/x"), "x", 1, err);
    CHECK("io.atomic.missing-directory-strerror", rc && strstr(err, "No such file or directory"),
          "%s", err);
    CHECK("io.atomic.no-temp-left", temps_left() == 0, "%d left", temps_left());
}

/* docs/errors.md: "JSON nested more than 257 arrays/objects deep" is refused. */
static void test_json_depth(void)
{
    char b[1200];
    int rc[2];
    for (int t = 0; t < 2; t++) {
        int n = 257 + t, k = 0;
        for (int i = 0; i < n; i++) b[k++] = '[';
        for (int i = 0; i < n; i++) b[k++] = ']';
        json_doc d;
        char err[CIS2_ERR_LEN];
        rc[t] = json_parse(&d, b, (size_t)k, "deep.json", err);
        if (!rc[t]) json_free(&d);
    }
    CHECK("json.nesting-limit-as-documented", rc[0] == 0 && rc[1] != 0, "257: %d, 258: %d", rc[0],
          rc[1]);
}

int main(void)
{
    const char *t = getenv("TESTTMP");
    snprintf(dir, sizeof dir, "%s/unit_io.%d", t && *t ? t : "/tmp", (int)getpid());
    mkdir(t && *t ? t : "/tmp", 0700);
    if (mkdir(dir, 0700) != 0) {
        printf("FAIL unit_io.setup: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    test_escape();
    test_json_depth();
    test_inputs();
    test_outputs();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("SKIP unit_io.cleanup: %s left behind\n", dir);
    UNIT_END();
}
