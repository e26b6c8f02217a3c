#include "coder/rules/pool.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "coder/rules/chain.hpp"
#include "coder/rules/kernel_text.hpp"

namespace ks::rules {

result<pool_layout> choose_pool_layout(const lowering_context& cx, const graph_node& n) {
  auto p = read_pool(cx, n, base_kind(n.kind));
  if (!p) return error{p.message()};
  pool_layout lay;
  lay.window = *p;
  lay.block = cx.p.block_size;
  // Only where the windows overlap along the last dim (a stride under the window's
  // extent): then the run's outputs share inputs. Disjoint windows share none, and a
  // run only spreads a warp's loads V times wider (KernelBench's 45_Average_Pooling_2D,
  // 11x11 with stride 11: 1.02x to 0.81x of eager on the H200).
  const int L = p->dims - 1;
  if (cx.p.pool_layout == "strided") {
    const shaped& out = cx.shapes.at(n.outputs[0]);
    const int64_t line = cx.target_size({out.sym.back()}, out.shape.back());
    if (line >= lay.block) {
      lay.strided = true;
      lay.per_thread = std::clamp(cx.p.elements_per_thread, 1, 8);
      while (lay.per_thread > 1 && int64_t{lay.block} * lay.per_thread > line) lay.per_thread /= 2;
      return lay;
    }
  }
  const bool overlap = p->stride[L] < (p->kernel[L] - 1) * p->dil[L] + 1;
  lay.per_thread = overlap ? std::max(1, cx.p.elements_per_thread) : 1;
  while (lay.per_thread > 1 && lay.span() > 64) lay.per_thread /= 2;
  return lay;
}

int64_t pool_layout::span() const {
  const int q = window.dims - 1;
  return (per_thread - 1) * window.stride[q] + (window.kernel[q] - 1) * window.dil[q] + 1;
}

namespace {

// The loops over the taps of window dims [0, n), outermost first: each tap's input
// position in its dim and the bounds check that skips padding.
// `last_base` names the last dim's window start where it is not <name>0.
void tap_loops(std::ostringstream& k, const pool_spec& p, const std::vector<std::string>& nm,
               const std::vector<std::string>& I, int n, const std::string& last_base = "", int indent = 2) {
  static const char* tap_names[] = {"i", "j", "l"};
  for (int q = 0; q < n; ++q) {
    const std::string ind(indent + 2 * q, ' ');
    const std::string base = q == p.dims - 1 && !last_base.empty() ? last_base : nm[q] + "0";
    k << "#pragma unroll\n" << ind << "for (int " << tap_names[q] << " = 0; " << tap_names[q] << " < " << p.kernel[q] << "; ++"
      << tap_names[q] << ") {\n";
    k << ind << "  const long long " << nm[q] << " = " << base << " + " << tap_names[q] << " * " << p.dil[q] << ";\n";
    k << ind << "  if (" << nm[q] << " < 0 || " << nm[q] << " >= " << I[q] << ") continue;\n";
  }
}

void close_tap_loops(std::ostringstream& k, int n, int indent = 2) {
  for (int q = n - 1; q >= 0; --q) k << std::string(indent + 2 * q, ' ') << "}\n";
}

// count_include_pad's window ends in dims [0, n): PyTorch counts padding inside the
// padded input, but not past it.
void padded_ends(std::ostringstream& k, const pool_spec& p, const std::vector<std::string>& nm,
                 const std::vector<std::string>& I, int n) {
  k << "  const long long";
  for (int q = 0; q < n; ++q)
    k << (q ? ", " : " ") << nm[q] << "e = min(" << nm[q] << "0 + " << p.kernel[q] << ", " << I[q] << " + " << p.pad[q] << ")";
  k << ";\n";
}

// The end of a kernel whose thread holds V results acc[v] (and their counts) of the
// outputs o<last> + v * gap of line `line` along the last dim: each one's divisor, its
// epilogue and its store at its flat index tv, in order, up to the line's end.
void write_results(std::ostringstream& k, const pool_spec& p, const std::vector<std::string>& nm,
                   const std::vector<std::string>& I, const std::string& O_last, int V, int gap, const std::string& line,
                   const epilogue_code* epi, const std::string& Y) {
  const int L = p.dims - 1;
  const std::string w = nm[L];
  // v outputs, and their first inputs, past the thread's first.
  const auto times = [](int64_t step) { return step == 1 ? std::string("v") : "v * " + std::to_string(step); };
  if (!p.max && p.divisor == 0 && p.count_include_pad && L > 0) padded_ends(k, p, nm, I, L);
  k << "  const long long tv0 = " << line << " * " << O_last << " + o" << w << ";\n";
  k << "#pragma unroll\n  for (int v = 0; v < " << V << "; ++v) {\n";
  k << "    if (o" << w << " + " << times(gap) << " >= " << O_last << ") break;\n";
  k << "    const long long tv = tv0 + " << times(gap) << ";\n";
  if (p.max) {
    k << "    const float res = acc[v];\n";
  } else if (p.divisor != 0) {
    k << "    const float res = acc[v] / " << flit(p.divisor) << ";\n";
  } else if (p.count_include_pad) {
    // PyTorch counts padding inside the padded input, but not past it.
    k << "    const long long " << w << "0v = " << w << "0 + v * " << p.stride[L] * gap << ", " << w << "ev = min(" << w
      << "0v + " << p.kernel[L] << ", " << I[L] << " + " << p.pad[L] << ");\n";
    std::string div = "(float)(";
    for (int q = 0; q < L; ++q) div += "(" + nm[q] + "e - " + nm[q] + "0) * ";
    div += "(" + w + "ev - " + w + "0v))";
    k << "    const float res = acc[v] / " << div << ";\n";
  } else {
    k << "    const float res = acc[v] / (float)count[v];\n";
  }
  if (epi) k << epi->code << epi->stores;
  else k << "    " << Y << "[tv] = res;\n";
  k << "  }\n  (void)count;\n}\n";
}

// The body after the index for a thread that computes V consecutive outputs along the
// last dim (o<last> is the run's first, OL the runs a line): the outer dims' taps as for
// one output, the last dim's span of inputs loaded once into registers (a load only
// where the input is, as the taps' bounds checks say), then each output's result, its
// epilogue and store at its flat index tv. The taps are summed in the same order as a
// thread per output sums them: the same bits.
std::string run_body(const pool_spec& p, const std::vector<std::string>& nm, const std::vector<std::string>& I,
                     const std::string& O_last, int V, int64_t span, const std::string& at, const epilogue_code* epi,
                     const std::string& Y) {
  const int D = p.dims, L = D - 1;
  const std::string Vs = std::to_string(V), S = std::to_string(span), w = nm[L];
  std::ostringstream k;
  k << "  float acc[" << Vs << "];\n  int count[" << Vs << "];\n";
  k << "#pragma unroll\n  for (int v = 0; v < " << Vs << "; ++v) {\n    acc[v] = " << (p.max ? "-KS_INF" : "0.0f")
    << ";\n    count[v] = 0;\n  }\n";
  tap_loops(k, p, nm, I, L);
  const std::string in(2 + 2 * L, ' ');
  k << in << "float xs[" << S << "];\n" << in << "bool ok[" << S << "];\n";
  k << "#pragma unroll\n" << in << "for (int s = 0; s < " << S << "; ++s) {\n";
  k << in << "  const long long " << w << " = " << w << "0 + s;\n";
  k << in << "  ok[s] = " << w << " >= 0 && " << w << " < " << I[L] << ";\n";
  k << in << "  xs[s] = ok[s] ? xp[" << at << "] : 0.0f;\n" << in << "}\n";
  k << "#pragma unroll\n" << in << "for (int v = 0; v < " << Vs << "; ++v) {\n";
  k << "#pragma unroll\n" << in << "  for (int l = 0; l < " << p.kernel[L] << "; ++l) {\n";
  k << in << "    const int s = v * " << p.stride[L] << " + l * " << p.dil[L] << ";\n";
  k << in << "    if (!ok[s]) continue;\n";
  k << in << "    " << (p.max ? "acc[v] = (xs[s] > acc[v] || xs[s] != xs[s]) ? xs[s] : acc[v];" : "acc[v] += xs[s];")
    << "\n" << in << "    ++count[v];\n" << in << "  }\n" << in << "}\n";
  close_tap_loops(k, L);
  write_results(k, p, nm, I, O_last, V, 1, "(t / OL)", epi, Y);
  return k.str();
}

// The kernel's text into the source and its plan step: `blocks` blocks of B threads.
std::string op_name(const pool_spec& p) {
  return std::string(p.max ? "max" : "avg") + "_pool" + std::to_string(p.dims) + "d";
}

// "max_pool2d 3x3, stride 2x2, padding 1x1": the kernel's comment starts so.
std::string window_text(const pool_spec& p) {
  auto dims_text = [&](const int64_t* v) {
    std::string t;
    for (int k = 0; k < p.dims; ++k) t += (k ? "x" : "") + std::to_string(v[k]);
    return t;
  };
  return op_name(p) + " " + dims_text(p.kernel) + ", stride " + dims_text(p.stride) + ", padding " + dims_text(p.pad);
}

status finish_pool(lowering_context& cx, size_t si, const std::string& text, const std::string& name,
                   const std::string& blocks, int B, const kernel_params& kp) {
  cx.src += text;
  plan_step step;
  step.kind = "kernel";
  step.name = name;
  step.grid = {blocks, "1", "1"};
  step.block = {std::to_string(B), "1", "1"};
  step.args = kp.args;
  cx.out.plan.steps.push_back(step);
  cx.written.insert(cx.stages[si].nodes[0]->outputs[0]);
  return {};
}

// The plane's input and the window's start in each dim (<name>0, from the output's
// o<name> and plane); returns the index of the input at the taps' positions.
std::string window_starts(std::ostringstream& k, const pool_spec& p, const std::vector<std::string>& nm,
                          const std::vector<std::string>& I, const std::string& X) {
  const int D = p.dims;
  k << "  const float* xp = " << X << " + plane";
  for (int q = 0; q < D; ++q) k << " * " << I[q];
  k << ";\n  const long long";
  for (int q = 0; q < D; ++q)
    k << (q ? ", " : " ") << nm[q] << "0 = o" << nm[q] << " * " << p.stride[q] << " - " << p.pad[q];
  k << ";\n";
  std::string at = nm[0];
  for (int q = 1; q < D; ++q) at = (q > 1 ? "(" + at + ")" : at) + " * " + I[q] + " + " + nm[q];
  return at;
}

// pool_layout strided: a block per tile of B * V consecutive outputs of one line (the
// output's dims before the last), a thread's V outputs B apart. Each output's taps are
// summed in the order a thread per output sums them: the same bits.
status emit_strided_pool(lowering_context& cx, size_t si, const pool_layout& lay, const std::vector<std::string>& nm,
                         const std::vector<std::string>& I, const std::vector<std::string>& O, const std::string& X,
                         kernel_params& kp) {
  const graph_node& n = *cx.stages[si].nodes[0];
  const pool_spec& p = lay.window;
  const shaped& out = cx.shapes.at(n.outputs[0]);
  const int D = p.dims, L = D - 1, B = lay.block, V = lay.per_thread;
  const std::string w = nm[L], tile = std::to_string(int64_t{B} * V);
  const std::vector<std::string> outer_sym(out.sym.begin(), out.sym.end() - 1);
  const std::string tiles = "ceil_div(" + out.sym.back() + ", " + tile + ")";
  const std::string T = kp.int64(tiles);
  auto epi = fused_epilogue(cx, si, n.outputs[0], "tv", kp);
  if (!epi) return epi.error();
  const bool fused = cx.stages[si].epilogue >= 0;
  const std::string Y = fused ? std::string() : kp.tensor_out(cx.tensor_of.at(n.outputs[0]));
  const std::string name = kernel_name(si, op_name(p));
  std::ostringstream k;
  k << "\n// " << window_text(p) << ": a block per tile of " << tile << " consecutive outputs of a line, "
    << (V == 1 ? std::string("a thread per output") : "a thread's " + std::to_string(V) + " outputs " + std::to_string(B) + " apart")
    << " (loads and stores coalesced, the inputs of neighbouring windows from L1)"
    << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
  // Fewer than 2^31 blocks: the block's line and tile split in 32 bits, once.
  k << "  const unsigned tiles = (unsigned)" << T << ", line = blockIdx.x / tiles, tile = blockIdx.x - line * tiles;\n";
  k << "  const long long o" << w << " = (long long)tile * " << tile << " + threadIdx.x;  // the thread's first output\n";
  k << "  long long";
  for (int q = L - 1; q >= 0; --q) k << " o" << nm[q] << ",";
  k << " plane;\n  {\n    unsigned q = line;\n";
  for (int q = L - 1; q >= 0; --q)
    k << "    o" << nm[q] << " = q % (unsigned)" << O[q] << ";\n    q /= (unsigned)" << O[q] << ";\n";
  k << "    plane = q;\n  }\n";
  const std::string at = window_starts(k, p, nm, I, X);
  k << "  float acc[" << V << "];\n  int count[" << V << "];\n";
  k << "#pragma unroll\n  for (int v = 0; v < " << V << "; ++v) {\n";
  k << "    acc[v] = " << (p.max ? "-KS_INF" : "0.0f") << ";\n    count[v] = 0;\n";
  k << "    const long long " << w << "0v = " << w << "0 + v * " << p.stride[L] * B << ";\n";
  tap_loops(k, p, nm, I, D, w + "0v", 4);
  const std::string body(4 + 2 * D, ' ');
  k << body << "const float x = xp[" << at << "];\n";
  k << body << (p.max ? "acc[v] = (x > acc[v] || x != x) ? x : acc[v];\n" : "acc[v] += x;\n") << body << "++count[v];\n";
  close_tap_loops(k, D, 4);
  k << "  }\n";
  write_results(k, p, nm, I, O[L], V, B, "(long long)line", fused ? &*epi : nullptr, Y);
  ++cx.out.strided_pools;
  const std::string blocks = outer_sym.empty() ? tiles : product(outer_sym) + " * " + tiles;
  return finish_pool(cx, si, k.str(), name, blocks, B, kp);
}

}  // namespace

status emit_pool(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  auto layout = choose_pool_layout(cx, n);
  if (!layout) return error{layout.message()};
  const pool_spec* p = &layout->window;
  const shaped& in = cx.shapes.at(n.inputs[0]);
  const shaped& out = cx.shapes.at(n.outputs[0]);
  const size_t r = in.sym.size();
  const int D = p->dims;
  // The window's dims, outermost first: their names, the input's and the output's
  // sizes, and the loop over the window's taps in each.
  static const char* all_names[] = {"d", "h", "w"};
  std::vector<std::string> nm(all_names + 3 - D, all_names + 3);
  kernel_params kp;
  const std::string X = kp.tensor_in(cx.tensor_of.at(n.inputs[0]));
  std::vector<std::string> I(D), O(D);
  for (int k = 0; k < D; ++k) I[k] = kp.int64(in.sym[r - D + k]);
  for (int k = 0; k < D; ++k) O[k] = kp.int64(out.sym[r - D + k]);
  if (layout->strided) return emit_strided_pool(cx, si, *layout, nm, I, O, X, kp);
  const int V = layout->per_thread;
  const std::vector<std::string> outer_sym(out.sym.begin(), out.sym.end() - 1);
  // The threads: an output each, or a run of V along the last dim (OL runs a line).
  const std::string threads =
      V == 1 ? product(out.sym) : product(outer_sym) + " * ceil_div(" + out.sym.back() + ", " + std::to_string(V) + ")";
  const std::string N = kp.int64(threads);
  const std::string OL = V == 1 ? O[D - 1] : "OL";
  auto epi = fused_epilogue(cx, si, n.outputs[0], V == 1 ? "t" : "tv", kp);
  if (!epi) return epi.error();
  const bool fused = cx.stages[si].epilogue >= 0;
  const std::string Y = fused ? std::string() : kp.tensor_out(cx.tensor_of.at(n.outputs[0]));
  const int B = layout->block;
  const std::string blocks = "ceil_div(" + paren(threads) + ", " + std::to_string(B) + ")";
  const std::string name = kernel_name(si, op_name(*p));
  std::ostringstream k;
  k << "\n// " << window_text(*p)
    << (V == 1 ? std::string(": a thread per output element")
               : ": a thread per " + std::to_string(V) + " consecutive outputs along the last dim, their " +
                     std::to_string(layout->span()) + " inputs along it loaded once")
    << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
  k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
  k << "  if (t >= " << N << ") return;\n";
  if (V > 1) k << "  const long long OL = (" << O[D - 1] << " + " << V - 1 << ") / " << V << ";  // runs of " << V << " a line\n";
  // The output's position in each window dim and its plane (the dims before them),
  // innermost first. 64-bit division costs a hundred instructions a call, which would
  // make the kernel compute bound: below 2^31 outputs the index splits in 32 bits.
  k << "  long long";
  for (int q = D - 1; q >= 0; --q) k << " o" << nm[q] << ",";
  k << " plane;\n";
  k << "  if (" << N << " <= 0x7fffffffLL) {\n";
  k << "    const unsigned u = (unsigned)t, q = u / (unsigned)" << OL << ";\n";
  k << "    o" << nm[D - 1] << " = u - q * (unsigned)" << OL << ";";
  std::string qv = "q";
  for (int q = D - 2; q >= 0; --q) {
    k << " o" << nm[q] << " = " << qv << " % (unsigned)" << O[q] << ";";
    if (q > 0) {
      k << " const unsigned " << qv << "2 = " << qv << " / (unsigned)" << O[q] << ";";
      qv += "2";
    } else {
      k << " plane = " << qv << " / (unsigned)" << O[q] << ";";
    }
  }
  if (D == 1) k << " plane = q;";
  k << "\n  } else {\n    o" << nm[D - 1] << " = t % " << OL << ";";
  std::string inner = OL;
  for (int q = D - 2; q >= 0; --q) {
    k << " o" << nm[q] << " = (t / " << (q == D - 2 ? inner : "(" + inner + ")") << ") % " << O[q] << ";";
    inner += " * " + O[q];
  }
  k << " plane = t / " << (D == 1 ? inner : "(" + inner + ")") << ";\n  }\n";
  if (V > 1) k << "  o" << nm[D - 1] << " *= " << V << ";  // the run's first output\n";
  const std::string at = window_starts(k, *p, nm, I, X);
  if (V > 1) {
    k << run_body(*p, nm, I, O[D - 1], V, layout->span(), at, fused ? &*epi : nullptr, Y);
    return finish_pool(cx, si, k.str(), name, blocks, B, kp);
  }
  k << "  float acc = " << (p->max ? "-KS_INF" : "0.0f") << ";\n  int count = 0;\n";
  tap_loops(k, *p, nm, I, D);
  const std::string body(2 + 2 * D, ' ');
  k << body << "const float v = xp[" << at << "];\n";
  k << body << (p->max ? "acc = (v > acc || v != v) ? v : acc;\n" : "acc += v;\n") << body << "++count;\n";
  close_tap_loops(k, D);
  if (p->max) {
    k << "  const float res = acc;\n";
  } else {
    std::string div;
    if (p->divisor != 0) div = flit(p->divisor);
    else if (p->count_include_pad) {
      padded_ends(k, *p, nm, I, D);
      div = "(float)(";
      for (int q = 0; q < D; ++q) div += (q ? " * (" : "(") + nm[q] + "e - " + nm[q] + "0)";
      div += ")";
    } else {
      div = "(float)count";
    }
    k << "  const float res = acc / " << div << ";\n";
  }
  if (fused) k << epi->code << epi->stores;
  else k << "  " << Y << "[t] = res;\n";
  k << "  (void)count;\n}\n";
  return finish_pool(cx, si, k.str(), name, blocks, B, kp);
}

}  // namespace ks::rules
