#include "coder/rules/lowering_context.hpp"

#include "coder/rules/kernel_text.hpp"
#include "plan/shape_expr.hpp"

namespace ks::rules {

int64_t lowering_context::target_size(const std::vector<std::string>& dims, int64_t fallback) const {
  if (target.empty()) return fallback;
  expr_env env;
  env.tensors = target;
  auto v = eval_expr(product(dims), env);
  if (!v || v->is_float || v->i <= 0) return fallback;
  return v->i;
}

}  // namespace ks::rules
