/* Model loading: config.json -> shapes, model.safetensors -> resident
 * weights (checked against the config through the tensor table, §2.5), and
 * the SHA-256 of all three artifacts (§2.1, §12.1).
 *
 * Hash exactly the bytes you compute on: each file is opened once and read
 * once into memory this process owns; its hash is taken over those bytes
 * and the weights are packed from them, so no rename or overwrite of the
 * files, during or after loading, can make a receipt's hashes disagree with
 * what was computed. The safetensors header is read and validated, and the
 * tensors checked against config.json, before any tensor data is read.
 *
 * The weights pipeline: this thread reads the file in chunks and packs each
 * tensor into tiles as soon as its bytes are in; a second thread hashes
 * the chunks in order behind it; chunks both have passed are given back to
 * the system, so memory holds about one copy of the weights, not two. */
#include "model/model.h"
#include "model/shards.h"
#include <errno.h>
#include <stddef.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if !defined(__wasi__) /* wasm32: no threads; the same pipeline, serially */
#define CIS2_LOAD_THREADS 1
#include <pthread.h>
#endif

#define CHUNK     ((uint64_t)8 << 20)  /* read (and hash) step */
#define WINDOW    ((uint64_t)48 << 20) /* how far reading may run ahead of hashing */
#define WPATH_LEN 1100

/* ------------------------------------------------------------- the hasher */
/* SHA-256 over the image as it is read: on its own thread where there are
 * threads (it trails the reader), inline otherwise. */
typedef struct {
    const uint8_t *image;
    cis2_sha256 sha;
    uint64_t read_pos, hash_pos;
    int read_done, stop;
    double ms;
#if CIS2_LOAD_THREADS
    int threaded;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
#endif
} hasher;

#if CIS2_LOAD_THREADS
static void *hash_thread(void *arg)
{
    hasher *h = arg;
    double t0 = cis2_now_ms();
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->hash_pos == h->read_pos && !h->read_done && !h->stop)
            pthread_cond_wait(&h->cv, &h->mu);
        if (h->stop || h->hash_pos == h->read_pos) break;
        uint64_t a = h->hash_pos, b = h->read_pos;
        if (b - a > CHUNK) b = a + CHUNK;
        pthread_mutex_unlock(&h->mu);
        cis2_sha256_update(&h->sha, h->image + a, (size_t)(b - a));
        pthread_mutex_lock(&h->mu);
        h->hash_pos = b;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    h->ms = cis2_now_ms() - t0;
    return NULL;
}
#endif

static int hasher_start(hasher *h, const uint8_t *image, uint64_t have, char *err)
{
    memset(h, 0, sizeof *h);
    h->image = image;
    h->read_pos = have;
    cis2_sha256_init(&h->sha);
#if CIS2_LOAD_THREADS
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    int rc = pthread_create(&h->th, NULL, hash_thread, h);
    if (rc) {
        snprintf(err, CIS2_ERR_LEN, "cannot start the hashing thread: %s", strerror(rc));
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        return 1;
    }
    h->threaded = 1;
#else
    (void)err;
#endif
    return 0;
}

/* Bytes [0, pos) are in the image; waits while reading is WINDOW ahead of
 * hashing. Returns how far hashing has come. */
static uint64_t hasher_feed(hasher *h, uint64_t pos)
{
#if CIS2_LOAD_THREADS
    if (h->threaded) {
        pthread_mutex_lock(&h->mu);
        h->read_pos = pos;
        pthread_cond_broadcast(&h->cv);
        while (pos - h->hash_pos > WINDOW) pthread_cond_wait(&h->cv, &h->mu);
        uint64_t done = h->hash_pos;
        pthread_mutex_unlock(&h->mu);
        return done;
    }
#endif
    double t0 = cis2_now_ms();
    cis2_sha256_update(&h->sha, h->image + h->hash_pos, (size_t)(pos - h->hash_pos));
    h->ms += cis2_now_ms() - t0;
    h->hash_pos = h->read_pos = pos;
    return pos;
}

/* All read (ok) or abandoned (!ok): waits for the hash thread; the digest goes to out when ok. */
static void hasher_finish(hasher *h, int ok, uint8_t out[32])
{
#if CIS2_LOAD_THREADS
    if (h->threaded) {
        pthread_mutex_lock(&h->mu);
        h->read_done = 1;
        h->stop = !ok;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->th, NULL);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
    }
#endif
    if (ok) cis2_sha256_final(&h->sha, out);
}

/* ------------------------------------------------------------- planning */
/* One tensor to bring into the arena, in file order. */
typedef struct {
    const cis2_st_tensor *t;
    const cis2_st_tensor *scale; /* I8 linears: X.weight_scale, else NULL */
    const cis2_tensor_def *d;
    size_t off;          /* in the arena */
    uint64_t start, end; /* the bytes the job reads, from the data section's start */
    int rows, cols, layer, id;
    int t0, t1; /* float linears: the tiles [t0, t1) this job packs (a slice, see want) */
} job;

typedef struct {
    cis2_model *m;
    const cis2_safetensors *st;
    const char *path;
    char *err;
    uint8_t *used; /* per st tensor */
    job *jobs;
    int n_jobs, cap_jobs;
    size_t arena_len;
    int n_linear;
} plan;

static int cmp_job(const void *a, const void *b)
{
    const job *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static void shape_str(const cis2_st_tensor *t, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < t->ndim && i < 8 && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, i ? ", %lld" : "%lld", (long long)t->shape[i]);
}

/* Whether quantization_config makes this linear int8 (docs/quantization.md
 * §4): the embedding by the Embedding target, the LM head unless ignored,
 * every other linear unless its module is named in `ignore`. */
static int targeted(const cis2_quant_config *q, const cis2_tensor_def *d, const char *name)
{
    if (!q->present) return 0;
    if (d->need == CIS2_NEED_HEAD) return q->lm_head;
    if (d->field == offsetof(cis2_weights, embed) && !d->per_layer) return q->embed;
    size_t n = strlen(name) - strlen(".weight");
    for (int i = 0; i < q->n_ignore; i++)
        if (strlen(q->ignore[i]) == n && !strncmp(q->ignore[i], name, n)) return 0;
    return 1;
}

/* An I8 linear's X.weight_scale: a float [rows, 1] beside it. */
static int want_scale(plan *p, const char *name, int rows, const cis2_st_tensor **out)
{
    char sn[300];
    snprintf(sn, sizeof sn, "%s_scale", name);
    const cis2_st_tensor *s = cis2_st_find(p->st, sn);
    if (!s) {
        snprintf(p->err, CIS2_ERR_LEN, "%s: int8 tensor \"%s\" has no \"%s\" (one scale per row)",
                 p->path, name, sn);
        return 1;
    }
    if (s->dtype == CIS2_DT_I8 || s->ndim != 2 || s->shape[0] != rows || s->shape[1] != 1) {
        char have[128];
        shape_str(s, have, sizeof have);
        snprintf(p->err, CIS2_ERR_LEN,
                 "%s: tensor \"%s\" is %s [%s]; an int8 weight's scale must be a float [%d, 1]",
                 p->path, sn, cis2_dtype_name(s->dtype), have, rows);
        return 1;
    }
    p->used[s - p->st->t] = 1;
    *out = s;
    return 0;
}

/* Check one tensor against the shape config.json implies and queue it. */
static int want(plan *p, const cis2_st_tensor *t, const cis2_tensor_def *d, int layer,
                const char *name)
{
    const cis2_config *c = &p->m->cfg;
    int rows = cis2_tensor_dim(c, d->rows), cols = cis2_tensor_dim(c, d->cols);
    int ndim = d->kind == CIS2_TK_LINEAR ? 2 : 1;
    int i8 = t->dtype == CIS2_DT_I8, tg = d->kind == CIS2_TK_LINEAR && targeted(&p->m->qc, d, name);
    if (i8 != tg) {
        if (!i8)
            snprintf(p->err, CIS2_ERR_LEN,
                     "%s: tensor \"%s\" is %s but config.json's quantization_config makes it "
                     "int8 (I8 with a weight_scale)",
                     p->path, name, cis2_dtype_name(t->dtype));
        else if (d->kind != CIS2_TK_LINEAR)
            snprintf(p->err, CIS2_ERR_LEN, "%s: tensor \"%s\" is I8; only linear weights may be",
                     p->path, name);
        else
            snprintf(p->err, CIS2_ERR_LEN,
                     "%s: tensor \"%s\" is I8 but config.json's quantization_config %s", p->path,
                     name, p->m->qc.present ? "leaves it in float" : "is absent (int8 needs one)");
        return 1;
    }
    if (t->ndim != ndim || t->shape[0] != rows || (ndim == 2 && t->shape[1] != cols)) {
        char have[128];
        shape_str(t, have, sizeof have);
        if (ndim == 2)
            snprintf(p->err, CIS2_ERR_LEN,
                     "%s: tensor \"%s\" has shape [%s] but config.json implies [%d, %d]", p->path,
                     name, have, rows, cols);
        else
            snprintf(p->err, CIS2_ERR_LEN,
                     "%s: tensor \"%s\" has shape [%s] but config.json implies [%d]", p->path, name,
                     have, rows);
        return 1;
    }
    const cis2_st_tensor *sc = NULL;
    if (i8 && want_scale(p, name, rows, &sc)) return 1;
    p->used[t - p->st->t] = 1;
    int linear = d->kind == CIS2_TK_LINEAR;
    uint64_t start = t->offset, end = t->offset + t->nbytes;
    if (sc && sc->offset < start) start = sc->offset;
    if (sc && sc->offset + sc->nbytes > end) end = sc->offset + sc->nbytes;
    /* A float linear is packed in slices of whole tiles, about CHUNK bytes of
     * the file each, as they arrive: the image then never holds a whole large
     * tensor (a 151,936-row embedding is 0.3-0.6 GB) on top of the arena.
     * The same tiles are written, in the same bytes. */
    int ntiles = (rows + CIS2_TILE - 1) / CIS2_TILE, step = ntiles;
    uint64_t tile_bytes = (uint64_t)CIS2_TILE * (uint64_t)cols * cis2_dtype_size(t->dtype);
    if (linear && !sc && tile_bytes > 0 && tile_bytes < CHUNK) step = (int)(CHUNK / tile_bytes);
    int t0 = 0;
    do { /* the whole tensor in one job, or its slices in file order */
        int t1 = ntiles - t0 < step ? ntiles : t0 + step;
        job j = { t,  sc, d, p->arena_len, start, end, rows, cols, layer, linear ? p->n_linear : -1,
                  t0, t1 };
        if (linear && !sc) {
            j.start = t->offset + (uint64_t)t0 * tile_bytes;
            uint64_t e = t->offset + (uint64_t)t1 * tile_bytes;
            j.end = e < end ? e : end;
        }
        if (p->n_jobs == p->cap_jobs) {
            int cap = p->cap_jobs ? 2 * p->cap_jobs : 64;
            job *q = realloc(p->jobs, (size_t)cap * sizeof *q);
            if (!q) {
                snprintf(p->err, CIS2_ERR_LEN, "out of memory");
                return 1;
            }
            p->jobs = q;
            p->cap_jobs = cap;
        }
        p->jobs[p->n_jobs++] = j;
        t0 = t1;
    } while (t0 < ntiles);
    if (linear) {
        p->n_linear++;
        p->m->n_int8 += i8;
        p->arena_len += cis2_weight_bytes(rows, cols, cis2_wfmt_of(t->dtype));
    } else {
        p->arena_len += cis2_align64((size_t)rows * sizeof(float));
    }
    return 0;
}

static void warn(cis2_model *m, const char *fmt, const char *path)
{
    if (m->n_warnings < CIS2_MODEL_MAX_WARNINGS)
        snprintf(m->warnings[m->n_warnings++], CIS2_ERR_LEN, fmt, path);
}

/* §11.1: which matrix is the LM head. The checkpoint decides where
 * config.json is silent; a contradiction is resolved towards the embedding
 * with a warning, as Hugging Face's loader reads such a checkpoint. */
static int plan_head(plan *p, const cis2_tensor_def *d)
{
    cis2_model *m = p->m;
    const cis2_st_tensor *t = cis2_st_find(p->st, d->name);
    int said = m->cfg.tied;
    if (said == 1 && t) {
        p->used[t - p->st->t] = 1; /* hashed with the file, never read */
        warn(m,
             "%s: config.json says tie_word_embeddings=true, so the file's \"lm_head.weight\" is "
             "ignored (the LM head is the embedding, §11.1)",
             p->path);
    }
    if (said == 0 && !t)
        warn(m,
             "%s: config.json says tie_word_embeddings=false but the file has no "
             "\"lm_head.weight\"; the LM head is the embedding (§11.1)",
             p->path);
    m->w.tied = !(t && said != 1);
    m->cfg.tied = m->w.tied;
    return m->w.tied ? 0 : want(p, t, d, -1, d->name);
}

static int make_plan(plan *p)
{
    cis2_model *m = p->m;
    const cis2_config *c = &m->cfg;
    const cis2_safetensors *st = p->st;
    char name[256];
    p->used = calloc((size_t)st->n + 1, 1);
    if (!p->used) {
        snprintf(p->err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    p->arena_len = cis2_align64((size_t)c->n_layers * sizeof(cis2_layer)); /* m->w.layers first */
    /* The global rows, then layer by layer: a layer's weights lie together in
     * the arena, in the order a forward step reads them. */
    for (int l = -1; l < c->n_layers; l++)
        for (int i = 0; i < cis2_tensor_count; i++) {
            const cis2_tensor_def *d = &cis2_tensor_table[i];
            if ((l >= 0) != d->per_layer) continue;
            if (d->need == CIS2_NEED_HEAD) {
                if (plan_head(p, d)) return 1;
                continue;
            }
            cis2_use use = cis2_tensor_use(c, d);
            cis2_tensor_name(d, l, name, sizeof name);
            const cis2_st_tensor *t = cis2_st_find(st, name);
            if (!t && use == CIS2_TENSOR_REQUIRED) {
                snprintf(p->err, CIS2_ERR_LEN, "%s: missing tensor \"%s\" required by config.json",
                         p->path, name);
                return 1;
            }
            if (t && use != CIS2_TENSOR_UNUSED && want(p, t, d, l, name)) return 1;
            if (t && d->need == CIS2_NEED_BIAS) m->cfg.qkv_bias = 1;
        }
    for (int i = 0; i < st->n; i++) {
        if (p->used[i]) continue;
        /* A cached RoPE buffer some exporters keep; CIS-2 recomputes it (§7.1). */
        size_t nl = strlen(st->t[i].name);
        if (nl > 24 && strcmp(st->t[i].name + nl - 24, ".rotary_emb.inv_freq") == 0) continue;
        snprintf(p->err, CIS2_ERR_LEN,
                 "%s: unexpected tensor \"%s\" (not used by a %s config; refusing to ignore it)",
                 p->path, st->t[i].name, cis2_arch_name(c->arch));
        return 1;
    }
    p->m->w.n_linear = p->n_linear;
    p->m->w.n_layers = c->n_layers;
    qsort(p->jobs, (size_t)p->n_jobs, sizeof *p->jobs, cmp_job);
    return 0;
}

static int finite_vec(const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if ((cis2_f2u(v[i]) & 0x7F800000u) == 0x7F800000u) return 0; /* by bit pattern */
    return 1;
}

/* Pack one tensor into the arena from the image, which holds the file's bytes
 * from offset base on. */
static int run_job(plan *p, const job *j, const uint8_t *image, uint64_t base)
{
    /* where the tensor starts, for the jobs that read it whole (a slice reads from j->start) */
    uint64_t at = p->st->data_start + j->t->offset - base;
    uint8_t *dst = (uint8_t *)p->m->arena + j->off;
    void *slot = cis2_tensor_slot(&p->m->w, j->d, j->layer);
    if (j->d->kind == CIS2_TK_LINEAR) {
        cis2_weight *w = slot;
        if (j->scale) {
            int r = cis2_weight_pack_i8(w, dst, image + at,
                                        image + (p->st->data_start + j->scale->offset - base),
                                        j->scale->dtype, j->rows, j->cols);
            if (r >= 0) {
                snprintf(p->err, CIS2_ERR_LEN, "%s: tensor \"%s\" row %d is NaN or Inf", p->path,
                         j->scale->name, r);
                return 1;
            }
        } else /* a slice: its first row is at j->start */
            cis2_weight_pack_tiles(w, dst, image + (p->st->data_start + j->start - base),
                                   j->t->dtype, j->rows, j->cols, j->t0, j->t1);
        w->id = j->id;
        w->layer = j->layer;
        return 0;
    }
    float *v = (float *)dst;
    cis2_dtype_to_f32(j->t->dtype, image + at, (size_t)j->rows, v);
    if (!finite_vec(v, j->rows)) {
        snprintf(p->err, CIS2_ERR_LEN, "%s: tensor \"%s\" holds NaN or Inf", p->path, j->t->name);
        return 1;
    }
    *(const float **)slot = v;
    return 0;
}

/* ------------------------------------------------------------- the file */
static void phase(const cis2_load_opts *o, cis2_load_phase ph, const char *dir)
{
    if (o->hook) o->hook(o->hook_ctx, ph, dir);
}

/* A missing model.safetensors beside a shard index: say how to get one. */
static void sharded_hint(const char *dir, const char *wpath, char *err)
{
    char ipath[1100];
    struct stat sb;
    if (lstat(wpath, &sb) == 0 || errno != ENOENT ||
        (size_t)snprintf(ipath, sizeof ipath, "%s/%s", dir, CIS2_SHARD_INDEX) >= sizeof ipath ||
        lstat(ipath, &sb) != 0)
        return;
    snprintf(err, CIS2_ERR_LEN,
             "%.300s: no such file; the directory holds a sharded checkpoint (%s), and a CIS-2 "
             "run hashes one weights file (§12.1): join the shards first (cis2 join-shards)",
             wpath, CIS2_SHARD_INDEX);
}

/* model.safetensors, first part: the cheap checks (the length, the header, the
 * tensors against config.json, all before a byte of tensor data is read), the
 * plan, and the arena with its layer table. On failure *head and p->jobs/used
 * are freed by weights_close. */
static int weights_open(cis2_model *m, plan *p, int *fd, uint8_t **head, char *err)
{
    cis2_safetensors *st = (cis2_safetensors *)p->st;
    *head = NULL;
    if (cis2_st_open_header(st, p->path, fd, head, err)) {
        sharded_hint(m->dir, p->path, err);
        return -1; /* nothing to close */
    }
    uint64_t size = st->file_len;
    m->file_bytes = size;
    if (size > (uint64_t)SIZE_MAX / 2) {
        snprintf(err, CIS2_ERR_LEN, "%s: too large", p->path);
        return 1;
    }
    if (make_plan(p)) return 1;
    if (!(m->arena = cis2_big_alloc(p->arena_len, &m->arena_len))) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory (%zu bytes of weights)", p->path,
                 p->arena_len);
        return 1;
    }
    m->w.layers = m->arena;
    /* the layer table: a weight the checkpoint lacks (a bias, a q/k norm) stays NULL */
    memset(m->arena, 0, (size_t)m->cfg.n_layers * sizeof(cis2_layer));
    return 0;
}

static void weights_close(plan *p, int fd, uint8_t *head)
{
    close(fd);
    free(head);
    cis2_st_close((cis2_safetensors *)p->st);
    free(p->used);
    free(p->jobs);
}

/* model.safetensors: header first, then the data through the pipeline. */
static int load_weights(cis2_model *m, const char *path, const cis2_load_opts *o, char *err)
{
    int fd, rc = 1;
    cis2_safetensors st;
    plan p = { m, &st, path, err, NULL, NULL, 0, 0, 0, 0 };
    uint8_t *image = NULL, *head;
    size_t image_len = 0;
    int r = weights_open(m, &p, &fd, &head, err);
    if (r < 0) return 1;
    if (r) goto out;
    uint64_t size = st.file_len;
    if (!(image = cis2_big_alloc((size_t)size, &image_len))) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: out of memory (%llu bytes)", path,
                 (unsigned long long)size);
        goto out;
    }
    memcpy(image, head, (size_t)st.data_start);
    phase(o, CIS2_LOAD_WEIGHTS_OPEN, m->dir);

    int hashing = o->skip_hash != CIS2_LOAD_HASH_SKIP;
    hasher h;
    if (hashing && hasher_start(&h, image, st.data_start, err)) goto out;
    uint64_t pos = st.data_start, hashed = 0, released = 0;
    int next = 0, ok = 1;
    while (ok && pos < size) {
        uint64_t n = size - pos < CHUNK ? size - pos : CHUNK;
        if (cis2_read_fd(fd, image + pos, (size_t)n, path, err)) {
            ok = 0;
            break;
        }
        pos += n;
        hashed = hashing ? hasher_feed(&h, pos) : pos;
        while (ok && next < p.n_jobs && st.data_start + p.jobs[next].end <= pos)
            ok = !run_job(&p, &p.jobs[next++], image, 0);
        /* Both the hash and the packing are past these bytes (jobs sorted by start). */
        uint64_t low = next < p.n_jobs ? st.data_start + p.jobs[next].start : pos;
        if (hashed < low) low = hashed;
        released = cis2_big_release(image, released, low);
    }
    if (ok) phase(o, CIS2_LOAD_WEIGHTS_READ, m->dir);
    if (hashing) {
        hasher_finish(&h, ok, m->dg.weights_sha256);
        m->hash_ms = h.ms;
    } else if (o->weights_sha256) {
        memcpy(m->dg.weights_sha256, o->weights_sha256, 32);
    }
    rc = !ok;
out:
    cis2_big_free(image, image_len);
    weights_close(&p, fd, head);
    return rc;
}

/* The first part of a load: config.json and tokenizer.json, each read once,
 * hashed and parsed from the same bytes; wpath gets model.safetensors' path. */
static int load_texts_pinned(cis2_model *m, const char *dir, const cis2_load_opts *o, char *wpath,
                             char *err);
static int load_finish_pinned(cis2_model *m, double t0, const cis2_load_opts *o, char *err);

/* config.json's numbers (strtod, the §2.3 casts) and the §7.2 inv_freq table
 * are computed in the pinned environment whatever the caller's thread has set
 * (§1.2 RNE, §1.3 FTZ/DAZ), and the caller's control register comes back. */
static int load_texts(cis2_model *m, const char *dir, const cis2_load_opts *o, char *wpath,
                      char *err)
{
    uint64_t saved;
    if (cis2_fpenv_enter(&saved, err)) return 1;
    int rc = load_texts_pinned(m, dir, o, wpath, err);
    cis2_fpenv_write(saved);
    return rc;
}

static int load_finish(cis2_model *m, double t0, const cis2_load_opts *o, char *err)
{
    uint64_t saved;
    if (cis2_fpenv_enter(&saved, err)) return 1;
    int rc = load_finish_pinned(m, t0, o, err);
    cis2_fpenv_write(saved);
    return rc;
}

static int load_texts_pinned(cis2_model *m, const char *dir, const cis2_load_opts *o, char *wpath,
                             char *err)
{
    memset(m, 0, sizeof *m);
    if ((size_t)snprintf(m->dir, sizeof m->dir, "%s", dir) >= sizeof m->dir) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: path too long", dir);
        return 1;
    }
    char cpath[1100], tpath[1100];
    if (cis2_path_join(cpath, sizeof cpath, dir, "config.json", err) ||
        cis2_path_join(wpath, WPATH_LEN, dir, "model.safetensors", err) ||
        cis2_path_join(tpath, sizeof tpath, dir, "tokenizer.json", err))
        return 1;
    int skip = o->skip_hash == CIS2_LOAD_HASH_SKIP;

    char *cbuf;
    size_t clen;
    if (cis2_read_file_max(cpath, CIS2_CONFIG_MAX, &cbuf, &clen, err)) return 1;
    int rc = cis2_config_parse(cbuf, clen, cpath, &m->cfg, err);
    if (!rc) rc = cis2_quant_config_parse(cbuf, clen, cpath, &m->qc, err);
    if (!rc) cis2_sha256_buf(cbuf, clen, m->dg.config_sha256);
    free(cbuf);
    if (rc) return 1;
    phase(o, CIS2_LOAD_CONFIG_READ, m->dir);
    /* §12.1 item 2: tokenizer.json is hashed by every run, and parsed from
     * the same bytes (a tokenizer we cannot reproduce only disables text). */
    char *tbuf;
    size_t tlen;
    if (cis2_read_file_max(tpath, CIS2_TOKENIZER_MAX, &tbuf, &tlen, err)) {
        struct stat sb;
        if (lstat(tpath, &sb) != 0 && errno == ENOENT)
            snprintf(err, CIS2_ERR_LEN,
                     "%.200s: cannot open: %s (every CIS-2 run hashes tokenizer.json, §12.1)",
                     tpath, strerror(errno));
        return 1;
    }
    if (!skip) cis2_sha256_buf(tbuf, tlen, m->dg.tokenizer_sha256);
    else if (o->tokenizer_sha256) memcpy(m->dg.tokenizer_sha256, o->tokenizer_sha256, 32);
    int trc = cis2_tokenizer_parse(&m->tokenizer, tbuf, tlen, tpath, m->tokenizer_err);
    free(tbuf);
    if (trc < 0) { /* memory ran out: a failed load, not a model without text */
        snprintf(err, CIS2_ERR_LEN, "%s", m->tokenizer_err);
        return 1;
    }
    if (trc) m->tokenizer = NULL;
    phase(o, CIS2_LOAD_TOKENIZER_READ, m->dir);
    return 0;
}

/* The last part, once the weights are in: the arena made read-only, the RoPE
 * and table digests. The caller unloads m on failure. */
static int load_finish_pinned(cis2_model *m, double t0, const cis2_load_opts *o, char *err)
{
    cis2_big_protect(m->arena, m->arena_len); /* the loaded model is never written again */

    const cis2_config *c = &m->cfg;
    m->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(float));
    if (!m->inv_freq) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    cis2_inv_freq(c->head_dim, c->rope_theta, m->inv_freq);
    if (c->rope_scaling == CIS2_ROPE_LLAMA3) /* the table §7.3 reads, and §7.2 hashes */
        cis2_inv_freq_llama3(m->inv_freq, c->head_dim / 2, c->rope_factor, c->rope_low_freq_factor,
                             c->rope_high_freq_factor, c->rope_original_max_pos);
    cis2_f32_digest(m->inv_freq, (size_t)(c->head_dim / 2), m->dg.inv_freq_digest);
    cis2_table_digest(m->dg.table_digest);
    m->load_ms = cis2_now_ms() - t0;
    phase(o, CIS2_LOAD_DONE, m->dir);
    return 0;
}

int cis2_model_load(cis2_model *m, const char *dir, const cis2_load_opts *o, char *err)
{
    cis2_load_opts defo = { 0 };
    if (!o) o = &defo;
    double t0 = cis2_now_ms();
    char wpath[WPATH_LEN];
    if (load_texts(m, dir, o, wpath, err)) return 1;
    if (load_weights(m, wpath, o, err) || load_finish(m, t0, o, err)) {
        cis2_model_unload(m);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------- pushed weights */
/* The weights file pushed in chunk by chunk (wasm32: the page's reads are
 * asynchronous, the loader is not; cis2.h, cis2_model_push_open). The chunks
 * land in a window that holds only the bytes not yet packed: its capacity is
 * the largest span one job reads plus the largest chunk, so a job's bytes are
 * always in it contiguously, and the whole file is never held (§12.1: what is
 * hashed is what lands in the window, see cis2_model_push_feed). */
/* CIS2_HASH_CALLER: the digests cis2_model_set_digest brings in. */
#define CALLER_DIGESTS ((1 << CIS2_DIGEST_WEIGHTS) | (1 << CIS2_DIGEST_TOKENIZER))

struct cis2_model_push {
    cis2_model *m; /* the caller's once cis2_model_push_end succeeds, freed otherwise */
    cis2_load_opts o;
    char path[WPATH_LEN];
    cis2_safetensors st;
    plan p;
    int fd;
    uint8_t *head, *win;
    size_t win_len;
    uint64_t cap, base, pos, want; /* the window holds file bytes [base, pos) */
    size_t max_chunk;
    int next, hashing;
    int failed; /* a buf or feed failed: only cis2_model_push_end remains */
    cis2_sha256 sha;
    double t0;
};

static void push_free(cis2_model_push *w)
{
    cis2_big_free(w->win, w->win_len);
    weights_close(&w->p, w->fd, w->head);
    free(w);
}

/* config.json, tokenizer.json and the weights' header into m (w->m), the plan
 * and the window; on failure m is unloaded and w freed. */
static int push_begin(cis2_model_push *w, const char *dir, size_t max_chunk, char *err)
{
    cis2_model *m = w->m;
    w->p = (plan){ m, &w->st, w->path, err, NULL, NULL, 0, 0, 0, 0 };
    if (load_texts(m, dir, &w->o, w->path, err)) {
        free(w);
        return 1;
    }
    int r = weights_open(m, &w->p, &w->fd, &w->head, err);
    if (r < 0) {
        free(w);
        cis2_model_unload(m);
        return 1;
    }
    uint64_t span = 0;
    for (int i = 0; i < w->p.n_jobs; i++)
        if (w->p.jobs[i].end - w->p.jobs[i].start > span)
            span = w->p.jobs[i].end - w->p.jobs[i].start;
    w->max_chunk = max_chunk;
    w->cap = span + max_chunk < w->st.file_len ? span + max_chunk : w->st.file_len;
    if (!r && !(w->win = cis2_big_alloc((size_t)w->cap, &w->win_len))) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: out of memory (%llu bytes)", w->path,
                 (unsigned long long)w->cap);
        r = 1;
    }
    if (r) {
        push_free(w);
        cis2_model_unload(m);
        return 1;
    }
    w->hashing = w->o.skip_hash != CIS2_LOAD_HASH_SKIP;
    if (w->hashing) cis2_sha256_init(&w->sha);
    phase(&w->o, CIS2_LOAD_WEIGHTS_OPEN, m->dir);
    return 0;
}

/* The arguments cis2_model_open and cis2_model_push_open share: a directory,
 * and a hash mode (NULL options: CIS2_HASH_FULL). FN names the call. */
static int open_args(const char *fn, const char *dir, const cis2_model_opts *o,
                     cis2_hash_mode *mode, char *err)
{
    if (!dir) {
        snprintf(err, CIS2_ERR_LEN, "%s: no model directory (dir is NULL)", fn);
        return 1;
    }
    *mode = o ? o->hash : CIS2_HASH_FULL;
    if (*mode != CIS2_HASH_FULL && *mode != CIS2_HASH_SKIP && *mode != CIS2_HASH_CALLER) {
        snprintf(err, CIS2_ERR_LEN,
                 "%s: unknown hash mode %d (expected CIS2_HASH_FULL, CIS2_HASH_SKIP or "
                 "CIS2_HASH_CALLER)",
                 fn, (int)*mode);
        return 1;
    }
    return 0;
}

static int push_open_impl(cis2_model_push **out, const char *dir, const cis2_model_opts *o,
                          size_t max_chunk, char *err)
{
    if (!out) {
        snprintf(err, CIS2_ERR_LEN, "cis2_model_push_open: no handle to fill (w is NULL)");
        return 1;
    }
    *out = NULL;
    cis2_hash_mode mode;
    if (open_args("cis2_model_push_open", dir, o, &mode, err)) return 1;
    if (max_chunk == 0) {
        snprintf(err, CIS2_ERR_LEN, "cis2_model_push_open: max_chunk is 0 (at least 1 byte)");
        return 1;
    }
    double t0 = cis2_now_ms();
    cis2_model_push *w = calloc(1, sizeof *w);
    cis2_model *m = malloc(sizeof *m);
    if (!w || !m) {
        free(w);
        free(m);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    w->m = m;
    w->t0 = t0;
    w->o.skip_hash = mode == CIS2_HASH_FULL ? 0 : CIS2_LOAD_HASH_SKIP;
    if (push_begin(w, dir, max_chunk, err)) { /* w is freed, m unloaded */
        free(m);
        return 1;
    }
    m->caller_digests = mode == CIS2_HASH_CALLER;
    m->digests_pending = m->caller_digests ? CALLER_DIGESTS : 0;
    *out = w;
    return 0;
}

static uint8_t *push_buf(cis2_model_push *w, size_t n, char *err)
{
    if (n > w->st.file_len - w->pos || n > w->max_chunk) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: %zu bytes at %llu: past its %llu bytes or over %llu",
                 w->path, n, (unsigned long long)w->pos, (unsigned long long)w->st.file_len,
                 (unsigned long long)w->max_chunk);
        return NULL;
    }
    if (w->pos + n - w->base > w->cap) {
        /* Slide: keep only what the next job still needs (jobs sorted by start). */
        uint64_t low = w->next < w->p.n_jobs ? w->st.data_start + w->p.jobs[w->next].start : w->pos;
        if (low > w->pos) low = w->pos;
        if (low > w->base) memmove(w->win, w->win + (low - w->base), (size_t)(w->pos - low));
        w->base = low;
        if (w->pos + n - w->base > w->cap) { /* cannot happen: cap >= a job's span + a chunk */
            snprintf(err, CIS2_ERR_LEN, "%.200s: internal: window too small", w->path);
            return NULL;
        }
    }
    w->want = n;
    return w->win + (w->pos - w->base);
}

static int push_feed(cis2_model_push *w, size_t n, char *err)
{
    if (n > w->want) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: %zu bytes pushed where %llu were asked", w->path, n,
                 (unsigned long long)w->want);
        return 1;
    }
    /* These window bytes are hashed (when the loader hashes) and packed, and
     * nothing writes them before the jobs that read them have run. */
    if (w->hashing) cis2_sha256_update(&w->sha, w->win + (w->pos - w->base), n);
    w->pos += n;
    w->want = 0;
    w->p.err = err;
    while (w->next < w->p.n_jobs && w->st.data_start + w->p.jobs[w->next].end <= w->pos)
        if (run_job(&w->p, &w->p.jobs[w->next++], w->win, w->base)) return 1;
    return 0;
}

static int push_end(cis2_model_push *w, int ok, char *err)
{
    cis2_model *m = w->m;
    int rc = 1;
    if (ok && w->failed) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: an earlier chunk failed; the load cannot end",
                 w->path);
    } else if (ok && w->pos != w->st.file_len) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: short: %llu of %llu bytes", w->path,
                 (unsigned long long)w->pos, (unsigned long long)w->st.file_len);
    } else if (ok) {
        phase(&w->o, CIS2_LOAD_WEIGHTS_READ, m->dir);
        if (w->hashing) cis2_sha256_final(&w->sha, m->dg.weights_sha256);
        else if (w->o.weights_sha256) memcpy(m->dg.weights_sha256, w->o.weights_sha256, 32);
        rc = load_finish(m, w->t0, &w->o, err);
    }
    push_free(w);
    if (rc) cis2_model_unload(m);
    return rc;
}

/* The public entry points: the caller's control register, sticky flags
 * included, comes back (§1.3, as cis2_model_open), and a message stays one
 * line whatever the file's strings held. */
int cis2_model_push_open(cis2_model_push **w, const char *dir, const cis2_model_opts *o,
                         size_t max_chunk, char *err)
{
    uint64_t saved = cis2_fpenv_read();
    int rc = push_open_impl(w, dir, o, max_chunk, err);
    cis2_fpenv_write(saved);
    if (rc) cis2_err_one_line(err);
    return rc;
}

uint8_t *cis2_model_push_buf(cis2_model_push *w, size_t n, char *err)
{
    if (!w) {
        snprintf(err, CIS2_ERR_LEN, "cis2_model_push_buf: no load (w is NULL)");
        return NULL;
    }
    uint8_t *p = NULL;
    if (w->failed)
        snprintf(err, CIS2_ERR_LEN, "%.200s: an earlier chunk failed; end the load", w->path);
    else if (!(p = push_buf(w, n, err))) w->failed = 1;
    if (!p) cis2_err_one_line(err);
    return p;
}

int cis2_model_push_feed(cis2_model_push *w, size_t n, char *err)
{
    if (!w) {
        snprintf(err, CIS2_ERR_LEN, "cis2_model_push_feed: no load (w is NULL)");
        return 1;
    }
    int rc = 1;
    if (w->failed) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: an earlier chunk failed; end the load", w->path);
    } else {
        uint64_t saved = cis2_fpenv_read();
        rc = push_feed(w, n, err);
        cis2_fpenv_write(saved);
        w->failed = rc;
    }
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_model_push_end(cis2_model_push *w, int ok, cis2_model **out, char *err)
{
    if (out) *out = NULL;
    if (!w) {
        snprintf(err, CIS2_ERR_LEN, "cis2_model_push_end: no load (w is NULL)");
        return 1;
    }
    cis2_model *m = w->m;
    if (ok && !out) {
        push_end(w, 0, err); /* nowhere to put the model: abandon it */
        free(m);
        snprintf(err, CIS2_ERR_LEN, "cis2_model_push_end: no model to fill (m is NULL)");
        return 1;
    }
    uint64_t saved = cis2_fpenv_read();
    int rc = push_end(w, ok, err); /* frees w; m unloaded unless it ended well */
    cis2_fpenv_write(saved);
    if (rc || !ok) {
        free(m);
        if (rc && ok) cis2_err_one_line(err);
        return ok ? rc : 0;
    }
    *out = m;
    return 0;
}

int cis2_model_set_digest(cis2_model *m, cis2_digest_kind which, const uint8_t sha256[32],
                          char *err)
{
    static const char *const file[2] = { "model.safetensors", "tokenizer.json" };
    if (!m || !sha256) {
        snprintf(err, CIS2_ERR_LEN, "cis2_model_set_digest: %s is NULL", m ? "the digest" : "m");
        return 1;
    }
    if (which != CIS2_DIGEST_WEIGHTS && which != CIS2_DIGEST_TOKENIZER) {
        snprintf(err, CIS2_ERR_LEN,
                 "cis2_model_set_digest: unknown digest %d (expected CIS2_DIGEST_WEIGHTS or "
                 "CIS2_DIGEST_TOKENIZER)",
                 (int)which);
        return 1;
    }
    if (!m->caller_digests) {
        snprintf(err, CIS2_ERR_LEN,
                 "cis2_model_set_digest: the model was not loaded with CIS2_HASH_CALLER; its "
                 "%s digest is the loader's",
                 file[which]);
        return 1;
    }
    if (!(m->digests_pending & 1 << which)) {
        snprintf(err, CIS2_ERR_LEN, "cis2_model_set_digest: the %s digest is set already",
                 file[which]);
        return 1;
    }
    memcpy(which == CIS2_DIGEST_WEIGHTS ? m->dg.weights_sha256 : m->dg.tokenizer_sha256, sha256,
           32);
    m->digests_pending &= ~(1 << which);
    return 0;
}

int cis2_model_digests_pending(const cis2_model *m) { return m ? m->digests_pending : 0; }

void cis2_model_unload(cis2_model *m)
{
    cis2_big_free(m->arena, m->arena_len);
    free(m->inv_freq);
    cis2_tokenizer_free(m->tokenizer);
    cis2_quant_config_free(&m->qc);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ public API */
static int cis2_model_open_impl(cis2_model **out, const char *dir, const cis2_model_opts *o,
                                char *err)
{
    *out = NULL;
    cis2_hash_mode mode;
    if (open_args("cis2_model_open", dir, o, &mode, err)) return 1;
    cis2_model *m = malloc(sizeof *m);
    if (!m) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    cis2_load_opts lo = { 0 };
    lo.skip_hash = mode == CIS2_HASH_FULL ? 0 : CIS2_LOAD_HASH_SKIP;
    /* the caller's control register, sticky flags included, comes back (§1.3) */
    uint64_t saved = cis2_fpenv_read();
    int rc = cis2_model_load(m, dir, &lo, err);
    cis2_fpenv_write(saved);
    if (rc) {
        free(m);
        return 1;
    }
    m->caller_digests = mode == CIS2_HASH_CALLER;
    m->digests_pending = m->caller_digests ? CALLER_DIGESTS : 0;
    *out = m;
    return 0;
}

void cis2_model_free(cis2_model *m)
{
    if (!m) return;
    cis2_model_unload(m);
    free(m);
}

const cis2_config *cis2_model_config(const cis2_model *m) { return &m->cfg; }
const cis2_digests *cis2_model_digests(const cis2_model *m) { return &m->dg; }
const char *cis2_model_dtype(const cis2_model *m) { return m->n_int8 ? "int8-row" : "fp32"; }

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cis2_model_int8_digest(const cis2_model *m, uint8_t out[32])
{
    if (!m->n_int8) return 1;
    /* "NAME\0" then the weight's index into `all`, sorted by name */
    char **names = calloc((size_t)m->w.n_linear, sizeof *names);
    const cis2_weight **all = calloc((size_t)m->w.n_linear + 1, sizeof *all);
    int n = 0, rc = 1;
    if (!names || !all) goto out;
    cis2_weights_linears(&m->w, all);
    for (int l = -1; l < m->cfg.n_layers; l++)
        for (int i = 0; i < cis2_tensor_count; i++) {
            const cis2_tensor_def *d = &cis2_tensor_table[i];
            if (d->kind != CIS2_TK_LINEAR || (l >= 0) != d->per_layer) continue;
            const cis2_weight *w = cis2_tensor_slot((cis2_weights *)&m->w, d, l);
            if (!w->tiles || w->fmt != CIS2_WF_I8) continue;
            if (d->need == CIS2_NEED_HEAD && m->w.tied) continue;
            char name[256];
            cis2_tensor_name(d, l, name, sizeof name);
            name[strlen(name) - strlen(".weight")] = 0;
            size_t nl = strlen(name);
            if (!(names[n] = malloc(nl + 8))) goto out;
            memcpy(names[n], name, nl + 1);
            memcpy(names[n] + nl + 1, &w->id, sizeof(int));
            n++;
        }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    cis2_sha256 h;
    cis2_sha256_init(&h);
    for (int i = 0; i < n; i++) {
        int id;
        size_t nl = strlen(names[i]);
        memcpy(&id, names[i] + nl + 1, sizeof id);
        const cis2_weight *w = all[id];
        size_t nq = (size_t)w->rows * (size_t)w->cols;
        int8_t *q = malloc(nq ? nq : 1);
        float *s = malloc((size_t)w->rows * sizeof *s);
        uint8_t *le = malloc((size_t)w->rows * 4);
        if (!q || !s || !le) {
            free(q), free(s), free(le);
            goto out;
        }
        cis2_weight_i8_rows(w, q, s);
        for (int r = 0; r < w->rows; r++) {
            uint32_t b = cis2_f2u(s[r]);
            for (int k = 0; k < 4; k++) le[4 * r + k] = (uint8_t)(b >> (8 * k));
        }
        cis2_sha256_update(&h, names[i], nl + 1);
        cis2_sha256_update(&h, q, nq);
        cis2_sha256_update(&h, le, (size_t)w->rows * 4);
        free(q), free(s), free(le);
    }
    cis2_sha256_final(&h, out);
    rc = 0;
out:
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free((void *)all);
    return rc;
}

int cis2_model_warning_count(const cis2_model *m) { return m->n_warnings; }
const char *cis2_model_warning(const cis2_model *m, int i)
{
    return i >= 0 && i < m->n_warnings ? m->warnings[i] : NULL;
}

static const cis2_tokenizer *cis2_model_tokenizer_impl(const cis2_model *m, char *err)
{
    if (!m->tokenizer && err) snprintf(err, CIS2_ERR_LEN, "%s", m->tokenizer_err);
    return m->tokenizer;
}

/* ---- public entry points: the message stays one line whatever the caller's
 * strings (paths, names) held (docs/errors.md: file names are escaped;
 * SANITIZE leaves what is escaped already as it is). */
int cis2_model_open(cis2_model **out, const char *dir, const cis2_model_opts *o, char *err)
{
    int rc = cis2_model_open_impl(out, dir, o, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

const cis2_tokenizer *cis2_model_tokenizer(const cis2_model *m, char *err)
{
    const cis2_tokenizer *t = cis2_model_tokenizer_impl(m, err);
    if (!t && err) cis2_err_one_line(err); /* err may be NULL (cis2.h) */
    return t;
}
