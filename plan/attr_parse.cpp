#include "plan/attr_parse.hpp"

#include <charconv>

namespace ks {

std::string trim_blanks(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

bool parse_int(std::string_view text, int64_t& out) {
  std::string t = trim_blanks(text);
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  return !t.empty() && ec == std::errc() && p == t.data() + t.size();
}

bool parse_double(std::string_view text, double& out) {
  std::string t = trim_blanks(text);
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  return !t.empty() && ec == std::errc() && p == t.data() + t.size();
}

bool parse_bool(std::string_view text, bool& out) {
  const std::string t = trim_blanks(text);
  if (t == "True" || t == "true" || t == "1") return out = true, true;
  if (t == "False" || t == "false" || t == "0") return out = false, true;
  return false;
}

std::vector<std::string> list_items(std::string_view text) {
  std::string body = trim_blanks(text);
  if (!body.empty() && (body.front() == '[' || body.front() == '(')) body = body.substr(1, body.size() - 2);
  std::vector<std::string> out;
  if (trim_blanks(body).empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = body.find(',', start);
    out.push_back(trim_blanks(
        std::string_view(body).substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

result<std::vector<int64_t>> parse_int_list(std::string_view text, size_t n, const std::string& field) {
  std::string body = trim_blanks(text);
  if (!body.empty() && (body.front() == '[' || body.front() == '(')) {
    char close = body.front() == '[' ? ']' : ')';
    if (body.size() < 2 || body.back() != close)
      body.clear();
    else
      body = body.substr(1, body.size() - 2);
  }
  std::vector<int64_t> out;
  bool ok = !trim_blanks(body).empty();
  for (size_t start = 0; ok;) {
    size_t comma = body.find(',', start);
    int64_t v = 0;
    ok = parse_int(std::string_view(body).substr(start, comma == std::string::npos ? std::string::npos : comma - start),
                   v);
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (ok && out.size() == 1) out.assign(n, out[0]);
  if (!ok || out.size() != n)
    return error{field + ": expected an integer or a list of " + std::to_string(n) + " integers, got \"" +
                 std::string(text) + "\""};
  return out;
}

result<std::vector<int64_t>> int_list_attr(const std::map<std::string, std::string>& attrs, const std::string& key,
                                           size_t n, std::vector<int64_t> fallback) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  return parse_int_list(it->second, n, "attrs." + key);
}

result<std::string> choice_attr(const std::map<std::string, std::string>& attrs, const std::string& key,
                                const std::string& fallback, const std::vector<std::string>& allowed) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  std::string v = trim_blanks(it->second);
  for (auto& a : allowed)
    if (v == a) return v;
  std::string list;
  for (auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  return error{"attrs." + key + ": expected one of " + list + ", got \"" + it->second + "\""};
}

}  // namespace ks
