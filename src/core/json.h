/* A strict RFC 8259 JSON parser into a flat node array (one allocation).
 * Strings are validated (UTF-8, escapes, surrogate pairs) at parse time and
 * decoded on demand; numbers keep their text and convert correctly rounded. */
#ifndef CIS2_JSON_H
#define CIS2_JSON_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
} json_type;

#define JSON_NONE 0u /* node 0 is the root, never anyone's child or sibling */

typedef struct {
    uint8_t type;
    uint8_t has_escape;  /* strings: raw span contains a backslash */
    uint32_t start, len; /* string: raw bytes between the quotes; number: its text;
                            array/object: the whole raw text including brackets */
    uint32_t count;      /* array: elements; object: members (key+value pairs) */
    uint32_t first;      /* first child; objects alternate key, value, key, value */
    uint32_t next;       /* next sibling */
} json_node;

typedef struct {
    const char *src;
    size_t src_len;
    json_node *nodes;
    uint32_t n_nodes, cap;
} json_doc;

/* Parse `len` bytes. On failure writes "PATH: invalid JSON at line L col C: why"
 * and returns 1, or -1 when memory ran out (the text may be valid). */
int json_parse(json_doc *d, const char *src, size_t len, const char *path, char *err);
void json_free(json_doc *d);

/* Object lookup by key; returns value node or JSON_NONE. *dups (optional)
 * receives the number of members with that key. */
uint32_t json_get(const json_doc *d, uint32_t obj, const char *key, int *dups);
/* Decoded length of a string node; decode into out (no NUL added). */
size_t json_str_len(const json_doc *d, uint32_t n);
void json_str_decode(const json_doc *d, uint32_t n, char *out);
char *json_str_dup(const json_doc *d, uint32_t n, size_t *len); /* malloc'd, NUL-terminated */
int json_str_eq(const json_doc *d, uint32_t n, const char *lit);
/* Numbers: f64 correctly rounded (0, or 1 when n is not a number). */
int json_num_f64(const json_doc *d, uint32_t n, double *out);
/* Integers, exactly, over the whole int64 range. 0, or JSON_NUM_NOT_INT (not a
 * number, or not an integer), or JSON_NUM_RANGE (an integer beyond int64).
 * json_num_int takes an integral value however it is spelled ("12", "12.0",
 * "1.2e1"; "1.5" is not one); json_num_i64 only an integer spelling (no
 * fraction, no exponent). */
enum { JSON_NUM_NOT_INT = 1, JSON_NUM_RANGE = 2 };
int json_num_int(const json_doc *d, uint32_t n, int64_t *out);
int json_num_i64(const json_doc *d, uint32_t n, int64_t *out);
#endif
