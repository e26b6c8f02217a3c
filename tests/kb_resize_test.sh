#!/usr/bin/env bash
# bench/kernelbench/resize.py on small KernelBench-format problems written here: the
# sizes it moves become odd, the ones it must keep (a channel count split into groups,
# the groups, small kernel sizes) stay, the code is unchanged, and the resized problems
# still run (where python3 has torch); --small keeps a size a problem cannot run
# without. ctest runs it as kb_resize.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mkdir -p "$tmp/kb/level1" "$tmp/kb/level2" "$tmp/kb/level3"
cat > "$tmp/kb/level1/1_Gemm.py" <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)

M = 64
K = 16 * 4
N = 32
kernel_size = 3

def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]

def get_init_inputs():
    return []
PY
cat > "$tmp/kb/level2/5_Gemm_GroupNorm.py" <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        return self.norm(self.gemm(x))

batch_size = 32
in_features = 48
out_features = 64
num_groups = 16

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, num_groups]
PY
printf 'not python (\n' > "$tmp/kb/level3/9_Broken.py"

out=$(python3 "$root/bench/kernelbench/resize.py" "$tmp/kb" "$tmp/odd" 2>&1) || { echo "resize failed: $out"; exit 1; }
expect() {  # FILE LINE: FILE has LINE
  grep -qxF -- "$2" "$tmp/odd/$1" || { echo "kb_resize: $1 lacks '$2':"; cat "$tmp/odd/$1"; fail=1; }
}
expect level1/1_Gemm.py "M = 63"
expect level1/1_Gemm.py "K = 63"
expect level1/1_Gemm.py "N = 31"
expect level1/1_Gemm.py "kernel_size = 3"
expect level2/5_Gemm_GroupNorm.py "batch_size = 31"
expect level2/5_Gemm_GroupNorm.py "in_features = 47"
expect level2/5_Gemm_GroupNorm.py "out_features = 64"
expect level2/5_Gemm_GroupNorm.py "num_groups = 16"
expect SIZES.md "- level2/5_Gemm_GroupNorm.py: batch_size 32->31, in_features 48->47"
cmp -s "$tmp/kb/level3/9_Broken.py" "$tmp/odd/level3/9_Broken.py" || { echo "kb_resize: a file that does not parse was changed"; fail=1; }
grep -q "9_Broken.py: left as published" "$tmp/odd/SIZES.md" || { echo "kb_resize: SIZES.md does not say the broken file was left"; fail=1; }
# Only the constants' lines differ.
d=$(diff "$tmp/kb/level2/5_Gemm_GroupNorm.py" "$tmp/odd/level2/5_Gemm_GroupNorm.py" | grep -c "^[<>]")
[ "$d" = 4 ] || { echo "kb_resize: expected 2 changed lines, diff has $d"; fail=1; }
# The resized problems run.
py=""
for p in python3 /usr/bin/python3; do "$p" -c "import torch" 2>/dev/null && { py=$p; break; }; done
if [ -n "$py" ]; then
  for f in level1/1_Gemm.py level2/5_Gemm_GroupNorm.py; do
    "$py" - "$tmp/odd/$f" <<'PY' || { echo "kb_resize: $f does not run at its new sizes"; fail=1; }
import importlib.util, sys
spec = importlib.util.spec_from_file_location("p", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
y = m.Model(*m.get_init_inputs())(*m.get_inputs())
assert all(s % 2 == 1 for s in y.shape[:1]), y.shape
PY
  done
else
  echo "kb_resize: neither python3 nor /usr/bin/python3 has torch: the resized problems were not run"
fi
# --small: a sixteenth, odd and at least 15; what must stay stays.
python3 "$root/bench/kernelbench/resize.py" --small "$tmp/kb" "$tmp/small" >/dev/null 2>&1 || { echo "kb_resize: --small failed"; fail=1; }
sed -i 's/^N = 32$/N = 512/' "$tmp/kb/level1/1_Gemm.py"
python3 "$root/bench/kernelbench/resize.py" --small "$tmp/kb" "$tmp/small2" >/dev/null 2>&1
for line in "M = 15" "K = 15" "kernel_size = 3"; do
  grep -qxF -- "$line" "$tmp/small/level1/1_Gemm.py" || { echo "kb_resize: --small: 1_Gemm.py lacks '$line'"; fail=1; }
done
grep -qxF "N = 31" "$tmp/small2/level1/1_Gemm.py" || { echo "kb_resize: --small: 512 should become 31"; fail=1; }
grep -qxF "out_features = 64" "$tmp/small/level2/5_Gemm_GroupNorm.py" || { echo "kb_resize: --small moved a grouped size"; fail=1; }
grep -q "small sizes" "$tmp/small/SIZES.md" || { echo "kb_resize: --small: SIZES.md does not say small"; fail=1; }
# --small with PyTorch: a problem that does not run at its small sizes gets back the
# published value of the constant it needs (here a class whose image size is fixed).
if [ -n "$py" ]; then
  mkdir -p "$tmp/kb3/level1"
  cat > "$tmp/kb3/level1/7_FixedImage.py" <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, img_size=64):
        super().__init__()
        self.img_size = img_size
        self.proj = nn.Linear(img_size, 8)

    def forward(self, x):
        assert x.shape[-1] == self.img_size, f"image {x.shape[-1]} is not {self.img_size}"
        return self.proj(x)

batch_size = 32
image_size = 64

def get_inputs():
    return [torch.randn(batch_size, image_size)]

def get_init_inputs():
    return []
PY
  "$py" "$root/bench/kernelbench/resize.py" --small "$tmp/kb3" "$tmp/small3" >/dev/null 2>&1 || { echo "kb_resize: --small failed on a fixed image"; fail=1; }
  for line in "batch_size = 15" "image_size = 64"; do
    grep -qxF -- "$line" "$tmp/small3/level1/7_FixedImage.py" || { echo "kb_resize: --small: 7_FixedImage.py lacks '$line'"; fail=1; }
  done
  grep -q "image_size kept (small, it fails: AssertionError: image 15 is not 64)" "$tmp/small3/SIZES.md" ||
    { echo "kb_resize: --small: SIZES.md does not say why image_size was kept:"; cat "$tmp/small3/SIZES.md"; fail=1; }
fi
# No arguments: the usage, status 2.
python3 "$root/bench/kernelbench/resize.py" >/dev/null 2>&1; [ $? = 2 ] || { echo "kb_resize: no arguments should exit 2"; fail=1; }
[ $fail = 0 ] && echo "kb_resize: passed"
exit $fail
