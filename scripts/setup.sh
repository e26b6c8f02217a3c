#!/usr/bin/env bash
# Installs every Debian package the build needs (idempotent), then configures and
# builds KernelSkill into ./build. Safe to run again: apt-get skips what is there and
# the build is incremental.
#
#   scripts/setup.sh            install + configure + build
#   scripts/setup.sh --deps     install only
#   BUILD_DIR=out scripts/setup.sh   build elsewhere
#   KS_WERROR=ON scripts/setup.sh    warnings are errors (CI: .ci/run)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

packages=(
  build-essential cmake ninja-build pkg-config git
  libcaf-dev librocksdb-dev libyaml-cpp-dev libspdlog-dev catch2 nlohmann-json3-dev
  libcpp-httplib-dev libcli11-dev libtorch-dev libopenblas0-pthread libssl-dev
  python3-torch  # the importer runs KernelBench problems with it (kernelbench_import_test)
  chromium  # headless, for dashboard_test (skipped without it)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -q >/dev/null
  $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "${1:-}" = "--deps" ] && exit 0

if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "setup: the CUDA Toolkit (NVRTC, CUPTI) is expected at /usr/local/cuda;" \
       "install CUDA 13 there or set CUDAToolkit_ROOT" >&2
fi

build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  ${KS_WERROR:+-DKS_WERROR=$KS_WERROR} ${CMAKE_ARGS:-}
cmake --build "$build" -j"$(nproc)"
