/* Loading hashes exactly the bytes it computes on (§12.1): the files of a
 * model directory are renamed over or overwritten in place between every two
 * phases of a load (the loader's test hook), and during decode (the step
 * callback); every run must either refuse with one line or give digests
 * that a clean load of the files its receipt names reproduces bit for bit —
 * and never die of a signal. Also: the hashes equal sha256 of the files, and
 * nothing is read before the safetensors header is validated. */
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *FILES[3] = { "config.json", "tokenizer.json", "model.safetensors" };
static const int32_t PROMPT[5] = { 5, 17, 42, 7, 99 };
#define NGEN 4

static char *slurp(const char *path, size_t *len)
{
    char *b, err[CIS2_ERR_LEN];
    if (cis2_read_file(path, &b, len, err)) return NULL;
    return b;
}

static int put(const char *path, const char *b, size_t len, int in_place)
{
    int fd = in_place ? open(path, O_WRONLY) : open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    int bad = write(fd, b, len) != (ssize_t)len || ftruncate(fd, (off_t)len) != 0;
    return close(fd) || bad;
}

static int copy_file(const char *from, const char *to)
{
    size_t n;
    char *b = slurp(from, &n);
    int rc = !b || put(to, b, n, 0);
    free(b);
    return rc;
}

static int copy_dir(const char *from, const char *to)
{
    char a[600], b[600];
    mkdir(to, 0755);
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", from, FILES[i]);
        snprintf(b, sizeof b, "%s/%s", to, FILES[i]);
        if (copy_file(a, b)) return 1;
    }
    return 0;
}

/* Replace DIR/f by SRC/f: rename a full copy over it, or rewrite it in place. */
static void replace_files(const char *dir, const char *src, int in_place)
{
    char a[600], b[600], t[620];
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", src, FILES[i]);
        snprintf(b, sizeof b, "%s/%s", dir, FILES[i]);
        if (in_place) {
            size_t n;
            char *buf = slurp(a, &n);
            if (buf) put(b, buf, n, 1);
            free(buf);
        } else {
            snprintf(t, sizeof t, "%s.new", b);
            if (!copy_file(a, t)) rename(t, b);
        }
    }
}

typedef struct {
    const char *dir, *src;
    int phase, in_place, fired;
} hook_ctx;

static void hook(void *ctx, cis2_load_phase ph, const char *dir)
{
    hook_ctx *h = ctx;
    if ((int)ph != h->phase) return;
    replace_files(h->dir, h->src, h->in_place);
    h->fired = 1;
    (void)dir;
}

static int run(const cis2_model *m, cis2_backend_kind bk, cis2_step_fn on_step, void *ctx,
               cis2_result *r, char *err)
{
    cis2_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = bk;
    eo.threads = 2;
    cis2_engine *e;
    if (cis2_engine_new(&e, m, &eo, err)) return 1;
    cis2_gen_opts g = { NGEN, 0, on_step, ctx, NULL, 0 };
    int rc = cis2_generate(e, PROMPT, 5, &g, r, err);
    cis2_engine_free(e);
    return rc;
}

/* The receipt of a run names three file hashes: each must be the hash of
 * A's or B's version of that file, and a clean load of exactly those
 * versions must give the same ids, argmax and witness digests. */
static int consistent(const cis2_model *m, const cis2_result *r, const char *A, const char *B,
                      const char *scratch, char *why)
{
    const uint8_t *have[3] = { m->dg.config_sha256, m->dg.tokenizer_sha256, m->dg.weights_sha256 };
    char p[600], q[600], err[CIS2_ERR_LEN];
    mkdir(scratch, 0755);
    for (int i = 0; i < 3; i++) {
        const char *pick = NULL;
        uint8_t h[32];
        snprintf(p, sizeof p, "%s/%s", A, FILES[i]);
        if (!cis2_sha256_file(p, h, err) && !memcmp(h, have[i], 32)) pick = A;
        snprintf(p, sizeof p, "%s/%s", B, FILES[i]);
        if (!pick && !cis2_sha256_file(p, h, err) && !memcmp(h, have[i], 32)) pick = B;
        if (!pick) {
            sprintf(why, "the %s hash is neither version's", FILES[i]);
            return 0;
        }
        snprintf(p, sizeof p, "%s/%s", pick, FILES[i]);
        snprintf(q, sizeof q, "%s/%s", scratch, FILES[i]);
        if (copy_file(p, q)) {
            snprintf(why, 300, "cannot copy %.250s", p);
            return 0;
        }
    }
    cis2_model clean;
    cis2_result r2;
    if (cis2_model_load(&clean, scratch, NULL, err)) {
        sprintf(why, "clean load: %.200s", err);
        return 0;
    }
    int rc = run(&clean, CIS2_BACKEND_REF, NULL, NULL, &r2, err);
    int ok = !rc && r2.n_gen == r->n_gen && !memcmp(r2.gen, r->gen, sizeof(int32_t) * NGEN) &&
             !memcmp(r2.witness, r->witness, 32) && !memcmp(r2.argmax, r->argmax, 32);
    if (!ok)
        sprintf(why, "a clean load of the named files gives other digests (%.200s)", rc ? err : "");
    if (!rc) cis2_result_free(&r2);
    cis2_model_unload(&clean);
    return ok;
}

static void test_replace_during_load(const char *tmp, const char *A, const char *B)
{
    static const char *PH[] = { "config-read", "tokenizer-read", "weights-open", "weights-read",
                                "done" };
    for (int in_place = 0; in_place < 2; in_place++)
        for (int ph = CIS2_LOAD_CONFIG_READ; ph <= CIS2_LOAD_DONE; ph++) {
            char W[512], S[512], tn[160], why[400] = "", err[CIS2_ERR_LEN] = "";
            snprintf(W, sizeof W, "%s/w-%d-%d", tmp, in_place, ph);
            snprintf(S, sizeof S, "%s/s-%d-%d", tmp, in_place, ph);
            snprintf(tn, sizeof tn, "load.%s-after-%s.receipt-names-what-ran",
                     in_place ? "overwrite" : "rename", PH[ph]);
            if (copy_dir(A, W)) {
                CHECK(tn, 0, "cannot copy the fixture");
                continue;
            }
            hook_ctx h = { W, B, ph, in_place, 0 };
            cis2_load_opts lo = { 0 };
            lo.hook = hook;
            lo.hook_ctx = &h;
            cis2_model m;
            if (cis2_model_load(&m, W, &lo, err)) {
                /* refusing is allowed (one line, no receipt); it must not be silent */
                CHECK(tn, h.fired && err[0] && !strchr(err, '\n'), "refused: %s", err);
                continue;
            }
            cis2_result r;
            int rc = run(&m, CIS2_BACKEND_FAST, NULL, NULL, &r, err);
            int ok = !rc && h.fired && consistent(&m, &r, A, B, S, why);
            CHECK(tn, ok, "%s%s", rc ? err : why, h.fired ? "" : " (hook never fired)");
            if (!rc) cis2_result_free(&r);
            cis2_model_unload(&m);
        }
}

/* on_step: at step 0 overwrite every file in place with B's bytes, at step
 * 1 truncate them all — the run must not notice. */
typedef struct {
    const char *dir, *src;
} step_ctx;

static void on_step(void *ctx, int step, const float *logits, int vocab, int32_t chosen)
{
    const step_ctx *s = ctx;
    (void)logits;
    (void)vocab;
    (void)chosen;
    if (step == 0) replace_files(s->dir, s->src, 1);
    if (step == 1)
        for (int i = 0; i < 3; i++) {
            char p[600];
            snprintf(p, sizeof p, "%s/%s", s->dir, FILES[i]);
            if (truncate(p, 3) != 0) perror(p);
        }
}

static void test_overwrite_during_decode(const char *tmp, const char *A, const char *B)
{
    char err[CIS2_ERR_LEN];
    cis2_model a;
    cis2_result want;
    if (cis2_model_load(&a, A, NULL, err) || run(&a, CIS2_BACKEND_REF, NULL, NULL, &want, err)) {
        CHECK("decode.overwrite", 0, "%s", err);
        return;
    }
    cis2_model_unload(&a);
    for (int bk = 0; bk < 2; bk++) {
        char W[512], tn[160];
        snprintf(W, sizeof W, "%s/decode-%d", tmp, bk);
        snprintf(tn, sizeof tn, "decode.%s.files-overwritten-then-truncated-mid-run",
                 bk ? "fast" : "ref");
        cis2_model m;
        cis2_result r;
        if (copy_dir(A, W) || cis2_model_load(&m, W, NULL, err)) {
            CHECK(tn, 0, "%s", err);
            continue;
        }
        step_ctx s = { W, B };
        int rc = run(&m, bk ? CIS2_BACKEND_FAST : CIS2_BACKEND_REF, on_step, &s, &r, err);
        CHECK(tn, !rc && !memcmp(r.witness, want.witness, 32) && !memcmp(r.argmax, want.argmax, 32),
              "%s", rc ? err : "the digests changed");
        if (!rc) cis2_result_free(&r);
        cis2_model_unload(&m);
    }
    cis2_result_free(&want);
}

/* The three hashes are sha256 of the files (the pipelined hash of the
 * weights included); skip-hash zeroes them unless the caller supplies them. */
static void test_hashes(const char *A)
{
    char err[CIS2_ERR_LEN], p[600];
    uint8_t want[3][32], zero[32] = { 0 };
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", A, FILES[i]);
        ok &= cis2_sha256_file(p, want[i], err) == 0;
    }
    cis2_model m;
    if (!ok || cis2_model_load(&m, A, NULL, err)) {
        CHECK("load.hashes-are-sha256-of-the-files", 0, "%s", err);
        return;
    }
    CHECK("load.hashes-are-sha256-of-the-files",
          !memcmp(m.dg.config_sha256, want[0], 32) && !memcmp(m.dg.tokenizer_sha256, want[1], 32) &&
              !memcmp(m.dg.weights_sha256, want[2], 32),
          "a hash differs");
    cis2_model_unload(&m);
    cis2_load_opts lo = { 0 };
    lo.skip_hash = CIS2_LOAD_HASH_SKIP;
    int rc1 = cis2_model_load(&m, A, &lo, err);
    int z =
        !rc1 && !memcmp(m.dg.weights_sha256, zero, 32) && !memcmp(m.dg.tokenizer_sha256, zero, 32);
    if (!rc1) cis2_model_unload(&m);
    lo.weights_sha256 = want[2];
    lo.tokenizer_sha256 = want[1];
    int rc2 = cis2_model_load(&m, A, &lo, err);
    int given = !rc2 && !memcmp(m.dg.weights_sha256, want[2], 32) &&
                !memcmp(m.dg.tokenizer_sha256, want[1], 32);
    if (!rc2) cis2_model_unload(&m);
    CHECK("load.skip-hash-zero-or-supplied", z && given, "rc=%d/%d %s", rc1, rc2, err);
}

/* The weights pushed in chunk by chunk through the public API (cis2.h,
 * cis2_model_push_*: the wasm page's load), in `max`-byte chunks (every third
 * one shorter), far smaller than the file so the window slides many times and
 * tensors straddle chunks. Returns the model, or NULL with err. */
static cis2_model *push_file(const char *A, const char *file, size_t n, size_t max,
                             cis2_hash_mode mode, char *err)
{
    cis2_model_opts o = { mode };
    cis2_model_push *w;
    cis2_model *m = NULL;
    if (cis2_model_push_open(&w, A, &o, max, err)) return NULL;
    int ok = 1;
    for (size_t off = 0, i = 0; ok && off < n; i++) {
        size_t c = i % 3 == 1 ? max / 3 + 1 : max; /* uneven chunks too */
        if (c > n - off) c = n - off;
        uint8_t *dst = cis2_model_push_buf(w, c, err);
        if (dst) memcpy(dst, file + off, c);
        ok = dst && !cis2_model_push_feed(w, c, err);
        off += c;
    }
    if (!ok) {
        cis2_model_push_end(w, 0, NULL, err); /* abandons: err keeps the chunk's message */
        return NULL;
    }
    return cis2_model_push_end(w, 1, &m, err) ? NULL : m;
}

static int same_config(const cis2_model *a, const cis2_model *b)
{
    const cis2_config *x = cis2_model_config(a), *y = cis2_model_config(b);
    return x->arch == y->arch && x->hidden == y->hidden && x->inter == y->inter &&
           x->n_layers == y->n_layers && x->n_heads == y->n_heads &&
           x->n_kv_heads == y->n_kv_heads && x->head_dim == y->head_dim && x->vocab == y->vocab &&
           x->max_pos == y->max_pos && x->tied == y->tied && x->qkv_bias == y->qkv_bias &&
           !memcmp(&x->eps, &y->eps, sizeof x->eps) &&
           !memcmp(&x->rope_theta, &y->rope_theta, sizeof x->rope_theta);
}

/* Pushed chunk by chunk: the same config, digests (the loader hashing the
 * pushed bytes) and decode, bit for bit, as cis2_model_open of the file; a
 * chunk over the limit and a short file are refused; a failed chunk leaves
 * only the end; an abandoned push frees everything (ASan's leak check). */
static void test_push(const char *A)
{
    char err[CIS2_ERR_LEN], p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", A);
    size_t n;
    char *file = slurp(p, &n);
    cis2_model *m0 = NULL;
    cis2_result r0;
    if (!file || cis2_model_open(&m0, A, NULL, err) ||
        run(m0, CIS2_BACKEND_FAST, NULL, NULL, &r0, err)) {
        CHECK("load.push-equals-whole-file", 0, "fixture: %s", err);
        cis2_model_free(m0);
        free(file);
        return;
    }
    const cis2_digests *d0 = cis2_model_digests(m0);
    static const size_t sizes[] = { 4093, 65536, (size_t)1 << 20 };
    for (int k = 0; k < 3; k++) {
        cis2_model *m = push_file(A, file, n, sizes[k], CIS2_HASH_FULL, err);
        cis2_result r;
        int ran = m && !run(m, CIS2_BACKEND_FAST, NULL, NULL, &r, err);
        int same = ran && !memcmp(cis2_model_digests(m), d0, sizeof *d0) && same_config(m, m0) &&
                   cis2_model_digests_pending(m) == 0 && !memcmp(r.witness, r0.witness, 32) &&
                   !memcmp(r.argmax, r0.argmax, 32);
        CHECK("load.push-equals-whole-file", same, "chunks of %zu: %s", sizes[k],
              m ? "differs" : err);
        if (ran) cis2_result_free(&r);
        cis2_model_free(m);
    }

    /* CIS2_HASH_CALLER: config.json hashed by the loader, the other two
     * pending (zero) until the caller's digests come, after the load. */
    cis2_model *m = push_file(A, file, n, 65536, CIS2_HASH_CALLER, err);
    const cis2_digests *d = m ? cis2_model_digests(m) : NULL;
    uint8_t zero[32] = { 0 };
    int pend0 = m ? cis2_model_digests_pending(m) : -1;
    int zeros = d && !memcmp(d->weights_sha256, zero, 32) &&
                !memcmp(d->tokenizer_sha256, zero, 32) &&
                !memcmp(d->config_sha256, d0->config_sha256, 32);
    int s1 = m && !cis2_model_set_digest(m, CIS2_DIGEST_WEIGHTS, d0->weights_sha256, err);
    int pend1 = m ? cis2_model_digests_pending(m) : -1;
    int s2 = s1 && !cis2_model_set_digest(m, CIS2_DIGEST_TOKENIZER, d0->tokenizer_sha256, err);
    int same = s2 && cis2_model_digests_pending(m) == 0 && !memcmp(d, d0, sizeof *d0);
    CHECK("load.push-caller-digests-pending-then-set",
          zeros && pend0 == 3 && pend1 == 1 << CIS2_DIGEST_TOKENIZER && same,
          "pending %d then %d; %s", pend0, pend1, err);
    int again = m && cis2_model_set_digest(m, CIS2_DIGEST_WEIGHTS, zero, err) &&
                strstr(err, "set already") && !memcmp(d->weights_sha256, d0->weights_sha256, 32);
    CHECK("load.set-digest-once", again, "%s", err);
    int badk = m && cis2_model_set_digest(m, (cis2_digest_kind)5, zero, err) &&
               strstr(err, "unknown digest 5");
    CHECK("load.set-digest-refuses-an-unknown-kind", badk, "%s", err);
    cis2_model_free(m);

    /* A model that hashes its own artifacts takes no caller digest. */
    int refused = cis2_model_set_digest(m0, CIS2_DIGEST_WEIGHTS, zero, err) &&
                  strstr(err, "CIS2_HASH_CALLER") &&
                  memcmp(cis2_model_digests(m0)->weights_sha256, zero, 32) != 0 &&
                  cis2_model_digests_pending(m0) == 0;
    cis2_model_opts so = { CIS2_HASH_SKIP };
    cis2_model *ms = NULL;
    int srefused = !cis2_model_open(&ms, A, &so, err) &&
                   cis2_model_set_digest(ms, CIS2_DIGEST_TOKENIZER, d0->tokenizer_sha256, err) &&
                   !memcmp(cis2_model_digests(ms)->tokenizer_sha256, zero, 32);
    cis2_model_free(ms);
    CHECK("load.set-digest-refused-unless-caller-mode", refused && srefused, "%d %d %s", refused,
          srefused, err);
    /* cis2_model_open takes CALLER too: the same pending digests. */
    cis2_model_opts co = { CIS2_HASH_CALLER };
    cis2_model *mc = NULL;
    int copen = !cis2_model_open(&mc, A, &co, err) && cis2_model_digests_pending(mc) == 3 &&
                !cis2_model_set_digest(mc, CIS2_DIGEST_TOKENIZER, d0->tokenizer_sha256, err) &&
                cis2_model_digests_pending(mc) == 1 << CIS2_DIGEST_WEIGHTS;
    cis2_model_free(mc);
    CHECK("load.open-caller-digests-pending", copen, "%s", err);

    cis2_model_push *w;
    int begun = !cis2_model_push_open(&w, A, NULL, 4096, err);
    int over = begun && !cis2_model_push_buf(w, 4097, err) && strstr(err, "model.safetensors");
    /* a failed chunk leaves only the end: the next buf, and an end with ok, refuse */
    int then = over && !cis2_model_push_buf(w, 16, err) && strstr(err, "earlier chunk failed");
    cis2_model *mf = (cis2_model *)&mf;
    int endrc = begun ? cis2_model_push_end(w, 1, &mf, err) : 0;
    CHECK("load.push-refuses-an-oversized-chunk", over, "%s", err);
    CHECK("load.push-after-a-failed-chunk-only-the-end",
          then && endrc && !mf && strstr(err, "earlier chunk failed"), "%d %d %s", then, endrc,
          err);
    int rc = cis2_model_push_open(&w, A, NULL, 4096, err);
    uint8_t *dst = rc ? NULL : cis2_model_push_buf(w, 4096, err);
    if (dst) memcpy(dst, file, 4096);
    int fed = dst && !cis2_model_push_feed(w, 4096, err);
    int shortrc = rc ? 0 : cis2_model_push_end(w, 1, &mf, err);
    CHECK("load.push-refuses-a-short-file", fed && shortrc && strstr(err, "short") && !mf, "%s",
          err);

    /* Abandoned: right after open, and half way with tensors packed; err is
     * left as it was, everything freed (the ASan leg's leak check). */
    int ab = 1;
    for (int half = 0; half < 2; half++) {
        if (cis2_model_push_open(&w, A, NULL, 4096, err)) {
            ab = 0;
            break;
        }
        for (size_t off = 0; half && off < n / 2; off += 4096) {
            dst = cis2_model_push_buf(w, 4096, err);
            if (!dst || (memcpy(dst, file + off, 4096), cis2_model_push_feed(w, 4096, err))) ab = 0;
        }
        snprintf(err, CIS2_ERR_LEN, "kept");
        mf = (cis2_model *)&mf;
        ab &= cis2_model_push_end(w, 0, &mf, err) == 0 && !mf && !strcmp(err, "kept");
    }
    CHECK("load.push-abandoned-frees-everything", ab, "%s", err);
    int nullw = cis2_model_push_end(NULL, 0, NULL, err) && strstr(err, "w is NULL") &&
                cis2_model_push_open(&w, A, NULL, 0, err) && strstr(err, "max_chunk is 0") &&
                cis2_model_push_open(&w, A, &(cis2_model_opts){ (cis2_hash_mode)9 }, 64, err) &&
                strstr(err, "unknown hash mode 9") && !w;
    CHECK("load.push-refuses-bad-arguments", nullw, "%s", err);
    cis2_result_free(&r0);
    cis2_model_free(m0);
    free(file);
}

/* An invalid header is refused before the data is touched: the hook's
 * weights-open phase (after the header) never fires, and a header that
 * contradicts config.json is refused there too. */
static int phases_seen;
static void count_hook(void *ctx, cis2_load_phase ph, const char *dir)
{
    (void)ctx;
    (void)dir;
    phases_seen |= 1 << ph;
}

static void test_header_first(const char *tmp, const char *A)
{
    char W[512], p[600], err[CIS2_ERR_LEN];
    snprintf(W, sizeof W, "%s/badhdr", tmp);
    snprintf(p, sizeof p, "%s/model.safetensors", W);
    size_t n;
    char *b = NULL;
    if (copy_dir(A, W) || !(b = slurp(p, &n)) || n < 16) {
        CHECK("load.bad-header-refused-before-the-data", 0, "fixture");
        free(b);
        return;
    }
    b[8] = '['; /* not a JSON object */
    put(p, b, n, 1);
    cis2_load_opts lo = { 0 };
    lo.hook = count_hook;
    cis2_model m;
    phases_seen = 0;
    int rc = cis2_model_load(&m, W, &lo, err);
    CHECK("load.bad-header-refused-before-the-data",
          rc && strstr(err, "header") && !(phases_seen & (1 << CIS2_LOAD_WEIGHTS_OPEN)) &&
              (phases_seen & (1 << CIS2_LOAD_TOKENIZER_READ)),
          "rc=%d phases=0x%x %s", rc, (unsigned)phases_seen, err);
    if (!rc) cis2_model_unload(&m);
    free(b);
}

int main(void)
{
    if (cis2_fpenv_pin()) {
        CHECK("load.pin", 0, "cannot pin");
        UNIT_END();
    }
    const char *tmp0 = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char tmp[512], A[600], B[600], cmd[1600];
    snprintf(tmp, sizeof tmp, "%s/unit-load", tmp0);
    snprintf(A, sizeof A, "%s/A", tmp);
    snprintf(B, sizeof B, "%s/B", tmp);
    /* two checkpoints of one shape: other weights, another theta (config),
     * and B's tokenizer.json one byte longer (same tokens) */
    snprintf(cmd, sizeof cmd,
             "rm -rf %s && mkdir -p %s && python3 tools/make_model.py %s --layers 2 >/dev/null && "
             "python3 tools/make_model.py %s --layers 2 --seed 7 --theta 20000 >/dev/null && "
             "printf ' ' >> %s/tokenizer.json",
             tmp, tmp, A, B, B);
    if (system(cmd) != 0) {
        CHECK("load.fixture", 0, "make_model.py failed");
        UNIT_END();
    }
    test_hashes(A);
    test_header_first(tmp, A);
    test_push(A);
    test_replace_during_load(tmp, A, B);
    test_overwrite_during_decode(tmp, A, B);
    UNIT_END();
}
