#!/usr/bin/env bash
# scripts/sweep.sh over HBM bandwidth on tiny: one row per point, all
# finished, and the narrowest HBM the slowest (each point is compiled with
# its own setting, so the schedules differ: the rest need not be monotonic).
#   tests/tools/sweep_test.sh BIN_DIR SRC_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work"
m=$src/tests/corpus/mlp_f32
TPU_BIN=$bin bash "$src/scripts/sweep.sh" --sweep hbm.simple.bandwidth_bytes_per_s=1e10,4e10,1.6e11 --config tiny -j 2 -o "$work" \
  "$m/module.stablehlo.mlir" --inputs "$m"/arg{0,1,2,3,4}.npy
[ "$(wc -l <"$work/points.txt")" -eq 3 ] || { echo "points.txt should list 3 points"; exit 1; }
python3 - "$work/sweep.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 3, rows
assert all(r["status"] == "finished" for r in rows), rows
cycles = [int(r["cycles"]) for r in rows]
assert cycles[0] == max(cycles) and cycles[0] > cycles[-1], f"10 GB/s should be the slowest: {cycles}"
print("sweep.csv:", cycles)
PY

# A grid with co-varied keys: the MXU and the VPU lanes together (a program
# needs them equal), times two bandwidths; four points, each compiled and run
# with both keys set, the smaller array the slower at either bandwidth.
rm -rf "$work"
TPU_BIN=$bin bash "$src/scripts/sweep.sh" --sweep target.mxu_dim,target.vpu_lanes=4,8 --sweep hbm.simple.bandwidth_bytes_per_s=1e10,4e10 \
  --config tiny -j 2 -o "$work" "$m/module.stablehlo.mlir" --inputs "$m"/arg{0,1,2,3,4}.npy
[ "$(wc -l <"$work/points.txt")" -eq 4 ] || { echo "points.txt should list 4 points"; exit 1; }
grep -q -- "--set target.mxu_dim=8 --set target.vpu_lanes=8 --set hbm.simple.bandwidth_bytes_per_s=4e10" "$work/points.txt" ||
  { echo "the last point should set both co-varied keys and its bandwidth"; exit 1; }
python3 - "$work/sweep.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
key = "target.mxu_dim+target.vpu_lanes"
assert [(r[key], r["hbm.simple.bandwidth_bytes_per_s"]) for r in rows] == [("4", "1e10"), ("4", "4e10"), ("8", "1e10"), ("8", "4e10")], rows
assert all(r["status"] == "finished" for r in rows), rows
c = {(r[key], r["hbm.simple.bandwidth_bytes_per_s"]): int(r["cycles"]) for r in rows}
assert c["4", "1e10"] > c["8", "1e10"] and c["4", "4e10"] > c["8", "4e10"], c
print("grid:", c)
PY
