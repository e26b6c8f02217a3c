#include "coder/rules/transpose_store.hpp"

#include <sstream>

#include "coder/rules/chain.hpp"
#include "coder/rules/kernel_text.hpp"

namespace ks::rules {

namespace {

// A tile's side: a warp's width, so that a warp loads one tile row and stores one
// tile column; 8 warps a block, 4 rows each.
constexpr int kTile = 32;
constexpr int kRowsPerWarp = 4;

}  // namespace

status emit_transpose_store(lowering_context& cx, size_t si) {
  stage& st = cx.stages[si];
  const shaped& it = st.iter;
  if (it.shape.size() != 4) return error{"transposed store: the chain is not over [N, H, W, C]"};
  kernel_params kp;
  std::vector<std::pair<std::string, std::string>> plain;  // value -> tensor, stored at i
  for (auto* n : st.nodes) {
    auto t = cx.tensor_of.find(n->outputs[0]);
    if (t == cx.tensor_of.end()) continue;
    if (cx.shapes.at(n->outputs[0]).shape != it.shape)
      return error{"elementwise chain: value " + n->outputs[0] + " is needed at a smaller shape than the chain's"};
    plain.push_back({n->outputs[0], t->second});
  }
  const std::string NB = kp.int64(it.sym[0]);
  const std::string P = kp.int64(product({it.sym[1], it.sym[2]}));
  const std::string Q = kp.int64(it.sym[3]);
  std::string body;
  std::map<std::string, std::string> var;
  // Rows x channels: a broadcast operand is read by `row` (n, h, w) or `c` (channel).
  if (auto s = chain_code(cx, st, "i", kp, body, var, "", chain_reads{"none", 3}); !s) return s;
  std::vector<std::string> plain_out, perm_out;
  for (auto& [v, t] : plain) plain_out.push_back(kp.tensor_out(t));
  for (auto& [v, p] : st.permuted) {
    auto t = cx.tensor_of.find(p);
    if (t == cx.tensor_of.end()) return error{"transposed store: result " + p + " is used by nothing"};
    perm_out.push_back(kp.tensor_out(t->second));
  }
  const std::string name = kernel_name(si, "transpose");
  const int threads = kTile * kTile / kRowsPerWarp;
  std::ostringstream k;
  k << "\n// Fused elementwise chain:";
  for (auto* n : st.nodes) k << " " << base_kind(n->kind).substr(6);
  k << ", over [N, H, W, C] in tiles of " << kTile << " positions x " << kTile
    << " channels; stores its permute to [N, C, H, W] through a tile transposed in shared memory.\n";
  k << "extern \"C\" __global__ void __launch_bounds__(" << threads << ")\n" << name << "(" << join(kp.decls, ", ") << ") {\n";
  for (size_t o = 0; o < perm_out.size(); ++o) k << "  __shared__ float tile" << o << "[" << kTile << "][" << kTile + 1 << "];\n";
  k << "  const int tx = threadIdx.x & " << kTile - 1 << ", ty = threadIdx.x >> 5;\n";
  k << "  const long long tp0 = (long long)blockIdx.x * " << kTile << ";\n";
  k << "  for (long long tb = blockIdx.z; tb < " << NB << "; tb += gridDim.z)\n";
  k << "  for (long long tq0 = (long long)blockIdx.y * " << kTile << "; tq0 < " << Q << "; tq0 += (long long)gridDim.y * "
    << kTile << ") {\n";
  k << "#pragma unroll\n  for (int tk = 0; tk < " << kRowsPerWarp << "; ++tk) {\n";
  k << "    const long long tp = tp0 + ty + " << threads / kTile << " * tk, c = tq0 + tx;\n";
  k << "    if (tp < " << P << " && c < " << Q << ") {\n";
  k << "    const long long row = tb * " << P << " + tp, i = row * " << Q << " + c;\n    (void)row; (void)i;\n";
  k << body;
  for (size_t o = 0; o < perm_out.size(); ++o)
    k << "    tile" << o << "[ty + " << threads / kTile << " * tk][tx] = " << var.at(st.permuted[o].first) << ";\n";
  for (size_t o = 0; o < plain.size(); ++o) k << "    " << plain_out[o] << "[i] = " << var.at(plain[o].first) << ";\n";
  k << "    }\n  }\n  __syncthreads();\n";
  k << "#pragma unroll\n  for (int tk = 0; tk < " << kRowsPerWarp << "; ++tk) {\n";
  k << "    const long long tq = tq0 + ty + " << threads / kTile << " * tk, tp = tp0 + tx;\n";
  k << "    if (tp < " << P << " && tq < " << Q << ") {\n";
  for (size_t o = 0; o < perm_out.size(); ++o)
    k << "    " << perm_out[o] << "[(tb * " << Q << " + tq) * " << P << " + tp] = tile" << o << "[tx][ty + "
      << threads / kTile << " * tk];\n";
  k << "    }\n  }\n  __syncthreads();\n  }\n}\n";
  cx.src += k.str();
  plan_step step;
  step.kind = "kernel";
  step.name = name;
  const std::string t = std::to_string(kTile);
  step.grid = {"max(1, ceil_div(" + paren(product({it.sym[1], it.sym[2]})) + ", " + t + "))",
               "max(1, min(ceil_div(" + paren(it.sym[3]) + ", " + t + "), 65535))", "max(1, min(" + paren(it.sym[0]) + ", 65535))"};
  step.block = {std::to_string(threads), "1", "1"};
  step.args = kp.args;
  cx.out.plan.steps.push_back(step);
  for (auto& [v, tn] : plain) cx.written.insert(v);
  for (auto& [v, p] : st.permuted) cx.written.insert(p);
  return {};
}

}  // namespace ks::rules
