#include "report/trajectory_timeline.hpp"

#include <cstdio>
#include <ctime>

namespace ks {

std::string utc_time(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string render_trajectory(const std::string& task, const std::vector<trajectory_entry>& entries) {
  std::string out = "trajectory of " + task + " (" + std::to_string(entries.size()) + " entries)\n";
  uint32_t round = UINT32_MAX;
  char buf[512];
  for (const auto& e : entries) {
    if (e.round != round) {
      round = e.round;
      out += "round " + std::to_string(round) + "\n";
    }
    std::string what = e.kind;
    if (!e.method.empty()) what += " " + e.method;
    std::string cand = e.candidate_id.empty() ? "" : e.candidate_id.substr(0, 8);
    if (!e.parent_id.empty()) cand += " <- " + e.parent_id.substr(0, 8);
    std::snprintf(buf, sizeof buf, "  #%-4llu %s  %-26s %-20s", static_cast<unsigned long long>(e.seq),
                  utc_time(e.unix_ms).c_str(), what.c_str(), cand.c_str());
    out += buf;
    if (e.kind == "review") {
      std::snprintf(buf, sizeof buf, " %-14s speedup %.3fx", to_string(e.status), e.speedup);
      out += buf;
    }
    out += "\n";
    if (!e.summary.empty()) out += "        " + e.summary + "\n";
    if (e.phases.total_s() > 0) {
      std::snprintf(buf, sizeof buf, "        review time %.2f s: ", e.phases.total_s());
      out += buf + describe_phases(e.phases) + "\n";
    }
  }
  return out;
}

}  // namespace ks
