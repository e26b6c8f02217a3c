#include "coder/rules/text/chain.hpp"

#include <set>

#include "coder/rules/plan/op_table.hpp"
#include "coder/rules/text/code_writer.hpp"

namespace ks::rules {

std::vector<std::pair<size_t, size_t>> kept_groups(const shaped& in, const shaped& iter) {
  const size_t r = iter.shape.size();
  const int64_t off = static_cast<int64_t>(r) - static_cast<int64_t>(in.shape.size());
  auto kept = [&](size_t d) {
    int64_t k = static_cast<int64_t>(d) - off;
    return k >= 0 && in.shape[k] == iter.shape[d] && iter.shape[d] != 1;
  };
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t d = 0; d < r;) {
    if (!kept(d)) {
      ++d;
      continue;
    }
    size_t a = d;
    while (d < r && kept(d)) ++d;
    out.push_back({a, d});
  }
  return out;
}

// A broadcast operand indexed by the flat element index costs a 64-bit division (and
// a modulo) per element, which a kernel at memory speed cannot afford. When the
// iteration splits into rows x c (dims [0, s) and [s, r)) such that every broadcast
// operand is indexed by `row` alone, or by `c` with neither division nor modulo (a
// bias along the last dims), the kernel walks rows and columns and pays a division
// per row instead (elementwise kernels, a whole-tensor reduction's prologue).
size_t choose_column_split(const lowering_context& cx, const stage& st) {
  const shaped& iter = st.as_kind<elementwise_stage>().iter;
  const size_t r = iter.shape.size();
  std::set<std::string> inside;
  for (auto* n : st.nodes) inside.insert(n->outputs.begin(), n->outputs.end());
  std::vector<const shaped*> operands;
  for (auto* n : st.nodes)
    for (auto& id : n->inputs)
      if (!inside.count(id) && cx.val(id).is_tensor() && cx.shapes.count(id) && cx.shapes.at(id).shape != iter.shape)
        operands.push_back(&cx.shapes.at(id));
  if (operands.empty() || r < 2) return 0;
  for (size_t sp = 1; sp < r; ++sp) {
    bool ok = true;
    for (const shaped* o : operands) {
      for (auto [a, b] : kept_groups(*o, iter)) {
        if (a < sp && sp < b) ok = false;  // straddles the split
        if (a >= sp) {                     // indexed by c: no division, no modulo
          for (size_t q = b; q < r; ++q) ok = ok && iter.shape[q] == 1;
          for (size_t q = sp; q < a; ++q) ok = ok && iter.shape[q] == 1;
        }
      }
    }
    if (!ok) continue;
    int64_t graph_inner = 1;
    for (size_t q = sp; q < r; ++q) graph_inner *= iter.shape[q];
    const std::vector<std::string> inner(iter.sym.begin() + sp, iter.sym.end());
    if (cx.target_size(inner, graph_inner) < 1024) return 0;
    return sp;
  }
  return 0;
}

std::string access(const shaped& in, const shaped& iter, const std::string& i, kernel_params& kp, size_t split_,
                   const std::map<std::string, std::string>& names) {
  auto named = [&](const std::string& part) {
    auto it = names.find(part);
    return it == names.end() ? part : it->second;
  };
  if (in.shape == iter.shape) return i;
  int64_t numel = 1;
  for (auto d : in.shape) numel *= d;
  if (numel == 1 && iter.shape.size() >= in.shape.size()) {
    bool all_one = true;
    for (auto d : in.shape) all_one &= d == 1;
    if (all_one) return "0";
  }
  const size_t r = iter.shape.size();
  const int64_t off = static_cast<int64_t>(r) - static_cast<int64_t>(in.shape.size());
  std::vector<std::string> terms;
  for (auto [a, b] : kept_groups(in, iter)) {
    // Split mode (an elementwise kernel over rows x c, see choose_split): a group
    // left of the split is indexed from `row`, one right of it from `c`.
    const bool split = split_ > 0 && i == "i";
    const bool in_row = split && b <= split_;
    const size_t lo = split && !in_row ? split_ : 0, hi = in_row ? split_ : r;
    std::vector<std::string> inner(iter.sym.begin() + b, iter.sym.begin() + hi);
    std::vector<std::string> span(iter.sym.begin() + a, iter.sym.begin() + b);
    std::vector<std::string> stride;
    for (size_t q = b; q < r; ++q) {
      int64_t k = static_cast<int64_t>(q) - off;
      if (k >= 0) stride.push_back(in.sym[k]);
    }
    std::string e = !split ? i : in_row ? "row" : "c";
    bool has_inner = false;
    for (size_t q = b; q < hi; ++q) has_inner |= iter.shape[q] != 1;
    if (has_inner) e = named("(" + e + " / " + kp.int64(product(inner)) + ")");
    bool has_outer = false;
    for (size_t q = lo; q < a; ++q) has_outer |= iter.shape[q] != 1;
    if (has_outer) e = named("(" + e + " % " + kp.int64(product(span)) + ")");
    std::string st = product(stride);
    if (st != "1") e += " * " + kp.int64(st);
    terms.push_back(e);
  }
  return terms.empty() ? "0" : join(terms, " + ");
}

namespace {

// Argument k of node n as a number (the first, for a list), or `dflt` when absent.
double num_arg(const lowering_context& cx, const graph_node& n, size_t k, double dflt) {
  if (k >= n.inputs.size()) return dflt;
  const graph_value& v = cx.val(n.inputs[k]);
  return v.numbers.empty() ? dflt : v.numbers[0];
}

bool none_arg(const lowering_context& cx, const graph_node& n, size_t k) {
  return k >= n.inputs.size() || cx.val(n.inputs[k]).is_none();
}

// Writes one chain's statements: the operands it reads, then each node's value.
struct chain_writer {
  lowering_context& cx;
  const stage& st;
  const std::string& i;
  kernel_params& kp;
  std::string& code;
  std::map<std::string, std::string>& var;
  const std::string& tag;
  const chain_reads& reads;
  // The statements, inside a kernel's loop: two levels deep.
  code_writer out{code, 2};

  // The variable, parameter or literal that holds value `id`; a tensor is loaded
  // into a variable at its first read.
  result<std::string> operand(const std::string& id) {
    if (auto it = var.find(id); it != var.end()) return it->second;
    const graph_value& v = cx.val(id);
    if (v.is_tensor()) {
      auto t = cx.tensor_of.find(id);
      if (t == cx.tensor_of.end()) return error{"value " + id + " is read before it is computed"};
      if (v.dtype != "float32" && v.dtype != "bool")
        return error{"value " + id + " is " + v.dtype + "; float32 or bool only"};
      // A bool is promoted as ATen promotes it (0.0f or 1.0f), by a byte load of its
      // own: the templates' float vector loads and row caches take "in" parameters only.
      const bool mask = v.dtype == "bool";
      std::string p = kp.tensor_in(t->second, mask ? "bool" : "float");
      std::string name = "x" + tag + std::to_string(var.size());
      std::string idx =
          access(cx.shapes.at(id), st.as_kind<elementwise_stage>().iter, i, kp, reads.split, reads.index_names);
      // Stored with padded rows ([M, pitch], 2-d): by row and column, or by the row a
      // reduction's kernel holds; a flat index pays a division (only where neither
      // applies).
      if (auto pit = cx.row_pitch.find(id); pit != cx.row_pitch.end() && idx == i) {
        const std::string pitch = kp.int64(pit->second), cols = kp.int64(cx.shapes.at(id).sym.back());
        if (reads.split == 1 && i == "i")
          idx = "row * " + pitch + " + c";
        else if (!reads.pitched_row.empty())
          idx = "(" + i + ") + " + reads.pitched_row + " * (" + pitch + " - " + cols + ")";
        else
          idx = "(" + i + ") / " + cols + " * " + pitch + " + (" + i + ") % " + cols;
      }
      const auto held = idx == i ? reads.held_reads.find(p) : reads.held_reads.end();
      const bool is_held = held != reads.held_reads.end();
      if (mask) {
        out.line("const float " + name + " = " + (is_held ? held->second : p + "[" + idx + "]") + " ? 1.0f : 0.0f;");
        var[id] = name;
        return name;
      }
      std::string ld = p + "[" + idx + "]";
      if (is_held)
        ld = held->second;
      else if (reads.load_hint == "streaming" && idx == i)
        ld = "__ldcs(" + p + " + " + i + ")";
      else if (reads.load_hint == "readonly" || (reads.load_hint == "readonly_broadcast" && idx != i))
        ld = "__ldg(" + p + " + (" + idx + "))";
      out.line("const float " + name + " = " + ld + ";");
      var[id] = name;
      return name;
    }
    if (auto s = cx.scalar_sym.find(id); s != cx.scalar_sym.end()) {
      std::string p = kp.float32(s->second);
      var[id] = p;
      return p;
    }
    if (v.is_scalar()) return flit(v.numbers.at(0));
    return error{"value " + id + " (" + v.type + ") cannot be an operand"};
  }

  // An op the table writes: its expression with the placeholders filled (op_table.hpp).
  result<std::string> table_expression(const graph_node& n, const op_info& op, const std::string& X) {
    if (op.inputs && static_cast<int>(n.inputs.size()) != op.inputs)
      return error{n.kind + " with " + std::to_string(n.inputs.size()) + " inputs is not supported"};
    const std::string_view t = op.expr;
    if (op.fast_math) cx.uses_fast_math = true;
    // The operands first, in ascending input order: each load is a statement.
    std::map<size_t, std::string> opnds;
    for (size_t at = t.find('{'); at != std::string_view::npos; at = t.find('{', at + 1)) {
      const size_t end = t.find('}', at);
      const std::string_view inner = t.substr(at + 1, end - at - 1);
      if (inner != "x" && inner.find('=') == std::string_view::npos) opnds[std::stoul(std::string(inner))];
    }
    for (auto& [k, text] : opnds) {
      auto b = operand(n.inputs.at(k));
      if (!b) return error{n.kind + ": " + b.message()};
      text = *b;
    }
    std::string e;
    for (size_t at = 0; at < t.size();) {
      const size_t open = t.find('{', at);
      if (open == std::string_view::npos) {
        e += t.substr(at);
        break;
      }
      e += t.substr(at, open - at);
      const size_t end = t.find('}', open);
      const std::string inner(t.substr(open + 1, end - open - 1));
      const size_t eq = inner.find('=');
      if (inner == "x")
        e += X;
      else if (eq == std::string::npos)
        e += opnds.at(std::stoul(inner));
      else
        e += flit(num_arg(cx, n, std::stoul(inner.substr(0, eq)), std::stod(inner.substr(eq + 1))));
      at = end + 1;
    }
    return e;
  }

  // The elementwise ops the table leaves to code: their arguments change the
  // expression's form. "" for any other op.
  result<std::string> custom_expression(const graph_node& node, const std::string& kind, const std::string& X) {
    const graph_node* n = &node;
    auto num = [&](size_t k, double dflt) { return num_arg(cx, node, k, dflt); };
    auto none = [&](size_t k) { return none_arg(cx, node, k); };
    auto opnd = [&](size_t k) -> result<std::string> { return operand(n->inputs.at(k)); };
    auto second = [&]() -> result<std::string> { return opnd(1); };
    std::string e;
    if (kind == "aten::logit") {
      if (!none(1)) return error{"aten::logit with eps is not supported by the rules coder"};
      e = "logf(" + X + " / (1.0f - " + X + "))";
    } else if (kind == "aten::gelu") {
      const graph_value* ap = n->inputs.size() > 1 ? &cx.val(n->inputs[1]) : nullptr;
      if (ap && ap->text == "tanh")
        e = "0.5f * " + X + " * (1.0f + tanhf(0.7978845608028654f * (" + X + " + 0.044715f * " + X + " * " + X + " * " +
            X + ")))";
      else
        e = "0.5f * " + X + " * (1.0f + erff(" + X + " * 0.7071067811865476f))";
    } else if (kind == "aten::dropout" || kind == "aten::feature_dropout" || kind == "aten::alpha_dropout") {
      if (num(2, 0) != 0 && num(1, 1) != 0)  // p = 0 draws nothing in training mode either
        return error{n->kind + " in training mode is not supported by the rules coder"};
      e = X;
    } else if (kind == "aten::clamp" || kind == "aten::clip") {
      e = X;
      for (int k : {1, 2}) {
        if (none(k)) continue;
        auto b = opnd(k);
        if (!b) return error{n->kind + ": " + b.message()};
        e = std::string(k == 1 ? "fmaxf(" : "fminf(") + e + ", " + *b + ")";
      }
    } else if (kind == "aten::pow") {
      const graph_value& ev = cx.val(n->inputs[1]);
      if (!cx.val(n->inputs[0]).is_tensor()) {
        auto b = second();
        if (!b) return error{n->kind + ": " + b.message()};
        e = "powf(" + X + ", " + *b + ")";
      } else if (ev.is_scalar() && !cx.scalar_sym.count(n->inputs[1])) {
        double p = ev.numbers.at(0);
        if (p == 2)
          e = X + " * " + X;
        else if (p == 3)
          e = X + " * " + X + " * " + X;
        else if (p == 1)
          e = X;
        else if (p == 0.5)
          e = "sqrtf(" + X + ")";
        else if (p == -1)
          e = "1.0f / " + X;
        else
          e = "powf(" + X + ", " + flit(p) + ")";
      } else {
        auto b = second();
        if (!b) return error{n->kind + ": " + b.message()};
        e = "powf(" + X + ", " + *b + ")";
      }
    } else if (kind == "aten::add" || kind == "aten::sub" || kind == "aten::subtract" || kind == "aten::rsub") {
      auto b = second();
      if (!b) return error{n->kind + ": " + b.message()};
      double alpha = num(2, 1);
      std::string B = alpha == 1 ? *b : flit(alpha) + " * " + *b;
      if (kind == "aten::add")
        e = X + " + " + B;
      else if (kind == "aten::rsub")
        e = *b + " - " + (alpha == 1 ? X : flit(alpha) + " * " + X);
      else
        e = X + " - " + B;
    } else if (kind == "aten::div" || kind == "aten::divide" || kind == "aten::true_divide") {
      auto b = second();
      if (!b) return error{n->kind + ": " + b.message()};
      const graph_value* mode = n->inputs.size() > 2 ? &cx.val(n->inputs[2]) : nullptr;
      e = X + " / " + *b;
      if (mode && mode->text == "floor")
        e = "floorf(" + e + ")";
      else if (mode && mode->text == "trunc")
        e = "truncf(" + e + ")";
    }
    return e;
  }

  status node(const graph_node& node) {
    const graph_node* n = &node;
    std::string kind = base_kind(n->kind);
    auto x = operand(n->inputs.at(0));
    if (!x) return error{n->kind + ": " + x.message()};
    const std::string X = *x;
    const op_info* op = find_op(kind);
    std::string e;
    if (op && op->cls == op_class::elementwise) {
      auto r = op->expr.empty() ? custom_expression(node, kind, X) : table_expression(node, *op, X);
      if (!r) return error{r.message()};
      e = *r;
    }
    if (e.empty()) return error{"op " + n->kind + " (value " + n->outputs[0] + ") is not supported by the rules coder"};
    std::string name = "e" + tag + std::to_string(var.size());
    out.line("const float " + name + " = " + e + ";");
    var[n->outputs[0]] = name;
    return {};
  }
};

}  // namespace

status chain_code(lowering_context& cx, const stage& st, const std::string& i, kernel_params& kp, std::string& code,
                  std::map<std::string, std::string>& var, const std::string& tag, const chain_reads& reads) {
  chain_writer w{cx, st, i, kp, code, var, tag, reads};
  for (const graph_node* n : st.nodes)
    if (auto s = w.node(*n); !s) return s;
  return {};
}

result<epilogue_code> fused_epilogue(lowering_context& cx, size_t si, const std::string& value, const std::string& idx,
                                     kernel_params& kp) {
  epilogue_code out;
  if (cx.stages[si].epilogue() < 0) return out;
  const stage& epi = cx.stages[cx.stages[si].epilogue()];
  std::map<std::string, std::string> var{{value, "res"}};
  if (auto s = chain_code(cx, epi, idx, kp, out.code, var, "p"); !s) return error{s.message()};
  code_writer stores(out.stores, 2);
  for (auto* en : epi.nodes) {
    auto it = cx.tensor_of.find(en->outputs[0]);
    if (it == cx.tensor_of.end()) continue;
    stores.line(kp.tensor_out(it->second) + "[" + idx + "] = " + var.at(en->outputs[0]) + ";");
    cx.written.insert(en->outputs[0]);
  }
  return out;
}

}  // namespace ks::rules
