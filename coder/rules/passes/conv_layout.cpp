#include "coder/rules/passes/conv_layout.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "coder/rules/passes/graph_rewrite.hpp"
#include "coder/rules/plan/expr_text.hpp"
#include "coder/rules/plan/op_specs.hpp"
#include "coder/rules/plan/op_table.hpp"

namespace ks::rules {

namespace {

const char* kPermuteSchema = "aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)";
const char* kReshapeSchema = "aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)";
const char* kCloneSchema = "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor";

// [N, C, H, W] -> [N, H, W, C] ([N, C, D, H, W] -> [N, D, H, W, C]).
std::vector<int64_t> to_nhwc(const std::vector<int64_t>& s) {
  std::vector<int64_t> p = {s[0]};
  p.insert(p.end(), s.begin() + 2, s.end());
  p.push_back(s[1]);
  return p;
}

// The permutation back: [0, 3, 1, 2] ([0, 4, 1, 2, 3]).
std::vector<double> back_dims(size_t rank) {
  std::vector<double> d = {0, static_cast<double>(rank - 1)};
  for (size_t k = 1; k + 1 < rank; ++k) d.push_back(static_cast<double>(k));
  return d;
}

// Elementwise ops whose extra arguments do not name dims or sizes (expand's sizes are
// NCHW's): the same op on the permuted operands is the permuted result.
bool layout_free(const std::string& kind) {
  return op_is(kind, op_class::elementwise) && kind != "aten::expand" && kind != "aten::expand_as" &&
         kind != "aten::type_as";
}

// The reductions over one dim that the row templates run over the last dim; dim input 1
// (the channels of a value of `rank` dims).
bool channel_reduction(const task_graph& g, const graph_node& n, const std::string& kind, size_t rank) {
  static const std::set<std::string> one_dim = {"aten::sum",       "aten::mean",    "aten::amax",
                                                "aten::amin",      "aten::max",     "aten::min",
                                                "aten::logsumexp", "aten::softmax", "aten::log_softmax"};
  if (!one_dim.count(kind) || n.inputs.size() < 2) return false;
  const graph_value* d = g.value(n.inputs[1]);
  if (!d || !d->constant || d->numbers.size() != 1 || (d->type != "int" && d->type != "int[]")) return false;
  const int64_t dim = static_cast<int64_t>(d->numbers[0]);
  if (dim != 1 && dim != 1 - static_cast<int64_t>(rank)) return false;
  if ((kind == "aten::max" || kind == "aten::min" || kind == "aten::softmax" || kind == "aten::log_softmax") &&
      d->type != "int")
    return false;
  if ((kind == "aten::sum" || kind == "aten::mean") && (d->type != "int[]" || n.inputs.size() < 3)) return false;
  // softmax's dtype, sum's and mean's: none (a cast would be another op here).
  const size_t dtype_at = kind == "aten::softmax" || kind == "aten::log_softmax" ? 2 : 3;
  if ((kind == "aten::softmax" || kind == "aten::log_softmax" || kind == "aten::sum" || kind == "aten::mean") &&
      n.inputs.size() > dtype_at && !g.value(n.inputs[dtype_at])->is_none())
    return false;
  return true;
}

bool keeps_dim(const task_graph& g, const graph_node& n, const std::string& kind) {
  if (kind == "aten::softmax" || kind == "aten::log_softmax") return true;
  const graph_value* k = n.inputs.size() > 2 ? g.value(n.inputs[2]) : nullptr;
  return k && !k->numbers.empty() && k->numbers[0] != 0;
}

// Whether the rewrite takes reader `n` as a reduction over the channels of a twin
// (channel_reduction): its other inputs no twins, min's and max's indices unused, and
// with keepdim every result of the value's rank.
bool takes_channel_reduction(const task_graph& g, const graph_node& n, const std::string& kind, size_t rank,
                             const std::map<std::string, std::string>& twin) {
  if (!channel_reduction(g, n, kind, rank) || !twin.count(n.inputs[0])) return false;
  for (size_t q = 1; q < n.inputs.size(); ++q)
    if (twin.count(n.inputs[q])) return false;
  // min/max over a dim also give the indices: the rewrite takes them unused only.
  for (size_t q = 1; q < n.outputs.size(); ++q) {
    if (std::count(g.outputs.begin(), g.outputs.end(), n.outputs[q])) return false;
    for (const auto& other : g.nodes)
      if (std::count(other.inputs.begin(), other.inputs.end(), n.outputs[q])) return false;
  }
  const bool keep = keeps_dim(g, n, kind);
  for (const std::string& out : n.outputs) {
    const graph_value* o = g.value(out);
    if (!o || !o->is_tensor() || (keep && o->shape.size() != rank)) return false;
  }
  return true;
}

// A graph input, or unsqueezes of one: what the lowering reads as a view of the
// input's memory (stages.cpp), so that a reshape of it needs no step either.
bool input_view(const task_graph& g, const std::string& id) {
  if (std::count(g.input_values.begin(), g.input_values.end(), id)) return true;
  for (const auto& n : g.nodes)
    if (n.outputs.size() == 1 && n.outputs[0] == id) return n.kind == "aten::unsqueeze" && input_view(g, n.inputs[0]);
  return false;
}

// The rewritten graph as it grows: the values made for it, and each original value's
// [N, H, W, C] twin ([N, D, H, W, C] for a rank of 5).
struct nhwc_region {
  const task_graph& g;
  size_t rank = 4;
  task_graph out;
  std::string prefix;
  int fresh = 0;
  std::map<std::string, std::string> twin;       // original value -> its [N, H, W, C] twin
  std::map<std::string, std::string> made_by;    // twin -> the kind of the op that makes it
  std::map<std::string, std::string> list_twin;  // a list of twins -> the list of their twins
  std::map<std::string, std::string> reordered;  // an NCHW value -> its permute into the twin's order
  // Batch norms as layers only in a deep chain of them (deep_normalisation_chain): ATen's
  // channels-last batch norm sums in another order than its NCHW one (on the CPU about
  // ten times further from float64: level 2's 52_Conv2d_Activation_BatchNorm went from
  // 1.9e-6 to 9.5e-5 of the reference), where the templates' fused statistics held 1e-4;
  // a deep chain's first seed keeps ATen's NCHW sums anyway.
  bool norms_as_layers = false;

  graph_value& value_like(const std::string& type) { return new_value(out, prefix, std::to_string(fresh++), type); }
  std::string tensor_value(const std::vector<int64_t>& shape, const std::string& dtype) {
    graph_value& v = value_like("Tensor");
    v.shape = shape;
    v.dtype = dtype;
    return v.id;
  }
  std::string constant_ints(const std::string& type, std::vector<double> numbers) {
    graph_value& v = value_like(type);
    v.numbers = std::move(numbers);
    v.constant = true;
    return v.id;
  }

  // An elementwise reader's operands in the twin's order: twins for originals, others
  // as they are where the permutation keeps their memory, else a reshape of a graph
  // input, else (a value of the region's rank: a block's NCHW input added to its
  // result) the value in the twin's order, a permute that the kernel reading it gets
  // contiguous (one copy, as cuDNN's own conversion); false where none of that holds.
  // Nothing is added to the graph unless every operand is taken.
  bool permute_operands(graph_node& t) {
    enum class how { keep, twin, reshape, convert };
    std::vector<how> plan;
    std::vector<std::vector<int64_t>> shapes;
    for (auto& in : t.inputs) {
      plan.push_back(how::keep);
      shapes.emplace_back();
      if (twin.count(in)) {
        plan.back() = how::twin;
        continue;
      }
      const graph_value* v = g.value(in);
      if (!v || !v->is_tensor()) continue;
      if (v->shape.size() > rank) return false;
      // One element (a 0-d tensor: 93_..._Min's torch.tensor(0.0)) reads the same in
      // either order.
      if (std::all_of(v->shape.begin(), v->shape.end(), [](int64_t d) { return d == 1; })) continue;
      std::vector<int64_t> a(rank - v->shape.size(), 1);
      a.insert(a.end(), v->shape.begin(), v->shape.end());
      // The permutation keeps the operand's memory only if its channels do not sit
      // before a spatial dim of more than one element.
      if (a[1] != 1 && std::any_of(a.begin() + 2, a.end(), [](int64_t d) { return d != 1; })) {
        if (v->shape.size() != rank || v->dtype != "float32") return false;
        plan.back() = how::convert;
        continue;
      }
      std::vector<int64_t> p = to_nhwc(a);
      while (p.size() > 1 && p.front() == 1) p.erase(p.begin());
      if (p == v->shape) continue;
      if (!input_view(g, in)) return false;
      plan.back() = how::reshape;
      shapes.back() = p;
    }
    for (size_t q = 0; q < t.inputs.size(); ++q) {
      std::string& in = t.inputs[q];
      if (plan[q] == how::twin) {
        in = twin.at(in);
      } else if (plan[q] == how::convert) {
        in = in_twin_order(in);
      } else if (plan[q] == how::reshape) {
        const std::vector<int64_t>& p = shapes[q];
        const std::string r = tensor_value(p, g.value(in)->dtype);
        out.nodes.push_back(graph_node{"aten::reshape",
                                       {in, constant_ints("int[]", std::vector<double>(p.begin(), p.end()))},
                                       {r},
                                       kReshapeSchema});
        in = r;
      }
    }
    return true;
  }

  // NCHW value `v` in the twin's order: a permute, [N, H, W, C] (a view of its memory:
  // a kernel that reads it gets it contiguous, a library step as it is).
  std::string in_twin_order(const std::string& v) {
    // Once a value: a dense block joins its input at every layer.
    if (auto it = reordered.find(v); it != reordered.end()) return it->second;
    const graph_value* ov = g.value(v);
    std::vector<double> dims = {0};
    for (size_t k = 2; k < rank; ++k) dims.push_back(static_cast<double>(k));
    dims.push_back(1);
    const std::string p = tensor_value(to_nhwc(ov->shape), ov->dtype);
    // Right after what makes it (first for a graph input): where the reader is, the
    // step would split the chain before it.
    auto at = std::find_if(out.nodes.begin(), out.nodes.end(),
                           [&](const graph_node& n) { return std::count(n.outputs.begin(), n.outputs.end(), v) > 0; });
    at = at == out.nodes.end() ? out.nodes.begin() : at + 1;
    out.nodes.insert(at, graph_node{"aten::permute", {v, constant_ints("int[]", dims)}, {p}, kPermuteSchema});
    reordered[v] = p;
    return p;
  }

  // Convolution `c` on its NCHW input as its twin, the region's rank; false where it
  // is none (conv_layout.hpp says which).
  bool start(const graph_node& c) {
    const std::string kind = base_kind(c.kind);
    const char* as = twin_of_convolution(kind, rank);
    if (!as || c.inputs.empty() || c.outputs.size() != 1 || (runs_channels_last(as) && c.schema.empty())) return false;
    const graph_value* x = g.value(c.inputs[0]);
    const graph_value* y = g.value(c.outputs[0]);
    if (!x || !y || !x->is_tensor() || !y->is_tensor() || x->shape.size() != rank || y->shape.size() != rank ||
        x->dtype != "float32" || y->dtype != "float32")
      return false;
    graph_node t = c;
    t.kind = as;
    t.outputs = {tensor_value(to_nhwc(y->shape), y->dtype)};
    twin[y->id] = t.outputs[0];
    made_by[t.outputs[0]] = as;
    out.nodes.push_back(t);
    return true;
  }

  // The NCHW view of original `v`'s twin: an ATen permute of the twin's memory, which
  // the channels-last step that reads it takes as it is, no copy (stages.cpp leaves a
  // permute that only such steps read to the library).
  std::string nchw_view(const std::string& v) {
    const graph_value* ov = g.value(v);
    const std::string view = tensor_value(ov->shape, ov->dtype);
    out.nodes.push_back(
        graph_node{"aten::permute", {twin.at(v), constant_ints("int[]", back_dims(rank))}, {view}, kPermuteSchema});
    return view;
  }

  // A network's next layer on a twin, its result a twin too: a convolution (its twin,
  // on the NCHW view) or a pool or batch norm (op_table.hpp's channels_last_layer).
  // False where `n` is none of them, or reads a twin elsewhere than as its input.
  bool take_layer(const graph_node& n, const std::string& kind) {
    if (n.inputs.empty() || !twin.count(n.inputs[0]) || n.outputs.size() != 1) return false;
    for (size_t q = 1; q < n.inputs.size(); ++q)
      if (twin.count(n.inputs[q])) return false;
    const graph_value* o = g.value(n.outputs[0]);
    if (!o || !o->is_tensor() || o->shape.size() != rank || o->dtype != "float32") return false;
    std::string as;
    if (const char* c = twin_of_convolution(kind, rank)) {
      if (runs_channels_last(c) && n.schema.empty()) return false;
      as = c;
    } else {
      as = channels_last_layer(kind);
      if (as.empty() || n.schema.empty() || (kind == "aten::batch_norm" && !norms_as_layers)) return false;
    }
    graph_node t = n;
    t.kind = as;
    t.inputs[0] = nchw_view(n.inputs[0]);
    t.outputs = {tensor_value(to_nhwc(o->shape), o->dtype)};
    twin[o->id] = t.outputs[0];
    made_by[t.outputs[0]] = as;
    out.nodes.push_back(t);
    return true;
  }

  // A list of twins read by nothing but one cat over the channels (DenseNet's and
  // Inception's joins): the list of their twins, which that cat joins over the last dim.
  bool take_list(const graph_node& n) {
    if (n.outputs.size() != 1 || n.inputs.empty()) return false;
    // Elements of NCHW order (a dense block's input) are joined in the twin's order.
    for (auto& in : n.inputs) {
      const graph_value* v = g.value(in);
      if (!twin.count(in) && (!v || !v->is_tensor() || v->shape.size() != rank || v->dtype != "float32")) return false;
    }
    const std::string& list = n.outputs[0];
    if (std::count(g.outputs.begin(), g.outputs.end(), list)) return false;
    const graph_node* cat = nullptr;
    for (const auto& m : g.nodes)
      if (std::count(m.inputs.begin(), m.inputs.end(), list)) {
        if (cat) return false;
        cat = &m;
      }
    if (!cat || base_kind(cat->kind) != "aten::cat" || cat->inputs.size() != 2 || cat->inputs[0] != list ||
        cat->outputs.size() != 1)
      return false;
    const graph_value* d = g.value(cat->inputs[1]);
    const graph_value* o = g.value(cat->outputs[0]);
    if (!d || !d->constant || d->numbers.size() != 1 || !o || !o->is_tensor() || o->shape.size() != rank) return false;
    const int64_t dim = static_cast<int64_t>(d->numbers[0]);
    if (dim != 1 && dim != 1 - static_cast<int64_t>(rank)) return false;
    graph_node t = n;
    for (auto& in : t.inputs) in = twin.count(in) ? twin.at(in) : in_twin_order(in);
    t.outputs = {value_like(g.value(list)->type).id};
    list_twin[list] = t.outputs[0];
    out.nodes.push_back(t);
    return true;
  }

  // The cat that take_list saw: over the last dim of the twins.
  void join(const graph_node& cat) {
    const graph_value* o = g.value(cat.outputs[0]);
    graph_node t = cat;
    t.inputs = {list_twin.at(cat.inputs[0]), constant_ints("int", {static_cast<double>(rank - 1)})};
    t.outputs = {tensor_value(to_nhwc(o->shape), o->dtype)};
    twin[o->id] = t.outputs[0];
    made_by[t.outputs[0]] = "aten::cat";
    out.nodes.push_back(t);
  }

  // x.size(d) of an original: the twin's size at d's place there.
  bool take_size(const graph_node& n) {
    if (n.inputs.size() != 2 || n.outputs.size() != 1) return false;
    const graph_value* d = g.value(n.inputs[1]);
    if (!d || !d->constant || d->numbers.size() != 1 || d->type != "int") return false;
    int64_t dim = static_cast<int64_t>(d->numbers[0]);
    if (dim < 0) dim += static_cast<int64_t>(rank);
    if (dim < 0 || dim >= static_cast<int64_t>(rank)) return false;
    const int64_t at = dim == 0 ? 0 : dim == 1 ? static_cast<int64_t>(rank) - 1 : dim - 1;
    graph_node t = n;
    t.inputs = {twin.at(n.inputs[0]), constant_ints("int", {static_cast<double>(at)})};
    out.nodes.push_back(t);
    return true;
  }

  // Each original needed back: permuted after the node that makes its twin. A chain's
  // kernel stores it so (a transposed tile); a channel dim of 1 is the same memory.
  // What no chain makes (the convolution's own result returned, a softmax over the
  // channels) is copied back by one, a clone: cuDNN converts an NCHW result back
  // itself, at about 1.5 TB/s on an H100 (1.43 ms for level 2's 2_ConvTranspose2d).
  void store_back(const std::vector<std::string>& needed) {
    for (const std::string& v : needed) {
      std::string tw = twin.at(v);
      const graph_value* ov = g.value(v);
      if (std::any_of(out.nodes.begin(), out.nodes.end(),
                      [&](const graph_node& n) { return n.kind == "aten::permute" && n.outputs[0] == v; }))
        continue;  // needed twice (an output and a tuple's element)
      auto at = std::find_if(out.nodes.begin(), out.nodes.end(), [&](const graph_node& n) {
        return std::count(n.outputs.begin(), n.outputs.end(), tw) > 0;
      });
      if (!layout_free(made_by.at(tw)) && ov->shape[1] != 1) {
        graph_value& none = value_like("None");
        none.constant = true;
        const std::string copy = tensor_value(to_nhwc(ov->shape), ov->dtype);
        at = out.nodes.insert(at + 1, graph_node{"aten::clone", {tw, none.id}, {copy}, kCloneSchema});
        tw = copy;
      }
      out.nodes.insert(at + 1,
                       graph_node{"aten::permute", {tw, constant_ints("int[]", back_dims(rank))}, {v}, kPermuteSchema});
    }
  }
};

// Rewrites the convolution at node `ci`, or says nothing (nullopt) when nothing reads
// its result.
//
// Its result stays channels-last even where a reader the rewrite does not take (a
// reduction over H, a layer norm, a view) follows: that reader gets the NCHW value
// back, stored by the chain before it (a transposed tile) or copied by one. cuDNN's
// NCHW path converts the input and the result itself, slower: on an H100 level 2's
// 2_ConvTranspose2d alone took 3.29 ms channels-last against 5.17 ms (1.43 of them
// cuDNN's nhwcToNchw), 5_ 3.34 against 5.99, 91_ and 93_ 1.59 against 2.73
// (bench/probes/compile_probe.py, torch.compile's own layout); on an H200 a 3 x 3
// conv2d of 128 x 16 x 256 x 256 took 1.62 ms on NHWC plus 0.40 to convert the input,
// 3.11 ms on NCHW. In a network the next convolution, pool, batch norm or join over
// the channels reads the twin itself (take_layer, take_list): no layout round trip
// between layers, as torch.compile's layout optimisation runs a network's
// convolutions (level 3's VGGs: 2.25 ms against eager's 3.39 on an H100).
std::optional<task_graph> rewrite_one(const task_graph& g, size_t ci, const std::string& prefix) {
  const graph_node& conv = g.nodes[ci];
  const graph_value* x = g.value(conv.inputs[0]);
  if (!x || !x->is_tensor()) return std::nullopt;
  nhwc_region r{g, x->shape.size(), g, prefix};
  r.norms_as_layers = deep_normalisation_chain(g);
  r.out.nodes.clear();
  auto& twin = r.twin;
  auto& made_by = r.made_by;
  std::vector<std::string> needed;  // originals a reader outside the region needs back
  for (size_t k = 0; k < ci; ++k) r.out.nodes.push_back(g.nodes[k]);
  if (!r.start(conv)) return std::nullopt;
  const size_t rank = r.rank;
  size_t readers = 0;
  for (size_t k = ci + 1; k < g.nodes.size(); ++k) {
    const graph_node& n = g.nodes[k];
    bool reads = false;
    for (auto& in : n.inputs) reads = reads || twin.count(in) || r.list_twin.count(in);
    // Every later convolution of the region's rank too, on its NCHW input: a join of
    // branches that start from NCHW values (an Inception module's) then reads twins
    // only.
    if (!reads && !r.start(n)) r.out.nodes.push_back(n);
    if (!reads) continue;
    ++readers;
    // A reader left in NCHW: it reads the originals, stored back.
    auto leave = [&]() {
      for (auto& in : n.inputs)
        if (twin.count(in)) needed.push_back(in);
      r.out.nodes.push_back(n);
    };
    const std::string kind = base_kind(n.kind);
    if (kind == "prim::TupleConstruct") {  // the graph's outputs: the originals back
      leave();
      continue;
    }
    if (r.list_twin.count(n.inputs[0])) {  // the cat take_list saw
      r.join(n);
      continue;
    }
    graph_node t = n;
    // The device or dtype of a value is its twin's (93_..._Min makes its
    // torch.tensor(0.0, device=x.device) from it).
    if ((kind == "prim::device" || kind == "prim::dtype") && n.inputs.size() == 1) {
      t.inputs[0] = twin.at(n.inputs[0]);
      r.out.nodes.push_back(t);
      continue;
    }
    if ((kind == "aten::size" && r.take_size(n)) || (kind == "prim::ListConstruct" && r.take_list(n)) ||
        r.take_layer(n, kind))
      continue;
    if (layout_free(kind)) {
      const graph_value* o = n.outputs.size() == 1 ? g.value(n.outputs[0]) : nullptr;
      if (!o || !o->is_tensor() || o->shape.size() != rank || !r.permute_operands(t)) {
        leave();
        continue;
      }
      t.outputs = {r.tensor_value(to_nhwc(o->shape), o->dtype)};
      twin[o->id] = t.outputs[0];
      made_by[t.outputs[0]] = kind;
      r.out.nodes.push_back(t);
      continue;
    }
    if (!takes_channel_reduction(g, n, kind, rank, twin)) {
      leave();
      continue;
    }
    t.inputs[0] = twin.at(n.inputs[0]);
    t.inputs[1] = r.constant_ints(g.value(n.inputs[1])->type, {static_cast<double>(rank - 1)});
    // Without keepdim the result is the same in either order: the original itself.
    if (keeps_dim(g, n, kind))
      for (size_t q = 0; q < n.outputs.size(); ++q) {
        const graph_value* o = g.value(n.outputs[q]);
        t.outputs[q] = r.tensor_value(to_nhwc(o->shape), o->dtype);
        if (q == 0) {
          twin[o->id] = t.outputs[q];
          made_by[t.outputs[q]] = kind;
        }
      }
    r.out.nodes.push_back(t);
  }
  for (auto& o : g.outputs)
    if (twin.count(o)) needed.push_back(o);
  if (readers == 0 && needed.empty()) return std::nullopt;
  r.store_back(needed);
  return std::move(r.out);
}

}  // namespace

task_graph channels_last_convolutions(const task_graph& graph, std::vector<std::string>& rewrites) {
  task_graph g = graph;
  std::set<std::string> left;  // convolutions the rewrite cannot take
  int index = 0;
  for (;;) {
    auto it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const graph_node& n) {
      const char* twin = twin_of_convolution(base_kind(n.kind));
      // All but conv2d run through their schema: the node must carry it.
      return twin && (!runs_channels_last(twin) || !n.schema.empty()) && n.outputs.size() == 1 &&
             !left.count(n.outputs[0]);
    });
    if (it == g.nodes.end()) break;
    const std::string y = it->outputs[0];
    const std::string kind = base_kind(it->kind);
    auto r = rewrite_one(g, static_cast<size_t>(it - g.nodes.begin()), "ks.nhwc." + std::to_string(index) + ".");
    if (!r) {
      left.insert(y);
      continue;
    }
    g = std::move(*r);
    ++index;
    rewrites.push_back(kind +
                       ": channels-last (cuDNN on NHWC input and weight; its result read as [N, H, W, C] "
                       "by the kernels after it, the output stored back as NCHW)");
  }
  return g;
}

}  // namespace ks::rules
