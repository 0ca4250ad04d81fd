/* Shared bits of the libFuzzer harnesses (issue 7). Each fuzz_NAME.c defines
 * LLVMFuzzerTestOneInput; `make fuzz` builds them with clang
 * -fsanitize=fuzzer,address,undefined and runs each from fuzz/corpus/NAME/. */
#ifndef CIS2_FUZZ_H
#define CIS2_FUZZ_H
#include "cli/commands.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* libFuzzer's entry points, which each harness defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A NUL-terminated heap copy, so a parser reading one byte too far trips ASan. */
static inline char *fuzz_dup(const uint8_t *data, size_t size)
{
    char *p = malloc(size + 1);
    if (!p) abort();
    if (size) memcpy(p, data, size);
    p[size] = '\0';
    return p;
}
/* A NUL-terminated heap copy with every LF turned into CRLF (*len: its length). */
static inline char *fuzz_crlf(const uint8_t *data, size_t size, size_t *len)
{
    size_t nl = 0, m = 0;
    for (size_t i = 0; i < size; i++) nl += data[i] == '\n';
    char *p = malloc(size + nl + 1);
    if (!p) abort();
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n') p[m++] = '\r';
        p[m++] = (char)data[i];
    }
    p[m] = '\0';
    *len = m;
    return p;
}
/* The harness found a logic error (not a memory error): make libFuzzer keep the input. */
#define FUZZ_ASSERT(c)                                                                             \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz assertion failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
/* Every error must be one non-empty line. */
static inline void fuzz_check_err(const char *err)
{
    FUZZ_ASSERT(err[0] != '\0');
    FUZZ_ASSERT(strchr(err, '\n') == NULL);
    FUZZ_ASSERT(strlen(err) < CIS2_ERR_LEN);
}
#endif
