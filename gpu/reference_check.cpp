#include "gpu/reference_check.hpp"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "base/content_hash.hpp"
#include "base/private_dir.hpp"
#include "task/task_files.hpp"
#include "task/task_loader.hpp"

namespace ks {

namespace {

std::string own_executable() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("kernelskill-gpu") : self.string();
}

}  // namespace

std::string reference_check::refused(const task_spec& task, const std::string& size, double review_timeout_s) {
  process_limits limits = opts_.limits;
  if (review_timeout_s > 0)
    limits.wall_seconds = std::max(1, std::min(limits.wall_seconds, static_cast<int>(review_timeout_s * 0.8)));
  const std::string key = sha256_hex(to_yaml(task) + "\n" + sha256_hex(task.module_bytes) + "\n" + size +
                                     "\n" + std::to_string(limits.wall_seconds));
  {
    std::lock_guard lock(mu_);
    if (auto it = verdicts_.find(key); it != verdicts_.end()) return it->second;
  }
  std::string verdict = run_child(task, size, limits);
  std::lock_guard lock(mu_);
  if (verdicts_.emplace(key, verdict).second) order_.push_back(key);
  while (order_.size() > opts_.remembered) {
    verdicts_.erase(order_.front());
    order_.pop_front();
  }
  return verdict;
}

std::string reference_check::run_child(const task_spec& task, const std::string& size,
                                       const process_limits& limits) {
  auto dir = private_dir::create("ks-refcheck");
  if (!dir) {
    spdlog::warn("reference check of task '{}' skipped: {}", task.name, dir.message());
    return "";
  }
  auto yaml = write_task_files(task, dir->path());
  if (!yaml) {
    spdlog::warn("reference check of task '{}' skipped: {}", task.name, yaml.message());
    return "";
  }
  const std::string program = opts_.program.empty() ? own_executable() : opts_.program;
  std::string cmd = "exec " + shell_quote(program) + " --log-level error --run-reference " +
                    shell_quote(yaml->string()) + " --on " + shell_quote(opts_.device.empty() ? "cpu" : opts_.device);
  if (!size.empty() && task.sizes.count(size)) cmd += " --size " + shell_quote(size);
  auto run = run_bounded(cmd, limits, dir->path() / "reference.err");
  if (!run) {
    spdlog::warn("reference check of task '{}' skipped: {}", task.name, run.message());
    return "";
  }
  if (run->ok() || run->limit.empty()) return "";  // ran, or failed in its own words: the review says
  std::string why = "the reference of task \"" + task.name + "\" was stopped before any review ran it: " +
                    run->limit + ". Its limits: " + std::to_string(limits.cpu_seconds) + " s of CPU, " +
                    std::to_string(limits.memory_mb) + " MiB of memory, " + std::to_string(limits.wall_seconds) +
                    " s of wall clock (kernelskill-gpu --reference-cpu-seconds, --reference-memory-mb, "
                    "--reference-wall-seconds: the config's references.*; the wall clock at most 80% of "
                    "the review's timeout, gpus.review_timeout_s)";
  spdlog::warn("{}", why);
  return why;
}

}  // namespace ks
