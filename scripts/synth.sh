#!/usr/bin/env bash
# Hardware cost: synthesises the MXU's units, one PE and small arrays with
# Yosys (generic gates) and prints their cell counts.
#
#   scripts/synth.sh [N...]    (array sizes, default: 2 4)
set -euo pipefail
cd "$(dirname "$0")/../hw"
command -v yosys >/dev/null || { echo "synth: yosys is needed (apt-get install yosys)" >&2; exit 1; }
SIZES=("$@")
((${#SIZES[@]})) || SIZES=(2 4)
RTL="rtl/mxu_top.v rtl/mxu_array.v rtl/mxu_pe.v rtl/mxu_bf16_mul.v rtl/mxu_f32_add.v"
cells() {  # top, [N]
  local param=""
  [[ -n ${2:-} ]] && param="chparam -set N $2 $1;"
  yosys -q -p "read_verilog -sv -Iinclude $RTL; $param synth -flatten -top $1; tee -o /dev/stdout stat" 2>/dev/null |
    awk '/Number of cells/ {print $NF; exit}'
}
printf '%-28s %10s\n' unit cells
printf '%-28s %10s\n' "mxu_bf16_mul" "$(cells mxu_bf16_mul)"
printf '%-28s %10s\n' "mxu_f32_add" "$(cells mxu_f32_add)"
printf '%-28s %10s\n' "mxu_pe (both modes)" "$(cells mxu_pe)"
for n in "${SIZES[@]}"; do
  printf '%-28s %10s\n' "mxu_top N=$n (array+control)" "$(cells mxu_top "$n")"
done
