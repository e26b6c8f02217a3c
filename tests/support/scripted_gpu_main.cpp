// ks-scripted-gpu: a stand-in for kernelskill-gpu where there is no GPU (CI), so that
// the daemon and `kernelskill run` can be driven end to end by tests: it speaks the
// worker's protocol over CAF, says it has one device, and reviews each candidate by
// compiling it with the real NVRTC. A compile error is reported as the real worker
// reports it. A candidate that compiles is "correct", with a speedup and profile
// derived from a hash of its source — deterministic, so a test can rely on a
// candidate's verdict not changing between runs or restarts — unless its source
// names a verdict the way tests/agent_loop_test.cpp does:
//   // verdict: ok speedup=1.7      // verdict: incorrect      // verdict: crash
// Phase times: compile is the NVRTC compile's own wall time; the GPU phases are scripted
// too, a few milliseconds per trial and 1.5 s of profile for a correct candidate, the
// proportions an H200 showed at the tasks' test sizes (docs/reviewer.md).
//   // verdict: abort                // verdict: hang
// (abort: the worker process aborts mid-review, as a kernel that kills its process;
// hang: the review never ends, as a kernel that never finishes.)
// KS_SCRIPTED_REVIEW_MS=N makes every review take at least N ms, so that a test can
// act while tasks are running. KS_SCRIPTED_COMPILE=0 skips NVRTC (every candidate
// compiles), so that a bench of many stand-in nodes on a few cores measures the fleet,
// not the compiler. Each review's start is logged to stderr
// ("ks-scripted-gpu: reviewing ID on device N, pid P"), so that a test can act while
// one is in flight. The device it describes has the ordinal of --device (0 without)
// and the model KS_SCRIPTED_GPU_NAME (a default name without): tests of the fleet
// give nodes different models. A review's `device` names the model, the ordinal and
// the worker's pid.
// The rules coder asks the configured worker binary for the task's graph
// (`--graph`, CPU LibTorch, no GPU needed): that request is handed to the real
// kernelskill-gpu beside this program, so one `gpus.worker_binary` serves both.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "base/content_hash.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "model/review.hpp"
#include "tests/support/test_worker_main.hpp"

namespace {

// A number in [0, 1) from the source's hash: the same source gets the same number.
double unit_from(const std::string& text, size_t salt) {
  auto h = ks::sha256_hex(text);
  return std::stoul(h.substr(salt * 6 % 56, 6), nullptr, 16) / double(1 << 24);
}

std::string gpu_name() {
  const char* name = std::getenv("KS_SCRIPTED_GPU_NAME");
  return name && *name ? name : "Scripted GPU (NVRTC only; verdicts are scripted)";
}

// KS_SCRIPTED_SMS: the SM count its device reports (default an H200's 132).
int scripted_sms() {
  const char* s = std::getenv("KS_SCRIPTED_SMS");
  const int n = s && *s ? std::atoi(s) : 0;
  return n > 0 ? n : 132;
}

ks::review_result review(ks::nvrtc_compiler& nvrtc, const ks::review_request& req) {
  ks::review_result r;
  r.request_id = req.request_id;
  r.candidate_id = req.cand.id;
  // Which worker process reviewed it: tests of the fleet tell nodes apart by it.
  r.device =
      gpu_name() + "/" + std::to_string(std::max(0, ks::test::requested_device())) + " pid " + std::to_string(getpid());
  const auto t0 = std::chrono::steady_clock::now();
  static const bool compile = [] {
    const char* c = std::getenv("KS_SCRIPTED_COMPILE");
    return !(c && std::string(c) == "0");
  }();
  if (!compile) {
    r.status = ks::review_status::ok;
    r.trials_run = r.trials_passed = req.options.trials;
    r.speedup = 1;
    r.message = "not compiled (KS_SCRIPTED_COMPILE=0); correct (scripted verdict)";
    return r;
  }
  auto c = nvrtc.compile(req.cand.source, req.cand.compile_options);
  r.phases.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!c) {
    r.status = ks::review_status::internal_error;
    r.message = c.message();
    return r;
  }
  if (!c->ok) {
    r.status = ks::review_status::compile_error;
    r.message = c->timed_out ? "the compile timed out" : "compile failed";
    r.diagnostics = c->diagnostics;
    r.compile_log = c->log;
    return r;
  }
  r.resources = c->resources;
  std::string verdict = "ok";
  double speedup = 0.7 + 1.3 * unit_from(req.cand.source, 0);
  std::smatch m;
  static const std::regex re("// verdict: (\\w+)(?: speedup=([0-9.]+))?");
  if (std::regex_search(req.cand.source, m, re)) {
    verdict = m[1];
    if (m[2].matched) speedup = std::stod(m[2]);
  }
  if (verdict == "abort") std::abort();
  if (verdict == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  r.trials_run = req.options.trials;
  if (verdict != "crash") {
    r.phases.inputs_s = 0.004 * r.trials_run;
    r.phases.reference_s = 0.002 * r.trials_run;
    r.phases.verify_s = 0.006 * r.trials_run;
  }
  if (verdict == "ok") {
    if (req.options.time) r.phases.timing_s = 0.05;
    if (req.options.profile) r.phases.profile_s = 1.5;
    r.status = ks::review_status::ok;
    r.trials_passed = r.trials_run;
    r.reference_time.median_ms = 1.0;
    r.candidate_time.median_ms = 1.0 / speedup;
    r.speedup = speedup;
    // Profiles that differ from candidate to candidate, so that the planner's
    // bottleneck classes (and so its choices) vary as they would on a GPU.
    const double dram = 20 + 75 * unit_from(req.cand.source, 1);
    r.profile.values = {{"dram_throughput_pct", dram},
                        {"l2_throughput_pct", 20 + 60 * unit_from(req.cand.source, 2)},
                        {"l1_throughput_pct", 15 + 60 * unit_from(req.cand.source, 3)},
                        {"sm_throughput_pct", 10 + 70 * unit_from(req.cand.source, 4)},
                        {"achieved_occupancy_pct", 30 + 65 * unit_from(req.cand.source, 5)},
                        {"stall_long_scoreboard_pct", 60 * unit_from(req.cand.source, 6)},
                        {"branch_efficiency_pct", 100}};
    r.profile.kernel_launches = 1;
    r.message = "correct in every trial (scripted verdict)";
  } else if (verdict == "crash") {
    r.status = ks::review_status::crashed;
    r.message = "an illegal memory access was encountered (scripted verdict)";
  } else {
    r.status = ks::review_status::incorrect;
    r.max_abs_error = 0.5;
    r.message = "the output differs from the reference (scripted verdict)";
  }
  return r;
}

ks::review_result scripted_review(ks::nvrtc_compiler& nvrtc, int delay_ms, const ks::review_request& req) {
  const auto t0 = std::chrono::steady_clock::now();
  std::fprintf(stderr, "ks-scripted-gpu: reviewing %s on device %d, pid %d\n", req.cand.id.c_str(),
               std::max(0, ks::test::requested_device()), static_cast<int>(getpid()));
  std::fflush(stderr);
  auto r = review(nvrtc, req);
  // What crossed the link: fleet tests of modules sent in parts read it.
  if (!req.task.module_bytes.empty())
    r.message += " (module of " + std::to_string(req.task.module_bytes.size()) + " bytes, sha256 " +
                 req.task.module_bytes.sha256_hex() + ")";
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(delay_ms));
  return r;
}

ks::gpu_worker_actor::behavior_type scripted_worker(ks::gpu_worker_actor::pointer) {
  auto nvrtc = std::make_shared<ks::nvrtc_compiler>();
  auto modules = std::make_shared<ks::module_store>(uint64_t{16} << 30);
  const char* delay = std::getenv("KS_SCRIPTED_REVIEW_MS");
  const int delay_ms = delay ? std::atoi(delay) : 0;
  return {
      [](ks::describe_atom) {
        ks::worker_info info;
        info.host = "scripted";
        info.pid = static_cast<int32_t>(getpid());
        info.version = ks::protocol_version;
        ks::device_info d;
        d.ordinal = std::max(0, ks::test::requested_device());
        d.name = gpu_name();
        d.cc_major = 9;
        d.cc_minor = 0;
        d.total_memory_bytes = 1ull << 34;
        d.multiprocessors = scripted_sms();
        info.devices.push_back(d);
        return info;
      },
      [nvrtc, delay_ms](const ks::review_request& req) { return scripted_review(*nvrtc, delay_ms, req); },
      [modules](ks::module_part& part) { return modules->add(std::move(part)); },
      [nvrtc, delay_ms, modules](const ks::held_review& h) {
        return modules->serve(h, [&](const ks::review_request& req) { return scripted_review(*nvrtc, delay_ms, req); });
      },
  };
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--graph") {
      std::error_code ec;
      auto real = (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "kernelskill-gpu").string();
      argv[0] = real.data();
      execv(real.c_str(), argv);
      std::fprintf(stderr, "ks-scripted-gpu: cannot run %s for --graph\n", real.c_str());
      return 2;
    }
  return ks::test::serve_test_worker(argc, argv, scripted_worker);
}
