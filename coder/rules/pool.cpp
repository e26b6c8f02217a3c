#include "coder/rules/pool.hpp"

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
  return lay;
}

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
  static const char* tap_names[] = {"i", "j", "l"};
  std::vector<std::string> nm(all_names + 3 - D, all_names + 3);
  kernel_params kp;
  const std::string X = kp.tensor_in(cx.tensor_of.at(n.inputs[0]));
  std::vector<std::string> I(D), O(D);
  for (int k = 0; k < D; ++k) I[k] = kp.int64(in.sym[r - D + k]);
  for (int k = 0; k < D; ++k) O[k] = kp.int64(out.sym[r - D + k]);
  const std::string N = kp.int64(product(out.sym));
  auto epi = fused_epilogue(cx, si, n.outputs[0], "t", kp);
  if (!epi) return epi.error();
  const bool fused = cx.stages[si].epilogue >= 0;
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
  k << "\n// " << op << " " << dims_text(p->kernel) << ", stride " << dims_text(p->stride) << ", padding " << dims_text(p->pad)
    << ": a thread per output element" << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
  k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
  k << "  if (t >= " << N << ") return;\n";
  // The output's position in each window dim and its plane (the dims before them),
  // innermost first. 64-bit division costs a hundred instructions a call, which would
  // make the kernel compute bound: below 2^31 outputs the index splits in 32 bits.
  k << "  long long";
  for (int q = D - 1; q >= 0; --q) k << " o" << nm[q] << ",";
  k << " plane;\n";
  k << "  if (" << N << " <= 0x7fffffffLL) {\n";
  k << "    const unsigned u = (unsigned)t, q = u / (unsigned)" << O[D - 1] << ";\n";
  k << "    o" << nm[D - 1] << " = u - q * (unsigned)" << O[D - 1] << ";";
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
  k << "\n  } else {\n    o" << nm[D - 1] << " = t % " << O[D - 1] << ";";
  std::string inner = O[D - 1];
  for (int q = D - 2; q >= 0; --q) {
    k << " o" << nm[q] << " = (t / " << (q == D - 2 ? inner : "(" + inner + ")") << ") % " << O[q] << ";";
    inner += " * " + O[q];
  }
  k << " plane = t / " << (D == 1 ? inner : "(" + inner + ")") << ";\n  }\n";
  k << "  const float* xp = " << X << " + plane";
  for (int q = 0; q < D; ++q) k << " * " << I[q];
  k << ";\n  const long long";
  for (int q = 0; q < D; ++q)
    k << (q ? ", " : " ") << nm[q] << "0 = o" << nm[q] << " * " << p->stride[q] << " - " << p->pad[q];
  k << ";\n";
  k << "  float acc = " << (p->max ? "-KS_INF" : "0.0f") << ";\n  int count = 0;\n";
  std::string at = nm[0];
  for (int q = 1; q < D; ++q) at = (q > 1 ? "(" + at + ")" : at) + " * " + I[q] + " + " + nm[q];
  for (int q = 0; q < D; ++q) {
    const std::string ind(2 + 2 * q, ' ');
    k << "#pragma unroll\n" << ind << "for (int " << tap_names[q] << " = 0; " << tap_names[q] << " < " << p->kernel[q] << "; ++"
      << tap_names[q] << ") {\n";
    k << ind << "  const long long " << nm[q] << " = " << nm[q] << "0 + " << tap_names[q] << " * " << p->dil[q] << ";\n";
    k << ind << "  if (" << nm[q] << " < 0 || " << nm[q] << " >= " << I[q] << ") continue;\n";
  }
  const std::string body(2 + 2 * D, ' ');
  k << body << "const float v = xp[" << at << "];\n";
  k << body << (p->max ? "acc = (v > acc || v != v) ? v : acc;\n" : "acc += v;\n") << body << "++count;\n";
  for (int q = D - 1; q >= 0; --q) k << std::string(2 + 2 * q, ' ') << "}\n";
  if (p->max) {
    k << "  const float res = acc;\n";
  } else {
    std::string div;
    if (p->divisor != 0) div = flit(p->divisor);
    else if (p->count_include_pad) {
      // PyTorch counts padding inside the padded input, but not past it.
      k << "  const long long";
      for (int q = 0; q < D; ++q)
        k << (q ? ", " : " ") << nm[q] << "e = min(" << nm[q] << "0 + " << p->kernel[q] << ", " << I[q] << " + " << p->pad[q] << ")";
      k << ";\n";
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

}  // namespace ks::rules
