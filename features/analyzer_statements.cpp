// Pass 1 of the per-function analysis (features/function_analyzer.hpp).
#include "features/function_analyzer.hpp"

#include <string>
#include <vector>

#include "features/intrinsic_names.hpp"

namespace ks::features::analysis {

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
        (n.op == "=" || n.op == "+=" || n.op == "-=" || n.op == "*=" || n.op == "/=" || n.op == "%=" || n.op == "&=" ||
         n.op == "|=" || n.op == "^=" || n.op == "<<=" || n.op == ">>=")) {
      int v = lhs_var(*x, n.kids[0]);
      if (v < 0) continue;
      var_rec& r = vars_[static_cast<size_t>(v)];
      r.values.push_back({x, n.kids[1]});
      ++r.assigns;
      if (loop_id_for_var >= 0 && r.loop_id < 0 && x->at(n.kids[0]).kind == ex_kind::ident) r.loop_id = loop_id_for_var;
    } else if ((n.kind == ex_kind::unary || n.kind == ex_kind::postfix) && (n.op == "++" || n.op == "--") &&
               !n.kids.empty()) {
      int v = lhs_var(*x, n.kids[0]);
      if (v < 0) continue;
      var_rec& r = vars_[static_cast<size_t>(v)];
      r.values.push_back({x, -1});
      ++r.assigns;
    }
  }
}

int function_analyzer::declare(const declaration& d, const declarator& it, std::vector<int>& loops,
                               const std::vector<guard>& guards) {
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
  if (d.has_qual("__shared__"))
    v.space = space_t::shared;
  else if (d.has_qual("__constant__"))
    v.space = space_t::constant;
  else if (v.is_array)
    v.space = space_t::local;
  else
    v.space = space_t::none;
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

void function_analyzer::walk(const statement& s, std::vector<int>& loops, std::vector<guard>& guards) {
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
    case st_kind::do_loop:
      walk_loop(s, loops, guards);
      break;
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

// A loop: its own scope and record; the init (a declaration or an assignment naming the
// variable), condition and step become items of the loop, and the body is walked
// inside it (a do loop's condition after the body).
void function_analyzer::walk_loop(const statement& s, std::vector<int>& loops, std::vector<guard>& guards) {
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
    add_item(x, s.kind == st_kind::for_loop ? role_t::cond_for : role_t::cond_while, loops, guards);
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
      if (!r.kids.empty() && (r.kind == ex_kind::binary || r.kind == ex_kind::unary || r.kind == ex_kind::postfix)) {
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
}

}  // namespace ks::features::analysis
