#include "coder/rules/scan.hpp"

#include <sstream>
#include <vector>

#include "coder/rules/chain.hpp"
#include "coder/rules/kernel_text.hpp"
#include "coder/rules/op_specs.hpp"

namespace ks::rules {

result<scan_layout> choose_scan_layout(const lowering_context& cx, const graph_node& n) {
  scan_layout lay;
  lay.sum = base_kind(n.kind) == "aten::cumsum";
  const shaped& in = cx.shapes.at(n.inputs[0]);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  if (rank == 0) return error{n.kind + " of a 0-d tensor is not supported by the rules coder"};
  lay.dim = normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers.at(0)), in.shape.size());
  lay.last = lay.dim == rank - 1;
  lay.block = cx.p.block_size;
  // A running sum carries its rounding along the row: two fp32 orders of 4096 normal
  // values differ by ~2e-4 where the sum crosses zero. Summed in double, ours is
  // within an fp32 rounding of the exact running sum (the kernel stays at memory
  // speed: H200 adds doubles at half the float rate). Products keep float.
  lay.carry_type = lay.sum ? "double" : "float";
  return lay;
}

status emit_scan(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  auto layout = choose_scan_layout(cx, n);
  if (!layout) return error{layout.message()};
  const scan_layout& lay = *layout;
  const bool sum = lay.sum, last = lay.last;
  const int64_t dim = lay.dim;
  const shaped& in = cx.shapes.at(n.inputs[0]);
  kernel_params kp;
  std::vector<std::string> outer(in.sym.begin(), in.sym.begin() + dim), inner(in.sym.begin() + dim + 1, in.sym.end());
  const std::string ROWS = kp.int64(product(outer)), C = kp.int64(in.sym[dim]);
  std::string INNER = last ? "1" : kp.int64(product(inner));
  const std::string X = kp.tensor_in(cx.tensor_of.at(n.inputs[0]));
  auto epi = fused_epilogue(cx, si, n.outputs[0], "i", kp);
  if (!epi) return epi.error();
  const bool fused = cx.stages[si].epilogue >= 0;
  const std::string Y = fused ? std::string() : kp.tensor_out(cx.tensor_of.at(n.outputs[0]));
  const std::string id = sum ? "0.0f" : "1.0f";
  const std::string& T = lay.carry_type;
  auto op = [&](const std::string& a, const std::string& b) { return sum ? a + " + " + b : a + " * " + b; };
  const int B = lay.block;
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

}  // namespace ks::rules
