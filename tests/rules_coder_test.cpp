// The rules coder on real parts: graphs exported by the kernelskill-gpu binary (CPU
// LibTorch), lowered into sources that NVRTC compiles and plans that the plan
// validator resolves at the tasks' shapes; optimize() and repair() on the recipes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "coder/rules/plan/op_specs.hpp"
#include "coder/rules_coder.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "plan/plan_validator.hpp"
#include "policy/decision_policy.hpp"
#include "task/task_loader.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = KS_SOURCE_DIR;
const fs::path kWorker = fs::path(KS_BINARY_DIR) / "bin" / "kernelskill-gpu";

rules_coder& the_coder() {
  static std::unique_ptr<rules_coder> c = [] {
    rules_coder_options o;
    o.gpu_worker = kWorker;
    o.skills_dir = kSource / "skills";
    auto r = rules_coder::create(o);
    if (!r) FAIL(r.message());
    return std::move(r.value());
  }();
  return *c;
}

task_spec task(const std::string& rel) {
  auto t = load_task(kSource / rel);
  if (!t) FAIL(t.message());
  return *t;
}

std::vector<fs::path> task_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(kSource / dir))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::set<std::string> kinds(const task_graph& g) {
  std::set<std::string> out;
  for (auto& n : g.nodes) out.insert(n.kind);
  return out;
}

nvrtc_compiler& compiler() {
  static nvrtc_compiler c([] {
    nvrtc_options o;
    o.isolate = false;
    return o;
  }());
  return c;
}

// `c` compiles with NVRTC and its plan resolves at each of `sizes` ("" is the task's
// default); the plan resolved at the first.
resolved_plan compiled_and_resolved(const task_spec& t, const candidate& c,
                                    const std::vector<std::string>& sizes = {""}) {
  auto compiled = compiler().compile(c.source, c.compile_options);
  REQUIRE(compiled);
  INFO(compiled->log);
  CHECK(compiled->ok);
  std::vector<resolved_plan> plans;
  for (const std::string& size : sizes) {
    auto ctx = make_plan_context(t, c.source, size);
    REQUIRE(ctx);
    auto resolved = resolve_plan(c.plan, *ctx);
    INFO("size '" << size << "'");
    if (!resolved) FAIL(resolved.message());
    plans.push_back(*resolved);
  }
  return plans.front();
}

// Every seed compiles and resolves at the default and the cpu size.
void check_seeds(const task_spec& t) {
  auto seeds = the_coder().seeds(t, 4);
  INFO(t.name);
  if (!seeds) FAIL(seeds.message());
  REQUIRE(!seeds->empty());
  std::set<std::string> ids;
  for (const candidate& c : *seeds) {
    INFO(c.origin << " " << c.recipe.at("stages") << "\n" << c.source);
    CHECK(ids.insert(c.id).second);
    CHECK(c.task == t.name);
    CHECK(c.recipe.count("template"));
    compiled_and_resolved(t, c, {"", "cpu"});
  }
}

}  // namespace

TEST_CASE("graph export: every example task gives its ops", "[rules][graph]") {
  std::map<std::string, std::set<std::string>> expected = {
      {"gelu", {"aten::gelu"}},
      {"layernorm", {"aten::layer_norm"}},
      {"logsumexp", {"aten::logsumexp"}},
      {"matmul_bias_relu", {"aten::matmul", "aten::add", "aten::relu", "aten::mul"}},
      {"row_sum", {"aten::sum"}},
      {"softmax", {"aten::softmax"}},
      {"swish", {"aten::sigmoid", "aten::mul"}}};
  for (auto& path : task_files("examples/tasks")) {
    task_spec t = task(fs::relative(path, kSource).string());
    INFO(t.name);
    auto g = export_task_graph(kWorker, t, "cpu");
    if (!g) FAIL(g.message());
    for (auto& k : expected.at(t.name)) CHECK(kinds(*g).count(k));
    REQUIRE(g->input_names.size() == t.inputs.size() + t.parameters.size());
    const graph_value* x = g->value(g->input_values[0]);
    REQUIRE(x);
    CHECK(x->shape == t.sizes.at("cpu").at(t.inputs[0].name));
    for (auto& o : g->outputs) CHECK(g->value(o));
  }
}

TEST_CASE("graph export: a layer_norm's normalized shape and eps are values", "[rules][graph]") {
  auto g = export_task_graph(kWorker, task("examples/tasks/layernorm.yaml"), "cpu");
  REQUIRE(g);
  for (auto& n : g->nodes)
    if (n.kind == "aten::layer_norm") {
      CHECK(g->value(n.inputs[1])->numbers == std::vector<double>{512});
      CHECK(g->value(n.inputs[4])->numbers.at(0) == Approx(1e-5));
    }
}

// The graph's JSON carries every float constant, the ones JSON has no number for
// included ("Infinity", "-Infinity", "NaN"), and the extreme finite ones exactly.
TEST_CASE("graph export: inf, -inf, NaN and extreme float constants survive the graph JSON", "[rules][graph]") {
  task_spec t = task("examples/tasks/swish.yaml");
  t.name = "constants";
  t.torchscript =
      "def forward(x):\n"
      "    a = torch.clamp(x, float('-inf'), float('inf'))\n"
      "    b = torch.where(x > 0.0, a, torch.full_like(x, float('nan')))\n"
      "    return torch.clamp(b, 1.1754943508222875e-38, 3.4028234663852886e38) * 1.401298464324817e-45\n";
  auto g = export_task_graph(kWorker, t, "cpu");
  if (!g) FAIL(g.message());
  std::vector<double> constants;
  for (auto& [id, v] : g->values)
    if (v.constant && v.type == "float") constants.push_back(v.numbers.at(0));
  auto has = [&](double want) {
    return std::any_of(constants.begin(), constants.end(),
                       [&](double c) { return std::isnan(want) ? std::isnan(c) : c == want; });
  };
  CHECK(has(std::numeric_limits<double>::infinity()));
  CHECK(has(-std::numeric_limits<double>::infinity()));
  CHECK(has(std::numeric_limits<double>::quiet_NaN()));
  CHECK(has(1.1754943508222875e-38));
  CHECK(has(3.4028234663852886e38));
  CHECK(has(1.401298464324817e-45));
  // And the lowering writes them as code NVRTC compiles (bit patterns, not "inf").
  auto seeds = the_coder().seeds(t, 1);
  if (!seeds) FAIL(seeds.message());
  const std::string& src = seeds->front().source;
  CHECK(src.find("__int_as_float(0x7f800000)") != std::string::npos);
  CHECK(src.find("__int_as_float(0xff800000)") != std::string::npos);
  CHECK(src.find("inff") == std::string::npos);  // what "%g" of an infinity would give
  CHECK(src.find("nanf") == std::string::npos);
  compiled_and_resolved(t, seeds->front());
}

TEST_CASE("graph JSON: a float that is neither a number nor a non-finite name is an error naming it",
          "[rules][graph]") {
  auto g = parse_task_graph(R"({"task": "t", "inputs": [], "outputs": [],
    "values": {"c": {"type": "float", "constant": true, "value": "infinite"}}, "nodes": []})");
  REQUIRE_FALSE(g);
  CHECK_THAT(g.message(), Catch::Contains("values.c.value") && Catch::Contains("infinite"));
  auto ok = parse_task_graph(R"({"task": "t", "inputs": [], "outputs": [],
    "values": {"c": {"type": "float", "constant": true, "value": "-Infinity"},
               "s": {"type": "str", "constant": true, "value": "NaN"}}, "nodes": []})");
  REQUIRE(ok);
  CHECK(ok->values.at("c").numbers == std::vector<double>{-std::numeric_limits<double>::infinity()});
  CHECK(ok->values.at("s").text == "NaN");
}

TEST_CASE("rules coder: example tasks lower to seeds that compile and resolve", "[rules][lower]") {
  for (auto& path : task_files("examples/tasks")) check_seeds(task(fs::relative(path, kSource).string()));
}

TEST_CASE("rules coder: the KernelBench-style suite lowers to seeds that compile and resolve",
          "[rules][lower][suite]") {
  for (auto& path : task_files("bench/suites/ops")) check_seeds(task(fs::relative(path, kSource).string()));
}

TEST_CASE("rules coder: templates chosen per task", "[rules][lower]") {
  auto first = [](const std::string& rel) {
    auto s = the_coder().seeds(task(rel), 1);
    if (!s) FAIL(s.message());
    return s->front();
  };
  candidate swish = first("examples/tasks/swish.yaml");
  CHECK(swish.recipe.at("template") == "elementwise");
  CHECK(swish.plan.steps.size() == 1);  // sigmoid and mul fused
  candidate mm = first("examples/tasks/matmul_bias_relu.yaml");
  CHECK(mm.recipe.at("template") == "library");
  // The operands split for a 3xTF32 product (4096^3), the product, one epilogue kernel.
  REQUIRE(mm.plan.steps.size() == 4);
  CHECK(mm.plan.steps[0].name == "ks0_split_a");
  CHECK(mm.plan.steps[1].name == "ks0_split_b");
  CHECK(mm.plan.steps[2].kind == "library");
  CHECK(mm.plan.steps[2].name == "aten::matmul");
  CHECK(mm.plan.steps[2].attrs.at("math") == "tf32");
  CHECK(mm.plan.steps[3].kind == "kernel");
  candidate rms = first("bench/suites/ops/rmsnorm.yaml");
  CHECK(rms.recipe.at("stages").find("row_reduce+prologue") != std::string::npos);
  candidate mse = first("bench/suites/ops/mse_loss.yaml");
  CHECK(mse.plan.steps.size() == 2);  // partials, then the final combine
  CHECK(mse.recipe.at("stages") == "row_reduce+prologue");
}

TEST_CASE("rules coder: every named parameter's value round-trips, a bad one is named", "[rules][optimize]") {
  // Each enum's name table (coder/lowering_params.hpp) reads and writes the recipe.
  auto each = [](const std::string& key, auto all, const std::string& expected) {
    using E = typename decltype(all)::value_type;
    for (E v : all) {
      INFO(key << " = " << param::name_of(v));
      CHECK(param::parse_param<E>(param::name_of(v)) == v);
      auto p = from_recipe({{key, param::name_of(v)}});
      REQUIRE(p);
      auto back = to_recipe(*p);
      // conv_layout and gemm_precision stay out of a recipe at their defaults.
      if (back.count(key))
        CHECK(back.at(key) == param::name_of(v));
      else
        CHECK(v == E{});
    }
    CHECK(from_recipe({{key, "Warp"}}).message() == "recipe: " + key + " = 'Warp': expected " + expected);
  };
  each("row_mapping", std::vector{param::row_mapping::block, param::row_mapping::warp}, "block or warp");
  each("row_cache",
       std::vector{param::row_cache::none, param::row_cache::registers, param::row_cache::shared,
                   param::row_cache::on_chip},
       "none, registers, shared or on_chip");
  each("cache_hint", std::vector{param::cache_hint::none, param::cache_hint::streaming, param::cache_hint::readonly},
       "none, streaming or readonly");
  each("moments", std::vector{param::moments::shifted, param::moments::welford}, "shifted or welford");
  each("conv_layout", std::vector{param::conv_layout::nchw, param::conv_layout::channels_last},
       "nchw or channels_last");
  each("gemm_precision", std::vector{param::gemm_precision::fp32, param::gemm_precision::split_tf32},
       "fp32 or split_tf32");
}

TEST_CASE("rules coder: a recipe's product and reduction parameters are read or refused by name", "[rules][optimize]") {
  auto ok = from_recipe({{"gemm_precision", "split_tf32"}, {"matvec_sums", "1"}});
  REQUIRE(ok);
  CHECK(ok->gemm_precision == param::gemm_precision::split_tf32);
  CHECK(ok->matvec_sums);
  CHECK(to_recipe(*ok).at("gemm_precision") == "split_tf32");
  CHECK(to_recipe(lowering_params{}).count("gemm_precision") == 0);  // defaults stay out of recipes
  CHECK(from_recipe({{"gemm_precision", "tf32"}}).message() ==
        "recipe: gemm_precision = 'tf32': expected fp32 or split_tf32");
  CHECK(from_recipe({{"matvec_sums", "yes"}}).message() ==
        "recipe: matvec_sums = 'yes': expected an integer in [0, 1]");
  CHECK(from_recipe({{"matvec_sums", "2"}}).message() == "recipe: matvec_sums = '2': expected an integer in [0, 1]");
  auto lib = from_recipe({{"library_reductions", "1"}});
  REQUIRE(lib);
  CHECK(lib->library_reductions);
  CHECK(to_recipe(*lib).at("library_reductions") == "1");
  CHECK(to_recipe(lowering_params{}).count("library_reductions") == 0);
  CHECK(from_recipe({{"library_reductions", "on"}}).message() ==
        "recipe: library_reductions = 'on': expected an integer in [0, 1]");
}

TEST_CASE("rules coder: split_tf32_gemm splits an SGEMM product, and only a product", "[rules][optimize]") {
  const task_spec t = task("examples/tasks/matmul_bias_relu.yaml");
  auto seeds = the_coder().seeds(t, 5);
  REQUIRE(seeds);
  const candidate* plain = nullptr;
  const candidate* split = nullptr;
  for (const candidate& c : *seeds) (c.recipe.count("gemm_precision") ? split : plain) = &c;
  REQUIRE(plain);  // the plainest seed keeps cuBLAS's SGEMM
  REQUIRE(split);
  optimize_input in;
  in.task = t;
  in.plan.chosen = "split_tf32_gemm";
  in.base = *plain;
  CHECK(plain->recipe.at("methods").find("split_tf32_gemm") != std::string::npos);
  auto v = the_coder().optimize(in);
  if (!v) FAIL(v.message());
  CHECK(v->recipe.at("gemm_precision") == "split_tf32");
  CHECK(v->origin == "optimize:split_tf32_gemm");
  CHECK(v->source.find("_split_a(") != std::string::npos);
  in.base = *split;
  CHECK(split->recipe.at("methods").find("split_tf32_gemm") == std::string::npos);
  CHECK_THAT(the_coder().optimize(in).message(), Catch::Contains("gemm_precision is already split_tf32"));
  auto gelu = the_coder().seeds(task("examples/tasks/gelu.yaml"), 1);
  REQUIRE(gelu);
  in.task = task("examples/tasks/gelu.yaml");
  in.base = gelu->front();
  CHECK_THAT(the_coder().optimize(in).message(), Catch::Contains("it has no library product"));
}

TEST_CASE("rules coder: optimize applies a method as a parameter change", "[rules][optimize]") {
  auto seeds = the_coder().seeds(task("examples/tasks/gelu.yaml"), 1);
  REQUIRE(seeds);
  optimize_input in;
  in.task = task("examples/tasks/gelu.yaml");
  in.base = seeds->front();
  REQUIRE(in.base.recipe.at("vector_width") == "4");

  in.plan.chosen = "vectorize_loads";  // values [4, 2]: 4 is current, so 2
  auto v = the_coder().optimize(in);
  if (!v) FAIL(v.message());
  CHECK(v->recipe.at("vector_width") == "2");
  CHECK(v->origin == "optimize:vectorize_loads");
  CHECK(v->parent_id == in.base.id);
  CHECK(v->id != in.base.id);

  // Fast math where a kernel calls exp or a division (swish's sigmoid); gelu's erf
  // has neither: there it changes no kernel.
  in.plan.chosen = "fast_math_intrinsics";
  CHECK_THAT(the_coder().optimize(in).message(), Catch::Contains("changes no kernel of this task"));
  {
    optimize_input sw;
    sw.task = task("examples/tasks/swish.yaml");
    auto s = the_coder().seeds(sw.task, 1);
    REQUIRE(s);
    sw.base = s->front();
    sw.plan.chosen = "fast_math_intrinsics";
    auto f = the_coder().optimize(sw);
    REQUIRE(f);
    CHECK(f->recipe.at("fast_math") == "1");
    CHECK(f->source.find("__expf") != std::string::npos);
  }

  in.plan.chosen = "increase_block_size";
  auto b = the_coder().optimize(in);
  REQUIRE(b);
  CHECK(b->recipe.at("block_size") == "512");

  in.plan.chosen = "tensor_cores_tf32";
  auto t = the_coder().optimize(in);
  REQUIRE_FALSE(t);
  CHECK_THAT(t.message(), Catch::Contains("method tensor_cores_tf32 does not apply to template elementwise"));

  in.plan.chosen = "warp_per_row";
  auto w = the_coder().optimize(in);
  REQUIRE_FALSE(w);
  CHECK_THAT(w.message(), Catch::Contains("no row reduction"));

  in.plan.chosen = "no_such_method";
  CHECK_FALSE(the_coder().optimize(in));
}

TEST_CASE("rules coder: optimize changes the row mapping of a reduction", "[rules][optimize]") {
  auto seeds = the_coder().seeds(task("examples/tasks/softmax.yaml"), 1);
  REQUIRE(seeds);
  optimize_input in;
  in.task = task("examples/tasks/softmax.yaml");
  in.base = seeds->front();
  // The first seed keeps its rows on chip already; the method test below starts from
  // the same seed without the cache.
  CHECK(in.base.recipe.at("row_cache") == "on_chip");
  in.base.recipe["row_cache"] = "none";
  in.base.id += "-uncached";
  in.plan.chosen = "warp_per_row";
  auto w = the_coder().optimize(in);
  if (!w) FAIL(w.message());
  CHECK(w->recipe.at("row_mapping") == "warp");
  // The softmax is already online; what the method still saves (the second read of
  // the row) comes from keeping the row on chip.
  in.plan.chosen = "online_softmax";
  auto o = the_coder().optimize(in);
  if (!o) FAIL(o.message());
  CHECK(o->recipe.at("row_cache") == "on_chip");
  in.base = *o;
  auto again = the_coder().optimize(in);
  REQUIRE_FALSE(again);
  CHECK_THAT(again.message(), Catch::Contains("already single-pass") && Catch::Contains("already stay on chip"));
}

// Optimizes the first seed of `rel` (with `uncached`, the first without a row cache)
// with `method`; the result compiles and resolves.
candidate optimized(const std::string& rel, const std::string& method, bool uncached = false) {
  task_spec t = task(rel);
  auto seeds = the_coder().seeds(t, 5);
  if (!seeds) FAIL(seeds.message());
  auto base = std::find_if(seeds->begin(), seeds->end(),
                           [&](const candidate& c) { return !uncached || c.recipe.at("row_cache") == "none"; });
  REQUIRE(base != seeds->end());
  optimize_input in;
  in.task = t;
  in.base = *base;
  in.plan.chosen = method;
  auto c = the_coder().optimize(in);
  if (!c) FAIL(c.message());
  INFO(c->source);
  compiled_and_resolved(t, *c);
  return *c;
}

TEST_CASE("rules coder: methods that were no-ops are template changes", "[rules][optimize][methods]") {
  SECTION("cache_row_in_registers keeps a row that is read twice in registers between the passes") {
    for (const char* rel :
         {"examples/tasks/softmax.yaml", "examples/tasks/layernorm.yaml", "bench/suites/ops/layernorm_gelu.yaml"}) {
      INFO(rel);
      candidate c = optimized(rel, "cache_row_in_registers", true);
      CHECK(c.recipe.at("row_cache") == "registers");
      CHECK(c.source.find("float rc_in0[") != std::string::npos);
      CHECK(c.source.find("const float v = rc_in0[k];") != std::string::npos);
    }
    // An epilogue that reads the reduced tensor again (rmsnorm: x * rsqrt(mean(x*x)) *
    // w) reads it from the cache; the weight, broadcast along the rows, at c. The
    // 8192-element rows of the task's size fit in 512 threads x 16 registers.
    {
      candidate c = optimized("bench/suites/ops/rmsnorm.yaml", "cache_row_in_registers", true);
      INFO(c.source);
      CHECK(c.source.find("float rc_in0[16];") != std::string::npos);
      CHECK(c.source.find("rc_in0[k] = in0[i];") != std::string::npos);
      CHECK(c.source.find("const float xp3 = rc_in0[k];") != std::string::npos);
      CHECK(c.source.find("in1[c]") != std::string::npos);
      CHECK(c.source.find("% n1") == std::string::npos);
    }
    // Rows of 16384 (x - logsumexp(x)) do not fit 256 threads x 32 registers: the
    // first seed (on_chip) stages them in shared memory, as much as fits 64 KiB, and
    // the plan sizes that memory from the row length at run time.
    {
      task_spec t = task("bench/suites/ops/logsumexp_keepdim_sub.yaml");
      auto seeds = the_coder().seeds(t, 1);
      REQUIRE(seeds);
      const candidate& c = seeds->front();
      INFO(c.source);
      CHECK(c.plan.steps.at(0).block.at(0) == "256");
      CHECK(c.source.find("rc_in0[") == std::string::npos);
      CHECK(c.source.find("KS_DYNAMIC_SHARED(ks_row);") != std::string::npos);
      CHECK(c.source.find("ks_cp_async16(sh_in0 + c4 * 4, in0 + base + c4 * 4);") != std::string::npos);
      CHECK(c.source.find("sh_in0[c]") != std::string::npos);
      CHECK(c.plan.steps.at(0).shared_mem == "4 * min(x.shape[1], 16384)");
      CHECK(compiled_and_resolved(t, c).steps.at(0).shared_mem_bytes == 65536);
    }
    // From registers, the method's next value is shared memory, whatever the row's
    // length; a warp per row keeps registers.
    {
      task_spec t = task("examples/tasks/layernorm.yaml");
      auto seeds = the_coder().seeds(t, 2);
      REQUIRE(seeds);
      optimize_input in;
      in.task = t;
      in.base = seeds->front();
      in.base.recipe["row_cache"] = "registers";
      in.base.id += "-registers";
      in.plan.chosen = "cache_row_in_registers";
      auto c = the_coder().optimize(in);
      if (!c) FAIL(c.message());
      INFO(c->source);
      CHECK(c->recipe.at("row_cache") == "shared");
      CHECK(c->source.find("KS_DYNAMIC_SHARED(ks_row);") != std::string::npos);
      CHECK(c->plan.steps.at(0).shared_mem == "4 * min(x.shape[1], 16384)");
      compiled_and_resolved(t, *c);
      auto params = from_recipe(seeds->front().recipe);
      REQUIRE(params);
      params->row_mapping = param::row_mapping::warp;
      params->row_cache = param::row_cache::shared;
      auto g = the_coder().graph(t);
      REQUIRE(g);
      auto w = lower_graph(*g, *params, {{"x", {64, 512}}});  // 16 a lane
      if (!w) FAIL(w.message());
      CHECK(w->source.find("KS_DYNAMIC_SHARED") == std::string::npos);
      CHECK(w->source.find("float rc_in0[16];") != std::string::npos);
      // on_chip on the first seed of an 8192-long row: registers.
      in.base = seeds->front();
      CHECK(in.base.recipe.at("row_cache") == "on_chip");
      CHECK(in.base.source.find("float rc_in0[") != std::string::npos);
      in.plan.chosen = "cache_row_in_registers";
      CHECK_THAT(the_coder().optimize(in).message(), Catch::Contains("already stay on chip"));
    }
    // A reduction that does not read its row twice: nothing to cache, said so.
    task_spec t = task("examples/tasks/row_sum.yaml");
    auto seeds = the_coder().seeds(t, 5);
    REQUIRE(seeds);
    auto uncached = std::find_if(seeds->begin(), seeds->end(),
                                 [](const candidate& c) { return c.recipe.at("row_cache") == "none"; });
    REQUIRE(uncached != seeds->end());
    optimize_input in;
    in.task = t;
    in.base = *uncached;
    in.plan.chosen = "cache_row_in_registers";
    auto r = the_coder().optimize(in);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.message(), Catch::Contains("changes no kernel of this task"));
    in.task = task("examples/tasks/gelu.yaml");
    in.base = the_coder().seeds(in.task, 1)->front();
    CHECK_THAT(the_coder().optimize(in).message(), Catch::Contains("no row reduction"));
  }
  SECTION("streaming_cache_hints: touch-once operands and outputs evict first") {
    candidate c = optimized("examples/tasks/gelu.yaml", "streaming_cache_hints");
    CHECK(c.recipe.at("cache_hint") == "streaming");
    CHECK(c.source.find("__ldcs(reinterpret_cast<const float4*>(in") != std::string::npos);
    CHECK(c.source.find("__stcs(reinterpret_cast<float4*>(out") != std::string::npos);
    // Scratch that a later step reads back is stored normally: the first kernel's
    // result feeds aten::erfinv, the second's is the plan's output.
    task_spec t = task("examples/tasks/gelu.yaml");
    t.name = "fallback_erfinv";
    t.torchscript = "def forward(x):\n    return torch.erfinv(torch.tanh(x) * 0.5) * 2.0 + 1.0\n";
    auto seeds = the_coder().seeds(t, 1);
    REQUIRE(seeds);
    optimize_input in;
    in.task = t;
    in.base = seeds->front();
    in.plan.chosen = "streaming_cache_hints";
    auto two = the_coder().optimize(in);
    if (!two) FAIL(two.message());
    const std::string& src = two->source;
    INFO(src);
    const size_t second = src.find("ks2_elementwise");
    REQUIRE(second != std::string::npos);
    CHECK(src.substr(0, second).find("__stcs(") == std::string::npos);
    CHECK(src.substr(second).find("__stcs(") != std::string::npos);
  }
  SECTION("readonly_restrict_ldg: operands through the read-only path") {
    candidate c = optimized("bench/suites/ops/bias_add_broadcast.yaml", "readonly_restrict_ldg");
    CHECK(c.recipe.at("cache_hint") == "readonly");
    CHECK(c.source.find("__ldg(") != std::string::npos);
  }
}

TEST_CASE("rules coder: repair returns to the last good version without the failed change", "[rules][repair]") {
  task_spec t = task("examples/tasks/gelu.yaml");
  auto seeds = the_coder().seeds(t, 1);
  REQUIRE(seeds);
  optimize_input in;
  in.task = t;
  in.base = seeds->front();
  in.plan.chosen = "increase_block_size";  // 512, then 1024
  auto bigger = the_coder().optimize(in);
  REQUIRE(bigger);

  repair_input r;
  r.task = t;
  r.failed = *bigger;
  r.last_good = in.base;
  auto fixed = the_coder().repair(r);
  if (!fixed) FAIL(fixed.message());
  // The method's next value (1024), with 512 excluded from now on.
  CHECK(fixed->recipe.at("excluded").find("block_size=512") != std::string::npos);
  CHECK(fixed->recipe.at("block_size") == "1024");
  CHECK(fixed->origin == "repair:increase_block_size");

  // A change with no other value: back to the last good code (swish: its sigmoid
  // calls exp, which fast math changes).
  {
    optimize_input sw;
    sw.task = task("examples/tasks/swish.yaml");
    auto s = the_coder().seeds(sw.task, 1);
    REQUIRE(s);
    sw.base = s->front();
    sw.plan.chosen = "fast_math_intrinsics";
    auto fast = the_coder().optimize(sw);
    REQUIRE(fast);
    repair_input rs;
    rs.task = sw.task;
    rs.failed = *fast;
    rs.last_good = sw.base;
    auto back = the_coder().repair(rs);
    REQUIRE(back);
    CHECK(back->source == sw.base.source);
    CHECK(back->plan == sw.base.plan);
    CHECK(back->recipe.at("excluded") == "fast_math=1");
    // ... and the method is not offered again: not applied, and not in its methods.
    optimize_input again = sw;
    again.base = *back;
    CHECK_FALSE(the_coder().optimize(again));
    CHECK(back->recipe.at("methods").find("fast_math_intrinsics") == std::string::npos);
    CHECK(sw.base.recipe.at("methods").find("fast_math_intrinsics") != std::string::npos);
  }

  // A failing seed: the plainest parameters.
  repair_input s;
  s.task = t;
  s.failed = in.base;
  auto plain = the_coder().repair(s);
  REQUIRE(plain);
  CHECK(plain->recipe.at("vector_width") == "1");
  CHECK(plain->origin == "repair:conservative");
  // ... and when that fails too, a task without reductions has nothing left.
  s.failed = *plain;
  CHECK_FALSE(the_coder().repair(s));
}

// A seed whose values miss the tolerance with library work not done as the reference
// does it (a convolution channels-last: cuDNN's NHWC algorithm is not eager's, level 2's
// 57, 69, 71, 87 on the H100; a product in 3xTF32: 62_Matmul_GroupNorm_LeakyReLU_Sum)
// is repaired with the reference's own calls first, its other parameters kept and what
// was reverted excluded; then ATen's reductions (or, without reductions, the plainest
// parameters). A seed that fails otherwise (not compiling) goes to the plainest
// parameters directly.
TEST_CASE("rules coder: a seed with wrong values is repaired with the reference's library calls first",
          "[rules][repair]") {
  struct repair_case {
    const char* yaml;
    const char* reverted;
    const char* then;  // the repair after the reference's calls failed too
  };
  const repair_case cases[] = {
      {"name: conv_relu_layout\nreference:\n  torchscript: |\n    def forward(x, w, b):\n"
       "        return torch.relu(torch.conv2d(x, w, b))\ninputs:\n  - {name: x, shape: [2, 8, 10, 10]}\n"
       "parameters:\n  - {name: w, shape: [16, 8, 3, 3]}\n  - {name: b, shape: [16]}\n",
       "conv_layout=channels_last", "repair:conservative"},  // no reduction to hand to ATen
      {"name: linear_group_norm\nreference:\n  torchscript: |\n    def forward(x, w, b, g, h):\n"
       "        return torch.group_norm(torch.linear(x, w, b), 32, g, h, 1e-5, False)\n"
       "inputs:\n  - {name: x, shape: [1024, 1024]}\n"
       "parameters:\n  - {name: w, shape: [1024, 1024]}\n  - {name: b, shape: [1024]}\n"
       "  - {name: g, shape: [1024]}\n  - {name: h, shape: [1024]}\n",
       "gemm_precision=split_tf32", "repair:library_reductions"},  // the group norm's sums
  };
  for (const auto& [yaml, reverted, then] : cases) {
    auto t = parse_task(yaml, "repair_case.yaml", kSource);
    if (!t) FAIL(t.message());
    INFO(t->name);
    auto seeds = the_coder().seeds(*t, 1);
    if (!seeds) FAIL(seeds.message());
    const candidate& seed = seeds->front();
    const std::string key = std::string(reverted).substr(0, std::string(reverted).find('='));
    REQUIRE(seed.recipe.count(key));
    repair_input r;
    r.task = *t;
    r.failed = seed;
    r.review.status = review_status::incorrect;
    auto fixed = the_coder().repair(r);
    if (!fixed) FAIL(fixed.message());
    CHECK(fixed->origin == "repair:reference_library");
    CHECK(fixed->parent_id == seed.id);
    CHECK(fixed->recipe.count(key) == 0);  // at the default: the reference's own call
    CHECK(fixed->recipe.at("excluded") == reverted);
    CHECK(fixed->recipe.at("block_size") == seed.recipe.at("block_size"));
    CHECK(fixed->recipe.at("elements_per_thread") == seed.recipe.at("elements_per_thread"));
    // ... it failing too: what is left is the order of the sums, so ATen's reductions
    // (with the plainest parameters) where there are any, else the plainest parameters:
    // two repairs, the KernelBench bench's budget, reach them.
    r.failed = *fixed;
    auto next = the_coder().repair(r);
    if (!next) FAIL(next.message());
    CHECK(next->origin == then);
    // A seed that failed to compile: the plainest parameters at once.
    r.failed = seed;
    r.review.status = review_status::compile_error;
    auto other = the_coder().repair(r);
    if (!other) FAIL(other.message());
    CHECK(other->origin == "repair:conservative");
  }
}

// A seed whose sums differ from the reference's by more than the tolerance (another
// order of a sum that cancels): the plainest parameters first, then, when they fail
// too, every reduction as an ATen library step (ATen's order); after that nothing.
TEST_CASE("rules coder: a failed plainest repair runs the reductions as ATen library steps", "[rules][repair]") {
  task_spec t = task("bench/suites/ops/l2_normalize_rows.yaml");
  auto seeds = the_coder().seeds(t, 1);
  REQUIRE(seeds);
  repair_input s;
  s.task = t;
  s.failed = seeds->front();
  s.review.message = "incorrect: max abs error 1.7e-3";
  auto plain = the_coder().repair(s);
  REQUIRE(plain);
  REQUIRE(plain->origin == "repair:conservative");
  CHECK(plain->recipe.count("library_reductions") == 0);
  s.failed = *plain;
  auto lib = the_coder().repair(s);
  if (!lib) FAIL(lib.message());
  INFO(lib->source);
  CHECK(lib->origin == "repair:library_reductions");
  CHECK(lib->recipe.at("library_reductions") == "1");
  CHECK(lib->recipe.at("stages").find("fallback:aten::norm") != std::string::npos);
  CHECK(lib->recipe.at("fallback_why").find("library_reductions") != std::string::npos);
  std::string steps;
  for (auto& st : lib->plan.steps) steps += st.kind + ":" + st.name + " ";
  INFO(steps);
  CHECK(steps.find("library:aten::norm") != std::string::npos);
  CHECK(from_recipe(lib->recipe).value().library_reductions);
  s.failed = *lib;
  auto none = the_coder().repair(s);
  REQUIRE_FALSE(none);
  CHECK(none.message().find("ATen's own reductions fail too") != std::string::npos);
}

// A scan is a running sum: with ATen's reductions comes ATen's cumsum, in its order
// (a task whose only sum is a scan got the same candidate back, and no repair).
TEST_CASE("rules coder: ATen's reductions include its scans", "[rules][repair]") {
  task_spec t = task("bench/suites/ops/cumsum.yaml");
  auto seeds = the_coder().seeds(t, 1);
  REQUIRE(seeds);
  CHECK(seeds->front().recipe.at("stages").find("scan") != std::string::npos);
  repair_input s;
  s.task = t;
  s.failed = seeds->front();
  s.review.message = "incorrect: max abs error 2e-3";
  // The seed has the plainest parameters already: its first repair is ATen's sums.
  auto lib = the_coder().repair(s);
  if (!lib) FAIL(lib.message());
  CHECK(lib->origin == "repair:library_reductions");
  std::string steps;
  for (auto& st : lib->plan.steps) steps += st.kind + ":" + st.name + " ";
  INFO(steps);
  CHECK(steps.find("library:aten::cumsum") != std::string::npos);
  CHECK(lib->recipe.at("fallback_why").find("library_reductions") != std::string::npos);
}

// Reference programs over x [16384, 16384] (cpu size [64, 256]) with ops no template
// takes: each becomes a library step through ATen's dispatcher, with the chains
// before and after it still fused kernels. Shared with rules_emulation_test.
task_spec fallback_task(const std::string& name, const std::string& body) {
  task_spec t = task("examples/tasks/gelu.yaml");
  t.name = name;
  t.torchscript = "def forward(x):\n" + body;
  return t;
}

std::vector<std::string> step_names(const candidate& c) {
  std::vector<std::string> out;
  for (auto& s : c.plan.steps) out.push_back(s.kind == "library" ? s.name : "kernel");
  return out;
}

TEST_CASE("rules coder: an op no template takes runs as a library step between fused kernels",
          "[rules][lower][fallback]") {
  using V = std::vector<std::string>;
  SECTION("erfinv between two chains") {
    task_spec t = fallback_task("fallback_erfinv", "    return torch.erfinv(torch.tanh(x) * 0.5) * 2.0 + 1.0\n");
    auto s = the_coder().seeds(t, 1);
    if (!s) FAIL(s.message());
    const candidate& c = s->front();
    CHECK(step_names(c) == V{"kernel", "aten::erfinv", "kernel"});
    CHECK(c.recipe.at("stages") == "elementwise,fallback:aten::erfinv,elementwise");
    CHECK(c.recipe.at("fallback") == "aten::erfinv");
    CHECK_THAT(c.recipe.at("fallback_why"), Catch::Contains("aten::erfinv") && Catch::Contains("not supported"));
    CHECK_THAT(c.origin, Catch::Contains("library fallback: aten::erfinv"));
    CHECK(c.recipe.at("template") == "mixed");
    const plan_step& lib = c.plan.steps[1];
    CHECK(lib.attrs.at("schema").rfind("aten::erfinv(Tensor self)", 0) == 0);
    REQUIRE(lib.args.size() == 1);
    CHECK(lib.args[0].kind == "tensor");
    check_seeds(t);
  }
  SECTION("sort: its values feed an epilogue, its indices are not needed") {
    task_spec t = fallback_task("fallback_sort", "    v, i = torch.sort(x * 2.0, 1)\n    return torch.relu(v) + 1.0\n");
    auto s = the_coder().seeds(t, 1);
    if (!s) FAIL(s.message());
    const candidate& c = s->front();
    CHECK(step_names(c) == V{"kernel", "aten::sort", "kernel"});
    const plan_step& lib = c.plan.steps[1];
    CHECK(lib.outputs.size() == 1);  // values only
    CHECK(lib.attrs.at("dim") == "1");
    CHECK(lib.attrs.at("descending") == "False");
    check_seeds(t);
  }
  SECTION("topk: a result dim that is a constant (k)") {
    task_spec t = fallback_task("fallback_topk", "    v, i = torch.topk(x, 5, 1)\n    return torch.sigmoid(v) * 3.0\n");
    auto s = the_coder().seeds(t, 1);
    if (!s) FAIL(s.message());
    const candidate& c = s->front();
    CHECK(step_names(c) == V{"aten::topk", "kernel"});
    REQUIRE(c.plan.scratch.size() == 1);
    CHECK(c.plan.scratch[0].shape == V{"x.shape[0]", "5"});
    check_seeds(t);
  }
  SECTION("flip before a softmax whose scaling stays fused in its loads") {
    task_spec t = fallback_task("fallback_flip", "    return torch.softmax(torch.flip(x, [1]) * 0.5, dim=1)\n");
    auto s = the_coder().seeds(t, 1);
    if (!s) FAIL(s.message());
    CHECK(step_names(s->front()) == V{"aten::flip", "kernel"});
    CHECK(s->front().recipe.at("stages") == "fallback:aten::flip,row_reduce+prologue");
    check_seeds(t);
  }
  SECTION("a comparison and a cast: the comparison a library step, its bool result cast to float in the kernel") {
    task_spec t = fallback_task("fallback_mask", "    return x * (x > 0.5).float() + 1.0\n");
    auto s = the_coder().seeds(t, 1);
    if (!s) FAIL(s.message());
    CHECK(step_names(s->front()) == V{"aten::gt.Scalar", "kernel"});
    CHECK(s->front().plan.scratch.at(0).dtype == "bool");
    CHECK_THAT(s->front().source, Catch::Contains("const bool* __restrict__ m"));
    check_seeds(t);
  }
  SECTION("cat of two chains' results") {
    task_spec t = fallback_task("fallback_cat", "    return torch.cat([torch.relu(x), x * 2.0], dim=1) - 1.0\n");
    auto s = the_coder().seeds(t, 1);
    if (!s) FAIL(s.message());
    const candidate& c = s->front();
    REQUIRE(step_names(c).size() >= 3);
    const plan_step& lib = c.plan.steps[step_names(c).size() - 2];
    CHECK(lib.name == "aten::cat");
    CHECK(lib.attrs.at("tensors") == "2 tensors");
    CHECK(lib.args.size() == 2);
    check_seeds(t);
  }
}

TEST_CASE("rules coder: an op that cannot run even as a library step is named", "[rules][lower][fallback]") {
  // The dim of the flip is computed at run time from the data: an attribute is fixed
  // text. (One computed from shapes, [x.dim() - 1], is a constant at the task's shapes:
  // the graph export specialises such a list.)
  task_spec t = fallback_task("fallback_dynamic", "    return torch.flip(x, [int(bool(x.sum() > 0.0))]) * 2.0\n");
  auto s = the_coder().seeds(t, 1);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.message(), Catch::Contains("aten::flip") && Catch::Contains("computed at run time"));
}

// A chain after a pool or a scan runs in the same kernel, before the store.
task_spec with_body(const std::string& rel, const std::string& name, const std::string& body) {
  task_spec t = task(rel);
  t.name = name;
  t.torchscript = "def forward(x):\n" + body;
  return t;
}

TEST_CASE("rules coder: elementwise epilogues fused into pool and scan kernels", "[rules][lower][epilogue]") {
  struct expect {
    task_spec t;
    std::string stages;
  };
  const std::string pool = "bench/suites/ops/avg_pool2d_relu_scale.yaml";
  const expect cases[] = {
      {task(pool), "pool+epilogue"},
      {with_body(pool, "max_pool_tanh",
                 "    return torch.tanh(torch.max_pool2d(x, [3, 3], [2, 2], [1, 1], [1, 1], False)) * 0.5 + 1.0\n"),
       "pool+epilogue"},
      {with_body("bench/suites/ops/cumsum.yaml", "cumsum_exp",
                 "    return torch.exp(torch.cumsum(x, 1) * 0.01) - 1.0\n"),
       "scan+epilogue"},
      {with_body("bench/suites/ops/cumsum_dim1.yaml", "cumprod_mid_sigmoid",
                 "    return torch.sigmoid(torch.cumprod(x, 1)) * 2.0\n"),
       "scan+epilogue"},
      // The scan's result is returned too: it is stored, and the chain is its own kernel.
      {with_body("bench/suites/ops/cumsum.yaml", "cumsum_and_relu",
                 "    c = torch.cumsum(x, 1)\n    return c, torch.relu(c)\n"),
       "scan,elementwise"},
  };
  for (const expect& e : cases) {
    INFO(e.t.name);
    auto s = the_coder().seeds(e.t, 1);
    if (!s) FAIL(s.message());
    CHECK(s->front().recipe.at("stages") == e.stages);
    CHECK(s->front().plan.steps.size() == (e.stages.find(',') == std::string::npos ? 1u : 2u));
    check_seeds(e.t);
  }
}

TEST_CASE("rules coder: seeds suit the length of the rows", "[rules][seeds]") {
  // Rows of 16384: no warp per row among the first seeds.
  auto long_rows = the_coder().seeds(task("examples/tasks/softmax.yaml"), 2);
  REQUIRE(long_rows);
  REQUIRE(long_rows->size() == 2);
  for (auto& c : *long_rows) {
    CHECK(c.recipe.at("longest_row") == "16384");
    CHECK(c.recipe.at("row_mapping") == "block");
  }
  // Rows of 256: no block of 256 or more threads per row among the first seeds.
  auto short_rows = the_coder().seeds(task("bench/suites/ops/softmax_short_rows.yaml"), 2);
  REQUIRE(short_rows);
  REQUIRE(short_rows->size() == 2);
  for (auto& c : *short_rows) CHECK(c.recipe.at("row_mapping") == "warp");
  // All five parameter sets still come when asked for: the poor ones last.
  auto all = the_coder().seeds(task("bench/suites/ops/softmax_short_rows.yaml"), 5);
  REQUIRE(all);
  CHECK(all->size() >= 4);
  CHECK(all->back().recipe.at("row_mapping") == "block");
  // No row reduction: the order is the parameter sets' own.
  auto ew = the_coder().seeds(task("examples/tasks/gelu.yaml"), 2);
  REQUIRE(ew);
  CHECK(ew->front().recipe.count("longest_row") == 0);
  CHECK(ew->front().recipe.at("elements_per_thread") == "4");
}

// A submitted reference is untrusted: the child that exports its graph runs under CPU,
// memory and wall-clock limits and leaves nothing behind in the temporary directory.
TEST_CASE("graph export: a reference that loops forever is stopped at its limit, and leaves no files",
          "[rules][graph][limits]") {
  // A temporary directory of this test's own, so other processes' files do not count.
  const fs::path tmp = fs::path(KS_BINARY_DIR) / "graph-limits-tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  task_spec t = task("examples/tasks/swish.yaml");
  t.name = "endless";
  t.torchscript =
      "def forward(x):\n"
      "    y = x\n"
      "    for i in range(2000000000):\n"
      "        y = y * 1.0\n"
      "    return y\n";
  reference_limits cpu;
  cpu.cpu_seconds = 2;
  cpu.wall_seconds = 60;
  auto t0 = std::chrono::steady_clock::now();
  auto g = export_task_graph(kWorker, t, "cpu", cpu);
  REQUIRE_FALSE(g);
  CHECK_THAT(g.message(), Catch::Contains("endless") && Catch::Contains("2 s of CPU time"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));

  reference_limits wall;
  wall.wall_seconds = 2;
  t0 = std::chrono::steady_clock::now();
  g = export_task_graph(kWorker, t, "cpu", wall);
  REQUIRE_FALSE(g);
  CHECK_THAT(g.message(), Catch::Contains("longer than 2 s"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));

  // A reference that asks for more memory than allowed (6.4 GB, which this machine
  // has) is stopped too.
  task_spec big = task("examples/tasks/swish.yaml");
  big.name = "greedy";
  big.torchscript = "def forward(x):\n    return torch.zeros([40000, 40000]) + x.sum()\n";
  reference_limits mem;
  mem.memory_mb = 2048;
  g = export_task_graph(kWorker, big, "cpu", mem);
  REQUIRE_FALSE(g);
  CHECK_THAT(g.message(), Catch::Contains("greedy") && Catch::Contains("more than 2048 MiB of memory"));
  CHECK(fs::is_empty(tmp));
  if (old_tmpdir)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  fs::remove_all(tmp);
}

// A reference stopped by a limit would be stopped again: the coder does not export it a
// second time (each try would hold a task's slot up to the wall-clock limit).
TEST_CASE("rules coder: a reference a limit stopped is not exported again", "[rules][graph][limits]") {
  rules_coder_options o;
  o.gpu_worker = kWorker;
  o.skills_dir = kSource / "skills";
  o.limits.cpu_seconds = 2;
  auto coder = rules_coder::create(o);
  REQUIRE(coder);
  task_spec t = task("examples/tasks/swish.yaml");
  t.name = "endless_twice";
  t.torchscript = "def forward(x):\n    y = x\n    for i in range(2000000000):\n        y = y * 1.0\n    return y\n";
  auto first = (*coder)->seeds(t, 1);
  REQUIRE_FALSE(first);
  CHECK_THAT(first.message(), Catch::Contains("2 s of CPU time"));
  const auto t0 = std::chrono::steady_clock::now();
  auto second = (*coder)->seeds(t, 1);
  REQUIRE_FALSE(second);
  CHECK(second.message() == first.message());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
}

// x - logsumexp(x, 1, keepdim) over a [1, N] input reduces every element, and its
// epilogue was fused where the whole-tensor path has no tensor for it: an exception
// escaped lower_graph. It must come back as an error (or a kernel), never a throw.
TEST_CASE("rules coder: a graph a template does not expect gives an error, not an exception", "[rules][lower]") {
  task_spec t = task("examples/tasks/logsumexp.yaml");
  t.name = "lse_one_row";
  t.torchscript = "def forward(x):\n    return x - torch.logsumexp(x, 1, True)\n";
  for (auto& in : t.inputs) in.shape = {1, 4096};
  for (auto& [size, shapes] : t.sizes)
    for (auto& [name, shape] : shapes) shape = {1, 256};
  std::optional<result<std::vector<candidate>>> seeds;
  CHECK_NOTHROW(seeds.emplace(the_coder().seeds(t, 2)));
  if (seeds && !*seeds) CHECK_THAT(seeds->message(), Catch::Contains("lse_one_row"));
}

// The row-reduce template's forms for every aspect ratio at KernelBench's published
// sizes (level 1: LayerNorm over 64 x 256 x 256, GroupNorm, InstanceNorm and RMSNorm
// over channels of 112 x 64 x 512 x 512) and a sum over few long rows: every seed
// compiles with NVRTC and its plan resolves at that size, on the default device (an
// H200: 132 SMs). The graphs come from small sizes; the shapes the templates choose
// from are the declared ones.
task_spec sized_task(const std::string& name, const std::string& args, const std::string& body,
                     const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                     const std::vector<std::pair<std::string, std::vector<int64_t>>>& cpu) {
  auto dims = [](const std::vector<int64_t>& s) {
    std::string t;
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return "[" + t + "]";
  };
  std::string yaml = "name: " + name + "\nreference:\n  torchscript: |\n    def forward(" + args +
                     "):\n        return " + body + "\ninputs:\n";
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i == 1) yaml += "parameters:\n";
    yaml += "  - name: " + tensors[i].first + "\n    shape: " + dims(tensors[i].second) + "\n";
  }
  yaml += "sizes:\n  cpu: {";
  for (size_t i = 0; i < cpu.size(); ++i) yaml += (i ? ", " : "") + cpu[i].first + ": " + dims(cpu[i].second);
  yaml += "}\n";
  auto t = parse_task(yaml, name + ".yaml", kSource);
  if (!t) FAIL(t.message());
  return *t;
}

// One graph, rows of 48 and of 16384 (level 3's NetVlad: a softmax over its clusters,
// then a norm over everything): the long rows make the block mapping the first seed's,
// and its short rows are still a warp's, never a block of 256 threads a row of 48.
TEST_CASE("rules coder: short rows are a warp's whatever the seed's row mapping", "[rules][lower]") {
  const task_spec t = sized_task("short_and_long_rows", "x", "torch.softmax(x, 1).reshape(-1, 16384).sum(1)",
                                 {{"x", {65536, 48}}}, {{"x", {4096, 48}}});
  auto seeds = the_coder().seeds(t, 2);
  if (!seeds) FAIL(seeds.message());
  bool block_seed = false;
  for (const candidate& c : *seeds) {
    INFO(c.recipe.at("stages") << "\n" << c.source);
    block_seed = block_seed || c.recipe.count("row_mapping") == 0 || c.recipe.at("row_mapping") == "block";
    CHECK(c.source.find("softmax over the last dims; 2 rows a warp") != std::string::npos);
    const bool softmax_in_block = c.source.find("softmax over the last dims; a block per row") != std::string::npos;
    CHECK_FALSE(softmax_in_block);
  }
  CHECK(block_seed);
}

TEST_CASE("rules coder: reductions of every aspect ratio at KernelBench's sizes compile and resolve",
          "[rules][lower][aspect]") {
  struct aspect_case {
    task_spec t;
    const char* form;  // a comment the chosen kernel carries
  };
  const aspect_case cases[] = {
      {sized_task("layer_norm_kb", "x, weight, bias",
                  "torch.layer_norm(x, [x.size(1), x.size(2), x.size(3)], weight, bias, 1e-5)",
                  {{"x", {16, 64, 256, 256}}, {"weight", {64, 256, 256}}, {"bias", {64, 256, 256}}},
                  {{"x", {2, 4, 8, 8}}, {"weight", {4, 8, 8}}, {"bias", {4, 8, 8}}}),
       "few long rows, second pass"},
      {sized_task("group_norm_kb", "x, weight, bias", "torch.group_norm(x, 8, weight, bias, 1e-5)",
                  {{"x", {112, 64, 512, 512}}, {"weight", {64}}, {"bias", {64}}},
                  {{"x", {2, 16, 4, 4}}, {"weight", {16}}, {"bias", {16}}}),
       "group's first channel"},
      {sized_task("instance_norm_kb", "x", "torch.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, False)",
                  {{"x", {112, 64, 512, 512}}}, {{"x", {2, 4, 4, 4}}}),
       "instance_norm over the last dims"},
      {sized_task("rms_channels_kb", "x", "x / torch.sqrt(torch.mean(x ** 2, 1, True) + 1e-5)",
                  {{"x", {112, 64, 512, 512}}}, {{"x", {2, 4, 4, 4}}}),
       "read twice"},
      {sized_task("batch_norm_kb", "x, weight, bias",
                  "torch.batch_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False)",
                  {{"x", {64, 64, 512, 512}}, {"weight", {64}}, {"bias", {64}}},
                  {{"x", {2, 4, 4, 4}}, {"weight", {4}}, {"bias", {4}}}),
       "the partial states of the row's channel in every batch"},
      {sized_task("sum_few_rows", "x", "torch.sum(x, [1])", {{"x", {8, 1048576}}}, {{"x", {2, 4096}}}),
       "a warp per row merges"},
      {sized_task("cumsum_reverse_kb", "x", "torch.cumsum(x.flip(1), 1).flip(1)", {{"x", {32768, 32768}}},
                  {{"x", {4, 300}}}),
       "its input read reversed, its result stored reversed"},
      {sized_task("cumsum_exclusive_kb", "x",
                  "torch.cumsum(torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x), dim=1).narrow(1, 0, "
                  "x.size(1)), dim=1)",
                  {{"x", {32768, 32768}}}, {{"x", {4, 300}}}),
       "exclusive"},
      {sized_task("cumsum_exclusive_after_kb", "x",
                  "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), torch.cumsum(x.narrow(1, 0, x.size(1) - "
                  "1), 1)), 1)",
                  {{"x", {32768, 32768}}}, {{"x", {4, 300}}}),
       "exclusive"},
      {sized_task("cumsum_few_long_rows", "x", "torch.cumsum(x, 1)", {{"x", {4, 4194304}}}, {{"x", {2, 5000}}}),
       "each block scans its chunk after the chunks before"},
      {sized_task("cumprod_block_rows", "x", "torch.cumprod(x, 1)", {{"x", {512, 4096}}}, {{"x", {2, 500}}}),
       "a block per row"},
  };
  for (const auto& ac : cases) {
    INFO(ac.t.name);
    auto seeds = the_coder().seeds(ac.t, 2);
    if (!seeds) FAIL(seeds.message());
    for (const candidate& c : *seeds) {
      INFO(c.source);
      CHECK(c.source.find(ac.form) != std::string::npos);
      compiled_and_resolved(ac.t, c);
    }
  }
  // The split of 16 rows of 4M on 132 SMs: 8 blocks of 256 an SM, 66 a row.
  auto ln = the_coder().seeds(cases[0].t, 1);
  REQUIRE(ln);
  CHECK(compiled_and_resolved(cases[0].t, ln->front()).constants.at("SPLIT0").i == 66);
}

// cross_entropy at KernelBench's 95's size: the logits read once, by a row logsumexp kernel.
TEST_CASE("rules coder: cross-entropy at KernelBench's size compiles and resolves", "[rules][lower][loss]") {
  auto t = parse_task(
      "name: cross_entropy_kb\nreference:\n  torchscript: |\n    def forward(x, t):\n"
      "        return torch.cross_entropy_loss(x, t, None, 1, -100, 0.0)\ninputs:\n"
      "  - {name: x, shape: [32768, 4096]}\n  - {name: t, shape: [32768], dtype: int64, init: {kind: randint, "
      "low: 0, high: 4096}}\nsizes:\n  cpu: {x: [5, 300], t: [5]}\n",
      "cross_entropy_kb.yaml", kSource);
  REQUIRE(t);
  auto seeds = the_coder().seeds(*t, 2);
  if (!seeds) FAIL(seeds.message());
  for (const candidate& c : *seeds) {
    CHECK_THAT(c.recipe.at("stages"), Catch::StartsWith("row_reduce,") && Catch::Contains("fallback:aten::gather"));
    CHECK(compiled_and_resolved(*t, c, {"", "cpu"}).steps.front().name.find("_lse") != std::string::npos);
  }
}

// batch_norm is a row normalisation only on the batch's statistics and with
// (batch, channel) rows: on running statistics (eval mode) it is an affine map that
// stays ATen's, as does a 2-d input (one element a row); each says why.
TEST_CASE("rules coder: batch_norm on running statistics or of a 2-d input stays a library step, named",
          "[rules][batch_norm]") {
  const task_spec eval = sized_task("bn_eval", "x, weight, bias, rm, rv",
                                    "torch.batch_norm(x, weight, bias, rm, rv, False, 0.1, 1e-5, False)",
                                    {{"x", {4, 8, 5, 5}}, {"weight", {8}}, {"bias", {8}}, {"rm", {8}}, {"rv", {8}}},
                                    {{"x", {4, 8, 5, 5}}, {"weight", {8}}, {"bias", {8}}, {"rm", {8}}, {"rv", {8}}});
  const task_spec flat =
      sized_task("bn_2d", "x, weight, bias", "torch.batch_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False)",
                 {{"x", {16, 8}}, {"weight", {8}}, {"bias", {8}}}, {{"x", {16, 8}}, {"weight", {8}}, {"bias", {8}}});
  const std::pair<const task_spec*, const char*> cases[] = {{&eval, "on running statistics"}, {&flat, "rank 2"}};
  for (const auto& [t, why] : cases) {
    INFO(t->name);
    auto seeds = the_coder().seeds(*t, 1);
    if (!seeds) FAIL(seeds.message());
    const candidate& c = seeds->front();
    CHECK(c.recipe.at("template") == "library");
    CHECK_THAT(c.recipe.at("fallback_why"), Catch::Contains("aten::batch_norm") && Catch::Contains(why));
  }
  // With the batch's statistics, the same 4-d input is one row_reduce stage.
  const task_spec train = sized_task(
      "bn_train", "x, weight, bias", "torch.batch_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False)",
      {{"x", {4, 8, 5, 5}}, {"weight", {8}}, {"bias", {8}}}, {{"x", {4, 8, 5, 5}}, {"weight", {8}}, {"bias", {8}}});
  auto seeds = the_coder().seeds(train, 1);
  if (!seeds) FAIL(seeds.message());
  CHECK(seeds->front().recipe.at("stages") == "row_reduce");
}

// A network of many normalisations on the batch's statistics: its first seed sums them
// in ATen's order (the plainest parameters, every reduction an ATen library step),
// rather than reaching that candidate after two failed reviews; below four such layers,
// or on running statistics, the seeds are as ever.
TEST_CASE("rules coder: a deep chain of batch-statistics normalisations seeds ATen's reductions first",
          "[rules][seeds][batch_norm]") {
  auto chain = [](const std::string& name, int layers, bool training) {
    std::string body = "x", args = "x";
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {{"x", {4, 8, 5, 5}}};
    for (int i = 0; i < layers; ++i) {
      const std::string w = "w" + std::to_string(i), b = "b" + std::to_string(i);
      const std::string stats = training ? "None, None" : "rm, rv";
      body = "torch.relu(torch.batch_norm(" + body + ", " + w + ", " + b + ", " + stats + ", " +
             (training ? "True" : "False") + ", 0.1, 1e-5, False))";
      args += ", " + w + ", " + b;
      tensors.push_back({w, {8}});
      tensors.push_back({b, {8}});
    }
    if (!training) {
      args += ", rm, rv";
      tensors.push_back({"rm", {8}});
      tensors.push_back({"rv", {8}});
    }
    return sized_task(name, args, body, tensors, tensors);
  };
  const task_spec deep = chain("bn_chain_4", rules::kDeepNormalisations, true);
  auto seeds = the_coder().seeds(deep, 2);
  if (!seeds) FAIL(seeds.message());
  REQUIRE(seeds->size() == 2);
  const candidate& first = seeds->front();
  INFO(first.recipe.at("stages"));
  CHECK(first.recipe.at("library_reductions") == "1");
  CHECK(first.recipe.at("vector_width") == "1");
  CHECK_THAT(first.recipe.at("stages"), Catch::Contains("fallback:aten::batch_norm"));
  CHECK_THAT(first.recipe.at("fallback_why"), Catch::Contains("library_reductions"));
  // The second seed is the first one of a task without the chain.
  CHECK(seeds->at(1).recipe.count("library_reductions") == 0);
  CHECK_THAT(seeds->at(1).recipe.at("stages"), Catch::Contains("row_reduce"));
  // Its repair is none: ATen's reductions with the plainest parameters were the last
  // resort, and they failed.
  repair_input r;
  r.task = deep;
  r.failed = first;
  r.review.message = "incorrect: max abs error 6e-4";
  CHECK_FALSE(the_coder().repair(r));

  for (const task_spec& t : {chain("bn_chain_3", rules::kDeepNormalisations - 1, true),
                             chain("bn_chain_eval", rules::kDeepNormalisations, false)}) {
    INFO(t.name);
    auto s = the_coder().seeds(t, 1);
    if (!s) FAIL(s.message());
    CHECK(s->front().recipe.count("library_reductions") == 0);
  }
  // instance_norm on its input's statistics counts as well (the rule the templates
  // read, op_specs.hpp's on_batch_statistics), and group_norm always does.
  const std::vector<std::pair<std::string, std::vector<int64_t>>> affine = {
      {"x", {4, 8, 5, 5}}, {"w", {8}}, {"b", {8}}};
  const task_spec mixed = sized_task(
      "in_gn_chain", "x, w, b",
      "torch.relu(torch.instance_norm(torch.group_norm(torch.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, "
      "False), 2, w, b, 1e-5, False), w, b, None, None, True, 0.1, 1e-5, False))",
      affine, affine);
  auto m = the_coder().seeds(mixed, 1);
  if (!m) FAIL(m.message());
  CHECK(m->front().recipe.count("library_reductions") == 1);
}

// Issue 17, item 4: every (template, method) pair the decision policy can produce for
// a rules-coder candidate is a real change of that candidate's kernels. The walk: the
// seeds of every example and suite task and of the aspect-ratio tasks above, and for
// each seed the child made by its first offered method (a state no seed is in); for
// each candidate, the policy's offer without evidence and without long-term memory
// (every method allowed unless vetoed: the largest offer it can make, since evidence
// only removes methods), read through make_policy_input as the planner reads it.
// Each method offered must give a candidate with other kernels (another source or
// launch); each method not offered that has a rules_coder entry must be refused by
// optimize() (so the offer hides no real change). Then the methods the row templates
// are built for must be offered somewhere, and methods with no parameter in the
// templates nowhere.
TEST_CASE("rules coder: every method the policy offers a candidate changes its kernels, within its search space",
          "[rules][contract]") {
  auto lib = load_skill_library(kSource / "skills");
  REQUIRE(lib);
  std::vector<task_spec> corpus;
  for (const char* dir : {"examples/tasks", "bench/suites/ops"})
    for (auto& path : task_files(dir)) corpus.push_back(task(fs::relative(path, kSource).string()));
  corpus.push_back(sized_task("layer_norm_few_rows", "x, weight, bias",
                              "torch.layer_norm(x, [x.size(1)], weight, bias, 1e-5)",
                              {{"x", {16, 1048576}}, {"weight", {1048576}}, {"bias", {1048576}}},
                              {{"x", {2, 4096}}, {"weight", {4096}}, {"bias", {4096}}}));
  corpus.push_back(sized_task("group_norm_kb", "x, weight, bias", "torch.group_norm(x, 8, weight, bias, 1e-5)",
                              {{"x", {112, 64, 512, 512}}, {"weight", {64}}, {"bias", {64}}},
                              {{"x", {2, 16, 4, 4}}, {"weight", {16}}, {"bias", {16}}}));
  corpus.push_back(sized_task("rms_channels_kb", "x", "x / torch.sqrt(torch.mean(x ** 2, 1, True) + 1e-5)",
                              {{"x", {112, 64, 512, 512}}}, {{"x", {2, 4, 4, 4}}}));
  corpus.push_back(sized_task("batch_norm_kb", "x, weight, bias",
                              "torch.batch_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False)",
                              {{"x", {64, 64, 512, 512}}, {"weight", {64}}, {"bias", {64}}},
                              {{"x", {2, 4, 4, 4}}, {"weight", {4}}, {"bias", {4}}}));
  corpus.push_back(sized_task("cumsum_reverse_few_rows", "x", "torch.cumsum(x.flip(1), 1).flip(1)",
                              {{"x", {4, 4194304}}}, {{"x", {2, 5000}}}));
  corpus.push_back(
      sized_task("softmax_short_rows_16", "x", "torch.softmax(x, -1)", {{"x", {1048576, 16}}}, {{"x", {64, 16}}}));
  std::vector<std::string> with_rule;
  for (const method_def& m : lib->methods)
    if (!m.rules_coder.empty()) with_rule.push_back(m.id);
  std::map<std::string, std::set<std::string>> pairs;  // template → methods offered somewhere
  const std::vector<std::string> space_params = {
      "vector_width", "block_size", "elements_per_thread", "grid_cap", "row_mapping", "fast_math",      "fuse_prologue",
      "row_cache",    "cache_hint", "row_split",           "moments",  "conv_layout", "gemm_precision", "matvec_sums"};
  size_t walked = 0;
  // Walks `c`: every method offered changes its kernels, every other is refused. The
  // first change made is handed back (a state to walk next).
  auto walk = [&](const task_spec& t, const candidate& c) -> std::optional<candidate> {
    REQUIRE(c.recipe.count("methods"));
    plan_request req;  // what the policy offers `c`, read as the planner reads it
    req.task = t;
    req.cand = c;
    policy_input in = make_policy_input(req);
    in.use_long_term_memory = false;
    std::set<std::string> offered;
    for (const auto& m : decide(*lib, in).ranked) offered.insert(m.method);
    const std::string templ = c.recipe.at("template");
    INFO(t.name << " " << c.origin << " (" << c.recipe.at("stages") << "), methods " << c.recipe.at("methods"));
    ++walked;
    std::optional<candidate> first;
    for (const std::string& m : with_rule) {
      optimize_input oi;
      oi.task = t;
      oi.base = c;
      oi.plan.chosen = m;
      auto changed = the_coder().optimize(oi);
      INFO("method " << m << (changed ? std::string() : ": " + changed.message()));
      if (!offered.count(m)) {
        CHECK_FALSE(changed);
        continue;
      }
      REQUIRE(changed);
      CHECK((changed->source != c.source || !(changed->plan == c.plan)));
      // The change is a move in c's search space: each parameter it sets takes a value
      // the candidate's templates declare legal at the task's shapes.
      auto space = parse_search_space(c.recipe.at("space"));
      REQUIRE(space);
      for (const std::string& param : space_params)
        if (changed->recipe.count(param) &&
            changed->recipe.at(param) != (c.recipe.count(param) ? c.recipe.at(param) : "")) {
          INFO(param << " = " << changed->recipe.at(param) << " in " << c.recipe.at("space"));
          CHECK(space->allows(param, changed->recipe.at(param)));
        }
      pairs[templ].insert(m);
      if (!first) first = *changed;
    }
    return first;
  };
  for (const task_spec& t : corpus) {
    auto seeds = the_coder().seeds(t, 5);
    if (!seeds) FAIL(seeds.message());
    for (const candidate& seed : *seeds)
      if (auto child = walk(t, seed)) walk(t, *child);
  }
  INFO(walked << " candidates walked");
  auto somewhere = [&](const std::string& m) {
    for (auto& [templ, ms] : pairs)
      if (ms.count(m)) return true;
    return false;
  };
  for (const char* m :
       {"multi_block_row_split", "welford_single_pass", "cache_row_in_registers", "warp_per_row",
        "block_per_row_vectorized", "balance_waves", "online_softmax", "fuse_reduction_producer_consumer",
        "vectorize_loads", "streaming_cache_hints", "fast_math_intrinsics", "increase_block_size"}) {
    INFO(m);
    CHECK(somewhere(m));
  }
  for (const char* m : {"tensor_cores_tf32", "split_k", "hierarchical_atomic_reduction", "shared_memory_tiling",
                        "cuda_graph_capture", "persistent_kernel"}) {
    INFO(m);
    CHECK_FALSE(somewhere(m));
  }
  CHECK(pairs.count("row_reduce"));
  CHECK(pairs.count("scan"));
  CHECK(pairs.count("elementwise"));
  // A pool's run of outputs a thread is a parameter the rounds can change.
  REQUIRE(pairs.count("pool"));
  CHECK((pairs["pool"].count("thread_coarsening") || pairs["pool"].count("increase_ilp_elements_per_thread")));
}
