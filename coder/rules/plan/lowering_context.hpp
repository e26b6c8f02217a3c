#pragma once
// The rules coder's lowering from the inside (coder/lowering.hpp is the outside):
// a task graph is planned into stages, and each stage is written by one template as
// a kernel (CUDA text and a plan step) or a library step. Every template first
// decides its layout (a plain struct: what it chose from the params and shapes),
// then writes text and plan steps from that layout.
//
// Where things are (in coder/rules/, one sub-folder for each step):
// passes/: graph rewrites before the stages are planned
//   composites.cpp        losses ATen runs in one call, written out into simpler ops
//   conv_bias.cpp         a convolution's bias moved into the kernel after it
//   conv_layout.cpp       a convolution computed channels-last, read so after it
//   sum_of_product.cpp    a sum over a product's outputs as a matrix-vector product
//   graph_rewrite.hpp     what those graph rewrites share: node schemas, new values
// plan/: the graph into stages
//   lowering_context.hpp  this file: shapes, stages, the state one lowering shares
//   stages.cpp            the graph into stages: which ops fuse into which template,
//                         prologues and epilogues, the plan's buffers, twin rows
//   shapes.cpp            every value's shape as expressions over the input shapes
//   op_table.cpp          the op table: each ATen op's class, shape rule and (for
//                         an elementwise op) its CUDA expression
//   op_specs.cpp          a reduction's or a pool's node, read
//   expr_text.cpp         the expressions and names planning writes (product,
//                         paren, ident, base_kind), handed on by kernel_text.hpp
// text/: what the templates write with
//   kernel_text.cpp       text helpers and a kernel's parameter list (kernel_params)
//   code_writer.hpp       generated CUDA as lines, indentation scopes and splices
//                         (chain.cpp and transpose_store.cpp write with it)
//   chain.cpp             an elementwise chain's statements, the index of a broadcast
//                         operand, the epilogue fused into a pool or a scan
//   combine.cpp           a reduction's state, merges, warp and block combines
//   device_helpers.hpp    the device helpers a source carries (fast math, merges,
//                         shared-memory copies, clusters, the TF32 split): the
//                         files in coder/rules/cuda/*.cuh, embedded at build time
// templates/: one file each (layout struct → emit_*), their table and spaces
//   elementwise.cpp       elementwise_layout  fused elementwise chains
//   transpose_store.cpp                       a chain over [N, H, W, C] storing a
//                                             value as [N, C, H, W] (a smem tile)
//   row_reduce.cpp        reduce_layout       reductions and normalisations
//   row_cache.cpp         row_cache_layout    a row kept in registers or shared
//                                             memory between row_reduce's passes
//                                             (a long row: in a cluster's)
//   row_split.cpp                             few long rows split over several blocks
//   middle_reduce.cpp                         a middle dim read twice (slices, the
//                                             column kept in registers)
//   twin_rows.cpp                             two reductions over the same rows
//                                             read in one pass
//   scan.cpp              scan_layout         cumsum, cumprod (flipped, exclusive,
//                                             split)
//   pool.cpp              pool_layout         max_pool and avg_pool, 1-d to 3-d
//   library.cpp           library_call        matmul, linear, conv2d ... as ATen steps
//   split_tf32.cpp                            a float32 library product as 3xTF32
//                                             (split operands)
//   fallback.cpp          fallback_call       any other ATen op, by its schema
//   template_table.cpp    the table of the templates above: which stage each
//                         takes, its emit_ function, its name in the stage list
//   search_space.cpp      each template's tunable parameters at the stage's shapes
// The driver (coder/lowering.cpp: lower_graph) plans the stages, pairs twin rows,
// hands each stage to its row of the template table and puts the source's header in
// front.
//
// Includes go down only (tests/layering_test.cpp, rules_layer_table): plan/ at the
// bottom includes no other sub-folder; passes/ and text/ include plan/ (not each
// other); templates/ include any. What plan/ needs of a template is done by the
// driver (plan_twin_rows), what it needs of text is in plan/ (expr_text.hpp).
//
// A new template: its file, rules/templates/<template>.hpp/.cpp, with its layout struct, a
// choose_ function and an emit_ function (its kernels' plan steps through
// lowering_context::add_kernel_step); one row in template_table.cpp (which
// stage it takes, the emit_ function, the stage's name); its .cpp in
// coder/CMakeLists.txt. Its ops need rows in op_table.cpp (class and shape rule; a
// new rule in shapes.cpp's shape_of_node). Only a new class of op needs a stage
// kind here (a struct of what planning decides for it, one more alternative of
// stage::as) and a branch in collect_stages (stages.cpp), and the fusion passes if a
// chain may fuse into it.
//
// What it promises:
// - one lowering_context per lower_graph call: nothing is shared between calls, so
//   lowerings run at once on different threads;
// - planning fills the first half (shapes ... list_of) before any template runs; a
//   template reads it and appends to the second half (out, src, written) only.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "coder/lowering.hpp"

namespace ks::rules {

// A tensor's shape twice: the sizes of the graph's own run (they decide structure:
// rank, which dims broadcast) and the expressions over the task's input shapes that
// every size of the plan is written in.
struct shaped {
  std::vector<int64_t> shape;
  std::vector<std::string> sym;
};

// What planning decided for each kind of stage (stage::as holds one of them).

// A chain of elementwise ops at one iteration shape.
struct elementwise_stage {
  shaped iter;               // the iteration shape
  bool fused_away = false;   // emitted inside a reduction or a scan as its prologue
  bool is_epilogue = false;  // emitted in a reduction's second pass, or before a pool's or a scan's store
  // Over [N, H, W, C]: values of the chain that the plan needs as their permute
  // [0, 3, 1, 2] (value -> the permute's result), stored so by the kernel through a
  // tile transposed in shared memory (transpose_store.hpp; conv_layout.hpp writes
  // such permutes).
  std::vector<std::pair<std::string, std::string>> permuted = {};
};

// A reduction or a normalisation (row_reduce.hpp).
struct reduce_stage {
  int prologue = -1;  // index of the fused elementwise stage, or -1
  int epilogue = -1;  // index of the elementwise stage fused after it, or -1
  // Two reductions over the same rows read by one kernel (twin_rows.hpp): the later
  // one this stage's kernel reads too, and in that one, this stage; else -1.
  int twin = -1;
  int twin_of = -1;
};

// max_pool or avg_pool (pool.hpp).
struct pool_stage {
  int epilogue = -1;  // index of the elementwise stage fused before its store, or -1
};

// cumsum or cumprod (scan.hpp).
struct scan_stage {
  int prologue = -1;  // index of the fused elementwise stage, or -1
  int epilogue = -1;  // index of the elementwise stage fused before its store, or -1
  // The value it reads and the value it stores when a flip or a zero-padded shift
  // around it is fused into its loads and stores (empty: its node's own).
  std::string scan_in = "", scan_out = "";
  bool reverse_in = false, reverse_out = false, exclusive = false;
};

// An ATen step: a product or a convolution (library.hpp), or a fallback.
struct library_stage {
  // Why no template takes this op, when it is a fallback (an ATen call by its schema,
  // fallback.hpp) rather than a product or convolution.
  std::string fallback = "";
  bool absorbed = false;  // a fallback fused into a scan's loads or stores: no step
};

// One kernel or library step of the lowering, in graph order.
struct stage {
  std::vector<const graph_node*> nodes;  // elementwise: the chain; else one node
  std::variant<elementwise_stage, reduce_stage, pool_stage, scan_stage, library_stage> as;

  // The kind's own part, or nullptr when the stage is of another kind.
  template <class K>
  K* get() {
    return std::get_if<K>(&as);
  }
  template <class K>
  const K* get() const {
    return std::get_if<K>(&as);
  }
  template <class K>
  bool is() const {
    return std::holds_alternative<K>(as);
  }
  // The kind's own part; throws (std::bad_variant_access) when the stage is of another.
  template <class K>
  K& as_kind() {
    return std::get<K>(as);
  }
  template <class K>
  const K& as_kind() const {
    return std::get<K>(as);
  }
  // The fused prologue's or epilogue's stage index, -1 where none (or none can be).
  int prologue() const;
  int epilogue() const;
  // Written by another stage's kernel (a prologue, an epilogue, a twin), or a
  // fallback absorbed into a scan: no template of its own.
  bool emitted_elsewhere() const;
};

struct lowering_context {
  lowering_context(const task_graph& graph, const lowering_params& params, const target_shapes& target_shapes,
                   const lowering_device& device)
      : g(graph), p(params), target(target_shapes), dev(device) {}

  const task_graph& g;
  const lowering_params& p;
  const target_shapes& target;
  const lowering_device& dev;

  // What planning found (stages.cpp, shapes.cpp).
  std::map<std::string, shaped> shapes;               // tensor value → shape
  std::map<std::string, std::string> scalar_sym;      // scalar value → expression (aten::size)
  std::map<std::string, std::string> input_name;      // value → task tensor name
  std::map<std::string, int> producer;                // value → stage index
  std::map<std::string, std::vector<int>> consumers;  // value → stages reading it
  std::vector<std::string> outputs;                   // graph output values
  std::vector<stage> stages;
  std::map<std::string, std::string> tensor_of;             // materialized value → plan tensor name
  std::map<std::string, std::vector<std::string>> list_of;  // prim::ListConstruct result → elements
  // A permute that moves only a dim of size 1 (the same memory): its result → the
  // value it permutes, which the kernels store into the result's tensor.
  std::map<std::string, std::string> same_memory;

  // What the templates write.
  lowered_kernel_set out;
  std::string src;
  bool uses_smem = false;     // a kernel stages rows in shared memory: the source needs its helpers
  bool uses_welford = false;  // a kernel merges Welford states: the source needs ks_wf_merge
  bool uses_cluster = false;  // a kernel spreads rows over a cluster: the source needs its helpers
  // A kernel calls KS_EXP, KS_DIV or ks_ms_merge (device_helpers.hpp): set by what writes
  // the call (an op_table row marked fast_math, an online-softmax reduction); lowering
  // param fast_math swaps the header that defines them only then.
  bool uses_fast_math = false;
  std::set<std::string> written;  // values some step stores
  // Values a library step stores with their rows padded (a 2-d [M, N] stored as
  // [M, pitch], split_tf32.hpp): value → the pitch, a shape expression. Only
  // elementwise chains (chain.cpp indexes them by row and column) and reductions over
  // their rows (row_reduce.cpp's pitched_rows) read them.
  std::map<std::string, std::string> row_pitch;

  const graph_value& val(const std::string& id) const { return g.values.at(id); }
  bool is_tensor(const std::string& id) const { return val(id).is_tensor(); }
  // The size of `dims` (shape expressions) at the target shapes, or `fallback` (the
  // graph's own) when they do not say.
  int64_t target_size(const std::vector<std::string>& dims, int64_t fallback) const;
  // A kernel launch appended to the plan: kernel `name` of the source on `grid` x
  // `block` (three expressions each), bound to `args` (its kernel_params' args).
  void add_kernel_step(const std::string& name, std::vector<std::string> grid, std::vector<std::string> block,
                       std::vector<plan_arg> args);
};

}  // namespace ks::rules
