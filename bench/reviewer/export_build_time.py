#!/usr/bin/env python3
"""How long an exported ModelNew's extension takes to compile, translation unit by unit.

Reads CUDA_SOURCE, CPP_SOURCE, LAUNCHER_IN_CUDA, NVCC_OPTIONS and CXX_OPTIONS from each
model file (parsed, not imported: no PyTorch or GPU needed), writes cuda.cu and main.cpp
as the model's load_extension writes them (torch/types.h before the kernels only where
the launcher is with them; a model exported before LAUNCHER_IN_CUDA was load_inline's,
which always put it there), and compiles each as PyTorch's ninja file does (nvcc -O3 -gencode for
the architecture, the model's NVCC_OPTIONS; the host compiler with its CXX_OPTIONS), one
compile at a time, timing each. Prints a row per model: the wall seconds (and CPU
seconds, which a busy machine does not inflate) of the nvcc compile, of the host
compile, their sum (one core) and their maximum (what ninja's two parallel jobs take,
before the link). A compile past --timeout is stopped and shown as "> N (stopped)".

    python3 bench/reviewer/export_build_time.py [--arch 90a] [--timeout S] [--torch-include DIR] MODEL.py...

Include paths: PyTorch's own (torch.utils.cpp_extension.include_paths) where a PyTorch
with them is importable, else --torch-include (default /usr/include, Debian's LibTorch
headers; torch/extension.h needs pybind11's headers too: on Debian, apt install
pybind11-dev). A CPU-only LibTorch lacks c10/cuda/impl/cuda_cmake_macros.h: a stand-in is
written (as gpu/CMakeLists.txt does for ks_graph_replay_check). With LibTorch 1.x headers
(whose c10::optional is not std::optional) std::optional<at::Tensor>() in the sources is
read as c10::optional<at::Tensor>(): the compile then costs what it costs with PyTorch 2.
"""
import argparse
import ast
import os
import resource
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time


def constants(path):
    """The module's CUDA_SOURCE, CPP_SOURCE, NVCC_OPTIONS and CXX_OPTIONS (absent: []) and
    LAUNCHER_IN_CUDA (absent: True, load_inline's layout)."""
    names = {"CUDA_SOURCE": None, "CPP_SOURCE": None, "NVCC_OPTIONS": [], "CXX_OPTIONS": [], "LAUNCHER_IN_CUDA": True}
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in names:
                names[node.targets[0].id] = ast.literal_eval(node.value)
    if names["CUDA_SOURCE"] is None or names["CPP_SOURCE"] is None:
        sys.exit(f"{path}: no CUDA_SOURCE or CPP_SOURCE: not an exported model")
    return names


def include_dirs(torch_include, shim):
    try:
        import torch.utils.cpp_extension as ext  # noqa: PLC0415
        dirs = ext.include_paths(cuda=True)
        if all(os.path.isdir(d) for d in dirs):
            return dirs, torch_version_major(dirs[0])
    except Exception:  # noqa: BLE001: no PyTorch here, or one without CUDA
        pass
    dirs = [torch_include, os.path.join(torch_include, "torch/csrc/api/include")]
    if not os.path.exists(os.path.join(torch_include, "c10/cuda/impl/cuda_cmake_macros.h")):
        os.makedirs(os.path.join(shim, "c10/cuda/impl"), exist_ok=True)
        with open(os.path.join(shim, "c10/cuda/impl/cuda_cmake_macros.h"), "w") as f:
            f.write("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        dirs.append(shim)
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return dirs + [os.path.join(cuda, "include")], torch_version_major(torch_include)


def torch_version_major(include):
    for rel in ("torch/csrc/api/include/torch/version.h", "torch/version.h"):
        try:
            for line in open(os.path.join(include, rel)):
                if line.startswith("#define TORCH_VERSION_MAJOR"):
                    return int(line.split()[-1])
        except OSError:
            pass
    return 2


def timed(cmd, log, limit):
    """Wall and CPU (user + system, of the compiler's processes) seconds, and the exit
    status (None: killed at `limit` seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc = p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # nvcc's children (cicc, ptxas, cc1plus) too
        p.wait()
        rc = None
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, rc


def cell(wall, cpu, rc):
    return f"> {wall:.0f} (stopped)" if rc is None else f"{wall:.1f} ({cpu:.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--arch", default="90a", help="compute capability as load_inline writes it (90a: H100/H200)")
    ap.add_argument("--torch-include", default="/usr/include")
    ap.add_argument("--nvcc", default=os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin/nvcc"))
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--keep", help="write the sources, objects and logs here (default: a temporary directory)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds a compile may take, then it is stopped")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="ks-export-build-")
    dirs, major = include_dirs(a.torch_include, os.path.join(work, "shim"))
    py = sysconfig.get_paths()["include"]
    # /usr/include is the compilers' own: naming it would break the C++ headers' #include_next.
    dirs = [d for d in dirs + [py] if os.path.normpath(d) != "/usr/include"]
    common = ["-DTORCH_API_INCLUDE_EXTENSION_H"] + [f for d in dirs for f in ("-isystem", d)] + \
        ["-D_GLIBCXX_USE_CXX11_ABI=1"]
    print("wall seconds (CPU seconds: user + system)")
    print("model | nvcc | host compiler | sum: one core | max: two jobs | result")
    print("--- | --- | --- | --- | --- | ---")
    for path in a.models:
        c = constants(path)
        name = os.path.splitext(os.path.basename(path))[0]
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        cu, cpp = c["CUDA_SOURCE"], c["CPP_SOURCE"]
        if major < 2:
            cu = cu.replace("std::optional<at::Tensor>()", "c10::optional<at::Tensor>()")
            cpp = cpp.replace("std::optional<at::Tensor>()", "c10::optional<at::Tensor>()")
        bind = "&ks_forward" if major < 2 else "torch::wrap_pybind_function(ks_forward)"
        with open(os.path.join(d, "cuda.cu"), "w") as f:
            f.write(("#include <torch/types.h>\n" if c["LAUNCHER_IN_CUDA"] else "") +
                    "#include <cuda.h>\n#include <cuda_runtime.h>\n\n" + cu)
        with open(os.path.join(d, "main.cpp"), "w") as f:
            f.write("#include <torch/extension.h>\n" + cpp + "\n\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
                    f'm.def("ks_forward", {bind}, "ks_forward");\n}}\n')
        define = [f"-DTORCH_EXTENSION_NAME={name.replace('-', '_')}"]
        nvcc = [a.nvcc] + define + common + [
            "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr", "--compiler-options", "-fPIC",
            "-O3", f"-gencode=arch=compute_{a.arch},code=sm_{a.arch}"] + c["NVCC_OPTIONS"] + [
            "-std=c++17", "-c", os.path.join(d, "cuda.cu"), "-o", os.path.join(d, "cuda.o")]
        cxx = [a.cxx] + define + common + ["-fPIC", "-std=c++17"] + c["CXX_OPTIONS"] + [
            "-c", os.path.join(d, "main.cpp"), "-o", os.path.join(d, "main.o")]
        with open(os.path.join(d, "build.log"), "w") as log:
            cu = timed(nvcc, log, a.timeout)
            cpp = timed(cxx, log, a.timeout)
        stopped = cu[2] is None or cpp[2] is None
        ok = "stopped" if stopped else "built" if cu[2] == 0 and cpp[2] == 0 else f"FAILED (see {d}/build.log)"
        total = cell(cu[0] + cpp[0], cu[1] + cpp[1], None if stopped else 0)
        most = cell(max(cu[0], cpp[0]), max(cu[1], cpp[1]), None if stopped else 0)
        print(f"{name} | {cell(*cu)} | {cell(*cpp)} | {total} | {most} | {ok}", flush=True)


if __name__ == "__main__":
    main()
