// `kernelskill lower`: what the rules coder writes for a task, as files to read or to
// review by hand with `kernelskill-gpu --review`.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "coder/rules_coder.hpp"
#include "fleet/worker_process.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"

namespace ks::cli {

int lower_task(const std::string& task_path, const std::string& out_dir, uint32_t seeds, const std::string& skills_dir,
               const std::string& gpu_worker, const std::string& size, const process_limits& limits) {
  auto task = load_task(task_path);
  if (!task) {
    std::cerr << "kernelskill: " << task.message() << "\n";
    return 1;
  }
  rules_coder_options o;
  o.gpu_worker = gpu_worker.empty() ? default_worker_binary() : gpu_worker;
  o.skills_dir = skills_dir;
  o.limits = limits;
  auto coder = rules_coder::create(o);
  if (!coder) {
    std::cerr << "kernelskill: " << coder.message() << "\n";
    return 2;
  }
  auto cands = (*coder)->seeds(*task, seeds);
  if (!cands) {
    std::cerr << "kernelskill: " << cands.message() << "\n";
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    std::cerr << "kernelskill: --out: cannot create " << out_dir << ": " << ec.message() << "\n";
    return 2;
  }
  int status = 0;
  for (size_t k = 0; k < cands->size(); ++k) {
    const candidate& c = (*cands)[k];
    std::filesystem::path cu = std::filesystem::path(out_dir) / ("seed-" + std::to_string(k) + ".cu");
    std::filesystem::path yaml = std::filesystem::path(out_dir) / ("seed-" + std::to_string(k) + ".yaml");
    std::ofstream(cu) << c.source;
    std::string header = "# " + c.task + ", " + c.origin + ", candidate " + c.id + "\n# recipe:";
    for (auto& [key, v] : c.recipe) header += " " + key + "=" + v;
    std::ofstream(yaml) << header << "\n# Source: " << cu.filename().string() << "\n" << to_yaml(c.plan);
    std::string check = "plan resolves";
    auto ctx = make_plan_context(*task, c.source, size);
    if (!ctx) {
      check = ctx.message();
      status = 1;
    } else if (auto r = resolve_plan(c.plan, *ctx); !r) {
      check = "plan does not resolve: " + r.message();
      status = 1;
    }
    std::cout << yaml.string() << ": " << c.recipe.at("template") << " [" << c.recipe.at("stages") << "] " << check
              << "\n";
  }
  return status;
}

}  // namespace ks::cli
