/* Stored dtypes, the tile layout of resident weights, and the tensor table
 * (src/model/weights.h says what each is for). */
#include "model/weights.h"
#include "core/fparith.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- dtypes */
static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    [CIS2_DT_F32] = { "F32", 4 },
    [CIS2_DT_BF16] = { "BF16", 2 },
    [CIS2_DT_F16] = { "F16", 2 },
    [CIS2_DT_I8] = { "I8", 1 },
};

size_t cis2_dtype_size(cis2_dtype dt) { return DTYPES[dt].size; }
const char *cis2_dtype_name(cis2_dtype dt) { return DTYPES[dt].name; }

int cis2_dtype_from_name(const char *name, size_t n, cis2_dtype *dt)
{
    for (size_t i = 0; i < sizeof DTYPES / sizeof *DTYPES; i++)
        if (strlen(DTYPES[i].name) == n && memcmp(DTYPES[i].name, name, n) == 0) {
            *dt = (cis2_dtype)i;
            return 0;
        }
    return 1;
}

float cis2_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FFu;
    if (e == 0x1F) return cis2_u2f(sign | 0x7F800000u | (m << 13));
    if (e == 0) {
        if (m == 0) return cis2_u2f(sign);
        /* f16 subnormal m*2^-24 is a normal f32: normalise the mantissa. */
        int sh = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            sh++;
        }
        m &= 0x3FFu;
        return cis2_u2f(sign | ((uint32_t)(113 - sh) << 23) | (m << 13));
    }
    return cis2_u2f(sign | ((e + 112) << 23) | (m << 13));
}

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One stored element as an f32 bit pattern (§4.1: exact). */
static uint32_t elem_bits(cis2_dtype dt, const uint8_t *p)
{
    if (dt == CIS2_DT_F32) return ld32(p);
    if (dt == CIS2_DT_BF16) return (uint32_t)ld16(p) << 16;
    if (dt == CIS2_DT_I8) return cis2_f2u((float)(int8_t)p[0]); /* exact: |q| <= 128 */
    return cis2_f2u(cis2_f16_to_f32(ld16(p)));
}

void cis2_dtype_to_f32(cis2_dtype dt, const uint8_t *src, size_t n, float *out)
{
    size_t es = cis2_dtype_size(dt);
    for (size_t i = 0; i < n; i++) out[i] = cis2_u2f(elem_bits(dt, src + i * es));
}

/* ----------------------------------------------------------------- tiles */
cis2_wfmt cis2_wfmt_of(cis2_dtype stored)
{
    if (stored == CIS2_DT_I8) return CIS2_WF_I8;
    return stored == CIS2_DT_BF16 ? CIS2_WF_BF16 : CIS2_WF_F32;
}

size_t cis2_wfmt_size(cis2_wfmt f) { return f == CIS2_WF_I8 ? 1 : f == CIS2_WF_BF16 ? 2 : 4; }

static size_t tiles_bytes(int rows, int cols, cis2_wfmt fmt)
{
    size_t ntiles = ((size_t)rows + CIS2_TILE - 1) / CIS2_TILE;
    size_t b = ntiles * CIS2_TILE * (size_t)cols * cis2_wfmt_size(fmt);
    b = (b + 63) & ~(size_t)63;
    return b ? b : 64;
}

size_t cis2_weight_i8_scale_off(int rows, int cols) { return tiles_bytes(rows, cols, CIS2_WF_I8); }

size_t cis2_weight_bytes(int rows, int cols, cis2_wfmt fmt)
{
    size_t b = tiles_bytes(rows, cols, fmt);
    if (fmt == CIS2_WF_I8) b += tiles_bytes(rows, 1, CIS2_WF_F32); /* the row scales */
    return b;
}

static void weight_init(cis2_weight *w, int rows, int cols, cis2_wfmt fmt, const void *tiles)
{
    w->rows = rows;
    w->cols = cols;
    w->ntiles = (rows + CIS2_TILE - 1) / CIS2_TILE;
    w->fmt = fmt;
    w->tiles = tiles;
    w->scales = fmt == CIS2_WF_I8
                    ? (const float *)((const uint8_t *)tiles + cis2_weight_i8_scale_off(rows, cols))
                    : NULL;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* 16 bf16 rows x 8 columns -> the 4 pair lines of 32 (a pure 32-bit
 * transpose of the rows' column pairs: every output is one input element,
 * bit for bit). */
static void tr_pairs(const uint8_t *const *rows, size_t off, uint16_t *d)
{
    for (int g = 0; g < 4; g++) {
        const uint8_t *const *r = rows + 4 * g;
        __m128i r0 = _mm_loadu_si128((const __m128i *)(r[0] + off)),
                r1 = _mm_loadu_si128((const __m128i *)(r[1] + off));
        __m128i r2 = _mm_loadu_si128((const __m128i *)(r[2] + off)),
                r3 = _mm_loadu_si128((const __m128i *)(r[3] + off));
        __m128i a0 = _mm_unpacklo_epi32(r0, r1), a1 = _mm_unpacklo_epi32(r2, r3);
        __m128i a2 = _mm_unpackhi_epi32(r0, r1), a3 = _mm_unpackhi_epi32(r2, r3);
        uint16_t *o = d + 8 * g;
        _mm_storeu_si128((__m128i *)(o + 0 * 2 * CIS2_TILE), _mm_unpacklo_epi64(a0, a1));
        _mm_storeu_si128((__m128i *)(o + 1 * 2 * CIS2_TILE), _mm_unpackhi_epi64(a0, a1));
        _mm_storeu_si128((__m128i *)(o + 2 * 2 * CIS2_TILE), _mm_unpacklo_epi64(a2, a3));
        _mm_storeu_si128((__m128i *)(o + 3 * 2 * CIS2_TILE), _mm_unpackhi_epi64(a2, a3));
    }
}
#elif defined(__wasm_simd128__)
#include <wasm_simd128.h>
/* The same pure 32-bit transpose with SIMD128 shuffles (the browser verifier
 * packs a 270 MB checkpoint on load). */
static void tr_pairs(const uint8_t *const *rows, size_t off, uint16_t *d)
{
    for (int g = 0; g < 4; g++) {
        const uint8_t *const *r = rows + 4 * g;
        v128_t r0 = wasm_v128_load(r[0] + off), r1 = wasm_v128_load(r[1] + off);
        v128_t r2 = wasm_v128_load(r[2] + off), r3 = wasm_v128_load(r[3] + off);
        v128_t a0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5),
               a1 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5);
        v128_t a2 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7),
               a3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
        uint16_t *o = d + 8 * g;
        wasm_v128_store(o + 0 * 2 * CIS2_TILE, wasm_i64x2_shuffle(a0, a1, 0, 2));
        wasm_v128_store(o + 1 * 2 * CIS2_TILE, wasm_i64x2_shuffle(a0, a1, 1, 3));
        wasm_v128_store(o + 2 * 2 * CIS2_TILE, wasm_i64x2_shuffle(a2, a3, 0, 2));
        wasm_v128_store(o + 3 * 2 * CIS2_TILE, wasm_i64x2_shuffle(a2, a3, 1, 3));
    }
}
#endif

void cis2_weight_pack(cis2_weight *w, void *dst, const uint8_t *src, cis2_dtype dt, int rows,
                      int cols)
{
    cis2_weight_pack_tiles(w, dst, src, dt, rows, cols, 0, (rows + CIS2_TILE - 1) / CIS2_TILE);
}

void cis2_weight_pack_tiles(cis2_weight *w, void *dst, const uint8_t *src, cis2_dtype dt, int rows,
                            int cols, int t0, int t1)
{
    weight_init(w, rows, cols, cis2_wfmt_of(dt), dst);
    size_t K = (size_t)cols, es = cis2_dtype_size(dt);
    for (int t = t0; t < t1; t++) {
        const uint8_t *r[CIS2_TILE];
        int nr = rows - t * CIS2_TILE < CIS2_TILE ? rows - t * CIS2_TILE : CIS2_TILE;
        for (int l = 0; l < nr; l++) r[l] = src + (size_t)((t - t0) * CIS2_TILE + l) * K * es;
        if (w->fmt == CIS2_WF_BF16) {
            uint16_t *d = (uint16_t *)dst + (size_t)t * K * CIS2_TILE;
            size_t k = 0, K2 = K & ~(size_t)1; /* column pairs, then an odd last column */
#if defined(__SSE2__) || defined(__wasm_simd128__)
            if (nr == CIS2_TILE)
                for (; k + 8 <= K2; k += 8, d += 8 * CIS2_TILE) tr_pairs(r, 2 * k, d);
#endif
            for (; k < K2; k += 2, d += 2 * CIS2_TILE)
                for (int l = 0; l < CIS2_TILE; l++) {
                    d[2 * l] = l < nr ? ld16(r[l] + 2 * k) : 0;
                    d[2 * l + 1] = l < nr ? ld16(r[l] + 2 * k + 2) : 0;
                }
            if (k < K)
                for (int l = 0; l < CIS2_TILE; l++) d[l] = l < nr ? ld16(r[l] + 2 * k) : 0;
        } else {
            uint32_t *d = (uint32_t *)dst + (size_t)t * K * CIS2_TILE;
            for (size_t k = 0; k < K; k++, d += CIS2_TILE) {
                for (int l = 0; l < nr; l++) d[l] = elem_bits(dt, r[l] + es * k); /* exact */
                for (int l = nr; l < CIS2_TILE; l++) d[l] = 0;
            }
        }
    }
    if (t1 < w->ntiles) return;
    /* the padding after the last tile (up to the 64-byte multiple) */
    size_t used = (size_t)w->ntiles * CIS2_TILE * K * cis2_wfmt_size(w->fmt),
           all = cis2_weight_bytes(rows, cols, w->fmt);
    memset((uint8_t *)dst + used, 0, all - used);
}

int cis2_weight_pack_i8(cis2_weight *w, void *dst, const uint8_t *q, const uint8_t *scales,
                        cis2_dtype sdt, int rows, int cols)
{
    weight_init(w, rows, cols, CIS2_WF_I8, dst);
    size_t K = (size_t)cols, es = cis2_dtype_size(sdt);
    memset(dst, 0, cis2_weight_bytes(rows, cols, CIS2_WF_I8)); /* pad rows: q = 0, s = 0 */
    int8_t *d = dst;
    uint32_t *sc = (uint32_t *)w->scales;
    int bad = -1;
    for (int r = 0; r < rows; r++) {
        int8_t *t = d + (size_t)(r / CIS2_TILE) * K * CIS2_TILE + r % CIS2_TILE;
        const uint8_t *row = q + (size_t)r * K;
        for (size_t k = 0; k < K; k++) t[k * CIS2_TILE] = (int8_t)row[k]; /* a pure re-layout */
        sc[r] = elem_bits(sdt, scales + (size_t)r * es);                  /* exact (§4.1) */
        if (bad < 0 && (sc[r] & 0x7F800000u) == 0x7F800000u) bad = r;
    }
    return bad;
}

void cis2_weight_i8_rows(const cis2_weight *w, int8_t *q, float *s)
{
    size_t K = (size_t)w->cols;
    const int8_t *src = w->tiles;
    for (int r = 0; r < w->rows; r++) {
        const int8_t *t = src + (size_t)(r / CIS2_TILE) * K * CIS2_TILE + r % CIS2_TILE;
        for (size_t k = 0; k < K; k++) q[(size_t)r * K + k] = t[k * CIS2_TILE];
        s[r] = w->scales[r];
    }
}

void cis2_weight_copy(const cis2_weight *w, cis2_weight *out, void *dst)
{
    memcpy(dst, w->tiles, cis2_weight_bytes(w->rows, w->cols, w->fmt));
    *out = *w;
    weight_init(out, w->rows, w->cols, w->fmt, dst);
}

int8_t *cis2_weight_i8_at(const cis2_weight *w, void *tiles, int r, int k)
{
    return (int8_t *)tiles + ((size_t)(r / CIS2_TILE) * (size_t)w->cols + (size_t)k) * CIS2_TILE +
           (size_t)(r % CIS2_TILE);
}

/* The bits of element (r, k) as f32 (not I8); r may be a pad row (0). */
static uint32_t tile_bits(const cis2_weight *w, int r, size_t k)
{
    size_t K = (size_t)w->cols;
    if (w->fmt == CIS2_WF_BF16)
        return (uint32_t)((const uint16_t *)w->tiles)[cis2_bf16_tile_at(K, r, k)] << 16;
    return ((const uint32_t *)w->tiles)[cis2_f32_tile_at(K, r, k)];
}

void cis2_weight_row(const cis2_weight *w, int r, float *out)
{
    size_t K = (size_t)w->cols, base = (size_t)(r / CIS2_TILE) * K * CIS2_TILE + r % CIS2_TILE;
    if (w->fmt == CIS2_WF_I8) {
        const int8_t *q = (const int8_t *)w->tiles + base;
        /* docs/quantization.md §2: x[i] = (float)q[tok, i] * s[tok] */
        for (size_t k = 0; k < K; k++) out[k] = cis2_fmul((float)q[k * CIS2_TILE], w->scales[r]);
        return;
    }
    for (size_t k = 0; k < K; k++) out[k] = cis2_u2f(tile_bits(w, r, k));
}

void cis2_weight_widen(const cis2_weight *w, float *out)
{
    size_t K = (size_t)w->cols;
    for (int t = 0; t < w->ntiles; t++) {
        int nr = w->rows - t * CIS2_TILE < CIS2_TILE ? w->rows - t * CIS2_TILE : CIS2_TILE;
        size_t base = (size_t)t * K * CIS2_TILE;
        uint32_t *o = (uint32_t *)out + (size_t)t * CIS2_TILE * K;
        if (w->fmt == CIS2_WF_BF16) { /* column pairs, then an odd last column (weights.h) */
            const uint16_t *src = (const uint16_t *)w->tiles + base;
            size_t k = 0, K2 = K & ~(size_t)1;
            for (; k < K2; k += 2, src += 2 * CIS2_TILE)
                for (int l = 0; l < nr; l++) {
                    o[(size_t)l * K + k] = (uint32_t)src[2 * l] << 16;
                    o[(size_t)l * K + k + 1] = (uint32_t)src[2 * l + 1] << 16;
                }
            if (k < K)
                for (int l = 0; l < nr; l++) o[(size_t)l * K + k] = (uint32_t)src[l] << 16;
        } else {
            const uint32_t *src = (const uint32_t *)w->tiles + base;
            for (size_t k = 0; k < K; k++, src += CIS2_TILE)
                for (int l = 0; l < nr; l++) o[(size_t)l * K + k] = src[l];
        }
    }
}

void cis2_weight_to_f32_tiles(const cis2_weight *w, cis2_weight *out, void *dst)
{
    size_t K = (size_t)w->cols, n = (size_t)w->ntiles * CIS2_TILE * K;
    uint32_t *d = dst;
    for (int t = 0; t < w->ntiles; t++)
        for (size_t k = 0; k < K; k++)
            for (int l = 0; l < CIS2_TILE; l++)
                d[((size_t)t * K + k) * CIS2_TILE + (size_t)l] = tile_bits(w, t * CIS2_TILE + l, k);
    memset(d + n, 0, cis2_weight_bytes(w->rows, w->cols, CIS2_WF_F32) - n * 4);
    *out = *w;
    weight_init(out, w->rows, w->cols, CIS2_WF_F32, dst);
}

float *cis2_weight_f32_at(const cis2_weight *w, void *tiles, int r, int k)
{
    return (float *)tiles + cis2_f32_tile_at((size_t)w->cols, r, (size_t)k);
}

/* ------------------------------------------------------ the tensor table */
#define G(f) offsetof(cis2_weights, f)
#define L(f) offsetof(cis2_layer, f)
/* §2.5 (Llama), §9.1 (q/k/v biases), Qwen3's q_norm/k_norm. The per-layer
 * linears are listed in the order a forward step reads them. */
const cis2_tensor_def cis2_tensor_table[] = {
    { "model.embed_tokens.weight", 0, CIS2_TK_LINEAR, CIS2_DIM_VOCAB, CIS2_DIM_HIDDEN,
      CIS2_NEED_ALWAYS, G(embed) },
    { "lm_head.weight", 0, CIS2_TK_LINEAR, CIS2_DIM_VOCAB, CIS2_DIM_HIDDEN, CIS2_NEED_HEAD,
      G(lm_head) },
    { "model.norm.weight", 0, CIS2_TK_VECTOR, CIS2_DIM_HIDDEN, CIS2_DIM_NONE, CIS2_NEED_ALWAYS,
      G(final_norm) },
    { "input_layernorm.weight", 1, CIS2_TK_VECTOR, CIS2_DIM_HIDDEN, CIS2_DIM_NONE, CIS2_NEED_ALWAYS,
      L(attn_norm) },
    { "self_attn.q_proj.weight", 1, CIS2_TK_LINEAR, CIS2_DIM_Q, CIS2_DIM_HIDDEN, CIS2_NEED_ALWAYS,
      L(q) },
    { "self_attn.k_proj.weight", 1, CIS2_TK_LINEAR, CIS2_DIM_KV, CIS2_DIM_HIDDEN, CIS2_NEED_ALWAYS,
      L(k) },
    { "self_attn.v_proj.weight", 1, CIS2_TK_LINEAR, CIS2_DIM_KV, CIS2_DIM_HIDDEN, CIS2_NEED_ALWAYS,
      L(v) },
    { "self_attn.q_proj.bias", 1, CIS2_TK_VECTOR, CIS2_DIM_Q, CIS2_DIM_NONE, CIS2_NEED_BIAS,
      L(q_bias) },
    { "self_attn.k_proj.bias", 1, CIS2_TK_VECTOR, CIS2_DIM_KV, CIS2_DIM_NONE, CIS2_NEED_BIAS,
      L(k_bias) },
    { "self_attn.v_proj.bias", 1, CIS2_TK_VECTOR, CIS2_DIM_KV, CIS2_DIM_NONE, CIS2_NEED_BIAS,
      L(v_bias) },
    { "self_attn.q_norm.weight", 1, CIS2_TK_VECTOR, CIS2_DIM_HEAD, CIS2_DIM_NONE, CIS2_NEED_QK_NORM,
      L(q_norm) },
    { "self_attn.k_norm.weight", 1, CIS2_TK_VECTOR, CIS2_DIM_HEAD, CIS2_DIM_NONE, CIS2_NEED_QK_NORM,
      L(k_norm) },
    { "self_attn.o_proj.weight", 1, CIS2_TK_LINEAR, CIS2_DIM_HIDDEN, CIS2_DIM_Q, CIS2_NEED_ALWAYS,
      L(o) },
    { "self_attn.o_gain.weight", 1, CIS2_TK_VECTOR, CIS2_DIM_HIDDEN, CIS2_DIM_NONE, CIS2_NEED_TOY,
      L(o_gain) },
    { "post_attention_layernorm.weight", 1, CIS2_TK_VECTOR, CIS2_DIM_HIDDEN, CIS2_DIM_NONE,
      CIS2_NEED_ALWAYS, L(mlp_norm) },
    { "mlp.gate_proj.weight", 1, CIS2_TK_LINEAR, CIS2_DIM_INTER, CIS2_DIM_HIDDEN, CIS2_NEED_ALWAYS,
      L(gate) },
    { "mlp.up_proj.weight", 1, CIS2_TK_LINEAR, CIS2_DIM_INTER, CIS2_DIM_HIDDEN, CIS2_NEED_ALWAYS,
      L(up) },
    { "mlp.down_proj.weight", 1, CIS2_TK_LINEAR, CIS2_DIM_HIDDEN, CIS2_DIM_INTER, CIS2_NEED_ALWAYS,
      L(down) },
};
const int cis2_tensor_count = (int)(sizeof cis2_tensor_table / sizeof cis2_tensor_table[0]);
#undef G
#undef L

#define LAYER_PREFIX "model.layers."

int cis2_tensor_dim(const cis2_config *c, cis2_dim d)
{
    switch (d) {
    case CIS2_DIM_HIDDEN: return c->hidden;
    case CIS2_DIM_INTER: return c->inter;
    case CIS2_DIM_VOCAB: return c->vocab;
    case CIS2_DIM_Q: return c->n_heads * c->head_dim;
    case CIS2_DIM_KV: return c->n_kv_heads * c->head_dim;
    case CIS2_DIM_HEAD: return c->head_dim;
    case CIS2_DIM_NONE: break;
    }
    return 1;
}

cis2_use cis2_tensor_use(const cis2_config *c, const cis2_tensor_def *d)
{
    switch (d->need) {
    case CIS2_NEED_ALWAYS: return CIS2_TENSOR_REQUIRED;
    case CIS2_NEED_HEAD: return CIS2_TENSOR_OPTIONAL;
    case CIS2_NEED_BIAS:
        return c->arch == CIS2_ARCH_QWEN2 ? CIS2_TENSOR_REQUIRED : CIS2_TENSOR_OPTIONAL;
    case CIS2_NEED_QK_NORM:
        return c->arch == CIS2_ARCH_QWEN3 ? CIS2_TENSOR_REQUIRED : CIS2_TENSOR_UNUSED;
    case CIS2_NEED_TOY: return c->arch == CIS2_ARCH_TOY ? CIS2_TENSOR_REQUIRED : CIS2_TENSOR_UNUSED;
    }
    return CIS2_TENSOR_UNUSED;
}

void cis2_tensor_name(const cis2_tensor_def *d, int layer, char *buf, size_t cap)
{
    if (d->per_layer) snprintf(buf, cap, LAYER_PREFIX "%d.%s", layer, d->name);
    else snprintf(buf, cap, "%s", d->name);
}

void *cis2_tensor_slot(cis2_weights *w, const cis2_tensor_def *d, int layer)
{
    uint8_t *base = d->per_layer ? (uint8_t *)&w->layers[layer] : (uint8_t *)w;
    return base + d->field;
}

int cis2_tensor_lookup(const char *name, int n_layers, const cis2_tensor_def **d, int *layer)
{
    const char *rest = name;
    long l = -1;
    size_t pl = strlen(LAYER_PREFIX);
    if (strncmp(name, LAYER_PREFIX, pl) == 0) {
        const char *p = name + pl;
        if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 1;
        l = 0;
        while (*p >= '0' && *p <= '9' && l < n_layers) l = l * 10 + (*p++ - '0');
        if (*p != '.' || l >= n_layers) return 1;
        rest = p + 1;
    }
    for (int i = 0; i < cis2_tensor_count; i++) {
        const cis2_tensor_def *t = &cis2_tensor_table[i];
        if (t->per_layer == (l >= 0) && strcmp(t->name, rest) == 0) {
            *d = t;
            *layer = (int)l;
            return 0;
        }
    }
    return 1;
}

void cis2_weights_linears(const cis2_weights *w, const cis2_weight **out)
{
    for (int i = 0; i < cis2_tensor_count; i++) {
        const cis2_tensor_def *d = &cis2_tensor_table[i];
        if (d->kind != CIS2_TK_LINEAR) continue;
        for (int l = cis2_tensor_first(d); l < cis2_tensor_end(d, w->n_layers); l++) {
            const cis2_weight *x = cis2_tensor_slot((cis2_weights *)w, d, l);
            if (x->tiles) out[x->id] = x; /* an unused LM head has none */
        }
    }
}

size_t cis2_weights_step_bytes(const cis2_weights *w)
{
    const cis2_weight **all = calloc((size_t)w->n_linear + 1, sizeof *all);
    if (!all) return 0;
    cis2_weights_linears(w, all);
    size_t n = 0;
    for (int i = 0; i < w->n_linear; i++)
        if (all[i] && (all[i] != &w->embed || w->tied)) /* the embedding is a row lookup */
            n += cis2_weight_bytes(all[i]->rows, all[i]->cols, all[i]->fmt);
    free((void *)all);
    return n;
}
