// Tests of features/: the CUDA lexer, the PTX scanner and the deterministic feature
// extractor, against a corpus of hand-written kernels in tests/data/kernels (each
// NAME.cu with NAME.expected.yaml listing its structure class and the expected value
// of every feature decidable from the file). The corpus is compiled to PTX with NVRTC
// (no GPU needed), as the GPU worker would, and extracted both with and without PTX.
//
// KS_FEATURES_DUMP=1 prints every kernel's features (for writing new expectations).

#include <catch2/catch.hpp>

#include <nvrtc.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "features/cuda_lexer.hpp"
#include "features/feature_extractor.hpp"
#include "features/ptx_scanner.hpp"
#include "plan/kernel_signatures.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "plan/plan_validator.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const std::string corpus_dir = std::string(KS_SOURCE_DIR) + "/tests/data/kernels";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> corpus_names() {
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(corpus_dir))
    if (e.path().extension() == ".cu") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> nvrtc_options() {
  std::vector<std::string> options = {"-arch=compute_90", "-std=c++17"};
  std::string dirs = KS_FEATURES_TEST_CUDA_INCLUDES;
  for (size_t start = 0; start <= dirs.size();) {
    size_t bar = dirs.find('|', start);
    std::string dir = dirs.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    if (!dir.empty()) options.push_back("--include-path=" + dir);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return options;
}

// PTX of `source`, compiled with NVRTC; false (and the log in `ptx`) when it does not
// compile.
bool try_compile_ptx(const std::string& name, const std::string& source, const std::vector<std::string>& extra,
                     std::string& ptx_or_log) {
  auto options = nvrtc_options();
  options.insert(options.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (auto& o : options) argv.push_back(o.c_str());
  nvrtcProgram prog;
  REQUIRE(nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr) == NVRTC_SUCCESS);
  nvrtcResult rc = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  if (rc != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    ptx_or_log = log;
    return false;
  }
  size_t ptx_size = 0;
  nvrtcGetPTXSize(prog, &ptx_size);
  std::string ptx(ptx_size, '\0');
  nvrtcGetPTX(prog, ptx.data());
  nvrtcDestroyProgram(&prog);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  ptx_or_log = std::move(ptx);
  return true;
}

// PTX of `source`; FAILs with NVRTC's log when it does not compile.
std::string compile_ptx(const std::string& name, const std::string& source,
                        const std::vector<std::string>& extra = {}) {
  std::string out;
  if (!try_compile_ptx(name, source, extra, out)) FAIL(name << ".cu does not compile:\n" << out);
  return out;
}

struct expectation {
  std::string structure_class;
  std::string dtype = "float32";
  std::map<std::string, double> features;
};

expectation load_expectation(const std::string& name) {
  expectation e;
  YAML::Node y = YAML::LoadFile(corpus_dir + "/" + name + ".expected.yaml");
  const YAML::Node cls = y["structure_class"];
  REQUIRE(cls);
  e.structure_class = cls.as<std::string>();
  const YAML::Node dtype = y["dtype"];
  if (dtype) e.dtype = dtype.as<std::string>();
  const YAML::Node features = y["features"];
  REQUIRE(features);
  REQUIRE(features.IsMap());
  for (auto it = features.begin(); it != features.end(); ++it)
    e.features[it->first.as<std::string>()] = it->second.as<double>();
  return e;
}

struct corpus_entry {
  std::string name;
  std::string source;
  std::string ptx;
  expectation expect;
};

// Compiled once for all test cases.
const std::vector<corpus_entry>& corpus() {
  static const std::vector<corpus_entry> entries = [] {
    std::vector<corpus_entry> out;
    for (auto& name : corpus_names()) {
      corpus_entry e;
      e.name = name;
      e.source = read_text(corpus_dir + "/" + name + ".cu");
      e.ptx = compile_ptx(name, e.source);
      e.expect = load_expectation(name);
      out.push_back(std::move(e));
    }
    return out;
  }();
  return entries;
}

std::string format(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

void dump(const std::string& name, const code_features& f, const char* mode) {
  std::cout << "== " << name << " (" << mode << ") structure_class: " << f.structure_class << "\n";
  for (auto& n : code_feature_names()) {
    auto it = f.values.find(n);
    if (it != f.values.end()) std::cout << "  " << n << ": " << format(it->second) << "\n";
  }
}

// Compares extracted features with an expectation; returns the mismatches, each
// naming the kernel and the feature.
std::vector<std::string> mismatches(const std::string& name, const code_features& f, const expectation& e,
                                    const std::set<std::string>& skip = {}) {
  std::vector<std::string> out;
  if (f.structure_class != e.structure_class)
    out.push_back(name + ": structure_class expected " + e.structure_class + ", got " + f.structure_class);
  for (auto& [feature, value] : e.features) {
    if (skip.count(feature)) continue;
    auto it = f.values.find(feature);
    if (it == f.values.end()) {
      out.push_back(name + ": " + feature + " expected " + format(value) + ", but it is absent");
    } else if (it->second != value) {
      out.push_back(name + ": " + feature + " expected " + format(value) + ", got " + format(it->second));
    }
  }
  return out;
}

bool dump_requested() {
  const char* d = std::getenv("KS_FEATURES_DUMP");
  return d && *d && std::string(d) != "0";
}

// The features every extraction sets, plan or not (docs/features.md).
const std::set<std::string>& always_present() {
  static const std::set<std::string> s = [] {
    std::set<std::string> names(code_feature_names().begin(), code_feature_names().end());
    for (const char* n :
         {"plan_kernel_launches", "plan_library_steps", "registers", "block_size", "grid_size", "cuda_graph_eligible"})
      names.erase(n);
    return names;
  }();
  return s;
}

}  // namespace

// ===========================================================================
// Lexer and PTX scanner.

TEST_CASE("lexer: comments and strings are dropped, pragmas and defines kept", "[features][lexer]") {
  using namespace ks::features;
  auto lx = lex_cuda(R"(#define TILE 16
#define IDX(r, c) ((r) * N + (c))
// __syncthreads() in a comment
/* __shfl_xor_sync( in a block
   comment */ const char* s = "atomicAdd(";
#pragma unroll 4
for (int k = 0; k < TILE; ++k) acc += a[k] >> 1;
)");
  std::vector<std::string> texts;
  for (auto& t : lx.tokens) texts.push_back(t.text);
  CHECK(std::count(texts.begin(), texts.end(), "__syncthreads") == 0);
  CHECK(std::count(texts.begin(), texts.end(), "__shfl_xor_sync") == 0);
  CHECK(std::count(texts.begin(), texts.end(), "atomicAdd") == 0);
  REQUIRE(lx.defines.count("TILE") == 1);
  CHECK(lx.defines.at("TILE").at(0).text == "16");
  CHECK(lx.defines.count("IDX") == 0);  // function-like macros are not recorded
  auto pragma =
      std::find_if(lx.tokens.begin(), lx.tokens.end(), [](const token& t) { return t.kind == tok_kind::pragma; });
  REQUIRE(pragma != lx.tokens.end());
  CHECK(pragma->text == "unroll 4");
  CHECK(pragma->line == 6);
  CHECK((pragma + 1)->text == "for");
  CHECK(std::count(texts.begin(), texts.end(), ">>") == 1);
  CHECK(std::count(texts.begin(), texts.end(), "++") == 1);
}

TEST_CASE("ptx scanner: vector accesses, barriers, shuffles, atomics, tensor ops, local depot", "[features][ptx]") {
  using namespace ks::features;
  auto s = scan_ptx(R"(.version 8.8
.target sm_90
.visible .entry k(
  .param .u64 k_param_0
)
{
  .local .align 4 .b8 __local_depot0[256];
  .shared .align 4 .b8 _ZZ1kE4tile[1024];
  ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
  ld.global.v2.u16 {%h1, %h2}, [%rd2];   // 32 bits: not a wide access
  @%p1 st.global.v2.f32 [%rd3], {%f1, %f2};
  st.global.f32 [%rd4], %f5;
  ld.shared.f32 %f6, [%r1];
  bar.sync 0;
  shfl.sync.bfly.b32 %r2|%p2, %r3, 16, 31, -1;
  atom.global.add.f32 %f7, [%rd5], %f6;
  red.shared.add.u32 [%r4], 1;
  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2}, {%r3}, {%f1,%f2,%f3,%f4};
  div.approx.f32 %f8, %f1, %f2;
  ex2.approx.ftz.f32 %f9, %f8;
  st.local.u32 [%rd6], %r5;
}
)");
  CHECK(s.present);
  CHECK(s.entries == 1);
  CHECK(s.global_loads == 2);
  CHECK(s.vector_global_loads == 1);
  CHECK(s.global_stores == 2);
  CHECK(s.vector_global_stores == 1);
  CHECK(s.max_vector_lanes == 4);
  CHECK(s.declares_shared);
  CHECK(s.barriers == 1);
  CHECK(s.shuffles == 1);
  CHECK(s.atomics == 2);
  CHECK(s.tensor_ops == 1);
  CHECK(s.approx_math == 1);  // div.approx; ex2.approx is also what accurate expf uses
  CHECK(s.local_accesses == 1);
  CHECK(s.max_local_depot == 256);
  CHECK_FALSE(scan_ptx("").present);
  CHECK_FALSE(scan_ptx("just some text\nwith lines").present);
}

// ===========================================================================
// The corpus.

TEST_CASE("corpus: at least 30 kernels, each with >= 12 expected features", "[features][corpus]") {
  auto names = corpus_names();
  CHECK(names.size() >= 30);
  std::set<std::string> known(code_feature_names().begin(), code_feature_names().end());
  std::set<std::string> classes(structure_classes().begin(), structure_classes().end());
  std::set<std::string> classes_seen;
  for (auto& name : names) {
    INFO(name);
    REQUIRE(fs::exists(corpus_dir + "/" + name + ".expected.yaml"));
    expectation e = load_expectation(name);
    CHECK(e.features.size() >= 12);
    CHECK(classes.count(e.structure_class) == 1);
    classes_seen.insert(e.structure_class);
    for (auto& [f, v] : e.features) {
      INFO(f);
      CHECK(known.count(f) == 1);
    }
  }
  CHECK(classes_seen == classes);  // every class is exercised
}

TEST_CASE("corpus: every kernel compiles with NVRTC and matches its expectations", "[features][corpus][nvrtc]") {
  int failures = 0;
  for (auto& c : corpus()) {
    feature_input in;
    in.source = c.source;
    in.ptx = c.ptx;
    in.dtype = c.expect.dtype;
    code_features f = extract_features(in);
    if (dump_requested()) dump(c.name, f, "with PTX");
    for (auto& m : mismatches(c.name, f, c.expect)) {
      ++failures;
      FAIL_CHECK(m);
    }
    // Every feature that needs no plan or resource report is present.
    for (auto& n : always_present()) {
      INFO(c.name << ": " << n);
      CHECK(f.values.count(n) == 1);
    }
    for (auto& [n, v] : f.values) {
      INFO(c.name << ": " << n);
      CHECK(std::find(code_feature_names().begin(), code_feature_names().end(), n) != code_feature_names().end());
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("corpus: without PTX the source analysis reaches the same answers", "[features][corpus]") {
  // Features with PTX evidence fall back to the source when there is no PTX. Only the
  // local-memory size can differ: the source sees local arrays, not what the compiler
  // adds (sinf's slow path, for one) or keeps in registers.
  int failures = 0;
  for (auto& c : corpus()) {
    feature_input in;
    in.source = c.source;
    in.dtype = c.expect.dtype;
    code_features f = extract_features(in);
    if (dump_requested()) dump(c.name, f, "source only");
    for (auto& m : mismatches(c.name, f, c.expect, {"spills"})) {
      ++failures;
      FAIL_CHECK("(source only) " << m);
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("corpus: local memory is seen in the PTX and in the source", "[features][corpus]") {
  for (auto& c : corpus()) {
    if (c.name != "local_array_spill") continue;
    feature_input in;
    in.source = c.source;
    CHECK(extract_features(in).values.at("spills") == 256);  // float window[64]
    in.ptx = c.ptx;
    CHECK(extract_features(in).values.at("spills") == 256);  // __local_depot0[256]
  }
}

// ===========================================================================
// Determinism and robustness.

TEST_CASE("extraction is deterministic", "[features][determinism]") {
  for (auto& c : corpus()) {
    feature_input in;
    in.source = c.source;
    in.ptx = c.ptx;
    code_features a = extract_features(in);
    code_features b = extract_features(in);
    feature_input copy = in;  // a fresh copy of the same text
    code_features d = extract_features(copy);
    INFO(c.name);
    CHECK(a == b);
    CHECK(a == d);
  }
}

TEST_CASE("robustness: empty, kernel-less and garbage input", "[features][robustness]") {
  auto check_defaults = [](const code_features& f) {
    CHECK(f.structure_class == "streaming");
    CHECK(f.values.at("kernel_count") == 0);
    CHECK(f.values.at("is_pointwise") == 0);
    CHECK(f.values.at("has_reduction") == 0);
    CHECK(f.values.at("vector_width") == 1);
    CHECK(f.values.at("reuse_factor") == 1);
    CHECK(f.values.at("transcendental_count") == 0);
    CHECK(f.values.count("registers") == 0);
    CHECK(f.values.count("block_size") == 0);
    CHECK(f.values.count("plan_kernel_launches") == 0);
    for (auto& n : always_present()) {
      INFO(n);
      CHECK(f.values.count(n) == 1);
    }
  };
  SECTION("empty") { check_defaults(extract_features(feature_input{})); }
  SECTION("host code only") {
    feature_input in;
    in.source = "#include <cstdio>\nint main() { float x[4] = {1,2,3,4}; printf(\"%f\", x[0]); return 0; }\n";
    check_defaults(extract_features(in));
  }
  SECTION("device helpers but no kernel") {
    feature_input in;
    in.source = "__device__ float sq(float v) { return v * v; }\n";
    code_features f = extract_features(in);
    CHECK(f.values.at("kernel_count") == 0);
    CHECK(f.structure_class == "streaming");
  }
  SECTION("garbage") {
    for (const char* text : {"}}}{{{ ((( ]]] ;;; <<<>>> ### \"unterminated", "__global__", "__global__ void (",
                             "extern \"C\" __global__ void k(float* x) { x[ = ; for (;;) { if ( } while",
                             "__global__ void k() { for (int i = 0; i < ; ) x[i][][ = y[[i]]; }",
                             "template <int N> __global__ void k(float* x) { x[N] = x[N >> 1] >>= 2; }",
                             "\x01\x02\xff\xfe garbage \x00 bytes"}) {
      feature_input in;
      in.source = text;
      in.ptx = text;
      code_features f;
      REQUIRE_NOTHROW(f = extract_features(in));
      CHECK(std::find(structure_classes().begin(), structure_classes().end(), f.structure_class) !=
            structure_classes().end());
    }
  }
  SECTION("every prefix of every corpus kernel") {
    // Truncated sources (as an LLM's cut-off reply would give) never crash and always
    // give the full set of features.
    for (auto& c : corpus()) {
      for (size_t cut = 0; cut < c.source.size(); cut += 7) {
        feature_input in;
        in.source = c.source.substr(0, cut);
        in.ptx = c.ptx.substr(0, cut * 3);
        code_features f;
        REQUIRE_NOTHROW(f = extract_features(in));
        for (auto& n : always_present()) {
          INFO(c.name << " cut at " << cut << ": " << n);
          CHECK(f.values.count(n) == 1);
        }
      }
    }
  }
  SECTION("pathological nesting and length") {
    // Deep recursion must not overflow the stack: expression trees and statement
    // nesting are cut, variable chains bounded.
    auto kernel = [](const std::string& body) {
      return "extern \"C\" __global__ void k(float* x, int n) {\n" + body + "\n}\n";
    };
    std::vector<std::string> sources;
    sources.push_back(kernel("x[0] = " + std::string(100000, '-') + "x[1];"));
    sources.push_back(kernel("x[0] = " + std::string(50000, '(') + "x[1]" + std::string(50000, ')') + ";"));
    sources.push_back(kernel(std::string(50000, '{') + "x[0] = 1;" + std::string(50000, '}')));
    std::string chain = "x[0] = x[1]";
    for (int i = 0; i < 20000; ++i) chain += " + x[" + std::to_string(i % 7) + "]";
    sources.push_back(kernel(chain + ";"));
    std::string vars = "int v0 = threadIdx.x;\n";
    for (int i = 1; i < 5000; ++i) vars += "int v" + std::to_string(i) + " = v" + std::to_string(i - 1) + " + 1;\n";
    sources.push_back(kernel(vars + "x[v4999] = 0.0f;"));
    std::string ifs;
    for (int i = 0; i < 20000; ++i) ifs += "if (n > " + std::to_string(i) + ") ";
    sources.push_back(kernel(ifs + "x[threadIdx.x] = 0.0f;"));
    std::string assigns = "x[0]";
    for (int i = 0; i < 20000; ++i) assigns += " = x[0]";
    sources.push_back(kernel(assigns + ";"));
    sources.push_back(kernel("x[0] = " + std::string(30000, '*') + "x;"));
    for (auto& src : sources) {
      feature_input in;
      in.source = src;
      code_features f;
      REQUIRE_NOTHROW(f = extract_features(in));
      CHECK(f.values.at("kernel_count") == 1);
    }
  }
  SECTION("mutated corpus kernels") {
    // Deterministic mutations: a span deleted, a span duplicated elsewhere, a
    // character replaced by a bracket. Whatever comes out, nothing throws.
    uint64_t state = 0x9e3779b97f4a7c15ull;
    auto next = [&](size_t bound) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return bound == 0 ? size_t{0} : static_cast<size_t>((state >> 33) % bound);
    };
    const char brackets[] = "{}()[]<>;,=*&";
    for (auto& c : corpus()) {
      for (int m = 0; m < 40; ++m) {
        std::string s = c.source;
        size_t a = next(s.size()), len = next(60);
        switch (m % 3) {
          case 0:
            s.erase(a, len);
            break;
          case 1:
            s.insert(next(s.size()), s.substr(a, len));
            break;
          default:
            for (int k = 0; k < 5 && !s.empty(); ++k) s[next(s.size())] = brackets[next(sizeof(brackets) - 1)];
        }
        feature_input in;
        in.source = s;
        code_features f;
        REQUIRE_NOTHROW(f = extract_features(in));
        INFO(c.name << " mutation " << m);
        CHECK(f.values.size() >= always_present().size());
      }
    }
  }
}

// ===========================================================================
// Individual heuristics on small inline kernels (source only).

namespace {

code_features features_of(const std::string& body, const std::string& params = "float* x, float* y, int n") {
  feature_input in;
  in.source = "extern \"C\" __global__ void k(" + params + ") {\n" + body + "\n}\n";
  return extract_features(in);
}

double value(const code_features& f, const std::string& name) { return f.values.at(name); }

}  // namespace

TEST_CASE("heuristics: divergent branches", "[features][heuristics]") {
  const std::string pre =
      "int i = blockIdx.x * blockDim.x + threadIdx.x; int lane = threadIdx.x & 31;"
      " int warp = threadIdx.x / 32;\n";
  CHECK(value(features_of(pre + "if (lane < 16) y[i] = x[i];"), "divergent_branches") == 1);
  CHECK(value(features_of(pre + "if (threadIdx.x & 1) y[i] = x[i];"), "divergent_branches") == 1);
  CHECK(value(features_of(pre + "switch (threadIdx.x % 4) { case 0: y[i] = 1; break; default: y[i] = 2; }"),
              "divergent_branches") == 1);
  // Elections, warp-uniform tests, bounds checks, data and conditional expressions: no.
  CHECK(value(features_of(pre + "if (lane == 0) y[warp] = x[i];"), "divergent_branches") == 0);
  CHECK(value(features_of(pre + "if (warp == 0) y[i] = x[i];"), "divergent_branches") == 0);
  CHECK(value(features_of(pre + "if (threadIdx.x % 32 == 0) y[warp] = x[i];"), "divergent_branches") == 0);
  CHECK(value(features_of(pre + "if (i < n) y[i] = x[i];"), "divergent_branches") == 0);
  CHECK(value(features_of(pre + "if (x[i] > 0.0f) y[i] = x[i];"), "divergent_branches") == 0);
  CHECK(value(features_of(pre + "y[i] = lane < 16 ? x[i] : 0.0f;"), "divergent_branches") == 0);
}

TEST_CASE("heuristics: bounds checks", "[features][heuristics]") {
  const std::string pre = "int i = blockIdx.x * blockDim.x + threadIdx.x; int tid = threadIdx.x;\n";
  CHECK(value(features_of(pre + "if (i < n) y[i] = x[i];"), "has_bounds_check") == 1);
  CHECK(value(features_of(pre + "if (i >= n) return; y[i] = x[i];"), "has_bounds_check") == 1);
  CHECK(value(features_of(pre + "for (int j = tid; j < n; j += blockDim.x) y[j] = x[j];"), "has_bounds_check") == 1);
  CHECK(value(features_of("#define N 4096\n" + pre + "if (i < N) y[i] = x[i];"), "has_bounds_check") == 1);
  CHECK(value(features_of(pre + "y[i] = i < n ? x[i] : 0.0f;"), "has_bounds_check") == 1);
  // Not bounds checks: the block's own size, a constant with a block-local index, a
  // tree stride, equality.
  CHECK(value(features_of(pre + "if (tid < blockDim.x / 2) y[tid] = x[tid];"), "has_bounds_check") == 0);
  CHECK(value(features_of(pre + "if (tid < 32) y[tid] = x[tid];"), "has_bounds_check") == 0);
  CHECK(value(features_of(pre + "for (int s = blockDim.x / 2; s > 0; s >>= 1) if (tid < s) y[tid] += y[tid + s];"),
              "has_bounds_check") == 0);
  CHECK(value(features_of(pre + "if (i == n - 1) y[0] = x[i];"), "has_bounds_check") == 0);
}

TEST_CASE("heuristics: pointwise, broadcast and permutation", "[features][heuristics]") {
  const std::string pre = "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;\n";
  CHECK(value(features_of(pre + "y[i] = x[i] * 2.0f;"), "is_pointwise") == 1);
  CHECK(value(features_of(pre + "y[i] = x[i] * x[0];"), "is_pointwise") == 1);   // broadcast scalar
  CHECK(value(features_of(pre + "x[i] = x[i] + 1.0f;"), "is_pointwise") == 1);   // in place
  CHECK(value(features_of(pre + "y[i] = x[n - 1 - i];"), "is_pointwise") == 0);  // reversal
  CHECK(value(features_of(pre + "y[i] = x[i] + x[i + 1];"), "is_pointwise") == 0);
  code_features f = features_of(pre + "float s = 0.0f; for (int j = 0; j < n; ++j) s += x[j]; y[i] = s;");
  CHECK(value(f, "is_pointwise") == 0);
  CHECK(f.structure_class == "reduction");
}

TEST_CASE("heuristics: stencils and windows", "[features][heuristics]") {
  const std::string pre = "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < 2 || i >= n - 2) return;\n";
  code_features f3 = features_of(pre + "y[i] = x[i - 1] + x[i] + x[i + 1];");
  CHECK(value(f3, "stencil_or_conv") == 1);
  CHECK(value(f3, "reuse_factor") == 3);
  CHECK(f3.structure_class == "reuse");
  // Two adjacent reads (offsets of a segment) are not a stencil.
  CHECK(value(features_of(pre + "y[i] = x[i + 1] - x[i];"), "stencil_or_conv") == 0);
  // A window loop with a run-time radius.
  code_features fw = features_of(pre + "float s = 0; for (int d = -r; d <= r; ++d) s += x[i + d]; y[i] = s;",
                                 "const float* x, float* y, int n, int r");
  CHECK(value(fw, "stencil_or_conv") == 1);
  CHECK(value(fw, "reuse_factor") == 3);  // unknown trip count: 3 taps assumed
  // A thread handling 4 consecutive elements is not a stencil.
  CHECK(value(features_of("int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4; if (i + 3 < n) "
                          "y[i / 4] = x[i] + x[i + 1] + x[i + 2] + x[i + 3];"),
              "stencil_or_conv") == 0);
}

TEST_CASE("heuristics: large kernels are analysed quickly", "[features][heuristics][performance]") {
  // An 801-tap stencil and a 64-accumulator unrolled GEMM: quadratic algorithms would
  // take seconds here.
  std::string stencil = "int i = blockIdx.x * blockDim.x + threadIdx.x; float s = 0.0f;\n";
  for (int d = -400; d <= 400; ++d)
    stencil += "s += x[i + " + std::to_string(d) + "] * " + std::to_string(d) + ".0f;\n";
  stencil += "y[i] = s;";
  std::string gemm = "int r = blockIdx.y * 16 + threadIdx.y; int c = blockIdx.x * 16 + threadIdx.x;\n";
  for (int a = 0; a < 64; ++a) gemm += "float acc" + std::to_string(a) + " = 0.0f;\n";
  gemm += "for (int k = 0; k < K; ++k) {\n";
  for (int a = 0; a < 64; ++a)
    gemm += "acc" + std::to_string(a) + " += A[(r * 64 + " + std::to_string(a) + ") * K + k] * B[k * N + c];\n";
  gemm += "}\n";
  for (int a = 0; a < 64; ++a)
    gemm += "C[(r * 64 + " + std::to_string(a) + ") * N + c] = acc" + std::to_string(a) + ";\n";
  auto start = std::chrono::steady_clock::now();
  code_features fs = features_of(stencil);
  code_features fg = features_of(gemm, "const float* A, const float* B, float* C, int N, int K");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(value(fs, "reuse_factor") == 801);
  CHECK(value(fs, "stencil_or_conv") == 1);
  CHECK(value(fg, "naive_gemm") == 1);
  CHECK(seconds < 5.0);
}

// ===========================================================================
// Inputs other than source: PTX alone, resources, the plan, the dtype.

TEST_CASE("PTX alone: kernels, vector traffic, barriers and local memory", "[features][ptx]") {
  std::map<std::string, const corpus_entry*> by_name;
  for (auto& c : corpus()) by_name[c.name] = &c;
  {
    feature_input in;
    in.ptx = by_name.at("relu_float4_tail")->ptx;
    code_features f = extract_features(in);
    CHECK(f.values.at("kernel_count") == 1);
    CHECK(f.values.at("uses_vector_loads") == 1);
    CHECK(f.values.at("uses_vector_stores") == 1);
    CHECK(f.values.at("vector_width") == 4);
  }
  {
    feature_input in;
    in.ptx = by_name.at("two_pass_reduction")->ptx;
    code_features f = extract_features(in);
    CHECK(f.values.at("kernel_count") == 2);
    CHECK(f.values.at("syncthreads_count") >= 2);
    CHECK(f.values.at("uses_shared_memory") == 1);
    CHECK(f.structure_class == "multi_kernel");
  }
  {
    feature_input in;
    in.ptx = by_name.at("gemm_wmma_fp16")->ptx;
    code_features f = extract_features(in);
    CHECK(f.values.at("uses_tensor_cores") == 1);
    CHECK(f.values.at("tensor_core_eligible") == 1);
  }
  {
    feature_input in;
    in.ptx = by_name.at("reduce_sum_atomic")->ptx;
    code_features f = extract_features(in);
    CHECK(f.values.at("uses_atomics") == 1);
    CHECK(f.values.at("uses_warp_shuffle") == 1);
    CHECK(f.values.at("has_reduction") == 1);
    CHECK(f.structure_class == "reduction");
  }
}

TEST_CASE("fast math shows in the PTX even without intrinsics in the source", "[features][ptx][nvrtc]") {
  std::string src = R"(extern "C" __global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = sqrtf(x[i]) / logf(x[i]);
})";
  feature_input in;
  in.source = src;
  in.ptx = compile_ptx("accurate", src);
  CHECK(extract_features(in).values.at("uses_fast_math_intrinsics") == 0);
  in.ptx = compile_ptx("fast", src, {"--use_fast_math"});
  CHECK(extract_features(in).values.at("uses_fast_math_intrinsics") == 1);
  CHECK(extract_features(in).values.at("transcendental_count") == 2);
}

TEST_CASE("resources: registers and spills are the maximum over kernels", "[features][resources]") {
  feature_input in;
  for (auto& c : corpus())
    if (c.name == "two_pass_reduction") in.source = c.source;
  in.resources = {{"partial_sums", 18, 1024, 0, 1024}, {"final_sum", 40, 1024, 24, 1024}};
  code_features f = extract_features(in);
  CHECK(f.values.at("registers") == 40);
  CHECK(f.values.at("spills") == 24);
}

TEST_CASE("dtype decides tensor-core eligibility of a float GEMM", "[features][gemm]") {
  for (auto& c : corpus()) {
    if (c.name != "gemm_tiled_shared" && c.name != "gemm_naive") continue;
    INFO(c.name);
    feature_input in;
    in.source = c.source;
    in.ptx = c.ptx;
    in.dtype = "float32";
    CHECK(extract_features(in).values.at("tensor_core_eligible") == 0);
    in.dtype = "float16";
    CHECK(extract_features(in).values.at("tensor_core_eligible") == 1);
    in.dtype = "bfloat16";
    CHECK(extract_features(in).values.at("tensor_core_eligible") == 1);
  }
  // A row softmax never is.
  for (auto& c : corpus()) {
    if (c.name != "softmax_online") continue;
    feature_input in;
    in.source = c.source;
    in.dtype = "float16";
    CHECK(extract_features(in).values.at("tensor_core_eligible") == 0);
  }
}

namespace {

const corpus_entry& entry(const std::string& name) {
  for (auto& c : corpus())
    if (c.name == name) return c;
  FAIL("no corpus kernel " << name);
  throw std::runtime_error("unreachable");
}

resolved_plan resolve(const std::string& plan_yaml, const std::string& source,
                      std::map<std::string, tensor_info> inputs, launch_plan& plan_out) {
  auto plan = parse_launch_plan(plan_yaml, "test.yaml");
  if (!plan.ok()) FAIL(plan.message());
  plan_out = plan.value();
  plan_context ctx;
  ctx.inputs = std::move(inputs);
  ctx.kernels = extract_kernel_signatures(source);
  auto r = resolve_plan(plan_out, ctx);
  if (!r.ok()) FAIL(r.message());
  return r.value();
}

}  // namespace

TEST_CASE("plan: launches, geometry, graph eligibility and resolved sizes", "[features][plan]") {
  SECTION("one kernel, sizes from the resolved plan") {
    const corpus_entry& c = entry("gemm_naive");
    launch_plan plan;
    resolved_plan rp = resolve(R"(
constants: {M: A.shape[0], N: B.shape[1], K: A.shape[1]}
outputs: [{name: C, shape: [M, N], dtype: float32}]
steps:
  - kernel: gemm_naive
    grid: [ceil_div(N, 16), ceil_div(M, 16)]
    block: [16, 16]
    args: [A, B, C, {int32: M}, {int32: N}, {int32: K}]
)",
                               c.source, {{"A", {{512, 256}, "float32"}}, {"B", {{256, 512}, "float32"}}}, plan);
    feature_input in;
    in.source = c.source;
    in.ptx = c.ptx;
    in.plan = &plan;
    in.resolved = &rp;
    code_features f = extract_features(in);
    CHECK(f.values.at("plan_kernel_launches") == 1);
    CHECK(f.values.at("plan_library_steps") == 0);
    CHECK(f.values.at("block_size") == 256);
    CHECK(f.values.at("grid_size") == 32 * 32);
    CHECK(f.values.at("cuda_graph_eligible") == 0);  // one launch: nothing to batch
    // Each element of A is read once per column of C: N = 512 (B: once per row, M = 512).
    CHECK(f.values.at("reuse_factor") == 512);
    CHECK(f.structure_class == "reuse");

    // The plan alone (no shapes): the block size is a constant, the grid is not.
    feature_input plan_only;
    plan_only.source = c.source;
    plan_only.plan = &plan;
    code_features g = extract_features(plan_only);
    CHECK(g.values.at("block_size") == 256);
    CHECK(g.values.count("grid_size") == 0);
    CHECK(g.values.at("reuse_factor") == nominal_problem_extent);
  }
  SECTION("tiled GEMM: reuse is the number of tiles along the other dimension") {
    const corpus_entry& c = entry("gemm_tiled_shared");
    launch_plan plan;
    resolved_plan rp = resolve(R"(
constants: {M: A.shape[0], N: B.shape[1], K: A.shape[1]}
outputs: [{name: C, shape: [M, N], dtype: float32}]
steps:
  - kernel: gemm_tiled
    grid: [ceil_div(N, 16), ceil_div(M, 16)]
    block: [16, 16]
    args: [A, B, C, {int32: M}, {int32: N}, {int32: K}]
)",
                               c.source, {{"A", {{256, 128}, "float32"}}, {"B", {{128, 512}, "float32"}}}, plan);
    feature_input in;
    in.source = c.source;
    in.resolved = &rp;
    code_features f = extract_features(in);
    // A is reread by the 32 column tiles, B by the 16 row tiles.
    CHECK(f.values.at("reuse_factor") == (32 + 16) / 2.0);
  }
  SECTION("two steps: multi_kernel, graph eligible") {
    const corpus_entry& c = entry("two_pass_reduction");
    launch_plan plan;
    resolved_plan rp = resolve(R"(
constants: {N: x.numel, BLOCKS: ceil_div(N, 256)}
scratch: [{name: partial, shape: [BLOCKS], dtype: float32}]
outputs: [{name: out, shape: [1], dtype: float32}]
steps:
  - kernel: partial_sums
    grid: [BLOCKS]
    block: [256]
    args: [x, partial, {int32: N}]
  - kernel: final_sum
    grid: [1]
    block: [256]
    args: [partial, out, {int32: BLOCKS}]
)",
                               c.source, {{"x", {{1000, 100}, "float32"}}}, plan);
    feature_input in;
    in.source = c.source;
    in.plan = &plan;
    in.resolved = &rp;
    code_features f = extract_features(in);
    CHECK(f.values.at("plan_kernel_launches") == 2);
    CHECK(f.values.at("block_size") == 256);
    CHECK(f.values.at("grid_size") == 391);
    CHECK(f.values.at("cuda_graph_eligible") == 1);
    CHECK(f.structure_class == "multi_kernel");
  }
  SECTION("one kernel of a two-kernel source: not multi_kernel") {
    const corpus_entry& c = entry("two_pass_reduction");
    launch_plan plan;
    resolved_plan rp = resolve(R"(
outputs: [{name: partial, shape: [ceil_div(x.numel, 256)], dtype: float32}]
steps:
  - kernel: partial_sums
    grid: [ceil_div(x.numel, 256)]
    block: [256]
    args: [x, partial, {int32: x.numel}]
)",
                               c.source, {{"x", {{4096}, "float32"}}}, plan);
    feature_input in;
    in.source = c.source;
    in.plan = &plan;
    in.resolved = &rp;
    code_features f = extract_features(in);
    CHECK(f.values.at("kernel_count") == 2);
    CHECK(f.values.at("plan_kernel_launches") == 1);
    CHECK(f.structure_class == "reduction");
  }
}

// A tool more than a test: prints the features of the files named in KS_FEATURES_FILE
// (separated by ':'), compiled with NVRTC when they compile. Hidden; run with
//   KS_FEATURES_FILE=a.cu:b.cu features_test "[.dump]"
TEST_CASE("dump the features of files", "[.dump]") {
  const char* files = std::getenv("KS_FEATURES_FILE");
  if (!files) return;
  std::string list = files;
  for (size_t start = 0; start <= list.size();) {
    size_t colon = list.find(':', start);
    std::string path = list.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    start = colon == std::string::npos ? list.size() + 1 : colon + 1;
    if (path.empty()) continue;
    feature_input in;
    in.source = read_text(path);
    dump(path, extract_features(in), "source only");
    std::string ptx;
    if (try_compile_ptx(fs::path(path).stem().string(), in.source, {}, ptx)) {
      in.ptx = ptx;
      dump(path, extract_features(in), "with PTX");
    } else {
      std::cout << "(" << path << " does not compile with NVRTC)\n" << ptx << "\n";
    }
  }
}
