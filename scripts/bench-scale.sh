#!/usr/bin/env bash
# How tpuc scales (docs/performance.md, "Compiling at model scale"): the
# programs of scripts/bench/scale.py compiled for their preset; prints the
# instructions, the peak HBM the program uses, and tpuc's wall time and
# peak resident memory (GNU time), or the first line of its error.
#
#   scripts/bench-scale.sh [NAME:CONFIG ...]
#
# A compile that runs past TPUC_TIMEOUT seconds (default 300) is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
TIMEOUT=${TPUC_TIMEOUT:-300}
CASES=("$@")
((${#CASES[@]})) || CASES=(dot_f32_1024:tiny chain24:tiny ffn12:v5e ffn12_scan:v5e gpt2_scan:v5e attn12:v5e attn48:v5e fori1000:v5e fori5000:v5e fori20000:v5e while_data:v5e)
[[ -x $BIN/tpuc ]] || scripts/setup.sh >/dev/null
[[ -x /usr/bin/time ]] || { echo "bench-scale.sh: needs GNU time (apt-get install time)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf '%-14s %-5s %12s %14s %9s %9s  %s\n' program config instructions "peak HBM" seconds "RSS MiB" note
for c in "${CASES[@]}"; do
  name=${c%%:*} cfg=${c#*:}
  d="$WORK/$name-$cfg"
  python3 scripts/bench/scale.py "$name" "$d"
  set +e
  timeout "$TIMEOUT" /usr/bin/time -f '%e %M' -o "$d/time" "$BIN/tpuc" "$d/module.hlo" --config "$cfg" -o "$d/p.tpu" 2>"$d/err"
  rc=$?
  set -e
  read -r secs kib < <(tail -1 "$d/time" 2>/dev/null || echo "- 0")
  if ((rc == 0)); then
    read -r insns peak < <("$BIN/tpu-objdump" "$d/p.tpu" | awk '/^# [0-9]+ instructions/ { n = $2 } /^\.hbm_peak/ { p = $2 } END { print n, p }')
    note=""
  else
    insns=- peak=-
    note=$( ((rc == 124)) && echo "stopped after ${TIMEOUT} s" || head -1 "$d/err")
  fi
  printf '%-14s %-5s %12s %14s %9s %9s  %s\n' "$name" "$cfg" "$insns" "$peak" "$secs" "$((kib / 1024))" "$note"
done
