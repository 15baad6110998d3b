#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for
# SECONDS seconds (default 60) from its seed corpus. New interesting inputs
# go to build-fuzz/corpus/<target>; a crash leaves its input in
# build-fuzz/crashes/ and makes this script fail.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(fuzz_asm fuzz_loader fuzz_hlo fuzz_stablehlo fuzz_ir)
command -v clang++ >/dev/null || { echo "fuzz: clang++ is needed (apt-get install clang)" >&2; exit 1; }
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${TARGETS[@]}"
mkdir -p build-fuzz/crashes
for t in "${TARGETS[@]}"; do
  case $t in
    fuzz_asm) seeds=(examples/asm tests/asm) ;;
    fuzz_hlo) seeds=(tests/corpus tests/compiler/hlo tests/fuzz/corpus/hlo) ;;
    fuzz_stablehlo) seeds=(tests/stablehlo tests/corpus) ;;
    *) seeds=(tests/fuzz/corpus/${t#fuzz_}) ;;
  esac
  work=build-fuzz/corpus/$t
  mkdir -p "$work"
  rm -f build-fuzz/crashes/$t-*
  echo "== $t for ${SECONDS_EACH}s"
  build-fuzz/bin/$t "$work" "${seeds[@]}" -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=10 \
    -artifact_prefix=build-fuzz/crashes/$t- -print_final_stats=1 2>&1 | grep -E "^(#[0-9]+ *DONE|stat::number_of_executed_units|==|SUMMARY)" || true
  if ls build-fuzz/crashes/$t-* >/dev/null 2>&1; then
    echo "fuzz: $t found a crash: $(ls build-fuzz/crashes/$t-*)" >&2
    exit 1
  fi
done
