#include "coder/rules/templates/twin_rows.hpp"

#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "coder/rules/templates/row_reduce.hpp"

namespace ks::rules {

namespace {

// One state variable and no pass after the combine.
bool plain_acc(const reduction_spec& r) {
  return !r.normalizes() && r.groups == 0 && !r.channel_affine &&
         (r.acc == acc_kind::sum || r.acc == acc_kind::max || r.acc == acc_kind::min);
}

bool plain_rows(const reduce_parts& rp, const reduce_layout& lay) {
  return plain_acc(rp.r) && rp.pro && !rp.epi && lay.form == reduce_layout::rows && !lay.split &&
         lay.cache.kind == row_cache_layout::none && !lay.vec_rows && (!lay.warp || lay.lanes == 32);
}

// Whether stage sj (and its prologue) reads only inputs, constants and values of
// stages before si other than si's own prologue.
bool reads_before(const lowering_context& cx, size_t si, size_t sj) {
  const int pro_j = cx.stages[sj].prologue(), pro_i = cx.stages[si].prologue();
  std::vector<int> own = {static_cast<int>(sj)};
  if (pro_j >= 0) own.push_back(pro_j);
  for (int s : own)
    for (const graph_node* n : cx.stages[s].nodes)
      for (const std::string& v : n->inputs) {
        auto it = cx.producer.find(v);
        if (it == cx.producer.end()) continue;
        const int p = it->second;
        if (p == own[0] || (own.size() > 1 && p == own[1])) continue;
        if (p >= static_cast<int>(si) || p == pro_i) return false;
      }
  return true;
}

// The second's parameters continue the first's (shared tensors and sizes, one name);
// it is read as the first is: the same rows, block and mapping.
result<reduce_parts> second_parts(lowering_context& cx, size_t si, size_t sj, const reduce_parts& rp,
                                  const reduce_layout& lay) {
  auto second = gather_parts(cx, sj, false, &rp.kp);
  if (!second) return error{second.message()};
  const reduce_layout lq = choose_reduce_layout(cx.p, *second, cx.dev);
  if (!plain_rows(*second, lq) || lq.warp != lay.warp || lq.block != lay.block || second->C != rp.C ||
      second->ROWS != rp.ROWS)
    return error{"twin rows: stage " + std::to_string(sj) + " is not read as stage " + std::to_string(si) + " is"};
  return second;
}

// The stage that can be read beside reduction `si` (parts `rp`, layout `lay`), or -1.
int find_twin_rows(lowering_context& cx, size_t si, const reduce_parts& rp, const reduce_layout& lay) {
  if (!plain_rows(rp, lay)) return -1;
  for (size_t sj = si + 1; sj < cx.stages.size(); ++sj) {
    const reduce_stage* st = cx.stages[sj].get<reduce_stage>();
    if (!st || st->twin_of >= 0) continue;
    if (st->prologue < 0 || st->epilogue >= 0) continue;
    const graph_node& n = *cx.stages[sj].nodes[0];
    auto spec = read_reduction(cx, n, base_kind(n.kind));
    if (!spec || !plain_acc(*spec)) continue;
    const shaped& in = cx.shapes.at(spec->input);
    if (spec->first != rp.r.first || spec->last != rp.r.last || in.sym != rp.in->sym) continue;
    if (!reads_before(cx, si, sj)) continue;
    if (!second_parts(cx, si, sj, rp, lay)) continue;
    return static_cast<int>(sj);
  }
  return -1;
}

}  // namespace

void plan_twin_rows(lowering_context& cx) {
  for (size_t si = 0; si < cx.stages.size(); ++si) {
    const reduce_stage* red = cx.stages[si].get<reduce_stage>();
    if (!red || red->twin_of >= 0) continue;
    // The parts as emit_reduce gathers them, on a copy: gathering records what the
    // source needs (uses_welford, ...), which only emitting may.
    // A stage whose parts cannot be gathered (an error, or a lookup that throws on a
    // graph the template does not expect) has no twin: emit_reduce reports it in turn,
    // after the stages before it.
    int sj = -1;
    try {
      lowering_context scratch(cx);
      auto parts = gather_parts(scratch, si);
      if (!parts) continue;
      const reduce_layout lay = choose_reduce_layout(cx.p, *parts, cx.dev);
      sj = find_twin_rows(scratch, si, *parts, lay);
    } catch (const std::exception&) {
      continue;
    }
    if (sj < 0) continue;
    cx.stages[si].as_kind<reduce_stage>().twin = sj;
    cx.stages[sj].as_kind<reduce_stage>().twin_of = static_cast<int>(si);
  }
}

status emit_twin_rows(lowering_context& cx, size_t si, size_t sj, reduce_parts& rp, const reduce_layout& lay) {
  auto second = second_parts(cx, si, sj, rp, lay);
  if (!second) return error{second.message()};
  reduce_parts& rq = *second;
  if (auto s = index_epilogue_by_row(cx, rp); !s) return s;
  if (auto s = index_epilogue_by_row(cx, rq); !s) return s;
  cx.out.longest_row = std::max(cx.out.longest_row, rp.row_len);
  // The second's state under names of its own (a2 for a): every text of it below is
  // written from aq, whose names the combines derive theirs from (o_a2, sh_a2).
  const acc_text aq = acc_of(rq.r, "2");
  const std::string lane = lay.lane(), width = lay.width();
  const kernel_params& kp = rq.kp;
  std::ostringstream k;
  k << "\n// " << rp.r.op << " and " << rq.r.op
    << " over the last dims of the same rows, each with its feeding elementwise "
    << "chain fused into its loads, read in one pass" << (lay.warp ? "; a warp per row" : "; a block per row") << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << lay.block << ")\n"
    << rp.name << "(" << join(kp.decls, ", ") << ") {\n";
  if (lay.warp) {
    k << "  const int lane = threadIdx.x & 31;\n";
    k << "  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n";
    k << "  if (row >= " << rp.ROWS << ") return;  // the whole warp leaves together\n";
  } else {
    k << "  const long long row = blockIdx.x;\n";
  }
  k << "  const long long base = row * " << rp.C << ";\n";
  k << rp.decl << declare_state(aq);
  k << "  {\n"
    << strided_pass1({{&rp, rp.a, "v"}, {&rq, aq, "w"}}, std::max(1, cx.p.elements_per_thread), lane, width, "base + ")
    << "  }\n";
  k << (lay.warp ? warp_combine(rp.r, rp.a) : block_combine(rp.r, rp.a));
  k << (lay.warp ? warp_combine(rq.r, aq) : block_combine(rq.r, aq));
  k << "  if (" << lane << " == 0) {\n";
  k << "    " << rp.OUT << "[row] = " << finish(rp.r, rp.a, rp.C) << ";\n";
  k << "    " << rq.OUT << "[row] = " << finish(rq.r, aq, rq.C) << ";\n  }\n}\n";
  cx.src += k.str();
  cx.add_kernel_step(rp.name,
                     {lay.warp ? "ceil_div(" + paren(product(rp.outer)) + ", " + std::to_string(lay.block / 32) + ")"
                               : product(rp.outer),
                      "1", "1"},
                     {std::to_string(lay.block), "1", "1"}, kp.args);
  cx.written.insert(rp.r.output);
  cx.written.insert(rq.r.output);
  return {};
}

}  // namespace ks::rules
