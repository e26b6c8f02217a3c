#include "actors/task_coordinator.hpp"

#include <chrono>
#include <map>
#include <optional>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/agents.hpp"
#include "actors/line_checkpoint.hpp"
#include "actors/line_recorder.hpp"
#include "actors/pending_exit.hpp"
#include "actors/seed_line.hpp"
#include "actors/supervised_agent.hpp"
#include "base/number_format.hpp"
#include "llm/usage_ledger.hpp"
#include "model/candidate_id.hpp"
#include "store/store.hpp"

namespace ks {

namespace {

// The task's own progress messages, and its end: the end note in the trajectory, the
// outcome's time and tokens, and the last progress message.
class task_reporter {
 public:
  task_reporter(caf::blocking_actor* self, const caf::actor& progress, const coordinator_options& opts,
                std::chrono::steady_clock::time_point t0)
      : self_(self), progress_(progress), opts_(opts), t0_(t0) {}

  void tell(task_progress p) const {
    if (progress_) self_->send(progress_, std::move(p));
  }

  task_outcome finish(task_outcome o) const {
    o.task = opts_.task.name;
    o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (opts_.usage) {
      auto u = opts_.usage->task_total(opts_.task.name);
      o.input_tokens = u.input_tokens;
      o.output_tokens = u.output_tokens;
      o.cost_usd = u.cost_usd;
    }
    record_task_end(*opts_.memory, opts_.task.name, o);
    tell(task_progress{opts_.task.name, o.success ? "done" : "failed", o.rounds, o.reviews,
                       o.success ? o.best_review.speedup : 0, o.best.id, o.reason});
    return o;
  }

 private:
  caf::blocking_actor* self_;
  const caf::actor& progress_;
  const coordinator_options& opts_;
  std::chrono::steady_clock::time_point t0_;
};

// The seeds of the interrupted run, read back (resume): none when it had not stored
// them yet; an error when one of their kernels is gone.
result<std::optional<std::vector<candidate>>> stored_seeds(const coordinator_options& opts) {
  auto rec = opts.memory->get_task_record(seeds_key(opts.task.name));
  if (!rec || !*rec) return std::optional<std::vector<candidate>>{};
  std::vector<candidate> seeds;
  for (const auto& id : (**rec).value("seeds", std::vector<std::string>{})) {
    auto c = opts.memory->get_kernel(id);
    if (!c) return error{"cannot resume: " + c.message()};
    seeds.push_back(std::move(*c));
  }
  return std::optional<std::vector<candidate>>(std::move(seeds));
}

// New seeds from the generator, each stored with its trajectory entry, then the record
// of them all (what a resumed run starts from). The generator's restarts go to
// `restarts`.
result<std::vector<candidate>> generate_seeds(caf::blocking_actor* self, const coordinator_options& opts,
                                              uint32_t* restarts) {
  const std::string& name = opts.task.name;
  int generator_restarts = 0;
  auto generator = make_agent<generator_actor>(
      self, "generator",
      [b = opts.backend](caf::blocking_actor* s) { return s->spawn<caf::detached>(generator_agent, b); },
      &generator_restarts, opts);
  auto generated = generator.call<std::vector<candidate>>(generate_request{opts.task, opts.seeds});
  *restarts = static_cast<uint32_t>(generator_restarts);
  if (!generated) return error{"no seed kernel: " + generated.message()};
  std::vector<candidate> seeds = std::move(*generated);
  std::vector<std::string> ids;
  for (auto& s : seeds) {
    s.task = name;
    if (s.id.empty()) s.id = candidate_id(s);
    if (auto id = opts.memory->put_kernel(s); !id)
      spdlog::error("task '{}': kernel write failed: {}", name, id.message());
    ids.push_back(s.id);
    record_seed(*opts.memory, name, s, opts.backend->name());
  }
  nlohmann::json rec{{"schema", "ks.seed_checkpoint/1"}, {"seeds", ids}};
  if (auto s = opts.memory->put_task_record(seeds_key(name), rec); !s)
    spdlog::error("task '{}': checkpoint write failed: {}", name, s.message());
  return seeds;
}

// The checkpoint line `k` of a resumed run starts from; none: it starts from its seed.
std::optional<line_checkpoint> line_start(const coordinator_options& opts, size_t k) {
  auto rec = opts.memory->get_task_record(line_key(opts.task.name, k));
  if (!rec || !*rec) return std::nullopt;
  auto c = checkpoint_from(**rec);
  if (c) return std::move(*c);
  spdlog::error("task '{}': line {}: {}; it starts again from its seed", opts.task.name, k, c.message());
  return std::nullopt;
}

// What the lines came back with: their outcomes, and why any of them stopped without one.
struct line_results {
  std::vector<task_outcome> done;
  std::vector<std::string> stopped;
};

// The seed lines of one run, each on an actor of its own, and what keeps them: a line
// that dies is started again from its checkpoint (at most max_line_restarts times);
// when the run ends early (the coordinator is killed, or an exception leaves it) the
// lines are told to stop and waited for, so that none of them writes to the store
// once the run is over.
class line_group {
 public:
  line_group(caf::blocking_actor* self, std::shared_ptr<const line_context> ctx, const std::vector<candidate>& seeds)
      : self_(self), ctx_(std::move(ctx)), seeds_(seeds), restarts_(seeds.size(), 0), progress_(seeds.size()) {}

  ~line_group() {
    if (by_addr_.empty()) return;
    try {
      stop_all();
    } catch (...) {
      // nothing more can be done from a destructor
    }
  }

  void start(size_t k, std::optional<line_checkpoint> cp) {
    auto line = self_->spawn<caf::detached + caf::monitored>(seed_line_actor, ctx_, seeds_[k], k, std::move(cp),
                                                             caf::actor_cast<caf::actor>(self_));
    by_addr_[line.address()] = k;
    if (ctx_->opts.on_spawn) ctx_->opts.on_spawn("line " + std::to_string(k), line);
  }

  // Collects progress (passed on, summed over the lines, with the best of all) and
  // outcomes until every line has stopped. An exit message for the coordinator stops
  // the lines; `killed` then says why, and the results are to be dropped.
  line_results run(const task_reporter& report, caf::error* killed) {
    line_results r;
    double best = 0;
    std::string best_id;
    self_->receive_while([&] { return !by_addr_.empty(); })(
        [&](task_progress& p) {
          auto it = by_addr_.find(caf::actor_cast<caf::actor_addr>(self_->current_sender()));
          if (it == by_addr_.end() || ctx_->stopping->load()) return;
          progress_[it->second] = p;
          if (p.best_speedup > best) {
            best = p.best_speedup;
            best_id = p.best_candidate;
          }
          task_progress agg = p;
          agg.round = 0;
          agg.reviews = 0;
          for (const auto& l : progress_) {
            agg.round += l.round;
            agg.reviews += l.reviews;
          }
          agg.best_speedup = best;
          agg.best_candidate = best_id;
          report.tell(std::move(agg));
        },
        [&](task_outcome& o) { r.done.push_back(std::move(o)); }, [&](caf::down_msg& d) { line_down(d, r); },
        [&](caf::exit_msg& m) {
          if (auto why = stop_reason_of(m)) {
            *killed = *why;
            spdlog::warn("task '{}': the coordinator was told to exit ({}); stopping its lines", ctx_->opts.task.name,
                         self_->system().render(*why));
            ctx_->stopping->store(true);
          }
        });
    return r;
  }

 private:
  void line_down(const caf::down_msg& d, line_results& r) {
    auto it = by_addr_.find(d.source);
    if (it == by_addr_.end()) return;
    const size_t k = it->second;
    by_addr_.erase(it);
    if (!d.reason || d.reason == caf::exit_reason::normal || ctx_->stopping->load()) return;
    const std::string why = self_->system().render(d.reason);
    const std::string& task = ctx_->opts.task.name;
    if (restarts_[k] >= ctx_->opts.max_line_restarts) {
      spdlog::error("task '{}': line {} stopped ({}) after {} restarts; the task goes on without it", task, k, why,
                    restarts_[k]);
      r.stopped.push_back("seed line " + std::to_string(k) + " stopped (" + why + ")" +
                          (restarts_[k] > 0 ? " after " + std::to_string(restarts_[k]) + " restarts" : ""));
      return;
    }
    ++restarts_[k];
    auto cp = line_start(ctx_->opts, k);
    spdlog::warn("task '{}': line {} stopped ({}); starting it again from {} ({} of {})", task, k, why,
                 cp ? "its checkpoint at round " + std::to_string(cp->round) : std::string("its seed"), restarts_[k],
                 ctx_->opts.max_line_restarts);
    start(k, std::move(cp));
  }

  // Tells every line to stop and waits until each has (its step under way ends first).
  void stop_all() {
    ctx_->stopping->store(true);
    self_->receive_while([&] { return !by_addr_.empty(); })([&](caf::down_msg& d) { by_addr_.erase(d.source); });
  }

  caf::blocking_actor* self_;
  std::shared_ptr<const line_context> ctx_;
  const std::vector<candidate>& seeds_;
  std::vector<int> restarts_;
  std::vector<task_progress> progress_;
  std::map<caf::actor_addr, size_t> by_addr_;  // the lines running now
};

// One line per seed, all at once; see line_group.
line_results run_lines(caf::blocking_actor* self, const task_reporter& report, std::shared_ptr<const line_context> ctx,
                       const std::vector<candidate>& seeds, bool resuming, caf::error* killed) {
  line_group lines(self, ctx, seeds);
  for (size_t k = 0; k < seeds.size(); ++k) lines.start(k, resuming ? line_start(ctx->opts, k) : std::nullopt);
  return lines.run(report, killed);
}

// The task's outcome from its lines': the best correct kernel of all, the sums, and
// every line's reason (counted when several lines share one).
void combine(task_outcome& out, const line_results& r) {
  for (const auto& o : r.done) {
    out.rounds += o.rounds;
    out.reviews += o.reviews;
    out.review_time += o.review_time;
    out.agent_restarts += o.agent_restarts;
    if (o.success && (!out.success || o.best_review.speedup > out.best_review.speedup)) {
      out.success = true;
      out.best = o.best;
      out.best_review = o.best_review;
    }
  }
  std::map<std::string, int> reasons;
  for (const auto& o : r.done) ++reasons[o.reason];
  for (const auto& c : r.stopped) ++reasons[c];
  for (const auto& [why, n] : reasons)
    out.reason += (out.reason.empty() ? "" : "; ") + (n > 1 ? std::to_string(n) + " lines: " : "") + why;
  if (out.success) out.reason = "best speedup " + two_decimals(out.best_review.speedup) + " (" + out.reason + ")";
}

}  // namespace

std::string checkpoint_prefix(const std::string& task) { return "checkpoint/" + task + "/"; }

namespace {

// The loop on `self`; nullopt when the coordinator was killed (`killed` says why).
std::optional<task_outcome> run_task_on(caf::blocking_actor* self, const coordinator_options& opts,
                                        const reviewer_actor& reviewer, const caf::actor& progress,
                                        caf::error* killed) {
  const auto t0 = std::chrono::steady_clock::now();
  const task_reporter report(self, progress, opts, t0);
  task_outcome out;
  out.task = opts.task.name;
  const std::string& name = opts.task.name;
  // Seeds: those of the interrupted run when resuming, else new ones.
  std::optional<std::vector<candidate>> resumed_seeds;
  if (opts.resume) {
    auto stored = stored_seeds(opts);
    if (!stored) {
      out.reason = stored.message();
      return report.finish(out);
    }
    resumed_seeds = std::move(*stored);
  } else if (auto s = opts.memory->delete_task_records(checkpoint_prefix(name)); !s) {
    spdlog::error("task '{}': {}", name, s.message());
  }
  if (opts.cancel && opts.cancel->load()) {
    out.reason = "cancelled";
    return report.finish(out);
  }
  std::vector<candidate> seeds;
  if (resumed_seeds) {
    seeds = std::move(*resumed_seeds);
  } else {
    report.tell(task_progress{name, "generating", 0, 0, 0, "", "writing seed kernels"});
    auto generated = generate_seeds(self, opts, &out.agent_restarts);
    if (!generated) {
      // A cancel ends the seeds' generation too (its graph export is killed): say so.
      out.reason = opts.cancel && opts.cancel->load() ? "cancelled" : generated.message();
      return report.finish(out);
    }
    seeds = std::move(*generated);
  }
  // Killed while the seeds were written: they are stored, and a resumed run starts
  // from them.
  if (auto why = pending_exit(self)) {
    *killed = *why;
    return std::nullopt;
  }
  auto ctx = std::make_shared<const line_context>(line_context{opts, reviewer});
  caf::error lines_killed;
  auto results = run_lines(self, report, ctx, seeds, resumed_seeds.has_value(), &lines_killed);
  if (lines_killed) {
    *killed = lines_killed;
    return std::nullopt;
  }
  combine(out, results);
  return report.finish(out);
}

}  // namespace

task_outcome run_task(caf::actor_system& sys, const coordinator_options& opts, const reviewer_actor& reviewer,
                      const caf::actor& progress) {
  caf::scoped_actor self{sys};
  caf::error killed;
  auto out = run_task_on(self.ptr(), opts, reviewer, progress, &killed);
  if (out) return std::move(*out);
  // Only an exit sent to this function's own scoped actor gets here; nobody has it.
  task_outcome o;
  o.task = opts.task.name;
  o.reason = "stopped: " + sys.render(killed);
  return o;
}

void task_coordinator(caf::blocking_actor* self, coordinator_options opts, reviewer_actor reviewer, caf::actor progress,
                      caf::actor report_to) {
  if (opts.on_spawn) opts.on_spawn("coordinator", caf::actor_cast<caf::actor>(self));
  caf::error killed;
  auto o = run_task_on(self, opts, reviewer, progress, &killed);
  if (!o) {
    spdlog::warn(
        "task '{}': the coordinator stopped ({}); its lines have stopped, and its checkpoints "
        "are where a resumed run starts",
        opts.task.name, self->system().render(killed));
    self->fail_state(std::move(killed));
    return;
  }
  self->send(report_to, std::move(*o));
}

}  // namespace ks
