#include "coder/rules/templates/row_cache.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include "coder/rules/templates/row_reduce.hpp"
#include "coder/rules/text/device_helpers.hpp"

namespace ks::rules {

namespace {

const char* lanes4[] = {"x", "y", "z", "w"};

// A block's chunk of a row of `len` spread over `g` blocks, as the kernels cut it
// (write_rows; row_split.hpp's too): a multiple of 4, so float4 stays aligned.
int64_t cluster_chunk(int64_t len, int64_t g) { return ((len + g - 1) / g + 3) / 4 * 4; }

// Registers: the column of this thread's k-th cached element.
std::string cached_c(const reduce_layout& lay) {
  return "    const long long c = " + lay.lane() + " + (long long)k * " + lay.width() + ";\n";
}

// Registers: one unrolled loop over this thread's cached elements.
std::string each_cached(const reduce_parts& rp, const reduce_layout& lay) {
  return "#pragma unroll\n  for (int k = 0; k < " + std::to_string(lay.cache.per_thread) + "; ++k) {\n" +
         cached_c(lay) + "    if (c < " + rp.C + ") {\n";
}

// Registers: where the passes read the cached tensors at [i], the thread's k-th
// cached element of each (chain_reads::held_reads).
std::map<std::string, std::string> in_registers(const reduce_layout& lay) {
  std::map<std::string, std::string> held;
  for (auto& P : lay.cache.row_params) held[P] = "rc_" + P + "[k]";
  return held;
}

// Tensor parameter P's element at [i], or where `held` says the kernel holds it.
std::string read_at_i(const std::map<std::string, std::string>& held, const std::string& P) {
  auto it = held.find(P);
  return it == held.end() ? P + "[i]" : it->second;
}

// Shared: the staged part of a row is walked as float4s (q_P: this thread's four
// elements of tensor P) where rows are 16-byte aligned, else element by element
// (sh_P[c]); `io` says which, and which of the four.
struct lane_io {
  bool vec;
  int l;
};

// Where the passes read the staged tensors at [i]: the lane of this thread's float4,
// or the element at c in shared memory (chain_reads::held_reads).
std::map<std::string, std::string> in_shared(const reduce_layout& lay, const lane_io& io) {
  std::map<std::string, std::string> held;
  for (auto& P : lay.cache.row_params) held[P] = io.vec ? "q_" + P + "." + lanes4[io.l] : "sh_" + P + "[c]";
  return held;
}

// The reduced value `v` of the element at c: the staged raw element through the
// prologue, or (`stored`) what pass 1 wrote in its place.
std::string staged_value(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay, const lane_io& io,
                         bool stored) {
  const auto held = in_shared(lay, io);
  if (!rp.pro || stored)
    return "      const float v = " + read_at_i(held, rp.X.empty() ? lay.cache.row_params.front() : rp.X) + ";\n";
  return "      float v;\n      {\n      const long long i = base + c;\n      (void)i;\n" +
         chain_holding(cx, rp, false, held) + "      v = " + rp.var.at(rp.r.input) + ";\n      }\n";
}

std::string write_back(const std::string& P, const std::string& e, const lane_io& io) {
  return io.vec ? "      w_" + P + "." + lanes4[io.l] + " = " + e + ";\n" : "      sh_" + P + "[c] = " + e + ";\n";
}

std::string store_out(const std::string& param, const std::string& e, const lane_io& io) {
  return io.vec ? "      o_" + param + "." + lanes4[io.l] + " = " + e + ";\n"
                : "      " + param + "[base + c] = " + e + ";\n";
}

// One loop over the staged part: `body` per element (c, and i = base + c, in
// scope); `writes` are staged tensors the body writes back (write_back), `outs`
// the outputs it stores (store_out).
std::string staged(const reduce_layout& lay, const std::function<std::string(const lane_io&)>& body,
                   const std::vector<std::string>& writes, const std::vector<std::string>& outs) {
  const std::string lane = lay.lane(), width = lay.width();
  std::string t = "  if (v4) {\n    for (int c4 = " + lane + "; c4 < cc / 4; c4 += " + width + ") {\n";
  for (auto& P : lay.cache.row_params)
    t += "      const float4 q_" + P + " = reinterpret_cast<const float4*>(sh_" + P + ")[c4];\n";
  for (auto& P : writes) t += "      float4 w_" + P + ";\n";
  for (auto& o : outs) t += "      float4 o_" + o + ";\n";
  for (int l = 0; l < 4; ++l)
    t += "      {\n      const long long c = c4 * 4 + " + std::to_string(l) + ";\n      (void)c;\n" + body({true, l}) +
         "      }\n";
  for (auto& P : writes) t += "      reinterpret_cast<float4*>(sh_" + P + ")[c4] = w_" + P + ";\n";
  for (auto& o : outs) t += "      reinterpret_cast<float4*>(" + o + " + base)[c4] = o_" + o + ";\n";
  t += "    }\n  } else {\n    for (int c = " + lane + "; c < cc; c += " + width + ") {\n" + body({false, 0}) +
       "    }\n  }\n";
  return t;
}

// Shared: the row's tensors into shared memory. Every loop over the staged part
// gives a thread the same elements as its copies, so a thread reads back only what
// it copied: waiting for its own copies is enough, no barrier.
std::string shared_copies(const reduce_parts& rp, const reduce_layout& lay) {
  const std::vector<std::string>& row_params = lay.cache.row_params;
  const std::string C = cached_span(rp, lay.cache), lane = lay.lane(), width = lay.width();
  const int64_t cap = lay.cache.shared_cap();
  std::string t = "  KS_DYNAMIC_SHARED(ks_row);\n";
  t += "  const int cc = (int)(" + C + " < " + std::to_string(cap) + " ? " + C + " : " + std::to_string(cap) + ");\n";
  t += "  const bool v4 = (" + rp.C + " & 3) == 0;  // rows 16-byte aligned: float4 copies, loads and stores\n";
  // In a cluster the block's partial state goes first (16 bytes: the chunk stays
  // aligned), where the other blocks read it.
  if (lay.cache.cluster > 1) t += "  float* const ks_part = reinterpret_cast<float*>(ks_row);\n";
  const std::string first = lay.cache.cluster > 1 ? "4 + " : "";
  for (size_t q = 0; q < row_params.size(); ++q)
    t += "  float* const sh_" + row_params[q] + " = reinterpret_cast<float*>(ks_row) + " + first + std::to_string(q) +
         " * cc;\n";
  t += "  if (v4) {\n    for (int c4 = " + lane + "; c4 < cc / 4; c4 += " + width + ") {\n";
  for (auto& P : row_params) t += "      ks_cp_async16(sh_" + P + " + c4 * 4, " + P + " + base + c4 * 4);\n";
  t += "    }\n  } else {\n    for (int c = " + lane + "; c < cc; c += " + width + ") {\n";
  for (auto& P : row_params) t += "      ks_cp_async4(sh_" + P + " + c, " + P + " + base + c);\n";
  t += "    }\n  }\n  ks_cp_async_wait();\n";
  return t;
}

}  // namespace

// Dynamic shared memory and the copies into it (cuda/shared_rows.cuh). cp.async
// (sm_80 on) keeps every copy in flight without holding a register; older GPUs copy
// through registers. A host build of the source (the tests' emulator) defines
// KS_DYNAMIC_SHARED itself.
std::string shared_row_helpers() { return "\n" + std::string(cuda::shared_rows_cuh()); }

std::string cluster_helpers() {
  // barrier.cluster's release and acquire order the partial states written to shared
  // memory before the barrier against the other blocks' reads after it; mapa gives the
  // generic address of the same place in another block's shared memory. Below sm_90
  // they are declared only: no kernel there calls them (the lowering writes none).
  return "\n" + std::string(cuda::cluster_cuh());
}

int cluster_threads(const lowering_params& p, const lowering_device& dev, const row_cache_layout& c, int64_t row_len) {
  if (c.cluster <= 1 || p.block_size <= 0) return p.block_size;
  const int64_t n = static_cast<int64_t>(c.row_params.size());
  const int64_t chunk = cluster_chunk(row_len, c.cluster);
  // The block's dynamic shared memory at the task's size, its static (the combine's,
  // 1 KiB at most) and what the device reserves a block (1 KiB).
  const int64_t bytes = 16 + 4 * n * std::min(chunk, c.shared_cap()) + 1024 + 1024;
  const int64_t by_shared = std::max<int64_t>(1, dev.shared_per_sm / bytes);
  const int64_t by_threads = std::max<int64_t>(1, dev.max_threads_per_sm / p.block_size);
  if (by_shared >= by_threads) return p.block_size;
  // At most twice block_size: on the H200 a block of 1024 threads with 128 KiB of an
  // instance norm's row ran slower than one of 256 (5.02 against 4.52 ms), where 512
  // gained on the softmax (4.29 against 4.61) and on 64 KiB chunks (5.03 against 5.18).
  const int64_t more = std::min<int64_t>(2, by_threads / by_shared);
  return static_cast<int>(std::min<int64_t>(1024, p.block_size * more) / 32 * 32);
}

std::string cached_span(const reduce_parts& rp, const row_cache_layout& c) { return c.cluster > 1 ? "cn" : rp.C; }

row_cache_layout choose_row_cache(const lowering_params& p, const lowering_device& dev, const reduce_parts& rp,
                                  bool warp, int lanes) {
  row_cache_layout c;
  const reduction_spec& r = rp.r;
  // group_norm's second pass walks a row channel by channel (group_pass2): not cached.
  if (p.row_cache == param::row_cache::none || !(r.normalizes() || rp.epi) || r.groups > 0) return c;
  const std::string pass1 = rp.pro ? rp.load_code : rp.X + "[i]";
  for (auto& [tensor, param] : rp.kp.tensor_param)
    if (param.rfind("in", 0) == 0 && reads_at(pass1, param, "i")) c.row_params.push_back(param);
  for (auto& P : c.row_params)
    if (reads_at(rp.epi_code, P, "i")) c.cached.push_back(P);
  c.keep_value = r.normalizes();
  // Without a prologue the value is the raw element: one array serves both.
  const int64_t arrays = (c.keep_value && (rp.pro || c.cached.empty()) ? 1 : 0) + static_cast<int64_t>(c.cached.size());
  if (arrays <= 0 || arrays > 2 || c.row_params.size() > 2) return {};
  // Only rows that fit whole: measured on an H200, a row of 16384 kept by 512
  // threads (one block an SM, the loads of the next row not overlapping this
  // one's reduction) ran no faster than reading it twice through float4 loads.
  const int64_t kmax = 32 / arrays;
  const int64_t width = warp ? lanes : p.block_size;
  const int64_t need = (rp.row_len + width - 1) / width;
  if ((p.row_cache != param::row_cache::shared || warp) && need <= kmax) {
    c.kind = row_cache_layout::registers;
    c.per_thread = static_cast<int>(std::max<int64_t>(need, 1));
    // The softmax keeps exp(v - the thread's max) in rv, so pass 2 needs no exp
    // (each thread rescales its own values by one factor).
    c.store_exp = c.keep_value && r.op == "softmax";
    return c;
  }
  if (warp || c.row_params.empty() || p.row_cache == param::row_cache::registers) return {};
  c.kind = row_cache_layout::shared;
  // A row longer than a block's staging space: the fewest blocks of a cluster (a power
  // of two) whose chunks fit it, or 8 blocks staging more each, up to what a block may
  // opt into (less its static shared memory: the block combine's, 1 KiB at most).
  const int64_t n = static_cast<int64_t>(c.row_params.size());
  if (p.row_cache == param::row_cache::on_chip && dev.cc_major >= 9 && rp.row_len * n > kSharedRow) {
    int g = 2;
    while (g < kMaxCluster && g * kSharedRow < rp.row_len * n) g *= 2;
    const int64_t chunk = cluster_chunk(rp.row_len, g);
    const int64_t most = (dev.shared_per_block_optin - 1024 - 16) / 4 / n * n;
    if (chunk * n <= most) {
      c.cluster = g;
      c.staged_floats = std::max(kSharedRow, chunk * n);
    }
  }
  // A prologue's value replaces the raw element in place when nothing reads the raw
  // row again, so later loops do not recompute it; the softmax stores exp(v - the
  // thread's max) there too, so pass 2 needs no exp (each thread rescales its own
  // part by one factor).
  c.in_place = r.normalizes() && c.row_params.size() == 1 && !reads_at(rp.epi_code, c.row_params.front(), "i");
  c.store_exp = c.in_place && r.acc == acc_kind::online && r.op == "softmax";
  return c;
}

std::string registers_pass1(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay, std::string& loop) {
  const row_cache_layout& cache = lay.cache;
  const int K = cache.per_thread;
  const bool online = rp.r.acc == acc_kind::online;
  const bool need_rv = cache.keep_value || online;
  std::string t;
  for (auto& P : cache.row_params) t += "  float rc_" + P + "[" + std::to_string(K) + "];\n";
  if (need_rv) t += "  float rv[" + std::to_string(K) + "];\n";
  const std::string each = each_cached(rp, lay);
  t += each + "    const long long i = base + c;\n";
  for (auto& P : cache.row_params) t += "    rc_" + P + "[k] = " + P + "[i];\n";
  t += "    }\n  }\n";
  t += each + "    const long long i = base + c;\n    (void)i;\n";
  if (rp.pro)
    t += chain_holding(cx, rp, false, in_registers(lay)) + "    const float v = " + rp.var.at(rp.r.input) + ";\n";
  else
    t += "    const float v = " + read_at_i(in_registers(lay), rp.X) + ";\n";
  if (need_rv) t += "    rv[k] = v;\n";
  if (!online) t += "    " + rp.a.update + "\n";
  t += "    }\n  }\n";
  if (online) {
    // The cached part's max, then its sum: no branch per element. A thread whose
    // cached elements are all -inf (a masked row) adds exp(-inf) = 0, not
    // exp(-inf - -inf) = NaN.
    t += each + "    m = fmaxf(m, rv[k]);\n    }\n  }\n";
    t += "  const float mref = m == -KS_INF ? 0.0f : m;\n";
    if (cache.store_exp)
      t += each + "    rv[k] = KS_EXP(rv[k] - mref);\n    s += rv[k];\n    }\n  }\n";
    else
      t += each + "    s += KS_EXP(rv[k] - mref);\n    }\n  }\n";
  }
  loop = "  for (long long c = " + lay.lane() + " + (long long)" + std::to_string(K) + " * " + lay.width() + "; c < " +
         rp.C + "; c += " + lay.width() + ")";
  return t;
}

std::string registers_pass2(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay,
                            const std::string& loop) {
  std::string t = pass2_head(rp, lay);
  t += "#pragma unroll\n  for (int k = 0; k < " + std::to_string(lay.cache.per_thread) + "; ++k) {\n" + cached_c(lay) +
       "    if (c < " + rp.C + ") {\n";
  if (rp.r.normalizes()) {
    t += "    const float v = rv[k];\n" + pass2_body(cx, rp, "base + c", lay.cache.store_exp ? "v * kt" : "",
                                                     chain_holding(cx, rp, true, in_registers(lay)));
  } else {
    t += "    const long long i = base + c;\n" + chain_holding(cx, rp, true, in_registers(lay));
    for (auto& [v, param] : rp.epi_out) t += "    " + param + "[i] = " + rp.epi_var.at(v) + ";\n";
  }
  t += "    }\n  }\n";
  return t + pass2_from(cx, rp, loop);
}

std::string shared_pass1(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay, std::string& loop) {
  const row_cache_layout& cache = lay.cache;
  const bool online = rp.r.acc == acc_kind::online;
  cx.uses_smem = true;
  std::string t = shared_copies(rp, lay);
  // Pass 1 over the staged part, writing the prologue's value in place when the
  // layout says so.
  const std::string X0 = cache.row_params.front();
  const bool write_value = cache.in_place && rp.pro;
  t += staged(lay,
              [&](const lane_io& io) {
                return staged_value(cx, rp, lay, io, false) + (write_value ? write_back(X0, "v", io) : "") + "      " +
                       (online ? std::string("m = fmaxf(m, v);") : rp.a.update) + "\n";
              },
              write_value ? std::vector<std::string>{X0} : std::vector<std::string>{}, {});
  if (online) {
    // The staged part's max, then its sum: no branch per element. A thread whose
    // staged elements are all -inf (a masked row) adds exp(-inf) = 0, not
    // exp(-inf - -inf) = NaN.
    t += "  const float mref = m == -KS_INF ? 0.0f : m;\n";
    t += staged(lay,
                [&](const lane_io& io) {
                  if (!cache.store_exp)
                    return staged_value(cx, rp, lay, io, cache.in_place) + "      s += KS_EXP(v - mref);\n";
                  return staged_value(cx, rp, lay, io, true) +
                         "      const float e = KS_EXP(v - mref);\n      s += e;\n" + write_back(X0, "e", io);
                },
                cache.store_exp ? std::vector<std::string>{X0} : std::vector<std::string>{}, {});
  }
  loop = "  for (long long c = cc + " + lay.lane() + "; c < " + cached_span(rp, cache) + "; c += " + lay.width() + ")";
  return t;
}

std::string shared_pass2(lowering_context& cx, const reduce_parts& rp, const reduce_layout& lay,
                         const std::string& loop) {
  // Pass 2: the staged part from shared memory (float4 stores where rows are
  // 16-byte aligned), then the rest from memory.
  const row_cache_layout& cache = lay.cache;
  std::vector<std::string> outs;
  if (!rp.epi) outs.push_back(rp.OUT);
  for (auto& [v, param] : rp.epi_out) outs.push_back(param);
  std::string t = pass2_head(rp, lay);
  t += staged(
      lay,
      [&](const lane_io& io) {
        std::string b;
        if (rp.r.normalizes()) {
          b = staged_value(cx, rp, lay, io, cache.in_place);
          const std::string yv = cache.store_exp ? std::string("v * kt") : rp.y;
          if (!rp.epi) return b + store_out(rp.OUT, yv, io);
          b += "      const float red = " + yv + ";\n";
        }
        b += "      const long long i = base + c;\n      (void)i;\n" + chain_holding(cx, rp, true, in_shared(lay, io));
        for (auto& [v, param] : rp.epi_out) b += store_out(param, rp.epi_var.at(v), io);
        return b;
      },
      {}, outs);
  return t + pass2_from(cx, rp, loop);
}

}  // namespace ks::rules
