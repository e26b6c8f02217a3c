#include "coder/rules/chain.hpp"

#include <set>

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
  const shaped& iter = st.iter;
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

std::string access(const shaped& in, const shaped& iter, const std::string& i, kernel_params& kp, size_t split_) {
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
    if (has_inner) e = "(" + e + " / " + kp.int64(product(inner)) + ")";
    bool has_outer = false;
    for (size_t q = lo; q < a; ++q) has_outer |= iter.shape[q] != 1;
    if (has_outer) e = "(" + e + " % " + kp.int64(product(span)) + ")";
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

// The ops of one operand and no argument: their expression over X, or "" for any
// other op.
std::string unary_expression(const std::string& kind, const std::string& X) {
  std::string e;
  if (kind == "aten::relu") e = "fmaxf(" + X + ", 0.0f)";
  else if (kind == "aten::sigmoid") e = "KS_DIV(1.0f, 1.0f + KS_EXP(-" + X + "))";
  else if (kind == "aten::tanh") e = "tanhf(" + X + ")";
  else if (kind == "aten::exp") e = "KS_EXP(" + X + ")";
  else if (kind == "aten::log") e = "logf(" + X + ")";
  else if (kind == "aten::neg") e = "-" + X;
  else if (kind == "aten::abs") e = "fabsf(" + X + ")";
  else if (kind == "aten::sqrt") e = "sqrtf(" + X + ")";
  else if (kind == "aten::rsqrt") e = "rsqrtf(" + X + ")";
  else if (kind == "aten::silu") e = "KS_DIV(" + X + ", 1.0f + KS_EXP(-" + X + "))";
  else if (kind == "aten::sin") e = "sinf(" + X + ")";
  else if (kind == "aten::cos") e = "cosf(" + X + ")";
  else if (kind == "aten::tan") e = "tanf(" + X + ")";
  else if (kind == "aten::atan") e = "atanf(" + X + ")";
  else if (kind == "aten::sinh") e = "sinhf(" + X + ")";
  else if (kind == "aten::cosh") e = "coshf(" + X + ")";
  else if (kind == "aten::erf") e = "erff(" + X + ")";
  else if (kind == "aten::erfc") e = "erfcf(" + X + ")";
  else if (kind == "aten::log1p") e = "log1pf(" + X + ")";
  else if (kind == "aten::expm1") e = "expm1f(" + X + ")";
  else if (kind == "aten::exp2") e = "exp2f(" + X + ")";
  else if (kind == "aten::log2") e = "log2f(" + X + ")";
  else if (kind == "aten::log10") e = "log10f(" + X + ")";
  else if (kind == "aten::reciprocal") e = "1.0f / " + X;
  else if (kind == "aten::square") e = X + " * " + X;
  else if (kind == "aten::floor") e = "floorf(" + X + ")";
  else if (kind == "aten::ceil") e = "ceilf(" + X + ")";
  else if (kind == "aten::trunc") e = "truncf(" + X + ")";
  else if (kind == "aten::sign") e = "(float)((" + X + " > 0.0f) - (" + X + " < 0.0f))";
  // Times 1/6 rather than an IEEE division (a subroutine with a slow path): within
  // an ulp of ATen's x / 6, and the kernel stays at memory speed.
  else if (kind == "aten::hardsigmoid") e = "fminf(fmaxf(" + X + " * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f)";
  else if (kind == "aten::hardswish") e = X + " * fminf(fmaxf(" + X + " + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f)";
  else if (kind == "aten::relu6") e = "fminf(fmaxf(" + X + ", 0.0f), 6.0f)";
  else if (kind == "aten::mish")
    e = X + " * tanhf(" + X + " > 20.0f ? " + X + " : log1pf(expf(" + X + ")))";
  else if (kind == "aten::selu")
    e = "1.0507009873554805f * (" + X + " > 0.0f ? " + X + " : 1.6732632423543772f * expm1f(" + X + "))";
  else if (kind == "aten::log_sigmoid") e = "fminf(" + X + ", 0.0f) - log1pf(expf(-fabsf(" + X + ")))";
  else if (kind == "aten::softsign") e = X + " / (1.0f + fabsf(" + X + "))";
  return e;
}

// The ops of one operand and constant arguments (slopes, bounds, the gelu's
// approximation): their expression over X, or "" for any other op.
result<std::string> constant_expression(const lowering_context& cx, const graph_node& node, const std::string& kind,
                                        const std::string& X) {
  const graph_node* n = &node;
  auto num = [&](size_t k, double dflt) { return num_arg(cx, node, k, dflt); };
  auto none = [&](size_t k) { return none_arg(cx, node, k); };
  std::string e;
  if (kind == "aten::logit") {
    if (!none(1)) return error{"aten::logit with eps is not supported by the rules coder"};
    e = "logf(" + X + " / (1.0f - " + X + "))";
  } else if (kind == "aten::gelu") {
    const graph_value* ap = n->inputs.size() > 1 ? &cx.val(n->inputs[1]) : nullptr;
    if (ap && ap->text == "tanh")
      e = "0.5f * " + X + " * (1.0f + tanhf(0.7978845608028654f * (" + X + " + 0.044715f * " + X + " * " + X + " * " + X + ")))";
    else
      e = "0.5f * " + X + " * (1.0f + erff(" + X + " * 0.7071067811865476f))";
  } else if (kind == "aten::leaky_relu") {
    e = X + " > 0.0f ? " + X + " : " + X + " * " + flit(num(1, 0.01));
  } else if (kind == "aten::hardtanh") {
    e = "fminf(fmaxf(" + X + ", " + flit(num(1, -1)) + "), " + flit(num(2, 1)) + ")";
  } else if (kind == "aten::elu") {
    std::string al = flit(num(1, 1)), sc = flit(num(2, 1)), is = flit(num(3, 1));
    e = X + " > 0.0f ? " + sc + " * " + X + " : " + sc + " * " + al + " * expm1f(" + X + " * " + is + ")";
  } else if (kind == "aten::celu") {
    std::string al = flit(num(1, 1));
    e = "fmaxf(" + X + ", 0.0f) + fminf(0.0f, " + al + " * expm1f(" + X + " / " + al + "))";
  } else if (kind == "aten::softplus") {
    std::string be = flit(num(1, 1)), th = flit(num(2, 20));
    e = X + " * " + be + " > " + th + " ? " + X + " : log1pf(expf(" + X + " * " + be + ")) / " + be;
  } else if (kind == "aten::threshold") {
    e = X + " > " + flit(num(1, 0)) + " ? " + X + " : " + flit(num(2, 0));
  } else if (kind == "aten::hardshrink") {
    std::string l = flit(num(1, 0.5));
    e = "fabsf(" + X + ") > " + l + " ? " + X + " : 0.0f";
  } else if (kind == "aten::softshrink") {
    std::string l = flit(num(1, 0.5));
    e = X + " > " + l + " ? " + X + " - " + l + " : (" + X + " < -" + l + " ? " + X + " + " + l + " : 0.0f)";
  } else if (kind == "aten::dropout" || kind == "aten::feature_dropout" || kind == "aten::alpha_dropout") {
    if (num(2, 0) != 0 && num(1, 1) != 0)  // p = 0 draws nothing in training mode either
      return error{n->kind + " in training mode is not supported by the rules coder"};
    e = X;
  } else if (kind == "aten::contiguous" || kind == "aten::clone" || kind == "aten::detach" ||
             kind == "aten::to" || kind == "aten::type_as" || kind == "aten::expand_as" ||
             kind == "aten::expand") {
    e = X;
  }
  return e;
}

// Writes one chain's statements: the operands it reads, then each node's value.
struct chain_writer {
  const lowering_context& cx;
  const stage& st;
  const std::string& i;
  kernel_params& kp;
  std::string& code;
  std::map<std::string, std::string>& var;
  const std::string& tag;
  const chain_reads& reads;

  // The variable, parameter or literal that holds value `id`; a tensor is loaded
  // into a variable at its first read.
  result<std::string> operand(const std::string& id) {
    if (auto it = var.find(id); it != var.end()) return it->second;
    const graph_value& v = cx.val(id);
    if (v.is_tensor()) {
      auto t = cx.tensor_of.find(id);
      if (t == cx.tensor_of.end()) return error{"value " + id + " is read before it is computed"};
      if (v.dtype != "float32" && v.dtype != "bool") return error{"value " + id + " is " + v.dtype + "; float32 or bool only"};
      // A bool is promoted as ATen promotes it (0.0f or 1.0f), by a byte load of its
      // own: the templates' float vector loads and row caches take "in" parameters only.
      const bool mask = v.dtype == "bool";
      std::string p = kp.tensor_in(t->second, mask ? "bool" : "float");
      std::string name = "x" + tag + std::to_string(var.size());
      const std::string idx = access(cx.shapes.at(id), st.iter, i, kp, reads.split);
      if (mask) {
        code += "    const float " + name + " = " + p + "[" + idx + "] ? 1.0f : 0.0f;\n";
        var[id] = name;
        return name;
      }
      std::string ld = p + "[" + idx + "]";
      if (reads.load_hint == "streaming" && idx == i) ld = "__ldcs(" + p + " + " + i + ")";
      else if (reads.load_hint == "readonly" || (reads.load_hint == "readonly_broadcast" && idx != i))
        ld = "__ldg(" + p + " + (" + idx + "))";
      code += "    const float " + name + " = " + ld + ";\n";
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

  // The ops that read a second operand (or a third: clamp's bounds, pow's exponent
  // as a tensor): their expression over X, or "" for any other op.
  result<std::string> operand_expression(const graph_node& node, const std::string& kind, const std::string& X) {
    const graph_node* n = &node;
    auto num = [&](size_t k, double dflt) { return num_arg(cx, node, k, dflt); };
    auto none = [&](size_t k) { return none_arg(cx, node, k); };
    auto opnd = [&](size_t k) -> result<std::string> { return operand(n->inputs.at(k)); };
    auto second = [&]() -> result<std::string> { return opnd(1); };
    std::string e;
    if (kind == "aten::clamp" || kind == "aten::clip") {
      e = X;
      for (int k : {1, 2}) {
        if (none(k)) continue;
        auto b = opnd(k);
        if (!b) return error{n->kind + ": " + b.message()};
        e = std::string(k == 1 ? "fmaxf(" : "fminf(") + e + ", " + *b + ")";
      }
    } else if (kind == "aten::clamp_min" || kind == "aten::clamp_max") {
      auto b = second();
      if (!b) return error{n->kind + ": " + b.message()};
      e = std::string(kind == "aten::clamp_min" ? "fmaxf(" : "fminf(") + X + ", " + *b + ")";
    } else if (kind == "aten::pow") {
      const graph_value& ev = cx.val(n->inputs[1]);
      if (!cx.val(n->inputs[0]).is_tensor()) {
        auto b = second();
        if (!b) return error{n->kind + ": " + b.message()};
        e = "powf(" + X + ", " + *b + ")";
      } else if (ev.is_scalar() && !cx.scalar_sym.count(n->inputs[1])) {
        double p = ev.numbers.at(0);
        if (p == 2) e = X + " * " + X;
        else if (p == 3) e = X + " * " + X + " * " + X;
        else if (p == 1) e = X;
        else if (p == 0.5) e = "sqrtf(" + X + ")";
        else if (p == -1) e = "1.0f / " + X;
        else e = "powf(" + X + ", " + flit(p) + ")";
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
      if (kind == "aten::add") e = X + " + " + B;
      else if (kind == "aten::rsub") e = *b + " - " + (alpha == 1 ? X : flit(alpha) + " * " + X);
      else e = X + " - " + B;
    } else if (kind == "aten::mul" || kind == "aten::multiply") {
      auto b = second();
      if (!b) return error{n->kind + ": " + b.message()};
      e = X + " * " + *b;
    } else if (kind == "aten::div" || kind == "aten::divide" || kind == "aten::true_divide") {
      auto b = second();
      if (!b) return error{n->kind + ": " + b.message()};
      const graph_value* mode = n->inputs.size() > 2 ? &cx.val(n->inputs[2]) : nullptr;
      // Division stays IEEE: KS_DIV (__fdividef) is wrong for huge divisors.
      e = X + " / " + *b;
      if (mode && mode->text == "floor") e = "floorf(" + e + ")";
      else if (mode && mode->text == "trunc") e = "truncf(" + e + ")";
    } else if (kind == "aten::maximum" || kind == "aten::minimum" || kind == "aten::atan2") {
      auto b = second();
      if (!b) return error{n->kind + ": " + b.message()};
      e = (kind == "aten::maximum" ? "fmaxf(" : kind == "aten::minimum" ? "fminf(" : "atan2f(") + X + ", " + *b + ")";
    } else if (kind == "aten::where" || kind == "aten::masked_fill") {
      // where(condition, self, other), masked_fill(self, mask, value): the condition
      // or mask is a bool operand (read as 0.0f or 1.0f); the other two tensors or
      // scalars, the one picked passed through untouched (NaN included).
      if (n->inputs.size() != 3) return error{n->kind + " with " + std::to_string(n->inputs.size()) + " inputs is not supported"};
      auto a = opnd(1);
      if (!a) return error{n->kind + ": " + a.message()};
      auto b = opnd(2);
      if (!b) return error{n->kind + ": " + b.message()};
      e = kind == "aten::where" ? "(" + X + " != 0.0f ? " + *a + " : " + *b + ")" : "(" + *a + " != 0.0f ? " + *b + " : " + X + ")";
    } else if (kind == "aten::xlogy") {
      auto b = second();
      if (!b) return error{n->kind + ": " + b.message()};
      // ATen's: 0 where x is 0 (unless y is NaN), else x * log(y).
      e = "((" + X + ") == 0.0f && (" + *b + ") == (" + *b + ") ? 0.0f : (" + X + ") * logf(" + *b + "))";
    }
    return e;
  }

  status node(const graph_node& node) {
    const graph_node* n = &node;
    std::string kind = base_kind(n->kind);
    auto x = operand(n->inputs.at(0));
    if (!x) return error{n->kind + ": " + x.message()};
    const std::string X = *x;
    std::string e = unary_expression(kind, X);
    if (e.empty()) {
      auto c = constant_expression(cx, node, kind, X);
      if (!c) return error{c.message()};
      e = *c;
    }
    if (e.empty()) {
      auto b = operand_expression(node, kind, X);
      if (!b) return error{b.message()};
      e = *b;
    }
    if (e.empty()) return error{"op " + n->kind + " (value " + n->outputs[0] + ") is not supported by the rules coder"};
    std::string name = "e" + tag + std::to_string(var.size());
    code += "    const float " + name + " = " + e + ";\n";
    var[n->outputs[0]] = name;
    return {};
  }
};

}  // namespace

status chain_code(const lowering_context& cx, const stage& st, const std::string& i, kernel_params& kp,
                  std::string& code, std::map<std::string, std::string>& var, const std::string& tag,
                  const chain_reads& reads) {
  chain_writer w{cx, st, i, kp, code, var, tag, reads};
  for (const graph_node* n : st.nodes)
    if (auto s = w.node(*n); !s) return s;
  return {};
}

result<epilogue_code> fused_epilogue(lowering_context& cx, size_t si, const std::string& value, const std::string& idx,
                                     kernel_params& kp) {
  epilogue_code out;
  if (cx.stages[si].epilogue < 0) return out;
  stage& epi = cx.stages[cx.stages[si].epilogue];
  std::map<std::string, std::string> var{{value, "res"}};
  if (auto s = chain_code(cx, epi, idx, kp, out.code, var, "p"); !s) return error{s.message()};
  for (auto* en : epi.nodes) {
    auto it = cx.tensor_of.find(en->outputs[0]);
    if (it == cx.tensor_of.end()) continue;
    out.stores += "    " + kp.tensor_out(it->second) + "[" + idx + "] = " + var.at(en->outputs[0]) + ";\n";
    cx.written.insert(en->outputs[0]);
  }
  return out;
}

}  // namespace ks::rules
