#include "gpu/review_report.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/number_format.hpp"
#include "model/json_codec.hpp"

namespace ks {

namespace {

std::string times(const timing_stats& t) {
  return format_double("%.4f", t.median_ms) + " ms median (mean " + format_double("%.4f", t.mean_ms) + ", min " +
         format_double("%.4f", t.min_ms) + ", max " + format_double("%.4f", t.max_ms) + ", stddev " +
         format_double("%.4f", t.stddev_ms) + ", " + std::to_string(t.repetitions) + " runs)";
}

}  // namespace

std::string format_review(const review_result& r) {
  std::string out = "review " + std::string(to_string(r.status));
  if (!r.candidate_id.empty()) out += " (candidate " + r.candidate_id.substr(0, 16) + ")";
  if (!r.device.empty()) out += " on " + r.device;
  out += "\n  " + r.message + "\n";
  if (r.trials_run > 0) {
    out += "  trials: " + std::to_string(r.trials_passed) + "/" + std::to_string(r.trials_run) +
           " passed; max abs error " + format_double("%.3g", r.max_abs_error) + ", max rel error " +
           format_double("%.3g", r.max_rel_error) + "\n";
  }
  if (r.candidate_time.repetitions > 0) {
    out += "  candidate: " + times(r.candidate_time) + "\n";
    out += "  reference: " + times(r.reference_time) + "\n";
    out += "  speedup: " + format_double("%.3f", r.speedup) + "x\n";
  }
  if (r.profile.kernel_launches > 0 || !r.profile.values.empty()) {
    out += "  profile: " + std::to_string(r.profile.kernel_launches) + " kernel launches, " +
           format_double("%.4f", r.profile.duration_ms) + " ms of kernel time\n";
    for (auto& [name, v] : r.profile.values) out += "    " + name + " " + format_double("%.6g", v) + "\n";
  }
  if (r.phases.total_s() > 0)
    out += "  time: " + format_double("%.2f", r.phases.total_s()) + " s (" + describe_phases(r.phases) + ")\n";
  if (!r.flags.empty()) {
    out += "  flags:";
    for (auto& f : r.flags) out += " " + f;
    out += "\n";
  }
  for (auto& k : r.resources)
    out += "  kernel " + k.kernel + ": " + std::to_string(k.registers) + " registers, " +
           std::to_string(k.static_shared_bytes) + " B static shared, " + std::to_string(k.local_bytes) +
           " B local, max " + std::to_string(k.max_threads_per_block) + " threads/block\n";
  for (auto& d : r.diagnostics)
    out += "  candidate.cu:" + std::to_string(d.line) + ":" + std::to_string(d.column) + ": " + d.severity + ": " +
           d.message + "\n";
  if (r.status == review_status::compile_error && !r.compile_log.empty())
    out += "  compile log:\n" + r.compile_log + (r.compile_log.back() == '\n' ? "" : "\n");
  return out;
}

std::string review_to_json(const review_result& r, int indent) {
  // The model's codec: every field under its name, and doubles JSON has no number for
  // (a NaN error, an infinite speedup) as "NaN" / "Infinity" / "-Infinity", not null.
  nlohmann::json j = r;
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ks
