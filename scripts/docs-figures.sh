#!/usr/bin/env bash
# Regenerates the figures the docs show from the current build, and prints
# the figures README quotes beside them (tests/tools/readme_figures.sh
# checks those against the build):
#   docs/img/lenet-utilization.png  LeNet (tests/corpus/lenet) on v5e,
#                                   scripts/plot-run.py's unit busy bands
#
#   scripts/docs-figures.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
[[ -x $BIN/tpusim ]] || scripts/setup.sh >/dev/null
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
c=tests/corpus/lenet
"$BIN/tpuc" $c/module.hlo --config v5e -o "$WORK/lenet.tpu"
"$BIN/tpusim" "$WORK/lenet.tpu" --inputs $(ls $c/arg*.npy | sort -V) --stats "$WORK/stats.json" --stats-interval 500 --profile |
  awk '$0 ~ /: copy ->/ { printf "README: tpusim --profile puts one copy kernel at %.0f%% of the run\n", $3; exit }'
/usr/bin/python3 scripts/plot-run.py "$WORK/stats.json" -o "$WORK/plots" >/dev/null
cp "$WORK/plots/utilization.png" docs/img/lenet-utilization.png
echo "docs-figures: wrote docs/img/lenet-utilization.png"
