#!/usr/bin/env bash
# Simulator speed on one core: a large bf16 matmul on one 128x128 MXU (v5e),
# with the fast path and the PE-level path, on random data. Prints simulated
# cycles per host second, simulated MACs (fast) or PE updates (PE-level) per
# host second, and the ratio of the two paths measured in the same run.
#
#   scripts/bench-sim.sh [REPEATS]    (default 3; the best run of each path counts)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
BIN=${BUILD_DIR:-build}/bin
[[ -x $BIN/tpusim ]] || scripts/setup.sh >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY=/usr/bin/python3

"$BIN/tpu-as" scripts/bench/mxu_stream.s --config v5e -o "$WORK/prog.tpu"
$PY - "$WORK" <<'PYEOF'
import sys, numpy as np
rng = np.random.default_rng(7)
def bf16(a):
    b = a.astype(np.float32).view(np.uint32)
    return ((b + 0x7fff + ((b >> 16) & 1)) >> 16).astype(np.uint16)
np.save(sys.argv[1] + "/x.npy", bf16(rng.standard_normal((4096, 128))))
np.save(sys.argv[1] + "/w.npy", bf16(rng.standard_normal((128, 128))))
PYEOF

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; one simulation at a time"
declare -A best
for path in fast pe; do
  for ((i = 0; i < REPEATS; i++)); do
    taskset -c 0 "$BIN/tpusim" "$WORK/prog.tpu" --config v5e --mxu "$path" -q \
      --inputs "$WORK/x.npy" "$WORK/w.npy" --stats "$WORK/$path-$i.json"
  done
  best[$path]=$($PY - "$WORK" "$path" "$REPEATS" <<'PYEOF'
import json, sys
runs = [json.load(open(f"{sys.argv[1]}/{sys.argv[2]}-{i}.json")) for i in range(int(sys.argv[3]))]
s = min(runs, key=lambda r: r["host"]["wall_seconds"])
w = s["host"]["wall_seconds"]
print(f'{s["cycles"]} {w:.4f} {s["cycles"] / w:.4g} {s["mxu"]["macs"] / w:.4g}')
PYEOF
)
done
read -r fc fw fcps fmacs <<<"${best[fast]}"
read -r pc pw pcps pmacs <<<"${best[pe]}"
[[ $fc == "$pc" ]] || { echo "bench: the paths disagree on cycles ($fc vs $pc)" >&2; exit 1; }
printf '%-10s %12s %10s %16s %22s\n' path cycles wall_s "sim cycles/s" "MACs (PE updates)/s"
printf '%-10s %12s %10s %16s %22s\n' fast "$fc" "$fw" "$fcps" "$fmacs"
printf '%-10s %12s %10s %16s %22s\n' pe "$pc" "$pw" "$pcps" "$pmacs"
$PY -c "print(f'pe-level / fast wall time: {float($pw) / float($fw):.2f}x')"
