#include "coder/rules/plan/shapes.hpp"

#include <algorithm>
#include <optional>

#include "coder/rules/plan/expr_text.hpp"
#include "coder/rules/plan/op_specs.hpp"
#include "coder/rules/plan/op_table.hpp"
#include "plan/op_schema.hpp"

namespace ks::rules {

// The broadcast shape of the tensor operands, with expressions taken from an operand
// that has the dimension.
shaped broadcast(const lowering_context& cx, const std::vector<std::string>& ids, const std::vector<int64_t>& target) {
  shaped s{target, std::vector<std::string>(target.size(), "1")};
  for (size_t d = 0; d < target.size(); ++d) {
    if (target[d] == 1) continue;
    for (auto& id : ids) {
      auto it = cx.shapes.find(id);
      if (it == cx.shapes.end()) continue;
      const shaped& in = it->second;
      int64_t off = static_cast<int64_t>(target.size()) - static_cast<int64_t>(in.shape.size());
      int64_t k = static_cast<int64_t>(d) - off;
      if (k >= 0 && in.shape[k] == target[d]) {
        s.sym[d] = in.sym[k];
        break;
      }
    }
  }
  return s;
}

status shape_of_node(lowering_context& cx, const graph_node& n, const std::string& kind) {
  const std::string& out = n.outputs[0];
  const graph_value& ov = cx.val(out);
  if (!ov.is_tensor()) return error{kind + ": result is not a tensor"};
  // argmax/argmin write their int64 indices (row_reduce.cpp); everything else float32.
  const bool indices = (kind == "aten::argmax" || kind == "aten::argmin") && ov.dtype == "int64";
  if (ov.dtype != "float32" && !indices)
    return error{kind + " (value " + out + ") gives " + ov.dtype + "; the rules coder writes float32 kernels only"};
  std::vector<std::string> tin;
  for (auto& i : n.inputs)
    if (cx.is_tensor(i)) tin.push_back(i);
  const op_info* op = find_op(kind);
  const shape_rule rule = op ? op->shape : shape_rule::none;
  if (rule == shape_rule::broadcast) {
    shaped s = broadcast(cx, tin, ov.shape);
    for (size_t d = 0; d < s.sym.size(); ++d)
      if (ov.shape[d] != 1 && s.sym[d] == "1") {
        // expand(x, sizes): a new dimension given by a size list.
        return error{kind + " (value " + out + "): cannot tell which input gives dimension " + std::to_string(d)};
      }
    cx.shapes[out] = s;
    return {};
  }
  if (rule == shape_rule::reduce) {
    auto spec = read_reduction(cx, n, kind);
    if (!spec) return error{spec.message()};
    const shaped& in = cx.shapes.at(spec->input);
    shaped s;
    for (int64_t d = 0; d < static_cast<int64_t>(in.shape.size()); ++d) {
      bool reduced = d >= spec->first && d < spec->last;
      if (spec->normalizes() || !reduced) {
        s.shape.push_back(in.shape[d]);
        s.sym.push_back(in.sym[d]);
      } else if (spec->keepdim) {
        s.shape.push_back(1);
        s.sym.push_back("1");
      }
    }
    if (s.shape != ov.shape) return error{kind + " (value " + out + "): shape mismatch in the lowering"};
    cx.shapes[out] = s;
    return {};
  }
  if (rule == shape_rule::same) {
    if (n.inputs.size() > 2 && !cx.val(n.inputs[2]).is_none())
      return error{kind + " with a dtype is not supported by the rules coder"};
    cx.shapes[out] = cx.shapes.at(n.inputs[0]);
    return {};
  }
  if (rule == shape_rule::window) {
    auto pp = read_pool(cx, n, kind);
    if (!pp) return error{pp.message()};
    const shaped& x = cx.shapes.at(n.inputs[0]);
    const int D = pp->dims;
    if (static_cast<int>(x.sym.size()) < D + 1)
      return error{kind + " of a tensor of rank " + std::to_string(x.sym.size()) +
                   " is not supported by the rules coder"};
    shaped s{ov.shape, {x.sym.begin(), x.sym.end() - D}};
    for (int k = 0; k < D; ++k)
      s.sym.push_back("(" + x.sym[x.sym.size() - D + k] + " + " + std::to_string(2 * pp->pad[k]) + " - " +
                      std::to_string(pp->dil[k] * (pp->kernel[k] - 1) + 1) + ") / " + std::to_string(pp->stride[k]) +
                      " + 1");
    cx.shapes[out] = s;
    return {};
  }
  if (rule == shape_rule::library) {
    shaped s{ov.shape, {}};
    auto sh = [&](int i) -> const shaped& { return cx.shapes.at(n.inputs[i]); };
    if (kind == "aten::conv2d" || kind == kConv2dNhwc) {
      const shaped &x = sh(0), &w = sh(1);
      auto ints = [&](int i) { return cx.val(n.inputs[i]).numbers; };
      auto st = ints(3), pd = ints(4), dl = ints(5);
      if (cx.val(n.inputs[4]).type == "str") return error{"aten::conv2d with string padding is not supported"};
      size_t r = x.shape.size();
      s.sym.push_back(x.sym[0]);
      s.sym.push_back(w.sym[0]);
      for (int k = 0; k < 2; ++k) {
        auto at = [&](const std::vector<double>& v) { return static_cast<int64_t>(v.size() == 1 ? v[0] : v[k]); };
        std::string hin = x.sym[r - 2 + k], kk = w.sym[2 + k];
        s.sym.push_back("(" + hin + " + " + std::to_string(2 * at(pd)) + " - " + std::to_string(at(dl)) + " * (" + kk +
                        " - 1) - 1) / " + std::to_string(at(st)) + " + 1");
      }
      if (r == 3) s.sym.erase(s.sym.begin());
      // [N, C, H, W] -> [N, H, W, C]: the channels-last result (conv_layout.hpp).
      if (kind == kConv2dNhwc) s.sym = {s.sym[0], s.sym[2], s.sym[3], s.sym[1]};
    } else if (kind == "aten::linear") {
      const shaped &x = sh(0), &w = sh(1);
      s.sym.assign(x.sym.begin(), x.sym.end() - 1);
      if (w.shape.size() == 2) s.sym.push_back(w.sym[0]);
    } else if (kind == "aten::addmm") {
      s.sym = {sh(1).sym[0], sh(2).sym[1]};
    } else {  // matmul, mm, bmm
      const shaped &a = sh(0), &b = sh(1);
      if (a.shape.size() < 2 || b.shape.size() < 2)
        return error{kind + " of a 1-D operand is not supported by the rules coder"};
      std::vector<int64_t> batch(ov.shape.begin(), ov.shape.end() - 2);
      shaped ba{std::vector<int64_t>(a.shape.begin(), a.shape.end() - 2),
                std::vector<std::string>(a.sym.begin(), a.sym.end() - 2)};
      shaped bb{std::vector<int64_t>(b.shape.begin(), b.shape.end() - 2),
                std::vector<std::string>(b.sym.begin(), b.sym.end() - 2)};
      cx.shapes["__a"] = ba;
      cx.shapes["__b"] = bb;
      s.sym = broadcast(cx, {"__a", "__b"}, batch).sym;
      cx.shapes.erase("__a");
      cx.shapes.erase("__b");
      s.sym.push_back(a.sym[a.sym.size() - 2]);
      s.sym.push_back(b.sym.back());
    }
    if (s.sym.size() != ov.shape.size()) return error{kind + " (value " + out + "): unexpected result rank"};
    cx.shapes[out] = s;
    return {};
  }
  return error{"op " + kind + " (value " + out + ") is not supported by the rules coder"};
}

namespace {

// A convolution's result that runs as a fallback — conv3d, conv_transpose2d and 3d, or
// the channels-last twin of one (conv_layout.hpp: [N, H, W, C], [N, D, H, W, C]) — as
// PyTorch sizes it, at every size: C is the weight's dim 0 (transposed: dim 1 times the
// groups); a spatial dim (H + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1
// (transposed: (H - 1) * stride - 2 * padding + dilation * (kernel - 1) +
// output_padding + 1). None where the node is not one or the formula misses the traced
// sizes (matching by value below then puts the channels on any input dim of the same
// size and leaves the spatial dims numbers: plans for one size only).
std::optional<std::vector<std::string>> conv_sizes(const lowering_context& cx, const graph_node& n) {
  const std::string kind = base_kind(n.kind);
  const bool twin = !convolution_of_twin(kind).empty();
  const std::string_view conv = twin ? convolution_of_twin(kind) : std::string_view(kind);
  const bool transposed = conv == "aten::conv_transpose2d" || conv == "aten::conv_transpose3d";
  if (!transposed && conv != "aten::conv3d") return std::nullopt;
  if (n.inputs.size() != (transposed ? 8u : 7u) || n.outputs.size() != 1 || !cx.shapes.count(n.inputs[0]) ||
      !cx.shapes.count(n.inputs[1]))
    return std::nullopt;
  const shaped &x = cx.shapes.at(n.inputs[0]), &w = cx.shapes.at(n.inputs[1]);
  const std::vector<int64_t>& out = cx.val(n.outputs[0]).shape;
  const size_t r = x.shape.size(), spatial = r - 2;
  if ((r != 4 && r != 5) || w.shape.size() != r || out.size() != r) return std::nullopt;
  auto item = [&](size_t i, size_t k) -> std::optional<int64_t> {
    const graph_value& v = cx.val(n.inputs[i]);
    if (!v.constant || (v.numbers.size() != 1 && v.numbers.size() != spatial)) return std::nullopt;
    return static_cast<int64_t>(v.numbers.size() == 1 ? v.numbers[0] : v.numbers[k]);
  };
  // conv3d(x, w, b, stride, padding, dilation, groups); conv_transpose(x, w, b, stride,
  // padding, output_padding, groups, dilation).
  const auto groups = item(6, 0);
  if (!groups) return std::nullopt;
  std::vector<std::string> sym = {x.sym[0]};
  std::vector<int64_t> sizes = {x.shape[0]};
  if (transposed) {
    sym.push_back(*groups == 1 ? w.sym[1] : paren(w.sym[1]) + " * " + std::to_string(*groups));
    sizes.push_back(w.shape[1] * *groups);
  } else {
    sym.push_back(w.sym[0]);
    sizes.push_back(w.shape[0]);
  }
  auto plus = [](std::string e, int64_t add) {
    return add == 0 ? e : e + (add > 0 ? " + " : " - ") + std::to_string(add > 0 ? add : -add);
  };
  for (size_t k = 0; k < spatial; ++k) {
    const auto st = item(3, k), pd = item(4, k), op = transposed ? item(5, k) : std::optional<int64_t>(0),
               dl = item(transposed ? 7 : 5, k);
    if (!st || !pd || !op || !dl || *st < 1) return std::nullopt;
    const std::string dk = (*dl == 1 ? std::string() : std::to_string(*dl) + " * ") + paren(w.sym[2 + k]);
    if (transposed) {
      const int64_t add = -2 * *pd + *op + 1;
      // dilation * (kernel - 1) as dilation * kernel - dilation.
      sym.push_back(plus("(" + paren(x.sym[2 + k]) + " - 1) * " + std::to_string(*st) + " + " + dk, add - *dl));
      sizes.push_back((x.shape[2 + k] - 1) * *st + *dl * (w.shape[2 + k] - 1) + add);
    } else {
      sym.push_back("(" + plus(paren(x.sym[2 + k]) + " - " + dk, 2 * *pd + *dl - 1) + ") / " + std::to_string(*st) +
                    " + 1");
      sizes.push_back((x.shape[2 + k] + 2 * *pd - *dl * (w.shape[2 + k] - 1) - 1) / *st + 1);
    }
  }
  if (twin) {
    sym.push_back(sym[1]);
    sym.erase(sym.begin() + 1);
    sizes.push_back(sizes[1]);
    sizes.erase(sizes.begin() + 1);
  }
  if (sizes != out) return std::nullopt;
  return sym;
}

// The result of a permute by constant dims — the input's dims in that order — or of
// a network's layer (op_table.hpp's channels_last_layer: a batch norm, a pool, an
// adaptive pool) — as PyTorch sizes it; run channels-last on the NCHW view of a
// twin, handed on as [N, H, W, C] — at every size. None where the node
// is neither or the sizes miss the traced ones (matching by value puts a dim on any
// input dim of its size: at a traced size whose dims are all 8, the wrong one).
std::optional<std::vector<std::string>> layout_sizes(const lowering_context& cx, const graph_node& n) {
  const std::string kind = base_kind(n.kind);
  if (n.outputs.size() != 1 || n.inputs.size() < 2 || !cx.shapes.count(n.inputs[0])) return std::nullopt;
  const shaped& x = cx.shapes.at(n.inputs[0]);
  const std::vector<int64_t>& out = cx.val(n.outputs[0]).shape;
  const size_t r = x.shape.size();
  shaped s;
  if (kind == "aten::permute") {
    const graph_value& d = cx.val(n.inputs[1]);
    if (!d.constant || d.numbers.size() != r) return std::nullopt;
    for (double k : d.numbers) {
      const int64_t at = normalize_dim(static_cast<int64_t>(k), r);
      if (at < 0 || at >= static_cast<int64_t>(r)) return std::nullopt;
      s.shape.push_back(x.shape[at]);
      s.sym.push_back(x.sym[at]);
    }
    if (s.shape != out) return std::nullopt;
    return s.sym;
  }
  const bool twin = kind.rfind(kChannelsLastLayer, 0) == 0;
  const std::string op = twin ? kind.substr(kChannelsLastLayer.size()) : kind;
  if (channels_last_layer(op).empty() || (r != 4 && r != 5)) return std::nullopt;
  s = x;
  if (op.rfind("aten::adaptive_", 0) == 0) {
    const graph_value& sizes = cx.val(n.inputs[1]);
    if (!sizes.constant || sizes.numbers.size() != r - 2) return std::nullopt;
    for (size_t k = 0; k < r - 2; ++k) {
      s.shape[2 + k] = static_cast<int64_t>(sizes.numbers[k]);
      s.sym[2 + k] = std::to_string(s.shape[2 + k]);
    }
  } else if (op != "aten::batch_norm") {
    auto pp = read_pool(cx, n, op);
    if (!pp || pp->dims != static_cast<int>(r) - 2) return std::nullopt;
    for (int k = 0; k < pp->dims; ++k) {
      const int64_t span = pp->dil[k] * (pp->kernel[k] - 1) + 1;
      s.shape[2 + k] = (x.shape[2 + k] + 2 * pp->pad[k] - span) / pp->stride[k] + 1;
      s.sym[2 + k] = "(" + x.sym[2 + k] + " + " + std::to_string(2 * pp->pad[k]) + " - " + std::to_string(span) +
                     ") / " + std::to_string(pp->stride[k]) + " + 1";
    }
  }
  // [N, C, H, W] -> [N, H, W, C].
  if (twin) {
    std::rotate(s.shape.begin() + 1, s.shape.begin() + 2, s.shape.end());
    std::rotate(s.sym.begin() + 1, s.sym.begin() + 2, s.sym.end());
  }
  if (s.shape != out) return std::nullopt;
  return s.sym;
}

// flatten(x, start, end): the dims from start to end as their product, at every size
// (level 3's networks flatten [N, C, H, W] before their classifier).
std::optional<std::vector<std::string>> flatten_sizes(const lowering_context& cx, const graph_node& n) {
  if (base_kind(n.kind) != "aten::flatten" || n.inputs.size() != 3 || n.outputs.size() != 1 ||
      !cx.shapes.count(n.inputs[0]))
    return std::nullopt;
  const shaped& x = cx.shapes.at(n.inputs[0]);
  const graph_value &a = cx.val(n.inputs[1]), &b = cx.val(n.inputs[2]);
  const int64_t r = static_cast<int64_t>(x.shape.size());
  if (!a.constant || !b.constant || a.numbers.size() != 1 || b.numbers.size() != 1 || r == 0) return std::nullopt;
  const int64_t first = normalize_dim(static_cast<int64_t>(a.numbers[0]), r);
  const int64_t last = normalize_dim(static_cast<int64_t>(b.numbers[0]), r);
  if (first < 0 || last >= r || first > last) return std::nullopt;
  shaped s;
  for (int64_t d = 0; d < r; ++d) {
    if (d > first && d <= last) {
      s.shape.back() *= x.shape[d];
      s.sym.back() += " * " + paren(x.sym[d]);
      continue;
    }
    s.shape.push_back(x.shape[d]);
    s.sym.push_back(d == first && first < last ? paren(x.sym[d]) : x.sym[d]);
  }
  if (s.shape != cx.val(n.outputs[0]).shape) return std::nullopt;
  return s.sym;
}

}  // namespace

// The shapes of a fallback op's results, as expressions: the graph gives sizes at one
// size only, so each dim is matched to an input dim of the same size (the same
// position first), else kept as the number (a constant such as topk's k). A wrong
// match cannot pass silently: the result lands in a declared buffer, whose shape the
// reviewer checks against what the op returned.
status fallback_shapes(lowering_context& cx, const graph_node& n, const std::string& why) {
  const std::string cannot = n.kind + " (value " + (n.outputs.empty() ? std::string("?") : n.outputs[0]) + "): " + why;
  // A convolution's channels-last twin (op_table.hpp) keeps the convolution's ATen schema.
  const bool twin = runs_channels_last(base_kind(n.kind));
  if (n.schema.empty() || (n.kind.rfind("aten::", 0) != 0 && !twin))
    return error{cannot + "; and it has no ATen schema, so it cannot run as a library step either"};
  auto sch = parse_op_schema(n.schema);
  if (!sch) return error{cannot + "; " + sch.message()};
  if (sch->args.size() != n.inputs.size())
    return error{cannot + "; its node has " + std::to_string(n.inputs.size()) + " inputs for the " +
                 std::to_string(sch->args.size()) + " arguments of " + n.schema};
  std::vector<const shaped*> ins;
  std::vector<const shaped*> listed;  // the tensors of a list input (cat's, stack's)
  for (auto& i : n.inputs) {
    if (auto it = cx.shapes.find(i); it != cx.shapes.end()) ins.push_back(&it->second);
    if (auto l = cx.list_of.find(i); l != cx.list_of.end())
      for (auto& e : l->second)
        if (auto it = cx.shapes.find(e); it != cx.shapes.end()) listed.push_back(&it->second);
  }
  ins.insert(ins.end(), listed.begin(), listed.end());
  // cat(tensors, d): the joined dim is the sum of theirs, at every size.
  int64_t joined = -1;
  std::string joined_sym;
  if (base_kind(n.kind) == "aten::cat" && n.inputs.size() == 2 && cx.val(n.inputs[1]).numbers.size() == 1 &&
      !listed.empty() && !n.outputs.empty() && cx.val(n.outputs[0]).is_tensor()) {
    const size_t rank = cx.val(n.outputs[0]).shape.size();
    joined = normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers[0]), rank);
    std::vector<std::string> parts;
    for (const shaped* e : listed)
      if (e->sym.size() == rank) parts.push_back(paren(e->sym[joined]));
    if (parts.size() == listed.size())
      joined_sym = join(parts, " + ");
    else
      joined = -1;
  }
  for (auto& o : n.outputs) {
    const graph_value& ov = cx.val(o);
    if (!ov.is_tensor()) {
      for (const graph_node& m : cx.g.nodes)
        if (!op_is(base_kind(m.kind), op_class::meta) && std::count(m.inputs.begin(), m.inputs.end(), o))
          return error{cannot + "; its result " + o + " is a " + ov.type + ", which a library step cannot return"};
      continue;
    }
    shaped s{ov.shape, {}};
    if (auto sized = conv_sizes(cx, n); sized || (sized = layout_sizes(cx, n)) || (sized = flatten_sizes(cx, n))) {
      s.sym = *sized;
      cx.shapes[o] = s;
      continue;
    }
    // narrow(x, d, start, x.size(k)): the narrowed dim is that size at every size.
    int64_t narrowed = -1;
    std::string narrowed_sym;
    if (base_kind(n.kind) == "aten::narrow" && n.inputs.size() == 4 && cx.val(n.inputs[1]).numbers.size() == 1)
      if (auto it = cx.scalar_sym.find(n.inputs[3]); it != cx.scalar_sym.end()) {
        narrowed = normalize_dim(static_cast<int64_t>(cx.val(n.inputs[1]).numbers[0]), ov.shape.size());
        narrowed_sym = it->second;
      }
    for (size_t d = 0; d < ov.shape.size(); ++d) {
      const int64_t size = ov.shape[d];
      std::string sym;
      if (static_cast<int64_t>(d) == narrowed) sym = narrowed_sym;
      if (static_cast<int64_t>(d) == joined) sym = joined_sym;
      if (size == 1) sym = "1";
      for (const shaped* in : ins)
        if (sym.empty() && in->shape.size() == ov.shape.size() && in->shape[d] == size) sym = in->sym[d];
      for (const shaped* in : ins)
        for (size_t k = 0; sym.empty() && k < in->shape.size(); ++k)
          if (in->shape[k] == size) sym = in->sym[k];
      s.sym.push_back(sym.empty() ? std::to_string(size) : sym);
    }
    cx.shapes[o] = s;
  }
  return {};
}

}  // namespace ks::rules
