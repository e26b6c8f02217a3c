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
# about 9 MB) with .devdeps linked into it, and prints the command that runs the bench
# there, e.g.
#   cd .devdeps/at-c280947 && NAME=kb-all PICK1=1-100 PICK2=1-100 PICK3=1-50 \
#     DONE_IN="../../docs/results/kernelbench.csv:RUN" COMMIT=c280947 \
#     bash bench/run.sh kernelbench ../KernelBench
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
# The tree reads .devdeps (the carried libraries, env.sh) from its own root.
[ -e "$dir/.devdeps" ] || ln -s "$(realpath --relative-to="$dir" .devdeps)" "$dir/.devdeps"
echo "at_commit: $short's tree in $dir ($(du -sh "$dir" | cut -f1))"
echo "run there: cd $dir && COMMIT=$short DONE_IN=\"$(realpath --relative-to="$dir" docs/results/kernelbench.csv):RUN\" NAME=... PICK1=... bash bench/run.sh kernelbench $(realpath --relative-to="$dir" .devdeps/KernelBench)"
