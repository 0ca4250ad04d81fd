# cis2 — bit-exact CIS-2 v0.3b inference. See README.md.
# §1.4/§1.5: -ffp-contract=off always; never -ffast-math/-Ofast/-freciprocal-math.
# -fno-math-errno only lets sqrtf inline as the IEEE sqrt instruction (no libm call);
# it changes no value.
CC       ?= cc
CROSS    ?=
OPT      ?= -O2
EXTRA    ?=
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
              -ffp-contract=off -fno-math-errno -fno-strict-aliasing -pthread -Iinclude -Isrc
# gcc only: error messages are deliberately truncated to CIS2_ERR_LEN.
ifeq ($(findstring clang,$(shell $(CROSS)$(CC) --version 2>/dev/null)),)
CFLAGS_BASE += -Wno-format-truncation
endif
CFLAGS   = $(CFLAGS_BASE) $(OPT) -g $(EXTRA)
LDFLAGS ?=
LDLIBS   = -pthread -lm

SRC      = $(sort $(wildcard src/*.c))
BUILD   ?= build
OBJ      = $(patsubst src/%.c,$(BUILD)/%.o,$(SRC))
LIBOBJ   = $(filter-out $(BUILD)/main.o,$(OBJ))
UNIT_SRC = $(sort $(wildcard tests/unit_*.c))
UNIT_BIN = $(patsubst tests/%.c,$(BUILD)/%,$(UNIT_SRC))
BIN     ?= cis2

.PHONY: all test clean fma-gate run bench bench-model test-asan fixtures
all: $(BIN) $(UNIT_BIN)

$(BUILD)/%.o: src/%.c $(wildcard src/*.h include/*.h) | $(BUILD)
	$(CROSS)$(CC) $(CFLAGS) -c $< -o $@
$(BUILD):
	mkdir -p $(BUILD)
$(BUILD)/libcis2.a: $(LIBOBJ)
	rm -f $@ && $(CROSS)ar rcs $@ $^
$(BIN): $(BUILD)/main.o $(BUILD)/libcis2.a
	$(CROSS)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/unit_%: tests/unit_%.c tests/unit.h $(BUILD)/libcis2.a
	$(CROSS)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libcis2.a $(LDLIBS)

# The README's test command. Ends with "N passed, N failed, N skipped".
test: all
	CIS2=./$(BIN) BUILD=$(BUILD) bash tests/run.sh

# §1.4: no fused multiply-add anywhere in the binary (with a negative control).
fma-gate: $(BIN)
	bash tests/fma_gate.sh ./$(BIN)

run: all
	bash tools/make_run.sh

test-asan:
	$(MAKE) BUILD=build-asan BIN=cis2-asan OPT=-O1 \
	  EXTRA="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" test

clean:
	rm -rf build build-* cis2 cis2-* tests/tmp

# Issue 5: a SmolLM2-135M-shaped synthetic checkpoint (uses the real tokenizer.json when present).
BENCH_MODEL ?= models/bench-135m
REAL_TOK := $(firstword $(wildcard $(CIS2_SMOLLM2_DIR)/tokenizer.json models/SmolLM2-135M/tokenizer.json ../shared/models/SmolLM2-135M/tokenizer.json))
bench-model: $(BENCH_MODEL)/model.safetensors
$(BENCH_MODEL)/model.safetensors: tools/make_model.py
	python3 tools/make_model.py $(BENCH_MODEL) --smollm2-shape $(if $(REAL_TOK),--tokenizer $(REAL_TOK))

bench: all bench-model
	bash tools/bench.sh $(BENCH_MODEL)
