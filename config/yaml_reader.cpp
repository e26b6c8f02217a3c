#include "config/yaml_reader.hpp"
#include "base/strings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>

namespace ks {

namespace {

bool is_quoted(const YAML::Node& n) { return n.IsScalar() && n.Tag() == "!"; }

YAML::Mark mark_of(const YAML::Node& n) {
  if (!n.IsDefined()) return YAML::Mark::null_mark();
  return n.Mark();
}

// A scalar as an integer; false for anything else ("1.5", "0x10", "15 GPUs").
bool parse_int(const std::string& text, long long& out, bool& out_of_range) {
  out_of_range = false;
  std::string_view s = text;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (end != s.data() + s.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    out_of_range = true;
    return false;
  }
  return ec == std::errc();
}

// A finite decimal number; `.inf` and `nan` are not settings anyone means.
bool parse_double(const std::string& text, double& out) {
  std::string_view s = text;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

bool parse_bool(const std::string& text, bool& out) {
  std::string s = text;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "yes" || s == "on") return out = true, true;
  if (s == "false" || s == "no" || s == "off") return out = false, true;
  return false;
}

}  // namespace

yaml_field yaml_field::child(std::string_view name, YAML::Node k, YAML::Node v) const {
  std::string p = path.empty() ? std::string(name) : path + "." + std::string(name);
  return {std::move(p), std::move(k), std::move(v)};
}

yaml_field yaml_field::item(size_t index, YAML::Node v) const {
  return {path + "[" + std::to_string(index) + "]", YAML::Node(), std::move(v)};
}

std::string line_col(const YAML::Node& node) {
  const YAML::Mark m = mark_of(node);
  if (m.is_null()) return "";
  return std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  std::string text = node.Scalar();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  double unused;
  if (!is_quoted(node) && parse_double(text, unused)) return text;
  return "\"" + text + "\"";
}

std::string yaml_reader::where(const YAML::Node& node) const {
  const std::string lc = line_col(node);
  return source_ + (lc.empty() ? "" : ":" + lc) + ": ";
}

std::string yaml_reader::where(const yaml_field& f) const {
  // An empty value is marked at the next token, which may be lines away: use the key.
  const bool value_has_place = f.value.IsDefined() && !f.value.IsNull() && !mark_of(f.value).is_null();
  if (value_has_place) return where(f.value);
  if (!mark_of(f.key).is_null()) return where(f.key);
  return where(f.value);
}

void yaml_reader::fail(const yaml_field& f, const std::string& message) {
  errors_.push_back(where(f) + (f.path.empty() ? "" : f.path + ": ") + message);
}

void yaml_reader::fail_at(const YAML::Node& node, const std::string& message) {
  errors_.push_back(where(node) + message);
}

void yaml_reader::fail_plain(const std::string& message) { errors_.push_back(source_ + ": " + message); }

std::string yaml_reader::message() const { return join(errors_, "\n"); }

void yaml_reader::map(const yaml_field& f, const std::vector<key_handler>& keys,
                      const std::function<std::string(const std::string&)>& hint) {
  if (!f.value.IsDefined() || f.value.IsNull()) return;
  std::vector<std::string> names;
  for (const auto& k : keys) names.push_back(k.name);
  if (!f.value.IsMap()) {
    fail(f, "expected a map with keys " + join(names, ", ") + ", got " + describe(f.value));
    return;
  }
  const std::string prefix = f.path.empty() ? "" : f.path + ".";
  std::map<std::string, YAML::Node> seen;
  for (auto it = f.value.begin(); it != f.value.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      fail_at(key, (f.path.empty() ? "" : f.path + ": ") + "keys must be plain names, got " + describe(key));
      continue;
    }
    const std::string name = key.Scalar();
    if (auto [pos, inserted] = seen.emplace(name, key); !inserted) {
      const std::string first = line_col(pos->second);
      fail_at(key, "duplicate key '" + prefix + name + "'" + (first.empty() ? "" : " (first given at " + first + ")"));
      continue;
    }
    auto h = std::find_if(keys.begin(), keys.end(), [&](const key_handler& k) { return k.name == name; });
    if (h != keys.end()) {
      h->read(f.child(name, key, it->second));
      continue;
    }
    std::string msg = "unknown key '" + prefix + name + "'";
    if (std::string near = closest(name, names); !near.empty()) {
      msg += " (did you mean '" + prefix + near + "'?)";
    } else if (std::string elsewhere = hint ? hint(name) : ""; !elsewhere.empty()) {
      msg += " (did you mean '" + elsewhere + "'?)";
    } else {
      msg += " (known keys" + (f.path.empty() ? "" : " of " + f.path) + ": " + join(names, ", ") + ")";
    }
    fail_at(key, msg);
  }
}

void yaml_reader::integer(const yaml_field& f, int& out, long long min, long long max, std::string_view expected) {
  const std::string exp = "expected " + std::string(expected);
  if (!f.value.IsScalar()) return fail(f, exp + ", got " + describe(f.value));
  long long v = 0;
  bool too_big = false;
  const bool parsed = parse_int(f.value.Scalar(), v, too_big);
  if (is_quoted(f.value)) {
    return fail(f, exp + ", got " + describe(f.value) + (parsed ? " (a quoted string: remove the quotes)" : ""));
  }
  if (!parsed || v < min || v > max) {
    return fail(f, exp + ", got " + describe(f.value) + (too_big ? " (too large)" : ""));
  }
  out = static_cast<int>(v);
}

void yaml_reader::number(const yaml_field& f, double& out, double min, bool min_inclusive, double max,
                         bool max_inclusive, std::string_view expected) {
  const std::string exp = "expected " + std::string(expected);
  if (!f.value.IsScalar()) return fail(f, exp + ", got " + describe(f.value));
  double v = 0;
  const bool parsed = parse_double(f.value.Scalar(), v);
  if (is_quoted(f.value)) {
    return fail(f, exp + ", got " + describe(f.value) + (parsed ? " (a quoted string: remove the quotes)" : ""));
  }
  const bool in_range = (min_inclusive ? v >= min : v > min) && (max_inclusive ? v <= max : v < max);
  if (!parsed || !in_range) return fail(f, exp + ", got " + describe(f.value));
  out = v;
}

void yaml_reader::boolean(const yaml_field& f, bool& out) {
  const std::string exp = "expected true or false";
  if (!f.value.IsScalar()) return fail(f, exp + ", got " + describe(f.value));
  bool v = false;
  const bool parsed = parse_bool(f.value.Scalar(), v);
  if (is_quoted(f.value)) {
    return fail(f, exp + ", got " + describe(f.value) + (parsed ? " (a quoted string: remove the quotes)" : ""));
  }
  if (!parsed) return fail(f, exp + ", got " + describe(f.value));
  out = v;
}

void yaml_reader::string(const yaml_field& f, std::string& out, bool allow_empty) {
  if (!f.value.IsDefined() || f.value.IsNull()) {
    return fail(f, std::string("expected ") + (allow_empty ? "a string" : "a non-empty string") + ", got nothing" +
                       (allow_empty ? " (write \"\" for an empty string)" : ""));
  }
  if (!f.value.IsScalar()) {
    return fail(f, std::string("expected a string, got ") + describe(f.value));
  }
  if (!allow_empty && f.value.Scalar().empty()) {
    return fail(f, "expected a non-empty string, got \"\"");
  }
  out = f.value.Scalar();
}

void yaml_reader::one_of(const yaml_field& f, std::string& out, const std::vector<std::string>& choices) {
  const std::string exp = "expected one of " + join(choices, ", ");
  if (!f.value.IsScalar()) return fail(f, exp + ", got " + describe(f.value));
  const std::string& v = f.value.Scalar();
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) {
    out = v;
    return;
  }
  const std::string near = closest(v, choices);
  fail(f, exp + ", got " + describe(f.value) + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
}

}  // namespace ks
