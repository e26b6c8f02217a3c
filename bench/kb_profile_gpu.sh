#!/usr/bin/env bash
# On the GPU machine: the rules coder's seeds for some KernelBench problems, kernel by
# kernel against eager and torch.compile (bench/kb_kernel_profile.py), to see where a
# gap to torch.compile lies. Builds kernelskill, imports the problems, lowers each with
# SEEDS seeds (2), exports every seed and profiles them; the tables go to
# $OUT/profile.log and one JSON per problem to $OUT.
#
#   bench/kb_profile_gpu.sh PROBLEM.py ...       (e.g. .devdeps/KernelBench/level2/1_*.py)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-kb-profile-out}
work=build-gpu/kb-profile
mkdir -p "$out" "$work"
source .devdeps/env.sh
if ! { cmake -S . -B build-gpu -G Ninja $KS_CMAKE_ARGS && cmake --build build-gpu -j16 --target kernelskill kernelskill-gpu; } >"$out/build.log" 2>&1; then
  tail -30 "$out/build.log"; echo "kb_profile_gpu: build failed"; exit 1
fi
ks=build-gpu/bin/kernelskill
$ks import kernelbench "$@" --out "$work/tasks" --python python3 --jobs 4 >"$out/import.log" 2>&1 || tail -5 "$out/import.log"
# profile PROBLEM [--build-only]: lowers and exports its seeds (once), then builds or profiles them.
profile() {
  local p=$1 name task; name=$(basename "$p" .py)
  task=$(ls "$work"/tasks/*"$name".yaml "$work"/tasks/*/*"$name".yaml 2>/dev/null | head -1)
  [ -n "$task" ] || { echo "$name: not imported"; return; }
  local d="$work/$name" models=() k
  if [ ! -f "$d/seed-0.cu" ]; then
    $ks lower "$task" --out "$d" --seeds "${SEEDS:-2}" >"$d.lower.log" 2>&1 || { tail -3 "$d.lower.log"; return; }
  fi
  for k in $(ls "$d" | sed -n 's/^seed-\([0-9]*\)\.cu$/\1/p' | sort -n); do
    [ -f "$d/model-$k.py" ] || $ks export --task "$task" --kernel "$d/seed-$k.cu" --plan "$d/seed-$k.yaml" \
      --out "$d/model-$k.py" >"$d/export-$k.log" 2>&1 || { tail -3 "$d/export-$k.log"; continue; }
    models+=(--model "seed-$k=$d/model-$k.py")
    [ -n "${2:-}" ] || grep -h "origin\|stages\|conv_layout" "$d/seed-$k.yaml" | head -4 | sed "s/^/  $name seed-$k: /"
  done
  python3 bench/kb_kernel_profile.py --problem "$p" "${models[@]}" --builds "$work/builds" --out "$out/$name.json" ${2:-}
}
# the extensions build in parallel (one problem per process), then each problem is
# profiled alone on the GPU
for p in "$@"; do profile "$p" --build-only >"$work/$(basename "$p" .py).build.log" 2>&1 & done
wait
for p in "$@"; do profile "$p"; done 2>&1 | tee "$out/profile.log"
