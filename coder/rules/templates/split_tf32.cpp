#include "coder/rules/templates/split_tf32.hpp"

#include <sstream>

#include "coder/rules/plan/op_specs.hpp"
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

// K rounded up to a multiple of 4 (16 bytes of float32), as a shape expression.
std::string padded_k(const std::string& k) { return "round_up(" + k + ", 4)"; }

// The split of an operand whose K is not a multiple of 4 (emit_split_operand): each
// row's run (K and the dims after it) read as scalars (the rows are not 16-byte
// aligned), its thirds written as float4 at the padded run's stride (a multiple of 4:
// the scratch's rows are aligned), zeros past the run.
status emit_padded_split(lowering_context& cx, size_t si, const std::string& value, bool second,
                         const std::string& outer, const std::string& inner, const std::string& padded_inner,
                         const std::string& scratch, plan_step& consumer, size_t arg, const std::string& rows_pad) {
  kernel_params kp;
  const std::string what = second ? "b" : "a";
  const std::string IN = kp.tensor_in(cx.tensor_of.at(value));
  const std::string OUT = kp.tensor_out(scratch);
  const std::string ROWS = kp.int64(outer), RUN = kp.int64(inner), PAD = kp.int64(padded_inner);
  // Rows padded too (rows_pad: linear's weight to N rounded up, the product's output
  // rows then aligned): rows past ROWS are zeros.
  const std::string ROWSP = rows_pad.empty() ? ROWS : kp.int64(rows_pad);
  const std::string LIVE = rows_pad.empty() ? "t < " + RUN : "r < " + ROWS + " && t < " + RUN;
  const std::string name = kernel_name(si, "split_" + what);
  const char* order = second ? "small | big | big" : "big | small | big";
  const char* first_third = second ? "small" : "big";
  const char* mid = second ? "big" : "small";
  const char* last = "big";
  std::ostringstream k;
  k << "\n"
    << (cx.src.find("#define KS_SPLIT_TF32") == std::string::npos ? cuda::split_tf32_cuh() : "")
    << "// Split-precision operand " << (second ? "B" : "A")
    << " of a 3xTF32 product (coder/rules/split_tf32.hpp): x = big +\n"
    << "// small, both TF32, written as [" << order << "] along K, each third K rounded up to a\n"
    << "// multiple of 4 with zeros (the product's leading dims 16-byte aligned).\n"
    << "extern \"C\" __global__ void __launch_bounds__(256)\n"
    << name << "(" << join(kp.decls, ", ") << ") {\n"
    << "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    << "  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  for (long long r = blockIdx.y; r < " << ROWSP << "; r += gridDim.y) {\n"
    << "    const float* src = " << IN << " + r * " << RUN << ";\n"
    << "    float* dst = " << OUT << " + r * 3 * " << PAD << ";\n"
    << "    for (long long t = first * 4; t < " << PAD << "; t += step * 4) {\n"
    << "      float4 x;\n"
    << "      x.x = " << LIVE << " ? src[t] : 0.0f;\n"
    << "      x.y = " << LIVE << " - 1 ? src[t + 1] : 0.0f;\n"
    << "      x.z = " << LIVE << " - 2 ? src[t + 2] : 0.0f;\n"
    << "      x.w = " << LIVE << " - 3 ? src[t + 3] : 0.0f;\n"
    << "      float4 big, small;\n"
    << "      big.x = ks_tf32(x.x); small.x = ks_tf32(x.x - big.x);\n"
    << "      big.y = ks_tf32(x.y); small.y = ks_tf32(x.y - big.y);\n"
    << "      big.z = ks_tf32(x.z); small.z = ks_tf32(x.z - big.z);\n"
    << "      big.w = ks_tf32(x.w); small.w = ks_tf32(x.w - big.w);\n"
    << "      *reinterpret_cast<float4*>(dst + t) = " << first_third << ";\n"
    << "      *reinterpret_cast<float4*>(dst + " << PAD << " + t) = " << mid << ";\n"
    << "      *reinterpret_cast<float4*>(dst + 2 * " << PAD << " + t) = " << last << ";\n"
    << "    }\n"
    << "  }\n"
    << "}\n";
  cx.src += k.str();
  cx.add_kernel_step(name,
                     {"max(1, min(ceil_div(" + paren(padded_inner) + ", 1024), 4096))",
                      "max(1, min(" + paren(rows_pad.empty() ? outer : rows_pad) + ", 65535))", "1"},
                     {"256", "1", "1"}, kp.args);
  consumer.args.at(arg).value = scratch;
  return {};
}

// One operand written three times along its K dim (`dim`), `second`: [small | big | big],
// else [big | small | big] (split_tf32.hpp says why the cross terms come first); the kernel walks the dims before K as
// rows (blockIdx.y) and the rest as one contiguous run (float4 where it is aligned).
status emit_split_operand(lowering_context& cx, size_t si, const std::string& value, size_t dim, bool second, bool pad,
                          plan_step& consumer, size_t arg, const std::string& rows_pad = "") {
  const shaped& s = cx.shapes.at(value);
  const std::string what = second ? "b" : "a";
  const std::string scratch = "split" + std::to_string(si) + "_" + what;
  // Padded: each third is K rounded up to a multiple of 4, the rest zeros (they add
  // nothing to the product), so that the product's leading dims are 16-byte aligned.
  std::vector<std::string> padded = s.sym;
  if (pad) padded[dim] = padded_k(s.sym[dim]);
  std::vector<std::string> sym = padded;
  sym[dim] = "3 * " + paren(sym[dim]);
  if (!rows_pad.empty()) sym[0] = rows_pad;  // linear's weight [N, K]: its rows padded
  cx.out.plan.scratch.push_back({scratch, sym, "float32", "none"});
  const std::string outer = product(head(s.sym, dim));
  const std::string inner =
      product(std::vector<std::string>(s.sym.begin() + static_cast<std::ptrdiff_t>(dim), s.sym.end()));
  const std::string padded_inner =
      product(std::vector<std::string>(padded.begin() + static_cast<std::ptrdiff_t>(dim), padded.end()));
  if (pad || !rows_pad.empty())
    return emit_padded_split(cx, si, value, second, outer, inner, padded_inner, scratch, consumer, arg, rows_pad);

  kernel_params kp;
  const std::string IN = kp.tensor_in(cx.tensor_of.at(value));
  const std::string OUT = kp.tensor_out(scratch);
  const std::string ROWS = kp.int64(outer), RUN = kp.int64(inner);
  const std::string name = kernel_name(si, "split_" + what);
  const char* order = second ? "small | big | big" : "big | small | big";
  const char* first_third = second ? "small" : "big";
  const char* mid = second ? "big" : "small";
  const char* last = "big";
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
    << "        *reinterpret_cast<float4*>(dst + t) = " << first_third << ";\n"
    << "        *reinterpret_cast<float4*>(dst + " << RUN << " + t) = " << mid << ";\n"
    << "        *reinterpret_cast<float4*>(dst + 2 * " << RUN << " + t) = " << last << ";\n"
    << "      }\n"
    << "    } else {\n"
    << "      for (long long t = first; t < " << RUN << "; t += step) {\n"
    << "        const float x = src[t];\n"
    << "        const float big = ks_tf32(x), small = ks_tf32(x - big);\n"
    << "        dst[t] = " << first_third << ";\n"
    << "        dst[" << RUN << " + t] = " << mid << ";\n"
    << "        dst[2 * " << RUN << " + t] = " << last << ";\n"
    << "      }\n"
    << "    }\n"
    << "  }\n"
    << "}\n";
  cx.src += k.str();
  // A block covers 1024 of a row's run (4 a thread); rows on grid.y.
  cx.add_kernel_step(
      name,
      {"max(1, min(ceil_div(" + paren(inner) + ", 1024), 4096))", "max(1, min(" + paren(outer) + ", 65535))", "1"},
      {"256", "1", "1"}, kp.args);
  consumer.args.at(arg).value = scratch;
  return {};
}

// B [K, N] (N not a multiple of 4) split and written transposed, as linear's weight:
// [N, 3 * KP] as [small | big | big] along K, each third KP long (K, or K rounded up to
// a multiple of 4), zeros past K. 32 x 32 tiles through shared memory: read along N,
// written along K, both coalesced.
status emit_transposed_split(lowering_context& cx, size_t si, const std::string& value, bool pad, plan_step& consumer,
                             size_t arg, const std::string& rows_pad = "") {
  const shaped& s = cx.shapes.at(value);
  const std::string scratch = "split" + std::to_string(si) + "_b";
  const std::string KS = s.sym.at(0), NS = s.sym.at(1);
  const std::string kp_sym = pad ? padded_k(KS) : KS;
  // rows_pad: N rounded up, rows past N zeros (the product's output rows aligned).
  const std::string NP_SYM = rows_pad.empty() ? NS : rows_pad;
  cx.out.plan.scratch.push_back({scratch, {NP_SYM, "3 * " + paren(kp_sym)}, "float32", "none"});
  kernel_params kp;
  const std::string IN = kp.tensor_in(cx.tensor_of.at(value));
  const std::string OUT = kp.tensor_out(scratch);
  const std::string K = kp.int64(KS), N = kp.int64(NS), KP = kp.int64(kp_sym);
  const std::string NP = rows_pad.empty() ? N : kp.int64(rows_pad);
  const std::string name = kernel_name(si, "split_b");
  std::ostringstream k;
  k << "\n"
    << (cx.src.find("#define KS_SPLIT_TF32") == std::string::npos ? cuda::split_tf32_cuh() : "")
    << "// Split-precision operand B of a 3xTF32 product (coder/rules/split_tf32.hpp), [K, N]\n"
    << "// with N not a multiple of 4: x = big + small, both TF32, written transposed as\n"
    << "// [N, 3 * KP], [small | big | big] along K (each third KP long, zeros past K), so\n"
    << "// that the product (linear) reads both operands 16-byte aligned.\n"
    << "extern \"C\" __global__ void __launch_bounds__(256)\n"
    << name << "(" << join(kp.decls, ", ") << ") {\n"
    << "  __shared__ float tile[32][33];\n"
    << "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n"
    << "  const long long k0 = (long long)blockIdx.x * 32;\n"
    << "  for (long long n0 = (long long)blockIdx.y * 32; n0 < " << NP << "; n0 += (long long)gridDim.y * 32) {\n"
    << "    for (int j = ty; j < 32; j += 8) {\n"
    << "      const long long kk = k0 + j, n = n0 + tx;\n"
    << "      tile[j][tx] = kk < " << K << " && n < " << N << " ? " << IN << "[kk * " << N << " + n] : 0.0f;\n"
    << "    }\n"
    << "    __syncthreads();\n"
    << "    for (int j = ty; j < 32; j += 8) {\n"
    << "      const long long n = n0 + j, kk = k0 + tx;\n"
    << "      if (n < " << NP << " && kk < " << KP << ") {\n"
    << "        const float x = tile[tx][j];\n"
    << "        const float big = ks_tf32(x), small = ks_tf32(x - big);\n"
    << "        float* dst = " << OUT << " + n * 3 * " << KP << ";\n"
    << "        dst[kk] = small;\n"
    << "        dst[" << KP << " + kk] = big;\n"
    << "        dst[2 * " << KP << " + kk] = big;\n"
    << "      }\n"
    << "    }\n"
    << "    __syncthreads();\n"
    << "  }\n"
    << "}\n";
  cx.src += k.str();
  cx.add_kernel_step(
      name,
      {"max(1, ceil_div(" + paren(kp_sym) + ", 32))", "max(1, min(ceil_div(" + paren(NP_SYM) + ", 32), 65535))", "1"},
      {"256", "1", "1"}, kp.args);
  consumer.args.at(arg).value = scratch;
  return {};
}

// linear's bias [N] copied into [NP] (zeros past N): the bias of a product whose
// output rows are padded.
status emit_padded_bias(lowering_context& cx, size_t si, const std::string& n_sym, const std::string& np_sym,
                        plan_step& consumer, size_t arg) {
  const std::string scratch = "split" + std::to_string(si) + "_bias";
  cx.out.plan.scratch.push_back({scratch, {np_sym}, "float32", "none"});
  kernel_params kp;
  const std::string IN = kp.tensor_in(consumer.args.at(arg).value);
  const std::string OUT = kp.tensor_out(scratch);
  const std::string N = kp.int64(n_sym), NP = kp.int64(np_sym);
  const std::string name = kernel_name(si, "pad_bias");
  std::ostringstream k;
  k << "\n// The bias of a 3xTF32 product whose output rows are padded to a multiple of 4\n"
    << "// (coder/rules/split_tf32.hpp): zeros past N.\n"
    << "extern \"C\" __global__ void __launch_bounds__(256)\n"
    << name << "(" << join(kp.decls, ", ") << ") {\n"
    << "  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < " << NP
    << "; t += (long long)gridDim.x * blockDim.x)\n"
    << "    " << OUT << "[t] = t < " << N << " ? " << IN << "[t] : 0.0f;\n"
    << "}\n";
  cx.src += k.str();
  cx.add_kernel_step(name, {"max(1, min(ceil_div(" + paren(np_sym) + ", 256), 1024))", "1", "1"}, {"256", "1", "1"},
                     kp.args);
  consumer.args.at(arg).value = scratch;
  return {};
}

// Whether reduction stage `st` reads its input (`in`, or the input its prologue
// computes) by rows of the 2-d value: over its last dim, several rows (row_reduce's
// rows form, whose kernels hold the row: row_reduce.cpp's pitched_rows).
bool reduces_rows(const lowering_context& cx, const stage& st) {
  auto spec = read_reduction(cx, *st.nodes[0], base_kind(st.nodes[0]->kind));
  if (!spec || !cx.shapes.count(spec->input)) return false;
  const std::vector<int64_t>& in = cx.shapes.at(spec->input).shape;
  return in.size() == 2 && in[0] > 1 && spec->first == 1 && spec->last == 2 && spec->groups == 0 && !spec->batch_stats;
}

// The reduction stage whose prologue is stage `pj`, or -1.
int reduction_of_prologue(const lowering_context& cx, int pj) {
  for (size_t i = 0; i < cx.stages.size(); ++i)
    if (const auto* red = cx.stages[i].get<reduce_stage>(); red && red->prologue == pj) return static_cast<int>(i);
  return -1;
}

// Whether the product's result may be stored with padded rows: a 2-d value that only
// elementwise kernels read (they index it by row and column, chain.cpp) or reductions
// over its rows (directly or through their prologue: they read each row at
// row * pitch, row_reduce.cpp), not an output of the plan, sharing its tensor with no
// other value.
bool output_rows_paddable(const lowering_context& cx, const std::string& v) {
  if (!cx.shapes.count(v) || cx.shapes.at(v).shape.size() != 2 || !cx.tensor_of.count(v)) return false;
  for (const std::string& o : cx.outputs)
    if (o == v) return false;
  auto it = cx.consumers.find(v);
  if (it == cx.consumers.end() || it->second.empty()) return false;
  for (int sj : it->second) {
    const stage& st = cx.stages.at(static_cast<size_t>(sj));
    if (st.is<reduce_stage>()) {
      // Its input itself (a prologue reads it through the elementwise stage).
      if (st.nodes[0]->inputs.at(0) != v || !reduces_rows(cx, st)) return false;
      continue;
    }
    if (!st.is<elementwise_stage>()) return false;
    const auto& ew = st.as_kind<elementwise_stage>();
    if (ew.is_epilogue || !ew.permuted.empty() || ew.iter.shape != cx.shapes.at(v).shape) return false;
    if (ew.fused_away) {
      const int ri = reduction_of_prologue(cx, sj);
      if (ri < 0 || !reduces_rows(cx, cx.stages.at(static_cast<size_t>(ri)))) return false;
    }
  }
  int same = 0;
  for (const auto& [id, t] : cx.tensor_of) same += t == cx.tensor_of.at(v);
  for (const auto& [a, b] : cx.same_memory)
    if (a == v || b == v) return false;
  return same == 1;
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
  // K not a multiple of 4: the thirds padded to one (zeros), else the product's
  // leading dims are not 16-byte aligned and no TF32 tensor-core kernel takes them.
  lay.pad_k = K % kAlign != 0;
  // N is B's leading dim in mm, matmul, bmm and addmm ([..., K, N]): not a multiple of
  // 4, the TF32 product would read B unaligned, as FP32's SGEMM does, at 3x the work.
  // (linear's weight is [N, K]: N is only the output's leading dim.)
  // Where B is a matrix and the product one linear can run (mm; matmul; addmm with
  // beta = alpha = 1), B is split transposed as linear's weight instead.
  const bool unit_addmm = op != "aten::addmm" ||
                          (cx.val(n.inputs.at(3)).numbers.at(0) == 1.0 && cx.val(n.inputs.at(4)).numbers.at(0) == 1.0);
  lay.b_transposed = !lay.b_is_weight && N % kAlign != 0 && B.shape.size() == 2 && op != "aten::bmm" && unit_addmm;
  const bool b_aligned = lay.b_is_weight || lay.b_transposed || N % kAlign == 0;
  // linear (or a product run as one) at N not a multiple of 4: the output's leading
  // dim. Where only elementwise kernels or reductions over its rows read the result,
  // B's rows are padded to round_up(N, 4) (zeros; the bias too) and the result stored
  // [M, round_up(N, 4)], read by row and column: the product's stores aligned as well.
  if ((lay.b_is_weight || lay.b_transposed) && N % kAlign != 0 && output_rows_paddable(cx, n.outputs.at(0))) {
    const size_t bias_arg = op == "aten::addmm" ? 0 : 2;
    const bool has_bias = op == "aten::addmm" || (op == "aten::linear" && call.tensors == 3);
    lay.pad_n = !has_bias ||
                (cx.shapes.count(n.inputs.at(bias_arg)) &&
                 cx.shapes.at(n.inputs.at(bias_arg)).shape == std::vector<int64_t>{B.shape[lay.b_is_weight ? 0 : 1]});
    // linear's weight with padded rows is written by the padded split (float4 stores
    // along each third): its thirds must be a multiple of 4 at every size the plan
    // runs at, not only the task's (K is symbolic), and A's as long as B's.
    if (lay.pad_n && lay.b_is_weight) lay.pad_k = true;
  }
  // N not a multiple of 4 and the output's rows not padded (a reduction, a plan's
  // output or a view reads them as [M, N]): the TF32 product's stores are unaligned
  // and cuBLAS runs its slow kernel three times over. bench/probes/tf32_odd_probe.py
  // on an H100: at 1023 x 8191 x 8191 an unaligned TF32 product takes 1.03 ms, three
  // 3.09 ms, against eager's FP32 SGEMM at 2.69-2.81 ms (aligned: 0.339 ms, three
  // 1.02 ms); at 127 x 4095 x 4093, 16383 x 1023 x 1023 and 255 x 12289 x 12287 three
  // unaligned ones lose too (0.165 / 0.102, 0.876 / 0.721, 1.99 / 1.75 ms). Never the
  // cliff: the product stays FP32's SGEMM, as eager runs it.
  const bool stores_aligned = N % kAlign == 0 || lay.pad_n;
  lay.apply = b_aligned && stores_aligned && K >= kMinK && flops >= static_cast<double>(kMinFlops) &&
              flops >= static_cast<double>(kMinFlopsPerElement) * elems;
  return lay;
}

status emit_split_tf32(lowering_context& cx, size_t si, const graph_node& n, const split_tf32_layout& lay,
                       plan_step& step) {
  const std::string& a = n.inputs.at(lay.a_arg);
  const std::string& b = n.inputs.at(lay.b_arg);
  const size_t ra = cx.shapes.at(a).sym.size(), rb = cx.shapes.at(b).sym.size();
  if (auto s = emit_split_operand(cx, si, a, ra - 1, false, lay.pad_k, step, lay.a_arg); !s) return s;
  // The output's rows padded (pad_n): N rounded up, B's rows and the bias padded with
  // zeros, the result read by row and column.
  const std::string n_sym = lay.b_is_weight ? cx.shapes.at(b).sym.at(0) : cx.shapes.at(b).sym.back();
  const std::string rows_pad = lay.pad_n ? padded_k(n_sym) : "";
  if (lay.pad_n) cx.row_pitch[n.outputs.at(0)] = rows_pad;
  if (lay.b_transposed) {
    if (auto s = emit_transposed_split(cx, si, b, lay.pad_k, step, lay.b_arg, rows_pad); !s) return s;
    if (lay.pad_n && step.name == "aten::addmm")
      if (auto s = emit_padded_bias(cx, si, n_sym, rows_pad, step, 0); !s) return s;
    // A' [..., 3K] and B' [N, 3K]: linear(A', B') is the product (addmm's input its bias).
    std::vector<plan_arg> args = {step.args.at(lay.a_arg), step.args.at(lay.b_arg)};
    if (step.name == "aten::addmm") args.push_back(step.args.at(0));
    step.name = "aten::linear";
    step.args = args;
    step.attrs.erase("beta");
    step.attrs.erase("alpha");
    step.attrs["math"] = "tf32";
    ++cx.out.split_products;
    cx.out.rewrites.push_back(base_kind(n.kind) +
                              ": 3xTF32 (operands split into TF32 big + small parts, B transposed, one TF32 linear "
                              "over 3K)");
    return {};
  }
  // The second operand's K: its last dim for linear's weight [N, K], else the one
  // before its last ([..., K, N]).
  if (auto s =
          emit_split_operand(cx, si, b, lay.b_is_weight ? rb - 1 : rb - 2, true, lay.pad_k, step, lay.b_arg, rows_pad);
      !s)
    return s;
  if (lay.pad_n && step.args.size() == 3)
    if (auto s = emit_padded_bias(cx, si, n_sym, rows_pad, step, 2); !s) return s;
  step.attrs["math"] = "tf32";
  ++cx.out.split_products;
  cx.out.rewrites.push_back(base_kind(n.kind) +
                            ": 3xTF32 (operands split into TF32 big + small parts, one TF32 product over 3K)");
  return {};
}

}  // namespace ks::rules
