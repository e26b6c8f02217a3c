#!/usr/bin/env bash
# On the GPU machine, after bench/gpu_check.sh built build-gpu: the references with
# non-finite and extreme constants (tests/data/nonfinite) through the reviewer (every
# seed, bench/rules_review.sh), then each task's first seed exported as ModelNew and
# checked beside eager and torch.compile (bench/side_by_side.py: NaN only where eager has
# NaN). Results under $OUT/nonfinite.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}/nonfinite
mkdir -p "$out/models"
source .devdeps/env.sh
tasks=(tests/data/nonfinite/*.yaml)
SEEDS=${SEEDS:-2} TRIALS=${TRIALS:-3} bench/rules_review.sh build-gpu "$out/review" "${tasks[@]}" >"$out/review.log" 2>&1
review_rc=$?
for t in "${tasks[@]}"; do
  n=$(basename "$t" .yaml)
  build-gpu/bin/kernelskill export --task "$t" --kernel "$out/review/$n/seed-0.cu" --plan "$out/review/$n/seed-0.yaml" \
    --out "$out/models/$n.py" >>"$out/export.log" 2>&1 || echo "export failed: $n" >>"$out/export.log"
done
python3 bench/side_by_side.py --models "$out/models" --prebuild --trials 3 --reps 10 --out "$out/sbs.json" \
  "${tasks[@]}" >"$out/sbs.log" 2>&1
sbs_rc=$?
echo "nonfinite: review exit $review_rc, side by side exit $sbs_rc"
tail -12 "$out/review.log"
tail -14 "$out/sbs.log"
