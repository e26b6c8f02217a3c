#include "coder/lowering.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>

#include "plan/op_schema.hpp"
#include "coder/rules/chain.hpp"
#include "coder/rules/combine.hpp"
#include "coder/rules/elementwise.hpp"
#include "coder/rules/kernel_text.hpp"
#include "coder/rules/lowering_context.hpp"
#include "coder/rules/op_specs.hpp"
#include "coder/rules/pool.hpp"
#include "coder/rules/row_reduce.hpp"
#include "coder/rules/scan.hpp"
#include "coder/rules/stages.hpp"

namespace ks {

std::map<std::string, std::string> to_recipe(const lowering_params& p) {
  return {{"vector_width", std::to_string(p.vector_width)},
          {"row_cache", p.row_cache},
          {"cache_hint", p.cache_hint},
          {"block_size", std::to_string(p.block_size)},
          {"elements_per_thread", std::to_string(p.elements_per_thread)},
          {"grid_cap", std::to_string(p.grid_cap)},
          {"row_mapping", p.row_mapping},
          {"fast_math", p.fast_math ? "1" : "0"},
          {"fuse_prologue", p.fuse_prologue ? "1" : "0"}};
}

result<lowering_params> from_recipe(const std::map<std::string, std::string>& recipe) {
  lowering_params p;
  auto integer = [&](const char* key, int& out, int lo, int hi) -> status {
    auto it = recipe.find(key);
    if (it == recipe.end()) return {};
    try {
      size_t used = 0;
      int v = std::stoi(it->second, &used);
      if (used != it->second.size() || v < lo || v > hi) throw std::out_of_range("");
      out = v;
      return {};
    } catch (const std::exception&) {
      return error{"recipe: " + std::string(key) + " = '" + it->second + "': expected an integer in [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]"};
    }
  };
  int fast = p.fast_math, fuse = p.fuse_prologue;
  for (auto s : {integer("vector_width", p.vector_width, 1, 4), integer("block_size", p.block_size, 32, 1024),
                 integer("elements_per_thread", p.elements_per_thread, 1, 16),
                 integer("grid_cap", p.grid_cap, 1, 1 << 20), integer("fast_math", fast, 0, 1),
                 integer("fuse_prologue", fuse, 0, 1)})
    if (!s) return error{s.message()};
  if (p.vector_width == 3) return error{"recipe: vector_width = 3: expected 1, 2 or 4"};
  if (p.block_size % 32) return error{"recipe: block_size = " + std::to_string(p.block_size) + ": expected a multiple of 32"};
  p.fast_math = fast;
  p.fuse_prologue = fuse;
  if (auto it = recipe.find("row_mapping"); it != recipe.end()) {
    if (it->second != "block" && it->second != "warp")
      return error{"recipe: row_mapping = '" + it->second + "': expected block or warp"};
    p.row_mapping = it->second;
  }
  if (auto it = recipe.find("row_cache"); it != recipe.end()) {
    if (it->second != "none" && it->second != "registers" && it->second != "shared" && it->second != "on_chip")
      return error{"recipe: row_cache = '" + it->second + "': expected none, registers, shared or on_chip"};
    p.row_cache = it->second;
  }
  if (auto it = recipe.find("cache_hint"); it != recipe.end()) {
    if (it->second != "none" && it->second != "streaming" && it->second != "readonly")
      return error{"recipe: cache_hint = '" + it->second + "': expected none, streaming or readonly"};
    p.cache_hint = it->second;
  }
  return p;
}

namespace {

using namespace rules;

const char* kHeader = R"(// Written by KernelSkill's rules coder from the reference's TorchScript graph.
#define KS_INF __int_as_float(0x7f800000)

__device__ __forceinline__ void ks_ms_merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -KS_INF) return;  // both empty: exp(-inf - -inf) would be NaN
  s = s * KS_EXP(m - M) + s2 * KS_EXP(m2 - M);
  m = M;
}
)";

// Dynamic shared memory and the copies into it. cp.async (sm_80 on) keeps every copy
// in flight without holding a register; older GPUs copy through registers. A host
// build of the source (the tests' emulator) defines KS_DYNAMIC_SHARED itself.
const char* kSharedHelpers = R"(
#ifndef KS_DYNAMIC_SHARED
#define KS_DYNAMIC_SHARED(name) extern __shared__ float4 name[]
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ void ks_cp_async16(float* d, const float* s) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(d)), "l"(s));
}
__device__ __forceinline__ void ks_cp_async4(float* d, const float* s) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((unsigned)__cvta_generic_to_shared(d)), "l"(s));
}
__device__ __forceinline__ void ks_cp_async_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
#else
__device__ __forceinline__ void ks_cp_async16(float* d, const float* s) {
  *reinterpret_cast<float4*>(d) = *reinterpret_cast<const float4*>(s);
}
__device__ __forceinline__ void ks_cp_async4(float* d, const float* s) { *d = *s; }
__device__ __forceinline__ void ks_cp_async_wait() {}
#endif
)";

// A constant argument as the attribute text of a library step.
result<std::string> attr_text(const graph_value& v) {
  auto number = [&](double x, bool integer) {
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

// A fallback: the op through ATen's dispatcher by its schema. Tensors are the step's
// positional args (in the schema's order); every other argument is an attribute
// named as in the schema, with the graph's constant as text.
status emit_fallback(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  auto sch = parse_op_schema(n.schema);
  if (!sch) return error{n.kind + ": " + sch.message()};
  const std::string where = n.kind + " (value " + n.outputs.at(0) + "), run as a library step because " +
                            cx.stages[si].fallback + ": ";
  plan_step step;
  step.kind = "library";
  step.name = sch->qualified();
  step.attrs["schema"] = n.schema;
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
      if (it == cx.list_of.end()) return error{where + "its argument " + a.name + " is a tensor list not built in the graph"};
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
      return error{where + "its argument " + a.name + " (value " + id + ") is computed at run time; an attribute is fixed text"};
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

status emit_library(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  std::string kind = base_kind(n.kind);
  plan_step step;
  step.kind = "library";
  step.name = kind;
  auto tensor_arg = [&](size_t k) -> result<std::string> {
    auto it = cx.tensor_of.find(n.inputs.at(k));
    if (it == cx.tensor_of.end()) return error{kind + ": operand " + n.inputs[k] + " is not a tensor of the plan"};
    return it->second;
  };
  size_t tensors = kind == "aten::addmm" ? 3 : 2;
  if (kind == "aten::linear" || kind == "aten::conv2d") tensors = cx.val(n.inputs[2]).is_none() ? 2 : 3;
  for (size_t k = 0; k < tensors; ++k) {
    auto t = tensor_arg(k);
    if (!t) return error{t.message()};
    step.args.push_back({"tensor", *t, ""});
  }
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
  }
  const std::string& v = n.outputs[0];
  auto it = cx.tensor_of.find(v);
  if (it == cx.tensor_of.end()) return error{kind + ": result " + v + " is used by nothing"};
  step.outputs = {it->second};
  cx.out.plan.steps.push_back(step);
  cx.written.insert(v);
  return {};
}

// The stages planned, each written by its template, then the source's header.
result<lowered_kernel_set> run(lowering_context& cx) {
  if (auto s = plan_stages(cx); !s) return error{s.message()};
  std::set<std::string> kinds;
  for (size_t i = 0; i < cx.stages.size(); ++i) {
    stage& st = cx.stages[i];
    if (st.fused_away || st.is_epilogue) continue;
    status s;
    if (st.kind == stage::elementwise) {
      s = emit_elementwise(cx, i);
      cx.out.stages.push_back("elementwise");
      kinds.insert("elementwise");
    } else if (st.kind == stage::reduce) {
      s = emit_reduce(cx, i);
      cx.out.stages.push_back(std::string("row_reduce") + (st.prologue >= 0 ? "+prologue" : "") +
                            (st.epilogue >= 0 ? "+epilogue" : ""));
      kinds.insert("row_reduce");
    } else if (st.kind == stage::scan) {
      s = emit_scan(cx, i);
      cx.out.stages.push_back(st.epilogue >= 0 ? "scan+epilogue" : "scan");
      kinds.insert("scan");
    } else if (st.kind == stage::pool) {
      s = emit_pool(cx, i);
      cx.out.stages.push_back(st.epilogue >= 0 ? "pool+epilogue" : "pool");
      kinds.insert("pool");
    } else if (!st.fallback.empty()) {
      s = emit_fallback(cx, i);
      cx.out.stages.push_back("fallback:" + base_kind(st.nodes[0]->kind));
      cx.out.fallback.push_back(base_kind(st.nodes[0]->kind) + ": " + st.fallback);
      kinds.insert("fallback");
    } else {
      s = emit_library(cx, i);
      cx.out.stages.push_back("library:" + base_kind(st.nodes[0]->kind));
      kinds.insert("library");
    }
    if (!s) return error{s.message()};
  }
  for (const std::string& o : cx.outputs)
    if (!cx.written.count(o))
      return error{"graph output " + o + " is not computed by any kernel (an input returned as is?)"};
  if (kinds.count("library")) cx.out.template_name = "library";
  else if (kinds.size() == 1) cx.out.template_name = *kinds.begin();
  else cx.out.template_name = "mixed";
  if (kinds.count("library") && kinds.count("row_reduce")) cx.out.template_name = "mixed";
  // A fallback alone is one library call; beside kernels it makes the candidate mixed.
  if (kinds.count("fallback")) cx.out.template_name = kinds.size() == 1 ? "library" : "mixed";
  std::string fast = cx.p.fast_math ? "#define KS_EXP __expf\n#define KS_DIV(a, b) __fdividef((a), (b))\n"
                                  : "#define KS_EXP expf\n#define KS_DIV(a, b) ((a) / (b))\n";
  cx.out.source = fast + kHeader + (cx.uses_smem ? kSharedHelpers : "") + cx.src;
  return cx.out;
}

}  // namespace

result<lowered_kernel_set> lower_graph(const task_graph& graph, const lowering_params& params,
                                       const target_shapes& target) {
  lowering_context cx(graph, params, target);
  auto r = run(cx);
  if (!r) return error{"task \"" + graph.task + "\": " + r.message()};
  return r;
}

}  // namespace ks
