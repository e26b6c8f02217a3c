#include "coder/rules/templates/template_table.hpp"

#include "coder/rules/templates/elementwise.hpp"
#include "coder/rules/templates/fallback.hpp"
#include "coder/rules/templates/library.hpp"
#include "coder/rules/templates/pool.hpp"
#include "coder/rules/templates/row_reduce.hpp"
#include "coder/rules/templates/scan.hpp"
#include "coder/rules/templates/search_space.hpp"
#include "coder/rules/templates/transpose_store.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

namespace {

std::string fused(const stage& st) {
  return std::string(st.prologue() >= 0 ? "+prologue" : "") + (st.epilogue() >= 0 ? "+epilogue" : "");
}

// A fallback is a library step by the op's schema; the candidate lists why.
status emit_fallback_step(lowering_context& cx, size_t si) {
  status s = emit_fallback(cx, si);
  const stage& st = cx.stages[si];
  cx.out.fallback.push_back(base_kind(st.nodes[0]->kind) + ": " + st.as_kind<library_stage>().fallback);
  return s;
}

}  // namespace

const std::vector<template_row>& template_table() {
  static const std::vector<template_row> table = {
      {"elementwise",
       [](const stage& st) {
         auto* e = st.get<elementwise_stage>();
         return e && !e->permuted.empty();
       },
       emit_transpose_store,
       [](const lowering_context&, size_t) { return std::string("elementwise+transposed_store"); }, no_space},
      {"elementwise", [](const stage& st) { return st.is<elementwise_stage>(); }, emit_elementwise,
       [](const lowering_context&, size_t) { return std::string("elementwise"); }, elementwise_space},
      {"row_reduce", [](const stage& st) { return st.is<reduce_stage>(); }, emit_reduce,
       [](const lowering_context& cx, size_t si) {
         const bool twin = cx.stages[si].as_kind<reduce_stage>().twin >= 0;  // a later reduction read too
         return "row_reduce" + fused(cx.stages[si]) + (twin ? "+twin" : "");
       },
       row_reduce_space},
      {"scan", [](const stage& st) { return st.is<scan_stage>(); }, emit_scan,
       [](const lowering_context& cx, size_t si) { return "scan" + fused(cx.stages[si]); }, scan_space},
      {"pool", [](const stage& st) { return st.is<pool_stage>(); }, emit_pool,
       [](const lowering_context& cx, size_t si) {
         return std::string(cx.stages[si].epilogue() >= 0 ? "pool+epilogue" : "pool");
       },
       pool_space},
      {"fallback",
       [](const stage& st) {
         auto* l = st.get<library_stage>();
         return l && !l->fallback.empty();
       },
       emit_fallback_step,
       [](const lowering_context& cx, size_t si) { return "fallback:" + base_kind(cx.stages[si].nodes[0]->kind); },
       no_space},
      {"library", [](const stage& st) { return st.is<library_stage>(); }, emit_library,
       [](const lowering_context& cx, size_t si) {
         return "library:" + choose_library_call(cx, *cx.stages[si].nodes[0]).op;
       },
       library_space},
  };
  return table;
}

const template_row* template_for(const stage& st) {
  for (const template_row& t : template_table())
    if (t.takes(st)) return &t;
  return nullptr;
}

}  // namespace ks::rules
