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

}  // namespace

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
    // A `kernelskill run` output: output.dir/tasks/NAME/ (or output.dir, with --task
    // naming the task).
    fs::path dir = r.run_dir;
    if (!fs::exists(dir / "outcome.json") && fs::exists(dir / "tasks" / task->name / "outcome.json"))
      dir = dir / "tasks" / task->name;
    std::string outcome_text;
    if (!read_file(dir / "outcome.json", outcome_text)) {
      std::cerr << "kernelskill export: " << (dir / "outcome.json").string()
                << ": not found (expected a kernelskill run output: output.dir/tasks/NAME/)\n";
      return 1;
    }
    nlohmann::json outcome = nlohmann::json::parse(outcome_text, nullptr, false);
    if (outcome.is_discarded() || !outcome.is_object()) {
      std::cerr << "kernelskill export: " << (dir / "outcome.json").string() << ": not valid JSON\n";
      return 1;
    }
    if (!outcome.value("success", false)) {
      std::cerr << "kernelskill export: task " << task->name << " ended without a correct kernel ("
                << outcome.value("reason", std::string("no reason given")) << "): nothing to export\n";
      return 1;
    }
    if (outcome.value("task", task->name) != task->name)
      std::cerr << "kernelskill export: warning: " << (dir / "outcome.json").string() << " is for task '"
                << outcome.value("task", std::string()) << "', --task names '" << task->name << "'\n";
    c.id = outcome.value("best_candidate", std::string());
    c.origin = outcome.value("best_origin", std::string());
    if (outcome.contains("compile_options") && outcome["compile_options"].is_array())
      for (auto& o : outcome["compile_options"]) c.compile_options.push_back(o.get<std::string>());
    if (kernel.empty()) kernel = dir / "kernel.cu";
    if (plan.empty()) plan = dir / "plan.yaml";
  }
  if (kernel.empty() || plan.empty()) {
    std::cerr << "kernelskill export: give --run-dir, or --kernel and --plan\n";
    return 2;
  }
  if (!read_file(kernel, c.source)) {
    std::cerr << "kernelskill export: " << kernel.string() << ": cannot read\n";
    return 1;
  }
  auto p = load_launch_plan(plan.string());
  if (!p) {
    std::cerr << "kernelskill export: " << p.message() << "\n";
    return 1;
  }
  c.plan = *p;
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
            << task->name << " (module " << ex->module_name << ", sizes " ;
  for (size_t i = 0; i < ex->sizes.size(); ++i) std::cerr << (i ? ", " : "") << ex->sizes[i];
  std::cerr << ")" << (task->kernelbench.source.empty() ? "" : ", with KernelBench's interface") << "\n";
  for (auto& s : ex->skipped_sizes) std::cerr << "  size left out: " << s << "\n";
  return 0;
}

}  // namespace ks::cli
