#!/usr/bin/env bash
# GPU nodes on the GPU machine (docs/distributed.md), in one call of at most about 8
# minutes:
#   1. (bench/run.sh nodes builds kernelskill, kernelskill-gpu, fleet_test and
#      ks-scripted-gpu into BUILD)
#   2. two node agents on one H200, each `kernelskill-gpu --listen 127.0.0.1:PORT
#      --devices 0`, started independently of the daemon: two nodes of one GPU model
#   3. `kernelskill run` across them (gpus: local none, remote both) on the example
#      tasks: every task must finish correct, and both nodes must have reviewed
#   4. the same again with node A killed (-9) once ANSWERS of its reviews are answered
#      and the next one has gone to its worker (in flight); node A is restarted on its
#      port a few seconds later; every task must still finish, and the run's log says
#      what was lost and re-queued
#   5. fleet_test (the stand-in nodes' tests) on this machine too
# Two nodes on one GPU share it: their reviews run side by side, so the speedups of
# these runs are not measurements (docs/benchmarks.md has those); this checks the
# mechanics with real workers, real CUDA faults excluded.
# Results go to OUT: session.log, run1/ and run2/ (summary.md, run.log, the nodes'
# logs), fleet_test.log.
#
#   bench/run.sh nodes
#   BUILD=DIR OUT=DIR bench/fleet/nodes.sh
#   SEEDS (2) ROUNDS (2) TRIALS (3) ANSWERS (3) PORT_A (8471) PORT_B (8472); WORK
#   (default /tmp/ks-nodes). WORKER_BINARY=PATH gives the nodes a stand-in worker
#   (--worker-binary; e.g. BUILD/bin/ks-scripted-gpu to try the script without a GPU).
set -u
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu fleet_test || exit 2
root=$bench_root
out=$OUT
build=$BUILD
work="${WORK:-/tmp/ks-nodes}"
seeds="${SEEDS:-2}"
rounds="${ROUNDS:-2}"
trials="${TRIALS:-3}"
answers="${ANSWERS:-3}"
port_a="${PORT_A:-8471}"
port_b="${PORT_B:-8472}"
log() { bench_log "$@"; }
log "nodes_gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

bin="$build/bin"
"$bin/kernelskill-gpu" --list-devices 2>&1 | tee -a "$out/session.log"

node_pid=()
# start_node NAME PORT LOG: a node agent serving GPU 0; waits for its address.
start_node() {
  local name=$1 port=$2 logf=$3
  "$bin/kernelskill-gpu" --listen "127.0.0.1:$port" --devices 0 --log-level info \
    ${WORKER_BINARY:+--worker-binary "$WORKER_BINARY"} >"$logf.out" 2>"$logf" &
  node_pid[$name]=$!
  for _ in $(seq 1 600); do
    grep -q "listening on" "$logf.out" 2>/dev/null && return 0
    sleep 0.1
  done
  log "node $name did not start:"; tail -20 "$logf" | tee -a "$out/session.log"
  return 1
}
stop_node() { [ -n "${node_pid[$1]:-}" ] && kill "${node_pid[$1]}" 2>/dev/null && wait "${node_pid[$1]}" 2>/dev/null; node_pid[$1]=""; }
trap 'stop_node 0; stop_node 1' EXIT

# write_config DIR: the run's config across both nodes.
write_config() {
  local dir=$1
  mkdir -p "$dir"
  {
    echo "name: nodes-gpu"
    echo "tasks: [$(ls "$root"/examples/tasks/*.yaml | paste -sd, -)]"
    echo "gpus: {local: none, remote: [\"127.0.0.1:$port_a\", \"127.0.0.1:$port_b\"]}"
    echo "budgets: {seeds: $seeds, rounds: $rounds, tasks_in_flight: 4}"
    echo "review: {trials: $trials}"
    echo "memory: {path: $dir/memory}"
    echo "output: {dir: $dir/out}"
  } >"$dir/run.yaml"
}

answered() { local n; n=$(grep -c "gpu pool: review .* answered" "$1" 2>/dev/null); echo "${n:-0}"; }
begun() { local n; n=$(grep -c "gpu pool: review .* to worker pid" "$1" 2>/dev/null); echo "${n:-0}"; }

rm -rf "$work"
rc_all=0
for run in 1 2; do
  dir="$work/run$run"
  mkdir -p "$dir" "$out/run$run"
  write_config "$dir"
  start_node 0 "$port_a" "$out/run$run/node_a.log" || exit 1
  start_node 1 "$port_b" "$out/run$run/node_b.log" || exit 1
  log "run $run: kernelskill run across 127.0.0.1:$port_a and 127.0.0.1:$port_b"
  timeout 240 "$bin/kernelskill" run "$dir/run.yaml" >"$out/run$run/stdout.txt" 2>"$out/run$run/run.log" &
  run_pid=$!
  if [ "$run" = 2 ]; then
    # Kill node A once it has answered $answers reviews and begun the next; start it
    # again 5 s later.
    for _ in $(seq 1 2400); do
      [ "$(answered "$out/run$run/node_a.log")" -ge "$answers" ] &&
        [ "$(begun "$out/run$run/node_a.log")" -gt "$answers" ] && break
      kill -0 $run_pid 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 $run_pid 2>/dev/null; then
      kill -9 "${node_pid[0]}"; wait "${node_pid[0]}" 2>/dev/null; node_pid[0]=""
      log "run 2: node A killed (-9) with $(( $(begun "$out/run$run/node_a.log") - $(answered "$out/run$run/node_a.log") )) review(s) in flight, after $(answered "$out/run$run/node_a.log") answered"
      sleep 5
      start_node 0 "$port_a" "$out/run$run/node_a2.log" && log "run 2: node A restarted on its port"
    else
      log "run 2: the run ended before node A answered $answers reviews; nothing was killed"
    fi
  fi
  wait $run_pid
  rc=$?
  stop_node 0; stop_node 1
  cp "$dir/out/summary.md" "$out/run$run/" 2>/dev/null
  a=$(( $(answered "$out/run$run/node_a.log") + $(answered "$out/run$run/node_a2.log") ))
  b=$(answered "$out/run$run/node_b.log")
  log "run $run: exit $rc; reviews answered by node A $a, by node B $b"
  grep -E "^Coder|^\| [a-z_]+ \|" "$out/run$run/summary.md" 2>/dev/null | tee -a "$out/session.log"
  grep -E "lost with its node|out of the rotation|back in the rotation|reconnected" "$out/run$run/run.log" \
    | head -20 | tee -a "$out/session.log"
  if [ $rc -ne 0 ] || [ "$b" -eq 0 ] || { [ "$run" = 1 ] && [ "$a" -eq 0 ]; }; then rc_all=1; fi
done

log "fleet_test (stand-in nodes over TCP)"
timeout 300 "$bin/fleet_test" >"$out/fleet_test.log" 2>&1
ft=$?
tail -2 "$out/fleet_test.log" | tee -a "$out/session.log"
[ $ft -eq 0 ] || rc_all=1
log "nodes_gpu: $([ $rc_all -eq 0 ] && echo passed || echo FAILED)"
exit $rc_all
