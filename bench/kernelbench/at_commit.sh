#!/usr/bin/env bash
# A KernelBench run at one commit, carried across sessions. A session's bench directory
# (BUILD/NAME and its .kbstate tarball) does not outlive the session's machines, and the
# next session's checkout is at a later commit: so each session measures part of the
# problems at the run's commit, checks the rows in (docs/results/kernelbench.csv), and
# the next builds that commit's tree and leaves out the problems with rows
# (bench.sh's DONE_IN).
#
# On the machine that sends the device call, from the repository root:
#   bench/kernelbench/at_commit.sh SHA [DIR]
# writes SHA's tree into DIR (default .devdeps/at-SHA: .devdeps travels with the call;
# about 12 MB) and prints the command that runs the bench there, e.g.
#   ln -sfn .. .devdeps/at-c280947/.devdeps && cd .devdeps/at-c280947 && \
#     NAME=kb-all PICK1=1-100 PICK2=1-100 PICK3=1-50 COMMIT=c280947 \
#     DONE_IN="../../docs/results/kernelbench.csv:RUN" bash bench/run.sh kernelbench ../KernelBench
# (the link, made on the device, gives the tree the carried libraries and env.sh: a link
# inside .devdeps to itself is not something to carry)
# (the CSV read is the current one, with the rows the earlier sessions checked in).
set -euo pipefail
sha=${1:?usage: bench/kernelbench/at_commit.sh SHA [DIR]}
root=$(git rev-parse --show-toplevel)
cd "$root"
full=$(git rev-parse --verify "$sha^{commit}") || { echo "at_commit: $sha is not a commit here" >&2; exit 2; }
short=$(git rev-parse --short=7 "$full")
dir=${2:-.devdeps/at-$short}
rm -rf "$dir"
mkdir -p "$dir"
git archive "$full" | tar -x -C "$dir"
echo "at_commit: $short's tree in $dir ($(du -sh "$dir" | cut -f1))"
echo "run there: ln -sfn $(realpath -m --relative-to="$dir" .devdeps) $dir/.devdeps && cd $dir && COMMIT=$short DONE_IN=\"$(realpath -m --relative-to="$dir" docs/results/kernelbench.csv):RUN\" NAME=... PICK1=... bash bench/run.sh kernelbench $(realpath -m --relative-to="$dir" .devdeps/KernelBench)"
