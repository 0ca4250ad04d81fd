/* tokenizer.json loading: cis2_tokenizer_parse over arbitrary bytes; a loaded
 * tokenizer must then encode, decode and normalize a fixed text without
 * crashing. Seeds include the four shapes of tests/fixtures/tokenizer/. */
#include "fuzz.h"
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = fuzz_dup(data, size);
    cis2_tokenizer *t = NULL;
    char err[CIS2_ERR_LEN] = "";
    if (cis2_tokenizer_parse(&t, src, size, "tokenizer.json", err) == 0) {
        FUZZ_ASSERT(t != NULL);
        int v = cis2_tokenizer_vocab_size(t);
        FUZZ_ASSERT(v > 0);
        static const char text[] = "Hello, world! 123 <|endoftext|> \xc3\xa9\xe2\x9c\x93  \n\tx"
                                   " e\xcc\x81 it'S <|im_start|>\xe1\x84\x80\xe1\x85\xa1\r\n";
        int32_t *ids = NULL;
        int n = 0;
        if (cis2_tokenizer_encode(t, text, sizeof text - 1, &ids, &n, err) == 0) {
            for (int i = 0; i < n; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < v);
            char *s = NULL;
            size_t l = 0;
            if (cis2_tokenizer_decode(t, ids, n, &s, &l, err) == 0) free(s);
            free(ids);
        }
        char *norm = NULL;
        size_t nl = 0;
        if (cis2_tokenizer_normalize(t, text, sizeof text - 1, &norm, &nl, err) == 0) free(norm);
        int32_t some[4] = { 0, v - 1, v / 2, 1 % v };
        char *s = NULL;
        size_t l = 0;
        if (cis2_tokenizer_decode(t, some, 4, &s, &l, err) == 0) free(s);
        cis2_tokenizer_free(t);
    } else {
        fuzz_check_err(err);
    }
    free(src);
    return 0;
}
