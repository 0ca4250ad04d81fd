/* The tokenizer's object (spec §3.1), shared by its two files:
 * tokenizer_load.c reads and validates tokenizer.json into it, tokenizer.c
 * encodes and decodes with it. Read-only once loaded (model.h). */
#ifndef CIS2_TOKENIZER_H
#define CIS2_TOKENIZER_H
#include "model/model.h"
#include "model/pretok.h"
#include <stdint.h>

typedef struct {
    uint64_t key;
    uint32_t rank;
    int32_t id;
} merge_slot; /* key = a<<32 | b */
#define MERGE_EMPTY UINT64_MAX

typedef struct {
    const char *s; /* content, as in the file (NUL-terminated in added_text) */
    uint32_t len;
    int32_t id;
    int normalized, special;
} added_tok;

struct cis2_tokenizer {
    char path[256];
    int n_vocab;       /* model.vocab entries, ids 0..n_vocab-1 */
    int n_ids;         /* plus added tokens outside the vocab */
    uint32_t *tok_off; /* decode: id i is tok_bytes[tok_off[i] .. tok_off[i+1]) */
    uint8_t *tok_bytes;
    int32_t byte_id[256]; /* §3.1.5.b: vocab id of each byte's one-symbol token */
    merge_slot *merges;   /* open addressing, (a,b) -> (rank, merged id) */
    int merge_bits;
    int nfc;          /* normalizer: NFC */
    cis2_pretok pt;   /* pre-tokenizer steps before the ByteLevel mapping */
    added_tok *added; /* in file order */
    int n_added;
    char *added_text;
    /* [0]: normalized=false tokens, on the raw text; [1]: normalized=true
     * ones, on the normalized pieces. Pattern k is added[pat_tok[p][k]]. */
    cis2_strmatch *match[2];
    int32_t *pat_tok[2];
    uint32_t *pat_len[2];
    char *pat_text; /* NFC of normalized=true contents */
    /* model.ignore_merges (tokenizers' BPE::tokenize_with_cache): a word
     * whose byte-level symbols spell a vocab token is that one token, merges
     * unapplied. By vocab id, the bytes its symbols stand for (whole_off[i]
     * .. whole_off[i+1]; empty: a character outside the byte map, so no word
     * spells it); whole_slot: id + 1 by FNV-1a of those bytes, 0 = empty. */
    int ignore_merges;
    uint8_t *whole_bytes;
    uint32_t *whole_off;
    int32_t *whole_slot;
    uint32_t whole_mask;
};

/* tokenizer.c: the merge table's slot for key a<<32 | b in a table of
 * 2^bits slots (open addressing, linear probing from there). */
uint32_t tok_merge_hash(uint64_t k, int bits);

/* tokenizer.c: FNV-1a of n bytes, the hash of whole_slot. */
uint64_t tok_fnv1a(const uint8_t *s, size_t n);

/* tokenizer_load.c: cis2_tokenizer_parse and cis2_tokenizer_load before
 * their message is made one line. */
int cis2_tokenizer_parse_impl(cis2_tokenizer **out, const char *json, size_t len, const char *path,
                              char *err);
int cis2_tokenizer_load_impl(cis2_tokenizer **t, const char *path, char *err);
#endif
