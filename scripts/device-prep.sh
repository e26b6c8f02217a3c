#!/usr/bin/env bash
# Prepares .devdeps/ (git-ignored; carried with each device call) on the machine that
# sends the calls, in one step: the Debian libraries (../shared/device/prepare.sh), the
# OpenSSL runtime that script leaves out (without it the worker's TLS links against an
# emptied libssl.a and fails: docs/gpu-machine.md), and KernelBench's problems from the
# search tool's fetched mirror into .devdeps/KernelBench, where bench/ looks for them.
#
#   scripts/device-prep.sh            PREPARE= another prepare.sh, KB_MIRROR= another
#                                     KernelBench git directory (default: the fetch's)
# Then a device call: carry [".devdeps"], command e.g.
#   NAME=kb-l3 PICK3=1-50 SEEDS=1 ROUNDS=0 WALL=570 bench/run.sh kernelbench
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
prepare=${PREPARE:-$root/../shared/device/prepare.sh}
[ -f "$prepare" ] || { echo "device-prep: $prepare does not exist (PREPARE= names it)" >&2; exit 2; }
bash "$prepare"
lib=.devdeps/sysroot/usr/lib/x86_64-linux-gnu
for so in libssl.so.3 libcrypto.so.3; do
  if [ ! -e "$lib/$so" ]; then
    [ -e "/usr/lib/x86_64-linux-gnu/$so" ] || { echo "device-prep: /usr/lib/x86_64-linux-gnu/$so is missing (apt-get install libssl3)" >&2; exit 1; }
    cp -L "/usr/lib/x86_64-linux-gnu/$so" "$lib/"
  fi
done
mirror=${KB_MIRROR:-/work/.mirror/ScalingIntelligence+KernelBench/repo}
if git --git-dir="$mirror" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  rm -rf .devdeps/KernelBench
  git --git-dir="$mirror" archive HEAD KernelBench | tar -x -C .devdeps
  echo "device-prep: KernelBench $(git --git-dir="$mirror" rev-parse --short HEAD) in .devdeps/KernelBench ($(ls .devdeps/KernelBench/level*/*.py | wc -l) problems)"
else
  echo "device-prep: no KernelBench mirror at $mirror (fetch github:ScalingIntelligence/KernelBench first): .devdeps/KernelBench left as it is"
fi
echo "device-prep: .devdeps is $(du -sh .devdeps | cut -f1) (a call carries at most 64 MiB)"
