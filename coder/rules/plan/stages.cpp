#include "coder/rules/plan/stages.hpp"

#include <algorithm>
#include <optional>

#include "coder/rules/plan/expr_text.hpp"
#include "coder/rules/plan/op_specs.hpp"
#include "coder/rules/plan/op_table.hpp"
#include "coder/rules/plan/shapes.hpp"

namespace ks::rules {

namespace {

status prepare(lowering_context& cx) {
  for (size_t i = 0; i < cx.g.input_values.size(); ++i) {
    const std::string& id = cx.g.input_values[i];
    const graph_value& v = cx.val(id);
    if (!v.is_tensor()) return error{"input " + cx.g.input_names[i] + " is not a tensor"};
    // A tensor nothing reads (a module's step counter, once its update is dropped)
    // needs no kernel argument, whatever its dtype.
    bool read = std::find(cx.g.outputs.begin(), cx.g.outputs.end(), id) != cx.g.outputs.end();
    for (const auto& n : cx.g.nodes) read = read || std::find(n.inputs.begin(), n.inputs.end(), id) != n.inputs.end();
    if (!read) continue;
    // Another dtype (cross_entropy's int64 targets, a bool mask) is read by library
    // steps only: template_refusal sends every node that reads it to ATen.
    shaped s{v.shape, {}};
    for (size_t d = 0; d < v.shape.size(); ++d)
      s.sym.push_back(cx.g.input_names[i] + ".shape[" + std::to_string(d) + "]");
    cx.shapes[id] = s;
    cx.input_name[id] = cx.g.input_names[i];
    cx.tensor_of[id] = cx.g.input_names[i];
  }
  cx.outputs = cx.g.outputs;
  if (cx.outputs.size() == 1) {
    for (auto& n : cx.g.nodes)
      if (n.kind == "prim::TupleConstruct" && n.outputs[0] == cx.outputs[0]) cx.outputs = n.inputs;
  }
  for (auto& o : cx.outputs) {
    const graph_value* v = cx.g.value(o);
    if (!v || !v->is_tensor()) return error{"graph output " + o + " is not a tensor"};
  }
  return {};
}

// Whether `v` is read, and only by steps that take their operands channels-last (the
// twins of op_table.hpp).
bool read_as_channels_last(const lowering_context& cx, const std::string& v) {
  bool read = false;
  for (const graph_node& m : cx.g.nodes) {
    if (!std::count(m.inputs.begin(), m.inputs.end(), v)) continue;
    const std::string kind = base_kind(m.kind);
    if (!runs_channels_last(kind) && kind != kConv2dNhwc) return false;
    read = true;
  }
  return read;
}

// Why no template takes `n` ("" when one does). Sets the shapes of its results when
// one does.
std::string template_refusal(lowering_context& cx, const graph_node& n, const std::string& kind) {
  // A network's layer on channels-last memory and the view it reads (conv_layout.hpp):
  // ATen's, by design rather than for want of a template.
  if (kind.rfind(kChannelsLastLayer, 0) == 0)
    return "a network's layer on channels-last memory: ATen through its schema, its result [N, H, W, C]";
  if (kind == "aten::permute" && n.outputs.size() == 1 && read_as_channels_last(cx, n.outputs[0]))
    return "the NCHW view of a channels-last value that a channels-last layer reads: a view, no copy";
  // A bool operand of an elementwise op whose result is float32 (x * mask) is what
  // ATen computes it as: promoted to 0.0f or 1.0f before the op (chain.cpp loads it
  // so). Elsewhere, and for other dtypes, the templates read float32 only.
  const bool bool_ok = op_is(kind, op_class::elementwise);
  for (auto& i : n.inputs)
    if (cx.is_tensor(i) && cx.val(i).dtype != "float32" && !(bool_ok && cx.val(i).dtype == "bool"))
      return "its input " + i + " is " + cx.val(i).dtype + "; the templates read float32" +
             (bool_ok ? " and bool only" : " only");
  if (auto s = shape_of_node(cx, n, kind); !s) return s.message();
  // A scan is a running sum: ATen's cumsum adds in its own order too (level 3's
  // 48_Mamba2ReturnY exponentiates a cumsum, and its output cancels terms of 1e14: an
  // ulp of another order there is past 1e-4).
  if (cx.p.library_reductions && (op_is(kind, op_class::reduction) || op_is(kind, op_class::scan)))
    return "library_reductions: ATen's own reduction, in its order of the sum";
  auto flag = [&](size_t k) {
    return k < n.inputs.size() && !cx.val(n.inputs[k]).numbers.empty() && cx.val(n.inputs[k]).numbers[0] != 0;
  };
  if (kind == "aten::logit" && n.inputs.size() > 1 && !cx.val(n.inputs[1]).is_none())
    return "aten::logit with eps is not supported by the rules coder";
  // In training mode only a constant p of 0 draws nothing (nn.Dropout(0.0) in a network's
  // layers): the identity, as in eval mode.
  if ((kind == "aten::dropout" || kind == "aten::feature_dropout" || kind == "aten::alpha_dropout") && flag(2) &&
      !(cx.val(n.inputs[1]).constant && cx.val(n.inputs[1]).numbers == std::vector<double>{0}))
    return n.kind + " in training mode is not supported by the rules coder";
  // An operand computed at run time would be baked in at the export size; sizes
  // (x * x.size(1)) are kernel arguments. (The other templates read only constants
  // and ranks from their non-tensor inputs: layer_norm, the length of
  // normalized_shape; a reduction, dims, which x.dim() - 1 gives at every size.)
  if (op_is(kind, op_class::elementwise))
    for (size_t k = 1; k < n.inputs.size(); ++k) {
      const graph_value& v = cx.val(n.inputs[k]);
      if (v.is_scalar() && !v.constant && !cx.scalar_sym.count(n.inputs[k]))
        return "its operand " + n.inputs[k] + " is a scalar computed at run time";
    }
  return {};
}

bool used_outside(const lowering_context& cx, const std::string& v, const graph_node* next, const stage& cur) {
  if (std::count(cx.outputs.begin(), cx.outputs.end(), v)) return true;
  bool seen_next = false;
  for (const graph_node& n : cx.g.nodes) {
    if (&n == next) {
      seen_next = true;
      continue;
    }
    bool in_cur = std::find(cur.nodes.begin(), cur.nodes.end(), &n) != cur.nodes.end();
    if (in_cur) continue;
    if (op_is(base_kind(n.kind), op_class::meta) && base_kind(n.kind) != "prim::ListConstruct") continue;
    if (std::count(n.inputs.begin(), n.inputs.end(), v)) return true;
  }
  (void)seen_next;
  return false;
}

// Elementwise node `n` joins the chain before it, or starts a chain.
void add_elementwise(lowering_context& cx, const graph_node& n) {
  const shaped& os = cx.shapes.at(n.outputs[0]);
  const elementwise_stage* last = cx.stages.empty() ? nullptr : cx.stages.back().get<elementwise_stage>();
  bool join = last != nullptr;
  // A chain that stores a value transposed walks its own shape in tiles: it does not
  // grow, and what reads the transposed value runs after it.
  if (join && !last->permuted.empty()) {
    if (os.shape != last->iter.shape) join = false;
    for (auto& [v, p] : last->permuted) join = join && !std::count(n.inputs.begin(), n.inputs.end(), p);
  }
  if (join) {
    const stage& cur = cx.stages.back();
    const std::vector<int64_t>& iter = last->iter.shape;
    if (os.shape != iter) {
      // Growing the iteration shape recomputes the chain per element: only when
      // nothing of the chain so far is needed outside it at its own shape.
      bool grows = os.shape.size() >= iter.size();
      if (grows) {
        int64_t off = static_cast<int64_t>(os.shape.size() - iter.size());
        for (size_t d = 0; d < iter.size(); ++d)
          if (iter[d] != 1 && iter[d] != os.shape[d + off]) grows = false;
      }
      if (grows)
        for (auto* prev : cur.nodes)
          if (used_outside(cx, prev->outputs[0], &n, cur)) grows = false;
      join = grows;
    }
  }
  if (!join) cx.stages.push_back(stage{{}, elementwise_stage{}});
  cx.stages.back().nodes.push_back(&n);
  cx.stages.back().as_kind<elementwise_stage>().iter = os;
}

// aten::add / aten::sub of a size and an integer constant (x.size(d) - 1): its
// expression, so that a narrow to that length keeps its size at every size.
void note_size_arithmetic(lowering_context& cx, const graph_node& n, const std::string& kind) {
  if ((kind != "aten::sub" && kind != "aten::add") || n.inputs.size() != 2 || n.outputs.size() != 1) return;
  auto sym = cx.scalar_sym.find(n.inputs[0]);
  const graph_value& k = cx.val(n.inputs[1]);
  if (sym == cx.scalar_sym.end() || !k.constant || k.type != "int" || k.numbers.size() != 1) return;
  cx.scalar_sym[n.outputs[0]] = "(" + sym->second + (kind == "aten::sub" ? " - " : " + ") +
                                std::to_string(static_cast<int64_t>(k.numbers[0])) + ")";
}

// reshape of an input (or of its view) that only adds or drops dims of size 1 (a
// convolution's bias [C, 1, 1] read as [C] by conv_layout.cpp): the same memory,
// read through its own shape; no step. Not an output of the graph.
bool reshape_view(lowering_context& cx, const graph_node& n) {
  if (n.kind != "aten::reshape" || n.inputs.size() != 2 || n.outputs.size() != 1 || !cx.input_name.count(n.inputs[0]) ||
      std::count(cx.outputs.begin(), cx.outputs.end(), n.outputs[0]) || !cx.val(n.inputs[1]).constant)
    return false;
  const shaped& in = cx.shapes.at(n.inputs[0]);
  const std::vector<int64_t>& to = cx.val(n.outputs[0]).shape;
  std::vector<size_t> kept;
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (in.shape[d] != 1) kept.push_back(d);
  shaped s{to, {}};
  size_t next = 0;
  for (int64_t size : to) {
    if (size == 1) {
      s.sym.push_back("1");
      continue;
    }
    if (next >= kept.size() || in.shape[kept[next]] != size) return false;
    s.sym.push_back(in.sym[kept[next++]]);
  }
  if (next != kept.size()) return false;
  cx.shapes[n.outputs[0]] = s;
  cx.input_name[n.outputs[0]] = cx.input_name.at(n.inputs[0]);
  cx.tensor_of[n.outputs[0]] = cx.tensor_of.at(n.inputs[0]);
  return true;
}

// permute(v, [0, 3, 1, 2]) of a value of [N, H, W, C] (conv_layout.cpp writes it for
// what the graph returns, and for what a reader it leaves in NCHW reads; [0, 4, 1, 2,
// 3] of [N, D, H, W, C] the same way): when the moved dim has size 1 and the graph
// returns the result, the same memory, which the value's kernel stores into the
// result's tensor; else, when the elementwise chain just planned computes v at its
// own shape, that chain's kernel stores it so (a transposed tile), into the result's
// tensor or a buffer of its own. Otherwise the permute is an ATen step (a fallback):
// always where only channels-last library steps read it (the NCHW view conv_layout
// hands a network's next layer: stored, it would be a round trip).
bool permute_store(lowering_context& cx, const graph_node& n) {
  if (n.kind != "aten::permute" || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  const bool returned = std::count(cx.outputs.begin(), cx.outputs.end(), n.outputs[0]) > 0;
  if (!returned && read_as_channels_last(cx, n.outputs[0])) return false;
  const graph_value& dims = cx.val(n.inputs[1]);
  auto in = cx.shapes.find(n.inputs[0]);
  if (in == cx.shapes.end() || cx.input_name.count(n.inputs[0])) return false;
  const shaped& s = in->second;
  const size_t r = s.shape.size();
  if (!dims.constant || (r != 4 && r != 5) ||
      dims.numbers != (r == 4 ? std::vector<double>{0, 3, 1, 2} : std::vector<double>{0, 4, 1, 2, 3}))
    return false;
  shaped out{{s.shape[0], s.shape[r - 1]}, {s.sym[0], s.sym[r - 1]}};
  for (size_t k = 1; k + 1 < r; ++k) {
    out.shape.push_back(s.shape[k]);
    out.sym.push_back(s.sym[k]);
  }
  if (out.shape != cx.val(n.outputs[0]).shape) return false;
  if (s.sym[r - 1] == "1") {
    if (!returned) return false;
    cx.shapes[n.outputs[0]] = out;
    cx.same_memory[n.outputs[0]] = n.inputs[0];
    return true;
  }
  elementwise_stage* chain = cx.stages.empty() ? nullptr : cx.stages.back().get<elementwise_stage>();
  if (!chain || chain->iter.shape != s.shape) return false;
  bool made = false;
  for (auto* m : cx.stages.back().nodes) made = made || m->outputs[0] == n.inputs[0];
  if (!made) return false;
  cx.shapes[n.outputs[0]] = out;
  chain->permuted.push_back({n.inputs[0], n.outputs[0]});
  return true;
}

// The stages, in graph order: a chain of elementwise ops or one node each.
status collect_stages(lowering_context& cx) {
  for (const graph_node& n : cx.g.nodes) {
    std::string kind = base_kind(n.kind);
    if (kind == "aten::size") {
      const graph_value& t = cx.val(n.inputs[0]);
      auto it = cx.shapes.find(n.inputs[0]);
      if (it != cx.shapes.end() && n.inputs.size() == 2) {
        int64_t d = normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers.at(0)), t.shape.size());
        cx.scalar_sym[n.outputs[0]] = it->second.sym.at(d);
      }
      continue;
    }
    if (op_is(kind, op_class::meta)) {
      if (kind == "prim::ListConstruct") cx.list_of[n.outputs[0]] = n.inputs;
      continue;
    }
    // unsqueeze of an input (a convolution's bias as split_conv_bias writes it, a
    // bias.unsqueeze(-1) of the model): a view of the same contiguous memory, read by
    // the kernels through its own shape; no step. (Not in place, and not an output of
    // the graph: an output needs a step that writes it.)
    if (n.kind == "aten::unsqueeze" && n.inputs.size() == 2 && n.outputs.size() == 1 &&
        !std::count(cx.outputs.begin(), cx.outputs.end(), n.outputs[0]) && cx.input_name.count(n.inputs[0]) &&
        cx.val(n.inputs[1]).constant && cx.val(n.inputs[1]).numbers.size() == 1) {
      shaped s = cx.shapes.at(n.inputs[0]);
      int64_t d = normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers[0]), s.shape.size() + 1);
      if (d >= 0 && d <= static_cast<int64_t>(s.shape.size())) {
        s.shape.insert(s.shape.begin() + d, 1);
        s.sym.insert(s.sym.begin() + d, "1");
        if (s.shape == cx.val(n.outputs[0]).shape) {
          cx.shapes[n.outputs[0]] = s;
          cx.input_name[n.outputs[0]] = cx.input_name.at(n.inputs[0]);
          cx.tensor_of[n.outputs[0]] = cx.tensor_of.at(n.inputs[0]);
          continue;
        }
      }
    }
    if (reshape_view(cx, n) || permute_store(cx, n)) continue;
    // Scalar arithmetic (x.dim() - 1) computes no tensor: its values are in the
    // graph, and whatever reads one refuses it unless it is a constant or a size.
    // A size plus or minus a constant (x.size(d) - 1) keeps its expression.
    bool makes_tensor = false;
    for (auto& o : n.outputs) makes_tensor = makes_tensor || cx.val(o).is_tensor();
    if (!makes_tensor) {
      note_size_arithmetic(cx, n, kind);
      continue;
    }
    // An op no template takes becomes a library step (ATen through its schema); the
    // chains before and after it stay fused kernels.
    if (std::string why = template_refusal(cx, n, kind); !why.empty()) {
      if (auto s = fallback_shapes(cx, n, why); !s) return s;
      for (auto& i : n.inputs) cx.consumers[i];
      cx.stages.push_back(stage{{&n}, library_stage{why}});
      continue;
    }
    for (auto& i : n.inputs) cx.consumers[i];  // mark read (filled below)
    const op_info* op = find_op(kind);
    const op_class cls = op ? op->cls : op_class::product;
    if (cls == op_class::elementwise) {
      add_elementwise(cx, n);
    } else if (cls == op_class::reduction) {
      cx.stages.push_back(stage{{&n}, reduce_stage{}});
    } else if (cls == op_class::pool) {
      cx.stages.push_back(stage{{&n}, pool_stage{}});
    } else if (cls == op_class::scan) {
      cx.stages.push_back(stage{{&n}, scan_stage{}});
    } else {
      cx.stages.push_back(stage{{&n}, library_stage{}});
    }
  }
  return {};
}

// Who produces and who reads each value, across stages. Meta nodes (aten::size,
// lists) read tensors only for their shapes: no data flow.
void link_stages(lowering_context& cx) {
  for (size_t i = 0; i < cx.stages.size(); ++i) {
    for (auto* n : cx.stages[i].nodes)
      for (auto& o : n->outputs) cx.producer[o] = static_cast<int>(i);
    if (auto* e = cx.stages[i].get<elementwise_stage>())
      for (auto& [v, p] : e->permuted) cx.producer[p] = static_cast<int>(i);
  }
  for (auto& [p, v] : cx.same_memory)
    if (auto it = cx.producer.find(v); it != cx.producer.end()) cx.producer[p] = it->second;
  for (size_t i = 0; i < cx.stages.size(); ++i)
    for (auto* n : cx.stages[i].nodes)
      for (auto& list_or_value : n->inputs) {
        // A fallback's tensor list (cat, stack) reads its elements.
        std::vector<std::string> read = {list_or_value};
        if (auto l = cx.list_of.find(list_or_value); l != cx.list_of.end()) read = l->second;
        for (auto& in : read) {
          auto it = cx.producer.find(in);
          if (it != cx.producer.end() && it->second != static_cast<int>(i))
            cx.consumers[in].push_back(static_cast<int>(i));
        }
      }
}

// A reduction's or a scan's feeding chain, needed by it alone, is computed on its
// loads (a scan's: on what it scans, after the flips and shifts fused into it).
void fuse_prologues(lowering_context& cx) {
  if (cx.p.fuse_prologue) {
    for (size_t i = 0; i < cx.stages.size(); ++i) {
      stage& st = cx.stages[i];
      reduce_stage* red = st.get<reduce_stage>();
      scan_stage* scan = st.get<scan_stage>();
      if (!red && !scan) continue;
      const std::string& in = scan && !scan->scan_in.empty() ? scan->scan_in : st.nodes[0]->inputs[0];
      auto it = cx.producer.find(in);
      if (it == cx.producer.end()) continue;
      elementwise_stage* pro = cx.stages[it->second].get<elementwise_stage>();
      if (!pro || pro->fused_away || !pro->permuted.empty()) continue;
      if (pro->iter.shape != cx.shapes.at(in).shape) continue;
      // Every value of the chain must be needed by this reduction only.
      bool alone = true;
      for (auto* n : cx.stages[it->second].nodes) {
        const std::string& v = n->outputs[0];
        if (std::count(cx.outputs.begin(), cx.outputs.end(), v)) alone = false;
        for (int c : cx.consumers[v])
          if (c != static_cast<int>(i)) alone = false;
        if (v != in && !cx.consumers[v].empty()) alone = false;
      }
      if (!alone) continue;
      (red ? red->prologue : scan->prologue) = it->second;
      pro->fused_away = true;
    }
  }
}

// A chain right after a row or middle-dim reduction that reads the reduced value
// broadcast over the reduction's own input shape (x / norm, x * rsqrt(mean + eps),
// x - lse; x / sqrt(mean(x * x, 1, True) + eps) over channels) is computed in the
// reduction kernel's second pass: the reduced value never goes through memory, and
// one launch is saved.
void fuse_reduce_epilogues(lowering_context& cx) {
  for (size_t i = 0; i + 1 < cx.stages.size(); ++i) {
    const stage& st = cx.stages[i];
    reduce_stage* red = cx.stages[i].get<reduce_stage>();
    elementwise_stage* epi = cx.stages[i + 1].get<elementwise_stage>();
    if (!red || !epi || epi->fused_away || !epi->permuted.empty()) continue;
    auto spec = read_reduction(cx, *st.nodes[0], base_kind(st.nodes[0]->kind));
    if (!spec) continue;
    const shaped& in = cx.shapes.at(spec->input);
    // Normalisations: any chain over their output (layer_norm then gelu). Reductions:
    // rows or a middle dim, read back through keepdim.
    if (!spec->normalizes() && (spec->first == 0 || !spec->keepdim)) continue;
    if (epi->iter.shape != in.shape) continue;
    const std::string& v = spec->output;
    if (std::count(cx.outputs.begin(), cx.outputs.end(), v)) continue;
    bool only = true;
    for (int c : cx.consumers[v]) only = only && c == static_cast<int>(i + 1);
    if (!only) continue;
    red->epilogue = static_cast<int>(i + 1);
    epi->is_epilogue = true;
  }
}

// The only stage that reads `v` is `reader`, and the graph does not return it.
bool read_only_by(lowering_context& cx, const std::string& v, int reader) {
  if (std::count(cx.outputs.begin(), cx.outputs.end(), v)) return false;
  const std::vector<int>& readers = cx.consumers[v];
  if (readers.empty()) return false;
  for (int c : readers)
    if (c != reader) return false;
  return true;
}

// The fallback stage (an op no template takes) of op `kind` that makes `v`, or -1.
int fallback_making(const lowering_context& cx, const std::string& v, const std::string& kind) {
  auto it = cx.producer.find(v);
  if (it == cx.producer.end()) return -1;
  const stage& p = cx.stages[it->second];
  const library_stage* lib = p.get<library_stage>();
  if (!lib || lib->fallback.empty() || lib->absorbed || base_kind(p.nodes[0]->kind) != kind) return -1;
  return it->second;
}

// A flip along the scanned dim (dims exactly [d]).
bool flips_along(const lowering_context& cx, const graph_node& flip, int64_t d, size_t rank) {
  const auto& dims = cx.val(flip.inputs.at(1)).numbers;
  return dims.size() == 1 && normalize_dim(static_cast<int64_t>(dims[0]), rank) == d;
}

// An integer argument of `n`, when it is a constant.
std::optional<int64_t> int_arg(const lowering_context& cx, const graph_node& n, size_t k) {
  if (k >= n.inputs.size()) return std::nullopt;
  const graph_value& v = cx.val(n.inputs[k]);
  if (v.numbers.size() != 1 || v.type != "int") return std::nullopt;
  return static_cast<int64_t>(v.numbers[0]);
}

// Absorbs the fallback stage `si` and, recursively, the fallback stages that make its
// tensor inputs for it alone (zeros_like(x.select(d, 0).unsqueeze(d)): only shapes).
void absorb(lowering_context& cx, int si) {
  stage& st = cx.stages[si];
  st.as_kind<library_stage>().absorbed = true;
  for (auto& in : st.nodes[0]->inputs) {
    auto it = cx.producer.find(in);
    if (it == cx.producer.end() || !cx.is_tensor(in)) continue;
    const library_stage* p = cx.stages[it->second].get<library_stage>();
    if (p && !p->fallback.empty() && !p->absorbed && read_only_by(cx, in, si)) absorb(cx, it->second);
  }
}

// cumsum(narrow(cat([zeros, x], d), d, 0, x.size(d)), d) with zeros of size 1 along
// d: the scan of x shifted by one, 0 first. Returns x's value, or "".
std::string exclusive_source(lowering_context& cx, size_t si, int64_t d, std::vector<int>& absorbed) {
  const graph_node& n = *cx.stages[si].nodes[0];
  const int nr = fallback_making(cx, n.inputs[0], "aten::narrow");
  if (nr < 0 || !read_only_by(cx, n.inputs[0], static_cast<int>(si))) return "";
  const graph_node& narrow = *cx.stages[nr].nodes[0];
  const size_t rank = cx.val(n.inputs[0]).shape.size();
  auto ndim = int_arg(cx, narrow, 1);
  auto start = int_arg(cx, narrow, 2);
  if (!ndim || normalize_dim(*ndim, rank) != d || !start || *start != 0) return "";
  const int ct = fallback_making(cx, narrow.inputs[0], "aten::cat");
  if (ct < 0 || !read_only_by(cx, narrow.inputs[0], nr)) return "";
  const graph_node& cat = *cx.stages[ct].nodes[0];
  auto cdim = int_arg(cx, cat, 1);
  auto list = cx.list_of.find(cat.inputs[0]);
  if (!cdim || normalize_dim(*cdim, rank) != d || list == cx.list_of.end() || list->second.size() != 2) return "";
  const std::string &z = list->second[0], &x = list->second[1];
  if (!cx.shapes.count(x) || !cx.is_tensor(z)) return "";
  const graph_value &zv = cx.val(z), &xv = cx.val(x);
  if (zv.shape.size() != rank || xv.shape.size() != rank || zv.shape[d] != 1) return "";
  for (size_t k = 0; k < rank; ++k)
    if (static_cast<int64_t>(k) != d && zv.shape[k] != xv.shape[k]) return "";
  int zs = fallback_making(cx, z, "aten::zeros_like");
  if (zs < 0) zs = fallback_making(cx, z, "aten::zeros");
  if (zs < 0 || !read_only_by(cx, z, ct)) return "";
  // The narrowed length is x's own size along d, at every size.
  const std::string& len = narrow.inputs.at(3);
  auto sym = cx.scalar_sym.find(len);
  if (sym == cx.scalar_sym.end() || sym->second != cx.shapes.at(x).sym[d]) return "";
  absorbed = {nr, ct, zs};
  return x;
}

// cat([zeros, cumsum(narrow(x, d, 0, x.size(d) - 1), d)], d) with zeros of size 1
// along d (KernelBench's exclusive cumsum since its fix #109): the same scan of x
// shifted by one, 0 first, at x's shape. Returns x's value and sets `out` to the
// cat's result, or "".
std::string exclusive_after(lowering_context& cx, size_t si, int64_t d, std::vector<int>& absorbed, std::string& out) {
  const graph_node& n = *cx.stages[si].nodes[0];
  const int nr = fallback_making(cx, n.inputs[0], "aten::narrow");
  if (nr < 0 || !read_only_by(cx, n.inputs[0], static_cast<int>(si))) return "";
  const graph_node& narrow = *cx.stages[nr].nodes[0];
  const std::string& x = narrow.inputs.at(0);
  const size_t rank = cx.val(n.inputs[0]).shape.size();
  auto ndim = int_arg(cx, narrow, 1);
  auto start = int_arg(cx, narrow, 2);
  if (!ndim || normalize_dim(*ndim, rank) != d || !start || *start != 0 || !cx.shapes.count(x)) return "";
  auto len = cx.scalar_sym.find(narrow.inputs.at(3));
  if (len == cx.scalar_sym.end() || len->second != "(" + cx.shapes.at(x).sym[d] + " - 1)") return "";
  const std::string& v = n.outputs[0];
  const std::vector<int>& readers = cx.consumers[v];
  if (readers.size() != 1) return "";
  const int ct = fallback_making(cx, cx.stages[readers.front()].nodes[0]->outputs[0], "aten::cat");
  if (ct != readers.front()) return "";
  const graph_node& cat = *cx.stages[ct].nodes[0];
  auto cdim = int_arg(cx, cat, 1);
  auto list = cx.list_of.find(cat.inputs[0]);
  if (!cdim || normalize_dim(*cdim, rank) != d || list == cx.list_of.end() || list->second.size() != 2 ||
      list->second[1] != v)
    return "";
  const std::string& z = list->second[0];
  if (!cx.is_tensor(z)) return "";
  const graph_value &zv = cx.val(z), &xv = cx.val(x);
  if (zv.shape.size() != rank || xv.shape.size() != rank || zv.shape[d] != 1) return "";
  for (size_t k = 0; k < rank; ++k)
    if (static_cast<int64_t>(k) != d && zv.shape[k] != xv.shape[k]) return "";
  int zs = fallback_making(cx, z, "aten::zeros_like");
  if (zs < 0) zs = fallback_making(cx, z, "aten::zeros");
  if (zs < 0 || !read_only_by(cx, z, ct)) return "";
  out = cat.outputs.at(0);
  // The result has x's shape: 1 + (C - 1) along d is C.
  cx.shapes[out] = cx.shapes.at(x);
  absorbed = {nr, ct, zs};
  return x;
}

// Flips along the scanned dim right before or after a scan, and the zero-padded
// shift of an exclusive scan, become the scan's loads and stores: no library step,
// no round trip through memory.
void fuse_scan_transforms(lowering_context& cx) {
  for (size_t i = 0; i < cx.stages.size(); ++i) {
    if (!cx.stages[i].is<scan_stage>()) continue;
    scan_stage& st = cx.stages[i].as_kind<scan_stage>();
    const graph_node& n = *cx.stages[i].nodes[0];
    const size_t rank = cx.val(n.inputs[0]).shape.size();
    if (rank == 0) continue;
    auto dim = int_arg(cx, n, 1);
    if (!dim) continue;
    const int64_t d = normalize_dim(*dim, rank);
    const int fi = fallback_making(cx, n.inputs[0], "aten::flip");
    std::vector<int> absorbed;
    if (fi >= 0 && read_only_by(cx, n.inputs[0], static_cast<int>(i)) &&
        flips_along(cx, *cx.stages[fi].nodes[0], d, rank)) {
      st.scan_in = cx.stages[fi].nodes[0]->inputs[0];
      st.reverse_in = true;
      absorb(cx, fi);
    } else if (std::string x = exclusive_source(cx, i, d, absorbed); !x.empty()) {
      st.scan_in = x;
      st.exclusive = true;
      for (int a : absorbed) absorb(cx, a);
    } else if (std::string out, x = exclusive_after(cx, i, d, absorbed, out); !x.empty()) {
      st.scan_in = x;
      st.scan_out = out;
      st.exclusive = true;
      for (int a : absorbed) absorb(cx, a);
    }
    const std::string& v = n.outputs[0];
    const std::vector<int>& readers = cx.consumers[v];
    if (st.scan_out.empty() && !readers.empty() && read_only_by(cx, v, readers.front())) {
      const int fo = fallback_making(cx, cx.stages[readers.front()].nodes[0]->outputs[0], "aten::flip");
      if (fo == readers.front() && cx.stages[fo].nodes[0]->inputs[0] == v &&
          flips_along(cx, *cx.stages[fo].nodes[0], d, rank)) {
        st.scan_out = cx.stages[fo].nodes[0]->outputs[0];
        st.reverse_out = true;
        absorb(cx, fo);
      }
    }
  }
}

// A chain over a pool's or a scan's result, at that result's shape, runs in the
// same kernel before the store: the pooled or scanned value stays in a register.
void fuse_register_epilogues(lowering_context& cx) {
  for (size_t i = 0; i + 1 < cx.stages.size(); ++i) {
    const stage& st = cx.stages[i];
    pool_stage* pool = cx.stages[i].get<pool_stage>();
    scan_stage* scan = cx.stages[i].get<scan_stage>();
    // The next stage the kernels compute (a flip fused into the scan's stores is not).
    size_t e = i + 1;
    while (e + 1 < cx.stages.size() && cx.stages[e].is<library_stage>() &&
           cx.stages[e].as_kind<library_stage>().absorbed)
      ++e;
    elementwise_stage* epi = cx.stages[e].get<elementwise_stage>();
    if ((!pool && !scan) || !epi || epi->fused_away || epi->is_epilogue || !epi->permuted.empty()) continue;
    const std::string& v = scan && !scan->scan_out.empty() ? scan->scan_out : st.nodes[0]->outputs[0];
    if (epi->iter.shape != cx.shapes.at(v).shape) continue;
    if (std::count(cx.outputs.begin(), cx.outputs.end(), v)) continue;
    bool only = !cx.consumers[v].empty();
    for (int c : cx.consumers[v]) only = only && c == static_cast<int>(e);
    if (!only) continue;
    (pool ? pool->epilogue : scan->epilogue) = static_cast<int>(e);
    epi->is_epilogue = true;
  }
}

// Values computed by one stage and read by another (or returned) become tensors of
// the plan: outputs when returned, scratch otherwise; a library step's result that
// is not returned is an intermediate that the validator sizes.
void plan_buffers(lowering_context& cx) {
  // The tensor of value `v`, named after it; declared as scratch unless a library step
  // allocates it.
  auto buffer = [&](const std::string& v, const std::string& dtype, bool declared) {
    const std::string name = "t_" + ident(v).substr(1);
    cx.tensor_of[v] = name;
    if (declared) cx.out.plan.scratch.push_back({name, cx.shapes.at(v).sym, dtype, "none"});
  };
  for (size_t k = 0; k < cx.outputs.size(); ++k) {
    const std::string& v = cx.outputs[k];
    if (cx.tensor_of.count(v)) continue;  // an input returned as is: reported later
    std::string name = cx.outputs.size() == 1 ? "out" : "out" + std::to_string(k);
    cx.tensor_of[v] = name;
    // Kernels write float32; a fallback op may return another dtype (indices).
    cx.out.plan.outputs.push_back({name, cx.shapes.at(v).sym, cx.val(v).dtype, "none"});
  }
  // A permute of the same memory: its value is stored straight into the result's tensor.
  for (auto& [p, v] : cx.same_memory)
    if (auto it = cx.tensor_of.find(p); it != cx.tensor_of.end() && !cx.tensor_of.count(v))
      cx.tensor_of[v] = it->second;
  for (size_t i = 0; i < cx.stages.size(); ++i) {
    const stage& st = cx.stages[i];
    const elementwise_stage* chain = st.get<elementwise_stage>();
    const library_stage* lib = st.get<library_stage>();
    const scan_stage* scan = st.get<scan_stage>();
    if ((chain && chain->fused_away) || (lib && lib->absorbed)) continue;
    if (lib && !lib->fallback.empty()) {
      // Declared, so that later kernels' sizes are expressions the reviewer checks
      // against what the op returns.
      for (auto& v : st.nodes[0]->outputs) {
        if (cx.tensor_of.count(v) || cx.consumers[v].empty() || !cx.val(v).is_tensor()) continue;
        buffer(v, cx.val(v).dtype, true);
      }
      continue;
    }
    for (auto* n : st.nodes) {
      // A scan with a flip fused into its stores makes the flip's result.
      const std::string& v = scan && !scan->scan_out.empty() ? scan->scan_out : n->outputs[0];
      if (cx.tensor_of.count(v) || cx.consumers[v].empty()) continue;
      if (st.epilogue() >= 0) continue;  // a reduction's, pool's or scan's result stays in registers
      buffer(v, "float32", !lib);
    }
    // A chain's transposed store that a later stage reads (permute_store).
    if (chain)
      for (auto& [v, p] : chain->permuted) {
        if (cx.tensor_of.count(p) || cx.consumers[p].empty()) continue;
        buffer(p, "float32", true);
      }
  }
}

}  // namespace

status plan_stages(lowering_context& cx) {
  if (auto s = prepare(cx); !s) return s;
  if (auto s = collect_stages(cx); !s) return s;
  link_stages(cx);
  fuse_scan_transforms(cx);
  fuse_prologues(cx);
  fuse_reduce_epilogues(cx);
  fuse_register_epilogues(cx);
  plan_buffers(cx);
  return {};
}

}  // namespace ks::rules
