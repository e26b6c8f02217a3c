#include "coder/lowering.hpp"

#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "coder/rules/passes/composites.hpp"
#include "coder/rules/passes/conv_bias.hpp"
#include "coder/rules/passes/conv_layout.hpp"
#include "coder/rules/passes/conv_names.hpp"
#include "coder/rules/passes/identities.hpp"
#include "coder/rules/passes/sum_of_product.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "coder/rules/plan/stages.hpp"
#include "coder/rules/templates/row_cache.hpp"
#include "coder/rules/templates/search_space.hpp"
#include "coder/rules/templates/template_table.hpp"
#include "coder/rules/templates/twin_rows.hpp"
#include "coder/rules/text/combine.hpp"
#include "coder/rules/text/device_helpers.hpp"

namespace ks {

std::map<std::string, std::string> to_recipe(const lowering_params& p) {
  std::map<std::string, std::string> r = {{"vector_width", std::to_string(p.vector_width)},
                                          {"row_cache", param::name_of(p.row_cache)},
                                          {"cache_hint", param::name_of(p.cache_hint)},
                                          {"block_size", std::to_string(p.block_size)},
                                          {"elements_per_thread", std::to_string(p.elements_per_thread)},
                                          {"grid_cap", std::to_string(p.grid_cap)},
                                          {"row_mapping", param::name_of(p.row_mapping)},
                                          {"fast_math", p.fast_math ? "1" : "0"},
                                          {"fuse_prologue", p.fuse_prologue ? "1" : "0"},
                                          {"row_split", std::to_string(p.row_split)},
                                          {"moments", param::name_of(p.moments)}};
  // Only when not the default: recipes of tasks without a convolution stay as they were.
  if (p.conv_layout != param::conv_layout::nchw) r["conv_layout"] = param::name_of(p.conv_layout);
  if (p.gemm_precision != param::gemm_precision::fp32) r["gemm_precision"] = param::name_of(p.gemm_precision);
  if (p.matvec_sums) r["matvec_sums"] = "1";
  if (p.library_reductions) r["library_reductions"] = "1";
  return r;
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
  int fast = p.fast_math, fuse = p.fuse_prologue, matvec = p.matvec_sums, lib_red = p.library_reductions;
  for (auto s : {integer("vector_width", p.vector_width, 1, 4), integer("block_size", p.block_size, 32, 1024),
                 integer("elements_per_thread", p.elements_per_thread, 1, 16),
                 integer("grid_cap", p.grid_cap, 1, 1 << 20), integer("fast_math", fast, 0, 1),
                 integer("fuse_prologue", fuse, 0, 1), integer("row_split", p.row_split, 0, 16),
                 integer("matvec_sums", matvec, 0, 1), integer("library_reductions", lib_red, 0, 1)})
    if (!s) return error{s.message()};
  if (p.vector_width == 3) return error{"recipe: vector_width = 3: expected 1, 2 or 4"};
  if (p.block_size % 32)
    return error{"recipe: block_size = " + std::to_string(p.block_size) + ": expected a multiple of 32"};
  p.fast_math = fast;
  p.fuse_prologue = fuse;
  p.matvec_sums = matvec;
  p.library_reductions = lib_red;
  // The named choices, each read through its enum's name table (lowering_params.hpp).
  auto choice = [&](const char* key, auto& out) -> status {
    using E = std::decay_t<decltype(out)>;
    auto it = recipe.find(key);
    if (it == recipe.end()) return {};
    auto v = param::parse_param<E>(it->second);
    if (!v)
      return error{"recipe: " + std::string(key) + " = '" + it->second + "': expected " + param::expected_names<E>()};
    out = *v;
    return {};
  };
  for (auto s : {choice("row_mapping", p.row_mapping), choice("row_cache", p.row_cache), choice("moments", p.moments),
                 choice("conv_layout", p.conv_layout), choice("gemm_precision", p.gemm_precision),
                 choice("cache_hint", p.cache_hint)})
    if (!s) return error{s.message()};
  return p;
}

namespace {

using namespace rules;

// The head of every source; then coder/rules/cuda/common.cuh: KS_INF, and the merge of
// two online max-and-sum states that the softmax and logsumexp combines call
// (combine.cpp).
const char* kHeader = "// Written by KernelSkill's rules coder from the reference's TorchScript graph.\n";

// The stages planned (and twin rows paired: that reads the row template's layout, so
// it runs here, above plan/), each written by its template (template_table.hpp), then
// the source's header.
result<lowered_kernel_set> run(lowering_context& cx) {
  if (auto s = plan_stages(cx); !s) return error{s.message()};
  plan_twin_rows(cx);
  std::set<std::string> kinds;
  for (size_t i = 0; i < cx.stages.size(); ++i) {
    const stage& st = cx.stages[i];
    if (st.emitted_elsewhere()) continue;
    const template_row* t = template_for(st);
    if (!t) return error{"stage " + std::to_string(i) + " is taken by no template"};
    t->space(cx, i, cx.out.space);  // before the stage is emitted, as emit sees it
    status s = t->emit(cx, i);
    cx.out.stages.push_back(t->name(cx, i));
    kinds.insert(t->family);
    if (!s) return error{s.message()};
  }
  for (auto& [p, v] : cx.same_memory)
    if (cx.written.count(v)) cx.written.insert(p);
  for (const std::string& o : cx.outputs)
    if (!cx.written.count(o))
      return error{"graph output " + o + " is not computed by any kernel (an input returned as is?)"};
  if (kinds.count("library"))
    cx.out.template_name = "library";
  else if (kinds.size() == 1)
    cx.out.template_name = *kinds.begin();
  else
    cx.out.template_name = "mixed";
  if (kinds.count("library") && kinds.count("row_reduce")) cx.out.template_name = "mixed";
  // A fallback alone is one library call; beside kernels it makes the candidate mixed.
  if (kinds.count("fallback")) cx.out.template_name = kinds.size() == 1 ? "library" : "mixed";
  // Fast math only where a kernel calls what it changes (recorded by what wrote the
  // call: lowering_context::uses_fast_math): otherwise the same source.
  global_space(cx, cx.src, cx.out.space);
  std::string source(cx.p.fast_math && cx.uses_fast_math ? cuda::fast_math_cuh() : cuda::precise_math_cuh());
  source += kHeader;
  source += cuda::common_cuh();
  if (cx.uses_welford) source += welford_helpers();
  if (cx.uses_smem) source += shared_row_helpers();
  if (cx.uses_cluster) source += cluster_helpers();
  cx.out.source = source + cx.src;
  return cx.out;
}

}  // namespace

result<lowered_kernel_set> lower_graph(const task_graph& graph, const lowering_params& params,
                                       const target_shapes& target, const lowering_device& device) {
  // Dropouts that draw nothing, read through (their readers read their input).
  // Losses ATen runs in one call, written out into ops the templates fuse.
  // A convolution's bias added in the kernel that reads its result.
  // A sum or mean over a product's outputs as a matrix-vector product.
  // A convolution computed channels-last, read so by the kernels after it.
  // (First, a traced convolution under its own name.)
  std::vector<std::string> rewrites;
  const task_graph split =
      rules::split_conv_bias(rules::expand_composites(rules::drop_identities(rules::name_convolutions(graph))));
  const task_graph composed = params.conv_layout == param::conv_layout::channels_last
                                  ? rules::channels_last_convolutions(split, rewrites)
                                  : split;
  const int nhwc = static_cast<int>(rewrites.size());
  const task_graph expanded = params.matvec_sums ? rules::sum_of_products(composed, rewrites) : composed;
  lowering_context cx(expanded, params, target, device);
  cx.out.rewrites = rewrites;
  cx.out.nhwc_convolutions = nhwc;
  cx.out.matvec_sums = static_cast<int>(rewrites.size()) - nhwc;
  // The graph rewrites a parameter turns on, where they apply at all.
  auto rewrites_some = [](auto rewrite, const task_graph& g) {
    std::vector<std::string> would;
    rewrite(g, would);
    return !would.empty();
  };
  if (nhwc > 0 || rewrites_some(rules::channels_last_convolutions, split))
    cx.out.space.allow("conv_layout", {"nchw", "channels_last"});
  if (cx.out.matvec_sums > 0 || rewrites_some(rules::sum_of_products, composed))
    cx.out.space.allow("matvec_sums", {"0", "1"});
  // A template that meets a graph it did not expect must give an error, never end the
  // caller (an agent) with an exception: the lowering's own lookups throw on a missing
  // tensor (e.g. an epilogue fused after a reduction over every dim).
  try {
    auto r = run(cx);
    if (!r) return error{"task \"" + graph.task + "\": " + r.message()};
    return r;
  } catch (const std::exception& e) {
    return error{"task \"" + graph.task +
                 "\": the rules coder cannot lower this graph (internal: " + std::string(e.what()) + ")"};
  }
}

}  // namespace ks
