#include "coder/rules/templates/library.hpp"

#include "coder/rules/plan/op_table.hpp"
#include "coder/rules/templates/split_tf32.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

namespace {

// The constants of addmm (beta, alpha) and conv2d (stride, padding, dilation,
// groups, and the layout it computes in) as the step's attributes.
void library_attrs(const lowering_context& cx, const graph_node& n, const std::string& kind, plan_step& step) {
  auto list_text = [&](size_t k) {
    std::string s = "[";
    for (size_t q = 0; q < cx.val(n.inputs[k]).numbers.size(); ++q)
      s += (q ? ", " : "") + std::to_string(static_cast<int64_t>(cx.val(n.inputs[k]).numbers[q]));
    return s + "]";
  };
  if (kind == "aten::addmm") {
    step.attrs["beta"] = std::to_string(cx.val(n.inputs[3]).numbers.at(0));
    step.attrs["alpha"] = std::to_string(cx.val(n.inputs[4]).numbers.at(0));
  } else if (kind == "aten::conv2d") {
    step.attrs["stride"] = list_text(3);
    step.attrs["padding"] = list_text(4);
    step.attrs["dilation"] = list_text(5);
    step.attrs["groups"] = std::to_string(static_cast<int64_t>(cx.val(n.inputs[6]).numbers.at(0)));
    // A convolution rewritten channels-last (conv_layout.hpp): cuDNN on NHWC input
    // and weight, its result handed on as [N, H, W, C].
    if (base_kind(n.kind) == kConv2dNhwc) {
      step.attrs["memory_format"] = "channels_last";
      step.attrs["result_layout"] = "nhwc";
    }
  }
}

}  // namespace

library_call choose_library_call(const lowering_context& cx, const graph_node& n) {
  library_call call;
  call.op = base_kind(n.kind) == kConv2dNhwc ? "aten::conv2d" : base_kind(n.kind);
  call.tensors = call.op == "aten::addmm" ? 3 : 2;
  if (call.op == "aten::linear" || call.op == "aten::conv2d") call.tensors = cx.val(n.inputs[2]).is_none() ? 2 : 3;
  return call;
}

status emit_library(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  const library_call call = choose_library_call(cx, n);
  const std::string& kind = call.op;
  plan_step step;
  step.kind = "library";
  step.name = kind;
  auto tensor_arg = [&](size_t k) -> result<std::string> {
    auto it = cx.tensor_of.find(n.inputs.at(k));
    if (it == cx.tensor_of.end()) return error{kind + ": operand " + n.inputs[k] + " is not a tensor of the plan"};
    return it->second;
  };
  for (size_t k = 0; k < call.tensors; ++k) {
    auto t = tensor_arg(k);
    if (!t) return error{t.message()};
    step.args.push_back({"tensor", *t, ""});
  }
  library_attrs(cx, n, kind, step);
  // A float32 product bound by arithmetic: on TF32 tensor cores at FP32's accuracy.
  if (const split_tf32_layout split = choose_split_tf32(cx, n, call); split.apply)
    if (auto s = emit_split_tf32(cx, si, n, split, step); !s) return s;
  const std::string& v = n.outputs[0];
  auto it = cx.tensor_of.find(v);
  if (it == cx.tensor_of.end()) return error{kind + ": result " + v + " is used by nothing"};
  step.outputs = {it->second};
  cx.out.plan.steps.push_back(step);
  cx.written.insert(v);
  return {};
}

}  // namespace ks::rules
