/* `cis2 quantize`'s output directory changes all at once
 * (docs/quantization.md §3). Written file by file into QDIR, a run killed
 * part-way (a full disk, a file-size limit, a killed job) left the new
 * weights beside the old config.json and tokenizer: a checkpoint that loads
 * and runs and is neither. So the twin is built in a fresh directory beside
 * QDIR, QDIR.quantize-tmp.HEX (mkdir: it never follows a link and fails on
 * any name already there; HEX is 64 bits nobody can predict), made durable,
 * and put in QDIR's place by one rename: renameat2(RENAME_EXCHANGE) swaps the
 * two directories atomically, and the old one, now at the temporary name, is
 * removed. Where the file system has no exchange, QDIR is renamed aside
 * (QDIR.quantize-old.HEX) and the new one renamed in: killed between those
 * two renames, QDIR is missing and both checkpoints lie complete beside it.
 * Killed anywhere else, QDIR holds the whole old checkpoint or the whole new
 * one; a QDIR.quantize-* directory left behind is the interrupted run's and
 * may be removed. */
#include "model/quant.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The files `cis2 quantize` writes (quantize_write.c): all that an existing
 * QDIR may hold, since it is replaced, and so removed, as a whole. */
static const char *const OURS[] = { "config.json", "model.safetensors", "tokenizer.json",
                                    "tokenizer_config.json", "chat_template.jinja" };

static int hook_is(const char *hook, const char *name) { return hook && !strcmp(hook, name); }

/* One of OURS, or the temporary of one that core/io.c's atomic write left
 * when killed (NAME.tmp. and 16 hex digits). */
static int is_ours(const char *n)
{
    for (size_t i = 0; i < sizeof OURS / sizeof *OURS; i++) {
        size_t l = strlen(OURS[i]);
        if (strncmp(n, OURS[i], l)) continue;
        if (!n[l]) return 1;
        if (strncmp(n + l, ".tmp.", 5) || strlen(n + l + 5) != 16) continue;
        if (strspn(n + l + 5, "0123456789abcdef") == 16) return 1;
    }
    return 0;
}

/* QDIR.TAG.HEX, HEX mixed from the clock, the pid, an address and the try
 * (as core/io.c's temporary names): a name someone planted makes mkdir or
 * the rename fail, never a write into their directory. */
static int side_name(char *out, size_t cap, const char *final, const char *tag, unsigned attempt)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 17) ^
                 (uint64_t)(uintptr_t)out ^ ((uint64_t)(attempt + 1) * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return (size_t)snprintf(out, cap, "%s.%s.%016llx", final, tag, (unsigned long long)x) >= cap;
}

static void fsync_path(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    fsync(fd); /* best effort: some file systems refuse it on a directory */
    close(fd);
}

/* The directory that holds final ("." for a bare name). */
static void parent_of(const char *final, char *out, size_t cap)
{
    const char *slash = strrchr(final, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == final) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - final), final);
}

/* Remove dir's entries (files only: nothing is followed or descended into)
 * and dir itself; 0, or errno of the first thing that could not go. */
static int remove_flat(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return e;
    }
    int first = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (unlinkat(fd, de->d_name, 0) != 0 && !first) first = errno;
    }
    closedir(d);
    if (rmdir(dir) != 0 && !first) first = errno;
    return first;
}

/* An existing QDIR's entries: each a regular file of OURS, else refused
 * (a file of the user's would be removed with the old directory). */
static int check_entries(const char *final, char *err)
{
    int fd = open(final, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot read the output directory: %s", final,
                 strerror(errno));
        if (fd >= 0) close(fd);
        return 1;
    }
    int bad = 0;
    struct dirent *de;
    while (!bad && (de = readdir(d))) {
        struct stat st;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        int reg = fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
        if (reg && is_ours(de->d_name)) continue;
        snprintf(err, CIS2_ERR_LEN,
                 "%s/%.200s: not a file cis2 quantize writes; the output directory is replaced "
                 "as a whole, so move it out or give another --out",
                 final, de->d_name);
        bad = 1;
    }
    closedir(d);
    return bad;
}

int cis2_qout_begin(cis2_qout *q, const char *qdir, char *err)
{
    memset(q, 0, sizeof *q);
    size_t n = strlen(qdir);
    while (n > 1 && qdir[n - 1] == '/') n--;
    if (n + 40 >= sizeof q->final) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: path too long", qdir);
        return 1;
    }
    memcpy(q->final, qdir, n);
    q->final[n] = 0;
    const char *base = strrchr(q->final, '/');
    base = base ? base + 1 : q->final;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        snprintf(err, CIS2_ERR_LEN,
                 "%s: name the output directory itself, not '.', '..' or '/' (it is replaced as "
                 "a whole)",
                 qdir);
        return 1;
    }
    struct stat st;
    if (lstat(q->final, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            snprintf(err, CIS2_ERR_LEN,
                     "%s: is a symbolic link; the output directory is replaced as a whole, so "
                     "give the directory itself",
                     qdir);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            snprintf(err, CIS2_ERR_LEN, "%s: exists and is not a directory", qdir);
            return 1;
        }
        if (check_entries(q->final, err)) return 1;
        q->existed = 1;
    } else if (errno != ENOENT) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot create the output directory: %s", qdir,
                 strerror(errno));
        return 1;
    }
    int e = 0;
    for (unsigned attempt = 0; attempt < 16; attempt++) {
        side_name(q->tmp, sizeof q->tmp, q->final, "quantize-tmp", attempt);
        e = mkdir(q->tmp, 0755) == 0 ? 0 : errno;
        if (e != EEXIST) break;
    }
    if (e) {
        char parent[4096];
        parent_of(q->final, parent, sizeof parent);
        snprintf(err, CIS2_ERR_LEN,
                 "%s: cannot make the directory to build the checkpoint in beside %s: %s", parent,
                 qdir, strerror(e));
        q->tmp[0] = 0;
        return 1;
    }
    /* a directory made private (chmod 700) stays private */
    if (q->existed) chmod(q->tmp, st.st_mode & 07777);
    return 0;
}

void cis2_qout_abort(cis2_qout *q)
{
    if (q->tmp[0]) remove_flat(q->tmp);
    q->tmp[0] = 0;
}

int cis2_qout_commit(cis2_qout *q, const char *hook, char *note, char *err)
{
    note[0] = 0;
    char parent[4096], aside[4096];
    parent_of(q->final, parent, sizeof parent);
    fsync_path(q->tmp); /* its entries durable before it becomes QDIR */
    if (hook_is(hook, "kill-before-swap")) raise(SIGKILL);
    if (!q->existed) {
        if (rename(q->tmp, q->final) != 0) {
            snprintf(err, CIS2_ERR_LEN, "%s: cannot rename the new checkpoint into place: %s",
                     q->final, strerror(errno));
            cis2_qout_abort(q);
            return 1;
        }
        q->tmp[0] = 0;
        fsync_path(parent);
        return 0;
    }
    /* QDIR checked again: it must still be the directory, not a link put there since */
    struct stat st;
    if (lstat(q->final, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, CIS2_ERR_LEN, "%s: %s while the checkpoint was written; left as it is",
                 q->final, errno == ENOENT ? "was removed" : "was replaced by a non-directory");
        cis2_qout_abort(q);
        return 1;
    }
    int exchanged = 0, e = EINVAL;
#ifdef RENAME_EXCHANGE
    if (!hook_is(hook, "no-exchange") && !hook_is(hook, "kill-between-renames")) {
        exchanged = renameat2(AT_FDCWD, q->tmp, AT_FDCWD, q->final, RENAME_EXCHANGE) == 0;
        e = exchanged ? 0 : errno;
    }
#endif
    if (exchanged) {
        snprintf(aside, sizeof aside, "%s", q->tmp); /* the old checkpoint is there now */
    } else if (e != EINVAL && e != ENOSYS && e != ENOTSUP && e != EOPNOTSUPP) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot swap the new checkpoint into place: %s", q->final,
                 strerror(e));
        cis2_qout_abort(q);
        return 1;
    } else {
        /* no exchange here: QDIR aside under a fresh name, then the new one in */
        e = EEXIST;
        for (unsigned attempt = 0; attempt < 16 && e == EEXIST; attempt++) {
            struct stat as;
            side_name(aside, sizeof aside, q->final, "quantize-old", attempt);
            if (lstat(aside, &as) == 0) continue;
            e = rename(q->final, aside) == 0 ? 0 : errno;
        }
        if (e) {
            snprintf(err, CIS2_ERR_LEN, "%s: cannot move the old checkpoint aside: %s", q->final,
                     strerror(e));
            cis2_qout_abort(q);
            return 1;
        }
        if (hook_is(hook, "kill-between-renames")) raise(SIGKILL);
        if (rename(q->tmp, q->final) != 0) {
            e = errno;
            int back = rename(aside, q->final) == 0;
            snprintf(err, CIS2_ERR_LEN, "%s: cannot rename the new checkpoint into place: %s%s%s",
                     q->final, strerror(e), back ? "" : "; the old one is at ", back ? "" : aside);
            cis2_qout_abort(q);
            return 1;
        }
    }
    q->tmp[0] = 0;
    fsync_path(parent);
    e = remove_flat(aside);
    if (e)
        snprintf(note, CIS2_ERR_LEN, "%s: the replaced checkpoint is left at %s: %s", q->final,
                 aside, strerror(e));
    return 0;
}
