#include "base/suggest.hpp"

#include <algorithm>

namespace ks {

size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = 3;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    // A one-letter word is "close" to every two-letter one; that helps nobody.
    if (d < best_d && d < std::max(word.size(), c.size())) {
      best = c;
      best_d = d;
    }
  }
  if (!best.empty()) return best;
  for (const auto& c : candidates) {
    std::string_view cv = c;
    const auto shorter = word.size() < cv.size() ? word : cv;
    const auto longer = word.size() < cv.size() ? cv : word;
    if (shorter.size() >= 3 && longer.substr(0, shorter.size()) == shorter) return c;
  }
  return best;
}

}  // namespace ks
