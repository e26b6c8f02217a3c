#!/usr/bin/env bash
# Call 1 (rehearsal): build; issue 3 parts on GPU 0 and the CPU; the side-by-side
# pipeline on GPU 1 over the example tasks and 5 suite tasks. Everything into /tmp/r.
set -u
cd "$(dirname "$0")/.."
ln -sfn ../.devdeps .devdeps
source .devdeps/env.sh
export BUILD=/tmp/ks-build-gb
R=/tmp/r; mkdir -p $R/s $R/i3 $R/b $R/rc
t0=$(date +%s)
{ nvidia-smi -L; nproc; python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count())'; } >$R/env.txt 2>&1
STAGES=none BUDGET=330 bench/suite_gpu.sh $R/b || exit 1
echo "build took $(( $(date +%s) - t0 )) s" >>$R/env.txt
left=$(( ${CALL_BUDGET:-540} - ($(date +%s) - t0) ))
WORK=/tmp/ks-i3a timeout -k 5 $left bench/issue3_gpu.sh $R/i3 latency >$R/i3-latency.log 2>&1 &
WORK=/tmp/ks-i3b timeout -k 5 $left bench/issue3_gpu.sh $R/rc review >$R/i3-review.log 2>&1 &
GPUS=1 SKIP_BUILD=1 BUDGET=$(( left - 10 )) RESERVE=${RESERVE:-230} COMPARE_RESERVE=100 SEEDS=2 ROUNDS=1 TRIALS=3 REPS=20 WARM_PROCS=6 \
  bench/suite_gpu.sh $R/s examples/tasks/*.yaml bench/suites/ops/{relu,softmax_dim1,mse_loss,linear_gelu,conv2d_relu_bias}.yaml >$R/suite.log 2>&1
wait
cp /tmp/ks-suite/sbs-*.log /tmp/ks-suite/warm-*.log $R/ 2>/dev/null
