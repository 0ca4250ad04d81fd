#!/usr/bin/env bash
# §1.4 FMA gate: the binary's disassembly must contain no fused multiply-add
# instruction on any ISA. A negative control (a function that does use FMA)
# proves the grep can fire. Usage: fma_gate.sh BINARY [OBJDUMP] [CC]
set -u
bin="$1"; objdump="${2:-objdump}"; cc="${3:-cc}"
PAT='vfmadd|vfnmadd|vfmsub|vfnmsub|fmadd|fmsub|fmla|fmls'
# Mnemonics only (not symbol names): objdump -d prints "addr:<TAB>mnemonic operands".
mnemonics() { "$objdump" -d --no-show-raw-insn "$1" | awk -F'\t' 'NF >= 2 { split($2, a, " "); print a[1] }'; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/control.c" <<'C'
float fused(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
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
nc=$(mnemonics "$tmp/control.o" | grep -cE "$PAT")
if [ "$nc" -gt 0 ]; then echo "PASS fma-gate.negative-control-fires ($arch: $(mnemonics "$tmp/control.o" | grep -E "$PAT" | head -1))"
else echo "FAIL fma-gate.negative-control-fires: the grep did not find the control's FMA"; exit 1; fi
n=$(mnemonics "$bin" | grep -cE "$PAT")
total=$(mnemonics "$bin" | wc -l)
if [ "$n" -eq 0 ] && [ "$total" -gt 1000 ]; then echo "PASS fma-gate.no-fma-in-$(basename "$bin") ($total instructions, $arch)"
else echo "FAIL fma-gate.no-fma-in-$(basename "$bin"): $n FMA instruction(s) of $total: $(mnemonics "$bin" | grep -E "$PAT" | sort | uniq -c | head -5 | tr '\n' ' ')"; exit 1; fi
