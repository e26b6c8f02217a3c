#include "features/plan_features.hpp"

#include <cstdint>
#include <optional>

#include "plan/shape_expr.hpp"

namespace ks::features {

namespace {

// Evaluates an expression of a plan that uses plan constants only (no shapes).
std::optional<int64_t> eval_static(const std::string& text, const launch_plan& plan) {
  expr_env env;
  // Constants may refer to each other: evaluate in rounds until nothing changes.
  for (int round = 0; round < 8; ++round) {
    bool changed = false;
    for (auto& [name, expr] : plan.constants) {
      if (env.constants.count(name)) continue;
      auto v = eval_expr(expr, env);
      if (v.ok()) {
        env.constants[name] = v.value();
        changed = true;
      }
    }
    if (!changed) break;
  }
  auto v = eval_expr(text, env);
  if (!v.ok() || v->is_float) return std::nullopt;
  return v->i;
}

}  // namespace

std::map<std::string, launch_info> launches_from(const resolved_plan* rp, const std::vector<kernel_signature>& sigs) {
  std::map<std::string, launch_info> out;
  if (!rp) return out;
  for (auto& s : rp->steps) {
    if (s.kind != "kernel" || out.count(s.name)) continue;
    launch_info li;
    for (int d = 0; d < 3; ++d) {
      li.grid[d] = s.grid[d];
      li.block[d] = s.block[d];
    }
    if (const kernel_signature* k = find_kernel(sigs, s.name)) {
      for (size_t i = 0; i < s.args.size() && i < k->params.size(); ++i)
        if (s.args[i].kind == "int" && !k->params[i].name.empty())
          li.int_params[k->params[i].name] = s.args[i].int_value;
    }
    out[s.name] = li;
  }
  return out;
}

plan_step_counts count_plan_steps(const feature_input& in) {
  plan_step_counts c;
  if (in.plan) {
    c.kernels = c.library = 0;
    for (auto& s : in.plan->steps) (s.kind == "library" ? c.library : c.kernels)++;
  } else if (in.resolved) {
    c.kernels = c.library = 0;
    for (auto& s : in.resolved->steps) (s.kind == "library" ? c.library : c.kernels)++;
  }
  return c;
}

void set_launch_geometry(const feature_input& in, std::map<std::string, double>& v) {
  const plan_step* first_plan_kernel = nullptr;
  if (in.plan)
    for (auto& s : in.plan->steps)
      if (s.kind != "library") {
        first_plan_kernel = &s;
        break;
      }
  const resolved_step* first_resolved = nullptr;
  if (in.resolved)
    for (auto& s : in.resolved->steps)
      if (s.kind == "kernel") {
        first_resolved = &s;
        break;
      }
  if (first_resolved) {
    const auto& bl = first_resolved->block;
    const auto& gr = first_resolved->grid;
    v["block_size"] = static_cast<double>(bl[0] * bl[1] * bl[2]);
    v["grid_size"] = static_cast<double>(gr[0] * gr[1] * gr[2]);
  } else if (first_plan_kernel) {
    auto product = [&](const std::vector<std::string>& dims) -> std::optional<int64_t> {
      int64_t p = 1;
      if (dims.empty()) return std::nullopt;
      for (auto& d : dims) {
        auto x = eval_static(d, *in.plan);
        if (!x) return std::nullopt;
        p *= *x;
      }
      return p;
    };
    if (auto bs = product(first_plan_kernel->block)) v["block_size"] = static_cast<double>(*bs);
    if (auto gs = product(first_plan_kernel->grid)) v["grid_size"] = static_cast<double>(*gs);
  }
}

void set_cuda_graph_eligibility(const feature_input& in, std::map<std::string, double>& v) {
  if (!in.plan && !in.resolved) return;
  size_t steps = in.plan ? in.plan->steps.size() : in.resolved->steps.size();
  bool static_shapes = true;
  if (in.resolved)
    for (auto& buf : in.resolved->intermediates)
      if (!buf.shape_known) static_shapes = false;
  v["cuda_graph_eligible"] = steps >= 2 && static_shapes ? 1.0 : 0.0;
}

}  // namespace ks::features
