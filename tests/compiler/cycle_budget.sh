#!/usr/bin/env bash
# The compiler's cycle budget: every program of cycle_budget.txt (corpus
# programs, the GEMMs of scripts/bench-compiler.sh and the while loops of
# scripts/bench/scale.py) is compiled and run on its preset, and fails the
# test when it takes more than 1% more cycles than its budget. A faster schedule is reported; lower the budget with
# --update in the commit that makes it faster (and say why there).
#
#   tests/compiler/cycle_budget.sh BIN_DIR SOURCE_DIR [--update]
set -euo pipefail
bin=$1 src=$2 update=${3:-}
budget="$src/tests/compiler/cycle_budget.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

# run DIR CONFIG INPUT...: compiles DIR/module.hlo, runs it on INPUTs and
# prints its simulated cycles.
run() {
  local d=$1 cfg=$2
  shift 2
  "$bin/tpuc" "$d/module.hlo" --config "$cfg" -o "$d/p.tpu"
  "$bin/tpusim" "$d/p.tpu" --config "$cfg" --inputs "$@" --stats "$d/stats.json" -q
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cycles"])' "$d/stats.json"
}

# cycles CONFIG PROGRAM: the simulated cycles of one budget line's program.
cycles() {
  local cfg=$1 prog=$2 d="$work/${2//\//-}-$1"
  case $prog in
    corpus/*)
      TPU_BIN=$bin "$src/scripts/run-corpus.sh" --config "$cfg" "$src/tests/$prog" |
        awk '$1 == "PASS" { print $NF; found = 1 } END { if (!found) exit 1 }' ;;
    gemm/*)
      local shape=${prog#gemm/}
      python3 "$src/scripts/bench/gemm.py" ${shape//x/ } "$d"
      run "$d" "$cfg" "$d/a.npy" "$d/b.npy" ;;
    scale/*)
      python3 "$src/scripts/bench/scale.py" "${prog#scale/}" "$d" --inputs
      run "$d" "$cfg" "$d"/in*.npy ;;
    *) echo "cycle_budget.sh: unknown program $prog" >&2; return 1 ;;
  esac
}

status=0
out="$work/budget.txt"
while IFS= read -r line; do
  if [[ -z $line || $line == \#* ]]; then
    echo "$line" >>"$out"
    continue
  fi
  read -r cfg prog want <<<"$line"
  if ! got=$(cycles "$cfg" "$prog"); then
    echo "FAIL $cfg $prog: did not run"
    status=1
    continue
  fi
  printf '%s %s %s\n' "$cfg" "$prog" "$got" >>"$out"
  if ((got * 100 > want * 101)); then
    echo "FAIL $cfg $prog: $got cycles, budget $want (+$(((got - want) * 1000 / want / 10)).$(((got - want) * 1000 / want % 10))%)"
    status=1
  elif ((got * 100 < want * 99)); then
    echo "FASTER $cfg $prog: $got cycles, budget $want (lower it: $0 ... --update)"
  else
    echo "ok $cfg $prog: $got cycles, budget $want"
  fi
done <"$budget"
if [[ $update == --update ]]; then
  cp "$out" "$budget"
  echo "wrote $budget"
  exit 0
fi
exit $status
