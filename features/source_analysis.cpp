#include "features/source_analysis.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
#include <set>

namespace ks::features {

namespace {

// ===========================================================================
// Integer polynomials over named atoms: the index expressions of array accesses,
// expanded through single-assignment locals, so that `A[row * K + k]` with
// `row = blockIdx.y * 16 + threadIdx.y` reads as 16·K·blockIdx.y + K·threadIdx.y + k.

using monomial = std::vector<std::string>;  // sorted atom names; empty: the constant

struct poly {
  std::map<monomial, long long> t;
  bool ok = true;

  static poly cst(long long c) {
    poly p;
    if (c != 0) p.t[{}] = c;
    return p;
  }
  static poly atom(const std::string& a) {
    poly p;
    p.t[{a}] = 1;
    return p;
  }
  static poly bad() {
    poly p;
    p.ok = false;
    return p;
  }
  bool is_const() const { return ok && (t.empty() || (t.size() == 1 && t.begin()->first.empty())); }
  long long cval() const {
    auto it = t.find(monomial{});
    return it == t.end() ? 0 : it->second;
  }
  bool is_zero() const { return ok && t.empty(); }
  std::set<std::string> atoms() const {
    std::set<std::string> s;
    for (auto& [m, c] : t)
      for (auto& a : m) s.insert(a);
    return s;
  }
  bool has(const std::string& a) const {
    for (auto& [m, c] : t)
      if (std::find(m.begin(), m.end(), a) != m.end()) return true;
    return false;
  }
  // The coefficient of `a` in the terms where it appears exactly once.
  poly coeff(const std::string& a) const {
    poly r;
    r.ok = ok;
    for (auto& [m, c] : t) {
      if (std::count(m.begin(), m.end(), a) != 1) continue;
      monomial rest;
      for (auto& x : m)
        if (x != a) rest.push_back(x);
      r.t[rest] += c;
    }
    for (auto it = r.t.begin(); it != r.t.end();)
      it = it->second == 0 ? r.t.erase(it) : std::next(it);
    return r;
  }
  // The polynomial with the terms that contain none of `drop`.
  poly without(const std::set<std::string>& drop) const {
    poly r;
    r.ok = ok;
    for (auto& [m, c] : t) {
      bool keep = true;
      for (auto& x : m)
        if (drop.count(x)) keep = false;
      if (keep) r.t[m] = c;
    }
    return r;
  }
  std::string str() const {
    if (!ok) return "?";
    if (t.empty()) return "0";
    std::string s;
    for (auto& [m, c] : t) {
      if (!s.empty()) s += " + ";
      s += std::to_string(c);
      for (auto& a : m) s += "*" + a;
    }
    return s;
  }
  friend bool operator==(const poly& a, const poly& b) { return a.ok && b.ok && a.t == b.t; }
};

constexpr long long kCoefLimit = 1LL << 50;
constexpr size_t kTermLimit = 96;

void normalize(poly& p) {
  for (auto it = p.t.begin(); it != p.t.end();) {
    if (it->second == 0) it = p.t.erase(it);
    else if (std::llabs(it->second) > kCoefLimit) {
      p.ok = false;
      return;
    } else ++it;
  }
  if (p.t.size() > kTermLimit) p.ok = false;
}

poly add(const poly& a, const poly& b, long long sign = 1) {
  if (!a.ok || !b.ok) return poly::bad();
  poly r = a;
  for (auto& [m, c] : b.t) r.t[m] += sign * c;
  normalize(r);
  return r;
}

poly scale(const poly& a, long long k) {
  if (!a.ok) return a;
  poly r;
  if (k == 0) return r;
  for (auto& [m, c] : a.t) {
    if (std::llabs(c) > kCoefLimit / std::max(1LL, std::llabs(k))) return poly::bad();
    r.t[m] = c * k;
  }
  return r;
}

poly mul(const poly& a, const poly& b) {
  if (!a.ok || !b.ok) return poly::bad();
  if (a.t.size() * b.t.size() > kTermLimit * 4) return poly::bad();
  poly r;
  for (auto& [ma, ca] : a.t)
    for (auto& [mb, cb] : b.t) {
      if (std::llabs(ca) > kCoefLimit / std::max(1LL, std::llabs(cb))) return poly::bad();
      monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      r.t[m] += ca * cb;
    }
  normalize(r);
  return r;
}

// d == m * c for an integer m != 0? Sets m.
bool multiple_of(const poly& d, const poly& c, long long& m) {
  if (!d.ok || !c.ok || c.t.empty() || d.t.empty() || d.t.size() != c.t.size()) return false;
  auto& [m0, c0] = *c.t.begin();
  auto it = d.t.find(m0);
  if (it == d.t.end() || it->second % c0 != 0) return false;
  m = it->second / c0;
  if (m == 0) return false;
  return d == scale(c, m);
}

// Substitutes numeric values for atoms.
poly substitute(const poly& p, const std::map<std::string, long long>& values) {
  if (!p.ok) return p;
  poly r;
  for (auto& [m, c] : p.t) {
    poly term = poly::cst(c);
    monomial rest;
    for (auto& a : m) {
      auto it = values.find(a);
      if (it != values.end()) term = scale(term, it->second);
      else rest.push_back(a);
    }
    if (!term.ok) return poly::bad();
    long long k = term.cval();
    if (k != 0) r.t[rest] += k;
  }
  normalize(r);
  return r;
}

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
// Names the analysis knows.

const std::set<std::string>& transcendental_names() {
  static const std::set<std::string> s = {
      "exp", "expf", "exp2", "exp2f", "exp10", "exp10f", "expm1", "expm1f", "__expf",
      "__exp10f", "log", "logf", "log2", "log2f", "log10", "log10f", "log1p", "log1pf",
      "__logf", "__log2f", "__log10f", "tanh", "tanhf", "__tanhf", "erf", "erff", "erfc",
      "erfcf", "erfinv", "erfinvf", "normcdf", "normcdff", "sin", "sinf", "cos", "cosf",
      "tan", "tanf", "__sinf", "__cosf", "__tanf", "sincos", "sincosf", "__sincosf",
      "sinpi", "sinpif", "cospi", "cospif", "pow", "powf", "__powf", "sqrt", "sqrtf",
      "rsqrt", "rsqrtf", "cbrt", "cbrtf", "rcbrt", "rcbrtf", "__fsqrt_rn", "__fsqrt_rz",
      "__fsqrt_ru", "__fsqrt_rd", "__frsqrt_rn", "atan", "atanf", "atan2", "atan2f",
      "asin", "asinf", "acos", "acosf", "sinh", "sinhf", "cosh", "coshf", "asinh",
      "asinhf", "acosh", "acoshf", "atanh", "atanhf", "hexp", "h2exp", "hexp2", "h2exp2",
      "hlog", "h2log", "hlog2", "h2log2", "hsin", "h2sin", "hcos", "h2cos", "hsqrt",
      "h2sqrt", "hrsqrt", "h2rsqrt", "htanh", "h2tanh", "htanh_approx", "h2tanh_approx"};
  return s;
}

const std::set<std::string>& fast_math_names() {
  static const std::set<std::string> s = {
      "__expf", "__exp10f", "__logf", "__log2f", "__log10f", "__powf", "__sinf", "__cosf",
      "__tanf", "__sincosf", "__fdividef", "__tanhf", "rsqrtf", "rsqrt", "htanh_approx",
      "h2tanh_approx", "__frcp_rn_approx"};
  return s;
}

bool is_shuffle(const std::string& n) { return n.rfind("__shfl", 0) == 0; }
bool is_reducing_shuffle(const std::string& n) {
  return n.rfind("__shfl_xor", 0) == 0 || n.rfind("__shfl_down", 0) == 0 ||
         n.rfind("__shfl_up", 0) == 0;
}
bool is_atomic(const std::string& n) {
  std::string b = n;
  size_t c = b.rfind("::");
  if (c != std::string::npos) b = b.substr(c + 2);
  return b.rfind("atomic", 0) == 0 && b.size() > 6 && b[6] >= 'A' && b[6] <= 'Z';
}
bool is_accumulating_atomic(const std::string& n) {
  return is_atomic(n) && n.find("Exch") == std::string::npos;
}
std::string last_name(const std::string& n) {
  size_t c = n.rfind("::");
  return c == std::string::npos ? n : n.substr(c + 2);
}
bool is_ldg(const std::string& n) {
  return n == "__ldg" || n == "__ldcg" || n == "__ldca" || n == "__ldcs" || n == "__ldlu" ||
         n == "__ldcv";
}
bool is_st_hint(const std::string& n) {
  return n == "__stcg" || n == "__stcs" || n == "__stwb" || n == "__stwt";
}

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
  poly offset;  // in base elements
  int var = -1;  // the underlying variable (array or parameter), or -1
};

struct access_rec {
  std::string base;
  space_t space = space_t::unknown;
  type_shape base_elem;
  type_shape elem;
  int width = 1;    // elements of the base's scalar per access
  int bytes = 0;    // bytes per access
  int ratio = 1;    // base elements per access
  poly index;       // in base elements
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
  int var = -1;        // the local variable assigned (scalar, member or local array)
  int access = -1;     // the access of the LHS when it is an array element
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
  function_analyzer(const parsed_source& ps, const function_unit& f,
                    const std::map<std::string, long long>& constants,
                    const std::map<std::string, var_rec>& file_vars, const launch_info* launch,
                    double nominal)
      : ps_(ps), f_(f), t_(ps.lex.tokens), constants_(constants), file_vars_(file_vars),
        launch_(launch), nominal_(nominal) {}

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

  // ---- pass 1
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
  int declare(const declaration& d, const declarator& it, std::vector<int>& loops,
              const std::vector<guard>& guards);
  void walk(const statement& s, std::vector<int>& loops, std::vector<guard>& guards);
  void add_item(const expr_tree* x, role_t role, const std::vector<int>& loops,
                const std::vector<guard>& guards, int var = -1) {
    item_rec r;
    r.x = x;
    r.role = role;
    r.var = var;
    r.loops = loops;
    r.guards = guards;
    items_.push_back(std::move(r));
  }

  // ---- values
  std::optional<long long> const_eval(const expr_tree& x, int n, int depth = 0);
  deps deps_of(const expr_tree& x, int n);
  deps var_deps(int v);
  poly poly_of(const expr_tree& x, int n, int depth = 0);
  poly var_poly(int v, int depth);
  poly opaque(const expr_tree& x, int n);
  std::string var_atom(int v) const { return vars_[static_cast<size_t>(v)].key; }
  bool expandable(const var_rec& v) const {
    return v.has_init && !v.brace_init && v.assigns == 0 && v.loop_id < 0 && v.ptr == 0 &&
           !v.is_array && !v.is_param && v.space != space_t::shared && v.init_tree != nullptr;
  }
  std::set<std::string> sources_of(const expr_tree& x, int n, int depth = 0);
  std::set<std::string> var_sources(int v, int depth);

  // ---- pointers and accesses
  ptr_ref resolve_ptr(const expr_tree& x, int n, int depth = 0);
  ptr_ref var_ptr(int v, int depth);
  bool resolve_subscript(const expr_tree& x, int n, ptr_ref& r, poly& index, int depth = 0);
  int record_access(const ptr_ref& r, const poly& index_elems, bool read, bool write,
                    bool atomic, bool wmma, int item, const expr_tree& x, int n,
                    const std::string& target);

  // ---- pass 2
  enum class use { read, write, rmw, addr };
  struct vctx {
    int item;
    std::string target;
  };
  void visit(const expr_tree& x, int n, use u, vctx& c);
  void visit_addr_arg(const expr_tree& x, int n, bool read, bool write, bool atomic, bool wmma,
                      vctx& c);
  void scan_ptr_int_cast(const expr_tree& x, int n);

  // ---- derived facts
  void derive_loops();
  bool is_bounds_cmp(const expr_tree& x, int n);
  bool cond_has_bounds(const expr_tree& x, int n);
  bool cond_divergent(const expr_tree& x, int n);
  std::set<std::string> thread_atoms(const poly& p) const;
  std::set<char> block_dims(const poly& p) const;
  bool window_var(const access_rec& a, int loop) const;
  poly anchored(const poly& p);
  void index_neighbours();
  std::vector<size_t> neighbours_of(size_t i);
  std::vector<poly> anch_;
  std::vector<std::string> anch_key_;
  std::map<std::string, std::vector<size_t>> by_anch_;
  struct accumulation {
    bool yes = false;
    int f1 = -1, f2 = -1;  // product factors, when the accumulated term is a product
  };
  accumulation accumulation_of(const assign_rec& as);
  int find_product(const expr_tree& x, int n, int& f1, int& f2) const;
  long long trip_of(int loop) const;
};

// ---------------------------------------------------------------------------
// Pass 1: declarations, bindings, assignments, loops, items.

void function_analyzer::bind(const expr_tree* x) {
  for (const ex_node& n : x->nodes) {
    if (n.kind != ex_kind::ident) continue;
    if (n.op.find("::") != std::string::npos) continue;
    int v = lookup(n.op);
    if (v >= 0) binding_[n.toks.b] = v;
  }
}

int function_analyzer::lhs_var(const expr_tree& x, int n) const {
  while (n >= 0) {
    const ex_node& k = x.at(n);
    if (k.kind == ex_kind::ident) {
      auto it = binding_.find(k.toks.b);
      return it == binding_.end() ? -1 : it->second;
    }
    if (k.kind == ex_kind::member && !k.arrow) {
      n = k.kids[0];
      continue;
    }
    if (k.kind == ex_kind::subscript) {
      // Writing an element of a local or shared array assigns that array; writing
      // through a pointer does not assign the pointer.
      int b = k.kids[0];
      while (x.at(b).kind == ex_kind::subscript) b = x.at(b).kids[0];
      if (x.at(b).kind != ex_kind::ident) return -1;
      auto it = binding_.find(x.at(b).toks.b);
      if (it == binding_.end()) return -1;
      return vars_[static_cast<size_t>(it->second)].is_array ? it->second : -1;
    }
    return -1;
  }
  return -1;
}

void function_analyzer::note_assignments(const expr_tree* x, int loop_id_for_var) {
  for (size_t i = 0; i < x->nodes.size(); ++i) {
    const ex_node& n = x->nodes[i];
    if (n.kind == ex_kind::binary && n.kids.size() == 2 &&
        (n.op == "=" || n.op == "+=" || n.op == "-=" || n.op == "*=" || n.op == "/=" ||
         n.op == "%=" || n.op == "&=" || n.op == "|=" || n.op == "^=" || n.op == "<<=" ||
         n.op == ">>=")) {
      int v = lhs_var(*x, n.kids[0]);
      if (v < 0) continue;
      var_rec& r = vars_[static_cast<size_t>(v)];
      r.values.push_back({x, n.kids[1]});
      ++r.assigns;
      if (loop_id_for_var >= 0 && r.loop_id < 0 && x->at(n.kids[0]).kind == ex_kind::ident)
        r.loop_id = loop_id_for_var;
    } else if ((n.kind == ex_kind::unary || n.kind == ex_kind::postfix) &&
               (n.op == "++" || n.op == "--") && !n.kids.empty()) {
      int v = lhs_var(*x, n.kids[0]);
      if (v < 0) continue;
      var_rec& r = vars_[static_cast<size_t>(v)];
      r.values.push_back({x, -1});
      ++r.assigns;
    }
  }
}

int function_analyzer::declare(const declaration& d, const declarator& it,
                               std::vector<int>& loops, const std::vector<guard>& guards) {
  var_rec v;
  v.name = it.name;
  v.type = base_type_of(d.type);
  v.ptr = it.pointer_depth;
  v.elem = shape_of_type(v.type);
  v.is_array = !it.dims.empty();
  for (auto& dim : it.dims) {
    if (dim.empty()) {
      v.dims.push_back(-1);
      continue;
    }
    const expr_tree* x = new_tree(dim.b, dim.e);
    bind(x);
    auto c = const_eval(*x, x->root);
    v.dims.push_back(c ? *c : -1);
  }
  if (d.has_qual("__shared__")) v.space = space_t::shared;
  else if (d.has_qual("__constant__")) v.space = space_t::constant;
  else if (v.is_array) v.space = space_t::local;
  else v.space = space_t::none;
  int id = static_cast<int>(vars_.size());
  v.key = it.name + "#" + std::to_string(id);
  if (it.has_init && !it.init.empty()) {
    v.has_init = true;
    v.brace_init = it.brace_init;
    const expr_tree* x = new_tree(it.init.b, it.init.e);
    bind(x);
    v.init_tree = x;
    v.init_node = x->root;
    vars_.push_back(std::move(v));
    note_assignments(x, -1);
    add_item(x, role_t::decl_init, loops, guards, id);
  } else {
    vars_.push_back(std::move(v));
  }
  scopes_.back()[it.name] = id;
  return id;
}

void function_analyzer::walk(const statement& s, std::vector<int>& loops,
                             std::vector<guard>& guards) {
  switch (s.kind) {
    case st_kind::block: {
      scopes_.emplace_back();
      for (auto& k : s.kids) walk(k, loops, guards);
      scopes_.pop_back();
      break;
    }
    case st_kind::decl: {
      declaration d;
      if (parse_declaration(t_, s.r.b, s.r.e, d))
        for (auto& it : d.items) declare(d, it, loops, guards);
      break;
    }
    case st_kind::expr: {
      const expr_tree* x = new_tree(s.r.b, s.r.e);
      bind(x);
      note_assignments(x, -1);
      add_item(x, role_t::stmt, loops, guards);
      break;
    }
    case st_kind::jump: {
      if (s.r.b < s.r.e && is_ident(t_[s.r.b], "return") && s.r.b + 1 < s.r.e) {
        const expr_tree* x = new_tree(s.r.b + 1, s.r.e);
        bind(x);
        note_assignments(x, -1);
        add_item(x, role_t::stmt, loops, guards);
      }
      break;
    }
    case st_kind::for_loop:
    case st_kind::while_loop:
    case st_kind::do_loop: {
      scopes_.emplace_back();
      loop_rec L;
      L.id = static_cast<int>(loops_.size());
      L.parent = loops.empty() ? -1 : loops.back();
      L.kind = s.kind;
      L.pragma = s.pragma;
      loops_.push_back(L);
      int id = L.id;
      if (s.kind == st_kind::for_loop && !s.init.empty()) {
        declaration d;
        if (parse_declaration(t_, s.init.b, s.init.e, d)) {
          bool first = true;
          for (auto& it : d.items) {
            int v = declare(d, it, loops, guards);
            if (first) {
              loops_[static_cast<size_t>(id)].var = v;
              vars_[static_cast<size_t>(v)].loop_id = id;
              first = false;
            }
          }
          if (!items_.empty() && items_.back().var >= 0) items_.back().role = role_t::loop_init;
        } else {
          const expr_tree* x = new_tree(s.init.b, s.init.e);
          bind(x);
          note_assignments(x, id);
          loops_[static_cast<size_t>(id)].init = x;
          // The loop variable: the first assigned identifier.
          for (auto& n : x->nodes)
            if (n.kind == ex_kind::binary && n.op == "=") {
              int v = lhs_var(*x, n.kids[0]);
              if (v >= 0) {
                loops_[static_cast<size_t>(id)].var = v;
                vars_[static_cast<size_t>(v)].loop_id = id;
              }
              break;
            }
          add_item(x, role_t::loop_init, loops, guards);
        }
      }
      loops.push_back(id);
      if (s.kind != st_kind::do_loop && !s.cond.empty()) {
        const expr_tree* x = new_tree(s.cond.b, s.cond.e);
        bind(x);
        note_assignments(x, -1);
        loops_[static_cast<size_t>(id)].cond = x;
        add_item(x, s.kind == st_kind::for_loop ? role_t::cond_for : role_t::cond_while, loops,
                 guards);
      }
      if (s.kind == st_kind::for_loop && !s.step.empty()) {
        const expr_tree* x = new_tree(s.step.b, s.step.e);
        bind(x);
        note_assignments(x, -1);
        loops_[static_cast<size_t>(id)].step = x;
        add_item(x, role_t::loop_step, loops, guards);
        // for (; cond; i += 4): the variable is the one the step updates.
        if (loops_[static_cast<size_t>(id)].var < 0) {
          const ex_node& r = x->at(x->root);
          if (!r.kids.empty() && (r.kind == ex_kind::binary || r.kind == ex_kind::unary ||
                                  r.kind == ex_kind::postfix)) {
            int v = lhs_var(*x, r.kids[0]);
            if (v >= 0 && !vars_[static_cast<size_t>(v)].is_array) {
              loops_[static_cast<size_t>(id)].var = v;
              if (vars_[static_cast<size_t>(v)].loop_id < 0) vars_[static_cast<size_t>(v)].loop_id = id;
            }
          }
        }
      }
      for (auto& k : s.kids) walk(k, loops, guards);
      if (s.kind == st_kind::do_loop && !s.cond.empty()) {
        const expr_tree* x = new_tree(s.cond.b, s.cond.e);
        bind(x);
        note_assignments(x, -1);
        loops_[static_cast<size_t>(id)].cond = x;
        add_item(x, role_t::cond_while, loops, guards);
      }
      loops.pop_back();
      scopes_.pop_back();
      break;
    }
    case st_kind::if_stmt: {
      const expr_tree* x = new_tree(s.cond.b, s.cond.e);
      bind(x);
      note_assignments(x, -1);
      add_item(x, role_t::cond_if, loops, guards);
      for (size_t i = 0; i < s.kids.size(); ++i) {
        scopes_.emplace_back();
        if (i == 0) guards.push_back({x, x->root});
        walk(s.kids[i], loops, guards);
        if (i == 0) guards.pop_back();
        scopes_.pop_back();
      }
      break;
    }
    case st_kind::switch_stmt: {
      const expr_tree* x = new_tree(s.cond.b, s.cond.e);
      bind(x);
      add_item(x, role_t::cond_switch, loops, guards);
      scopes_.emplace_back();
      for (auto& k : s.kids) walk(k, loops, guards);
      scopes_.pop_back();
      break;
    }
    case st_kind::empty:
      break;
  }
}

// ---------------------------------------------------------------------------
// Values: constants, dependencies, polynomials, memory sources.

std::optional<long long> function_analyzer::const_eval(const expr_tree& x, int n, int depth) {
  if (n < 0 || depth > 32) return std::nullopt;
  const ex_node& k = x.at(n);
  switch (k.kind) {
    case ex_kind::number:
      if (k.is_int) return k.ival;
      return std::nullopt;
    case ex_kind::ident: {
      if (k.op == "warpSize") return 32;
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) {
        const var_rec& v = vars_[static_cast<size_t>(b->second)];
        if (expandable(v)) return const_eval(*v.init_tree, v.init_node, depth + 1);
        return std::nullopt;
      }
      auto c = constants_.find(last_name(k.op));
      if (c != constants_.end()) return c->second;
      return std::nullopt;
    }
    case ex_kind::cast:
      return const_eval(x, k.kids[0], depth + 1);
    case ex_kind::unary: {
      if (k.kids.empty()) return std::nullopt;
      auto a = const_eval(x, k.kids[0], depth + 1);
      if (!a) return std::nullopt;
      if (k.op == "-") return -*a;
      if (k.op == "+") return *a;
      if (k.op == "~") return ~*a;
      if (k.op == "!") return *a == 0 ? 1 : 0;
      return std::nullopt;
    }
    case ex_kind::binary: {
      auto a = const_eval(x, k.kids[0], depth + 1);
      auto b = const_eval(x, k.kids[1], depth + 1);
      if (!a || !b) return std::nullopt;
      long long l = *a, r = *b;
      if (std::llabs(l) > kCoefLimit || std::llabs(r) > kCoefLimit) return std::nullopt;
      if (k.op == "+") return l + r;
      if (k.op == "-") return l - r;
      if (k.op == "*") return std::llabs(l) < (1LL << 31) && std::llabs(r) < (1LL << 31)
                                  ? std::optional<long long>(l * r)
                                  : std::nullopt;
      if (k.op == "/") return r == 0 ? std::nullopt : std::optional<long long>(l / r);
      if (k.op == "%") return r == 0 ? std::nullopt : std::optional<long long>(l % r);
      if (k.op == "<<") return r >= 0 && r < 40 ? std::optional<long long>(l << r) : std::nullopt;
      if (k.op == ">>") return r >= 0 && r < 63 ? std::optional<long long>(l >> r) : std::nullopt;
      if (k.op == "&") return l & r;
      if (k.op == "|") return l | r;
      if (k.op == "^") return l ^ r;
      if (k.op == "<") return l < r;
      if (k.op == ">") return l > r;
      if (k.op == "<=") return l <= r;
      if (k.op == ">=") return l >= r;
      if (k.op == "==") return l == r;
      if (k.op == "!=") return l != r;
      return std::nullopt;
    }
    case ex_kind::ternary: {
      auto c = const_eval(x, k.kids[0], depth + 1);
      if (!c) return std::nullopt;
      return const_eval(x, k.kids[*c ? 1 : 2], depth + 1);
    }
    case ex_kind::call: {
      std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
      if ((name == "min" || name == "max") && k.kids.size() == 3) {
        auto a = const_eval(x, k.kids[1], depth + 1);
        auto b = const_eval(x, k.kids[2], depth + 1);
        if (!a || !b) return std::nullopt;
        return name == "min" ? std::min(*a, *b) : std::max(*a, *b);
      }
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

deps builtin_deps(const std::string& obj, const std::string& member) {
  deps d;
  char dim = member.size() == 1 ? member[0] : 'x';
  if (obj == "threadIdx") {
    d.thread = true;
    d.lane = true;
    d.td.insert(dim);
  } else if (obj == "blockIdx") {
    d.thread = true;
    d.bd.insert(dim);
  } else if (obj == "gridDim") {
    d.grid = true;
  }
  return d;
}

deps function_analyzer::var_deps(int v) {
  var_rec& r = vars_[static_cast<size_t>(v)];
  if (r.deps_state == 2) return r.d;
  if (r.deps_state == 1 || var_depth_ > 64) return deps{};  // a cycle, or a pathological chain
  struct guard {
    int& d;
    explicit guard(int& x) : d(x) { ++d; }
    ~guard() { --d; }
  } g(var_depth_);
  r.deps_state = 1;
  deps d;
  bool lane_index = false;
  if (r.has_init && r.init_tree) {
    deps i = deps_of(*r.init_tree, r.init_node);
    lane_index = i.lane_index;
    d.merge(i);
  }
  for (auto& [x, n] : r.values)
    if (n >= 0) d.merge(deps_of(*x, n));
  d.lane_index = lane_index && r.assigns == 0;
  if (r.loop_id >= 0) {
    const loop_rec& L = loops_[static_cast<size_t>(r.loop_id)];
    if (L.step) d.merge(deps_of(*L.step, L.step->root));
    d.lane_index = false;
    if (!d.thread) d.loops.insert(r.loop_id);
    if (L.tree) d.tree_loop = true;
  }
  r.d = d;
  r.deps_state = 2;
  return d;
}

deps function_analyzer::deps_of(const expr_tree& x, int n) {
  if (n < 0) return {};
  auto key = std::make_pair(&x, n);
  auto memo = deps_memo_.find(key);
  if (memo != deps_memo_.end()) return memo->second;
  const ex_node& k = x.at(n);
  deps d;
  switch (k.kind) {
    case ex_kind::number:
    case ex_kind::string:
    case ex_kind::unknown:
      break;
    case ex_kind::ident: {
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) {
        d = var_deps(b->second);
      } else if (k.op == "threadIdx" || k.op == "blockIdx" || k.op == "gridDim") {
        for (const char* m : {"x", "y", "z"}) d.merge(builtin_deps(k.op, m));
      }
      break;
    }
    case ex_kind::member: {
      const ex_node& o = x.at(k.kids[0]);
      if (o.kind == ex_kind::ident && binding_.find(o.toks.b) == binding_.end() &&
          (o.op == "threadIdx" || o.op == "blockIdx" || o.op == "gridDim" || o.op == "blockDim")) {
        d = builtin_deps(o.op, k.op);
      } else {
        d = deps_of(x, k.kids[0]);
      }
      break;
    }
    case ex_kind::call: {
      std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
      for (size_t i = 1; i < k.kids.size(); ++i) d.merge(deps_of(x, k.kids[i]));
      if (x.at(k.kids[0]).kind == ex_kind::member) {
        const std::string& m = x.at(k.kids[0]).op;
        if (m == "thread_rank") {
          d.thread = d.lane = true;
          d.td.insert('x');
        } else if (m == "group_index") {
          d.thread = true;
          d.bd.insert('x');
        }
      }
      if (name == "__lane_id" || name == "laneid" || name == "lane_id") {
        d.thread = d.lane = true;
        d.td.insert('x');
        d.lane_index = true;
      } else if (is_shuffle(name) || is_ldg(name) || is_atomic(name) ||
                 name.rfind("__ballot", 0) == 0 || name.rfind("__reduce", 0) == 0) {
        d.data = true;
      }
      break;
    }
    case ex_kind::subscript: {
      d.data = true;
      break;
    }
    case ex_kind::unary: {
      if (k.op == "*") {
        d.data = true;
      } else if (!k.kids.empty()) {
        deps a = deps_of(x, k.kids[0]);
        bool li = a.lane_index && (k.op == "+");
        d.merge(a);
        d.lane_index = li;
      }
      break;
    }
    case ex_kind::cast: {
      d = deps_of(x, k.kids[0]);
      break;
    }
    case ex_kind::binary: {
      deps a = deps_of(x, k.kids[0]);
      deps b = deps_of(x, k.kids[1]);
      auto c = const_eval(x, k.kids[1]);
      if (k.op == "=" ) {
        d = b;
        break;
      }
      d.merge(a);
      d.merge(b);
      if ((k.op == "/" || k.op == ">>") && c) {
        if ((k.op == "/" && *c != 0 && *c % 32 == 0) || (k.op == ">>" && *c >= 5)) d.lane = false;
      }
      if ((k.op == "%" || k.op == "&") && c && a.lane) {
        if ((k.op == "%" && *c == 32) || (k.op == "&" && *c == 31)) d.lane_index = true;
      }
      break;
    }
    default:
      for (int kid : k.kids) d.merge(deps_of(x, kid));
      break;
  }
  deps_memo_[key] = d;
  return d;
}

poly function_analyzer::opaque(const expr_tree& x, int n) {
  std::string name = "(" + node_text(t_, x, n) + ")";
  if (!atom_deps_.count(name)) atom_deps_[name] = deps_of(x, n);
  return poly::atom(name);
}

poly function_analyzer::var_poly(int v, int depth) {
  var_rec& r = vars_[static_cast<size_t>(v)];
  if (!expandable(r) || depth > 8 || r.poly_state == 1) {
    if (!atom_deps_.count(r.key)) atom_deps_[r.key] = var_deps(v);
    return poly::atom(r.key);
  }
  if (r.poly_state == 2) return r.value;
  r.poly_state = 1;
  poly p = poly_of(*r.init_tree, r.init_node, depth + 1);
  if (!p.ok) {
    // Not a polynomial (a float, a call): the variable itself is the atom.
    atom_deps_[r.key] = var_deps(v);
    p = poly::atom(r.key);
  }
  r.value = p;
  r.poly_state = 2;
  return p;
}

poly function_analyzer::poly_of(const expr_tree& x, int n, int depth) {
  if (n < 0) return poly::bad();
  auto key = std::make_pair(&x, n);
  if (depth == 0) {
    auto m = poly_memo_.find(key);
    if (m != poly_memo_.end()) return m->second;
  }
  const ex_node& k = x.at(n);
  poly p;
  switch (k.kind) {
    case ex_kind::number:
      p = k.is_int ? poly::cst(k.ival) : opaque(x, n);
      break;
    case ex_kind::ident: {
      if (k.op == "warpSize") {
        p = poly::cst(32);
        break;
      }
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) {
        p = var_poly(b->second, depth);
        break;
      }
      auto c = constants_.find(last_name(k.op));
      if (c != constants_.end()) {
        p = poly::cst(c->second);
        break;
      }
      if (!atom_deps_.count(k.op)) atom_deps_[k.op] = deps_of(x, n);
      p = poly::atom(k.op);
      break;
    }
    case ex_kind::member: {
      const ex_node& o = x.at(k.kids[0]);
      if (o.kind == ex_kind::ident && binding_.find(o.toks.b) == binding_.end() &&
          (o.op == "threadIdx" || o.op == "blockIdx" || o.op == "gridDim" || o.op == "blockDim")) {
        std::string name = o.op + "." + k.op;
        if (!atom_deps_.count(name)) atom_deps_[name] = builtin_deps(o.op, k.op);
        p = poly::atom(name);
      } else {
        p = opaque(x, n);
      }
      break;
    }
    case ex_kind::cast:
      p = poly_of(x, k.kids[0], depth);
      if (!p.ok) p = opaque(x, n);
      break;
    case ex_kind::unary:
      if (k.op == "-" && !k.kids.empty()) p = scale(poly_of(x, k.kids[0], depth), -1);
      else if (k.op == "+" && !k.kids.empty()) p = poly_of(x, k.kids[0], depth);
      else p = opaque(x, n);
      if (!p.ok) p = opaque(x, n);
      break;
    case ex_kind::binary: {
      const std::string& op = k.op;
      if (op == "+" || op == "-" || op == "*") {
        poly a = poly_of(x, k.kids[0], depth);
        poly b = poly_of(x, k.kids[1], depth);
        p = op == "*" ? mul(a, b) : add(a, b, op == "+" ? 1 : -1);
      } else if (op == "<<") {
        auto c = const_eval(x, k.kids[1]);
        if (c && *c >= 0 && *c < 40) p = scale(poly_of(x, k.kids[0], depth), 1LL << *c);
        else p = poly::bad();
      } else if (op == "/") {
        auto c = const_eval(x, k.kids[1]);
        poly a = poly_of(x, k.kids[0], depth);
        p = poly::bad();
        if (c && *c != 0 && a.ok) {
          bool divisible = true;
          for (auto& [m, v] : a.t)
            if (v % *c != 0) divisible = false;
          if (divisible) {
            p = poly();
            for (auto& [m, v] : a.t) p.t[m] = v / *c;
          }
        }
      } else {
        p = poly::bad();
      }
      if (!p.ok) p = opaque(x, n);
      break;
    }
    default:
      p = opaque(x, n);
      break;
  }
  if (depth == 0) poly_memo_[key] = p;
  return p;
}

std::set<std::string> function_analyzer::var_sources(int v, int depth) {
  var_rec& r = vars_[static_cast<size_t>(v)];
  if (r.src_state == 2) return r.sources;
  if (r.src_state == 1 || depth > 12) return {};
  r.src_state = 1;
  std::set<std::string> s;
  if (r.has_init && r.init_tree) {
    auto a = sources_of(*r.init_tree, r.init_node, depth + 1);
    s.insert(a.begin(), a.end());
  }
  for (auto& [x, n] : r.values)
    if (n >= 0) {
      auto a = sources_of(*x, n, depth + 1);
      s.insert(a.begin(), a.end());
    }
  r.sources = s;
  r.src_state = 2;
  return s;
}

std::set<std::string> function_analyzer::sources_of(const expr_tree& x, int n, int depth) {
  std::set<std::string> s;
  if (n < 0 || depth > 24) return s;
  const ex_node& k = x.at(n);
  switch (k.kind) {
    case ex_kind::subscript: {
      ptr_ref r;
      poly idx;
      if (resolve_subscript(x, n, r, idx)) s.insert(r.base);
      // Index expressions are addresses, not values.
      return s;
    }
    case ex_kind::unary:
      if (k.op == "*") {
        ptr_ref r = resolve_ptr(x, k.kids[0]);
        if (r.ok) s.insert(r.base);
        return s;
      }
      if (k.op == "&") return s;
      break;
    case ex_kind::ident: {
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) {
        const var_rec& v = vars_[static_cast<size_t>(b->second)];
        if (v.ptr == 0) {
          auto a = var_sources(b->second, depth + 1);
          s.insert(a.begin(), a.end());
          if (v.is_array && a.empty()) s.insert(v.key);
        }
      }
      return s;
    }
    case ex_kind::call: {
      std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
      if (is_ldg(name) && k.kids.size() >= 2) {
        ptr_ref r = resolve_ptr(x, k.kids[1]);
        if (r.ok) s.insert(r.base);
        return s;
      }
      for (size_t i = 1; i < k.kids.size(); ++i) {
        auto a = sources_of(x, k.kids[i], depth + 1);
        s.insert(a.begin(), a.end());
      }
      return s;
    }
    default:
      break;
  }
  for (int kid : k.kids) {
    auto a = sources_of(x, kid, depth + 1);
    s.insert(a.begin(), a.end());
  }
  return s;
}

// ---------------------------------------------------------------------------
// Pointers.

ptr_ref function_analyzer::var_ptr(int v, int depth) {
  const var_rec& r = vars_[static_cast<size_t>(v)];
  ptr_ref p;
  if (r.is_array) {
    p.ok = true;
    p.base = r.key;
    p.space = r.space;
    p.base_elem = p.elem = r.elem;
    p.var = v;
    return p;
  }
  if (r.ptr <= 0) return p;
  if (r.is_param) {
    p.ok = true;
    p.base = r.key;
    p.space = r.space;
    p.base_elem = p.elem = r.elem;
    p.var = v;
    return p;
  }
  if (r.has_init && r.init_tree && depth < 8) {
    ptr_ref a = resolve_ptr(*r.init_tree, r.init_node, depth + 1);
    if (a.ok) {
      if (r.elem.bytes > 0) a.elem = r.elem;
      if (r.assigns > 0) a.offset = poly::bad();
      return a;
    }
  }
  // A pointer of unknown origin: itself.
  p.ok = true;
  p.base = r.key;
  p.space = r.space == space_t::none ? space_t::unknown : r.space;
  p.base_elem = p.elem = r.elem;
  p.var = v;
  if (r.assigns > 0) p.offset = poly::bad();
  return p;
}

ptr_ref function_analyzer::resolve_ptr(const expr_tree& x, int n, int depth) {
  ptr_ref none;
  if (n < 0 || depth > 16) return none;
  const ex_node& k = x.at(n);
  switch (k.kind) {
    case ex_kind::ident: {
      auto b = binding_.find(k.toks.b);
      if (b != binding_.end()) return var_ptr(b->second, depth);
      auto fv = file_vars_.find(k.op);
      if (fv != file_vars_.end() && (fv->second.is_array || fv->second.ptr > 0)) {
        ptr_ref p;
        p.ok = true;
        p.base = fv->second.key;
        p.space = fv->second.space;
        p.base_elem = p.elem = fv->second.elem;
        return p;
      }
      return none;
    }
    case ex_kind::cast: {
      ptr_ref r = resolve_ptr(x, k.kids[0], depth + 1);
      if (!r.ok) return none;
      if (pointer_depth_of(k.type) == 0) return none;
      type_shape ts = shape_of_type(base_type_of(k.type));
      if (ts.bytes > 0) r.elem = ts;
      return r;
    }
    case ex_kind::binary: {
      if (k.op != "+" && k.op != "-") return none;
      ptr_ref r = resolve_ptr(x, k.kids[0], depth + 1);
      int int_side = k.kids[1];
      if (!r.ok && k.op == "+") {
        r = resolve_ptr(x, k.kids[1], depth + 1);
        int_side = k.kids[0];
      }
      if (!r.ok) return none;
      poly off = poly_of(x, int_side);
      int ratio = 1;
      if (r.elem.bytes > 0 && r.base_elem.bytes > 0 && r.elem.bytes % r.base_elem.bytes == 0)
        ratio = r.elem.bytes / r.base_elem.bytes;
      r.offset = add(r.offset, scale(off, ratio), k.op == "+" ? 1 : -1);
      return r;
    }
    case ex_kind::unary: {
      if (k.op == "&" && !k.kids.empty() && x.at(k.kids[0]).kind == ex_kind::subscript) {
        ptr_ref r;
        poly idx;
        if (!resolve_subscript(x, k.kids[0], r, idx, depth + 1)) return none;
        r.offset = idx;
        r.elem = r.base_elem;
        return r;
      }
      return none;
    }
    default:
      return none;
  }
}

bool function_analyzer::resolve_subscript(const expr_tree& x, int n, ptr_ref& r, poly& index,
                                          int depth) {
  std::vector<int> idx;
  int b = n;
  while (b >= 0 && x.at(b).kind == ex_kind::subscript) {
    idx.insert(idx.begin(), x.at(b).kids[1]);
    b = x.at(b).kids[0];
  }
  r = resolve_ptr(x, b, depth + 1);
  if (!r.ok) return false;
  const var_rec* v = r.var >= 0 ? &vars_[static_cast<size_t>(r.var)] : nullptr;
  if (!v) {
    auto fv = file_vars_.find(r.base);
    if (fv != file_vars_.end()) v = &fv->second;
  }
  poly lin;
  if (v && v->is_array && !v->dims.empty()) {
    auto dim = [&](size_t d) -> poly {
      if (d < v->dims.size() && v->dims[d] > 0) return poly::cst(v->dims[d]);
      return poly::atom("dim:" + v->key + ":" + std::to_string(d));
    };
    for (size_t i = 0; i < idx.size(); ++i) {
      if (i > 0) lin = mul(lin, dim(i));
      lin = add(lin, poly_of(x, idx[i]));
    }
    for (size_t i = idx.size(); i < v->dims.size(); ++i) lin = mul(lin, dim(i));
  } else {
    if (idx.size() != 1) return false;
    lin = poly_of(x, idx[0]);
  }
  int ratio = 1;
  if (r.elem.bytes > 0 && r.base_elem.bytes > 0 && r.elem.bytes % r.base_elem.bytes == 0)
    ratio = r.elem.bytes / r.base_elem.bytes;
  index = add(r.offset, scale(lin, ratio));
  return true;
}

int function_analyzer::record_access(const ptr_ref& r, const poly& index, bool read, bool write,
                                     bool atomic, bool wmma, int item, const expr_tree& x, int n,
                                     const std::string& target) {
  access_rec a;
  a.base = r.base;
  a.space = r.space;
  a.base_elem = r.base_elem;
  a.elem = r.elem;
  a.bytes = r.elem.bytes;
  int scalar_bytes = r.base_elem.lanes > 0 && r.base_elem.bytes > 0
                         ? r.base_elem.bytes / r.base_elem.lanes
                         : 0;
  a.width = scalar_bytes > 0 && r.elem.bytes >= scalar_bytes ? r.elem.bytes / scalar_bytes : 1;
  if (a.width < 1) a.width = 1;
  a.ratio = r.elem.bytes > 0 && r.base_elem.bytes > 0 && r.elem.bytes % r.base_elem.bytes == 0
                ? r.elem.bytes / r.base_elem.bytes
                : 1;
  a.index = index;
  a.read = read;
  a.write = write;
  a.atomic = atomic;
  a.wmma = wmma;
  a.item = item;
  a.loops = items_[static_cast<size_t>(item)].loops;
  a.x = &x;
  a.node = n;
  a.target = target;
  accesses_.push_back(std::move(a));
  return static_cast<int>(accesses_.size()) - 1;
}

// ---------------------------------------------------------------------------
// Pass 2: accesses, assignments, conditions and calls of every expression.

void function_analyzer::scan_ptr_int_cast(const expr_tree& x, int n) {
  if (n < 0) return;
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::cast && pointer_depth_of(k.type) == 0) {
    ptr_ref r = resolve_ptr(x, k.kids[0]);
    if (r.ok) ptr_int_check_ = true;
  }
  for (int kid : k.kids) scan_ptr_int_cast(x, kid);
}

void function_analyzer::visit_addr_arg(const expr_tree& x, int n, bool read, bool write,
                                       bool atomic, bool wmma, vctx& c) {
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::unary && k.op == "&" && !k.kids.empty() &&
      x.at(k.kids[0]).kind == ex_kind::subscript) {
    ptr_ref r;
    poly idx;
    int sub = k.kids[0];
    if (resolve_subscript(x, sub, r, idx)) {
      r.elem = r.base_elem;
      record_access(r, idx, read, write, atomic, wmma, c.item, x, n, c.target);
    }
    // The index expressions are read.
    int b = sub;
    while (x.at(b).kind == ex_kind::subscript) {
      visit(x, x.at(b).kids[1], use::read, c);
      b = x.at(b).kids[0];
    }
    return;
  }
  ptr_ref r = resolve_ptr(x, n);
  if (r.ok) {
    poly idx = r.offset;
    record_access(r, idx, read, write, atomic, wmma, c.item, x, n, c.target);
    // Visit the offset expressions for their own accesses.
    for (int kid : k.kids) visit(x, kid, use::addr, c);
    return;
  }
  visit(x, n, use::read, c);
}

void function_analyzer::visit(const expr_tree& x, int n, use u, vctx& c) {
  if (n < 0) return;
  const ex_node& k = x.at(n);
  switch (k.kind) {
    case ex_kind::binary: {
      const std::string& op = k.op;
      bool assign = op == "=" || op == "+=" || op == "-=" || op == "*=" || op == "/=" ||
                    op == "%=" || op == "&=" || op == "|=" || op == "^=" || op == "<<=" ||
                    op == ">>=";
      if (assign) {
        // The target of this statement: the base written by the LHS.
        std::string saved = c.target;
        int lhs = k.kids[0];
        while (x.at(lhs).kind == ex_kind::member) lhs = x.at(lhs).kids[0];
        size_t before = accesses_.size();
        visit(x, k.kids[0], op == "=" ? use::write : use::rmw, c);
        int lhs_access = -1;
        for (size_t i = before; i < accesses_.size(); ++i)
          if (accesses_[i].write) {
            lhs_access = static_cast<int>(i);
            break;
          }
        if (lhs_access >= 0) c.target = accesses_[static_cast<size_t>(lhs_access)].base;
        else {
          int v = lhs_var(x, k.kids[0]);
          c.target = v >= 0 ? vars_[static_cast<size_t>(v)].key : "";
        }
        // Fix up the targets of the LHS accesses themselves.
        for (size_t i = before; i < accesses_.size(); ++i) accesses_[i].target = c.target;
        visit(x, k.kids[1], use::read, c);
        assign_rec as;
        as.x = &x;
        as.node = n;
        as.lhs = k.kids[0];
        as.rhs = k.kids[1];
        as.op = op;
        as.var = lhs_var(x, k.kids[0]);
        as.access = lhs_access;
        as.item = c.item;
        as.loops = items_[static_cast<size_t>(c.item)].loops;
        assigns_.push_back(as);
        c.target = saved;
        return;
      }
      if (op == "%" || op == "&") scan_ptr_int_cast(x, k.kids[0]);
      visit(x, k.kids[0], use::read, c);
      visit(x, k.kids[1], use::read, c);
      return;
    }
    case ex_kind::unary: {
      if (k.kids.empty()) return;
      if (k.op == "*") {
        ptr_ref r = resolve_ptr(x, k.kids[0]);
        if (r.ok) {
          record_access(r, r.offset, u != use::write, u == use::write || u == use::rmw, false,
                        false, c.item, x, n, c.target);
          // Offsets inside the pointer expression are read.
          const ex_node& p = x.at(k.kids[0]);
          for (int kid : p.kids) visit(x, kid, use::addr, c);
          return;
        }
        visit(x, k.kids[0], use::read, c);
        return;
      }
      if (k.op == "&") {
        visit(x, k.kids[0], use::addr, c);
        return;
      }
      if (k.op == "++" || k.op == "--") {
        visit(x, k.kids[0], use::rmw, c);
        return;
      }
      visit(x, k.kids[0], use::read, c);
      return;
    }
    case ex_kind::postfix:
      if (!k.kids.empty()) visit(x, k.kids[0], use::rmw, c);
      return;
    case ex_kind::subscript: {
      ptr_ref r;
      poly idx;
      if (resolve_subscript(x, n, r, idx)) {
        if (u != use::addr)
          record_access(r, idx, u == use::read || u == use::rmw, u == use::write || u == use::rmw,
                        false, false, c.item, x, n, c.target);
        int b = n;
        while (x.at(b).kind == ex_kind::subscript) {
          vctx ic{c.item, c.target};
          visit(x, x.at(b).kids[1], use::read, ic);
          b = x.at(b).kids[0];
        }
        // A cast or pointer expression as the base may hold accesses of its own.
        if (x.at(b).kind != ex_kind::ident) visit(x, b, use::addr, c);
        return;
      }
      visit(x, k.kids[0], use::read, c);
      visit(x, k.kids[1], use::read, c);
      return;
    }
    case ex_kind::member:
      visit(x, k.kids[0], u, c);
      return;
    case ex_kind::cast:
      visit(x, k.kids[0], u, c);
      return;
    case ex_kind::ternary: {
      cond_rec cr;
      cr.x = &x;
      cr.node = k.kids[0];
      cr.kind = role_t::cond_ternary;
      cr.loops = items_[static_cast<size_t>(c.item)].loops;
      conds_.push_back(cr);
      visit(x, k.kids[0], use::read, c);
      visit(x, k.kids[1], u, c);
      visit(x, k.kids[2], u, c);
      return;
    }
    case ex_kind::call: {
      const ex_node& callee = x.at(k.kids[0]);
      std::string full = callee.kind == ex_kind::ident ? callee.op
                         : callee.kind == ex_kind::member ? callee.op
                                                          : "";
      std::string name = last_name(full);
      calls_.push_back({name, items_[static_cast<size_t>(c.item)].loops});
      if (name.find("align") != std::string::npos)
        for (size_t i = 1; i < k.kids.size(); ++i)
          if (resolve_ptr(x, k.kids[i]).ok) align_call_ = true;
      auto arg = [&](size_t i) { return i < k.kids.size() ? k.kids[i] : -1; };
      if (is_atomic(name) && k.kids.size() >= 2) {
        visit_addr_arg(x, arg(1), true, true, true, false, c);
        for (size_t i = 2; i < k.kids.size(); ++i) visit(x, k.kids[i], use::read, c);
        return;
      }
      if (is_ldg(name) && k.kids.size() >= 2) {
        visit_addr_arg(x, arg(1), true, false, false, false, c);
        return;
      }
      if (is_st_hint(name) && k.kids.size() >= 3) {
        visit_addr_arg(x, arg(1), false, true, false, false, c);
        visit(x, k.kids[2], use::read, c);
        return;
      }
      if (name == "load_matrix_sync" && k.kids.size() >= 3) {
        visit(x, k.kids[1], use::read, c);
        visit_addr_arg(x, arg(2), true, false, false, true, c);
        for (size_t i = 3; i < k.kids.size(); ++i) visit(x, k.kids[i], use::read, c);
        return;
      }
      if (name == "store_matrix_sync" && k.kids.size() >= 3) {
        std::string saved = c.target;
        ptr_ref r = resolve_ptr(x, k.kids[1]);
        if (r.ok) c.target = r.base;
        visit_addr_arg(x, arg(1), false, true, false, true, c);
        for (size_t i = 2; i < k.kids.size(); ++i) visit(x, k.kids[i], use::read, c);
        c.target = saved;
        return;
      }
      if ((name == "__pipeline_memcpy_async" || name == "memcpy_async" || name == "cp_async" ||
           name == "cp_async16" || name == "cp_async4") &&
          k.kids.size() >= 3) {
        std::string saved = c.target;
        ptr_ref dst = resolve_ptr(x, k.kids[1]);
        if (!dst.ok && x.at(k.kids[1]).kind == ex_kind::unary && x.at(k.kids[1]).op == "&") {
          poly idx;
          resolve_subscript(x, x.at(k.kids[1]).kids[0], dst, idx);
        }
        if (dst.ok) c.target = dst.base;
        visit_addr_arg(x, arg(1), false, true, false, false, c);
        visit_addr_arg(x, arg(2), true, false, false, false, c);
        for (size_t i = 3; i < k.kids.size(); ++i) visit(x, k.kids[i], use::read, c);
        c.target = saved;
        return;
      }
      if (callee.kind == ex_kind::member) visit(x, callee.kids[0], use::read, c);
      for (size_t i = 1; i < k.kids.size(); ++i) {
        const ex_node& a = x.at(k.kids[i]);
        // Pointers passed to other functions: their addresses are not accesses.
        if (a.kind == ex_kind::unary && a.op == "&") visit(x, k.kids[i], use::addr, c);
        else visit(x, k.kids[i], use::read, c);
      }
      return;
    }
    default:
      for (int kid : k.kids) visit(x, kid, use::read, c);
      return;
  }
}

// ---------------------------------------------------------------------------
// Derived facts.

long long function_analyzer::trip_of(int loop) const {
  return loops_[static_cast<size_t>(loop)].trip;
}

void function_analyzer::derive_loops() {
  for (auto& L : loops_) {
    if (L.var < 0) continue;
    // Step shape.
    if (L.step) {
      const ex_node& s = L.step->at(L.step->root);
      auto is_var = [&](int n) {
        if (n < 0) return false;
        const ex_node& q = L.step->at(n);
        if (q.kind != ex_kind::ident) return false;
        auto b = binding_.find(q.toks.b);
        return b != binding_.end() && b->second == L.var;
      };
      if ((s.kind == ex_kind::postfix || s.kind == ex_kind::unary) && !s.kids.empty() &&
          is_var(s.kids[0])) {
        L.step_const = s.op == "++" ? 1 : s.op == "--" ? -1 : 0;
      } else if (s.kind == ex_kind::binary && is_var(s.kids[0])) {
        auto c = const_eval(*L.step, s.kids[1]);
        if (s.op == "+=" || s.op == "-=") {
          if (c) L.step_const = s.op == "+=" ? *c : -*c;
        } else if ((s.op == ">>=" && c && *c >= 1) || (s.op == "/=" && c && *c >= 2) ||
                   (s.op == "<<=" && c && *c >= 1) || (s.op == "*=" && c && *c >= 2)) {
          L.tree = true;
        } else if (s.op == "=") {
          const ex_node& r = L.step->at(s.kids[1]);
          if (r.kind == ex_kind::binary && is_var(r.kids[0])) {
            auto c2 = const_eval(*L.step, r.kids[1]);
            if ((r.op == "/" || r.op == ">>" || r.op == "*" || r.op == "<<") && c2 &&
                ((r.op == "/" || r.op == "*") ? *c2 >= 2 : *c2 >= 1))
              L.tree = true;
            else if ((r.op == "+" || r.op == "-") && c2)
              L.step_const = r.op == "+" ? *c2 : -*c2;
          }
        }
      }
    }
  }
  // Thread-ness needs the tree flags (var_deps reads them): compute after the above.
  for (auto& L : loops_) {
    if (L.var < 0) continue;
    deps d = var_deps(L.var);
    L.thread_var = d.thread;
    if (L.step && L.thread_var) {
      deps s = deps_of(*L.step, L.step->root);
      if (s.grid) L.grid_stride = true;
    }
    // Trip count: init constant, condition var < / <= / > / >= constant, constant step.
    const var_rec& v = vars_[static_cast<size_t>(L.var)];
    std::optional<long long> init;
    if (v.loop_id == L.id && v.has_init && v.init_tree) init = const_eval(*v.init_tree, v.init_node);
    if (!init && L.init) {
      const ex_node& r = L.init->at(L.init->root);
      if (r.kind == ex_kind::binary && r.op == "=") init = const_eval(*L.init, r.kids[1]);
    }
    if (init && L.cond && L.step_const != 0) {
      const ex_node& c = L.cond->at(L.cond->root);
      if (c.kind == ex_kind::binary && c.kids.size() == 2) {
        const ex_node& l = L.cond->at(c.kids[0]);
        auto b = binding_.find(l.toks.b);
        if (l.kind == ex_kind::ident && b != binding_.end() && b->second == L.var) {
          auto bound = const_eval(*L.cond, c.kids[1]);
          // A bound that is a kernel parameter: its value in the resolved launch.
          const ex_node& rb = L.cond->at(c.kids[1]);
          if (!bound && launch_ && rb.kind == ex_kind::ident) {
            auto pb = binding_.find(rb.toks.b);
            if (pb != binding_.end() && vars_[static_cast<size_t>(pb->second)].is_param) {
              auto v = launch_->int_params.find(rb.op);
              if (v != launch_->int_params.end()) {
                bound = v->second;
                L.trip_from_launch = true;
              }
            }
          }
          if (bound) {
            long long a = *init, B = *bound, st = L.step_const;
            long long trip = -1;
            if (c.op == "<" && st > 0) trip = B > a ? (B - a + st - 1) / st : 0;
            else if (c.op == "<=" && st > 0) trip = B >= a ? (B - a) / st + 1 : 0;
            else if (c.op == ">" && st < 0) trip = a > B ? (a - B + (-st) - 1) / (-st) : 0;
            else if (c.op == ">=" && st < 0) trip = a >= B ? (a - B) / (-st) + 1 : 0;
            else if (c.op == "!=" && st != 0 && (B - a) % st == 0 && (B - a) / st >= 0)
              trip = (B - a) / st;
            L.trip = trip;
          }
        }
      }
    }
  }
}

std::set<std::string> function_analyzer::thread_atoms(const poly& p) const {
  std::set<std::string> s;
  for (auto& a : p.atoms()) {
    auto it = atom_deps_.find(a);
    if (it != atom_deps_.end() && it->second.thread) s.insert(a);
  }
  return s;
}

std::set<char> function_analyzer::block_dims(const poly& p) const {
  std::set<char> s;
  for (auto& a : p.atoms()) {
    auto it = atom_deps_.find(a);
    if (it != atom_deps_.end()) s.insert(it->second.bd.begin(), it->second.bd.end());
  }
  return s;
}

bool function_analyzer::window_var(const access_rec& a, int loop) const {
  const loop_rec& L = loops_[static_cast<size_t>(loop)];
  // A window slides one position at a time; a loop stepping by a tile (k0 += 32)
  // visits disjoint tiles even when its variable has the thread's stride.
  if (L.var < 0 || L.thread_var || L.tree || !a.index.ok) return false;
  if (L.step_const != 1 && L.step_const != -1) return false;
  std::string va = var_atom(L.var);
  if (!a.index.has(va)) return false;
  poly cv = a.index.coeff(va);
  if (cv.is_zero()) return false;
  for (auto& ta : thread_atoms(a.index)) {
    if (ta == va) continue;
    poly ct = a.index.coeff(ta);
    if (!ct.is_zero() && ct == cv) return true;
  }
  return false;
}

// The index with each reassigned, thread-derived variable (a grid-stride loop's `i`)
// replaced by its initial value: neighbouring threads then differ as in the first
// iteration, which is what decides whether two reads overlap across threads.
poly function_analyzer::anchored(const poly& p) {
  if (!p.ok) return p;
  poly r;
  for (auto& [m, c] : p.t) {
    poly term = poly::cst(c);
    for (auto& a : m) {
      poly f = poly::atom(a);
      size_t hash = a.rfind('#');
      if (hash != std::string::npos && a[0] != '(') {
        int v = std::atoi(a.c_str() + hash + 1);
        if (v >= 0 && static_cast<size_t>(v) < vars_.size()) {
          const var_rec& vr = vars_[static_cast<size_t>(v)];
          if (vr.key == a && vr.assigns > 0 && vr.has_init && vr.init_tree && var_deps(v).thread) {
            poly init = poly_of(*vr.init_tree, vr.init_node);
            if (init.ok) f = init;
          }
        }
      }
      term = mul(term, f);
    }
    r = add(r, term);
  }
  return r.ok ? r : p;
}

// Neighbours: reads of one array (same access width) whose indices differ by a small
// multiple (1 to 3) of the stride of a thread coordinate they share — stencil taps.
// Found by hashing the anchored indices, so that a kernel with hundreds of reads is
// analysed in linear time.
void function_analyzer::index_neighbours() {
  anch_.assign(accesses_.size(), poly::bad());
  anch_key_.assign(accesses_.size(), std::string());
  by_anch_.clear();
  for (size_t i = 0; i < accesses_.size(); ++i) {
    const access_rec& a = accesses_[i];
    if (!a.index.ok) continue;
    anch_[i] = anchored(a.index);
    if (!anch_[i].ok) continue;
    anch_key_[i] = a.base + "|" + std::to_string(a.width) + "|" + anch_[i].str();
    by_anch_[anch_key_[i]].push_back(i);
  }
}

std::vector<size_t> function_analyzer::neighbours_of(size_t i) {
  std::vector<size_t> out;
  const access_rec& a = accesses_[i];
  const poly& pa = anch_[i];
  if (!pa.ok || anch_key_[i].empty()) return out;
  for (auto& t : thread_atoms(pa)) {
    poly c = pa.coeff(t);
    if (c.is_zero() || !c.ok) continue;
    for (long long m = -3; m <= 3; ++m) {
      if (m == 0) continue;
      poly q = add(pa, scale(c, m));
      if (!q.ok) continue;
      auto it = by_anch_.find(a.base + "|" + std::to_string(a.width) + "|" + q.str());
      if (it == by_anch_.end()) continue;
      for (size_t j : it->second)
        if (j != i) out.push_back(j);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool function_analyzer::is_bounds_cmp(const expr_tree& x, int n) {
  const ex_node& k = x.at(n);
  if (k.kind != ex_kind::binary ||
      !(k.op == "<" || k.op == "<=" || k.op == ">" || k.op == ">="))
    return false;
  deps l = deps_of(x, k.kids[0]);
  deps r = deps_of(x, k.kids[1]);
  int tside, sside;
  if (l.thread && !r.thread) {
    tside = k.kids[0];
    sside = k.kids[1];
  } else if (r.thread && !l.thread) {
    tside = k.kids[1];
    sside = k.kids[0];
  } else {
    return false;
  }
  deps T = deps_of(x, tside), S = deps_of(x, sside);
  if (S.data || S.tree_loop || !S.loops.empty()) return false;
  if (T.data) return false;
  // A comparison with a constant, or with the block's own size (tid < blockDim.x / 2
  // picks half the block), guards a global index only.
  poly sp = poly_of(x, sside);
  bool constant = sp.is_const() || const_eval(x, sside).has_value();
  bool launch_only = sp.ok;
  for (auto& a : sp.atoms()) {
    // Every identifier of the atom must be blockDim/gridDim or a member after '.'.
    char prev = 0;
    for (size_t i = 0; i < a.size();) {
      char ch = a[i];
      if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
        size_t j = i;
        while (j < a.size() && (std::isalnum(static_cast<unsigned char>(a[j])) || a[j] == '_')) ++j;
        std::string word = a.substr(i, j - i);
        if (!(word == "blockDim" || word == "gridDim" || (prev == '.' && word.size() == 1)))
          launch_only = false;
        prev = 'a';
        i = j;
        continue;
      }
      if (ch != ' ') prev = ch;
      ++i;
    }
  }
  if ((constant || launch_only) && T.bd.empty()) return false;
  return true;
}

bool function_analyzer::cond_has_bounds(const expr_tree& x, int n) {
  if (n < 0) return false;
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::binary && (k.op == "&&" || k.op == "||"))
    return cond_has_bounds(x, k.kids[0]) || cond_has_bounds(x, k.kids[1]);
  if (k.kind == ex_kind::unary && k.op == "!" && !k.kids.empty()) return cond_has_bounds(x, k.kids[0]);
  return is_bounds_cmp(x, n);
}

bool function_analyzer::cond_divergent(const expr_tree& x, int n) {
  if (n < 0) return false;
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::binary && (k.op == "%" || k.op == "&")) {
    deps l = deps_of(x, k.kids[0]);
    if (l.lane && !l.data) {
      auto c = const_eval(x, k.kids[1]);
      if (!c) return true;
      if (k.op == "%" && *c != 0 && *c % 32 != 0) return true;
      if (k.op == "&" && *c >= 0 && *c < 31) return true;
    }
  }
  if (k.kind == ex_kind::binary &&
      (k.op == "<" || k.op == "<=" || k.op == ">" || k.op == ">=")) {
    deps l = deps_of(x, k.kids[0]);
    deps r = deps_of(x, k.kids[1]);
    auto lc = const_eval(x, k.kids[0]);
    auto rc = const_eval(x, k.kids[1]);
    auto check = [&](const deps& lv, const deps& other, std::optional<long long> oc) {
      if (!lv.lane || lv.data || other.lane) return false;
      if (oc) return *oc > 0 && *oc < 32;
      return lv.lane_index && !other.data;
    };
    if (check(l, r, rc) || check(r, l, lc)) return true;
  }
  for (int kid : k.kids)
    if (cond_divergent(x, kid)) return true;
  return false;
}

int function_analyzer::find_product(const expr_tree& x, int n, int& f1, int& f2) const {
  if (n < 0) return 0;
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::binary && k.op == "*") {
    f1 = k.kids[0];
    f2 = k.kids[1];
    return 1;
  }
  if (k.kind == ex_kind::call) {
    std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
    if ((name == "fmaf" || name == "fma" || name == "__fmaf_rn" || name == "__fmaf_rz" ||
         name == "__fma_rn" || name == "__hfma" || name == "__hfma2" || name == "__fmul_rn" ||
         name == "__hmul" || name == "__hmul2") &&
        k.kids.size() >= 3) {
      f1 = k.kids[1];
      f2 = k.kids[2];
      return 1;
    }
  }
  if (k.kind == ex_kind::binary && (k.op == "+" || k.op == "-"))
    return find_product(x, k.kids[0], f1, f2) || find_product(x, k.kids[1], f1, f2);
  if (k.kind == ex_kind::cast || (k.kind == ex_kind::unary && k.op == "-"))
    return find_product(x, k.kids[0], f1, f2);
  return 0;
}

function_analyzer::accumulation function_analyzer::accumulation_of(const assign_rec& as) {
  accumulation r;
  const expr_tree& x = *as.x;
  // Loop headers and loop variables (k0 += TILE) advance; they do not accumulate.
  if (as.item >= 0 && items_[static_cast<size_t>(as.item)].role == role_t::loop_step) return r;
  if (as.var >= 0 && vars_[static_cast<size_t>(as.var)].loop_id >= 0) return r;
  if (as.op == "+=" || as.op == "-=") {
    r.yes = true;
    find_product(x, as.rhs, r.f1, r.f2);
    return r;
  }
  if (as.op == "*=") {
    r.yes = true;
    return r;
  }
  if (as.op != "=") return r;
  // acc = acc + a*b, acc = fmaf(a, b, acc), m = fmaxf(m, v)
  std::string lhs_text = node_text(t_, x, as.lhs);
  std::function<bool(int)> mentions_lhs = [&](int n) -> bool {
    if (n < 0) return false;
    if (node_text(t_, x, n) == lhs_text) return true;
    const ex_node& k = x.at(n);
    if (k.kind == ex_kind::cast) return mentions_lhs(k.kids[0]);
    return false;
  };
  const ex_node& k = x.at(as.rhs);
  if (k.kind == ex_kind::binary && (k.op == "+" || k.op == "-")) {
    if (mentions_lhs(k.kids[0])) {
      r.yes = true;
      find_product(x, k.kids[1], r.f1, r.f2);
    } else if (k.op == "+" && mentions_lhs(k.kids[1])) {
      r.yes = true;
      find_product(x, k.kids[0], r.f1, r.f2);
    }
    return r;
  }
  if (k.kind == ex_kind::call) {
    std::string name = x.at(k.kids[0]).kind == ex_kind::ident ? last_name(x.at(k.kids[0]).op) : "";
    bool any = false;
    for (size_t i = 1; i < k.kids.size(); ++i)
      if (mentions_lhs(k.kids[i])) any = true;
    if (!any) return r;
    if ((name == "fmaf" || name == "fma" || name == "__fmaf_rn" || name == "__fmaf_rz" ||
         name == "__fma_rn" || name == "__hfma" || name == "__hfma2") &&
        k.kids.size() >= 4 && mentions_lhs(k.kids[3])) {
      r.yes = true;
      r.f1 = k.kids[1];
      r.f2 = k.kids[2];
      return r;
    }
    if (name == "fmaxf" || name == "fminf" || name == "max" || name == "min" ||
        name == "fmax" || name == "fmin" || name == "__hmax" || name == "__hmin" ||
        name == "__hadd" || name == "__hadd2" || name == "__fadd_rn") {
      r.yes = true;
      return r;
    }
  }
  return r;
}

unit_facts function_analyzer::run() {
  unit_facts uf;
  uf.name = f_.name;
  uf.is_kernel = f_.is_kernel;
  // Parameters.
  scopes_.emplace_back();
  for (auto& p : f_.params) {
    if (p.name.empty()) continue;
    var_rec v;
    v.name = p.name;
    v.key = p.name;
    v.type = p.base_type;
    v.ptr = p.pointer_depth;
    v.elem = shape_of_type(p.base_type);
    v.is_param = true;
    v.space = v.ptr > 0 ? (f_.is_kernel ? space_t::global : space_t::unknown) : space_t::none;
    int id = static_cast<int>(vars_.size());
    vars_.push_back(v);
    scopes_.back()[p.name] = id;
  }
  // Pass 1.
  std::vector<int> loops;
  std::vector<guard> guards;
  walk(f_.tree, loops, guards);
  scopes_.clear();
  derive_loops();
  // Pass 2.
  for (size_t i = 0; i < items_.size(); ++i) {
    item_rec& it = items_[i];
    vctx c{static_cast<int>(i), ""};
    if (it.role == role_t::decl_init && it.var >= 0) c.target = vars_[static_cast<size_t>(it.var)].key;
    visit(*it.x, it.x->root, use::read, c);
    if (it.role == role_t::cond_if || it.role == role_t::cond_while ||
        it.role == role_t::cond_for || it.role == role_t::cond_switch) {
      cond_rec cr;
      cr.x = it.x;
      cr.node = it.x->root;
      cr.kind = it.role;
      cr.loops = it.loops;
      conds_.push_back(cr);
    }
  }
  // Declarations of pointer variables initialised from a global pointer are values,
  // not accesses; nothing to do. Decl inits that are reads were visited above.

  auto in_loop = [](const std::vector<int>& ls, int id) {
    return std::find(ls.begin(), ls.end(), id) != ls.end();
  };

  index_neighbours();
  auto index_of = [&](const access_rec* a) { return static_cast<size_t>(a - accesses_.data()); };

  // ---- simple facts
  for (auto& a : accesses_) {
    if (a.space == space_t::global && a.write && !a.atomic) uf.global_write = true;
    if (a.space == space_t::shared) uf.shared_used = true;
  }
  for (auto& v : vars_)
    if (v.space == space_t::shared) uf.shared_used = true;

  // Calls: shuffles, atomics, reduce intrinsics, mma.
  std::set<int> mma_loops;
  for (auto& cl : calls_) {
    if (is_reducing_shuffle(cl.name) || cl.name.rfind("__reduce_", 0) == 0 ||
        cl.name == "reduce" || is_accumulating_atomic(cl.name))
      uf.cross_thread_reduction = true;
    if (cl.name == "mma_sync")
      for (int l : cl.loops) mma_loops.insert(l);
  }

  // Shared-memory tree: a store to shared S that combines a value of S read at another
  // index (s[tid] += s[tid + k]; temp[bi] += temp[ai]), directly or through a local
  // (float t = temp[ai]; ...; temp[bi] += t). A plain copy between elements is not.
  for (auto& as : assigns_) {
    if (as.access < 0) continue;
    const access_rec& w = accesses_[static_cast<size_t>(as.access)];
    if (w.space != space_t::shared) continue;
    int r = as.rhs;
    while (r >= 0 && as.x->at(r).kind == ex_kind::cast) r = as.x->at(r).kids[0];
    bool combines = as.op != "=" || (r >= 0 && as.x->at(r).kind != ex_kind::subscript);
    if (!combines) continue;
    bool other = false, direct = false;
    for (auto& a : accesses_) {
      if (a.x != as.x || &a == &w || !a.read || a.base != w.base) continue;
      direct = true;
      if (!(a.index == w.index)) other = true;
    }
    if (!other && !direct) {
      auto srcs = sources_of(*as.x, as.rhs);
      if (srcs.count(w.base)) other = true;
    }
    if (other) uf.cross_thread_reduction = true;
  }

  // ---- irregular: data-dependent indices
  for (auto& a : accesses_) {
    if (a.space != space_t::global && a.space != space_t::shared) continue;
    if (!a.index.ok) continue;
    for (auto& at : a.index.atoms()) {
      auto it = atom_deps_.find(at);
      if (it != atom_deps_.end() && it->second.data) uf.irregular = true;
    }
  }

  // ---- loops: grid stride, unrolling
  for (auto& L : loops_) {
    if (L.grid_stride) uf.grid_stride = true;
    bool pragma = !L.pragma.empty() && L.pragma != "unroll 1";
    bool manual = false;
    if (!pragma && L.var >= 0 && L.step_const != 1 && L.step_const != -1 && !L.tree) {
      // Accesses of one base at var + 0, 1, ..., U-1 (U >= 2) in the body, and a step
      // of at least U (or a run-time stride): the body was unrolled by hand.
      std::string va = var_atom(L.var);
      // Stores at consecutive offsets qualify with any step; loads (a stencil reads
      // neighbours too) only with a constant step covering them.
      std::map<std::string, std::set<long long>> offsets;  // w/r + base + rest → offsets
      for (auto& a : accesses_) {
        if (!in_loop(a.loops, L.id) || !a.index.ok || !a.index.has(va)) continue;
        poly rest = a.index;
        rest.t.erase(monomial{});
        offsets[(a.write ? "w|" : "r|") + a.base + "|" + rest.str()].insert(a.index.cval());
      }
      for (auto& [k, offs] : offsets) {
        bool store = k[0] == 'w';
        long long run = 1, best = 1;
        long long prev = 0;
        bool first = true;
        for (long long o : offs) {
          run = (!first && o == prev + 1) ? run + 1 : 1;
          best = std::max(best, run);
          prev = o;
          first = false;
        }
        if (best >= 2 && ((store && (L.step_const == 0 || L.step_const >= best)) ||
                          (!store && L.step_const >= best)))
          manual = true;
      }
    }
    if (pragma || manual) ++uf.unrolled;
  }
  // while-loop grid strides: i += stride inside the loop, i thread-derived, stride grid.
  for (auto& as : assigns_) {
    if (as.op != "+=" || as.var < 0 || as.loops.empty()) continue;
    const loop_rec& L = loops_[static_cast<size_t>(as.loops.back())];
    if (L.kind != st_kind::while_loop && L.kind != st_kind::do_loop) continue;
    if (var_deps(as.var).thread && deps_of(*as.x, as.rhs).grid) uf.grid_stride = true;
  }

  // ---- conditions
  for (auto& c : conds_) {
    if (cond_has_bounds(*c.x, c.node)) uf.bounds_check = true;
    // Loop conditions and conditional expressions (which compile to selects) are not
    // counted as divergent branches.
    if (c.kind != role_t::cond_for && c.kind != role_t::cond_ternary &&
        cond_divergent(*c.x, c.node))
      ++uf.divergent;
  }

  // ---- vector accesses
  std::map<std::string, int> widest;  // base → widest width
  for (auto& a : accesses_) {
    if (a.space != space_t::global) continue;
    if (a.width > 1) {
      uf.vector_access = true;
      uf.vector_width = std::max(uf.vector_width, a.width);
      if (a.bytes >= 8) {
        if (a.read && !a.wmma) uf.vector_load = true;
        if (a.write && !a.wmma) uf.vector_store = true;
      }
    }
    widest[a.base] = std::max(widest[a.base], a.width);
  }

  // ---- accumulations, k-loops, serial reductions
  struct kl {
    int loop;
    std::string p, q;  // operand bases
  };
  std::vector<kl> kloops;
  for (auto& L : loops_) {
    if (L.var < 0 || L.grid_stride || L.tree) continue;
    std::string va = var_atom(L.var);
    // Reads in the loop indexed by its variable.
    std::map<std::string, std::vector<const access_rec*>> kreads;
    bool window = false;
    for (auto& a : accesses_) {
      if (!a.read || !in_loop(a.loops, L.id) || !a.index.ok || !a.index.has(va)) continue;
      if (a.space != space_t::global && a.space != space_t::shared && a.space != space_t::unknown)
        continue;
      if (window_var(a, L.id)) window = true;
      kreads[a.base].push_back(&a);
    }
    bool product = false;
    for (auto& as : assigns_) {
      if (!in_loop(as.loops, L.id)) continue;
      accumulation acc = accumulation_of(as);
      if (!acc.yes) continue;
      // Serial reduction: into a local, from data read with the loop variable, over a
      // loop of run-time length (a 2x2 pooling window is not a reduction structure).
      bool local_lhs = as.var >= 0 && vars_[static_cast<size_t>(as.var)].space != space_t::shared;
      if (local_lhs && (L.trip < 0 || L.trip_from_launch || L.trip > 32)) {
        auto s = sources_of(*as.x, as.rhs);
        for (auto& b : s)
          if (kreads.count(b)) uf.serial_reduction = true;
      }
      if (acc.f1 < 0) continue;
      auto s1 = sources_of(*as.x, acc.f1);
      auto s2 = sources_of(*as.x, acc.f2);
      std::set<std::string> u = s1;
      u.insert(s2.begin(), s2.end());
      if (!s1.empty() && !s2.empty() && u.size() >= 2) product = true;
    }
    // WMMA: fragment loads (already among the reads) and mma_sync in the loop.
    bool wmma_loop = mma_loops.count(L.id) > 0;
    if (!window && kreads.size() >= 2 && (product || wmma_loop)) {
      uf.k_loop = true;
      // GEMM-like: two operands whose thread atoms are incomparable.
      std::vector<std::pair<std::string, std::set<std::string>>> ops;
      for (auto& [b, list] : kreads) {
        std::set<std::string> ta;
        for (auto* a : list) {
          auto s = thread_atoms(a->index);
          ta.insert(s.begin(), s.end());
        }
        ops.push_back({b, ta});
      }
      for (size_t i = 0; i < ops.size(); ++i)
        for (size_t j = i + 1; j < ops.size(); ++j) {
          auto& A = ops[i].second;
          auto& B = ops[j].second;
          bool a_in_b = std::includes(B.begin(), B.end(), A.begin(), A.end());
          bool b_in_a = std::includes(A.begin(), A.end(), B.begin(), B.end());
          if (!a_in_b && !b_in_a) {
            bool dup = false;
            for (auto& k : kloops)
              if (k.loop == L.id) dup = true;
            if (!dup) kloops.push_back({L.id, ops[i].first, ops[j].first});
          }
        }
    }
  }

  // Staging: shared arrays stored from global reads.
  std::map<std::string, std::set<std::string>> staged_from;  // shared base → global bases
  std::map<std::string, std::vector<const access_rec*>> staging_reads;  // global base → reads feeding shared
  for (auto& a : accesses_) {
    if (a.space != space_t::global || !a.read || a.target.empty()) continue;
    // The target is a shared array?
    for (auto& b : accesses_)
      if (b.base == a.target && b.space == space_t::shared && b.write) {
        staged_from[a.target].insert(a.base);
        staging_reads[a.base].push_back(&a);
        break;
      }
  }
  // Staging through a local: float v = A[...]; As[...] = v;
  for (auto& as : assigns_) {
    if (as.access < 0) continue;
    const access_rec& w = accesses_[static_cast<size_t>(as.access)];
    if (w.space != space_t::shared) continue;
    // Every global read of a source array counts as staging (the value's path through
    // locals is not tracked read by read).
    for (auto& b : sources_of(*as.x, as.rhs)) {
      for (auto& a : accesses_)
        if (a.base == b && a.space == space_t::global && a.read) {
          staged_from[w.base].insert(b);
          auto& list = staging_reads[b];
          if (std::find(list.begin(), list.end(), &a) == list.end()) list.push_back(&a);
        }
    }
  }
  for (auto& a : accesses_)
    if (a.wmma && a.read && a.space == space_t::global) staging_reads[a.base].push_back(&a);

  // ---- shared tiles: a staged shared array read in a loop that accumulates.
  for (auto& [s, from] : staged_from) {
    if (from.empty()) continue;
    bool tile = false;
    std::vector<const access_rec*> reads;
    for (auto& a : accesses_)
      if (a.base == s && a.read && a.target != s) reads.push_back(&a);
    for (auto* r : reads) {
      for (int l : r->loops) {
        const loop_rec& L = loops_[static_cast<size_t>(l)];
        if (L.tree || L.thread_var) continue;
        for (auto& as : assigns_) {
          if (!in_loop(as.loops, l)) continue;
          if (as.access >= 0 && accesses_[static_cast<size_t>(as.access)].base == s) continue;
          if (accumulation_of(as).yes) tile = true;
        }
      }
    }
    // Neighbour reuse without a loop: one read with two or more neighbours (3+ taps).
    if (!tile) {
      for (auto* r : reads) {
        std::set<std::string> raws{r->index.str()};
        for (size_t j : neighbours_of(index_of(r))) {
          const access_rec& o = accesses_[j];
          if (o.read && o.target != s) raws.insert(o.index.str());
        }
        if (raws.size() >= 3) tile = true;
      }
    }
    if (tile) uf.shared_tiles = true;
  }

  // ---- stencil / convolution
  auto stencil_read = [&](const access_rec& a) {
    return a.read && !a.atomic && a.target != a.base && a.index.ok &&
           (a.space == space_t::global || a.space == space_t::shared);
  };
  for (auto& a : accesses_) {
    if (!stencil_read(a)) continue;
    for (int l : a.loops)
      if (window_var(a, l)) uf.stencil = true;
  }
  // Constant-offset taps: an anchor read with at least two neighbours (3+ taps; two
  // adjacent reads such as CSR's ptr[i] and ptr[i + 1] are not a stencil).
  // Taps chain: the neighbours of neighbours belong to the same stencil.
  disjoint_sets taps_sets(accesses_.size());
  for (size_t i = 0; i < accesses_.size(); ++i) {
    if (!stencil_read(accesses_[i])) continue;
    for (size_t j : neighbours_of(i))
      if (stencil_read(accesses_[j])) taps_sets.unite(i, j);
  }
  std::map<size_t, std::set<std::string>> tap_raws;  // component → distinct indices
  for (size_t i = 0; i < accesses_.size(); ++i)
    if (stencil_read(accesses_[i])) tap_raws[taps_sets.find(i)].insert(accesses_[i].index.str());
  for (auto& [root, raws] : tap_raws)
    if (raws.size() >= 3) uf.stencil = true;

  // ---- GEMM classification
  for (auto& k : kloops) {
    uf.gemm_like = true;
    auto space_of = [&](const std::string& b) {
      for (auto& a : accesses_)
        if (a.base == b) return a.space;
      return space_t::unknown;
    };
    bool wmma = false;
    for (auto& a : accesses_)
      if (a.wmma && (a.base == k.p || a.base == k.q)) wmma = true;
    bool staged_operand = false;
    for (auto& [g, reads] : staging_reads)
      if (g == k.p || g == k.q)
        for (auto* r : reads)
          if (in_loop(r->loops, k.loop)) staged_operand = true;
    if (space_of(k.p) == space_t::global && space_of(k.q) == space_t::global && !wmma &&
        !staged_operand)
      uf.naive_gemm = true;
    auto half_base = [&](const std::string& b) {
      for (auto& a : accesses_)
        if (a.base == b && (a.base_elem.scalar == "half" || a.base_elem.scalar == "bfloat16"))
          return true;
      auto sf = staged_from.find(b);
      if (sf == staged_from.end()) return false;
      for (auto& g : sf->second)
        for (auto& a : accesses_)
          if (a.base == g && (a.base_elem.scalar == "half" || a.base_elem.scalar == "bfloat16"))
            return true;
      return false;
    };
    if (half_base(k.p) || half_base(k.q)) uf.half_operands = true;
  }
  if (uf.naive_gemm) {
    // Any k-loop staged through shared memory makes it a tiled GEMM.
    for (auto& k : kloops) {
      auto sp = [&](const std::string& b) {
        for (auto& a : accesses_)
          if (a.base == b) return a.space;
        return space_t::unknown;
      };
      if (sp(k.p) == space_t::shared || sp(k.q) == space_t::shared) uf.naive_gemm = false;
    }
  }

  // ---- tail handling and alignment checks
  if (uf.vector_access) {
    for (auto& a : accesses_)
      if (a.space == space_t::global && a.width == 1 && widest[a.base] > 1) uf.tail = true;
    bool size_check = false;
    int w = uf.vector_width;
    for (auto& c : conds_) {
      std::function<void(int)> scan = [&](int n) {
        if (n < 0) return;
        const ex_node& k = c.x->at(n);
        if (k.kind == ex_kind::binary && (k.op == "%" || k.op == "&")) {
          auto v = const_eval(*c.x, k.kids[1]);
          if (v && ((k.op == "%" && (*v == w || *v == 16 || *v == 8)) ||
                    (k.op == "&" && (*v == w - 1 || *v == 15 || *v == 7))))
            size_check = true;
        }
        for (int kid : k.kids) scan(kid);
      };
      scan(c.node);
    }
    uf.align_checked = ptr_int_check_ || align_call_ || (size_check && uf.tail);
  } else if (uf.shared_tiles) {
    for (auto& [g, reads] : staging_reads)
      for (auto* a : reads) {
        const item_rec& it = items_[static_cast<size_t>(a->item)];
        for (auto& gd : it.guards)
          if (cond_has_bounds(*gd.x, gd.node)) uf.tail = true;
      }
    for (auto& c : conds_) {
      // A ternary guarding a staging load.
      if (!cond_has_bounds(*c.x, c.node)) continue;
      for (auto& [g, reads] : staging_reads)
        for (auto* a : reads)
          if (a->x == c.x) uf.tail = true;
    }
  } else {
    uf.tail = uf.bounds_check;
  }

  // ---- local arrays indexed at run time
  for (auto& v : vars_) {
    if (!v.is_array || v.space != space_t::local) continue;
    bool dynamic = false;
    for (auto& a : accesses_) {
      if (a.base != v.key || !a.index.ok) {
        if (a.base == v.key) dynamic = true;
        continue;
      }
      for (auto& at : a.index.atoms()) {
        if (at.rfind("dim:", 0) == 0) continue;
        auto it = atom_deps_.find(at);
        if (it == atom_deps_.end()) {
          dynamic = true;
          continue;
        }
        const deps& d = it->second;
        if (d.thread || d.data) dynamic = true;
        for (int l : d.loops) {
          const loop_rec& L = loops_[static_cast<size_t>(l)];
          bool unrolled = L.pragma != "unroll 1" && L.trip >= 0 && !L.trip_from_launch &&
                          (!L.pragma.empty() || L.trip <= 32);
          if (!unrolled) dynamic = true;
        }
        if (d.loops.empty() && !d.thread && !d.data) {
          // A loop variable of an unrolled loop appears as itself: check its loop.
          for (auto& L : loops_)
            if (L.var >= 0 && var_atom(L.var) == at) {
              bool unrolled = L.pragma != "unroll 1" && L.trip >= 0 && !L.trip_from_launch &&
                          (!L.pragma.empty() || L.trip <= 32);
              if (!unrolled) dynamic = true;
            }
        }
      }
    }
    if (dynamic) {
      long long n = 1;
      bool known = true;
      for (long long d : v.dims) {
        if (d <= 0) known = false;
        else n *= d;
      }
      if (known && v.elem.bytes > 0) uf.local_array_bytes += n * v.elem.bytes;
    }
  }

  // ---- pointwise
  {
    bool ok = !uf.cross_thread_reduction && !uf.shared_used && !uf.k_loop && !uf.stencil &&
              !uf.irregular && !uf.serial_reduction;
    std::vector<const access_rec*> writes, reads;
    for (auto& a : accesses_) {
      if (a.space != space_t::global) continue;
      if (a.atomic || !a.index.ok) {
        ok = false;
        continue;
      }
      if (a.write) writes.push_back(&a);
      if (a.read) reads.push_back(&a);
    }
    if (writes.empty() && f_.is_kernel) ok = false;
    for (auto* w : writes)
      if (!deps_of(*w->x, w->node).thread && thread_atoms(w->index).empty()) ok = false;
    for (auto* r : reads) {
      if (!ok) break;
      bool matched = false;
      auto rt = thread_atoms(r->index);
      bool loop_free = true;
      for (auto& at : r->index.atoms()) {
        auto it = atom_deps_.find(at);
        if (it != atom_deps_.end() && !it->second.loops.empty()) loop_free = false;
      }
      for (auto* w : writes) {
        if (r->index == w->index && r->ratio == w->ratio) matched = true;
        auto wt = thread_atoms(w->index);
        bool strict_subset = rt.size() < wt.size() &&
                             std::includes(wt.begin(), wt.end(), rt.begin(), rt.end());
        if (strict_subset && loop_free) matched = true;
      }
      if (!matched) ok = false;
    }
    uf.pointwise = ok;
  }

  // ---- reuse
  {
    // Output dimensions and per-block extents (from the writes).
    std::set<char> out_dims;
    std::vector<const access_rec*> gwrites;
    for (auto& a : accesses_)
      if (a.space == space_t::global && a.write && a.index.ok) {
        gwrites.push_back(&a);
        auto bd = block_dims(a.index);
        out_dims.insert(bd.begin(), bd.end());
      }
    std::map<std::string, long long> numeric;
    for (int d = 0; d < 3; ++d) {
      std::string dn(1, "xyz"[d]);
      long long bd = launch_ && launch_->block[d] > 0 ? launch_->block[d] : 0;
      if (bd > 0) numeric["blockDim." + dn] = bd;
    }
    // Only blockDim is substituted: with the sizes symbolic, a coefficient of another
    // dimension (N for a row) cannot divide the block's coefficient by accident.
    // Without a launch, a 2-D shared tile [Y][X] suggests the block's shape.
    for (auto& v : vars_) {
      if (v.space != space_t::shared || v.dims.size() != 2 || v.dims[0] <= 0 || v.dims[1] <= 0)
        continue;
      if (!numeric.count("blockDim.x") && v.dims[0] == v.dims[1]) {
        numeric["blockDim.x"] = v.dims[1];
        numeric["blockDim.y"] = v.dims[0];
      }
      break;
    }
    auto block_extent = [&](char d) -> long long {
      std::string b = std::string("blockIdx.") + d;
      long long best = 0;
      for (auto* w : gwrites) {
        poly idx = substitute(w->index, numeric);
        if (!idx.has(b)) continue;
        poly cb = idx.coeff(b);
        for (auto& at : idx.atoms()) {
          if (at == b) continue;
          auto it = atom_deps_.find(at);
          bool sub_block = false;
          if (it != atom_deps_.end()) {
            const deps& dd = it->second;
            sub_block = (dd.thread && dd.bd.empty()) || !dd.loops.empty();
          }
          if (!sub_block) continue;
          poly ca = idx.coeff(at);
          long long m = 0;
          if (multiple_of(cb, ca, m) && m > best) best = m;
        }
      }
      return best;
    };
    auto extent = [&](char d) -> double {
      int di = d - 'x';
      if (launch_ && launch_->grid[di] > 0) {
        long long m = block_extent(d);
        if (m <= 0) m = launch_->block[di] > 0 ? launch_->block[di] : 1;
        return static_cast<double>(launch_->grid[di]) * static_cast<double>(m);
      }
      return nominal_;
    };
    double reuse = 1;
    if (!kloops.empty()) {
      for (auto& k : kloops) {
        double sum = 0;
        int count = 0;
        for (const std::string& op : {k.p, k.q}) {
          // Global reads of this operand: direct, or the reads staged into it.
          std::vector<const access_rec*> sites;
          bool staged = false;
          bool frag = false;
          for (auto& a : accesses_)
            if (a.base == op && a.read && a.space == space_t::global) {
              sites.push_back(&a);
              if (a.wmma) frag = true;
            }
          auto sf = staged_from.find(op);
          if (sites.empty() || (!frag && sf != staged_from.end() && !sf->second.empty())) {
            if (sf != staged_from.end())
              for (auto& g : sf->second) {
                auto sr = staging_reads.find(g);
                if (sr != staging_reads.end())
                  for (auto* r : sr->second) sites.push_back(r);
              }
            staged = true;
          }
          if (frag) staged = true;
          double best = 0;
          for (auto* s : sites) {
            bool site_staged = staged || s->wmma;
            for (auto& [g, reads] : staging_reads)
              for (auto* r : reads)
                if (r == s) site_staged = true;
            auto bd = block_dims(s->index);
            double r = 1;
            bool any = false;
            for (char d : out_dims) {
              if (bd.count(d)) continue;
              any = true;
              double e = extent(d);
              if (site_staged) {
                long long m = s->wmma ? 16 : block_extent(d);
                if (m <= 0) m = 16;
                r *= std::max(1.0, e / static_cast<double>(m));
              } else {
                r *= e;
              }
            }
            if (!any) r = site_staged ? std::max(1.0, nominal_ / 16.0) : nominal_;
            // Without sizes, one nominal extent bounds an operand's reuse (a conv
            // weight misses three output dimensions; 1024^3 would say nothing more).
            if (!launch_) r = std::min(r, nominal_);
            best = std::max(best, r);
          }
          if (best > 0) {
            sum += best;
            ++count;
          }
        }
        if (count > 0) reuse = std::max(reuse, sum / count);
      }
    } else {
      // Re-reads: neighbours (stencil taps, window loops) and passes over the same data.
      std::map<std::string, std::vector<const access_rec*>> by_base;
      for (auto& a : accesses_)
        if (a.space == space_t::global && a.read && !a.atomic) by_base[a.base].push_back(&a);
      std::set<std::string> write_atoms;
      for (auto* w : gwrites) {
        auto s = thread_atoms(w->index);
        write_atoms.insert(s.begin(), s.end());
      }
      // Variables a loop (re)initialises: each such loop is a new pass over its range.
      std::set<std::string> fresh_loop_atoms;
      for (auto& L : loops_)
        if (L.var >= 0 && (vars_[static_cast<size_t>(L.var)].loop_id == L.id || L.init != nullptr))
          fresh_loop_atoms.insert(var_atom(L.var));
      auto canonical = [&](const access_rec& a) {
        // The index with the fresh loop variables renamed alike.
        poly p;
        p.ok = a.index.ok;
        for (auto& [m, c] : a.index.t) {
          monomial mm;
          for (auto& at : m) mm.push_back(fresh_loop_atoms.count(at) ? std::string("@loop") : at);
          std::sort(mm.begin(), mm.end());
          p.t[mm] += c;
        }
        return p.str() + "/" + std::to_string(a.ratio);
      };
      std::set<const access_rec*> staged_set;
      for (auto& [g, reads] : staging_reads) staged_set.insert(reads.begin(), reads.end());
      for (auto& [b, sites] : by_base) {
        // Broadcast operands (indexed by fewer thread atoms than the output) do not count.
        bool broadcast = !write_atoms.empty();
        for (auto* s : sites) {
          auto ta = thread_atoms(s->index);
          bool strict = ta.size() < write_atoms.size() &&
                        std::includes(write_atoms.begin(), write_atoms.end(), ta.begin(), ta.end());
          if (!strict) broadcast = false;
        }
        if (broadcast) continue;
        auto taps = [&](const access_rec& a) {
          double t = 1;
          for (int l : a.loops)
            if (window_var(a, l)) {
              long long tr = trip_of(l);
              t *= tr > 0 ? static_cast<double>(tr) : 3.0;
            }
          return t;
        };
        const size_t n = sites.size();
        std::map<size_t, size_t> local;  // access index → site index
        for (size_t i = 0; i < n; ++i) local[index_of(sites[i])] = i;
        std::vector<std::string> raw(n), canon(n);
        for (size_t i = 0; i < n; ++i) {
          raw[i] = sites[i]->index.str() + "/" + std::to_string(sites[i]->ratio);
          canon[i] = canonical(*sites[i]);
        }
        // Stencil taps: neighbour components of three or more distinct reads (reads
        // that stage a shared tile are loaded once each and do not count).
        disjoint_sets nb(n);
        for (size_t i = 0; i < n; ++i) {
          if (staged_set.count(sites[i])) continue;
          for (size_t j : neighbours_of(index_of(sites[i]))) {
            auto it = local.find(j);
            if (it != local.end() && !staged_set.count(sites[it->second])) nb.unite(i, it->second);
          }
        }
        std::map<size_t, std::set<std::string>> nb_raws;
        for (size_t i = 0; i < n; ++i) nb_raws[nb.find(i)].insert(raw[i]);
        // Groups: taps of one stencil, and passes over the same elements.
        disjoint_sets groups(n);
        std::map<std::string, size_t> first_canon;
        for (size_t i = 0; i < n; ++i) {
          auto [it, fresh] = first_canon.emplace(canon[i], i);
          if (!fresh) groups.unite(i, it->second);
          if (nb_raws[nb.find(i)].size() >= 3) groups.unite(i, nb.find(i));
        }
        // Reads with the same raw index are one read (the compiler keeps the value, or
        // a variable continues where the previous loop left it).
        std::map<size_t, std::map<std::string, double>> group_taps;
        for (size_t i = 0; i < n; ++i) {
          double& t = group_taps[groups.find(i)][raw[i]];
          t = std::max(t, taps(*sites[i]));
        }
        for (auto& [root, per_raw] : group_taps) {
          double total = 0;
          for (auto& [k, t] : per_raw) total += t;
          reuse = std::max(reuse, total);
        }
      }
    }
    uf.reuse = std::round(reuse * 100.0) / 100.0;
  }
  return uf;
}

// ===========================================================================
// File-level constants and variables.

void collect_constants(const parsed_source& ps, std::map<std::string, long long>& out) {
  // #define NAME expr, evaluated in order with what is known so far (several rounds
  // for macros that refer to later ones).
  for (int round = 0; round < 4; ++round) {
    for (auto& [name, toks] : ps.lex.defines) {
      if (out.count(name) || toks.empty()) continue;
      expr_tree x = parse_expression(toks, 0, toks.size());
      // A tiny evaluator over the define's own tokens.
      std::function<std::optional<long long>(int, int)> ev = [&](int n, int depth) -> std::optional<long long> {
        if (n < 0 || depth > 32) return std::nullopt;
        const ex_node& k = x.at(n);
        switch (k.kind) {
          case ex_kind::number:
            if (k.is_int) return k.ival;
            return std::nullopt;
          case ex_kind::ident: {
            auto it = out.find(k.op);
            if (it != out.end()) return it->second;
            return std::nullopt;
          }
          case ex_kind::cast:
            return ev(k.kids[0], depth + 1);
          case ex_kind::unary: {
            if (k.kids.empty()) return std::nullopt;
            auto a = ev(k.kids[0], depth + 1);
            if (!a) return std::nullopt;
            if (k.op == "-") return -*a;
            if (k.op == "+") return *a;
            return std::nullopt;
          }
          case ex_kind::binary: {
            auto a = ev(k.kids[0], depth + 1), b = ev(k.kids[1], depth + 1);
            if (!a || !b || std::llabs(*a) > (1LL << 40) || std::llabs(*b) > (1LL << 40)) return std::nullopt;
            if (k.op == "+") return *a + *b;
            if (k.op == "-") return *a - *b;
            if (k.op == "*") return *a * *b;
            if (k.op == "/" && *b != 0) return *a / *b;
            if (k.op == "%" && *b != 0) return *a % *b;
            if (k.op == "<<" && *b >= 0 && *b < 40) return *a << *b;
            if (k.op == ">>" && *b >= 0 && *b < 63) return *a >> *b;
            return std::nullopt;
          }
          default:
            return std::nullopt;
        }
      };
      auto v = ev(x.root, 0);
      if (v) out[name] = *v;
    }
  }
  // File-scope constexpr / const integers and enumerators.
  for (auto& d : ps.file_scope) {
    if (!(d.has_qual("constexpr") || d.has_qual("const"))) continue;
    for (auto& it : d.items) {
      if (!it.has_init || !it.dims.empty() || it.pointer_depth > 0) continue;
      expr_tree x = parse_expression(ps.lex.tokens, it.init.b, it.init.e);
      std::function<std::optional<long long>(int)> ev = [&](int n) -> std::optional<long long> {
        if (n < 0) return std::nullopt;
        const ex_node& k = x.at(n);
        if (k.kind == ex_kind::number) return k.is_int ? std::optional<long long>(k.ival) : std::nullopt;
        if (k.kind == ex_kind::ident) {
          auto f = out.find(k.op);
          return f == out.end() ? std::nullopt : std::optional<long long>(f->second);
        }
        if (k.kind == ex_kind::cast) return ev(k.kids[0]);
        if (k.kind == ex_kind::binary) {
          auto a = ev(k.kids[0]), b = ev(k.kids[1]);
          if (!a || !b || std::llabs(*a) > (1LL << 40) || std::llabs(*b) > (1LL << 40)) return std::nullopt;
          if (k.op == "+") return *a + *b;
          if (k.op == "-") return *a - *b;
          if (k.op == "*") return *a * *b;
          if (k.op == "/" && *b != 0) return *a / *b;
          if (k.op == "<<" && *b >= 0 && *b < 40) return *a << *b;
        }
        return std::nullopt;
      };
      auto v = ev(x.root);
      if (v) out[it.name] = *v;
    }
  }
}

void collect_file_vars(const parsed_source& ps, const std::map<std::string, long long>& constants,
                       std::map<std::string, var_rec>& out) {
  for (auto& d : ps.file_scope) {
    space_t sp = d.has_qual("__shared__")     ? space_t::shared
                 : d.has_qual("__constant__") ? space_t::constant
                 : d.has_qual("__device__")   ? space_t::global
                                              : space_t::none;
    if (sp == space_t::none) continue;
    for (auto& it : d.items) {
      var_rec v;
      v.name = it.name;
      v.key = it.name;
      v.type = base_type_of(d.type);
      v.ptr = it.pointer_depth;
      v.elem = shape_of_type(v.type);
      v.is_array = !it.dims.empty();
      v.space = sp;
      for (auto& dim : it.dims) {
        long long val = -1;
        if (dim.e == dim.b + 1) {
          const token& k = ps.lex.tokens[dim.b];
          long long iv = 0;
          if (k.kind == tok_kind::number && parse_int_literal(k.text, iv)) val = iv;
          else if (k.kind == tok_kind::ident && constants.count(k.text)) val = constants.at(k.text);
        }
        v.dims.push_back(val);
      }
      out[it.name] = v;
    }
  }
}

// Token-level facts over all function bodies.
lexical_facts scan_lexical(const parsed_source& ps) {
  lexical_facts lf;
  const token_list& t = ps.lex.tokens;
  for (auto& d : ps.file_scope)
    if (d.has_qual("__shared__")) lf.shared_decl = true;
  for (auto& f : ps.functions) {
    for (size_t i = f.body.b; i < f.body.e && i < t.size(); ++i) {
      const token& k = t[i];
      if (k.kind == tok_kind::string) {
        if (k.text.find("mma.sync") != std::string::npos || k.text.find("wgmma") != std::string::npos ||
            k.text.find("wmma.") != std::string::npos)
          lf.tensor_cores = true;
        if (k.text.find(".approx") != std::string::npos) lf.fast_math = true;
        continue;
      }
      if (k.kind != tok_kind::ident) continue;
      bool call = i + 1 < t.size() && is_punct(t[i + 1], "(");
      // A member call such as wmma::mma_sync is lexed as wmma :: mma_sync.
      const std::string& w = k.text;
      bool member_access = i > 0 && (is_punct(t[i - 1], ".") || is_punct(t[i - 1], "->"));
      if (call && !member_access && transcendental_names().count(w)) ++lf.transcendental;
      if (call && !member_access && fast_math_names().count(w)) lf.fast_math = true;
      if (call && is_shuffle(w)) {
        ++lf.shuffles;
        if (is_reducing_shuffle(w)) lf.shuffle_reduction = true;
      }
      if (call && is_atomic(w)) ++lf.atomics;
      if (call && (w.rfind("__reduce_", 0) == 0 && w.find("_sync") != std::string::npos))
        lf.reduce_intrinsics = true;
      if (call && w == "reduce" && i > 1 && is_punct(t[i - 1], "::")) lf.reduce_intrinsics = true;
      if (call && (w == "__syncthreads" || w == "__syncthreads_count" || w == "__syncthreads_and" ||
                   w == "__syncthreads_or"))
        ++lf.syncthreads;
      if (w == "__shared__") lf.shared_decl = true;
      if (w == "wmma" || w == "mma_sync" || w == "__hmma_m16n16k16_mma_f32f32" || w == "wgmma")
        lf.tensor_cores = true;
      if (is_vector_type(w)) lf.vector_types = true;
      if (w.rfind("make_", 0) == 0 && is_vector_type(w.substr(5))) lf.vector_types = true;
      if (call && (w == "__hadd2" || w == "__hmul2" || w == "__hfma2" || w == "__hsub2" ||
                   w == "__floats2half2_rn" || w == "__float2half2_rn" || w == "__half22float2" ||
                   w == "__float22half2_rn" || w == "__hmax2" || w == "__hmin2"))
        lf.vector_types = true;
    }
    // Vector types in the parameters count too.
    for (auto& p : f.params)
      if (is_vector_type(p.base_type)) lf.vector_types = true;
  }
  return lf;
}

}  // namespace

source_facts analyze_source(const parsed_source& ps,
                            const std::map<std::string, launch_info>& launches,
                            double nominal_extent) {
  source_facts sf;
  std::map<std::string, long long> constants;
  collect_constants(ps, constants);
  std::map<std::string, var_rec> file_vars;
  collect_file_vars(ps, constants, file_vars);
  sf.lex = scan_lexical(ps);
  for (auto& f : ps.functions) {
    auto it = launches.find(f.name);
    function_analyzer a(ps, f, constants, file_vars, it == launches.end() ? nullptr : &it->second,
                        nominal_extent);
    sf.units.push_back(a.run());
  }
  return sf;
}

}  // namespace ks::features
