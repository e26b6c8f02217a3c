#include "actors/seed_line.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/agents.hpp"
#include "actors/line_recorder.hpp"
#include "actors/pending_exit.hpp"
#include "actors/supervised_agent.hpp"
#include "base/number_format.hpp"
#include "model/candidate_id.hpp"
#include "policy/decision_policy.hpp"
#include "store/store.hpp"

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

// A verdict the line may build on: correct and not flagged.
bool acceptable(const review_result& r) { return r.status == review_status::ok && !disqualifying_flag(r); }

// Whether a review judged the candidate. internal_error is KernelSkill's own failure
// (no device of the task's GPU model could take it, the review was lost with its node
// too often, a worker that cannot start): it says nothing about the candidate or the
// method that made it, so it is never recorded as experience and never kept as the
// candidate's verdict. Everything else (crashed and timed_out included: the node's
// pool answers those only for the candidate that caused them) is the candidate's.
bool judged(const review_result& r) { return r.status != review_status::internal_error; }

// The seq of the task's review of kernel `id` in `history`, if it has one.
std::optional<uint64_t> reviewed_in(const std::vector<trajectory_entry>& history, const std::string& id) {
  for (const auto& e : history)
    if (e.kind == "review" && e.candidate_id == id) return e.seq;
  return std::nullopt;
}

// The line's states (drawn in actors/seed_line.hpp).
enum class state { review, diagnose, repair, features, plan, optimize, done };

// What the line carries from one state to the next.
struct line_state {
  candidate cur;                         // the kernel the line stands on
  std::optional<review_result> verdict;  // cur's review; none until cur is reviewed
  // cur is the line's best again, after a failed attempt or from a checkpoint: its
  // verdict is the one it had, and it is not a new best (review goes on to features).
  bool back_at_best = false;
  std::string method;         // the method whose attempt cur is ("" for a seed)
  std::string bottleneck;     // the class `method` was planned in
  std::string base_id;        // the candidate `method` was applied to
  std::string base_template;  // its template (a rules-coder recipe's), for experience
  review_result base_review;  // the review of cur's correct parent (for experience)
  uint32_t repairs = 0;       // repairs of the failure at hand
  repair_plan diagnosis;      // diagnose → repair
  code_features features;     // features → plan → optimize
  optimization_plan plan;     // plan → optimize
  std::string reason;         // done: why the line ended
};

// One of the line's agents, supervised; all of them draw on the line's restarts.
template <class Handle>
agent_of<Handle> line_agent(caf::blocking_actor* self, std::string name,
                            std::function<Handle(caf::blocking_actor*)> factory, line_tally& tally,
                            const coordinator_options& o, size_t index) {
  std::string role = name + " of line " + std::to_string(index);
  return make_agent<Handle>(self, std::move(name), std::move(factory), &tally.restarts, o, std::move(role));
}

// One seed line. Its outcome goes back to the coordinator as a task_outcome; its
// progress as task_progress messages.
class seed_line {
 public:
  seed_line(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx, caf::actor coordinator, size_t index);

  // Runs the line from `seed`, or from `resume_from` when given; nullopt when it was
  // told to stop (stop_reason() says why).
  std::optional<task_outcome> run(candidate seed, std::optional<line_checkpoint> resume_from);
  const caf::error& stop_reason() const { return stop_reason_; }

 private:
  // Where a resumed line starts: review, with its checkpoint's verdict; or done.
  state resume(line_state& s, const line_checkpoint& cp);
  state step(state at, line_state& s);
  // The transitions, one per state: each returns the next state.
  state review(line_state& s);
  state diagnose(line_state& s);
  state repair(line_state& s);
  state features(line_state& s);
  state plan(line_state& s);
  state optimize(line_state& s);
  task_outcome finish(const line_state& s);

  state end(line_state& s, std::string why) {
    s.reason = std::move(why);
    return state::done;
  }
  state accept(line_state& s);
  bool back_to_best(line_state& s, const std::string& why);
  std::optional<std::string> seen_elsewhere(const std::vector<trajectory_entry>& hist, const std::string& id) const;
  void record_experience(const line_state& s, const review_result& r, const code_features* f);
  review_result review_kernel(candidate& c, const std::string& method, const std::string& bottleneck);
  review_result run_review(const candidate& c);
  // How long a review may take before the line stops waiting for it.
  std::chrono::milliseconds review_bound() const;
  std::vector<trajectory_entry> history();
  void store_kernel(candidate& c);
  void save_checkpoint(const candidate* cur, const review_result* r, const std::string& reason);
  bool cancelled() const { return o_.cancel && o_.cancel->load(); }
  std::optional<caf::error> told_to_stop();

  caf::blocking_actor* self_;
  std::shared_ptr<const line_context> ctx_;
  const coordinator_options& o_;
  caf::actor coordinator_;
  size_t index_;
  line_tally tally_;
  line_recorder rec_;
  std::map<std::string, review_result> reviewed_;  // by candidate id
  caf::error stop_reason_;
  // The attempts (base candidate, method) whose experience this line recorded: an
  // attempt repeated (a line without short-term memory does) is one measurement, and
  // the experience counts it once.
  std::set<std::pair<std::string, std::string>> recorded_;
  agent_of<diagnoser_actor> diagnoser_;
  agent_of<repairer_actor> repairer_;
  agent_of<feature_extractor_actor> extractor_;
  agent_of<planner_actor> planner_;
  agent_of<optimizer_actor> optimizer_;
};

seed_line::seed_line(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx, caf::actor coordinator,
                     size_t index)
    : self_(self),
      ctx_(std::move(ctx)),
      o_(ctx_->opts),
      coordinator_(std::move(coordinator)),
      index_(index),
      rec_(self, coordinator_, o_.memory, o_.task.name, tally_),
      diagnoser_(line_agent<diagnoser_actor>(
          self, "diagnoser",
          [m = o_.model](caf::blocking_actor* s) { return s->spawn<caf::detached>(diagnoser_agent, m); }, tally_, o_,
          index)),
      repairer_(line_agent<repairer_actor>(
          self, "repairer",
          [b = o_.backend](caf::blocking_actor* s) { return s->spawn<caf::detached>(repairer_agent, b); }, tally_, o_,
          index)),
      extractor_(line_agent<feature_extractor_actor>(
          self, "feature extractor",
          [c = o_.compiler, task = o_.task, size = o_.review.size](caf::blocking_actor* s) {
            return s->spawn<caf::detached>(feature_agent, feature_agent_options{c, task, size});
          },
          tally_, o_, index)),
      planner_(line_agent<planner_actor>(
          self, "planner",
          [lib = o_.library, mem = o_.memory, lt = o_.use_long_term_memory,
           st = o_.use_short_term_memory](caf::blocking_actor* s) {
            return s->spawn<caf::detached>(planner_agent, planner_options{lib, mem, lt, st});
          },
          tally_, o_, index)),
      optimizer_(line_agent<optimizer_actor>(
          self, "optimizer",
          [b = o_.backend](caf::blocking_actor* s) { return s->spawn<caf::detached>(optimizer_agent, b); }, tally_, o_,
          index)) {}

std::optional<task_outcome> seed_line::run(candidate seed, std::optional<line_checkpoint> resume_from) {
  line_state s;
  state at = state::review;
  if (resume_from)
    at = resume(s, *resume_from);
  else
    s.cur = std::move(seed);
  while (at != state::done) {
    if (auto why = told_to_stop()) {
      stop_reason_ = *why;
      if (!ctx_->stopping->load())
        spdlog::warn("task '{}': line {} was told to exit ({}); it stops at round {}", o_.task.name, index_,
                     self_->system().render(*why), tally_.round);
      return std::nullopt;
    }
    at = step(at, s);
  }
  return finish(s);
}

// An exit message for the line, or its coordinator going.
std::optional<caf::error> seed_line::told_to_stop() {
  if (auto why = pending_exit(self_)) return why;
  if (ctx_->stopping->load()) return caf::error{caf::exit_reason::user_shutdown};
  return std::nullopt;
}

state seed_line::step(state at, line_state& s) {
  switch (at) {
    case state::review:
      return review(s);
    case state::diagnose:
      return diagnose(s);
    case state::repair:
      return repair(s);
    case state::features:
      return features(s);
    case state::plan:
      return plan(s);
    case state::optimize:
      return optimize(s);
    case state::done:
      break;
  }
  return state::done;
}

state seed_line::resume(line_state& s, const line_checkpoint& cp) {
  // Where the line stood after its last completed round: nothing done is redone.
  tally_.round = cp.round;
  tally_.reviews = cp.reviews;
  tally_.review_time = cp.review_time;
  tally_.restarts = cp.restarts;
  if (!cp.best.empty()) {
    auto b = o_.memory->get_kernel(cp.best);
    if (!b) return end(s, "cannot resume: " + b.message());
    tally_.best = std::move(*b);
    tally_.best_review = cp.best_review;
  }
  if (cp.finished) return end(s, cp.reason);
  auto c = o_.memory->get_kernel(cp.cur);
  if (!c) return end(s, "cannot resume: " + c.message());
  s.cur = std::move(*c);
  s.verdict = cp.cur_review;
  reviewed_[s.cur.id] = cp.cur_review;
  s.back_at_best = true;
  rec_.resumed(s.cur);
  return state::review;
}

// Reviews cur unless its verdict is known, then judges it.
state seed_line::review(line_state& s) {
  if (!s.verdict) s.verdict = review_kernel(s.cur, s.method, s.bottleneck);
  if (cancelled()) return end(s, "cancelled");
  const review_result r = *s.verdict;
  if (acceptable(r)) return accept(s);
  if (r.status == review_status::ok)
    spdlog::warn("task '{}': {} passed but is flagged ({}); not taken", o_.task.name, short_id(s.cur.id), r.message);
  const bool reviewer_failed = !judged(r);
  if (s.repairs < o_.repair_attempts && !reviewer_failed) return state::diagnose;
  // No repair left: the attempt failed. Or the reviewer failed: the attempt is
  // abandoned unjudged (record_experience leaves it out of the experience).
  record_experience(s, r, nullptr);
  std::string why = reviewer_failed
                        ? "the reviewer failed: " + r.message
                        : std::to_string(s.repairs) + " repairs did not make " + short_id(s.cur.id) + " pass";
  if (reviewer_failed && !tally_.best) return end(s, why);
  if (!back_to_best(s, why)) return end(s, "no correct kernel: " + why);
  s.back_at_best = true;
  return state::review;
}

// A correct verdict: cur is the line's best when it beats it; a slower attempt sends
// the line back to the best (the trajectory shows the method did not help).
state seed_line::accept(line_state& s) {
  const review_result r = *s.verdict;
  if (s.back_at_best) {
    s.back_at_best = false;
  } else if (!tally_.best || r.speedup > tally_.best_review.speedup) {
    tally_.best = s.cur;
    tally_.best_review = r;
    s.repairs = 0;
    rec_.new_best(s.cur, r.speedup);
  } else {
    record_experience(s, r, nullptr);
    back_to_best(
        s, "speedup " + two_decimals(r.speedup) + " is not better than " + two_decimals(tally_.best_review.speedup));
  }
  return state::features;
}

state seed_line::diagnose(line_state& s) {
  rec_.diagnosing(s.cur, s.verdict->status);
  diagnose_request dreq{o_.task, s.cur, *s.verdict, history()};
  auto diag = diagnoser_.call<repair_plan>(dreq);
  if (!diag) return end(s, diag.message());
  rec_.diagnosed(s.cur, s.method, *s.verdict, *diag);
  s.diagnosis = std::move(*diag);
  return state::repair;
}

state seed_line::repair(line_state& s) {
  repair_request rreq;
  rreq.task = o_.task;
  rreq.cand = s.cur;
  rreq.plan = s.diagnosis;
  rreq.review = *s.verdict;
  if (tally_.best) rreq.last_good.push_back(*tally_.best);
  rreq.history = history();
  ++s.repairs;
  auto fixed = repairer_.call<candidate>(rreq);
  if (!fixed && repairer_.gave_up()) return end(s, fixed.message());
  if (!fixed) {
    rec_.repair_failed(s.cur, fixed.message());
    if (!back_to_best(s, "the repairer could not fix " + short_id(s.cur.id) + ": " + fixed.message()))
      return end(s, "no correct kernel: the repairer could not fix the seed: " + fixed.message());
    s.back_at_best = true;
    return state::review;
  }
  fixed->round = tally_.round;
  if (tally_.best && fixed->id == tally_.best->id) {
    // The repairer went back to the best version (the rules coder's repair): the
    // attempt failed.
    record_experience(s, *s.verdict, nullptr);
    back_to_best(s, "the repairer went back to " + short_id(tally_.best->id));
    s.back_at_best = true;
    return state::review;
  }
  rec_.repaired(s.cur, *fixed, s.repairs);
  s.cur = std::move(*fixed);
  s.verdict.reset();
  return state::review;
}

// Features: for the experience record of a method that helped, and for the plan. A
// round is complete here: the line's checkpoint is written.
state seed_line::features(line_state& s) {
  auto f = extractor_.call<code_features>(feature_request{s.cur, *s.verdict});
  if (!f) return end(s, f.message());
  s.features = *f;
  if (!s.method.empty()) {
    record_experience(s, *s.verdict, &s.features);
    s.method.clear();
  }
  save_checkpoint(&s.cur, &*s.verdict, "");
  return state::plan;
}

state seed_line::plan(line_state& s) {
  if (tally_.round >= o_.rounds) return end(s, "round budget spent");
  rec_.planning();
  plan_request preq{o_.task, s.cur, *s.verdict, s.features, history()};
  preq.cand.round = tally_.round;
  auto chosen = planner_.call<optimization_plan>(preq);
  if (!chosen) return end(s, chosen.message());
  ++tally_.round;
  rec_.planned(s.cur, *chosen);
  if (chosen->ranked.empty())
    return end(s, nothing_above_noise(*chosen) ? "no move left is expected to gain more than the noise (×" +
                                                     format_number(o_.library->guardrails.min_gain) + ")"
                                               : "no allowed method left");
  s.plan = std::move(*chosen);
  return state::optimize;
}

// Why a move's kernel adds nothing, if it does not: a kernel the task has reviewed
// already (an inverse of an earlier move: a block size halved, then doubled; the
// short-term memory knows its verdict), or one another line of the task is reviewing
// now (the same move from the kernel both lines stand on: that line's verdict will be
// the task's). Either way the next ranked move is tried instead of the same measurement.
std::optional<std::string> seed_line::seen_elsewhere(const std::vector<trajectory_entry>& hist,
                                                     const std::string& id) const {
  if (auto seen = reviewed_in(hist, id))
    return "it gives back " + short_id(id) + ", a kernel the task reviewed before (seq " + std::to_string(*seen) + ")";
  if (o_.use_short_term_memory && ctx_->reviews->known(id))
    return "it gives back " + short_id(id) + ", a kernel another line of the task is reviewing";
  return std::nullopt;
}

// The plan's methods in rank order, at most methods_per_round, until one applies.
state seed_line::optimize(line_state& s) {
  std::optional<candidate> next;
  std::string tried;
  // methods_per_round bounds the coder's failures; a move that gives back a kernel
  // seen before costs no review and does not count.
  uint32_t failed = 0;
  for (uint32_t i = 0; i < s.plan.ranked.size() && failed < o_.methods_per_round && !next; ++i) {
    optimization_plan p = s.plan;
    p.chosen = s.plan.ranked[i].method;
    rec_.optimizing(p.chosen);
    const std::vector<trajectory_entry> hist = history();
    optimize_request oreq{o_.task, s.cur, p, *s.verdict, s.features, hist};
    auto c = optimizer_.call<candidate>(oreq);
    if (!c && optimizer_.gave_up()) return end(s, c.message());
    if (!c) {
      rec_.not_applied(s.cur, p.chosen, c.message());
      tried += (tried.empty() ? "" : ", ") + p.chosen;
      ++failed;
      continue;
    }
    if (c->id.empty()) c->id = candidate_id(*c);
    if (auto why = seen_elsewhere(hist, c->id)) {
      rec_.not_applied(s.cur, p.chosen, *why);
      tried += (tried.empty() ? "" : ", ") + p.chosen;
      continue;
    }
    rec_.optimized(s.cur, *c, p.chosen, s.plan.bottleneck_class);
    s.method = p.chosen;
    s.bottleneck = s.plan.bottleneck_class;
    s.base_id = s.cur.id;
    auto templ = s.cur.recipe.find("template");
    s.base_template = templ == s.cur.recipe.end() ? "" : templ->second;
    next = std::move(*c);
  }
  if (!next) return end(s, "no allowed method could be applied (tried " + tried + ")");
  s.base_review = *s.verdict;
  s.cur = std::move(*next);
  s.verdict.reset();
  s.repairs = 0;
  return state::review;
}

task_outcome seed_line::finish(const line_state& s) {
  save_checkpoint(nullptr, nullptr, s.reason);
  task_outcome out;
  out.task = o_.task.name;
  out.reason = s.reason;
  out.rounds = tally_.round;
  out.reviews = tally_.reviews;
  out.review_time = tally_.review_time;
  out.agent_restarts = static_cast<uint32_t>(tally_.restarts);
  if (tally_.best) {
    out.success = true;
    out.best = *tally_.best;
    out.best_review = tally_.best_review;
  }
  return out;
}

// Back to the line's best kernel after an attempt that failed or did not help: the
// line stands on it again, with its verdict. False when there is no best yet.
bool seed_line::back_to_best(line_state& s, const std::string& why) {
  if (!tally_.best) return false;
  rec_.back_to_best(s.cur, s.method, why);
  s.cur = *tally_.best;
  s.verdict = tally_.best_review;
  s.method.clear();
  s.bottleneck.clear();
  s.repairs = 0;
  return true;
}

// What applying s.method achieved, for the long-term memory (nothing for a seed).
void seed_line::record_experience(const line_state& s, const review_result& r, const code_features* f) {
  if (s.method.empty() || !o_.use_long_term_memory || !judged(r)) return;
  if (!recorded_.insert({s.base_id, s.method}).second) return;
  experience_record rec;
  rec.method = s.method;
  rec.bottleneck_class = s.bottleneck;
  rec.template_name = s.base_template;
  rec.structure_class = f ? f->structure_class : "";
  rec.task = o_.task.name;
  rec.skill_library_version = static_cast<uint32_t>(o_.library->version);
  rec.speedup_before = s.base_review.speedup;
  rec.speedup_after = r.status == review_status::ok ? r.speedup : 0;
  rec.correct = acceptable(r);
  for (const auto& [k, v] : r.profile.values)
    if (auto it = s.base_review.profile.values.find(k); it != s.base_review.profile.values.end())
      rec.metric_delta[k] = v - it->second;
  if (auto st = o_.memory->record_experience(rec); !st)
    spdlog::error("task '{}': experience write failed: {}", o_.task.name, st.message());
}

review_result seed_line::review_kernel(candidate& c, const std::string& method, const std::string& bottleneck) {
  c.round = tally_.round;
  if (c.id.empty()) c.id = candidate_id(c);
  store_kernel(c);
  // A verdict the task has already: seen on this line (a method that gave back the
  // same code), or, with short-term memory, another line's (review_board.hpp), waited
  // for while that line reviews it.
  review_board::claim_result shared;
  if (auto it = reviewed_.find(c.id); it != reviewed_.end()) {
    shared.verdict = it->second;
  } else if (o_.use_short_term_memory) {
    shared = ctx_->reviews->claim(c.id, review_bound(), [this] { return cancelled() || ctx_->stopping->load(); });
    if (shared.verdict) {
      shared.verdict->candidate_id = c.id;
      reviewed_[c.id] = *shared.verdict;
    }
  }
  if (shared.verdict) {
    // The verdict stands, but the attempt is still recorded, so the planner learns from
    // it. No review ran, so its entry shows no review time.
    review_result again = *shared.verdict;
    again.phases = {};
    rec_.reviewed(c, again, method, bottleneck);
    return *shared.verdict;
  }
  review_claim claim(shared.mine ? ctx_->reviews.get() : nullptr, c.id);
  review_result r = run_review(c);
  if (judged(r)) reviewed_[c.id] = r;
  claim.publish(r);
  rec_.reviewed(c, r, method, bottleneck);
  return r;
}

std::chrono::milliseconds seed_line::review_bound() const {
  return std::chrono::milliseconds(static_cast<int64_t>((o_.review.timeout_s * 4 + 600) * 1000));
}

review_result seed_line::run_review(const candidate& c) {
  rec_.reviewing(c);
  review_request req;
  req.request_id = next_request_id++;
  req.task = o_.task;
  req.cand = c;
  req.options = o_.review;
  // The profile feeds the planner's next round and the experience's metric changes:
  // with no rounds at all (a bench's seeds only) nothing reads it, and it was most of
  // a review's time (level 3's networks on the H100: 214 of 312 s).
  if (o_.rounds == 0) req.options.profile = false;
  review_result r;
  // The reviewer answers every request (a pool's failure becomes internal_error);
  // the bound here only guards against a reviewer that is gone.
  self_->request(ctx_->reviewer, caf::duration{review_bound()}, req)
      .receive([&](review_result& x) { r = std::move(x); },
               [&](caf::error& e) {
                 r.status = review_status::internal_error;
                 r.message = "the reviewer did not answer: " + self_->system().render(e);
               });
  r.candidate_id = c.id;
  ++tally_.reviews;
  tally_.review_time += r.phases;
  return r;
}

std::vector<trajectory_entry> seed_line::history() {
  if (!o_.use_short_term_memory) return {};
  auto h = o_.memory->read_trajectory(o_.task.name);
  if (!h) {
    spdlog::error("task '{}': trajectory read failed: {}", o_.task.name, h.message());
    return {};
  }
  return std::move(*h);
}

void seed_line::store_kernel(candidate& c) {
  auto id = o_.memory->put_kernel(c);
  if (!id) spdlog::error("task '{}': kernel write failed: {}", o_.task.name, id.message());
}

void seed_line::save_checkpoint(const candidate* cur, const review_result* r, const std::string& reason) {
  line_checkpoint c;
  c.round = tally_.round;
  c.reviews = tally_.reviews;
  c.review_time = tally_.review_time;
  c.restarts = tally_.restarts;
  if (cur) c.cur = cur->id;
  if (r) c.cur_review = *r;
  if (tally_.best) c.best = tally_.best->id, c.best_review = tally_.best_review;
  c.finished = !reason.empty();
  c.reason = reason;
  if (auto st = o_.memory->put_task_record(line_key(o_.task.name, index_), to_record(c)); !st)
    spdlog::error("task '{}': checkpoint write failed: {}", o_.task.name, st.message());
}

}  // namespace

void seed_line_actor(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx, candidate seed, size_t index,
                     std::optional<line_checkpoint> resume_from, caf::actor coordinator) {
  std::optional<task_outcome> o;
  caf::error stopped;
  {
    seed_line line(self, ctx, coordinator, index);
    o = line.run(std::move(seed), std::move(resume_from));
    stopped = line.stop_reason();
  }  // its agents are told to exit before the outcome goes out
  if (!o) {
    self->fail_state(std::move(stopped));
    return;
  }
  self->send(coordinator, std::move(*o));
}

}  // namespace ks
