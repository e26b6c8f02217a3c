#pragma once
// How the exporter spells things in the source it writes: literals of C++ and Python
// that read back as the value exactly, names of generated variables, ATen's name of a
// dtype and the pointer type a kernel parameter takes. Used by every part of the export
// (export/pytorch_export.hpp).
//
// What it promises: a literal reads back to the same string or number, in C++ and in
// Python alike (number: "%.17g", with ".0" where it would read as an integer).

#include <cstdint>
#include <string>
#include <vector>

#include "base/strings.hpp"
#include "plan/kernel_signatures.hpp"

namespace ks::export_detail {

// A C++ string literal.
std::string cpp_string(const std::string& s);

// A one-line Python string literal.
std::string py_string(const std::string& s);

// A triple-quoted Python string that reads back as `s` exactly and stays readable:
// backslashes are doubled; a '"' is escaped only where it could close the literal
// (before another '"', or as the last character).
std::string py_block_string(const std::string& s);

// A double as a literal that reads back to the same value (C++ and Python alike).
std::string number(double v);

// `name` with every character outside [A-Za-z0-9] replaced by '_'.
std::string ident(const std::string& name);

// "[1, 2, 3]", or with other brackets ("{1, 2, 3}").
std::string shape_list(const std::vector<int64_t>& shape, const char* open = "[", const char* close = "]");

// The launcher's variable of a tensor: t_NAME.
std::string var(const std::string& tensor);

// ATen's constant for a task dtype ("float32" → "at::kFloat"); null for one the export
// does not take.
const char* aten_dtype(const std::string& dtype);

// The type a launcher casts a tensor's data_ptr() to for this parameter:
// the declared type without __restrict__ (and an array parameter as a pointer).
std::string pointer_cast_type(const kernel_param& p);

}  // namespace ks::export_detail
