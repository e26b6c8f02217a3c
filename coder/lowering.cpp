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

// A row staged in shared memory holds at most this many floats (64 KiB).
constexpr int64_t kSharedRow = 16384;

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

// ---------------------------------------------------------------------------------
// Reductions.

status emit_reduce(lowering_context& cx, size_t si) {
  stage& st = cx.stages[si];
  const graph_node& n = *st.nodes[0];
  auto spec = read_reduction(cx, n, base_kind(n.kind));
  if (!spec) return error{spec.message()};
  const reduction_spec& r = *spec;
  const shaped& in = cx.shapes.at(r.input);
  kernel_params kp;
  std::vector<std::string> outer(in.sym.begin(), in.sym.begin() + r.first),
      red(in.sym.begin() + r.first, in.sym.begin() + r.last), inner(in.sym.begin() + r.last, in.sym.end());
  int64_t inner_n = 1, outer_n = 1;
  for (int64_t d = r.last; d < static_cast<int64_t>(in.shape.size()); ++d) inner_n *= in.shape[d];
  for (int64_t d = 0; d < r.first; ++d) outer_n *= in.shape[d];
  // The length of the reduced span at the task's own shapes (the graph's as fallback):
  // what the row cache and the seeds' row mapping are sized for.
  int64_t graph_len = 1;
  for (int64_t d = r.first; d < r.last; ++d) graph_len *= in.shape[d];
  const int64_t row_len = cx.target_size(red, graph_len);
  const std::string ROWS = kp.int64(product(outer)), C = kp.int64(product(red));
  std::string INNER;
  if (inner_n != 1) INNER = kp.int64(product(inner));
  // How an element of the reduced input is read: straight, or through the fused chain.
  std::string load_code;
  std::map<std::string, std::string> var;
  stage* pro = st.prologue >= 0 ? &cx.stages[st.prologue] : nullptr;
  if (pro) {
    if (auto s = chain_code(cx, *pro, "i", kp, load_code, var, ""); !s) return s;
  }
  std::string X;
  if (!pro) X = kp.tensor_in(cx.tensor_of.at(r.input));
  auto load = [&](const std::string& idx, const std::string& into) {
    if (!pro) return "    const float " + into + " = " + X + "[" + idx + "];\n";
    std::string c = load_code;
    return "    float " + into + ";\n    {\n    const long long i = " + idx + ";\n" + c + "    " + into + " = " + var.at(r.input) + ";\n    }\n";
  };
  std::string W, Bi;
  if (!r.weight.empty()) W = kp.tensor_in(cx.tensor_of.at(r.weight));
  if (!r.bias.empty()) Bi = kp.tensor_in(cx.tensor_of.at(r.bias));
  // The fused epilogue chain, evaluated per element of the row with the reduced
  // value in the register `red`.
  stage* epi = st.epilogue >= 0 ? &cx.stages[st.epilogue] : nullptr;
  std::string epi_code;
  std::vector<std::pair<std::string, std::string>> epi_out;  // value var → parameter
  std::map<std::string, std::string> epi_var;
  if (epi) {
    epi_var[r.output] = "red";
    if (auto s = chain_code(cx, *epi, "i", kp, epi_code, epi_var, "p"); !s) return s;
    for (auto* en : epi->nodes) {
      auto it = cx.tensor_of.find(en->outputs[0]);
      if (it != cx.tensor_of.end()) epi_out.push_back({en->outputs[0], it->second});
    }
    for (auto& [v, t] : epi_out) t = kp.tensor_out(t);
  }
  const std::string OUT = epi ? std::string() : kp.tensor_out(cx.tensor_of.at(r.output));
  acc_text a = acc_of(r);
  const bool warp = cx.p.row_mapping == "warp" && inner_n == 1;
  // A row's elements for this thread: from `lane`, every `width` (a row's kernels).
  const std::string lane = warp ? "lane" : "(int)threadIdx.x", width = warp ? "32" : "(int)blockDim.x";
  int B = cx.p.block_size;
  std::string name = kernel_name(si, r.op);
  std::ostringstream k;
  std::string decl;
  for (size_t q = 0; q < a.state.size(); ++q) decl += "  float " + a.state[q] + " = " + a.identity[q] + ";\n";
  std::string y, prelude;
  if (r.op == "softmax") prelude = "  const float inv = 1.0f / s;\n", y = "KS_EXP(v - m) * inv";
  else if (r.op == "log_softmax") prelude = "  const float lse = m + logf(s);\n", y = "v - lse";
  else if (r.op == "layer_norm") {
    prelude = "  const float mean_d = s1 / (float)" + C + ";\n  const float mean = shift + mean_d;\n";
    prelude += "  const float var = fmaxf(s2 / (float)" + C + " - mean_d * mean_d, 0.0f);\n";
    prelude += "  const float rstd = rsqrtf(var + " + flit(r.eps) + ");\n";
    y = "(v - mean) * rstd";
    if (!W.empty()) y = "(" + y + ") * " + W + "[c]";
    if (!Bi.empty()) y += " + " + Bi + "[c]";
  }
  // The second pass's work for the element `v` at `idx`: the normalised value, stored
  // or handed to the fused epilogue chain.
  auto pass2_body = [&](const std::string& idx, const std::string& yv = "") {
    const std::string& yy = yv.empty() ? y : yv;
    if (!epi) return "    " + OUT + "[" + idx + "] = " + yy + ";\n";
    std::string t = "    const float red = " + yy + ";\n    const long long i = " + idx + ";\n" + epi_code;
    for (auto& [v, param] : epi_out) t += "    " + param + "[i] = " + epi_var.at(v) + ";\n";
    for (auto& [v, param] : epi_out) cx.written.insert(v);
    return t;
  };
  // Pass 2 of a row (inner_n == 1) from `loop` on, read from memory: the normalised
  // value or the epilogue, per element.
  auto pass2_from = [&](const std::string& loop) {
    if (r.normalizes()) return loop + " {\n" + load("base + c", "v") + pass2_body("base + c") + "  }\n";
    std::string t = loop + " {\n    const long long i = base + c;\n" + epi_code;
    for (auto& [v, param] : epi_out) t += "    " + param + "[i] = " + epi_var.at(v) + ";\n";
    for (auto& [v, param] : epi_out) cx.written.insert(v);
    return t + "  }\n";
  };
  auto second_pass = [&](const std::string& loop, const std::string& idx) {
    return prelude + loop + " {\n" + load(idx, "v") + pass2_body(idx) + "  }\n";
  };
  // row_cache: when the row is read a second time (a normalisation's second pass, or
  // an epilogue that reads the reduced tensor again, as in x * rsqrt(mean(x*x)) or
  // x - logsumexp(x)), the row stays on chip and pass 2 reads it there instead of
  // memory.
  // "registers": each thread keeps its part of the row in registers. A
  // normalisation keeps the value it reduces (`rv`, after the fused prologue); an
  // epilogue that reads a row tensor again keeps that tensor's raw values (`rc_P`).
  // K values per thread and array: enough for the whole row at the task's size, at
  // most 32 registers in all; at a larger size the row's rest is read again. Pass 1
  // issues all K loads before it computes anything (loads behind the online
  // softmax's branches would wait one by one), and the arrays are indexed only by
  // unrolled constants, so they stay in registers.
  // "shared" (a block per row): the row's tensors are copied into dynamic shared
  // memory (cp.async: every copy in flight at once, no registers held), at most
  // kSharedRow floats in all (64 KiB: three blocks an SM on an H200, so one row's
  // copies overlap another's math), walked as float4s where rows are 16-byte
  // aligned. A prologue's value replaces the raw element there when nothing reads
  // the raw row again; else pass 2 recomputes it. A longer row's rest is read twice.
  // With a warp per row it means "registers".
  // "on_chip": registers where the row fits them, else shared memory.
  const bool whole_tensor = inner_n == 1 && outer_n == 1 && !r.normalizes() && in.shape.size() > 0;
  std::vector<std::string> row_params;  // tensors pass 1 reads at [i]: loaded first
  std::vector<std::string> cached;      // those pass 2 reads again at [i] (the epilogue)
  bool keep_value = false;              // rv: the reduced value, for a normalisation's pass 2
  int K = 0;
  bool smem = false;  // the row staged in shared memory
  if (cx.p.row_cache != "none" && inner_n == 1 && !whole_tensor && (r.normalizes() || epi)) {
    const std::string pass1 = pro ? load_code : X + "[i]";
    for (auto& [tensor, param] : kp.tensor_param)
      if (param.rfind("in", 0) == 0 && reads_at(pass1, param, "i")) row_params.push_back(param);
    for (auto& P : row_params)
      if (reads_at(epi_code, P, "i")) cached.push_back(P);
    keep_value = r.normalizes();
    // Without a prologue the value is the raw element: one array serves both.
    const int64_t arrays = (keep_value && (pro || cached.empty()) ? 1 : 0) + static_cast<int64_t>(cached.size());
    if (arrays > 0 && arrays <= 2 && row_params.size() <= 2) {
      // Only rows that fit whole: measured on an H200, a row of 16384 kept by 512
      // threads (one block an SM, the loads of the next row not overlapping this
      // one's reduction) ran no faster than reading it twice through float4 loads.
      const int64_t kmax = 32 / arrays;
      const int64_t width = warp ? 32 : B;
      const int64_t need = (row_len + width - 1) / width;
      if ((cx.p.row_cache != "shared" || warp) && need <= kmax) K = static_cast<int>(std::max<int64_t>(need, 1));
      smem = K == 0 && !warp && !row_params.empty() && cx.p.row_cache != "registers";
    } else {
      row_params.clear();
      cached.clear();
      keep_value = false;
    }
  }
  const bool cache = K > 0;
  // Rows read as float4 when they are 16-byte aligned (C % 4 == 0; buffers are
  // aligned), the rest element by element.
  const bool vec_rows = cx.p.vector_width == 4 && !pro && !cache && !smem;
  // Pass 2 reads the cached values where it would read the tensors at [i].
  auto from_cache = [&](std::string code) {
    for (auto& P : row_params) code = replace_reads(code, P, "i", "rc_" + P + "[k]");
    return code;
  };
  const char* lanes4[] = {"x", "y", "z", "w"};
  // The staged part of a row is walked as float4s (q_P: this thread's four
  // elements of tensor P) where rows are 16-byte aligned, else element by element
  // (sh_P[c]); `io` says which, and which of the four.
  struct lane_io {
    bool vec;
    int l;
  };
  bool in_place = false, store_exp = false;  // what the staged part holds after pass 1
  // What pass 2 starts from: the normalisation's constants, or the reduced value for
  // an epilogue; with the softmax's stored exps, each thread's rescaling factor.
  auto pass2_head = [&] {
    std::string t = r.normalizes() ? prelude : "  const float red = " + finish(r, C) + ";\n";
    if (store_exp) t += "  const float kt = KS_EXP(mref - m) * inv;  // this thread's exps, rescaled to the row's\n";
    return t;
  };
  // `code` reading the staged tensors where it read them at [i].
  auto staged_reads = [&](std::string code, const lane_io& io) {
    for (auto& P : row_params)
      code = replace_reads(code, P, "i", io.vec ? "q_" + P + "." + lanes4[io.l] : "sh_" + P + "[c]");
    return code;
  };
  // The reduced value `v` of the element at c: the staged raw element through the
  // prologue, or (`stored`) what pass 1 wrote in its place.
  auto staged_value = [&](const lane_io& io, bool stored) {
    if (!pro || stored) return "      const float v = " + staged_reads(X.empty() ? row_params.front() + "[i]" : X + "[i]", io) + ";\n";
    return "      float v;\n      {\n      const long long i = base + c;\n      (void)i;\n" + staged_reads(load_code, io) +
           "      v = " + var.at(r.input) + ";\n      }\n";
  };
  auto write_back = [&](const std::string& P, const std::string& e, const lane_io& io) {
    return io.vec ? "      w_" + P + "." + lanes4[io.l] + " = " + e + ";\n" : "      sh_" + P + "[c] = " + e + ";\n";
  };
  auto store_out = [&](const std::string& param, const std::string& e, const lane_io& io) {
    return io.vec ? "      o_" + param + "." + lanes4[io.l] + " = " + e + ";\n"
                  : "      " + param + "[base + c] = " + e + ";\n";
  };
  // One loop over the staged part: `body` per element (c, and i = base + c, in
  // scope); `writes` are staged tensors the body writes back (write_back), `outs`
  // the outputs it stores (store_out).
  auto staged = [&](const std::function<std::string(const lane_io&)>& body, const std::vector<std::string>& writes,
                    const std::vector<std::string>& outs) {
    std::string t = "  if (v4) {\n    for (int c4 = " + lane + "; c4 < cc / 4; c4 += " + width + ") {\n";
    for (auto& P : row_params) t += "      const float4 q_" + P + " = reinterpret_cast<const float4*>(sh_" + P + ")[c4];\n";
    for (auto& P : writes) t += "      float4 w_" + P + ";\n";
    for (auto& o : outs) t += "      float4 o_" + o + ";\n";
    for (int l = 0; l < 4; ++l)
      t += "      {\n      const long long c = c4 * 4 + " + std::to_string(l) + ";\n      (void)c;\n" + body({true, l}) +
           "      }\n";
    for (auto& P : writes) t += "      reinterpret_cast<float4*>(sh_" + P + ")[c4] = w_" + P + ";\n";
    for (auto& o : outs) t += "      reinterpret_cast<float4*>(" + o + " + base)[c4] = o_" + o + ";\n";
    t += "    }\n  } else {\n    for (int c = " + lane + "; c < cc; c += " + width + ") {\n" + body({false, 0}) + "    }\n  }\n";
    return t;
  };
  k << "\n// " << r.op << " over " << (inner_n == 1 ? "the last dims" : "a middle dim") << (pro ? ", with the feeding elementwise chain fused into its loads" : "")
    << (inner_n == 1 ? (warp ? "; a warp per row" : "; a block per row")
                     : (!r.normalizes() && !epi ? "; each output's column in slices, a warp per slice and a lane per output"
                                                : "; a thread per output"))
    << (cache ? "; the row kept in registers between the passes" : "")
    << (smem ? "; the row kept in shared memory between the passes" : "") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
  plan_step step;
  step.kind = "kernel";
  step.name = name;
  step.block = {std::to_string(B), "1", "1"};
  if (inner_n == 1 && outer_n == 1 && !r.normalizes() && in.shape.size() > 0) {
    // A reduction of everything: one row would be one block for the whole tensor.
    // Instead, blocks reduce grid-strided slices into partial states, and a second
    // kernel of one block combines them (deterministic: no atomics).
    const std::string P = "PARTS" + std::to_string(si);
    cx.out.plan.constants[P] = "max(1, min(1024, ceil_div(" + paren(product(red)) + ", " + std::to_string(B * 8) + ")))";
    const std::string part = "partial" + std::to_string(si);
    cx.out.plan.scratch.push_back({part, {std::to_string(a.state.size()) + " * " + P}, "float32", "none"});
    // Kernel A writes the partials: rebuild its parameters with the scratch as output.
    kernel_params ka = kp;
    ka.decls.pop_back();
    ka.args.pop_back();
    const std::string PART = ka.tensor_out(part);
    k.str("");
    k << "\n// " << r.op << " of a whole tensor, first pass: each block reduces a grid-strided slice" << (pro ? " (with the feeding chain fused into its loads)" : "") << ".\n";
    k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "_part(" << join(ka.decls, ", ") << ") {\n";
    k << decl;
    if (r.acc == acc_kind::moments) k << load("0", "shift");
    k << "  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < " << C << "; c += (long long)gridDim.x * blockDim.x) {\n"
      << load("c", "v") << "    " << a.update << "\n  }\n";
    k << block_combine(r, a);
    k << "  if (threadIdx.x == 0) {";
    for (size_t q = 0; q < a.state.size(); ++q) k << " " << PART << "[" << q << " * gridDim.x + blockIdx.x] = " << a.state[q] << ";";
    k << " }\n}\n";
    plan_step sa;
    sa.kind = "kernel";
    sa.name = name + "_part";
    sa.grid = {P, "1", "1"};
    sa.block = {std::to_string(B), "1", "1"};
    sa.args = ka.args;
    cx.out.plan.steps.push_back(sa);
    // Kernel B: one block over the partials.
    kernel_params kb;
    const std::string PIN = kb.tensor_in(part);
    const std::string NP = kb.int64(P);
    const std::string CB = kb.int64(product(red));
    const std::string OUTB = kb.tensor_out(cx.tensor_of.at(r.output));
    k << "\n// " << r.op << " of a whole tensor, second pass: one block combines the partial states.\n";
    k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "_final(" << join(kb.decls, ", ") << ") {\n";
    k << decl;
    k << "  for (long long b = threadIdx.x; b < " << NP << "; b += blockDim.x) {\n";
    std::vector<std::string> other;
    for (size_t q = 0; q < a.state.size(); ++q) {
      k << "    const float p_" << a.state[q] << " = " << PIN << "[" << q << " * " << NP << " + b];\n";
      other.push_back("p_" + a.state[q]);
    }
    k << "    " << merge(r, other) << "\n  }\n";
    k << block_combine(r, a);
    k << "  if (threadIdx.x == 0) " << OUTB << "[0] = " << finish(r, CB) << ";\n}\n";
    cx.src += k.str();
    plan_step sb;
    sb.kind = "kernel";
    sb.name = name + "_final";
    sb.grid = {"1", "1", "1"};
    sb.block = {std::to_string(B), "1", "1"};
    sb.args = kb.args;
    cx.out.plan.steps.push_back(sb);
    cx.written.insert(r.output);
    return {};
  }
  if (inner_n == 1) {
    cx.out.longest_row = std::max(cx.out.longest_row, row_len);
    // In a row, i = row * C + c with 0 <= c < C: an operand broadcast along the rows
    // (i % C) is at c, one broadcast along the row (i / C) at row; no 64-bit division
    // per element.
    epi_code = replace_all(replace_all(epi_code, "(i % " + C + ")", "c"), "(i / " + C + ")", "row");
    if (warp) {
      k << "  const int lane = threadIdx.x & 31;\n";
      k << "  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n";
      k << "  if (row >= " << ROWS << ") return;  // the whole warp leaves together\n";
    } else {
      k << "  const long long row = blockIdx.x;\n";
    }
    k << "  const long long base = row * " << C << ";\n";
    k << decl;
    if (r.acc == acc_kind::moments) k << load("base", "shift");
    std::string loop = "  for (long long c = " + lane + "; c < " + C + "; c += " + width + ")";
    const std::string full_loop = loop;
    if (vec_rows) {
      k << "  const long long c4n = (" << C << " & 3) == 0 ? " << C << " / 4 : 0;\n";
      k << "  for (long long c4 = " << lane << "; c4 < c4n; c4 += " << width << ") {\n";
      k << "    const float4 q = reinterpret_cast<const float4*>(" << X << " + base)[c4];\n";
      for (auto* l : lanes4) k << "    { const float v = q." << l << "; " << a.update << " }\n";
      k << "  }\n";
      loop = "  for (long long c = c4n * 4 + " + lane + "; c < " + C + "; c += " + width + ")";
    }
    const std::string cached_c = "    const long long c = " + lane + " + (long long)k * " + width + ";\n";
    const bool online = r.acc == acc_kind::online;
    if (cache) {
      const bool need_rv = keep_value || online;
      for (auto& P : row_params) k << "  float rc_" << P << "[" << K << "];\n";
      if (need_rv) k << "  float rv[" << K << "];\n";
      const std::string each = "#pragma unroll\n  for (int k = 0; k < " + std::to_string(K) + "; ++k) {\n" + cached_c +
                               "    if (c < " + C + ") {\n";
      k << each << "    const long long i = base + c;\n";
      for (auto& P : row_params) k << "    rc_" << P << "[k] = " << P << "[i];\n";
      k << "    }\n  }\n";
      k << each << "    const long long i = base + c;\n    (void)i;\n";
      if (pro) k << from_cache(load_code) << "    const float v = " << var.at(r.input) << ";\n";
      else k << "    const float v = " << from_cache(X + "[i]") << ";\n";
      if (need_rv) k << "    rv[k] = v;\n";
      if (!online) k << "    " << a.update << "\n";
      k << "    }\n  }\n";
      if (online) {
        // The cached part's max, then its sum: no branch per element. A thread whose
        // cached elements are all -inf (a masked row) adds exp(-inf) = 0, not
        // exp(-inf - -inf) = NaN.
        k << each << "    m = fmaxf(m, rv[k]);\n    }\n  }\n";
        k << "  const float mref = m == -KS_INF ? 0.0f : m;\n";
        // The softmax keeps exp(v - the thread's max) in rv, so pass 2 needs no exp
        // (each thread rescales its own values by one factor).
        store_exp = keep_value && r.op == "softmax";
        if (store_exp) k << each << "    rv[k] = KS_EXP(rv[k] - mref);\n    s += rv[k];\n    }\n  }\n";
        else k << each << "    s += KS_EXP(rv[k] - mref);\n    }\n  }\n";
      }
      loop = "  for (long long c = " + lane + " + (long long)" + std::to_string(K) + " * " + width + "; c < " + C +
             "; c += " + width + ")";
    } else if (smem) {
      cx.uses_smem = true;
      const int64_t cap = kSharedRow / static_cast<int64_t>(row_params.size());
      k << "  KS_DYNAMIC_SHARED(ks_row);\n";
      k << "  const int cc = (int)(" << C << " < " << cap << " ? " << C << " : " << cap << ");\n";
      k << "  const bool v4 = (" << C << " & 3) == 0;  // rows 16-byte aligned: float4 copies, loads and stores\n";
      for (size_t q = 0; q < row_params.size(); ++q)
        k << "  float* const sh_" << row_params[q] << " = reinterpret_cast<float*>(ks_row) + " << q << " * cc;\n";
      // Every loop over the staged part gives a thread the same elements as its
      // copies, so a thread reads back only what it copied: waiting for its own
      // copies is enough, no barrier.
      k << "  if (v4) {\n    for (int c4 = " << lane << "; c4 < cc / 4; c4 += " << width << ") {\n";
      for (auto& P : row_params) k << "      ks_cp_async16(sh_" << P << " + c4 * 4, " << P << " + base + c4 * 4);\n";
      k << "    }\n  } else {\n    for (int c = " << lane << "; c < cc; c += " << width << ") {\n";
      for (auto& P : row_params) k << "      ks_cp_async4(sh_" << P << " + c, " << P << " + base + c);\n";
      k << "    }\n  }\n  ks_cp_async_wait();\n";
      // Pass 1 over the staged part. A prologue's value replaces the raw element in
      // place when nothing reads the raw row again, so later loops do not recompute
      // it; the softmax stores exp(v - the thread's max) there too, so pass 2 needs no
      // exp (each thread rescales its own part by one factor).
      const std::string X0 = row_params.front();
      in_place = r.normalizes() && row_params.size() == 1 && !reads_at(epi_code, X0, "i");
      store_exp = in_place && online && r.op == "softmax";
      const bool write_value = in_place && pro;
      k << staged(
          [&](const lane_io& io) {
            return staged_value(io, false) + (write_value ? write_back(X0, "v", io) : "") + "      " +
                   (online ? std::string("m = fmaxf(m, v);") : a.update) + "\n";
          },
          write_value ? std::vector<std::string>{X0} : std::vector<std::string>{}, {});
      if (online) {
        // The staged part's max, then its sum: no branch per element. A thread whose
        // staged elements are all -inf (a masked row) adds exp(-inf) = 0, not
        // exp(-inf - -inf) = NaN.
        k << "  const float mref = m == -KS_INF ? 0.0f : m;\n";
        k << staged(
            [&](const lane_io& io) {
              if (!store_exp) return staged_value(io, in_place) + "      s += KS_EXP(v - mref);\n";
              return staged_value(io, true) + "      const float e = KS_EXP(v - mref);\n      s += e;\n" +
                     write_back(X0, "e", io);
            },
            store_exp ? std::vector<std::string>{X0} : std::vector<std::string>{}, {});
      }
      loop = "  for (long long c = cc + " + lane + "; c < " + C + "; c += " + width + ")";
    }
    k << loop << " {\n" << load("base + c", "v") << "    " << a.update << "\n  }\n";
    k << (warp ? warp_combine(r, a) : block_combine(r, a));
    if (smem) {
      // Pass 2: the staged part from shared memory (float4 stores where rows are
      // 16-byte aligned), then the rest from memory.
      std::vector<std::string> outs;
      if (!epi) outs.push_back(OUT);
      for (auto& [v, param] : epi_out) outs.push_back(param);
      k << pass2_head();
      k << staged(
          [&](const lane_io& io) {
            std::string t;
            if (r.normalizes()) {
              t = staged_value(io, in_place);
              const std::string yv = store_exp ? std::string("v * kt") : y;
              if (!epi) return t + store_out(OUT, yv, io);
              t += "      const float red = " + yv + ";\n";
            }
            t += "      const long long i = base + c;\n      (void)i;\n" + staged_reads(epi_code, io);
            for (auto& [v, param] : epi_out) t += store_out(param, epi_var.at(v), io);
            return t;
          },
          {}, outs);
      k << pass2_from(loop);
    } else if (cache) {
      // Pass 2: the cached part from registers, then the rest from memory.
      k << pass2_head();
      k << "#pragma unroll\n  for (int k = 0; k < " << K << "; ++k) {\n" << cached_c << "    if (c < " << C << ") {\n";
      if (r.normalizes()) {
        k << "    const float v = rv[k];\n" << from_cache(pass2_body("base + c", store_exp ? "v * kt" : ""));
      } else {
        k << "    const long long i = base + c;\n" << from_cache(epi_code);
        for (auto& [v, param] : epi_out) k << "    " << param << "[i] = " << epi_var.at(v) << ";\n";
      }
      k << "    }\n  }\n";
      k << pass2_from(loop);
    } else if (r.normalizes() && epi) {
      k << second_pass(full_loop, "base + c");
    } else if (r.normalizes() && vec_rows) {
      k << prelude;
      k << "  for (long long c4 = " << lane << "; c4 < c4n; c4 += " << width << ") {\n";
      k << "    const float4 q = reinterpret_cast<const float4*>(" << X << " + base)[c4];\n    float4 o4;\n";
      for (int l = 0; l < 4; ++l)
        k << "    { const long long c = c4 * 4 + " << l << "; (void)c; const float v = q." << lanes4[l] << "; o4." << lanes4[l] << " = " << y << "; }\n";
      k << "    reinterpret_cast<float4*>(" << OUT << " + base)[c4] = o4;\n  }\n";
      k << loop << " {\n" << load("base + c", "v") << "    " << OUT << "[base + c] = " << y << ";\n  }\n";
    } else if (r.normalizes()) {
      k << second_pass(loop, "base + c");
    } else if (epi) {
      k << pass2_head() << pass2_from(full_loop);
    } else {
      k << "  if (" << lane << " == 0) " << OUT << "[row] = " << finish(r, C) << ";\n";
    }
    std::string rpb = warp ? std::to_string(B / 32) : "1";
    step.grid = {warp ? "ceil_div(" + paren(product(outer)) + ", " + rpb + ")" : product(outer), "1", "1"};
    if (smem)
      step.shared_mem = std::to_string(4 * row_params.size()) + " * min(" + product(red) + ", " +
                        std::to_string(kSharedRow / static_cast<int64_t>(row_params.size())) + ")";
  } else if (!r.normalizes() && !epi) {
    // A middle dim reduced to one value per output: a thread per output would leave
    // too few loads in flight (outputs are few, columns long). Each output's column
    // is cut into S = B/32 slices instead, one warp per slice with a lane per output
    // (32 consecutive outputs: coalesced along the inner dims), and the slices'
    // states are combined in shared memory, in slice order.
    const int S = B / 32;
    k << "  const int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;\n";
    k << "  const long long t = (long long)blockIdx.x * 32 + lane;\n";
    k << "  const bool live = t < " << ROWS << " * " << INNER << ";\n";
    k << "  const long long o = live ? t / " << INNER << " : 0, j = live ? t % " << INNER << " : 0;\n";
    k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
    k << decl;
    if (r.acc == acc_kind::moments) k << load("base", "shift");
    k << "  if (live) {\n#pragma unroll 4\n  for (long long c = slice; c < " << C << "; c += " << S << ") {\n"
      << load("base + c * " + INNER, "v") << "    " << a.update << "\n  }\n  }\n";
    for (auto& v : a.state) k << "  __shared__ float sh_" << v << "[" << S << "][33];\n";
    for (auto& v : a.state) k << "  sh_" << v << "[slice][lane] = " << v << ";\n";
    k << "  __syncthreads();\n  if (slice != 0 || !live) return;\n";
    k << "  for (int q = 1; q < " << S << "; ++q) {\n";
    std::vector<std::string> other;
    for (auto& v : a.state) {
      k << "    const float p_" << v << " = sh_" << v << "[q][lane];\n";
      other.push_back("p_" + v);
    }
    k << "    " << merge(r, other) << "\n  }\n";
    k << "  " << OUT << "[t] = " << finish(r, C) << ";\n";
    step.grid = {"ceil_div(" + paren(product(outer)) + " * " + paren(product(inner)) + ", 32)", "1", "1"};
  } else {
    k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
    k << "  if (t >= " << ROWS << " * " << INNER << ") return;\n";
    k << "  const long long o = t / " << INNER << ", j = t % " << INNER << ";\n";
    k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
    k << decl;
    if (r.acc == acc_kind::moments) k << load("base", "shift");
    std::string loop = "  for (long long c = 0; c < " + C + "; ++c)";
    k << loop << " {\n" << load("base + c * " + INNER, "v") << "    " << a.update << "\n  }\n";
    if (r.normalizes()) {
      if (r.op == "layer_norm") return error{"layer_norm over a middle dim cannot happen"};
      k << second_pass(loop, "base + c * " + INNER);
    } else {
      k << "  " << OUT << "[t] = " << finish(r, C) << ";\n";
    }
    step.grid = {"ceil_div(" + paren(product(outer)) + " * " + paren(product(inner)) + ", " + std::to_string(B) + ")", "1", "1"};
  }
  k << "}\n";
  if (r.acc == acc_kind::moments && r.op != "layer_norm") {
    // var/std read `shift` too; nothing else to add.
  }
  cx.src += k.str();
  step.args = kp.args;
  cx.out.plan.steps.push_back(step);
  cx.written.insert(r.output);
  (void)outer_n;
  return {};
}

// Scans (cumsum, cumprod) along one dim. The last dim: a warp per row, tiles of
// 128 elements (4 consecutive per lane, a warp scan of the lane totals, the running
// carry added). Another dim: a thread per (outer, inner) position, in order.
status emit_scan(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  const bool sum = base_kind(n.kind) == "aten::cumsum";
  const shaped& in = cx.shapes.at(n.inputs[0]);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  if (rank == 0) return error{n.kind + " of a 0-d tensor is not supported by the rules coder"};
  const int64_t dim = normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers.at(0)), in.shape.size());
  kernel_params kp;
  std::vector<std::string> outer(in.sym.begin(), in.sym.begin() + dim), inner(in.sym.begin() + dim + 1, in.sym.end());
  const std::string ROWS = kp.int64(product(outer)), C = kp.int64(in.sym[dim]);
  const bool last = dim == rank - 1;
  std::string INNER = last ? "1" : kp.int64(product(inner));
  const std::string X = kp.tensor_in(cx.tensor_of.at(n.inputs[0]));
  auto epi = fused_epilogue(cx, si, n.outputs[0], "i", kp);
  if (!epi) return epi.error();
  const bool fused = cx.stages[si].epilogue >= 0;
  const std::string Y = fused ? std::string() : kp.tensor_out(cx.tensor_of.at(n.outputs[0]));
  const std::string id = sum ? "0.0f" : "1.0f";
  // A running sum carries its rounding along the row: two fp32 orders of 4096 normal
  // values differ by ~2e-4 where the sum crosses zero. Summed in double, ours is
  // within an fp32 rounding of the exact running sum (the kernel stays at memory
  // speed: H200 adds doubles at half the float rate). Products keep float.
  const std::string T = sum ? "double" : "float";
  auto op = [&](const std::string& a, const std::string& b) { return sum ? a + " + " + b : a + " * " + b; };
  const int B = cx.p.block_size;
  std::string name = kernel_name(si, sum ? "cumsum" : "cumprod");
  std::ostringstream k;
  k << "\n// " << (sum ? "cumsum" : "cumprod") << " along " << (last ? "the last dim: a warp per row" : "a middle dim: a thread per position")
    << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
  plan_step step;
  step.kind = "kernel";
  step.name = name;
  step.block = {std::to_string(B), "1", "1"};
  if (last) {
    k << "  const int lane = threadIdx.x & 31;\n";
    k << "  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n";
    k << "  if (row >= " << ROWS << ") return;  // the whole warp leaves together\n";
    k << "  const float* xr = " << X << " + row * " << C << ";\n";
    if (!fused) k << "  float* yr = " << Y << " + row * " << C << ";\n";
    k << "  " << T << " carry = " << id << ";\n";
    k << "  for (long long t0 = 0; t0 < " << C << "; t0 += 128) {\n";
    k << "    const long long c0 = t0 + lane * 4;\n    " << T << " v[4];\n";
    k << "#pragma unroll\n    for (int q = 0; q < 4; ++q) v[q] = c0 + q < " << C << " ? xr[c0 + q] : " << id << ";\n";
    k << "#pragma unroll\n    for (int q = 1; q < 4; ++q) v[q] = " << op("v[q - 1]", "v[q]") << ";\n";
    k << "    " << T << " s = v[3];\n";
    k << "    for (int o = 1; o < 32; o <<= 1) {\n      const " << T << " up = __shfl_up_sync(0xffffffffu, s, o);\n      if (lane >= o) s = " << op("up", "s") << ";\n    }\n";
    k << "    " << T << " before = __shfl_up_sync(0xffffffffu, s, 1);\n    if (lane == 0) before = " << id << ";\n";
    k << "    before = " << op("carry", "before") << ";\n";
    if (fused)
      k << "#pragma unroll\n    for (int q = 0; q < 4; ++q)\n      if (c0 + q < " << C << ") {\n    const float res = (float)("
        << op("before", "v[q]") << ");\n    const long long i = row * " << C << " + c0 + q;\n"
        << epi->code << epi->stores << "      }\n";
    else
      k << "#pragma unroll\n    for (int q = 0; q < 4; ++q)\n      if (c0 + q < " << C << ") yr[c0 + q] = (float)(" << op("before", "v[q]") << ");\n";
    k << "    carry = " << op("carry", "__shfl_sync(0xffffffffu, s, 31)") << ";\n  }\n}\n";
    step.grid = {"ceil_div(" + paren(product(outer)) + ", " + std::to_string(B / 32) + ")", "1", "1"};
  } else {
    k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
    k << "  if (t >= " << ROWS << " * " << INNER << ") return;\n";
    k << "  const long long o = t / " << INNER << ", j = t % " << INNER << ";\n";
    k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
    k << "  " << T << " acc = " << id << ";\n";
    k << "  for (long long c = 0; c < " << C << "; ++c) {\n    acc = " << op("acc", X + "[base + c * " + INNER + "]") << ";\n";
    if (fused)
      k << "    const float res = (float)acc;\n    const long long i = base + c * " << INNER << ";\n" << epi->code << epi->stores << "  }\n}\n";
    else
      k << "    " << Y << "[base + c * " << INNER << "] = (float)acc;\n  }\n}\n";
    step.grid = {"ceil_div(" + paren(product(outer)) + " * " + paren(product(inner)) + ", " + std::to_string(B) + ")", "1", "1"};
  }
  cx.src += k.str();
  step.args = kp.args;
  cx.out.plan.steps.push_back(step);
  cx.written.insert(n.outputs[0]);
  return {};
}

// -------------------------------------------------------------------------------
// Pooling over the last two dims (NCHW or CHW): a thread per output element.

status emit_pool(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  auto p = read_pool(cx, n, base_kind(n.kind));
  if (!p) return error{p.message()};
  const shaped& in = cx.shapes.at(n.inputs[0]);
  const shaped& out = cx.shapes.at(n.outputs[0]);
  const size_t r = in.sym.size();
  kernel_params kp;
  const std::string X = kp.tensor_in(cx.tensor_of.at(n.inputs[0]));
  const std::string H = kp.int64(in.sym[r - 2]), W = kp.int64(in.sym[r - 1]);
  const std::string OH = kp.int64(out.sym[r - 2]), OW = kp.int64(out.sym[r - 1]);
  const std::string N = kp.int64(product(out.sym));
  auto epi = fused_epilogue(cx, si, n.outputs[0], "t", kp);
  if (!epi) return epi.error();
  const bool fused = cx.stages[si].epilogue >= 0;
  const std::string Y = fused ? std::string() : kp.tensor_out(cx.tensor_of.at(n.outputs[0]));
  const int B = cx.p.block_size;
  std::string name = kernel_name(si, p->max ? "max_pool2d" : "avg_pool2d");
  std::ostringstream k;
  k << "\n// " << (p->max ? "max" : "avg") << "_pool2d " << p->kernel[0] << "x" << p->kernel[1] << ", stride "
    << p->stride[0] << "x" << p->stride[1] << ", padding " << p->pad[0] << "x" << p->pad[1] << ": a thread per output element"
    << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
  k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
  k << "  if (t >= " << N << ") return;\n";
  // 64-bit division costs a hundred instructions a call, which would make the kernel
  // compute bound: below 2^31 outputs the index splits in 32 bits.
  k << "  long long ow, oh, plane;\n";
  k << "  if (" << N << " <= 0x7fffffffLL) {\n";
  k << "    const unsigned u = (unsigned)t, q = u / (unsigned)" << OW << ";\n";
  k << "    ow = u - q * (unsigned)" << OW << "; oh = q % (unsigned)" << OH << "; plane = q / (unsigned)" << OH << ";\n";
  k << "  } else {\n";
  k << "    ow = t % " << OW << "; oh = (t / " << OW << ") % " << OH << "; plane = t / (" << OW << " * " << OH << ");\n  }\n";
  k << "  const float* xp = " << X << " + plane * " << H << " * " << W << ";\n";
  k << "  const long long h0 = oh * " << p->stride[0] << " - " << p->pad[0] << ", w0 = ow * " << p->stride[1] << " - " << p->pad[1] << ";\n";
  k << "  float acc = " << (p->max ? "-KS_INF" : "0.0f") << ";\n  int count = 0;\n";
  k << "#pragma unroll\n  for (int i = 0; i < " << p->kernel[0] << "; ++i) {\n";
  k << "    const long long h = h0 + i * " << p->dil[0] << ";\n    if (h < 0 || h >= " << H << ") continue;\n";
  k << "#pragma unroll\n    for (int j = 0; j < " << p->kernel[1] << "; ++j) {\n";
  k << "      const long long w = w0 + j * " << p->dil[1] << ";\n      if (w < 0 || w >= " << W << ") continue;\n";
  k << "      const float v = xp[h * " << W << " + w];\n";
  k << (p->max ? "      acc = (v > acc || v != v) ? v : acc;\n" : "      acc += v;\n") << "      ++count;\n    }\n  }\n";
  if (p->max) {
    k << "  const float res = acc;\n";
  } else {
    std::string div;
    if (p->divisor != 0) div = flit(p->divisor);
    else if (p->count_include_pad) {
      // PyTorch counts padding inside the padded input, but not past it.
      k << "  const long long he = min(h0 + " << p->kernel[0] << ", " << H << " + " << p->pad[0] << "), we = min(w0 + "
        << p->kernel[1] << ", " << W << " + " << p->pad[1] << ");\n";
      div = "(float)((he - h0) * (we - w0))";
    } else {
      div = "(float)count";
    }
    k << "  const float res = acc / " << div << ";\n";
  }
  if (fused) k << epi->code << epi->stores;
  else k << "  " << Y << "[t] = res;\n";
  k << "  (void)count;\n}\n";
  cx.src += k.str();
  plan_step step;
  step.kind = "kernel";
  step.name = name;
  step.grid = {"ceil_div(" + paren(product(out.sym)) + ", " + std::to_string(B) + ")", "1", "1"};
  step.block = {std::to_string(B), "1", "1"};
  step.args = kp.args;
  cx.out.plan.steps.push_back(step);
  cx.written.insert(n.outputs[0]);
  return {};
}

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
