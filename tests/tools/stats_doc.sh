#!/usr/bin/env bash
# stats.json against docs/stats.md both ways (stats_fields.py), for a program
# with a kernel table (a corpus MLP compiled by tpuc) on tiny and v5e, and the
# profile table of tpusim --profile.
#   tests/tools/stats_doc.sh BIN_DIR SRC_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
m=$src/tests/corpus/mlp_f32
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
for cfg in tiny v5e; do
  "$bin/tpuc" "$m/module.stablehlo.mlir" --config $cfg -o "$work/mlp.tpu"
  "$bin/tpusim" "$work/mlp.tpu" --inputs "$m"/arg{0,1,2,3,4}.npy --stats "$work/stats.json" --profile >"$work/profile.txt"
  python3 "$src/tests/tools/stats_fields.py" "$work/stats.json" "$src/docs/stats.md"
  grep -q "^ *[0-9]* *[0-9]* .*% .*kernel [0-9]*: matmul" "$work/profile.txt" || { echo "no matmul kernel in the profile:"; cat "$work/profile.txt"; exit 1; }
  grep -q "module.stablehlo.mlir:" "$work/profile.txt" || { echo "no HLO op in the profile"; exit 1; }
done
echo "stats.json matches docs/stats.md; tpusim --profile lists kernels and ops"
