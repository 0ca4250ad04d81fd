/* Small shared helpers: whole-file I/O (atomic writes), id lists, clock. */
#include "core/core.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int cis2_read_file(const char *path, char **buf, size_t *len, char *err)
{
    *buf = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot open: %s", path, strerror(errno));
        return 1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, CIS2_ERR_LEN, "%s: not a regular file", path);
        close(fd);
        return 1;
    }
    size_t n = (size_t)sb.st_size;
    char *b = malloc(n + 1);
    if (!b) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory (%zu bytes)", path, n);
        close(fd);
        return 1;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: read failed: %s", path,
                     r ? strerror(errno) : "short read");
            free(b);
            close(fd);
            return 1;
        }
        got += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

int cis2_write_file_atomic(const char *path, const void *buf, size_t len, char *err)
{
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 32);
    if (!tmp) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
        return 1;
    }
    snprintf(tmp, pl + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot write: %s", path, strerror(errno));
        free(tmp);
        return 1;
    }
    const char *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: write failed: %s", path, strerror(errno));
            close(fd);
            unlink(tmp);
            free(tmp);
            return 1;
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0 && errno != EINVAL) {
        snprintf(err, CIS2_ERR_LEN, "%s: fsync failed: %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return 1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot rename into place: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return 1;
    }
    free(tmp);
    return 0;
}

int cis2_parse_ids(const char *s, int32_t **ids, int *n, char *err)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 16, cnt = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    const char *p = s;
    if (!*p) {
        free(v);
        snprintf(err, CIS2_ERR_LEN, "empty token id list");
        return 1;
    }
    while (1) {
        if (*p < '0' || *p > '9') {
            free(v);
            snprintf(err, CIS2_ERR_LEN,
                     "bad token id list '%.60s': expected a decimal id at offset %d", s,
                     (int)(p - s));
            return 1;
        }
        if (*p == '0' && p[1] >= '0' && p[1] <= '9') {
            free(v);
            snprintf(err, CIS2_ERR_LEN, "bad token id list '%.60s': leading zero", s);
            return 1;
        }
        int64_t x = 0;
        while (*p >= '0' && *p <= '9') {
            x = x * 10 + (*p - '0');
            if (x > 2147483647) {
                free(v);
                snprintf(err, CIS2_ERR_LEN, "bad token id list '%.60s': id too large", s);
                return 1;
            }
            p++;
        }
        if (cnt == cap) {
            cap *= 2;
            int32_t *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                snprintf(err, CIS2_ERR_LEN, "out of memory");
                return 1;
            }
            v = nv;
        }
        v[cnt++] = (int32_t)x;
        if (*p == 0) break;
        if (*p != ',') {
            free(v);
            snprintf(
                err, CIS2_ERR_LEN,
                "bad token id list '%.60s': unexpected '%c' (ids are comma-separated, no spaces)",
                s, *p);
            return 1;
        }
        p++;
    }
    *ids = v;
    *n = (int)cnt;
    return 0;
}

char *cis2_format_ids(const int32_t *ids, int n)
{
    char *o = malloc((size_t)n * 12 + 1), *p = o;
    if (!o) return NULL;
    *p = 0;
    for (int i = 0; i < n; i++) p += sprintf(p, i ? ",%d" : "%d", ids[i]);
    return o;
}

double cis2_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
void cis2_free(void *p) { free(p); }
