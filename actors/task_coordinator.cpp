#include "actors/task_coordinator.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "base/number_format.hpp"
#include "actors/agents.hpp"
#include "coder/llm_coder.hpp"
#include "llm/usage_ledger.hpp"
#include "model/candidate_id.hpp"
#include "policy/decision_policy.hpp"
#include "model/json_codec.hpp"
#include "memory/store.hpp"

namespace ks {

namespace {

std::atomic<uint64_t> next_request_id{1};

std::string short_id(const std::string& id) { return id.substr(0, 12); }

// A seed line's state after a completed round, or its end (see coordinator_options::
// resume). Kernels are referred to by id: they are in the store's kernels family.
struct line_checkpoint {
  uint32_t round = 0;
  uint32_t reviews = 0;
  int restarts = 0;
  std::string cur, best;  // kernel ids; best is empty before the first correct kernel
  review_result cur_review, best_review;
  bool finished = false;  // the line ended; reason says why
  std::string reason;
};

std::string line_key(const std::string& task, size_t line) {
  return checkpoint_prefix(task) + "line/" + std::to_string(line);
}
std::string seeds_key(const std::string& task) { return checkpoint_prefix(task) + "seeds"; }

nlohmann::json to_record(const line_checkpoint& c) {
  return {{"schema", "ks.line_checkpoint/1"}, {"round", c.round},   {"reviews", c.reviews},
          {"restarts", c.restarts},           {"cur", c.cur},       {"best", c.best},
          {"cur_review", c.cur_review},       {"best_review", c.best_review},
          {"finished", c.finished},           {"reason", c.reason}};
}

result<line_checkpoint> checkpoint_from(const nlohmann::json& j) {
  try {
    line_checkpoint c;
    c.round = j.at("round").get<uint32_t>();
    c.reviews = j.at("reviews").get<uint32_t>();
    c.restarts = j.at("restarts").get<int>();
    c.cur = j.at("cur").get<std::string>();
    c.best = j.at("best").get<std::string>();
    c.cur_review = j.at("cur_review").get<review_result>();
    c.best_review = j.at("best_review").get<review_result>();
    c.finished = j.at("finished").get<bool>();
    c.reason = j.at("reason").get<std::string>();
    return c;
  } catch (const std::exception& e) {
    return error{std::string("a line checkpoint that cannot be read: ") + e.what()};
  }
}

// Flags that make a correct-looking review unusable as a result: the kernel may be
// skipping work. no_custom_kernel is allowed (a library-only fallback is honest, and
// the outcome shows the flag).
bool disqualifying_flag(const review_result& r) {
  for (const auto& f : r.flags)
    if (f == "output_independent_of_input" || f == "speedup_above_threshold") return true;
  return false;
}

// One agent with its supervision: spawns it, re-spawns it when it dies or hangs, and
// re-sends the request, at most `max_restarts` times in all.
template <class Handle, class Factory>
class supervised_agent {
 public:
  supervised_agent(caf::blocking_actor* self, std::string name, Factory factory,
                   int* restarts, int max_restarts, caf::duration timeout)
      : self_(self), name_(std::move(name)), factory_(std::move(factory)),
        restarts_(restarts), max_restarts_(max_restarts), timeout_(timeout) {}

  ~supervised_agent() {
    if (handle_) self_->send_exit(handle_, caf::exit_reason::user_shutdown);
  }

  // The reply, or an error: the agent's own failure message, or why it was given up.
  template <class Reply, class Request>
  result<Reply> call(const Request& req) {
    for (;;) {
      if (!handle_) handle_ = factory_(self_);
      std::optional<Reply> reply;
      caf::error err;
      self_->request(handle_, timeout_, req)
          .receive([&](Reply& r) { reply = std::move(r); }, [&](caf::error& e) { err = e; });
      if (reply) return std::move(*reply);
      if (auto msg = agent_failure_message(err)) return error{*msg};
      std::string why = self_->system().render(err);
      if (*restarts_ >= max_restarts_) {
        gave_up_ = true;
        return error{"the " + name_ + " failed again (" + why + ") after " +
                     std::to_string(*restarts_) + " restarts; giving up"};
      }
      ++*restarts_;
      spdlog::warn("{} failed ({}); restarting it and re-sending the request ({} of {})", name_,
                   why, *restarts_, max_restarts_);
      self_->send_exit(handle_, caf::exit_reason::kill);
      handle_ = Handle{};
    }
  }

  // The agent failed more often than allowed: the caller should stop using it.
  bool gave_up() const { return gave_up_; }

 private:
  bool gave_up_ = false;
  caf::blocking_actor* self_;
  std::string name_;
  Factory factory_;
  Handle handle_;
  int* restarts_;
  int max_restarts_;
  caf::duration timeout_;
};

template <class Handle, class Factory>
supervised_agent<Handle, Factory> make_agent(caf::blocking_actor* self, std::string name,
                                             Factory f, int* restarts,
                                             const coordinator_options& o) {
  return supervised_agent<Handle, Factory>(
      self, std::move(name), std::move(f), restarts, o.max_agent_restarts,
      caf::duration{std::chrono::milliseconds(static_cast<int64_t>(o.agent_timeout_s * 1000))});
}

// What every line shares (read-only, or thread-safe: store, compiler, backend).
struct line_context {
  coordinator_options opts;
  reviewer_actor reviewer;
};

// One seed line. Its outcome goes back to the coordinator as a task_outcome; its
// progress as task_progress messages.
class seed_line {
 public:
  seed_line(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx,
            caf::actor coordinator, size_t index)
      : self_(self), ctx_(std::move(ctx)), o_(ctx_->opts), coordinator_(std::move(coordinator)),
        index_(index) {}

  // Runs the line from `seed`, or from `resume_from` when given.
  task_outcome run(candidate seed, std::optional<line_checkpoint> resume_from);

 private:
  void record(trajectory_entry e) {
    e.task = o_.task.name;
    if (e.round == 0) e.round = round_;
    auto seq = o_.memory->append_trajectory(o_.task.name, std::move(e));
    if (!seq) spdlog::error("task '{}': trajectory write failed: {}", o_.task.name, seq.message());
  }
  std::vector<trajectory_entry> history() {
    if (!o_.use_short_term_memory) return {};
    auto h = o_.memory->read_trajectory(o_.task.name);
    if (!h) {
      spdlog::error("task '{}': trajectory read failed: {}", o_.task.name, h.message());
      return {};
    }
    return std::move(*h);
  }
  void progress(const std::string& state, const std::string& detail) {
    task_progress p;
    p.task = o_.task.name;
    p.state = state;
    p.round = round_;
    p.reviews = reviews_;
    p.best_speedup = best_ ? best_review_.speedup : 0;
    p.best_candidate = best_ ? best_->id : "";
    p.detail = detail;
    self_->send(coordinator_, std::move(p));
  }
  review_result run_review(const candidate& c);
  review_result review(candidate& c, const std::string& method, const std::string& bottleneck);
  void store_kernel(candidate& c) {
    auto id = o_.memory->put_kernel(c);
    if (!id) spdlog::error("task '{}': kernel write failed: {}", o_.task.name, id.message());
  }
  void save_checkpoint(const candidate* cur, const review_result* r, const std::string& reason) {
    line_checkpoint c;
    c.round = round_;
    c.reviews = reviews_;
    c.restarts = restarts_;
    if (cur) c.cur = cur->id;
    if (r) c.cur_review = *r;
    if (best_) c.best = best_->id, c.best_review = best_review_;
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
  uint32_t round_ = 0;
  uint32_t reviews_ = 0;
  int restarts_ = 0;
  std::optional<candidate> best_;
  review_result best_review_;
  std::map<std::string, review_result> reviewed_;  // by candidate id
};

review_result seed_line::run_review(const candidate& c) {
  progress("reviewing", "reviewing " + short_id(c.id) + " (" + c.origin + ")");
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
  ++reviews_;
  return r;
}

review_result seed_line::review(candidate& c, const std::string& method,
                                const std::string& bottleneck) {
  c.round = round_;
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

  trajectory_entry e;
  e.kind = "review";
  e.candidate_id = c.id;
  e.parent_id = c.parent_id;
  e.method = method;
  e.status = r.status;
  e.speedup = r.status == review_status::ok ? r.speedup : 0;
  e.summary = (bottleneck.empty() ? std::string() : bottleneck_tag(bottleneck) + " ") + "origin " +
              c.origin + ": " + std::string(to_string(r.status)) +
              (r.status == review_status::ok ? ", speedup " + two_decimals(r.speedup) : "") +
              (r.flags.empty() ? "" : ", flagged") + (r.message.empty() ? "" : ": " + r.message);
  e.metrics = r.profile.values;
  if (r.status == review_status::ok) {
    e.metrics["candidate_ms"] = r.candidate_time.median_ms;
    e.metrics["reference_ms"] = r.reference_time.median_ms;
  }
  record(std::move(e));
  return r;
}

task_outcome seed_line::run(candidate seed, std::optional<line_checkpoint> resume_from) {
  task_outcome out;
  out.task = o_.task.name;
  auto* self = self_;
  auto diagnoser = make_agent<diagnoser_actor>(
      self, "diagnoser",
      [m = o_.model](caf::blocking_actor* s) { return s->spawn<caf::detached>(diagnoser_agent, m); },
      &restarts_, o_);
  auto repairer = make_agent<repairer_actor>(
      self, "repairer",
      [b = o_.backend](caf::blocking_actor* s) { return s->spawn<caf::detached>(repairer_agent, b); },
      &restarts_, o_);
  auto extractor = make_agent<feature_extractor_actor>(
      self, "feature extractor",
      [c = o_.compiler, task = o_.task, size = o_.review.size](caf::blocking_actor* s) {
        return s->spawn<caf::detached>(feature_agent, feature_agent_options{c, task, size});
      },
      &restarts_, o_);
  auto planner = make_agent<planner_actor>(
      self, "planner",
      [lib = o_.library, mem = o_.memory, lt = o_.use_long_term_memory,
       st = o_.use_short_term_memory](caf::blocking_actor* s) {
        return s->spawn<caf::detached>(planner_agent, planner_options{lib, mem, lt, st});
      },
      &restarts_, o_);
  auto optimizer = make_agent<optimizer_actor>(
      self, "optimizer",
      [b = o_.backend](caf::blocking_actor* s) { return s->spawn<caf::detached>(optimizer_agent, b); },
      &restarts_, o_);

  candidate cur = std::move(seed);
  std::string method;       // the method whose attempt `cur` is ("" for a seed)
  std::string bottleneck;   // the class `method` was planned in
  review_result base_review;  // the review of cur's correct parent (for experience)
  uint32_t repairs = 0;
  std::string reason;

  auto finish = [&](std::string why) {
    save_checkpoint(nullptr, nullptr, why);
    out.reason = std::move(why);
    out.rounds = round_;
    out.reviews = reviews_;
    out.agent_restarts = static_cast<uint32_t>(restarts_);
    if (best_) {
      out.success = true;
      out.best = *best_;
      out.best_review = best_review_;
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
    if (!best_) return false;
    trajectory_entry e;
    e.kind = "note";
    e.candidate_id = best_->id;
    e.parent_id = cur.id;
    e.method = method;
    e.summary = "back to " + short_id(best_->id) + ": " + why;
    record(std::move(e));
    cur = *best_;
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
    round_ = cp.round;
    reviews_ = cp.reviews;
    restarts_ = cp.restarts;
    if (!cp.best.empty()) {
      auto b = o_.memory->get_kernel(cp.best);
      if (!b) return finish("cannot resume: " + b.message());
      best_ = std::move(*b);
      best_review_ = cp.best_review;
    }
    if (cp.finished) return finish(cp.reason);
    auto c = o_.memory->get_kernel(cp.cur);
    if (!c) return finish("cannot resume: " + c.message());
    cur = std::move(*c);
    r = cp.cur_review;
    reviewed_[cur.id] = r;
    reverted = true;
    trajectory_entry e;
    e.kind = "note";
    e.candidate_id = cur.id;
    e.summary = "resumed at round " + std::to_string(round_) + " after a restart, from " +
                short_id(cur.id) + (best_ ? " (best " + two_decimals(best_review_.speedup) + ")" : "");
    record(std::move(e));
    progress("optimizing", e.summary);
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
        if (r.status == review_status::internal_error && !best_) return finish(why);
        if (!revert(why)) return finish("no correct kernel: " + why);
        r = best_review_;
        reverted = true;
        continue;
      }
      progress("repairing", "diagnosing " + short_id(cur.id) + ": " + to_string(r.status));
      diagnose_request dreq{o_.task, cur, r, history()};
      auto diag = diagnoser.call<repair_plan>(dreq);
      if (!diag) return finish(diag.message());
      {
        trajectory_entry e;
        e.kind = "diagnose";
        e.candidate_id = cur.id;
        e.parent_id = cur.parent_id;
        e.method = method;
        e.status = r.status;
        e.summary = diag->diagnosis;
        for (const auto& a : diag->actions) e.summary += " | " + a;
        record(std::move(e));
      }
      repair_request rreq;
      rreq.task = o_.task;
      rreq.cand = cur;
      rreq.plan = *diag;
      rreq.review = r;
      if (best_) rreq.last_good.push_back(*best_);
      rreq.history = history();
      ++repairs;
      auto fixed = repairer.call<candidate>(rreq);
      if (!fixed && repairer.gave_up()) return finish(fixed.message());
      if (!fixed) {
        trajectory_entry e;
        e.kind = "repair";
        e.candidate_id = cur.id;
        e.parent_id = cur.parent_id;
        e.method = "repair";
        e.summary = "repair failed: " + fixed.message();
        record(std::move(e));
        if (!revert("the repairer could not fix " + short_id(cur.id) + ": " + fixed.message()))
          return finish("no correct kernel: the repairer could not fix the seed: " +
                        fixed.message());
        r = best_review_;
        reverted = true;
        continue;
      }
      fixed->round = round_;
      if (best_ && fixed->id == best_->id) {
        // The repairer went back to the best version (the rules coder's repair):
        // the attempt failed.
        record_experience(r, nullptr);
        revert("the repairer went back to " + short_id(best_->id));
        r = best_review_;
        reverted = true;
        continue;
      }
      {
        trajectory_entry e;
        e.kind = "repair";
        e.candidate_id = fixed->id;
        e.parent_id = fixed->parent_id;
        e.method = "repair";
        e.summary = "repair " + std::to_string(repairs) + " of " + short_id(cur.id) + " → " +
                    short_id(fixed->id);
        record(std::move(e));
      }
      cur = std::move(*fixed);
      r = review(cur, method, bottleneck);
      continue;
    }

    // Correct. Keep it when it is the line's best; a slower correct attempt sends the
    // line back to the best (the trajectory shows the method did not help).
    code_features features;
    if (reverted) {
      reverted = false;
    } else if (!best_ || r.speedup > best_review_.speedup) {
      best_ = cur;
      best_review_ = r;
      repairs = 0;
      progress("optimizing", "best so far " + short_id(cur.id) + ": speedup " + two_decimals(r.speedup));
    } else {
      record_experience(r, nullptr);
      revert("speedup " + two_decimals(r.speedup) + " is not better than " + two_decimals(best_review_.speedup));
      r = best_review_;
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
    if (round_ >= o_.rounds) return finish("round budget spent");

    // Plan, optimize.
    progress("planning", "planning round " + std::to_string(round_ + 1));
    plan_request preq{o_.task, cur, r, features, history()};
    preq.cand.round = round_;
    auto plan = planner.call<optimization_plan>(preq);
    if (!plan) return finish(plan.message());
    ++round_;
    {
      trajectory_entry e;
      e.kind = "plan";
      e.candidate_id = cur.id;
      e.method = plan->chosen;
      e.summary = plan->rationale;
      for (const auto& v : plan->vetoed)
        if (e.summary.size() < 4000) e.summary += " | vetoed " + v.method + ": " + v.reason;
      record(std::move(e));
    }
    if (plan->ranked.empty()) return finish("no allowed method left");
    std::optional<candidate> next;
    std::string tried;
    for (uint32_t i = 0; i < plan->ranked.size() && i < o_.methods_per_round && !next; ++i) {
      optimization_plan p = *plan;
      p.chosen = plan->ranked[i].method;
      progress("optimizing", "round " + std::to_string(round_) + ": " + p.chosen);
      optimize_request oreq{o_.task, cur, p, r, features, history()};
      auto c = optimizer.call<candidate>(oreq);
      if (!c && optimizer.gave_up()) return finish(c.message());
      trajectory_entry e;
      e.kind = "optimize";
      e.method = p.chosen;
      e.parent_id = cur.id;
      if (!c) {
        e.candidate_id = cur.id;
        e.summary = "not applied: " + c.message();
        record(std::move(e));
        tried += (tried.empty() ? "" : ", ") + p.chosen;
        continue;
      }
      e.candidate_id = c->id;
      e.summary = bottleneck_tag(plan->bottleneck_class) + " " + p.chosen + " on " +
                  short_id(cur.id) + " → " + short_id(c->id);
      record(std::move(e));
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

void seed_line_actor(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx,
                     candidate seed, size_t index, std::optional<line_checkpoint> resume_from,
                     caf::actor coordinator) {
  seed_line line(self, ctx, coordinator, index);
  task_outcome o = line.run(std::move(seed), std::move(resume_from));
  self->send(coordinator, std::move(o));
}

}  // namespace

std::string checkpoint_prefix(const std::string& task) { return "checkpoint/" + task + "/"; }

task_outcome run_task(caf::actor_system& sys, const coordinator_options& opts,
                      const reviewer_actor& reviewer, const caf::actor& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  caf::scoped_actor self{sys};
  task_outcome out;
  out.task = opts.task.name;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto tell = [&](task_progress p) {
    if (progress) self->send(progress, std::move(p));
  };
  auto finish = [&](task_outcome o) {
    o.task = opts.task.name;
    o.wall_s = elapsed();
    if (opts.usage) {
      auto u = opts.usage->task_total(opts.task.name);
      o.input_tokens = u.input_tokens;
      o.output_tokens = u.output_tokens;
      o.cost_usd = u.cost_usd;
    }
    trajectory_entry e;
    e.kind = "note";
    e.candidate_id = o.success ? o.best.id : "";
    e.speedup = o.success ? o.best_review.speedup : 0;
    e.status = o.success ? review_status::ok : o.best_review.status;
    e.summary = std::string(o.success ? "done" : "failed") + ": " + o.reason;
    if (auto s = opts.memory->append_trajectory(opts.task.name, e); !s)
      spdlog::error("task '{}': trajectory write failed: {}", opts.task.name, s.message());
    tell(task_progress{opts.task.name, o.success ? "done" : "failed", o.rounds, o.reviews,
                       o.success ? o.best_review.speedup : 0, o.best.id, o.reason});
    return o;
  };

  const std::string& name = opts.task.name;
  // Seeds: those of the interrupted run when resuming, else new ones.
  std::optional<std::vector<candidate>> resumed_seeds;
  if (opts.resume) {
    auto rec = opts.memory->get_task_record(seeds_key(name));
    if (rec && *rec) {
      std::vector<candidate> seeds;
      for (const auto& id : (**rec).value("seeds", std::vector<std::string>{})) {
        auto c = opts.memory->get_kernel(id);
        if (!c) {
          out.reason = "cannot resume: " + c.message();
          return finish(out);
        }
        seeds.push_back(std::move(*c));
      }
      resumed_seeds = std::move(seeds);
    }
  } else if (auto s = opts.memory->delete_task_records(checkpoint_prefix(name)); !s) {
    spdlog::error("task '{}': {}", name, s.message());
  }
  if (opts.cancel && opts.cancel->load()) {
    out.reason = "cancelled";
    return finish(out);
  }
  std::vector<candidate> seeds;
  if (resumed_seeds) {
    seeds = std::move(*resumed_seeds);
  } else {
    tell(task_progress{name, "generating", 0, 0, 0, "", "writing seed kernels"});
    int restarts = 0;
    auto generator = make_agent<generator_actor>(
        self.ptr(), "generator",
        [b = opts.backend](caf::blocking_actor* s) { return s->spawn<caf::detached>(generator_agent, b); },
        &restarts, opts);
    auto generated = generator.call<std::vector<candidate>>(generate_request{opts.task, opts.seeds});
    out.agent_restarts = static_cast<uint32_t>(restarts);
    if (!generated) {
      out.reason = "no seed kernel: " + generated.message();
      return finish(out);
    }
    seeds = std::move(*generated);
    std::vector<std::string> ids;
    for (auto& s : seeds) {
      s.task = name;
      if (s.id.empty()) s.id = candidate_id(s);
      if (auto id = opts.memory->put_kernel(s); !id)
        spdlog::error("task '{}': kernel write failed: {}", name, id.message());
      ids.push_back(s.id);
      trajectory_entry e;
      e.kind = "seed";
      e.candidate_id = s.id;
      e.summary = "seed " + short_id(s.id) + " from " + opts.backend->name() + ": " + s.origin;
      if (auto r = opts.memory->append_trajectory(name, e); !r)
        spdlog::error("task '{}': trajectory write failed: {}", name, r.message());
    }
    nlohmann::json rec{{"schema", "ks.seed_checkpoint/1"}, {"seeds", ids}};
    if (auto s = opts.memory->put_task_record(seeds_key(name), rec); !s)
      spdlog::error("task '{}': checkpoint write failed: {}", name, s.message());
  }

  // One line per seed, all at once; this actor collects their progress and outcomes.
  auto ctx = std::make_shared<const line_context>(line_context{opts, reviewer});
  std::map<caf::actor_addr, task_progress> lines;
  for (size_t k = 0; k < seeds.size(); ++k) {
    std::optional<line_checkpoint> cp;
    if (resumed_seeds) {
      auto rec = opts.memory->get_task_record(line_key(name, k));
      if (rec && *rec) {
        auto c = checkpoint_from(**rec);
        if (c) cp = std::move(*c);
        else spdlog::error("task '{}': line {}: {}; it starts again from its seed", name, k, c.message());
      }
    }
    auto line = self->spawn<caf::detached + caf::monitored>(seed_line_actor, ctx, seeds[k], k,
                                                            std::move(cp), caf::actor{self});
    lines[line.address()] = task_progress{};
  }
  std::vector<task_outcome> done;
  std::vector<std::string> crashed;
  size_t open = lines.size();
  double best = 0;
  std::string best_id;
  self->receive_while([&] { return open > 0; })(
      [&](task_progress& p) {
        auto& slot = lines[caf::actor_cast<caf::actor_addr>(self->current_sender())];
        slot = p;
        if (p.best_speedup > best) {
          best = p.best_speedup;
          best_id = p.best_candidate;
        }
        task_progress agg = p;
        agg.round = 0;
        agg.reviews = 0;
        for (const auto& [_, l] : lines) {
          agg.round += l.round;
          agg.reviews += l.reviews;
        }
        agg.best_speedup = best;
        agg.best_candidate = best_id;
        tell(std::move(agg));
      },
      [&](task_outcome& o) {
        done.push_back(std::move(o));
      },
      [&](caf::down_msg& d) {
        --open;
        if (d.reason && d.reason != caf::exit_reason::normal)
          crashed.push_back(sys.render(d.reason));
      });

  // The best correct kernel of all lines.
  for (const auto& o : done) {
    out.rounds += o.rounds;
    out.reviews += o.reviews;
    out.agent_restarts += o.agent_restarts;
    if (o.success && (!out.success || o.best_review.speedup > out.best_review.speedup)) {
      out.success = true;
      out.best = o.best;
      out.best_review = o.best_review;
    }
  }
  std::map<std::string, int> reasons;
  for (const auto& o : done) ++reasons[o.reason];
  for (const auto& c : crashed) ++reasons["a seed line crashed: " + c];
  for (const auto& [why, n] : reasons)
    out.reason += (out.reason.empty() ? "" : "; ") + (n > 1 ? std::to_string(n) + " lines: " : "") + why;
  if (out.success)
    out.reason = "best speedup " + two_decimals(out.best_review.speedup) + " (" + out.reason + ")";
  return finish(out);
}

void task_coordinator(caf::blocking_actor* self, coordinator_options opts,
                      reviewer_actor reviewer, caf::actor progress, caf::actor report_to) {
  task_outcome o = run_task(self->system(), opts, reviewer, progress);
  self->send(report_to, std::move(o));
}

}  // namespace ks
