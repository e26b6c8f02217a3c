#!/usr/bin/env bash
# Lowers every task with the built-in rules coder (`kernelskill lower`) and reviews
# every seed on the GPU with `kernelskill-gpu --review`; prints one line per seed
# (status, max abs error, candidate and reference medians, speedup), then per task the
# best correct seed, the count of correct tasks and the geometric-mean best speedup.
#
#   bench/run.sh ops-seeds [TASK.yaml ...]      (builds kernelskill and kernelskill-gpu)
#   BUILD=DIR OUT=DIR PYTHON=PY bench/ops/review_seeds.sh [TASK.yaml ...]
#     default tasks: examples/tasks/*.yaml bench/suites/ops/*.yaml
#   SEEDS=N (default 4), TRIALS=N (default 3) in the environment. OUT/TASK/ holds each
#   task's seeds, their review JSON and logs.
#
# Needs a GPU and Python (for the summary). Exit status 1 if some task has no correct
# seed.
set -u
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu || exit 2
root=$bench_root
out=$OUT
tasks=("$@")
if [ ${#tasks[@]} -eq 0 ]; then tasks=("$root"/examples/tasks/*.yaml "$root"/bench/suites/ops/*.yaml); fi
seeds="${SEEDS:-4}"
trials="${TRIALS:-3}"
ks="$BUILD/bin/kernelskill"
gpu="$BUILD/bin/kernelskill-gpu"
echo "review_seeds: ${#tasks[@]} tasks, up to $seeds seeds each; results in $out" >&2

for task in "${tasks[@]}"; do
  name="$(basename "$task" .yaml)"
  dir="$out/$name"
  mkdir -p "$dir"
  if ! "$ks" lower "$task" --out "$dir" --seeds "$seeds" --gpu-worker "$gpu" >"$dir/lower.log" 2>&1; then
    echo "$name: lowering failed: $(tail -n 3 "$dir/lower.log")" >&2
    continue
  fi
  for plan in "$dir"/seed-*.yaml; do
    k="$(basename "$plan" .yaml)"
    timeout 900 "$gpu" --review "$task" --source "$dir/$k.cu" --plan "$plan" --trials "$trials" --json \
      >"$dir/$k.json" 2>"$dir/$k.err"
  done
done

"$PYTHON" - "$out" "${tasks[@]}" <<'PY'
import json, math, os, sys
out, tasks = sys.argv[1], sys.argv[2:]
print(f"{'task':28} {'seed':7} {'status':16} {'max err':>9} {'cand ms':>9} {'ref ms':>9} {'speedup':>8}  recipe / message")
best, failed = {}, []
for t in tasks:
    name = os.path.basename(t)[:-5]
    d = os.path.join(out, name)
    seeds = sorted(f[:-5] for f in os.listdir(d) if f.startswith("seed-") and f.endswith(".yaml")) if os.path.isdir(d) else []
    if not seeds:
        log = open(os.path.join(d, "lower.log")).read().strip().splitlines() if os.path.exists(os.path.join(d, "lower.log")) else ["?"]
        print(f"{name:28} {'-':7} {'not lowered':16} {'':>9} {'':>9} {'':>9} {'':>8}  {log[-1][:200] if log else ''}")
        failed.append(name)
        continue
    for s in seeds:
        recipe = open(os.path.join(d, s + ".yaml")).readline().strip()
        recipe = open(os.path.join(d, s + ".yaml")).read().splitlines()[1].replace("# recipe: ", "")
        try:
            r = json.load(open(os.path.join(d, s + ".json")))
        except Exception as e:
            err = open(os.path.join(d, s + ".err")).read().strip()
            print(f"{name:28} {s:7} {'no result':16} {'':>9} {'':>9} {'':>9} {'':>8}  {err[-200:] or e}")
            continue
        c, f = r["candidate_time"], r["reference_time"]
        msg = recipe if r["status"] == "ok" else r["message"][:200].replace("\n", " ")
        # Numbers JSON has none for come as "NaN" / "Infinity" / "-Infinity": float() reads both.
        err, cm, fm, sp = (float(v) for v in (r["max_abs_error"], c["median_ms"], f["median_ms"], r["speedup"]))
        print(f"{name:28} {s:7} {r['status']:16} {err:9.2e} {cm:9.4f} {fm:9.4f} {sp:8.3f}  {msg}")
        if r["status"] == "ok" and sp > best.get(name, (0, ""))[0]:
            best[name] = (sp, s)
    if name not in best:
        failed.append(name)
print()
print(f"{'task':28} best correct seed, speedup over eager PyTorch")
for t in tasks:
    name = os.path.basename(t)[:-5]
    b = best.get(name)
    print(f"{name:28} {b[1] + '  ' + format(b[0], '.3f') if b else 'none correct'}")
if best:
    g = math.exp(sum(math.log(v[0]) for v in best.values()) / len(best))
    print(f"\ncorrect: {len(best)}/{len(tasks)} tasks; geometric-mean best speedup over the correct ones: {g:.3f}")
if failed:
    print("no correct seed: " + ", ".join(failed))
sys.exit(1 if failed else 0)
PY
