/* `cis2 quantize`'s converter: a checkpoint directory to its int8 twin
 * (docs/quantization.md §3). The linears (q, k, v, o, gate, up, down; the
 * LM head and the embedding on request) become `X.weight` I8 [rows, cols]
 * plus `X.weight_scale` F32 [rows, 1] by the pinned row rule (quantize.c);
 * 1-D tensors (norms, biases) become F32 (exact widening, §4.1); anything
 * else is copied byte for byte. config.json gains a compressed-tensors
 * quantization_config; tokenizer.json is copied. The files are written into
 * a fresh directory beside QDIR that then takes QDIR's place in one rename
 * (quant_outdir.c), tensors in name order: same input, same bytes. */
#include "model/quant.h"
#include "core/json.h"
#include "model/model.h"
#include "model/st_write.h"
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *dtype_name(cis2_dtype dt)
{
    return dt == CIS2_DT_F32 ? "F32" : dt == CIS2_DT_BF16 ? "BF16" : "F16";
}

/* model.layers.N.{self_attn.{q,k,v,o}_proj,mlp.{gate,up,down}_proj}.weight */
static int is_layer_linear(const char *n)
{
    static const char *const SUF[] = { "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                       "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                       "mlp.gate_proj.weight",    "mlp.up_proj.weight",
                                       "mlp.down_proj.weight" };
    if (strncmp(n, "model.layers.", 13)) return 0;
    const char *p = n + 13;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    if (*p++ != '.') return 0;
    for (size_t i = 0; i < sizeof SUF / sizeof *SUF; i++)
        if (!strcmp(p, SUF[i])) return 1;
    return 0;
}

typedef struct {
    cis2_st_out *t;
    int n, cap;
    void **owned; /* buffers to free */
    int n_owned, cap_owned;
} outs;

static void *own(outs *o, void *p)
{
    if (!p) return NULL;
    if (o->n_owned == o->cap_owned) {
        int c = o->cap_owned ? 2 * o->cap_owned : 64;
        void **a = realloc(o->owned, (size_t)c * sizeof *a);
        if (!a) {
            free(p);
            return NULL;
        }
        o->owned = a;
        o->cap_owned = c;
    }
    o->owned[o->n_owned++] = p;
    return p;
}

static cis2_st_out *add(outs *o)
{
    if (o->n == o->cap) {
        int c = o->cap ? 2 * o->cap : 64;
        cis2_st_out *a = realloc(o->t, (size_t)c * sizeof *a);
        if (!a) return NULL;
        o->t = a;
        o->cap = c;
    }
    cis2_st_out *e = &o->t[o->n++];
    memset(e, 0, sizeof *e);
    return e;
}

static void outs_free(outs *o)
{
    for (int i = 0; i < o->n_owned; i++) free(o->owned[i]);
    free(o->owned);
    free(o->t);
    memset(o, 0, sizeof *o);
}

static int cmp_out(const void *a, const void *b)
{
    return strcmp(((const cis2_st_out *)a)->name, ((const cis2_st_out *)b)->name);
}

/* One linear: X.weight -> X.weight (I8) + X.weight_scale (F32 [rows, 1]). */
static int quantize_tensor(const cis2_st_tensor *t, const char *wpath, outs *o,
                           cis2_quant_report *rep, char *err)
{
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1 || t->shape[1] > (1 << 24)) {
        snprintf(err, CIS2_ERR_LEN, "%s: tensor \"%.200s\" is not a 2-D weight matrix", wpath,
                 t->name);
        return 1;
    }
    int rows = (int)t->shape[0], cols = (int)t->shape[1];
    size_t es = cis2_dtype_size(t->dtype);
    int8_t *q = own(o, malloc((size_t)rows * cols));
    float *s = own(o, malloc((size_t)rows * sizeof(float)));
    float *row = malloc((size_t)cols * sizeof(float));
    size_t nl = strlen(t->name) - strlen(".weight");
    char *scale_name = own(o, malloc(nl + strlen(".weight_scale") + 1));
    if (!q || !s || !row || !scale_name) {
        free(row);
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory quantizing \"%.200s\"", wpath, t->name);
        return 1;
    }
    memcpy(scale_name, t->name, nl);
    strcpy(scale_name + nl, ".weight_scale");
    for (int r = 0; r < rows; r++) {
        cis2_st_tensor v = *t; /* one row, widened exactly (§4.1) */
        v.data = t->data + (size_t)r * cols * es;
        v.numel = cols;
        cis2_st_to_f32(&v, row);
        int bad = cis2_quantize_row(row, cols, q + (size_t)r * cols, &s[r]);
        if (bad >= 0) {
            snprintf(err, CIS2_ERR_LEN,
                     "%s: tensor \"%.200s\" row %d column %d is %s: refusing to quantize NaN/Inf "
                     "weights",
                     wpath, t->name, r, bad, row[bad] != row[bad] ? "NaN" : "infinite");
            free(row);
            return 1;
        }
        if (s[r] == 0.0f) rep->zero_rows++;
    }
    free(row);
    cis2_st_out *w = add(o), *sc = w ? add(o) : NULL;
    if (!sc) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", wpath);
        return 1;
    }
    w = &o->t[o->n - 2]; /* add() may have moved the array */
    *w = (cis2_st_out){ t->name, "I8", 2, { rows, cols }, q, (uint64_t)rows * cols };
    *sc = (cis2_st_out){ scale_name, "F32", 2, { rows, 1 }, s, (uint64_t)rows * 4 };
    rep->n_int8++;
    rep->int8_params += (uint64_t)rows * cols;
    return 0;
}

/* config.json's text with "quantization_config": {...} as its last member. */
static char *config_with_qc(const char *text, size_t len, const char *cpath, const char *qc,
                            size_t *out_len, char *err)
{
    json_doc d;
    if (json_parse(&d, text, len, cpath, err)) return NULL;
    size_t close = d.nodes[0].start + d.nodes[0].len - 1; /* the root's '}' */
    int empty = d.nodes[0].count == 0;
    json_free(&d);
    size_t at = close;
    while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\n' || text[at - 1] == '\r' ||
                      text[at - 1] == '\t'))
        at--;
    cis2_sb s = { 0 };
    cis2_sb_put(&s, text, at);
    cis2_sb_str(&s, empty ? "\n  \"quantization_config\": " : ",\n  \"quantization_config\": ");
    cis2_sb_str(&s, qc);
    cis2_sb_put(&s, text + at, len - at);
    char *r = cis2_sb_take(&s, out_len);
    if (!r) snprintf(err, CIS2_ERR_LEN, "%s: out of memory", cpath);
    return r;
}

/* QDIR checked before any work, as every output is (docs/errors.md), not
 * after the whole checkpoint had been read and quantized (minutes and
 * gigabytes on a large model). */
static int check_out_dir(const char *dir, const char *qdir, char *err)
{
    struct stat a, b;
    if (stat(qdir, &b) == 0) {
        if (!S_ISDIR(b.st_mode))
            snprintf(err, CIS2_ERR_LEN, "%s: exists and is not a directory", qdir);
        else if (stat(dir, &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            snprintf(err, CIS2_ERR_LEN,
                     "%s: is the source directory itself (the quantized checkpoint needs its own)",
                     qdir);
        else return 0;
        return 1;
    }
    int e = errno;
    if (e == ENOENT && lstat(qdir, &b) == 0) {
        snprintf(err, CIS2_ERR_LEN,
                 "%s: is a symbolic link to nothing; refusing to make the output directory "
                 "through it",
                 qdir);
        return 1;
    }
    /* absent: its parent must be a directory to make it in */
    char parent[4096];
    size_t n = strlen(qdir);
    if (e == ENOENT && n < sizeof parent) {
        memcpy(parent, qdir, n + 1);
        while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
        char *slash = strrchr(parent, '/');
        if (!slash) strcpy(parent, ".");
        else if (slash == parent) parent[1] = 0;
        else *slash = 0;
        int ps = stat(parent, &a);
        if (ps == 0 && S_ISDIR(a.st_mode)) return 0;
        e = ps == 0 ? ENOTDIR : errno;
    }
    snprintf(err, CIS2_ERR_LEN, "%s: cannot create the output directory: %s", qdir, strerror(e));
    return 1;
}

/* The chat template's files: copied when the source has them, so that the
 * twin renders --chat prompts as its source does; one the source lacks must
 * not be left in QDIR from another checkpoint, where the twin would use it. */
static const char *const CHAT_FILES[] = { "tokenizer_config.json", "chat_template.jinja" };
#define N_CHAT (sizeof CHAT_FILES / sizeof CHAT_FILES[0])

static int chat_files_check(const char *dir, const char *qdir, int qdir_exists, int have[N_CHAT],
                            char *err)
{
    for (size_t k = 0; k < N_CHAT; k++) {
        char sp[4096], op[4096];
        struct stat st;
        if (cis2_path_join(sp, sizeof sp, dir, CHAT_FILES[k], err) ||
            cis2_path_join(op, sizeof op, qdir, CHAT_FILES[k], err))
            return 1;
        have[k] = lstat(sp, &st) == 0 || errno != ENOENT;
        if (!qdir_exists) continue;
        if (have[k] && cis2_check_output_path(op, err)) return 1;
        if (!have[k] && lstat(op, &st) == 0) {
            snprintf(err, CIS2_ERR_LEN,
                     "%s: the source has no %s, so this one is another checkpoint's; remove it or "
                     "give another --out",
                     op, CHAT_FILES[k]);
            return 1;
        }
    }
    return 0;
}

/* Read before anything is written, so a bad one leaves QDIR untouched. */
static int chat_files_read(const char *dir, const int have[N_CHAT], char *text[N_CHAT],
                           size_t len[N_CHAT], char *err)
{
    for (size_t k = 0; k < N_CHAT; k++) {
        char sp[4096];
        if (have[k] && (cis2_path_join(sp, sizeof sp, dir, CHAT_FILES[k], err) ||
                        cis2_read_file_max(sp, CIS2_TOKENIZER_MAX, &text[k], &len[k], err)))
            return 1;
    }
    return 0;
}

static int chat_files_write(const char *qdir, char *const text[N_CHAT], const size_t len[N_CHAT],
                            char *err)
{
    for (size_t k = 0; k < N_CHAT; k++) {
        char op[4096];
        if (text[k] && (cis2_path_join(op, sizeof op, qdir, CHAT_FILES[k], err) ||
                        cis2_write_file_atomic(op, text[k], len[k], err)))
            return 1;
    }
    return 0;
}

int cis2_quantize_checkpoint(const char *dir, const char *qdir, const cis2_quant_opts *o,
                             cis2_quant_report *rep, char *err)
{
    char cpath[4096], wpath[4096], tpath[4096], ocpath[4096], owpath[4096], otpath[4096];
    memset(rep, 0, sizeof *rep);
    if (cis2_path_join(cpath, sizeof cpath, dir, "config.json", err) ||
        cis2_path_join(wpath, sizeof wpath, dir, "model.safetensors", err) ||
        cis2_path_join(tpath, sizeof tpath, dir, "tokenizer.json", err) ||
        cis2_path_join(ocpath, sizeof ocpath, qdir, "config.json", err) ||
        cis2_path_join(owpath, sizeof owpath, qdir, "model.safetensors", err) ||
        cis2_path_join(otpath, sizeof otpath, qdir, "tokenizer.json", err))
        return 1;
    /* Every output path in an existing QDIR refused before any work
     * (docs/errors.md) unless it is a regular file or nothing: QDIR is
     * replaced as a whole, and a link, FIFO or directory there is something
     * this command did not write and will not remove. */
    if (check_out_dir(dir, qdir, err)) return 1;
    struct stat qs;
    int qdir_exists = stat(qdir, &qs) == 0 && S_ISDIR(qs.st_mode), have_chat[N_CHAT];
    if (qdir_exists && (cis2_check_output_path(owpath, err) ||
                        cis2_check_output_path(otpath, err) || cis2_check_output_path(ocpath, err)))
        return 1;
    if (chat_files_check(dir, qdir, qdir_exists, have_chat, err)) return 1;
    /* the directory the new checkpoint is built in, beside QDIR: made now, so
     * that one that cannot be made is said before any work */
    cis2_qout qo;
    if (cis2_qout_begin(&qo, qdir, err)) return 1;
    if (cis2_path_join(ocpath, sizeof ocpath, qo.tmp, "config.json", err) ||
        cis2_path_join(owpath, sizeof owpath, qo.tmp, "model.safetensors", err) ||
        cis2_path_join(otpath, sizeof otpath, qo.tmp, "tokenizer.json", err)) {
        cis2_qout_abort(&qo);
        return 1;
    }
    char *ctext = NULL, *ttext = NULL, *wbuf = NULL, *qc = NULL, *newcfg = NULL,
         *chat_text[N_CHAT] = { 0 };
    size_t chat_len[N_CHAT] = { 0 };
    uint8_t *obuf = NULL;
    size_t clen, tlen, wlen, newlen, olen;
    cis2_safetensors st;
    memset(&st, 0, sizeof st);
    outs out = { 0 };
    int rc = 1;
    cis2_config cfg;
    cis2_quant_config qcfg;
    if (cis2_read_file_max(cpath, CIS2_CONFIG_MAX, &ctext, &clen, err) ||
        cis2_config_parse(ctext, clen, cpath, &cfg, err) ||
        cis2_quant_config_parse(ctext, clen, cpath, &qcfg, err))
        goto out;
    if (qcfg.present) {
        cis2_quant_config_free(&qcfg);
        snprintf(err, CIS2_ERR_LEN,
                 "%s: already has a quantization_config (this checkpoint is quantized)", cpath);
        goto out;
    }
    if (cfg.tied && o->lm_head != o->embed) {
        snprintf(err, CIS2_ERR_LEN,
                 "%s: tie_word_embeddings: the LM head is the embedding, so --lm-head and --embed "
                 "go together",
                 cpath);
        goto out;
    }
    if (cis2_read_file_max(tpath, CIS2_TOKENIZER_MAX, &ttext, &tlen, err) ||
        chat_files_read(dir, have_chat, chat_text, chat_len, err) ||
        cis2_read_file_max(wpath, 0, &wbuf, &wlen, err) ||
        cis2_st_parse(&st, (const uint8_t *)wbuf, wlen, wpath, err))
        goto out;
    rep->in_bytes = wlen;
    int want = 7 * cfg.n_layers + (o->lm_head && !cfg.tied) + o->embed;
    for (int i = 0; i < st.n; i++) {
        const cis2_st_tensor *t = &st.t[i];
        int target = is_layer_linear(t->name) ||
                     (o->lm_head && !strcmp(t->name, "lm_head.weight")) ||
                     (o->embed && !strcmp(t->name, "model.embed_tokens.weight"));
        size_t nl = strlen(t->name);
        if (nl >= 13 && !strcmp(t->name + nl - 13, ".weight_scale")) {
            snprintf(err, CIS2_ERR_LEN, "%s: tensor \"%.200s\" already looks quantized", wpath,
                     t->name);
            goto out;
        }
        if (target) {
            if (quantize_tensor(t, wpath, &out, rep, err)) goto out;
            continue;
        }
        cis2_st_out *e = add(&out);
        if (!e) {
            snprintf(err, CIS2_ERR_LEN, "%s: out of memory", wpath);
            goto out;
        }
        *e = (cis2_st_out){ t->name, dtype_name(t->dtype), t->ndim, { 0 }, t->data, t->nbytes };
        for (int d = 0; d < t->ndim; d++) e->shape[d] = t->shape[d];
        if (t->ndim == 1 && t->dtype != CIS2_DT_F32) { /* norms, biases: F32 (§4.1 widening) */
            float *f = own(&out, malloc((size_t)t->numel * sizeof(float) + 1));
            if (!f) {
                snprintf(err, CIS2_ERR_LEN, "%s: out of memory", wpath);
                goto out;
            }
            cis2_st_to_f32(t, f);
            e = &out.t[out.n - 1];
            e->dtype = "F32";
            e->data = f;
            e->nbytes = (uint64_t)t->numel * 4;
        }
        if (t->ndim == 1) rep->n_f32++;
        else rep->n_kept++;
    }
    if (rep->n_int8 != want) {
        snprintf(err, CIS2_ERR_LEN,
                 "%s: found %d of the %d linear weights to quantize that config.json implies",
                 wpath, rep->n_int8, want);
        goto out;
    }
    qsort(out.t, (size_t)out.n, sizeof *out.t, cmp_out);
    uint8_t src_sha[32];
    char src_hex[65];
    cis2_sha256_buf(wbuf, wlen, src_sha);
    cis2_hex(src_sha, 32, src_hex);
    const char *meta[] = { "format",        "pt",
                           "quantized_by",  "cis2 quantize: int8-row/1 (docs/quantization.md)",
                           "source_sha256", src_hex };
    if (cis2_st_build(out.t, out.n, meta, 3, &obuf, &olen, err)) goto out;
    rep->out_bytes = olen;
    cis2_sha256_buf(obuf, olen, rep->out_sha256);
    qc = cis2_quant_config_json(o->lm_head, o->embed, 2);
    if (!qc || !(newcfg = config_with_qc(ctext, clen, cpath, qc, &newlen, err))) {
        if (!qc) snprintf(err, CIS2_ERR_LEN, "%s: out of memory", cpath);
        goto out;
    }
    /* every file into the new directory, which then replaces QDIR whole */
    if (cis2_write_file_atomic(owpath, obuf, olen, err)) goto out;
    if (o->test_hook && !strcmp(o->test_hook, "kill-after-weights")) raise(SIGKILL);
    if (cis2_write_file_atomic(otpath, ttext, tlen, err) ||
        chat_files_write(qo.tmp, chat_text, chat_len, err) ||
        cis2_write_file_atomic(ocpath, newcfg, newlen, err) ||
        cis2_qout_commit(&qo, o->test_hook, rep->note, err))
        goto out;
    rc = 0;
out:
    if (rc) cis2_qout_abort(&qo); /* nothing of a failed run is left; QDIR is as it was */
    outs_free(&out);
    cis2_st_close(&st); /* parsed from wbuf: nothing mapped */
    free(ctext);
    free(ttext);
    free(wbuf);
    free(obuf);
    free(qc);
    free(newcfg);
    for (size_t k = 0; k < N_CHAT; k++) free(chat_text[k]);
    return rc;
}
