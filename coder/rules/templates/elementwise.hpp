#pragma once
// The elementwise template: a chain of elementwise ops (unary, binary with
// broadcasting, scalars, clamps, activations) fused into one grid-stride kernel.
//
// What it promises:
// - the layout (elementwise_layout) is decided from the params and the shapes alone,
//   before any text is written; the emission follows it and decides nothing else
//   but the names of the parameters;
// - every value of the chain the plan needs is stored at the chain's full shape (a
//   value needed at a smaller shape is an error), once per element;
// - operands of the chain's shape are read as float2/float4 vectors when the vector
//   width says so, the n % V tail element by element; broadcast operands by index;
//   split into rows whose length is not a multiple of V (as at odd sizes), each row
//   peeled: vectors from its first V-aligned element, the rest element by element.

#include <string>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "coder/rules/text/chain.hpp"

namespace ks::rules {

// What the elementwise template chose for one chain.
struct elementwise_layout {
  int vector_width = 4;  // floats per load and store (1: element by element)
  int per_thread = 1;    // vectors per thread per grid-stride trip (unrolled)
  int block = 256;       // threads per block
  int grid_cap = 4096;   // blocks at most (over the rows' blocks too, when split)
  // Rows x columns (blockIdx.y walks the rows): the first dim of the columns, so
  // that broadcast operands are indexed by row or column without a division per
  // element; 0 for a flat index.
  size_t split = 0;
  // Split rows whose length (at the task's shapes) is not a multiple of the vector
  // width: each row peeled (its head to a V-aligned index and its tail one by one,
  // vectors between them) rather than the whole row element by element. The kernel
  // is right at any size either way; this is where its speed holds.
  bool peel = false;
  // streaming: full-shape operands and the plan's outputs touch-once (__ldcs,
  // __stcs); readonly: every operand through the read-only path (__ldg); none.
  param::cache_hint cache_hint = param::cache_hint::none;
  chain_reads body_reads;  // the vector (or scalar) loop's reads
  chain_reads tail_reads;  // the tail's: element by element
};

elementwise_layout choose_elementwise_layout(const lowering_context& cx, const stage& st);

// Stage `si` (an elementwise chain) as one kernel and its plan step.
status emit_elementwise(lowering_context& cx, size_t si);

}  // namespace ks::rules
