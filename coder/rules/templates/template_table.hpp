#pragma once
// The templates, in one table: which stage each takes, the function that writes it,
// and the name the candidate's stage list gives it. lower_graph (coder/lowering.cpp)
// hands each planned stage to the first row that takes it.
//
// Adding a template: its file (a layout struct and an emit_ function), one row here
// (template_table.cpp) and one line in coder/CMakeLists.txt; its ops need rows in
// op_table.cpp, and a stage kind in lowering_context.hpp when no kind fits.
//
// What it promises:
// - exactly one row takes a stage that lower_graph emits (the last, library, takes
//   every library stage that no fallback row took);
// - `family` names the candidate's template (lowered_kernel_set::template_name) for a
//   candidate of this row alone: elementwise, row_reduce, scan, pool, fallback, library;
// - `space` declares the row's tunable parameters and their legal values for the
//   stage's shapes (search_space.hpp), before the stage is emitted.

#include <string>
#include <vector>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "coder/search_space.hpp"

namespace ks::rules {

struct template_row {
  const char* family;
  bool (*takes)(const stage& st);
  status (*emit)(lowering_context& cx, size_t si);
  // The stage's entry in lowered_kernel_set::stages ("row_reduce+prologue", ...).
  std::string (*name)(const lowering_context& cx, size_t si);
  // Its search space at the stage's shapes (coder/search_space.hpp).
  void (*space)(const lowering_context& cx, size_t si, search_space& out);
};

const std::vector<template_row>& template_table();
// The row that takes `st`, or nullptr.
const template_row* template_for(const stage& st);

}  // namespace ks::rules
