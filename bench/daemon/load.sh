#!/usr/bin/env bash
# The daemon under a burst beside slow bodies (issue 44; docs/daemon.md, "Bursts and
# hostile bodies"): starts a real `kernelskill serve` on loopback with a fresh store and
# no GPU (tasks stay queued), then runs ks-daemon-load twice — 300 slow-body
# connections from one client, then from 30 (10 each) — each time with 2,000
# legitimate requests sent at once. Prints what each run got back and the daemon's
# memory; exits 1 when a run fails (a legitimate request unanswered, or a health probe
# at 1 s or more).
#
#   BUILD=build bench/daemon/load.sh           (BUILD: default build; bench/run.sh daemon-load)
#   REQUESTS=2000 SLOW=300 EVERY_MS=2000 ...    (the defaults)
# Needs the targets kernelskill and ks-daemon-load; no GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-${BUILD:-$root/build}}" && pwd)
ks="$build/bin/kernelskill"
load="$build/bin/ks-daemon-load"
for bin in "$ks" "$load"; do
  [ -x "$bin" ] || { echo "load.sh: $bin is missing; build it first" >&2; exit 2; }
done
requests=${REQUESTS:-2000}
slow=${SLOW:-300}
every=${EVERY_MS:-2000}

work=$(mktemp -d /tmp/ks-daemon-load.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

export KS_TOKEN=load-bench-token-0123456789
cat >"$work/serve.yaml" <<EOC
name: daemon-load
gpus: {local: none}
memory: {path: $work/memory}
output: {dir: $work/output}
logging: {level: warn}
serve: {listen: "127.0.0.1:0"}
EOC
"$ks" serve --config "$work/serve.yaml" >"$work/stdout" 2>>"$work/serve.log" &
pid=$!
url=""
for _ in $(seq 1 600); do
  url=$(sed -n 's/^kernelskill serve: listening on \(http[^ ]*\).*/\1/p' "$work/stdout" | head -1)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "load.sh: the daemon exited:" >&2; cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "load.sh: the daemon did not listen within 60 s" >&2; exit 1; }
echo "daemon $url (pid $pid), $(nproc) cores; $requests requests, $slow slow bodies, a byte every $every ms"

status=0
for clients in 1 30; do
  echo "== $slow slow bodies from $clients client(s)"
  "$load" --url "$url" --requests "$requests" --slow "$slow" --slow-clients "$clients" --every-ms "$every" \
    --task "$root/examples/tasks/swish.yaml" --pid "$pid" || status=1
done
exit $status
