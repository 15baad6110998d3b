#!/usr/bin/env bash
# Loops against straight code on the corpus (docs/performance.md, "Loops"):
# the programs of tests/corpus compiled by tpuc with and without loops
# (--no-loops) for each preset and run by tpusim (scripts/run-corpus.sh).
# Prints a markdown table of instructions and cycles (each preset's default
# HBM model); fails if a program's outputs differ with and without loops.
#
#   scripts/bench-loops.sh [PRESET...]     (default: tiny v1 v5e v4)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
PRESETS=("$@")
((${#PRESETS[@]})) || PRESETS=(tiny v1 v5e v4)
[[ -x $BIN/tpusim ]] || scripts/setup.sh >/dev/null
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 TPU_BIN=$BIN
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "| preset | program | instructions, straight | loops | cycles, straight | loops | change |"
echo "|---|---|---|---|---|---|---|"
status=0
for cfg in "${PRESETS[@]}"; do
  scripts/run-corpus.sh --config "$cfg" --no-loops --keep "$WORK/$cfg-straight" tests/corpus >"$WORK/$cfg-straight.txt" || status=1
  scripts/run-corpus.sh --config "$cfg" --keep "$WORK/$cfg-loops" tests/corpus >"$WORK/$cfg-loops.txt" || status=1
  for d in "$WORK/$cfg-loops"/*/; do
    name=$(basename "$d") s="$WORK/$cfg-straight/$name"
    [[ -f $d/stats.json && -f $s/stats.json ]] || continue
    if ! diff -rq "$s/res" "$d/res" >/dev/null; then
      echo "bench-loops: $cfg $name: outputs differ with and without loops" >&2
      status=1
    fi
    python3 - "$cfg" "$name" "$s" "$d" "$BIN/tpu-objdump" <<'PY'
import json, subprocess, sys
cfg, name, s, l, objdump = sys.argv[1:]
ins = lambda d: int(subprocess.run([objdump, f"{d}/prog.tpu"], capture_output=True, text=True).stdout.split()[1])
cyc = lambda d: json.load(open(f"{d}/stats.json"))["cycles"]
cs, cl = cyc(s), cyc(l)
print(f"| {cfg} | {name} | {ins(s):,} | {ins(l):,} | {cs:,} | {cl:,} | {(cl - cs) / cs * 100:+.2f}% |")
PY
  done
done
grep -h '^FAIL' "$WORK"/*.txt >&2 || true
exit $status
