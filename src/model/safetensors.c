/* safetensors reader. The 8-byte length and the header are validated first,
 * from the header bytes and the file's size alone: header length bounds,
 * strict JSON, known dtype, shape product x dtype size == offset span
 * (overflow-checked), offsets inside the file, no overlap and no holes,
 * unique names — so a bad file is refused before its data is read. */
#include "model/model.h"
#include "core/json.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HEADER (100u << 20)

static int cmp_off(const void *a, const void *b)
{
    const cis2_st_tensor *x = *(const cis2_st_tensor *const *)a,
                         *y = *(const cis2_st_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const cis2_st_tensor *)a)->name, ((const cis2_st_tensor *)b)->name);
}

int cis2_st_header_len(const uint8_t first8[8], uint64_t file_len, const char *path, uint64_t *hlen,
                       char *err)
{
    if (file_len < 8) {
        snprintf(err, CIS2_ERR_LEN, "%s: truncated safetensors file (%llu bytes, need at least 8)",
                 path, (unsigned long long)file_len);
        return 1;
    }
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h |= (uint64_t)first8[i] << (8 * i);
    if (h < 2 || h > MAX_HEADER) {
        snprintf(err, CIS2_ERR_LEN, "%s: safetensors header length %llu is out of bounds [2, %u]",
                 path, (unsigned long long)h, MAX_HEADER);
        return 1;
    }
    if (h > file_len - 8) {
        snprintf(err, CIS2_ERR_LEN,
                 "%s: safetensors header length %llu runs past the end of the file (%llu bytes)",
                 path, (unsigned long long)h, (unsigned long long)file_len);
        return 1;
    }
    *hlen = h;
    return 0;
}

int cis2_st_parse_header(cis2_safetensors *st, const uint8_t *header, uint64_t hlen,
                         uint64_t file_len, const char *path, char *err)
{
    memset(st, 0, sizeof *st);
    st->path = path;
    st->data_start = 8 + hlen;
    st->file_len = file_len;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, CIS2_ERR_LEN, __VA_ARGS__);                                                  \
        goto fail;                                                                                 \
    } while (0)
    json_doc d;
    memset(&d, 0, sizeof d);
    cis2_st_tensor **order = NULL;
    const char *hdr = (const char *)header;
    if (hdr[0] != '{') FAIL("%s: safetensors header does not start with '{'", path);
    /* The spec allows trailing spaces as padding inside the header. */
    size_t hl = (size_t)hlen;
    while (hl > 0 && hdr[hl - 1] == ' ') hl--;
    char jerr[CIS2_ERR_LEN];
    if (json_parse(&d, hdr, hl, path, jerr)) FAIL("%.440s (in the safetensors header)", jerr);
    if (d.nodes[0].type != JSON_OBJECT) FAIL("%s: safetensors header is not a JSON object", path);
    uint64_t data_len = file_len - 8 - hlen;
    st->t = calloc(d.nodes[0].count ? d.nodes[0].count : 1, sizeof *st->t);
    if (!st->t) FAIL("%s: out of memory", path);
    for (uint32_t k = d.nodes[0].first; k != JSON_NONE; k = d.nodes[d.nodes[k].next].next) {
        uint32_t v = d.nodes[k].next;
        size_t name_len = 0;
        char *name = json_str_dup(&d, k, &name_len);
        if (!name) FAIL("%s: out of memory", path);
        /* Names appear in one-line error messages: no NUL, newline or other
         * control characters (found by fuzz_safetensors). */
        for (size_t i = 0; i < name_len; i++)
            if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) {
                unsigned c = (unsigned char)name[i];
                free(name);
                FAIL("%s: a tensor name contains a control character (byte 0x%02x)", path, c);
            }
        if (strcmp(name, "__metadata__") == 0) {
            free(name);
            if (d.nodes[v].type != JSON_OBJECT)
                FAIL("%s: __metadata__ must be an object of strings", path);
            for (uint32_t m = d.nodes[v].first; m != JSON_NONE; m = d.nodes[m].next)
                if (d.nodes[m].type != JSON_STRING)
                    FAIL("%s: __metadata__ values must be strings", path);
            if (st->metadata_json) FAIL("%s: __metadata__ appears twice", path);
            st->metadata_json = strndup(hdr + d.nodes[v].start, d.nodes[v].len);
            if (!st->metadata_json) FAIL("%s: out of memory", path);
            continue;
        }
        cis2_st_tensor *t = &st->t[st->n++];
        t->name = name;
        if (d.nodes[v].type != JSON_OBJECT)
            FAIL("%s: tensor \"%s\": entry is not an object", path, name);
        int dups;
        uint32_t dt = json_get(&d, v, "dtype", &dups);
        if (dt == JSON_NONE || dups != 1 || d.nodes[dt].type != JSON_STRING)
            FAIL("%s: tensor \"%s\": missing or duplicate \"dtype\"", path, name);
        uint32_t sh = json_get(&d, v, "shape", &dups);
        if (sh == JSON_NONE || dups != 1 || d.nodes[sh].type != JSON_ARRAY)
            FAIL("%s: tensor \"%s\": missing or duplicate \"shape\" array", path, name);
        uint32_t of = json_get(&d, v, "data_offsets", &dups);
        if (of == JSON_NONE || dups != 1 || d.nodes[of].type != JSON_ARRAY ||
            d.nodes[of].count != 2)
            FAIL("%s: tensor \"%s\": \"data_offsets\" must be [begin, end]", path, name);
        if (d.nodes[v].count != 3)
            FAIL("%s: tensor \"%s\": unexpected keys (only dtype, shape, data_offsets allowed)",
                 path, name);
        char *dn = json_str_dup(&d, dt, NULL);
        if (!dn) FAIL("%s: out of memory", path);
        if (cis2_dtype_from_name(dn, strlen(dn), &t->dtype)) {
            snprintf(
                err, CIS2_ERR_LEN,
                "%s: tensor \"%s\": unsupported dtype \"%.32s\" (supported: BF16, F32, F16, I8)",
                path, name, dn);
            free(dn);
            goto fail;
        }
        free(dn);
        size_t esz = cis2_dtype_size(t->dtype);
        if (d.nodes[sh].count > 8) FAIL("%s: tensor \"%s\": more than 8 dimensions", path, name);
        uint64_t numel = 1;
        for (uint32_t e = d.nodes[sh].first; e != JSON_NONE; e = d.nodes[e].next) {
            int64_t x;
            if (json_num_i64(&d, e, &x) || x < 0)
                FAIL("%s: tensor \"%s\": shape entries must be non-negative integers", path, name);
            if (x != 0 && numel > (UINT64_C(1) << 48) / (uint64_t)x)
                FAIL("%s: tensor \"%s\": shape product overflows", path, name);
            numel *= (uint64_t)x;
            t->shape[t->ndim++] = x;
        }
        int64_t b, e;
        uint32_t bn = d.nodes[of].first, en = d.nodes[bn].next;
        if (json_num_i64(&d, bn, &b) || json_num_i64(&d, en, &e) || b < 0 || e < b)
            FAIL("%s: tensor \"%s\": data_offsets must be integers with 0 <= begin <= end", path,
                 name);
        if ((uint64_t)e > data_len)
            FAIL("%s: tensor \"%s\": data_offsets [%lld, %lld] run past the end of the data (%llu "
                 "bytes): file truncated?",
                 path, name, (long long)b, (long long)e, (unsigned long long)data_len);
        if (numel * esz != (uint64_t)(e - b))
            FAIL("%s: tensor \"%s\": shape holds %llu bytes of %s but data_offsets span %lld bytes",
                 path, name, (unsigned long long)(numel * esz), cis2_dtype_name(t->dtype),
                 (long long)(e - b));
        t->numel = (int64_t)numel;
        t->offset = (uint64_t)b;
        t->nbytes = (uint64_t)(e - b);
    }
    /* No overlap, no holes: sorted by offset, the tensors tile the data exactly. */
    order = malloc((st->n ? st->n : 1) * sizeof *order);
    if (!order) FAIL("%s: out of memory", path);
    for (int i = 0; i < st->n; i++) order[i] = &st->t[i];
    qsort(order, (size_t)st->n, sizeof *order, cmp_off);
    uint64_t cur = 0;
    for (int i = 0; i < st->n; i++) {
        if (order[i]->offset < cur)
            FAIL("%s: tensors \"%s\" and \"%s\" overlap", path, order[i - 1]->name, order[i]->name);
        if (order[i]->offset > cur)
            FAIL("%s: unused bytes before tensor \"%s\" (offsets leave a hole)", path,
                 order[i]->name);
        cur = order[i]->offset + order[i]->nbytes;
    }
    if (cur != data_len)
        FAIL("%s: %llu trailing bytes after the last tensor", path,
             (unsigned long long)(data_len - cur));
    qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_name);
    for (int i = 1; i < st->n; i++)
        if (strcmp(st->t[i - 1].name, st->t[i].name) == 0)
            FAIL("%s: tensor \"%s\" appears twice", path, st->t[i].name);
    free(order);
    json_free(&d);
    return 0;
fail:
    free(order);
    json_free(&d);
    cis2_st_close(st); /* fuzz_safetensors: nothing may leak when a later check fails */
    return 1;
#undef FAIL
}

void cis2_st_bind(cis2_safetensors *st, const uint8_t *file)
{
    for (int i = 0; i < st->n; i++) st->t[i].data = file + st->data_start + st->t[i].offset;
}

int cis2_st_parse(cis2_safetensors *st, const uint8_t *buf, size_t len, const char *path, char *err)
{
    uint64_t hlen;
    memset(st, 0, sizeof *st);
    if (cis2_st_header_len(buf, len, path, &hlen, err) ||
        cis2_st_parse_header(st, buf + 8, hlen, len, path, err))
        return 1;
    cis2_st_bind(st, buf);
    return 0;
}

int cis2_st_open_header(cis2_safetensors *st, const char *path, int *fd, uint8_t **head, char *err)
{
    memset(st, 0, sizeof *st);
    *head = NULL;
    uint64_t size, hlen;
    uint8_t first8[8] = { 0 };
    if (cis2_open_input(path, fd, &size, err)) return 1;
    if ((size >= 8 && cis2_read_fd(*fd, first8, 8, path, err)) ||
        cis2_st_header_len(first8, size, path, &hlen, err))
        goto fail;
    if (!(*head = malloc((size_t)(8 + hlen)))) {
        snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
        goto fail;
    }
    memcpy(*head, first8, 8);
    if (cis2_read_fd(*fd, *head + 8, (size_t)hlen, path, err) ||
        cis2_st_parse_header(st, *head + 8, hlen, size, path, err))
        goto fail;
    return 0;
fail:
    free(*head);
    *head = NULL;
    close(*fd);
    *fd = -1;
    return 1;
}

const cis2_st_tensor *cis2_st_find(const cis2_safetensors *st, const char *name)
{
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(st->t[mid].name, name);
        if (c == 0) return &st->t[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

void cis2_st_close(cis2_safetensors *st)
{
    for (int i = 0; st->t && i < st->n; i++) free(st->t[i].name);
    free(st->t);
    free(st->metadata_json);
    memset(st, 0, sizeof *st);
}

void cis2_st_to_f32(const cis2_st_tensor *t, float *out)
{
    cis2_dtype_to_f32(t->dtype, t->data, (size_t)t->numel, out);
}
