#!/usr/bin/env bash
# The main job, end to end: compile a JAX model (examples/models/mlp) as
# JAX prints it by default (StableHLO, module.stablehlo.mlir; module.hlo when
# a folder has no StableHLO) with tpuc, run it on the simulated TPU (the default preset, v5e), check the
# outputs against XLA's, summarise the statistics, print the profile, and
# end with the run's report: one page with where the cycles went.
#
#   scripts/demo.sh [MODEL_DIR]      (CONFIG=tiny, PRECISION=highest, OUT=dir to change)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
[[ -x $BIN/tpusim && -x $BIN/tpuc ]] || scripts/setup.sh >/dev/null
MODEL=${1:-examples/models/mlp}
OUT=${OUT:-out/demo}
CONFIG=${CONFIG:-v5e}
PRECISION=${PRECISION:-default}
mkdir -p "$OUT"
SRC=$MODEL/module.stablehlo.mlir
[[ -f $SRC ]] || SRC=$MODEL/module.hlo

echo "== tpuc $SRC --config $CONFIG --precision $PRECISION -o $OUT/model.tpu"
"$BIN/tpuc" "$SRC" --config "$CONFIG" --precision "$PRECISION" -o "$OUT/model.tpu" \
  --dump-after-each-pass 2> "$OUT/passes.txt"
"$BIN/tpuc" "$SRC" --config "$CONFIG" --precision "$PRECISION" --emit asm -o "$OUT/model.s"
sed -n '/kernel plan/,$p' "$OUT/passes.txt" | sed 's/^/   /'
echo "   (the IR after every pass: $OUT/passes.txt; the commented assembly: $OUT/model.s)"

inputs=()
for a in "$MODEL"/arg*.npy; do inputs+=("$a"); done
# jax.jit drops unused arguments; the examples here use all of theirs.
echo "== tpusim $OUT/model.tpu --config $CONFIG --inputs ${inputs[*]}"
"$BIN/tpusim" "$OUT/model.tpu" --config "$CONFIG" --inputs "${inputs[@]}" --outputs "$OUT" \
  --stats "$OUT/stats.json" --stats-interval 100 --vcd "$OUT/run.vcd" --trace "$OUT/trace.json" --report "$OUT/report" --profile

status=0
for ref in "$MODEL"/out*.npy; do
  tol=2e-2; [[ $PRECISION == highest ]] && tol=1e-5
  if line=$("$BIN/tpu-compare" "$ref" "$OUT/$(basename "$ref")" --tol $tol); then verdict=PASS; else verdict=FAIL status=1; fi
  echo "== check $(basename "$ref") against XLA's output: $line (tolerance $tol) $verdict"
done

python3 - "$OUT/stats.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"== stats: {s['cycles']} cycles = {s['seconds'] * 1e6:.3f} us at {s['frequency_hz'] / 1e9:g} GHz; "
      f"{s['instructions']['total']} instructions {s['instructions']['by_class']}")
print(f"   MXU {s['mxu']['macs']} MACs, MAC utilization {s['mxu']['mac_utilization']:.1%}; "
      f"HBM read {s['hbm']['bytes_read']} B, written {s['hbm']['bytes_written']} B, "
      f"bandwidth utilization {s['hbm']['bandwidth_utilization']:.1%}")
for u, v in s["units"].items():
    print(f"   {u:12} busy {v['busy_fraction']:6.1%}  stalls {v['stalls']}")
print(f"   simulated {s['host']['simulated_cycles_per_second']:.3g} cycles per host second")
PYEOF
echo "== waveforms: $OUT/run.vcd (gtkwave $OUT/run.vcd $OUT/run.vcd.gtkw groups the signals by unit)"
echo "== timeline:  $OUT/trace.json (open in ui.perfetto.dev or chrome://tracing: one track per unit, and the kernels)"
for py in python3 /usr/bin/python3; do
  if "$py" -c "import matplotlib" 2>/dev/null; then
    echo "== plots:     $("$py" scripts/plot-run.py "$OUT/stats.json" -o "$OUT/plots" | tr '\n' ' ')"
    break
  fi
done
echo "== report:    $OUT/report/index.html (open it in a browser: where the cycles went, busy units, HBM, roofline)"
exit $status
