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

std::vector<import_outcome> import_problems(const std::vector<problem_file>& problems, const fs::path& out_dir,
                                            const kernelbench_import_options& options, unsigned jobs,
                                            const std::function<void(size_t, const import_outcome&)>& done) {
  const size_t n = problems.size();
  std::vector<import_outcome> outcomes(n);
  std::atomic<size_t> next{0};
  std::mutex report;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      outcomes[i] = import_kernelbench_problem(problems[i], out_dir, options);
      std::lock_guard<std::mutex> lock(report);
      if (done) done(i, outcomes[i]);
    }
  };
  jobs = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(std::max<size_t>(n, 1))));
  std::vector<std::thread> threads;
  for (unsigned j = 0; j < jobs; ++j) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  return outcomes;
}

std::string describe_import(const problem_file& p, const import_outcome& o) {
  std::string line = (p.subdir / p.path.filename()).string();
  if (o.ok()) {
    line += ": " + o.task_path.string() + " (" + std::to_string(o.inputs) + " input" + (o.inputs == 1 ? "" : "s") +
            (o.input_program ? " from an input program" : "") + ", " + std::to_string(o.parameters) + " parameter" +
            (o.parameters == 1 ? "" : "s") + ")";
    for (const auto& note : o.notes) line += "; " + note;
  } else {
    line += ": FAILED: " + o.error.substr(std::min(o.error.size(), p.path.string().size() + 2));
  }
  return line;
}

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
  options.limits = {.cpu_seconds = r.cpu_seconds,
                    .memory_mb = r.memory_mb,
                    .wall_seconds = r.wall_seconds,
                    .sandbox = sandbox_policy{}};
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
  size_t finished = 0;
  const auto outcomes = import_problems(*problems, r.out_dir, options, r.jobs, [&](size_t i, const import_outcome& o) {
    std::cerr << "[" << ++finished << "/" << n << "] " << describe_import((*problems)[i], o) << "\n";
  });

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
  std::cout << "imported " << (n - failed) << " of " << n << " problem" << (n == 1 ? "" : "s") << " into " << r.out_dir;
  if (failed) std::cout << "; " << failed << " failed (their reasons are above and in " << report_path.string() << ")";
  std::cout << "\n";
  return failed ? 1 : 0;
}

}  // namespace ks::cli
