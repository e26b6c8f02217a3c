#!/usr/bin/env bash
# The ablation suite (issue 48), on the GPU machine: `kernelskill bench --ablation
# full,no-ltm,no-stm` over the 26 KernelBench problems of levels 1-3 named in
# bench/kernelbench/ablation_problems.txt (docs/bench.md, "The ablation suite": chosen
# for headroom, not tuned to), 2 seeds x 6 rounds, the same budget for every variant.
# It is bench/kernelbench/bench.sh with that list and its own directory
# (BUILD/kb-ablation, state kb-ablation.tgz), so it runs across device calls the same
# way: each call starts or follows the bench for at most BUDGET seconds and returns
# with it running; call again (within the machine's warmth) until the last line says
# "finished". Its results: summary.md, summary.json (each variant's speedup by round,
# reviews, moves, full against the others at the same number of reviews, the
# short-term memory's check) and speedup_by_round.csv, copied to $OUT.
#
#   bench/run.sh ablation [KERNELBENCH_DIR]        (builds kernelskill, kernelskill-gpu)
#   KERNELBENCH_DIR: KernelBench's KernelBench/ folder (default .devdeps/KernelBench)
#   SEEDS (2) ROUNDS (6) ABLATION (full,no-ltm,no-stm) LIST (the file above) NAME
#   (kb-ablation); every other setting of bench.sh (IN_FLIGHT, TRIALS, REPS, JOBS,
#   BUDGET, FRESH, STOP, STATE) as there.
# Within 30 minutes of GPU time it needs several GPUs: about 1,100 reviews (26 problems
# x 3 variants x 2 seed lines x up to 7 reviews) at ~2 s each on one H200 (the
# 2026-12-02 run: 82 problems x 2 x 2 reviews in 613 s), so four GPUs (nvidia-h100-x4,
# 16 tasks in flight) for the run's ~9 minutes, then the import and the side by side.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export NAME=${NAME:-kb-ablation}
export LIST=${LIST:-$here/ablation_problems.txt}
export ABLATION=${ABLATION:-full,no-ltm,no-stm}
export SEEDS=${SEEDS:-2} ROUNDS=${ROUNDS:-6}
exec "$here/bench.sh" "$@"
