/* The model's resident weights: stored dtypes, the 16-row interleaved tile
 * layout every matmul reads, and the tensor table — each architecture's
 * tensors described once (name, field, shape from config.json, when it is
 * required), which drives loading, packing, fault lookup and the counts.
 *
 * The layout belongs to the model: weights are packed once, at load, from
 * the bytes that were hashed (§12.1), and never change afterwards; the
 * kernels and backends (higher layers) only read them.
 *
 * Tile layout (CIS2_TILE = 16): tile i holds rows 16i..16i+15 and element k
 * of those 16 rows is adjacent: tiles[(i*cols + k)*16 + lane]. Rows past
 * `rows` are zero. BF16 weights stay BF16 (widened exactly in registers,
 * §4.1); F32 stays F32; F16 is widened exactly to F32 at load (§4.2).
 * BF16 tiles hold columns in pairs: columns 2p and 2p+1 of a lane are one
 * 32-bit word (2p in the low half), the 16 lanes' words side by side in the
 * two lines 2p, 2p+1 would take: tiles[(i*cols + 2p)*16 + 2*lane + (k&1)];
 * an odd last column is a plain line. A kernel widens a word's pair with a
 * shift (even k) and a mask (odd k), one instruction per 16 weights, and
 * still adds the terms in k order (cis2_bf16_tile_at).
 * I8 (row-wise int8 with one f32 scale per row, docs/quantization.md §2)
 * stays int8, one byte per weight in the same tile layout, with the tile's
 * 16 row scales after all the tiles: scales[16i + lane] (pad rows 0). */
#ifndef CIS2_WEIGHTS_H
#define CIS2_WEIGHTS_H
#include "core/core.h"

/* -------------------------------------------------------- stored dtypes */
typedef enum { CIS2_DT_F32 = 0, CIS2_DT_BF16 = 1, CIS2_DT_F16 = 2, CIS2_DT_I8 = 3 } cis2_dtype;

/* Bytes per stored element; "F32", "BF16", "F16", "I8"; 0 when `name` (n
 * bytes) is one of them. I8 widens to the integer's value (exact). */
size_t cis2_dtype_size(cis2_dtype dt);
const char *cis2_dtype_name(cis2_dtype dt);
int cis2_dtype_from_name(const char *name, size_t n, cis2_dtype *dt);
/* Exact binary16 -> binary32 (every f16 value is an f32 value). */
float cis2_f16_to_f32(uint16_t h);
/* n stored little-endian elements (any alignment) widened exactly (§4.1). */
void cis2_dtype_to_f32(cis2_dtype dt, const uint8_t *src, size_t n, float *out);

/* ------------------------------------------------------------------ tiles */
#define CIS2_TILE 16

/* Resident element format of a packed weight. */
typedef enum { CIS2_WF_F32 = 0, CIS2_WF_BF16 = 1, CIS2_WF_I8 = 2 } cis2_wfmt;

/* A linear layer's weight, [rows, cols] (PyTorch's [out, in], §2.5). */
typedef struct {
    int rows, cols, ntiles;
    cis2_wfmt fmt;
    const void *tiles;   /* 64-byte aligned; cis2_weight_bytes() bytes */
    const float *scales; /* I8 only: [ntiles * 16] row scales (inside the tiles' bytes) */
    int id;              /* 0..n_linear-1: backends keep per-weight state by it */
    int layer;           /* the decoder layer, -1 for the embedding / LM head */
} cis2_weight;

cis2_wfmt cis2_wfmt_of(cis2_dtype stored); /* BF16 -> BF16; I8 -> I8; F16, F32 -> F32 */
size_t cis2_wfmt_size(cis2_wfmt f);        /* bytes per resident element */
/* Bytes of a packed [rows, cols] weight (a multiple of 64, at least 64; I8:
 * the tiles, then the scales at cis2_weight_i8_scale_off()). */
size_t cis2_weight_bytes(int rows, int cols, cis2_wfmt fmt);
/* Pack `rows` x `cols` stored elements (row-major, any alignment) into dst
 * (64-byte aligned, cis2_weight_bytes() long; every byte is written) and
 * describe them in *w (id and layer are left to the caller). */
void cis2_weight_pack(cis2_weight *w, void *dst, const uint8_t *src, cis2_dtype dt, int rows,
                      int cols);
/* Tiles [t0, t1) of the same packing (the padding with the last tile): the
 * loader packs a large tensor slice by slice as the file arrives, so that its
 * bytes are released while the rest is still being read. src is row
 * t0 * CIS2_TILE of the tensor: only the rows of tiles t0..t1-1 are read. */
void cis2_weight_pack_tiles(cis2_weight *w, void *dst, const uint8_t *src, cis2_dtype dt, int rows,
                            int cols, int t0, int t1);
size_t cis2_weight_i8_scale_off(int rows, int cols);
/* Pack an int8 weight: q [rows, cols] int8 row-major, scales [rows] stored
 * as sdt (F32/BF16/F16, widened exactly). Returns -1, or the first row whose
 * scale is NaN/Inf (dst is fully written either way). */
int cis2_weight_pack_i8(cis2_weight *w, void *dst, const uint8_t *q, const uint8_t *scales,
                        cis2_dtype sdt, int rows, int cols);
/* Row r as f32 (the embedding lookup): §4.1's exact widening; I8 rows are
 * (float)q[r, i] * s[r], one multiply each (docs/quantization.md §2). */
void cis2_weight_row(const cis2_weight *w, int r, float *out);
/* The whole weight as row-major f32 [rows][cols] (the reference kernels);
 * not for I8 weights (their values are q and s apart: cis2_weight_i8_rows). */
void cis2_weight_widen(const cis2_weight *w, float *out);
/* An I8 weight back to row-major q [rows][cols] and s [rows]. */
void cis2_weight_i8_rows(const cis2_weight *w, int8_t *q, float *s);
/* A copy of w as F32 tiles in dst (cis2_weight_bytes(rows, cols, F32)):
 * the same values, each one writable as an f32 (fault injection); not I8. */
void cis2_weight_to_f32_tiles(const cis2_weight *w, cis2_weight *out, void *dst);
/* A writable copy of an I8 weight's bytes in dst (cis2_weight_bytes()). */
void cis2_weight_copy(const cis2_weight *w, cis2_weight *out, void *dst);
/* Address of int8 element (r, k) of an I8-tiled weight's tiles. */
int8_t *cis2_weight_i8_at(const cis2_weight *w, void *tiles, int r, int k);
/* Address of element (r, k) of an F32-tiled weight. */
float *cis2_weight_f32_at(const cis2_weight *w, void *tiles, int r, int k);
/* Index of f32 element (r, k) in the tiles of a weight with `cols` columns
 * (one line of 16 lanes per column, above). */
static inline size_t cis2_f32_tile_at(size_t cols, int r, size_t k)
{
    return ((size_t)(r / CIS2_TILE) * cols + k) * CIS2_TILE + (size_t)(r % CIS2_TILE);
}
/* Index of bf16 element (r, k) in the tiles of a weight with `cols` columns
 * (the pair layout above). */
static inline size_t cis2_bf16_tile_at(size_t cols, int r, size_t k)
{
    size_t base = (size_t)(r / CIS2_TILE) * cols * CIS2_TILE, lane = (size_t)(r % CIS2_TILE);
    if (k < (cols & ~(size_t)1)) return base + (k & ~(size_t)1) * CIS2_TILE + 2 * lane + (k & 1);
    return base + k * CIS2_TILE + lane;
}

/* ---------------------------------------------------- one model's tensors */
typedef struct {
    const float *attn_norm, *mlp_norm; /* [hidden] (§8) */
    cis2_weight q, k, v, o, gate, up, down;
    const float *q_bias, *k_bias, *v_bias; /* §9.1: each NULL when the checkpoint has none */
    const float *q_norm, *k_norm;          /* Qwen3 [head_dim], else NULL */
    const float *o_gain;                   /* test-only cis2-toy [hidden], else NULL */
} cis2_layer;

typedef struct {
    cis2_weight embed;   /* [vocab, hidden] */
    cis2_weight lm_head; /* [vocab, hidden]; unused when tied */
    int tied;            /* the LM head is the embedding (§11.1) */
    const float *final_norm;
    int n_layers;
    cis2_layer *layers;
    int n_linear; /* ids handed out to cis2_weight */
} cis2_weights;

/* The matrix of the LM head (§11.1). */
static inline const cis2_weight *cis2_head(const cis2_weights *w)
{
    return w->tied ? &w->embed : &w->lm_head;
}

/* ------------------------------------------------------- the tensor table */
typedef enum { CIS2_TK_LINEAR, CIS2_TK_VECTOR } cis2_tkind;
/* A dimension read from config.json (§2.2, §2.5). */
typedef enum {
    CIS2_DIM_NONE = 0,
    CIS2_DIM_HIDDEN,
    CIS2_DIM_INTER,
    CIS2_DIM_VOCAB,
    CIS2_DIM_Q,    /* num_attention_heads * head_dim */
    CIS2_DIM_KV,   /* num_key_value_heads * head_dim */
    CIS2_DIM_HEAD, /* head_dim */
} cis2_dim;
/* When the checkpoint must carry a tensor. */
typedef enum {
    CIS2_NEED_ALWAYS,  /* every architecture */
    CIS2_NEED_HEAD,    /* lm_head.weight: the loader resolves tying (§11.1) */
    CIS2_NEED_BIAS,    /* §9.1 q/k/v bias: required by qwen2, used when present otherwise */
    CIS2_NEED_QK_NORM, /* required by qwen3, refused as unexpected otherwise */
    CIS2_NEED_TOY,     /* required by the test-only cis2-toy, refused otherwise */
} cis2_need;
/* What a row means for one config. */
typedef enum { CIS2_TENSOR_UNUSED, CIS2_TENSOR_OPTIONAL, CIS2_TENSOR_REQUIRED } cis2_use;

typedef struct {
    const char *name; /* per-layer rows: the part after "model.layers.N." */
    int per_layer;
    cis2_tkind kind;
    cis2_dim rows, cols; /* vectors: rows only */
    cis2_need need;
    size_t field; /* offsetof(cis2_layer, ...) or offsetof(cis2_weights, ...) */
} cis2_tensor_def;

extern const cis2_tensor_def cis2_tensor_table[];
extern const int cis2_tensor_count;

/* The layers a row spans: l from cis2_tensor_first(d) while l < cis2_tensor_end(d, n); -1 is
 * the one instance of a global row. */
static inline int cis2_tensor_first(const cis2_tensor_def *d) { return d->per_layer ? 0 : -1; }
static inline int cis2_tensor_end(const cis2_tensor_def *d, int n_layers)
{
    return d->per_layer ? n_layers : 0;
}
/* The value of a dimension for this config (1 for CIS2_DIM_NONE). */
int cis2_tensor_dim(const cis2_config *c, cis2_dim d);
cis2_use cis2_tensor_use(const cis2_config *c, const cis2_tensor_def *d);
/* The tensor's name in the checkpoint ("model.layers.3.mlp.up_proj.weight");
 * layer is ignored for global rows. */
void cis2_tensor_name(const cis2_tensor_def *d, int layer, char *buf, size_t cap);
/* Where the row's tensor lives in w: a cis2_weight * for linears, a
 * const float ** for vectors. */
void *cis2_tensor_slot(cis2_weights *w, const cis2_tensor_def *d, int layer);
/* A checkpoint name back to its row and layer (-1 for global rows); 0 when
 * the table has it and layer < n_layers. */
int cis2_tensor_lookup(const char *name, int n_layers, const cis2_tensor_def **d, int *layer);
/* Every linear of w by id: out[id] for id < w->n_linear (n_linear slots). */
void cis2_weights_linears(const cis2_weights *w, const cis2_weight **out);
/* Bytes of packed linears one forward step reads per token: every layer's
 * linears and the LM head (bench's bandwidth floor). */
size_t cis2_weights_step_bytes(const cis2_weights *w);
#endif
