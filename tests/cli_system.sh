#!/usr/bin/env bash
# diffattn info --system: the CPU's features and the kernels chosen, lowered by
# DIFFATTN_ISA; bench --isa runs a level by name and refuses one the CPU lacks.
source "$(dirname "$0")/lib.sh"

out=$("$BIN" info --system 2>&1)
has "info --system lists features" "$out" "cpu features"
has "info --system names the best level" "$out" "best level"
has "info --system reports the int8 dots" "$out" "int8 dots"
out=$(DIFFATTN_ISA=scalar "$BIN" info --system 2>&1)
has "DIFFATTN_ISA=scalar is in use" "$out" "in use         scalar (DIFFATTN_ISA)"
has "the scalar level's exp is libm's" "$out" "libm expf"
expect_error "info without --model" "--model is required" "$BIN" info
out=$("$BIN" bench attn --isa scalar --dim 64 --layers 1 --heads 2 --seq 32 --batch 1 --steps 1 --warmup-steps 0 2>&1)
has "bench attn --isa scalar" "$out" "flash kernel, scalar"
expect_error "bench --isa: unknown level" "--isa: expected scalar" "$BIN" bench attn --isa avx9
finish
