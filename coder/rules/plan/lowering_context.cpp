#include "coder/rules/plan/lowering_context.hpp"

#include "coder/rules/text/kernel_text.hpp"
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

int64_t lowering_context::target_size(const std::vector<std::string>& dims, int64_t fallback) const {
  if (target.empty()) return fallback;
  expr_env env;
  env.tensors = target;
  auto v = eval_expr(product(dims), env);
  if (!v || v->is_float || v->i <= 0) return fallback;
  return v->i;
}

}  // namespace ks::rules
