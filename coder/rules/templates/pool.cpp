#include "coder/rules/templates/pool.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "coder/rules/text/chain.hpp"
#include "coder/rules/text/kernel_text.hpp"

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
void tap_loops(std::ostringstream& k, const pool_spec& p, const std::vector<std::string>& nm,
               const std::vector<std::string>& I, int n) {
  static const char* tap_names[] = {"i", "j", "l"};
  for (int q = 0; q < n; ++q) {
    const std::string ind(2 + 2 * q, ' ');
    k << "#pragma unroll\n"
      << ind << "for (int " << tap_names[q] << " = 0; " << tap_names[q] << " < " << p.kernel[q] << "; ++"
      << tap_names[q] << ") {\n";
    k << ind << "  const long long " << nm[q] << " = " << nm[q] << "0 + " << tap_names[q] << " * " << p.dil[q] << ";\n";
    k << ind << "  if (" << nm[q] << " < 0 || " << nm[q] << " >= " << I[q] << ") continue;\n";
  }
}

void close_tap_loops(std::ostringstream& k, int n) {
  for (int q = n - 1; q >= 0; --q) k << std::string(2 + 2 * q, ' ') << "}\n";
}

// count_include_pad's window ends in dims [0, n): PyTorch counts padding inside the
// padded input, but not past it.
void padded_ends(std::ostringstream& k, const pool_spec& p, const std::vector<std::string>& nm,
                 const std::vector<std::string>& I, int n) {
  k << "  const long long";
  for (int q = 0; q < n; ++q)
    k << (q ? ", " : " ") << nm[q] << "e = min(" << nm[q] << "0 + " << p.kernel[q] << ", " << I[q] << " + " << p.pad[q]
      << ")";
  k << ";\n";
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
    << "\n"
    << in << "    ++count[v];\n"
    << in << "  }\n"
    << in << "}\n";
  close_tap_loops(k, L);
  if (!p.max && p.divisor == 0 && p.count_include_pad && L > 0) padded_ends(k, p, nm, I, L);
  k << "  const long long tv0 = line * " << O_last << " + o" << w << ";\n";
  k << "#pragma unroll\n  for (int v = 0; v < " << Vs << "; ++v) {\n";
  k << "    if (o" << w << " + v >= " << O_last << ") break;\n";
  k << "    const long long tv = tv0 + v;\n";
  if (p.max) {
    k << "    const float res = acc[v];\n";
  } else if (p.divisor != 0) {
    k << "    const float res = acc[v] / " << flit(p.divisor) << ";\n";
  } else if (p.count_include_pad) {
    // PyTorch counts padding inside the padded input, but not past it.
    k << "    const long long " << w << "0v = " << w << "0 + v * " << p.stride[L] << ", " << w << "ev = min(" << w
      << "0v + " << p.kernel[L] << ", " << I[L] << " + " << p.pad[L] << ");\n";
    std::string div = "(float)(";
    for (int q = 0; q < L; ++q) div += "(" + nm[q] + "e - " + nm[q] + "0) * ";
    div += "(" + w + "ev - " + w + "0v))";
    k << "    const float res = acc[v] / " << div << ";\n";
  } else {
    k << "    const float res = acc[v] / (float)count[v];\n";
  }
  if (epi)
    k << epi->code << epi->stores;
  else
    k << "    " << Y << "[tv] = res;\n";
  k << "  }\n  (void)count;\n}\n";
  return k.str();
}

// The kernel's text into the source and its plan step: a block per B of `threads` (an
// output or a run of V each).
status finish_pool(lowering_context& cx, size_t si, const std::string& text, const std::string& name,
                   const std::string& threads, int B, const kernel_params& kp) {
  cx.src += text;
  cx.add_kernel_step(name, {"ceil_div(" + paren(threads) + ", " + std::to_string(B) + ")", "1", "1"},
                     {std::to_string(B), "1", "1"}, kp.args);
  cx.written.insert(cx.stages[si].nodes[0]->outputs[0]);
  return {};
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
  const int V = layout->per_thread;
  const std::vector<std::string> outer_sym(out.sym.begin(), out.sym.end() - 1);
  // The threads: an output each, or a run of V along the last dim (OL runs a line).
  const std::string threads =
      V == 1 ? product(out.sym) : product(outer_sym) + " * ceil_div(" + out.sym.back() + ", " + std::to_string(V) + ")";
  const std::string N = kp.int64(threads);
  const std::string OL = V == 1 ? O[D - 1] : "OL";
  auto epi = fused_epilogue(cx, si, n.outputs[0], V == 1 ? "t" : "tv", kp);
  if (!epi) return epi.error();
  const bool fused = cx.stages[si].epilogue() >= 0;
  const std::string Y = fused ? std::string() : kp.tensor_out(cx.tensor_of.at(n.outputs[0]));
  const int B = layout->block;
  const std::string op = std::string(p->max ? "max" : "avg") + "_pool" + std::to_string(D) + "d";
  std::string name = kernel_name(si, op);
  auto dims_text = [&](const int64_t* v) {
    std::string t;
    for (int k = 0; k < D; ++k) t += (k ? "x" : "") + std::to_string(v[k]);
    return t;
  };
  std::ostringstream k;
  k << "\n// " << op << " " << dims_text(p->kernel) << ", stride " << dims_text(p->stride) << ", padding "
    << dims_text(p->pad)
    << (V == 1 ? std::string(": a thread per output element")
               : ": a thread per " + std::to_string(V) + " consecutive outputs along the last dim, their " +
                     std::to_string(layout->span()) + " inputs along it loaded once")
    << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n"
    << name << "(" << join(kp.decls, ", ") << ") {\n";
  k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
  k << "  if (t >= " << N << ") return;\n";
  if (V > 1)
    k << "  const long long OL = (" << O[D - 1] << " + " << V - 1 << ") / " << V << ";  // runs of " << V
      << " a line\n";
  // The output's position in each window dim and its plane (the dims before them),
  // innermost first. 64-bit division costs a hundred instructions a call, which would
  // make the kernel compute bound: below 2^31 outputs the index splits in 32 bits.
  k << "  long long";
  for (int q = D - 1; q >= 0; --q) k << " o" << nm[q] << ",";
  k << " plane" << (V > 1 ? ", line;  // line: the run's line of outputs, t / OL\n" : ";\n");
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
  if (V > 1) k << " line = q;";
  k << "\n  } else {\n    o" << nm[D - 1] << " = t % " << OL << ";";
  if (V > 1) k << " line = t / OL;";
  std::string inner = OL;
  for (int q = D - 2; q >= 0; --q) {
    k << " o" << nm[q] << " = (t / " << (q == D - 2 ? inner : "(" + inner + ")") << ") % " << O[q] << ";";
    inner += " * " + O[q];
  }
  k << " plane = t / " << (D == 1 ? inner : "(" + inner + ")") << ";\n  }\n";
  if (V > 1) k << "  o" << nm[D - 1] << " *= " << V << ";  // the run's first output\n";
  k << "  const float* xp = " << X << " + plane";
  for (int q = 0; q < D; ++q) k << " * " << I[q];
  k << ";\n  const long long";
  for (int q = 0; q < D; ++q)
    k << (q ? ", " : " ") << nm[q] << "0 = o" << nm[q] << " * " << p->stride[q] << " - " << p->pad[q];
  k << ";\n";
  std::string at = nm[0];
  for (int q = 1; q < D; ++q) at = (q > 1 ? "(" + at + ")" : at) + " * " + I[q] + " + " + nm[q];
  if (V > 1) {
    k << run_body(*p, nm, I, O[D - 1], V, layout->span(), at, fused ? &*epi : nullptr, Y);
    return finish_pool(cx, si, k.str(), name, threads, B, kp);
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
    if (p->divisor != 0)
      div = flit(p->divisor);
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
  if (fused)
    k << epi->code << epi->stores;
  else
    k << "  " << Y << "[t] = res;\n";
  k << "  (void)count;\n}\n";
  return finish_pool(cx, si, k.str(), name, threads, B, kp);
}

}  // namespace ks::rules
