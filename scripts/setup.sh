#!/usr/bin/env bash
# Installs the Debian packages the build needs (only those missing), then
# configures and builds everything into build/bin/. Safe to run repeatedly.
#
#   scripts/setup.sh              Release build in build/
#   BUILD_DIR=... CMAKE_ARGS=... scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libsystemc-dev verilator catch2 libfmt-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev zlib1g-dev yosys gtkwave python3 python3-numpy python3-matplotlib
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" --parallel "$(nproc)"
echo "setup: tools are in $BUILD_DIR/bin/"
