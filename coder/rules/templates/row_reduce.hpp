#pragma once
// The row-reduce template: sum/mean/amax/amin/logsumexp/var/std/norm/argmax/argmin
// and the normalisations built on them (softmax, log_softmax, layer_norm, group_norm,
// instance_norm, batch_norm), with the
// elementwise chain that feeds them fused in as a prologue (on the loads) and the
// one after them as an epilogue (on the second pass).
//
// Five forms, by what is reduced:
//   whole_tensor       everything to one value: blocks reduce grid-strided slices
//                      into partial states, one block combines them (two kernels);
//   rows               the last dims: a block or a warp per row, the row kept on chip
//                      between the passes when it is read twice (row_cache.hpp);
//                      few long rows are split over several blocks each, and
//                      batch_norm's rows merged across the batch (row_split.hpp);
//   middle_slices      a middle dim to one value per output: each output's column in
//                      slices, a warp per slice and a lane per output;
//   middle_two_pass    a middle dim read twice (a normalisation, or a keepdim
//                      reduction with its epilogue): slices as middle_slices, the
//                      column kept in registers between the passes (middle_reduce.hpp).
//
// What it promises:
// - the layout (reduce_layout) is decided from the params, the shapes and which
//   tensors the passes read, before any text is written;
// - merges are deterministic (no atomics): the same input gives the same bits;
// - every element of a row is read (and stored, for a normalisation or an epilogue)
//   exactly as without the cache, whatever the row's length;
// - a 3xTF32 product stored with padded rows (lowering_context::row_pitch), as the
//   input or an operand of the prologue, is read by the rows form alone, each row from
//   row * pitch (reduce_parts::pitched_rows); another form refuses it with an error.
//   What the reduction stores is unpadded.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "coder/rules/plan/lowering_context.hpp"
#include "coder/rules/plan/op_specs.hpp"
#include "coder/rules/templates/row_cache.hpp"
#include "coder/rules/text/chain.hpp"
#include "coder/rules/text/combine.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

// The text pieces of one reduction's kernel, before a layout is applied: its
// parameters, how it loads an element, its epilogue, its state.
struct reduce_parts {
  reduction_spec r;
  const shaped* in = nullptr;
  std::vector<std::string> outer, red, inner;  // the input's dims before, in and after the reduced span
  int64_t inner_n = 1, outer_n = 1;            // their sizes in the graph
  int64_t row_len = 0;  // the reduced span's length at the target shapes (the graph's as fallback)
  int64_t rows_n = 0;   // the number of rows (outputs before the span) at the target shapes
  int64_t split = 1;    // rows: blocks per row at the target shapes (row_split.hpp); 1: not split
  kernel_params kp;
  std::string ROWS, C, INNER;  // parameters: outputs before the span, its length, the inner size
  // How an element of the reduced input is read: straight (X) or through the fused
  // prologue chain (load_code, leaving the value in var.at(r.input)).
  const stage* pro = nullptr;
  std::string load_code;
  std::map<std::string, std::string> var;
  chain_reads pro_reads;  // how load_code indexes its operands (index_prologue_by_*)
  std::string X;
  // The input, or a value its prologue reads, is a product stored with padded rows
  // (lowering_context::row_pitch): read by the row the rows form's kernels hold (X the
  // row's start shifted by row * (pitch - C), the prologue through
  // chain_reads::pitched_row).
  bool pitched_rows = false;
  std::string W, Bi;      // the norm's weight and bias parameters, or empty
  std::string CH;         // instance_norm: the channels (a row's channel is row % CH)
  std::string G, CG, SP;  // group_norm: groups, channels a group, a channel's spatial size
  // The fused epilogue chain, evaluated per element of the row with the reduced
  // value in the register `red`.
  const stage* epi = nullptr;
  std::string epi_code;
  chain_reads epi_reads;  // how epi_code indexes its operands (index_epilogue_by_row)
  std::vector<std::pair<std::string, std::string>> epi_out;  // value → output parameter
  std::map<std::string, std::string> epi_var;
  std::string OUT;  // the reduction's output parameter (none with an epilogue)
  acc_text a;
  std::string decl;        // the state's declarations
  std::string y, prelude;  // a normalisation's value of element `v`, and its row constants
  // A moment norm whose affine is read per column (layer_norm): y is norm_y scaled by
  // W[c] and shifted by Bi[c]; affine_y writes it with them read elsewhere.
  std::string norm_y;
  bool column_affine = false;
  std::string name;  // the kernel's name
};

// What the row-reduce template chose for one reduction.
struct reduce_layout {
  enum form_t { whole_tensor, rows, middle_slices, middle_two_pass } form = rows;
  bool warp = false;      // rows: a warp per row (else a block)
  int block = 256;        // threads per block
  bool vec_rows = false;  // rows read as float4 where 16-byte aligned (no prologue, no cache)
  bool split = false;     // rows: each row split over several blocks (row_split.hpp)
  row_cache_layout cache;
  // warp: the lanes of a row (32; fewer for short rows, 32 / lanes rows a warp).
  int lanes = 32;
  // A row's elements for this thread: from lane(), every width().
  std::string lane() const { return warp ? "lane" : "(int)threadIdx.x"; }
  std::string width() const { return warp ? std::to_string(lanes) : "(int)blockDim.x"; }
};

// Rows of at most this many elements are a warp's (or part of one) whatever the
// row_mapping: a block per row would leave most of its threads idle.
inline constexpr int64_t kShortRow = 128;

reduce_layout choose_reduce_layout(const lowering_params& p, const reduce_parts& rp, const lowering_device& dev = {});

// Stage `si` (a reduction) as its kernels and plan steps.
status emit_reduce(lowering_context& cx, size_t si);

// The parts of stage `si`'s reduction. With pass1_only, only what its first pass reads
// (the input or the prologue, the sizes): the parameters of a kernel that reduces and
// stores nothing else.
// With `start`, its parameters continue those (a kernel that reads two reductions).
result<reduce_parts> gather_parts(lowering_context& cx, size_t si, bool pass1_only = false,
                                  const kernel_params* start = nullptr);

// One reduction read by a strided first pass: its parts, its accumulator (state names
// its own) and the prefix of its values' names.
struct pass1_reader {
  const reduce_parts* rp;
  acc_text a;
  std::string v;
};
// Pass 1's strided loop over the elements base + c, c = first, first + step, ... below
// C (`step` a name or an expression of the thread), of one reduction or several over
// the same rows. U elements a thread a trip: every reader's U loads (and prologues)
// are written before its U updates, so that a thread keeps U loads of each input in
// flight; the updates keep the element order; the rest one at a time.
std::string strided_pass1(const std::vector<pass1_reader>& rs, int U, const std::string& first, const std::string& step,
                          const std::string& base);

// Pieces of the row form that the row cache's passes share.
// Element `idx` of the reduced input into the variable `into`.
std::string reduce_load(const reduce_parts& rp, const std::string& idx, const std::string& into);
// The second pass's work for the element `v` at `idx`: the normalised value (or
// `yv`), stored or handed to the fused epilogue chain.
std::string pass2_body(lowering_context& cx, const reduce_parts& rp, const std::string& idx,
                       const std::string& yv = "");
// The same with the epilogue's statements `epi_code` (chain_holding's, for a cache).
std::string pass2_body(lowering_context& cx, const reduce_parts& rp, const std::string& idx, const std::string& yv,
                       const std::string& epi_code);
// Pass 2 of a row from `loop` on, read from memory: the normalised value or the
// epilogue, per element.
std::string pass2_from(lowering_context& cx, const reduce_parts& rp, const std::string& loop);
// What pass 2 starts from: the normalisation's constants, or the reduced value for an
// epilogue; with the softmax's stored exps, each thread's rescaling factor.
std::string pass2_head(const reduce_parts& rp, const reduce_layout& lay);
// group_norm's second pass over the columns [lo, hi) of a row (`lane` and `width`
// stride them): channel by channel, each channel's scale and shift read once, float4
// where a channel's spatial size is a multiple of 4 (no prologue, no epilogue).
std::string group_pass2(lowering_context& cx, const reduce_parts& rp, const std::string& lo, const std::string& hi,
                        const std::string& lane, const std::string& width);
// rp.y with a per-column affine's weight read as `w` and its bias as `b` (a cluster's
// W[c0 + c], split rows' float4 lanes); rp.y itself where the affine is not per column.
std::string affine_y(const reduce_parts& rp, const std::string& w, const std::string& b);
// The prologue's and the epilogue's statements are first written over the flat index
// i alone (gather_parts); once the layout says which parts of i the kernel holds in
// variables, they are written again with those parts named (chain_reads::index_names;
// the same parameters, which kp already holds):
// - the epilogue reads operands broadcast along the rows (i % C) at the column, and
//   those broadcast along the row (i / C) at row: no 64-bit division per element; the
//   prologue reads along the row likewise (row is defined wherever it is loaded).
//   `column` is the row's column where the loops walk it (c; in a cluster's chunk
//   c0 + c);
status index_epilogue_by_row(lowering_context& cx, reduce_parts& rp, const std::string& column = "c");
// - the prologue alone by row: what a split reduction's first kernel does too (its
//   prologue runs over a chunk of one row);
status index_prologue_by_row(lowering_context& cx, reduce_parts& rp);
// - over a middle dim, the prologue reads operands along the reduced dims alone at the
//   channel c the loops over C name (not for moments, whose shift is read outside).
status index_prologue_by_channel(lowering_context& cx, reduce_parts& rp);
// The prologue's (or, with `epilogue`, the epilogue's) statements once more, indexed
// as above, with the elements at i of the tensor parameters `held` names read from
// where the kernel holds them (chain_reads::held_reads: a row cache's rc_in0[k]);
// empty where there is no such chain. The chain was written once with the same
// parameters, so this cannot fail (a failure throws std::logic_error).
std::string chain_holding(lowering_context& cx, const reduce_parts& rp, bool epilogue,
                          const std::map<std::string, std::string>& held);

}  // namespace ks::rules
