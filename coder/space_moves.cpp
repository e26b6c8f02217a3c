#include "coder/space_moves.hpp"

#include <algorithm>
#include <cstdlib>

#include "coder/lowering.hpp"
#include "coder/rules/plan/op_table.hpp"

namespace ks {

namespace {

std::string get(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? std::string() : it->second;
}

bool has_stage(const std::map<std::string, std::string>& recipe, const std::string& kind) {
  return get(recipe, "stages").find(kind) != std::string::npos;
}

std::string listing(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// Which lowering parameter a rule's `param` changes, and what must hold of the
// candidate first; `fixed` is set where the method names its target value(s) itself.
struct target_param {
  std::string param;
  std::vector<std::string> fixed;
};

result<target_param> parameter_of(const std::string& prefix, const coder_rule& rule,
                                  const std::map<std::string, std::string>& recipe,
                                  const std::set<std::string>& excluded, const std::string& source, bool explore) {
  const std::string templ = get(recipe, "template");
  const bool rows = has_stage(recipe, "row_reduce");
  const std::string& p = rule.param;
  // Without the space, the kinds of kernel that were known to read these (the row
  // reduction's float4 rows and loads in flight are the space's).
  const bool ew = has_stage(recipe, "elementwise");
  if (!explore && (p == "vector_width" || p == "cache_hint") && !ew)
    return error{prefix + "it has no elementwise kernel"};
  if (!explore && (p == "unroll" || p == "elements_per_thread") && !ew && !has_stage(recipe, "pool"))
    return error{prefix + "it has no elementwise or pool kernel"};
  if (p == "fast_math" || p == "vector_width" || p == "block_size" || p == "cache_hint") return target_param{p, {}};
  if (p == "unroll" || p == "elements_per_thread") return target_param{"elements_per_thread", {}};
  if (p == "rows_per_block" || p == "work_mapping") {
    if (!rows) return error{prefix + "it has no row reduction"};
    if (p == "work_mapping") return target_param{"row_mapping", {"warp"}};
    // rows_per_block 1 is a block per row; more is a warp per row, as many warps.
    target_param t{"row_mapping", {}};
    for (auto& v : rule.values) {
      const std::string m = std::atoi(v.c_str()) == 1 ? "block" : "warp";
      if (std::find(t.fixed.begin(), t.fixed.end(), m) == t.fixed.end()) t.fixed.push_back(m);
    }
    return t;
  }
  if (p == "num_kernels" || p == "fuse_epilogue") {
    // A row reduction's or a scan's feeding chain computed on its loads (where the
    // task has none, the kernels do not change, which the coder finds and says).
    if (get(recipe, "fuse_prologue") == "0" && (rows || has_stage(recipe, "scan")))
      return target_param{"fuse_prologue", {"1"}};
    return error{prefix + "its elementwise chains and epilogues are already fused as far as its templates go"};
  }
  if (p == "grid_stride") return error{prefix + "its elementwise kernels already use grid-stride loops"};
  if (p == "reduction" && rule.values.size() == 1 && rule.values[0] == "warp_shuffle")
    return error{prefix + "its reductions already use warp shuffles"};
  if (p == "row_cache") {
    if (!rows) return error{prefix + "it has no row reduction"};
    if (get(recipe, "row_cache") == "on_chip")
      return error{prefix + "its rows already stay on chip (in registers where they fit, else in shared memory)"};
    target_param t{"row_cache", {}};
    for (auto& v : rule.values)
      if (v == "registers" || v == "shared" || v == "on_chip") t.fixed.push_back(v);
    if (t.fixed.empty()) return error{prefix + "its templates cache rows in registers or shared memory only"};
    return t;
  }
  if (p == "online_softmax") {
    if (!rows) return error{prefix + "it has no row reduction"};
    // The softmax family merges online states (ks_ms_merge); a sum or a norm has none.
    if (source.find("ks_ms_merge(m, s,") == std::string::npos)
      return error{prefix + "it has no softmax, log_softmax or logsumexp"};
    // The softmax family is already online (max and sum from one read); the read the
    // method's rationale still counts, the normalising pass's, goes when the row stays
    // on chip.
    if (get(recipe, "row_cache") != "none" && !get(recipe, "row_cache").empty())
      return error{prefix +
                   "its softmax family is already single-pass (online max and sum), and its rows already "
                   "stay on chip (row_cache " +
                   get(recipe, "row_cache") + ")"};
    if (excluded.count("row_cache=on_chip"))
      return error{prefix +
                   "its softmax family is already single-pass (online max and sum), and its rows cannot "
                   "stay on chip (excluded after a failure)"};
    return target_param{"row_cache", {"on_chip"}};
  }
  if (p == "row_split") {
    if (!rows && !has_stage(recipe, "scan")) return error{prefix + "it has no row reduction or scan"};
    return target_param{"row_split", {}};
  }
  if (p == "moments" || p == "welford") {
    if (!rows) return error{prefix + "it has no row reduction"};
    return target_param{"moments", {"welford"}};
  }
  if (p == "gemm_precision" || p == "matvec_sums") {
    bool product = false;
    for (const std::string& op : rules::ops_of(rules::op_class::product))
      product = product || has_stage(recipe, "library:" + op);
    if (!product) return error{prefix + "it has no library product"};
    return target_param{p, {}};
  }
  if (p == "float_literals")
    return error{prefix + "its kernels already use float literals (0.5f) and f-suffixed math (expf, tanhf)"};
  if (p == "use_library_step")
    return error{prefix + (templ == "library" || templ == "mixed" ? "its products already run as library steps"
                                                                  : "it has no product to hand to a library")};
  return error{prefix + "the rules coder has no parameter '" + p + "'"};
}

// The rule's own values for `param` at the current value `cur`, in its order.
std::vector<std::string> listed_values(const coder_rule& rule, const target_param& t, const std::string& cur) {
  if (!t.fixed.empty()) return t.fixed;
  if (rule.op == "toggle") return {cur == "1" ? "0" : "1"};
  if (rule.op != "multiply") return rule.values;
  std::vector<std::string> out;
  const double c = std::atof(cur.c_str());
  for (auto& v : rule.values) out.push_back(std::to_string(static_cast<int>(c * std::atof(v.c_str()) + 0.5)));
  return out;
}

}  // namespace

result<std::vector<param_change>> rule_changes(const std::string& method, const coder_rule& rule,
                                               const std::map<std::string, std::string>& recipe,
                                               const search_space& space, const std::set<std::string>& excluded,
                                               const std::string& source, bool explore) {
  const std::string prefix = "method " + method + " does not apply to template " + get(recipe, "template") + ": ";
  auto target = parameter_of(prefix, rule, recipe, excluded, source, explore);
  if (!target) return target.error();
  const std::string& param = target->param;
  const std::string cur = get(recipe, param);
  if (explore && !space.has(param))
    return error{prefix + "its kernels do not read " + param +
                 " at these shapes: a change of it changes no kernel of "
                 "this task"};
  std::vector<std::string> order = listed_values(rule, *target, cur);
  // Where the method moves a number one way, every legal value further that way.
  const bool binary = param == "fast_math" || param == "fuse_prologue" || param == "matvec_sums";
  if (explore && numeric_param(param) && !binary && target->fixed.empty() && rule.op != "toggle") {
    const double c = std::atof(cur.c_str());
    bool up = !order.empty(), down = rule.op == "multiply" && !rule.values.empty();
    for (auto& v : rule.values) {
      const double x = std::atof(v.c_str());
      up = up && (rule.op == "multiply" ? x > 1 : x > c);
      down = down && x < 1;
    }
    std::vector<std::string> further;
    for (const std::string& v : space.values(param))
      if ((up && std::atof(v.c_str()) > c) || (down && std::atof(v.c_str()) < c)) further.push_back(v);
    std::sort(further.begin(), further.end(), [&](const std::string& a, const std::string& b) {
      return std::abs(std::atof(a.c_str()) - c) < std::abs(std::atof(b.c_str()) - c);
    });
    order.insert(order.end(), further.begin(), further.end());
  }
  std::vector<param_change> out;
  for (const std::string& v : order) {
    if (v == cur || excluded.count(param + "=" + v)) continue;
    if (explore && !space.allows(param, v)) continue;
    if (!explore) {  // the recipe's own bounds only (block sizes a multiple of 32, ...)
      auto r = recipe;
      r[param] = v;
      if (!from_recipe(r)) continue;
    }
    if (std::find(out.begin(), out.end(), param_change{param, v}) == out.end()) out.push_back({param, v});
    if (!explore) break;
  }
  if (out.empty())
    return error{prefix + param + " is already " + cur +
                 (excluded.empty() ? "" : " (other values excluded after failures)") +
                 (explore ? "; its legal values here: " + listing(space.values(param)) : "")};
  return out;
}

}  // namespace ks
