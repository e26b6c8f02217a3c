#include "base/number_format.hpp"

#include <cstdio>

namespace ks {

std::string format_double(const char* printf_format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

}  // namespace ks
