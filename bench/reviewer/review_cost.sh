#!/usr/bin/env bash
# What a review costs beyond the kernel's own run time: `kernelskill-gpu --review
# --trials 5 --repeat 3` of the rules coder's first mse_loss seed at the task's cpu size
# and at its full size (2 GiB of inputs), each as a full review, without the profile, and
# verifying only (no timing, no profile): the process's wall time, and the last review's
# status, the candidate's and reference's timed medians and the profile's duration. On
# the GPU machine (docs/reviewer.md, "Review cost per candidate").
#
#   bench/run.sh review-cost                   (builds kernelskill, kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/reviewer/review_cost.sh
#   WORK (default /tmp/ks-review-cost).
# OUT gets review_cost.txt (one block a configuration) and lower.log.
set -u
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
work=${WORK:-/tmp/ks-review-cost}
mkdir -p "$work"
ks="$BUILD/bin/kernelskill"
gpu="$BUILD/bin/kernelskill-gpu"
task=bench/suites/ops/mse_loss.yaml
"$ks" lower "$task" --out "$work/mse" --seeds 1 --gpu-worker "$gpu" >"$OUT/lower.log" 2>&1 || { tail -5 "$OUT/lower.log"; exit 1; }
txt="$OUT/review_cost.txt"
: >"$txt"
for size in cpu ""; do
  for opts in "" "--no-profile" "--no-time --no-profile"; do
    echo "=== mse_loss size=${size:-default} options: ${opts:-(full review)}" >>"$txt"
    s=$(date +%s.%N)
    "$gpu" --review "$task" --source "$work/mse/seed-0.cu" --plan "$work/mse/seed-0.yaml" \
      ${size:+--size $size} --trials 5 --repeat 3 $opts --json >"$work/review.json" 2>>"$txt"
    e=$(date +%s.%N)
    echo "process wall: $("$PYTHON" -c "print(f'{$e - $s:.2f} s')")" >>"$txt"
    "$PYTHON" - "$work/review.json" >>"$txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ct, rt = r.get("candidate_time", {}), r.get("reference_time", {})
print(f"last review: status {r.get('status')}, trials {r.get('trials_passed')}/{r.get('trials_run')}, "
      f"candidate median {ct.get('median_ms', 0):.4f} ms x {ct.get('repetitions', 0)}, "
      f"reference median {rt.get('median_ms', 0):.4f} ms x {rt.get('repetitions', 0)}, "
      f"profile duration {r.get('profile', {}).get('duration_ms', 0):.4f} ms")
PY
  done
done
cat "$txt"
