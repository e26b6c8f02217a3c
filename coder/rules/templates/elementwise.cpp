#include "coder/rules/templates/elementwise.hpp"

#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

namespace {

// What the kernel's text is made of: its parameters, the chain's statements for the
// main loop and for the tail, and the values it stores.
struct elementwise_parts {
  kernel_params kp;
  std::vector<std::pair<std::string, std::string>> exports;  // value → tensor
  std::vector<std::string> outs;                             // their output parameters
  std::set<std::string> streamed_out;                        // output parameters stored with __stcs
  std::string n_expr, N;                                     // the element count, and its parameter
  std::string ROWS, INNER;                                   // split: rows and row length parameters
  std::string body, tail_body;
  std::map<std::string, std::string> var, var2;  // value → variable, in body and tail_body
};

result<elementwise_parts> gather_parts(lowering_context& cx, const stage& st, const elementwise_layout& lay) {
  elementwise_parts e;
  kernel_params& kp = e.kp;
  const shaped& iter = st.as_kind<elementwise_stage>().iter;
  // Which values of the chain the plan needs.
  for (auto* n : st.nodes) {
    auto it = cx.tensor_of.find(n->outputs[0]);
    if (it == cx.tensor_of.end()) continue;
    if (cx.shapes.at(n->outputs[0]).shape != iter.shape)
      return error{"elementwise chain: value " + n->outputs[0] + " is needed at a smaller shape than the chain's"};
    e.exports.push_back({n->outputs[0], it->second});
  }
  // Inputs of the iteration shape are loaded as vectors; the others element by element.
  e.n_expr = product(iter.sym);
  e.N = kp.int64(e.n_expr);
  if (lay.split) {
    e.ROWS = kp.int64(product(std::vector<std::string>(iter.sym.begin(), iter.sym.begin() + lay.split)));
    e.INNER = kp.int64(product(std::vector<std::string>(iter.sym.begin() + lay.split, iter.sym.end())));
  }
  status body_ok = chain_code(cx, st, "i", kp, e.body, e.var, "", lay.body_reads);
  status tail_ok = body_ok ? chain_code(cx, st, "i", kp, e.tail_body, e.var2, "t", lay.tail_reads) : body_ok;
  if (!tail_ok) return error{tail_ok.message()};
  for (auto& [v, t] : e.exports) {
    e.outs.push_back(kp.tensor_out(t));
    bool plan_output = false;
    for (auto& b : cx.out.plan.outputs) plan_output = plan_output || b.name == t;
    if (lay.cache_hint == param::cache_hint::streaming && plan_output) e.streamed_out.insert(e.outs.back());
  }
  return e;
}

// The stores of the exported values (in `vars`) at element `idx`.
std::string store_lines(const elementwise_parts& e, const std::map<std::string, std::string>& vars,
                        const std::string& idx) {
  std::string s;
  for (size_t o = 0; o < e.exports.size(); ++o)
    s += e.streamed_out.count(e.outs[o])
             ? "    __stcs(" + e.outs[o] + " + " + idx + ", " + vars.at(e.exports[o].first) + ");\n"
             : "    " + e.outs[o] + "[" + idx + "] = " + vars.at(e.exports[o].first) + ";\n";
  return s;
}

// One element a trip (vector width 1).
void scalar_loop(std::ostringstream& k, const elementwise_parts& e, const elementwise_layout& lay) {
  const int U = lay.per_thread;
  k << "  for (long long j = tid; j < " << e.N << "; j += stride * " << U << ") {\n";
  k << "#pragma unroll\n  for (int u = 0; u < " << U << "; ++u) {\n";
  k << "    const long long i = j + u * stride;\n    if (i >= " << e.N << ") break;\n";
  k << e.body << store_lines(e, e.var, "i") << "  }\n  }\n";
}

// Vector path: every element of a vector goes through the same chain; full-shape
// operands are read as float2/float4 (buffers are 256-byte aligned), the rest by
// index. The tail (n % V elements) is done one by one.
void vector_loop(std::ostringstream& k, const elementwise_parts& e, const elementwise_layout& lay) {
  const int V = lay.vector_width, U = lay.per_thread;
  // (A loop below names its parameter `param`: the hint is read here.)
  const bool streaming = lay.cache_hint == param::cache_hint::streaming;
  const bool readonly = lay.cache_hint == param::cache_hint::readonly;
  const std::string vt = V == 4 ? "float4" : "float2";
  // The vector index of trip u: `w` (and `cv`, the vector in the row, when split).
  std::string trip_index;
  // The column of lane l of the row's vector cv (split): after the row's head when peeled.
  std::string first_col;
  if (lay.split && lay.peel) {
    // Rows x columns, the row's length not a multiple of V: each row's first
    // elements up to a V-aligned index (its head) and its last n % V (its tail)
    // one by one, the vectors between them aligned (every full-shape operand has
    // the row's index i, and buffers are 256-byte aligned).
    k << "  for (long long row = blockIdx.y; row < " << e.ROWS << "; row += gridDim.y) {\n";
    k << "  const long long base = row * " << e.INNER << ";\n";
    k << "  const long long head = min((long long)((" << V << " - base % " << V << ") % " << V << "), " << e.INNER
      << ");\n";
    k << "  const long long nv = (" << e.INNER << " - head) / " << V << ", bv = (base + head) / " << V << ";\n";
    trip_index = "    const long long cv = j + u * stride, w = bv + cv;\n    if (cv >= nv) break;\n";
    first_col = "head + ";
  } else if (lay.split) {
    // Rows x columns: a row's vectors are aligned when its length is a multiple
    // of V; other lengths take the element-by-element loop below.
    k << "  for (long long row = blockIdx.y; row < " << e.ROWS << "; row += gridDim.y) {\n";
    k << "  const long long base = row * " << e.INNER << ";\n";
    k << "  if (" << e.INNER << " % " << V << " == 0) {\n";
    k << "  const long long nv = " << e.INNER << " / " << V << ", bv = base / " << V << ";\n";
    trip_index = "    const long long cv = j + u * stride, w = bv + cv;\n    if (cv >= nv) break;\n";
  } else {
    k << "  const long long nv = " << e.N << " / " << V << ";\n";
    trip_index = "    const long long w = j + u * stride;\n    if (w >= nv) break;\n";
  }
  k << "  for (long long j = tid; j < nv; j += stride * " << U << ") {\n";
  std::vector<std::string> lanes =
      V == 4 ? std::vector<std::string>{"x", "y", "z", "w"} : std::vector<std::string>{"x", "y"};
  // The full-shape operands' vectors of every trip are loaded first, then computed
  // and stored: U loads in flight per thread and operand, not one.
  std::map<std::string, std::string> full_vec;  // param → vector variable
  for (auto& [tensor, param] : e.kp.tensor_param) {
    if (param.rfind("in", 0) != 0) continue;
    bool full = e.body.find(param + "[i]") != std::string::npos;
    if (!full) continue;
    full_vec[param] = "q_" + param + "[u]";
    k << "  " << vt << " q_" << param << "[" << U << "];\n";
  }
  if (!full_vec.empty()) {
    k << "#pragma unroll\n  for (int u = 0; u < " << U << "; ++u) {\n" << trip_index;
    for (auto& [param, vv] : full_vec) {
      const std::string at = "reinterpret_cast<const " + vt + "*>(" + param + ")";
      k << "    " << vv << " = "
        << (streaming  ? "__ldcs(" + at + " + w)"
            : readonly ? "__ldg(" + at + " + w)"
                       : at + "[w]")
        << ";\n";
    }
    k << "  }\n";
  }
  k << "#pragma unroll\n  for (int u = 0; u < " << U << "; ++u) {\n" << trip_index;
  for (auto& o : e.outs) k << "    " << vt << " r_" << o << ";\n";
  for (int l = 0; l < V; ++l) {
    std::string b = e.body;
    for (auto& [param, vv] : full_vec) {
      std::string from = param + "[i]", to = vv + "." + lanes[l];
      for (size_t pos = b.find(from); pos != std::string::npos; pos = b.find(from, pos + to.size()))
        b.replace(pos, from.size(), to);
    }
    if (lay.split)
      k << "    {\n    const long long c = " << first_col << "cv * " << V << " + " << l
        << ", i = base + c;\n    (void)c; (void)i;\n"
        << b;
    else
      k << "    {\n    const long long i = w * " << V << " + " << l << ";\n    (void)i;\n" << b;
    for (size_t o = 0; o < e.exports.size(); ++o)
      k << "    r_" << e.outs[o] << "." << lanes[l] << " = " << e.var.at(e.exports[o].first) << ";\n";
    k << "    }\n";
  }
  for (auto& o : e.outs)
    if (e.streamed_out.count(o))
      k << "    __stcs(reinterpret_cast<" << vt << "*>(" << o << ") + w, r_" << o << ");\n";
    else
      k << "    reinterpret_cast<" << vt << "*>(" << o << ")[w] = r_" << o << ";\n";
  k << "  }\n  }\n";
  if (lay.split && lay.peel) {
    // The head (columns [0, head)) and the tail (after the vectors), one by one.
    k << "  for (long long t = tid; t < " << e.INNER << " - nv * " << V << "; t += stride) {\n"
      << "    const long long c = t < head ? t : t + nv * " << V << ", i = base + c;\n"
      << e.tail_body << store_lines(e, e.var2, "i") << "  }\n  }\n";
  } else if (lay.split) {
    k << "  } else {\n";
    k << "  for (long long c = tid; c < " << e.INNER << "; c += stride) {\n    const long long i = base + c;\n"
      << e.tail_body << store_lines(e, e.var2, "i") << "  }\n  }\n  }\n";
  } else {
    k << "  for (long long i = nv * " << V << " + tid; i < " << e.N << "; i += stride) {\n"
      << e.tail_body << store_lines(e, e.var2, "i") << "  }\n";
  }
}

// The launch: blocks over the elements, or over a row's columns and the rows.
std::vector<std::string> elementwise_grid(const stage& st, const elementwise_parts& e, const elementwise_layout& lay) {
  const int V = lay.vector_width, U = lay.per_thread, B = lay.block;
  const shaped& iter = st.as_kind<elementwise_stage>().iter;
  if (lay.split) {
    const std::string rows = product(std::vector<std::string>(iter.sym.begin(), iter.sym.begin() + lay.split));
    const std::string inner = product(std::vector<std::string>(iter.sym.begin() + lay.split, iter.sym.end()));
    // Blocks across a row so that each thread has about 4 trips in it (the row's
    // own indices are computed once per trip), and rows (grid.y ≤ 65535) until the
    // grid holds about grid_cap blocks; each block walks rows gridDim.y apart.
    const std::string bx = "max(1, min(ceil_div(" + paren(inner) + ", " + std::to_string(V * B * U * 4) + "), " +
                           std::to_string(lay.grid_cap) + "))";
    return {bx,
            "max(1, min(" + paren(rows) + ", min(65535, ceil_div(" + std::to_string(lay.grid_cap) + ", " + bx + "))))",
            "1"};
  }
  std::string blocks = "max(1, min(ceil_div(" + paren(e.n_expr) + ", " + std::to_string(V * B * U) + "), " +
                       std::to_string(lay.grid_cap) + "))";
  return {blocks, "1", "1"};
}

}  // namespace

elementwise_layout choose_elementwise_layout(const lowering_context& cx, const stage& st) {
  elementwise_layout lay;
  lay.vector_width = cx.p.vector_width;
  lay.per_thread = cx.p.elements_per_thread;
  lay.block = cx.p.block_size;
  lay.grid_cap = cx.p.grid_cap;
  lay.cache_hint = cx.p.cache_hint;
  lay.split = lay.vector_width > 1 ? choose_column_split(cx, st) : 0;
  // A product stored with padded rows (lowering_context::row_pitch) is read by row
  // and column: rows x columns, whatever the row's length.
  bool pitched = false;
  for (auto* n : st.nodes)
    for (auto& id : n->inputs) pitched = pitched || cx.row_pitch.count(id) > 0;
  const shaped& iter = st.as_kind<elementwise_stage>().iter;
  if (pitched && lay.vector_width > 1 && iter.shape.size() == 2) lay.split = 1;
  if (lay.split) {
    const std::vector<std::string> inner(iter.sym.begin() + static_cast<std::ptrdiff_t>(lay.split), iter.sym.end());
    int64_t graph_inner = 1;
    for (size_t q = lay.split; q < iter.shape.size(); ++q) graph_inner *= iter.shape[q];
    lay.peel = cx.target_size(inner, graph_inner) % lay.vector_width != 0;
  }
  // The vector loop loads the full-shape operands itself (with the hint); the chain
  // reads the broadcast ones, through __ldg when the hint is readonly.
  const std::string hint = param::name_of(lay.cache_hint);
  lay.body_reads = {lay.vector_width == 1 ? hint : hint == "readonly" ? "readonly_broadcast" : "none", lay.split};
  lay.tail_reads = {hint, lay.split};
  return lay;
}

status emit_elementwise(lowering_context& cx, size_t si) {
  const stage& st = cx.stages[si];
  const elementwise_layout lay = choose_elementwise_layout(cx, st);
  auto parts = gather_parts(cx, st, lay);
  if (!parts) return error{parts.message()};
  const elementwise_parts& e = *parts;
  const int V = lay.vector_width, U = lay.per_thread, B = lay.block;
  const param::cache_hint hint = lay.cache_hint;
  std::string name = kernel_name(si, "elementwise");
  std::ostringstream k;
  k << "\n// Fused elementwise chain:";
  for (auto* n : st.nodes) k << " " << base_kind(n->kind).substr(6);
  k << ". " << V << " floats per vector, " << U << " vector(s) per thread per trip, grid-stride"
    << (lay.split ? "; rows x columns (blockIdx.y walks the rows), so broadcast operands are indexed by row or column "
                    "without a division per element"
                  : "")
    << (hint == param::cache_hint::streaming  ? "; streamed operands and outputs evict first (__ldcs/__stcs)"
        : hint == param::cache_hint::readonly ? "; operands through the read-only path (__ldg)"
                                              : "")
    << ".\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << B << ")\n"
    << name << "(" << join(e.kp.decls, ", ") << ") {\n";
  k << "  const long long stride = (long long)gridDim.x * blockDim.x;\n";
  k << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
  if (V == 1)
    scalar_loop(k, e, lay);
  else
    vector_loop(k, e, lay);
  k << "}\n";
  cx.src += k.str();
  cx.add_kernel_step(name, elementwise_grid(st, e, lay), {std::to_string(B), "1", "1"}, e.kp.args);
  for (auto& [v, t] : e.exports) cx.written.insert(v);
  return {};
}

}  // namespace ks::rules
