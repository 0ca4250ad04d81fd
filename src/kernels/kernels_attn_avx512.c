/* AVX-512F register-blocked attention tiles: scores as a tile of queries x
 * keys over a key-transposed block, V-mix as a tile of queries x output dims.
 * Every lane is one output — a key's score or one output dim of one query —
 * and adds its terms strictly in order (§5.1, §9.2, §9.4): d = 0..hd-1 for a
 * score, keys j = 0..n-1 for a V-mix dim; separate vmulps/vaddps, never FMA
 * (§1.4). The tile only shares loads between outputs, never a sum. */
#include "kernels/fast_kernels.h"
#include "kernels/kernels_x86.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define ATTR  __attribute__((target("avx512f")))
#define AI    ATTR inline __attribute__((always_inline))
#define SC_QT 8 /* queries per scores tile */
#define VM_QT 4 /* queries per V-mix tile */
/* Loops over a tile's queries and vectors carry `#pragma GCC unroll`: fully
 * unrolled, every accumulator of the tile stays in a register (without it
 * GCC kept the tiles in stack memory, at half the speed). */

static AI __mmask16 tail_mask(int left) /* lanes < left (1..16) */
{
    return (__mmask16)(left >= 16 ? 0xFFFF : (1u << left) - 1u);
}

/* One scores block: NQ queries x NK 16-key vectors starting at key j0.
 * Lane l of acc[i][e] is key j0 + 16e + l of query i: acc = acc + q[d]*k[d]
 * for d in order, then * scale (§9.2). Keys past `left` are computed from
 * readable pad and not stored. */
static AI void sc_blk(const float *q, size_t ldq, const int nq, const float *kt, size_t ld, int hd,
                      __m512 vs, float *out, size_t ldo, const int nk, int left)
{
    __m512 acc[SC_QT][2];
#pragma GCC unroll 8
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 8
        for (int e = 0; e < nk; e++) acc[i][e] = _mm512_setzero_ps();
    const float *c = kt;
    for (int d = 0; d < hd; d++, c += ld) {
        __m512 k0 = _mm512_loadu_ps(c), k1 = nk > 1 ? _mm512_loadu_ps(c + 16) : k0;
#pragma GCC unroll 8
        for (int i = 0; i < nq; i++) {
            __m512 qb = _mm512_set1_ps(q[(size_t)i * ldq + d]);
            acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_mul_ps(qb, k0));
            if (nk > 1) acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_mul_ps(qb, k1));
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 8
        for (int e = 0; e < nk; e++) {
            __m512 s = _mm512_mul_ps(acc[i][e], vs); /* §9.2: scale after the dot */
            _mm512_mask_storeu_ps(out + (size_t)i * ldo + 16 * e, tail_mask(left - 16 * e), s);
        }
}

#define SC_CASE(NQ)                                                                                \
    case NQ:                                                                                       \
        if (nk == 2) sc_blk(qi, ldq, NQ, kt + j, ld, hd, vs, oi + j, ldo, 2, n - j);               \
        else sc_blk(qi, ldq, NQ, kt + j, ld, hd, vs, oi + j, ldo, 1, n - j);                       \
        break;

/* out[i*ldo + j] = dot_seq(q_i, k_j) * scale for queries i < nq (query i at
 * q + i*ldq) and keys j < n, key j's element d at kt[d*ld + j]; kt must be
 * readable for j < round_up(n, 16). Only j < n is written. */
ATTR void fast_avx512_scores_tq(const float *q, size_t ldq, int nq, const float *kt, size_t ld,
                                int n, int hd, float scale, float *out, size_t ldo)
{
    __m512 vs = _mm512_set1_ps(scale);
    for (int i0 = 0; i0 < nq; i0 += SC_QT) {
        int m = nq - i0 < SC_QT ? nq - i0 : SC_QT;
        const float *qi = q + (size_t)i0 * ldq;
        float *oi = out + (size_t)i0 * ldo;
        for (int j = 0; j < n; j += 32) {
            int nk = n - j > 16 ? 2 : 1;
            switch (m) {
                SC_CASE(1)
                SC_CASE(2)
                SC_CASE(3) SC_CASE(4) SC_CASE(5) SC_CASE(6) SC_CASE(7) default : SC_CASE(8)
            }
        }
    }
}
#undef SC_CASE

/* One V-mix block: NQ queries x ND 16-dim vectors at dim d0. Query i sums
 * keys j < n0 + i*step in order: lane d of acc[i][e] adds p_i[j]*v[j][d]
 * (one multiply, one add each, §9.4). Keys < n0 are shared by the whole
 * tile; the few after are added per query, still in key order. */
static AI void vm_blk(const float *p, size_t ldp, const int nq, int n0, int step, const float *v,
                      size_t stride, float *out, size_t ldo, const int nd)
{
    __m512 acc[VM_QT][4];
#pragma GCC unroll 8
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 8
        for (int e = 0; e < nd; e++) acc[i][e] = _mm512_setzero_ps();
    const float *vr = v;
    for (int j = 0; j < n0; j++, vr += stride) {
        __m512 x[4];
#pragma GCC unroll 8
        for (int e = 0; e < nd; e++) x[e] = _mm512_loadu_ps(vr + 16 * e);
#pragma GCC unroll 8
        for (int i = 0; i < nq; i++) {
            __m512 pb = _mm512_set1_ps(p[(size_t)i * ldp + j]);
#pragma GCC unroll 8
            for (int e = 0; e < nd; e++)
                acc[i][e] = _mm512_add_ps(acc[i][e], _mm512_mul_ps(pb, x[e]));
        }
    }
    int nlast = n0 + (nq - 1) * step;
    for (int j = n0; j < nlast; j++, vr += stride) {
        __m512 x[4];
#pragma GCC unroll 8
        for (int e = 0; e < nd; e++) x[e] = _mm512_loadu_ps(vr + 16 * e);
#pragma GCC unroll 8
        for (int i = 0; i < nq; i++) {
            if (j >= n0 + i * step) continue; /* past query i's keys */
            __m512 pb = _mm512_set1_ps(p[(size_t)i * ldp + j]);
#pragma GCC unroll 8
            for (int e = 0; e < nd; e++)
                acc[i][e] = _mm512_add_ps(acc[i][e], _mm512_mul_ps(pb, x[e]));
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < nq; i++)
#pragma GCC unroll 8
        for (int e = 0; e < nd; e++) _mm512_storeu_ps(out + (size_t)i * ldo + 16 * e, acc[i][e]);
}

#define VM_ND(NQ, ND) vm_blk(pi, ldp, NQ, ni, step, v + d0, stride, oi + d0, ldo, ND)
#define VM_CASE(NQ)                                                                                \
    case NQ:                                                                                       \
        if (nd == 4) VM_ND(NQ, 4);                                                                 \
        else if (nd == 2) VM_ND(NQ, 2);                                                            \
        else VM_ND(NQ, 1);                                                                         \
        break;

/* out[i*ldo + d] = sum over keys j < n0 + i*step, in order, of
 * p[i*ldp + j] * v[j*stride + d], for queries i < nq and dims d < hd. */
ATTR void fast_avx512_vmix_tq(const float *p, size_t ldp, int nq, int n0, int step, const float *v,
                              size_t stride, int hd, float *out, size_t ldo)
{
    for (int i0 = 0; i0 < nq; i0 += VM_QT) {
        int m = nq - i0 < VM_QT ? nq - i0 : VM_QT, ni = n0 + i0 * step;
        const float *pi = p + (size_t)i0 * ldp;
        float *oi = out + (size_t)i0 * ldo;
        int d0 = 0;
        while (d0 + 16 <= hd) {
            int nd = hd - d0 >= 64 ? 4 : hd - d0 >= 32 ? 2 : 1;
            switch (m) {
                VM_CASE(1) VM_CASE(2) VM_CASE(3) default : VM_CASE(4)
            }
            d0 += 16 * nd;
        }
        if (d0 < hd) /* per-dim lanes: any split of the dims is exact */
            for (int i = 0; i < m; i++)
                fast_avx2_vmix(pi + (size_t)i * ldp, v + d0, stride, ni + i * step, hd - d0,
                               oi + (size_t)i * ldo + d0);
    }
}
#undef VM_CASE
#undef VM_ND
#endif
