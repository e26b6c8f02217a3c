#include "actors/task_coordinator.hpp"

#include <chrono>
#include <map>
#include <optional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/agents.hpp"
#include "actors/line_checkpoint.hpp"
#include "actors/line_recorder.hpp"
#include "actors/seed_line.hpp"
#include "actors/supervised_agent.hpp"
#include "base/number_format.hpp"
#include "llm/usage_ledger.hpp"
#include "memory/store.hpp"
#include "model/candidate_id.hpp"

namespace ks {

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
    record_task_end(*opts.memory, opts.task.name, o);
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
      record_seed(*opts.memory, name, s, opts.backend->name());
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
