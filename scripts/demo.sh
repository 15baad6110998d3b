#!/usr/bin/env bash
# The main job, end to end, on what exists today: assemble an example
# program, disassemble it, and show that the disassembly reassembles to the
# identical binary.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
[[ -x $BUILD_DIR/bin/tpu-as ]] || scripts/setup.sh >/dev/null
OUT=${OUT:-out/demo}
mkdir -p "$OUT"
SRC=examples/asm/matmul_bias_relu.s

echo "== tpu-as $SRC -o $OUT/prog.tpu"
"$BUILD_DIR/bin/tpu-as" "$SRC" -o "$OUT/prog.tpu"
echo "   $(stat -c %s "$OUT/prog.tpu") bytes"
echo "== tpu-objdump $OUT/prog.tpu"
"$BUILD_DIR/bin/tpu-objdump" "$OUT/prog.tpu" | tee "$OUT/prog.s"
"$BUILD_DIR/bin/tpu-as" "$OUT/prog.s" -o "$OUT/again.tpu"
if cmp -s "$OUT/prog.tpu" "$OUT/again.tpu"; then
  echo "== the disassembly reassembles to the identical binary"
else
  echo "== MISMATCH: the disassembly does not reassemble to the same binary" >&2
  exit 1
fi
