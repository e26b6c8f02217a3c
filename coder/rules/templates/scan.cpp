#include "coder/rules/templates/scan.hpp"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "coder/rules/plan/op_specs.hpp"
#include "coder/rules/templates/row_split.hpp"
#include "coder/rules/text/chain.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

result<scan_layout> choose_scan_layout(const lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  const scan_stage& st = cx.stages[si].as_kind<scan_stage>();
  scan_layout lay;
  lay.sum = base_kind(n.kind) == "aten::cumsum";
  // What the scan reads (x itself where a flip or a shift was fused into its loads):
  // its shape is the scan's.
  const shaped& in = cx.shapes.at(st.scan_in.empty() ? n.inputs[0] : st.scan_in);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  if (rank == 0) return error{n.kind + " of a 0-d tensor is not supported by the rules coder"};
  lay.dim = normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers.at(0)), in.shape.size());
  lay.last = lay.dim == rank - 1;
  lay.block = cx.p.block_size;
  lay.reverse_in = st.reverse_in;
  lay.reverse_out = st.reverse_out;
  lay.exclusive = st.exclusive;
  // A running sum carries its rounding along the row: two fp32 orders of 4096 normal
  // values differ by ~2e-4 where the sum crosses zero. Summed in double, ours is
  // within an fp32 rounding of the exact running sum (the kernel stays at memory
  // speed: H200 adds doubles at half the float rate). Products keep float.
  lay.carry_type = lay.sum ? "double" : "float";
  if (lay.last) {
    int64_t rows_g = 1;
    for (int64_t d = 0; d + 1 < rank; ++d) rows_g *= in.shape[d];
    const std::vector<std::string> outer(in.sym.begin(), in.sym.end() - 1);
    const int64_t rows = cx.target_size(outer, rows_g);
    lay.split = split_blocks(cx.p, cx.dev, rows, cx.target_size({in.sym.back()}, in.shape.back()));
    // Rows too few for a warp each to fill the device: a block per row (split when
    // even that is too few).
    lay.block_rows = lay.split > 1 || rows * 32 < blocks_wanted(cx.p, cx.dev) * lay.block;
  }
  return lay;
}

namespace {

// The text pieces every form of the scan shares.
struct scan_text {
  const scan_layout* lay = nullptr;
  std::string C, T, id;
  // With a prologue, what is scanned is the chain's value, `ks_load(i)` of element i
  // (load_lambda), and a row `xr` is the index of its first element, not a pointer.
  bool pro = false;
  std::string op(const std::string& a, const std::string& b) const { return lay->sum ? a + " + " + b : a + " * " + b; }
  // The row's start: a pointer into X, or (with a prologue) an element index.
  std::string row_start(const std::string& X, const std::string& at) const {
    return pro ? "  const long long xr = " + at + ";\n" : "  const float* xr = " + X + " + " + at + ";\n";
  }
  // The scanned value at position `p` of the row `xr` (flipped or shifted).
  std::string load(const std::string& xr, const std::string& p, const std::string& stride = "") const {
    auto at = [&](const std::string& q) {
      const std::string off = stride.empty() ? q : paren(q) + " * " + stride;
      return pro ? "ks_load(" + xr + " + " + paren(off) + ")" : xr + "[" + off + "]";
    };
    if (lay->exclusive) return "(" + p + " > 0 ? " + at(p + " - 1") + " : 0.0f)";
    if (lay->reverse_in) return at(C + " - 1 - " + paren(p));
    return at(p);
  }
  // Where position `p` is stored.
  std::string dst(const std::string& p) const { return lay->reverse_out ? C + " - 1 - " + paren(p) : p; }
};

// Last dim, many rows: a warp per row, tiles of 128.
void warp_rows(std::ostringstream& k, const scan_text& s, const std::string& ROWS, const std::string& X,
               const std::string& Y, const epilogue_code& epi, bool fused) {
  const std::string &C = s.C, &T = s.T, &id = s.id;
  k << "  const int lane = threadIdx.x & 31;\n";
  k << "  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n";
  k << "  if (row >= " << ROWS << ") return;  // the whole warp leaves together\n";
  k << s.row_start(X, "row * " + C);
  if (!fused) k << "  float* yr = " << Y << " + row * " << C << ";\n";
  k << "  " << T << " carry = " << id << ";\n";
  k << "  for (long long t0 = 0; t0 < " << C << "; t0 += 128) {\n";
  k << "    const long long c0 = t0 + lane * 4;\n    " << T << " v[4];\n";
  k << "#pragma unroll\n    for (int q = 0; q < 4; ++q) v[q] = c0 + q < " << C << " ? " << s.load("xr", "c0 + q")
    << " : " << id << ";\n";
  k << "#pragma unroll\n    for (int q = 1; q < 4; ++q) v[q] = " << s.op("v[q - 1]", "v[q]") << ";\n";
  k << "    " << T << " s = v[3];\n";
  k << "    for (int o = 1; o < 32; o <<= 1) {\n      const " << T
    << " up = __shfl_up_sync(0xffffffffu, s, o);\n      if (lane >= o) s = " << s.op("up", "s") << ";\n    }\n";
  k << "    " << T << " before = __shfl_up_sync(0xffffffffu, s, 1);\n    if (lane == 0) before = " << id << ";\n";
  k << "    before = " << s.op("carry", "before") << ";\n";
  if (fused)
    k << "#pragma unroll\n    for (int q = 0; q < 4; ++q)\n      if (c0 + q < " << C
      << ") {\n    const float res = (float)(" << s.op("before", "v[q]") << ");\n    const long long i = row * " << C
      << " + " << s.dst("c0 + q") << ";\n"
      << epi.code << epi.stores << "      }\n";
  else
    k << "#pragma unroll\n    for (int q = 0; q < 4; ++q)\n      if (c0 + q < " << C << ") yr[" << s.dst("c0 + q")
      << "] = (float)(" << s.op("before", "v[q]") << ");\n";
  k << "    carry = " << s.op("carry", "__shfl_sync(0xffffffffu, s, 31)") << ";\n  }\n}\n";
}

// Last dim, few long rows: the block's chunk [c0, c1) of its row. With `parts`, each
// row has that many blocks; else one.
std::string chunk_of_row(const std::string& C, bool split) {
  if (!split) return "  const long long row = blockIdx.x, c0 = 0, c1 = " + C + ";\n";
  return "  const long long parts = nparts;\n"
         "  const long long row = (long long)blockIdx.x / parts, part = (long long)blockIdx.x % parts;\n"
         "  const long long chunk = (" +
         C +
         " + parts - 1) / parts;\n"
         "  const long long c0 = part * chunk, c1 = min(" +
         C + ", c0 + chunk);\n";
}

// The first kernel of a split scan: each block's chunk reduced into its partial.
std::string part_kernel(const scan_text& s, const std::string& name, const std::string& decls, const std::string& X,
                        const std::string& PART, int B, const std::string& pro) {
  const std::string &T = s.T, &id = s.id;
  std::ostringstream k;
  k << "\n// " << (s.lay->sum ? "cumsum" : "cumprod")
    << " along the last dim of few long rows, first pass: each row split "
    << "over blocks, each block reduces its chunk into a partial.\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n" << name << "(" << decls << ") {\n";
  k << pro << chunk_of_row(s.C, true);
  k << s.row_start(X, "row * " + s.C);
  k << "  " << T << " acc = " << id << ";\n";
  k << "  for (long long p = c0 + threadIdx.x; p < c1; p += blockDim.x) acc = " << s.op("acc", s.load("xr", "p"))
    << ";\n";
  k << "  for (int o = 16; o > 0; o >>= 1) acc = " << s.op("acc", "__shfl_xor_sync(0xffffffffu, acc, o)") << ";\n";
  k << "  __shared__ " << T << " sh_w[32];\n";
  k << "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
  k << "  if (lane == 0) sh_w[warp] = acc;\n  __syncthreads();\n";
  k << "  if (threadIdx.x == 0) {\n    " << T << " t = " << id << ";\n";
  k << "    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = " << s.op("t", "sh_w[w]") << ";\n";
  k << "    " << PART << "[blockIdx.x] = t;\n  }\n}\n";
  return k.str();
}

// The block scan of a chunk: tiles of 4 elements a thread, a warp scan, a scan of the
// warps' totals, the carry of the tiles (and, split, of the chunks) before.
void block_scan_body(std::ostringstream& k, const scan_text& s, const std::string& X, const std::string& Y,
                     const std::string& PIN, const epilogue_code& epi, bool fused, bool split) {
  const std::string &C = s.C, &T = s.T, &id = s.id;
  k << chunk_of_row(C, split);
  k << s.row_start(X, "row * " + C);
  if (!fused) k << "  float* yr = " << Y << " + row * " << C << ";\n";
  k << "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
  k << "  __shared__ " << T << " sh_w[32];\n";
  k << "  " << T << " carry = " << id << ";\n";
  if (split) {
    // The chunks before this one, merged in the same order by every warp (the same
    // bits in each, and on every run).
    k << "  for (long long q = lane; q < part; q += 32) carry = " << s.op("carry", PIN + "[row * parts + q]") << ";\n";
    k << "  for (int o = 16; o > 0; o >>= 1) carry = " << s.op("carry", "__shfl_xor_sync(0xffffffffu, carry, o)")
      << ";\n";
  }
  k << "  for (long long t0 = c0; t0 < c1; t0 += 4 * (long long)blockDim.x) {\n";
  k << "    const long long p0 = t0 + (long long)threadIdx.x * 4;\n    " << T << " v[4];\n";
  k << "#pragma unroll\n    for (int q = 0; q < 4; ++q) v[q] = p0 + q < c1 ? " << s.load("xr", "p0 + q") << " : " << id
    << ";\n";
  k << "#pragma unroll\n    for (int q = 1; q < 4; ++q) v[q] = " << s.op("v[q - 1]", "v[q]") << ";\n";
  k << "    " << T << " s = v[3];\n";
  k << "    for (int o = 1; o < 32; o <<= 1) {\n      const " << T
    << " up = __shfl_up_sync(0xffffffffu, s, o);\n      if (lane >= o) s = " << s.op("up", "s") << ";\n    }\n";
  k << "    if (lane == 31) sh_w[warp] = s;\n    __syncthreads();\n";
  // Every warp scans the warps' totals itself (the same bits in each): no second
  // barrier, and no warp waits on another's shuffles.
  k << "    " << T << " w = lane < (int)(blockDim.x >> 5) ? sh_w[lane] : " << id << ";\n";
  k << "    for (int o = 1; o < 32; o <<= 1) {\n      const " << T
    << " up = __shfl_up_sync(0xffffffffu, w, o);\n      if (lane >= o) w = " << s.op("up", "w") << ";\n    }\n";
  k << "    const " << T << " warps_before = __shfl_sync(0xffffffffu, w, warp > 0 ? warp - 1 : 0);\n";
  k << "    const " << T << " tile = __shfl_sync(0xffffffffu, w, (int)(blockDim.x >> 5) - 1);\n";
  k << "    " << T << " before = __shfl_up_sync(0xffffffffu, s, 1);\n    if (lane == 0) before = " << id << ";\n";
  k << "    if (warp > 0) before = " << s.op("warps_before", "before") << ";\n";
  k << "    before = " << s.op("carry", "before") << ";\n";
  if (fused)
    k << "#pragma unroll\n    for (int q = 0; q < 4; ++q)\n      if (p0 + q < c1) {\n    const float res = (float)("
      << s.op("before", "v[q]") << ");\n    const long long i = row * " << C << " + " << s.dst("p0 + q") << ";\n"
      << epi.code << epi.stores << "      }\n";
  else
    k << "#pragma unroll\n    for (int q = 0; q < 4; ++q)\n      if (p0 + q < c1) yr[" << s.dst("p0 + q")
      << "] = (float)(" << s.op("before", "v[q]") << ");\n";
  k << "    carry = " << s.op("carry", "tile") << ";\n";
  k << "    __syncthreads();  // sh_w is written again by the next tile\n  }\n}\n";
}

// The prologue's chain as a lambda, ks_load(i): the value scanned at element i of
// the scan's input shape, computed from the chain's operands where it is read.
result<std::string> load_lambda(lowering_context& cx, const stage& pro, const std::string& value, kernel_params& kp) {
  std::string code;
  std::map<std::string, std::string> var;
  if (auto st = chain_code(cx, pro, "i", kp, code, var, ""); !st) return error{st.message()};
  return "  auto ks_load = [&](long long i) -> float {\n" + code + "    return " + var.at(value) + ";\n  };\n";
}

// What a scan kernel with parameters `kp` reads: its input tensor (`X`) or, with a
// prologue, the lambda that computes it (`code`).
struct scan_source {
  std::string X, code;
};
result<scan_source> scan_source_of(lowering_context& cx, const stage* pro, const std::string& in_value,
                                   kernel_params& kp) {
  scan_source out;
  if (!pro) {
    out.X = kp.tensor_in(cx.tensor_of.at(in_value));
    return out;
  }
  auto l = load_lambda(cx, *pro, in_value, kp);
  if (!l) return error{l.message()};
  out.code = *l;
  return out;
}

}  // namespace

status emit_scan(lowering_context& cx, size_t si) {
  const graph_node& n = *cx.stages[si].nodes[0];
  const scan_stage& st = cx.stages[si].as_kind<scan_stage>();
  auto layout = choose_scan_layout(cx, si);
  if (!layout) return error{layout.message()};
  const scan_layout& lay = *layout;
  const bool sum = lay.sum, last = lay.last;
  const int64_t dim = lay.dim;
  const std::string in_value = st.scan_in.empty() ? n.inputs[0] : st.scan_in;
  const std::string out_value = st.scan_out.empty() ? n.outputs[0] : st.scan_out;
  const shaped& in = cx.shapes.at(in_value);
  kernel_params kp;
  std::vector<std::string> outer(in.sym.begin(), in.sym.begin() + dim), inner(in.sym.begin() + dim + 1, in.sym.end());
  const std::string ROWS = kp.int64(product(outer)), C = kp.int64(in.sym[dim]);
  std::string INNER = last ? "1" : kp.int64(product(inner));
  const stage* pro = st.prologue >= 0 ? &cx.stages[st.prologue] : nullptr;
  auto source = scan_source_of(cx, pro, in_value, kp);
  if (!source) return error{source.message()};
  const std::string X = source->X, pro_code = source->code;
  auto epi = fused_epilogue(cx, si, out_value, "i", kp);
  if (!epi) return epi.error();
  const bool fused = st.epilogue >= 0;
  const std::string Y = fused ? std::string() : kp.tensor_out(cx.tensor_of.at(out_value));
  scan_text s;
  s.lay = &lay;
  s.C = C;
  s.T = lay.carry_type;
  s.id = sum ? "0.0f" : "1.0f";
  s.pro = pro != nullptr;
  const std::string& T = s.T;
  const int B = lay.block;
  const std::string what = sum ? "cumsum" : "cumprod";
  std::string name = kernel_name(si, what);
  const bool block_rows = last && lay.block_rows;
  const bool split = last && lay.split > 1;
  std::string transforms = std::string(pro ? ", with the feeding elementwise chain computed on its loads" : "") +
                           (lay.exclusive ? ", exclusive (position p reads p - 1)" : "") +
                           (lay.reverse_in ? ", its input read reversed" : "") +
                           (lay.reverse_out ? ", its result stored reversed" : "");
  plan_step step;
  step.kind = "kernel";
  step.name = name;
  step.block = {std::to_string(B), "1", "1"};
  std::ostringstream k;
  if (block_rows && last) {
    const std::string rows = product(outer);
    std::string PIN;
    if (split) {
      // Few long rows: reduce each block's chunk, then scan it after the chunks before.
      const std::string SPLIT = "SPLIT" + std::to_string(si);
      cx.out.plan.constants[SPLIT] = split_expression(cx.p, cx.dev, rows, in.sym[dim]);
      const std::string part = "partial" + std::to_string(si);
      cx.out.plan.scratch.push_back({part, {paren(rows) + " * " + SPLIT}, sum ? "float64" : "float32", "none"});
      kernel_params ka;
      const std::string CA = ka.int64(in.sym[dim]);
      auto source_a = scan_source_of(cx, pro, in_value, ka);
      if (!source_a) return error{source_a.message()};
      const std::string XA = source_a->X, pro_a = source_a->code;
      ka.decls.push_back("long long nparts");
      ka.args.push_back({"int", SPLIT, "int64"});
      const std::string PART = ka.tensor_out(part, T);
      scan_text sa = s;
      sa.C = CA;
      k << part_kernel(sa, name + "_part", join(ka.decls, ", "), XA, PART, B, pro_a);
      plan_step sp = step;
      sp.name = name + "_part";
      sp.grid = {paren(rows) + " * " + SPLIT, "1", "1"};
      sp.args = ka.args;
      cx.out.plan.steps.push_back(sp);
      kp.decls.push_back("long long nparts");
      kp.args.push_back({"int", SPLIT, "int64"});
      PIN = kp.tensor_in(part, T);
      step.grid = {paren(rows) + " * " + SPLIT, "1", "1"};
    } else {
      step.grid = {rows, "1", "1"};
    }
    k << "\n// " << what << " along the last dim"
      << (split ? " of few long rows, second pass: each block scans its chunk after the chunks before"
                : ": a block per row")
      << ", tiles of 4 elements a thread" << transforms
      << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
    k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n"
      << name << "(" << join(kp.decls, ", ") << ") {\n"
      << pro_code;
    block_scan_body(k, s, X, Y, PIN, *epi, fused, split);
  } else {
    k << "\n// " << what << " along " << (last ? "the last dim: a warp per row" : "a middle dim: a thread per position")
      << transforms << (fused ? ", with the elementwise chain after it fused before the store" : "") << ".\n";
    k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n"
      << name << "(" << join(kp.decls, ", ") << ") {\n"
      << pro_code;
    if (last) {
      warp_rows(k, s, ROWS, X, Y, *epi, fused);
      step.grid = {"ceil_div(" + paren(product(outer)) + ", " + std::to_string(B / 32) + ")", "1", "1"};
    } else {
      k << "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
      k << "  if (t >= " << ROWS << " * " << INNER << ") return;\n";
      k << "  const long long o = t / " << INNER << ", j = t % " << INNER << ";\n";
      k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
      k << "  " << T << " acc = " << s.id << ";\n";
      const bool plain = !lay.exclusive && !lay.reverse_in && !pro;
      const std::string x_at =
          plain ? X + "[base + c * " + INNER + "]" : s.load(pro ? "base" : "(" + X + " + base)", "c", INNER);
      const std::string y_at = "base + " + (lay.reverse_out ? paren(s.dst("c")) : std::string("c")) + " * " + INNER;
      k << "  for (long long c = 0; c < " << C << "; ++c) {\n    acc = " << s.op("acc", x_at) << ";\n";
      if (fused)
        k << "    const float res = (float)acc;\n    const long long i = " << y_at << ";\n"
          << epi->code << epi->stores << "  }\n}\n";
      else
        k << "    " << Y << "[" << y_at << "] = (float)acc;\n  }\n}\n";
      step.grid = {"ceil_div(" + paren(product(outer)) + " * " + paren(product(inner)) + ", " + std::to_string(B) + ")",
                   "1", "1"};
    }
  }
  cx.src += k.str();
  step.args = kp.args;
  cx.out.plan.steps.push_back(step);
  cx.written.insert(out_value);
  return {};
}

}  // namespace ks::rules
