#!/usr/bin/env bash
# Code quality of tpuc: bf16 GEMMs (f32 results) compiled for a preset
# (default v5e) and simulated; prints the cycles, the roofline bound
# (max of MXU-bound and HBM-bound time) and the achieved fraction of it.
#
#   scripts/bench-compiler.sh [--config v5e] [M,K,N ...]
#
# MXU-bound cycles = M*K*N / (MXUs * N_mxu^2); HBM-bound cycles = bytes of
# A (bf16) + B (bf16) + C (f32) / (HBM bytes per second / clock).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
CONFIG=v5e
if [[ ${1:-} == --config ]]; then CONFIG=$2; shift 2; fi
SHAPES=("$@")
((${#SHAPES[@]})) || SHAPES=(1024,1024,1024 2048,2048,2048 2048,4096,2048 4096,2048,2048 64,4096,2048 128,8192,1024 32,2048,8192 256,4096,4096)
[[ -x $BIN/tpuc && -x $BIN/tpusim ]] || scripts/setup.sh >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
read -r MXUS DIM HBM_MODEL CLOCK < <(python3 - "$CONFIG" <<'PY'
import json, os, sys
c = sys.argv[1]
p = c if os.path.exists(c) else f"configs/{c}.json"
j = json.load(open(p))
print(j["target"]["mxus_per_core"], j["target"]["mxu_dim"], j["hbm"]["model"], j["clock_hz"])
PY
)
echo "config $CONFIG: $MXUS MXU(s) of ${DIM}x${DIM}, HBM model $HBM_MODEL, clock $(python3 -c "print($CLOCK/1e9)") GHz"
printf '%-18s %10s %10s %10s %8s %8s %7s\n' "M x K x N" cycles "MXU bound" "HBM bound" bound achieved "MXU util"
for s in "${SHAPES[@]}"; do
  IFS=, read -r M K N <<<"$s"
  d="$WORK/$M-$K-$N"
  python3 scripts/bench/gemm.py "$M" "$K" "$N" "$d"
  "$BIN/tpuc" "$d/module.hlo" --config "$CONFIG" -o "$d/p.tpu"
  "$BIN/tpusim" "$d/p.tpu" --config "$CONFIG" --inputs "$d/a.npy" "$d/b.npy" --outputs "$d/out" --stats "$d/stats.json" -q
  python3 - "$d/stats.json" "$M" "$K" "$N" "$MXUS" "$DIM" "$CLOCK" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
m, k, n, mxus, dim, clock = (float(x) for x in sys.argv[2:])
bw = s["hbm"]["peak_bandwidth_bytes_per_s"] or float("inf")  # ideal memory: no roof
mxu = m * k * n / (mxus * dim * dim)
hbm = (2 * m * k + 2 * k * n + 4 * m * n) / (bw / clock)
bound = max(mxu, hbm)
c = s["cycles"]
print(f"{int(m)} x {int(k)} x {int(n):<6} {c:10d} {mxu:10.0f} {hbm:10.0f} {'MXU' if mxu >= hbm else 'HBM':>8} {bound / c:8.1%} {s['mxu']['mac_utilization']:7.1%}")
PY
done
