#include "policy/policy_expr.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>

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

// ---------------------------------------------------------------------------
// Syntax tree.

enum class op {
  number,
  string,
  boolean,
  ident,
  neg,
  not_,
  add,
  sub,
  mul,
  div,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  and_,
  or_,
  call,
  in,
};

struct policy_expr::node {
  op kind = op::number;
  int column = 1;        // 1-based, of the node's first token (operator for binaries)
  policy_value literal;  // number/string/boolean literals
  std::string name;      // identifier or function name
  std::vector<std::shared_ptr<const node>> kids;
  std::vector<policy_value> list;  // the list of `x in [...]`
};

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

// ---------------------------------------------------------------------------
// Lexer.

enum class tok { end, number, string, ident, lparen, rparen, lbracket, rbracket, comma, op };

struct token {
  tok kind = tok::end;
  std::string text;  // identifier, operator or string contents
  double number = 0;
  int column = 1;
};

class lexer {
 public:
  explicit lexer(std::string_view s) : s_(s) {}

  // Tokenises everything; false with `error` set on a bad character.
  bool run(std::vector<token>& out, std::string& error) {
    for (;;) {
      while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
      token t;
      t.column = static_cast<int>(i_) + 1;
      if (i_ >= s_.size()) {
        t.kind = tok::end;
        out.push_back(t);
        return true;
      }
      const char c = s_[i_];
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
        size_t j = i_;
        while (j < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[j])) || s_[j] == '.')) ++j;
        if (j < s_.size() && (s_[j] == 'e' || s_[j] == 'E')) {
          size_t k = j + 1;
          if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
          if (k < s_.size() && std::isdigit(static_cast<unsigned char>(s_[k]))) {
            j = k;
            while (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) ++j;
          }
        }
        const std::string_view text = s_.substr(i_, j - i_);
        double v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
          error = "column " + std::to_string(t.column) + ": bad number '" + std::string(text) + "'";
          return false;
        }
        if (j < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) {
          error = "column " + std::to_string(j + 1) + ": unexpected '" + std::string(1, s_[j]) + "' after the number " +
                  std::string(text);
          return false;
        }
        t.kind = tok::number;
        t.number = v;
        t.text = std::string(text);
        i_ = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i_;
        while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
        t.kind = tok::ident;
        t.text = std::string(s_.substr(i_, j - i_));
        i_ = j;
      } else if (c == '\'' || c == '"') {
        const size_t close = s_.find(c, i_ + 1);
        if (close == std::string_view::npos) {
          error = "column " + std::to_string(t.column) + ": unterminated string (missing closing " + std::string(1, c) +
                  ")";
          return false;
        }
        t.kind = tok::string;
        t.text = std::string(s_.substr(i_ + 1, close - i_ - 1));
        i_ = close + 1;
      } else {
        static const char* two[] = {"<=", ">=", "==", "!=", "&&", "||"};
        bool matched = false;
        for (const char* o : two) {
          if (s_.substr(i_, 2) == o) {
            t.kind = tok::op;
            t.text = o;
            i_ += 2;
            matched = true;
            break;
          }
        }
        if (!matched) {
          switch (c) {
            case '(':
              t.kind = tok::lparen;
              break;
            case ')':
              t.kind = tok::rparen;
              break;
            case '[':
              t.kind = tok::lbracket;
              break;
            case ']':
              t.kind = tok::rbracket;
              break;
            case ',':
              t.kind = tok::comma;
              break;
            case '<':
            case '>':
            case '!':
            case '+':
            case '-':
            case '*':
            case '/':
              t.kind = tok::op;
              break;
            case '=':
              error = "column " + std::to_string(t.column) + ": '=' is not an operator (write '==' to compare)";
              return false;
            case '&':
              error = "column " + std::to_string(t.column) + ": '&' is not an operator (write '&&')";
              return false;
            case '|':
              error = "column " + std::to_string(t.column) + ": '|' is not an operator (write '||')";
              return false;
            default:
              error = "column " + std::to_string(t.column) + ": unexpected character '" + std::string(1, c) + "'";
              return false;
          }
          t.text = std::string(1, c);
          ++i_;
        }
      }
      out.push_back(std::move(t));
    }
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

// ---------------------------------------------------------------------------
// Parser: recursive descent, C precedence.
//   or   := and (('||' | 'or') and)*
//   and  := cmp (('&&' | 'and') cmp)*
//   cmp  := add [ ('<' | '<=' | '>' | '>=' | '==' | '!=') add | 'in' list ]
//   add  := mul (('+' | '-') mul)*
//   mul  := unary (('*' | '/') unary)*
//   unary:= ('!' | 'not' | '-') unary | primary
//   primary := number | string | true | false | name | name '(' args ')' | '(' or ')'

const std::vector<std::string> function_names = {"abs", "has", "max", "min"};

struct parse_failure {
  std::string message;
};

class parser {
 public:
  explicit parser(std::vector<token> toks) : t_(std::move(toks)) {}

  node_ptr parse_all() {
    node_ptr n = parse_or();
    if (peek().kind != tok::end) fail_here("expected an operator or the end of the expression");
    return n;
  }

 private:
  const token& peek() const { return t_[i_]; }
  const token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool at_op(const char* o) const { return peek().kind == tok::op && peek().text == o; }
  bool at_word(const char* w) const { return peek().kind == tok::ident && peek().text == w; }

  static std::string describe(const token& t) {
    switch (t.kind) {
      case tok::end:
        return "the end of the expression";
      case tok::number:
        return t.text;
      case tok::string:
        return "'" + t.text + "'";
      case tok::ident:
        return "'" + t.text + "'";
      case tok::lparen:
        return "'('";
      case tok::rparen:
        return "')'";
      case tok::lbracket:
        return "'['";
      case tok::rbracket:
        return "']'";
      case tok::comma:
        return "','";
      case tok::op:
        return "'" + t.text + "'";
    }
    return "?";
  }

  [[noreturn]] void fail_here(const std::string& what) const {
    throw parse_failure{"column " + std::to_string(peek().column) + ": " + what + ", got " + describe(peek())};
  }

  static node_ptr make(op k, int column, std::vector<node_ptr> kids) {
    auto n = std::make_shared<node>();
    n->kind = k;
    n->column = column;
    n->kids = std::move(kids);
    return n;
  }

  node_ptr parse_or() {
    node_ptr l = parse_and();
    while (at_op("||") || at_word("or")) {
      const int col = next().column;
      l = make(op::or_, col, {l, parse_and()});
    }
    return l;
  }

  node_ptr parse_and() {
    node_ptr l = parse_cmp();
    while (at_op("&&") || at_word("and")) {
      const int col = next().column;
      l = make(op::and_, col, {l, parse_cmp()});
    }
    return l;
  }

  std::optional<op> comparison_here() const {
    if (peek().kind != tok::op) return std::nullopt;
    const std::string& s = peek().text;
    if (s == "<") return op::lt;
    if (s == "<=") return op::le;
    if (s == ">") return op::gt;
    if (s == ">=") return op::ge;
    if (s == "==") return op::eq;
    if (s == "!=") return op::ne;
    return std::nullopt;
  }

  node_ptr parse_cmp() {
    node_ptr l = parse_add();
    if (auto k = comparison_here()) {
      const int col = next().column;
      l = make(*k, col, {l, parse_add()});
    } else if (at_word("in")) {
      const int col = next().column;
      auto n = std::make_shared<node>();
      n->kind = op::in;
      n->column = col;
      n->kids = {l};
      n->list = parse_list();
      l = n;
    } else {
      return l;
    }
    if (comparison_here() || at_word("in")) {
      fail_here("comparisons do not chain (write 'a < b && b < c')");
    }
    return l;
  }

  std::vector<policy_value> parse_list() {
    if (peek().kind != tok::lbracket) fail_here("expected '[' to start the list after 'in'");
    next();
    std::vector<policy_value> items;
    if (peek().kind == tok::rbracket) fail_here("expected at least one value in the list");
    for (;;) {
      bool negative = false;
      if (at_op("-")) {
        negative = true;
        next();
      }
      const token& t = peek();
      if (t.kind == tok::number) {
        items.push_back(policy_value::number(negative ? -t.number : t.number));
      } else if (t.kind == tok::string && !negative) {
        items.push_back(policy_value::string(t.text));
      } else {
        fail_here("expected a number or a quoted string in the list");
      }
      next();
      if (peek().kind == tok::comma) {
        next();
        continue;
      }
      if (peek().kind == tok::rbracket) {
        next();
        break;
      }
      fail_here("expected ',' or ']' in the list");
    }
    const bool strings = items.front().type() == policy_value::kind::string;
    for (const auto& v : items) {
      if ((v.type() == policy_value::kind::string) != strings) {
        throw parse_failure{"column " + std::to_string(peek().column) + ": a list mixes numbers and strings"};
      }
    }
    return items;
  }

  node_ptr parse_add() {
    node_ptr l = parse_mul();
    while (at_op("+") || at_op("-")) {
      const token& t = next();
      const op k = t.text == "+" ? op::add : op::sub;
      l = make(k, t.column, {l, parse_mul()});
    }
    return l;
  }

  node_ptr parse_mul() {
    node_ptr l = parse_unary();
    while (at_op("*") || at_op("/")) {
      const token& t = next();
      const op k = t.text == "*" ? op::mul : op::div;
      l = make(k, t.column, {l, parse_unary()});
    }
    return l;
  }

  node_ptr parse_unary() {
    if (at_op("!") || at_word("not")) {
      const int col = next().column;
      return make(op::not_, col, {parse_unary()});
    }
    if (at_op("-")) {
      const int col = next().column;
      return make(op::neg, col, {parse_unary()});
    }
    return parse_primary();
  }

  node_ptr parse_primary() {
    const token t = peek();
    switch (t.kind) {
      case tok::number: {
        next();
        auto n = std::make_shared<node>();
        n->kind = op::number;
        n->column = t.column;
        n->literal = policy_value::number(t.number);
        return n;
      }
      case tok::string: {
        next();
        auto n = std::make_shared<node>();
        n->kind = op::string;
        n->column = t.column;
        n->literal = policy_value::string(t.text);
        return n;
      }
      case tok::lparen: {
        next();
        node_ptr inner = parse_or();
        if (peek().kind != tok::rparen)
          fail_here("expected ')' to close the '(' at column " + std::to_string(t.column));
        next();
        return inner;
      }
      case tok::ident: {
        static const std::vector<std::string> reserved = {"and", "or", "not", "in"};
        if (std::find(reserved.begin(), reserved.end(), t.text) != reserved.end()) {
          fail_here("expected a value");
        }
        next();
        if (t.text == "true" || t.text == "false") {
          auto n = std::make_shared<node>();
          n->kind = op::boolean;
          n->column = t.column;
          n->literal = policy_value::boolean(t.text == "true");
          return n;
        }
        if (peek().kind == tok::lparen) return parse_call(t);
        auto n = std::make_shared<node>();
        n->kind = op::ident;
        n->column = t.column;
        n->name = t.text;
        return n;
      }
      default:
        fail_here("expected a value");
    }
  }

  node_ptr parse_call(const token& name) {
    if (std::find(function_names.begin(), function_names.end(), name.text) == function_names.end()) {
      throw parse_failure{"column " + std::to_string(name.column) + ": unknown function '" + name.text +
                          "' (functions: abs, has, max, min)"};
    }
    next();  // (
    std::vector<node_ptr> args;
    if (peek().kind != tok::rparen) {
      for (;;) {
        args.push_back(parse_or());
        if (peek().kind == tok::comma) {
          next();
          continue;
        }
        break;
      }
    }
    if (peek().kind != tok::rparen) fail_here("expected ',' or ')' in the call of " + name.text);
    next();
    const std::string& f = name.text;
    const auto arity_error = [&](const std::string& want) {
      throw parse_failure{"column " + std::to_string(name.column) + ": " + f + "() takes " + want + ", got " +
                          std::to_string(args.size())};
    };
    if (f == "abs" && args.size() != 1) arity_error("one argument");
    if (f == "has" && args.size() != 1) arity_error("one name");
    if ((f == "min" || f == "max") && args.size() < 2) arity_error("two or more arguments");
    if (f == "has" && args[0]->kind != op::ident) {
      throw parse_failure{"column " + std::to_string(args[0]->column) +
                          ": has() takes a bare name, e.g. has(dram_throughput_pct)"};
    }
    auto n = std::make_shared<node>();
    n->kind = op::call;
    n->column = name.column;
    n->name = f;
    n->kids = std::move(args);
    return n;
  }

  std::vector<token> t_;
  size_t i_ = 0;
};

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
      if (!a.value.numeric() || !b.value.numeric()) {
        if (a.value.known() && b.value.known() && rec) rec->notes.insert("arithmetic on a string");
        return unknown_from({&a, &b});
      }
      const double x = a.value.as_number(), y = b.value.as_number();
      double r = 0;
      switch (n.kind) {
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
    case op::lt:
    case op::le:
    case op::gt:
    case op::ge:
    case op::eq:
    case op::ne: {
      eval_out a = eval(*n.kids[0], env, rec);
      eval_out b = eval(*n.kids[1], env, rec);
      if (!a.value.known() || !b.value.known()) return unknown_from({&a, &b});
      if (a.value.numeric() && b.value.numeric()) {
        const double x = a.value.as_number(), y = b.value.as_number();
        bool r = false;
        switch (n.kind) {
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
      if (strings && (n.kind == op::eq || n.kind == op::ne)) {
        const bool same = a.value.as_string() == b.value.as_string();
        return {policy_value::boolean(n.kind == op::eq ? same : !same), {}};
      }
      if (rec) rec->notes.insert("comparison of a string with a number");
      return {};
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
  std::vector<token> toks;
  std::string error;
  if (!lexer(text).run(toks, error)) return ks::error{error};
  if (toks.size() == 1) return ks::error{"column 1: the expression is empty"};
  policy_expr e;
  try {
    e.root_ = parser(std::move(toks)).parse_all();
  } catch (const parse_failure& f) {
    return ks::error{f.message};
  }
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
