// `kernelskill check`, `task check` and `plan check`: validation without a GPU.

#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "config/experiment_config.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"

namespace ks::cli {

namespace {

std::string dims(const std::array<int64_t, 3>& d) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + ")";
}

}  // namespace

int check_tasks(const std::vector<std::string>& task_paths, const std::string& size, bool print) {
  int bad = 0;
  for (auto& path : task_paths) {
    auto task = load_task(path);
    if (task && !size.empty()) task = with_size(*task, size);
    if (!task) {
      std::cerr << task.message() << "\n";
      ++bad;
      continue;
    }
    if (print) {
      std::cout << "# " << path << "\n" << to_yaml(*task) << "\n";
    } else {
      std::cout << path << ": ok (task '" << task->name << "', " << task->inputs.size()
                << " inputs, " << task->parameters.size() << " parameters)\n";
    }
  }
  return bad == 0 ? 0 : 1;
}

int check_config(const std::string& config_path, bool print, const global_options&) {
  auto cfg = load_config(config_path);
  if (!cfg) {
    std::cerr << cfg.message() << "\n";
    return 1;
  }
  if (print) std::cout << to_yaml(*cfg);
  int bad = 0;
  for (auto& path : cfg->tasks) {
    auto task = load_task(path);
    if (task && !cfg->review.size.empty()) task = with_size(*task, cfg->review.size);
    if (!task) {
      std::cerr << task.message() << "\n";
      ++bad;
    }
  }
  std::cerr << config_path << ": " << (bad ? "invalid" : "ok") << " (" << cfg->tasks.size()
            << " tasks, " << bad << " with errors; coder " << cfg->coder.backend << ")\n";
  return bad == 0 ? 0 : 1;
}

int check_plan(const std::string& plan_path, const std::string& task_path,
               const std::string& source_path, const std::string& size) {
  auto task = load_task(task_path);
  if (!task) {
    std::cerr << task.message() << "\n";
    return 1;
  }
  std::ifstream in(source_path, std::ios::binary);
  if (!in) {
    std::cerr << source_path << ": cannot read the kernel source\n";
    return 1;
  }
  std::stringstream source;
  source << in.rdbuf();
  auto plan = load_launch_plan(plan_path);
  if (!plan) {
    std::cerr << plan.message() << "\n";
    return 1;
  }
  auto ctx = make_plan_context(*task, source.str(), size);
  if (!ctx) {
    std::cerr << ctx.message() << "\n";
    return 1;
  }
  auto resolved = resolve_plan(*plan, *ctx);
  if (!resolved) {
    std::cerr << plan_path << ": " << resolved.message() << "\n";
    return 1;
  }
  std::cout << plan_path << ": ok for task '" << task->name << "'"
            << (size.empty() ? "" : " at size " + size) << "\n";
  for (auto& [name, value] : resolved->constants)
    std::cout << "  constant " << name << " = " << value.to_string() << "\n";
  auto print_buffers = [](const char* what, const std::vector<resolved_buffer>& bufs) {
    for (auto& b : bufs)
      std::cout << "  " << what << " " << b.name << ": " << b.dtype << " "
                << (b.shape_known ? shape_to_string(b.shape) : "[?]") << "\n";
  };
  print_buffers("output", resolved->outputs);
  print_buffers("scratch", resolved->scratch);
  print_buffers("intermediate", resolved->intermediates);
  for (auto& s : resolved->steps) {
    std::cout << "  " << s.label();
    if (s.kind == "kernel")
      std::cout << ": grid " << dims(s.grid) << " block " << dims(s.block) << " shared "
                << s.shared_mem_bytes << " B";
    std::cout << "\n    args:";
    for (auto& a : s.args) {
      if (a.kind == "tensor") std::cout << " " << a.tensor;
      else if (a.kind == "int") std::cout << " " << a.type << ":" << a.int_value;
      else std::cout << " " << a.type << ":" << a.float_value;
    }
    std::cout << "\n";
  }
  for (auto& w : resolved->warnings) std::cout << "  warning: " << w << "\n";
  return 0;
}

}  // namespace ks::cli
