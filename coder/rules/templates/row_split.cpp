#include "coder/rules/templates/row_split.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "coder/rules/templates/row_reduce.hpp"
#include "coder/rules/text/combine.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

namespace {

const char* lanes4[] = {"x", "y", "z", "w"};

// Each thread reduces at least this many elements of its chunk: below it, a block's
// reduction and the launch cost more than the parallelism gains.
constexpr int64_t kMinPerThread = 16;

// The block's row, its part and its chunk [c0, c1) of the row.
std::string chunk_head(const reduce_parts& rp, const std::string& S) {
  std::string t = "  const long long parts = " + S + ";\n";
  t += "  const long long row = (long long)blockIdx.x / parts, part = (long long)blockIdx.x % parts;\n";
  t += "  const long long base = row * " + rp.C + ";\n";
  t += "  const long long chunk = ((" + rp.C + " + parts - 1) / parts + 3) / 4 * 4;  // float4 reads stay aligned\n";
  t += "  const long long c0 = part * chunk, c1 = min(" + rp.C + ", c0 + chunk);\n";
  return t;
}

// The row's partial states merged in part order: thread t takes parts t, t + width,
// ...; the warp or block combine that follows is itself in a fixed order.
// batch_norm: the partials of the row's channel in every batch, rows n * CH + ch,
// batch by batch and part by part within a row.
std::string merge_partials(const reduce_parts& rp, const std::string& PIN, const std::string& S,
                           const std::string& lane, const std::string& width) {
  const acc_text& a = rp.a;
  std::string t, at = "row * " + S + " + q";
  if (rp.r.batch_stats) {
    t = "  const long long ch = row % " + rp.CH + ";  // the channel: its rows are ch, ch + " + rp.CH + ", ...\n";
    t += "  for (long long q = " + lane + "; q < " + rp.ROWS + " / " + rp.CH + " * " + S + "; q += " + width + ") {\n";
    at = "((q / " + S + ") * " + rp.CH + " + ch) * " + S + " + q % " + S;
  } else {
    t = "  for (long long q = " + lane + "; q < " + S + "; q += " + width + ") {\n";
  }
  std::vector<std::string> other;
  for (size_t k = 0; k < a.state.size(); ++k) {
    t += "    const float p_" + a.state[k] + " = " + PIN + "[" + std::to_string(k) + " * " + rp.ROWS + " * " + S +
         " + " + at + "];\n";
    other.push_back("p_" + a.state[k]);
  }
  return t + "    " + merge(rp.r, a, other) + "\n  }\n";
}

// The first kernel: each block's chunk into its partial state.
std::string part_kernel(const reduce_parts& rp1, const reduce_layout& lay, const std::string& S,
                        const std::string& PART, const std::string& name, const std::string& split_name) {
  const reduction_spec& r = rp1.r;
  const acc_text& a = rp1.a;
  std::ostringstream k;
  k << "\n// " << r.op << " over the last dims of few long rows, first pass: each row split over " << split_name
    << " blocks, each block reduces its chunk into a partial state"
    << (rp1.pro ? " (with the feeding chain fused into its loads)" : "") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << lay.block << ")\n"
    << name << "(" << join(rp1.kp.decls, ", ") << ") {\n";
  k << chunk_head(rp1, S) << rp1.decl;
  std::string from = "c0";
  if (lay.vec_rows) {
    k << "  const long long c4n = (" << rp1.C << " & 3) == 0 ? c1 / 4 : c0 / 4;\n";
    k << "#pragma unroll 4\n  for (long long c4 = c0 / 4 + threadIdx.x; c4 < c4n; c4 += blockDim.x) {\n";
    k << "    const float4 q = reinterpret_cast<const float4*>(" << rp1.X << " + base)[c4];\n";
    for (auto* l : lanes4) k << "    { const float v = q." << l << "; " << a.update << " }\n";
    k << "  }\n";
    from = "c4n * 4";
  }
  k << "  for (long long c = " << from << " + threadIdx.x; c < c1; c += blockDim.x) {\n"
    << reduce_load(rp1, "base + c", "v") << "    " << a.update << "\n  }\n";
  k << block_combine(r, a);
  k << "  if (threadIdx.x == 0) {";
  for (size_t q = 0; q < a.state.size(); ++q)
    k << " " << PART << "[" << q << " * " << rp1.ROWS << " * parts + blockIdx.x] = " << a.state[q] << ";";
  k << " }\n}\n";
  return k.str();
}

// The second kernel of a normalisation or a reduction with an epilogue: the row's
// partials merged, then the block's chunk again.
std::string second_pass_kernel(lowering_context& cx, reduce_parts& rp, const reduce_layout& lay, const std::string& S,
                               const std::string& PIN, const std::string& split_name) {
  const reduction_spec& r = rp.r;
  std::ostringstream k;
  k << "\n// " << r.op << " over the last dims of few long rows, second pass: each of a row's " << split_name
    << (r.batch_stats ? " blocks merges the partial states of the row's channel in every batch in order, then "
                      : " blocks merges the row's partial states in order, then ")
    << (r.normalizes() ? "normalises its chunk" : "runs the fused epilogue over its chunk") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << lay.block << ")\n"
    << rp.name << "(" << join(rp.kp.decls, ", ") << ") {\n";
  k << chunk_head(rp, S) << rp.decl;
  k << merge_partials(rp, PIN, S, "(long long)threadIdx.x", "(long long)blockDim.x") << block_combine(r, rp.a);
  const std::string loop = "  for (long long c = c0 + threadIdx.x; c < c1; c += blockDim.x)";
  if (r.normalizes() && !rp.epi && lay.vec_rows && r.groups == 0) {
    k << rp.prelude;
    k << "  const long long c4n = (" << rp.C << " & 3) == 0 ? c1 / 4 : c0 / 4;\n";
    k << "#pragma unroll 4\n  for (long long c4 = c0 / 4 + threadIdx.x; c4 < c4n; c4 += blockDim.x) {\n";
    k << "    const float4 q = reinterpret_cast<const float4*>(" << rp.X << " + base)[c4];\n    float4 o4;\n";
    // layer_norm's weight and bias are rows of C too: read as float4 beside x.
    const bool affine4 = r.op == "layer_norm";
    if (affine4 && !rp.W.empty()) k << "    const float4 w4 = reinterpret_cast<const float4*>(" << rp.W << ")[c4];\n";
    if (affine4 && !rp.Bi.empty()) k << "    const float4 b4 = reinterpret_cast<const float4*>(" << rp.Bi << ")[c4];\n";
    for (int l = 0; l < 4; ++l) {
      const std::string y =
          affine4 ? affine_y(rp, std::string("w4.") + lanes4[l], std::string("b4.") + lanes4[l]) : rp.y;
      k << "    { const long long c = c4 * 4 + " << l << "; (void)c; const float v = q." << lanes4[l] << "; o4."
        << lanes4[l] << " = " << y << "; }\n";
    }
    k << "    reinterpret_cast<float4*>(" << rp.OUT << " + base)[c4] = o4;\n  }\n";
    k << "  for (long long c = c4n * 4 + threadIdx.x; c < c1; c += blockDim.x) {\n"
      << reduce_load(rp, "base + c", "v") << "    " << rp.OUT << "[base + c] = " << rp.y << ";\n  }\n";
  } else if (r.groups > 0) {
    k << group_pass2(cx, rp, "c0", "c1", "(long long)threadIdx.x", "(long long)blockDim.x");
  } else if (r.normalizes()) {
    k << rp.prelude << loop << " {\n" << reduce_load(rp, "base + c", "v") << pass2_body(cx, rp, "base + c") << "  }\n";
  } else {
    k << pass2_head(rp, lay) << pass2_from(cx, rp, loop);
  }
  k << "}\n";
  return k.str();
}

// The second kernel of a plain reduction: a warp per row merges its partials.
std::string final_kernel(const reduce_parts& rp, const reduce_layout& lay, const std::string& S, const std::string& PIN,
                         const std::string& split_name) {
  const reduction_spec& r = rp.r;
  std::ostringstream k;
  k << "\n// " << r.op << " over the last dims of few long rows, second pass: a warp per row merges the row's "
    << split_name << " partial states in order.\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << lay.block << ")\n"
    << rp.name << "(" << join(rp.kp.decls, ", ") << ") {\n";
  k << "  const int lane = threadIdx.x & 31;\n";
  k << "  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n";
  k << "  if (row >= " << rp.ROWS << ") return;  // the whole warp leaves together\n";
  k << rp.decl << merge_partials(rp, PIN, S, "lane", "32") << warp_combine(r, rp.a);
  k << "  if (lane == 0) " << rp.OUT << "[row] = " << finish(r, rp.a, rp.C) << ";\n}\n";
  return k.str();
}

}  // namespace

int64_t blocks_wanted(const lowering_params& p, const lowering_device& dev) {
  const int64_t resident = std::max<int64_t>(1, dev.max_threads_per_sm / std::max(32, p.block_size));
  return static_cast<int64_t>(std::max(1, dev.multiprocessors)) * resident * p.row_split;
}

int64_t split_blocks(const lowering_params& p, const lowering_device& dev, int64_t rows, int64_t len) {
  if (p.row_split <= 0 || len <= 0 || rows <= 0) return 1;
  const int64_t min_chunk = kMinPerThread * p.block_size;
  const int64_t by_length = (len + min_chunk - 1) / min_chunk;
  const int64_t by_device = (blocks_wanted(p, dev) + rows - 1) / rows;
  const int64_t s = std::min(by_length, by_device);
  return s >= 2 ? s : 1;
}

std::string split_expression(const lowering_params& p, const lowering_device& dev, const std::string& rows,
                             const std::string& len) {
  return "max(1, min(ceil_div(" + paren(len) + ", " + std::to_string(kMinPerThread * p.block_size) + "), ceil_div(" +
         std::to_string(blocks_wanted(p, dev)) + ", " + paren(rows) + ")))";
}

int64_t choose_split(const lowering_params& p, const lowering_device& dev, const reduce_parts& rp) {
  return split_blocks(p, dev, rp.rows_n, rp.row_len);
}

status emit_split_rows(lowering_context& cx, size_t si, reduce_parts& rp, const reduce_layout& lay) {
  const reduction_spec& r = rp.r;
  const std::string id = std::to_string(si);
  const std::string rows = product(rp.outer), len = product(rp.red);
  // SPLIT at the run's shapes: as many blocks per row as fill the device, no chunk
  // under kMinPerThread elements a thread.
  const std::string SPLIT = "SPLIT" + id;
  cx.out.plan.constants[SPLIT] = split_expression(cx.p, cx.dev, rows, len);
  const std::string part = "partial" + id;
  cx.out.plan.scratch.push_back(
      {part, {std::to_string(rp.a.state.size()) + " * " + paren(rows) + " * " + SPLIT}, "float32", "none"});
  cx.out.longest_row = std::max(cx.out.longest_row, rp.row_len);

  // Kernel A: its own parameters (the first pass reads the input or the prologue's
  // operands only).
  auto p1 = gather_parts(cx, si, true);
  if (!p1) return error{p1.message()};
  reduce_parts& rp1 = *p1;
  // An operand along the rows (a convolution's bias before a batch norm) at the block's
  // row (chunk_head), not by a 64-bit division per element.
  if (auto s = index_prologue_by_row(cx, rp1); !s) return s;
  const std::string SA = rp1.kp.int64(SPLIT);
  const std::string PART = rp1.kp.tensor_out(part);
  std::string src = part_kernel(rp1, lay, SA, PART, rp.name + "_part", SPLIT);
  cx.add_kernel_step(rp.name + "_part", {paren(rows) + " * " + SPLIT, "1", "1"}, {std::to_string(lay.block), "1", "1"},
                     rp1.kp.args);

  // Kernel B: the partials merged; the stores or the second pass.
  if (auto s = index_epilogue_by_row(cx, rp); !s) return s;
  const std::string PIN = rp.kp.tensor_in(part);
  const std::string SB = rp.kp.int64(SPLIT);
  std::vector<std::string> grid;
  if (r.normalizes() || rp.epi) {
    src += second_pass_kernel(cx, rp, lay, SB, PIN, SPLIT);
    grid = {paren(rows) + " * " + SPLIT, "1", "1"};
  } else {
    src += final_kernel(rp, lay, SB, PIN, SPLIT);
    grid = {"ceil_div(" + paren(rows) + ", " + std::to_string(lay.block / 32) + ")", "1", "1"};
  }
  cx.add_kernel_step(rp.name, grid, {std::to_string(lay.block), "1", "1"}, rp.kp.args);
  cx.src += src;
  cx.written.insert(r.output);
  return {};
}

}  // namespace ks::rules
