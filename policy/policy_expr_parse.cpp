// The lexer and recursive-descent parser of policy expressions (policy_expr_tree.hpp).
#include <cctype>
#include <charconv>
#include <cmath>

#include "policy/policy_expr_tree.hpp"

namespace ks {
namespace policy_tree {
namespace {

using node = policy_expr::node;
using node_ptr = std::shared_ptr<const node>;

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

}  // namespace

result<node_ptr> parse(std::string_view text) {
  std::vector<token> toks;
  std::string error;
  if (!lexer(text).run(toks, error)) return ks::error{error};
  if (toks.size() == 1) return ks::error{"column 1: the expression is empty"};
  try {
    return parser(std::move(toks)).parse_all();
  } catch (const parse_failure& f) {
    return ks::error{f.message};
  }
}

}  // namespace policy_tree
}  // namespace ks
