/* Model loading: config.json → shapes, model.safetensors → weights (checked
 * against the config, §2.5), SHA-256 of all three artifacts (§2.1, §12.1). */
#include "model/model.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#if !defined(__wasi__) /* no threads there: CIS2_LOAD_HASH_ASYNC hashes synchronously */
#define CIS2_ASYNC_HASH 1
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#endif

/* ---- async hashing (load_opts.skip_hash = CIS2_LOAD_HASH_ASYNC): the weights file is hashed on a
 * background thread by reading the file itself (pread), never the mapping, so
 * the fast backend may pack from the mapping and drop its pages meanwhile.
 * Same bytes, same SHA-256 as the synchronous path (tests/unit_fast.c). */
#if CIS2_ASYNC_HASH
typedef struct {
    pthread_t th;
    char wpath[1100];
    size_t expect_len;
    uint8_t wsha[32];
    double ms;
    int rc;
    char err[CIS2_ERR_LEN];
} hash_job;

static void *hash_thread(void *arg)
{
    hash_job *j = arg;
    double t0 = cis2_now_ms();
    j->rc = 1;
    int fd = open(j->wpath, O_RDONLY);
    if (fd < 0) {
        snprintf(j->err, CIS2_ERR_LEN, "%s: cannot open: %s", j->wpath, strerror(errno));
        return NULL;
    }
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    size_t cap = (size_t)4 << 20, done = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        close(fd);
        snprintf(j->err, CIS2_ERR_LEN, "out of memory");
        return NULL;
    }
    cis2_sha256 s;
    cis2_sha256_init(&s);
    for (;;) {
        ssize_t r = pread(fd, buf, cap, (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(j->err, CIS2_ERR_LEN, "%s: read failed: %s", j->wpath, strerror(errno));
            break;
        }
        if (r == 0) break;
        cis2_sha256_update(&s, buf, (size_t)r);
        done += (size_t)r;
    }
    free(buf);
    close(fd);
    if (j->err[0]) return NULL;
    if (done != j->expect_len) {
        snprintf(j->err, CIS2_ERR_LEN,
                 "%s: the file changed size while loading (%zu bytes mapped, %zu read)", j->wpath,
                 j->expect_len, done);
        return NULL;
    }
    cis2_sha256_final(&s, j->wsha);
    j->ms = cis2_now_ms() - t0;
    j->rc = 0;
    return NULL;
}

int cis2_model_hash_join(cis2_model *m, char *err)
{
    hash_job *j = m->hash_job;
    if (!j) return 0;
    pthread_join(j->th, NULL);
    m->hash_job = NULL;
    int rc = j->rc;
    if (rc) {
        if (err) snprintf(err, CIS2_ERR_LEN, "%s", j->err);
    } else {
        memcpy(m->dg.weights_sha256, j->wsha, 32);
        m->hash_ms = j->ms;
    }
    free(j);
    return rc;
}
#else
int cis2_model_hash_join(cis2_model *m, char *err)
{
    (void)m;
    (void)err;
    return 0;
}
#endif

static int path_join(char *out, size_t cap, const char *dir, const char *file, char *err)
{
    if ((size_t)snprintf(out, cap, "%s/%s", dir, file) >= cap) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: path too long", dir);
        return 1;
    }
    return 0;
}

static int finite_vec(const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if ((cis2_f2u(v[i]) & 0x7F800000u) == 0x7F800000u) return 0; /* by bit pattern */
    return 1;
}

typedef struct {
    cis2_model *m;
    char *err;
    const char *path;
    int *used;
} L;

static const cis2_st_tensor *need(L *l, const char *name, int64_t d0, int64_t d1)
{
    const cis2_st_tensor *t = cis2_st_find(&l->m->st, name);
    if (!t) {
        snprintf(l->err, CIS2_ERR_LEN, "%s: missing tensor \"%s\" required by config.json", l->path,
                 name);
        return NULL;
    }
    int ndim = d1 < 0 ? 1 : 2;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        char have[96] = "", *p = have;
        for (int i = 0; i < t->ndim && i < 4; i++)
            p += sprintf(p, i ? ", %lld" : "%lld", (long long)t->shape[i]);
        if (ndim == 2)
            snprintf(l->err, CIS2_ERR_LEN,
                     "%s: tensor \"%s\" has shape [%s] but config.json implies [%lld, %lld]",
                     l->path, name, have, (long long)d0, (long long)d1);
        else
            snprintf(l->err, CIS2_ERR_LEN,
                     "%s: tensor \"%s\" has shape [%s] but config.json implies [%lld]", l->path,
                     name, have, (long long)d0);
        return NULL;
    }
    l->used[t - l->m->st.t] = 1;
    return t;
}

static float *vec_f32(L *l, const char *name, int64_t n)
{
    const cis2_st_tensor *t = need(l, name, n, -1);
    if (!t) return NULL;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        snprintf(l->err, CIS2_ERR_LEN, "%s: out of memory", l->path);
        return NULL;
    }
    cis2_st_to_f32(t, v);
    if (!finite_vec(v, n)) {
        snprintf(l->err, CIS2_ERR_LEN, "%s: tensor \"%s\" holds NaN or Inf", l->path, name);
        free(v);
        return NULL;
    }
    return v;
}

static int linear(L *l, cis2_linear *w, const char *name, int rows, int cols, int need_f32)
{
    const cis2_st_tensor *t = need(l, name, rows, cols);
    if (!t) return 1;
    w->rows = rows;
    w->cols = cols;
    w->dtype = t->dtype;
    w->raw = t->data;
    w->f32 = NULL;
    w->packed = NULL;
    if (need_f32) {
        /* §4.2: widened once at load; the reference kernels read f32. */
        w->f32 = malloc((size_t)rows * (size_t)cols * sizeof(float));
        if (!w->f32) {
            snprintf(l->err, CIS2_ERR_LEN, "%s: out of memory widening \"%s\"", l->path, name);
            return 1;
        }
        cis2_st_to_f32(t, w->f32);
    }
    return 0;
}

int cis2_model_load(cis2_model *m, const char *dir, const cis2_load_opts *o, char *err)
{
    cis2_load_opts defo = { 1, 0 };
    if (!o) o = &defo;
    memset(m, 0, sizeof *m);
    double t0 = cis2_now_ms();
    if ((size_t)snprintf(m->dir, sizeof m->dir, "%s", dir) >= sizeof m->dir) {
        snprintf(err, CIS2_ERR_LEN, "%.200s: path too long", dir);
        return 1;
    }
    char cpath[1100], wpath[1100], tpath[1100];
    if (path_join(cpath, sizeof cpath, dir, "config.json", err) ||
        path_join(wpath, sizeof wpath, dir, "model.safetensors", err) ||
        path_join(tpath, sizeof tpath, dir, "tokenizer.json", err))
        return 1;

    char *cbuf;
    size_t clen;
    if (cis2_read_file(cpath, &cbuf, &clen, err)) return 1;
    int rc = cis2_config_parse(cbuf, clen, cpath, &m->cfg, err);
    if (!rc) cis2_sha256_buf(cbuf, clen, m->dg.config_sha256);
    free(cbuf);
    if (rc) return 1;
    /* §12.1 item 2: tokenizer.json is hashed by every run, and parsed from
     * the same bytes (a tokenizer we cannot reproduce only disables text). */
    char *tbuf;
    size_t tlen;
    if (cis2_read_file(tpath, &tbuf, &tlen, err)) {
        if (errno == ENOENT)
            snprintf(err, CIS2_ERR_LEN,
                     "%s: cannot open: %s (every CIS-2 run hashes tokenizer.json, §12.1)", tpath,
                     strerror(errno));
        return 1;
    }
    if (o->skip_hash != CIS2_LOAD_HASH_SKIP) cis2_sha256_buf(tbuf, tlen, m->dg.tokenizer_sha256);
    if (cis2_tokenizer_parse(&m->tokenizer, tbuf, tlen, tpath, m->tokenizer_err))
        m->tokenizer = NULL;
    free(tbuf);
    if (cis2_st_open(&m->st, wpath, err)) {
        cis2_tokenizer_free(m->tokenizer); /* parsed above; a bad model.safetensors leaked it */
        m->tokenizer = NULL;
        return 1;
    }

    double th = cis2_now_ms();
#if CIS2_ASYNC_HASH
    if (o->skip_hash == CIS2_LOAD_HASH_ASYNC) {
        hash_job *j = calloc(1, sizeof *j);
        if (!j) {
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            goto fail;
        }
        memcpy(j->wpath, wpath, sizeof j->wpath);
        j->expect_len = m->st.map_len;
        int prc = pthread_create(&j->th, NULL, hash_thread, j);
        if (prc) {
            free(j);
            snprintf(err, CIS2_ERR_LEN, "cannot start the hashing thread: %s", strerror(prc));
            goto fail;
        }
        m->hash_job = j;
    } else
#endif
        if (o->skip_hash != CIS2_LOAD_HASH_SKIP)
        cis2_sha256_buf(m->st.map, m->st.map_len, m->dg.weights_sha256);
    m->hash_ms = cis2_now_ms() - th;

    const cis2_config *c = &m->cfg;
    int *used = calloc((size_t)(m->st.n ? m->st.n : 1), sizeof *used);
    if (!used) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        goto fail;
    }
    L l = { m, err, wpath, used };
    int H = c->hidden, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    if (linear(&l, &m->embed, "model.embed_tokens.weight", c->vocab, H, o->need_f32))
        goto fail_used;
    if (!(m->final_norm = vec_f32(&l, "model.norm.weight", H))) goto fail_used;
    const cis2_st_tensor *lmh = cis2_st_find(&m->st, "lm_head.weight");
    if (c->tied) {
        if (lmh) {
            snprintf(err, CIS2_ERR_LEN,
                     "%s: config.json says tie_word_embeddings=true but the file also carries "
                     "\"lm_head.weight\"; refusing to guess which head to use (§11.1)",
                     wpath);
            goto fail_used;
        }
        m->lm_head = m->embed;
    } else if (linear(&l, &m->lm_head, "lm_head.weight", c->vocab, H, o->need_f32)) {
        goto fail_used;
    }
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        goto fail_used;
    }
    for (int i = 0; i < c->n_layers; i++) {
        cis2_layer *y = &m->layers[i];
        char n[160];
#define NM(s) (snprintf(n, sizeof n, "model.layers.%d.%s", i, s), n)
        if (!(y->attn_norm = vec_f32(&l, NM("input_layernorm.weight"), H)) ||
            !(y->mlp_norm = vec_f32(&l, NM("post_attention_layernorm.weight"), H)) ||
            linear(&l, &y->q, NM("self_attn.q_proj.weight"), qd, H, o->need_f32) ||
            linear(&l, &y->k, NM("self_attn.k_proj.weight"), kvd, H, o->need_f32) ||
            linear(&l, &y->v, NM("self_attn.v_proj.weight"), kvd, H, o->need_f32) ||
            linear(&l, &y->o, NM("self_attn.o_proj.weight"), H, qd, o->need_f32) ||
            linear(&l, &y->gate, NM("mlp.gate_proj.weight"), c->inter, H, o->need_f32) ||
            linear(&l, &y->up, NM("mlp.up_proj.weight"), c->inter, H, o->need_f32) ||
            linear(&l, &y->down, NM("mlp.down_proj.weight"), H, c->inter, o->need_f32))
            goto fail_used;
        if (c->qkv_bias) {
            if (!(y->q_bias = vec_f32(&l, NM("self_attn.q_proj.bias"), qd)) ||
                !(y->k_bias = vec_f32(&l, NM("self_attn.k_proj.bias"), kvd)) ||
                !(y->v_bias = vec_f32(&l, NM("self_attn.v_proj.bias"), kvd)))
                goto fail_used;
        }
        if (c->qk_norm) {
            if (!(y->q_norm = vec_f32(&l, NM("self_attn.q_norm.weight"), c->head_dim)) ||
                !(y->k_norm = vec_f32(&l, NM("self_attn.k_norm.weight"), c->head_dim)))
                goto fail_used;
        }
#undef NM
    }
    for (int i = 0; i < m->st.n; i++) {
        if (used[i]) continue;
        /* A cached RoPE buffer some exporters keep; CIS-2 recomputes it (§7.1). */
        size_t nl = strlen(m->st.t[i].name);
        if (nl > 24 && strcmp(m->st.t[i].name + nl - 24, ".rotary_emb.inv_freq") == 0) continue;
        snprintf(err, CIS2_ERR_LEN,
                 "%s: unexpected tensor \"%s\" (not used by a %s config; refusing to ignore it)",
                 wpath, m->st.t[i].name, cis2_arch_name(c->arch));
        goto fail_used;
    }
    free(used);

    m->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(float));
    if (!m->inv_freq) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        goto fail;
    }
    cis2_inv_freq(c->head_dim, c->rope_theta, m->inv_freq);
    cis2_f32_digest(m->inv_freq, (size_t)(c->head_dim / 2), m->dg.inv_freq_digest);
    cis2_table_digest(m->dg.table_digest);
    m->load_ms = cis2_now_ms() - t0;
    return 0;
fail_used:
    free(used);
fail:
    cis2_model_unload(m);
    return 1;
}

static void free_linear(cis2_linear *w)
{
    free(w->f32);
    w->f32 = NULL;
}

void cis2_model_unload(cis2_model *m)
{
    if (m->hash_job) cis2_model_hash_join(m, NULL);
    if (m->layers) {
        for (int i = 0; i < m->cfg.n_layers; i++) {
            cis2_layer *y = &m->layers[i];
            free(y->attn_norm);
            free(y->mlp_norm);
            free_linear(&y->q);
            free_linear(&y->k);
            free_linear(&y->v);
            free_linear(&y->o);
            free_linear(&y->gate);
            free_linear(&y->up);
            free_linear(&y->down);
            free(y->q_bias);
            free(y->k_bias);
            free(y->v_bias);
            free(y->q_norm);
            free(y->k_norm);
        }
        free(m->layers);
    }
    if (m->lm_head.f32 != m->embed.f32) free_linear(&m->lm_head);
    free_linear(&m->embed);
    free(m->final_norm);
    free(m->inv_freq);
    cis2_st_close(&m->st);
    cis2_tokenizer_free(m->tokenizer);
    memset(m, 0, sizeof *m);
}

static int widen(cis2_linear *w, char *err)
{
    if (w->f32) return 0;
    w->f32 = malloc((size_t)w->rows * (size_t)w->cols * sizeof(float));
    if (!w->f32) {
        snprintf(err, CIS2_ERR_LEN, "out of memory widening a [%d, %d] weight", w->rows, w->cols);
        return 1;
    }
    cis2_st_tensor t = { 0 };
    t.dtype = w->dtype;
    t.numel = (int64_t)w->rows * w->cols;
    t.data = w->raw;
    cis2_st_to_f32(&t, w->f32); /* §4.2: widened exactly */
    return 0;
}

int cis2_model_widen(cis2_model *m, char *err)
{
    if (widen(&m->embed, err)) return 1;
    if (m->cfg.tied) m->lm_head.f32 = m->embed.f32;
    else if (widen(&m->lm_head, err)) return 1;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        cis2_layer *y = &m->layers[i];
        cis2_linear *ws[7] = { &y->q, &y->k, &y->v, &y->o, &y->gate, &y->up, &y->down };
        for (int k = 0; k < 7; k++)
            if (widen(ws[k], err)) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ public API */
int cis2_model_open(cis2_model **out, const char *dir, const cis2_model_opts *o, char *err)
{
    *out = NULL;
    cis2_model *m = malloc(sizeof *m);
    if (!m) {
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    cis2_load_opts lo = { 0, o && o->hash == CIS2_HASH_SKIP ? CIS2_LOAD_HASH_SKIP : 0 };
    if (cis2_model_load(m, dir, &lo, err)) {
        free(m);
        return 1;
    }
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
const char *cis2_model_dtype(const cis2_model *m)
{
    (void)m;
    return "fp32";
}

const cis2_tokenizer *cis2_model_tokenizer(const cis2_model *m, char *err)
{
    if (!m->tokenizer && err) snprintf(err, CIS2_ERR_LEN, "%s", m->tokenizer_err);
    return m->tokenizer;
}

size_t cis2_dtype_size(cis2_dtype dt) { return dt == CIS2_DT_F32 ? 4 : 2; }
