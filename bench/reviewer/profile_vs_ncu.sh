#!/usr/bin/env bash
# Compares the worker's CUPTI profile (review_result.profile, docs/metrics.md) with
# Nsight Compute on the same kernel: for each single-kernel example plan, one review
# with the worker's profiler (`kernelskill-gpu --review … --json`), then the same
# review under `ncu --clock-control none` with the worker's profiler off (ncu holds
# the counters), and a table of both values per metric.
#
#   bench/run.sh profile-vs-ncu                    (builds kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/reviewer/profile_vs_ncu.sh
# OUT gets each review's JSON and ncu's CSV.
#
# Needs a GPU, ncu on PATH and Python.
set -u
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill-gpu || exit 2
root=$bench_root
out=$OUT
bin="$BUILD/bin/kernelskill-gpu"
plans="$root/examples/plans"
mkdir -p "$out/tasks"

cat >"$out/tasks/relu.yaml" <<'EOF'
name: relu
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x)
inputs:
  - {name: x, shape: [8192, 8192], init: {kind: normal, mean: 0, std: 1}}
seed: 2
EOF

# name, task, kernel
examples=(
  "relu $out/tasks/relu.yaml relu_f32"
  "gelu_vec4 $root/examples/tasks/gelu.yaml gelu_f32x4"
  "softmax_rows $root/examples/tasks/softmax.yaml softmax_rows_f32"
)
metrics="dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,\
l1tex__throughput.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__warps_active.avg.pct_of_peak_sustained_active,smsp__sass_average_branch_targets_threads_uniform.pct,\
smsp__warps_eligible.avg.per_cycle_active,sm__inst_issued.avg.per_cycle_active,\
sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,\
smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,\
smsp__warp_issue_stalled_not_selected_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,\
smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct,dram__bytes.sum,gpu__time_duration.sum,\
sm__maximum_warps_per_active_cycle_pct,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,\
launch__occupancy_limit_warps,launch__occupancy_limit_blocks,launch__waves_per_multiprocessor,launch__registers_per_thread"

for e in "${examples[@]}"; do
  set -- $e
  name=$1 task=$2 kernel=$3
  common=(--review "$task" --source "$plans/$name.cu" --plan "$plans/$name.yaml" --trials 1 --no-time)
  timeout 120 "$bin" "${common[@]}" --json >"$out/$name.ours.json" 2>"$out/$name.ours.err"
  timeout 180 ncu --clock-control none --metrics "$metrics" -k "regex:^$kernel\$" -c 1 --csv --print-units base \
    "$bin" "${common[@]}" --no-profile >"$out/$name.ncu.csv" 2>"$out/$name.ncu.err"
done

"$PYTHON" - "$out" "${examples[@]}" <<'EOF'
import csv, io, json, os, sys
out = sys.argv[1]
names = {  # ours -> ncu
  "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
  "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
  "l1_throughput_pct": "l1tex__throughput.avg.pct_of_peak_sustained_active",
  "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
  "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
  "branch_efficiency_pct": "smsp__sass_average_branch_targets_threads_uniform.pct",
  "eligible_warps_per_cycle": "smsp__warps_eligible.avg.per_cycle_active",
  "issued_ipc": "sm__inst_issued.avg.per_cycle_active",
  "fp32_pipe_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
  "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
  "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
  "stall_long_scoreboard_pct": "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
  "stall_short_scoreboard_pct": "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct",
  "stall_not_selected_pct": "smsp__warp_issue_stalled_not_selected_per_warp_active.pct",
  "stall_wait_pct": "smsp__warp_issue_stalled_wait_per_warp_active.pct",
  "stall_lg_throttle_pct": "smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct",
  "dram_bytes": "dram__bytes.sum",
  "duration_us": "gpu__time_duration.sum",
  "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
  "occupancy_limit_registers": "launch__occupancy_limit_registers",
  "occupancy_limit_shared_mem": "launch__occupancy_limit_shared_mem",
  "occupancy_limit_warps": "launch__occupancy_limit_warps",
  "occupancy_limit_blocks": "launch__occupancy_limit_blocks",
  "waves_per_sm": "launch__waves_per_multiprocessor",
  "registers_per_thread": "launch__registers_per_thread",
}
for e in sys.argv[2:]:
  name = e.split()[0]
  print(f"== {name}")
  try:
    ours = json.load(open(os.path.join(out, name + ".ours.json")))
  except Exception as ex:
    print("  no review:", open(os.path.join(out, name + ".ours.err")).read()[-500:], ex); continue
  print(f"  review {ours['status']}; launches {ours['profile']['kernel_launches']}, "
        f"kernel time {ours['profile']['duration_ms']:.4f} ms")
  text = open(os.path.join(out, name + ".ncu.csv")).read()
  start = text.find('"ID"')
  ncu = {}
  if start >= 0:
    for row in csv.DictReader(io.StringIO(text[start:])):
      v = row.get("Metric Value", "").replace(",", "")
      try: ncu[row["Metric Name"]] = float(v)
      except ValueError: pass
  else:
    print("  ncu gave no table:", (open(os.path.join(out, name + ".ncu.err")).read() + text)[-800:])
  vals = ours["profile"]["values"]
  print(f"  {'metric':30} {'ours':>14} {'ncu':>14} {'diff':>10}")
  for k, m in names.items():
    a = vals.get(k); b = ncu.get(m)
    if k == "duration_us" and b is not None: b = b / 1000.0  # ncu: ns
    d = "" if a is None or b is None else f"{a - b:+.3g}"
    fa = "absent" if a is None else f"{a:.4g}"
    fb = "absent" if b is None else f"{b:.4g}"
    print(f"  {k:30} {fa:>14} {fb:>14} {d:>10}")
EOF
