#include "report/run_report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/number_format.hpp"
#include "model/json_codec.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "report/trajectory_timeline.hpp"

namespace ks {

namespace fs = std::filesystem;

status write_file_atomically(const fs::path& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return error{"cannot create " + path.parent_path().string() + ": " + ec.message()};
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return error{"cannot write " + tmp.string()};
    f << text;
    f.flush();
    if (!f) return error{"cannot write " + tmp.string() + " (disk full?)"};
  }
  fs::rename(tmp, path, ec);
  if (ec) return error{"cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message()};
  return {};
}

nlohmann::json phases_to_json(const review_phases& p) {
  nlohmann::json j;
  to_json(j, p);
  j["total_s"] = double_to_json(p.total_s());
  return j;
}

review_phases total_review_time(const std::vector<task_outcome>& outcomes) {
  review_phases sum;
  for (const auto& o : outcomes) sum += o.review_time;
  return sum;
}

std::string safe_name(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

nlohmann::json outcome_to_json(const task_outcome& o) {
  nlohmann::json j;
  j["task"] = o.task;
  j["success"] = o.success;
  j["reason"] = o.reason;
  j["speedup"] = double_to_json(o.success ? o.best_review.speedup : 0.0);
  j["kernel_ms"] = double_to_json(o.success ? o.best_review.candidate_time.median_ms : 0.0);
  j["eager_ms"] = double_to_json(o.best_review.reference_time.median_ms);
  j["best_candidate"] = o.success ? o.best.id : "";
  j["best_origin"] = o.success ? o.best.origin : "";
  // The NVRTC options the kernel was reviewed with (kernelskill export passes them on).
  j["compile_options"] = o.success ? o.best.compile_options : std::vector<std::string>{};
  j["flags"] = o.best_review.flags;
  j["rounds"] = o.rounds;
  j["reviews"] = o.reviews;
  j["review_phases"] = phases_to_json(o.review_time);
  j["agent_restarts"] = o.agent_restarts;
  j["input_tokens"] = o.input_tokens;
  j["output_tokens"] = o.output_tokens;
  j["cost_usd"] = double_to_json(o.cost_usd);
  j["wall_s"] = double_to_json(o.wall_s);
  return j;
}

double geomean_speedup(const std::vector<task_outcome>& outcomes) {
  double log_sum = 0;
  int n = 0;
  for (const auto& o : outcomes)
    if (o.success && o.best_review.speedup > 0) {
      log_sum += std::log(o.best_review.speedup);
      ++n;
    }
  return n ? std::exp(log_sum / n) : 0.0;
}

status write_task_result(const fs::path& out_dir, const task_outcome& o,
                         const std::vector<trajectory_entry>& trajectory) {
  fs::path dir = out_dir / "tasks" / safe_name(o.task);
  if (o.success) {
    if (auto s = write_file_atomically(dir / "kernel.cu", o.best.source); !s) return s;
    if (auto s = write_file_atomically(dir / "plan.yaml", to_yaml(o.best.plan)); !s) return s;
    nlohmann::json r;
    to_json(r, o.best_review);
    if (auto s = write_file_atomically(dir / "review.json", r.dump(2) + "\n"); !s) return s;
  }
  if (auto s = write_file_atomically(dir / "outcome.json", outcome_to_json(o).dump(2) + "\n"); !s) return s;
  return write_file_atomically(dir / "trajectory.txt", render_trajectory(o.task, trajectory));
}

double tasks_per_hour(const run_summary& s) {
  return s.wall_s > 0 ? 3600.0 * static_cast<double>(s.outcomes.size()) / s.wall_s : 0;
}

double device_busy_fraction(const run_summary& s) {
  if (s.wall_s <= 0 || s.devices == 0) return 0;
  return total_review_time(s.outcomes).total_s() / (s.wall_s * s.devices);
}

std::string summary_markdown(const run_summary& s) {
  std::string md = "# KernelSkill run: " + s.experiment + "\n\n";
  int ok = 0;
  int64_t in_tok = 0, out_tok = 0;
  double cost = 0;
  for (const auto& o : s.outcomes) {
    ok += o.success;
    in_tok += o.input_tokens;
    out_tok += o.output_tokens;
    cost += o.cost_usd;
  }
  md += "Coder: " + s.coder + ". Tasks: " + std::to_string(s.outcomes.size()) + " finished, " + std::to_string(ok) +
        " with a correct kernel";
  if (!s.pending.empty()) md += ", " + std::to_string(s.pending.size()) + " not finished";
  md +=
      ". Geometric-mean speedup over eager (successful tasks): " + format_double("%.2fx", geomean_speedup(s.outcomes)) +
      ". Wall time " + format_double("%.1f s", s.wall_s) + ". Tokens: " + std::to_string(in_tok) + " in, " +
      std::to_string(out_tok) + " out (" + format_double("$%.4f", cost) + ")";
  if (!s.outcomes.empty() && in_tok + out_tok > 0)
    md += ", " + std::to_string((in_tok + out_tok) / static_cast<int64_t>(s.outcomes.size())) + " per task";
  md += ".\n\n";
  const review_phases phases = total_review_time(s.outcomes);
  uint32_t reviews = 0;
  for (const auto& o : s.outcomes) reviews += o.reviews;
  md += "Review time: " + format_double("%.1f s", phases.total_s()) + " over " + std::to_string(reviews) +
        " reviews (" + describe_phases(phases) + ").";
  md += " Throughput: " + format_double("%.1f", tasks_per_hour(s)) + " tasks per hour";
  if (s.devices > 0)
    md += "; the reviews of finished tasks kept " + std::to_string(s.devices) + " device" +
          (s.devices == 1 ? "" : "s") + " busy " + format_double("%.0f%%", 100 * device_busy_fraction(s)) +
          " of the wall time";
  md += ".\n\n";
  md +=
      "| task | correct | speedup | kernel ms | eager ms | rounds | reviews | tokens in / out | cost | stopped because "
      "|\n";
  md += "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const auto& o : s.outcomes) {
    std::string reason = o.reason;
    for (auto& c : reason)
      if (c == '|' || c == '\n') c = ' ';
    md += "| " + o.task + " | " + (o.success ? "yes" : "no") + " | " +
          (o.success ? format_double("%.2fx", o.best_review.speedup) : "-") + " | " +
          (o.success ? format_double("%.4f", o.best_review.candidate_time.median_ms) : "-") + " | " +
          (o.best_review.reference_time.median_ms > 0 ? format_double("%.4f", o.best_review.reference_time.median_ms)
                                                      : "-") +
          " | " + std::to_string(o.rounds) + " | " + std::to_string(o.reviews) + " | " +
          std::to_string(o.input_tokens) + " / " + std::to_string(o.output_tokens) + " | " +
          format_double("$%.4f", o.cost_usd) + " | " + reason + " |\n";
  }
  for (const auto& p : s.pending) md += "| " + p + " | not finished | | | | | | | | |\n";
  md +=
      "\nPer task: tasks/TASK/ holds kernel.cu, plan.yaml, review.json, outcome.json and "
      "trajectory.txt.\n";
  return md;
}

status write_summary(const fs::path& out_dir, const run_summary& s) {
  nlohmann::json j;
  j["schema"] = "ks.run_summary/1";
  j["experiment"] = s.experiment;
  j["coder"] = s.coder;
  j["wall_s"] = double_to_json(s.wall_s);
  j["geomean_speedup"] = double_to_json(geomean_speedup(s.outcomes));
  j["review_phases"] = phases_to_json(total_review_time(s.outcomes));
  j["tasks_per_hour"] = double_to_json(tasks_per_hour(s));
  j["devices"] = s.devices;
  if (s.devices > 0) j["device_busy_fraction"] = double_to_json(device_busy_fraction(s));
  j["tasks"] = nlohmann::json::array();
  int64_t in_tok = 0, out_tok = 0;
  double cost = 0;
  for (const auto& o : s.outcomes) {
    j["tasks"].push_back(outcome_to_json(o));
    in_tok += o.input_tokens;
    out_tok += o.output_tokens;
    cost += o.cost_usd;
  }
  // The model's bill for the finished tasks (0 for the rules coder).
  j["llm"] = {{"input_tokens", in_tok}, {"output_tokens", out_tok}, {"cost_usd", double_to_json(cost)}};
  j["pending"] = s.pending;
  if (auto st = write_file_atomically(out_dir / "summary.json", j.dump(2) + "\n"); !st) return st;
  return write_file_atomically(out_dir / "summary.md", summary_markdown(s));
}

}  // namespace ks
