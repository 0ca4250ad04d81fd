/* Allocation failures (SQLite's discipline, docs/architecture.md "The error
 * contract"): for each operation below, the library's allocation number k
 * fails, for k = 1, 2, 3, ... until the operation runs with no failure
 * injected. Each time the operation must return an error whose message
 * names the memory (never crash, abort or print), or succeed with exactly
 * the uninjected result (an allocation it could do without), and the
 * library must stay usable: the same call, uninjected, then works.
 *   load     cis2_model_open of the generated fixture
 *   decode   cis2_engine_new + cis2_generate (270 tokens: the KV cache and
 *            the attention scratch grow mid-decode) + free, ref and fast (2 threads)
 *   reuse    cis2_generate on a live engine (ref, fast), then uninjected on it
 *   batch    two sequences through cis2_seq_submit/cis2_engine_step/take
 *   verify   cis2_receipt_parse + cis2_receipt_verify + frees
 * Mode "once" fails allocation k only; mode "from" fails k and every one
 * after it (the error paths' own cleanup then cannot allocate either).
 * The hook: the Makefile links this binary with -Wl,--wrap for the malloc
 * family (OOM_WRAP), so every call the library makes reaches __wrap_* here;
 * no library source knows about it. */
#include "unit.h"
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

/* ------------------------------------------------------------- the hook */
static atomic_long oom_seen; /* allocations since arming */
static atomic_long oom_at;   /* the allocation that fails (1-based); 0 = off */
static atomic_int oom_from;  /* every allocation from oom_at on fails */
static atomic_int oom_fired; /* an injected failure happened */

static int oom_fail(void)
{
    long at = atomic_load(&oom_at);
    if (!at) return 0;
    long n = atomic_fetch_add(&oom_seen, 1) + 1;
    if (n == at || (n > at && atomic_load(&oom_from))) {
        atomic_store(&oom_fired, 1);
        return 1;
    }
    return 0;
}

static void oom_arm(long k, int from)
{
    atomic_store(&oom_seen, 0);
    atomic_store(&oom_fired, 0);
    atomic_store(&oom_from, from);
    atomic_store(&oom_at, k);
}

static void oom_disarm(void) { atomic_store(&oom_at, 0); }

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
/* The linker sends the library's calls here (--wrap); declared for -Wmissing-prototypes. */
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *__wrap_malloc(size_t n)
{
    if (oom_fail()) return errno = ENOMEM, NULL;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size)
{
    if (oom_fail()) return errno = ENOMEM, NULL;
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n)
{
    if (oom_fail()) return errno = ENOMEM, NULL;
    return __real_realloc(p, n);
}
char *__wrap_strdup(const char *s)
{
    if (oom_fail()) return errno = ENOMEM, NULL;
    return __real_strdup(s);
}
char *__wrap_strndup(const char *s, size_t n)
{
    if (oom_fail()) return errno = ENOMEM, NULL;
    return __real_strndup(s, n);
}
void *__wrap_aligned_alloc(size_t align, size_t n)
{
    if (oom_fail()) return errno = ENOMEM, NULL;
    return __real_aligned_alloc(align, n);
}
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (oom_fail()) return errno = ENOMEM, MAP_FAILED;
    return __real_mmap(addr, len, prot, flags, fd, off);
}

/* ------------------------------------------------------------ the runs */
/* One operation: 0 and its result digest in out[32], or nonzero with err. */
typedef int (*op_fn)(void *ctx, uint8_t out[32], char *err);

/* Tallies of one scenario in one mode. */
typedef struct {
    long points;   /* allocations failed one by one (k with a failure fired) */
    int errors;    /* of those, the operation returned an error */
    int survived;  /* the operation did without that allocation: same result */
    int bad;       /* a wrong result, a silent error or a message not naming memory */
    char why[512]; /* the first bad case */
} tally;

#define K_MAX 200000L /* no scenario here allocates this often */

static void run_scenario(const char *name, op_fn op, void *ctx, int from)
{
    char tn[160], err[CIS2_ERR_LEN];
    uint8_t want[32], got[32];
    tally t = { 0 };
    snprintf(tn, sizeof tn, "oom.%s.%s.baseline", name, from ? "from" : "once");
    err[0] = 0;
    if (op(ctx, want, err)) {
        CHECK(tn, 0, "the uninjected operation fails: %s", err);
        return;
    }
    long k;
    for (k = 1; k < K_MAX; k++) {
        err[0] = 0;
        memset(got, 0, sizeof got);
        oom_arm(k, from);
        int rc = op(ctx, got, err);
        oom_disarm();
        if (!atomic_load(&oom_fired)) break; /* fewer than k allocations: done */
        t.points++;
        if (rc) {
            t.errors++;
            if (!err[0] || !strstr(err, "memory")) {
                if (!t.bad++)
                    snprintf(t.why, sizeof t.why, "allocation %ld: error '%s' names no memory", k,
                             err);
            }
        } else if (memcmp(got, want, 32) != 0) {
            if (!t.bad++)
                snprintf(t.why, sizeof t.why,
                         "allocation %ld failed, yet the operation succeeded with another result",
                         k);
        } else t.survived++;
        /* the library stays usable: the same call, uninjected, works */
        err[0] = 0;
        if (op(ctx, got, err) || memcmp(got, want, 32) != 0) {
            if (!t.bad++)
                snprintf(t.why, sizeof t.why,
                         "after allocation %ld failed, the uninjected operation %s%s", k,
                         err[0] ? "fails: " : "gives another result", err);
        }
    }
    snprintf(tn, sizeof tn, "oom.%s.%s", name, from ? "from" : "once");
    CHECK(tn, t.bad == 0 && k < K_MAX && t.points > 0, "%d bad of %ld failure points (%s)%s", t.bad,
          t.points, t.why, k >= K_MAX ? "; never finished" : "");
    printf("oom.%s.%s: %ld allocation failure points: %d errors, %d survived\n", name,
           from ? "from" : "once", t.points, t.errors, t.survived);
}

/* ---- load */
typedef struct {
    const char *dir;
} load_ctx;

static int op_load(void *ctx, uint8_t out[32], char *err)
{
    const load_ctx *c = ctx;
    cis2_model *m;
    if (cis2_model_open(&m, c->dir, NULL, err)) return 1;
    /* what was loaded: the digests, the tokenizer and the warnings */
    const cis2_digests *d = cis2_model_digests(m);
    char terr[CIS2_ERR_LEN];
    const cis2_tokenizer *tk = cis2_model_tokenizer(m, terr);
    cis2_sha256 h;
    cis2_sha256_init(&h);
    cis2_sha256_update(&h, d, sizeof *d);
    int facts[3] = { tk != NULL, tk ? cis2_tokenizer_vocab_size(tk) : 0,
                     cis2_model_warning_count(m) };
    cis2_sha256_update(&h, facts, sizeof facts);
    if (tk) { /* the tokenizer works: an encode's ids */
        int32_t *ids = NULL;
        int n = 0;
        oom_disarm(); /* only the load is under test */
        if (!cis2_tokenizer_encode(tk, "Once upon a time", 16, &ids, &n, terr))
            cis2_sha256_update(&h, ids, (size_t)n * sizeof *ids);
        free(ids);
    }
    cis2_sha256_final(&h, out);
    cis2_model_free(m);
    return 0;
}

/* ---- decode */
static const int32_t PROMPT[] = { 3, 141, 59, 26, 5 };
#define N_PROMPT 5
#define N_GEN    4

typedef struct {
    const cis2_model *m;
    cis2_engine_opts eo;
    cis2_engine *e; /* reuse: the live engine */
} dec_ctx;

static void result_digest(const cis2_result *r, uint8_t out[32])
{
    cis2_sha256 h;
    cis2_sha256_init(&h);
    cis2_sha256_update(&h, r->witness, 32);
    cis2_sha256_update(&h, r->argmax, 32);
    cis2_sha256_update(&h, r->gen, (size_t)r->n_gen * sizeof *r->gen);
    cis2_sha256_final(&h, out);
}

/* decode: long enough that the KV cache grows mid-decode, past the fast
 * backend's first 256 positions of attention scratch (its reservation grows) */
#define N_GEN_LONG 270

static int op_decode(void *ctx, uint8_t out[32], char *err)
{
    const dec_ctx *c = ctx;
    cis2_engine *e;
    if (cis2_engine_new(&e, c->m, &c->eo, err)) return 1;
    cis2_gen_opts g = { N_GEN_LONG, 0, NULL, NULL, NULL, 0 };
    cis2_result r;
    int rc = cis2_generate(e, PROMPT, N_PROMPT, &g, &r, err);
    if (!rc) result_digest(&r, out);
    cis2_result_free(&r);
    cis2_engine_free(e);
    return rc;
}

static int op_reuse(void *ctx, uint8_t out[32], char *err)
{
    const dec_ctx *c = ctx;
    cis2_gen_opts g = { N_GEN, 0, NULL, NULL, NULL, 0 };
    cis2_result r;
    int rc = cis2_generate(c->e, PROMPT, N_PROMPT, &g, &r, err);
    if (!rc) result_digest(&r, out);
    cis2_result_free(&r);
    return rc;
}

/* Two sequences of different prompts in one engine (max_seqs 2). */
static int op_batch(void *ctx, uint8_t out[32], char *err)
{
    const dec_ctx *c = ctx;
    cis2_engine *e = c->e;
    cis2_gen_opts g1 = { N_GEN, 0, NULL, NULL, NULL, 0 },
                  g2 = { N_GEN + 2, 0, NULL, NULL, NULL, 0 };
    int s1 = -1, s2 = -1, rc = 0;
    cis2_result r1 = { 0 }, r2 = { 0 };
    if (cis2_seq_submit(e, PROMPT, N_PROMPT, &g1, &s1, err) ||
        cis2_seq_submit(e, PROMPT + 1, N_PROMPT - 1, &g2, &s2, err))
        rc = 1;
    while (!rc && (!cis2_seq_done(e, s1) || !cis2_seq_done(e, s2))) rc = cis2_engine_step(e, err);
    if (!rc) rc = cis2_seq_take(e, s1, &r1, err) || cis2_seq_take(e, s2, &r2, err);
    if (rc) { /* the slots back for the next attempt */
        cis2_seq_cancel(e, s1);
        cis2_seq_cancel(e, s2);
    } else {
        uint8_t a[32], b[32];
        result_digest(&r1, a);
        result_digest(&r2, b);
        cis2_sha256 h;
        cis2_sha256_init(&h);
        cis2_sha256_update(&h, a, 32);
        cis2_sha256_update(&h, b, 32);
        cis2_sha256_final(&h, out);
    }
    cis2_result_free(&r1);
    cis2_result_free(&r2);
    return rc;
}

/* ---- verify */
typedef struct {
    cis2_engine *e;
    const char *text;
    size_t len;
} ver_ctx;

static int op_verify(void *ctx, uint8_t out[32], char *err)
{
    const ver_ctx *c = ctx;
    cis2_receipt r;
    if (cis2_receipt_parse(c->text, c->len, "oom.receipt", &r, err)) return 1;
    cis2_verdict v;
    int rc = cis2_receipt_verify(c->e, &r, NULL, NULL, &v, err);
    if (!rc) {
        int facts[2] = { v.n_fields, v.mismatches };
        cis2_sha256 h;
        cis2_sha256_init(&h);
        cis2_sha256_update(&h, facts, sizeof facts);
        for (int i = 0; i < v.n_fields; i++) {
            cis2_sha256_update(&h, &v.fields[i].status, sizeof v.fields[i].status);
            cis2_sha256_update(&h, v.fields[i].recomputed, strlen(v.fields[i].recomputed));
        }
        cis2_sha256_final(&h, out);
        cis2_verdict_free(&v);
    }
    cis2_receipt_free(&r);
    return rc;
}

int main(int argc, char **argv)
{
    /* argv[1] or OOM_ONLY: one scenario (load, decode-ref, reuse-fast, verify, ...) */
    const char *only = argc > 1 ? argv[1] : getenv("OOM_ONLY");
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], cmd[1200], err[CIS2_ERR_LEN];
    snprintf(dir, sizeof dir, "%s/unit-oom", tmp);
    snprintf(cmd, sizeof cmd, "python3 tools/make_model.py %s --layers 1 >/dev/null", dir);
    if (system(cmd) != 0) {
        CHECK("oom.fixture", 0, "make_model.py failed");
        UNIT_END();
    }
#define WANT(n) (!only || !strcmp(only, n))
    for (int from = 0; from < 2; from++) {
        load_ctx lc = { dir };
        if (WANT("load")) run_scenario("load", op_load, &lc, from);
    }
    cis2_model *m;
    if (cis2_model_open(&m, dir, NULL, err)) {
        CHECK("oom.model", 0, "%s", err);
        UNIT_END();
    }
    static const struct {
        const char *name;
        cis2_backend_kind bk;
    } BK[] = { { "ref", CIS2_BACKEND_REF }, { "fast", CIS2_BACKEND_FAST } };
    for (size_t b = 0; b < 2; b++)
        for (int from = 0; from < 2; from++) {
            char n[64];
            dec_ctx dc = { m, { BK[b].bk, CIS2_ISA_AUTO, 2, 1, NULL, NULL, NULL, NULL }, NULL };
            snprintf(n, sizeof n, "decode-%s", BK[b].name);
            if (WANT(n)) run_scenario(n, op_decode, &dc, from);
            snprintf(n, sizeof n, "reuse-%s", BK[b].name);
            if (WANT(n) && !cis2_engine_new(&dc.e, m, &dc.eo, err)) {
                run_scenario(n, op_reuse, &dc, from);
                cis2_engine_free(dc.e);
            }
            snprintf(n, sizeof n, "batch-%s", BK[b].name);
            dc.eo.max_seqs = 2;
            if (WANT(n) && !cis2_engine_new(&dc.e, m, &dc.eo, err)) {
                run_scenario(n, op_batch, &dc, from);
                cis2_engine_free(dc.e);
            }
        }
    /* a receipt of a fast run, verified on a ref engine (§14.3) */
    if (WANT("verify")) {
        cis2_engine_opts eo = { CIS2_BACKEND_FAST, CIS2_ISA_AUTO, 2, 1, NULL, NULL, NULL, NULL };
        cis2_engine *ef = NULL, *er = NULL;
        cis2_gen_opts g = { N_GEN, 0, NULL, NULL, NULL, 0 };
        cis2_result r = { 0 };
        char *bytes = NULL, *text = NULL;
        size_t blen = 0, tlen = 0;
        const cis2_tokenizer *tk = cis2_model_tokenizer(m, err);
        cis2_receipt rc;
        int ok = tk && !cis2_engine_new(&ef, m, &eo, err) &&
                 !cis2_generate(ef, PROMPT, N_PROMPT, &g, &r, err) &&
                 !cis2_receipt_prompt_bytes(tk, PROMPT, N_PROMPT, &bytes, &blen, err);
        if (ok) {
            cis2_receipt_from_run(&rc, m, &r, (const uint8_t *)bytes, blen);
            ok = !cis2_receipt_format(&rc, &text, &tlen) && !cis2_engine_new(&er, m, NULL, err);
        }
        if (!ok) CHECK("oom.verify.setup", 0, "%s", err);
        else
            for (int from = 0; from < 2; from++) {
                ver_ctx vc = { er, text, tlen };
                run_scenario("verify", op_verify, &vc, from);
            }
        cis2_free(text);
        cis2_free(bytes);
        cis2_result_free(&r);
        cis2_engine_free(ef);
        cis2_engine_free(er);
    }
    cis2_model_free(m);
    UNIT_END();
}
