#pragma once
// Small string utilities shared by every layer.

#include <string>
#include <string_view>

namespace ks {

// The items of `items` (any range of strings: a vector, a set, an array) with `sep`
// between each two: join({"a", "b"}, ", ") == "a, b"; an empty range gives "".
template <class Range>
std::string join(const Range& items, std::string_view sep = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += sep;
    out += item;
    first = false;
  }
  return out;
}

}  // namespace ks
