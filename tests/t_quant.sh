#!/usr/bin/env bash
# int8 (docs/quantization.md): `cis2 quantize` on every fixture architecture,
# checked byte for byte against an independent numpy reading of the rule
# (tests/quant_check.py) and deterministic (same bytes twice, a pinned digest
# on every ISA); its refusals, one line each; the int8 reference kernel and
# the rule giving the same bits natively, under qemu aarch64 and in wasm32;
# and arm B of the divergence method (tools/torch_trace.py --arm B) equal to
# `cis2 trace` bit for bit on every node — on the float fixtures, and on
# int8 checkpoints whose scales are powers of two (where the int8 semantics
# must equal the float one exactly) — with the quantization error of the
# others measured. SKIPs (saying why) where numpy/torch, node or a wasm32
# toolchain are absent.
cd "$(dirname "$0")/.."
source tests/lib.sh
T="$TESTTMP/quant-$(basename "${BUILD:-build}")"
rm -rf "$T"; mkdir -p "$T"
PY=""
for p in "${TORCH_PYTHON:-}" /usr/bin/python3 python3; do
    [ -n "$p" ] && "$p" -c 'import numpy' 2>/dev/null && { PY="$p"; break; }
done
TORCH=""
[ -n "$PY" ] && has_torch "$PY" && TORCH="$PY"
P="--prompt-ids 5,17,42 --teacher-force 7,99"

# --- the fixtures, as tests/fixtures/*.vector pins them
for v in tests/fixtures/*.vector; do
    n=$(basename "$v" .vector)
    make_fixture "$T/$n" "" $(vector_args "$v") || fail "quant.fixture-$n" "make_model.py $(vector_args "$v") failed"
done

# --- quantize: every architecture, numpy's reading, determinism
for v in tests/fixtures/*.vector; do
    n=$(basename "$v" .vector)
    out=$("$CIS2" quantize --model "$T/$n" --out "$T/$n-q" 2>&1); rc=$?
    if [ $rc -ne 0 ]; then fail "quant.quantize-$n" "rc=$rc $out"; continue; fi
    echo "$out" | grep -q '^int8_tensors=' && pass "quant.quantize-$n ($(echo "$out" | head -1 | sed 's/.*(//; s/)//'))" \
        || fail "quant.quantize-$n" "$out"
    if [ -n "$PY" ]; then
        c=$("$PY" tests/quant_check.py check "$T/$n" "$T/$n-q" 2>&1); rc=$?
        [ $rc -eq 0 ] && pass "quant.numpy-reading-$n ($c)" || fail "quant.numpy-reading-$n" "$(echo "$c" | head -3)"
    fi
    "$CIS2" quantize --model "$T/$n" --out "$T/$n-q2" >/dev/null 2>&1
    cmp -s "$T/$n-q/model.safetensors" "$T/$n-q2/model.safetensors" && cmp -s "$T/$n-q/config.json" "$T/$n-q2/config.json" \
        && pass "quant.deterministic-$n" || fail "quant.deterministic-$n" "two runs differ"
done
[ -n "$PY" ] || skip quant.numpy-reading "numpy not installed (apt-get install python3-numpy)"
# The same bytes on every ISA: digest pinned from the x86-64 run, which the
# numpy reading above checks value by value (the aarch64 leg runs this too).
got=$("$CIS2" quantize --model "$T/llama" --out "$T/llama-q3" 2>&1 | sed -n 's/^weights_sha256=//p')
expect_eq quant.pinned-digest-llama "$got" "afabb4a5bc8303636fe2481ccbc5fae0265eed2dd2bb91118948278ddae53c16"
out=$("$CIS2" quantize --model "$T/untied-f32" --out "$T/untied-f32-qle" --lm-head --embed 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q '^lm_head=int8' && echo "$out" | grep -q '^int8_tensors=16'; then
    pass "quant.lm-head-and-embed"
    [ -n "$PY" ] && { c=$("$PY" tests/quant_check.py check "$T/untied-f32" "$T/untied-f32-qle" --lm-head --embed 2>&1) \
        && pass "quant.numpy-reading-lm-head-and-embed ($c)" || fail quant.numpy-reading-lm-head-and-embed "$c"; }
else fail quant.lm-head-and-embed "rc=$rc $out"; fi
# tied: the embedding is the LM head; one more int8 tensor than the default
n0=$("$CIS2" quantize --model "$T/llama" --out "$T/llama-q4" 2>&1 | sed -n 's/^int8_tensors=//p')
out=$("$CIS2" quantize --model "$T/llama" --out "$T/llama-qle" --lm-head --embed 2>&1)
echo "$out" | grep -q "^int8_tensors=$((n0 + 1))\$" && echo "$out" | grep -q '^lm_head=int8' \
    && pass "quant.tied-lm-head-is-the-embedding" || fail quant.tied-lm-head-is-the-embedding "$out"

# --- refusals: one line, non-zero, nothing left behind
expect_err quant.err-no-model "--model DIR is required" "$CIS2" quantize --out "$T/x"
expect_err quant.err-no-out "--out QDIR is required" "$CIS2" quantize --model "$T/llama"
expect_err quant.err-unknown-flag "unknown option '--bits'" "$CIS2" quantize --model "$T/llama" --out "$T/x" --bits 4
expect_err quant.err-twice "given more than once" "$CIS2" quantize --model "$T/llama" --model "$T/llama" --out "$T/x"
expect_err quant.err-missing-dir "cannot open" "$CIS2" quantize --model "$T/nope" --out "$T/x"
expect_err quant.err-already-quantized "already has a quantization_config" "$CIS2" quantize --model "$T/llama-q" --out "$T/x"
expect_err quant.err-tied-lm-head-alone "go together" "$CIS2" quantize --model "$T/llama" --out "$T/x" --lm-head
expect_err quant.err-tied-embed-alone "go together" "$CIS2" quantize --model "$T/llama" --out "$T/x" --embed
expect_err quant.err-out-is-source "is the source directory itself" "$CIS2" quantize --model "$T/llama" --out "$T/llama/."
# Every output path is refused before anything is written: a link, FIFO or
# directory at config.json (written last) leaves the directory as it was.
for kind in link fifo dir; do
    q="$T/out-$kind"; rm -rf "$q"; mkdir -p "$q"
    case $kind in link) ln -s /dev/null "$q/config.json";; fifo) mkfifo "$q/config.json";; dir) mkdir "$q/config.json";; esac
    out=$(timeout 20 "$CIS2" quantize --model "$T/llama" --out "$q" 2>&1); rc=$?
    left=$(ls "$q" | tr '\n' ' ')
    if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [[ "$out" == *"config.json: refusing to replace a"* ]] && [ "$left" = "config.json " ]; then
        pass "quant.out-config-$kind-refused-before-writing"
    else fail "quant.out-config-$kind-refused-before-writing" "rc=$rc, left: $left, out: $out"; fi
done
# Its stdout names --out escaped (a path is a string from outside).
q=$(printf '%s/esc\033[31m\nX' "$T"); rm -rf "$q"
out=$("$CIS2" quantize --model "$T/llama" --out "$q" 2>&1); rc=$?
if [ $rc -eq 0 ] && ! printf '%s' "$out" | grep -q $'\e' && printf '%s\n' "$out" | head -1 | grep -qF 'esc\x1b[31m\nX ('; then
    pass quant.wrote-line-escapes-the-path
else fail quant.wrote-line-escapes-the-path "rc=$rc: $(printf '%s' "$out" | head -2 | cat -v)"; fi
rm -rf "$q"
: > "$T/afile"
expect_err quant.err-out-is-a-file "exists and is not a directory" "$CIS2" quantize --model "$T/llama" --out "$T/afile"
mkdir -p "$T/fifo-out"; mkfifo "$T/fifo-out/model.safetensors"
expect_err quant.err-fifo-target "model.safetensors" timeout 10 "$CIS2" quantize --model "$T/llama" --out "$T/fifo-out"
[ -p "$T/fifo-out/model.safetensors" ] && pass quant.fifo-left-alone || fail quant.fifo-left-alone "the FIFO was replaced"
[ -e "$T/x" ] && fail quant.refusals-write-nothing "$T/x exists" || pass quant.refusals-write-nothing
if [ -n "$PY" ]; then
    cp -r "$T/qwen2" "$T/nan"
    "$PY" - "$T/nan/model.safetensors" <<'PYEOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); t = h["model.layers.1.mlp.up_proj.weight"]
o = 8 + n + t["data_offsets"][0] + 2 * (3 * t["shape"][1] + 5)  # row 3, column 5 (bf16)
b[o:o + 2] = struct.pack("<H", 0x7FC0); open(p, "wb").write(b)
PYEOF
    expect_err quant.err-nan-weight 'tensor "model.layers.1.mlp.up_proj.weight" row 3 column 5 is NaN' \
        "$CIS2" quantize --model "$T/nan" --out "$T/nan-q"
fi

# --- QDIR changes all at once: the twin is built in QDIR.quantize-tmp.HEX beside it and
# renamed into place. A re-quantize that fails (a file-size limit) or is killed part-way
# leaves the old checkpoint whole: the same files, byte for byte, and its receipt verifies
# (written file by file, QDIR held the new weights beside the old config.json and tokenizer).
R="$T/requant"; rm -rf "$R"; mkdir -p "$R"
python3 tools/make_model.py "$R/a" >/dev/null 2>&1
python3 tools/make_model.py "$R/b" --seed 2 >/dev/null 2>&1 # another model of the same shape
# b's tokenizer.json (copied, not parsed) padded past the limit below: its weights fit
python3 -c 'import sys; p = sys.argv[1]; t = open(p).read(); open(p, "w").write(t + " " * (2 << 20))' "$R/b/tokenizer.json"
"$CIS2" quantize --model "$R/a" --out "$R/q" >/dev/null 2>&1
"$CIS2" run --model "$R/q" --prompt-ids 5,17,42 -n 3 --receipt "$R/r.txt" >/dev/null 2>&1
state() { (cd "$1" 2>/dev/null && ls -A && sha256sum -- *); }
sides() { ls -A "$R" | grep "^$1\.quantize-" | tr '\n' ' ' | sed 's/ $//'; }
old=$(state "$R/q")
held() { # held NAME: QDIR is the old checkpoint, its receipt verifies, nothing beside it
    local now vrc; now=$(state "$R/q")
    "$CIS2" verify "$R/r.txt" --model "$R/q" >/dev/null 2>&1; vrc=$?
    if [ -n "$old" ] && [ "$now" == "$old" ] && [ $vrc -eq 0 ] && [ -z "$(sides q)" ]; then pass "$1"
    else fail "$1" "verify rc=$vrc, beside: $(sides q), QDIR now: $(echo $now | head -c 300)"; fi
}
ERRORS_DIR="$R"
FSZ=(sh -c 'ulimit -f 1024; exec "$@"' _) # 1 MiB; the signal is left as the shell has it
errors_row quantize-write-efbig "quantize under a file-size limit (ulimit -f; the file being written in QDIR.quantize-tmp.HEX, which is removed)" "t_quant.sh quant.requantize-file-size-limit-keeps-old" "${FSZ[@]}" "$CIS2" quantize --model "$R/b" --out "$R/q"
held quant.requantize-file-size-limit-keeps-old
"${FSZ[@]}" "$CIS2" quantize --model "$R/b" --out "$R/new" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && [ ! -e "$R/new" ] && [ -z "$(sides new)" ] && pass "quant.file-size-limit-leaves-nothing (exit 2)" ||
    fail quant.file-size-limit-leaves-nothing "rc=$rc $(ls "$R")"
# killed (SIGKILL at a point of the write, CIS2_TEST_HOOK): the old QDIR whole, the new one
# left in QDIR.quantize-tmp.HEX (partial after the weights, complete just before the swap)
python3 tools/make_model.py "$R/b" --seed 2 >/dev/null 2>&1 # unpadded again
"$CIS2" quantize --model "$R/b" --out "$R/fresh" > "$R/fresh.out" 2>&1
new=$(state "$R/fresh")
for k in "kill-after-weights|model.safetensors" "kill-before-swap|config.json model.safetensors tokenizer.json"; do
    rc=$(CIS2_TEST_HOOK="quantize-${k%%|*}" "$CIS2" quantize --model "$R/b" --out "$R/q" >/dev/null 2>&1; echo $?)
    s=$(sides q); left=$(ls "$R"/q.quantize-tmp.* 2>/dev/null | tr '\n' ' ' | sed 's/ $//')
    [ $rc -eq 137 ] && [[ "$s" == q.quantize-tmp.???????????????? ]] && [ "$left" == "${k#*|}" ] &&
        pass "quant.killed-${k%%|*}-leaves-temp-dir ($s: $left)" ||
        fail "quant.killed-${k%%|*}-leaves-temp-dir" "rc=$rc beside: $s holding: $left"
    [ "${k%%|*}" == kill-before-swap ] && { [ "$(state "$R"/q.quantize-tmp.*)" == "$new" ] &&
        pass quant.killed-before-swap-temp-dir-is-complete || fail quant.killed-before-swap-temp-dir-is-complete; }
    rm -rf "$R"/q.quantize-tmp.*
    held "quant.killed-${k%%|*}-keeps-old"
done
# a re-quantize that completes: QDIR is the new checkpoint (= one written fresh), nothing
# beside it, its permission bits kept; the same through the fallback of two renames (no
# RENAME_EXCHANGE), and killed between those two renames both lie complete beside QDIR
chmod 700 "$R/q"
"$CIS2" quantize --model "$R/b" --out "$R/q" >/dev/null 2>&1; rc=$?
[ $rc -eq 0 ] && [ "$(state "$R/q")" == "$new" ] && [ -z "$(sides q)" ] && [ "$(stat -c %a "$R/q")" == 700 ] &&
    pass "quant.requantize-replaces-whole (mode 700 kept)" || fail quant.requantize-replaces-whole "rc=$rc beside: $(sides q) mode $(stat -c %a "$R/q")"
CIS2_TEST_HOOK=quantize-no-exchange "$CIS2" quantize --model "$R/a" --out "$R/q/" >/dev/null 2>&1; rc=$?
[ $rc -eq 0 ] && [ "$(state "$R/q")" == "$old" ] && [ -z "$(sides q)" ] &&
    pass quant.requantize-two-renames-replaces-whole || fail quant.requantize-two-renames-replaces-whole "rc=$rc beside: $(sides q)"
rc=$(CIS2_TEST_HOOK=quantize-kill-between-renames "$CIS2" quantize --model "$R/b" --out "$R/q" >/dev/null 2>&1; echo $?)
[ $rc -eq 137 ] && [ ! -e "$R/q" ] && [ "$(state "$R"/q.quantize-old.*)" == "$old" ] &&
    [ "$(state "$R"/q.quantize-tmp.*)" == "$new" ] && pass "quant.killed-between-renames-both-complete-beside" ||
    fail quant.killed-between-renames-both-complete-beside "rc=$rc beside: $(sides q)"
rm -rf "$R"/q.quantize-tmp.*; mv "$R"/q.quantize-old.* "$R/q"
# QDIR is removed with the old checkpoint, so it may hold only what quantize writes; a link
# is not replaced by a directory, nor '.' renamed away
: > "$R/q/notes.txt"
errors_row quantize-out-foreign-file "quantize --out holding a file quantize does not write (it would be removed with the old checkpoint)" "" "$CIS2" quantize --model "$R/b" --out "$R/q"
rm "$R/q/notes.txt"; ln -s q "$R/qlink"
errors_row quantize-out-symlink "quantize --out naming a symbolic link to a directory (it would be replaced by one)" "" "$CIS2" quantize --model "$R/b" --out "$R/qlink"
errors_row quantize-out-dot "quantize --out . (a directory replaced as a whole needs its name)" "" sh -c 'cd "$0" && exec "$@"' "$R/q" "$(realpath "$CIS2")" quantize --model "$(realpath "$R/b")" --out .
held quant.refused-requantize-keeps-old
# cis2 batch under the same limit: one line naming the file, no signal, no torn line left
printf '{"id":"a","prompt_ids":[5,17]}\n{"id":"b","prompt_ids":[6,18]}\n{"id":"c","prompt_ids":[7,19]}\n' > "$R/p.jsonl"
mkdir -p "$R/o"
errors_row batch-write-efbig "batch under a file-size limit (ulimit -f)" "t_quant.sh quant.batch-file-size-limit-no-torn-line" sh -c 'ulimit -f 4; exec "$@"' _ "$CIS2" batch --model "$R/a" --in "$R/p.jsonl" --out "$R/o/res.jsonl" -n 4
n=$(python3 -c 'import json, sys; print(len([json.loads(l) for l in open(sys.argv[1])]))' "$R/o/res.jsonl" 2>/dev/null)
[ "${n:-0}" -ge 1 ] && [ "$n" -lt 3 ] && pass "quant.batch-file-size-limit-no-torn-line ($n whole lines of 3)" ||
    fail quant.batch-file-size-limit-no-torn-line "lines=${n:-none}: $(tail -c 80 "$R/o/res.jsonl" 2>&1)"

# --- the int8 reference kernel and the rule: native = aarch64 = wasm32
S="src/core/fpenv.c src/core/pinned_math.c src/core/io.c src/core/sha256.c src/core/strbuf.c src/core/util.c src/kernels/kernels_ref.c src/model/quantize.c tests/wasm_int8.c"
W="$T/w"; mkdir -p "$W"
FL="-std=c11 -D_GNU_SOURCE -O2 -Wall -Werror -ffp-contract=off -fno-math-errno -Iinclude -Isrc"
# (these programs are built here from the sources, whatever BUILD is: another leg's run
# would repeat the native leg's exactly)
if [ "${BUILD:-build}" != build ]; then
    skip quant.ref-i8-native-aarch64-wasm32 "BUILD=$BUILD: built from the sources whatever the build (make test runs it)"
elif cc $FL $S -o "$W/native" -lm 2>"$W/cc.err" && "$W/native" > "$W/native.out"; then
    "$W/native" --unpinned > "$W/unpinned.out"
    ! cmp -s "$W/native.out" "$W/unpinned.out" && pass "quant.ref-i8-inputs-exercise-ftz (unpinned differs)" \
        || fail quant.ref-i8-inputs-exercise-ftz "the unpinned control gave the same lines"
    if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null && [ -d /usr/aarch64-linux-gnu/lib ]; then
        if ! aarch64-linux-gnu-gcc $FL $S -o "$W/arm" -lm 2>"$W/arm.err"; then
            fail quant.ref-i8-and-rule-aarch64-equal "the aarch64 build fails: $(head -2 "$W/arm.err")"
        else
            qemu-aarch64 -L /usr/aarch64-linux-gnu "$W/arm" > "$W/arm.out"
            cmp -s "$W/native.out" "$W/arm.out" && pass "quant.ref-i8-and-rule-aarch64-equal ($(wc -l < "$W/arm.out") digests)" \
                || fail quant.ref-i8-and-rule-aarch64-equal "$(diff "$W/native.out" "$W/arm.out" | head -3)"
        fi
    else skip quant.ref-i8-and-rule-aarch64-equal "no aarch64-linux-gnu-gcc / qemu-aarch64"; fi
    # the compiler tools/build_wasm.sh finds and has tried on a trivial program (exit 3: none)
    WCC=$(bash tools/build_wasm.sh --probe 2>"$W/wcc.err"); wrc=$?
    if ! command -v node >/dev/null; then
        skip quant.ref-i8-and-rule-wasm32-equal "no node"
    elif [ $wrc -eq 3 ]; then
        skip quant.ref-i8-and-rule-wasm32-equal "no wasm32 toolchain: $(head -1 "$W/wcc.err")"
    elif [ $wrc -ne 0 ]; then
        fail quant.ref-i8-and-rule-wasm32-equal "build_wasm.sh --probe exits $wrc: $(head -2 "$W/wcc.err")"
    elif ! "$WCC" --target=wasm32-wasi ${WASI_SYSROOT:+--sysroot="$WASI_SYSROOT"} -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID $FL $S -o "$W/int8.wasm" 2>"$W/wcc.err"; then
        fail quant.ref-i8-and-rule-wasm32-equal "the wasm32 build fails: $(head -2 "$W/wcc.err")"
    else
        node tests/wasm_run.mjs "$W/int8.wasm" > "$W/wasm.out" 2>"$W/wasm.err"
        cmp -s "$W/native.out" "$W/wasm.out" && pass "quant.ref-i8-and-rule-wasm32-equal ($(wc -l < "$W/wasm.out") digests)" \
            || fail quant.ref-i8-and-rule-wasm32-equal "$(diff "$W/native.out" "$W/wasm.out" | head -3) $(head -2 "$W/wasm.err")"
    fi
else
    fail quant.ref-i8-native "$(head -3 "$W/cc.err")"
fi

# --- arm B: the emulated-quantized ground truth, 0 ULP against cis2
if [ -z "$TORCH" ]; then
    skip quant.arm-b "PyTorch not installed (apt-get install python3-torch python3-numpy)"
    exit 0
fi
for v in tests/fixtures/*.vector; do
    n=$(basename "$v" .vector)
    "$CIS2" trace --model "$T/$n" $P -o "$T/c-$n.st" >/dev/null 2>&1 || { fail "quant.arm-b-fp32-$n" "cis2 trace failed"; continue; }
    if ! "$TORCH" tools/torch_trace.py --model "$T/$n" $P --arm B -o "$T/b-$n.st" >/dev/null 2>"$T/b-$n.err"; then
        fail "quant.arm-b-fp32-$n" "$(tail -1 "$T/b-$n.err")"; continue
    fi
    out=$("$CIS2" diff --exact "$T/c-$n.st" "$T/b-$n.st")
    echo "$out" | grep -qx 'verdict=IDENTICAL' && pass "quant.arm-b-fp32-$n ($(echo "$out" | sed -n 's/^compared //p'), 0 ULP)" \
        || fail "quant.arm-b-fp32-$n" "$(echo "$out" | grep -E '^(first|cause)')"
    # int8 with power-of-two scales: s * dot(q, x) == dot(q * s, x) exactly
    cp -r "$T/$n" "$T/$n-p2" && "$PY" tests/quant_check.py pow2 "$T/$n-p2" &&
        "$CIS2" quantize --model "$T/$n-p2" --out "$T/$n-p2q" >/dev/null &&
        "$CIS2" trace --model "$T/$n-p2" $P -o "$T/c-$n-p2.st" >/dev/null &&
        "$TORCH" tools/torch_trace.py --model "$T/$n-p2q" $P --arm B -o "$T/b-$n-p2q.st" >/dev/null 2>"$T/b2.err"
    out=$("$CIS2" diff --exact "$T/c-$n-p2.st" "$T/b-$n-p2q.st" 2>&1)
    echo "$out" | grep -qx 'verdict=IDENTICAL' && pass "quant.arm-b-int8-pow2-scales-$n (0 ULP against cis2's fp32 on the same values)" \
        || fail "quant.arm-b-int8-pow2-scales-$n" "$(echo "$out" | grep -E '^(first|cause)') $(tail -1 "$T/b2.err")"
    # int8 proper: the quantization error, measured (a correct int8 engine diverges from fp32)
    "$TORCH" tools/torch_trace.py --model "$T/$n-q" $P --arm B -o "$T/b-$n-q.st" >/dev/null 2>&1
    out=$("$CIS2" diff "$T/c-$n.st" "$T/b-$n-q.st" 2>&1)
    cmin=$(echo "$out" | grep '\.logits ' | sed -n 's/.* cos=\([^ ]*\) .*/\1/p' | sort -g | head -1)
    t1=$(echo "$out" | grep -c 'top1 same'); tn=$(echo "$out" | grep -c 'top1 ')
    mx=$(echo "$out" | grep '\.logits ' | sed -n 's/.* max_rel=\([^ ]*\) .*/\1/p' | sort -g | tail -1)
    if echo "$out" | grep -qx 'verdict=DIVERGED' && awk -v c="$cmin" 'BEGIN { exit !(c >= 0.999) }'; then
        pass "quant.int8-error-$n (logits vs fp32: min cos $cmin, max_rel $mx, top-1 $t1/$tn)"
    else fail "quant.int8-error-$n" "cos=$cmin $(echo "$out" | tail -2 | tr '\n' ' ')"; fi
done
# the int8 embedding and LM head (tied): (float)q[tok] * s[tok], s[v] * dot_seq(q[v], h)
cp -r "$T/llama" "$T/llama-p2all" && "$PY" tests/quant_check.py pow2 "$T/llama-p2all" --all &&
    "$CIS2" quantize --model "$T/llama-p2all" --out "$T/llama-p2allq" --lm-head --embed >/dev/null &&
    "$CIS2" trace --model "$T/llama-p2all" $P -o "$T/c-p2all.st" >/dev/null &&
    "$TORCH" tools/torch_trace.py --model "$T/llama-p2allq" $P --arm B -o "$T/b-p2all.st" >/dev/null 2>&1
out=$("$CIS2" diff --exact "$T/c-p2all.st" "$T/b-p2all.st" 2>&1)
echo "$out" | grep -qx 'verdict=IDENTICAL' && pass "quant.arm-b-int8-embedding-and-lm-head-pow2 (0 ULP)" \
    || fail quant.arm-b-int8-embedding-and-lm-head-pow2 "$(echo "$out" | grep -E '^(first|cause)')"
# arm A on an int8 checkpoint runs the dequantized weights: within the fp32 table of arm B
"$TORCH" tools/torch_trace.py --model "$T/qwen3-q" $P -o "$T/a-qwen3-q.st" >/dev/null 2>&1
out=$("$CIS2" diff "$T/b-qwen3-q.st" "$T/a-qwen3-q.st" 2>&1)
echo "$out" | grep -qx 'verdict=WITHIN-TOLERANCE' && pass quant.arm-a-dequantized-within-tolerance-of-b \
    || fail quant.arm-a-dequantized-within-tolerance-of-b "$(echo "$out" | grep -E '^(first|verdict)')"
# greedy mode: the same picks and logits as cis2's decode
"$CIS2" trace --model "$T/qwen2" --prompt-ids 5,17,42 -n 3 -o "$T/cg.st" >/dev/null
"$TORCH" tools/torch_trace.py --model "$T/qwen2" --prompt-ids 5,17,42 -n 3 --arm B -o "$T/bg.st" >/dev/null 2>&1
out=$("$CIS2" diff --exact "$T/cg.st" "$T/bg.st" 2>&1)
echo "$out" | grep -qx 'verdict=IDENTICAL' && pass quant.arm-b-greedy-identical || fail quant.arm-b-greedy-identical "$(echo "$out" | tail -2)"
# §1.3 in arm B: layer 0's norm weights at 1.2e-38 make subnormal products (the
# t_trace.sh FTZ fixture); B flushes them exactly as cis2 does, and cis2 without
# FTZ is caught against B as an FTZ/DAZ divergence
cp -r "$T/untied-f32" "$T/ftz" && "$PY" - "$T/ftz/model.safetensors" <<'PYEOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
a, e = json.loads(b[8:8 + n])["model.layers.0.input_layernorm.weight"]["data_offsets"]
b[8 + n + a:8 + n + e] = struct.pack("<%df" % ((e - a) // 4), *[1.2e-38] * ((e - a) // 4)); open(p, "wb").write(b)
PYEOF
"$CIS2" trace --model "$T/ftz" $P -o "$T/c-ftz.st" >/dev/null 2>&1
"$CIS2" trace --model "$T/ftz" $P -o "$T/c-noftz.st" --fault no-ftz >/dev/null 2>&1
"$TORCH" tools/torch_trace.py --model "$T/ftz" $P --arm B -o "$T/b-ftz.st" >/dev/null 2>&1
out=$("$CIS2" diff --exact "$T/c-ftz.st" "$T/b-ftz.st" 2>&1)
out2=$("$CIS2" diff --exact "$T/c-noftz.st" "$T/b-ftz.st" 2>&1)
echo "$out" | grep -qx 'verdict=IDENTICAL' && echo "$out2" | grep -q '^cause=FTZ/DAZ' \
    && pass "quant.arm-b-flushes-subnormals-like-cis2 (unflushed cis2 caught as FTZ/DAZ)" \
    || fail quant.arm-b-flushes-subnormals-like-cis2 "$(echo "$out" | tail -1) / $(echo "$out2" | grep -E '^(first|cause)')"
# the comparison can fail: a fault injected into cis2 is localized against arm B
"$CIS2" trace --model "$T/llama" $P --fault rmsnorm-assoc -o "$T/cf.st" >/dev/null 2>&1
out=$("$CIS2" diff --exact "$T/b-llama.st" "$T/cf.st" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^first_divergence=p0.L0.attn_norm' && pass quant.arm-b-localizes-a-fault \
    || fail quant.arm-b-localizes-a-fault "rc=$rc $(echo "$out" | grep first_div)"
m=$("$CIS2" diff --exact "$T/c-llama.st" "$T/b-llama.st" >/dev/null; "$PY" -c "
import json,struct,sys; b=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',b[:8])[0]
m=json.loads(b[8:8+n])['__metadata__']; print(m['arm'], m['dtype'])" "$T/b-llama-q.st")
expect_eq quant.arm-b-metadata "$m" "B int8-row"
# State 1's digest of the int8 weights arm B used, recomputed from the file with numpy
want=$("$PY" - "$T/llama-q/model.safetensors" <<'PYEOF'
import hashlib, sys
sys.path.insert(0, "tests"); import quant_check as qc
h, _, d, _ = qc.read(sys.argv[1]); x = hashlib.sha256()
for n in sorted(k[:-7] for k in h if k.endswith(".weight") and h[k]["dtype"] == "I8"):
    x.update(n.encode() + b"\0" + qc.arr(h, d, n + ".weight").tobytes() + qc.arr(h, d, n + ".weight_scale").astype("<f4").tobytes())
print(x.hexdigest())
PYEOF
)
got=$("$PY" -c "
import json,struct,sys; b=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',b[:8])[0]
print(json.loads(b[8:8+n])['__metadata__'].get('int8_weights_sha256'))" "$T/b-llama-q.st")
expect_eq quant.arm-b-int8-weights-digest "$got" "$want"
