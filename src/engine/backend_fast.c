/* The fast backend: weights repacked at load into 16-row
 * interleaved tiles (bf16 stays bf16), per-ISA SIMD kernels chosen at run
 * time, a persistent thread pool, batched prefill. Every output element is
 * still one §5.1 sequential dot product: SIMD lanes and threads only split
 * across rows, tokens, heads, keys and dims — never inside a sum — so the
 * results are bit-identical to the reference backend (tests/unit_fast.c,
 * tests/t_fast.sh). */
#include "engine/fast.h"
#include "kernels/kernels.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---------------------------------------------------------------- packing */
static uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static float ld32f(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* 16 bf16 rows x 8 columns -> 8 tile lines of 16 (a pure 16-bit transpose:
 * every output is one input element, bit for bit). */
static void tr8x8_u16(const uint8_t *const *rows, size_t off, uint16_t *d)
{
    for (int half = 0; half < 2; half++) {
        const uint8_t *const *r = rows + 8 * half;
        __m128i r0 = _mm_loadu_si128((const __m128i *)(r[0] + off)),
                r1 = _mm_loadu_si128((const __m128i *)(r[1] + off));
        __m128i r2 = _mm_loadu_si128((const __m128i *)(r[2] + off)),
                r3 = _mm_loadu_si128((const __m128i *)(r[3] + off));
        __m128i r4 = _mm_loadu_si128((const __m128i *)(r[4] + off)),
                r5 = _mm_loadu_si128((const __m128i *)(r[5] + off));
        __m128i r6 = _mm_loadu_si128((const __m128i *)(r[6] + off)),
                r7 = _mm_loadu_si128((const __m128i *)(r[7] + off));
        __m128i a0 = _mm_unpacklo_epi16(r0, r1), a1 = _mm_unpackhi_epi16(r0, r1);
        __m128i a2 = _mm_unpacklo_epi16(r2, r3), a3 = _mm_unpackhi_epi16(r2, r3);
        __m128i a4 = _mm_unpacklo_epi16(r4, r5), a5 = _mm_unpackhi_epi16(r4, r5);
        __m128i a6 = _mm_unpacklo_epi16(r6, r7), a7 = _mm_unpackhi_epi16(r6, r7);
        __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
        __m128i b2 = _mm_unpacklo_epi32(a1, a3), b3 = _mm_unpackhi_epi32(a1, a3);
        __m128i b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6);
        __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
        uint16_t *o = d + 8 * half;
        _mm_storeu_si128((__m128i *)(o + 0 * FAST_TILE), _mm_unpacklo_epi64(b0, b4));
        _mm_storeu_si128((__m128i *)(o + 1 * FAST_TILE), _mm_unpackhi_epi64(b0, b4));
        _mm_storeu_si128((__m128i *)(o + 2 * FAST_TILE), _mm_unpacklo_epi64(b1, b5));
        _mm_storeu_si128((__m128i *)(o + 3 * FAST_TILE), _mm_unpackhi_epi64(b1, b5));
        _mm_storeu_si128((__m128i *)(o + 4 * FAST_TILE), _mm_unpacklo_epi64(b2, b6));
        _mm_storeu_si128((__m128i *)(o + 5 * FAST_TILE), _mm_unpackhi_epi64(b2, b6));
        _mm_storeu_si128((__m128i *)(o + 6 * FAST_TILE), _mm_unpacklo_epi64(b3, b7));
        _mm_storeu_si128((__m128i *)(o + 7 * FAST_TILE), _mm_unpackhi_epi64(b3, b7));
    }
}
#elif defined(__wasm_simd128__)
#include <wasm_simd128.h>
/* The same pure 16-bit transpose with SIMD128 shuffles (the browser verifier
 * packs a 270 MB checkpoint on load). */
#define U16LO(a, b) wasm_i16x8_shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11)
#define U16HI(a, b) wasm_i16x8_shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15)
#define U32LO(a, b) wasm_i32x4_shuffle(a, b, 0, 4, 1, 5)
#define U32HI(a, b) wasm_i32x4_shuffle(a, b, 2, 6, 3, 7)
static void tr8x8_u16(const uint8_t *const *rows, size_t off, uint16_t *d)
{
    for (int half = 0; half < 2; half++) {
        const uint8_t *const *r = rows + 8 * half;
        v128_t a[8], b[8];
        for (int i = 0; i < 8; i += 2) {
            v128_t x = wasm_v128_load(r[i] + off), y = wasm_v128_load(r[i + 1] + off);
            a[i] = U16LO(x, y);
            a[i + 1] = U16HI(x, y);
        }
        b[0] = U32LO(a[0], a[2]), b[1] = U32HI(a[0], a[2]), b[2] = U32LO(a[1], a[3]);
        b[3] = U32HI(a[1], a[3]), b[4] = U32LO(a[4], a[6]), b[5] = U32HI(a[4], a[6]);
        b[6] = U32LO(a[5], a[7]), b[7] = U32HI(a[5], a[7]);
        uint16_t *o = d + 8 * half;
        for (int i = 0; i < 4; i++) {
            wasm_v128_store(o + (2 * i) * FAST_TILE, wasm_i64x2_shuffle(b[i], b[i + 4], 0, 2));
            wasm_v128_store(o + (2 * i + 1) * FAST_TILE, wasm_i64x2_shuffle(b[i], b[i + 4], 1, 3));
        }
    }
}
#endif

size_t fast_pack_bytes(const cis2_linear *w)
{
    size_t ntiles = ((size_t)w->rows + FAST_TILE - 1) / FAST_TILE;
    size_t b = ntiles * FAST_TILE * (size_t)w->cols * (w->dtype == CIS2_DT_BF16 ? 2 : 4);
    b = (b + 63) & ~(size_t)63;
    return b ? b : 64;
}

/* Re-layout w into p->data (fast_pack_bytes(w) bytes, 64-byte aligned). */
static void pack_into(const cis2_linear *w, fast_packed *p)
{
    size_t K = (size_t)w->cols;
    size_t ses = w->dtype == CIS2_DT_F32 ? 4 : 2;
    for (int t = 0; t < p->ntiles; t++) {
        const uint8_t *rows[FAST_TILE];
        int nr = w->rows - t * FAST_TILE < FAST_TILE ? w->rows - t * FAST_TILE : FAST_TILE;
        for (int l = 0; l < nr; l++) rows[l] = w->raw + (size_t)(t * FAST_TILE + l) * K * ses;
        if (p->bf16) {
            uint16_t *d = (uint16_t *)p->data + (size_t)t * K * FAST_TILE;
            size_t k = 0;
#if defined(__SSE2__) || defined(__wasm_simd128__)
            if (nr == FAST_TILE)
                for (; k + 8 <= K; k += 8, d += 8 * FAST_TILE) tr8x8_u16(rows, 2 * k, d);
#endif
            for (; k < K; k++, d += FAST_TILE) {
                for (int l = 0; l < nr; l++) d[l] = ld16(rows[l] + 2 * k);
                for (int l = nr; l < FAST_TILE; l++) d[l] = 0;
            }
        } else {
            float *d = (float *)p->data + (size_t)t * K * FAST_TILE;
            for (size_t k = 0; k < K; k++, d += FAST_TILE) {
                if (w->dtype == CIS2_DT_F32)
                    for (int l = 0; l < nr; l++) d[l] = ld32f(rows[l] + 4 * k);
                else
                    for (int l = 0; l < nr; l++)
                        d[l] = cis2_f16_to_f32(ld16(rows[l] + 2 * k)); /* exact */
                for (int l = nr; l < FAST_TILE; l++) d[l] = 0.0f;
            }
        }
    }
}

static void packed_init(const cis2_linear *w, fast_packed *p)
{
    memset(p, 0, sizeof *p);
    p->rows = w->rows;
    p->cols = w->cols;
    p->ntiles = (w->rows + FAST_TILE - 1) / FAST_TILE;
    p->bf16 = w->dtype == CIS2_DT_BF16;
    p->bytes = (size_t)p->ntiles * FAST_TILE * (size_t)w->cols * (p->bf16 ? 2 : 4);
}

/* An anonymous mapping with transparent huge pages, 2 MiB aligned (page
 * faults are expensive on a VM; 2 MiB pages cut them 512x). */
static void *huge_alloc(size_t bytes, size_t *map_len)
{
#if defined(__wasm__)
    (void)bytes, (void)map_len;
    return NULL; /* wasm32: no anonymous mappings; callers fall back to aligned_alloc */
#endif
    size_t hp = (size_t)2 << 20, len = (bytes + hp - 1) & ~(hp - 1);
    void *m = mmap(NULL, len + hp, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)m + hp - 1) & ~(uintptr_t)(hp - 1);
    if (a > (uintptr_t)m) munmap(m, a - (uintptr_t)m);
    uintptr_t end = (uintptr_t)m + len + hp;
    if (end > a + len) munmap((void *)(a + len), end - (a + len));
#ifdef MADV_HUGEPAGE
    madvise((void *)a, len, MADV_HUGEPAGE);
#endif
    *map_len = len;
    return (void *)a;
}

int fast_pack(const cis2_linear *w, fast_packed *p, char *err)
{
    packed_init(w, p);
    size_t alloc = fast_pack_bytes(w);
    if (alloc >= ((size_t)4 << 20)) p->data = huge_alloc(alloc, &p->map_len);
    if (!p->data) p->data = aligned_alloc(64, alloc);
    if (!p->data) {
        snprintf(err, CIS2_ERR_LEN, "out of memory packing a [%d, %d] weight", w->rows, w->cols);
        return 1;
    }
    pack_into(w, p);
    return 0;
}

int fast_pack_at(const cis2_linear *w, fast_packed *p, void *dst)
{
    if (((uintptr_t)dst & 63) != 0) return 1;
    packed_init(w, p);
    p->data = dst;
    p->borrowed = 1;
    pack_into(w, p);
    return 0;
}

void fast_packed_free(fast_packed *p)
{
    if (!p || !p->data) return;
    if (p->borrowed) {
        p->data = NULL;
        return;
    }
    if (p->map_len) munmap(p->data, p->map_len);
    else free(p->data);
    p->data = NULL;
}

/* ---------------------------------------------------------------- state */
typedef struct {
    const fast_kernels *k;
    tp_pool *pool;
    char name[32];
    cis2_model *m;
    int n_packed;
    fast_packed *packed;  /* one per distinct linear */
    cis2_linear **owners; /* linears whose ->packed we set */
    int n_owners;
    void *arena; /* all packed tiles: one huge-page mapping */
    size_t arena_len;
    float **scratch; /* per thread: attention scores */
    int scratch_cap;
    float *kt; /* prefill: the layer's keys transposed, [n_kv][hd][ldkt] */
    size_t kt_cap;
    float *sall; /* decode: every head's scores, [n_heads][n] */
    size_t sall_cap;
} fast_state;

/* ---------------------------------------------------------------- matmul */
typedef struct {
    const fast_kernels *k;
    const fast_packed *p;
    const float *X;
    float *Y;
    int T, tiles_per_task, toks_per_task, n_tok_chunks;
} mm_job;

static void mm_task(void *ctx, int task, int tid)
{
    (void)tid;
    const mm_job *j = ctx;
    const fast_packed *p = j->p;
    int rg = task / j->n_tok_chunks, tc = task % j->n_tok_chunks;
    int t0 = rg * j->tiles_per_task,
        nt = p->ntiles - t0 < j->tiles_per_task ? p->ntiles - t0 : j->tiles_per_task;
    int k0 = tc * j->toks_per_task, T = j->T - k0 < j->toks_per_task ? j->T - k0 : j->toks_per_task;
    size_t K = (size_t)p->cols;
    int nrows = p->rows - t0 * FAST_TILE;
    const float *X = j->X + (size_t)k0 * K;
    float *Y = j->Y + (size_t)k0 * p->rows + (size_t)t0 * FAST_TILE;
    if (p->bf16)
        j->k->mm_bf16((const uint16_t *)p->data + (size_t)t0 * K * FAST_TILE, (int)K, nt, nrows, X,
                      (int)K, T, Y, p->rows);
    else
        j->k->mm_f32((const float *)p->data + (size_t)t0 * K * FAST_TILE, (int)K, nt, nrows, X,
                     (int)K, T, Y, p->rows);
}

static const fast_packed *packed_of(const cis2_linear *w)
{
    const fast_packed *p = w->packed;
    if (!p) {
        fprintf(stderr, "cis2: fast backend: a [%d, %d] weight was never packed\n", w->rows,
                w->cols);
        abort();
    }
    return p;
}

/* Splits one matmul into tasks; returns their number. */
static int mm_setup(const fast_state *s, const fast_packed *p, const float *X, int T, float *Y,
                    mm_job *j)
{
    int nth = tp_threads(s->pool);
    *j = (mm_job){ s->k, p, X, Y, T, 0, 0, 0 };
    if (T <= 4) {
        /* decode: rows only, ~4 tasks per thread, multiples of 8 tiles */
        int want = nth == 1 ? 1 : nth * 4;
        int tpt = (p->ntiles + want - 1) / want;
        tpt = (tpt + 7) & ~7;
        j->tiles_per_task = tpt;
        j->toks_per_task = T;
        j->n_tok_chunks = 1;
    } else {
        j->tiles_per_task = 4;
        j->toks_per_task = 48;
        j->n_tok_chunks = (T + 47) / 48;
    }
    int nrg = (p->ntiles + j->tiles_per_task - 1) / j->tiles_per_task;
    return nrg * j->n_tok_chunks;
}

static void fast_mm(cis2_backend *b, const cis2_linear *w, const float *X, int T, float *Y)
{
    fast_state *s = b->impl;
    mm_job j;
    int n = mm_setup(s, packed_of(w), X, T, Y, &j);
    tp_run(s->pool, n, mm_task, &j);
}

/* Several matmuls over the same input in one pool dispatch (q/k/v, gate/up):
 * the tasks of all of them in one list, so there is one synchronisation. */
#define MM_MULTI_MAX 4
typedef struct {
    mm_job j[MM_MULTI_MAX];
    int first[MM_MULTI_MAX + 1];
    int n;
} mm_multi_job;

static void mm_multi_task(void *ctx, int task, int tid)
{
    const mm_multi_job *m = ctx;
    int i = 0;
    while (task >= m->first[i + 1]) i++;
    mm_task((void *)&m->j[i], task - m->first[i], tid);
}

static void fast_mm_multi(cis2_backend *b, int n, const cis2_linear *const *w, const float *X,
                          int T, float *const *Y)
{
    fast_state *s = b->impl;
    if (n > MM_MULTI_MAX) {
        for (int i = 0; i < n; i++) fast_mm(b, w[i], X, T, Y[i]);
        return;
    }
    mm_multi_job m;
    m.n = n;
    m.first[0] = 0;
    for (int i = 0; i < n; i++)
        m.first[i + 1] = m.first[i] + mm_setup(s, packed_of(w[i]), X, T, Y[i], &m.j[i]);
    tp_run(s->pool, m.first[n], mm_multi_task, &m);
}

/* ------------------------------------------------------------- attention */
typedef struct {
    fast_state *s;
    const float *q, *kc, *vc;
    float *out;
    int T, pos0, nh, group, hd, qd, kvd;
    float scale;
    const float *kt; /* non-NULL: transposed keys (prefill) */
    size_t ldkt;
} at_job;

static void at_task(void *ctx, int task, int tid)
{
    const at_job *j = ctx;
    int t = j->T - 1 - task / j->nh, h = task % j->nh; /* longest contexts first */
    int n = j->pos0 + t + 1, kvh = h / j->group;
    const float *q = j->q + (size_t)t * j->qd + (size_t)h * j->hd;
    float *sc = j->s->scratch[tid];
    if (j->kt)
        j->s->k->scores_t(q, j->kt + (size_t)kvh * j->hd * j->ldkt, j->ldkt, n, j->hd, j->scale,
                          sc);
    else j->s->k->scores(q, j->kc + (size_t)kvh * j->hd, (size_t)j->kvd, n, j->hd, j->scale, sc);
    j->s->k->softmax(sc, n);
    j->s->k->vmix(sc, j->vc + (size_t)kvh * j->hd, (size_t)j->kvd, n, j->hd,
                  j->out + (size_t)t * j->qd + (size_t)h * j->hd);
}

/* Decode (T = 1), long contexts: the group's query heads share each key.
 * Phase 1 tasks are (KV group x key range): each key's score is its own
 * output (dot_seq then * scale), so a key range is any split; every head of
 * the group scores the range while its keys are hot in cache. Phase 2 tasks
 * are heads: softmax over the head's whole row (one in-order sum) and the
 * V-mix (every output dim summed over all keys in order). */
typedef struct {
    fast_state *s;
    const float *q, *kc, *vc;
    float *out, *S;
    int n, group, hd, kvd, chunk, nchunks, dchunk;
    float scale;
} at1_job;

static void at1_scores_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    int kvh = task / j->nchunks, c = task % j->nchunks;
    int a = c * j->chunk, len = j->n - a < j->chunk ? j->n - a : j->chunk;
    const float *k = j->kc + (size_t)a * j->kvd + (size_t)kvh * j->hd;
    for (int g = 0; g < j->group; g++) {
        int h = kvh * j->group + g;
        j->s->k->scores(j->q + (size_t)h * j->hd, k, (size_t)j->kvd, len, j->hd, j->scale,
                        j->S + (size_t)h * j->n + a);
    }
}

static void at1_softmax_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    j->s->k->softmax(j->S + (size_t)task * j->n, j->n);
}

/* V-mix of a whole group in one pass over V, tasks (KV group x dim range):
 * each output dim is its own in-order sum over all keys, so any dim split
 * is exact. */
static void at1_vmix_g_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    int nd = j->hd / j->dchunk, kvh = task / nd, d0 = (task % nd) * j->dchunk, h0 = kvh * j->group;
    j->s->k->vmix_g(j->S + (size_t)h0 * j->n, (size_t)j->n, j->group,
                    j->vc + (size_t)kvh * j->hd + d0, (size_t)j->kvd, j->n, j->dchunk,
                    j->out + (size_t)h0 * j->hd + d0, (size_t)j->hd);
}

static void at1_mix_task(void *ctx, int task, int tid)
{
    (void)tid;
    const at1_job *j = ctx;
    int h = task, kvh = h / j->group;
    float *sc = j->S + (size_t)h * j->n;
    j->s->k->softmax(sc, j->n);
    j->s->k->vmix(sc, j->vc + (size_t)kvh * j->hd, (size_t)j->kvd, j->n, j->hd,
                  j->out + (size_t)h * j->hd);
}

#define AT1_MIN_CTX 512

static void fast_attn(cis2_backend *b, const float *q, const float *kc, const float *vc, int T,
                      int pos0, int n_heads, int n_kv, int hd, float scale, float *out)
{
    fast_state *s = b->impl;
    int need = pos0 + T, nth = tp_threads(s->pool);
    if (need > s->scratch_cap) {
        int cap = s->scratch_cap ? s->scratch_cap : 256;
        while (cap < need) cap *= 2;
        for (int i = 0; i < nth; i++) {
            float *p = realloc(s->scratch[i], (size_t)cap * sizeof(float));
            if (!p) {
                fprintf(stderr, "cis2: fast backend: out of memory for attention scores\n");
                abort();
            }
            s->scratch[i] = p;
        }
        s->scratch_cap = cap;
    }
    if (T == 1 && need >= AT1_MIN_CTX) {
        size_t want = (size_t)n_heads * (size_t)need;
        if (want > s->sall_cap) {
            float *p = realloc(s->sall, want * sizeof(float));
            if (!p) {
                fprintf(stderr, "cis2: fast backend: out of memory for attention scores\n");
                abort();
            }
            s->sall = p;
            s->sall_cap = want;
        }
        /* ~4 tasks per thread, key ranges a multiple of 16 keys */
        int chunk = (int)(((size_t)need * n_kv + (size_t)4 * nth - 1) / ((size_t)4 * nth));
        chunk = (chunk + 15) & ~15;
        if (chunk < 128) chunk = 128;
        if (chunk > 1024) chunk = 1024;
        at1_job j1 = { s,   q,         kc,    vc,
                       out, s->sall,   need,  n_heads / n_kv,
                       hd,  n_kv * hd, chunk, (need + chunk - 1) / chunk,
                       hd,  scale };
        tp_run(s->pool, n_kv * j1.nchunks, at1_scores_task, &j1);
        if (s->k->vmix_g) {
            if (hd % 32 == 0 && n_kv < 2 * nth) j1.dchunk = 32;
            tp_run(s->pool, n_heads, at1_softmax_task, &j1);
            tp_run(s->pool, n_kv * (hd / j1.dchunk), at1_vmix_g_task, &j1);
        } else tp_run(s->pool, n_heads, at1_mix_task, &j1);
        return;
    }
    at_job j = {
        s,         q,     kc,   vc, out, T, pos0, n_heads, n_heads / n_kv, hd, n_heads * hd,
        n_kv * hd, scale, NULL, 0
    };
    if (T > 1 && s->k->scores_t) {
        /* Prefill: every key is read by T x group queries, so transpose the
         * layer's keys once (a pure copy) and score without shuffles. */
        size_t ld = ((size_t)need + 7) & ~(size_t)7, kvd = (size_t)n_kv * hd;
        size_t want = (size_t)n_kv * hd * ld;
        if (want > s->kt_cap) {
            float *p = realloc(s->kt, want * sizeof(float));
            if (!p) {
                fprintf(stderr, "cis2: fast backend: out of memory for transposed keys\n");
                abort();
            }
            s->kt = p;
            s->kt_cap = want;
        }
        for (int h = 0; h < n_kv; h++)
            for (int d = 0; d < hd; d++) {
                float *row = s->kt + ((size_t)h * hd + d) * ld;
                const float *src = kc + (size_t)h * hd + d;
                for (int p = 0; p < need; p++) row[p] = src[(size_t)p * kvd];
                for (size_t p = (size_t)need; p < ld; p++) row[p] = 0.0f;
            }
        j.kt = s->kt;
        j.ldkt = ld;
    }
    tp_run(s->pool, T * n_heads, at_task, &j);
}

/* ------------------------------------------------------ engine elementwise */
typedef struct {
    void (*fn)(void *ctx, int i);
    void *ctx;
    int n, per;
} pf_job;

static void pf_task(void *ctx, int task, int tid)
{
    (void)tid;
    const pf_job *j = ctx;
    int a = task * j->per, b = a + j->per < j->n ? a + j->per : j->n;
    for (int i = a; i < b; i++) j->fn(j->ctx, i);
}

static void fast_parallel_for(cis2_backend *b, int n, void (*fn)(void *ctx, int i), void *ctx)
{
    fast_state *s = b->impl;
    int nth = tp_threads(s->pool), want = nth == 1 ? 1 : nth * 4;
    pf_job j = { fn, ctx, n, (n + want - 1) / want };
    if (j.per < 1) j.per = 1;
    tp_run(s->pool, (n + j.per - 1) / j.per, pf_task, &j);
}

/* ---------------------------------------------------------------- set-up */
static void fast_destroy(cis2_backend *b)
{
    fast_state *s = b->impl;
    if (s) {
        tp_free(s->pool);
        for (int i = 0; i < s->n_owners; i++) {
            for (int k = 0; k < s->n_packed; k++)
                if (s->owners[i]->packed == &s->packed[k]) s->owners[i]->packed = NULL;
        }
        for (int i = 0; i < s->n_packed; i++) fast_packed_free(&s->packed[i]);
        if (s->arena) munmap(s->arena, s->arena_len);
        free(s->packed);
        free(s->owners);
        for (int i = 0; s->scratch && s->scratch[i]; i++) free(s->scratch[i]);
        free(s->scratch);
        free(s->kt);
        free(s->sall);
        free(s);
    }
    free(b);
}

static int make_backend(cis2_backend **out, const char *isa, int threads, char *err,
                        fast_state **sp)
{
    *out = NULL;
    const fast_kernels *k = fast_kernels_pick(isa, err);
    if (!k) return 1;
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads > 1024) threads = 1024;
    cis2_backend *b = calloc(1, sizeof *b);
    fast_state *s = calloc(1, sizeof *s);
    if (!b || !s) {
        free(b);
        free(s);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    b->impl = s;
    b->matmul = fast_mm;
    b->attention = fast_attn;
    b->destroy = fast_destroy;
    b->parallel_for = fast_parallel_for;
    b->matmul_multi = fast_mm_multi;
    b->swiglu = k->swiglu;
    s->k = k;
    snprintf(s->name, sizeof s->name, "fast/%s", k->name);
    b->name = s->name;
    s->scratch = calloc((size_t)threads + 1, sizeof *s->scratch); /* NULL-terminated */
    if (!s->scratch) {
        fast_destroy(b);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    s->pool = tp_new(threads, err);
    if (!s->pool) {
        fast_destroy(b);
        return 1;
    }
    *out = b;
    *sp = s;
    return 0;
}

int cis2_backend_fast_create(cis2_backend **b, const char *isa, int threads, char *err)
{
    fast_state *s;
    return make_backend(b, isa, threads, err, &s);
}

typedef struct {
    fast_state *s;
    cis2_linear **src; /* the distinct linears, one per packed slot */
    size_t *off;       /* slot offsets in s->arena */
    int failed;
    char err[CIS2_ERR_LEN];
} pack_job;

static void pack_task(void *ctx, int task, int tid)
{
    (void)tid;
    pack_job *j = ctx;
    const cis2_linear *w = j->src[task];
    char err[CIS2_ERR_LEN];
    if (j->s->arena) fast_pack_at(w, &j->s->packed[task], (char *)j->s->arena + j->off[task]);
    else if (fast_pack(w, &j->s->packed[task], err)) {
        j->failed = 1;
        memcpy(j->err, err, sizeof err);
        return;
    }
    /* The tiles now hold the weights: drop the source pages from this
     * private read-only mapping (re-read from the file if touched again,
     * e.g. by the embedding lookup), so RSS holds one copy, not two. */
    const cis2_safetensors *st = &j->s->m->st;
#if defined(__wasm__)
    st = NULL; /* wasm32: the file lives in the heap, owned by the JS glue; nothing to drop */
#endif
    if (st && st->map && w->raw >= st->map && w->raw < st->map + st->map_len) {
        size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        size_t es = w->dtype == CIS2_DT_F32 ? 4 : 2;
        uintptr_t a = (uintptr_t)w->raw, e = a + (size_t)w->rows * (size_t)w->cols * es;
        uintptr_t a2 = (a + pg - 1) & ~(uintptr_t)(pg - 1), e2 = e & ~(uintptr_t)(pg - 1);
        if (e2 > a2) madvise((void *)a2, e2 - a2, MADV_DONTNEED);
    }
}

int cis2_backend_fast_new(cis2_backend **out, cis2_model *m, const cis2_engine_opts *o, char *err)
{
    fast_state *s;
    cis2_backend *b;
    if (make_backend(&b, o ? cis2_isa_to_name(o->isa) : NULL, o ? o->threads : 0, err, &s))
        return 1;
    s->m = m;
    const cis2_config *c = &m->cfg;
    int maxl = 7 * c->n_layers + 2;
    s->owners = calloc((size_t)maxl, sizeof *s->owners);
    s->packed = calloc((size_t)maxl, sizeof *s->packed);
    cis2_linear **src = calloc((size_t)maxl, sizeof *src);
    pack_job *pj = calloc(1, sizeof *pj);
    if (!s->owners || !s->packed || !src || !pj) {
        free(src);
        free(pj);
        fast_destroy(b);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    /* Distinct linears, the biggest first (lm_head shares embed's tiles
     * when tied: same raw pointer). */
    int embed_slot = s->n_packed;
    src[s->n_packed++] = &m->embed;
    int head_slot = embed_slot;
    if (m->lm_head.raw != m->embed.raw) {
        head_slot = s->n_packed;
        src[s->n_packed++] = &m->lm_head;
    }
    for (int l = 0; l < c->n_layers; l++) {
        cis2_layer *y = &m->layers[l];
        cis2_linear *ws[7] = { &y->gate, &y->up, &y->down, &y->q, &y->o, &y->k, &y->v };
        for (int i = 0; i < 7; i++) src[s->n_packed++] = ws[i];
    }
    /* One huge-page arena for every tile buffer: ~130 2 MiB faults instead
     * of ~50k 4 KiB ones (most linears are under 2 MiB each). */
    size_t *off = calloc((size_t)s->n_packed, sizeof *off), total = 0;
    if (off) {
        for (int i = 0; i < s->n_packed; i++) {
            off[i] = total;
            total += fast_pack_bytes(src[i]);
        }
        s->arena = huge_alloc(total, &s->arena_len);
    }
    pj->s = s;
    pj->src = src;
    pj->off = off;
    int hash_rc = 0;
    char herr[CIS2_ERR_LEN] = "";
    if (m->hash_job && tp_start(s->pool, s->n_packed, pack_task, pj)) {
        /* An async hash is running: the workers pack while this thread
         * sleeps in the join (no third runnable thread competing for the
         * cores with the hash), then helps with what is left. */
        hash_rc = cis2_model_hash_join(m, herr);
        tp_finish(s->pool);
    } else {
        tp_run(s->pool, s->n_packed, pack_task, pj);
    }
    free(off);
    if (pj->failed || hash_rc) {
        snprintf(err, CIS2_ERR_LEN, "%s", hash_rc ? herr : pj->err);
        free(src);
        free(pj);
        for (int i = 0; i < s->n_packed; i++) fast_packed_free(&s->packed[i]);
        s->n_packed = 0;
        fast_destroy(b);
        return 1;
    }
    for (int i = 0; i < s->n_packed; i++) {
        src[i]->packed = &s->packed[i];
        s->owners[s->n_owners++] = src[i];
    }
    if (head_slot == embed_slot) {
        m->lm_head.packed = &s->packed[embed_slot];
        s->owners[s->n_owners++] = &m->lm_head;
    }
    free(src);
    free(pj);
    *out = b;
    return 0;
}
