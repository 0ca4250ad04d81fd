/* int8 weight tiles for the exact int8 kernels (fast_kernels.mm_i8): the
 * row-interleaved layout of fast_kernels.h, one byte per weight, with the
 * row scales beside them (docs/quantization.md §3). A pure re-layout. */
#include "kernels/fast_kernels.h"
#include <string.h>

static size_t up64(size_t b) { return b ? (b + 63) & ~(size_t)63 : 64; }

size_t fast_i8_tile_bytes(int rows, int cols)
{
    size_t ntiles = ((size_t)rows + FAST_TILE - 1) / FAST_TILE;
    return up64(ntiles * FAST_TILE * (size_t)cols);
}

size_t fast_i8_scale_bytes(int rows)
{
    size_t ntiles = ((size_t)rows + FAST_TILE - 1) / FAST_TILE;
    return up64(ntiles * FAST_TILE * sizeof(float));
}

void fast_i8_pack(const int8_t *q, const float *s, int rows, int cols, int8_t *tiles, float *scales)
{
    int ntiles = (rows + FAST_TILE - 1) / FAST_TILE;
    size_t K = (size_t)cols;
    memset(tiles, 0, fast_i8_tile_bytes(rows, cols));
    memset(scales, 0, fast_i8_scale_bytes(rows));
    for (int t = 0; t < ntiles; t++) {
        int nr = rows - t * FAST_TILE < FAST_TILE ? rows - t * FAST_TILE : FAST_TILE;
        int8_t *d = tiles + (size_t)t * K * FAST_TILE;
        for (int l = 0; l < nr; l++) {
            const int8_t *row = q + (size_t)(t * FAST_TILE + l) * K;
            for (size_t k = 0; k < K; k++) d[k * FAST_TILE + (size_t)l] = row[k];
            scales[t * FAST_TILE + l] = s[t * FAST_TILE + l];
        }
    }
}
