#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer: a
# Debug build at -O1 in build-asan/ (without the Verilated RTL, whose generated code
# is checked by the release suite's lockstep tests), then CTest. Any report
# fails the test that triggered it (-fno-sanitize-recover).
#
# By default the cases that take minutes under the sanitizers are left out
# (the endless-program and size groups of the hostile tests, 150 of the 200
# differential seeds, and the large programs whose point is a cycle count or
# an instruction count the release suite checks: the cycle budget's GEMMs,
# the staggered-end, steady-block, 8-MXU, 4096^3 and loops-against-straight
# GEMMs (7992 rows too), the 16 M-element add, the collectives against the alpha-beta
# model, the GEMMs against times measured on a TPU v4, the megacore split's
# cycle ratio; the corpus on v4 runs two cores here); ASAN_ALL=1 runs them
# too.
#
#   scripts/test-asan.sh [CTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Debug -DTPUSIM_SANITIZE=ON -DTPU_RTL_SIZES=" scripts/setup.sh
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 TPUSIM_SANITIZE=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
exclude='robustness\.hostile\.(size|runs)|robustness\.differential\.seeds(51|101|151)|cycle_budget'
exclude+='|staggered ends|steady matmul blocks|every MXU of an 8-MXU core|4096\^3 GEMM|with and without loops|stay out of its loop'
exclude+='|16 M-element add|alpha-beta model|realtpu|two cores split the work'
[ -n "${ASAN_ALL:-}" ] && exclude='^$'
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" -E "$exclude" "$@"
