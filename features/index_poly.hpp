#pragma once
// Integer polynomials over named atoms, for the source analysis (docs/features.md): the
// index expressions of array accesses, expanded through single-assignment locals, so
// that `A[row * K + k]` with `row = blockIdx.y * 16 + threadIdx.y` reads as
// 16·K·blockIdx.y + K·threadIdx.y + k.
//
// What it promises: arithmetic never overflows and never grows without bound; a result
// that would (a coefficient past kCoefLimit, more than kTermLimit terms) is `bad`
// (ok == false), and every operation on a bad polynomial gives a bad one.

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ks::features::analysis {

using monomial = std::vector<std::string>;  // sorted atom names; empty: the constant

struct poly {
  std::map<monomial, long long> t;
  bool ok = true;

  static poly cst(long long c) {
    poly p;
    if (c != 0) p.t[{}] = c;
    return p;
  }
  static poly atom(const std::string& a) {
    poly p;
    p.t[{a}] = 1;
    return p;
  }
  static poly bad() {
    poly p;
    p.ok = false;
    return p;
  }
  bool is_const() const { return ok && (t.empty() || (t.size() == 1 && t.begin()->first.empty())); }
  long long cval() const {
    auto it = t.find(monomial{});
    return it == t.end() ? 0 : it->second;
  }
  bool is_zero() const { return ok && t.empty(); }
  std::set<std::string> atoms() const {
    std::set<std::string> s;
    for (auto& [m, c] : t)
      for (auto& a : m) s.insert(a);
    return s;
  }
  bool has(const std::string& a) const {
    for (auto& [m, c] : t)
      if (std::find(m.begin(), m.end(), a) != m.end()) return true;
    return false;
  }
  // The coefficient of `a` in the terms where it appears exactly once.
  poly coeff(const std::string& a) const {
    poly r;
    r.ok = ok;
    for (auto& [m, c] : t) {
      if (std::count(m.begin(), m.end(), a) != 1) continue;
      monomial rest;
      for (auto& x : m)
        if (x != a) rest.push_back(x);
      r.t[rest] += c;
    }
    for (auto it = r.t.begin(); it != r.t.end();) it = it->second == 0 ? r.t.erase(it) : std::next(it);
    return r;
  }
  // The polynomial with the terms that contain none of `drop`.
  poly without(const std::set<std::string>& drop) const {
    poly r;
    r.ok = ok;
    for (auto& [m, c] : t) {
      bool keep = true;
      for (auto& x : m)
        if (drop.count(x)) keep = false;
      if (keep) r.t[m] = c;
    }
    return r;
  }
  std::string str() const {
    if (!ok) return "?";
    if (t.empty()) return "0";
    std::string s;
    for (auto& [m, c] : t) {
      if (!s.empty()) s += " + ";
      s += std::to_string(c);
      for (auto& a : m) s += "*" + a;
    }
    return s;
  }
  friend bool operator==(const poly& a, const poly& b) { return a.ok && b.ok && a.t == b.t; }
};

inline constexpr long long kCoefLimit = 1LL << 50;
inline constexpr size_t kTermLimit = 96;

// Drops zero terms; bad when a coefficient or the term count passes the limits.
void normalize(poly& p);
poly add(const poly& a, const poly& b, long long sign = 1);
poly scale(const poly& a, long long k);
poly mul(const poly& a, const poly& b);
// d == m * c for an integer m != 0? Sets m.
bool multiple_of(const poly& d, const poly& c, long long& m);
// Substitutes numeric values for atoms.
poly substitute(const poly& p, const std::map<std::string, long long>& values);

}  // namespace ks::features::analysis
