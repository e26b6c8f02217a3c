#pragma once
// A library step's attributes are text (attrs: {stride: "[1, 2]", dim: "-1"}). These read
// the integer forms without LibTorch. The plan validator, the exporter
// (export/library_steps.cpp) and the reviewer's library ops (gpu/library_ops.cpp, its
// dispatcher steps too) all use them, so that a plan the validator accepts reads the
// same everywhere.
//
// One reader is not these: an exported module's dispatcher steps read their attributes
// with strtoll/strtod (export/launcher_dispatch.inc), as exported modules always have,
// which differ at the edges: they trim spaces and tabs only (a trailing newline does
// not read), and accept a leading '+', a value past int64 (clamped), hexadecimal floats
// and a double past the range (infinite), all of which these refuse.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ks {

// `s` without its leading and trailing blanks (spaces, tabs, newlines).
std::string trim_blanks(std::string_view s);

// The whole of `text` (blanks around it allowed) as one integer / one number; false when
// it is not exactly one.
bool parse_int(std::string_view text, int64_t& out);
bool parse_double(std::string_view text, double& out);
// True/true/1 or False/false/0 (blanks around it allowed); false when it is none.
bool parse_bool(std::string_view text, bool& out);

// The elements of "[a, b, c]" or "(a, b, c)", trimmed, or of a single value; none for
// "[]". The elements themselves are not checked (see parse_int_list for integers).
std::vector<std::string> list_items(std::string_view text);

// An integer or a list of n integers: "2" → {2, 2}; "[1, 2]" or "(1, 2)" → {1, 2};
// "[3]" → {3, 3}. Anything else is an error
//   <field>: expected an integer or a list of <n> integers, got "<text>"
result<std::vector<int64_t>> parse_int_list(std::string_view text, size_t n, const std::string& field);

// The attribute `key` read by parse_int_list (field "attrs.<key>"), or `fallback` when
// the step does not carry it.
result<std::vector<int64_t>> int_list_attr(const std::map<std::string, std::string>& attrs, const std::string& key,
                                           size_t n, std::vector<int64_t> fallback);

// The attribute `key` (blanks around it dropped) when it is one of `allowed`, or
// `fallback` when the step does not carry it. Anything else is an error
//   attrs.<key>: expected one of <a>, <b>, got "<text>"
result<std::string> choice_attr(const std::map<std::string, std::string>& attrs, const std::string& key,
                                const std::string& fallback, const std::vector<std::string>& allowed);

}  // namespace ks
