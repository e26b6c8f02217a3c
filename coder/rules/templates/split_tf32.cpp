#include "coder/rules/templates/split_tf32.hpp"

#include <sstream>

#include "coder/rules/plan/op_table.hpp"
#include "coder/rules/text/device_helpers.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

namespace {

bool is_f32(const lowering_context& cx, const std::string& v) {
  return cx.is_tensor(v) && cx.val(v).dtype == "float32";
}

std::vector<std::string> head(const std::vector<std::string>& v, size_t n) {
  return std::vector<std::string>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
}

std::vector<int64_t> head(const std::vector<int64_t>& v, size_t n) {
  return std::vector<int64_t>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
}

int64_t numel(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

// One operand written three times along its K dim (`dim`), `second`: [big | small | big],
// else [big | big | small]; the kernel walks the dims before K as rows (blockIdx.y) and
// the rest as one contiguous run (float4 where it is aligned).
status emit_split_operand(lowering_context& cx, size_t si, const std::string& value, size_t dim, bool second,
                          plan_step& consumer, size_t arg) {
  const shaped& s = cx.shapes.at(value);
  const std::string what = second ? "b" : "a";
  const std::string scratch = "split" + std::to_string(si) + "_" + what;
  std::vector<std::string> sym = s.sym;
  sym[dim] = "3 * " + paren(sym[dim]);
  cx.out.plan.scratch.push_back({scratch, sym, "float32", "none"});
  const std::string outer = product(head(s.sym, dim));
  const std::string inner =
      product(std::vector<std::string>(s.sym.begin() + static_cast<std::ptrdiff_t>(dim), s.sym.end()));

  kernel_params kp;
  const std::string IN = kp.tensor_in(cx.tensor_of.at(value));
  const std::string OUT = kp.tensor_out(scratch);
  const std::string ROWS = kp.int64(outer), RUN = kp.int64(inner);
  const std::string name = kernel_name(si, "split_" + what);
  const char* order = second ? "big | small | big" : "big | big | small";
  const char* mid = second ? "small" : "big";
  const char* last = second ? "big" : "small";
  std::ostringstream k;
  // The element split (cuda/split_tf32.cuh), once per source however many products are split.
  // (The comment written names this header where it was before coder/rules/ had
  // sub-folders: the generated sources stay byte for byte what they were.)
  k << "\n"
    << (cx.src.find("#define KS_SPLIT_TF32") == std::string::npos ? cuda::split_tf32_cuh() : "")
    << "// Split-precision operand " << (second ? "B" : "A")
    << " of a 3xTF32 product (coder/rules/split_tf32.hpp): x = big +\n"
    << "// small, both TF32, written as [" << order << "] along K.\n"
    << "extern \"C\" __global__ void __launch_bounds__(256)\n"
    << name << "(" << join(kp.decls, ", ") << ") {\n"
    << "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    << "  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  const bool vec = (" << RUN << " & 3) == 0 && ((reinterpret_cast<unsigned long long>(" << IN
    << ") | reinterpret_cast<unsigned long long>(" << OUT << ")) & 15) == 0;\n"
    << "  for (long long r = blockIdx.y; r < " << ROWS << "; r += gridDim.y) {\n"
    << "    const float* src = " << IN << " + r * " << RUN << ";\n"
    << "    float* dst = " << OUT << " + r * 3 * " << RUN << ";\n"
    << "    if (vec) {\n"
    << "      for (long long t = first * 4; t < " << RUN << "; t += step * 4) {\n"
    << "        const float4 x = *reinterpret_cast<const float4*>(src + t);\n"
    << "        float4 big, small;\n"
    << "        big.x = ks_tf32(x.x); small.x = ks_tf32(x.x - big.x);\n"
    << "        big.y = ks_tf32(x.y); small.y = ks_tf32(x.y - big.y);\n"
    << "        big.z = ks_tf32(x.z); small.z = ks_tf32(x.z - big.z);\n"
    << "        big.w = ks_tf32(x.w); small.w = ks_tf32(x.w - big.w);\n"
    << "        *reinterpret_cast<float4*>(dst + t) = big;\n"
    << "        *reinterpret_cast<float4*>(dst + " << RUN << " + t) = " << mid << ";\n"
    << "        *reinterpret_cast<float4*>(dst + 2 * " << RUN << " + t) = " << last << ";\n"
    << "      }\n"
    << "    } else {\n"
    << "      for (long long t = first; t < " << RUN << "; t += step) {\n"
    << "        const float x = src[t];\n"
    << "        const float big = ks_tf32(x), small = ks_tf32(x - big);\n"
    << "        dst[t] = big;\n"
    << "        dst[" << RUN << " + t] = " << mid << ";\n"
    << "        dst[2 * " << RUN << " + t] = " << last << ";\n"
    << "      }\n"
    << "    }\n"
    << "  }\n"
    << "}\n";
  cx.src += k.str();
  plan_step step;
  step.kind = "kernel";
  step.name = name;
  // A block covers 1024 of a row's run (4 a thread); rows on grid.y.
  step.grid = {"max(1, min(ceil_div(" + paren(inner) + ", 1024), 4096))", "max(1, min(" + paren(outer) + ", 65535))",
               "1"};
  step.block = {"256", "1", "1"};
  step.args = kp.args;
  cx.out.plan.steps.push_back(step);
  consumer.args.at(arg).value = scratch;
  return {};
}

}  // namespace

split_tf32_layout choose_split_tf32(const lowering_context& cx, const graph_node& n, const library_call& call) {
  split_tf32_layout lay;
  if (cx.p.gemm_precision != param::gemm_precision::split_tf32) return lay;
  const std::string& op = call.op;
  if (op == "aten::addmm")
    lay.a_arg = 1, lay.b_arg = 2;
  else if (op == "aten::linear")
    lay.b_is_weight = true;
  else if (!op_is(op, op_class::product))
    return lay;
  const std::string& a = n.inputs.at(lay.a_arg);
  const std::string& b = n.inputs.at(lay.b_arg);
  if (!is_f32(cx, a) || !is_f32(cx, b) || !is_f32(cx, n.outputs.at(0))) return lay;
  if (!cx.shapes.count(a) || !cx.shapes.count(b) || !cx.tensor_of.count(a) || !cx.tensor_of.count(b)) return lay;
  const shaped& A = cx.shapes.at(a);
  const shaped& B = cx.shapes.at(b);
  if (A.shape.size() < 2 || B.shape.size() < 2 || (lay.b_is_weight && B.shape.size() != 2)) return lay;
  // Sizes at the task's shapes: rows of A (every dim but K), K, N.
  const size_t ra = A.shape.size();
  const int64_t rows = cx.target_size(head(A.sym, ra - 1), numel(head(A.shape, ra - 1)));
  const int64_t K = cx.target_size({A.sym.back()}, A.shape.back());
  const int64_t N =
      lay.b_is_weight ? cx.target_size({B.sym[0]}, B.shape[0]) : cx.target_size({B.sym.back()}, B.shape.back());
  const int64_t b_elems = cx.target_size(B.sym, numel(B.shape));
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(N) * static_cast<double>(K);
  const double elems = static_cast<double>(rows) * static_cast<double>(K) + static_cast<double>(b_elems);
  lay.apply = K >= kMinK && flops >= static_cast<double>(kMinFlops) &&
              flops >= static_cast<double>(kMinFlopsPerElement) * elems;
  return lay;
}

status emit_split_tf32(lowering_context& cx, size_t si, const graph_node& n, const split_tf32_layout& lay,
                       plan_step& step) {
  const std::string& a = n.inputs.at(lay.a_arg);
  const std::string& b = n.inputs.at(lay.b_arg);
  const size_t ra = cx.shapes.at(a).sym.size(), rb = cx.shapes.at(b).sym.size();
  if (auto s = emit_split_operand(cx, si, a, ra - 1, false, step, lay.a_arg); !s) return s;
  // The second operand's K: its last dim for linear's weight [N, K], else the one
  // before its last ([..., K, N]).
  if (auto s = emit_split_operand(cx, si, b, lay.b_is_weight ? rb - 1 : rb - 2, true, step, lay.b_arg); !s) return s;
  step.attrs["math"] = "tf32";
  ++cx.out.split_products;
  cx.out.rewrites.push_back(base_kind(n.kind) +
                            ": 3xTF32 (operands split into TF32 big + small parts, one TF32 product over 3K)");
  return {};
}

}  // namespace ks::rules
