// The rules coder on real parts: graphs exported by the kernelskill-gpu binary (CPU
// LibTorch), lowered into sources that NVRTC compiles and plans that the plan
// validator resolves at the tasks' shapes; optimize() and repair() on the recipes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "coder/rules_coder.hpp"
#include "gpu/nvrtc_compiler.hpp"
#include "plan/plan_validator.hpp"
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
    auto compiled = compiler().compile(c.source, c.compile_options);
    REQUIRE(compiled);
    INFO(compiled->log);
    CHECK(compiled->ok);
    for (std::string size : {std::string(), std::string("cpu")}) {
      auto ctx = make_plan_context(t, c.source, size);
      REQUIRE(ctx);
      auto resolved = resolve_plan(c.plan, *ctx);
      INFO("size '" << size << "'");
      if (!resolved) FAIL(resolved.message());
    }
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

TEST_CASE("rules coder: example tasks lower to seeds that compile and resolve", "[rules][lower]") {
  for (auto& path : task_files("examples/tasks")) check_seeds(task(fs::relative(path, kSource).string()));
}

TEST_CASE("rules coder: the KernelBench-style suite lowers to seeds that compile and resolve", "[rules][lower][suite]") {
  for (auto& path : task_files("bench/tasks")) check_seeds(task(fs::relative(path, kSource).string()));
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
  REQUIRE(mm.plan.steps.size() == 2);  // the product, then one epilogue kernel
  CHECK(mm.plan.steps[0].kind == "library");
  CHECK(mm.plan.steps[0].name == "aten::matmul");
  candidate rms = first("bench/tasks/rmsnorm.yaml");
  CHECK(rms.recipe.at("stages").find("row_reduce+prologue") != std::string::npos);
  candidate mse = first("bench/tasks/mse_loss.yaml");
  CHECK(mse.plan.steps.size() == 2);  // partials, then the final combine
  CHECK(mse.recipe.at("stages") == "row_reduce+prologue");
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

  in.plan.chosen = "fast_math_intrinsics";
  auto f = the_coder().optimize(in);
  REQUIRE(f);
  CHECK(f->recipe.at("fast_math") == "1");
  CHECK(f->source.find("__expf") != std::string::npos);

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
  in.plan.chosen = "warp_per_row";
  auto w = the_coder().optimize(in);
  if (!w) FAIL(w.message());
  CHECK(w->recipe.at("row_mapping") == "warp");
  in.plan.chosen = "online_softmax";
  auto o = the_coder().optimize(in);
  REQUIRE_FALSE(o);
  CHECK_THAT(o.message(), Catch::Contains("already single-pass"));
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

  // A change with no other value: back to the last good code.
  in.plan.chosen = "fast_math_intrinsics";
  auto fast = the_coder().optimize(in);
  REQUIRE(fast);
  r.failed = *fast;
  auto back = the_coder().repair(r);
  REQUIRE(back);
  CHECK(back->source == in.base.source);
  CHECK(back->plan == in.base.plan);
  CHECK(back->recipe.at("excluded") == "fast_math=1");
  // ... and the method is not offered again.
  optimize_input again = in;
  again.base = *back;
  again.plan.chosen = "fast_math_intrinsics";
  CHECK_FALSE(the_coder().optimize(again));

  // A failing seed: the plainest parameters.
  repair_input s;
  s.task = t;
  s.failed = in.base;
  auto plain = the_coder().repair(s);
  REQUIRE(plain);
  CHECK(plain->recipe.at("vector_width") == "1");
  CHECK(plain->origin == "repair:conservative");
}

TEST_CASE("rules coder: an unsupported op is named", "[rules][lower]") {
  task_spec t = task("examples/tasks/gelu.yaml");
  t.name = "sort_task";
  t.torchscript = "def forward(x):\n    return torch.flip(x, [1])\n";
  auto s = the_coder().seeds(t, 1);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.message(), Catch::Contains("aten::flip"));
}
