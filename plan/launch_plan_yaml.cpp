#include "plan/launch_plan_yaml.hpp"

#include "base/strings.hpp"
#include "base/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "plan/plan_validator.hpp"
#include "plan/shape_expr.hpp"

namespace ks {
namespace {

// ---------------------------------------------------------------------------
// Quoting expressions in flow collections.
//
// YAML ends a plain scalar inside [...] or {...} at every ',' and reads '[' as the
// start of a nested list, so `[ceil_div(N, 256)]` would be two items and
// `[x.shape[0]]` a syntax error. Plans are written by people and language models
// who will write exactly that; so before YAML sees the text, each plain scalar in a
// flow collection is extended over balanced (...) and [...] and double-quoted when it
// holds one of ,[]{}. The positions of the inserted quotes are kept to map YAML's
// error positions back to the original text.

struct insertion {
  size_t line;    // 0-based
  size_t column;  // 0-based column in the original line, before which a quote goes
};

class flow_quoter {
 public:
  explicit flow_quoter(std::string_view s) : s_(s) {}

  // Returns the rewritten text; insertions() lists where quotes were added.
  std::string run() {
    while (p_ < s_.size()) line();
    std::string out;
    out.reserve(s_.size() + 2 * ranges_.size());
    size_t copied = 0;
    for (auto& r : ranges_) {
      out.append(s_.substr(copied, r.first - copied));
      out += '"';
      out.append(s_.substr(r.first, r.second - r.first));
      out += '"';
      copied = r.second;
    }
    out.append(s_.substr(copied));
    return out;
  }

  const std::vector<insertion>& insertions() const { return inserts_; }

 private:
  bool eol() const { return p_ >= s_.size() || s_[p_] == '\n'; }
  bool space_at(size_t q) const {
    return q >= s_.size() || s_[q] == ' ' || s_[q] == '\t' || s_[q] == '\n' || s_[q] == '\r';
  }
  void newline() {  // at '\n'
    ++p_;
    ++line_;
    line_start_ = p_;
  }
  void skip_to_eol() {
    while (!eol()) ++p_;
  }

  // One line in block context (flow collections may continue over more lines).
  void line() {
    size_t q = p_;
    while (q < s_.size() && s_[q] == ' ') ++q;
    size_t indent = q - p_;
    bool blank = q >= s_.size() || s_[q] == '\n' || s_[q] == '\r';
    if (block_scalar_) {
      if (blank || indent > block_indent_) {
        p_ = q;
        skip_to_eol();
        if (p_ < s_.size()) newline();
        return;
      }
      block_scalar_ = false;
    }
    p_ = q;
    for (;;) {
      while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\r')) ++p_;
      if (eol()) {
        if (p_ < s_.size()) newline();
        return;
      }
      char c = s_[p_];
      if (c == '#') {
        skip_to_eol();
        continue;
      }
      if ((c == '-' || c == '?' || c == ':') && space_at(p_ + 1)) {
        ++p_;
        continue;
      }
      if (c == '[' || c == '{') {
        flow();
        continue;
      }
      if (c == '"') {
        double_quoted();
        continue;
      }
      if (c == '\'') {
        single_quoted();
        continue;
      }
      if (c == '|' || c == '>') {
        block_scalar_ = true;
        block_indent_ = indent;
        skip_to_eol();
        continue;
      }
      if (c == '&' || c == '!' || c == '*') {
        while (!eol() && !space_at(p_)) ++p_;
        continue;
      }
      // A plain scalar in block context: ends at ": ", " #" or the end of the line.
      while (!eol()) {
        if (s_[p_] == ':' && space_at(p_ + 1)) break;
        if (s_[p_] == '#' && p_ > line_start_ && (s_[p_ - 1] == ' ' || s_[p_ - 1] == '\t')) break;
        ++p_;
      }
    }
  }

  void double_quoted() {
    ++p_;
    while (p_ < s_.size() && s_[p_] != '"') {
      if (s_[p_] == '\\' && p_ + 1 < s_.size() && s_[p_ + 1] != '\n') {
        p_ += 2;
        continue;
      }
      if (s_[p_] == '\n') {
        newline();
        continue;
      }
      ++p_;
    }
    if (p_ < s_.size()) ++p_;
  }

  void single_quoted() {
    ++p_;
    while (p_ < s_.size()) {
      if (s_[p_] == '\'' && p_ + 1 < s_.size() && s_[p_ + 1] == '\'') {
        p_ += 2;
        continue;
      }
      if (s_[p_] == '\'') break;
      if (s_[p_] == '\n') {
        newline();
        continue;
      }
      ++p_;
    }
    if (p_ < s_.size()) ++p_;
  }

  void flow() {
    int depth = 0;
    do {
      if (p_ >= s_.size()) return;
      char c = s_[p_];
      if (c == '\n') {
        newline();
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == ',') {
        ++p_;
        continue;
      }
      if (c == '#' && (p_ == line_start_ || s_[p_ - 1] == ' ' || s_[p_ - 1] == '\t')) {
        skip_to_eol();
        continue;
      }
      if (c == '[' || c == '{') {
        ++depth;
        ++p_;
        continue;
      }
      if (c == ']' || c == '}') {
        --depth;
        ++p_;
        continue;
      }
      if ((c == ':' || c == '?') &&
          (space_at(p_ + 1) || std::string_view(",[]{}").find(s_[p_ + 1]) != std::string_view::npos)) {
        ++p_;
        continue;
      }
      if (c == '"') {
        double_quoted();
        continue;
      }
      if (c == '\'') {
        single_quoted();
        continue;
      }
      if (c == '&' || c == '!' || c == '*') {
        while (p_ < s_.size() && !space_at(p_) && std::string_view(",[]{}").find(s_[p_]) == std::string_view::npos)
          ++p_;
        continue;
      }
      plain_in_flow();
    } while (depth > 0);
  }

  void plain_in_flow() {
    size_t start = p_, start_line = line_, start_col = p_ - line_start_;
    std::string open;  // unclosed ( and [ inside the scalar
    size_t end = p_;   // one past the last non-blank character
    size_t end_line = line_, end_col = 0;
    while (p_ < s_.size()) {
      char c = s_[p_];
      if (c == '\n') {
        if (open.empty()) break;
        newline();  // an unfinished expression continues on the next line
        continue;
      }
      if (open.empty()) {
        if (c == ',' || c == '}' || c == '{') break;
        if (c == ':' && (space_at(p_ + 1) || std::string_view(",[]{}").find(s_[p_ + 1]) != std::string_view::npos))
          break;
        if (c == '#' && (s_[p_ - 1] == ' ' || s_[p_ - 1] == '\t')) break;
      }
      if (c == '}') break;
      if (c == '(' || c == '[')
        open += c;
      else if (c == ')' && !open.empty() && open.back() == '(')
        open.pop_back();
      else if (c == ']') {
        if (open.find('[') == std::string::npos) break;
        while (open.back() != '[') open.pop_back();
        open.pop_back();
      }
      ++p_;
      if (c != ' ' && c != '\t' && c != '\r') {
        end = p_;
        end_line = line_;
        end_col = p_ - line_start_;
      }
    }
    std::string_view text = s_.substr(start, end - start);
    if (text.find_first_of(",[]{}") == std::string_view::npos) return;
    if (text.find_first_of("\"\\") != std::string_view::npos) return;
    ranges_.push_back({start, end});
    inserts_.push_back({start_line, start_col});
    inserts_.push_back({end_line, end_col});
  }

  std::string_view s_;
  size_t p_ = 0;
  size_t line_ = 0;
  size_t line_start_ = 0;
  bool block_scalar_ = false;
  size_t block_indent_ = 0;
  std::vector<std::pair<size_t, size_t>> ranges_;
  std::vector<insertion> inserts_;
};

// Maps a (line, column) of the rewritten text back to the original.
size_t original_column(const std::vector<insertion>& inserts, size_t line, size_t column) {
  size_t before = 0;  // quotes inserted on this line at rewritten columns < column
  size_t k = 0;       // quotes inserted on this line so far
  for (auto& ins : inserts) {
    if (ins.line != line) continue;
    size_t rewritten = ins.column + k;
    ++k;
    if (rewritten < column) ++before;
  }
  return column - before;
}

// ---------------------------------------------------------------------------
// Helpers

// " (did you mean 'block'?)" when one of `options` is close to `word`, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& options) {
  std::string best = closest(word, options);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

const std::vector<std::string> top_keys = {"constants", "outputs", "scratch", "steps"};
const std::vector<std::string> buffer_keys = {"name", "shape", "dtype", "init"};
const std::vector<std::string> kernel_keys = {"kernel", "grid", "block", "shared_mem", "args"};
const std::vector<std::string> library_keys = {"library", "args", "outputs", "attrs"};
const std::vector<std::string> arg_keys = {"tensor", "int32", "int64", "float32", "float64", "int", "float"};

// ---------------------------------------------------------------------------
// The reader: YAML nodes → launch_plan, stopping at the first error.

class plan_reader {
 public:
  plan_reader(std::string_view source_name, const std::vector<insertion>& inserts)
      : source_(source_name), inserts_(inserts) {}

  std::string where(const YAML::Mark& m) const {
    if (m.is_null() || m.line < 0) return source_ + ": ";
    size_t line = static_cast<size_t>(m.line);
    size_t col = original_column(inserts_, line, static_cast<size_t>(m.column));
    return source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(col + 1) + ": ";
  }

  error fail(const YAML::Mark& m, const std::string& path, const std::string& msg) const {
    return error{where(m) + (path.empty() ? "" : path + ": ") + msg};
  }

  static std::string kind_of(const YAML::Node& n) {
    if (n.IsMap()) return "a mapping";
    if (n.IsSequence()) return "a list";
    if (n.IsNull()) return "nothing";
    return "'" + n.Scalar() + "'";
  }

  // Checks that `n` is a mapping with scalar, unique keys from `allowed`.
  status check_keys(const YAML::Node& n, const std::string& path, const std::vector<std::string>& allowed,
                    const std::string& what) const {
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node key = it->first;  // by value: it-> is a temporary proxy
      if (!key.IsScalar()) return fail(key.Mark(), path, "keys must be plain names");
      const std::string& k = key.Scalar();
      if (!seen.insert(k).second) return fail(key.Mark(), path, "duplicate key '" + k + "'");
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        return fail(
            key.Mark(), path,
            "unknown key '" + k + "' in " + what + did_you_mean(k, allowed) + "; expected one of: " + join(allowed));
    }
    return {};
  }

  // A scalar that is an expression; syntax checked here, meaning by the validator.
  result<std::string> expression(const YAML::Node& n, const YAML::Mark& parent, const std::string& path) const {
    if (!n || n.IsNull()) return fail(parent, path, "expected an expression, got nothing");
    if (!n.IsScalar()) return fail(n.Mark(), path, "expected an expression, got " + kind_of(n));
    auto e = shape_expr::parse(n.Scalar());
    if (!e.ok()) return fail(n.Mark(), path, e.message());
    return n.Scalar();
  }

  result<std::string> name(const YAML::Node& n, const YAML::Mark& parent, const std::string& path,
                           const std::string& what) const {
    if (!n || n.IsNull()) return fail(parent, path, "expected " + what + ", got nothing");
    if (!n.IsScalar()) return fail(n.Mark(), path, "expected " + what + ", got " + kind_of(n));
    if (!is_identifier(n.Scalar()))
      return fail(n.Mark(), path,
                  "'" + n.Scalar() +
                      "' is not a valid name (letters, digits and _, not "
                      "starting with a digit)");
    return n.Scalar();
  }

  // grid/block: one expression or a list of 1–3; padded to three with "1".
  result<std::vector<std::string>> dims(const YAML::Node& n, const YAML::Mark& parent, const std::string& path) const {
    std::vector<std::string> out;
    if (!n || n.IsNull()) return fail(parent, path, "expected 1 to 3 expressions, got nothing");
    if (n.IsScalar()) {
      auto e = expression(n, parent, path);
      if (!e.ok()) return e.error();
      out.push_back(e.value());
    } else if (n.IsSequence()) {
      if (n.size() < 1 || n.size() > 3)
        return fail(n.Mark(), path, "expected 1 to 3 expressions (x, y, z), got " + std::to_string(n.size()));
      for (size_t i = 0; i < n.size(); ++i) {
        auto e = expression(n[i], n.Mark(), path + "[" + std::to_string(i) + "]");
        if (!e.ok()) return e.error();
        out.push_back(e.value());
      }
    } else {
      return fail(n.Mark(), path, "expected a list of 1 to 3 expressions, got a mapping");
    }
    while (out.size() < 3) out.push_back("1");
    return out;
  }

  result<buffer_spec> buffer(const YAML::Node& n, const std::string& path) const {
    if (!n.IsMap())
      return fail(n.Mark(), path, "expected a mapping {name: ..., shape: [...], dtype: ...}, got " + kind_of(n));
    if (auto s = check_keys(n, path, buffer_keys, "a buffer"); !s.ok()) return error{s.message()};
    buffer_spec b;
    if (!n["name"]) return fail(n.Mark(), path, "missing key 'name'");
    auto nm = name(n["name"], n.Mark(), path + ".name", "a buffer name");
    if (!nm.ok()) return nm.error();
    b.name = nm.value();
    const YAML::Node shape = n["shape"];
    if (!shape) return fail(n.Mark(), path, "missing key 'shape' (a list of expressions; [] for a 0-d tensor)");
    if (!shape.IsSequence())
      return fail(shape.IsNull() ? n.Mark() : shape.Mark(), path + ".shape",
                  "expected a list of expressions, got " + kind_of(shape));
    for (size_t i = 0; i < shape.size(); ++i) {
      auto e = expression(shape[i], shape.Mark(), path + ".shape[" + std::to_string(i) + "]");
      if (!e.ok()) return e.error();
      b.shape.push_back(e.value());
    }
    if (const YAML::Node d = n["dtype"]) {
      if (!d.IsScalar()) return fail(d.Mark(), path + ".dtype", "expected a dtype name, got " + kind_of(d));
      if (!is_plan_dtype(d.Scalar())) {
        static const std::map<std::string, std::string> aliases = {
            {"float", "float32"}, {"half", "float16"}, {"double", "float64"}, {"long", "int64"},  {"int", "int32"},
            {"bf16", "bfloat16"}, {"fp32", "float32"}, {"fp16", "float16"},   {"boolean", "bool"}};
        auto a = aliases.find(d.Scalar());
        std::string hint =
            a != aliases.end() ? " (did you mean '" + a->second + "'?)" : did_you_mean(d.Scalar(), plan_dtypes());
        return fail(d.Mark(), path + ".dtype",
                    "unknown dtype '" + d.Scalar() + "'" + hint + "; expected one of: " + join(plan_dtypes()));
      }
      b.dtype = d.Scalar();
    }
    if (const YAML::Node i = n["init"]) {
      if (!i.IsScalar() || (i.Scalar() != "none" && i.Scalar() != "zeros"))
        return fail(i.Mark(), path + ".init", "expected 'none' or 'zeros', got " + kind_of(i));
      b.init = i.Scalar();
    }
    return b;
  }

  result<std::vector<buffer_spec>> buffers(const YAML::Node& n, const std::string& path) const {
    std::vector<buffer_spec> out;
    if (n.IsNull()) return out;
    if (!n.IsSequence()) return fail(n.Mark(), path, "expected a list of buffers, got " + kind_of(n));
    for (size_t i = 0; i < n.size(); ++i) {
      auto b = buffer(n[i], path + "[" + std::to_string(i) + "]");
      if (!b.ok()) return b.error();
      out.push_back(b.value());
    }
    return out;
  }

  result<plan_arg> arg(const YAML::Node& n, const YAML::Mark& parent, const std::string& path) const {
    plan_arg a;
    if (!n || n.IsNull()) return fail(parent, path, "expected an argument, got nothing");
    if (n.IsScalar()) {
      if (!is_identifier(n.Scalar()))
        return fail(n.Mark(), path,
                    "'" + n.Scalar() +
                        "' is not a tensor name; a bare argument names a "
                        "tensor, write a number as {int32: ...}, {int64: ...}, {float32: ...} "
                        "or {float64: ...}");
      a.kind = "tensor";
      a.value = n.Scalar();
      return a;
    }
    if (!n.IsMap() || n.size() != 1)
      return fail(n.Mark(), path,
                  "expected a tensor name or a one-key mapping such as {int64: N} or "
                  "{tensor: x}, got " +
                      (n.IsMap() ? "a mapping with " + std::to_string(n.size()) + " keys" : kind_of(n)));
    if (auto s = check_keys(n, path, arg_keys, "an argument"); !s.ok()) return error{s.message()};
    auto it = n.begin();
    const std::string key = it->first.Scalar();
    const YAML::Node value = it->second;
    const std::string vpath = path + "." + key;
    if (key == "tensor") {
      auto nm = name(value, it->first.Mark(), vpath, "a tensor name");
      if (!nm.ok()) return nm.error();
      a.kind = "tensor";
      a.value = nm.value();
      return a;
    }
    auto e = expression(value, it->first.Mark(), vpath);
    if (!e.ok()) return e.error();
    a.value = e.value();
    if (key == "int")
      a.type = "int32";
    else if (key == "float")
      a.type = "float32";
    else
      a.type = key;
    a.kind = a.type.rfind("int", 0) == 0 ? "int" : "float";
    return a;
  }

  result<plan_step> step(const YAML::Node& n, const std::string& path) const {
    if (!n.IsMap())
      return fail(n.Mark(), path, "expected a mapping with 'kernel: NAME' or 'library: aten::OP', got " + kind_of(n));
    plan_step s;
    bool kernel = static_cast<bool>(n["kernel"]);
    bool library = static_cast<bool>(n["library"]);
    if (kernel && library) return fail(n.Mark(), path, "a step has either 'kernel' or 'library', not both");
    if (!kernel && !library) {
      // Unknown keys first: "kernal: relu" deserves a did-you-mean, not "missing kernel".
      std::vector<std::string> all = kernel_keys;
      for (auto& k : library_keys)
        if (std::find(all.begin(), all.end(), k) == all.end()) all.push_back(k);
      if (auto st = check_keys(n, path, all, "a step"); !st.ok()) return error{st.message()};
      return fail(n.Mark(), path, "a step needs 'kernel: NAME' or 'library: aten::OP'");
    }
    const std::vector<std::string>& allowed = kernel ? kernel_keys : library_keys;
    const std::vector<std::string>& others = kernel ? library_keys : kernel_keys;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end() &&
          std::find(others.begin(), others.end(), k) != others.end())
        return fail(it->first.Mark(), path, "'" + k + "' is only for " + (kernel ? "library" : "kernel") + " steps");
    }
    if (auto st = check_keys(n, path, allowed, kernel ? "a kernel step" : "a library step"); !st.ok())
      return error{st.message()};

    if (kernel) {
      s.kind = "kernel";
      auto nm = name(n["kernel"], n.Mark(), path + ".kernel", "a kernel name");
      if (!nm.ok()) return nm.error();
      s.name = nm.value();
      for (const char* key : {"grid", "block"}) {
        if (!n[key]) return fail(n.Mark(), path, std::string("missing key '") + key + "'");
        auto d = dims(n[key], n.Mark(), path + "." + key);
        if (!d.ok()) return d.error();
        (std::string(key) == "grid" ? s.grid : s.block) = d.value();
      }
      if (const YAML::Node sm = n["shared_mem"]) {
        auto e = expression(sm, n.Mark(), path + ".shared_mem");
        if (!e.ok()) return e.error();
        s.shared_mem = e.value();
      }
    } else {
      s.kind = "library";
      const YAML::Node op = n["library"];
      if (!op.IsScalar())
        return fail(op.IsNull() ? n.Mark() : op.Mark(), path + ".library",
                    "expected an ATen op such as aten::matmul, got " + kind_of(op));
      const std::string& text = op.Scalar();
      size_t sep = text.find("::");
      if (sep == std::string::npos || !is_identifier(text.substr(0, sep)) || text.size() == sep + 2)
        return fail(op.Mark(), path + ".library",
                    "'" + text + "' is not an op name; write NAMESPACE::OP, e.g. aten::matmul");
      s.name = text;
      s.shared_mem = "0";
      const YAML::Node outs = n["outputs"];
      if (!outs) return fail(n.Mark(), path, "missing key 'outputs' (the names the op's results get)");
      if (outs.IsScalar()) {
        auto nm = name(outs, n.Mark(), path + ".outputs", "a tensor name");
        if (!nm.ok()) return nm.error();
        s.outputs.push_back(nm.value());
      } else if (outs.IsSequence() && outs.size() > 0) {
        for (size_t i = 0; i < outs.size(); ++i) {
          auto nm = name(outs[i], outs.Mark(), path + ".outputs[" + std::to_string(i) + "]", "a tensor name");
          if (!nm.ok()) return nm.error();
          s.outputs.push_back(nm.value());
        }
      } else {
        return fail(outs.IsNull() ? n.Mark() : outs.Mark(), path + ".outputs",
                    "expected a list of tensor names, got " +
                        (outs.IsSequence() ? std::string("an empty list") : kind_of(outs)));
      }
      if (const YAML::Node attrs = n["attrs"]) {
        if (!attrs.IsMap() && !attrs.IsNull())
          return fail(attrs.Mark(), path + ".attrs",
                      "expected a mapping of attribute names to values, got " + kind_of(attrs));
        for (auto it = attrs.begin(); it != attrs.end(); ++it) {
          if (!it->first.IsScalar())
            return fail(it->first.Mark(), path + ".attrs", "attribute names must be plain names");
          const std::string key = it->first.Scalar();
          const std::string apath = path + ".attrs." + key;
          if (s.attrs.count(key)) return fail(it->first.Mark(), path + ".attrs", "duplicate key '" + key + "'");
          const YAML::Node v = it->second;
          if (v.IsScalar()) {
            s.attrs[key] = v.Scalar();
          } else if (v.IsSequence()) {
            std::vector<std::string> items;
            for (size_t i = 0; i < v.size(); ++i) {
              if (!v[i].IsScalar()) return fail(v.Mark(), apath, "expected a value or a list of values");
              items.push_back(v[i].Scalar());
            }
            s.attrs[key] = "[" + join(items) + "]";
          } else {
            return fail(v.IsNull() ? it->first.Mark() : v.Mark(), apath,
                        "expected a value or a list of values, got " + kind_of(v));
          }
        }
      }
    }
    if (const YAML::Node args = n["args"]) {
      if (args.IsSequence()) {
        for (size_t i = 0; i < args.size(); ++i) {
          auto a = arg(args[i], args.Mark(), path + ".args[" + std::to_string(i) + "]");
          if (!a.ok()) return a.error();
          s.args.push_back(a.value());
        }
      } else if (!args.IsNull()) {
        return fail(args.Mark(), path + ".args", "expected a list of arguments, got " + kind_of(args));
      }
    }
    return s;
  }

  result<launch_plan> plan(const YAML::Node& root) const {
    launch_plan p;
    if (!root || root.IsNull())
      return error{source_ + ": the plan is empty; expected a mapping with at least 'outputs' and 'steps'"};
    if (!root.IsMap())
      return fail(root.Mark(), "",
                  "expected a mapping with keys constants, outputs, scratch, steps; got " + kind_of(root));
    if (auto s = check_keys(root, "", top_keys, "a plan"); !s.ok()) return error{s.message()};

    if (const YAML::Node c = root["constants"]) {
      if (!c.IsMap() && !c.IsNull())
        return fail(c.Mark(), "constants", "expected a mapping of names to expressions, got " + kind_of(c));
      std::set<std::string> seen;
      for (auto it = c.begin(); it != c.end(); ++it) {
        auto nm = name(it->first, c.Mark(), "constants", "a constant name");
        if (!nm.ok()) return nm.error();
        if (!seen.insert(nm.value()).second)
          return fail(it->first.Mark(), "constants", "duplicate key '" + nm.value() + "'");
        auto e = expression(it->second, it->first.Mark(), "constants." + nm.value());
        if (!e.ok()) return e.error();
        p.constants[nm.value()] = e.value();
      }
    }
    if (const YAML::Node o = root["outputs"]) {
      auto b = buffers(o, "outputs");
      if (!b.ok()) return b.error();
      p.outputs = b.value();
    }
    if (const YAML::Node s = root["scratch"]) {
      auto b = buffers(s, "scratch");
      if (!b.ok()) return b.error();
      p.scratch = b.value();
    }
    const YAML::Node steps = root["steps"];
    if (!steps) return fail(root.Mark(), "", "missing key 'steps'");
    if (!steps.IsSequence() || steps.size() == 0)
      return fail(steps.IsNull() ? root.Mark() : steps.Mark(), "steps",
                  "expected a non-empty list of steps, got " +
                      (steps.IsSequence() ? std::string("an empty list") : kind_of(steps)));
    for (size_t i = 0; i < steps.size(); ++i) {
      auto s = step(steps[i], "steps[" + std::to_string(i) + "]");
      if (!s.ok()) return s.error();
      p.steps.push_back(s.value());
    }
    return p;
  }

 private:
  std::string source_;
  const std::vector<insertion>& inserts_;
};

// ---------------------------------------------------------------------------
// Writing

bool yaml_reserved(std::string_view s) {
  // YAML 1.1 booleans and nulls, as PyYAML reads them.
  static const std::set<std::string> words = {"true", "false", "yes", "no", "on", "off", "null", "~"};
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return words.count(lower) > 0;
}

// `s` as a YAML scalar: plain when YAML reads it back unchanged as a string in this
// context, double-quoted otherwise.
std::string scalar(std::string_view s, bool flow, bool force_quote = false) {
  bool plain =
      !force_quote && !s.empty() && !yaml_reserved(s) && s.front() != ' ' && s.back() != ' ' && s.back() != ':';
  if (plain) {
    char c = s.front();
    if (std::string_view("[]{},&*!|>'\"%@`#?:").find(c) != std::string_view::npos) plain = false;
    if (c == '-' && (s.size() == 1 || s[1] == ' ')) plain = false;
    if (s.find(": ") != std::string_view::npos || s.find(" #") != std::string_view::npos) plain = false;
    if (flow && s.find_first_of("[]{},") != std::string_view::npos) plain = false;
    for (char ch : s)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == '"' || ch == '\\') plain = false;
  }
  if (plain) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string flow_list(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += ", ";
    s += scalar(items[i], true);
  }
  return s + "]";
}

std::string dims_text(std::vector<std::string> d) {
  while (d.size() > 1 && d.back() == "1") d.pop_back();
  return flow_list(d);
}

std::string buffer_text(const buffer_spec& b) {
  std::string s =
      "{name: " + scalar(b.name, true) + ", shape: " + flow_list(b.shape) + ", dtype: " + scalar(b.dtype, true);
  if (b.init != "none") s += ", init: " + scalar(b.init, true);
  return s + "}";
}

std::string arg_text(const plan_arg& a) {
  if (a.kind == "tensor") {
    if (is_identifier(a.value) && !yaml_reserved(a.value)) return a.value;
    return "{tensor: " + scalar(a.value, true) + "}";
  }
  return "{" + scalar(a.type, true) + ": " + scalar(a.value, true) + "}";
}

}  // namespace

result<launch_plan> parse_launch_plan(std::string_view yaml_text, std::string_view source_name) {
  flow_quoter quoter(yaml_text);
  std::string text = quoter.run();
  plan_reader reader(source_name, quoter.insertions());
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return reader.fail(e.mark, "", "invalid YAML: " + e.msg);
  }
  try {
    return reader.plan(root);
  } catch (const YAML::Exception& e) {
    return reader.fail(e.mark, "", "invalid plan: " + e.msg);
  }
}

result<launch_plan> load_launch_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error{path + ": cannot open the launch plan"};
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return error{path + ": cannot read the launch plan"};
  return parse_launch_plan(ss.str(), path);
}

std::string to_yaml(const launch_plan& plan) {
  std::string out;
  if (!plan.constants.empty()) {
    out += "constants:\n";
    for (auto& [k, v] : plan.constants) out += "  " + scalar(k, false) + ": " + scalar(v, false) + "\n";
  }
  if (!plan.outputs.empty()) {
    out += "outputs:\n";
    for (auto& b : plan.outputs) out += "  - " + buffer_text(b) + "\n";
  }
  if (!plan.scratch.empty()) {
    out += "scratch:\n";
    for (auto& b : plan.scratch) out += "  - " + buffer_text(b) + "\n";
  }
  out += "steps:\n";
  for (auto& s : plan.steps) {
    std::vector<std::string> args;
    for (auto& a : s.args) args.push_back(arg_text(a));
    std::string args_text = "[" + join(args) + "]";
    if (s.kind == "library") {
      out += "  - library: " + scalar(s.name, false) + "\n";
      out += "    args: " + args_text + "\n";
      out += "    outputs: " + flow_list(s.outputs) + "\n";
      if (!s.attrs.empty()) {
        out += "    attrs: {";
        bool first = true;
        for (auto& [k, v] : s.attrs) {
          if (!first) out += ", ";
          first = false;
          out += scalar(k, true) + ": " + scalar(v, true, true);
        }
        out += "}\n";
      }
    } else {
      out += "  - kernel: " + scalar(s.name, false) + "\n";
      out += "    grid: " + dims_text(s.grid) + "\n";
      out += "    block: " + dims_text(s.block) + "\n";
      if (!s.shared_mem.empty() && s.shared_mem != "0") out += "    shared_mem: " + scalar(s.shared_mem, false) + "\n";
      out += "    args: " + args_text + "\n";
    }
  }
  return out;
}

}  // namespace ks
