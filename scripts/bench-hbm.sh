#!/usr/bin/env bash
# The memory system's figures (docs/memory.md, docs/performance.md):
#  1. trace replay speed: simulated HBM requests per host second (detailed
#     model, checker on and off) on the traces of tests/hbm;
#  2. programs on v5e with the detailed model against the HBM bound (bytes
#     moved / peak bandwidth): an f32[4096,4096] add and a bf16
#     512x1024 @ 1024x768 GEMM, and where the rest of the time went;
#  3. host time of the detailed model against the simple one, measured in the
#     same run: a compute-bound 2048^3 GEMM and the corpus;
#  4. two cores sharing the channels: the add on v4, each core doing half
#     of it (megacore), against one core doing all of it.
#
#   scripts/bench-hbm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
[[ -x $BIN/tpusim ]] || scripts/setup.sh >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY=/usr/bin/python3
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; one simulation at a time"

echo "== 1. trace replay (hbm2), best of 3"
for t in seq_read rand_read bank_pingpong idle_read; do
  gunzip -c "tests/hbm/$t.trace.gz" >"$WORK/$t.trace"
  for check in on off; do
    flag=""
    [[ $check == off ]] && flag=--no-dram-check
    for i in 1 2 3; do "$BIN/tpusim" --hbm-trace "$WORK/$t.trace" --config hbm2 $flag --stats "$WORK/$t-$check-$i.json" -q; done
  done
  $PY - "$WORK" "$t" <<'PY'
import json, sys
w, t = sys.argv[1:]
best = {c: max(json.load(open(f"{w}/{t}-{c}-{i}.json"))["host"]["requests_per_second"] for i in (1, 2, 3)) for c in ("on", "off")}
print(f"{t:14s} {best['on'] / 1e6:6.2f} M requests/s with the checker, {best['off'] / 1e6:6.2f} M without")
PY
done

# An HLO program: NAME M K N (gemm) or NAME R C (add of two f32[R,C]).
gen() {
  local d=$WORK/$1
  mkdir -p "$d"
  if [[ $2 == gemm ]]; then
    $PY scripts/bench/gemm.py "$3" "$4" "$5" "$d"
  else
    $PY - "$d" "$3" "$4" <<'PY'
import sys, numpy as np
d, r, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
open(f"{d}/module.hlo", "w").write(f"""HloModule jit_add

ENTRY main {{
  a = f32[{r},{c}]{{1,0}} parameter(0)
  b = f32[{r},{c}]{{1,0}} parameter(1)
  ROOT s = f32[{r},{c}]{{1,0}} add(a, b)
}}
""")
rng = np.random.default_rng(3)
np.save(f"{d}/a.npy", rng.standard_normal((r, c), dtype=np.float32))
np.save(f"{d}/b.npy", rng.standard_normal((r, c), dtype=np.float32))
PY
  fi
}

# run NAME CONFIG MODEL [--set ...]: compile for CONFIG with MODEL (its
# bandwidth and latency are the schedule's estimates), simulate with MODEL.
run() {
  local d=$WORK/$1 cfg=$2 model=$3
  shift 3
  "$BIN/tpuc" "$d/module.hlo" --config "$cfg" "$@" --set hbm.model="$model" -o "$d/$cfg.tpu"
  "$BIN/tpusim" "$d/$cfg.tpu" --config "$cfg" "$@" --set hbm.model="$model" --inputs "$d/a.npy" "$d/b.npy" \
    --stats "$d/$cfg-$model.json" -q
}

echo "== 2. programs on v5e (detailed HBM) against the HBM bound"
gen add add 4096 4096
gen gemm gemm 512 1024 768
for p in add gemm; do
  for m in detailed simple; do run $p v5e $m; done
  $PY - "$WORK/$p/v5e-detailed.json" "$WORK/$p/v5e-simple.json" "$p" <<'PY'
import json, sys
d, s, name = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3])
h = d["hbm"]
moved = h["bytes_read"] + h["bytes_written"]
bound = moved / (h["peak_bandwidth_bytes_per_s"] / d["frequency_hz"])
print(f"{name}: {d['cycles']} cycles detailed ({bound / d['cycles']:.1%} of the HBM bound of {bound:.0f}), "
      f"{s['cycles']} simple ({moved / (s['hbm']['peak_bandwidth_bytes_per_s'] / s['frequency_hz']) / s['cycles']:.1%}); "
      f"row hits {h['row_hit_rate']:.3f}, data bus {h['data_bus_utilization']:.1%}, refresh {h['refresh_fraction']:.1%}, "
      f"waiting on activates {h['activate_wait_fraction']:.1%}, read latency mean {h['read_latency_cycles']['mean']:.0f} "
      f"p99 {h['read_latency_cycles']['p99']} tCK, crossbar stalls {d['noc']['links'][0]['stall_cycles']} cycles")
PY
done

echo "== 3. host time, detailed against simple (v5e), best of 3"
gen big gemm 2048 2048 2048
for m in detailed simple; do for i in 1 2 3; do run big v5e $m; cp "$WORK/big/v5e-$m.json" "$WORK/big-$m-$i.json"; done; done
$PY - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
best = {m: min((json.load(open(f"{w}/big-{m}-{i}.json")) for i in (1, 2, 3)), key=lambda j: j["host"]["wall_seconds"]) for m in ("detailed", "simple")}
d, s = best["detailed"], best["simple"]
print(f"2048^3 bf16 GEMM: detailed {d['host']['wall_seconds']:.2f} s ({d['cycles']} cycles), simple {s['host']['wall_seconds']:.2f} s "
      f"({s['cycles']} cycles): {d['host']['wall_seconds'] / s['host']['wall_seconds']:.2f}x the host time")
PY
for m in detailed simple; do
  "$BIN/tpusim" --print-config v5e --set hbm.model=$m >"$WORK/v5e-$m.json"
  start=$(date +%s.%N)
  TPU_BIN=$BIN scripts/run-corpus.sh --config "$WORK/v5e-$m.json" tests/corpus >"$WORK/corpus-$m.txt" 2>&1 || true
  end=$(date +%s.%N)
  echo "corpus on v5e with $m: $($PY -c "print(f'{$end - $start:.1f}')") s of host time, compile included ($(grep -c PASS "$WORK/corpus-$m.txt" || true) programs passed)"
done

echo "== 4. two cores sharing the channels (v4, detailed)"
run add v4 detailed --set target.cores=1
cp "$WORK/add/v4-detailed.json" "$WORK/v4-one.json"
run add v4 detailed
$PY - "$WORK/v4-one.json" "$WORK/add/v4-detailed.json" <<'PY'
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:])
for name, j in (("one core ", one), ("two cores", two)):
    h = j["hbm"]
    print(f"{name}: {j['cycles']} cycles, {h['bytes_read'] + h['bytes_written']} bytes ({h['bandwidth_utilization']:.1%} of the peak), "
          f"read latency mean {h['read_latency_cycles']['mean']:.0f} tCK, crossbar stalls {[l['stall_cycles'] for l in j['noc']['links']]}")
print(f"two cores take {two['cycles'] / one['cycles']:.2f}x one core's cycles for the same bytes")
PY
