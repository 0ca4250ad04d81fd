/* `cis2 bench --peak`: this machine's ceilings for the exact kernels — the
 * sustained rate of separate vector multiplies plus separate vector adds on
 * one core (512-bit and 256-bit; the kernels never fuse them, §1.4, so
 * neither does this loop) and the streaming read bandwidth — then the exact
 * bf16 matmul kernel's own rate, from L2 and streamed. A microbenchmark: its
 * values are never part of a computed result. */
#include "cli/commands.h"
#include "kernels/fast_kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* The chains start at values read through a volatile, so the compiler cannot
 * fold x*1 or x+0 away; each chain is x = (x*1)+0, a multiply then an add
 * (the values never change, so no denormal or overflow slows a lane). A
 * chain's step waits for the multiply's and then the add's latency (4 + 2
 * cycles for 512-bit on Zen 5), so the two multiply and two add pipes stay
 * busy only with enough chains in flight. Six multiply and six add chains
 * read 155 GFLOPS a core on a Zen 5 whose pipes give 211-217, so every
 * ceiling fraction measured against that loop was ~1.37x too high. Here 14
 * chains, each a named variable: with the two constants, all 16 registers
 * of 256-bit AVX; at 512-bit gcc and clang -O2 both keep 14 in registers
 * (215-223 GFLOPS on that Zen 5, as many as 24 chains read), where with 16
 * clang kept some in memory and read 91. */
/* clang-format off */
#define PEAK_L14(F, A, B)                                                                          \
    F(0, A, B) F(1, A, B) F(2, A, B) F(3, A, B) F(4, A, B) F(5, A, B) F(6, A, B) F(7, A, B)        \
    F(8, A, B) F(9, A, B) F(10, A, B) F(11, A, B) F(12, A, B) F(13, A, B)
/* clang-format on */
#define PEAK_DECL(i, V, SET1)  V x##i = SET1(one_ + (float)(i));
#define PEAK_STEP(i, MUL, ADD) x##i = ADD(MUL(x##i, one), zero);
#define PEAK_SUM(i, ADD, _)    t = ADD(t, x##i);
#define PEAK_BODY(V, SET1, MUL, ADD, LANES, LIST)                                                  \
    do {                                                                                           \
        V one = SET1(one_), zero = SET1(zero_);                                                    \
        LIST(PEAK_DECL, V, SET1)                                                                   \
        for (long it = 0; it < iters; it++) { LIST(PEAK_STEP, MUL, ADD) }                          \
        V t = SET1(zero_);                                                                         \
        LIST(PEAK_SUM, ADD, _)                                                                     \
        float s[LANES];                                                                            \
        memcpy(s, &t, sizeof s);                                                                   \
        sink_ = s[0];                                                                              \
    } while (0)
#define PEAK_CH 14 /* PEAK_L14's chains */

static volatile float one_v = 1.0f, zero_v = 0.0f, sink_v;

__attribute__((target("avx512f"))) static void peak512(long iters)
{
    float one_ = one_v, zero_ = zero_v, sink_;
    PEAK_BODY(__m512, _mm512_set1_ps, _mm512_mul_ps, _mm512_add_ps, 16, PEAK_L14);
    sink_v = sink_;
}

__attribute__((target("avx"))) static void peak256(long iters)
{
    float one_ = one_v, zero_ = zero_v, sink_;
    PEAK_BODY(__m256, _mm256_set1_ps, _mm256_mul_ps, _mm256_add_ps, 8, PEAK_L14);
    sink_v = sink_;
}

/* Best of 5 runs of iters x PEAK_CH muls and as many adds: G lane-ops/s. */
static double peak_gflops(void (*fn)(long), int lanes)
{
    long iters = 240000000 / PEAK_CH;
    double best = 0.0;
    for (int r = 0; r < 5; r++) {
        double t0 = cis2_now_ms();
        fn(iters);
        double ms = cis2_now_ms() - t0;
        double g = (double)iters * PEAK_CH * 2.0 * lanes / (ms * 1e6);
        if (g > best) best = g;
    }
    return best;
}
#endif

/* The exact bf16 matmul kernel itself: the best ISA path on one thread, T
 * tokens against 16-row tiles of K = 576 (the 135M shape's hidden size),
 * with its weights resident in L2 (12 tiles, 216 KiB) or streamed from a
 * buffer no cache holds (3584 tiles, 63 MiB). Each term is a multiply and an
 * add (§5.1): 2 * 16 * ntiles * K * T flops a call; the best of 3 rounds.
 * Against peak_mul_add it says how much of the ceiling the kernel reaches
 * when memory is not in the way (L2) and when it streams (decode). The
 * outputs are never read; weights and inputs are normal numbers. */
#define KB_K            576
#define KB_L2_TILES     12
#define KB_STREAM_TILES 3584

static double mm_gflops(const fast_kernels *k, const uint16_t *W, int ntiles, const float *X, int T,
                        float *Y)
{
    double best = 0.0;
    for (int r = 0; r < 3; r++) { /* each round at least 10 ms (one call under an emulator) */
        long calls = 0;
        double t0 = cis2_now_ms(), ms;
        do {
            k->mm_bf16(W, KB_K, ntiles, ntiles * FAST_TILE, X, KB_K, T, Y, ntiles * FAST_TILE);
            calls++;
        } while ((ms = cis2_now_ms() - t0) < 10.0);
        double g = 2.0 * FAST_TILE * ntiles * KB_K * T * (double)calls / (ms * 1e6);
        if (g > best) best = g;
    }
    return best;
}

static void bench_kernel(void)
{
    const fast_kernels *k = fast_kernels_pick(NULL, NULL);
    size_t nw = (size_t)KB_STREAM_TILES * KB_K * FAST_TILE;
    uint16_t *W = malloc(nw * sizeof(uint16_t));
    float *X = malloc((size_t)8 * KB_K * sizeof(float));
    float *Y = malloc((size_t)8 * KB_STREAM_TILES * FAST_TILE * sizeof(float));
    uint64_t saved = cis2_fpenv_read();
    if (!k || !W || !X || !Y || cis2_fpenv_pin()) { /* §1.3, as every computing thread */
        printf("kernel=mm_bf16 isa=n/a\n");
        goto out;
    }
    for (size_t i = 0; i < nw; i++) W[i] = (uint16_t)(0x3F80u + i % 7u); /* 1.0 .. 1.05 */
    for (int i = 0; i < 8 * KB_K; i++) X[i] = 0.001f * (float)(i % 13 + 1);
    static const int Ts[2] = { 1, 8 };
    for (int i = 0; i < 2; i++) {
        int T = Ts[i];
        double l2 = mm_gflops(k, W, KB_L2_TILES, X, T, Y);
        double st = mm_gflops(k, W, KB_STREAM_TILES, X, T, Y);
        /* weight bytes a second: 2 bytes and 2 * T flops per weight */
        printf(
            "kernel=mm_bf16 isa=%s T=%d l2_gflops=%.1f stream_gflops=%.1f stream_weight_gbs=%.2f\n",
            k->name, T, l2, st, st / T);
    }
out:
    cis2_fpenv_write(saved);
    fflush(stdout);
    free(W), free(X), free(Y);
}

void cis2_bench_peak(int threads)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        printf("peak_mul_add_512_gflops_per_core=%.1f\n", peak_gflops(peak512, 16));
    else printf("peak_mul_add_512_gflops_per_core=n/a\n");
    if (__builtin_cpu_supports("avx"))
        printf("peak_mul_add_256_gflops_per_core=%.1f\n", peak_gflops(peak256, 8));
    else printf("peak_mul_add_256_gflops_per_core=n/a\n");
#else
    printf("peak_mul_add_512_gflops_per_core=n/a\npeak_mul_add_256_gflops_per_core=n/a\n");
#endif
    printf("peak_read_gbs_1_thread=%.2f\n", cis2_bench_read_gbs(1));
    printf("peak_read_gbs_%d_threads=%.2f\n", threads, cis2_bench_read_gbs(threads));
    fflush(stdout);
    bench_kernel();
}
