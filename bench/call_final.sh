#!/usr/bin/env bash
# The full side-by-side in one device call (2 GPUs): bench/suite_gpu.sh over
# examples/tasks and bench/suites/ops (or the TASK.yaml files given) with the settings of
# docs/benchmarks.md; everything it leaves goes to /tmp/r (the caller tars it into $OUT).
#   bench/call_final.sh [TASK.yaml ...]
set -u
cd "$(dirname "$0")/.."
[ -d .devdeps ] || ln -sfn ../.devdeps .devdeps   # a helper's snapshot uses the root's
source .devdeps/env.sh
R=/tmp/r
mkdir -p $R
{ nvidia-smi -L; nproc; python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count())'; git log -1 --format=%H 2>/dev/null; } >$R/env.txt 2>&1
BUDGET=${BUDGET:-520} RESERVE=${RESERVE:-150} COMPARE_RESERVE=${COMPARE_RESERVE:-100} SEEDS=${SEEDS:-2} ROUNDS=${ROUNDS:-1} \
  TRIALS=${TRIALS:-2} REPS=${REPS:-30} WARM_PROCS=${WARM_PROCS:-8} FOLLOW_JOBS=${FOLLOW_JOBS:-8} COMPILE_TIMEOUT=${COMPILE_TIMEOUT:-60} \
  bench/suite_gpu.sh $R/s "$@" >$R/suite.log 2>&1
cp /tmp/ks-suite/sbs-*.log /tmp/ks-suite/warm-*.log /tmp/ks-suite/follow.log /tmp/ks-suite/run.err $R/ 2>/dev/null
