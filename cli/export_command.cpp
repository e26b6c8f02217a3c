// `kernelskill export`: a finished kernel as a PyTorch module (ModelNew), from a run's
// output directory or from a kernel source and its plan. A task imported from a
// KernelBench problem gets KernelBench's interface (export/kernelbench_module.hpp).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "export/pytorch_export.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "task/task_loader.hpp"

namespace ks::cli {

namespace fs = std::filesystem;

namespace {

bool read_file(const fs::path& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

// A `kernelskill run` output's best kernel: id, origin and options from outcome.json,
// source and plan paths beside it.
result<candidate> outcome_candidate(const task_spec& task, const fs::path& run_dir, fs::path& kernel, fs::path& plan) {
  // output.dir/tasks/NAME/, or output.dir with the task naming NAME.
  fs::path dir = run_dir;
  if (!fs::exists(dir / "outcome.json") && fs::exists(dir / "tasks" / task.name / "outcome.json"))
    dir = dir / "tasks" / task.name;
  std::string outcome_text;
  if (!read_file(dir / "outcome.json", outcome_text))
    return error{(dir / "outcome.json").string() +
                 ": not found (expected a kernelskill run output: output.dir/tasks/NAME/)"};
  nlohmann::json outcome = nlohmann::json::parse(outcome_text, nullptr, false);
  if (outcome.is_discarded() || !outcome.is_object())
    return error{(dir / "outcome.json").string() + ": not valid JSON"};
  if (!outcome.value("success", false))
    return error{"task " + task.name + " ended without a correct kernel (" +
                 outcome.value("reason", std::string("no reason given")) + "): nothing to export"};
  if (outcome.value("task", task.name) != task.name)
    std::cerr << "kernelskill export: warning: " << (dir / "outcome.json").string() << " is for task '"
              << outcome.value("task", std::string()) << "', --task names '" << task.name << "'\n";
  candidate c;
  c.task = task.name;
  c.id = outcome.value("best_candidate", std::string());
  c.origin = outcome.value("best_origin", std::string());
  if (outcome.contains("compile_options") && outcome["compile_options"].is_array())
    for (auto& o : outcome["compile_options"]) c.compile_options.push_back(o.get<std::string>());
  if (kernel.empty()) kernel = dir / "kernel.cu";
  if (plan.empty()) plan = dir / "plan.yaml";
  return c;
}

result<candidate> with_source_and_plan(candidate c, const fs::path& kernel, const fs::path& plan) {
  if (!read_file(kernel, c.source)) return error{kernel.string() + ": cannot read"};
  auto p = load_launch_plan(plan.string());
  if (!p) return error{p.message()};
  c.plan = *p;
  return c;
}

}  // namespace

result<candidate> run_candidate(const task_spec& task, const fs::path& run_dir) {
  fs::path kernel, plan;
  auto c = outcome_candidate(task, run_dir, kernel, plan);
  if (!c) return c;
  return with_source_and_plan(std::move(*c), kernel, plan);
}

int export_model(const export_request& r) {
  auto task = load_task(r.task_path);
  if (!task) {
    std::cerr << "kernelskill export: " << task.message() << "\n";
    return 1;
  }
  candidate c;
  c.task = task->name;
  fs::path kernel = r.kernel_path, plan = r.plan_path;
  if (!r.run_dir.empty()) {
    auto from_run = outcome_candidate(*task, r.run_dir, kernel, plan);
    if (!from_run) {
      std::cerr << "kernelskill export: " << from_run.message() << "\n";
      return 1;
    }
    c = std::move(*from_run);
  }
  if (kernel.empty() || plan.empty()) {
    std::cerr << "kernelskill export: give --run-dir, or --kernel and --plan\n";
    return 2;
  }
  auto read = with_source_and_plan(std::move(c), kernel, plan);
  if (!read) {
    std::cerr << "kernelskill export: " << read.message() << "\n";
    return 1;
  }
  c = std::move(*read);
  for (auto& o : r.compile_options) c.compile_options.push_back(o);

  auto ex = export_pytorch(*task, c);
  if (!ex) {
    std::cerr << "kernelskill export: " << ex.message() << "\n";
    return 1;
  }
  if (r.out_path == "-") {
    std::cout << ex->python;
  } else {
    std::ofstream f(r.out_path, std::ios::binary | std::ios::trunc);
    f << ex->python;
    f.flush();
    if (!f) {
      std::cerr << "kernelskill export: cannot write " << r.out_path << "\n";
      return 1;
    }
  }
  std::cerr << "kernelskill export: " << (r.out_path == "-" ? std::string("stdout") : r.out_path) << ": ModelNew for "
            << task->name << " (module " << ex->module_name << ", sizes ";
  for (size_t i = 0; i < ex->sizes.size(); ++i) std::cerr << (i ? ", " : "") << ex->sizes[i];
  std::cerr << ")" << (task->kernelbench.source.empty() ? "" : ", with KernelBench's interface") << "\n";
  for (auto& s : ex->skipped_sizes) std::cerr << "  size left out: " << s << "\n";
  return 0;
}

}  // namespace ks::cli
