#include "task/task_files.hpp"

#include <fstream>

#include "task/task_loader.hpp"

namespace ks {

result<std::filesystem::path> write_task_files(const task_spec& task, const std::filesystem::path& dir) {
  const std::filesystem::path yaml = dir / "task.yaml";
  std::string module_path = task.module_path;
  if (!task.module_bytes.empty()) {
    const std::filesystem::path module = dir / "module.pt";
    std::ofstream out(module, std::ios::binary);
    out.write(task.module_bytes.data(), static_cast<std::streamsize>(task.module_bytes.size()));
    if (!out.flush()) return error{"cannot write " + module.string()};
    module_path = module.string();
  }
  std::ofstream out(yaml);
  out << to_yaml(task, module_path);  // not a copy of the task: its bytes may be gigabytes
  if (!out.flush()) return error{"cannot write " + yaml.string()};
  return yaml;
}

}  // namespace ks
