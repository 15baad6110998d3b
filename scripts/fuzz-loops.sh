#!/usr/bin/env bash
# Loops against straight code on large random bf16 GEMMs: COUNT shapes from
# SEED (M up to about 9,000 rows, K and N up to about 3,000; every other M a
# multiple of 512, so groups of steady blocks fill), each compiled by tpuc
# with and without loops (--no-loops) for v5e or v4 and run by tpusim on the
# same random inputs. The outputs must be identical, bit for bit; a loop
# that runs more than 1% slower than its straight code is reported. Minutes
# per shape: a long run, not a test (the loops: CTests keep a few shapes).
#
#   scripts/fuzz-loops.sh [COUNT] [SEED]
set -uo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-20}
SEED=${2:-$(( (RANDOM << 15 | RANDOM) + 1 ))}
bin=${BUILD_DIR:-build}/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
echo "fuzz-loops: $COUNT shapes from seed $SEED"
RANDOM=$SEED
status=0
cycles() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cycles"])' "$1"; }
for _ in $(seq 1 "$COUNT"); do
  cfg=$( ((RANDOM % 2)) && echo v5e || echo v4)
  m=$((256 + RANDOM % 9000)) k=$((128 + RANDOM % 3000)) n=$((128 + RANDOM % 3000))
  ((RANDOM % 2)) && m=$(((m / 512 + 1) * 512))
  python3 scripts/bench/gemm.py "$m" "$k" "$n" "$work/g"
  ok=1
  for mode in loops straight; do
    flag=()
    [[ $mode == straight ]] && flag=(--no-loops)
    if ! "$bin/tpuc" "$work/g/module.hlo" --config "$cfg" "${flag[@]}" -o "$work/$mode.tpu" ||
       ! "$bin/tpusim" "$work/$mode.tpu" --config "$cfg" --inputs "$work/g/a.npy" "$work/g/b.npy" \
           --outputs "$work/out-$mode" --stats "$work/$mode.json" -q; then
      echo "FAIL $cfg ${m}x${k}x${n}: $mode did not run"
      ok=0
    fi
  done
  if ((ok == 0)); then status=1; continue; fi
  l=$(cycles "$work/loops.json") s=$(cycles "$work/straight.json")
  if ! cmp -s "$work/out-loops/out0.npy" "$work/out-straight/out0.npy"; then
    echo "FAIL $cfg ${m}x${k}x${n}: outputs differ (loops $l cycles, straight $s)"
    status=1
  elif ((l * 100 > s * 101)); then
    echo "SLOWER $cfg ${m}x${k}x${n}: loops $l cycles, straight $s (+$(((l - s) * 1000 / s / 10)).$(((l - s) * 1000 / s % 10))%)"
  else
    echo "ok $cfg ${m}x${k}x${n}: loops $l cycles, straight $s"
  fi
  rm -rf "$work/out-loops" "$work/out-straight"
done
exit $status
