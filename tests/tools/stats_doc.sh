#!/usr/bin/env bash
# stats.json against docs/stats.md both ways (stats_fields.py), for a program
# with a kernel table (a corpus MLP compiled by tpuc) on tiny and v5e; the
# profile table of tpusim --profile; the timeline's tracks nest properly and
# the --stats-interval time series adds up to the totals (trace_check.py).
#   tests/tools/stats_doc.sh BIN_DIR SRC_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
m=$src/tests/corpus/mlp_f32
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
for cfg in tiny v5e; do
  "$bin/tpuc" "$m/module.stablehlo.mlir" --config $cfg -o "$work/mlp.tpu"
  "$bin/tpusim" "$work/mlp.tpu" --inputs "$m"/arg{0,1,2,3,4}.npy --stats "$work/stats.json" --profile \
    --trace "$work/trace.json" --stats-interval 97 >"$work/profile.txt"
  python3 "$src/tests/tools/stats_fields.py" "$work/stats.json" "$src/docs/stats.md"
  python3 "$src/tests/tools/trace_check.py" "$work/trace.json" "$work/stats.json" "$work/stats.intervals.csv"
  "$bin/tpusim" "$work/mlp.tpu" --inputs "$m"/arg{0,1,2,3,4}.npy --trace "$work/window.json" --trace-window 500:900 -q
  python3 - "$work/window.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
clock = t["otherData"]["clock_hz"]
xs = [e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] != "kernel"]
assert xs, "no slice in the window"
for e in xs:
    s, d = e["args"]["start_cycle"], e["args"]["cycles"]
    assert s < 900 and s + d > 500, f"slice [{s}, {s + d}) outside the window 500:900"
print(f"--trace-window 500:900: {len(xs)} slices, all overlapping the window")
PY
  grep -q "^ *[0-9]* *[0-9]* .*% .*kernel [0-9]*: matmul" "$work/profile.txt" || { echo "no matmul kernel in the profile:"; cat "$work/profile.txt"; exit 1; }
  grep -q "module.stablehlo.mlir:" "$work/profile.txt" || { echo "no HLO op in the profile"; exit 1; }
done
# Trace replay's stats (tpusim --hbm-trace): a few reads and writes.
printf '0x0 READ 0\n0x40 WRITE 3\n0x10000 READ 9\n0x40 READ 20\n' >"$work/t.trace"
"$bin/tpusim" --hbm-trace "$work/t.trace" --config hbm2 --stats "$work/trace_stats.json" -q
python3 "$src/tests/tools/stats_fields.py" "$work/trace_stats.json" "$src/docs/stats.md" --present-only
python3 - "$work/trace_stats.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))["hbm"]
for k in ("requests", "drain_cycles", "drain_ns", "row_hits", "row_misses", "row_conflicts", "activates", "refreshes", "bytes_read",
          "bytes_written"):
    assert k in h and all(k in c for c in h["channels"] if k not in ("drain_cycles", "drain_ns")), k
assert set(h["read_latency_cycles"]) == {"mean", "p50", "p99"}
assert h["requests"] == 4 and h["reads"] == 3 and h["writes"] == 1, h
PY
echo "stats.json matches docs/stats.md; tpusim --profile lists kernels and ops"
