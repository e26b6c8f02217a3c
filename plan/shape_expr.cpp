#include "plan/shape_expr.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <system_error>

#include "base/strings.hpp"
#include "plan/expr_runtime.hpp"

namespace ks {

// ---------------------------------------------------------------------------
// Values

std::string expr_value::to_string() const {
  if (!is_float) return std::to_string(i);
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, ec == std::errc() ? end : buf);
  // Keep the float-ness visible so that the text reads back as a float.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

bool is_identifier(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alpha(c) || digit(c); });
}

// ---------------------------------------------------------------------------
// Syntax tree

struct shape_expr::node {
  enum class kind { int_lit, float_lit, name, numel, ndim, shape, neg, add, sub, mul, div, mod, call };
  kind k = kind::int_lit;
  int64_t i = 0;
  double f = 0;
  std::string name;   // constant, tensor or function name
  size_t column = 1;  // 1-based column of the token this node stands for
  std::vector<std::shared_ptr<const node>> kids;
};

namespace {

using node = shape_expr::node;
using node_ptr = std::shared_ptr<const node>;

std::string at(size_t column, std::string_view text) {
  return " at column " + std::to_string(column) + " in \"" + std::string(text) + "\"";
}

struct function_info {
  const char* name;
  size_t arity;
};
constexpr function_info functions[] = {
    {"ceil_div", 2}, {"round_up", 2}, {"min", 2}, {"max", 2}, {"abs", 1}, {"floor", 1}, {"ceil", 1}, {"sqrt", 1},
};

std::string function_list() {
  std::string s;
  for (auto& fn : functions) {
    if (!s.empty()) s += ", ";
    s += fn.name;
  }
  return s;
}

// ---------------------------------------------------------------------------
// Lexer + recursive-descent parser. The grammar:
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/' | '%') unary)*
//   unary   := ('-' | '+') unary | primary
//   primary := NUMBER | '(' expr ')' | NAME '(' expr (',' expr)* ')'
//            | NAME '.' ('numel' | 'ndim' | 'shape' '[' expr ']') | NAME

enum class tok { end, number, name, punct };

struct token {
  tok type = tok::end;
  std::string_view text;
  size_t column = 1;  // 1-based
};

class parser {
 public:
  explicit parser(std::string_view text) : text_(text) {}

  result<node_ptr> parse_all() {
    auto lexed = lex();
    if (!lexed.ok()) return error{lexed.message()};
    if (toks_.size() == 1) return error{"empty expression" + at(1, text_)};
    auto e = parse_expr();
    if (!e.ok()) return e;
    const token& t = peek();
    if (t.type != tok::end) {
      if (t.text == ")") return error{"unmatched ')'" + at(t.column, text_)};
      return error{"unexpected '" + std::string(t.text) + "'" + at(t.column, text_) +
                   " (expected an operator or the end of the expression)"};
    }
    return e;
  }

 private:
  status lex() {
    size_t p = 0;
    auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    while (p < text_.size()) {
      char c = text_[p];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++p;
        continue;
      }
      size_t start = p;
      if (is_digit(c) || (c == '.' && p + 1 < text_.size() && is_digit(text_[p + 1]))) {
        while (p < text_.size() && is_digit(text_[p])) ++p;
        if (p < text_.size() && text_[p] == '.') {
          ++p;
          while (p < text_.size() && is_digit(text_[p])) ++p;
        }
        if (p < text_.size() && (text_[p] == 'e' || text_[p] == 'E')) {
          size_t q = p + 1;
          if (q < text_.size() && (text_[q] == '+' || text_[q] == '-')) ++q;
          if (q < text_.size() && is_digit(text_[q])) {
            p = q;
            while (p < text_.size() && is_digit(text_[p])) ++p;
          }
        }
        toks_.push_back({tok::number, text_.substr(start, p - start), start + 1});
        continue;
      }
      if (is_identifier(std::string_view(&c, 1))) {
        while (p < text_.size() && (is_identifier(std::string_view(&text_[p], 1)) || is_digit(text_[p]))) ++p;
        toks_.push_back({tok::name, text_.substr(start, p - start), start + 1});
        continue;
      }
      if (std::string_view("+-*/%(),.[]").find(c) != std::string_view::npos) {
        toks_.push_back({tok::punct, text_.substr(p, 1), p + 1});
        ++p;
        continue;
      }
      return error{"unexpected character '" + std::string(1, c) + "'" + at(p + 1, text_)};
    }
    toks_.push_back({tok::end, {}, text_.size() + 1});
    return {};
  }

  const token& peek() const { return toks_[pos_]; }
  const token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool is(std::string_view punct) const { return peek().type == tok::punct && peek().text == punct; }

  error unexpected(const token& t, std::string_view expected) {
    if (t.type == tok::end)
      return error{"unexpected end of expression" + at(t.column, text_) + " (expected " + std::string(expected) + ")"};
    return error{"unexpected '" + std::string(t.text) + "'" + at(t.column, text_) + " (expected " +
                 std::string(expected) + ")"};
  }

  static node_ptr make(node::kind k, size_t column, std::vector<node_ptr> kids = {}) {
    auto n = std::make_shared<node>();
    n->k = k;
    n->column = column;
    n->kids = std::move(kids);
    return n;
  }

  result<node_ptr> parse_expr() {
    auto lhs = parse_term();
    if (!lhs.ok()) return lhs;
    node_ptr n = lhs.value();
    while (is("+") || is("-")) {
      const token& op = next();
      auto rhs = parse_term();
      if (!rhs.ok()) return rhs;
      n = make(op.text == "+" ? node::kind::add : node::kind::sub, op.column, {n, rhs.value()});
    }
    return n;
  }

  result<node_ptr> parse_term() {
    auto lhs = parse_unary();
    if (!lhs.ok()) return lhs;
    node_ptr n = lhs.value();
    while (is("*") || is("/") || is("%")) {
      const token& op = next();
      auto rhs = parse_unary();
      if (!rhs.ok()) return rhs;
      auto k = op.text == "*" ? node::kind::mul : op.text == "/" ? node::kind::div : node::kind::mod;
      n = make(k, op.column, {n, rhs.value()});
    }
    return n;
  }

  result<node_ptr> parse_unary() {
    if (is("-") || is("+")) {
      const token& op = next();
      auto operand = parse_unary();
      if (!operand.ok()) return operand;
      if (op.text == "+") return operand;
      return make(node::kind::neg, op.column, {operand.value()});
    }
    return parse_primary();
  }

  result<node_ptr> parse_primary() {
    const token& t = next();
    if (t.type == tok::number) return parse_number(t);
    if (t.type == tok::punct && t.text == "(") {
      auto inner = parse_expr();
      if (!inner.ok()) return inner;
      if (!is(")")) {
        if (peek().type == tok::end)
          return error{"'(' at column " + std::to_string(t.column) + " is never closed in \"" + std::string(text_) +
                       "\""};
        return unexpected(peek(), "')'");
      }
      next();
      return inner;
    }
    if (t.type == tok::name) {
      if (is("(")) return parse_call(t);
      if (is(".")) return parse_property(t);
      auto n = std::make_shared<node>();
      n->k = node::kind::name;
      n->name = std::string(t.text);
      n->column = t.column;
      return node_ptr(n);
    }
    return unexpected(t, "a number, a name or '('");
  }

  result<node_ptr> parse_number(const token& t) {
    auto n = std::make_shared<node>();
    n->column = t.column;
    const char* b = t.text.data();
    const char* e = b + t.text.size();
    if (t.text.find_first_of(".eE") == std::string_view::npos) {
      n->k = node::kind::int_lit;
      auto [p, ec] = std::from_chars(b, e, n->i);
      if (ec != std::errc() || p != e)
        return error{"integer literal '" + std::string(t.text) + "' is out of range" + at(t.column, text_)};
    } else {
      n->k = node::kind::float_lit;
      auto [p, ec] = std::from_chars(b, e, n->f);
      if (ec != std::errc() || p != e || !std::isfinite(n->f))
        return error{"float literal '" + std::string(t.text) + "' is out of range" + at(t.column, text_)};
    }
    return node_ptr(n);
  }

  result<node_ptr> parse_call(const token& name) {
    const function_info* fn = nullptr;
    for (auto& f : functions)
      if (name.text == f.name) fn = &f;
    if (!fn)
      return error{"unknown function '" + std::string(name.text) + "'" + at(name.column, text_) +
                   " (functions: " + function_list() + ")"};
    const token& open = next();  // '('
    std::vector<node_ptr> args;
    if (!is(")")) {
      for (;;) {
        auto a = parse_expr();
        if (!a.ok()) return a;
        args.push_back(a.value());
        if (is(",")) {
          next();
          continue;
        }
        break;
      }
    }
    if (!is(")")) {
      if (peek().type == tok::end)
        return error{"'(' at column " + std::to_string(open.column) + " is never closed in \"" + std::string(text_) +
                     "\""};
      return unexpected(peek(), "',' or ')'");
    }
    next();
    if (args.size() != fn->arity)
      return error{std::string(fn->name) + " takes " + std::to_string(fn->arity) +
                   (fn->arity == 1 ? " argument" : " arguments") + ", got " + std::to_string(args.size()) +
                   at(name.column, text_)};
    auto n = std::make_shared<node>();
    n->k = node::kind::call;
    n->name = fn->name;
    n->column = name.column;
    n->kids = std::move(args);
    return node_ptr(n);
  }

  result<node_ptr> parse_property(const token& tensor) {
    next();  // '.'
    const token& prop = next();
    auto n = std::make_shared<node>();
    n->name = std::string(tensor.text);
    n->column = tensor.column;
    if (prop.type == tok::name && prop.text == "numel") {
      n->k = node::kind::numel;
    } else if (prop.type == tok::name && prop.text == "ndim") {
      n->k = node::kind::ndim;
    } else if (prop.type == tok::name && prop.text == "shape") {
      n->k = node::kind::shape;
      if (!is("[")) return unexpected(peek(), "'[' after shape");
      const token& open = next();
      auto index = parse_expr();
      if (!index.ok()) return index;
      if (!is("]")) {
        if (peek().type == tok::end)
          return error{"'[' at column " + std::to_string(open.column) + " is never closed in \"" + std::string(text_) +
                       "\""};
        return unexpected(peek(), "']'");
      }
      next();
      n->kids.push_back(index.value());
    } else {
      std::string got = prop.type == tok::end ? "end of expression" : "'" + std::string(prop.text) + "'";
      if (prop.type == tok::name)
        return error{"unknown tensor property " + got + at(prop.column, text_) + " (expected shape[i], numel or ndim)"};
      return error{"unexpected " + got + at(prop.column, text_) + " (expected shape[i], numel or ndim after '.')"};
    }
    return node_ptr(n);
  }

  std::string_view text_;
  std::vector<token> toks_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------
// Evaluation: the arithmetic is plan/expr_runtime.hpp's (the exported module's launcher
// computes with the same code); this evaluator looks names up and words the faults.

namespace rt = expr_runtime;

// Lossless both ways: every field travels, so a value comes back as it went.
rt::value to_runtime(const expr_value& v) { return {v.is_float, v.i, v.f}; }
expr_value from_runtime(rt::value v) { return {v.f, v.i, v.d}; }

class evaluator {
 public:
  evaluator(const std::string& text, const expr_env& env) : text_(text), env_(env) {}

  result<expr_value> eval(const node& n) {
    using K = node::kind;
    switch (n.k) {
      case K::int_lit:
        return expr_value::integer(n.i);
      case K::float_lit:
        return expr_value::real(n.f);
      case K::name:
        return lookup(n);
      case K::numel:
      case K::ndim:
      case K::shape:
        return property(n);
      case K::neg: {
        auto v = eval(*n.kids[0]);
        if (!v.ok()) return v;
        return value_of(rt::neg(to_runtime(*v)), "-", n.column);
      }
      case K::add:
      case K::sub:
      case K::mul:
      case K::div:
      case K::mod:
        return binary(n);
      case K::call:
        return call(n);
    }
    return error{"internal error: bad expression node" + at(n.column, text_)};
  }

 private:
  error overflow(std::string_view op, size_t column) {
    return error{"integer overflow in '" + std::string(op) + "'" + at(column, text_)};
  }

  // The value of an operation, or its fault worded for the plan's author: `what` is the
  // operator or the function the expression wrote (round_up, even where the fault is
  // in the ceil_div it is made of).
  result<expr_value> value_of(const rt::outcome& r, std::string_view what, size_t column) {
    switch (r.why) {
      case rt::fault::none:
        return from_runtime(r.v);
      case rt::fault::overflow:
        return overflow(what, column);
      case rt::fault::division_by_zero:
        if (what == "/" || what == "%") return error{"division by zero" + at(column, text_)};
        return error{"division by zero in " + std::string(what) + at(column, text_)};
      case rt::fault::not_finite:
        return error{"the result of '" + std::string(what) + "' is not a finite number" + at(column, text_)};
      case rt::fault::negative_sqrt:
        break;  // worded by call(), which has the operand
    }
    return error{"internal error: unexpected fault in '" + std::string(what) + "'" + at(column, text_)};
  }

  result<expr_value> lookup(const node& n) {
    auto c = env_.constants.find(n.name);
    if (c != env_.constants.end()) return c->second;
    if (env_.tensors.count(n.name) || env_.unknown_shape_tensors.count(n.name))
      return error{"'" + n.name + "' is a tensor, not a number" + at(n.column, text_) + "; use " + n.name + ".numel, " +
                   n.name + ".ndim or " + n.name + ".shape[i]"};
    std::string msg = "unknown name '" + n.name + "'" + at(n.column, text_);
    std::vector<std::string> known;
    for (auto& [k, v] : env_.constants) known.push_back(k);
    if (!known.empty()) msg += " (constants: " + join(known) + ")";
    return error{msg};
  }

  result<expr_value> property(const node& n) {
    auto t = env_.tensors.find(n.name);
    if (t == env_.tensors.end()) {
      auto u = env_.unknown_shape_tensors.find(n.name);
      if (u != env_.unknown_shape_tensors.end())
        return error{"the shape of '" + n.name + "' is not known before the plan runs (" + u->second + ")" +
                     at(n.column, text_)};
      std::string msg = "unknown tensor '" + n.name + "'" + at(n.column, text_);
      std::vector<std::string> known;
      for (auto& [k, v] : env_.tensors) known.push_back(k);
      if (!known.empty()) msg += " (tensors: " + join(known) + ")";
      return error{msg};
    }
    const auto& shape = t->second;
    using K = node::kind;
    if (n.k == K::ndim) return expr_value::integer(static_cast<int64_t>(shape.size()));
    if (n.k == K::numel) {
      int64_t p = 1;
      for (int64_t d : shape)
        if (__builtin_mul_overflow(p, d, &p)) return overflow(n.name + ".numel", n.column);
      return expr_value::integer(p);
    }
    auto idx = eval(*n.kids[0]);
    if (!idx.ok()) return idx;
    if (idx->is_float)
      return error{"a shape index must be an integer, got " + idx->to_string() + at(n.kids[0]->column, text_)};
    int64_t ndim = static_cast<int64_t>(shape.size());
    int64_t i = idx->i, position = 0;
    if (!rt::shape_position(i, ndim, position))
      return error{n.name + " has " + std::to_string(ndim) + (ndim == 1 ? " dim" : " dims") + ", shape[" +
                   std::to_string(i) + "] is out of range" + at(n.column, text_)};
    return expr_value::integer(shape[static_cast<size_t>(position)]);
  }

  result<expr_value> binary(const node& n) {
    auto a = eval(*n.kids[0]);
    if (!a.ok()) return a;
    auto b = eval(*n.kids[1]);
    if (!b.ok()) return b;
    using K = node::kind;
    const rt::value x = to_runtime(*a), y = to_runtime(*b);
    switch (n.k) {
      case K::add:
        return value_of(rt::add(x, y), "+", n.column);
      case K::sub:
        return value_of(rt::sub(x, y), "-", n.column);
      case K::mul:
        return value_of(rt::mul(x, y), "*", n.column);
      case K::div:
        return value_of(rt::div(x, y), "/", n.column);
      default:
        return value_of(rt::mod(x, y), "%", n.column);
    }
  }

  result<expr_value> call(const node& n) {
    std::vector<rt::value> args;
    for (auto& k : n.kids) {
      auto v = eval(*k);
      if (!v.ok()) return v;
      args.push_back(to_runtime(v.value()));
    }
    const std::string& f = n.name;
    if (f == "min") return from_runtime(rt::min(args[0], args[1]));
    if (f == "max") return from_runtime(rt::max(args[0], args[1]));
    if (f == "ceil_div") return value_of(rt::ceil_div(args[0], args[1]), f, n.column);
    if (f == "round_up") return value_of(rt::round_up(args[0], args[1]), f, n.column);
    if (f == "abs") return value_of(rt::abs(args[0]), f, n.column);
    if (f == "floor") return value_of(rt::floor(args[0]), f, n.column);
    if (f == "ceil") return value_of(rt::ceil(args[0]), f, n.column);
    // sqrt
    const rt::outcome r = rt::sqrt(args[0]);
    if (r.why == rt::fault::negative_sqrt)
      return error{"sqrt of a negative number (" + from_runtime(args[0]).to_string() + ")" + at(n.column, text_)};
    return value_of(r, f, n.column);
  }

  const std::string& text_;
  const expr_env& env_;
};

void collect(const node& n, std::set<std::string>& constants, std::set<std::string>& tensors) {
  using K = node::kind;
  if (n.k == K::name) constants.insert(n.name);
  if (n.k == K::numel || n.k == K::ndim || n.k == K::shape) tensors.insert(n.name);
  for (auto& k : n.kids) collect(*k, constants, tensors);
}

}  // namespace

// ---------------------------------------------------------------------------

result<shape_expr> shape_expr::parse(std::string_view text) {
  parser p(text);
  auto root = p.parse_all();
  if (!root.ok()) return root.error();
  return shape_expr(std::string(text), root.value());
}

result<expr_value> shape_expr::eval(const expr_env& env) const {
  evaluator e(text_, env);
  return e.eval(*root_);
}

std::vector<std::string> shape_expr::constant_names() const {
  std::set<std::string> c, t;
  collect(*root_, c, t);
  return {c.begin(), c.end()};
}

std::vector<std::string> shape_expr::tensor_names() const {
  std::set<std::string> c, t;
  collect(*root_, c, t);
  return {t.begin(), t.end()};
}

result<expr_value> eval_expr(std::string_view text, const expr_env& env) {
  auto e = shape_expr::parse(text);
  if (!e.ok()) return e.error();
  return e->eval(env);
}

}  // namespace ks
