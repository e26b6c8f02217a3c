#include "coder/rules/templates/fallback.hpp"

#include <cstdio>
#include <limits>

#include "coder/rules/plan/op_table.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

result<std::string> attr_text(const graph_value& v) {
  auto number = [&](double x, bool integer) {
    // A graph's numbers are doubles: an int at the ends of int64's range (a slice's
    // end of INT64_MAX, `x[:, :k]` on dim 0) is 2^63 there, which no int64 holds; it
    // is the end it was (a plain cast gave INT64_MIN, an empty slice).
    if (integer && x >= 0x1p63) return std::to_string(std::numeric_limits<int64_t>::max());
    if (integer && x < -0x1p63) return std::to_string(std::numeric_limits<int64_t>::min());
    if (integer) return std::to_string(static_cast<int64_t>(x));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return std::string(buf);
  };
  if (v.is_none()) return std::string("None");
  if (v.type == "bool") return std::string(v.numbers.at(0) != 0 ? "True" : "False");
  if (v.type == "int" || v.type == "float") return number(v.numbers.at(0), v.type == "int");
  if (v.type == "str") return v.text;
  if (v.type == "int[]" || v.type == "float[]" || v.type == "bool[]") {
    std::string s = "[";
    for (size_t i = 0; i < v.numbers.size(); ++i) {
      s += i ? ", " : "";
      s += v.type == "bool[]" ? (v.numbers[i] != 0 ? "True" : "False") : number(v.numbers[i], v.type == "int[]");
    }
    return s + "]";
  }
  return error{"a " + v.type + " cannot be written as an attribute"};
}

result<fallback_call> choose_fallback_call(const stage& st) {
  const graph_node& n = *st.nodes[0];
  auto sch = parse_op_schema(n.schema);
  if (!sch) return error{n.kind + ": " + sch.message()};
  return fallback_call{*sch, st.as_kind<library_stage>().fallback};
}

status emit_fallback(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  auto call = choose_fallback_call(cx.stages[si]);
  if (!call) return error{call.message()};
  const op_schema* sch = &call->schema;
  const std::string where =
      n.kind + " (value " + n.outputs.at(0) + "), run as a library step because " + call->why + ": ";
  plan_step step;
  step.kind = "library";
  step.name = sch->qualified();
  step.attrs["schema"] = n.schema;
  // A convolution the layout pass moved to channels-last: its operands passed so, its
  // result handed on as [N, H, W, C] or [N, D, H, W, C] (gpu/dispatch_runtime.hpp).
  if (runs_channels_last(base_kind(n.kind))) step.attrs["run_layout"] = "channels_last";
  auto tensor = [&](const std::string& id) -> result<std::string> {
    auto it = cx.tensor_of.find(id);
    if (it == cx.tensor_of.end()) return error{where + "its operand " + id + " is not a tensor of the plan"};
    return it->second;
  };
  for (size_t k = 0; k < sch->args.size(); ++k) {
    const op_schema_arg& a = sch->args[k];
    const std::string& id = n.inputs[k];
    const graph_value& v = cx.val(id);
    if (v.is_tensor()) {
      auto t = tensor(id);
      if (!t) return t.error();
      step.args.push_back({"tensor", *t, ""});
      continue;
    }
    if (a.is_tensor_list() && !v.is_none()) {
      auto it = cx.list_of.find(id);
      if (it == cx.list_of.end())
        return error{where + "its argument " + a.name + " is a tensor list not built in the graph"};
      for (auto& e : it->second) {
        auto t = tensor(e);
        if (!t) return t.error();
        step.args.push_back({"tensor", *t, ""});
      }
      step.attrs[a.name] = std::to_string(it->second.size()) + " tensors";
      continue;
    }
    if (v.type == "Device") {
      step.attrs[a.name] = "inputs";  // the device the plan runs on
      continue;
    }
    if (!v.constant && !v.is_none())
      return error{where + "its argument " + a.name + " (value " + id +
                   ") is computed at run time; an attribute is fixed text"};
    auto text = attr_text(v);
    if (!text) return error{where + "argument " + a.name + ": " + text.message()};
    step.attrs[a.name] = *text;
  }
  size_t last = 0;
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (cx.tensor_of.count(n.outputs[k])) last = k + 1;
  for (size_t k = 0; k < last; ++k) {
    const std::string& v = n.outputs[k];
    auto it = cx.tensor_of.find(v);
    // A result nothing reads still needs a name to keep the others in place.
    step.outputs.push_back(it != cx.tensor_of.end() ? it->second : "unused_" + ident(v).substr(1));
    cx.written.insert(v);
  }
  cx.out.plan.steps.push_back(step);
  return {};
}

}  // namespace ks::rules
