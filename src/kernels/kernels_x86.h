/* The x86-64 kernels one ISA file lends another: the AVX-512F table
 * (kernels_avx512.c, kernels_attn_avx512.c) reuses AVX2 attention kernels
 * (every AVX-512F CPU has AVX2) and the row-softmax driver of kernels_avx2.c.
 * Each is defined once, with its target attribute, in the file named. */
#ifndef CIS2_KERNELS_X86_H
#define CIS2_KERNELS_X86_H
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
/* kernels_avx2.c */
void fast_avx2_scores(const float *q, const float *k, size_t stride, int n, int hd, float scale,
                      float *out);
void fast_avx2_scores_t(const float *q, const float *kt, size_t ld, int n, int hd, float scale,
                        float *out);
void fast_avx2_vmix(const float *p, const float *v, size_t stride, int n, int hd, float *out);
void fast_avx2_swiglu(const float *g, const float *u, float *out, int n);
void fast_avx2_add(float *h, const float *x, int n);
int32_t fast_avx2_scan(const float *x, int n, int *first_nan);
void fast_avx2_kt_pack(const float *k, size_t stride, int n, int hd, float *kt, size_t ld);
/* Rows i < m of s (row i at s + i*lds, n0 + i*step entries), each through
 * max_exp then div: the `softmax` kernel of the ISA whose two halves they are. */
void fast_softmax_rows_by(float *s, size_t lds, int m, int n0, int step,
                          int (*max_exp)(float *s, int n), void (*div)(float *s, int n, float acc));
/* kernels_attn_avx512.c */
void fast_avx512_scores_tq(const float *q, size_t ldq, int nq, const float *kt, size_t ld, int n,
                           int hd, float scale, float *out, size_t ldo);
void fast_avx512_vmix_tq(const float *p, size_t ldp, int nq, int n0, int step, const float *v,
                         size_t stride, int hd, float *out, size_t ldo);
#endif

#endif
