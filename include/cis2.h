/* cis2 — bit-exact CIS-2 v0.3b fp32 transformer inference: the public C API.
 *
 * This header is the whole public interface of libcis2 (the `cis2` CLI, the
 * wasm verifier and the Python package are its clients). Everything else
 * lives in the internal headers under src/ and may change between releases.
 *
 * Conventions
 *  - Every call that can fail returns 0 on success and nonzero on failure,
 *    writing one human-readable line (naming the file and the problem) into
 *    the caller's `err` buffer of CIS2_ERR_LEN bytes. `err` may not be NULL.
 *    The text calls (cis2_tokenizer_parse/_encode/_decode/_normalize,
 *    cis2_chat_parse_messages/_render, cis2_receipt_prompt_bytes,
 *    cis2_parse_ids) return -1 when memory ran out and 1 for a fault of
 *    their input, so a caller can tell the two apart without reading the
 *    message.
 *  - The library never aborts, exits or prints (docs/architecture.md, "The
 *    error contract"): memory running out is an error return like any other,
 *    its message naming the memory, and what the failed call was given stays
 *    usable — a model or engine works for the next call, a failed
 *    cis2_engine_step changed no sequence (step again, or cancel), and a
 *    cis2_result, cis2_receipt or cis2_verdict that a failed call was
 *    filling holds nothing to free. An engine allocates
 *    its scratch when it grows (cis2_engine_new, a longer prompt, a KV cache
 *    that grows), never inside the forward pass. A FILE* argument
 *    (cis2_selftest, cis2_fpenv_selftest) is the one place text goes.
 *  - Handles are opaque. Whoever gets a handle from a `_new`/`_open` call
 *    frees it with the matching `_free`; results, verdicts and parsed
 *    receipts own their arrays until their `_free` call (a `_free` of a
 *    zeroed or already freed struct does nothing). The one borrower is a
 *    receipt filled by cis2_receipt_from_run (see there). Memory a call
 *    returns through a `char **`/`int32_t **` is the caller's: cis2_free.
 *  - Floating-point environment (§1.3): every call that computes pins
 *    FTZ/DAZ on the calling thread itself and restores the caller's control
 *    register before it returns; the engine's worker threads are pinned for
 *    their whole life. Callers never need to touch MXCSR/FPCR.
 *
 * Thread safety
 *  - A cis2_model is read-only once cis2_model_open returns (it holds the
 *    weights packed for every backend; engines keep their own scratch,
 *    caches and, for the reference backend, their own f32 copies): any
 *    number of engines, on any threads, may share it, and freeing one
 *    engine never disturbs another. Free the model after its last engine.
 *  - A cis2_engine is used by one thread at a time (it holds the KV caches
 *    and scratch memory); different engines run concurrently.
 *  - A cis2_tokenizer is read-only after loading: encode/decode may run on
 *    any number of threads at once.
 *  - Receipt functions and cis2_selftest are reentrant.
 */
#ifndef CIS2_H
#define CIS2_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
/* libcis2.so is built with -fvisibility=hidden: exactly what this header
 * declares is exported (tests/t_install.sh checks the symbol table). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define CIS2_SPEC_VERSION "0.3b"
#define CIS2_VERSION      "0.5.0"
#define CIS2_ABI_VERSION  1 /* the soname's major: bumped on any incompatible change */
#define CIS2_ERR_LEN      512
/* The CIS2_VERSION the library was built as, for clients that load it at run
 * time (the Python package checks it against the layouts it was written for). */
const char *cis2_version(void);

typedef struct cis2_model cis2_model;
typedef struct cis2_engine cis2_engine;
typedef struct cis2_tokenizer cis2_tokenizer;

/* ------------------------------------------------------------ enumerations */
/* APPROX: arm D of the divergence method, approximate int8 dot products over
 * an int8 checkpoint (docs/quantization.md §6) — not CIS-2, never receipted. */
typedef enum {
    CIS2_BACKEND_REF = 0,
    CIS2_BACKEND_FAST = 1,
    CIS2_BACKEND_APPROX = 2
} cis2_backend_kind;

/* Instruction-set paths of the fast backend. AUTO picks the best this CPU has. */
typedef enum {
    CIS2_ISA_AUTO = 0,
    CIS2_ISA_SCALAR,
    CIS2_ISA_SSE2,
    CIS2_ISA_AVX2,
    CIS2_ISA_AVX512,
    CIS2_ISA_NEON,
    CIS2_ISA_WASM128
} cis2_isa;

/* How cis2_model_open and cis2_model_push_open hash the artifacts (§12.1).
 * SKIP is for tests that time or fuzz loading: the hashes read as zero, so a
 * receipt made from such a model names zero hashes and matches no real
 * checkpoint's (the library does not refuse to make one). CALLER: the
 * library hashes config.json itself; the SHA-256 of model.safetensors and
 * of tokenizer.json are the caller's, which computed them over exactly the
 * bytes the loader read (the wasm verifier hashes its chunks on a second
 * worker as it pushes them) and hands them in with cis2_model_set_digest,
 * possibly after the load has ended. Until then they read as zero and
 * cis2_model_digests_pending names them. */
typedef enum { CIS2_HASH_FULL = 0, CIS2_HASH_SKIP = 1, CIS2_HASH_CALLER = 2 } cis2_hash_mode;

/* CIS2_ARCH_TOY ("cis2-toy") is a fixture for the tests only: Llama with a
 * per-layer gain on the attention output (docs/architecture.md). config.json
 * may name it only while the environment has CIS2_TEST_ARCHS=1. */
typedef enum {
    CIS2_ARCH_LLAMA = 0,
    CIS2_ARCH_QWEN2 = 1,
    CIS2_ARCH_QWEN3 = 2,
    CIS2_ARCH_TOY = 3
} cis2_arch;

/* "ref" / "fast" / "scalar", "sse2", ... <-> enums; 0 on success. */
int cis2_backend_from_name(const char *name, cis2_backend_kind *out);
int cis2_isa_from_name(const char *name, cis2_isa *out);
const char *cis2_isa_to_name(cis2_isa isa);
/* config.json's model_type as the library names the architecture: "llama",
 * "qwen2", "qwen3", "cis2-toy"; "unknown" for a value outside the enum. */
const char *cis2_arch_name(cis2_arch a);

/* ----------------------------------------------------------- fpenv (§1.3) */
/* Pin FTZ+DAZ (x86-64 MXCSR bits 15, 6) / FZ (aarch64 FPCR bit 24) on the
 * calling thread, with round-to-nearest-even (§1.2) and every FP exception
 * masked (no trap enabled), and read it back; 0 when the pin is in effect.
 * is_pinned checks all of that. */
int cis2_fpenv_pin(void);
int cis2_fpenv_is_pinned(void);
/* Raw control register value (MXCSR or FPCR), for diagnostics and restore. */
uint64_t cis2_fpenv_read(void);
void cis2_fpenv_write(uint64_t v);
/* Restore the IEEE default flush behaviour on this thread. */
void cis2_fpenv_unpin(void);
/* The §1.3 adversarial denormal rows; one line per row to `log` (may be
 * NULL). Returns the number of failures. */
int cis2_fpenv_selftest(FILE *log);
/* `cis2 selftest`: the §1.3 rows, the §5.1 cancellation, rsqrt(64) and the
 * §6.6/§7.2 pinned digests, one PASS/FAIL line each. Returns failures. */
int cis2_selftest(FILE *out);
/* The platform's name for diagnostics: "x86-64", "aarch64", "wasm32". */
const char *cis2_isa_name(void);

/* ------------------------------------------------------------------ model */
/* RoPE scaling of the §7.1 table (docs/rope_scaling.md). */
typedef enum { CIS2_ROPE_NONE = 0, CIS2_ROPE_LLAMA3 = 1 } cis2_rope_scaling;

/* The shape and options read from config.json (§2.2). Read-only; fields may
 * be appended in later minor versions (never allocate one yourself). */
typedef struct {
    cis2_arch arch;
    int hidden, inter, n_layers, n_heads, n_kv_heads, head_dim, vocab, max_pos;
    float eps;        /* §2.3: (float)(double)rms_norm_eps, one RNE cast (0/subnormal kept) */
    float rope_theta; /* (float)(double)rope_theta */
    int tied;         /* the LM head is the embedding (§11.1; the checkpoint decides
                       * when config.json has no tie_word_embeddings) */
    int qkv_bias;     /* the checkpoint carries q/k/v biases, applied after the matvec (§9.1) */
    int qk_norm;      /* Qwen3 per-head q_norm/k_norm */
    int bos_id;       /* -1 when absent */
    int n_eos;        /* eos_token_id: an int or a list in config.json */
    int eos_ids[8];
    /* rope_scaling (docs/rope_scaling.md): CIS2_ROPE_NONE when null or absent;
     * for CIS2_ROPE_LLAMA3 its parameters as config.json's binary64 values. */
    cis2_rope_scaling rope_scaling;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos; /* original_max_position_embeddings */
} cis2_config;

/* The values every receipt and CIS2_REF stream starts from (§12.1). */
typedef struct {
    uint8_t weights_sha256[32], config_sha256[32], tokenizer_sha256[32];
    uint8_t table_digest[32];    /* §6.6 */
    uint8_t inv_freq_digest[32]; /* §7.2 */
} cis2_digests;

typedef struct {
    cis2_hash_mode hash; /* any other value is refused */
} cis2_model_opts;

/* Load DIR/{config.json, model.safetensors, tokenizer.json}: each file is
 * read once into memory the library owns, hashed, and computed from; nothing
 * reads the files again (renaming or overwriting them during or after the
 * load cannot change what a receipt says). model.safetensors' header is
 * validated before its data is read. `o` may be NULL (defaults). */
int cis2_model_open(cis2_model **m, const char *dir, const cis2_model_opts *o, char *err);
void cis2_model_free(cis2_model *m);
const cis2_config *cis2_model_config(const cis2_model *m);
const cis2_digests *cis2_model_digests(const cis2_model *m);
/* "fp32" for the canonical model; the receipt's and CIS2_REF's dtype. */
const char *cis2_model_dtype(const cis2_model *m);
/* What the loader has to say about a checkpoint it accepted but read
 * differently than its config.json alone suggests (e.g. an lm_head.weight
 * ignored because the config ties the head to the embedding, §11.1): each
 * warning is one line (no newline) naming the file. The library never
 * prints; a CLI prints them on stderr. i in [0, cis2_model_warning_count). */
int cis2_model_warning_count(const cis2_model *m);
const char *cis2_model_warning(const cis2_model *m, int i);
/* The tokenizer parsed from the same tokenizer.json bytes that were hashed,
 * or NULL (with the reason in err, which may be NULL) when that file's
 * structure is one this library cannot reproduce exactly; id-only runs still
 * work then. */
const cis2_tokenizer *cis2_model_tokenizer(const cis2_model *m, char *err);

/* The same load with model.safetensors pushed in by the caller, chunk by
 * chunk in file order, where the caller cannot hand the library a file to
 * read (wasm32: the page reads the user's file asynchronously, the loader is
 * not). The whole file is never held: the chunks land in a window that keeps
 * only the bytes not yet packed.
 *   cis2_model_push_open  reads DIR/config.json and DIR/tokenizer.json whole
 *       and the length and header of DIR/model.safetensors (validated against
 *       its size and the config, as cis2_model_open does), never its data.
 *       `o` may be NULL (CIS2_HASH_FULL); max_chunk >= 1 is the most bytes one
 *       chunk may have. On success *w is the caller's until
 *       cis2_model_push_end; on failure *w is NULL and nothing is left to free.
 *   cis2_model_push_buf   where the next chunk's n bytes go (n <= max_chunk,
 *       not past the file's length): a pointer into the window, valid until
 *       the next call on w. The caller copies the bytes there, then
 *   cis2_model_push_feed  takes n (at most the n asked) of them: hashes them
 *       (CIS2_HASH_FULL) and packs every tensor they complete. The bytes are
 *       the file's from offset 0, header included, in order.
 *   cis2_model_push_end   ok = 1: checks every byte came, finishes the load
 *       and gives *m, the model cis2_model_open with the same opts gives
 *       for the same bytes (free it with cis2_model_free); returns 0, or 1
 *       with err and *m NULL.
 *       ok = 0 abandons the load: writes nothing to err, *m (m may then be
 *       NULL) is NULL, returns 0. Either way w and everything it held are
 *       freed.
 * A failed buf or feed leaves w failed: every later buf or feed refuses, and
 * the caller still calls cis2_model_push_end (with ok = 0 to abandon quietly;
 * with ok = 1 it fails too, saying an earlier chunk failed). Every push whose
 * open succeeded ends with exactly one cis2_model_push_end. */
typedef struct cis2_model_push cis2_model_push;
int cis2_model_push_open(cis2_model_push **w, const char *dir, const cis2_model_opts *o,
                         size_t max_chunk, char *err);
uint8_t *cis2_model_push_buf(cis2_model_push *w, size_t n, char *err);
int cis2_model_push_feed(cis2_model_push *w, size_t n, char *err);
int cis2_model_push_end(cis2_model_push *w, int ok, cis2_model **m, char *err);

/* The caller's digests of a model loaded with CIS2_HASH_CALLER: `sha256` is
 * the 32-byte SHA-256 of exactly the bytes of that artifact the loader read.
 * Each may be set once; a model loaded with another hash mode, a second set,
 * an unknown `which` or a NULL digest is refused with err (the model
 * unchanged). This is the one call that writes a loaded model: make it while
 * no other thread uses the model or its engines (receipts, witnesses and
 * verdicts read the digests when they are made). */
typedef enum { CIS2_DIGEST_WEIGHTS = 0, CIS2_DIGEST_TOKENIZER = 1 } cis2_digest_kind;
int cis2_model_set_digest(cis2_model *m, cis2_digest_kind which, const uint8_t sha256[32],
                          char *err);
/* The caller's digests still missing, as bits 1 << CIS2_DIGEST_WEIGHTS and
 * 1 << CIS2_DIGEST_TOKENIZER; 0 when every digest is in (always, unless the
 * model was loaded with CIS2_HASH_CALLER). A caller does not make or verify
 * a receipt before this is 0: the missing digests read as zero, so such a
 * receipt names the wrong artifacts. A decode may run before (cis2_generate
 * and its on_step rows do not depend on the digests; cis2_witness_replay
 * binds the run's witness to the digests once they are in). */
int cis2_model_digests_pending(const cis2_model *m);

/* ----------------------------------------------------------------- engine */
/* Tracing: called for every node of the forward pass with the values it
 * produced (docs/divergence.md). `layer` is -1 for embed/final_norm/logits. */
typedef void (*cis2_trace_fn)(void *ctx, int pos, int layer, const char *node, const float *v,
                              size_t n);

typedef struct {
    cis2_backend_kind backend; /* REF (default) or FAST */
    cis2_isa isa;              /* FAST: AUTO = best available */
    int threads;               /* FAST: 0 = every CPU it may run on (affinity); at most 1024 */
    int max_seqs;              /* sequences decoded together; 0 = 1; at most 4096 */
    cis2_trace_fn trace;       /* NULL = no tracing */
    void *trace_ctx;
    const char *fault; /* debug fault injection (docs/divergence.md), NULL = none */
    const char *fault_arg;
} cis2_engine_opts;

/* Out-of-range options (threads, max_seqs, an unknown backend or isa) are
 * refused with the reason in err, never clamped. Every call below that takes
 * `err` refuses a NULL engine the same way. Messages name an option in the
 * library's terms, never a command-line flag: "ISA avx512: this CPU ... does
 * not support it", "unknown fault ...", "fault argument: ...", "backend
 * approx ..." (the cis2 CLI puts its flag in the term's place). */
int cis2_engine_new(cis2_engine **e, const cis2_model *m, const cis2_engine_opts *o, char *err);
void cis2_engine_free(cis2_engine *e);
const cis2_model *cis2_engine_model(const cis2_engine *e);
/* "ref", "fast/avx512", ... */
const char *cis2_engine_backend(const cis2_engine *e);

/* ------------------------------------------------------------- generation */
/* Called after each generated token with that step's logits (vocab floats)
 * and the id picked (or forced). */
typedef void (*cis2_step_fn)(void *ctx, int step, const float *logits, int vocab, int32_t chosen);

typedef struct {
    int n_gen;            /* exactly this many tokens (§3.4) */
    int stop_at_eos;      /* opt-in: stop after emitting an eos id */
    cis2_step_fn on_step; /* may be NULL */
    void *ctx;
    /* Teacher forcing: when non-NULL, step i feeds force[i] (i < n_force)
     * instead of its argmax pick; the digests then cover the forced ids. */
    const int32_t *force;
    int n_force;
} cis2_gen_opts;

typedef struct {
    int32_t *prompt;
    int n_prompt;
    int32_t *gen;
    int n_gen;
    uint8_t witness[32]; /* §12.1 CIS2_REF */
    uint8_t argmax[32];  /* §12.2 */
    double prefill_ms, decode_ms;
    int stopped_at_eos;
    /* The first NaN among the logits (step, index), or -1: NaN bit patterns
     * differ by ISA, so such a run's witness is not portable (§1.6). */
    int nan_step, nan_index;
} cis2_result;

/* §3.4/§12: prefill the prompt, decode greedily, compute the digests. */
int cis2_generate(cis2_engine *e, const int32_t *prompt, int n_prompt, const cis2_gen_opts *g,
                  cis2_result *r, char *err);
void cis2_result_free(cis2_result *r);
/* The §12.1 witness of a run recorded from its on_step calls (each step's
 * logits row, `vocab` floats, in `rows`, and its id in `ids`), under the
 * artifact digests d: the run's witness when d are the digests it ran with.
 * So a caller can decode before an artifact hash is known (the browser
 * verifier hashes the weights on a second worker while it decodes) and bind
 * the hash once it is in. */
void cis2_witness_replay(const cis2_digests *d, const int32_t *prompt, int n_prompt,
                         const float *rows, const int32_t *ids, int n_steps, int vocab,
                         uint8_t out[32]);
/* §11.2 strict-> argmax, first occurrence wins; -1 when n < 1. */
int32_t cis2_argmax(const float *logits, int n);

/* Sampling (docs/sampling.md): temperature, top-k, top-p, min-p and a seed,
 * pinned to the bit like the greedy pick. A separate struct and separate
 * entry points, so cis2_gen_opts (caller-allocated) keeps its layout.
 * temperature 0 is greedy: §11.2 argmax, the same code path and output. */
typedef struct {
    float temperature; /* 0 (greedy) or a normal fp32 number > 0 */
    int top_k;         /* 0 = off; else keep the k largest logits */
    float top_p;       /* 1 = off; 0 or a normal number in (0, 1] */
    float min_p;       /* 0 = off; 0 or a normal number in (0, 1] */
    uint64_t seed;     /* keys the counter-based generator (SplitMix64) */
} cis2_sampler;
/* 0 when s is one docs/sampling.md defines; else 1 with the field in err. */
int cis2_sampler_check(const cis2_sampler *s, char *err);
/* The id the sampler picks at generated-token index `step` from n logits
 * (-1 when n < 1, s is invalid or memory ran out). temperature 0: cis2_argmax. */
int32_t cis2_sample(const cis2_sampler *s, uint64_t step, const float *logits, int n);
/* Log-probabilities (docs/sampling.md §9): the pinned log-softmax of one
 * step's n raw logits (before any temperature), lp_i = (l_i - m) - ln Z with
 * m the largest logit and Z = sum exp(l_j - m) by id, left to right; the
 * same bits everywhere. *chosen_lp (may be NULL) gets id `chosen`'s;
 * top[0..k) the ids of the k largest logits, largest first and the lower id
 * first among equal ones, with theirs. A NaN logit's is -inf and it is never
 * among the top. Returns how many top entries were written (k, or fewer when
 * fewer logits are not NaN), or -1 (no logits, k < 0, top NULL). */
typedef struct {
    int32_t id;
    float logprob;
} cis2_logprob;
int cis2_logprobs(const float *logits, int n, int32_t chosen, float *chosen_lp, int k,
                  cis2_logprob *top);
/* cis2_generate / cis2_seq_submit with a sampler (NULL or temperature 0:
 * exactly the greedy calls). A sampled run's witness also covers the sampler
 * (docs/sampling.md §5); its argmax digest is §12.2's over the chosen ids. */
int cis2_generate_sampled(cis2_engine *e, const int32_t *prompt, int n_prompt,
                          const cis2_gen_opts *g, const cis2_sampler *s, cis2_result *r, char *err);
/* cis2_witness_replay of a run made with sampler s: its stream also holds
 * the sampler record (docs/sampling.md §5). s NULL or temperature 0: exactly
 * cis2_witness_replay. */
void cis2_witness_replay_sampled(const cis2_digests *d, const cis2_sampler *s,
                                 const int32_t *prompt, int n_prompt, const float *rows,
                                 const int32_t *ids, int n_steps, int vocab, uint8_t out[32]);

/* Several independent sequences in one engine (continuous batching): every
 * step reads each weight once for all active sequences, and each sequence's
 * ids, digests and receipt are bit-identical to generating it alone.
 *   cis2_seq_submit  queue a sequence; it joins at the next step. `g` and
 *                    `prompt` are copied; g->on_step is called from step().
 *   cis2_engine_step prefill the newly joined, decode one token for every
 *                    running sequence. Returns 0 or 1 with err (also when
 *                    called from inside an on_step).
 *   cis2_seq_done    1 once the sequence has all its tokens (or its EOS).
 *   cis2_seq_take    move a finished sequence's result out; frees its slot.
 *   cis2_seq_cancel  drop a sequence (finished or not) and free its slot;
 *                    from inside an on_step (any sequence's) it is dropped
 *                    at once and its slot frees when the step returns.
 *   cis2_seq_finish  end a running sequence now, as if its g->n_gen had been
 *                    the number of tokens it has generated (e.g. a stop string
 *                    matched): its digests cover exactly those tokens, so its
 *                    receipt verifies with that gen-toks; take it with
 *                    cis2_seq_take. Not from inside on_step.
 * Memory: a sequence's KV cache is allocated at its prefill for the
 * positions it can reach (up to twice its prompt's; beyond that it grows on
 * demand), and a freed slot keeps that memory for its next sequence;
 * cis2_engine_free returns it. */
int cis2_seq_submit(cis2_engine *e, const int32_t *prompt, int n_prompt, const cis2_gen_opts *g,
                    int *seq, char *err);
int cis2_seq_submit_sampled(cis2_engine *e, const int32_t *prompt, int n_prompt,
                            const cis2_gen_opts *g, const cis2_sampler *s, int *seq, char *err);
int cis2_engine_step(cis2_engine *e, char *err);
int cis2_engine_active(const cis2_engine *e); /* sequences submitted and not yet done */
int cis2_seq_done(const cis2_engine *e, int seq);
int cis2_seq_take(cis2_engine *e, int seq, cis2_result *r, char *err);
void cis2_seq_cancel(cis2_engine *e, int seq);
int cis2_seq_finish(cis2_engine *e, int seq, char *err);

/* ---------------------------------------------------------------- receipt */
typedef struct {
    char spec_version[16];
    uint8_t weights_sha[32], config_sha[32], tokenizer_sha[32];
    uint8_t *prompt_bytes;
    size_t prompt_len;
    int32_t *prompt_ids;
    int n_prompt;
    int gen_toks;
    char dtype[16]; /* "fp32" */
    uint8_t table_digest[32], inv_freq_digest[32];
    int32_t *gen_ids;
    int n_gen;
    uint8_t argmax_digest[32], witness_digest[32];
} cis2_receipt;

/* A receipt's prompt-hex bytes: what the prompt ids decode to. Byte-level
 * BPE decoding is total (valid UTF-8 or not; special tokens as their text);
 * an id below the model's vocab_size that tokenizer.json names no token for
 * adds no bytes, as Hugging Face's decode skips it; a negative id is an
 * error. *bytes is malloc'd (cis2_free). */
int cis2_receipt_prompt_bytes(const cis2_tokenizer *t, const int32_t *ids, int n, char **bytes,
                              size_t *len, char *err);
/* Receipt memory, one rule: a receipt owns its three arrays (prompt_bytes,
 * prompt_ids, gen_ids) exactly when cis2_receipt_parse filled it; free it
 * with cis2_receipt_free (also after a failed parse: it then holds none).
 * cis2_receipt_from_run fills one that owns nothing: it borrows (does not
 * copy) the prompt bytes and the result's id arrays, so keep those alive
 * while `rc` is used, free them with cis2_free / cis2_result_free as usual,
 * and never pass that receipt to cis2_receipt_free. cis2_receipt_format's
 * *out is the caller's (cis2_free). A cis2_verdict owns its fields' strings
 * and its run (cis2_verdict_free), never the receipt it checked. */

/* Fill a receipt from a finished run. Borrows (does not copy) the prompt
 * bytes and the result's id arrays: keep them alive while `rc` is used. */
void cis2_receipt_from_run(cis2_receipt *rc, const cis2_model *m, const cis2_result *r,
                           const uint8_t *prompt_bytes, size_t prompt_len);
/* Text form: "CIS-2-RECEIPT v1" then 13 "key value" lines in fixed order.
 * *out is malloc'd. Returns nonzero (out of memory, or a struct whose
 * spec_version/dtype are not the known NUL-terminated values or whose counts
 * do not describe its arrays; _write and _verify refuse it with err). */
int cis2_receipt_format(const cis2_receipt *r, char **out, size_t *len);
/* Strict parse; `path` names the source in messages. Free with _free
 * (the receipt owns its arrays); on failure it holds nothing. */
int cis2_receipt_parse(const char *text, size_t len, const char *path, cis2_receipt *r, char *err);
/* Atomic write: a fresh temporary file in the target's directory + rename. */
int cis2_receipt_write(const cis2_receipt *r, const char *path, char *err);
void cis2_receipt_free(cis2_receipt *r);

/* Sampled receipts (docs/sampling.md §6): "CIS-2-RECEIPT v1+sampling", the
 * 13 v1 lines, then "sampler temperature=T top-k=K top-p=P min-p=M" and
 * "seed S". cis2_receipt_parse (strict v1) refuses them at line 1. With
 * s NULL or s->temperature 0 these write exactly the v1 form. */
int cis2_receipt_format_sampled(const cis2_receipt *r, const cis2_sampler *s, char **out,
                                size_t *len);
int cis2_receipt_write_sampled(const cis2_receipt *r, const cis2_sampler *s, const char *path,
                               char *err);
/* Either form: a v1 receipt gives *s all zero (greedy). */
int cis2_receipt_parse_sampled(const char *text, size_t len, const char *path, cis2_receipt *r,
                               cis2_sampler *s, char *err);
/* Field-by-field verification (§14.3): artifact hashes first, then the
 * recomputed run. */
typedef enum {
    CIS2_FIELD_MATCH = 0,
    CIS2_FIELD_MISMATCH = 1,
    CIS2_FIELD_SKIPPED = 2
} cis2_field_status;
typedef struct {
    const char *name; /* "weights-sha256", ..., "witness-digest" */
    cis2_field_status status;
    char *receipt, *recomputed; /* printable values (malloc'd) */
} cis2_verdict_field;
#define CIS2_VERDICT_MAX_FIELDS 16
typedef struct {
    int n_fields;
    cis2_verdict_field fields[CIS2_VERDICT_MAX_FIELDS];
    int mismatches;
    cis2_result run; /* the recomputed run */
} cis2_verdict;
/* Re-runs the receipt's prompt on `e` (whose model supplies the artifact
 * hashes); on_step (may be NULL) sees each recomputed step (progress).
 * Returns 0 when verification ran (v->mismatches says whether it matched;
 * free v with cis2_verdict_free); nonzero with err when it could not run at
 * all (v then holds nothing). */
int cis2_receipt_verify(cis2_engine *e, const cis2_receipt *r, cis2_step_fn on_step, void *ctx,
                        cis2_verdict *v, char *err);
/* cis2_receipt_verify in two halves, for a caller that runs the decode itself
 * through cis2_seq_*: many receipts in one batch, or one a step at a time so
 * that it can stop between steps. _begin checks the artifact hashes,
 * prompt-hex and the ids' range (§14.3); when *run is set the caller decodes
 * r->prompt_ids with `g` (it may set g->on_step and g->ctx) on an engine of
 * model m and hands the result to _finish, which takes it over (v->run) and
 * compares the ids and digests. With *run 0 the verdict is already complete
 * (a mismatch). A caller that stops in between frees v (cis2_verdict_free).
 * _begin returns 1 with err when it cannot check at all, and 2 with err (v
 * freed) when the receipt needs more positions than m has and no field
 * differs already: nothing here can re-run it, and err names the receipt. */
int cis2_receipt_verify_begin(const cis2_model *m, const cis2_receipt *r, cis2_verdict *v,
                              cis2_gen_opts *g, int *run, char *err);
int cis2_receipt_verify_finish(const cis2_receipt *r, cis2_result *run, cis2_verdict *v, char *err);
/* The same for a sampled receipt: the re-run samples with s (the caller
 * submits with cis2_seq_submit_sampled after _begin), and the verdict names
 * the fields "sampler" and "seed", MISMATCH when the run under them differs
 * from the receipt (its ids or its witness, which covers them). */
int cis2_receipt_verify_sampled(cis2_engine *e, const cis2_receipt *r, const cis2_sampler *s,
                                cis2_step_fn on_step, void *ctx, cis2_verdict *v, char *err);
int cis2_receipt_verify_finish_sampled(const cis2_receipt *r, const cis2_sampler *s,
                                       cis2_result *run, cis2_verdict *v, char *err);
void cis2_verdict_free(cis2_verdict *v);

/* -------------------------------------------------------------- tokenizer */
int cis2_tokenizer_load(cis2_tokenizer **t, const char *path, char *err);
int cis2_tokenizer_parse(cis2_tokenizer **t, const char *json, size_t len, const char *path,
                         char *err);
void cis2_tokenizer_free(cis2_tokenizer *t);
/* Encode UTF-8 text (add_special_tokens=false, §3.3). *ids is malloc'd. */
int cis2_tokenizer_encode(const cis2_tokenizer *t, const char *text, size_t len, int32_t **ids,
                          int *n, char *err);
/* Decode ids to bytes (byte-level BPE decoding is total: the result need not
 * be valid UTF-8). *text is malloc'd and NUL-terminated. */
int cis2_tokenizer_decode(const cis2_tokenizer *t, const int32_t *ids, int n, char **text,
                          size_t *len, char *err);
int cis2_tokenizer_vocab_size(const cis2_tokenizer *t);

/* ------------------------------------ tokenizer normalization and chat prompts */
/* The text encode actually tokenizes: the tokenizer's normalizer (NFC for
 * Qwen2/Qwen3; none for SmolLM2) applied to each piece between the added
 * tokens matched un-normalized (§3.1.6). decode(encode(x)) returns exactly
 * this (unless a normalized=true added token's content is itself not in NFC).
 * *out is malloc'd and NUL-terminated. */
int cis2_tokenizer_normalize(const cis2_tokenizer *t, const char *text, size_t len, char **out,
                             size_t *out_len, char *err);

/* Chat prompts. A template is the model's own Jinja chat template (its
 * tokenizer_config.json "chat_template" or chat_template.jinja), rendered by
 * cis2's Jinja subset byte for byte as HF transformers' apply_chat_template
 * renders it (docs/chat_templates.md: the subset; a construct outside it is
 * refused by name, never rendered differently), or the built-in "chatml".
 * Those bytes are the prompt (and a receipt's prompt-hex). Templates are
 * immutable: render from any number of threads. */
typedef struct cis2_chat_template cis2_chat_template;
typedef struct {
    const char *role; /* "system", "user" or "assistant" */
    const char *content;
    size_t content_len;
} cis2_chat_msg;
/* DIR/tokenizer_config.json's chat_template, or DIR/chat_template.jinja when
 * it has none (read size-limited, regular files only). */
int cis2_chat_template_load(cis2_chat_template **t, const char *model_dir, char *err);
/* tokenizer_config.json's bytes; `path` names them in messages. */
int cis2_chat_template_parse(cis2_chat_template **t, const char *json, size_t len, const char *path,
                             char *err);
/* The template in the file template_path (a Jinja source) with the special
 * tokens (bos_token, eos_token, ...) of DIR/tokenizer_config.json. */
int cis2_chat_template_load_file(cis2_chat_template **t, const char *model_dir,
                                 const char *template_path, char *err);
/* A template's Jinja source itself (e.g. a chat_template.jinja file). */
int cis2_chat_template_from_text(cis2_chat_template **t, const char *src, size_t len,
                                 const char *path, char *err);
/* A built-in format: "chatml" (no default system turn). */
int cis2_chat_template_builtin(cis2_chat_template **t, const char *name, char *err);
/* "chatml" (built in) or "jinja" (a model's template); the second is kept
 * for compatibility and is always NULL. */
const char *cis2_chat_template_name(const cis2_chat_template *t);
const char *cis2_chat_template_system(const cis2_chat_template *t);
void cis2_chat_template_free(cis2_chat_template *t);
/* OpenAI-style messages: a JSON array of {"role", "content"} or an object
 * {"messages": [...]}; content a string or an array of text parts
 * {"type": "text", "text"}, joined with "\n" (other keys, roles and parts
 * are refused). *msgs is one malloc'd block (strings inside it): cis2_free it. */
int cis2_chat_parse_messages(const char *json, size_t len, const char *path, cis2_chat_msg **msgs,
                             int *n, char *err);
/* Render n >= 1 messages with the template's variables add_generation_prompt,
 * tools = documents = None, the tokenizer_config.json special tokens and
 * the kwargs (a JSON object of further variables: enable_thinking,
 * date_string, ...; they override the special tokens). strftime_now(fmt)
 * formats `date` ("YYYY-MM-DD"), never the clock; with date NULL it is
 * undefined (templates then fall back to their own default date). Content
 * that the tokenizer (`tok`, may be NULL: then ChatML's control tokens)
 * would read as a special token is refused: templates paste content
 * unescaped. *out is malloc'd. */
typedef struct {
    int add_generation_prompt;
    const char *kwargs; /* a JSON object, or NULL */
    size_t kwargs_len;
    const char *date; /* "YYYY-MM-DD", or NULL */
} cis2_chat_opts;
int cis2_chat_render_opts(const cis2_chat_template *t, const cis2_chat_msg *msgs, int n,
                          const cis2_chat_opts *o, const cis2_tokenizer *tok, char **out,
                          size_t *out_len, char *err);
/* The same with no kwargs and no date. */
int cis2_chat_render(const cis2_chat_template *t, const cis2_chat_msg *msgs, int n,
                     int add_generation_prompt, const cis2_tokenizer *tok, char **out,
                     size_t *out_len, char *err);

/* -------------------------------------------------------------- utilities */
/* Parse "1,2,3" (decimal, no spaces, no leading zeros except "0"). */
int cis2_parse_ids(const char *s, int32_t **ids, int *n, char *err);
/* Ids comma-separated into a malloc'd string. */
char *cis2_format_ids(const int32_t *ids, int n);
/* Lowercase hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void cis2_hex(const uint8_t *b, size_t n, char *out);
/* Release memory the library returned (ids, text, receipts' text). */
void cis2_free(void *p);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
