#!/usr/bin/env bash
# Differential testing of the whole toolchain on random valid HLO programs
# (gen_hlo.py): for each seed, tpuc + tpusim on the generated (sometimes
# extreme but legal) machine must give the outputs of tpuc's reference
# interpreter: integers exactly, floats within a normwise relative 1e-4 (dots
# at --precision highest). Any crash, hang or error counts as a failure.
#
#   tests/robustness/differential.sh BIN_DIR WORK_DIR FIRST_SEED COUNT [OPS]
#
# OPS fixes the program size (default: the generator's choice, 3 to 40).
set -uo pipefail
BIN="$(cd "$1" && pwd)" WORK=$2 FIRST=$3 COUNT=$4
OPS=()
[ $# -ge 5 ] && OPS=(--ops "$5")
HERE="$(cd "$(dirname "$0")" && pwd)"
PY=${PYTHON:-python3}
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
mkdir -p "$WORK"
failed=0
for ((seed = FIRST; seed < FIRST + COUNT; seed++)); do
  d="$WORK/seed$seed"
  rm -rf "$d"
  echo "seed $seed" >"$WORK/last-seed"
  "$PY" "$HERE/gen_hlo.py" "$seed" "$d" "${OPS[@]}" || { echo "FAIL seed $seed: the generator failed"; failed=1; continue; }
  args=()
  for a in "$d"/arg*.npy; do [ -e "$a" ] && args+=("$a"); done
  [ ${#args[@]} -gt 0 ] && mapfile -t args < <(printf '%s\n' "${args[@]}" | sort -V) && args=(--inputs "${args[@]}")
  step() {  # step WHAT CMD...: runs CMD with a time limit; any failure is the seed's
    local what=$1
    shift
    if ! timeout -s KILL 120 "$@" >"$d/$what.out" 2>"$d/$what.err"; then
      echo "FAIL seed $seed ($d): $what: $(head -c 400 "$d/$what.err")"
      failed=1
      return 1
    fi
  }
  step interpret "$BIN/tpuc" "$d/module.hlo" --interpret "${args[@]}" --outputs "$d/ref" || continue
  step compile "$BIN/tpuc" "$d/module.hlo" --config "$d/config.json" --precision highest -o "$d/prog.tpu" || continue
  step simulate "$BIN/tpusim" -q "$d/prog.tpu" --config "$d/config.json" "${args[@]}" --outputs "$d/sim" || continue
  for ref in "$d"/ref/out*.npy; do
    step "compare-$(basename "$ref" .npy)" "$BIN/tpu-compare" "$ref" "$d/sim/$(basename "$ref")" --tol 1e-4 || true
  done
done
if [ "$failed" -ne 0 ]; then
  echo "differential: failures above (seeds $FIRST..$((FIRST + COUNT - 1)); rerun one with: $0 $1 $WORK SEED 1)"
  exit 1
fi
echo "differential: seeds $FIRST..$((FIRST + COUNT - 1)) match the interpreter"
