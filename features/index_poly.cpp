#include "features/index_poly.hpp"

#include <cstdlib>

namespace ks::features::analysis {

void normalize(poly& p) {
  for (auto it = p.t.begin(); it != p.t.end();) {
    if (it->second == 0)
      it = p.t.erase(it);
    else if (std::llabs(it->second) > kCoefLimit) {
      p.ok = false;
      return;
    } else
      ++it;
  }
  if (p.t.size() > kTermLimit) p.ok = false;
}

poly add(const poly& a, const poly& b, long long sign) {
  if (!a.ok || !b.ok) return poly::bad();
  poly r = a;
  for (auto& [m, c] : b.t) r.t[m] += sign * c;
  normalize(r);
  return r;
}

poly scale(const poly& a, long long k) {
  if (!a.ok) return a;
  poly r;
  if (k == 0) return r;
  for (auto& [m, c] : a.t) {
    if (std::llabs(c) > kCoefLimit / std::max(1LL, std::llabs(k))) return poly::bad();
    r.t[m] = c * k;
  }
  return r;
}

poly mul(const poly& a, const poly& b) {
  if (!a.ok || !b.ok) return poly::bad();
  if (a.t.size() * b.t.size() > kTermLimit * 4) return poly::bad();
  poly r;
  for (auto& [ma, ca] : a.t)
    for (auto& [mb, cb] : b.t) {
      if (std::llabs(ca) > kCoefLimit / std::max(1LL, std::llabs(cb))) return poly::bad();
      monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      r.t[m] += ca * cb;
    }
  normalize(r);
  return r;
}

bool multiple_of(const poly& d, const poly& c, long long& m) {
  if (!d.ok || !c.ok || c.t.empty() || d.t.empty() || d.t.size() != c.t.size()) return false;
  auto& [m0, c0] = *c.t.begin();
  auto it = d.t.find(m0);
  if (it == d.t.end() || it->second % c0 != 0) return false;
  m = it->second / c0;
  if (m == 0) return false;
  return d == scale(c, m);
}

poly substitute(const poly& p, const std::map<std::string, long long>& values) {
  if (!p.ok) return p;
  poly r;
  for (auto& [m, c] : p.t) {
    poly term = poly::cst(c);
    monomial rest;
    for (auto& a : m) {
      auto it = values.find(a);
      if (it != values.end())
        term = scale(term, it->second);
      else
        rest.push_back(a);
    }
    if (!term.ok) return poly::bad();
    long long k = term.cval();
    if (k != 0) r.t[rest] += k;
  }
  normalize(r);
  return r;
}

}  // namespace ks::features::analysis
