#!/usr/bin/env bash
# On the GPU machine: the rules coder's seeds for some KernelBench problems, kernel by
# kernel against eager and torch.compile (bench/kernelbench/profile.py), to see where a
# gap to torch.compile lies. Imports the problems, lowers each with SEEDS seeds (2),
# exports every seed and profiles them; the tables go to $OUT/profile.log and one JSON
# per problem to $OUT.
#
#   bench/run.sh kb-profile PROBLEM.py ...     (e.g. .devdeps/KernelBench/level2/1_*.py)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/kernelbench/profile.sh PROBLEM.py ...
set -uo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
out=$OUT
work=$BUILD/kb-profile
mkdir -p "$work"
ks=$BUILD/bin/kernelskill
$ks import kernelbench "$@" --out "$work/tasks" --python "$PYTHON" --jobs 4 >"$out/import.log" 2>&1 || tail -5 "$out/import.log"
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
  "$PYTHON" bench/kernelbench/profile.py --problem "$p" "${models[@]}" --builds "$work/builds" --out "$out/$name.json" ${2:-}
}
# the extensions build in parallel (one problem per process), then each problem is
# profiled alone on the GPU
for p in "$@"; do profile "$p" --build-only >"$work/$(basename "$p" .py).build.log" 2>&1 & done
wait
for p in "$@"; do profile "$p"; done 2>&1 | tee "$out/profile.log"
