#include "coder/rules/text/combine.hpp"

#include "coder/rules/text/device_helpers.hpp"
#include "coder/rules/text/kernel_text.hpp"

namespace ks::rules {

namespace {

// Whether (vb, ib) beats the state (a, ai) for argmax (`greater`) or argmin: NaN first
// (as torch, a NaN is the extreme), then the value, then the smaller index (the first
// occurrence). Indices are ints' bits in floats: compared as ints, never computed on.
// Bitwise & and | on the comparisons, not && || ?:, so that nvcc makes predicates of
// them rather than branches: with branches after each load, the next (unrolled) load
// waited for them, one load in flight a thread (KernelBench's argmax over a middle dim
// ran at 0.74x of eager beside a sum of the same shape at the DRAM floor).
// `st` names the state (a, ai).
std::string arg_beats(bool greater, const std::vector<std::string>& st, const std::string& vb, const std::string& ib) {
  const std::string &a = st[0], &ai = st[1];
  const std::string cmp = greater ? " > " : " < ";
  const std::string vn = "(" + vb + " != " + vb + ")", an = "(" + a + " != " + a + ")",
                    lt = "(__float_as_int(" + ib + ") < __float_as_int(" + ai + "))";
  return "((" + vn + " & (!" + an + " | " + lt + ")) | (!" + vn + " & !" + an + " & ((" + vb + cmp + a + ") | ((" + vb +
         " == " + a + ") & " + lt + "))))";
}

}  // namespace

acc_text acc_of(const reduction_spec& r, const std::string& suffix) {
  const std::string a = "a" + suffix;
  switch (r.acc) {
    case acc_kind::sum:
      return {{a}, {"0.0f"}, a + (r.op == "norm2" ? " += v * v;" : r.op == "norm1" ? " += fabsf(v);" : " += v;")};
    case acc_kind::max:
      return {{a}, {"-KS_INF"}, a + " = fmaxf(" + a + ", v);"};
    case acc_kind::min:
      return {{a}, {"KS_INF"}, a + " = fminf(" + a + ", v);"};
    case acc_kind::online:
      // -inf (a masked element) adds nothing: exp(-inf - -inf) would be NaN. One exp
      // an element and selects, no branch: the smaller of v and m minus the larger
      // (a new maximum rescales s and adds 1, any other element adds its exp). With
      // an if/else, the lanes of a warp that found a new maximum and those that did
      // not ran both sides, two exps an element (KernelBench's cross-entropy, 16
      // elements a thread: ~3 new maxima each, 60 instructions an element, its row
      // logsumexp issue-bound at 2 TB/s). The same values as the if/else.
      {
        const std::string m = "m" + suffix, s = "s" + suffix;
        return {{m, s},
                {"-KS_INF", "0.0f"},
                "{ const bool up = v > " + m + "; const float e = KS_EXP(up ? " + m + " - v : v - " + m + "); " + s +
                    " = up ? " + s + " * e + 1.0f : (v != -KS_INF ? " + s + " + e : " + s + "); " + m +
                    " = up ? v : " + m + "; }"};
      }
    case acc_kind::moments: {
      const std::string s1 = "s1" + suffix, s2 = "s2" + suffix;
      return {{s1, s2}, {"0.0f", "0.0f"}, "{ const float d = v - shift; " + s1 + " += d; " + s2 + " += d * d; }"};
    }
    case acc_kind::arg: {
      // The loop's `c` is the element's index along the reduced dim.
      const bool greater = r.op == "argmax";
      const std::vector<std::string> st = {a, "ai" + suffix};
      return {st,
              {greater ? "-KS_INF" : "KS_INF", "__int_as_float(0x7fffffff)"},
              "{ const float ci = __int_as_float((int)c); if (" + arg_beats(greater, st, "v", "ci") + ") { " + st[0] +
                  " = v; " + st[1] + " = ci; } }"};
    }
    case acc_kind::welford: {
      // __fdividef (2 ulp): the mean's error from it stays far below the rounding of
      // the sums themselves, and M2's update d * (v - wm) stays consistent with it.
      const std::string wn = "wn" + suffix, wm = "wm" + suffix, w2 = "w2" + suffix;
      return {{wn, wm, w2},
              {"0.0f", "0.0f", "0.0f"},
              "{ " + wn + " += 1.0f; const float d = v - " + wm + "; " + wm + " += __fdividef(d, " + wn + "); " + w2 +
                  " += d * (v - " + wm + "); }"};
    }
  }
  return {};
}

std::string declare_state(const acc_text& a) {
  std::string t;
  for (size_t q = 0; q < a.state.size(); ++q) t += "  float " + a.state[q] + " = " + a.identity[q] + ";\n";
  return t;
}

std::string welford_helpers() {
  // Chan et al.'s merge of two (count, mean, M2) states, written symmetrically
  // (__fmul_rn is never contracted into an fma) so that the two lanes of a shuffle
  // end with the same bits.
  return "\n" + std::string(cuda::welford_cuh());
}

std::string merge(const reduction_spec& r, const acc_text& a, const std::vector<std::string>& other) {
  const std::vector<std::string>& st = a.state;
  switch (r.acc) {
    case acc_kind::sum:
      return st[0] + " += " + other[0] + ";";
    case acc_kind::max:
      return st[0] + " = fmaxf(" + st[0] + ", " + other[0] + ");";
    case acc_kind::min:
      return st[0] + " = fminf(" + st[0] + ", " + other[0] + ");";
    case acc_kind::online:
      return "ks_ms_merge(" + st[0] + ", " + st[1] + ", " + other[0] + ", " + other[1] + ");";
    case acc_kind::moments:
      return st[0] + " += " + other[0] + "; " + st[1] + " += " + other[1] + ";";
    case acc_kind::welford:
      return "ks_wf_merge(" + st[0] + ", " + st[1] + ", " + st[2] + ", " + other[0] + ", " + other[1] + ", " +
             other[2] + ");";
    case acc_kind::arg:
      return "if (" + arg_beats(r.op == "argmax", st, other[0], other[1]) + ") { " + st[0] + " = " + other[0] + "; " +
             st[1] + " = " + other[1] + "; }";
  }
  return {};
}

std::string warp_combine(const reduction_spec& r, const acc_text& a, int lanes) {
  std::string s = "  for (int o = " + std::to_string(lanes / 2) + "; o > 0; o >>= 1) {\n";
  std::vector<std::string> other;
  for (auto& v : a.state) {
    s += "    const float o_" + v + " = __shfl_xor_sync(0xffffffffu, " + v + ", o);\n";
    other.push_back("o_" + v);
  }
  s += "    " + merge(r, a, other) + "\n  }\n";
  return s;
}

std::string block_combine(const reduction_spec& r, const acc_text& a) {
  std::string s = warp_combine(r, a);
  s += "  {\n";
  for (auto& v : a.state) s += "    __shared__ float sh_" + v + "[32];\n";
  s += "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n    if (lane == 0) {";
  for (auto& v : a.state) s += " sh_" + v + "[warp] = " + v + ";";
  s += " }\n    __syncthreads();\n";
  for (size_t k = 0; k < a.state.size(); ++k)
    s += "    " + a.state[k] + " = lane < (int)(blockDim.x >> 5) ? sh_" + a.state[k] + "[lane] : " + a.identity[k] +
         ";\n";
  s += "  }\n";
  s += warp_combine(r, a);
  return s;
}

std::string finish(const reduction_spec& r, const acc_text& a, const std::string& count) {
  const std::vector<std::string>& st = a.state;
  if (r.op == "sum" || r.op == "max" || r.op == "min") return st[0];
  if (r.acc == acc_kind::arg) return "(long long)__float_as_int(" + st[1] + ")";
  if (r.op == "mean") return st[0] + " / (float)" + count;
  if (r.op == "norm1") return st[0];
  if (r.op == "norm2") return "sqrtf(" + st[0] + ")";
  if (r.op == "lse") return "(" + st[0] + " == -KS_INF ? -KS_INF : " + st[0] + " + logf(" + st[1] + "))";
  if (r.op != "var" && r.op != "std") return "0.0f";
  const std::string var = r.acc == acc_kind::welford
                              ? "fmaxf(" + st[2] + ", 0.0f) / (float)(" + count + " - " + flit(r.correction) + ")"
                              : "fmaxf(" + st[1] + " - " + st[0] + " * " + st[0] + " / (float)" + count +
                                    ", 0.0f) / (float)(" + count + " - " + flit(r.correction) + ")";
  if (r.op == "var") return var;
  if (r.op == "std") return "sqrtf(" + var + ")";
  return "0.0f";
}

}  // namespace ks::rules
