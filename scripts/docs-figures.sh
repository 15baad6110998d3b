#!/usr/bin/env bash
# Regenerates the figures the docs show from the current build, and prints
# the figure README quotes beside them:
#   docs/img/lenet-utilization.png  LeNet (tests/corpus/lenet) on v5e,
#                                   scripts/plot-run.py's unit busy bands
# With --check, draws nothing and fails when README's quoted share of the
# run (its largest copy kernel's, from tpusim --profile) is not the build's
# (the docs.readme_figures test).
#
#   scripts/docs-figures.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
[[ -x $BIN/tpusim ]] || scripts/setup.sh >/dev/null
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
c=tests/corpus/lenet
"$BIN/tpuc" $c/module.hlo --config v5e -o "$WORK/lenet.tpu"
share=$("$BIN/tpusim" "$WORK/lenet.tpu" --inputs $(ls $c/arg*.npy | sort -V) --stats "$WORK/stats.json" --stats-interval 500 --profile |
  awk '$0 ~ /: copy ->/ { printf "%.0f", $3; exit }')
[[ -n $share ]] || { echo "docs-figures: no copy kernel in LeNet's profile" >&2; exit 1; }
if [[ ${1:-} == --check ]]; then
  quoted=$(tr '\n' ' ' <README.md | grep -o 'puts one copy kernel at [0-9]*% of the run' | grep -o '[0-9]*' || true)
  [[ -n $quoted ]] || { echo "docs-figures: README no longer quotes LeNet's copy kernel share" >&2; exit 1; }
  if [[ $quoted != "$share" ]]; then
    echo "docs-figures: README says one copy kernel takes $quoted% of LeNet's run on v5e; the build gives $share% (scripts/docs-figures.sh)" >&2
    exit 1
  fi
  echo "docs-figures: LeNet's largest copy kernel takes $share% of the run, as README says"
  exit 0
fi
echo "README: tpusim --profile puts one copy kernel at $share% of the run"
/usr/bin/python3 scripts/plot-run.py "$WORK/stats.json" -o "$WORK/plots" >/dev/null
cp "$WORK/plots/utilization.png" docs/img/lenet-utilization.png
echo "docs-figures: wrote docs/img/lenet-utilization.png"
