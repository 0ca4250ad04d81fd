/* Joining a sharded checkpoint (shards.h): the index read and checked
 * against every shard's header, then one file written tensor by tensor, each
 * copied from its shard in bounded chunks (a multi-GB checkpoint is never
 * held in memory). */
#include "model/shards.h"
#include "core/json.h"
#include "model/model.h"
#include "model/st_write.h"
#include "model/weights.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SHARDS 4096
#define COPY_CHUNK ((size_t)4 << 20)

typedef struct {
    char *file; /* as the index names it */
    char path[4096];
    cis2_safetensors st;
    int fd;
    uint8_t *head;
} shard;

typedef struct {
    char *name;
    int shard;
    const cis2_st_tensor *t;
} entry;

typedef struct {
    shard *sh;
    int n_sh;
    entry *e;
    int n_e;
    char ipath[4096];
    const char *out;
    uint8_t *head;
    size_t head_len;
    cis2_sha256 h;
    uint64_t written;
} join_t;

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

/* A shard must be a plain file name in DIR: the index may not reach outside. */
static int shard_name_ok(const char *s, size_t len, const char *ipath, char *err)
{
    char esc[512];
    if (len > 0 && len < 256 && !memchr(s, '/', len) && !memchr(s, '\0', len) && strcmp(s, ".") &&
        strcmp(s, ".."))
        return 1;
    snprintf(err, CIS2_ERR_LEN,
             "%s: weight_map names the shard \"%s\", which is not a file name in its directory",
             ipath, cis2_escape(s, len, esc, sizeof esc, CIS2_ESC_TEXT));
    return 0;
}

static int read_index(join_t *j, const char *dir, char *err)
{
    char *text;
    size_t len;
    json_doc d = { 0 };
    int rc = 1;
    if (cis2_read_file_max(j->ipath, CIS2_SHARD_INDEX_MAX, &text, &len, err)) return 1;
    if (json_parse(&d, text, len, j->ipath, err)) goto out; /* err says why, memory too */
    int dups = 0;
    uint32_t wm = d.nodes[0].type == JSON_OBJECT ? json_get(&d, 0, "weight_map", &dups) : JSON_NONE;
    if (wm == JSON_NONE || dups > 1 || d.nodes[wm].type != JSON_OBJECT || d.nodes[wm].count == 0) {
        snprintf(err, CIS2_ERR_LEN,
                 "%s: needs one \"weight_map\" object naming the shard of every tensor", j->ipath);
        goto out;
    }
    uint32_t n = d.nodes[wm].count; /* no more shards than tensors */
    j->e = calloc(n, sizeof *j->e);
    j->sh = calloc(n < MAX_SHARDS ? n : MAX_SHARDS, sizeof *j->sh);
    if (!j->e || !j->sh) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", j->ipath);
        goto out;
    }
    for (uint32_t k = d.nodes[wm].first; k != JSON_NONE; k = d.nodes[d.nodes[k].next].next) {
        uint32_t v = d.nodes[k].next;
        char esc[512];
        size_t nl, fl;
        entry *e = &j->e[j->n_e];
        if (!(e->name = json_str_dup(&d, k, &nl))) goto oom;
        j->n_e++;
        if (memchr(e->name, '\0', nl)) {
            snprintf(err, CIS2_ERR_LEN, "%s: weight_map has a tensor name with a NUL byte",
                     j->ipath);
            goto out;
        }
        if (d.nodes[v].type != JSON_STRING) {
            snprintf(err, CIS2_ERR_LEN, "%s: weight_map[\"%s\"] is not a file name string",
                     j->ipath, cis2_escape(e->name, nl, esc, sizeof esc, CIS2_ESC_TEXT));
            goto out;
        }
        char *file = json_str_dup(&d, v, &fl);
        if (!file) goto oom;
        if (!shard_name_ok(file, fl, j->ipath, err)) {
            free(file);
            goto out;
        }
        int s = 0;
        while (s < j->n_sh && strcmp(j->sh[s].file, file)) s++;
        if (s < j->n_sh) free(file);
        else if (s == MAX_SHARDS) {
            free(file);
            snprintf(err, CIS2_ERR_LEN, "%s: more than %d shards", j->ipath, MAX_SHARDS);
            goto out;
        } else {
            shard *sh = &j->sh[j->n_sh++];
            sh->file = file;
            sh->fd = -1;
            if (cis2_path_join(sh->path, sizeof sh->path, dir, file, err)) goto out;
        }
        e->shard = s;
    }
    qsort(j->e, (size_t)j->n_e, sizeof *j->e, cmp_entry);
    for (int i = 1; i < j->n_e; i++)
        if (!strcmp(j->e[i - 1].name, j->e[i].name)) {
            char esc[512];
            snprintf(
                err, CIS2_ERR_LEN, "%s: weight_map lists the tensor \"%s\" twice", j->ipath,
                cis2_escape(j->e[i].name, strlen(j->e[i].name), esc, sizeof esc, CIS2_ESC_TEXT));
            goto out;
        }
    rc = 0;
    goto out;
oom:
    snprintf(err, CIS2_ERR_LEN, "%s: out of memory", j->ipath);
out:
    json_free(&d);
    free(text);
    return rc;
}

/* Every index entry is in its shard, and every shard tensor is an entry of
 * that shard (so none is dropped and none is in two shards). */
static int match_shards(join_t *j, char *err)
{
    char esc[512];
    for (int s = 0; s < j->n_sh; s++)
        if (cis2_st_open_header(&j->sh[s].st, j->sh[s].path, &j->sh[s].fd, &j->sh[s].head, err))
            return 1;
    for (int i = 0; i < j->n_e; i++) {
        entry *e = &j->e[i];
        shard *sh = &j->sh[e->shard];
        if (!(e->t = cis2_st_find(&sh->st, e->name))) {
            snprintf(err, CIS2_ERR_LEN, "%s: has no tensor \"%s\", which %s puts there", sh->path,
                     cis2_escape(e->name, strlen(e->name), esc, sizeof esc, CIS2_ESC_TEXT),
                     CIS2_SHARD_INDEX);
            return 1;
        }
    }
    for (int s = 0; s < j->n_sh; s++) {
        const shard *sh = &j->sh[s];
        for (int k = 0; k < sh->st.n; k++) {
            const char *name = sh->st.t[k].name;
            entry key = { (char *)name, 0, NULL };
            const entry *e = bsearch(&key, j->e, (size_t)j->n_e, sizeof *j->e, cmp_entry);
            if (!e || e->shard != s) {
                snprintf(err, CIS2_ERR_LEN, "%s: holds the tensor \"%s\", which %s %s", sh->path,
                         cis2_escape(name, strlen(name), esc, sizeof esc, CIS2_ESC_TEXT),
                         CIS2_SHARD_INDEX, e ? "puts in another shard" : "does not list");
                return 1;
            }
        }
    }
    return 0;
}

/* The output may not replace an input (by device and inode). */
static int out_not_input(const join_t *j, char *err)
{
    struct stat so, si;
    if (stat(j->out, &so) != 0) return 0;
    if (stat(j->ipath, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
        snprintf(err, CIS2_ERR_LEN, "%s: is the checkpoint's %s; give another file", j->out,
                 CIS2_SHARD_INDEX);
        return 1;
    }
    for (int s = 0; s < j->n_sh; s++)
        if (stat(j->sh[s].path, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            char esc[512];
            snprintf(
                err, CIS2_ERR_LEN, "%s: is the shard %s; give another file", j->out,
                cis2_escape(j->sh[s].file, strlen(j->sh[s].file), esc, sizeof esc, CIS2_ESC_TEXT));
            return 1;
        }
    return 0;
}

static int put(int fd, join_t *j, const void *p, size_t n, char *err)
{
    if (cis2_write_fd(fd, p, n, j->out, err)) return 1;
    cis2_sha256_update(&j->h, p, n);
    j->written += n;
    return 0;
}

static int write_body(int fd, void *ctx, char *err)
{
    join_t *j = ctx;
    uint8_t *buf = malloc(COPY_CHUNK);
    if (!buf) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", j->out);
        return 1;
    }
    int rc = put(fd, j, j->head, j->head_len, err);
    for (int i = 0; !rc && i < j->n_e; i++) {
        const shard *sh = &j->sh[j->e[i].shard];
        const cis2_st_tensor *t = j->e[i].t;
        uint64_t at = sh->st.data_start + t->offset, left = t->nbytes;
        while (!rc && left > 0) {
            size_t n = left < COPY_CHUNK ? (size_t)left : COPY_CHUNK;
            ssize_t r = pread(sh->fd, buf, n, (off_t)at);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                snprintf(err, CIS2_ERR_LEN, "%s: read failed: %s", sh->path,
                         r < 0 ? strerror(errno) : "the file shrank");
                rc = 1;
                break;
            }
            rc = put(fd, j, buf, (size_t)r, err);
            at += (uint64_t)r;
            left -= (uint64_t)r;
        }
    }
    free(buf);
    return rc;
}

int cis2_shards_join(const char *dir, const char *out, cis2_join_report *rep, char *err)
{
    join_t j = { 0 };
    cis2_st_out *o = NULL;
    int rc = 1;
    memset(rep, 0, sizeof *rep);
    j.out = out;
    if (cis2_path_join(j.ipath, sizeof j.ipath, dir, CIS2_SHARD_INDEX, err)) return 1;
    if (read_index(&j, dir, err) || match_shards(&j, err) || out_not_input(&j, err) ||
        cis2_check_output_path(out, err))
        goto out;
    if (!(o = calloc((size_t)j.n_e, sizeof *o))) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", j.ipath);
        goto out;
    }
    for (int i = 0; i < j.n_e; i++) {
        const cis2_st_tensor *t = j.e[i].t;
        o[i] = (cis2_st_out){ t->name, cis2_dtype_name(t->dtype), t->ndim, { 0 }, NULL, t->nbytes };
        memcpy(o[i].shape, t->shape, sizeof o[i].shape);
    }
    const char *meta[] = { "format", "pt" };
    uint64_t data_len;
    if (cis2_st_head(o, j.n_e, meta, 1, &j.head, &j.head_len, &data_len, err)) goto out;
    cis2_sha256_init(&j.h);
    if (cis2_write_file_atomic_with(out, write_body, &j, err)) goto out;
    rep->n_shards = j.n_sh;
    rep->n_tensors = j.n_e;
    rep->out_bytes = j.written;
    cis2_sha256_final(&j.h, rep->out_sha256);
    rc = 0;
out:
    free(o);
    free(j.head);
    for (int i = 0; i < j.n_e; i++) free(j.e[i].name);
    free(j.e);
    for (int s = 0; s < j.n_sh; s++) {
        if (j.sh[s].fd >= 0) close(j.sh[s].fd);
        free(j.sh[s].head);
        cis2_st_close(&j.sh[s].st);
        free(j.sh[s].file);
    }
    free(j.sh);
    return rc;
}
