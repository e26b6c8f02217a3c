#include "coder/rules/templates/row_reduce.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

#include "coder/rules/templates/middle_reduce.hpp"
#include "coder/rules/templates/row_split.hpp"
#include "coder/rules/templates/twin_rows.hpp"
#include "coder/rules/text/chain.hpp"

namespace ks::rules {

namespace {

// A moment norm's value (norm_y) times the weight read as `w`, plus the bias read as
// `b`, where the norm has them.
std::string scaled_and_shifted(const reduce_parts& rp, const std::string& w, const std::string& b) {
  std::string y = rp.norm_y;
  if (!rp.W.empty()) y = "(" + y + ") * " + w;
  if (!rp.Bi.empty()) y += " + " + b;
  return y;
}

// A normalisation's row constants (`prelude`, from the combined state) and its value
// of element `v` at column c (`y`).
void normalisation_text(reduce_parts& rp) {
  const reduction_spec& r = rp.r;
  const std::string& C = rp.C;
  if (r.op == "softmax")
    rp.prelude = "  const float inv = 1.0f / s;\n", rp.y = "KS_EXP(v - m) * inv";
  else if (r.op == "log_softmax")
    rp.prelude = "  const float lse = m + logf(s);\n", rp.y = "v - lse";
  else if (r.moment_norm()) {
    if (r.acc == acc_kind::welford) {
      // batch_norm's rows are merged across the batch: its count is the merged one.
      rp.prelude = "  const float mean = wm;\n  const float var = fmaxf(w2 / " +
                   (r.batch_stats ? std::string("wn") : "(float)" + C) + ", 0.0f);\n";
    } else {
      rp.prelude = "  const float mean_d = s1 / (float)" + C + ";\n  const float mean = shift + mean_d;\n";
      rp.prelude += "  const float var = fmaxf(s2 / (float)" + C + " - mean_d * mean_d, 0.0f);\n";
    }
    rp.prelude += "  const float rstd = rsqrtf(var + " + flit(r.eps) + ");\n";
    rp.y = "(v - mean) * rstd";
    // layer_norm's affine is per element of the row; instance_norm's per row (its
    // channel), read once; group_norm's per channel of the row (group_pass2).
    std::string at = "[c]";
    if (r.channel_affine && (!rp.W.empty() || !rp.Bi.empty())) {
      // (batch_norm's merge of the channel's partials has `ch` already.)
      if (!r.batch_stats) rp.prelude += "  const long long ch = row % " + rp.CH + ";\n";
      at = "[ch]";
    }
    rp.norm_y = rp.y;
    rp.column_affine = at == "[c]";
    rp.y = scaled_and_shifted(rp, rp.W + at, rp.Bi + at);
  }
}

// A 3xTF32 product's result stored with padded rows (lowering_context::row_pitch,
// split_tf32.hpp) as the reduction's input or read by its prologue: only a reduction
// over the rows of that 2-d value reads it (split_tf32's output_rows_paddable), which
// is always the rows form (several rows), whose kernels hold each row in `row`:
// `reads` then reads the prologue's pitched operands at i + row * (pitch - N), and
// rp.X is the row's own start.
status pitched_rows(lowering_context& cx, reduce_parts& rp, chain_reads& reads) {
  bool pitched = cx.row_pitch.count(rp.r.input) > 0;
  if (rp.pro)
    for (auto* n : rp.pro->nodes)
      for (auto& id : n->inputs) pitched = pitched || cx.row_pitch.count(id) > 0;
  if (!pitched) return {};
  if (rp.in->shape.size() != 2 || rp.r.first != 1 || rp.r.last != 2 || rp.outer_n < 2 || rp.r.groups > 0 ||
      rp.r.batch_stats)
    return error{"aten::" + rp.r.op + ": reads a product stored with padded rows, but not by its rows"};
  rp.pitched_rows = true;
  reads.pitched_row = "row";
  return {};
}

}  // namespace

result<reduce_parts> gather_parts(lowering_context& cx, size_t si, bool pass1_only, const kernel_params* start) {
  stage& st = cx.stages[si];
  const graph_node& n = *st.nodes[0];
  auto spec = read_reduction(cx, n, base_kind(n.kind));
  if (!spec) return error{spec.message()};
  reduce_parts rp;
  rp.r = *spec;
  const reduction_spec& r = rp.r;
  rp.in = &cx.shapes.at(r.input);
  const shaped& in = *rp.in;
  kernel_params& kp = rp.kp;
  if (start) kp = *start;
  rp.outer.assign(in.sym.begin(), in.sym.begin() + r.first);
  rp.red.assign(in.sym.begin() + r.first, in.sym.begin() + r.last);
  rp.inner.assign(in.sym.begin() + r.last, in.sym.end());
  for (int64_t d = r.last; d < static_cast<int64_t>(in.shape.size()); ++d) rp.inner_n *= in.shape[d];
  for (int64_t d = 0; d < r.first; ++d) rp.outer_n *= in.shape[d];
  // The length of the reduced span at the task's own shapes (the graph's as fallback):
  // what the row cache and the seeds' row mapping are sized for.
  int64_t graph_len = 1;
  for (int64_t d = r.first; d < r.last; ++d) graph_len *= in.shape[d];
  if (r.groups > 0) {
    // group_norm: a row is a (batch, group) pair; the group's channels and their
    // spatial dims are contiguous.
    const std::string G = std::to_string(r.groups);
    rp.outer = {in.sym[0], G};
    rp.red = {paren(in.sym[1]) + " / " + G};
    rp.red.insert(rp.red.end(), in.sym.begin() + 2, in.sym.end());
    rp.outer_n *= r.groups;
    graph_len /= r.groups;
  }
  rp.row_len = cx.target_size(rp.red, graph_len);
  rp.rows_n = cx.target_size(rp.outer, rp.outer_n);
  if (rp.r.acc == acc_kind::arg && rp.row_len > 2147483647LL)
    return error{"aten::" + rp.r.op + " over " + std::to_string(rp.row_len) +
                 " elements: its kernel carries indices as 32-bit ints"};
  // argmax/argmin rows are not split: a split row's blocks would merge indices too,
  // which the combine does, but nothing measured asks for it yet.
  if (rp.inner_n == 1 && !(rp.outer_n == 1 && !rp.r.normalizes()) && rp.r.acc != acc_kind::arg)
    rp.split = choose_split(cx.p, cx.dev, rp);
  // Split rows merge partial states of whole blocks: Welford's merge keeps the
  // variance of rows of millions within fp32's rounding, where shifted sums would
  // cancel. batch_norm always merges its rows' partials (across the batch). Elsewhere
  // the params say which.
  if (rp.r.acc == acc_kind::moments && (rp.split > 1 || rp.r.batch_stats || cx.p.moments == param::moments::welford))
    rp.r.acc = acc_kind::welford;
  if (rp.r.acc == acc_kind::welford) cx.uses_welford = true;
  // The online max-and-sum state (softmax, log_softmax, logsumexp) exps and merges
  // with the fast-math helpers (combine.cpp's acc_of and merge, row_cache.cpp).
  if (rp.r.acc == acc_kind::online) cx.uses_fast_math = true;
  rp.ROWS = kp.int64(product(rp.outer));
  rp.C = kp.int64(product(rp.red));
  if (rp.inner_n != 1) rp.INNER = kp.int64(product(rp.inner));
  const reduce_stage& red = st.as_kind<reduce_stage>();
  rp.pro = red.prologue >= 0 ? &cx.stages[red.prologue] : nullptr;
  chain_reads pro_reads;
  if (auto s = pitched_rows(cx, rp, pro_reads); !s) return error{s.message()};
  if (rp.pro) {
    if (auto s = chain_code(cx, *rp.pro, "i", kp, rp.load_code, rp.var, "", pro_reads); !s) return error{s.message()};
  }
  if (!rp.pro) rp.X = kp.tensor_in(cx.tensor_of.at(r.input));
  // Padded rows: the row's start, row * pitch (the loads' index is row * C + c).
  if (!rp.pro && rp.pitched_rows)
    rp.X = "(" + rp.X + " + row * (" + kp.int64(cx.row_pitch.at(r.input)) + " - " + rp.C + "))";
  if (pass1_only) {
    rp.a = acc_of(r);
    rp.name = kernel_name(si, r.op);
    rp.decl = declare_state(rp.a);
    return rp;
  }
  if (!r.weight.empty()) rp.W = kp.tensor_in(cx.tensor_of.at(r.weight));
  if (!r.bias.empty()) rp.Bi = kp.tensor_in(cx.tensor_of.at(r.bias));
  if (r.channel_affine) rp.CH = kp.int64(in.sym[1]);
  if (r.groups > 0) {
    rp.G = kp.int64(std::to_string(r.groups));
    rp.CG = kp.int64(rp.red[0]);
    rp.SP = kp.int64(product(std::vector<std::string>(in.sym.begin() + 2, in.sym.end())));
  }
  rp.epi = red.epilogue >= 0 ? &cx.stages[red.epilogue] : nullptr;
  if (rp.epi && r.acc == acc_kind::arg)
    return error{"aten::" + r.op +
                 " followed by elementwise ops (on its int64 indices) is not supported by the rules coder"};
  if (rp.epi) {
    rp.epi_var[r.output] = "red";
    if (auto s = chain_code(cx, *rp.epi, "i", kp, rp.epi_code, rp.epi_var, "p"); !s) return error{s.message()};
    for (auto* en : rp.epi->nodes) {
      auto it = cx.tensor_of.find(en->outputs[0]);
      if (it != cx.tensor_of.end()) rp.epi_out.push_back({en->outputs[0], it->second});
    }
    for (auto& [v, t] : rp.epi_out) t = kp.tensor_out(t);
  }
  rp.OUT = rp.epi ? std::string() : kp.tensor_out(cx.tensor_of.at(r.output), r.out_ctype());
  rp.a = acc_of(r);
  rp.name = kernel_name(si, r.op);
  rp.decl = declare_state(rp.a);
  normalisation_text(rp);
  return rp;
}

namespace {

// The whole second pass over `loop`: the normalisation's constants, then each
// element's value, stored or handed to the epilogue.
std::string second_pass(lowering_context& cx, const reduce_parts& rp, const std::string& loop, const std::string& idx) {
  return rp.prelude + loop + " {\n" + reduce_load(rp, idx, "v") + pass2_body(cx, rp, idx) + "  }\n";
}

}  // namespace

std::string strided_pass1(const std::vector<pass1_reader>& rs, int U, const std::string& first, const std::string& step,
                          const std::string& base) {
  const std::string& C = rs.front().rp->C;
  std::ostringstream k;
  k << "  long long c = " << first << ";\n";
  k << "  for (; c + " << U - 1 << " * " << step << " < " << C << "; c += " << U << " * " << step << ") {\n";
  for (int u = 0; u < U; ++u)
    for (const pass1_reader& r : rs) {
      std::ostringstream idx;
      idx << base << "c";
      if (u > 0) idx << " + " << u << " * " << step;
      std::string var = r.v;
      var += std::to_string(u);
      k << reduce_load(*r.rp, idx.str(), var);
    }
  for (int u = 0; u < U; ++u)
    for (const pass1_reader& r : rs) {
      k << "    { ";
      // An argmax's update reads the index `c`.
      if (r.rp->r.acc == acc_kind::arg && u > 0)
        k << "const long long cu = c + " << u << " * " << step << "; const long long c = cu; ";
      k << "const float v = " << r.v << u << "; " << r.a.update << " }\n";
    }
  k << "  }\n";
  k << "  for (; c < " << C << "; c += " << step << ") {\n";
  for (const pass1_reader& r : rs) {
    if (rs.size() == 1) {
      k << reduce_load(*r.rp, base + "c", "v") << "    " << r.a.update << "\n";
    } else {
      k << reduce_load(*r.rp, base + "c", r.v + "t") << "    { const float v = " << r.v << "t; " << r.a.update
        << " }\n";
    }
  }
  k << "  }\n";
  return k.str();
}

namespace {

// The first pass's grid-strided loop over the whole tensor.
std::string whole_tensor_loop(const reduce_parts& rp, const acc_text& a, int U) {
  if (U <= 1)
    return "  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < " + rp.C +
           "; c += (long long)gridDim.x * blockDim.x) {\n" + reduce_load(rp, "c", "v") + "    " + a.update + "\n  }\n";
  return "  const long long stride = (long long)gridDim.x * blockDim.x;\n" +
         strided_pass1({{&rp, a, "v"}}, U, "(long long)blockIdx.x * blockDim.x + threadIdx.x", "stride", "");
}

// A reduction of everything: one row would be one block for the whole tensor.
// Instead, blocks reduce grid-strided slices into partial states, and a second
// kernel of one block combines them (deterministic: no atomics).
status emit_whole_tensor(lowering_context& cx, size_t si, const reduce_parts& rp, const reduce_layout& lay) {
  const reduction_spec& r = rp.r;
  const acc_text& a = rp.a;
  const int B = lay.block;
  const std::string& name = rp.name;
  std::ostringstream k;
  const std::string P = "PARTS" + std::to_string(si);
  const std::string part = "partial" + std::to_string(si);
  // Kernel A writes the partials: rebuild its parameters with the scratch as output.
  kernel_params ka = rp.kp;
  ka.decls.pop_back();
  ka.args.pop_back();
  // A prologue with broadcast operands (a hinge loss's targets along the columns) is
  // walked as rows x columns, as an elementwise kernel is (chain.hpp's split mode): a
  // 64-bit division per element for its flat index would bound the kernel, not DRAM.
  // The shift of a moments accumulation reads element 0 by the flat index: no split.
  const size_t sp =
      rp.pro && r.acc != acc_kind::moments && rp.pro->as_kind<elementwise_stage>().iter.shape == rp.in->shape
          ? choose_column_split(cx, *rp.pro)
          : 0;
  std::string rows_loop;
  std::vector<std::string> grid = {P, "1", "1"};
  if (sp > 0) {
    const shaped& it = rp.pro->as_kind<elementwise_stage>().iter;
    const std::string rows = product(std::vector<std::string>(it.sym.begin(), it.sym.begin() + sp));
    const std::string cols = product(std::vector<std::string>(it.sym.begin() + sp, it.sym.end()));
    // Blocks across a row (about 8 trips a thread in it), rows until about 1024 blocks.
    const std::string PX = P + "_X", PY = P + "_Y";
    cx.out.plan.constants[PX] = "max(1, min(1024, ceil_div(" + paren(cols) + ", " + std::to_string(B * 8) + ")))";
    cx.out.plan.constants[PY] = "max(1, min(" + paren(rows) + ", min(65535, ceil_div(1024, " + PX + "))))";
    cx.out.plan.constants[P] = PX + " * " + PY;
    grid = {PX, PY, "1"};
    std::string code;
    std::map<std::string, std::string> var;
    chain_reads reads;
    reads.split = sp;
    if (auto s = chain_code(cx, *rp.pro, "i", ka, code, var, "", reads); !s) return s;
    const std::string ROWS = ka.int64(rows), COLS = ka.int64(cols);
    rows_loop =
        "  for (long long row = blockIdx.y; row < " + ROWS + "; row += gridDim.y) {\n  const long long base = row * " +
        COLS + ";\n#pragma unroll 4\n  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < " +
        COLS + "; c += (long long)gridDim.x * blockDim.x) {\n    float v;\n    {\n    const long long i = base + c;\n" +
        code + "    v = " + var.at(r.input) + ";\n    }\n    " + a.update + "\n  }\n  }\n";
  } else {
    cx.out.plan.constants[P] =
        "max(1, min(1024, ceil_div(" + paren(product(rp.red)) + ", " + std::to_string(B * 8) + ")))";
  }
  cx.out.plan.scratch.push_back({part, {std::to_string(a.state.size()) + " * " + P}, "float32", "none"});
  const std::string PART = ka.tensor_out(part);
  k << "\n// " << r.op << " of a whole tensor, first pass: each block reduces a grid-strided slice"
    << (rp.pro ? " (with the feeding chain fused into its loads)" : "")
    << (sp > 0 ? "; rows x columns (blockIdx.y walks the rows), so broadcast operands are indexed by row or column "
                 "without a division per element"
               : "")
    << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n"
    << name << "_part(" << join(ka.decls, ", ") << ") {\n";
  k << rp.decl;
  if (sp > 0) {
    k << rows_loop;
  } else {
    if (r.acc == acc_kind::moments) k << reduce_load(rp, "0", "shift");
    k << whole_tensor_loop(rp, a, cx.p.elements_per_thread);
  }
  k << block_combine(r, a);
  const std::string block_id = sp > 0 ? "(blockIdx.y * gridDim.x + blockIdx.x)" : "blockIdx.x";
  const std::string blocks = sp > 0 ? "gridDim.x * gridDim.y" : "gridDim.x";
  k << "  if (threadIdx.x == 0) {";
  for (size_t q = 0; q < a.state.size(); ++q)
    k << " " << PART << "[" << q << " * " << blocks << " + " << block_id << "] = " << a.state[q] << ";";
  k << " }\n}\n";
  cx.add_kernel_step(name + "_part", grid, {std::to_string(B), "1", "1"}, ka.args);
  // Kernel B: one block over the partials.
  kernel_params kb;
  const std::string PIN = kb.tensor_in(part);
  const std::string NP = kb.int64(P);
  const std::string CB = kb.int64(product(rp.red));
  const std::string OUTB = kb.tensor_out(cx.tensor_of.at(r.output), r.out_ctype());
  k << "\n// " << r.op << " of a whole tensor, second pass: one block combines the partial states.\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n"
    << name << "_final(" << join(kb.decls, ", ") << ") {\n";
  k << rp.decl;
  k << "  for (long long b = threadIdx.x; b < " << NP << "; b += blockDim.x) {\n";
  std::vector<std::string> other;
  for (size_t q = 0; q < a.state.size(); ++q) {
    k << "    const float p_" << a.state[q] << " = " << PIN << "[" << q << " * " << NP << " + b];\n";
    other.push_back("p_" + a.state[q]);
  }
  k << "    " << merge(r, a, other) << "\n  }\n";
  k << block_combine(r, a);
  k << "  if (threadIdx.x == 0) " << OUTB << "[0] = " << finish(r, a, CB) << ";\n}\n";
  cx.src += k.str();
  cx.add_kernel_step(name + "_final", {"1", "1", "1"}, {std::to_string(B), "1", "1"}, kb.args);
  cx.written.insert(r.output);
  return {};
}

// A row spread over a cluster of G blocks, after each block combined its chunk: the
// block's state into its shared memory, a barrier across the cluster, then every
// thread reads the G states from the blocks' shared memory and merges them in rank
// order, so every block holds the same bits (as row_split.hpp's second kernel). The
// arrive says this block has read the others' states; it waits for theirs before
// it leaves (ks_cluster_wait at the kernel's end), so its pass 2 does not wait.
std::string cluster_merge(const reduce_parts& rp, int G) {
  const acc_text& a = rp.a;
  std::string t = "  if (threadIdx.x == 0) {";
  for (size_t q = 0; q < a.state.size(); ++q) t += " ks_part[" + std::to_string(q) + "] = " + a.state[q] + ";";
  t += " }\n  ks_cluster_sync();\n  {\n    const float* const p0 = ks_cluster_map(ks_part, 0);\n   ";
  for (size_t q = 0; q < a.state.size(); ++q) t += " " + a.state[q] + " = p0[" + std::to_string(q) + "];";
  t += "\n  }\n  for (unsigned q = 1; q < " + std::to_string(G) +
       "; ++q) {\n    const float* const pq = ks_cluster_map(ks_part, q);\n";
  std::vector<std::string> other;
  for (size_t q = 0; q < a.state.size(); ++q) {
    t += "    const float p_" + a.state[q] + " = pq[" + std::to_string(q) + "];\n";
    other.push_back("p_" + a.state[q]);
  }
  t += "    " + merge(rp.r, rp.a, other) + "\n  }\n  ks_cluster_arrive();\n";
  return t;
}

// The comment and signature of a row, slice or per-output kernel.
std::string kernel_head(const reduce_parts& rp, const reduce_layout& lay) {
  const reduction_spec& r = rp.r;
  const bool in_rows = rp.inner_n == 1;
  std::ostringstream k;
  k << "\n// " << r.op << " over " << (in_rows ? "the last dims" : "a middle dim")
    << (rp.pro ? ", with the feeding elementwise chain fused into its loads" : "")
    << (in_rows ? (lay.warp ? (lay.lanes < 32 ? "; " + std::to_string(32 / lay.lanes) + " rows a warp"
                                              : std::string("; a warp per row"))
                            : std::string("; a block per row"))
                : (!r.normalizes() && !rp.epi
                       ? "; each output's column in slices, a warp per slice and a lane per output"
                       : "; each output's column in slices, a warp per slice and a lane per output, read twice"))
    << (lay.cache.kind == row_cache_layout::registers ? "; the row kept in registers between the passes" : "")
    << (lay.cache.kind == row_cache_layout::shared && lay.cache.cluster == 0
            ? "; the row kept in shared memory between the passes"
            : "")
    << (lay.cache.cluster > 1 ? "; the row spread over a cluster of " + std::to_string(lay.cache.cluster) +
                                    " blocks, each keeping its chunk in shared memory between the passes and reading "
                                    "the others' partial states from theirs"
                              : std::string())
    << ".\n";
  k << "extern \"C\" __global__ void ";
  if (lay.cache.cluster > 1) k << "__cluster_dims__(" << lay.cache.cluster << ", 1, 1) ";
  k << "__launch_bounds__(" << lay.block << ")\n" << rp.name << "(" << join(rp.kp.decls, ", ") << ") {\n";
  return k.str();
}

// Pass 2 of a row held nowhere on chip (or the single store of a plain reduction);
// `loop` is what pass 1's float4 part left, `full_loop` the whole row.
std::string rows_pass2(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay, const std::string& loop,
                       const std::string& full_loop) {
  static const char* lanes4[] = {"x", "y", "z", "w"};
  const reduction_spec& r = rp.r;
  const std::string lane = lay.lane(), width = lay.width();
  std::ostringstream k;
  if (r.normalizes() && rp.epi) {
    k << second_pass(cx, rp, full_loop, "base + c");
  } else if (r.normalizes() && lay.vec_rows) {
    k << rp.prelude;
    k << "  for (long long c4 = " << lane << "; c4 < c4n; c4 += " << width << ") {\n";
    k << "    const float4 q = reinterpret_cast<const float4*>(" << rp.X << " + base)[c4];\n    float4 o4;\n";
    for (int l = 0; l < 4; ++l)
      k << "    { const long long c = c4 * 4 + " << l << "; (void)c; const float v = q." << lanes4[l] << "; o4."
        << lanes4[l] << " = " << rp.y << "; }\n";
    k << "    reinterpret_cast<float4*>(" << rp.OUT << " + base)[c4] = o4;\n  }\n";
    k << loop << " {\n"
      << reduce_load(rp, "base + c", "v") << "    " << rp.OUT << "[base + c] = " << rp.y << ";\n  }\n";
  } else if (r.normalizes()) {
    k << second_pass(cx, rp, loop, "base + c");
  } else if (rp.epi) {
    k << pass2_head(rp, lay) << pass2_from(cx, rp, full_loop);
  } else {
    k << "  if (" << lane << " == 0) " << rp.OUT << "[row] = " << finish(r, rp.a, rp.C) << ";\n";
  }
  return k.str();
}

// The last dims: a block or a warp per row; pass 1 reduces the row (the cached part
// first), pass 2 normalises it or runs the epilogue.
status write_rows(lowering_context& cx, reduce_parts& rp, const reduce_layout& lay, std::ostringstream& k,
                  plan_step& step) {
  static const char* lanes4[] = {"x", "y", "z", "w"};
  const reduction_spec& r = rp.r;
  const acc_text& a = rp.a;
  const std::string& C = rp.C;
  const std::string lane = lay.lane(), width = lay.width();
  cx.out.longest_row = std::max(cx.out.longest_row, rp.row_len);
  const int G = lay.cache.cluster;
  // In a cluster, c walks the block's chunk: the row's column is c0 + c.
  if (auto s = index_epilogue_by_row(cx, rp, G > 1 ? "(c0 + c)" : "c"); !s) return s;
  if (G > 1) {
    // layer_norm's affine is read at the column too.
    rp.y = affine_y(rp, rp.W + "[c0 + c]", rp.Bi + "[c0 + c]");
    // The row's chunks as row_split.hpp cuts them (a multiple of 4: float4 stays
    // aligned); a chunk past the row's end is empty.
    const std::string g = std::to_string(G);
    k << "  const long long row = (long long)blockIdx.x / " << g << ", part = (long long)blockIdx.x % " << g
      << ";  // the cluster's rank\n";
    k << "  const long long chunk = ((" << C << " + " << G - 1 << ") / " << g << " + 3) / 4 * 4;\n";
    k << "  const long long c0 = min(" << C << ", part * chunk), c1 = min(" << C << ", c0 + chunk), cn = c1 - c0;\n";
    k << "  const long long base = row * " << C << " + c0;  // the block's chunk: base + c, 0 <= c < cn\n";
  } else if (lay.warp && lay.lanes < 32) {
    // Short rows: 32 / L rows a warp. A group past the last row repeats the last row
    // (the same values to the same places): the warp's shuffles need all its lanes.
    const std::string L = std::to_string(lay.lanes);
    k << "  const int lane = threadIdx.x & " << lay.lanes - 1 << ";\n";
    k << "  const long long first = ((long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31u)) / " << L << ";\n";
    k << "  if (first >= " << rp.ROWS << ") return;  // the whole warp leaves together\n";
    k << "  const long long row = min(((long long)blockIdx.x * blockDim.x + threadIdx.x) / " << L << ", " << rp.ROWS
      << " - 1);\n";
  } else if (lay.warp) {
    k << "  const int lane = threadIdx.x & 31;\n";
    k << "  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n";
    k << "  if (row >= " << rp.ROWS << ") return;  // the whole warp leaves together\n";
  } else {
    k << "  const long long row = blockIdx.x;\n";
  }
  if (G <= 1) k << "  const long long base = row * " << C << ";\n";
  k << rp.decl;
  // The shift of shifted sums: the row's first element, the same in every block of a
  // cluster (their sums then merge by adding).
  if (r.acc == acc_kind::moments) k << reduce_load(rp, G > 1 ? "row * " + C : "base", "shift");
  std::string loop = "  for (long long c = " + lane + "; c < " + cached_span(rp, lay.cache) + "; c += " + width + ")";
  const std::string full_loop = loop;
  if (lay.vec_rows) {
    k << "  const long long c4n = (" << C << " & 3) == 0 ? " << C << " / 4 : 0;\n";
    k << "  for (long long c4 = " << lane << "; c4 < c4n; c4 += " << width << ") {\n";
    k << "    const float4 q = reinterpret_cast<const float4*>(" << rp.X << " + base)[c4];\n";
    for (int l = 0; l < 4; ++l)
      k << "    { "
        << (r.acc == acc_kind::arg ? "const long long c = c4 * 4 + " + std::to_string(l) + "; " : std::string())
        << "const float v = q." << lanes4[l] << "; " << a.update << " }\n";
    k << "  }\n";
    loop = "  for (long long c = c4n * 4 + " + lane + "; c < " + C + "; c += " + width + ")";
  }
  if (lay.cache.kind == row_cache_layout::registers)
    k << registers_pass1(cx, rp, lay, loop);
  else if (lay.cache.kind == row_cache_layout::shared)
    k << shared_pass1(cx, rp, lay, loop);
  // A prologue's loads are scalar (no float4 form): several a thread in flight.
  if (rp.pro && !lay.vec_rows && lay.cache.kind == row_cache_layout::none && cx.p.elements_per_thread > 1)
    k << "  {\n" << strided_pass1({{&rp, a, "v"}}, cx.p.elements_per_thread, lane, width, "base + ") << "  }\n";
  else
    k << loop << " {\n" << reduce_load(rp, "base + c", "v") << "    " << a.update << "\n  }\n";
  k << (lay.warp ? warp_combine(r, a, lay.lanes) : block_combine(r, a));
  if (G > 1) k << cluster_merge(rp, G);
  if (lay.cache.kind == row_cache_layout::shared)
    k << shared_pass2(cx, rp, lay, loop);
  else if (lay.cache.kind == row_cache_layout::registers)
    k << registers_pass2(cx, rp, lay, loop);
  else if (r.groups > 0)
    k << group_pass2(cx, rp, "0", C, lane, width);
  else
    k << rows_pass2(cx, rp, lay, loop, full_loop);
  // A block leaves only once the others of its cluster have read its partial state.
  if (G > 1) k << "  ks_cluster_wait();\n";
  const int B = lay.block;
  std::string rpb = lay.warp ? std::to_string(B / lay.lanes) : "1";
  step.grid = {lay.warp ? "ceil_div(" + paren(product(rp.outer)) + ", " + rpb + ")" : product(rp.outer), "1", "1"};
  if (G > 1) {
    cx.uses_cluster = true;
    step.grid[0] = paren(product(rp.outer)) + " * " + std::to_string(G);
    // The partial state (16 bytes), then each tensor's chunk, up to the cap.
    step.shared_mem = "16 + " + std::to_string(4 * lay.cache.row_params.size()) + " * min(ceil_div(ceil_div(" +
                      product(rp.red) + ", " + std::to_string(G) + "), 4) * 4, " +
                      std::to_string(lay.cache.shared_cap()) + ")";
  } else if (lay.cache.kind == row_cache_layout::shared) {
    step.shared_mem = std::to_string(4 * lay.cache.row_params.size()) + " * min(" + product(rp.red) + ", " +
                      std::to_string(lay.cache.shared_cap()) + ")";
  }
  return {};
}

// A middle dim reduced to one value per output: a thread per output would leave too
// few loads in flight (outputs are few, columns long). Each output's column is cut
// into S = B/32 slices instead, one warp per slice with a lane per output (32
// consecutive outputs: coalesced along the inner dims), and the slices' states are
// combined in shared memory, in slice order.
void write_middle_slices(const reduce_parts& rp, const reduce_layout& lay, std::ostringstream& k, plan_step& step) {
  const reduction_spec& r = rp.r;
  const acc_text& a = rp.a;
  const std::string &C = rp.C, &INNER = rp.INNER;
  const int S = lay.block / 32;
  k << "  const int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;\n";
  k << "  const long long t = (long long)blockIdx.x * 32 + lane;\n";
  k << "  const bool live = t < " << rp.ROWS << " * " << INNER << ";\n";
  column_of(rp, k);
  k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
  k << rp.decl;
  if (r.acc == acc_kind::moments) k << reduce_load(rp, "base", "shift");
  k << "  if (live) {\n#pragma unroll 4\n  for (long long c = slice; c < " << C << "; c += " << S << ") {\n"
    << reduce_load(rp, "base + c * " + INNER, "v") << "    " << a.update << "\n  }\n  }\n";
  for (auto& v : a.state) k << "  __shared__ float sh_" << v << "[" << S << "][33];\n";
  for (auto& v : a.state) k << "  sh_" << v << "[slice][lane] = " << v << ";\n";
  k << "  __syncthreads();\n  if (slice != 0 || !live) return;\n";
  k << "  for (int q = 1; q < " << S << "; ++q) {\n";
  std::vector<std::string> other;
  for (auto& v : a.state) {
    k << "    const float p_" << v << " = sh_" << v << "[q][lane];\n";
    other.push_back("p_" + v);
  }
  k << "    " << merge(r, a, other) << "\n  }\n";
  k << "  " << rp.OUT << "[t] = " << finish(r, a, C) << ";\n";
  step.grid = {"ceil_div(" + paren(product(rp.outer)) + " * " + paren(product(rp.inner)) + ", 32)", "1", "1"};
}

}  // namespace

std::string group_pass2(lowering_context& cx, const reduce_parts& rp, const std::string& lo, const std::string& hi,
                        const std::string& lane, const std::string& width) {
  static const char* lanes4[] = {"x", "y", "z", "w"};
  const std::string &SP = rp.SP, &CG = rp.CG;
  const std::string y = "(v - mean) * a_k + b_k";
  std::ostringstream k;
  k << rp.prelude;
  k << "  const long long g0 = (row % " << rp.G << ") * " << CG << ";  // the group's first channel\n";
  // Channels shorter than the lanes (a group norm after a GEMM: one element each)
  // would leave all lanes but a few idle channel after channel: walk the row flat,
  // each element's channel from its column.
  k << "  if (" << SP << " < " << width << ") {\n";
  k << "  for (long long c = " << lo << " + " << lane << "; c < " << hi << "; c += " << width << ") {\n";
  k << "    const long long k = c / " << SP << ";\n";
  k << "    const float a_k = rstd" << (rp.W.empty() ? "" : " * " + rp.W + "[g0 + k]") << ";\n";
  k << "    const float b_k = " << (rp.Bi.empty() ? "0.0f" : rp.Bi + "[g0 + k]") << ";\n";
  k << reduce_load(rp, "base + c", "v") << pass2_body(cx, rp, "base + c", y) << "  }\n";
  k << "  } else\n";
  k << "  for (long long k = " << lo << " / " << SP << "; k < " << CG << " && k * " << SP << " < " << hi
    << "; ++k) {\n";
  k << "    const float a_k = rstd" << (rp.W.empty() ? "" : " * " + rp.W + "[g0 + k]") << ";\n";
  k << "    const float b_k = " << (rp.Bi.empty() ? "0.0f" : rp.Bi + "[g0 + k]") << ";\n";
  k << "    const long long s_lo = max(" << lo << " - k * " << SP << ", 0LL), s_hi = min(" << hi << " - k * " << SP
    << ", " << SP << ");\n";
  const std::string loop = "    for (long long s = s_lo + " + lane + "; s < s_hi; s += " + width +
                           ") {\n      const long long c = k * " + SP + " + s;\n" + reduce_load(rp, "base + c", "v") +
                           pass2_body(cx, rp, "base + c", y) + "    }\n";
  if (!rp.pro && !rp.epi) {
    // Channels 16-byte aligned: float4 loads and stores.
    k << "    if ((" << SP << " & 3) == 0) {\n";
    k << "      const long long cb = base + k * " << SP << ";\n";
    k << "      for (long long s4 = s_lo / 4 + " << lane << "; s4 < s_hi / 4; s4 += " << width << ") {\n";
    k << "        const float4 q = reinterpret_cast<const float4*>(" << rp.X << " + cb)[s4];\n        float4 o4;\n";
    for (auto* l : lanes4) k << "        { const float v = q." << l << "; o4." << l << " = " << y << "; }\n";
    k << "        reinterpret_cast<float4*>(" << rp.OUT << " + cb)[s4] = o4;\n      }\n      continue;\n    }\n";
  }
  k << loop << "  }\n";
  return k.str();
}

std::string affine_y(const reduce_parts& rp, const std::string& w, const std::string& b) {
  return rp.column_affine ? scaled_and_shifted(rp, w, b) : rp.y;
}

namespace {

// A fused chain's statements written again at the flat index i with `names` for parts
// of it, into `code` and `var` (from `var0`, the values given).
status rewrite_chain(lowering_context& cx, reduce_parts& rp, const stage& chain, const std::string& tag,
                     const std::map<std::string, std::string>& names, std::string& code,
                     std::map<std::string, std::string>& var, const std::map<std::string, std::string>& var0,
                     chain_reads& used) {
  chain_reads reads;
  reads.index_names = names;
  if (rp.pitched_rows) reads.pitched_row = "row";
  std::string again;
  std::map<std::string, std::string> var_again = var0;
  const size_t params = rp.kp.decls.size();
  if (auto s = chain_code(cx, chain, "i", rp.kp, again, var_again, tag, reads); !s) return s;
  // Only the index changes: every parameter it reads was handed out the first time.
  if (rp.kp.decls.size() != params) return error{"reduction: a fused chain read a new parameter when indexed again"};
  code = again;
  var = var_again;
  used = reads;
  return {};
}

}  // namespace

status index_epilogue_by_row(lowering_context& cx, reduce_parts& rp, const std::string& column) {
  // In a row, i = row * C + column with 0 <= column < C.
  if (rp.epi) {
    const std::map<std::string, std::string> names = {{"(i % " + rp.C + ")", column}, {"(i / " + rp.C + ")", "row"}};
    if (auto s =
            rewrite_chain(cx, rp, *rp.epi, "p", names, rp.epi_code, rp.epi_var, {{rp.r.output, "red"}}, rp.epi_reads);
        !s)
      return s;
  }
  return index_prologue_by_row(cx, rp);
}

status index_prologue_by_row(lowering_context& cx, reduce_parts& rp) {
  // Operands along the rows (a convolution's bias before an instance norm): row is the
  // same in every loop over the row, so what is computed from it alone leaves the loop.
  if (!rp.pro) return {};
  return rewrite_chain(cx, rp, *rp.pro, "", {{"(i / " + rp.C + ")", "row"}}, rp.load_code, rp.var, {}, rp.pro_reads);
}

status index_prologue_by_channel(lowering_context& cx, reduce_parts& rp) {
  // Over a middle dim, i = (o * C + c) * INNER + j with 0 <= c < C: an operand along
  // the reduced dims alone (a convolution's bias before a min over channels) is read
  // at c, without a 64-bit division and modulo per element. The moments' shift is
  // loaded at c = 0, outside the loops over c: left as it is.
  if (!rp.pro || rp.INNER.empty() || rp.r.acc == acc_kind::moments || rp.r.acc == acc_kind::welford) return {};
  return rewrite_chain(cx, rp, *rp.pro, "", {{"((i / " + rp.INNER + ") % " + rp.C + ")", "c"}}, rp.load_code, rp.var,
                       {}, rp.pro_reads);
}

std::string chain_holding(lowering_context& cx, const reduce_parts& rp, bool epilogue,
                          const std::map<std::string, std::string>& held) {
  const stage* chain = epilogue ? rp.epi : rp.pro;
  if (!chain) return "";
  chain_reads reads = epilogue ? rp.epi_reads : rp.pro_reads;
  reads.held_reads = held;
  kernel_params kp = rp.kp;
  std::map<std::string, std::string> var;
  if (epilogue) var[rp.r.output] = "red";
  std::string code;
  const status s = chain_code(cx, *chain, "i", kp, code, var, epilogue ? "p" : "", reads);
  if (!s) throw std::logic_error("reduction: a fused chain written once failed when written again: " + s.message());
  if (kp.decls.size() != rp.kp.decls.size())
    throw std::logic_error("reduction: a fused chain read a new parameter when written again");
  return code;
}

std::string reduce_load(const reduce_parts& rp, const std::string& idx, const std::string& into) {
  if (!rp.pro) return "    const float " + into + " = " + rp.X + "[" + idx + "];\n";
  return "    float " + into + ";\n    {\n    const long long i = " + idx + ";\n" + rp.load_code + "    " + into +
         " = " + rp.var.at(rp.r.input) + ";\n    }\n";
}

std::string pass2_body(lowering_context& cx, const reduce_parts& rp, const std::string& idx, const std::string& yv) {
  return pass2_body(cx, rp, idx, yv, rp.epi_code);
}

std::string pass2_body(lowering_context& cx, const reduce_parts& rp, const std::string& idx, const std::string& yv,
                       const std::string& epi_code) {
  const std::string& yy = yv.empty() ? rp.y : yv;
  if (!rp.epi) return "    " + rp.OUT + "[" + idx + "] = " + yy + ";\n";
  std::string t = "    const float red = " + yy + ";\n    const long long i = " + idx + ";\n" + epi_code;
  for (auto& [v, param] : rp.epi_out) t += "    " + param + "[i] = " + rp.epi_var.at(v) + ";\n";
  for (auto& [v, param] : rp.epi_out) cx.written.insert(v);
  return t;
}

std::string pass2_from(lowering_context& cx, const reduce_parts& rp, const std::string& loop) {
  if (rp.r.normalizes())
    return loop + " {\n" + reduce_load(rp, "base + c", "v") + pass2_body(cx, rp, "base + c") + "  }\n";
  std::string t = loop + " {\n    const long long i = base + c;\n" + rp.epi_code;
  for (auto& [v, param] : rp.epi_out) t += "    " + param + "[i] = " + rp.epi_var.at(v) + ";\n";
  for (auto& [v, param] : rp.epi_out) cx.written.insert(v);
  return t + "  }\n";
}

std::string pass2_head(const reduce_parts& rp, const reduce_layout& lay) {
  std::string t = rp.r.normalizes() ? rp.prelude : "  const float red = " + finish(rp.r, rp.a, rp.C) + ";\n";
  if (lay.cache.store_exp)
    t += "  const float kt = KS_EXP(mref - m) * inv;  // this thread's exps, rescaled to the row's\n";
  return t;
}

reduce_layout choose_reduce_layout(const lowering_params& p, const reduce_parts& rp, const lowering_device& dev) {
  reduce_layout lay;
  const reduction_spec& r = rp.r;
  if (rp.inner_n == 1 && rp.outer_n == 1 && !r.normalizes() && rp.in->shape.size() > 0)
    lay.form = reduce_layout::whole_tensor;
  else if (rp.inner_n == 1)
    lay.form = reduce_layout::rows;
  else if (!r.normalizes() && !rp.epi)
    lay.form = reduce_layout::middle_slices;
  else
    lay.form = reduce_layout::middle_two_pass;
  // batch_norm's rows are merged across the batch: always the split rows' kernels
  // (SPLIT may be 1: a block per row, the merge across the batch all the same).
  lay.split = lay.form == reduce_layout::rows && (rp.split > 1 || r.batch_stats);
  // Split rows are walked by blocks whatever the mapping asked: a row is long. Short
  // rows are a warp's whatever it asked: the mapping is one per seed, and a graph that
  // has long rows too took blocks for every row (level 3's 46_NetVladWithGhostClusters:
  // its softmax over rows of 48 ran a block of 256 threads a row, its normalisation's
  // rows are 16384 long; 0.78x of eager).
  const bool short_rows = rp.row_len > 0 && rp.row_len <= kShortRow;
  lay.warp = (p.row_mapping == param::row_mapping::warp || short_rows) && rp.inner_n == 1 && !lay.split;
  // Short rows share a warp: at least 4 elements a lane (at the target shapes).
  if (lay.warp && lay.form == reduce_layout::rows)
    while (lay.lanes > 1 && rp.row_len > 0 && rp.row_len <= 4 * (lay.lanes / 2)) lay.lanes /= 2;
  lay.block = p.block_size;
  if (lay.form == reduce_layout::rows && !lay.split) lay.cache = choose_row_cache(p, dev, rp, lay.warp, lay.lanes);
  // Rows too few for a block each, but each held by a cluster whose blocks reach every
  // SM: the cluster reads a row once where split rows read it twice.
  if (lay.split && !r.batch_stats) {
    const row_cache_layout c = choose_row_cache(p, dev, rp, false);
    if (c.cluster > 1 && rp.rows_n * c.cluster >= dev.multiprocessors) {
      lay.split = false;
      lay.warp = false;
      lay.cache = c;
    }
  }
  if (lay.cache.cluster > 1) lay.block = cluster_threads(p, dev, lay.cache, rp.row_len);
  // Rows read as float4 when they are 16-byte aligned (C % 4 == 0; buffers are
  // aligned), the rest element by element.
  lay.vec_rows = p.vector_width == 4 && !rp.pro && lay.cache.kind == row_cache_layout::none;
  return lay;
}

status emit_reduce(lowering_context& cx, size_t si) {
  auto parts = gather_parts(cx, si);
  if (!parts) return error{parts.message()};
  reduce_parts& rp = *parts;
  const reduce_layout lay = choose_reduce_layout(cx.p, rp, cx.dev);
  if (lay.form == reduce_layout::middle_slices || lay.form == reduce_layout::middle_two_pass)
    if (auto s = index_prologue_by_channel(cx, rp); !s) return s;
  if (lay.form == reduce_layout::whole_tensor) return emit_whole_tensor(cx, si, rp, lay);
  if (lay.split) return emit_split_rows(cx, si, rp, lay);
  if (const int sj = cx.stages[si].as_kind<reduce_stage>().twin; sj >= 0)
    return emit_twin_rows(cx, si, static_cast<size_t>(sj), rp, lay);
  std::ostringstream k;
  k << kernel_head(rp, lay);
  plan_step step;
  step.kind = "kernel";
  step.name = rp.name;
  step.block = {std::to_string(lay.block), "1", "1"};
  if (lay.form == reduce_layout::rows) {
    if (auto s = write_rows(cx, rp, lay, k, step); !s) return s;
  } else if (lay.form == reduce_layout::middle_slices) {
    write_middle_slices(rp, lay, k, step);
  } else if (auto s = write_middle_two_pass(cx, rp, lay, k, step); !s) {
    return s;
  }
  k << "}\n";
  cx.src += k.str();
  step.args = rp.kp.args;
  cx.out.plan.steps.push_back(step);
  cx.written.insert(rp.r.output);
  return {};
}

}  // namespace ks::rules
