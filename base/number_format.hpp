#pragma once
// Numbers in messages and reports, written one way everywhere: printf formats, so a
// reader sees "1.41" for a speedup in the trajectory, the report and the log alike.

#include <string>

namespace ks {

// `v` formatted by a printf format with one double conversion ("%.2f", "%8.4f").
std::string format_double(const char* printf_format, double v);
// "1.41": speedups and other measurements in words.
inline std::string two_decimals(double v) { return format_double("%.2f", v); }
// "0.000123", "1.5e+03": values whose scale varies (metrics, tolerances).
inline std::string short_g(double v) { return format_double("%.3g", v); }
inline std::string plain_g(double v) { return format_double("%g", v); }

}  // namespace ks
