#!/usr/bin/env bash
# Runs every program folder (corpus layout: module.hlo, argN.npy, outN.npy,
# manifest.json) through tpuc and tpusim and prints one line per program:
# PASS/FAIL, the worst normwise relative error against the reference, cycles.
#
#   scripts/run-corpus.sh [--config tiny] [--precision highest] [--tol 1e-5] [--no-loops] [--keep DIR] DIR...
#
# --no-loops compiles straight-line code (tpuc --no-loops); --keep DIR keeps
# each program's DIR/NAME/prog.tpu, stats.json and res/ (its outputs).
# DIR is a program folder or a folder of them. Tolerances (unless --tol):
# integer outputs exact; f32 1e-5 at --precision highest, 2e-2 otherwise;
# bf16 outputs 1e-2. Programs whose name ends in _4 (SPMD, 4 devices) run on
# a system of 4 chips (docs/system.md).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${TPU_BIN:-$root/build/bin}"
config=v5e precision="" tol="" keep=""
dirs=() tflags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --precision) precision="$2"; shift 2 ;;
    --tol) tol="$2"; shift 2 ;;
    --no-loops) tflags+=(--no-loops); shift ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "run-corpus.sh: unknown flag $1" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
[ ${#dirs[@]} -gt 0 ] || { echo "usage: scripts/run-corpus.sh [--config CFG] [--precision P] [--tol X] [--no-loops] [--keep DIR] DIR..." >&2; exit 2; }
programs=()
for d in "${dirs[@]}"; do
  [ -d "$d" ] || { echo "run-corpus.sh: $d is not a folder" >&2; exit 2; }
  if [ -f "$d/module.hlo" ]; then programs+=("$d"); else for p in "$d"/*/; do [ -f "$p/module.hlo" ] && programs+=("${p%/}"); done; fi
done
[ ${#programs[@]} -gt 0 ] || { echo "run-corpus.sh: no program folder (module.hlo, argN.npy, outN.npy, manifest.json) in ${dirs[*]}" >&2; exit 2; }
for p in "${programs[@]}"; do
  [ -f "$p/manifest.json" ] || { echo "run-corpus.sh: $p has no manifest.json (its arguments' and outputs' files and dtypes)" >&2; exit 2; }
done
if [ -n "$keep" ]; then mkdir -p "$keep" && work="$keep"; else work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT; fi
failed=0
for p in "${programs[@]}"; do
  name="$(basename "$p")"
  out="$work/$name"; mkdir -p "$out"
  pflag=(); [ -n "$precision" ] && pflag=(--precision "$precision")
  if ! err=$("$bin/tpuc" "$p/module.hlo" --config "$config" "${pflag[@]}" "${tflags[@]}" -o "$out/prog.tpu" 2>&1); then
    printf "FAIL %-20s tpuc: %s\n" "$name" "$err"; failed=1; continue
  fi
  # jax.jit drops unused arguments: map ENTRY parameters to manifest args by
  # shape and dtype, in order.
  mapfile -t args < <(python3 - "$p" "$out/prog.tpu" "$bin/tpu-objdump" <<'PY'
import json, subprocess, sys, re
d, prog, objdump = sys.argv[1:4]
m = json.load(open(f"{d}/manifest.json"))
names = {"float32": "f32", "int8": "s8", "int32": "s32", "bfloat16": "bf16", "bool": "pred"}
params = []
for line in subprocess.run([objdump, prog], capture_output=True, text=True).stdout.splitlines():
    mm = re.match(r"\.input \S+, (\w+)\[([^\]]*)\]", line)
    if mm:
        params.append((mm.group(1), [int(x) for x in mm.group(2).replace(" ", "").split(",") if x]))
i = 0
for dt, shape in params:
    while i < len(m["args"]) and (names.get(m["args"][i]["dtype"]) != dt or m["args"][i]["shape"] != shape):
        i += 1
    print(f"{d}/{m['args'][i]['file']}" if i < len(m["args"]) else "MISSING")
    i += 1
PY
)
  if printf '%s\n' "${args[@]}" | grep -q MISSING; then printf "FAIL %-20s cannot map parameters to arguments\n" "$name"; failed=1; continue; fi
  if ! err=$("$bin/tpusim" "$out/prog.tpu" --config "$config" --inputs "${args[@]}" --outputs "$out/res" --stats "$out/stats.json" -q 2>&1); then
    printf "FAIL %-20s tpusim: %s\n" "$name" "$err"; failed=1; continue
  fi
  cycles=$(grep -o '"cycles": *[0-9]*' "$out/stats.json" | head -1 | grep -o '[0-9]*$')
  worst=0 status=PASS
  for ref in "$p"/out*.npy; do
    got="$out/res/$(basename "$ref")"
    dtype=$(python3 -c "import json,sys; m=json.load(open('$p/manifest.json')); print([o['dtype'] for o in m['outs'] if o['file']=='$(basename "$ref")'][0])")
    t="$tol"
    if [ -z "$t" ]; then
      case "$dtype" in
        int*|uint*|bool) t=0 ;;
        bfloat16) t=1e-2 ;;
        *) if [ "$precision" = highest ]; then t=1e-5; else t=2e-2; fi ;;
      esac
    fi
    line=$("$bin/tpu-compare" "$ref" "$got" --tol "$t"); rc=$?
    err=$(echo "$line" | awk '{print $2}')
    worst=$(python3 -c "print(max(float('$worst'), float('$err')))")
    [ $rc -eq 0 ] || status=FAIL
  done
  [ "$status" = PASS ] || failed=1
  printf "%s %-20s rel_err %-10s cycles %s\n" "$status" "$name" "$worst" "$cycles"
done
exit $failed
