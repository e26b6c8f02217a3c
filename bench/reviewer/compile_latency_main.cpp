// ks-compile-latency: how long a candidate takes to compile, the way the reviewer
// compiles it (NVRTC in a forked child, to a cubin for sm_90a, with ptxas resource
// report) against `nvcc -cubin` on the same file. Needs the CUDA toolkit, not a GPU.
// (A PyTorch load_inline build, the third column of issue 3's benchmark, needs
// PyTorch with CUDA: it is measured on the GPU machine, not here.)
//
//   ks-compile-latency [--reps N] FILE.cu...
// Prints a Markdown table: median and min of N fresh compiles each (no cache hits).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/nvrtc_compiler.hpp"

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else
      files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: ks-compile-latency [--reps N] FILE.cu...\n");
    return 2;
  }
  const char* cuda = std::getenv("CUDA_HOME");
  std::string nvcc = std::string(cuda ? cuda : "/usr/local/cuda") + "/bin/nvcc";
  std::printf("| kernel | NVRTC median ms | NVRTC min ms | nvcc -cubin median ms | nvcc min ms | nvcc / NVRTC |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  int status = 0;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string source = ss.str();
    std::vector<double> nvrtc_ms, nvcc_ms;
    for (int r = 0; r < reps; ++r) {
      ks::nvrtc_compiler compiler;  // a fresh one: its memory cache is empty
      auto t0 = std::chrono::steady_clock::now();
      auto c = compiler.compile(source);
      double ms = ms_since(t0);
      if (!c || !c->ok) {
        std::fprintf(stderr, "%s: NVRTC failed: %s\n", file.c_str(), c ? c->log.c_str() : c.message().c_str());
        status = 1;
        break;
      }
      nvrtc_ms.push_back(ms);
    }
    for (int r = 0; r < reps; ++r) {
      std::string cmd = nvcc + " -cubin -arch=sm_90a -std=c++17 -Xptxas -v -o /tmp/ks-compile-latency.cubin '" + file +
                        "' >/dev/null 2>&1";
      auto t0 = std::chrono::steady_clock::now();
      int rc = std::system(cmd.c_str());
      double ms = ms_since(t0);
      if (rc != 0) {
        std::fprintf(stderr, "%s: nvcc failed (%d)\n", file.c_str(), rc);
        status = 1;
        break;
      }
      nvcc_ms.push_back(ms);
    }
    std::string name = file.substr(file.find_last_of('/') + 1);
    if (nvrtc_ms.empty() || nvcc_ms.empty()) continue;
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1fx |\n", name.c_str(), median(nvrtc_ms),
                *std::min_element(nvrtc_ms.begin(), nvrtc_ms.end()), median(nvcc_ms),
                *std::min_element(nvcc_ms.begin(), nvcc_ms.end()), median(nvcc_ms) / median(nvrtc_ms));
  }
  return status;
}
