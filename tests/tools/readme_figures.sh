#!/usr/bin/env bash
# The figures README quotes come from the current build: LeNet on v5e's
# largest copy kernel's share of the run (scripts/docs-figures.sh prints
# it and redraws the picture beside it).
#   readme_figures.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1 SRC=$2
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
c=$SRC/tests/corpus/lenet
"$BIN/tpuc" "$c/module.hlo" --config v5e -o "$WORK/lenet.tpu"
share=$("$BIN/tpusim" "$WORK/lenet.tpu" --inputs $(ls "$c"/arg*.npy | sort -V) --profile | awk '$0 ~ /: copy ->/ { printf "%.0f", $3; exit }')
[[ -n $share ]] || { echo "readme_figures: no copy kernel in LeNet's profile" >&2; exit 1; }
quoted=$(tr '\n' ' ' <"$SRC/README.md" | grep -o 'puts one copy kernel at [0-9]*% of the run' | grep -o '[0-9]*' || true)
[[ -n $quoted ]] || { echo "readme_figures: README no longer quotes LeNet's copy kernel share" >&2; exit 1; }
if [[ $quoted != "$share" ]]; then
  echo "readme_figures: README says one copy kernel takes $quoted% of LeNet's run on v5e; the build gives $share% (scripts/docs-figures.sh)" >&2
  exit 1
fi
echo "readme_figures: LeNet's largest copy kernel takes $share% of the run, as README says"
