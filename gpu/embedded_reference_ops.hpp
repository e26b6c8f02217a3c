#pragma once
// gpu/reference_ops_allowed.txt, embedded at build time (cmake/embed_file.cmake):
// the operators a reference may use, one a line, '#' lines are comments.

#include <string_view>

namespace ks {

std::string_view embedded_reference_ops_allowed();

}  // namespace ks
