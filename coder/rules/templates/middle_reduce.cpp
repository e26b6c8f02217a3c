#include "coder/rules/templates/middle_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <map>

#include "coder/rules/templates/row_reduce.hpp"
#include "coder/rules/text/combine.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

namespace {

// What pass 2 reads from registers: the reduced value (a normalisation) and the raw
// values of the tensors pass 1 reads at [i] that the epilogue reads again.
struct middle_cache {
  int per_thread = 0;            // K; 0: nothing kept
  std::vector<std::string> raw;  // rc_P arrays
  bool keep_value = false;       // rv: the value pass 1 reduced
};

middle_cache choose_middle_cache(const lowering_params& p, const reduce_parts& rp, int slices) {
  middle_cache m;
  if (p.row_cache == param::row_cache::none) return m;
  const std::string pass1 = rp.pro ? rp.load_code : rp.X + "[i]";
  std::vector<std::string> read;
  for (auto& [tensor, param] : rp.kp.tensor_param)
    if (param.rfind("in", 0) == 0 && reads_at(pass1, param, "i")) read.push_back(param);
  for (auto& P : read)
    if (reads_at(rp.epi_code, P, "i")) m.raw.push_back(P);
  m.keep_value = rp.r.normalizes();
  const int64_t arrays = (m.keep_value ? 1 : 0) + static_cast<int64_t>(m.raw.size());
  if (arrays <= 0 || arrays > 2 || read.size() > 2) return {};
  const int64_t need = (rp.row_len + slices - 1) / slices;
  if (need > 32 / arrays) return {};
  m.per_thread = static_cast<int>(std::max<int64_t>(need, 1));
  return m;
}

}  // namespace

void column_of(const reduce_parts& rp, std::ostringstream& k) {
  const std::string& INNER = rp.INNER;
  k << "  long long o = 0, j = 0;\n";
  k << "  if (live) {\n";
  k << "    if (" << rp.ROWS << " * " << INNER << " <= 0x7fffffffLL) {\n";
  k << "      const unsigned q = (unsigned)t / (unsigned)" << INNER << ";\n";
  k << "      o = q, j = (unsigned)t - q * (unsigned)" << INNER << ";\n";
  k << "    } else {\n      o = t / " << INNER << ", j = t % " << INNER << ";\n    }\n  }\n";
}

namespace {

// Where the passes read the kept tensors at [i]: this thread's k-th element of each
// (chain_reads::held_reads).
std::map<std::string, std::string> in_registers(const middle_cache& m) {
  std::map<std::string, std::string> held;
  for (auto& P : m.raw) held[P] = "rc_" + P + "[k]";
  return held;
}

}  // namespace

status write_middle_two_pass(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay,
                             std::ostringstream& k, plan_step& step) {
  const reduction_spec& r = rp.r;
  const acc_text& a = rp.a;
  const std::string &C = rp.C, &INNER = rp.INNER;
  if (r.moment_norm()) return error{r.op + " over a middle dim cannot happen"};
  // The fewest slices whose share of a column fits the registers: a column cut in
  // fewer, longer slices keeps more loads in flight a thread and merges fewer partial
  // states (RMSNorm over 64 channels on the H200, bench/probes/memory_bound_probe.cu: 8 slices
  // of 8 4.46 ms, 2 of 32 3.72 ms); the block's other warps take the next columns.
  const int warps = lay.block / 32;
  int S = warps;
  middle_cache m;
  for (int s = 1; s <= warps; s *= 2)
    if (warps % s == 0 && (m = choose_middle_cache(cx.p, rp, s)).per_thread > 0) {
      S = s;
      break;
    }
  const int G = warps / S;  // groups of 32 columns a block
  const int K = m.per_thread;
  const std::map<std::string, std::string> held = in_registers(m);
  const std::string Ks = std::to_string(K), Ss = std::to_string(S);
  if (G == 1) {
    k << "  const int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;\n";
    k << "  const long long t = (long long)blockIdx.x * 32 + lane;\n";
  } else {
    k << "  const int lane = threadIdx.x & 31, slice = (threadIdx.x >> 5) % " << S << ", group = threadIdx.x / "
      << 32 * S << ";\n";
    k << "  const long long t = ((long long)blockIdx.x * " << G << " + group) * 32 + lane;\n";
  }
  k << "  const bool live = t < " << rp.ROWS << " * " << INNER << ";\n";
  column_of(rp, k);
  k << "  const long long base = o * " << C << " * " << INNER << " + j;\n";
  k << rp.decl;
  if (r.acc == acc_kind::moments) k << reduce_load(rp, "base", "shift");
  const std::string each = "#pragma unroll\n    for (int k = 0; k < " + Ks +
                           "; ++k) {\n      const long long c = slice + (long long)k * " + Ss + ";\n      if (c < " +
                           C + ") {\n      const long long i = base + c * " + INNER + ";\n      (void)i;\n";
  if (K > 0) {
    for (auto& P : m.raw) k << "  float rc_" << P << "[" << Ks << "];\n";
    if (m.keep_value) k << "  float rv[" << Ks << "];\n";
  }
  k << "  if (live) {\n";
  if (K > 0) {
    // Every load of the kept part issued before any of its math.
    if (!m.raw.empty()) {
      k << each;
      for (auto& P : m.raw) k << "      rc_" << P << "[k] = " << P << "[i];\n";
      k << "      }\n    }\n";
    }
    k << each;
    if (rp.pro)
      k << chain_holding(cx, rp, false, held) << "      const float v = " << rp.var.at(r.input) << ";\n";
    else
      k << "      const float v = " << (held.count(rp.X) ? held.at(rp.X) : rp.X + "[i]") << ";\n";
    if (m.keep_value) k << "      rv[k] = v;\n";
    k << "      " << a.update << "\n      }\n    }\n";
  }
  const std::string rest =
      "    for (long long c = slice + (long long)" + Ks + " * " + Ss + "; c < " + C + "; c += " + Ss + ")";
  k << "#pragma unroll 4\n"
    << rest << " {\n"
    << reduce_load(rp, "base + c * " + INNER, "v") << "    " << a.update << "\n    }\n  }\n";
  // The slices' states through shared memory: every slice merges all of them in
  // slice order, so that each holds the same bits. One slice holds its column's state.
  if (S > 1) {
    const std::string dims = G == 1 ? "" : "[" + std::to_string(G) + "]", at = G == 1 ? "" : "[group]";
    for (auto& v : a.state) k << "  __shared__ float sh_" << v << dims << "[" << S << "][33];\n";
    for (auto& v : a.state) k << "  sh_" << v << at << "[slice][lane] = " << v << ";\n";
    k << "  __syncthreads();\n";
    for (size_t q = 0; q < a.state.size(); ++q) k << "  " << a.state[q] << " = " << a.identity[q] << ";\n";
    k << "  for (int q = 0; q < " << S << "; ++q) {\n";
    std::vector<std::string> other;
    for (auto& v : a.state) {
      k << "    const float p_" << v << " = sh_" << v << at << "[q][lane];\n";
      other.push_back("p_" + v);
    }
    k << "    " << merge(r, a, other) << "\n  }\n";
  }
  k << "  if (!live) return;\n";
  // Pass 2: the kept part from registers, the rest from memory.
  k << (r.normalizes() ? rp.prelude : "  const float red = " + finish(r, a, C) + ";\n");
  const std::string idx = "base + c * " + INNER;
  if (K > 0) {
    k << each;
    if (r.normalizes()) {
      // An epilogue's pass-2 body declares its index `i` again: a scope of its own.
      k << "      const float v = rv[k];\n"
        << (rp.epi ? "      {\n" : "") << pass2_body(cx, rp, idx, "", chain_holding(cx, rp, true, held))
        << (rp.epi ? "      }\n" : "");
    } else {
      k << chain_holding(cx, rp, true, held);
      for (auto& [v, param] : rp.epi_out) k << "      " << param << "[i] = " << rp.epi_var.at(v) << ";\n";
    }
    k << "      }\n    }\n";
  }
  k << rest << " {\n";
  if (r.normalizes()) {
    k << reduce_load(rp, idx, "v") << pass2_body(cx, rp, idx);
  } else {
    k << "    const long long i = " << idx << ";\n" << rp.epi_code;
    for (auto& [v, param] : rp.epi_out) k << "    " << param << "[i] = " << rp.epi_var.at(v) << ";\n";
  }
  k << "    }\n";
  for (auto& [v, param] : rp.epi_out) cx.written.insert(v);
  step.grid = {
      "ceil_div(" + paren(product(rp.outer)) + " * " + paren(product(rp.inner)) + ", " + std::to_string(32 * G) + ")",
      "1", "1"};
  return {};
}

}  // namespace ks::rules
