#!/usr/bin/env bash
# tpusim --report DIR and scripts/plot-run.py, headless: the page has its
# tables and four charts; the plot script writes four non-empty PNGs.
# Exits 77 (CTest: skipped) when python3-matplotlib is missing, after
# checking the report.
#   tests/tools/report_test.sh BIN_DIR SRC_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
m=$src/tests/corpus/lenet
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
"$bin/tpuc" "$m/module.stablehlo.mlir" --config v5e -o "$work/lenet.tpu"
"$bin/tpusim" "$work/lenet.tpu" --inputs "$m"/arg{0,1,2,3,4}.npy --report "$work/report" --stats-interval 250 \
  --trace "$work/report/trace.json" -q
page=$work/report/index.html
for want in "Where the cycles went: kernels" "Where the cycles went: HLO ops" "kernel 10: copy" "Roofline" \
            "Stalls by cause" 'href="trace.json"' 'href="stats.json"'; do
  grep -qF "$want" "$page" || { echo "index.html lacks '$want'"; exit 1; }
done
[ "$(grep -o '<svg' "$page" | wc -l)" -eq 4 ] || { echo "index.html should have 4 charts"; exit 1; }
echo "report: $page has its tables and 4 charts"
py=""
for p in python3 /usr/bin/python3; do  # Debian's python3 has python3-matplotlib; another python3 may come first on PATH
  if "$p" -c "import matplotlib" 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "SKIPPED: python3-matplotlib is not installed (scripts/setup.sh installs it)"
  exit 77
fi
"$py" "$src/scripts/plot-run.py" "$work/report/stats.json" -o "$work/plots"
for p in utilization hbm roofline stalls; do
  [ -s "$work/plots/$p.png" ] || { echo "plot-run.py wrote no $p.png"; exit 1; }
done
echo "plot-run.py: 4 PNGs"
