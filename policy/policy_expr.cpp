#include "policy/policy_expr.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

#include "policy/policy_expr_tree.hpp"

namespace ks {

// ---------------------------------------------------------------------------
// Values.

policy_value policy_value::number(double v) {
  policy_value x;
  x.kind_ = kind::number;
  x.number_ = v;
  return x;
}

policy_value policy_value::string(std::string v) {
  policy_value x;
  x.kind_ = kind::string;
  x.string_ = std::move(v);
  return x;
}

policy_value policy_value::boolean(bool v) {
  policy_value x;
  x.kind_ = kind::boolean;
  x.number_ = v ? 1 : 0;
  return x;
}

double policy_value::as_number() const { return numeric() ? number_ : 0.0; }

const std::string& policy_value::as_string() const {
  static const std::string empty;
  return kind_ == kind::string ? string_ : empty;
}

std::optional<bool> policy_value::truth() const {
  if (!numeric()) return std::nullopt;
  return number_ != 0;
}

std::string format_number(double v) {
  if (v == 0) return "0";  // also -0
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "nan";
  return std::string(buf, end);
}

std::string policy_value::to_string() const {
  switch (kind_) {
    case kind::unknown:
      return "unknown";
    case kind::number:
      return format_number(number_);
    case kind::string:
      return "'" + string_ + "'";
    case kind::boolean:
      return number_ != 0 ? "true" : "false";
  }
  return "?";
}

const char* to_string(value_type t) {
  switch (t) {
    case value_type::number:
      return "number";
    case value_type::string:
      return "string";
    case value_type::boolean:
      return "boolean";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Environment.

void policy_environment::set(const std::string& name, policy_value v, std::vector<std::string> missing) {
  values_[name] = std::move(v);
  if (missing.empty()) {
    missing_.erase(name);
  } else {
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    missing_[name] = std::move(missing);
  }
}

const policy_value* policy_environment::find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

std::vector<std::string> policy_environment::missing_for(const std::string& name) const {
  auto v = values_.find(name);
  if (v == values_.end()) return {name};
  if (v->second.known()) return {};
  auto m = missing_.find(name);
  if (m == missing_.end() || m->second.empty()) return {name};
  return m->second;
}

namespace {

using node = policy_expr::node;
using node_ptr = std::shared_ptr<const node>;

bool is_comparison(op k) {
  return k == op::lt || k == op::le || k == op::gt || k == op::ge || k == op::eq || k == op::ne;
}

const char* symbol(op k) {
  switch (k) {
    case op::neg:
      return "-";
    case op::not_:
      return "!";
    case op::add:
      return "+";
    case op::sub:
      return "-";
    case op::mul:
      return "*";
    case op::div:
      return "/";
    case op::lt:
      return "<";
    case op::le:
      return "<=";
    case op::gt:
      return ">";
    case op::ge:
      return ">=";
    case op::eq:
      return "==";
    case op::ne:
      return "!=";
    case op::and_:
      return "&&";
    case op::or_:
      return "||";
    case op::in:
      return "in";
    default:
      return "?";
  }
}

// The symbol people read in audit text.
const char* pretty_symbol(op k) {
  switch (k) {
    case op::le:
      return "≤";
    case op::ge:
      return "≥";
    case op::ne:
      return "≠";
    case op::eq:
      return "=";
    default:
      return symbol(k);
  }
}

// Binding strength, higher binds tighter.
int precedence(op k) {
  switch (k) {
    case op::or_:
      return 1;
    case op::and_:
      return 2;
    case op::lt:
    case op::le:
    case op::gt:
    case op::ge:
    case op::eq:
    case op::ne:
    case op::in:
      return 3;
    case op::add:
    case op::sub:
      return 4;
    case op::mul:
    case op::div:
      return 5;
    case op::neg:
    case op::not_:
      return 6;
    default:
      return 7;
  }
}

void collect_identifiers(const node& n, std::vector<std::string>& out) {
  if (n.kind == op::ident) out.push_back(n.name);
  for (const auto& k : n.kids) collect_identifiers(*k, out);
}

// ---------------------------------------------------------------------------
// Evaluation.

struct eval_out {
  policy_value value;
  std::set<std::string> missing;  // absent names behind an unknown value
};

eval_out unknown_from(std::initializer_list<const eval_out*> parts) {
  eval_out r;
  for (const eval_out* p : parts) {
    if (!p->value.known()) r.missing.insert(p->missing.begin(), p->missing.end());
  }
  return r;
}

// a + b, a - b, a * b or a / b: unknown where an operand is unknown or a string, or the
// result is not finite (a division by zero is noted).
eval_out arithmetic(op k, const eval_out& a, const eval_out& b, evaluation_record* rec) {
  if (!a.value.numeric() || !b.value.numeric()) {
    if (a.value.known() && b.value.known() && rec) rec->notes.insert("arithmetic on a string");
    return unknown_from({&a, &b});
  }
  const double x = a.value.as_number(), y = b.value.as_number();
  double r = 0;
  switch (k) {
    case op::add:
      r = x + y;
      break;
    case op::sub:
      r = x - y;
      break;
    case op::mul:
      r = x * y;
      break;
    default:
      if (y == 0) {
        if (rec) rec->notes.insert("division by zero");
        return {};
      }
      r = x / y;
  }
  if (!std::isfinite(r)) return {};
  return {policy_value::number(r), {}};
}

// a < b ... a != b: numbers by value, strings for equality only (a string against a
// number is noted and unknown).
eval_out comparison(op k, const eval_out& a, const eval_out& b, evaluation_record* rec) {
  if (!a.value.known() || !b.value.known()) return unknown_from({&a, &b});
  if (a.value.numeric() && b.value.numeric()) {
    const double x = a.value.as_number(), y = b.value.as_number();
    bool r = false;
    switch (k) {
      case op::lt:
        r = x < y;
        break;
      case op::le:
        r = x <= y;
        break;
      case op::gt:
        r = x > y;
        break;
      case op::ge:
        r = x >= y;
        break;
      case op::eq:
        r = x == y;
        break;
      default:
        r = x != y;
        break;
    }
    return {policy_value::boolean(r), {}};
  }
  const bool strings = a.value.type() == policy_value::kind::string && b.value.type() == policy_value::kind::string;
  if (strings && (k == op::eq || k == op::ne)) {
    const bool same = a.value.as_string() == b.value.as_string();
    return {policy_value::boolean(k == op::eq ? same : !same), {}};
  }
  if (rec) rec->notes.insert("comparison of a string with a number");
  return {};
}

eval_out eval(const node& n, const policy_environment& env, evaluation_record* rec) {
  switch (n.kind) {
    case op::number:
    case op::string:
    case op::boolean:
      return {n.literal, {}};
    case op::ident: {
      const policy_value* v = env.find(n.name);
      if (v && v->known()) {
        if (rec) rec->used[n.name] = *v;
        return {*v, {}};
      }
      eval_out r;
      for (auto& m : env.missing_for(n.name)) r.missing.insert(m);
      return r;
    }
    case op::not_: {
      eval_out a = eval(*n.kids[0], env, rec);
      if (auto t = a.value.truth()) return {policy_value::boolean(!*t), {}};
      if (a.value.known() && rec) rec->notes.insert("'!' applied to a string");
      return unknown_from({&a});
    }
    case op::neg: {
      eval_out a = eval(*n.kids[0], env, rec);
      if (a.value.numeric()) return {policy_value::number(-a.value.as_number()), {}};
      return unknown_from({&a});
    }
    case op::and_:
    case op::or_: {
      eval_out a = eval(*n.kids[0], env, rec);
      eval_out b = eval(*n.kids[1], env, rec);
      const auto ta = a.value.truth(), tb = b.value.truth();
      const bool absorbing = n.kind == op::or_;  // true absorbs ||, false absorbs &&
      if ((ta && *ta == absorbing) || (tb && *tb == absorbing)) {
        return {policy_value::boolean(absorbing), {}};
      }
      if (ta && tb) return {policy_value::boolean(!absorbing), {}};
      return unknown_from({&a, &b});
    }
    case op::add:
    case op::sub:
    case op::mul:
    case op::div: {
      eval_out a = eval(*n.kids[0], env, rec);
      eval_out b = eval(*n.kids[1], env, rec);
      return arithmetic(n.kind, a, b, rec);
    }
    case op::lt:
    case op::le:
    case op::gt:
    case op::ge:
    case op::eq:
    case op::ne: {
      eval_out a = eval(*n.kids[0], env, rec);
      eval_out b = eval(*n.kids[1], env, rec);
      return comparison(n.kind, a, b, rec);
    }
    case op::in: {
      eval_out a = eval(*n.kids[0], env, rec);
      if (!a.value.known()) return unknown_from({&a});
      for (const auto& item : n.list) {
        if (item.type() == policy_value::kind::string) {
          if (a.value.type() == policy_value::kind::string && a.value.as_string() == item.as_string())
            return {policy_value::boolean(true), {}};
        } else if (a.value.numeric() && a.value.as_number() == item.as_number()) {
          return {policy_value::boolean(true), {}};
        }
      }
      return {policy_value::boolean(false), {}};
    }
    case op::call: {
      if (n.name == "has") {
        const policy_value* v = env.find(n.kids[0]->name);
        const bool present = v && v->known();
        if (present && rec) rec->used[n.kids[0]->name] = *v;
        return {policy_value::boolean(present), {}};
      }
      std::vector<eval_out> args;
      args.reserve(n.kids.size());
      bool all_numeric = true;
      for (const auto& k : n.kids) {
        args.push_back(eval(*k, env, rec));
        all_numeric = all_numeric && args.back().value.numeric();
      }
      if (!all_numeric) {
        eval_out r;
        for (const auto& a : args) {
          if (!a.value.known()) r.missing.insert(a.missing.begin(), a.missing.end());
        }
        return r;
      }
      if (n.name == "abs") return {policy_value::number(std::fabs(args[0].value.as_number())), {}};
      double r = args[0].value.as_number();
      for (size_t i = 1; i < args.size(); ++i) {
        const double x = args[i].value.as_number();
        r = n.name == "min" ? std::min(r, x) : std::max(r, x);
      }
      return {policy_value::number(r), {}};
    }
  }
  return {};
}

// ---------------------------------------------------------------------------
// Type checking.

using type_opt = std::optional<value_type>;  // nullopt: unknown name, do not cascade

bool numeric_type(value_type t) { return t != value_type::string; }

type_opt check_node(const node& n, const std::map<std::string, value_type>& scope, expression_check& out) {
  const auto problem = [&](int column, const std::string& what) {
    out.problems.push_back("column " + std::to_string(column) + ": " + what);
  };
  switch (n.kind) {
    case op::number:
      return value_type::number;
    case op::string:
      return value_type::string;
    case op::boolean:
      return value_type::boolean;
    case op::ident: {
      auto it = scope.find(n.name);
      if (it == scope.end()) {
        out.unknown_names.emplace_back(n.name, n.column);
        return std::nullopt;
      }
      return it->second;
    }
    case op::not_: {
      type_opt a = check_node(*n.kids[0], scope, out);
      if (a && !numeric_type(*a)) problem(n.column, "'!' needs a condition, got a string");
      return value_type::boolean;
    }
    case op::neg: {
      type_opt a = check_node(*n.kids[0], scope, out);
      if (a && !numeric_type(*a)) problem(n.column, "'-' needs a number, got a string");
      return value_type::number;
    }
    case op::and_:
    case op::or_: {
      type_opt a = check_node(*n.kids[0], scope, out);
      type_opt b = check_node(*n.kids[1], scope, out);
      if ((a && !numeric_type(*a)) || (b && !numeric_type(*b)))
        problem(n.column, std::string("'") + symbol(n.kind) + "' needs conditions, got a string");
      return value_type::boolean;
    }
    case op::add:
    case op::sub:
    case op::mul:
    case op::div: {
      type_opt a = check_node(*n.kids[0], scope, out);
      type_opt b = check_node(*n.kids[1], scope, out);
      if ((a && !numeric_type(*a)) || (b && !numeric_type(*b)))
        problem(n.column, std::string("'") + symbol(n.kind) + "' needs numbers, got a string");
      return value_type::number;
    }
    case op::lt:
    case op::le:
    case op::gt:
    case op::ge:
    case op::eq:
    case op::ne: {
      type_opt a = check_node(*n.kids[0], scope, out);
      type_opt b = check_node(*n.kids[1], scope, out);
      if (a && b) {
        const bool sa = *a == value_type::string, sb = *b == value_type::string;
        if (sa != sb) {
          problem(n.column, std::string("'") + symbol(n.kind) + "' compares a string with a number");
        } else if (sa && n.kind != op::eq && n.kind != op::ne) {
          problem(n.column,
                  std::string("'") + symbol(n.kind) + "' orders numbers; strings compare only with == and !=");
        }
      }
      return value_type::boolean;
    }
    case op::in: {
      type_opt a = check_node(*n.kids[0], scope, out);
      const bool list_strings = n.list.front().type() == policy_value::kind::string;
      if (a && (*a == value_type::string) != list_strings) {
        problem(n.column, std::string("'in' tests a ") + (*a == value_type::string ? "string" : "number") +
                              " against a list of " + (list_strings ? "strings" : "numbers"));
      }
      return value_type::boolean;
    }
    case op::call: {
      if (n.name == "has") {
        check_node(*n.kids[0], scope, out);
        return value_type::boolean;
      }
      for (const auto& k : n.kids) {
        type_opt t = check_node(*k, scope, out);
        if (t && !numeric_type(*t)) problem(k->column, n.name + "() needs numbers, got a string");
      }
      return value_type::number;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Printing.

std::string print(const node& n, int parent_prec = 0) {
  std::string s;
  switch (n.kind) {
    case op::number:
    case op::boolean:
    case op::string:
      return n.literal.to_string();
    case op::ident:
      return n.name;
    case op::call: {
      s = n.name + "(";
      for (size_t i = 0; i < n.kids.size(); ++i) s += (i ? ", " : "") + print(*n.kids[i]);
      return s + ")";
    }
    case op::not_:
      s = "!" + print(*n.kids[0], precedence(op::not_));
      break;
    case op::neg:
      s = "-" + print(*n.kids[0], precedence(op::neg));
      break;
    case op::in: {
      s = print(*n.kids[0], precedence(op::in) + 1) + " in [";
      for (size_t i = 0; i < n.list.size(); ++i) s += (i ? ", " : "") + n.list[i].to_string();
      s += "]";
      break;
    }
    default: {
      const int p = precedence(n.kind);
      // Left-associative: the right operand needs parentheses at equal precedence.
      s = print(*n.kids[0], is_comparison(n.kind) ? p + 1 : p) + " " + symbol(n.kind) + " " + print(*n.kids[1], p + 1);
      break;
    }
  }
  return precedence(n.kind) < parent_prec ? "(" + s + ")" : s;
}

// One side of a comparison in audit text: literal as is, a name with its value, a
// compound with " = value".
std::string side(const node& n, const policy_environment& env) {
  if (n.kind == op::number || n.kind == op::string || n.kind == op::boolean) return print(n);
  const policy_value v = eval(n, env, nullptr).value;
  if (n.kind == op::ident) return n.name + " " + v.to_string();
  return print(n) + " = " + v.to_string();
}

std::string explain_node(const node& n, const policy_environment& env, const policy_expr::definition_lookup& def) {
  const policy_value v = eval(n, env, nullptr).value;
  switch (n.kind) {
    case op::and_:
    case op::or_: {
      const bool want = v.truth().value_or(false);
      // Report the operands that decided the value: for a true ||, the true ones;
      // for a false &&, the false ones; otherwise both.
      std::vector<std::string> parts;
      for (const auto& k : n.kids) {
        const auto t = eval(*k, env, nullptr).value.truth();
        const bool decisive = (n.kind == op::or_ && want)                  ? t == std::optional<bool>(true)
                              : (n.kind == op::and_ && v.known() && !want) ? t == std::optional<bool>(false)
                                                                           : true;
        if (decisive) parts.push_back(explain_node(*k, env, def));
      }
      std::string s;
      const char* glue = n.kind == op::and_ ? " and " : " or ";
      for (size_t i = 0; i < parts.size(); ++i) s += (i ? glue : "") + parts[i];
      return s;
    }
    case op::not_: {
      const node& k = *n.kids[0];
      if (k.kind == op::ident) {
        const policy_value kv = eval(k, env, nullptr).value;
        const policy_expr* d = def ? def(k.name) : nullptr;
        if (d && kv.type() == policy_value::kind::boolean) return "not " + k.name + " (" + d->explain(env, def) + ")";
        return "not " + k.name + " (" + kv.to_string() + ")";
      }
      return "not (" + explain_node(k, env, def) + ")";
    }
    case op::ident:
      if (v.type() == policy_value::kind::boolean) {
        const policy_expr* d = def ? def(n.name) : nullptr;
        const std::string because = d ? " (" + d->explain(env, def) + ")" : "";
        return (v.truth().value_or(false) ? n.name : "not " + n.name) + because;
      }
      return n.name + " " + v.to_string();
    case op::in:
      return side(*n.kids[0], env) + (v.truth() == std::optional<bool>(false) ? " not in [" : " in [") + [&] {
        std::string s;
        for (size_t i = 0; i < n.list.size(); ++i) s += (i ? ", " : "") + n.list[i].to_string();
        return s;
      }() + "]";
    case op::lt:
    case op::le:
    case op::gt:
    case op::ge:
    case op::eq:
    case op::ne: {
      // State what is true: a comparison that failed reads with the negated operator.
      op shown = n.kind;
      if (v.truth() == std::optional<bool>(false)) {
        switch (n.kind) {
          case op::lt:
            shown = op::ge;
            break;
          case op::le:
            shown = op::gt;
            break;
          case op::gt:
            shown = op::le;
            break;
          case op::ge:
            shown = op::lt;
            break;
          case op::eq:
            shown = op::ne;
            break;
          default:
            shown = op::eq;
            break;
        }
      }
      return side(*n.kids[0], env) + " " + pretty_symbol(shown) + " " + side(*n.kids[1], env);
    }
    default:
      return print(n) + " = " + v.to_string();
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// policy_expr.

result<policy_expr> policy_expr::parse(std::string_view text) {
  auto root = policy_tree::parse(text);
  if (!root) return root.error();
  policy_expr e;
  e.root_ = *root;
  e.text_ = std::string(text);
  collect_identifiers(*e.root_, e.identifiers_);
  std::sort(e.identifiers_.begin(), e.identifiers_.end());
  e.identifiers_.erase(std::unique(e.identifiers_.begin(), e.identifiers_.end()), e.identifiers_.end());
  return e;
}

expression_check policy_expr::check(const std::map<std::string, value_type>& scope) const {
  expression_check out;
  if (root_) out.type = check_node(*root_, scope, out);
  return out;
}

policy_value policy_expr::evaluate(const policy_environment& env, evaluation_record* record) const {
  if (!root_) return {};
  eval_out r = eval(*root_, env, record);
  if (record && !r.value.known()) record->missing.insert(r.missing.begin(), r.missing.end());
  return r.value;
}

std::string policy_expr::canonical() const { return root_ ? print(*root_) : ""; }

std::string policy_expr::explain(const policy_environment& env, const definition_lookup& definition) const {
  return root_ ? explain_node(*root_, env, definition) : "";
}

}  // namespace ks
