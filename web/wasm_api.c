/* The wasm32 entry points the JS glue (web/cis2.js) calls. They do what
 * `cis2 selftest`, `cis2 run` and `cis2 verify` do (src/cli/), through the
 * same library API, on the three files the glue serves from the wasm heap
 * at /m/{config.json,tokenizer.json,model.safetensors}.
 *
 * Hash what is computed on: the glue reads model.safetensors once, in
 * chunks, and pushes each chunk into the loader's window, which packs the
 * tensors it completes (cis2_model_push_*); each chunk is hashed as it is
 * pushed, either here over the window bytes (cis2w_hash_update) or by a hash
 * worker given the same chunk (cis2w_hash_set), so the big file is read once
 * and never held whole (docs/wasm.md). tokenizer.json likewise; config.json
 * is hashed by the loader itself, as natively. The model is loaded with
 * CIS2_HASH_CALLER and those two digests go in by cis2_model_set_digest.
 *
 * Like the cis2 CLI, this file stands on cis2.h plus libcis2_tool.a, the
 * private helper library (docs/architecture.md, "The library's edge";
 * tests/t_layers.sh, layers.edge.wasm-public-api): the string builder,
 * SHA-256 and escaping (core/core.h, TOOL_SHARED), the sampler's text form
 * (engine/sample.h), the traces (verify/trace.h) and the header-only pinned
 * arithmetic (core/fparith.h). The model is an opaque handle.
 *
 * Results come back as JSON text (a pointer to a NUL-terminated string that
 * stays valid until the next call), or for cis2w_trace the bytes of a trace
 * file; errors as a NULL/nonzero return and cis2w_error(). */
#include <cis2.h>
#include "core/core.h"
#include "core/fparith.h"
#include "engine/sample.h"
#include "verify/trace.h"
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(name)))
__attribute__((import_module("cis2"), import_name("progress"))) extern void
cis2js_progress(int done, int total);

#define MODEL_DIR "/m"

static char g_err[CIS2_ERR_LEN];
static char *g_out;     /* the last result: JSON text or trace bytes */
static cis2_model *g_m; /* NULL: none loaded */
static double g_t0;     /* cis2w_load_begin's clock, for load_ms */
static int g_ref;       /* 1: reference backend (cis2w_set_backend) */
static cis2_engine *g_e;
static const cis2_tokenizer *g_tok; /* the model's own */
enum { SLOT_WEIGHTS = 0, SLOT_TOKENIZER = 1, N_SLOTS = 2 };
static cis2_sha256 g_hash[N_SLOTS];
static uint8_t g_digest[N_SLOTS][32];
static int g_hashed[N_SLOTS];

/* ------------------------------------------------------------ JSON text */
/* JSON text is built with the core's string builder (cis2_sb); strings
 * go through its JSON escaper (bytes that are not UTF-8 become U+FFFD, as
 * the glue's TextDecoder would make them). */
static void sb_cstr(cis2_sb *s, const char *p) { cis2_sb_json_str(s, p, strlen(p)); }

static void sb_hex(cis2_sb *s, const uint8_t d[32])
{
    char h[65];
    cis2_hex(d, 32, h);
    sb_cstr(s, h);
}

static const char *sb_finish(cis2_sb *s)
{
    char *b = cis2_sb_take(s, NULL);
    if (!b) {
        snprintf(g_err, CIS2_ERR_LEN, "out of memory building the result");
        return NULL;
    }
    free(g_out);
    g_out = b;
    return g_out;
}

/* ------------------------------------------------------------- exports */
EXPORT("cis2w_malloc") void *w_malloc(size_t n) { return malloc(n ? n : 1); }
EXPORT("cis2w_free") void w_free(void *p) { free(p); }
/* As the CLI prints it (docs/errors.md): a name taken from a file (a
 * tensor's, a key's) may hold controls or bidi overrides that would reorder
 * the page's message; they come back escaped, on one line. */
EXPORT("cis2w_error") const char *w_error(void)
{
    cis2_err_one_line(g_err);
    return g_err;
}
EXPORT("cis2w_isa") const char *w_isa(void) { return cis2_isa_name(); }

EXPORT("cis2w_hash_begin") int w_hash_begin(int slot)
{
    if (slot < 0 || slot >= N_SLOTS) return 1;
    cis2_sha256_init(&g_hash[slot]);
    g_hashed[slot] = 0;
    return 0;
}

EXPORT("cis2w_hash_update") void w_hash_update(int slot, const void *p, size_t n)
{
    if (slot >= 0 && slot < N_SLOTS) cis2_sha256_update(&g_hash[slot], p, n);
}

/* Returns the lowercase hex digest (valid until the next call). */
EXPORT("cis2w_hash_end") const char *w_hash_end(int slot)
{
    static char hex[65];
    if (slot < 0 || slot >= N_SLOTS) return NULL;
    cis2_sha256_final(&g_hash[slot], g_digest[slot]);
    g_hashed[slot] = 1;
    cis2_hex(g_digest[slot], 32, hex);
    return hex;
}

/* The library's name for a slot's digest. */
static cis2_digest_kind digest_kind(int slot)
{
    return slot == SLOT_WEIGHTS ? CIS2_DIGEST_WEIGHTS : CIS2_DIGEST_TOKENIZER;
}

/* A digest computed by the glue with the platform's SHA-256 (WebCrypto's
 * crypto.subtle.digest over the same heap bytes the engine then reads), in
 * place of cis2w_hash_begin/_update/_end: 32 bytes at p. */
EXPORT("cis2w_hash_set") int w_hash_set(int slot, const uint8_t *p)
{
    if (slot < 0 || slot >= N_SLOTS || !p) return 1;
    memcpy(g_digest[slot], p, 32);
    g_hashed[slot] = 1;
    /* the digest may arrive after cis2w_load_end (computed while it packed) */
    if (g_m && cis2_model_set_digest(g_m, digest_kind(slot), p, g_err)) return 1;
    return 0;
}

/* run and verify need both digests in place. */
static int both_hashed(void) { return g_hashed[SLOT_WEIGHTS] && g_hashed[SLOT_TOKENIZER]; }

static int hashes_ready(void)
{
    if (both_hashed()) return 1;
    snprintf(g_err, CIS2_ERR_LEN, "internal: model.safetensors and tokenizer.json are not hashed");
    return 0;
}

/* `cis2 selftest`, line for line, on stdout. Returns the number of failures. */
EXPORT("cis2w_selftest") int w_selftest(void)
{
    int fails = cis2_selftest(stdout);
    fflush(stdout);
    return fails;
}

/* 0 (default): the fast backend with the SIMD128 kernels; 1: the scalar
 * reference backend. Takes effect at the next load. */
EXPORT("cis2w_set_backend") void w_set_backend(int ref) { g_ref = ref != 0; }

static cis2_model_push *g_push;

static void pend_drop(void);

EXPORT("cis2w_unload") void w_unload(void)
{
    pend_drop();
    if (g_push) cis2_model_push_end(g_push, 0, NULL, g_err); /* abandons: g_err kept */
    g_push = NULL;
    if (g_e) cis2_engine_free(g_e);
    g_e = NULL;
    g_tok = NULL;
    cis2_model_free(g_m);
    g_m = NULL;
}

/* Loading, with model.safetensors pushed in by the glue as it reads it:
 * cis2w_load_begin once /m/config.json, /m/tokenizer.json and the head of
 * /m/model.safetensors (its length and header) are in place; then per chunk
 * cis2w_load_buf(n) (where its n bytes go: the loader's window) and
 * cis2w_load_feed(n) (packs what they complete); then cis2w_load_end(1)
 * (cis2w_load_end(0) abandons). The glue hashes each chunk's window bytes
 * (cis2w_hash_update) or hands the same chunk to a hash worker whose digest
 * arrives by cis2w_hash_set, possibly after cis2w_load_end; run and verify
 * refuse until both digests are in. */
EXPORT("cis2w_load_begin") int w_load_begin(size_t max_chunk)
{
    w_unload();
    /* §1.3: the pin (here: the software emulation) and its self-test first. */
    if (cis2_fpenv_pin() != 0 || cis2_fpenv_selftest(NULL) != 0) {
        snprintf(g_err, CIS2_ERR_LEN,
                 "the §1.3 denormal self-test failed; refusing to run (see the self-test)");
        return 1;
    }
    /* The two hashes come from the slots (cis2w_load_end, cis2w_hash_set). */
    cis2_model_opts mo = { CIS2_HASH_CALLER };
    g_t0 = cis2_now_ms();
    return cis2_model_push_open(&g_push, MODEL_DIR, &mo, max_chunk, g_err);
}

EXPORT("cis2w_load_buf") uint8_t *w_load_buf(size_t n)
{
    return g_push ? cis2_model_push_buf(g_push, n, g_err) : NULL;
}

EXPORT("cis2w_load_feed") int w_load_feed(size_t n)
{
    return g_push ? cis2_model_push_feed(g_push, n, g_err) : 1;
}

/* Returns JSON with the config and the artifact hashes (zeros for a slot
 * still pending), or NULL. The fast backend reads the model's tiles; the
 * reference backend (cis2w_set_backend(1), tests) widens its own f32 copy. */
EXPORT("cis2w_load_end") const char *w_load_end(int ok)
{
    if (!g_push) {
        snprintf(g_err, CIS2_ERR_LEN, "internal: no load in progress");
        return NULL;
    }
    int rc = cis2_model_push_end(g_push, ok, &g_m, g_err);
    g_push = NULL;
    if (rc || !ok) return NULL;
    double load_ms = cis2_now_ms() - g_t0; /* read + hash + pack, as the native loader's */
    for (int i = 0; i < N_SLOTS; i++)
        if (g_hashed[i] && cis2_model_set_digest(g_m, digest_kind(i), g_digest[i], g_err)) {
            w_unload();
            return NULL;
        }
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = g_ref ? CIS2_BACKEND_REF : CIS2_BACKEND_FAST;
    eo.isa = CIS2_ISA_WASM128; /* src/kernels/kernels_wasm128.c */
    eo.threads = 1;
    if (cis2_engine_new(&g_e, g_m, &eo, g_err)) {
        w_unload();
        return NULL;
    }
    g_tok = cis2_model_tokenizer(g_m, NULL);
    const cis2_config *c = cis2_model_config(g_m);
    const cis2_digests *dg = cis2_model_digests(g_m);
    cis2_sb s = { 0 };
    cis2_sb_printf(
        &s,
        "{\"arch\":\"%s\",\"hidden\":%d,\"layers\":%d,\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,"
        "\"vocab\":%d,\"max_pos\":%d,\"tied\":%d,\"tokenizer_ok\":%d,\"backend\":",
        cis2_arch_name(c->arch), c->hidden, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
        c->vocab, c->max_pos, c->tied, g_tok != NULL);
    sb_cstr(&s, cis2_engine_backend(g_e));
    cis2_sb_put(&s, ",\"isa\":", 7);
    sb_cstr(&s, cis2_isa_name());
    cis2_sb_put(&s, ",\"weights_sha256\":", 18);
    sb_hex(&s, dg->weights_sha256);
    cis2_sb_put(&s, ",\"config_sha256\":", 17);
    sb_hex(&s, dg->config_sha256);
    cis2_sb_put(&s, ",\"tokenizer_sha256\":", 20);
    sb_hex(&s, dg->tokenizer_sha256);
    cis2_sb_put(&s, ",\"table_digest\":", 16);
    sb_hex(&s, dg->table_digest);
    cis2_sb_put(&s, ",\"inv_freq_table_digest\":", 25);
    sb_hex(&s, dg->inv_freq_digest);
    cis2_sb_printf(&s, ",\"load_ms\":%.1f}", load_ms);
    return sb_finish(&s);
}

/* A decode that runs before both digests are in records its §12.1 stream
 * after the prompt (each step's logits row and id), so the report can bind
 * the digests once they are (cis2_witness_replay). At most g_rec_max bytes
 * of rows: a longer run waits for the digests instead (cis2w_run and
 * cis2w_verify return 2). */
static size_t g_rec_max = (size_t)256 << 20;
EXPORT("cis2w_set_rec_max") void w_set_rec_max(size_t n) { g_rec_max = n; }

static struct {
    int on; /* this decode records */
    float *rows;
    int32_t *ids;
    int n, cap, oom;
} g_rec;

static void rec_drop(void)
{
    free(g_rec.rows);
    free(g_rec.ids);
    memset(&g_rec, 0, sizeof g_rec);
}

static void rec_step(const float *logits, int vocab, int32_t chosen)
{
    if (g_rec.oom) return;
    if (g_rec.n == g_rec.cap) {
        int cap = g_rec.cap ? 2 * g_rec.cap : 16;
        float *r = realloc(g_rec.rows, (size_t)cap * (size_t)vocab * sizeof(float));
        if (r) g_rec.rows = r;
        int32_t *d = r ? realloc(g_rec.ids, (size_t)cap * sizeof(int32_t)) : NULL;
        if (d) g_rec.ids = d;
        if (!r || !d) {
            g_rec.oom = 1;
            return;
        }
        g_rec.cap = cap;
    }
    memcpy(g_rec.rows + (size_t)g_rec.n * (size_t)vocab, logits, (size_t)vocab * sizeof(float));
    g_rec.ids[g_rec.n++] = chosen;
}

/* Whether a decode of n_steps must record (digests pending); 2 with g_err
 * when it would record more than g_rec_max bytes. */
static int rec_needed(int n_steps)
{
    if (both_hashed()) return 0;
    if ((size_t)n_steps * (size_t)cis2_model_config(g_m)->vocab * sizeof(float) > g_rec_max) {
        snprintf(g_err, CIS2_ERR_LEN, "a run this long waits for the artifact digests");
        return 2;
    }
    return 1;
}

static void on_step(void *ctx, int step, const float *logits, int vocab, int32_t chosen)
{
    if (g_rec.on) rec_step(logits, vocab, chosen);
    cis2js_progress(step + 1, *(const int *)ctx);
}

/* The sampler of the decode held (all zero: greedy); a sampled run's
 * stream also holds its record (docs/sampling.md §5). */
static cis2_sampler g_smp;

/* The recorded run's witness under the model's digests as they are now. */
static void rec_replay(const cis2_result *r, uint8_t out[32])
{
    cis2_witness_replay_sampled(cis2_model_digests(g_m), &g_smp, r->prompt, r->n_prompt, g_rec.rows,
                                g_rec.ids, g_rec.n, cis2_model_config(g_m)->vocab, out);
}

/* After a decode that recorded: the recording must give the witness the
 * engine computed, under the same (pending) digests, or it is not the
 * stream the engine hashed. Returns 0, or 1 with g_err. */
static int rec_check(const cis2_result *r)
{
    uint8_t w[32];
    if (g_rec.oom) {
        snprintf(g_err, CIS2_ERR_LEN, "out of memory recording the run's logits");
        return 1;
    }
    rec_replay(r, w);
    if (g_rec.n != r->n_gen || memcmp(w, r->witness, 32)) {
        snprintf(g_err, CIS2_ERR_LEN, "internal: the recorded run does not replay to its witness");
        return 1;
    }
    return 0;
}

/* Report time: the recorded run's witness under the digests now in. */
static void rec_bind(cis2_result *r)
{
    if (!g_rec.on) return;
    rec_replay(r, r->witness);
    rec_drop();
}

static void sb_ids(cis2_sb *s, const char *key, const int32_t *ids, int n)
{
    char *t = cis2_format_ids(ids, n);
    cis2_sb_printf(s, ",\"%s\":", key);
    if (t) sb_cstr(s, t);
    else s->oom = 1;
    free(t);
}

static void sb_text(cis2_sb *s, const int32_t *ids, int n)
{
    char *text = NULL, terr[CIS2_ERR_LEN];
    size_t tl = 0;
    if (g_tok && cis2_tokenizer_decode(g_tok, ids, n, &text, &tl, terr) == 0) {
        cis2_sb_put(s, ",\"text\":", 8);
        cis2_sb_json_str(s, text, tl);
    } else {
        cis2_sb_put(s, ",\"text_error\":", 14);
        sb_cstr(s, g_tok ? terr : "no tokenizer");
    }
    free(text);
}

/* run and verify each take two calls: the first decodes, which needs no
 * artifact hash; the second reports, and needs both digests in place. So the
 * glue decodes while the hash worker still hashes the file's last chunks
 * (docs/wasm.md), and what is reported is exactly what a single call would
 * give. One decode is held between the two calls; a new one, an unload or a
 * report drops it. */
static struct {
    int kind; /* 0: none, 1: a run, 2: a verify */
    cis2_result r;
    int have_r;
    char *bytes; /* run: the bytes the prompt ids decode to */
    size_t blen;
    cis2_receipt rc;         /* verify: the parsed receipt */
    char perr[CIS2_ERR_LEN]; /* verify: why the receipt does not parse ("" if it does) */
} g_pend;

static void pend_drop(void)
{
    rec_drop();
    memset(&g_smp, 0, sizeof g_smp);
    if (g_pend.have_r) cis2_result_free(&g_pend.r);
    free(g_pend.bytes);
    if (g_pend.kind == 2 && !g_pend.perr[0]) cis2_receipt_free(&g_pend.rc);
    memset(&g_pend, 0, sizeof g_pend);
}

/* The held decode of run and verify, with g_smp's sampler (greedy when all
 * zero): recorded while a digest is pending (rec_needed) and then checked
 * against the engine's own witness (rec_check). Returns 0, 2 (too long to
 * record: nothing decoded), or 1 with g_err; all but 0 drop what is held. */
static int pend_decode(const int32_t *prompt, int n_prompt, cis2_gen_opts *g)
{
    int rec = rec_needed(g->n_gen);
    if (rec == 2) {
        pend_drop();
        return 2;
    }
    g_rec.on = rec;
    int total = g->n_gen;
    g->on_step = on_step;
    g->ctx = &total;
    if (cis2_generate_sampled(g_e, prompt, n_prompt, g, &g_smp, &g_pend.r, g_err)) {
        pend_drop();
        return 1;
    }
    g_pend.have_r = 1;
    if (rec && rec_check(&g_pend.r)) {
        pend_drop();
        return 1;
    }
    return 0;
}

/* A sampler as the glue passes it: "T K P M S", the temperature, top-k,
 * top-p, min-p and seed in the forms `cis2 run --temperature ...` reads
 * (docs/sampling.md §1: each number read as the nearest binary32; the seed a
 * decimal u64). NULL or "" is greedy. Returns 0, or 1 with g_err naming the
 * parameter. */
static int parse_sampler(const char *txt, cis2_sampler *s)
{
    /* `cis2 run`'s words for the same flags (docs/errors.md, run-*-bad) */
    static const char *const name[5] = { "temperature", "top-k", "top-p", "min-p", "seed" };
    static const char *const want[5] = { "a number like 0.7", "an integer from 0 to 2147483647",
                                         "a number in [0, 1] (1 = off)",
                                         "a number in [0, 1] (0 = off)",
                                         "an integer from 0 to 18446744073709551615" };
    memset(s, 0, sizeof *s);
    s->top_p = 1.0f;
    if (!txt || !*txt) return 0;
    char f[5][72];
    const char *p = txt;
    for (int k = 0; k < 5; k++) {
        const char *e = strchr(p, ' ');
        size_t n = e && k < 4 ? (size_t)(e - p) : strlen(p);
        if (k < 4 && !e) {
            snprintf(g_err, CIS2_ERR_LEN, "sampler: expected 'T K P M S', got %d field(s)", k + 1);
            return 1;
        }
        if (n >= sizeof f[k]) n = sizeof f[k] - 1; /* too long: refused by its parser below */
        memcpy(f[k], p, n);
        f[k][n] = 0;
        p += n + 1;
    }
    uint64_t u = 0;
    int bad = -1;
    if (smp_parse_num(f[0], &s->temperature)) bad = 0;
    else if (smp_parse_seed(f[1], &u) || u > 0x7FFFFFFF) bad = 1;
    else if (smp_parse_num(f[2], &s->top_p)) bad = 2;
    else if (smp_parse_num(f[3], &s->min_p)) bad = 3;
    else if (smp_parse_seed(f[4], &s->seed)) bad = 4;
    if (bad >= 0) {
        char esc[160];
        cis2_escape(f[bad], strlen(f[bad]), esc, sizeof esc, CIS2_ESC_TEXT);
        snprintf(g_err, CIS2_ERR_LEN, "%s: expected %s, got '%s'", name[bad], want[bad], esc);
        return 1;
    }
    s->top_k = (int)u;
    if (cis2_sampler_check(s, g_err)) return 1;
    if (s->temperature == 0.0f) {
        snprintf(g_err, CIS2_ERR_LEN, "sampler: temperature 0 is greedy; pass no sampler");
        return 1;
    }
    return 0;
}

/* `cis2 run`, its decode: a text prompt (prompt != NULL) or comma-separated
 * ids; sampler NULL (greedy) or parse_sampler's text. Returns 0
 * (cis2w_run_report gives the result), 2 when the run is too long to record
 * before the digests are in (call again once they are), or 1 with
 * cis2w_error(). */
EXPORT("cis2w_run")
int w_run(const char *prompt, size_t plen, const char *ids_csv, int n_gen, int stop_at_eos,
          const char *sampler)
{
    pend_drop();
    if (!g_e) {
        snprintf(g_err, CIS2_ERR_LEN, "no model loaded");
        return 1;
    }
    cis2_sampler smp;
    if (parse_sampler(sampler, &smp)) return 1;
    int32_t *ids = NULL;
    int n = 0;
    char *bytes = NULL;
    size_t blen = 0;
    if (ids_csv) {
        if (cis2_parse_ids(ids_csv, &ids, &n, g_err)) return 1;
    } else {
        if (!g_tok) {
            snprintf(g_err, CIS2_ERR_LEN, "a text prompt needs tokenizer.json, which did not load");
            return 1;
        }
        if (cis2_tokenizer_encode(g_tok, prompt, plen, &ids, &n, g_err)) return 1;
        if (n == 0) {
            free(ids);
            snprintf(g_err, CIS2_ERR_LEN, "the prompt encodes to no tokens");
            return 1;
        }
    }
    /* The receipt's prompt-hex: the bytes the prompt ids decode to, as the
     * CLI writes it (cis2_receipt_prompt_bytes), never empty. */
    if (!g_tok) {
        free(ids);
        snprintf(
            g_err, CIS2_ERR_LEN,
            "a receipt needs the bytes the prompt ids decode to, and tokenizer.json did not load");
        return 1;
    }
    int prc = cis2_receipt_prompt_bytes(g_tok, ids, n, &bytes, &blen, g_err);
    if (prc || blen == 0) {
        if (!prc) snprintf(g_err, CIS2_ERR_LEN, "the prompt ids decode to no bytes");
        free(ids);
        free(bytes);
        return 1;
    }
    g_pend.kind = 1;
    g_pend.bytes = bytes;
    g_pend.blen = blen;
    g_smp = smp;
    cis2_gen_opts g = { n_gen, stop_at_eos, NULL, NULL, NULL, 0 };
    int rc = pend_decode(ids, n, &g); /* the result copies the prompt ids */
    free(ids);
    return rc;
}

/* The run cis2w_run decoded, as JSON with its output and the receipt text,
 * or NULL. */
EXPORT("cis2w_run_report") const char *w_run_report(void)
{
    if (g_pend.kind != 1) {
        snprintf(g_err, CIS2_ERR_LEN, "internal: no run to report");
        return NULL;
    }
    if (!hashes_ready()) return NULL;
    rec_bind(&g_pend.r);
    const cis2_result *r = &g_pend.r;
    cis2_receipt rc;
    cis2_receipt_from_run(&rc, g_m, r, (const uint8_t *)g_pend.bytes, g_pend.blen);
    const cis2_digests *dg = cis2_model_digests(g_m);
    char *rtext = NULL;
    size_t rlen = 0;
    cis2_sb s = { 0 };
    cis2_sb_put(&s, "{\"ok\":1", 7);
    sb_ids(&s, "prompt_token_ids", r->prompt, r->n_prompt);
    sb_ids(&s, "generated_token_ids", r->gen, r->n_gen);
    sb_text(&s, r->gen, r->n_gen);
    cis2_sb_put(&s, ",\"table_digest\":", 16);
    sb_hex(&s, dg->table_digest);
    cis2_sb_put(&s, ",\"inv_freq_table_digest\":", 25);
    sb_hex(&s, dg->inv_freq_digest);
    cis2_sb_put(&s, ",\"argmax_digest\":", 17);
    sb_hex(&s, r->argmax);
    cis2_sb_put(&s, ",\"cis2_ref\":", 12);
    sb_hex(&s, r->witness);
    cis2_sb_printf(
        &s,
        ",\"n_prompt\":%d,\"n_gen\":%d,\"stopped_at_eos\":%d,\"prefill_ms\":%.3f,\"decode_"
        "ms\":%.3f",
        r->n_prompt, r->n_gen, r->stopped_at_eos, r->prefill_ms, r->decode_ms);
    const int sampled = g_smp.temperature > 0.0f;
    if (sampled) { /* docs/sampling.md §6: the receipt's two lines, as `cis2 run` prints them */
        char sl[160];
        smp_format(&g_smp, sl, sizeof sl);
        cis2_sb_put(&s, ",\"sampler\":", 11);
        sb_cstr(&s, sl);
        cis2_sb_printf(&s, ",\"seed\":\"%llu\"", (unsigned long long)g_smp.seed);
    }
    if (cis2_receipt_format_sampled(&rc, sampled ? &g_smp : NULL, &rtext, &rlen) == 0) {
        cis2_sb_put(&s, ",\"receipt\":", 11);
        cis2_sb_json_str(&s, rtext, rlen);
    } else {
        s.oom = 1;
    }
    cis2_sb_put(&s, "}", 1);
    free(rtext);
    pend_drop();
    return sb_finish(&s);
}

/* `cis2 verify`, its decode: the receipt parsed (v1, or v1+sampling with
 * its sampler and seed, docs/sampling.md §6) and its prompt re-run as
 * cis2_receipt_verify_sampled does (the same refusals, in the same order). Returns
 * 0 (a receipt that does not parse included: its report says so; the verdict
 * is cis2w_verify_report's), 2 as cis2w_run, or 1 with cis2w_error(). */
EXPORT("cis2w_verify") int w_verify(const char *text, size_t len)
{
    pend_drop();
    if (!g_e) {
        snprintf(g_err, CIS2_ERR_LEN, "no model loaded");
        return 1;
    }
    g_pend.kind = 2;
    if (cis2_receipt_parse_sampled(text, len, "receipt", &g_pend.rc, &g_smp, g_pend.perr)) {
        if (!g_pend.perr[0]) snprintf(g_pend.perr, CIS2_ERR_LEN, "the receipt does not parse");
        return 0;
    }
    /* _begin decides whether the prompt is re-run; its verdict waits for the
     * digests. With one pending its hash field may differ for now, so a
     * receipt too long for the model (2, or *run 0) is decided at the
     * report, which runs _begin again. */
    if (cis2_sampler_check(&g_smp, g_err)) { /* as cis2_receipt_verify_sampled */
        pend_drop();
        return 1;
    }
    cis2_verdict v;
    cis2_gen_opts g;
    int run, b = cis2_receipt_verify_begin(g_m, &g_pend.rc, &v, &g, &run, g_err);
    if (b == 1) {
        pend_drop();
        return 1;
    }
    if (b == 0) cis2_verdict_free(&v);
    if (b == 2 || !run) return 0;
    return pend_decode(g_pend.rc.prompt_ids, g_pend.rc.n_prompt, &g);
}

/* The verdict on the receipt cis2w_verify re-ran: every field, artifact
 * hashes first (§14.3), as cis2_receipt_verify gives it. A receipt that does
 * not parse gives {"parse_error": ...}; NULL only for engine errors. */
EXPORT("cis2w_verify_report") const char *w_verify_report(void)
{
    if (g_pend.kind != 2) {
        snprintf(g_err, CIS2_ERR_LEN, "internal: no verification to report");
        return NULL;
    }
    cis2_sb s = { 0 };
    if (g_pend.perr[0]) {
        cis2_sb_put(&s, "{\"parse_error\":", 15);
        sb_cstr(&s, g_pend.perr);
        cis2_sb_put(&s, "}", 1);
        pend_drop();
        return sb_finish(&s);
    }
    if (!hashes_ready()) return NULL;
    cis2_verdict v;
    cis2_gen_opts g;
    int run;
    if (cis2_receipt_verify_begin(g_m, &g_pend.rc, &v, &g, &run, g_err)) {
        pend_drop();
        return NULL;
    }
    if (g_pend.have_r) {
        rec_bind(&g_pend.r);
        g_pend.have_r = 0; /* _finish takes the result over */
        if (cis2_receipt_verify_finish_sampled(&g_pend.rc, &g_smp, &g_pend.r, &v, g_err)) {
            pend_drop();
            return NULL;
        }
    }
    int skipped_prompt = 0;
    cis2_sb_put(&s, "{\"fields\":[", 11);
    for (int i = 0, first = 1; i < v.n_fields; i++) {
        const cis2_verdict_field *f = &v.fields[i];
        if (f->status == CIS2_FIELD_SKIPPED) {
            skipped_prompt |= !strcmp(f->name, "prompt-hex");
            continue;
        }
        cis2_sb_put(&s, first ? "{\"field\":" : ",{\"field\":", first ? 9 : 10);
        first = 0;
        sb_cstr(&s, f->name);
        cis2_sb_printf(&s,
                       ",\"ok\":%s,\"receipt\":", f->status == CIS2_FIELD_MATCH ? "true" : "false");
        sb_cstr(&s, f->receipt);
        cis2_sb_put(&s, ",\"recomputed\":", 14);
        sb_cstr(&s, f->recomputed);
        cis2_sb_put(&s, "}", 1);
    }
    const cis2_result *r = &v.run;
    cis2_sb_printf(
        &s,
        "],\"bad\":%d,\"prompt_hex_skipped\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"prefill_ms\":%"
        ".3f,\"decode_ms\":%.3f",
        v.mismatches, skipped_prompt, r->n_prompt, r->n_gen, r->prefill_ms, r->decode_ms);
    sb_ids(&s, "generated_token_ids", r->gen, r->n_gen);
    sb_text(&s, r->gen, r->n_gen);
    if (g_smp.temperature > 0.0f) { /* the receipt's sampler and seed, as it states them */
        char sl[160];
        smp_format(&g_smp, sl, sizeof sl);
        cis2_sb_put(&s, ",\"sampler\":", 11);
        sb_cstr(&s, sl);
        cis2_sb_printf(&s, ",\"seed\":\"%llu\"", (unsigned long long)g_smp.seed);
    }
    cis2_sb_put(&s, "}", 1);
    cis2_verdict_free(&v);
    pend_drop();
    return sb_finish(&s);
}

/* `cis2 trace` teacher-forced (arm E of docs/divergence.md "cis2 arms"):
 * prompt ids ++ forced ids, one token per forward, every node captured by the
 * native capture code (src/verify/trace_capture.c) on the loaded model with
 * the backend cis2w_load_end chose (fast: SIMD128, software FTZ/DAZ per §1.3).
 * arm: the trace's "arm" entry (NULL: "cis2-BACKEND", as `cis2 trace`).
 * Returns the start of the file (trace_file.c's writer, up to the tensor data)
 * and its length in *len, or NULL; the glue then writes each tensor's bytes,
 * cis2w_trace_data(0 .. cis2w_trace_count()-1), straight from the heap, so a
 * long window is held once, not twice, in wasm32's 4 GiB. */
static cis2_trace g_tr;

EXPORT("cis2w_trace_free") void w_trace_free(void)
{
    cis2_trace_free(&g_tr);
    memset(&g_tr, 0, sizeof g_tr);
}

EXPORT("cis2w_trace")
const char *w_trace(const char *prompt_csv, const char *force_csv, const char *arm, size_t *len)
{
    w_trace_free();
    if (!g_e) {
        snprintf(g_err, CIS2_ERR_LEN, "no model loaded");
        return NULL;
    }
    if (!hashes_ready()) return NULL;
    int32_t *prompt = NULL, *force = NULL;
    int np = 0, nf = 0;
    char e2[CIS2_ERR_LEN];
    const char *bytes = NULL;
    if (cis2_parse_ids(prompt_csv, &prompt, &np, e2)) {
        snprintf(g_err, CIS2_ERR_LEN, "prompt ids: %s", e2);
        return NULL;
    }
    if (force_csv && *force_csv && cis2_parse_ids(force_csv, &force, &nf, e2)) {
        snprintf(g_err, CIS2_ERR_LEN, "teacher-forced ids: %s", e2);
        free(prompt);
        return NULL;
    }
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = g_ref ? CIS2_BACKEND_REF : CIS2_BACKEND_FAST;
    eo.isa = CIS2_ISA_WASM128;
    eo.threads = 1;
    cis2_trace_req rq = { arm, NULL, NULL, 0, 0, 0 };
    cis2_trace_run run;
    g_tr.path = "(wasm run)";
    char *out = NULL;
    size_t n = 0;
    if (cis2_trace_arm(g_m, &eo, &rq, prompt, np, force, nf, &g_tr, &run, g_err) == 0) {
        cis2_trace_run_free(&run);
        if (cis2_trace_format_header(&g_tr, &out, &n, g_err) == 0) {
            free(g_out);
            g_out = out;
            *len = n;
            bytes = g_out;
        }
    }
    if (!bytes) w_trace_free();
    free(prompt);
    free(force);
    return bytes;
}

EXPORT("cis2w_trace_count") int w_trace_count(void) { return g_tr.n; }

/* Entry i's values (NULL for none), *len bytes. */
EXPORT("cis2w_trace_data") const float *w_trace_data(int i, size_t *len)
{
    if (i < 0 || i >= g_tr.n || !g_tr.t[i].v) return NULL;
    *len = (size_t)g_tr.t[i].n * sizeof(float);
    return g_tr.t[i].v;
}

/* One decode-path operation through src/core/fparith.h, on bit patterns, so the
 * software FTZ/DAZ can be compared with a hardware pin (web/test/ftz_diff.sh).
 * op: 0 add, 1 sub, 2 mul, 3 div, 4 sqrt(a), 5 narrow the binary64 (a<<32|b). */
EXPORT("cis2w_fp_op") uint32_t w_fp_op(int op, uint32_t a, uint32_t b)
{
    volatile float x = cis2_u2f(a), y = cis2_u2f(b);
    float r;
    switch (op) {
    case 0: r = cis2_fadd(x, y); break;
    case 1: r = cis2_fsub(x, y); break;
    case 2: r = cis2_fmul(x, y); break;
    case 3: r = cis2_fdiv(x, y); break;
    case 4: r = cis2_fsqrt(x); break;
    default: {
        union {
            double d;
            uint64_t u;
        } c;
        c.u = (uint64_t)a << 32 | b;
        volatile double d = c.d;
        r = cis2_f64_to_f32(d);
    }
    }
    return cis2_f2u(r);
}
