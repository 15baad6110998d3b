#!/usr/bin/env bash
# RTL against the model: the same program (scripts/bench/mxu_stream.s, one
# MXU streaming bf16 rows) on v5e-like machines with N x N arrays, run with
# the fast path, the PE-level path and the Verilated RTL in one invocation
# each; prints simulated cycles per host second and the ratios.
#
#   scripts/bench-rtl.sh [N...]    (default: 8 32 128)
#
# Large arrays are Verilated in a separate build (build-bench-rtl): 128 x 128
# takes many minutes and gigabytes. Verilator flags: see hw/CMakeLists.txt
# (TPU_VERILATOR_ARGS: -O3 --x-assign fast --x-initial fast, single-threaded
# model, compiled with the project's -O3).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=("$@")
((${#SIZES[@]})) || SIZES=(8 32 128)
BUILD=${BENCH_BUILD_DIR:-build-bench-rtl}
PY=/usr/bin/python3
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTPUSIM_TESTS=OFF -DTPU_RTL_OPT=-O3 \
  -DTPU_RTL_SIZES="$(IFS=';'; echo "${SIZES[*]}")" >/dev/null
cmake --build "$BUILD" --target tpusim tpu-as
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), one core per run (taskset -c 0)"
printf '%6s %10s %14s %14s %14s %10s %10s\n' N cycles "fast cyc/s" "pe cyc/s" "rtl cyc/s" "fast/rtl" "pe/rtl"
for n in "${SIZES[@]}"; do
  $PY - "$WORK" "$n" <<'PYEOF'
import json, sys, numpy as np
work, n = sys.argv[1], int(sys.argv[2])
c = json.load(open("configs/v5e.json"))
c["name"] = f"bench{n}"
c["target"].update(mxu_dim=n, vpu_lanes=n, mxus_per_core=1)
json.dump(c, open(f"{work}/bench{n}.json", "w"))
rng = np.random.default_rng(n)
def bf16(a):
    b = a.astype(np.float32).view(np.uint32)
    return ((b + 0x7fff + ((b >> 16) & 1)) >> 16).astype(np.uint16)
np.save(f"{work}/x{n}.npy", bf16(rng.standard_normal((4096, n))))
np.save(f"{work}/w{n}.npy", bf16(rng.standard_normal((n, n))))
PYEOF
  "$BUILD/bin/tpu-as" scripts/bench/mxu_stream.s --config "$WORK/bench$n.json" -o "$WORK/p$n.tpu"
  for m in fast pe rtl; do
    taskset -c 0 "$BUILD/bin/tpusim" "$WORK/p$n.tpu" --config "$WORK/bench$n.json" --mxu $m -q \
      --inputs "$WORK/x$n.npy" "$WORK/w$n.npy" --stats "$WORK/$m$n.json" --outputs "$WORK/o$m$n"
  done
  cmp -s "$WORK/ofast$n/out0.npy" "$WORK/ortl$n/out0.npy" || { echo "bench: RTL and model outputs differ for N=$n" >&2; exit 1; }
  $PY - "$WORK" "$n" <<'PYEOF'
import json, sys
work, n = sys.argv[1], sys.argv[2]
s = {m: json.load(open(f"{work}/{m}{n}.json")) for m in ("fast", "pe", "rtl")}
assert len({v["cycles"] for v in s.values()}) == 1, "cycle counts differ"
cps = {m: v["cycles"] / v["host"]["wall_seconds"] for m, v in s.items()}
print(f'{n:>6} {s["fast"]["cycles"]:>10} {cps["fast"]:>14.4g} {cps["pe"]:>14.4g} {cps["rtl"]:>14.4g} '
      f'{cps["fast"] / cps["rtl"]:>10.1f} {cps["pe"] / cps["rtl"]:>10.1f}')
PYEOF
done
