/* Small shared helpers: id lists, the clock, the CPU count, cis2_free. */
#include "core/core.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int cis2_parse_ids_impl(const char *s, int32_t **ids, int *n, char *err)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 16, cnt = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return -1;
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
                return -1;
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
    if (n < 0) return NULL; /* no such list (a size_t of n * 12 would wrap) */
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

/* The affinity mask where the OS keeps one (taskset, a cpuset, Slurm's -c, a
 * container's CPU set), else every online core: a worker for a CPU this
 * process may not use would only wait for another's turn. */
int cis2_cpu_count(void)
{
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n <= 0 ? 1 : n > INT_MAX ? INT_MAX : (int)n;
}
void cis2_free(void *p) { free(p); }

/* ---- public entry points: the message stays one line whatever the caller's
 * strings (paths, names) held (docs/errors.md: file names are escaped;
 * SANITIZE leaves what is escaped already as it is). */
int cis2_parse_ids(const char *s, int32_t **ids, int *n, char *err)
{
    int rc = cis2_parse_ids_impl(s, ids, n, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}
