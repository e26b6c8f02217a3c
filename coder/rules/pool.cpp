#include "coder/rules/pool.hpp"

#include <sstream>

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
  kernel_params kp;
  const std::string X = kp.tensor_in(cx.tensor_of.at(n.inputs[0]));
  const std::string H = kp.int64(in.sym[r - 2]), W = kp.int64(in.sym[r - 1]);
  const std::string OH = kp.int64(out.sym[r - 2]), OW = kp.int64(out.sym[r - 1]);
  const std::string N = kp.int64(product(out.sym));
  auto epi = fused_epilogue(cx, si, n.outputs[0], "t", kp);
  if (!epi) return epi.error();
  const bool fused = cx.stages[si].epilogue >= 0;
  const std::string Y = fused ? std::string() : kp.tensor_out(cx.tensor_of.at(n.outputs[0]));
  const int B = layout->block;
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

}  // namespace ks::rules
