#include "actors/agents.hpp"

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "base/number_format.hpp"
#include "coder/llm_coder.hpp"
#include "features/feature_extractor.hpp"
#include "fleet/review_dispatcher.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "plan/plan_validator.hpp"
#include "policy/decision_policy.hpp"
#include "store/store.hpp"

namespace ks {

// ---------------------------------------------------------------------------
// Errors. sec::invalid_argument with a string context marks "I could not do it";
// CAF itself never uses that code for a response, so it cannot be confused with a
// dead agent (request_receiver_down, broken_promise, runtime_error) or a timeout.

caf::error agent_failure(std::string message) {
  return caf::make_error(caf::sec::invalid_argument, std::move(message));
}

std::optional<std::string> agent_failure_message(const caf::error& e) {
  if (e.category() != caf::atom("system") || e.code() != static_cast<uint8_t>(caf::sec::invalid_argument))
    return std::nullopt;
  const auto& ctx = e.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) return ctx.get_as<std::string>(0);
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Coder agents.

generator_actor::behavior_type generator_agent(generator_actor::pointer self, std::shared_ptr<coder> backend) {
  return {[=](const generate_request& req) -> caf::result<std::vector<candidate>> {
    auto seeds = backend->seeds(req.task, req.seeds);
    if (!seeds) return agent_failure(seeds.message());
    return std::move(*seeds);
  }};
}

optimizer_actor::behavior_type optimizer_agent(optimizer_actor::pointer self, std::shared_ptr<coder> backend) {
  return {[=](const optimize_request& req) -> caf::result<candidate> {
    optimize_input in{req.task, req.cand, req.review, req.features, req.plan, req.history};
    auto c = backend->optimize(in);
    if (!c) return agent_failure(c.message());
    return std::move(*c);
  }};
}

repairer_actor::behavior_type repairer_agent(repairer_actor::pointer self, std::shared_ptr<coder> backend) {
  return {[=](const repair_request& req) -> caf::result<candidate> {
    repair_input in;
    in.task = req.task;
    in.failed = req.cand;
    in.review = req.review;
    in.diagnosis = req.plan;
    if (!req.last_good.empty()) in.last_good = req.last_good.front();
    in.history = req.history;
    auto c = backend->repair(in);
    if (!c) return agent_failure(c.message());
    return std::move(*c);
  }};
}

// ---------------------------------------------------------------------------
// Diagnoser.

namespace {}  // namespace

repair_plan rule_diagnosis(const diagnose_request& req) {
  repair_plan p;
  p.candidate_id = req.cand.id;
  const review_result& r = req.review;
  const bool derived = !req.cand.parent_id.empty();
  switch (r.status) {
    case review_status::compile_error: {
      p.diagnosis = "the source does not compile";
      size_t shown = 0;
      for (const auto& d : r.diagnostics) {
        if (d.severity != "error") continue;
        if (shown++ == 5) break;
        p.diagnosis += (shown == 1 ? ": " : "; ") + ("line " + std::to_string(d.line) + ": " + d.message);
      }
      p.actions = {"fix the compile errors at the lines named",
                   "keep the kernels' names and parameters in step with the launch plan"};
      break;
    }
    case review_status::plan_error:
      p.diagnosis = "the launch plan does not fit the source or the shapes: " + r.message;
      p.actions = {
          "make each kernel step name a kernel of the source, with arguments "
          "matching its parameters in number and type",
          "check grid, block and buffer shape expressions against the input shapes"};
      break;
    case review_status::incorrect:
      p.diagnosis = "wrong result: " + std::to_string(r.trials_passed) + " of " + std::to_string(r.trials_run) +
                    " trials passed, max abs error " + short_g(r.max_abs_error) + ", max rel error " +
                    short_g(r.max_rel_error);
      if (!r.message.empty()) p.diagnosis += " (" + r.message + ")";
      p.actions = {"check the index arithmetic and the bounds of the last, partial block",
                   "make sure every output element is written exactly once",
                   "accumulate reductions in float and combine partial results completely"};
      if (derived) p.actions.insert(p.actions.begin(), "revert to the last correct version");
      break;
    case review_status::crashed:
      p.diagnosis = "the kernel crashed the CUDA context: " + r.message;
      p.actions = {"guard every global memory access with the tensor's bounds",
                   "size shared memory in the plan to what the kernel indexes"};
      if (derived) p.actions.insert(p.actions.begin(), "revert to the last correct version");
      break;
    case review_status::timed_out:
      p.diagnosis = "the review timed out: the kernel hangs or is far too slow: " + r.message;
      p.actions = {"check loop bounds and strides for loops that never end",
                   "never put __syncthreads() where not every thread of the block reaches it"};
      if (derived) p.actions.insert(p.actions.begin(), "revert to the last correct version");
      break;
    case review_status::internal_error:
      p.diagnosis = "the reviewer failed (not the kernel's fault): " + r.message;
      p.actions = {"review again"};
      break;
    case review_status::ok:
      p.diagnosis = "the review passed";
      if (!r.flags.empty()) {
        p.diagnosis += " but was flagged:";
        for (const auto& f : r.flags) p.diagnosis += " " + f;
        p.actions = {"compute every output from the inputs; no shortcuts"};
      }
      break;
  }
  // Short-term memory: the same failure on the same line before means the repairs
  // tried so far did not work; say so, so that the repairer changes direction.
  int earlier = 0;
  for (const auto& e : req.history)
    if (e.kind == "review" && e.status == r.status && e.candidate_id != req.cand.id && !req.cand.parent_id.empty() &&
        e.parent_id == req.cand.parent_id)
      ++earlier;
  if (earlier > 0) {
    p.diagnosis +=
        " (the same failure " + std::to_string(earlier) + " time" + (earlier == 1 ? "" : "s") + " before on this line)";
    p.actions.push_back("do not repeat the earlier repairs of this line; change direction");
  }
  return p;
}

diagnoser_actor::behavior_type diagnoser_agent(diagnoser_actor::pointer self, std::shared_ptr<llm_coder> model) {
  return {[=](const diagnose_request& req) -> caf::result<repair_plan> {
    repair_plan rules = rule_diagnosis(req);
    if (!model || req.review.status == review_status::internal_error) return rules;
    auto m = model->diagnose(req);
    if (!m) {
      spdlog::warn("task '{}': the model's diagnosis failed ({}); using the rules' reading", req.task.name,
                   m.message());
      return rules;
    }
    // The rules' facts (what failed, where) stay in front of the model's reading.
    m->diagnosis = rules.diagnosis + ". " + m->diagnosis;
    return std::move(*m);
  }};
}

// ---------------------------------------------------------------------------
// Feature extractor.

feature_extractor_actor::behavior_type feature_agent(feature_extractor_actor::pointer self,
                                                     feature_agent_options options) {
  return {[=](const feature_request& req) -> caf::result<code_features> {
    feature_input in;
    in.source = req.cand.source;
    in.resources = req.review.resources;
    in.plan = &req.cand.plan;
    if (!options.task.name.empty())
      in.dtype = options.task.inputs.empty() ? "float32" : options.task.inputs.front().dtype;
    // The plan at the task's shapes gives grid, block and waves (occupancy and
    // tail-effect evidence); a plan that does not resolve is reviewed as a plan error
    // anyway, so features go without it.
    std::optional<resolved_plan> resolved;
    if (!options.task.name.empty()) {
      auto ctx = make_plan_context(options.task, req.cand.source, options.size);
      if (ctx) {
        auto r = resolve_plan(req.cand.plan, *ctx);
        if (r) resolved = std::move(*r);
      }
    }
    if (resolved) in.resolved = &*resolved;
    if (options.compiler) {
      auto compiled = options.compiler->compile(req.cand.source, req.cand.compile_options);
      if (compiled && compiled->ok) {
        in.ptx = compiled->ptx;
        if (in.resources.empty()) in.resources = compiled->resources;
      }
    }
    code_features f = extract_features(in);
    f.candidate_id = req.cand.id;
    return f;
  }};
}

// ---------------------------------------------------------------------------
// Planner.

planner_actor::behavior_type planner_agent(planner_actor::pointer self, planner_options options) {
  return {[=](const plan_request& req) -> caf::result<optimization_plan> {
    policy_input in = make_policy_input(req);
    in.use_long_term_memory = options.use_long_term_memory;
    if (!options.use_short_term_memory) in.history.clear();
    if (options.memory && options.use_long_term_memory) {
      // Experience of (bottleneck class, template, method) from the other tasks (this
      // task's own attempts are the short-term memory's): a candidate without a
      // template (another coder's) reads every template's.
      std::optional<std::string> templ;
      if (!in.template_name.empty()) templ = in.template_name;
      auto stats = options.memory->experience_stats(primary_bottleneck(*options.library, in), templ, req.task.name);
      if (stats) {
        for (const auto& s : *stats) in.experience[s.method] = {s.applied, s.realized_gain};
      } else {
        spdlog::warn("planner: experience unavailable: {}", stats.message());
      }
    }
    return decide(*options.library, in).to_optimization_plan();
  }};
}

// ---------------------------------------------------------------------------
// Reviewer.

reviewer_actor::behavior_type reviewer_agent(reviewer_actor::pointer self, std::vector<gpu_pool_actor> pools) {
  dispatcher_options o;
  for (size_t i = 0; i < pools.size(); ++i) o.pools.push_back({pools[i], "pool " + std::to_string(i), ""});
  o.own_pools = false;  // the caller's
  auto dispatcher = spawn_review_dispatcher(self->system(), std::move(o));
  self->link_to(dispatcher);  // it ends with the reviewer
  return {[=](review_request& req) { return self->delegate(dispatcher, std::move(req)); }};
}

}  // namespace ks
