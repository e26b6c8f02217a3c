#include "coder/rules/plan/lowering_context.hpp"

#include "coder/rules/plan/expr_text.hpp"
#include "plan/shape_expr.hpp"

namespace ks::rules {

int stage::prologue() const {
  if (auto* r = get<reduce_stage>()) return r->prologue;
  if (auto* s = get<scan_stage>()) return s->prologue;
  return -1;
}

int stage::epilogue() const {
  if (auto* r = get<reduce_stage>()) return r->epilogue;
  if (auto* p = get<pool_stage>()) return p->epilogue;
  if (auto* s = get<scan_stage>()) return s->epilogue;
  return -1;
}

bool stage::emitted_elsewhere() const {
  if (auto* e = get<elementwise_stage>()) return e->fused_away || e->is_epilogue;
  if (auto* r = get<reduce_stage>()) return r->twin_of >= 0;
  if (auto* l = get<library_stage>()) return l->absorbed;
  return false;
}

void lowering_context::add_kernel_step(const std::string& name, std::vector<std::string> grid,
                                       std::vector<std::string> block, std::vector<plan_arg> args) {
  plan_step step;
  step.kind = "kernel";
  step.name = name;
  step.grid = std::move(grid);
  step.block = std::move(block);
  step.args = std::move(args);
  out.plan.steps.push_back(std::move(step));
}

int64_t lowering_context::target_size(const std::vector<std::string>& dims, int64_t fallback) const {
  if (target.empty()) return fallback;
  expr_env env;
  env.tensors = target;
  auto v = eval_expr(product(dims), env);
  if (!v || v->is_float || v->i <= 0) return fallback;
  return v->i;
}

}  // namespace ks::rules
