// `kernelskill check`, `task check` and `plan check`: validation without a GPU.

#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include "base/bounded_child.hpp"
#include "base/private_dir.hpp"
#include "cli/commands.hpp"
#include "config/experiment_config.hpp"
#include "fleet/worker_process.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_files.hpp"
#include "task/task_loader.hpp"

namespace ks::cli {

namespace {

// The reference's operators, checked by kernelskill-gpu --check-reference in a bounded,
// sandboxed child (the CLI links no LibTorch): "" when allowed, else why not. The task
// is written to a private directory (its module beside it), which the child reads.
result<std::string> reference_refusal(const task_spec& task, const std::string& worker) {
  auto dir = private_dir::create("ks-check");
  if (!dir) return error{dir.message()};
  auto yaml = write_task_files(task, dir->path());
  if (!yaml) return error{yaml.message()};
  process_limits limits{.cpu_seconds = 60, .memory_mb = 4096, .wall_seconds = 120, .sandbox = {}};
  auto run =
      run_bounded("exec " + shell_quote(worker) + " --log-level error --check-reference " + shell_quote(yaml->string()),
                  limits, dir->path() / "check.err");
  if (!run) return error{run.message()};
  if (run->ok()) return std::string();
  std::string why = run->limit.empty() ? run->err : "the check was stopped: " + run->limit;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  const std::string prefix = "kernelskill-gpu: ";
  if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
  return why.empty() ? "the reference check failed (exit status " + std::to_string(run->status) + ")" : why;
}

std::string dims(const std::array<int64_t, 3>& d) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + ")";
}

}  // namespace

int check_tasks(const std::vector<std::string>& task_paths, const std::string& size, bool print) {
  int bad = 0;
  const std::string worker = default_worker_binary();
  const bool can_check = ::access(worker.c_str(), X_OK) == 0;
  if (!can_check && !print)
    std::cerr << "kernelskill task check: " << worker << " is not there: the references' operators are not "
              << "checked (build kernelskill-gpu next to kernelskill)\n";
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
      continue;
    }
    if (can_check) {
      auto refused = reference_refusal(*task, worker);
      if (!refused || !refused->empty()) {
        std::cerr << path << ": " << (refused ? *refused : refused.message()) << "\n";
        ++bad;
        continue;
      }
    }
    std::cout << path << ": ok (task '" << task->name << "', " << task->inputs.size() << " inputs, "
              << task->parameters.size() << " parameters" << (can_check ? "; its operators are allowed" : "") << ")\n";
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
  std::cerr << config_path << ": " << (bad ? "invalid" : "ok") << " (" << cfg->tasks.size() << " tasks, " << bad
            << " with errors; coder " << cfg->coder.backend << ")\n";
  return bad == 0 ? 0 : 1;
}

int check_plan(const std::string& plan_path, const std::string& task_path, const std::string& source_path,
               const std::string& size) {
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
  std::cout << plan_path << ": ok for task '" << task->name << "'" << (size.empty() ? "" : " at size " + size) << "\n";
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
      std::cout << ": grid " << dims(s.grid) << " block " << dims(s.block) << " shared " << s.shared_mem_bytes << " B";
    std::cout << "\n    args:";
    for (auto& a : s.args) {
      if (a.kind == "tensor")
        std::cout << " " << a.tensor;
      else if (a.kind == "int")
        std::cout << " " << a.type << ":" << a.int_value;
      else
        std::cout << " " << a.type << ":" << a.float_value;
    }
    std::cout << "\n";
  }
  for (auto& w : resolved->warnings) std::cout << "  warning: " << w << "\n";
  return 0;
}

}  // namespace ks::cli
