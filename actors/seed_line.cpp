#include "actors/seed_line.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <optional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/agents.hpp"
#include "actors/line_recorder.hpp"
#include "actors/supervised_agent.hpp"
#include "base/number_format.hpp"
#include "coder/llm_coder.hpp"
#include "memory/store.hpp"
#include "model/candidate_id.hpp"
#include "policy/decision_policy.hpp"

namespace ks {

namespace {

std::atomic<uint64_t> next_request_id{1};

// Flags that make a correct-looking review unusable as a result: the kernel may be
// skipping work. no_custom_kernel is allowed (a library-only fallback is honest, and
// the outcome shows the flag).
bool disqualifying_flag(const review_result& r) {
  for (const auto& f : r.flags)
    if (f == "output_independent_of_input" || f == "speedup_above_threshold") return true;
  return false;
}

// One seed line. Its outcome goes back to the coordinator as a task_outcome; its
// progress as task_progress messages.
class seed_line {
 public:
  seed_line(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx,
            caf::actor coordinator, size_t index)
      : self_(self), ctx_(std::move(ctx)), o_(ctx_->opts), coordinator_(std::move(coordinator)),
        index_(index), rec_(self, coordinator_, o_.memory, o_.task.name, tally_) {}

  // Runs the line from `seed`, or from `resume_from` when given.
  task_outcome run(candidate seed, std::optional<line_checkpoint> resume_from);

 private:
  std::vector<trajectory_entry> history() {
    if (!o_.use_short_term_memory) return {};
    auto h = o_.memory->read_trajectory(o_.task.name);
    if (!h) {
      spdlog::error("task '{}': trajectory read failed: {}", o_.task.name, h.message());
      return {};
    }
    return std::move(*h);
  }
  review_result run_review(const candidate& c);
  review_result review(candidate& c, const std::string& method, const std::string& bottleneck);
  void store_kernel(candidate& c) {
    auto id = o_.memory->put_kernel(c);
    if (!id) spdlog::error("task '{}': kernel write failed: {}", o_.task.name, id.message());
  }
  void save_checkpoint(const candidate* cur, const review_result* r, const std::string& reason) {
    line_checkpoint c;
    c.round = tally_.round;
    c.reviews = tally_.reviews;
    c.restarts = tally_.restarts;
    if (cur) c.cur = cur->id;
    if (r) c.cur_review = *r;
    if (tally_.best) c.best = tally_.best->id, c.best_review = tally_.best_review;
    c.finished = !reason.empty();
    c.reason = reason;
    if (auto s = o_.memory->put_task_record(line_key(o_.task.name, index_), to_record(c)); !s)
      spdlog::error("task '{}': checkpoint write failed: {}", o_.task.name, s.message());
  }
  bool cancelled() const { return o_.cancel && o_.cancel->load(); }

  caf::blocking_actor* self_;
  std::shared_ptr<const line_context> ctx_;
  const coordinator_options& o_;
  caf::actor coordinator_;
  size_t index_;
  line_tally tally_;
  line_recorder rec_;
  std::map<std::string, review_result> reviewed_;  // by candidate id
};

review_result seed_line::run_review(const candidate& c) {
  rec_.reviewing(c);
  review_request req;
  req.request_id = next_request_id++;
  req.task = o_.task;
  req.cand = c;
  req.options = o_.review;
  review_result r;
  // The reviewer answers every request (a pool's failure becomes internal_error);
  // the bound here only guards against a reviewer that is gone.
  const auto bound = std::chrono::milliseconds(
      static_cast<int64_t>((o_.review.timeout_s * 4 + 600) * 1000));
  self_->request(ctx_->reviewer, caf::duration{bound}, req)
      .receive([&](review_result& x) { r = std::move(x); },
               [&](caf::error& e) {
                 r.status = review_status::internal_error;
                 r.message = "the reviewer did not answer: " + self_->system().render(e);
               });
  r.candidate_id = c.id;
  ++tally_.reviews;
  return r;
}

review_result seed_line::review(candidate& c, const std::string& method,
                                const std::string& bottleneck) {
  c.round = tally_.round;
  if (c.id.empty()) c.id = candidate_id(c);
  store_kernel(c);
  review_result r;
  if (auto it = reviewed_.find(c.id); it != reviewed_.end()) {
    // Seen before on this line (a method that gave back the same code): the verdict
    // stands, but the attempt is still recorded, so the planner learns from it.
    r = it->second;
  } else {
    r = run_review(c);
    reviewed_[c.id] = r;
  }

  rec_.reviewed(c, r, method, bottleneck);
  return r;
}

task_outcome seed_line::run(candidate seed, std::optional<line_checkpoint> resume_from) {
  task_outcome out;
  out.task = o_.task.name;
  auto* self = self_;
  auto diagnoser = make_agent<diagnoser_actor>(
      self, "diagnoser",
      [m = o_.model](caf::blocking_actor* s) { return s->spawn<caf::detached>(diagnoser_agent, m); },
      &tally_.restarts, o_);
  auto repairer = make_agent<repairer_actor>(
      self, "repairer",
      [b = o_.backend](caf::blocking_actor* s) { return s->spawn<caf::detached>(repairer_agent, b); },
      &tally_.restarts, o_);
  auto extractor = make_agent<feature_extractor_actor>(
      self, "feature extractor",
      [c = o_.compiler, task = o_.task, size = o_.review.size](caf::blocking_actor* s) {
        return s->spawn<caf::detached>(feature_agent, feature_agent_options{c, task, size});
      },
      &tally_.restarts, o_);
  auto planner = make_agent<planner_actor>(
      self, "planner",
      [lib = o_.library, mem = o_.memory, lt = o_.use_long_term_memory,
       st = o_.use_short_term_memory](caf::blocking_actor* s) {
        return s->spawn<caf::detached>(planner_agent, planner_options{lib, mem, lt, st});
      },
      &tally_.restarts, o_);
  auto optimizer = make_agent<optimizer_actor>(
      self, "optimizer",
      [b = o_.backend](caf::blocking_actor* s) { return s->spawn<caf::detached>(optimizer_agent, b); },
      &tally_.restarts, o_);

  candidate cur = std::move(seed);
  std::string method;       // the method whose attempt `cur` is ("" for a seed)
  std::string bottleneck;   // the class `method` was planned in
  review_result base_review;  // the review of cur's correct parent (for experience)
  uint32_t repairs = 0;
  std::string reason;

  auto finish = [&](std::string why) {
    save_checkpoint(nullptr, nullptr, why);
    out.reason = std::move(why);
    out.rounds = tally_.round;
    out.reviews = tally_.reviews;
    out.agent_restarts = static_cast<uint32_t>(tally_.restarts);
    if (tally_.best) {
      out.success = true;
      out.best = *tally_.best;
      out.best_review = tally_.best_review;
    }
    return out;
  };
  auto record_experience = [&](const review_result& r, const code_features* f) {
    if (method.empty() || !o_.use_long_term_memory) return;
    experience_record rec;
    rec.method = method;
    rec.bottleneck_class = bottleneck;
    rec.structure_class = f ? f->structure_class : "";
    rec.task = o_.task.name;
    rec.skill_library_version = static_cast<uint32_t>(o_.library->version);
    rec.speedup_before = base_review.speedup;
    rec.speedup_after = r.status == review_status::ok ? r.speedup : 0;
    rec.correct = r.status == review_status::ok && !disqualifying_flag(r);
    for (const auto& [k, v] : r.profile.values)
      if (auto it = base_review.profile.values.find(k); it != base_review.profile.values.end())
        rec.metric_delta[k] = v - it->second;
    if (auto s = o_.memory->record_experience(rec); !s)
      spdlog::error("task '{}': experience write failed: {}", o_.task.name, s.message());
  };
  // Back to the line's best correct version after a failed attempt.
  auto revert = [&](const std::string& why) -> bool {
    if (!tally_.best) return false;
    rec_.back_to_best(cur, method, why);
    cur = *tally_.best;
    method.clear();
    bottleneck.clear();
    repairs = 0;
    return true;
  };

  review_result r;
  bool reverted = false;  // cur was just set back to the line's best: plan from it
  if (resume_from) {
    // Where the line stood after its last completed round: nothing done is redone.
    const line_checkpoint& cp = *resume_from;
    tally_.round = cp.round;
    tally_.reviews = cp.reviews;
    tally_.restarts = cp.restarts;
    if (!cp.best.empty()) {
      auto b = o_.memory->get_kernel(cp.best);
      if (!b) return finish("cannot resume: " + b.message());
      tally_.best = std::move(*b);
      tally_.best_review = cp.best_review;
    }
    if (cp.finished) return finish(cp.reason);
    auto c = o_.memory->get_kernel(cp.cur);
    if (!c) return finish("cannot resume: " + c.message());
    cur = std::move(*c);
    r = cp.cur_review;
    reviewed_[cur.id] = r;
    reverted = true;
    rec_.resumed(cur);
  } else {
    r = review(cur, method, bottleneck);
  }
  for (;;) {
    if (cancelled()) return finish("cancelled");
    bool ok = r.status == review_status::ok && !disqualifying_flag(r);
    if (!ok) {
      if (r.status == review_status::ok)
        spdlog::warn("task '{}': {} passed but is flagged ({}); not taken", o_.task.name,
                     short_id(cur.id), r.message);
      if (repairs >= o_.repair_attempts || r.status == review_status::internal_error) {
        record_experience(r, nullptr);
        std::string why = r.status == review_status::internal_error
                              ? "the reviewer failed: " + r.message
                              : std::to_string(repairs) + " repairs did not make " +
                                    short_id(cur.id) + " pass";
        if (r.status == review_status::internal_error && !tally_.best) return finish(why);
        if (!revert(why)) return finish("no correct kernel: " + why);
        r = tally_.best_review;
        reverted = true;
        continue;
      }
      rec_.diagnosing(cur, r.status);
      diagnose_request dreq{o_.task, cur, r, history()};
      auto diag = diagnoser.call<repair_plan>(dreq);
      if (!diag) return finish(diag.message());
      rec_.diagnosed(cur, method, r, *diag);
      repair_request rreq;
      rreq.task = o_.task;
      rreq.cand = cur;
      rreq.plan = *diag;
      rreq.review = r;
      if (tally_.best) rreq.last_good.push_back(*tally_.best);
      rreq.history = history();
      ++repairs;
      auto fixed = repairer.call<candidate>(rreq);
      if (!fixed && repairer.gave_up()) return finish(fixed.message());
      if (!fixed) {
        rec_.repair_failed(cur, fixed.message());
        if (!revert("the repairer could not fix " + short_id(cur.id) + ": " + fixed.message()))
          return finish("no correct kernel: the repairer could not fix the seed: " +
                        fixed.message());
        r = tally_.best_review;
        reverted = true;
        continue;
      }
      fixed->round = tally_.round;
      if (tally_.best && fixed->id == tally_.best->id) {
        // The repairer went back to the best version (the rules coder's repair):
        // the attempt failed.
        record_experience(r, nullptr);
        revert("the repairer went back to " + short_id(tally_.best->id));
        r = tally_.best_review;
        reverted = true;
        continue;
      }
      rec_.repaired(cur, *fixed, repairs);
      cur = std::move(*fixed);
      r = review(cur, method, bottleneck);
      continue;
    }

    // Correct. Keep it when it is the line's best; a slower correct attempt sends the
    // line back to the best (the trajectory shows the method did not help).
    code_features features;
    if (reverted) {
      reverted = false;
    } else if (!tally_.best || r.speedup > tally_.best_review.speedup) {
      tally_.best = cur;
      tally_.best_review = r;
      repairs = 0;
      rec_.new_best(cur, r.speedup);
    } else {
      record_experience(r, nullptr);
      revert("speedup " + two_decimals(r.speedup) + " is not better than " + two_decimals(tally_.best_review.speedup));
      r = tally_.best_review;
    }
    // Features: for the experience record of a method that helped, and for the plan.
    auto f = extractor.call<code_features>(feature_request{cur, r});
    if (!f) return finish(f.message());
    features = *f;
    if (!method.empty()) {
      record_experience(r, &features);
      method.clear();
    }
    save_checkpoint(&cur, &r, "");
    if (tally_.round >= o_.rounds) return finish("round budget spent");

    // Plan, optimize.
    rec_.planning();
    plan_request preq{o_.task, cur, r, features, history()};
    preq.cand.round = tally_.round;
    auto plan = planner.call<optimization_plan>(preq);
    if (!plan) return finish(plan.message());
    ++tally_.round;
    rec_.planned(cur, *plan);
    if (plan->ranked.empty()) return finish("no allowed method left");
    std::optional<candidate> next;
    std::string tried;
    for (uint32_t i = 0; i < plan->ranked.size() && i < o_.methods_per_round && !next; ++i) {
      optimization_plan p = *plan;
      p.chosen = plan->ranked[i].method;
      rec_.optimizing(p.chosen);
      optimize_request oreq{o_.task, cur, p, r, features, history()};
      auto c = optimizer.call<candidate>(oreq);
      if (!c && optimizer.gave_up()) return finish(c.message());
      if (!c) {
        rec_.not_applied(cur, p.chosen, c.message());
        tried += (tried.empty() ? "" : ", ") + p.chosen;
        continue;
      }
      rec_.optimized(cur, *c, p.chosen, plan->bottleneck_class);
      method = p.chosen;
      bottleneck = plan->bottleneck_class;
      next = std::move(*c);
    }
    if (!next) return finish("no allowed method could be applied (tried " + tried + ")");
    base_review = r;
    cur = std::move(*next);
    repairs = 0;
    r = review(cur, method, bottleneck);
  }
}

}  // namespace

void seed_line_actor(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx,
                     candidate seed, size_t index, std::optional<line_checkpoint> resume_from,
                     caf::actor coordinator) {
  seed_line line(self, ctx, coordinator, index);
  task_outcome o = line.run(std::move(seed), std::move(resume_from));
  self->send(coordinator, std::move(o));
}

}  // namespace ks
