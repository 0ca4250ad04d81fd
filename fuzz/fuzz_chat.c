/* Chat prompts: tokenizer_config.json / Jinja template compiling and
 * OpenAI-style messages over arbitrary bytes (first byte picks which), then
 * rendering. A compiled template renders a fixed conversation (output or one
 * error line); parsed messages render with the built-in ChatML and with the
 * Qwen-shaped fuzz tokenizer, starting with <|im_start|> and ending with the
 * generation prompt; every error is one line. */
#include "fuzz.h"
#include <stdio.h>

static cis2_tokenizer *chat_tok;

static void render_check(const cis2_chat_template *t, const cis2_chat_msg *m, int n,
                         const cis2_tokenizer *with)
{
    char err[CIS2_ERR_LEN] = "", *out = NULL;
    size_t len = 0;
    if (strcmp(cis2_chat_template_name(t), "chatml")) { /* a template of the input's */
        if (cis2_chat_render(t, m, n, 1, with, &out, &len, err) == 0)
            FUZZ_ASSERT(out && out[len] == '\0');
        else {
            FUZZ_ASSERT(out == NULL);
            fuzz_check_err(err);
        }
        free(out);
        return;
    }
    if (cis2_chat_render(t, m, n, 1, with, &out, &len, err) == 0) {
        static const char gen[] = "<|im_start|>assistant\n";
        FUZZ_ASSERT(out && len >= 2 * (sizeof gen - 1) && out[len] == '\0');
        FUZZ_ASSERT(memcmp(out, "<|im_start|>", 12) == 0);
        FUZZ_ASSERT(memcmp(out + len - (sizeof gen - 1), gen, sizeof gen - 1) == 0);
        free(out);
    } else {
        FUZZ_ASSERT(out == NULL);
        fuzz_check_err(err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[CIS2_ERR_LEN] = "";
    if (!chat_tok && cis2_tokenizer_load(&chat_tok, "fuzz/tokenizer-qwen.json", err)) {
        fprintf(stderr, "fuzz_chat: %s (run from the repository root)\n", err);
        exit(2);
    }
    if (size == 0) return 0;
    uint8_t mode = data[0] % 3;
    char *src = fuzz_dup(data + 1, size - 1);
    size_t n = size - 1;
    if (mode < 2) { /* 0: tokenizer_config.json, 1: the template's own text */
        cis2_chat_template *t = NULL;
        int rc = mode == 0 ? cis2_chat_template_parse(&t, src, n, "tokenizer_config.json", err)
                           : cis2_chat_template_from_text(&t, src, n, "chat_template.jinja", err);
        if (rc == 0) {
            FUZZ_ASSERT(t && cis2_chat_template_name(t));
            cis2_chat_msg m[3] = { { "user", "Hi", 2 },
                                   { "assistant", "Hello.", 6 },
                                   { "user", "e\xcc\x81 <think>", 9 } };
            render_check(t, m, 3, chat_tok);
            cis2_chat_template_free(t);
        } else {
            FUZZ_ASSERT(t == NULL);
            fuzz_check_err(err);
        }
    } else { /* messages */
        cis2_chat_msg *m = NULL;
        int nm = 0;
        if (cis2_chat_parse_messages(src, n, "messages.json", &m, &nm, err) == 0) {
            FUZZ_ASSERT(m && nm >= 1);
            cis2_chat_template *t = NULL;
            FUZZ_ASSERT(cis2_chat_template_builtin(&t, "chatml", err) == 0);
            render_check(t, m, nm, NULL);
            render_check(t, m, nm, chat_tok);
            cis2_chat_template_free(t);
            free(m);
        } else {
            FUZZ_ASSERT(m == NULL);
            fuzz_check_err(err);
        }
    }
    free(src);
    return 0;
}
