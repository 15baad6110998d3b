#!/usr/bin/env bash
# Builds (through setup.sh) and runs the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --parallel "$(nproc)" "$@"
