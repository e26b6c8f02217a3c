#!/usr/bin/env bash
# Attacks on a real `kernelskill serve` (docs/daemon.md, "What was tried"),
# timed: how long a cancel takes to end the child running an endless-loop reference,
# how fast an authorised health check is answered while SLOW slow connections
# (slowloris) trickle their headers, and how long the daemon takes to close a trickled
# head. Prints one line per figure.
#
#   bench/run.sh daemon-attacks           (builds kernelskill, kernelskill-gpu, ks-scripted-gpu)
#   BUILD=build bench/daemon/attacks.sh   (an existing build; SLOW=128: slow connections,
#                                          default 64)
# Needs kernelskill, kernelskill-gpu and ks-scripted-gpu (the stand-in GPU: no GPU
# needed) and Python (sockets only).
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "$0")/../common.sh"
bench_need kernelskill kernelskill-gpu ks-scripted-gpu
build=$BUILD
slow=${SLOW:-64}
ks="$build/bin/kernelskill"

work=$(mktemp -d /tmp/ks-attacks.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/serve.yaml" <<EOF
name: attacks
gpus: {local: [0], worker_binary: $build/bin/ks-scripted-gpu}
budgets: {seeds: 1, rounds: 1, tasks_in_flight: 1}
references: {cpu_seconds: 3600, wall_seconds: 3600}
memory: {path: $work/memory}
output: {dir: $work/output}
logging: {level: warn}
serve: {listen: "127.0.0.1:0"}
EOF
token=$(head -c 24 /dev/urandom | base64)
KS_TOKEN="$token" "$ks" serve --config "$work/serve.yaml" >"$work/stdout" 2>"$work/serve.log" &
pid=$!
url=""
for _ in $(seq 1 900); do
  url=$(sed -n 's/^kernelskill serve: listening on \(http[^ ]*\).*/\1/p' "$work/stdout" | head -1)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "daemon_attacks: the daemon exited:" >&2; cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "daemon_attacks: the daemon did not listen within 90 s" >&2; exit 1; }

DAEMON_PID=$pid URL=$url TOKEN=$token SLOW=$slow "$PYTHON" - <<'PY'
import json, os, socket, statistics, threading, time, urllib.request

url, token, daemon, nslow = os.environ["URL"], os.environ["TOKEN"], int(os.environ["DAEMON_PID"]), int(os.environ["SLOW"])
host, port = url.split("//")[1].split(":")
port = int(port)

def call(method, path, body=None, ctype="application/json", timeout=60):
    req = urllib.request.Request(url + path, data=body, method=method,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": ctype})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())

def children(root):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode()
            q = int(p)
            while q > 1:
                with open(f"/proc/{q}/stat") as f:
                    st = f.read()
                q = int(st[st.rfind(")") + 2:].split()[1])
                if q == root:
                    out.append((int(p), cmd))
                    break
        except (OSError, ValueError):
            pass
    return out

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
        return st[st.rfind(")") + 2] not in "ZX"
    except OSError:
        return False

# 1. Cancel an endless-loop reference while the rules coder's graph export runs it.
endless = ("name: endless\nreference:\n  torchscript: |\n    def forward(x):\n        y = x\n"
           "        for i in range(2000000000):\n            y = y * 1.0\n        return y\n"
           "inputs:\n  - {name: x, shape: [1024, 1024]}\nsizes:\n  cpu: {x: [64, 256]}\n")
gone_ms = []
for _ in range(3):
    tid = call("POST", "/api/tasks", endless.encode(), "application/yaml")["id"]
    child = None
    for _ in range(900):
        found = [p for p, c in children(daemon) if "--graph" in c]
        if found:
            child = found[0]
            break
        time.sleep(0.1)
    assert child, "no graph export child appeared"
    time.sleep(1)
    t0 = time.monotonic()
    call("POST", f"/api/tasks/{tid}/cancel", b"{}")
    while alive(child) and time.monotonic() - t0 < 60:
        time.sleep(0.005)
    gone_ms.append((time.monotonic() - t0) * 1000)
    assert not alive(child), "the child outlived the cancel by 60 s"
    for _ in range(600):
        if call("GET", f"/api/tasks/{tid}")["state"] == "cancelled":
            break
        time.sleep(0.1)
print(f"cancel: the endless reference's child was gone {statistics.median(gone_ms):.0f} ms after the cancel "
      f"(median of 3: {', '.join(f'{x:.0f}' for x in gone_ms)} ms)")

# 2. Slow connections trickling their heads, and an authorised health check among them.
conns = []
for _ in range(nslow):
    s = socket.create_connection((host, port))
    s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    conns.append(s)
stop = False
def trickle():
    while not stop:
        for s in list(conns):
            try:
                s.send(b"a", socket.MSG_DONTWAIT)
            except OSError:
                pass
        time.sleep(1)
t = threading.Thread(target=trickle)
t.start()
time.sleep(2)
lat = []
for _ in range(5):
    t0 = time.monotonic()
    call("GET", "/api/health")
    lat.append((time.monotonic() - t0) * 1000)
print(f"slowloris: with {nslow} slow connections trickling a byte a second, an authorised health check "
      f"took {statistics.median(lat):.1f} ms (median of 5; max {max(lat):.1f} ms)")

# 3. How long a trickled head is held: the daemon closes it at serve.header_timeout_s.
t0 = time.monotonic()
probe = socket.create_connection((host, port))
probe.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
conns.append(probe)
probe.settimeout(120)
try:
    while probe.recv(4096):
        pass
except OSError:
    pass
print(f"slowloris: a head trickled a byte a second was closed after {time.monotonic() - t0:.1f} s "
      f"(serve.header_timeout_s 10)")
stop = True
t.join()
for s in conns:
    s.close()
req = urllib.request.Request(url + "/metrics", headers={"Authorization": "Bearer " + token})
metrics = urllib.request.urlopen(req, timeout=30).read().decode()
dropped = [l for l in metrics.splitlines() if l.startswith("ks_http_connections_dropped_total")]
print("slowloris: " + (dropped[0] if dropped else "no ks_http_connections_dropped_total in /metrics"))
PY
