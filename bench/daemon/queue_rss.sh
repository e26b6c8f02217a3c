#!/usr/bin/env bash
# The daemon's memory with a long queue: starts a real `kernelskill serve` on loopback
# with a fresh store, submits COUNT tasks through the API (ks-queue-load), lists and
# reads them all, restarts the daemon on the same store, and prints the daemon's
# resident memory (VmRSS) and peak (VmHWM) from /proc at each step.
#
# The design target (docs/daemon.md): the queue lives in RocksDB, not in RAM, so the
# daemon's memory stays bounded as the queue grows.
#
#   bench/run.sh daemon-queue                    (builds kernelskill, ks-queue-load)
#   BUILD=build bench/daemon/queue_rss.sh         (an existing build)
#   COUNT=10000 ...                               (a longer queue; default 1000)
#   READS=8 ...                                   (more full read passes; default 5)
#   GPUS='local: [0]' ...                         (default 'local: none': nothing runs,
#                                                  every task stays queued)
# Needs the targets kernelskill and ks-queue-load; no GPU.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill ks-queue-load
root=$bench_root
build=$BUILD
count=${COUNT:-1000}
gpus=${GPUS:-"local: none"}
ks="$build/bin/kernelskill"
load="$build/bin/ks-queue-load"

work=$(mktemp -d /tmp/ks-queue-rss.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/serve.yaml" <<EOF
name: queue-rss
gpus: {$gpus}
budgets: {tasks_in_flight: 1}
memory: {path: $work/memory}
output: {dir: $work/output}
logging: {level: warn}
serve: {listen: "127.0.0.1:0"}
EOF

# Starts the daemon in the background; sets pid and url once it listens.
start_daemon() {
  : >"$work/stdout"
  KS_TOKEN= "$ks" serve --config "$work/serve.yaml" >"$work/stdout" 2>>"$work/serve.log" &
  pid=$!
  url=""
  for _ in $(seq 1 600); do
    url=$(sed -n 's/^kernelskill serve: listening on \(http[^ ]*\).*/\1/p' "$work/stdout" | head -1)
    [ -n "$url" ] && return 0
    kill -0 "$pid" 2>/dev/null || { echo "daemon_queue_rss: the daemon exited:" >&2; cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "daemon_queue_rss: the daemon did not listen within 60 s" >&2
  exit 1
}

stop_daemon() {
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

# "VmRSS VmHWM" in MiB, one decimal.
mem() {
  awk '/^VmRSS:/ {r=$2} /^VmHWM:/ {h=$2} END {printf "%.1f %.1f", r/1024, h/1024}' "/proc/$pid/status"
}

row() {  # step, then "rss hwm"
  set -- "$1" $2
  printf '| %-44s | %8s | %8s |\n' "$1" "$2" "$3"
}

task="$root/examples/tasks/softmax.yaml"
echo "daemon_queue_rss: $count tasks, gpus {$gpus}, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
printf '| %-44s | %8s | %8s |\n' "step" "RSS MiB" "HWM MiB"
printf '|%s|%s|%s|\n' "----------------------------------------------" "----------" "----------"

start_daemon
sleep 2  # let start-up work (skill library install, workers) settle
row "started, empty queue" "$(mem)"
"$load" --server "$url" --task "$task" --count "$count" --phase submit >"$work/submit.txt"
row "after submitting $count tasks" "$(mem)"
"$load" --server "$url" --task "$task" --count "$count" --phase read >"$work/read.txt"
row "after listing them and reading each one" "$(mem)"
# Further reads show whether memory keeps growing with traffic or levels off (caches,
# the HTTP server's per-thread allocator arenas).
for pass in $(seq 2 "${READS:-5}"); do
  "$load" --server "$url" --task "$task" --count "$count" --phase read >>"$work/read.txt"
  row "after full read number $pass" "$(mem)"
done
stop_daemon

start_daemon
sleep 2
row "restarted on the same store ($count queued)" "$(mem)"
"$load" --server "$url" --task "$task" --count "$count" --phase read >"$work/read2.txt"
row "restarted, after listing and reading all" "$(mem)"

echo
echo "submit: $(awk '/^submit_ms_each/ {printf "%.2f ms per task", $2}' "$work/submit.txt");" \
     "list of 1000: $(awk '/^list_ms/ {printf "%.1f ms", $2; exit}' "$work/read.txt");" \
     "status: $(awk '/^status_ms_each/ {printf "%.2f ms per task", $2; exit}' "$work/read.txt");" \
     "queued after restart: $(awk '/^queued_total/ {print $2}' "$work/read2.txt")"
echo "store on disk: $(du -sh "$work/memory" | cut -f1)"
stop_daemon
