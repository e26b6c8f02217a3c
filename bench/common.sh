# shellcheck shell=bash
# Sourced by bench/run.sh and every runner in bench/: what each of them needs, once.
#
# The environment every runner reads (each has a default):
#   BUILD   the build directory holding bin/ (default build-gpu; git ignores it, so a
#           warm GPU machine keeps it between calls)
#   OUT     where the runner leaves its results (default out/bench)
#   PYTHON  a Python with PyTorch, for what runs in Python (default python3)
# Relative paths are taken from the repository root, where the runners run.
#
# After sourcing: $bench_root (the repository root, also the working directory), and
#   bench_build TARGET...  configure BUILD (KS_CMAKE_ARGS from the environment) and build
#                          the targets (none: all) into it, the log in $OUT/build.log
#   bench_need BIN...      fail, naming it, when BUILD/bin/BIN is not there
#   bench_record_env FILE  the GPUs, cores, PyTorch and commit, into FILE
#   bench_log MESSAGE      "[seconds since sourcing] MESSAGE", also appended to $OUT/session.log
#   bench_elapsed          seconds since sourcing
#   bench_left BUDGET      seconds left of BUDGET since sourcing
#   bench_stamp WHO RUN    the columns that start a docs/results row: sets bench_date,
#                          bench_commit, bench_run (RUN, "DATE " before it), bench_device
#                          and bench_prefix (the four as CSV); warns, as WHO, when the
#                          tree has uncommitted changes (the rows would name a commit
#                          that is not what ran)
#   bench_csv_quote TEXT   TEXT as one double-quoted CSV field
#   bench_import_rows REPORT  one line a problem of `kernelskill import`'s report: the
#                          problem file, its task (empty when not imported) and the
#                          import's error, separated by \x1f (empty fields survive
#                          `read`, where whitespace would not)
bench_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$bench_root" || exit 1
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-out/bench}
PYTHON=${PYTHON:-python3}
case "$BUILD" in /*) ;; *) BUILD="$bench_root/$BUILD" ;; esac
case "$OUT" in /*) ;; *) OUT="$bench_root/$OUT" ;; esac
mkdir -p "$OUT"
export BUILD OUT PYTHON
bench_t0=$(date +%s)

bench_elapsed() { echo $(( $(date +%s) - bench_t0 )); }
bench_left() { echo $(( $1 - $(bench_elapsed) )); }
bench_log() { echo "[$(bench_elapsed) s] $*" | tee -a "$OUT/session.log"; }

bench_build() {
  local s targets=()
  s=$(date +%s)
  [ $# -gt 0 ] && targets=(--target "$@")
  if ! { cmake -S "$bench_root" -B "$BUILD" -G Ninja ${KS_CMAKE_ARGS:-} &&
         cmake --build "$BUILD" -j"$(nproc)" "${targets[@]}"; } >"$OUT/build.log" 2>&1; then
    grep -E "error|FAILED" "$OUT/build.log" | head -30
    tail -15 "$OUT/build.log"
    echo "bench: the build into $BUILD failed (log: $OUT/build.log)" >&2
    return 1
  fi
  echo "bench: built ${*:-everything} into $BUILD in $(( $(date +%s) - s )) s"
}

bench_need() {
  local b
  for b in "$@"; do
    [ -x "$BUILD/bin/$b" ] || { echo "bench: $BUILD/bin/$b is missing: build it (bench/run.sh builds what a suite needs)" >&2; return 2; }
  done
}

bench_record_env() {
  {
    if command -v nvidia-smi >/dev/null; then nvidia-smi -L 2>&1; else echo "no nvidia-smi (no NVIDIA driver here)"; fi
    echo "$(nproc) cores"
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda devices", torch.cuda.device_count())' 2>/dev/null ||
      echo "$PYTHON: no torch"
    git -C "$bench_root" log -1 --format='commit %H' 2>/dev/null || echo "commit unknown (no git metadata)"
  } >"$1"
}

bench_stamp() {
  bench_date=$(date +%Y-%m-%d)
  bench_run=${RUN:-"$bench_date $2"}
  bench_device=${DEVICE:-"CPU ($(nproc) cores)"}
  bench_commit=$(git -C "$bench_root" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
  [ -n "$(git -C "$bench_root" status --porcelain --untracked-files=no 2>/dev/null)" ] &&
    echo "$1: the tree has uncommitted changes: the rows name $bench_commit, which is not what ran" >&2
  # shellcheck disable=SC2034  # read by the runners that source this
  bench_prefix="$(bench_csv_quote "$bench_run"),$bench_date,$bench_commit,$(bench_csv_quote "$bench_device")"
}

bench_csv_quote() { local s=${1//\"/\"\"}; printf '"%s"' "$s"; }

bench_import_rows() {
  "$PYTHON" - "$1" <<'PY'
import json, os, sys
base = os.path.dirname(os.path.abspath(sys.argv[1]))
for r in json.load(open(sys.argv[1])):
    err = " ".join((r.get("error") or "").split())
    if err.startswith(r["file"] + ": "):
        err = err[len(r["file"]) + 2:]  # the row names the problem
    task = r.get("task") or ""
    if task and not os.path.isabs(task) and not os.path.exists(task):
        task = os.path.join(base, os.path.basename(task))
    print("\x1f".join([r["file"], "" if err else task, err]))
PY
}
