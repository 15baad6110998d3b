#!/usr/bin/env bash
# Simulation speed of systems of chips: a psum of 32 KiB per chip
# (scripts/bench/psum.py, 8 x 1024 f32) compiled by tpuc for 4, 16 and 64
# v5e chips (2x2, 4x4 and 8x8 tori) and run by tpusim. Prints, per system,
# the simulated cycles, the host seconds, the chip-cycles simulated per host
# second (cycles x chips / seconds) and the peak host memory per chip
# (with GNU time at /usr/bin/time; else 0).
#
#   scripts/bench/system.sh [CHIPS...]      (default: 4 16 64)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${TPU_BIN:-$root/build/bin}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
chips=("$@"); [ ${#chips[@]} -gt 0 ] || chips=(4 16 64)
printf "%6s %10s %9s %18s %14s\n" chips cycles host_s chip_cycles_per_s MiB_per_chip
for n in "${chips[@]}"; do
  d="$work/$n"
  python3 "$root/scripts/bench/psum.py" "$n" 8 1024 "$d"
  "$bin/tpuc" "$d/module.hlo" --config v5e -o "$d/p.tpu"
  run=("$bin/tpusim" "$d/p.tpu" --inputs "$d/arg0.npy" --outputs "$d/out" --stats "$d/s.json" -q)
  if [ -x /usr/bin/time ]; then /usr/bin/time -f "%M" -o "$d/rss" "${run[@]}"; else "${run[@]}"; echo 0 >"$d/rss"; fi
  python3 - "$d/s.json" "$d/rss" "$n" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); rss_kib = int(open(sys.argv[2]).read().split()[-1]); n = int(sys.argv[3])
c, w = s["cycles"], s["host"]["wall_seconds"]
print(f"{n:6d} {c:10d} {w:9.2f} {c * n / w:18.3e} {rss_kib / 1024 / n:14.1f}")
PY
done
