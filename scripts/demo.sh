#!/usr/bin/env bash
# The main job, end to end, on what exists today: assemble a hand-written
# program (matmul + bias + relu), run it on the simulated TPU (preset tiny),
# check its output against a numpy reference, summarise the statistics, and
# say where the waveforms and the timeline went.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
[[ -x $BIN/tpusim ]] || scripts/setup.sh >/dev/null
OUT=${OUT:-out/demo}
CONFIG=${CONFIG:-tiny}
mkdir -p "$OUT"
SRC=examples/asm/matmul_bias_relu.s
PY=/usr/bin/python3

echo "== tpu-as $SRC --config $CONFIG -o $OUT/prog.tpu"
"$BIN/tpu-as" "$SRC" --config "$CONFIG" -o "$OUT/prog.tpu"
"$BIN/tpu-objdump" "$OUT/prog.tpu" -o "$OUT/prog.s"
"$BIN/tpu-as" "$OUT/prog.s" -o "$OUT/again.tpu"
cmp -s "$OUT/prog.tpu" "$OUT/again.tpu" && echo "   tpu-objdump's listing ($OUT/prog.s) reassembles to the identical binary"

N=$($PY -c "import json; print(json.load(open('configs/$CONFIG.json'))['target']['mxu_dim'])")
$PY - "$OUT" "$N" <<'PYEOF'
import sys, numpy as np
out, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(2026)
def bf16(a):
    b = a.astype(np.float32).view(np.uint32)
    return ((b + 0x7fff + ((b >> 16) & 1)) >> 16).astype(np.uint16)
x, w = bf16(rng.standard_normal((n, n))), bf16(rng.standard_normal((n, n)))
b = rng.standard_normal(n).astype(np.float32)
np.save(f"{out}/x.npy", x); np.save(f"{out}/w.npy", w); np.save(f"{out}/b.npy", b)
f = lambda u: (u.astype(np.uint32) << 16).view(np.float32)
np.save(f"{out}/reference.npy", np.maximum(f(x).astype(np.float64) @ f(w) + b, 0).astype(np.float32))
PYEOF

echo "== tpusim $OUT/prog.tpu --config $CONFIG --inputs x.npy w.npy b.npy"
"$BIN/tpusim" "$OUT/prog.tpu" --config "$CONFIG" --inputs "$OUT/x.npy" "$OUT/w.npy" "$OUT/b.npy" --outputs "$OUT" \
  --stats "$OUT/stats.json" --vcd "$OUT/run.vcd" --trace "$OUT/trace.json"

$PY - "$OUT" <<'PYEOF'
import json, sys, numpy as np
out = sys.argv[1]
y, ref = np.load(f"{out}/out0.npy"), np.load(f"{out}/reference.npy")
err = np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-30)
print(f"== check: out0.npy vs float64 numpy reference: normwise relative error {err:.2e}", "PASS" if err < 1e-5 else "FAIL")
s = json.load(open(f"{out}/stats.json"))
print(f"== stats: {s['cycles']} cycles = {s['seconds'] * 1e6:.3f} us at {s['frequency_hz'] / 1e9:g} GHz; "
      f"{s['instructions']['total']} instructions {s['instructions']['by_class']}")
print(f"   MXU {s['mxu']['macs']} MACs, utilization {s['mxu']['utilization']:.1%}; "
      f"HBM read {s['hbm']['bytes_read']} B, written {s['hbm']['bytes_written']} B")
for u, v in s["units"].items():
    print(f"   {u:12} busy {v['utilization']:6.1%}  stalls {v['stalls']}")
print(f"   simulated {s['host']['simulated_cycles_per_second']:.3g} cycles per host second")
sys.exit(0 if err < 1e-5 else 1)
PYEOF
echo "== waveforms: $OUT/run.vcd (gtkwave $OUT/run.vcd $OUT/run.vcd.gtkw groups the signals by unit)"
echo "== timeline:  $OUT/trace.json (open in ui.perfetto.dev or chrome://tracing: one track per unit)"
