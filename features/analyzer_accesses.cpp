// Pointers and pass 2 of the per-function analysis (features/function_analyzer.hpp).
#include "features/function_analyzer.hpp"

#include <string>
#include <vector>

#include "features/intrinsic_names.hpp"

namespace ks::features::analysis {

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

bool function_analyzer::resolve_subscript(const expr_tree& x, int n, ptr_ref& r, poly& index, int depth) {
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

int function_analyzer::record_access(const ptr_ref& r, const poly& index, bool read, bool write, bool atomic, bool wmma,
                                     int item, const expr_tree& x, int n, const std::string& target) {
  access_rec a;
  a.base = r.base;
  a.space = r.space;
  a.base_elem = r.base_elem;
  a.elem = r.elem;
  a.bytes = r.elem.bytes;
  int scalar_bytes = r.base_elem.lanes > 0 && r.base_elem.bytes > 0 ? r.base_elem.bytes / r.base_elem.lanes : 0;
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

void function_analyzer::visit_addr_arg(const expr_tree& x, int n, bool read, bool write, bool atomic, bool wmma,
                                       vctx& c) {
  const ex_node& k = x.at(n);
  if (k.kind == ex_kind::unary && k.op == "&" && !k.kids.empty() && x.at(k.kids[0]).kind == ex_kind::subscript) {
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
      bool assign = op == "=" || op == "+=" || op == "-=" || op == "*=" || op == "/=" || op == "%=" || op == "&=" ||
                    op == "|=" || op == "^=" || op == "<<=" || op == ">>=";
      if (assign) {
        visit_assignment(x, n, c);
        return;
      }
      if (op == "%" || op == "&") scan_ptr_int_cast(x, k.kids[0]);
      visit(x, k.kids[0], use::read, c);
      visit(x, k.kids[1], use::read, c);
      return;
    }
    case ex_kind::unary:
      visit_unary(x, n, u, c);
      return;
    case ex_kind::postfix:
      if (!k.kids.empty()) visit(x, k.kids[0], use::rmw, c);
      return;
    case ex_kind::subscript:
      visit_subscript(x, n, u, c);
      return;
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
    case ex_kind::call:
      visit_call(x, n, c);
      return;
    default:
      for (int kid : k.kids) visit(x, kid, use::read, c);
      return;
  }
}

// An assignment: the LHS is written (or read and written), then the RHS read; the base
// the LHS writes is the target of the accesses on both sides.
void function_analyzer::visit_assignment(const expr_tree& x, int n, vctx& c) {
  const ex_node& k = x.at(n);
  const std::string& op = k.op;
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
  if (lhs_access >= 0)
    c.target = accesses_[static_cast<size_t>(lhs_access)].base;
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
}

// A dereference (*p: an access through the pointer), an address (&a[i]: no access), an
// increment (read and written), or another unary operator (its operand read).
void function_analyzer::visit_unary(const expr_tree& x, int n, use u, vctx& c) {
  const ex_node& k = x.at(n);
  if (k.kids.empty()) return;
  if (k.op == "*") {
    ptr_ref r = resolve_ptr(x, k.kids[0]);
    if (r.ok) {
      record_access(r, r.offset, u != use::write, u == use::write || u == use::rmw, false, false, c.item, x, n,
                    c.target);
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
}

// a[i][j]: an access unless only its address is taken; its indices are read.
void function_analyzer::visit_subscript(const expr_tree& x, int n, use u, vctx& c) {
  const ex_node& k = x.at(n);
  ptr_ref r;
  poly idx;
  if (resolve_subscript(x, n, r, idx)) {
    if (u != use::addr)
      record_access(r, idx, u == use::read || u == use::rmw, u == use::write || u == use::rmw, false, false, c.item, x,
                    n, c.target);
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
}

// A call: recorded (with its loops); the memory intrinsics access through their pointer
// arguments; other calls read their arguments (a pointer passed on is not an access).
void function_analyzer::visit_call(const expr_tree& x, int n, vctx& c) {
  const ex_node& k = x.at(n);
  const ex_node& callee = x.at(k.kids[0]);
  std::string full = callee.kind == ex_kind::ident ? callee.op : callee.kind == ex_kind::member ? callee.op : "";
  std::string name = last_name(full);
  calls_.push_back({name, items_[static_cast<size_t>(c.item)].loops});
  if (name.find("align") != std::string::npos)
    for (size_t i = 1; i < k.kids.size(); ++i)
      if (resolve_ptr(x, k.kids[i]).ok) align_call_ = true;
  if (visit_memory_intrinsic(x, n, name, c)) return;
  if (callee.kind == ex_kind::member) visit(x, callee.kids[0], use::read, c);
  for (size_t i = 1; i < k.kids.size(); ++i) {
    const ex_node& a = x.at(k.kids[i]);
    // Pointers passed to other functions: their addresses are not accesses.
    if (a.kind == ex_kind::unary && a.op == "&")
      visit(x, k.kids[i], use::addr, c);
    else
      visit(x, k.kids[i], use::read, c);
  }
}

// Atomics, cache-hinted loads and stores, WMMA fragment loads and stores, asynchronous
// copies: the accesses through their pointer arguments. False for any other call.
bool function_analyzer::visit_memory_intrinsic(const expr_tree& x, int n, const std::string& name, vctx& c) {
  const ex_node& k = x.at(n);
  auto arg = [&](size_t i) { return i < k.kids.size() ? k.kids[i] : -1; };
  if (is_atomic(name) && k.kids.size() >= 2) {
    visit_addr_arg(x, arg(1), true, true, true, false, c);
    for (size_t i = 2; i < k.kids.size(); ++i) visit(x, k.kids[i], use::read, c);
    return true;
  }
  if (is_ldg(name) && k.kids.size() >= 2) {
    visit_addr_arg(x, arg(1), true, false, false, false, c);
    return true;
  }
  if (is_st_hint(name) && k.kids.size() >= 3) {
    visit_addr_arg(x, arg(1), false, true, false, false, c);
    visit(x, k.kids[2], use::read, c);
    return true;
  }
  if (name == "load_matrix_sync" && k.kids.size() >= 3) {
    visit(x, k.kids[1], use::read, c);
    visit_addr_arg(x, arg(2), true, false, false, true, c);
    for (size_t i = 3; i < k.kids.size(); ++i) visit(x, k.kids[i], use::read, c);
    return true;
  }
  if (name == "store_matrix_sync" && k.kids.size() >= 3) {
    std::string saved = c.target;
    ptr_ref r = resolve_ptr(x, k.kids[1]);
    if (r.ok) c.target = r.base;
    visit_addr_arg(x, arg(1), false, true, false, true, c);
    for (size_t i = 2; i < k.kids.size(); ++i) visit(x, k.kids[i], use::read, c);
    c.target = saved;
    return true;
  }
  if ((name == "__pipeline_memcpy_async" || name == "memcpy_async" || name == "cp_async" || name == "cp_async16" ||
       name == "cp_async4") &&
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
    return true;
  }
  return false;
}

}  // namespace ks::features::analysis
