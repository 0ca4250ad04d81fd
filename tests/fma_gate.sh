#!/usr/bin/env bash
# §1.4 FMA gate: the binary's disassembly must contain no fused multiply-add
# instruction on any ISA, except inside the approximate arm D's functions,
# allowed BY NAME: every function whose symbol starts with approx_i8_ (all
# of them live in src/kernels/approx_int8.c, docs/quantization.md §6). A
# negative control (a function that does use FMA) proves the grep can fire,
# and a second one proves the allow-list skips only what it names.
# Usage: fma_gate.sh BINARY [OBJDUMP] [CC] [OBJDIR]
# With OBJDIR (the build directory) it also checks the allow-list's premise:
# approx_int8.o defines only approx_* symbols, no other object defines one,
# and no exact kernel object references one.
set -u
bin="$1"; objdump="${2:-objdump}"; cc="${3:-cc}"; objdir="${4:-}"
PAT='vfmadd|vfnmadd|vfmsub|vfnmsub|fmadd|fmsub|fmla|fmls'
ALLOW='^approx_i8_'
# "function<TAB>mnemonic" per instruction (objdump -d prints "<sym>:" headers,
# then "addr:<TAB>mnemonic operands").
insns() {
    "$objdump" -d --no-show-raw-insn "$1" | awk -F'\t' '
        /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
        NF >= 2 { split($2, a, " "); print fn "\t" a[1] }'
}
# Lines "function<TAB>mnemonic" of FMA instructions outside / inside the allow-list.
fma_outside() { awk -F'\t' -v p="$PAT" -v a="$ALLOW" '$2 ~ p && $1 !~ a'; }
fma_inside() { awk -F'\t' -v p="$PAT" -v a="$ALLOW" '$2 ~ p && $1 ~ a'; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/control.c" <<'C'
float fused(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
float approx_i8_control(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
C
arch=$("$objdump" -f "$bin" | sed -n 's/.*architecture: \([^,]*\).*/\1/p')
case "$arch" in
    *x86-64*) cflag="-mfma" ;;
    *aarch64*) cflag="" ;;
    *) echo "FAIL fma-gate.arch: unknown architecture '$arch' of $bin"; exit 1 ;;
esac
if ! "$cc" -O2 $cflag -c "$tmp/control.c" -o "$tmp/control.o" 2>"$tmp/cc.err"; then
    echo "FAIL fma-gate.negative-control: cannot compile the control with $cc: $(head -1 "$tmp/cc.err")"; exit 1
fi
insns "$tmp/control.o" > "$tmp/control.insns"
out_fn=$(fma_outside < "$tmp/control.insns" | cut -f1 | sort -u | tr '\n' ' ')
in_fn=$(fma_inside < "$tmp/control.insns" | cut -f1 | sort -u | tr '\n' ' ')
if [ "$out_fn" = "fused " ]; then echo "PASS fma-gate.negative-control-fires ($arch: $(fma_outside < "$tmp/control.insns" | cut -f2 | head -1) in fused)"
else echo "FAIL fma-gate.negative-control-fires: the grep did not find the control's FMA (outside the allow-list: '$out_fn')"; exit 1; fi
if [ "$in_fn" = "approx_i8_control " ]; then echo "PASS fma-gate.allow-list-skips-only-approx_i8_ (control: fused caught, approx_i8_control allowed)"
else echo "FAIL fma-gate.allow-list-skips-only-approx_i8_: allowed '$in_fn'"; exit 1; fi

insns "$bin" > "$tmp/bin.insns"
n=$(fma_outside < "$tmp/bin.insns" | wc -l)
na=$(fma_inside < "$tmp/bin.insns" | wc -l)
total=$(wc -l < "$tmp/bin.insns")
allowed=""
[ "$na" -gt 0 ] && allowed=", $na in allow-listed approx_i8_* functions"
if [ "$n" -eq 0 ] && [ "$total" -gt 1000 ]; then echo "PASS fma-gate.no-fma-in-$(basename "$bin") ($total instructions, $arch$allowed)"
else echo "FAIL fma-gate.no-fma-in-$(basename "$bin"): $n FMA instruction(s) of $total: $(fma_outside < "$tmp/bin.insns" | sort | uniq -c | head -5 | tr '\n\t' '  ')"; exit 1; fi

# The allow-list's premise, from the objects.
if [ -n "$objdir" ] && [ -f "$objdir/kernels/approx_int8.o" ]; then
    nm="${objdump%objdump}nm"
    command -v "$nm" >/dev/null || nm=nm
    # (symbols the compiler makes up — sanitizer constructors, .L labels — start with _ or .)
    bad=$("$nm" --defined-only "$objdir/kernels/approx_int8.o" | awk '$2 ~ /^[tTdDbBrR]$/ && $3 !~ /^approx_/ && $3 !~ /^[._]/ { print $3 }' | tr '\n' ' ')
    others=$(for o in "$objdir"/*/*.o; do
        [ "$o" = "$objdir/kernels/approx_int8.o" ] && continue
        "$nm" --defined-only "$o" | awk -v o="$o" '$3 ~ /^approx_/ { print o ":" $3 }'
    done | tr '\n' ' ')
    refs=$(for o in "$objdir"/kernels/*.o; do
        [ "$o" = "$objdir/kernels/approx_int8.o" ] && continue
        "$nm" -u "$o" | awk -v o="$o" '$2 ~ /^approx_/ { print o ":" $2 }'
    done | tr '\n' ' ')
    if [ -z "$bad$others$refs" ]; then echo "PASS fma-gate.allow-list-is-approx_int8.o (only it defines approx_* symbols, all its symbols are approx_*, no exact kernel references it)"
    else echo "FAIL fma-gate.allow-list-is-approx_int8.o: not approx_*: '$bad' elsewhere: '$others' referenced: '$refs'"; exit 1; fi
fi
