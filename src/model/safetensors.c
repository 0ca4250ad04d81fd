/* safetensors reader over mmap. Validates everything before any tensor is
 * touched: header length bounds, strict JSON, known dtype, shape product ×
 * dtype size == offset span (overflow-checked), offsets inside the file,
 * no overlap and no holes, unique names. */
#include "model/model.h"
#include "core/json.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER (100u << 20)

static int dtype_of(const json_doc *d, uint32_t n, cis2_dtype *dt, size_t *esz)
{
    if (json_str_eq(d, n, "F32")) {
        *dt = CIS2_DT_F32;
        *esz = 4;
        return 0;
    }
    if (json_str_eq(d, n, "BF16")) {
        *dt = CIS2_DT_BF16;
        *esz = 2;
        return 0;
    }
    if (json_str_eq(d, n, "F16")) {
        *dt = CIS2_DT_F16;
        *esz = 2;
        return 0;
    }
    return 1;
}

static int cmp_off(const void *a, const void *b)
{
    const cis2_st_tensor *x = *(const cis2_st_tensor *const *)a,
                         *y = *(const cis2_st_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const cis2_st_tensor *)a)->name, ((const cis2_st_tensor *)b)->name);
}

int cis2_st_parse(cis2_safetensors *st, const uint8_t *buf, size_t len, const char *path, char *err)
{
    memset(st, 0, sizeof *st);
    st->path = path;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, CIS2_ERR_LEN, __VA_ARGS__);                                                  \
        goto fail;                                                                                 \
    } while (0)
    json_doc d;
    memset(&d, 0, sizeof d);
    cis2_st_tensor **order = NULL;
    if (len < 8) FAIL("%s: truncated safetensors file (%zu bytes, need at least 8)", path, len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)buf[i] << (8 * i);
    if (hlen < 2 || hlen > MAX_HEADER)
        FAIL("%s: safetensors header length %llu is out of bounds [2, %u]", path,
             (unsigned long long)hlen, MAX_HEADER);
    if (hlen > len - 8)
        FAIL("%s: safetensors header length %llu runs past the end of the file (%zu bytes)", path,
             (unsigned long long)hlen, len);
    const char *hdr = (const char *)buf + 8;
    if (hdr[0] != '{') FAIL("%s: safetensors header does not start with '{'", path);
    /* The spec allows trailing spaces as padding inside the header. */
    size_t hl = (size_t)hlen;
    while (hl > 0 && hdr[hl - 1] == ' ') hl--;
    char jerr[CIS2_ERR_LEN];
    if (json_parse(&d, hdr, hl, path, jerr)) FAIL("%.440s (in the safetensors header)", jerr);
    if (d.nodes[0].type != JSON_OBJECT) FAIL("%s: safetensors header is not a JSON object", path);
    const uint8_t *data = buf + 8 + hlen;
    uint64_t data_len = len - 8 - hlen;
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
        size_t esz;
        if (dtype_of(&d, dt, &t->dtype, &esz)) {
            char *dn = json_str_dup(&d, dt, NULL);
            snprintf(err, CIS2_ERR_LEN,
                     "%s: tensor \"%s\": unsupported dtype \"%.32s\" (supported: BF16, F32, F16)",
                     path, name, dn ? dn : "?");
            free(dn);
            goto fail;
        }
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
                 path, name, (unsigned long long)(numel * esz),
                 t->dtype == CIS2_DT_F32    ? "F32"
                 : t->dtype == CIS2_DT_BF16 ? "BF16"
                                            : "F16",
                 (long long)(e - b));
        t->numel = (int64_t)numel;
        t->data = data + b;
        t->nbytes = (uint64_t)(e - b);
    }
    /* No overlap, no holes: sorted by offset, the tensors tile the data exactly. */
    order = malloc((st->n ? st->n : 1) * sizeof *order);
    if (!order) FAIL("%s: out of memory", path);
    for (int i = 0; i < st->n; i++) order[i] = &st->t[i];
    qsort(order, (size_t)st->n, sizeof *order, cmp_off);
    const uint8_t *cur = data;
    for (int i = 0; i < st->n; i++) {
        if (order[i]->data < cur)
            FAIL("%s: tensors \"%s\" and \"%s\" overlap", path, order[i - 1]->name, order[i]->name);
        if (order[i]->data > cur)
            FAIL("%s: unused bytes before tensor \"%s\" (offsets leave a hole)", path,
                 order[i]->name);
        cur = order[i]->data + order[i]->nbytes;
    }
    if ((uint64_t)(cur - data) != data_len)
        FAIL("%s: %llu trailing bytes after the last tensor", path,
             (unsigned long long)(data_len - (uint64_t)(cur - data)));
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
    for (int i = 0; i < st->n; i++) free(st->t[i].name);
    free(st->t);
    free(st->metadata_json); /* fuzz_safetensors: leaked when a later check failed */
    st->metadata_json = NULL;
    st->t = NULL;
    st->n = 0;
    return 1;
#undef FAIL
}

int cis2_st_open(cis2_safetensors *st, const char *path, char *err)
{
    memset(st, 0, sizeof *st);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(err, CIS2_ERR_LEN, "%s: cannot open: %s", path, strerror(errno));
        return 1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, CIS2_ERR_LEN, "%s: not a regular file", path);
        close(fd);
        return 1;
    }
    size_t len = (size_t)sb.st_size;
    if (len < 8) {
        snprintf(err, CIS2_ERR_LEN, "%s: truncated safetensors file (%zu bytes, need at least 8)",
                 path, len);
        close(fd);
        return 1;
    }
    /* MAP_POPULATE: one bulk fault-in instead of ~65k page faults for a
     * 269 MB file (the loader touches every byte: hashing and packing). */
#ifdef MAP_POPULATE
    void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
#else
    void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
#endif
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(err, CIS2_ERR_LEN, "%s: mmap failed: %s", path, strerror(errno));
        return 1;
    }
    if (cis2_st_parse(st, m, len, path, err)) {
        munmap(m, len);
        return 1;
    }
    st->map = m;
    st->map_len = len;
    return 0;
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
    for (int i = 0; i < st->n; i++) free(st->t[i].name);
    free(st->t);
    free(st->metadata_json);
    if (st->map) munmap(st->map, st->map_len);
    memset(st, 0, sizeof *st);
}

/* Exact binary16 → binary32 (every f16 value is representable in f32). */
float cis2_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FFu;
    if (e == 0x1F) return cis2_u2f(sign | 0x7F800000u | (m << 13));
    if (e == 0) {
        if (m == 0) return cis2_u2f(sign);
        /* f16 subnormal m*2^-24 is a normal f32: normalise the mantissa. */
        int sh = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            sh++;
        }
        m &= 0x3FFu;
        return cis2_u2f(sign | ((uint32_t)(113 - sh) << 23) | (m << 13));
    }
    return cis2_u2f(sign | ((e + 112) << 23) | (m << 13));
}

void cis2_st_to_f32(const cis2_st_tensor *t, float *out)
{
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        if (t->dtype == CIS2_DT_F32) {
            uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                         (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
            out[i] = cis2_u2f(u);
        } else {
            uint16_t u = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            out[i] = t->dtype == CIS2_DT_BF16 ? cis2_bf16_to_f32(u) : cis2_f16_to_f32(u);
        }
    }
}
