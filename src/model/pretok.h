/* The tokenizer's internals shared between model/ files: the pre-tokenizer
 * (spec §3.1.4) and added-token matcher (§3.1.6): hand-written matchers for
 * the regexes we can prove we implement exactly, a leftmost-longest
 * multi-pattern search in linear time; and what chat.c asks the tokenizer. */
#ifndef CIS2_PRETOK_H
#define CIS2_PRETOK_H
#include "cis2.h"
#include <stddef.h>
#include <stdint.h>

/* One pre-tokenizer step; a Sequence applies them in order, each to every
 * piece the previous one produced. */
typedef enum {
    CIS2_PT_DIGITS = 0, /* Digits(individual_digits=true): each \p{N} alone */
    CIS2_PT_GPT2,       /* GPT-2's regex (ByteLevel use_regex=true, or a Split) */
    CIS2_PT_QWEN,       /* Qwen2's regex (Split, Isolated) */
    CIS2_PT_LLAMA3,     /* Llama-3's / cl100k's regex: Qwen2's with \p{N}{1,3} */
    CIS2_PT_NKINDS
} cis2_pt_kind;

#define CIS2_PT_MAX 4
typedef struct {
    int n;
    uint8_t kind[CIS2_PT_MAX];
} cis2_pretok;

/* The kind whose regex is `pat` (literal CR/LF/TAB characters count as their
 * escapes \r \n \t), or -1 when no matcher implements it. */
int cis2_pt_regex_kind(const char *pat, size_t len);

/* Split valid UTF-8 s[0..n) by every step; `fn` gets each final non-empty
 * piece in order. Stops at and returns fn's first non-zero result. */
typedef int (*cis2_piece_fn)(void *ctx, const uint8_t *s, size_t n);
int cis2_pretok_run(const cis2_pretok *p, const uint8_t *s, size_t n, cis2_piece_fn fn, void *ctx);

/* ---------------------------------------------------- added-token matcher */
/* Aho-Corasick over the reversed patterns: one right-to-left pass gives, for
 * every position, the longest pattern starting there, so leftmost-longest
 * non-overlapping matching (what tokenizers does with its aho-corasick
 * LeftmostLongest automaton) costs O(text + patterns), whatever the patterns. */
typedef struct cis2_strmatch cis2_strmatch;
/* Patterns must be distinct and non-empty. Returns 0, 1 (out of memory) or 2
 * (more than 2^24 - 1 pattern bytes in all). */
int cis2_strmatch_build(cis2_strmatch **m, const char *const *pat, const uint32_t *len, uint32_t n);
/* best[i] = index of the longest pattern equal to s[i..], or -1; i < n. */
void cis2_strmatch_longest(const cis2_strmatch *m, const uint8_t *s, size_t n, int32_t *best);
void cis2_strmatch_free(cis2_strmatch *m);

/* --------------------------------------- tokenizer queries (tokenizer.c) */
/* Every added token encode would match in valid UTF-8 text[0..n), in order:
 * fn(ctx, its content (NUL-terminated), special?, pass, start, end). Pass 0
 * tokens (normalized=false) matched text[start, end); pass 1 tokens
 * (normalized=true) were found in the NFC form of the piece [start, end)
 * between pass 0 matches. Returns 0, fn's first non-zero result, or -1 (no
 * memory). */
typedef int (*cis2_added_fn)(void *ctx, const char *content, int special, int pass, size_t start,
                             size_t end);
int cis2_tokenizer_scan_added(const cis2_tokenizer *t, const char *text, size_t n, cis2_added_fn fn,
                              void *ctx);
#endif
