#include "coder/search_space.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "coder/lowering_params.hpp"

namespace ks {

namespace {

// A named value's place in its enum's name table (lowering_params.hpp), so that the
// values keep the table's order; unknown names go last, by name.
size_t name_rank(const std::string& param, const std::string& value) {
  auto rank = [&](auto table) -> size_t {
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i] == value) return i;
    return table.size();
  };
  if (param == "row_mapping") return rank(param::names<param::row_mapping>::all);
  if (param == "row_cache") return rank(param::names<param::row_cache>::all);
  if (param == "cache_hint") return rank(param::names<param::cache_hint>::all);
  if (param == "moments") return rank(param::names<param::moments>::all);
  if (param == "conv_layout") return rank(param::names<param::conv_layout>::all);
  if (param == "gemm_precision") return rank(param::names<param::gemm_precision>::all);
  return 0;
}

bool before(const std::string& param, const std::string& a, const std::string& b) {
  if (numeric_param(param)) return std::atof(a.c_str()) < std::atof(b.c_str());
  const size_t ra = name_rank(param, a), rb = name_rank(param, b);
  return ra != rb ? ra < rb : a < b;
}

}  // namespace

bool numeric_param(const std::string& param) {
  return param == "vector_width" || param == "block_size" || param == "elements_per_thread" || param == "grid_cap" ||
         param == "row_split" || param == "fast_math" || param == "fuse_prologue" || param == "matvec_sums";
}

void search_space::allow(const std::string& param, const std::vector<std::string>& values) {
  if (values.empty()) return;
  auto& v = legal[param];
  for (const std::string& x : values)
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  std::stable_sort(v.begin(), v.end(), [&](const std::string& a, const std::string& b) { return before(param, a, b); });
}

void search_space::merge(const search_space& other) {
  for (const auto& [p, v] : other.legal) allow(p, v);
}

bool search_space::allows(const std::string& param, const std::string& value) const {
  const auto& v = values(param);
  return std::find(v.begin(), v.end(), value) != v.end();
}

const std::vector<std::string>& search_space::values(const std::string& param) const {
  static const std::vector<std::string> none;
  auto it = legal.find(param);
  return it == legal.end() ? none : it->second;
}

std::string search_space::text() const {
  std::string s;
  for (const auto& [p, v] : legal) {
    s += (s.empty() ? "" : ";") + p + "=";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "|" : "") + v[i];
  }
  return s;
}

result<search_space> parse_search_space(const std::string& text) {
  search_space out;
  std::stringstream ss(text);
  std::string entry;
  while (std::getline(ss, entry, ';')) {
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
      return error{"search space: '" + entry + "': expected PARAM=VALUE|VALUE..."};
    std::vector<std::string> values;
    std::stringstream vs(entry.substr(eq + 1));
    std::string v;
    while (std::getline(vs, v, '|'))
      if (!v.empty()) values.push_back(v);
    out.allow(entry.substr(0, eq), values);
  }
  return out;
}

}  // namespace ks
