#include "gpu/output_check.hpp"

#include "gpu/torch_reference_tensors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>

namespace ks {

namespace {

at::ScalarType same_size_int(at::ScalarType t) {
  switch (c10::elementSize(t)) {
    case 1:
      return at::kByte;
    case 2:
      return at::kShort;
    case 4:
      return at::kInt;
    default:
      return at::kLong;
  }
}

// The flat index of the first true element of a bool tensor that has one.
int64_t first_true(const at::Tensor& mask) { return mask.reshape({-1}).to(at::kByte).argmax().item<int64_t>(); }

// One contiguous stretch of the flat outputs; first_bad is within it.
output_comparison compare_flat(const at::Tensor& got, const at::Tensor& want, const tolerance_spec& tol) {
  output_comparison c;
  c.numel = want.numel();
  if (c.numel == 0) return c;
  at::Tensor bad;
  if (!at::isFloatingType(want.scalar_type())) {
    bad = got.ne(want);
    at::Tensor diff = (got.to(at::kDouble) - want.to(at::kDouble)).abs();
    c.max_abs_error = diff.max().item<double>();
    c.max_rel_error = (diff / want.to(at::kDouble).abs().clamp_min(1.0)).max().item<double>();
  } else {
    const at::ScalarType ct = want.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor g = got.to(ct), w = want.to(ct);
    at::Tensor diff = (g - w).abs();
    at::Tensor ref_finite = at::isfinite(w);
    // Where the reference is infinite, its tolerance is too: only the same infinity passes.
    at::Tensor close = diff.le(w.abs() * tol.rtol + tol.atol).logical_and(ref_finite);
    close = close.logical_or(g.eq(w)).logical_or(g.isnan().logical_and(w.isnan()));
    bad = close.logical_not();
    const double inf = std::numeric_limits<double>::infinity();
    at::Tensor err = at::nan_to_num(diff, inf, inf, inf).masked_fill(ref_finite.logical_not(), 0);
    c.max_abs_error = err.max().item<double>();
    const double floor = tol.atol > 0 ? tol.atol : std::numeric_limits<double>::min();
    c.max_rel_error = (err / w.abs().clamp_min(floor)).masked_fill(ref_finite.logical_not(), 0).max().item<double>();
    c.nonfinite_count = at::isfinite(g).logical_not().logical_and(ref_finite).sum().item<int64_t>();
  }
  c.bad_count = bad.sum().item<int64_t>();
  c.ok = c.bad_count == 0;
  if (!c.ok) c.first_bad = first_true(bad);
  return c;
}

}  // namespace

std::string dtype_name(const at::Tensor& t) { return dtype_name(t.scalar_type()); }

std::string index_string(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t i = shape.size(); i-- > 0;) {
    int64_t d = shape[i] > 0 ? shape[i] : 1;
    idx[i] = flat % d;
    flat /= d;
  }
  std::string out = "[";
  for (size_t i = 0; i < idx.size(); ++i) out += (i ? ", " : "") + std::to_string(idx[i]);
  return out + "]";
}

double element_at(const at::Tensor& t, int64_t flat) { return t.reshape({-1})[flat].to(at::kDouble).item<double>(); }

output_comparison compare_output(const at::Tensor& got, const at::Tensor& want, const tolerance_spec& tol,
                                 int64_t chunk) {
  output_comparison c;
  c.numel = want.numel();
  if (c.numel == 0) return c;
  const at::Tensor g = got.reshape({-1}), w = want.reshape({-1});
  chunk = std::max<int64_t>(chunk, 1);
  for (int64_t from = 0; from < c.numel; from += chunk) {
    const int64_t n = std::min(chunk, c.numel - from);
    const output_comparison part = compare_flat(g.narrow(0, from, n), w.narrow(0, from, n), tol);
    c.max_abs_error = std::max(c.max_abs_error, part.max_abs_error);
    c.max_rel_error = std::max(c.max_rel_error, part.max_rel_error);
    c.nonfinite_count += part.nonfinite_count;
    if (part.bad_count > 0 && c.first_bad < 0) c.first_bad = from + part.first_bad;
    c.bad_count += part.bad_count;
  }
  c.ok = c.bad_count == 0;
  if (!c.ok) {
    c.got = element_at(got, c.first_bad);
    c.want = element_at(want, c.first_bad);
  }
  return c;
}

int64_t first_bitwise_difference(const at::Tensor& a, const at::Tensor& b, int64_t chunk) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return 0;
  if (a.numel() == 0) return -1;
  const at::ScalarType it = same_size_int(a.scalar_type());
  const at::Tensor x = a.contiguous().view(it).reshape({-1}), y = b.contiguous().view(it).reshape({-1});
  chunk = std::max<int64_t>(chunk, 1);
  for (int64_t from = 0; from < x.numel(); from += chunk) {
    const int64_t n = std::min(chunk, x.numel() - from);
    at::Tensor ne = x.narrow(0, from, n).ne(y.narrow(0, from, n));
    if (ne.any().item<bool>()) return from + first_true(ne);
  }
  return -1;
}

int64_t bit_fingerprint(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  at::Tensor bytes = t.contiguous().reshape({-1}).view(at::kByte);
  at::Tensor words = bytes.numel() % 4 == 0 ? bytes.view(at::kInt) : bytes;
  return words.sum(at::kLong).item<int64_t>();
}

double poison_value(const at::Tensor& t, int pattern) {
  const at::ScalarType s = t.scalar_type();
  if (s == at::kBool) return pattern == 0 ? 1 : 0;
  if (at::isFloatingType(s)) {
    if (pattern == 0) return std::numeric_limits<double>::quiet_NaN();
    // Powers of two: exact in every float dtype.
    const double magnitude = s == at::kHalf ? 32768.0 : std::ldexp(1.0, 100);
    return pattern == 1 ? -magnitude : magnitude;
  }
  if (s == at::kLong) {
    const uint64_t bits = pattern == 0   ? 0x7F7F7F7F7F7F7F7Full
                          : pattern == 1 ? 0xA5A5A5A5A5A5A5A5ull
                                         : 0x5A5A5A5A5A5A5A5Aull;
    return static_cast<double>(static_cast<int64_t>(bits));
  }
  const uint32_t bits = pattern == 0 ? 0x7F7F7F7Fu : pattern == 1 ? 0xA5A5A5A5u : 0x5A5A5A5Au;
  if (s == at::kInt) return static_cast<double>(static_cast<int32_t>(bits));
  return static_cast<double>(bits & 0x7F);
}

void poison(at::Tensor& t, int pattern) {
  const at::ScalarType s = t.scalar_type();
  if (t.numel() == 0) return;
  if (s == at::kBool) {
    t.fill_(pattern == 0);
  } else if (at::isFloatingType(s)) {
    t.fill_(poison_value(t, pattern));
  } else if (s == at::kLong) {
    const uint64_t bits = pattern == 0   ? 0x7F7F7F7F7F7F7F7Full
                          : pattern == 1 ? 0xA5A5A5A5A5A5A5A5ull
                                         : 0x5A5A5A5A5A5A5A5Aull;
    t.fill_(static_cast<int64_t>(bits));
  } else {
    t.fill_(static_cast<int64_t>(poison_value(t, pattern)));
  }
}

}  // namespace ks
