#!/usr/bin/env bash
# On the GPU machine, after bench/gpu_check.sh built build-gpu: the references with
# non-finite and extreme constants (tests/data/nonfinite) through the reviewer (every
# seed, bench/rules_review.sh), then each task's first seed exported as ModelNew and
# checked beside eager and torch.compile (cli/side_by_side.py: NaN only where eager has
# NaN). Work under $WORK (default /tmp/ks-nonfinite); the logs are copied to $OUT as
# nonfinite-review.log, nonfinite-sbs.log and nonfinite-sbs.json.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${WORK:-/tmp/ks-nonfinite}
logs=${OUT:-gpu-check-out}
mkdir -p "$out/models" "$logs"
source .devdeps/env.sh
tasks=(tests/data/nonfinite/*.yaml)
SEEDS=${SEEDS:-2} TRIALS=${TRIALS:-3} bench/rules_review.sh build-gpu "$out/review" "${tasks[@]}" >"$out/review.log" 2>&1
review_rc=$?
for t in "${tasks[@]}"; do
  n=$(basename "$t" .yaml)
  build-gpu/bin/kernelskill export --task "$t" --kernel "$out/review/$n/seed-0.cu" --plan "$out/review/$n/seed-0.yaml" \
    --out "$out/models/$n.py" >>"$out/export.log" 2>&1 || echo "export failed: $n" >>"$out/export.log"
done
python3 cli/side_by_side.py --models "$out/models" --prebuild >"$out/sbs.log" 2>&1
PYTHONUNBUFFERED=1 python3 cli/side_by_side.py --models "$out/models" --trials 3 --reps 5 --compile-timeout 120 \
  --out "$out/sbs.json" "${tasks[@]}" >>"$out/sbs.log" 2>&1
sbs_rc=$?
cp "$out/review.log" "$logs/nonfinite-review.log"
cp "$out/sbs.log" "$logs/nonfinite-sbs.log"
cp "$out/sbs.json" "$logs/nonfinite-sbs.json" 2>/dev/null
cat "$out/export.log" >>"$logs/nonfinite-review.log" 2>/dev/null
echo "nonfinite: review exit $review_rc, side by side exit $sbs_rc"
tail -12 "$out/review.log"
tail -14 "$out/sbs.log"
