#!/usr/bin/env bash
# diffattn info --system: the CPU's features and the kernels chosen, lowered by
# DIFFATTN_ISA; bench --isa runs a level by name and refuses one the CPU lacks.
set -u
BIN=${1:-build/diffattn}
fail=0
check() { if [[ $2 == *"$3"* ]]; then echo "ok   $1"; else echo "FAIL $1: no '$3' in:"; echo "$2"; fail=1; fi; }

out=$("$BIN" info --system 2>&1)
check "info --system lists features" "$out" "cpu features"
check "info --system names the best level" "$out" "best level"
check "info --system reports the int8 dots" "$out" "int8 dots"
out=$(DIFFATTN_ISA=scalar "$BIN" info --system 2>&1)
check "DIFFATTN_ISA=scalar is in use" "$out" "in use         scalar (DIFFATTN_ISA)"
check "the scalar level's exp is libm's" "$out" "libm expf"
out=$("$BIN" info 2>&1); rc=$?
[[ $rc == 1 ]] && check "info without --model" "$out" "--model is required" || { echo "FAIL info without --model: rc=$rc"; fail=1; }
out=$("$BIN" bench attn --isa scalar --dim 64 --layers 1 --heads 2 --seq 32 --batch 1 --steps 1 --warmup-steps 0 2>&1)
check "bench attn --isa scalar" "$out" "flash kernel, scalar"
out=$("$BIN" bench attn --isa avx9 2>&1); rc=$?
[[ $rc == 1 ]] && check "bench --isa: unknown level" "$out" "--isa: expected scalar" || { echo "FAIL --isa avx9: rc=$rc"; fail=1; }
exit $fail
