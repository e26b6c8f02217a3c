#!/usr/bin/env bash
# Sets everything up (Debian packages, configure, build) and runs the whole test suite
# with ctest. GPU tests skip with a message where there is no GPU. Extra arguments go
# to ctest (e.g. scripts/test.sh -R protocol).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=${BUILD_DIR:-build}
cd "$root/$build"
ctest --output-on-failure -j"$(nproc)" "$@"
