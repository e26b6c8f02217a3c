#!/usr/bin/env bash
# Reviews every example plan (examples/plans) against a full-size task with
# `kernelskill-gpu --review`, and prints one line per example: status, candidate and
# reference medians, speedup, flags. The gelu and softmax plans use their example
# tasks; relu, matmul_bias_relu and l2_normalize get tasks written here (the example
# tasks with those names compute something else, or do not exist).
#
#   bench/run.sh review-examples                  (builds kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/reviewer/examples.sh
# OUT gets the tasks written here and each review's JSON.
#
# Needs a GPU and Python (for the summary). Exit status 1 if any review is not ok.
set -u
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill-gpu || exit 2
root=$bench_root
out=$OUT
bin="$BUILD/bin/kernelskill-gpu"
plans="$root/examples/plans"
tasks="$out/tasks"
mkdir -p "$tasks"

cat >"$tasks/relu.yaml" <<'EOF'
name: relu
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x)
inputs:
  - {name: x, shape: [16384, 16384], init: {kind: normal, mean: 0, std: 1}}
seed: 2
EOF
cat >"$tasks/matmul_bias_relu.yaml" <<'EOF'
name: matmul_bias_relu_plan
reference:
  torchscript: |
    def forward(x, w, b):
        return torch.relu(torch.matmul(x, w) + b)
inputs:
  - {name: x, shape: [4096, 4096], init: {kind: normal, mean: 0, std: 1}}
parameters:
  - {name: w, shape: [4096, 4096], init: {kind: uniform, low: -0.015625, high: 0.015625}}
  - {name: b, shape: [4096], init: {kind: uniform, low: -0.015625, high: 0.015625}}
tolerance: {atol: 1e-4, rtol: 1e-3}
seed: 1
EOF
cat >"$tasks/l2_normalize.yaml" <<'EOF'
name: l2_normalize
reference:
  torchscript: |
    def forward(x):
        return x / torch.clamp_min(torch.norm(x), 1e-12)
inputs:
  - {name: x, shape: [16777216], init: {kind: normal, mean: 0, std: 1}}
seed: 4
EOF

status=0
review() {  # name task
  local name="$1" task="$2"
  "$bin" --review "$task" --source "$plans/$name.cu" --plan "$plans/$name.yaml" --json >"$out/$name.json" 2>"$out/$name.err"
  [ $? -eq 0 ] || status=1
}
review relu "$tasks/relu.yaml"
review gelu_vec4 "$root/examples/tasks/gelu.yaml"
review softmax_rows "$root/examples/tasks/softmax.yaml"
review matmul_bias_relu "$tasks/matmul_bias_relu.yaml"
review l2_normalize "$tasks/l2_normalize.yaml"

"$PYTHON" - "$out" <<'EOF'
import json, sys, os
out = sys.argv[1]
print(f"{'example':18} {'status':10} {'cand ms':>9} {'ref ms':>9} {'speedup':>8} {'runs':>9}  flags / message")
for name in ["relu", "gelu_vec4", "softmax_rows", "matmul_bias_relu", "l2_normalize"]:
    try:
        r = json.load(open(os.path.join(out, name + ".json")))
    except Exception as e:
        err = open(os.path.join(out, name + ".err")).read().strip()
        print(f"{name:18} no result: {err or e}")
        continue
    c, f = r["candidate_time"], r["reference_time"]
    extra = ",".join(r["flags"]) if r["status"] == "ok" else r["message"][:300]
    print(f"{name:18} {r['status']:10} {c['median_ms']:9.4f} {f['median_ms']:9.4f} {r['speedup']:8.3f} "
          f"{c['repetitions']:4}/{f['repetitions']:<4}  {extra}")
EOF
exit $status
