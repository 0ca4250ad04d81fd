/* The sampler (docs/sampling.md): pure scalar code on a step's final logits,
 * every operation a pinned binary32 one (core/fparith.h), so the pick is the
 * same on every backend, ISA and thread count. */
#ifndef CIS2_SAMPLE_H
#define CIS2_SAMPLE_H
#include "core/core.h"
#include <cis2.h>

/* docs/sampling.md §3: the i-th output of SplitMix64 seeded with `seed`
 * (i = step + 1), and its top 24 bits as a binary32 in [0, 1). */
uint64_t smp_splitmix64(uint64_t seed, uint64_t step);
float smp_uniform(uint64_t seed, uint64_t step);
/* Scratch bytes smp_pick needs for n logits. */
size_t smp_scratch_bytes(int n);
/* docs/sampling.md §2 (temperature > 0; a checked sampler), on the calling
 * thread's pinned environment. */
int32_t smp_pick(const cis2_sampler *s, uint64_t step, const float *logits, int n, void *scratch);
/* docs/sampling.md §5: the 40-byte sampler record a sampled run's witness
 * stream holds after the prompt ids. */
void smp_record(const cis2_sampler *s, uint8_t out[40]);
/* A sampler's text form, "temperature=T top-k=K top-p=P min-p=M" (shortest
 * decimal that reads back to the same binary32, docs/sampling.md §6). */
void smp_format(const cis2_sampler *s, char *out, size_t cap);
/* One of its numbers: the shortest "%.Ng" (N = 1 .. 9) that reads back to v. */
void smp_format_num(float v, char *out, size_t cap);
/* A docs/sampling.md §6 number ("0.7", "1", "1e-3") into *v; 0 or 1. */
int smp_parse_num(const char *txt, float *v);
/* A decimal uint64 without sign or leading zeros; 0 or 1. */
int smp_parse_seed(const char *txt, uint64_t *v);
#endif
