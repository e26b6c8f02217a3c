// ks-emulate: the rules coder's seeds of each task run on the CPU (the kernels through
// tests/support/kernel_emulator.hpp, library steps through ATen) against the task's
// LibTorch reference, at the task's own shapes. A correctness check that needs no GPU,
// for problems no GPU run has seen yet (bench/kernelbench/emulate.sh runs it over
// KernelBench at small sizes); the GPU review stays the judge. Test-only, as the
// emulator is.
//
//   ks-emulate [--seeds N] [--work DIR] TASK.yaml...
//
// One JSON line per task on stdout: {"task", "seeds", "correct", "max_abs_error",
// "seconds", "error", "reference_spread", "unstable", "note"} (error: the first reason
// a seed was wrong or could not run, or why the task could not be lowered;
// reference_spread: how far the reference on all threads and on one differ; unstable:
// past the tolerance, said first in error, or in note where every seed matched). Exit
// status 0 when every seed of every task was correct, 1 otherwise.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "coder/rules_coder.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "task/task_loader.hpp"
#include "tests/support/cpu_plan_runner.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

// Outputs against the reference's: the largest abs error up to the first output that
// differs, and why it differs (empty where every one is within the tolerance and has
// NaN where the reference has).
struct comparison {
  double err = 0;
  std::string why;
};
comparison compare(const std::vector<at::Tensor>& outs, const std::vector<at::Tensor>& ref, const tolerance_spec& tol) {
  comparison c;
  if (outs.size() != ref.size()) {
    c.why = std::to_string(outs.size()) + " outputs, the reference has " + std::to_string(ref.size());
    return c;
  }
  for (size_t i = 0; i < outs.size() && c.why.empty(); ++i) {
    at::Tensor want = ref[i].to(at::kFloat).contiguous(), got = outs[i].to(at::kFloat);
    if (want.sizes() != got.sizes()) {
      c.why = "output " + std::to_string(i) + " has another shape";
      break;
    }
    c.err = std::max(c.err, want.numel() ? (got - want).abs().nan_to_num(INFINITY).max().item<double>() : 0.0);
    if (!at::allclose(got, want, tol.rtol, tol.atol, /*equal_nan=*/true) || !at::equal(got.isnan(), want.isnan()))
      c.why = "output " + std::to_string(i) + ": max abs error " + std::to_string(c.err);
  }
  return c;
}

// The task's seeds on the CPU: how many were correct, the largest error of a correct
// one, the first failure.
nlohmann::json emulate(rules_coder& coder, const fs::path& file, uint32_t seeds, const fs::path& work) {
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json out = {{"task", file.stem().string()}, {"seeds", 0}, {"correct", 0}, {"max_abs_error", nullptr}};
  auto done = [&](const std::string& error) {
    out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!error.empty()) out["error"] = error;
    return out;
  };
  auto task = load_task(file);
  if (!task) return done("load: " + task.message());
  out["task"] = task->name;
  auto cands = coder.seeds(*task, seeds);
  if (!cands) return done("lower: " + cands.message());
  auto prog = reference_program::load(*task);
  if (!prog) return done("reference: " + prog.message());
  auto inputs = make_inputs(*task, trial_seed(task->seed, 0), c10::Device(c10::kCPU));
  if (!inputs) return done("inputs: " + inputs.message());
  auto ref = run_tensors(**prog, *inputs);
  if (!ref) return done("reference: " + ref.message());
  const auto& params = parameter_tensors(**prog);
  // The reference against itself on one thread (a fresh copy: forward may update module
  // state). Where the two differ past the tolerance -- a batch of 2 through a deep
  // chain of training-mode batch norms at the small sizes -- no seed can be judged.
  std::string unstable;
  if (const int threads = at::get_num_threads(); threads > 1) {
    auto again = reference_program::load(*task);
    if (!again) return done("reference: " + again.message());
    at::set_num_threads(1);
    auto one = run_tensors(**again, *inputs);
    at::set_num_threads(threads);
    if (!one) return done("reference on one thread: " + one.message());
    const comparison self = compare(*one, *ref, task->tolerance);
    out["reference_spread"] = self.err;
    if (!self.why.empty())
      unstable = "unstable at these sizes: the reference differs from itself by " + std::to_string(self.err) +
                 " between " + std::to_string(threads) + " threads and 1";
  }
  std::string first_error;
  double worst = 0;
  int correct = 0;
  for (const candidate& c : *cands) {
    auto outs = test::run_candidate_on_cpu(*task, c, *inputs, params, work);
    const comparison cmp = outs ? compare(*outs, *ref, task->tolerance) : comparison{0, outs.message()};
    const std::string& why = cmp.why;
    const double err = cmp.err;
    if (why.empty()) {
      ++correct;
      worst = std::max(worst, err);
    } else if (first_error.empty()) {
      first_error = c.origin + ": " + why;
    }
  }
  out["seeds"] = cands->size();
  out["correct"] = correct;
  if (correct) out["max_abs_error"] = worst;
  if (!unstable.empty()) {
    out["unstable"] = true;
    if (first_error.empty())
      out["note"] = unstable;
    else
      first_error = unstable + "; " + first_error;
  }
  return done(first_error);
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t seeds = 2;
  fs::path work = fs::temp_directory_path() / ("ks-emulate-" + std::to_string(::getpid()));
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      seeds = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (a == "--work" && i + 1 < argc) {
      work = argv[++i];
    } else if (a == "-h" || a == "--help") {
      std::puts(
          "ks-emulate [--seeds N] [--work DIR] TASK.yaml...: the rules coder's seeds run on the CPU\n"
          "against each task's reference; one JSON line a task (tests/support/emulate_main.cpp).");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "ks-emulate: unknown option %s (see --help)\n", a.c_str());
      return 2;
    } else {
      files.emplace_back(a);
    }
  }
  if (files.empty()) {
    std::fputs("ks-emulate: no task file given (see --help)\n", stderr);
    return 2;
  }
  rules_coder_options o;
  o.gpu_worker = fs::canonical("/proc/self/exe").parent_path() / "kernelskill-gpu";
  o.skills_dir = fs::path(KS_SOURCE_DIR) / "skills";
  auto coder = rules_coder::create(o);
  if (!coder) {
    std::fprintf(stderr, "ks-emulate: %s\n", coder.message().c_str());
    return 2;
  }
  bool all = true;
  for (const auto& f : files) {
    nlohmann::json r = emulate(**coder, f, seeds, work);
    all = all && !r.contains("error") && r["correct"] == r["seeds"];
    std::printf("%s\n", r.dump().c_str());
    std::fflush(stdout);
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  return all ? 0 : 1;
}
