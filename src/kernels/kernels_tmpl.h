/* Register-blocked matmul over packed tiles, instantiated once per ISA file.
 * The including file defines:
 *   ATTR                  function attributes (e.g. target("avx2"))
 *   V, VL, NV             vector type, lanes, vectors per 16-row tile (NV*VL == 16)
 *   V_ZERO() V_ADD(a,b) V_MUL(a,b) V_SET1(x) V_LOADU(p) V_STOREU(p,v)
 *   V_BF16(p)             VL bf16 values at p widened exactly (bits << 16, §4.1)
 *   V_BF16_LO(p) V_BF16_HI(p)  of the VL 32-bit column pairs at p (the bf16
 *                         tiles' layout, fast_kernels.h), the even / the odd
 *                         column's bf16 widened exactly: word << 16, word & 0xFFFF0000
 *   V_I8(p)               optional: VL int8 values at p widened exactly to f32
 *                         (docs/quantization.md); defines the int8 kernel mm_i8
 *   NT1                   tiles per block when T == 1 (independent add chains)
 *   NTB, TBB              tiles x tokens per block when T > 1 (register blocking)
 *   NTS, TBS              optional: tiles x tokens per block when 2 <= T <= 2*TBS (a
 *                         few sequences decoded at once); NTS <= 4, TBS <= TBB
 *   PFX                   name prefix
 * and may define (§1.3 exactness hooks; defaults below: the plain product):
 *   V_XSET1(x) V_XMUL(w,xb)     broadcast of an activation / product of a weight
 *                               vector and that broadcast (kernels_neon.c)
 *   V_SMUL(acc, s)              int8: the product of a sum and its rows' scales
 *   TM_ACC_Y                    define to also get PFX##mm_f32y: the T > 1 driver
 *                               whose sums go on from the values already in Y
 *                               (a long row's sum continued over its next columns)
 *   TM_CHK_INIT() TM_CHK(p)     a per-block tracker over every product p, and the
 *   TM_CHK_END(KIND, args)      block's exit check, which may recompute the whole
 *                               block exactly (kernels_wasm128.c)
 * Each accumulator is one output (row, token): acc = acc + w[k]*x[k] for
 * k = 0..K-1 in order, a separate multiply then a separate add (§5.1).
 * int8 (docs/quantization.md): the same sum over the widened q, then one
 * multiply by the row's scale, y = s[r] * acc, after the last term. */
/* Hand-aligned, one spec operation per line: kept as written. */
/* clang-format off */
#define TM_CAT2(a, b) a##b
#define TM_CAT(a, b) TM_CAT2(a, b)
#define TM_FN(n) TM_CAT(PFX, n)
#define TM_AI ATTR inline __attribute__((always_inline))
#ifndef V_XSET1
#define V_XSET1(x) V_SET1(x)
#define V_XMUL(w, xb) V_MUL(w, xb)
#endif
#ifndef V_SMUL
#define V_SMUL(a, s) V_MUL(a, s)
#endif
#ifndef TM_CHK_INIT
#define TM_CHK_INIT()
#define TM_CHK(p) (p)
#define TM_CHK_END(KIND, W, ts, K, nt, X, ldx, tb, Y, ldy, nrows)
#endif

/* A few tiles streamed side by side are too few streams for the hardware
 * prefetcher to keep DRAM busy (T > 1, small batches): each tile's weights
 * TM_PF_K steps ahead are requested early. A hint only: no value changes. */
#ifndef TM_PF_K
#define TM_PF_K 64
#endif
#define TM_PREFETCH(p) __builtin_prefetch((p), 0, 3)
/* Element offset, from tile i, of tile i's prefetch at step k. In its last
 * TM_PF_K steps a T > 1 block requests the start of the same tile nt tiles
 * on. When T fits one token group (T <= TBS: batched decode) that is the
 * block the driver runs next, so it does not start on cold misses (B = 8
 * decode: ~2 % a step). Otherwise the driver first reruns these tiles for
 * the next token group and the request is early; for a prefill panel it
 * points past the panel and is a wasted hint. T = 1 keeps the plain distance
 * (measured slower with the jump). A hint only: no value changes. */
#define TM_PF_AT(k, K, nt, tb, ts)                                                        \
    ((size_t)((k) + TM_PF_K) * 16 +                                                       \
     ((tb) > 1 && (k) + TM_PF_K >= (K) ? (size_t)((nt) - 1) * (ts) : 0))

#define TM_STORE(acc, S, Y, ldy, nt, tb, nrows)                                           \
    do {                                                                                  \
        _Pragma("GCC unroll 16") for (int i = 0; i < (nt); i++)                           \
        _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++)                             \
        _Pragma("GCC unroll 32") for (int t = 0; t < (tb); t++) {                         \
            int r0 = 16 * i + VL * j;                                                     \
            float *dst = (Y) + (size_t)t * (ldy) + r0;                                    \
            if (S) acc[i][j][t] = V_SMUL(acc[i][j][t], V_LOADU((S) + r0)); /* s*acc */  \
            if (r0 + VL <= (nrows)) V_STOREU(dst, acc[i][j][t]);                          \
            else if (r0 < (nrows)) {                                                      \
                float tmp_[VL];                                                           \
                V_STOREU(tmp_, acc[i][j][t]);                                             \
                for (int l_ = 0; l_ < (nrows) - r0; l_++) dst[l_] = tmp_[l_];              \
            }                                                                             \
        }                                                                                 \
    } while (0)

/* One k step of a register block: the tiles' weight vectors w[i][j] (already
 * widened) times each token's X[k], added to that (row, token)'s sum. */
#define TM_STEP(w, k)                                                                     \
    _Pragma("GCC unroll 32") for (int t = 0; t < tb; t++) {                               \
        V x = V_XSET1(X[(size_t)t * ldx + (k)]);                                          \
        _Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)                             \
        _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++)                             \
            acc[i][j][t] = V_ADD(acc[i][j][t], TM_CHK(V_XMUL(w[i][j], x)));               \
    }
#define TM_ACC_ZERO()                                                                     \
    V acc[NTB > NT1 ? NTB : NT1][NV][TBB];                                                \
    _Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)                                 \
    _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++)                                 \
    _Pragma("GCC unroll 32") for (int t = 0; t < tb; t++) acc[i][j][t] = V_ZERO()
#define TM_PF_ALL(k)                                                                      \
    _Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)                                 \
        TM_PREFETCH(W + (size_t)i * ts + TM_PF_AT(k, K, nt, tb, ts))
#define TM_WLOAD(w, LOAD, at)                                                             \
    _Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)                                 \
    _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++)                                 \
        w[i][j] = LOAD(W + (size_t)i * ts + (at))

/* One register block: rows of nt tiles x tb tokens, each lane one row, its
 * terms added k = 0, 1, 2, ... (§5.1). The f32 and int8 versions differ
 * only in how a tile's 16 weights are loaded; S (int8 only, else NULL) holds
 * the block's row scales, 16 per tile. */
#define TM_BLOCK(KIND, WT, LOAD, ACC_START)                                                \
    static TM_AI void TM_FN(KIND)(const WT *W, const float *S, size_t ts, int K, const int nt, \
                                  const float *X, int ldx, const int tb, float *Y, int ldy, \
                                  int nrows)                                              \
    {                                                                                     \
        ACC_START();                                                                      \
        TM_CHK_INIT();                                                                    \
        for (int k = 0; k < K; k++) {                                                     \
            V w[NTB > NT1 ? NTB : NT1][NV];                                               \
            TM_PF_ALL(k);                                                                 \
            TM_WLOAD(w, LOAD, (size_t)k * 16 + (size_t)j * VL);                           \
            TM_STEP(w, k);                                                                \
        }                                                                                 \
        TM_CHK_END(KIND, W, ts, K, nt, X, ldx, tb, Y, ldy, nrows);                        \
        TM_STORE(acc, S, Y, ldy, nt, tb, nrows);                                          \
    }
TM_BLOCK(blk_f32, float, V_LOADU, TM_ACC_ZERO)
#ifdef TM_ACC_Y
/* A block whose sums go on from Y: acc[i][j][t] starts as the stored partial
 * sum of its (row, token) instead of zero, then adds k = 0..K-1 in order.
 * Run over columns [c, c + K) after a block over [0, c) stored its sums,
 * each output is the one sum over [0, c + K) (§5.1): a store and a load
 * move an f32's bits unchanged, and a sum out of an add under FTZ is never
 * subnormal (§1.3), so DAZ on the reload reads what the register held. An
 * ISA whose TM_CHK_END recomputes a block from zero does not define TM_ACC_Y. */
#define TM_ACC_FROM_Y()                                                                   \
    V acc[NTB > NT1 ? NTB : NT1][NV][TBB];                                                \
    _Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)                                 \
    _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++)                                 \
    _Pragma("GCC unroll 32") for (int t = 0; t < tb; t++) {                               \
        int r0 = 16 * i + VL * j;                                                         \
        const float *src = Y + (size_t)t * ldy + r0;                                      \
        if (r0 + VL <= nrows) acc[i][j][t] = V_LOADU(src);                                \
        else {                                                                            \
            float tmp_[VL] = { 0 };                                                       \
            for (int l_ = 0; l_ < nrows - r0; l_++) tmp_[l_] = src[l_];                    \
            acc[i][j][t] = V_LOADU(tmp_);                                                 \
        }                                                                                 \
    }
TM_BLOCK(blk_f32y, float, V_LOADU, TM_ACC_FROM_Y)
#endif
#ifdef V_I8
TM_BLOCK(blk_i8, int8_t, V_I8, TM_ACC_ZERO)
#endif
#undef TM_BLOCK

/* The bf16 block: the same sums over the pair layout. Each pair line is
 * loaded once and widened twice, the even column's terms added for every
 * token, then the odd column's, so each sum still takes k, then k+1. */
static TM_AI void TM_FN(blk_bf16)(const uint16_t *W, const float *S, size_t ts, int K,
                                  const int nt, const float *X, int ldx, const int tb, float *Y,
                                  int ldy, int nrows)
{
    TM_ACC_ZERO();
    TM_CHK_INIT();
    int k = 0;
    for (; k + 1 < K; k += 2) {
        V w[NTB > NT1 ? NTB : NT1][NV];
        TM_PF_ALL(k);
        TM_WLOAD(w, V_BF16_LO, (size_t)k * 16 + (size_t)j * 2 * VL);
        TM_STEP(w, k);
        TM_WLOAD(w, V_BF16_HI, (size_t)k * 16 + (size_t)j * 2 * VL);
        TM_STEP(w, k + 1);
    }
    if (k < K) { /* an odd last column: a plain line */
        V w[NTB > NT1 ? NTB : NT1][NV];
        TM_WLOAD(w, V_BF16, (size_t)k * 16 + (size_t)j * VL);
        TM_STEP(w, k);
    }
    TM_CHK_END(blk_bf16, W, ts, K, nt, X, ldx, tb, Y, ldy, nrows);
    TM_STORE(acc, S, Y, ldy, nt, tb, nrows);
}

/* Dispatch to a constant (nt, tb) instantiation. */
#define TM_TB_CASE(KIND, NTC, TBC)                                                        \
    case TBC:                                                                             \
        if ((TBC) <= TBB) TM_FN(KIND)(Wp, Sp, ts, K, NTC, Xp, ldx, TBC, Yp, ldy, nr);     \
        break;
#define TM_TB_SWITCH(KIND, NTC)                                                           \
    switch (tb) {                                                                         \
        TM_TB_CASE(KIND, NTC, 1) TM_TB_CASE(KIND, NTC, 2) TM_TB_CASE(KIND, NTC, 3)        \
        TM_TB_CASE(KIND, NTC, 4) TM_TB_CASE(KIND, NTC, 5) TM_TB_CASE(KIND, NTC, 6)        \
        TM_TB_CASE(KIND, NTC, 7) TM_TB_CASE(KIND, NTC, 8) TM_TB_CASE(KIND, NTC, 9)        \
        TM_TB_CASE(KIND, NTC, 10) TM_TB_CASE(KIND, NTC, 11) TM_TB_CASE(KIND, NTC, 12)     \
        default: break;                                                                   \
    }
#define TM_NT_CASE(KIND, NTC, MAXNT)                                                      \
    case NTC:                                                                             \
        if ((NTC) <= (MAXNT)) { TM_TB_SWITCH(KIND, NTC) }                                 \
        break;
#define TM_NT1_CASE(KIND, NTC)                                                            \
    case NTC:                                                                             \
        if ((NTC) <= NT1) TM_FN(KIND)(Wp, Sp, ts, K, NTC, Xp, ldx, 1, Yp, ldy, nr);       \
        break;

#ifdef NTS
_Static_assert(NTS >= 1 && NTS <= 4 && TBS >= 1 && TBS <= TBB && TBS <= 12, "NTS, TBS");
/* Small T: more tiles side by side (NTS weight streams in flight for the
 * prefetcher, each weight vector used by up to TBS tokens); T is split into
 * equal token groups of at most TBS. Only the blocking changes: each output
 * is still its own in-order sum (§5.1). */
#define TM_TBS_CASE(KIND, NTC, TBC)                                                       \
    case TBC:                                                                             \
        if ((TBC) <= TBS) TM_FN(KIND)(Wp, Sp, ts, K, NTC, Xp, ldx, TBC, Yp, ldy, nr);     \
        break;
#define TM_NTS_CASE(KIND, NTC)                                                            \
    case NTC:                                                                             \
        if ((NTC) <= NTS) {                                                               \
            switch (tb) {                                                                 \
                TM_TBS_CASE(KIND, NTC, 1) TM_TBS_CASE(KIND, NTC, 2)                       \
                TM_TBS_CASE(KIND, NTC, 3) TM_TBS_CASE(KIND, NTC, 4)                       \
                TM_TBS_CASE(KIND, NTC, 5) TM_TBS_CASE(KIND, NTC, 6)                       \
                TM_TBS_CASE(KIND, NTC, 7) TM_TBS_CASE(KIND, NTC, 8)                       \
                TM_TBS_CASE(KIND, NTC, 9) TM_TBS_CASE(KIND, NTC, 10)                      \
                TM_TBS_CASE(KIND, NTC, 11) TM_TBS_CASE(KIND, NTC, 12)                     \
                default: break;                                                           \
            }                                                                             \
        }                                                                                 \
        break;
#define TM_SMALL_T(KIND, WT)                                                              \
    if (T <= 2 * TBS) {                                                                   \
        int ng = (T + TBS - 1) / TBS, tg = (T + ng - 1) / ng;                             \
        for (int i0 = 0; i0 < ntiles; i0 += NTS) {                                        \
            int nt = ntiles - i0 < NTS ? ntiles - i0 : NTS;                               \
            const WT *Wp = W + (size_t)i0 * ts;                                           \
            const float *Sp = TM_CAT(TM_S_, KIND);                                        \
            int nr = nrows - i0 * 16;                                                     \
            for (int t0 = 0; t0 < T; t0 += tg) {                                          \
                int tb = T - t0 < tg ? T - t0 : tg;                                       \
                const float *Xp = X + (size_t)t0 * ldx;                                   \
                float *Yp = Y + (size_t)t0 * ldy + (size_t)i0 * 16;                       \
                switch (nt) {                                                             \
                    TM_NTS_CASE(blk_##KIND, 1) TM_NTS_CASE(blk_##KIND, 2)                 \
                    TM_NTS_CASE(blk_##KIND, 3) TM_NTS_CASE(blk_##KIND, 4)                 \
                    default: break;                                                       \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
        return;                                                                           \
    }
#else
#define TM_SMALL_T(KIND, WT)
#endif

/* T > 1: blocks of NTB tiles x TBB tokens, each a call of BLK (S_AT: the
 * block's row scales, NULL but for int8). */
#define TM_BLOCKS_T(BLK, WT, S_AT)                                                        \
    for (int i0 = 0; i0 < ntiles; i0 += NTB) {                                            \
        int nt = ntiles - i0 < NTB ? ntiles - i0 : NTB;                                   \
        const WT *Wp = W + (size_t)i0 * ts;                                               \
        const float *Sp = S_AT;                                                           \
        int nr = nrows - i0 * 16;                                                         \
        for (int t0 = 0; t0 < T; t0 += TBB) {                                             \
            int tb = T - t0 < TBB ? T - t0 : TBB;                                         \
            const float *Xp = X + (size_t)t0 * ldx;                                       \
            float *Yp = Y + (size_t)t0 * ldy + (size_t)i0 * 16;                           \
            switch (nt) {                                                                 \
                TM_NT_CASE(BLK, 1, NTB) TM_NT_CASE(BLK, 2, NTB)                           \
                TM_NT_CASE(BLK, 3, NTB) TM_NT_CASE(BLK, 4, NTB)                           \
                default: break;                                                           \
            }                                                                             \
        }                                                                                 \
    }

/* The int8 driver takes the row scales after W; the others none (S = NULL). */
#define TM_SP_bf16
#define TM_SP_f32
#define TM_SP_i8 const float *S,
#define TM_S_bf16 NULL
#define TM_S_f32 NULL
#define TM_S_i8 (S + (size_t)i0 * 16)
#define TM_DRIVER(KIND, WT)                                                               \
static ATTR void TM_FN(mm_##KIND)(const WT *W, TM_CAT(TM_SP_, KIND) int K, int ntiles,    \
                                  int nrows, const float *X, int ldx, int T, float *Y,    \
                                  int ldy)                                                \
{                                                                                         \
    size_t ts = (size_t)K * 16;                                                           \
    if (T == 1) { /* blocks of near-equal size, at most NT1 tiles each */                \
        int nb = (ntiles + NT1 - 1) / NT1;                                                \
        for (int b = 0; b < nb; b++) {                                                    \
            int i0 = ntiles * b / nb, nt = ntiles * (b + 1) / nb - i0;                    \
            const WT *Wp = W + (size_t)i0 * ts;                                           \
            const float *Sp = TM_CAT(TM_S_, KIND);                                        \
            const float *Xp = X;                                                          \
            float *Yp = Y + (size_t)i0 * 16;                                              \
            int nr = nrows - i0 * 16;                                                     \
            switch (nt) {                                                                 \
                TM_NT1_CASE(blk_##KIND, 1) TM_NT1_CASE(blk_##KIND, 2)                     \
                TM_NT1_CASE(blk_##KIND, 3) TM_NT1_CASE(blk_##KIND, 4)                     \
                TM_NT1_CASE(blk_##KIND, 5) TM_NT1_CASE(blk_##KIND, 6)                     \
                TM_NT1_CASE(blk_##KIND, 7) TM_NT1_CASE(blk_##KIND, 8)                     \
                default: break;                                                           \
            }                                                                             \
        }                                                                                 \
        return;                                                                           \
    }                                                                                     \
    TM_SMALL_T(KIND, WT)                                                                  \
    TM_BLOCKS_T(blk_##KIND, WT, TM_CAT(TM_S_, KIND))                                      \
}

TM_DRIVER(bf16, uint16_t)
TM_DRIVER(f32, float)
#ifdef TM_ACC_Y
/* The T > 1 blocking of mm_f32, each sum going on from Y (blk_f32y). */
static ATTR void TM_FN(mm_f32y)(const float *W, int K, int ntiles, int nrows, const float *X,
                                int ldx, int T, float *Y, int ldy)
{
    size_t ts = (size_t)K * 16;
    TM_BLOCKS_T(blk_f32y, float, NULL)
}
#endif
#ifdef V_I8
TM_DRIVER(i8, int8_t)
#endif
