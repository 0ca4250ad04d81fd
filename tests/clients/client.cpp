// A C++ client of the installed libcis2 (tests/t_install.sh builds it with g++
// and pkg-config): `client_cpp DIR IDS N RECEIPT` decodes the prompt ids
// 1,2,3 greedily and writes the receipt text as `cis2 run --prompt-ids
// --receipt` does (the prompt bytes are the ids' decoded text).
#include <cis2.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace
{

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void check(int rc, const char *what, const char *err)
{
    if (rc) throw Error(std::string(what) + ": " + err);
}

struct ModelDel {
    void operator()(cis2_model *m) const { cis2_model_free(m); }
};
struct EngineDel {
    void operator()(cis2_engine *e) const { cis2_engine_free(e); }
};
struct FreeDel {
    void operator()(void *p) const { cis2_free(p); }
};

} // namespace

int main(int argc, char **argv)
{
    if (argc != 5) {
        std::fprintf(stderr, "usage: client_cpp DIR IDS N RECEIPT\n");
        return 2;
    }
    try {
        char err[CIS2_ERR_LEN];
        cis2_model *mp = nullptr;
        check(cis2_model_open(&mp, argv[1], nullptr, err), "open", err);
        std::unique_ptr<cis2_model, ModelDel> model(mp);
        cis2_engine_opts eo{};
        cis2_engine *ep = nullptr;
        check(cis2_engine_new(&ep, model.get(), &eo, err), "engine", err);
        std::unique_ptr<cis2_engine, EngineDel> engine(ep);

        int32_t *idp = nullptr;
        int n = 0;
        check(cis2_parse_ids(argv[2], &idp, &n, err), "ids", err);
        std::vector<int32_t> prompt(idp, idp + n);
        cis2_free(idp);

        std::string bytes; // the prompt's text, when the tokenizer can decode the ids
        if (const cis2_tokenizer *t = cis2_model_tokenizer(model.get(), err)) {
            char *text = nullptr;
            size_t len = 0;
            if (cis2_tokenizer_decode(t, prompt.data(), n, &text, &len, err) == 0) {
                bytes.assign(text, len);
                cis2_free(text);
            }
        }
        cis2_gen_opts g{};
        g.n_gen = std::atoi(argv[3]);
        cis2_result r{};
        check(cis2_generate(engine.get(), prompt.data(), n, &g, &r, err), "generate", err);
        cis2_receipt rc{};
        cis2_receipt_from_run(&rc, model.get(), &r, reinterpret_cast<const uint8_t *>(bytes.data()),
                              bytes.size());
        char *out = nullptr;
        size_t len = 0;
        check(cis2_receipt_format(&rc, &out, &len), "format", "failed");
        std::unique_ptr<char, FreeDel> text(out);
        std::ofstream(argv[4], std::ios::binary).write(text.get(), std::streamsize(len));
        char wh[65];
        cis2_hex(r.witness, 32, wh);
        std::printf("CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=%s\n", wh,
                    r.n_prompt, r.n_gen, cis2_model_dtype(model.get()));
        cis2_result_free(&r);
    } catch (const std::exception &ex) {
        std::fprintf(stderr, "client_cpp: %s\n", ex.what());
        return 1;
    }
    return 0;
}
