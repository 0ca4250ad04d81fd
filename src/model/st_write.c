/* The safetensors writer (st_write.h): a JSON header built with core's text
 * builder, then the tensors' bytes back to back in the given order. */
#include "model/st_write.h"
#include <stdlib.h>
#include <string.h>

static int dtype_size(const char *dt)
{
    static const struct {
        const char *name;
        int size;
    } D[] = { { "F64", 8 }, { "F32", 4 }, { "F16", 2 }, { "BF16", 2 }, { "I64", 8 },
              { "I32", 4 }, { "I16", 2 }, { "I8", 1 },  { "U8", 1 },   { "BOOL", 1 } };
    for (size_t i = 0; i < sizeof D / sizeof *D; i++)
        if (!strcmp(dt, D[i].name)) return D[i].size;
    return 0;
}

static int check(const cis2_st_out *t, int n, char *err)
{
    for (int i = 0; i < n; i++) {
        const cis2_st_out *e = &t[i];
        if (!e->name || !*e->name || !strcmp(e->name, "__metadata__")) {
            snprintf(err, CIS2_ERR_LEN, "safetensors writer: tensor %d has no usable name", i);
            return 1;
        }
        for (const unsigned char *p = (const unsigned char *)e->name; *p; p++)
            if (*p < 0x20 || *p == 0x7f) {
                snprintf(err, CIS2_ERR_LEN,
                         "safetensors writer: tensor %d's name has a control character", i);
                return 1;
            }
        for (int j = 0; j < i; j++)
            if (!strcmp(t[j].name, e->name)) {
                snprintf(err, CIS2_ERR_LEN, "safetensors writer: tensor \"%.200s\" given twice",
                         e->name);
                return 1;
            }
        if (e->ndim < 0 || e->ndim > 8 || !e->dtype || !*e->dtype) {
            snprintf(err, CIS2_ERR_LEN, "safetensors writer: tensor \"%.200s\": bad dtype or rank",
                     e->name);
            return 1;
        }
        int es = dtype_size(e->dtype);
        uint64_t numel = 1;
        for (int d = 0; d < e->ndim; d++) {
            if (e->shape[d] < 0) numel = UINT64_MAX;
            else numel *= (uint64_t)e->shape[d];
        }
        if (es && numel * (uint64_t)es != e->nbytes) {
            snprintf(err, CIS2_ERR_LEN,
                     "safetensors writer: tensor \"%.200s\": %llu bytes for %llu %s elements",
                     e->name, (unsigned long long)e->nbytes, (unsigned long long)numel, e->dtype);
            return 1;
        }
    }
    return 0;
}

int cis2_st_head(const cis2_st_out *t, int n, const char *const *meta, int nmeta, uint8_t **head,
                 size_t *head_len, uint64_t *data_len, char *err)
{
    *head = NULL;
    *head_len = 0;
    *data_len = 0;
    if (check(t, n, err)) return 1;
    cis2_sb h = { 0 };
    cis2_sb_str(&h, "{");
    if (nmeta > 0) {
        cis2_sb_str(&h, "\"__metadata__\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i) cis2_sb_str(&h, ",");
            cis2_sb_json_str(&h, meta[2 * i], strlen(meta[2 * i]));
            cis2_sb_str(&h, ":");
            cis2_sb_json_str(&h, meta[2 * i + 1], strlen(meta[2 * i + 1]));
        }
        cis2_sb_str(&h, "}");
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (i || nmeta > 0) cis2_sb_str(&h, ",");
        cis2_sb_json_str(&h, t[i].name, strlen(t[i].name));
        cis2_sb_str(&h, ":{\"dtype\":");
        cis2_sb_json_str(&h, t[i].dtype, strlen(t[i].dtype));
        cis2_sb_str(&h, ",\"shape\":[");
        for (int d = 0; d < t[i].ndim; d++)
            cis2_sb_printf(&h, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        cis2_sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                       (unsigned long long)(off + t[i].nbytes));
        off += t[i].nbytes;
    }
    cis2_sb_str(&h, "}");
    while (h.len % 8) cis2_sb_str(&h, " "); /* tensor data 8-byte aligned */
    size_t hlen = 0;
    char *hdr = cis2_sb_take(&h, &hlen);
    uint8_t *b = hdr ? malloc(8 + hlen) : NULL;
    if (!b) {
        free(hdr);
        snprintf(err, CIS2_ERR_LEN, "safetensors writer: out of memory");
        return 1;
    }
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, hdr, hlen);
    free(hdr);
    *head = b;
    *head_len = 8 + hlen;
    *data_len = off;
    return 0;
}

int cis2_st_build(const cis2_st_out *t, int n, const char *const *meta, int nmeta, uint8_t **buf,
                  size_t *len, char *err)
{
    uint8_t *head;
    size_t hl;
    uint64_t dl;
    *buf = NULL;
    *len = 0;
    if (cis2_st_head(t, n, meta, nmeta, &head, &hl, &dl, err)) return 1;
    size_t total = hl + (size_t)dl;
    uint8_t *b = realloc(head, total);
    if (!b) {
        free(head);
        snprintf(err, CIS2_ERR_LEN, "safetensors writer: out of memory (%zu bytes)", total);
        return 1;
    }
    size_t at = hl;
    for (int i = 0; i < n; i++) {
        if (t[i].nbytes) memcpy(b + at, t[i].data, (size_t)t[i].nbytes);
        at += (size_t)t[i].nbytes;
    }
    *buf = b;
    *len = total;
    return 0;
}

int cis2_st_write(const char *path, const cis2_st_out *t, int n, const char *const *meta, int nmeta,
                  char *err)
{
    uint8_t *b;
    size_t len;
    if (cis2_st_build(t, n, meta, nmeta, &b, &len, err)) return 1;
    int rc = cis2_write_file_atomic(path, b, len, err);
    free(b);
    return rc;
}
