// `kernelskill import kernelbench`: KernelBench problem files as task files
// (importer/kernelbench_import.hpp does the work; this file runs it over many files,
// a few at a time, and reports).
#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "importer/kernelbench_import.hpp"

namespace ks::cli {

namespace fs = std::filesystem;

int import_kernelbench(const import_request& r) {
  auto problems = find_problem_files(r.paths);
  if (!problems) {
    std::cerr << "kernelskill import: " << problems.message() << "\n";
    return 1;
  }
  if (problems->empty()) {
    std::cerr << "kernelskill import: no .py files among the paths given\n";
    return 1;
  }
  kernelbench_import_options options;
  options.python = r.python;
  options.seed = r.seed;
  options.trace_gib = r.trace_gib;
  options.limits = {.cpu_seconds = r.cpu_seconds, .memory_mb = r.memory_mb, .wall_seconds = r.wall_seconds};
  if (auto ok = check_python(options); !ok) {
    std::cerr << "kernelskill import: " << ok.message() << "\n";
    return 1;
  }
  std::error_code ec;
  fs::create_directories(r.out_dir, ec);
  if (ec) {
    std::cerr << "kernelskill import: cannot create " << r.out_dir << ": " << ec.message() << "\n";
    return 1;
  }

  const size_t n = problems->size();
  std::vector<import_outcome> outcomes(n);
  std::atomic<size_t> next{0}, done{0};
  std::mutex print;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      outcomes[i] = import_kernelbench_problem((*problems)[i], r.out_dir, options);
      const import_outcome& o = outcomes[i];
      std::lock_guard<std::mutex> lock(print);
      size_t k = ++done;
      std::cerr << "[" << k << "/" << n << "] " << ((*problems)[i].subdir / (*problems)[i].path.filename()).string();
      if (o.ok()) {
        std::cerr << ": " << o.task_path.string() << " (" << o.inputs << " input" << (o.inputs == 1 ? "" : "s")
                  << (o.input_program ? " from an input program" : "") << ", " << o.parameters << " parameter"
                  << (o.parameters == 1 ? "" : "s") << ")";
        for (const auto& note : o.notes) std::cerr << "; " << note;
      } else {
        std::cerr << ": FAILED: " << o.error.substr((*problems)[i].path.string().size() + 2);
      }
      std::cerr << "\n";
    }
  };
  unsigned jobs = std::max(1u, std::min<unsigned>(r.jobs, static_cast<unsigned>(n)));
  std::vector<std::thread> threads;
  for (unsigned j = 0; j < jobs; ++j) threads.emplace_back(work);
  for (auto& t : threads) t.join();

  nlohmann::json report = nlohmann::json::array();
  size_t failed = 0;
  for (const auto& o : outcomes) {
    failed += !o.ok();
    report.push_back({{"file", o.problem.path.string()},
                      {"task", o.task_path.string()},
                      {"error", o.error},
                      {"notes", o.notes},
                      {"inputs", o.inputs},
                      {"parameters", o.parameters},
                      {"input_program", o.input_program},
                      {"seconds", o.seconds}});
  }
  const fs::path report_path = fs::path(r.out_dir) / "import-report.json";
  std::ofstream(report_path) << report.dump(1) << "\n";
  std::cout << "imported " << (n - failed) << " of " << n << " problem" << (n == 1 ? "" : "s") << " into "
            << r.out_dir;
  if (failed) std::cout << "; " << failed << " failed (their reasons are above and in " << report_path.string() << ")";
  std::cout << "\n";
  return failed ? 1 : 0;
}

}  // namespace ks::cli
