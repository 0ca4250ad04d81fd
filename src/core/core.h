/* The core layer's internal interface: bit-pattern helpers, the §5/§6 pinned
 * arithmetic, SHA-256 and small I/O and clock helpers. Everything above this
 * layer (model, kernels, engine, verify, cli) may include it. */
#ifndef CIS2_CORE_H
#define CIS2_CORE_H
#include "cis2.h"

/* ------------------------------------------------------------ bit patterns */
static inline uint32_t cis2_f2u(float f)
{
    union {
        float f;
        uint32_t u;
    } c;
    c.f = f;
    return c.u;
}
static inline float cis2_u2f(uint32_t u)
{
    union {
        float f;
        uint32_t u;
    } c;
    c.u = u;
    return c.f;
}
static inline float cis2_bf16_to_f32(uint16_t b) { return cis2_u2f((uint32_t)b << 16); } /* §4.1 */
/* Classify by bit pattern (never via (double)x or fabs(x) < FLT_MIN). */
int cis2_f32_is_subnormal(uint32_t bits);

/* ------------------------------------------------------ pinned math (§5, §6) */
float cis2_dot_seq(const float *a, const float *b, size_t n); /* §5.1 */
float cis2_sum_seq(const float *a, size_t n);                 /* §5.3 */
float cis2_ldexp_exact(float x, int k);                       /* §6.2.1 */
float cis2_frexp_exact(float x, int *e);                      /* §6.5.1 */
float cis2_exp_pinned(float x);                               /* §6.2 */
float cis2_ln_pinned(float x);                                /* §6.5 */
float cis2_sin_pinned(float x);                               /* §6.3 */
float cis2_cos_pinned(float x);                               /* §6.3 */
void cis2_sincos_pinned(float x, float *s, float *c);         /* §6.3, one reduction */
float cis2_silu(float x);                                     /* §6.4 */
float cis2_rsqrt(float x);                                    /* §6.1 */
void cis2_table_digest(uint8_t out[32]);                      /* §6.6 */
/* §7.1: inv_freq[head_dim/2]; §7.2 digest over it. */
void cis2_inv_freq(int head_dim, float rope_theta, float *inv_freq);
/* rope_scaling "llama3" (docs/rope_scaling.md) applied in place to the n
 * entries of a §7.1 table; factor, low, high: config.json's binary64 values. */
void cis2_inv_freq_llama3(float *inv_freq, int n, double factor, double low, double high,
                          int old_ctx);
void cis2_f32_digest(const float *v, size_t n, uint8_t out[32]);

/* ------------------------------------------------------------------ sha256 */
typedef struct {
    uint32_t h[8];
    uint64_t nbytes;
    uint8_t buf[64];
    size_t buflen;
} cis2_sha256;
void cis2_sha256_init(cis2_sha256 *s);
void cis2_sha256_update(cis2_sha256 *s, const void *data, size_t len);
/* v as 4 little-endian bytes: §12.1's token ids, the pinned constants' bits. */
void cis2_sha256_update_u32(cis2_sha256 *s, uint32_t v);
/* cis2_sha256_update(a, da, len) and cis2_sha256_update(b, db, len) for two
 * distinct states: the same two states, the streams' blocks hashed side by
 * side (SHA-NI). */
void cis2_sha256_update2(cis2_sha256 *a, const void *da, cis2_sha256 *b, const void *db,
                         size_t len);
void cis2_sha256_final(cis2_sha256 *s, uint8_t out[32]);
void cis2_sha256_buf(const void *data, size_t len, uint8_t out[32]);
int cis2_sha256_file(const char *path, uint8_t out[32], char *err);
int cis2_unhex32(const char *hex, uint8_t out[32]); /* exactly 64 lowercase hex chars */
const char *cis2_sha256_impl(void);                 /* "sha-ni" or "portable" */
/* Tests: hash with the named block function ("portable" or "sha-ni") from now on,
 * never while another thread hashes; 1 where this build or CPU lacks it. */
int cis2_sha256_use(const char *impl);

/* ---------------------------------------------------------- files (io.c) */
/* Open an input for reading: refused unless it is a regular file, decided
 * before any blocking open (O_NONBLOCK + fstat); the message names the
 * reason (strerror, or what the path is). *size from fstat. */
int cis2_open_input(const char *path, int *fd, uint64_t *size, char *err);
/* Read exactly n bytes from fd (a short file is an error naming path). */
int cis2_read_fd(int fd, void *buf, size_t n, const char *path, char *err);
/* A whole regular file into a malloc'd NUL-terminated buffer; a file larger
 * than max bytes (max 0 = no limit) is refused by its size, unread. */
int cis2_read_file_max(const char *path, size_t max, char **buf, size_t *len, char *err);
int cis2_read_file(const char *path, char **buf, size_t *len, char *err);
/* A stream (stdin, a pipe) to its end into a malloc'd NUL-terminated buffer;
 * more than max bytes is refused (after reading max + 1). `what` names it. */
int cis2_read_fd_max(int fd, size_t max, const char *what, char **buf, size_t *len, char *err);
/* All of buf to fd (EINTR retried); `what` names the destination in err. */
int cis2_write_fd(int fd, const void *buf, size_t len, const char *what, char *err);
/* 0 when `path` may be written: it does not exist or is a regular file
 * (a device, FIFO, socket, directory or symbolic link is refused). */
int cis2_check_output_path(const char *path, char *err);
/* out = "dir/name" (cap bytes); one that does not fit is an error naming dir. */
int cis2_path_join(char *out, size_t cap, const char *dir, const char *name, char *err);
/* Write a whole file atomically: a fresh temporary file in the target's
 * directory (O_CREAT|O_EXCL|O_NOFOLLOW, unpredictable name), fsync, rename;
 * the temporary file is removed on every error path. */
int cis2_write_file_atomic(const char *path, const void *buf, size_t len, char *err);
/* The same, with the contents written by body(fd, ctx, err) (0 on success;
 * on failure err says why): for files too large to build in memory. */
typedef int (*cis2_body_fn)(int fd, void *ctx, char *err);
int cis2_write_file_atomic_with(const char *path, cis2_body_fn body, void *ctx, char *err);

/* ------------------------------------------------- text builder (strbuf.c) */
typedef struct {
    char *b;
    size_t len, cap;
    int oom; /* sticky: an allocation failed */
} cis2_sb;
void cis2_sb_put(cis2_sb *s, const void *p, size_t n);
void cis2_sb_str(cis2_sb *s, const char *str);
void cis2_sb_printf(cis2_sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal, quotes included: ", \, control characters escaped;
 * bytes that are not valid UTF-8 become \ufffd. */
void cis2_sb_json_str(cis2_sb *s, const char *str, size_t n);
void cis2_sb_hex(cis2_sb *s, const uint8_t *b, size_t n); /* lowercase */
/* The one escaper for strings that came from a file, a peer or a child
 * process on their way to a terminal or a text line: nothing it produces
 * can start a new line, move the cursor, recolour or reorder the text. */
typedef enum {
    /* Reversible terminal-safe text: \\ \n \r \t, \xHH for other C0 bytes, DEL
     * and bytes that are not UTF-8, \uHHHH for C1 controls, U+2028/2029, the
     * bidi controls and U+FEFF. Valid printable UTF-8 passes unchanged. */
    CIS2_ESC_TEXT = 0,
    /* A JSON string body (RFC 8259): \" \\ \n \r \t, \u00HH / \uHHHH for the
     * same code points; bytes that are not UTF-8 become \ufffd. */
    CIS2_ESC_JSON,
    /* TEXT but the backslash passes: for a whole message line whose parts
     * from files are escaped already (idempotent on escaped text). */
    CIS2_ESC_SANITIZE
} cis2_esc_mode;
void cis2_sb_escape(cis2_sb *s, const char *str, size_t n, cis2_esc_mode mode);
/* The same into out[cap] (NUL-terminated). Text that does not fit is cut
 * between escapes and ends in "..."; returns out (for "%s" arguments). */
const char *cis2_escape(const char *str, size_t n, char *out, size_t cap, cis2_esc_mode mode);
/* A public entry point's pinned section (§1.2, §1.3): *saved gets the caller's
 * control register and the thread is pinned; 0, or 1 with err (the register
 * is then already given back). Leave with cis2_fpenv_write(*saved). */
int cis2_fpenv_enter(uint64_t *saved, char *err);

/* err[CIS2_ERR_LEN] in place through SANITIZE: a public call's message stays
 * one line whatever a caller's path or name held (cis2.h: "one line"). */
void cis2_err_one_line(char *err);
/* Offset of the first byte that does not start a valid UTF-8 sequence (n
 * when all of s[0..n) is valid UTF-8). */
size_t cis2_utf8_check(const char *s, size_t n);
/* The NUL-terminated text (malloc'd; the builder is reset), or NULL if an
 * allocation failed. */
char *cis2_sb_take(cis2_sb *s, size_t *len);
void cis2_sb_free(cis2_sb *s);

/* ------------------------------------------- big allocations (bigmem.c) */
/* 2 MiB-aligned, huge-page backed; *len is what cis2_big_free takes. Zeroed
 * natively but not on wasm32 (malloc may hand back used memory, and zeroing
 * 270 MB there costs a pass): write everything you read. */
void *cis2_big_alloc(size_t bytes, size_t *len);
void cis2_big_free(void *p, size_t len);
/* From now on the allocation is read-only: a stray write faults at once. */
void cis2_big_protect(void *p, size_t len);
/* Give the whole 2 MiB pages of [a, b) back to the system (a page aligned);
 * returns the new, page-aligned watermark. Reading them again gives zeros. */
uint64_t cis2_big_release(uint8_t *base, uint64_t a, uint64_t b);

/* --------------------------------------------------------------- utilities */
/* n rounded up to a whole number of 64-byte cache lines. */
static inline size_t cis2_align64(size_t n) { return (n + 63) & ~(size_t)63; }
double cis2_now_ms(void);
/* The CPUs this process may run on (at least 1): the default thread count. */
int cis2_cpu_count(void);
#endif
