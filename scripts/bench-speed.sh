#!/usr/bin/env bash
# Simulator speed on the three programs of docs/performance.md's "Simulator
# speed" table, one simulation at a time, best of REPEATS (stats.json's host
# figures):
#   gemm   2048^3 bf16 GEMM on v5e (detailed HBM): simulated MACs per host second
#   psum   psum of 8 KiB a chip on 64 v5e chips (8x8 torus): chip-cycles per host second
#   mlp    tests/corpus/mlp_f32 on v5e: simulated cycles per host second
# Also prints each run's cycles, which must not move with a speed change,
# and the whole process's wall time (loading, building the model, writing
# outputs), best of REPEATS.
#
#   scripts/bench-speed.sh [REPEATS] [CASE...]     (default 3; gemm psum mlp)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
shift || true
CASES=("$@")
((${#CASES[@]})) || CASES=(gemm psum mlp)
BIN=${BUILD_DIR:-build}/bin
[[ -x $BIN/tpusim ]] || scripts/setup.sh >/dev/null
PY=/usr/bin/python3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; best of $REPEATS"
printf '%-6s %12s %6s %10s %14s  %-13s %9s\n' case cycles chips wall_s figure unit process_s
for c in "${CASES[@]}"; do
  d="$WORK/$c"
  mkdir -p "$d"
  case $c in
    gemm)
      $PY scripts/bench/gemm.py 2048 2048 2048 "$d" >/dev/null
      inputs=("$d/a.npy" "$d/b.npy") ;;
    psum)
      $PY scripts/bench/psum.py 64 2 1024 "$d" >/dev/null
      inputs=("$d/arg0.npy") ;;
    mlp)
      cp tests/corpus/mlp_f32/module.hlo tests/corpus/mlp_f32/arg*.npy "$d/"
      inputs=("$d"/arg*.npy) ;;
    *) echo "bench-speed.sh: unknown case '$c' (gemm, psum, mlp)" >&2; exit 2 ;;
  esac
  "$BIN/tpuc" "$d/module.hlo" --config v5e -o "$d/p.tpu"
  for ((i = 0; i < REPEATS; i++)); do
    t0=$(date +%s.%N)
    "$BIN/tpusim" "$d/p.tpu" -q --inputs "${inputs[@]}" --outputs "$d/out" --stats "$d/s$i.json"
    echo "$t0 $(date +%s.%N)" >>"$d/process"
  done
  $PY - "$d" "$REPEATS" "$c" <<'PYEOF'
import json, sys
d, n, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = [json.load(open(f"{d}/s{i}.json")) for i in range(n)]
if len({r["cycles"] for r in runs}) != 1:
    sys.exit(f"bench-speed.sh: {case}: runs disagree on cycles")
s = min(runs, key=lambda r: r["host"]["wall_seconds"])
w, cyc, chips = s["host"]["wall_seconds"], s["cycles"], s.get("chips", 1)
fig, unit = {"gemm": (s["mxu"]["macs"] / w, "MACs/s"), "psum": (cyc * chips / w, "chip-cycles/s"),
             "mlp": (cyc / w, "cycles/s")}[case]
proc = min(float(b) - float(a) for a, b in (l.split() for l in open(f"{d}/process")))
print(f"{case:6s} {cyc:12d} {chips:6d} {w:10.3f} {fig:14.3e}  {unit:13s} {proc:9.3f}")
PYEOF
done
