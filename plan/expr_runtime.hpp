#ifndef KS_PLAN_EXPR_RUNTIME_HPP
#define KS_PLAN_EXPR_RUNTIME_HPP
// The arithmetic of launch-plan expressions (plan/shape_expr.hpp, docs/launch-plan.md
// "Expressions"): one value of the language and each of its operations, for the two
// programs that evaluate expressions — the plan evaluator (plan/shape_expr.cpp) and the
// launcher of an exported module (export/), which evaluates a plan for the shapes it
// receives at run time. The exporter embeds this file's text in the module it writes,
// so the module computes with this very code.
//
// What it promises:
// - integer-first: values are int64 until a float takes part, then double;
// - integer `/` and `%` round toward negative infinity (Python's `//` and `%`), a float
//   `%` takes the divisor's sign; ceil_div(a, b) is ceil(a / b), round_up(a, b) is
//   ceil_div(a, b) * b;
// - integer overflow, division by zero, a non-finite float result and the square root
//   of a negative number are faults, never a wrapped or a NaN value; the operation
//   reports which fault and where (the caller words the message);
// - shape indices count from the end when negative (x.shape[-1]).
//
// Self-contained: the standard library only, no exceptions, C++17, include guards
// rather than #pragma once (the text is pasted into the module's main source file).

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ks {
namespace expr_runtime {

// A value: an int64 (i), or a double (d) once a float took part.
struct value {
  bool f;     // a double
  int64_t i;  // meaningful when !f
  double d;   // meaningful when f
};

inline value integer(int64_t v) { return {false, v, 0.0}; }
inline value real(double v) { return {true, 0, v}; }
inline double as_double(value a) { return a.f ? a.d : static_cast<double>(a.i); }

// Why an operation has no value.
enum class fault { none, overflow, division_by_zero, not_finite, negative_sqrt };

// An operation's result: its value, or its fault and the operation that failed ("+",
// "-", "*", "/", "%" or a function's name; round_up of integers fails in one of the two
// operations it is made of, ceil_div or '*').
struct outcome {
  value v;
  fault why;
  const char* op;
};

inline outcome ok(value v) { return {v, fault::none, ""}; }
inline outcome failed(fault why, const char* op) { return {integer(0), why, op}; }
inline outcome finite(double v, const char* op) {
  return std::isfinite(v) ? ok(real(v)) : failed(fault::not_finite, op);
}

// Python's a // b and a % b on integers (b != 0; floor_div: not INT64_MIN // -1).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

inline outcome add(value a, value b) {
  if (a.f || b.f) return finite(as_double(a) + as_double(b), "+");
  int64_t r = 0;
  if (__builtin_add_overflow(a.i, b.i, &r)) return failed(fault::overflow, "+");
  return ok(integer(r));
}

inline outcome sub(value a, value b) {
  if (a.f || b.f) return finite(as_double(a) - as_double(b), "-");
  int64_t r = 0;
  if (__builtin_sub_overflow(a.i, b.i, &r)) return failed(fault::overflow, "-");
  return ok(integer(r));
}

inline outcome mul(value a, value b) {
  if (a.f || b.f) return finite(as_double(a) * as_double(b), "*");
  int64_t r = 0;
  if (__builtin_mul_overflow(a.i, b.i, &r)) return failed(fault::overflow, "*");
  return ok(integer(r));
}

inline outcome div(value a, value b) {
  if (a.f || b.f) {
    const double y = as_double(b);
    if (y == 0) return failed(fault::division_by_zero, "/");
    return finite(as_double(a) / y, "/");
  }
  if (b.i == 0) return failed(fault::division_by_zero, "/");
  if (a.i == INT64_MIN && b.i == -1) return failed(fault::overflow, "/");
  return ok(integer(floor_div(a.i, b.i)));
}

inline outcome mod(value a, value b) {
  if (a.f || b.f) {
    const double x = as_double(a), y = as_double(b);
    if (y == 0) return failed(fault::division_by_zero, "%");
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return finite(r, "%");
  }
  if (b.i == 0) return failed(fault::division_by_zero, "%");
  return ok(integer(floor_mod(a.i, b.i)));
}

inline outcome neg(value a) {
  if (a.f) return ok(real(-a.d));
  if (a.i == INT64_MIN) return failed(fault::overflow, "-");
  return ok(integer(-a.i));
}

inline value min(value a, value b) {
  if (a.f || b.f) return real(std::min(as_double(a), as_double(b)));
  return integer(std::min(a.i, b.i));
}

inline value max(value a, value b) {
  if (a.f || b.f) return real(std::max(as_double(a), as_double(b)));
  return integer(std::max(a.i, b.i));
}

inline outcome ceil_div(value a, value b) {
  if (a.f || b.f) {
    const double y = as_double(b);
    if (y == 0) return failed(fault::division_by_zero, "ceil_div");
    return finite(std::ceil(as_double(a) / y), "ceil_div");
  }
  if (b.i == 0) return failed(fault::division_by_zero, "ceil_div");
  // ceil(a / b) = -floor(-a / b)
  if (a.i == INT64_MIN || (a.i == INT64_MAX && b.i == -1)) return failed(fault::overflow, "ceil_div");
  return ok(integer(-floor_div(-a.i, b.i)));
}

inline outcome round_up(value a, value b) {
  if (a.f || b.f) {
    const double y = as_double(b);
    if (y == 0) return failed(fault::division_by_zero, "round_up");
    return finite(std::ceil(as_double(a) / y) * y, "round_up");
  }
  const outcome q = ceil_div(a, b);
  if (q.why != fault::none) return q;
  return mul(q.v, b);
}

inline outcome abs(value a) {
  if (a.f) return ok(real(std::fabs(a.d)));
  if (a.i == INT64_MIN) return failed(fault::overflow, "abs");
  return ok(integer(a.i < 0 ? -a.i : a.i));
}

// A whole double as an int64; 2^63 is exactly representable, and anything at or above
// it does not fit.
inline outcome to_integer(double v, const char* op) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return failed(fault::overflow, op);
  return ok(integer(static_cast<int64_t>(v)));
}

inline outcome floor(value a) { return a.f ? to_integer(std::floor(a.d), "floor") : ok(a); }
inline outcome ceil(value a) { return a.f ? to_integer(std::ceil(a.d), "ceil") : ok(a); }

inline outcome sqrt(value a) {
  if (as_double(a) < 0) return failed(fault::negative_sqrt, "sqrt");
  return ok(real(std::sqrt(as_double(a))));
}

// Where shape[index] is in a shape of `ndim` dims (a negative index counts from the
// end); false when it is out of range.
inline bool shape_position(int64_t index, int64_t ndim, int64_t& position) {
  if (index < -ndim || index >= ndim) return false;
  position = index < 0 ? index + ndim : index;
  return true;
}

}  // namespace expr_runtime
}  // namespace ks

#endif  // KS_PLAN_EXPR_RUNTIME_HPP
