/* The safetensors writer (the reader is safetensors.c): tensors laid out in
 * the order given, string metadata, the header padded with spaces to a
 * multiple of 8 bytes, written atomically through core/io.c. One writer for
 * every producer (quantized checkpoints, traces). */
#ifndef CIS2_ST_WRITE_H
#define CIS2_ST_WRITE_H
#include "core/core.h"

typedef struct {
    const char *name;
    const char *dtype; /* "F32", "BF16", "F16", "I8", ... as safetensors spells it */
    int ndim;
    int64_t shape[8];
    const void *data; /* nbytes little-endian bytes */
    uint64_t nbytes;
} cis2_st_out;

/* The file's first part: the 8-byte header length and the header (padded
 * to 8 bytes), malloc'd in *head; *data_len is the tensors' bytes that
 * follow, in the order given (t[i].data is not read). Checks as below. */
int cis2_st_head(const cis2_st_out *t, int n, const char *const *meta, int nmeta, uint8_t **head,
                 size_t *head_len, uint64_t *data_len, char *err);
/* Header + data in one malloc'd buffer. meta: nmeta key/value pairs
 * (meta[2i], meta[2i+1]), written as __metadata__ when nmeta > 0. Refuses
 * (one line in err) duplicate or empty names, names with control
 * characters, and nbytes that disagree with shape x dtype size for the
 * dtypes it knows (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL). */
int cis2_st_build(const cis2_st_out *t, int n, const char *const *meta, int nmeta, uint8_t **buf,
                  size_t *len, char *err);
/* cis2_st_build, then cis2_write_file_atomic(path). */
int cis2_st_write(const char *path, const cis2_st_out *t, int n, const char *const *meta, int nmeta,
                  char *err);
#endif
