/* Files the way a hostile file system cannot abuse them: inputs are opened
 * without blocking and refused unless they are regular files (a FIFO would
 * hang a plain open, a device would stream forever), sized by fstat before
 * anything is read; outputs are written to a fresh temporary file that
 * nobody can pre-plant (O_CREAT|O_EXCL|O_NOFOLLOW, random name, same
 * directory), fsync'd, then renamed over a path that is a regular file or
 * nothing — never over a device, FIFO, socket or directory. */
#include "core/core.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

int cis2_open_input(const char *path, int *fd_out, uint64_t *size, char *err)
{
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        /* "-" is standard input only where a command says so (cis2 verify -);
         * elsewhere it is a file name, and when no such file exists the user
         * meant standard input: say that, not a bare "No such file". */
        if (errno == ENOENT && !strcmp(path, "-"))
            snprintf(err, CIS2_ERR_LEN,
                     "-: this input is not read from standard input; give a file name (./- for a "
                     "file named -)");
        else snprintf(err, CIS2_ERR_LEN, "%s: cannot open: %s", path, strerror(errno));
        return 1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return 1;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, CIS2_ERR_LEN, "%s: not a regular file (%s)", path, kind_of(sb.st_mode));
        close(fd);
        return 1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    *size = (uint64_t)sb.st_size;
    return 0;
}

int cis2_read_fd(int fd, void *buf, size_t n, const char *path, char *err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: read failed: %s", path,
                     r ? strerror(errno) : "the file shrank while it was read");
            return 1;
        }
        got += (size_t)r;
    }
    return 0;
}

int cis2_read_file_max(const char *path, size_t max, char **buf, size_t *len, char *err)
{
    *buf = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    if (cis2_open_input(path, &fd, &size, err)) return 1;
    if (max && size > max) {
        snprintf(err, CIS2_ERR_LEN, "%s: %llu bytes is more than the %zu this input may have", path,
                 (unsigned long long)size, max);
        close(fd);
        return 1;
    }
    if (size > (uint64_t)SIZE_MAX - 1) {
        snprintf(err, CIS2_ERR_LEN, "%s: too large", path);
        close(fd);
        return 1;
    }
    size_t n = (size_t)size;
    char *b = malloc(n + 1);
    if (!b) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory (%zu bytes)", path, n);
        close(fd);
        return 1;
    }
    if (cis2_read_fd(fd, b, n, path, err)) {
        free(b);
        close(fd);
        return 1;
    }
    /* More bytes than the size said (a file still being written, or one whose
     * size is not its length, as in /proc): the bytes read are not the file,
     * and reading on might never end, so neither is guessed. */
    char more;
    ssize_t r;
    do r = read(fd, &more, 1);
    while (r < 0 && errno == EINTR);
    close(fd);
    if (r > 0) {
        snprintf(err, CIS2_ERR_LEN,
                 "%s: holds more than the %zu bytes its size says (still being written?)", path, n);
        free(b);
        return 1;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

int cis2_read_fd_max(int fd, size_t max, const char *what, char **buf, size_t *len, char *err)
{
    *buf = NULL;
    *len = 0;
    size_t cap = 65536, n = 0;
    char *b = malloc(cap + 1);
    if (!b) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", what);
        return 1;
    }
    for (;;) {
        if (n == cap) {
            if (cap > max) break; /* read one byte past max at most: then refuse */
            size_t nc = cap * 2;
            char *nb = realloc(b, nc + 1);
            if (!nb) {
                free(b);
                snprintf(err, CIS2_ERR_LEN, "%s: out of memory", what);
                return 1;
            }
            b = nb;
            cap = nc;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: read failed: %s", what, strerror(errno));
            free(b);
            return 1;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    if (n > max) {
        snprintf(err, CIS2_ERR_LEN, "%s: more than the %zu bytes this input may have", what, max);
        free(b);
        return 1;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

int cis2_write_fd(int fd, const void *buf, size_t len, const char *what, char *err)
{
    const char *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: write failed: %s", what,
                     w < 0 ? strerror(errno) : "no progress");
            return 1;
        }
        done += (size_t)w;
    }
    return 0;
}

int cis2_read_file(const char *path, char **buf, size_t *len, char *err)
{
    return cis2_read_file_max(path, 0, buf, len, err);
}

int cis2_path_join(char *out, size_t cap, const char *dir, const char *name, char *err)
{
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: path too long", dir);
        return 1;
    }
    return 0;
}

int cis2_check_output_path(const char *path, char *err)
{
    if (!path || !*path) {
        snprintf(err, CIS2_ERR_LEN, "an output path may not be empty");
        return 1;
    }
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return 0; /* a new file */
        snprintf(err, CIS2_ERR_LEN, "%s: cannot write: %s", path, strerror(errno));
        return 1;
    }
    if (S_ISREG(sb.st_mode)) return 0;
    snprintf(err, CIS2_ERR_LEN, "%s: refusing to replace %s with a regular file", path,
             kind_of(sb.st_mode));
    return 1;
}

/* A temporary name nobody can predict: 64 bits from the clock, the pid and
 * an address, mixed; O_EXCL makes a collision (or a planted file) an error
 * we retry, never a write through someone else's link. */
static void tmp_name(char *out, size_t cap, const char *path, unsigned attempt)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 17) ^
                 (uint64_t)(uintptr_t)out ^ ((uint64_t)attempt * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    snprintf(out, cap, "%s.tmp.%016llx", path, (unsigned long long)x);
}

int cis2_write_file_atomic_with(const char *path, cis2_body_fn body, void *ctx, char *err)
{
    if (cis2_check_output_path(path, err)) return 1;
    size_t cap = strlen(path) + 32;
    char *tmp = malloc(cap);
    if (!tmp) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
        return 1;
    }
    int fd = -1;
    for (unsigned attempt = 0; attempt < 16 && fd < 0; attempt++) {
        tmp_name(tmp, cap, path, attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot write: %s", path, strerror(errno));
        free(tmp);
        return 1;
    }
    /* A file replaced keeps its permission bits (a results file made
     * private with chmod 600 stays private), set before any byte is in
     * the temporary file. WASI has no permission bits. */
#ifndef __wasi__
    struct stat old;
    if (lstat(path, &old) == 0 && S_ISREG(old.st_mode)) fchmod(fd, old.st_mode & 0777);
#endif
    const char *what = body(fd, ctx, err) ? "" : NULL; /* "": err says it */
    if (!what && fsync(fd) != 0 && errno != EINVAL) what = "fsync failed";
    int saved = errno;
    if (close(fd) != 0 && !what) { /* NFS and friends report a failed write here */
        what = "close failed";
        saved = errno;
    }
    if (!what && cis2_check_output_path(path, err)) { /* replaced by a non-file meanwhile */
        unlink(tmp);
        free(tmp);
        return 1;
    }
    if (!what && rename(tmp, path) != 0) {
        what = "cannot rename into place";
        saved = errno;
    }
    if (what) {
        if (*what) snprintf(err, CIS2_ERR_LEN, "%s: %s: %s", path, what, strerror(saved));
        unlink(tmp);
        free(tmp);
        return 1;
    }
    free(tmp);
    return 0;
}

typedef struct {
    const void *buf;
    size_t len;
    const char *path;
} whole_body;

static int write_whole(int fd, void *ctx, char *err)
{
    const whole_body *b = ctx;
    return cis2_write_fd(fd, b->buf, b->len, b->path, err);
}

int cis2_write_file_atomic(const char *path, const void *buf, size_t len, char *err)
{
    whole_body b = { buf, len, path };
    return cis2_write_file_atomic_with(path, write_whole, &b, err);
}
