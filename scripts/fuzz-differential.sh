#!/usr/bin/env bash
# The long run of the differential test: COUNT random valid HLO programs
# (tests/robustness/gen_hlo.py) from FIRST_SEED, each compiled and simulated
# on a random legal machine and compared with tpuc's interpreter. The first
# seed is printed, so any failure can be replayed alone.
#
#   scripts/fuzz-differential.sh [COUNT] [FIRST_SEED] [OPS]
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-1000}
FIRST=${2:-$(( (RANDOM << 15 | RANDOM) + 1000 ))}
echo "fuzz-differential: seeds $FIRST..$((FIRST + COUNT - 1))"
exec tests/robustness/differential.sh "${BUILD_DIR:-build}/bin" "${BUILD_DIR:-build}/fuzz-differential" "$FIRST" "$COUNT" "${@:3}"
