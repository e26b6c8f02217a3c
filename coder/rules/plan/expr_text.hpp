#pragma once
// The expressions and names planning writes itself (a plan buffer's size, a value's
// name, an op's name), below text/, whose kernel_text.hpp hands them on to the
// templates.
//
// What it promises: every function is pure text, the same input giving the same
// characters.

#include <string>
#include <vector>

#include "base/strings.hpp"

namespace ks::rules {

using ks::join;  // base/strings.hpp
// An expression without spaces or operators needs no parentheses.
bool is_simple(const std::string& e);
std::string paren(const std::string& e);
// The product of shape expressions; "1" for none.
std::string product(const std::vector<std::string>& dims);
// A C identifier for a graph value id ("v" + the id, other characters as '_').
std::string ident(const std::string& value_id);
// The op without its in-place underscore (aten::relu_ → aten::relu).
std::string base_kind(const std::string& kind);

}  // namespace ks::rules
