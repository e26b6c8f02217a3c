#!/usr/bin/env bash
# The references with non-finite and extreme constants (tests/data/nonfinite) through
# the reviewer (every seed, bench/ops/review_seeds.sh), then each task's first seed
# exported as ModelNew and checked beside eager and torch.compile
# (cli/side_by_side.py: NaN only where eager has NaN; median of 5). On the GPU machine.
#
#   bench/run.sh nonfinite                    (builds kernelskill and kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/ops/nonfinite.sh
#   SEEDS (2) TRIALS (3); WORK (default /tmp/ks-nonfinite) the working directory.
# OUT gets review.txt (every seed), export.log, side_by_side.log and side_by_side.json.
set -uo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
work=${WORK:-/tmp/ks-nonfinite}
mkdir -p "$work/models"
tasks=(tests/data/nonfinite/*.yaml)
OUT="$work/review" SEEDS=${SEEDS:-2} TRIALS=${TRIALS:-3} bench/ops/review_seeds.sh "${tasks[@]}" >"$OUT/review.txt" 2>&1
review_rc=$?
: >"$OUT/export.log"
for t in "${tasks[@]}"; do
  n=$(basename "$t" .yaml)
  "$BUILD/bin/kernelskill" export --task "$t" --kernel "$work/review/$n/seed-0.cu" --plan "$work/review/$n/seed-0.yaml" \
    --out "$work/models/$n.py" >>"$OUT/export.log" 2>&1 || echo "export failed: $n" >>"$OUT/export.log"
done
"$PYTHON" cli/side_by_side.py --models "$work/models" --prebuild >"$OUT/side_by_side.log" 2>&1
PYTHONUNBUFFERED=1 "$PYTHON" cli/side_by_side.py --models "$work/models" --trials 3 --reps 5 --compile-timeout 120 \
  --out "$OUT/side_by_side.json" "${tasks[@]}" >>"$OUT/side_by_side.log" 2>&1
sbs_rc=$?
echo "nonfinite: review exit $review_rc, side by side exit $sbs_rc"
tail -12 "$OUT/review.txt"
tail -14 "$OUT/side_by_side.log"
