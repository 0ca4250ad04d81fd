/* The strict JSON parser (src/core/json.h): parse, then walk every node, decode
 * every string and convert every number. */
#include "fuzz.h"
#include "core/json.h"
#include <stdio.h>

static void walk(const json_doc *d, uint32_t n, int depth)
{
    FUZZ_ASSERT(n < d->n_nodes && depth < 100000);
    const json_node *x = &d->nodes[n];
    FUZZ_ASSERT((size_t)x->start + x->len <= d->src_len);
    if (x->type == JSON_STRING) {
        size_t l = json_str_len(d, n);
        char *s = malloc(l + 1);
        if (!s) abort();
        json_str_decode(d, n, s);
        free(s);
        size_t l2;
        char *s2 = json_str_dup(d, n, &l2);
        FUZZ_ASSERT(s2 && l2 == l && s2[l2] == '\0');
        free(s2);
    } else if (x->type == JSON_NUMBER) {
        double f;
        int64_t i, j;
        int fr = json_num_f64(d, n, &f), ir = json_num_i64(d, n, &i), jr = json_num_int(d, n, &j);
        /* An integer spelling is an integral value too, the same one; an
         * integral value below 2^53 in magnitude is exactly its double. */
        FUZZ_ASSERT(ir != 0 || (jr == 0 && i == j));
        FUZZ_ASSERT(ir == 0 || ir == JSON_NUM_NOT_INT || ir == jr);
        FUZZ_ASSERT(jr != 0 || fr != 0 || j > (INT64_C(1) << 53) || j < -(INT64_C(1) << 53) ||
                    f == (double)j);
    } else if (x->type == JSON_ARRAY || x->type == JSON_OBJECT) {
        uint32_t c = x->first, k = 0;
        while (c != JSON_NONE) {
            walk(d, c, depth + 1);
            if (x->type == JSON_OBJECT && k % 2 == 0) {
                FUZZ_ASSERT(d->nodes[c].type == JSON_STRING);
                /* look the key up again: must find a member */
                size_t l;
                char *key = json_str_dup(d, c, &l);
                if (key && strlen(key) == l) FUZZ_ASSERT(json_get(d, n, key, NULL) != JSON_NONE);
                free(key);
            }
            c = d->nodes[c].next;
            k++;
        }
        FUZZ_ASSERT(k == (x->type == JSON_OBJECT ? 2 * x->count : x->count));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = fuzz_dup(data, size);
    json_doc d;
    memset(&d, 0, sizeof d);
    char err[CIS2_ERR_LEN] = "";
    if (json_parse(&d, src, size, "fuzz.json", err) == 0) {
        FUZZ_ASSERT(d.n_nodes >= 1);
        walk(&d, 0, 0);
        json_free(&d);
    } else {
        fuzz_check_err(err);
        json_free(&d);
    }
    free(src);
    return 0;
}
