# cis2 — bit-exact CIS-2 v0.3b inference. See README.md.
# §1.4/§1.5: -ffp-contract=off always; never -ffast-math/-Ofast/-freciprocal-math.
# -fno-math-errno only lets sqrtf inline as the IEEE sqrt instruction (no libm call);
# it changes no value.
CROSS    ?=
# Make's built-in default CC is `cc`; cross toolchains (Debian gcc-aarch64-linux-gnu)
# ship only $(CROSS)gcc, so a plain `make CROSS=aarch64-linux-gnu-` uses gcc.
ifeq ($(origin CC),default)
CC = $(if $(CROSS),gcc,cc)
endif
OPT      ?= -O2
EXTRA    ?=
# -Wmissing-prototypes: a function without a prior declaration is file-local (static) or is
# declared in the header its callers include, so a signature can never drift between files.
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
              -Wmissing-prototypes \
              -ffp-contract=off -fno-math-errno -fno-strict-aliasing -pthread -Iinclude -Isrc
# gcc only: error messages are deliberately truncated to CIS2_ERR_LEN.
ifeq ($(findstring clang,$(shell $(CROSS)$(CC) --version 2>/dev/null)),)
CFLAGS_BASE += -Wno-format-truncation
endif
CFLAGS   = $(CFLAGS_BASE) $(OPT) -g $(EXTRA) $(SANFLAGS)
# Each object records the headers it includes (-MMD, in $(BUILD)/**/*.d, read at the end of
# this file), so a header change rebuilds exactly the objects that include it.
DEPFLAGS = -MMD -MP
# `make` alone builds on every CPU (a sub-make shares its parent's job slots instead);
# `make -jN` on the command line still wins.
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
# The fuzz library (`make fuzz-build`): sanitizers + coverage on everything but
# the SIMD kernels (no parsing there, and clang takes many minutes to
# instrument their unrolled templates).
ifeq ($(FUZZ_LIB),1)
SANFLAGS = $(FUZZ_SAN) -fsanitize=fuzzer-no-link
$(BUILD)/kernels/kernels_%.o: SANFLAGS =
$(BUILD)/engine/backend_fast.o: SANFLAGS =
endif
LDFLAGS ?=
LDLIBS   = -pthread -lm

# The layers, bottom up (docs/architecture.md): a file includes headers of
# its own layer and the ones below it only (tests/t_layers.sh checks).
LAYERS   = core model kernels engine verify cli
# A layer may keep a part in a subfolder (src/cli/serve/, src/cli/batch/).
SRC      = $(sort $(foreach l,$(LAYERS),$(wildcard src/$(l)/*.c src/$(l)/*/*.c)))
# A cross build never lands in the native ./build by accident:
# `make CROSS=aarch64-linux-gnu-` builds build-aarch64-linux-gnu/ and ./cis2-aarch64-linux-gnu.
XTAG     = $(patsubst %-,%,$(CROSS))
BUILD   ?= build$(if $(CROSS),-$(XTAG))
OBJ      = $(patsubst src/%.c,$(BUILD)/%.o,$(SRC))
# Three lists, three products (README.md, "Layout"; docs/architecture.md, "The library's edge"):
# 1. libcis2 (libcis2.a, libcis2.so, installed): the layers' sources less TOOL_ONLY; every
#    object of it is reachable from a function cis2.h declares.
# 2. libcis2_tool.a, the tool library: private, never installed, linked only into the cis2
#    binary, the unit tests, the fuzz harnesses and (as sources) the wasm build. TOOL_ONLY is
#    code no public function reaches, moved out of libcis2: the conformance runner (fork/exec
#    of a candidate), op vectors, traces (capture, file, diff), the quantizer and the shard
#    joiner. TOOL_SHARED is the plain helpers the tools share with the library (files, JSON,
#    output text, SHA-256, the clock, pinned digests, the sampler's text form): the same
#    objects archived in both, as curl's tool compiles its curlx helpers. A src/cli/ file
#    calls cis2.h's API and libcis2_tool.a, nothing else of the library (tests/t_layers.sh).
# 3. the CLI (CLIOBJ): src/cli/, linked as cli objects + libcis2_tool.a + libcis2.a.
TOOL_ONLY   = verify/kv verify/op verify/run_vector verify/suite verify/trace_capture \
              verify/trace_diff verify/trace_file model/quantize model/quantize_write \
              model/quant_outdir model/quant_source model/shards model/st_write
TOOL_SHARED = core/io core/json core/strbuf core/util core/sha256 core/fpenv core/pinned_math \
              engine/sample
# The second int8 packer: only tests/unit_int8.c calls it.
LIBOBJ   = $(filter-out $(BUILD)/cli/% $(patsubst %,$(BUILD)/%.o,$(TOOL_ONLY)),$(OBJ))
TOOLOBJ  = $(patsubst %,$(BUILD)/%.o,$(TOOL_ONLY) $(TOOL_SHARED))
CLIOBJ   = $(filter $(BUILD)/cli/%,$(OBJ))
# `cis2 serve` (docs/serve.md) speaks HTTP through libmicrohttpd (Debian libmicrohttpd-dev),
# linked into the cis2 binary only, never into libcis2. Cross builds default to MHD=0:
# `cis2 serve` then says it was built without it. Its page (web/serve/) is embedded.
MHD     ?= $(if $(CROSS),0,1)
SERVE_ASSETS = web/serve/index.html web/serve/serve.js web/serve/sse.mjs
CLIOBJ  += $(BUILD)/cli/serve_assets.o
UNIT_SRC = $(sort $(wildcard tests/unit_*.c))
UNIT_BIN = $(patsubst tests/%.c,$(BUILD)/%,$(UNIT_SRC))
BIN     ?= cis2$(if $(CROSS),-$(XTAG))
# Scratch space of the test scripts: tests/tmp for ./build, tests/tmp/<dir> for others,
# so builds tested side by side never share (and rm -rf) each other's files.
TESTTMP ?= $(CURDIR)/tests/tmp$(if $(filter-out build,$(BUILD)),/$(notdir $(BUILD)))

.PHONY: all test clean fma-gate run bench bench-model test-asan test-tsan fixtures test-aarch64 test-matrix fuzz fuzz-build fuzz-regress ci-extra wasm test-web test-slurm
all: $(BIN) $(UNIT_BIN)

$(BUILD)/%.o: src/%.c | $(BUILD)
	@mkdir -p $(@D)
	$(CROSS)$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD):
	mkdir -p $(addprefix $(BUILD)/,$(LAYERS))
$(OBJ): | $(addprefix $(BUILD)/,$(LAYERS))
$(addprefix $(BUILD)/,$(LAYERS)):
	mkdir -p $@
$(BUILD)/libcis2.a: $(LIBOBJ)
	rm -f $@ && $(CROSS)ar rcs $@ $^
$(BUILD)/libcis2_tool.a: $(TOOLOBJ)
	rm -f $@ && $(CROSS)ar rcs $@ $^
# The CLI's objects as an archive too, for the unit tests of serve and batch.
$(BUILD)/libcis2-cli.a: $(CLIOBJ)
	rm -f $@ && $(CROSS)ar rcs $@ $^
# Tools link in this order: the tool library first, then libcis2.a for the internals the
# tool library itself calls (a TOOL_SHARED object is taken from whichever archive first
# needs it; both hold the same one).
TOOL_LIBS = $(BUILD)/libcis2_tool.a $(BUILD)/libcis2.a
# The lists as tests/t_layers.sh reads them (the library's edge, checked with nm).
.PHONY: print-edge
print-edge:
	@echo "LIB $(PICOBJ)"; echo "TOOL $(TOOLOBJ)"; echo "CLI $(CLIOBJ)"
$(BIN): $(BUILD)/libcis2-cli.a $(TOOL_LIBS)
	$(CROSS)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(BUILD)/cli/main.o $^ $(SERVE_LDLIBS) $(LDLIBS)
ifeq ($(MHD),1)
$(BUILD)/cli/serve/serve_http.o: CFLAGS += -DCIS2_HAVE_MHD
SERVE_LDLIBS = -lmicrohttpd
endif
$(BUILD)/cli/serve_assets.c: $(SERVE_ASSETS) tools/embed_assets.sh | $(BUILD)/cli
	bash tools/embed_assets.sh $(SERVE_ASSETS) > $@.tmp && mv $@.tmp $@
$(BUILD)/cli/serve_assets.o: $(BUILD)/cli/serve_assets.c
	$(CROSS)$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/unit_fuzz_replay: $(wildcard fuzz/*.c fuzz/*.h)
$(BUILD)/unit_fast $(BUILD)/unit_int8: tests/unit_rand.h
# unit_oom fails the library's allocations one at a time: linked with --wrap,
# every malloc-family call in the library reaches the test's __wrap_* (no
# library source has a hook; docs/architecture.md, "The error contract").
OOM_WRAP = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup \
  -Wl,--wrap=aligned_alloc,--wrap=mmap
$(BUILD)/unit_oom: UNIT_LDFLAGS = $(OOM_WRAP)
$(BUILD)/unit_%: tests/unit_%.c tests/unit.h $(BUILD)/libcis2-cli.a $(TOOL_LIBS)
	$(CROSS)$(CC) $(CFLAGS) $(LDFLAGS) $(UNIT_LDFLAGS) -o $@ $< \
	  $(BUILD)/libcis2-cli.a $(TOOL_LIBS) $(LDLIBS)

# ---- The libraries and `make install` (docs/python.md). libcis2.a and libcis2.so hold the
# library layers only, never src/cli/. The shared library is built from its own -fPIC
# objects ($(BUILD)/pic/, the same flags otherwise: -ffp-contract=off, ...) with
# -fvisibility=hidden; include/cis2.h marks what it declares visible, so the .so exports
# exactly the public API (tests/t_install.sh checks). Soname libcis2.so.CIS2_ABI_VERSION,
# real name libcis2.so.ABI.MINOR.PATCH from CIS2_VERSION.
VERSION := $(shell sed -n 's/^\#define CIS2_VERSION  *"\(.*\)".*/\1/p' include/cis2.h)
ABI     := $(shell sed -n 's/^\#define CIS2_ABI_VERSION  *\([0-9]*\).*/\1/p' include/cis2.h)
SONAME   = libcis2.so.$(ABI)
SOREAL   = $(SONAME).$(word 2,$(subst ., ,$(VERSION))).$(word 3,$(subst ., ,$(VERSION)))
PICOBJ   = $(patsubst $(BUILD)/%,$(BUILD)/pic/%,$(LIBOBJ))
LIBS     = $(BUILD)/libcis2.a $(BUILD)/$(SOREAL) $(BUILD)/$(SONAME) $(BUILD)/libcis2.so
# Every symbol resolved at link time, except under sanitizers (clang's runtime is
# linked into executables only).
SO_DEFS  = $(if $(findstring -fsanitize,$(EXTRA) $(SANFLAGS)),,-Wl,--no-undefined)
all: $(LIBS)
$(BUILD)/pic/%.o: src/%.c
	@mkdir -p $(@D)
	$(CROSS)$(CC) $(CFLAGS) $(DEPFLAGS) -fPIC -fvisibility=hidden -c $< -o $@
$(BUILD)/$(SOREAL): $(PICOBJ)
	$(CROSS)$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) $(SO_DEFS) -o $@ $^ $(LDLIBS)
$(BUILD)/$(SONAME): $(BUILD)/$(SOREAL)
	ln -sf $(SOREAL) $@
$(BUILD)/libcis2.so: $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

# `make install PREFIX=/usr/local DESTDIR=`: the binary (as `cis2`), both libraries with the
# soname links, the header and cis2.pc (pkg-config; made from cis2.pc.in).
PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PCDIR      ?= $(LIBDIR)/pkgconfig
.PHONY: install uninstall test-python
install: $(BIN) $(LIBS) cis2.pc.in
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PCDIR)
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/cis2
	install -m 644 $(BUILD)/libcis2.a $(DESTDIR)$(LIBDIR)/libcis2.a
	install -m 755 $(BUILD)/$(SOREAL) $(DESTDIR)$(LIBDIR)/$(SOREAL)
	ln -sf $(SOREAL) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libcis2.so
	install -m 644 include/cis2.h $(DESTDIR)$(INCLUDEDIR)/cis2.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' \
	    -e 's|@VERSION@|$(VERSION)|' cis2.pc.in > $(DESTDIR)$(PCDIR)/cis2.pc
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/cis2 $(DESTDIR)$(LIBDIR)/libcis2.a $(DESTDIR)$(LIBDIR)/$(SOREAL) \
	      $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libcis2.so \
	      $(DESTDIR)$(INCLUDEDIR)/cis2.h $(DESTDIR)$(PCDIR)/cis2.pc
# The Python package's suite alone (tests/t_python.sh; `make test` runs it too).
test-python: all
	ONLY=t_python CIS2=./$(BIN) BUILD=$(BUILD) TESTTMP=$(TESTTMP) bash tests/run.sh

# The README's test command. Ends with "N passed, N failed, N skipped".
test: all
	CIS2=./$(BIN) BUILD=$(BUILD) TESTTMP=$(TESTTMP) bash tests/run.sh

# cis2 batch as a Slurm job array on a single-node cluster on localhost
# (tests/t_slurm.sh, docs/scale.md). `make test` runs it too, but SKIPs it
# without root or slurm-wlm + munge; here a missing prerequisite is a FAIL.
test-slurm: $(BIN)
	mkdir -p $(TESTTMP)
	CIS2=./$(BIN) TESTTMP=$(TESTTMP) SLURM_REQUIRED=1 bash tests/t_slurm.sh > $(TESTTMP)/slurm.log 2>&1; \
	  cat $(TESTTMP)/slurm.log; grep -q '^PASS' $(TESTTMP)/slurm.log && ! grep -q '^FAIL' $(TESTTMP)/slurm.log

# §1.4: no fused multiply-add anywhere in the binary (with a negative control).
fma-gate: $(BIN) $(BUILD)/$(SOREAL)
	bash tests/fma_gate.sh ./$(BIN) $(CROSS)objdump $(CROSS)$(CC) $(BUILD)
	bash tests/fma_gate.sh $(BUILD)/$(SOREAL) $(CROSS)objdump $(CROSS)$(CC) $(BUILD)/pic

run: all
	bash tools/make_run.sh

test-asan:
	$(MAKE) BUILD=build-asan BIN=cis2-asan OPT=-O1 \
	  EXTRA="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" test

# ThreadSanitizer over what runs on several threads at once: the pool
# (unit_pool), the engine's decode with its side-thread witness
# (unit_engine), batched decode (unit_batch) and the serve scheduler
# (unit_serve). A race fails the leg even when every check passes.
TSAN_UNITS = unit_pool unit_engine unit_batch unit_serve
test-tsan:
	$(MAKE) BUILD=build-tsan BIN=cis2-tsan OPT=-O1 EXTRA="-fsanitize=thread" \
	  LDFLAGS="-fsanitize=thread" $(addprefix build-tsan/,$(TSAN_UNITS))
	TSAN_BUILD=build-tsan bash tools/ci_tsan.sh $(TSAN_UNITS)

# The aarch64 leg. Cross-builds with $(AARCH64_CROSS)gcc, runs the unit
# binaries and shell suites under qemu-aarch64, the FMA gate over the aarch64
# disassembly, and checks every digest/receipt equals this host's ./$(BIN).
AARCH64_CROSS ?= aarch64-linux-gnu-
AARCH64_BUILD ?= build-aarch64
AARCH64_BIN   ?= cis2-aarch64
test-aarch64: all
	$(MAKE) CROSS=$(AARCH64_CROSS) CC=gcc BUILD=$(AARCH64_BUILD) BIN=$(AARCH64_BIN) EXTRA= LDFLAGS= all
	CROSS=$(AARCH64_CROSS) bash tools/ci_aarch64.sh $(AARCH64_BUILD) ./$(AARCH64_BIN) ./$(BIN)

# §13.4 in small: gcc and clang at -O0/-O2/-O3/-march=native, each in its own
# build dir; selftest + FMA gate + fixture decodes; digests must be identical.
# MATRIX_FULL=1 also runs the whole `make test` in every cell.
test-matrix:
	bash tools/ci_matrix.sh

# libFuzzer harnesses (clang; Debian libclang-rt-14-dev).
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_NAMES    = $(patsubst fuzz/fuzz_%.c,%,$(sort $(wildcard fuzz/fuzz_*.c)))
FUZZ_BINS     = $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_NAMES))
fuzz-build:
	$(MAKE) CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) OPT=-O1 EXTRA= FUZZ_LIB=1 \
	  LDFLAGS= $(FUZZ_BUILD)/libcis2.a $(FUZZ_BUILD)/libcis2_tool.a $(FUZZ_BUILD)/libcis2-cli.a $(FUZZ_BINS)
FUZZ_LIBS = $(FUZZ_BUILD)/libcis2-cli.a $(FUZZ_BUILD)/libcis2_tool.a $(FUZZ_BUILD)/libcis2.a
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(FUZZ_LIBS)
	$(FUZZ_CC) $(CFLAGS_BASE) -Ifuzz -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIBS) $(LDLIBS)
# Each harness for FUZZ_SECONDS from its committed seeds (new finds go to
# $(FUZZ_BUILD)/corpus-NAME, never into the committed corpus).
fuzz: fuzz-build
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) bash tools/ci_fuzz.sh $(FUZZ_NAMES)
# Replays the committed corpora + fuzz/regressions/ through every harness once.
fuzz-regress: fuzz-build
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=0 bash tools/ci_fuzz.sh $(FUZZ_NAMES)

clean:
	rm -rf build build-* cis2 cis2-* tests/tmp

# A small generated checkpoint to try every command offline (docs/README.md's quickstart):
# the one `make run` uses offline, the shape tests/fixtures/llama.vector pins.
DEMO_MODEL ?= models/demo
.PHONY: demo-model
demo-model: $(DEMO_MODEL)/model.safetensors
$(DEMO_MODEL)/model.safetensors: tools/make_model.py tests/fixtures/llama.vector
	python3 tools/make_model.py $(DEMO_MODEL) $$(sed -n 's/^#   python3 tools\/make_model.py DIR //p' tests/fixtures/llama.vector)

# A SmolLM2-135M-shaped synthetic checkpoint (uses the real tokenizer.json when present).
BENCH_MODEL ?= models/bench-135m
REAL_TOK := $(firstword $(wildcard $(CIS2_SMOLLM2_DIR)/tokenizer.json models/SmolLM2-135M/tokenizer.json ../shared/models/SmolLM2-135M/tokenizer.json))
bench-model: $(BENCH_MODEL)/model.safetensors
$(BENCH_MODEL)/model.safetensors: tools/make_model.py
	python3 tools/make_model.py $(BENCH_MODEL) --smollm2-shape $(if $(REAL_TOK),--tokenizer $(REAL_TOK))

bench: all bench-model
	bash tools/bench.sh $(BENCH_MODEL)

# The 0.36-1.7 B shapes people run at full depth (docs/shapes.md): size, load time, peak RSS,
# prefill / decode tok/s, ref = fast; checkpoints cached in $$SHAPES_DIR (tools/shapes_bench.sh).
.PHONY: bench-shapes
bench-shapes: all
	bash tools/shapes_bench.sh

# `cis2 serve` under load on the bench checkpoint (docs/serve.md): 32 clients x 8 requests,
# every receipt equal to its solo run; `make test` runs a short version (tests/t_serve.sh).
.PHONY: serve-load
serve-load: all bench-model
	bash tools/serve_bench.sh $(BENCH_MODEL)

# The engine as web/cis2.wasm (clang + wasi-libc, docs/wasm.md), and the
# page driven by headless Chromium (playwright-core from web/test/package-lock.json).
wasm:
	bash tools/build_wasm.sh

test-web: $(BIN)
	CIS2=./$(BIN) bash tools/test_web.sh

# The header dependencies each compile recorded (DEPFLAGS); absent before the first build.
-include $(OBJ:.o=.d) $(PICOBJ:.o=.d)
