#!/usr/bin/env bash
# Full decodes on fixture models, `--backend fast` (every ISA this
# CPU has, thread counts 1/2/3/7) against `--backend ref`: the CIS2_REF
# digest (a witness over every full logit vector), generated ids and the
# receipt must match bit for bit. Plus `--isa` errors and `cis2 bench` output.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/fast"
rm -rf "$T"; mkdir -p "$T"
case "$CIS2" in /*) C="$CIS2";; *) C="$PWD/$CIS2";; esac

isas=$(host_isas)

ids() { python3 -c "import sys; n,v=int(sys.argv[1]),int(sys.argv[2]); print(','.join(str((i*7919+13)%v) for i in range(n)))" "$1" "$2"; }
strip() { grep -vE '^(backend|isa)=' "$1"; }

# name | make_model args | vocab | prompt length | -n
cases=(
  "llama-bf16|--layers 2 --vocab 333|333|19|6"
  "llama-f32-untied|--layers 2 --dtype f32 --untied --vocab 301|301|7|5"
  "qwen2-f16-gqa3|--arch qwen2 --layers 2 --heads 6 --kv-heads 2 --hidden 96 --inter 200 --dtype f16 --vocab 257|257|23|5"
  "qwen3-hd24-gqa7|--arch qwen3 --layers 1 --heads 7 --kv-heads 1 --head-dim 24 --hidden 80 --inter 136 --vocab 290|290|13|5"
  "llama-hd128-long|--layers 1 --heads 2 --kv-heads 1 --head-dim 128 --hidden 64 --inter 72 --vocab 515|515|100|4"
)
for c in "${cases[@]}"; do
    IFS='|' read -r name args vocab plen n <<<"$c"
    D="$T/$name"
    if ! python3 tools/make_model.py "$D" $args >/dev/null 2>"$T/$name.mk.err"; then
        fail "fast $name: make_model" "$(head -n1 "$T/$name.mk.err")"; continue
    fi
    P=$(ids "$plen" "$vocab")
    if ! "$C" run --model "$D" --prompt-ids "$P" -n "$n" --backend ref --receipt "$T/$name.ref.rcpt" >"$T/$name.ref" 2>"$T/$name.ref.err"; then
        fail "fast $name: ref run" "$(head -n1 "$T/$name.ref.err")"; continue
    fi
    want=$(grep '^CIS2_REF' "$T/$name.ref")
    for isa in $isas; do
        for th in 1 2 3 7; do
            case "$isa:$th" in scalar:3|scalar:7|sse2:7) continue;; esac   # keep the runtime modest
            o="$T/$name.$isa.$th"
            if ! "$C" run --model "$D" --prompt-ids "$P" -n "$n" --backend fast --isa "$isa" --threads "$th" \
                   --receipt "$o.rcpt" >"$o" 2>"$o.err"; then
                fail "fast $name $isa threads=$th" "$(head -n1 "$o.err")"; continue
            fi
            got=$(grep '^CIS2_REF' "$o")
            if [ "$got" == "$want" ] && cmp -s <(strip "$o") <(strip "$T/$name.ref") && cmp -s "$o.rcpt" "$T/$name.ref.rcpt"; then
                pass "fast $name $isa threads=$th: digest, ids and receipt == ref"
            else
                fail "fast $name $isa threads=$th" "got '$got' want '$want'"
            fi
        done
    done
    # the receipt written by ref verifies under the fast backend
    if "$C" verify "$T/$name.ref.rcpt" --model "$D" --backend fast --threads 2 >"$T/$name.verify" 2>&1; then
        pass "fast $name: ref receipt verifies with --backend fast"
    else
        fail "fast $name: verify" "$(grep -m1 MISMATCH "$T/$name.verify")"
    fi
done

# --isa errors: unknown name; an ISA of another architecture
expect_err "fast --isa unknown" "unknown --isa" "$C" run --model "$T/llama-bf16" --prompt-ids 1,2 -n 2 --backend fast --isa mmx
if [ "$(uname -m)" = x86_64 ]; then
    expect_err "fast --isa neon on x86-64" "does not support" "$C" run --model "$T/llama-bf16" --prompt-ids 1,2 -n 2 --backend fast --isa neon
    if ! grep -qw avx512f /proc/cpuinfo; then
        expect_err "fast --isa avx512 without AVX-512F" "does not support" "$C" run --model "$T/llama-bf16" --prompt-ids 1,2 -n 2 --backend fast --isa avx512
    fi
fi

# cis2 bench prints every key (tiny model, so it is quick) and its digest equals run's
D="$T/llama-bf16"
out=$("$C" bench --model "$D" --backend fast --threads 2 --prompt-len 19 -n 6 --positions 30,100 2>&1)
miss=""
for k in load_ms prefill_tok_s prefill_first_tok_s decode_tok_s ms_per_token peak_rss_mb weights_mb read_gbs floor_ms_per_token; do
    printf '%s\n' "$out" | grep -q "^$k=" || miss="$miss $k"
done
printf '%s\n' "$out" | grep -q "^pos=100 decode_tok_s=" || miss="$miss pos=100"
[ -z "$miss" ] && pass "bench prints every key" || fail "bench keys" "missing:$miss"
bd=$(printf '%s\n' "$out" | grep '^CIS2_REF' | cut -d' ' -f2)
rd=$("$C" run --model "$D" --prompt-ids "$(ids 19 333)" -n 6 --backend ref | grep '^CIS2_REF' | cut -d' ' -f2)
expect_eq "bench digest == ref run digest" "$bd" "$rd"
expect_err "bench needs --model" "--model" "$C" bench
# bench --batch: one row per B, in the order given, each with its keys; sequence 0 of every
# batch is the single run's prompt, so its witness must be the single run's (same_as_single=yes)
out=$("$C" bench --model "$D" --backend fast --threads 2 --prompt-len 7 -n 5 --batch 1,3,16 2>&1)
rows=$(printf '%s\n' "$out" | grep '^batch=' | sed -E 's/^batch=([0-9]+) decode_tok_s=[0-9.]+ ms_per_step=[0-9.]+ x_single=[0-9.]+ same_as_single=(yes|no)$/\1:\2/' | tr '\n' ' ')
expect_eq "bench --batch prints one row per B (B = 1,3,16), each as solo" "$rows" "1:yes 3:yes 16:yes "
# The default thread count is the CPUs this process may run on (its affinity mask: taskset,
# a cpuset, Slurm's -c), not every online core of the machine
if command -v taskset > /dev/null && taskset -c 0 true 2> /dev/null; then
    out=$(taskset -c 0 "$C" bench --model "$D" --backend fast --prompt-len 7 -n 2 2>&1)
    expect_eq "bench's default thread count under taskset -c 0" \
        "$(printf '%s\n' "$out" | grep -oE '^backend=fast[^ ]* threads=[0-9]+' | sed 's/^[^ ]* //')" "threads=1"
else
    skip "bench's default thread count under taskset -c 0" "no taskset here"
fi
# --prompt-len as a list + --positions: one table, a column per length/position in ascending
# order, "-" where a row was not measured
out=$("$C" bench --model "$D" --backend fast --threads 2 --prompt-len 19,40 -n 6 --positions 30 2>&1)
hdr=$(printf '%s\n' "$out" | grep -A1 '^table backend=' | tail -1)
expect_eq "bench table columns" "$hdr" "|  | 19 | 30 | 40 |"
row=$(printf '%s\n' "$out" | grep '^| decode at position' | sed -E 's/[0-9]+\.[0-9]/N/g')
expect_eq "bench table decode row" "$row" "| decode at position | - | N | - |"
expect_err "bench --prompt-len out of range" "outside [1, 8192]" "$C" bench --model "$D" --prompt-len 19,0
# --peak alone: the four ceilings in order; both bandwidths positive numbers, the mul+add
# rates positive numbers or n/a (an ISA this binary or CPU lacks: aarch64 has none yet);
# then the exact bf16 matmul kernel's rates (the best ISA path, one and eight tokens), each
# a positive number
out=$("$C" bench --peak --threads 2 2>&1)
# (the ceilings as before: a nonzero integer part; a kernel rate may be a fraction, as under
# an emulator, but not zero)
pat=$(printf '%s\n' "$out" | sed -E '/^kernel=/!s/=([0-9]*[1-9][0-9]*\.[0-9]+)$/=N/
    /^kernel=/{s/=0+\.0+( |$)/=Z\1/g; s/=[0-9]+\.[0-9]+( |$)/=N\1/g}' | tr '\n' ' ')
kr='l2_gflops=N stream_gflops=N stream_weight_gbs=N'
isa='(scalar|sse2|avx2|avx512|neon|wasm128)'
if printf '%s\n' "$pat" | grep -qxE "peak_mul_add_512_gflops_per_core=(N|n/a) peak_mul_add_256_gflops_per_core=(N|n/a) peak_read_gbs_1_thread=N peak_read_gbs_2_threads=N kernel=mm_bf16 isa=$isa T=1 $kr kernel=mm_bf16 isa=$isa T=8 $kr "; then
    pass "bench --peak prints its ceilings"
else fail "bench --peak" "$out"; fi
