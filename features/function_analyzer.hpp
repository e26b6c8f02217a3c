#pragma once
// The per-function analysis behind analyze_source (features/source_analysis.hpp): the
// records one function yields and the analyzer that builds them and derives its
// unit_facts. Internal to features/; docs/features.md describes every heuristic.
//
// What it promises: run() walks the function twice (pass 1: declarations, bindings,
// loops and the expression of every statement; pass 2: the accesses, assignments,
// conditions and calls of every expression), derives the loops' shapes, then applies
// the classification rules in a fixed order. Values (dependencies, polynomials,
// pointer origins) are computed lazily and memoised; the rules read them in the same
// order on every run, so the same function always yields the same facts.
//
// Where the code is (each rule is a member function named for what it decides; run()
// in analyzer_rules.cpp lists them in order, one line per fact):
//   analyzer_statements.cpp   pass 1: scopes, declarations, bindings, loops, items
//   analyzer_values.cpp       constants, dependencies, index polynomials, memory sources
//   analyzer_accesses.cpp     pointers, and pass 2: the walk over every expression that
//                             records accesses, assignments, conditions and calls
//   analyzer_loops.cpp        loop shapes and trip counts; grid-stride and unrolled loops
//   analyzer_index.cpp        index patterns: neighbours, data-dependent, vector,
//                             stencil and pointwise accesses, local arrays
//   analyzer_guards.cpp       conditions: bounds checks, divergent branches, tail
//                             handling, alignment checks
//   analyzer_reductions.cpp   accumulations, cross-thread and serial reductions
//   analyzer_gemm.cpp         k-loops and the GEMM classification
//   analyzer_shared.cpp       shared memory: use, staging from global memory, tiles
//   analyzer_reuse.cpp        reuse_factor
//   analyzer_rules.cpp        run(): both passes, then every rule in its order

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "features/cuda_syntax.hpp"
#include "features/index_poly.hpp"
#include "features/source_analysis.hpp"

namespace ks::features::analysis {

// ===========================================================================
// Dependencies: what a value depends on.

struct deps {
  bool thread = false;      // threadIdx / blockIdx
  bool lane = false;        // varies within a warp
  bool lane_index = false;  // a lane number (x % 32, x & 31, __lane_id())
  bool data = false;        // loaded from memory
  bool grid = false;        // gridDim
  std::set<char> td, bd;    // threadIdx and blockIdx dimensions
  std::set<int> loops;      // ids of non-thread loops whose variable takes part
  bool tree_loop = false;   // a halving/doubling loop variable takes part
  void merge(const deps& o) {
    thread |= o.thread;
    lane |= o.lane;
    data |= o.data;
    grid |= o.grid;
    td.insert(o.td.begin(), o.td.end());
    bd.insert(o.bd.begin(), o.bd.end());
    loops.insert(o.loops.begin(), o.loops.end());
    tree_loop |= o.tree_loop;
    lane_index = false;
  }
};

enum class space_t { none, global, shared, local, constant, unknown };

// ===========================================================================
// Per-function records.

struct var_rec {
  std::string name;
  std::string key;  // unique within the function: name#id, or the name for parameters
  std::string type;
  int ptr = 0;
  bool is_array = false;
  std::vector<long long> dims;  // -1: unknown
  space_t space = space_t::none;
  bool is_param = false;
  type_shape elem;  // pointee / element / value type
  bool has_init = false;
  bool brace_init = false;
  const expr_tree* init_tree = nullptr;
  int init_node = -1;
  std::vector<std::pair<const expr_tree*, int>> values;  // later assignments (node -1: ++/--)
  int assigns = 0;
  int loop_id = -1;  // declared or assigned as the variable of this loop
  // memo
  int deps_state = 0;
  deps d;
  int src_state = 0;
  std::set<std::string> sources;
  int poly_state = 0;
  poly value;
};

struct loop_rec {
  int id = 0;
  int parent = -1;
  st_kind kind = st_kind::for_loop;
  std::string pragma;
  int var = -1;
  const expr_tree* init = nullptr;
  const expr_tree* cond = nullptr;
  const expr_tree* step = nullptr;
  // derived
  bool thread_var = false;
  bool grid_stride = false;
  bool tree = false;
  long long step_const = 0;
  long long trip = -1;
  bool trip_from_launch = false;  // the bound is a kernel parameter's launch value
};

enum class role_t { decl_init, stmt, cond_if, cond_while, cond_for, cond_switch, cond_ternary, loop_init, loop_step };

struct guard {
  const expr_tree* x;
  int node;
};

struct item_rec {
  const expr_tree* x = nullptr;
  role_t role = role_t::stmt;
  int var = -1;
  std::vector<int> loops;
  std::vector<guard> guards;
};

struct ptr_ref {
  bool ok = false;
  std::string base;  // key of the underlying object
  space_t space = space_t::unknown;
  type_shape base_elem;
  type_shape elem;
  poly offset;   // in base elements
  int var = -1;  // the underlying variable (array or parameter), or -1
};

struct access_rec {
  std::string base;
  space_t space = space_t::unknown;
  type_shape base_elem;
  type_shape elem;
  int width = 1;  // elements of the base's scalar per access
  int bytes = 0;  // bytes per access
  int ratio = 1;  // base elements per access
  poly index;     // in base elements
  bool read = false, write = false, atomic = false, wmma = false;
  std::vector<int> loops;
  int item = -1;
  const expr_tree* x = nullptr;
  int node = -1;
  std::string target;  // base written by the enclosing assignment, if any
};

struct assign_rec {
  const expr_tree* x = nullptr;
  int node = -1, lhs = -1, rhs = -1;
  std::string op;
  int var = -1;     // the local variable assigned (scalar, member or local array)
  int access = -1;  // the access of the LHS when it is an array element
  int item = -1;
  std::vector<int> loops;
};

struct cond_rec {
  const expr_tree* x = nullptr;
  int node = -1;
  role_t kind = role_t::cond_if;  // cond_if also for ternaries
  std::vector<int> loops;
};

struct call_rec {
  std::string name;
  std::vector<int> loops;
};

// A k-loop of a GEMM: the loop and two operands read in it whose thread coordinates
// are incomparable (they span different output dimensions).
struct k_loop_operands {
  int loop;
  std::string p, q;  // operand bases
};

// Accesses grouped by base.
using reads_by_base = std::map<std::string, std::vector<const access_rec*>>;

// Shared arrays stored from global reads, and the global reads that feed them.
struct staging {
  std::map<std::string, std::set<std::string>> staged_from;  // shared base → global bases
  reads_by_base staging_reads;                               // global base → reads feeding shared
};

// What the scan of accumulating loops finds (analyzer_gemm.cpp).
struct loop_accumulations {
  bool serial_reduction = false;
  bool k_loop = false;
  std::vector<k_loop_operands> gemm_loops;
};

// Is loop `id` among `loops` (the loops enclosing something)?
inline bool in_loop(const std::vector<int>& loops, int id) {
  return std::find(loops.begin(), loops.end(), id) != loops.end();
}

// ===========================================================================

// Union-find over indices.
struct disjoint_sets {
  std::vector<size_t> parent;
  explicit disjoint_sets(size_t n) : parent(n) {
    for (size_t i = 0; i < n; ++i) parent[i] = i;
  }
  size_t find(size_t i) {
    while (parent[i] != i) {
      parent[i] = parent[parent[i]];
      i = parent[i];
    }
    return i;
  }
  void unite(size_t a, size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

class function_analyzer {
 public:
  function_analyzer(const parsed_source& ps, const function_unit& f, const std::map<std::string, long long>& constants,
                    const std::map<std::string, var_rec>& file_vars, const launch_info* launch, double nominal)
      : ps_(ps),
        f_(f),
        t_(ps.lex.tokens),
        constants_(constants),
        file_vars_(file_vars),
        launch_(launch),
        nominal_(nominal) {}

  unit_facts run();

 private:
  const parsed_source& ps_;
  const function_unit& f_;
  const token_list& t_;
  const std::map<std::string, long long>& constants_;
  const std::map<std::string, var_rec>& file_vars_;
  const launch_info* launch_;
  double nominal_;

  std::deque<expr_tree> trees_;
  std::vector<var_rec> vars_;
  std::vector<loop_rec> loops_;
  std::vector<item_rec> items_;
  std::map<size_t, int> binding_;  // identifier token → variable
  std::vector<std::map<std::string, int>> scopes_;
  std::vector<access_rec> accesses_;
  std::vector<assign_rec> assigns_;
  std::vector<cond_rec> conds_;
  std::vector<call_rec> calls_;
  std::map<std::string, deps> atom_deps_;
  std::map<std::pair<const expr_tree*, int>, deps> deps_memo_;
  std::map<std::pair<const expr_tree*, int>, poly> poly_memo_;
  std::set<std::pair<const expr_tree*, int>> poly_busy_;
  bool ptr_int_check_ = false;  // a pointer cast to an integer under % or &
  int var_depth_ = 0;           // recursion through variable definitions
  bool align_call_ = false;     // a call to an *align* helper with a pointer

  // ---- pass 1 (analyzer_statements.cpp)
  int lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return -1;
  }
  const expr_tree* new_tree(size_t b, size_t e) {
    trees_.push_back(parse_expression(t_, b, e));
    return &trees_.back();
  }
  void bind(const expr_tree* x);
  void note_assignments(const expr_tree* x, int loop_id_for_var);
  int lhs_var(const expr_tree& x, int n) const;
  int declare(const declaration& d, const declarator& it, std::vector<int>& loops, const std::vector<guard>& guards);
  void walk(const statement& s, std::vector<int>& loops, std::vector<guard>& guards);
  void walk_loop(const statement& s, std::vector<int>& loops, std::vector<guard>& guards);
  void add_item(const expr_tree* x, role_t role, const std::vector<int>& loops, const std::vector<guard>& guards,
                int var = -1) {
    item_rec r;
    r.x = x;
    r.role = role;
    r.var = var;
    r.loops = loops;
    r.guards = guards;
    items_.push_back(std::move(r));
  }

  // ---- values (analyzer_values.cpp)
  std::optional<long long> const_eval(const expr_tree& x, int n, int depth = 0) const;
  deps deps_of(const expr_tree& x, int n);
  deps var_deps(int v);
  poly poly_of(const expr_tree& x, int n, int depth = 0);
  poly var_poly(int v, int depth);
  poly opaque(const expr_tree& x, int n);
  std::string var_atom(int v) const { return vars_[static_cast<size_t>(v)].key; }
  bool expandable(const var_rec& v) const {
    return v.has_init && !v.brace_init && v.assigns == 0 && v.loop_id < 0 && v.ptr == 0 && !v.is_array && !v.is_param &&
           v.space != space_t::shared && v.init_tree != nullptr;
  }
  std::set<std::string> sources_of(const expr_tree& x, int n, int depth = 0);
  std::set<std::string> var_sources(int v, int depth);

  // ---- pointers and accesses (analyzer_accesses.cpp)
  ptr_ref resolve_ptr(const expr_tree& x, int n, int depth = 0);
  ptr_ref var_ptr(int v, int depth);
  bool resolve_subscript(const expr_tree& x, int n, ptr_ref& r, poly& index, int depth = 0);
  int record_access(const ptr_ref& r, const poly& index_elems, bool read, bool write, bool atomic, bool wmma, int item,
                    const expr_tree& x, int n, const std::string& target);

  // ---- pass 2 (analyzer_accesses.cpp)
  enum class use { read, write, rmw, addr };
  struct vctx {
    int item;
    std::string target;
  };
  void visit(const expr_tree& x, int n, use u, vctx& c);
  void visit_assignment(const expr_tree& x, int n, vctx& c);
  void visit_unary(const expr_tree& x, int n, use u, vctx& c);
  void visit_subscript(const expr_tree& x, int n, use u, vctx& c);
  void visit_call(const expr_tree& x, int n, vctx& c);
  bool visit_memory_intrinsic(const expr_tree& x, int n, const std::string& name, vctx& c);
  void visit_addr_arg(const expr_tree& x, int n, bool read, bool write, bool atomic, bool wmma, vctx& c);
  void scan_ptr_int_cast(const expr_tree& x, int n);

  // ---- the run (analyzer_rules.cpp)
  void declare_parameters();
  void run_pass_2();

  // ---- loops (analyzer_loops.cpp)
  void derive_loops();
  void derive_step_shape(loop_rec& L);
  void derive_thread_and_trip(loop_rec& L);
  std::optional<long long> loop_bound(loop_rec& L, int bound_node);
  long long trip_of(int loop) const;
  bool window_var(const access_rec& a, int loop) const;
  bool has_grid_stride_for_loop() const;
  bool has_grid_stride_while_loop();
  int count_unrolled_loops() const;
  bool is_unrolled_by_hand(const loop_rec& L) const;

  // ---- index patterns (analyzer_index.cpp)
  std::set<std::string> thread_atoms(const poly& p) const;
  std::set<char> block_dims(const poly& p) const;
  poly anchored(const poly& p);
  void index_neighbours();
  std::vector<size_t> neighbours_of(size_t i);
  std::vector<poly> anch_;
  std::vector<std::string> anch_key_;
  std::map<std::string, std::vector<size_t>> by_anch_;
  size_t index_of(const access_rec* a) const { return static_cast<size_t>(a - accesses_.data()); }
  bool writes_global_memory() const;
  bool has_data_dependent_index() const;
  bool has_vector_access() const;
  int widest_vector_access() const;
  bool has_vector_load() const;
  bool has_vector_store() const;
  bool is_stencil_read(const access_rec& a) const;
  bool has_sliding_window_read() const;
  bool has_constant_offset_taps();
  bool is_stencil();
  bool is_pointwise(const unit_facts& uf);
  bool every_write_is_per_thread(const std::vector<const access_rec*>& writes);
  bool every_read_matches_a_write(const std::vector<const access_rec*>& reads,
                                  const std::vector<const access_rec*>& writes) const;
  bool is_fully_unrolled(const loop_rec& L) const;
  bool is_indexed_at_run_time(const var_rec& v) const;
  long long local_array_bytes() const;

  // ---- conditions (analyzer_guards.cpp)
  bool is_bounds_cmp(const expr_tree& x, int n);
  bool cond_has_bounds(const expr_tree& x, int n);
  bool cond_divergent(const expr_tree& x, int n);
  bool is_bounds_check(const cond_rec& c);
  bool is_divergent_branch(const cond_rec& c);
  bool has_tail_handling(const unit_facts& uf, const staging& st);
  bool has_scalar_tail_of_vector_access() const;
  bool guards_staging_load(const staging& st);
  bool checks_size_for_vector_width(int w) const;
  bool is_alignment_checked(const unit_facts& uf) const;

  // ---- reductions (analyzer_reductions.cpp)
  struct accumulation {
    bool yes = false;
    int f1 = -1, f2 = -1;  // product factors, when the accumulated term is a product
  };
  accumulation accumulation_of(const assign_rec& as);
  int find_product(const expr_tree& x, int n, int& f1, int& f2) const;
  bool reduces_through_intrinsics() const;
  bool has_shared_tree_reduction();
  bool accumulates_serially(const assign_rec& as, const loop_rec& L, const reads_by_base& kreads);

  // ---- k-loops and GEMMs (analyzer_gemm.cpp)
  std::set<int> loops_with_mma() const;
  reads_by_base reads_indexed_by(const loop_rec& L, bool& window) const;
  bool multiplies_two_sources(const assign_rec& as, const accumulation& acc);
  void add_gemm_operand_pairs(const loop_rec& L, const reads_by_base& kreads, std::vector<k_loop_operands>& out) const;
  loop_accumulations scan_accumulating_loops(const std::set<int>& mma_loops);
  space_t space_of_base(const std::string& b) const;
  bool is_naive_gemm(const std::vector<k_loop_operands>& kloops, const staging& st) const;
  bool is_half_precision_base(const std::string& b, const staging& st) const;
  bool has_half_precision_operands(const std::vector<k_loop_operands>& kloops, const staging& st) const;

  // ---- shared memory (analyzer_shared.cpp)
  bool uses_shared_memory() const;
  staging find_staging();
  bool is_tile_read_in_accumulating_loop(const access_rec& r, const std::string& s);
  bool has_neighbour_reuse(const std::vector<const access_rec*>& reads, const std::string& s);
  bool has_shared_memory_tiling(const staging& st);

  // ---- reuse (analyzer_reuse.cpp)
  struct reuse_context;
  reuse_context make_reuse_context() const;
  long long block_extent(const reuse_context& rc, char d) const;
  double extent(const reuse_context& rc, char d) const;
  double site_reuse(const reuse_context& rc, const access_rec& s, bool site_staged) const;
  double operand_reuse(const reuse_context& rc, const staging& st, const std::string& op) const;
  double gemm_reuse(const reuse_context& rc, const std::vector<k_loop_operands>& kloops, const staging& st) const;
  bool is_broadcast_operand(const std::vector<const access_rec*>& sites,
                            const std::set<std::string>& write_atoms) const;
  double window_taps(const access_rec& a) const;
  double base_reread_reuse(const std::vector<const access_rec*>& sites, const std::set<std::string>& fresh_loop_atoms,
                           const std::set<const access_rec*>& staged_set);
  double reread_reuse(const reuse_context& rc, const staging& st);
  double reuse_factor(const std::vector<k_loop_operands>& kloops, const staging& st);
};

}  // namespace ks::features::analysis
