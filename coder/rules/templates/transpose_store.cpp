#include "coder/rules/templates/transpose_store.hpp"

#include "coder/rules/text/chain.hpp"
#include "coder/rules/text/code_writer.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

namespace {

// A tile's side: a warp's width, so that a warp loads one tile row and stores one
// tile column; 8 warps a block, 4 rows each.
constexpr int kTile = 32;
constexpr int kRowsPerWarp = 4;

}  // namespace

status emit_transpose_store(lowering_context& cx, size_t si) {
  const stage& st = cx.stages[si];
  const elementwise_stage& chain = st.as_kind<elementwise_stage>();
  const shaped& it = chain.iter;
  const size_t r = it.shape.size();
  if (r != 4 && r != 5) return error{"transposed store: the chain is not over [N, H, W, C] or [N, D, H, W, C]"};
  // The positions: H * W (D * H * W); the channels: the last dim.
  const std::string positions = product(std::vector<std::string>(it.sym.begin() + 1, it.sym.end() - 1));
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
  const std::string P = kp.int64(positions);
  const std::string Q = kp.int64(it.sym[r - 1]);
  std::string body;
  std::map<std::string, std::string> var;
  // Rows x channels: a broadcast operand is read by `row` (n, h, w) or `c` (channel).
  if (auto s = chain_code(cx, st, "i", kp, body, var, "", chain_reads{"none", r - 1}); !s) return s;
  std::vector<std::string> plain_out, perm_out;
  for (auto& [v, t] : plain) plain_out.push_back(kp.tensor_out(t));
  for (auto& [v, p] : chain.permuted) {
    auto t = cx.tensor_of.find(p);
    if (t == cx.tensor_of.end()) return error{"transposed store: result " + p + " is used by nothing"};
    perm_out.push_back(kp.tensor_out(t->second));
  }
  const std::string name = kernel_name(si, "transpose");
  const int threads = kTile * kTile / kRowsPerWarp;
  std::string what;
  for (auto* n : st.nodes) what += " " + base_kind(n->kind).substr(6);
  const std::string T = std::to_string(kTile), R = std::to_string(threads / kTile);
  code_writer w(cx.src);
  w.line("");
  w.line("// Fused elementwise chain:" + what + ", over " + (r == 4 ? "[N, H, W, C]" : "[N, D, H, W, C]") +
         " in tiles of " + T + " positions x " + T + " channels; stores its permute to " +
         (r == 4 ? "[N, C, H, W]" : "[N, C, D, H, W]") + " through a tile transposed in shared memory.");
  w.line("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(threads) + ")");
  {
    auto kernel = w.block(name + "(" + join(kp.decls, ", ") + ")");
    for (size_t o = 0; o < perm_out.size(); ++o)
      w.line("__shared__ float tile" + std::to_string(o) + "[" + T + "][" + std::to_string(kTile + 1) + "];");
    w.line("const int tx = threadIdx.x & " + std::to_string(kTile - 1) + ", ty = threadIdx.x >> 5;");
    w.line("const long long tp0 = (long long)blockIdx.x * " + T + ";");
    w.line("for (long long tb = blockIdx.z; tb < " + NB + "; tb += gridDim.z)");
    // The tile loop's body and the bounds checks' are not indented (the text the
    // golden snapshots hold): their braces are written as lines.
    w.line("for (long long tq0 = (long long)blockIdx.y * " + T + "; tq0 < " + Q + "; tq0 += (long long)gridDim.y * " +
           T + ") {");
    {
      w.splice("#pragma unroll\n");
      auto load = w.block("for (int tk = 0; tk < " + std::to_string(kRowsPerWarp) + "; ++tk)");
      w.line("const long long tp = tp0 + ty + " + R + " * tk, c = tq0 + tx;");
      w.line("if (tp < " + P + " && c < " + Q + ") {");
      w.line("const long long row = tb * " + P + " + tp, i = row * " + Q + " + c;");
      w.line("(void)row; (void)i;");
      w.splice(body);
      for (size_t o = 0; o < perm_out.size(); ++o)
        w.line("tile" + std::to_string(o) + "[ty + " + R + " * tk][tx] = " + var.at(chain.permuted[o].first) + ";");
      for (size_t o = 0; o < plain.size(); ++o) w.line(plain_out[o] + "[i] = " + var.at(plain[o].first) + ";");
      w.line("}");
    }
    w.line("__syncthreads();");
    {
      w.splice("#pragma unroll\n");
      auto store = w.block("for (int tk = 0; tk < " + std::to_string(kRowsPerWarp) + "; ++tk)");
      w.line("const long long tq = tq0 + ty + " + R + " * tk, tp = tp0 + tx;");
      w.line("if (tp < " + P + " && tq < " + Q + ") {");
      for (size_t o = 0; o < perm_out.size(); ++o)
        w.line(perm_out[o] + "[(tb * " + Q + " + tq) * " + P + " + tp] = tile" + std::to_string(o) + "[tx][ty + " + R +
               " * tk];");
      w.line("}");
    }
    w.line("__syncthreads();");
    w.line("}");
  }
  const std::string t = std::to_string(kTile);
  cx.add_kernel_step(name,
                     {"max(1, ceil_div(" + paren(positions) + ", " + t + "))",
                      "max(1, min(ceil_div(" + paren(it.sym[r - 1]) + ", " + t + "), 65535))",
                      "max(1, min(" + paren(it.sym[0]) + ", 65535))"},
                     {std::to_string(threads), "1", "1"}, kp.args);
  for (auto& [v, tn] : plain) cx.written.insert(v);
  for (auto& [v, p] : chain.permuted) cx.written.insert(p);
  return {};
}

}  // namespace ks::rules
