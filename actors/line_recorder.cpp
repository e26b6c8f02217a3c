#include "actors/line_recorder.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "base/number_format.hpp"
#include "policy/decision_policy.hpp"
#include "protocol/protocol.hpp"
#include "store/store.hpp"

namespace ks {

namespace {

void append_entry(store& memory, const std::string& task, const trajectory_entry& e) {
  if (auto s = memory.append_trajectory(task, e); !s)
    spdlog::error("task '{}': trajectory write failed: {}", task, s.message());
}

}  // namespace

std::string short_id(const std::string& id) { return id.substr(0, 12); }

void record_seed(store& memory, const std::string& task, const candidate& seed, const std::string& backend) {
  trajectory_entry e;
  e.kind = "seed";
  e.candidate_id = seed.id;
  e.summary = "seed " + short_id(seed.id) + " from " + backend + ": " + seed.origin;
  append_entry(memory, task, e);
}

void record_task_end(store& memory, const std::string& task, const task_outcome& o) {
  trajectory_entry e;
  e.kind = "note";
  e.candidate_id = o.success ? o.best.id : "";
  e.speedup = o.success ? o.best_review.speedup : 0;
  e.status = o.success ? review_status::ok : o.best_review.status;
  e.summary = std::string(o.success ? "done" : "failed") + ": " + o.reason;
  append_entry(memory, task, e);
}

line_recorder::line_recorder(caf::blocking_actor* self, caf::actor coordinator, std::shared_ptr<store> memory,
                             std::string task, const line_tally& tally)
    : self_(self),
      coordinator_(std::move(coordinator)),
      memory_(std::move(memory)),
      task_(std::move(task)),
      tally_(tally) {}

void line_recorder::append(trajectory_entry e) {
  e.task = task_;
  if (e.round == 0) e.round = tally_.round;
  append_entry(*memory_, task_, e);
}

void line_recorder::progress(const std::string& state, const std::string& detail) {
  task_progress p;
  p.task = task_;
  p.state = state;
  p.round = tally_.round;
  p.reviews = tally_.reviews;
  p.best_speedup = tally_.best ? tally_.best_review.speedup : 0;
  p.best_candidate = tally_.best ? tally_.best->id : "";
  p.detail = detail;
  self_->send(coordinator_, std::move(p));
}

void line_recorder::reviewed(const candidate& c, const review_result& r, const std::string& method,
                             const std::string& bottleneck) {
  trajectory_entry e;
  e.kind = "review";
  e.candidate_id = c.id;
  e.parent_id = c.parent_id;
  e.method = method;
  e.status = r.status;
  e.speedup = r.status == review_status::ok ? r.speedup : 0;
  e.summary = (bottleneck.empty() ? std::string() : bottleneck_tag(bottleneck) + " ") + "origin " + c.origin + ": " +
              std::string(to_string(r.status)) +
              (r.status == review_status::ok ? ", speedup " + two_decimals(r.speedup) : "") +
              (r.flags.empty() ? "" : ", flagged") + (r.message.empty() ? "" : ": " + r.message);
  e.metrics = r.profile.values;
  e.phases = r.phases;
  if (r.status == review_status::ok) {
    e.metrics["candidate_ms"] = r.candidate_time.median_ms;
    e.metrics["reference_ms"] = r.reference_time.median_ms;
  }
  append(std::move(e));
}

void line_recorder::diagnosed(const candidate& c, const std::string& method, const review_result& r,
                              const repair_plan& diagnosis) {
  trajectory_entry e;
  e.kind = "diagnose";
  e.candidate_id = c.id;
  e.parent_id = c.parent_id;
  e.method = method;
  e.status = r.status;
  e.summary = diagnosis.diagnosis;
  for (const auto& a : diagnosis.actions) e.summary += " | " + a;
  append(std::move(e));
}

void line_recorder::repair_failed(const candidate& c, const std::string& why) {
  trajectory_entry e;
  e.kind = "repair";
  e.candidate_id = c.id;
  e.parent_id = c.parent_id;
  e.method = "repair";
  e.summary = "repair failed: " + why;
  append(std::move(e));
}

void line_recorder::repaired(const candidate& failed, const candidate& fixed, uint32_t repairs) {
  trajectory_entry e;
  e.kind = "repair";
  e.candidate_id = fixed.id;
  e.parent_id = fixed.parent_id;
  e.method = "repair";
  e.summary = "repair " + std::to_string(repairs) + " of " + short_id(failed.id) + " → " + short_id(fixed.id);
  append(std::move(e));
}

void line_recorder::back_to_best(const candidate& from, const std::string& method, const std::string& why) {
  trajectory_entry e;
  e.kind = "note";
  e.candidate_id = tally_.best->id;
  e.parent_id = from.id;
  e.method = method;
  e.summary = "back to " + short_id(tally_.best->id) + ": " + why;
  append(std::move(e));
}

void line_recorder::planned(const candidate& c, const optimization_plan& plan) {
  trajectory_entry e;
  e.kind = "plan";
  e.candidate_id = c.id;
  e.method = plan.chosen;
  e.summary = plan.rationale;
  for (const auto& v : plan.vetoed)
    if (e.summary.size() < 4000) e.summary += " | vetoed " + v.method + ": " + v.reason;
  // The moves the table (or an earlier plan) ranked, with their prior gain: the plans
  // of this candidate's descendants carry the ones not tried yet.
  for (const auto& m : plan.ranked)
    if (!m.fired_rules.empty()) e.metrics[plan_gain_key(m.method)] = m.score;
  append(std::move(e));
}

void line_recorder::not_applied(const candidate& c, const std::string& method, const std::string& why) {
  trajectory_entry e;
  e.kind = "optimize";
  e.method = method;
  e.parent_id = c.id;
  e.candidate_id = c.id;
  e.summary = "not applied: " + why;
  append(std::move(e));
}

void line_recorder::optimized(const candidate& base, const candidate& attempt, const std::string& method,
                              const std::string& bottleneck) {
  trajectory_entry e;
  e.kind = "optimize";
  e.method = method;
  e.parent_id = base.id;
  e.candidate_id = attempt.id;
  e.summary = bottleneck_tag(bottleneck) + " " + method + " on " + short_id(base.id) + " → " + short_id(attempt.id);
  append(std::move(e));
}

void line_recorder::resumed(const candidate& c) {
  trajectory_entry e;
  e.kind = "note";
  e.candidate_id = c.id;
  e.summary = "resumed at round " + std::to_string(tally_.round) + " after a restart, from " + short_id(c.id) +
              (tally_.best ? " (best " + two_decimals(tally_.best_review.speedup) + ")" : "");
  // The progress line says it too (it used to go out empty: the summary had been moved
  // into the entry before the message was made).
  const std::string detail = e.summary;
  append(std::move(e));
  progress("optimizing", detail);
}

void line_recorder::reviewing(const candidate& c) {
  progress("reviewing", "reviewing " + short_id(c.id) + " (" + c.origin + ")");
}

void line_recorder::diagnosing(const candidate& c, review_status status) {
  progress("repairing", "diagnosing " + short_id(c.id) + ": " + to_string(status));
}

void line_recorder::new_best(const candidate& c, double speedup) {
  progress("optimizing", "best so far " + short_id(c.id) + ": speedup " + two_decimals(speedup));
}

void line_recorder::planning() { progress("planning", "planning round " + std::to_string(tally_.round + 1)); }

void line_recorder::optimizing(const std::string& method) {
  progress("optimizing", "round " + std::to_string(tally_.round) + ": " + method);
}

}  // namespace ks
