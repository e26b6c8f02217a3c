#include "gpu/reference_check.hpp"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "base/content_hash.hpp"
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
  const std::string key = sha256_hex(to_yaml(task) + "\n" + task.module_bytes.sha256_hex() + "\n" + size + "\n" +
                                     std::to_string(limits.wall_seconds));
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

std::string reference_check::run_child(const task_spec& task, const std::string& size, const process_limits& limits) {
  const std::string program = opts_.program.empty() ? own_executable() : opts_.program;
  auto run = opts_.launcher ? opts_.launcher->run(task, size, opts_.device, limits.wall_seconds)
                            : run_reference_child(program, opts_.device, task, size, limits);
  if (!run) {
    spdlog::warn("reference check of task '{}' skipped: {}", task.name, run.message());
    return "";
  }
  if (!run->ok() && run->limit.empty()) {
    // The review runs it again and says why in its own words; the log keeps the child's.
    std::string last = run->err;
    while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
    if (auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
    spdlog::info("reference check of task '{}': the reference failed in the child (wait status {}){}", task.name,
                 run->status, last.empty() ? "" : ": " + last);
  }
  if (run->ok() || run->limit.empty()) return "";  // ran, or failed in its own words: the review says
  std::string why = "the reference of task \"" + task.name + "\" was stopped before any review ran it: " + run->limit +
                    ". Its limits: " + std::to_string(limits.cpu_seconds) + " s of CPU, " +
                    std::to_string(limits.memory_mb) + " MiB of memory, " + std::to_string(limits.wall_seconds) +
                    " s of wall clock (kernelskill-gpu --reference-cpu-seconds, --reference-memory-mb, "
                    "--reference-wall-seconds: the config's references.*; the wall clock at most 80% of "
                    "the review's timeout, gpus.review_timeout_s)";
  spdlog::warn("{}", why);
  return why;
}

}  // namespace ks
