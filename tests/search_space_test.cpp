// The templates' search spaces and the skill methods as moves in them (issue 48,
// point 1), on real parts: graphs exported by kernelskill-gpu (CPU LibTorch), the real
// lowering at two target shapes per template, the real rules coder and skill library.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "coder/rules_coder.hpp"
#include "coder/search_space.hpp"
#include "coder/space_moves.hpp"
#include "task/task_loader.hpp"

using namespace ks;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

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

// A task of one input x: `body` of x at `shape`, its graph from a small `cpu` size.
task_spec x_task(const std::string& name, const std::string& body, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& cpu) {
  auto dims = [](const std::vector<int64_t>& s) {
    std::string t;
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return "[" + t + "]";
  };
  const std::string yaml = "name: " + name + "\nreference:\n  torchscript: |\n    def forward(x):\n        return " +
                           body + "\ninputs:\n  - {name: x, shape: " + dims(shape) +
                           ", dtype: float32}\nsizes:\n  cpu: {x: " + dims(cpu) + "}\n";
  auto t = parse_task(yaml, name + ".yaml", kSource);
  if (!t) FAIL(t.message());
  return *t;
}

// The space of `t`'s graph lowered with `p` at `target`.
search_space space_at(const task_spec& t, const target_shapes& target, const lowering_params& p = {}) {
  auto g = the_coder().graph(t);
  if (!g) FAIL(g.message());
  auto lowered = lower_graph(*g, p, target);
  if (!lowered) FAIL(lowered.message());
  INFO(t.name << ": " << lowered->space.text());
  return lowered->space;
}

std::vector<std::string> v(std::initializer_list<const char*> l) { return {l.begin(), l.end()}; }

}  // namespace

TEST_CASE("search space: text round-trips, values in the parameter's order", "[space]") {
  search_space s;
  s.allow("block_size", {"512", "32", "128"});
  s.allow("block_size", {"32", "64"});
  s.allow("row_cache", {"on_chip", "none", "registers"});
  CHECK(s.values("block_size") == v({"32", "64", "128", "512"}));
  CHECK(s.values("row_cache") == v({"none", "registers", "on_chip"}));
  CHECK(s.text() == "block_size=32|64|128|512;row_cache=none|registers|on_chip");
  auto back = parse_search_space(s.text());
  REQUIRE(back);
  CHECK(back->legal == s.legal);
  CHECK_THAT(parse_search_space("block_size").message(), Contains("'block_size'"));
  CHECK(s.allows("block_size", "64"));
  CHECK_FALSE(s.allows("block_size", "256"));
  CHECK_FALSE(s.allows("vector_width", "4"));
}

TEST_CASE("search space: each template declares its parameters, legal values follow the shapes", "[space]") {
  SECTION("elementwise: vector width, block, run a thread and grid cap no wider than the tensor") {
    const task_spec t = x_task("space_relu", "torch.relu(x)", {4096, 1024}, {8, 16});
    const search_space big = space_at(t, {{"x", {4096, 1024}}});
    const search_space tiny = space_at(t, {{"x", {2, 40}}});  // 80 elements
    CHECK(big.values("vector_width") == v({"1", "2", "4"}));
    CHECK(tiny.values("vector_width") == v({"1", "2"}));  // 4 floats a lane: 128 > 80
    CHECK(big.values("block_size") == v({"32", "64", "128", "256", "512", "1024"}));
    CHECK(tiny.values("block_size") == v({"32"}));  // 20 float4s: one warp
    CHECK(big.values("elements_per_thread") == v({"1", "2", "4", "8", "16"}));
    CHECK(tiny.values("elements_per_thread") == v({"1"}));
    CHECK(big.values("cache_hint") == v({"none", "streaming", "readonly"}));
    CHECK(tiny.values("grid_cap") == v({"1024"}));  // one block: no cap binds
    CHECK(big.values("grid_cap").size() > 1);
    // relu calls neither exp nor a division: fast_math changes nothing and is no parameter.
    CHECK_FALSE(big.has("fast_math"));
    CHECK_FALSE(big.has("row_mapping"));
    CHECK(space_at(x_task("space_sigmoid", "torch.sigmoid(x)", {4096, 1024}, {8, 16}), {{"x", {4096, 1024}}})
              .values("fast_math") == v({"0", "1"}));
  }
  SECTION("row_reduce: a warp a row only for rows it can walk, splits only for few rows") {
    const task_spec t = x_task("space_softmax", "torch.softmax(x, -1)", {4096, 1024}, {8, 64});
    const search_space many = space_at(t, {{"x", {4096, 1024}}});
    const search_space few_long = space_at(t, {{"x", {8, 1048576}}});
    const search_space short_rows = space_at(t, {{"x", {65536, 64}}});
    CHECK(many.values("row_mapping") == v({"block", "warp"}));
    CHECK(few_long.values("row_mapping") == v({"block"}));  // a lane would walk 32768 elements
    // Few long rows: a block a row leaves the device idle, so row_split is a parameter
    // (0: a block a row; 1, 2, ...: device-fulls of blocks); many rows fill it already.
    CHECK_FALSE(many.has("row_split"));
    REQUIRE(few_long.has("row_split"));
    CHECK(few_long.values("row_split").front() == "0");
    CHECK(few_long.values("row_split").size() >= 3);
    // A 64-element row is a warp's (two rows a warp) whatever the mapping: no mapping
    // move, and a block takes up to 64 of the 65536 rows at once.
    CHECK(short_rows.values("row_mapping") == v({"block"}));
    CHECK(short_rows.values("block_size").back() == "1024");
    CHECK(many.values("block_size").back() == "1024");
    // The softmax reads its row twice: caching it is a parameter; a row sum is not.
    CHECK(many.has("row_cache"));
    CHECK_FALSE(space_at(x_task("space_rowsum", "torch.sum(x, -1)", {4096, 1024}, {8, 64}), {{"x", {4096, 1024}}})
                    .has("row_cache"));
    // Moments only where a variance is computed.
    CHECK_FALSE(many.has("moments"));
    CHECK(space_at(x_task("space_var", "torch.var(x, -1)", {4096, 1024}, {8, 64}), {{"x", {4096, 1024}}})
              .values("moments") == v({"shifted", "welford"}));
  }
  SECTION("scan: split rows only where few rows leave the device idle") {
    const task_spec t = x_task("space_cumsum", "torch.cumsum(x, 1)", {32768, 4096}, {64, 1000});
    const search_space many = space_at(t, {{"x", {32768, 4096}}});
    const search_space few = space_at(t, {{"x", {4, 4194304}}});
    CHECK_FALSE(many.has("row_split"));
    CHECK(few.has("row_split"));
    CHECK(many.has("block_size"));
    CHECK(many.has("fuse_prologue") == false);  // nothing feeds it
  }
  SECTION("pool: runs of outputs a thread only where windows overlap, block no wider than the outputs") {
    const task_spec t = task("bench/suites/ops/avg_pool2d.yaml");  // 3x3, stride 2: overlapping
    const search_space big = space_at(t, {{"x", {32, 64, 256, 256}}});
    const search_space small = space_at(t, {{"x", {1, 1, 5, 5}}});  // 9 outputs
    CHECK(big.values("elements_per_thread").size() > 1);
    CHECK(big.values("block_size").back() == "1024");
    CHECK(small.values("block_size") == v({"32"}));
    const task_spec disjoint =
        x_task("space_pool_disjoint", "torch.avg_pool2d(x, [4, 4], [4, 4])", {32, 64, 256, 256}, {2, 3, 16, 16});
    CHECK_FALSE(space_at(disjoint, {{"x", {32, 64, 256, 256}}}).has("elements_per_thread"));
  }
  SECTION("library: 3xTF32 only for a product bound by arithmetic at these shapes") {
    const task_spec t = task("examples/tasks/matmul_bias_relu.yaml");
    const search_space big = space_at(t, {{"x", {4096, 4096}}, {"weight", {4096, 4096}}, {"bias", {4096}}});
    const search_space small = space_at(t, {{"x", {64, 128}}, {"weight", {128, 128}}, {"bias", {128}}});
    CHECK(big.values("gemm_precision") == v({"fp32", "split_tf32"}));
    CHECK_FALSE(small.has("gemm_precision"));
    CHECK(big.has("vector_width"));  // the epilogue's elementwise kernel
  }
}

TEST_CASE("search space: every move a candidate lists is legal there and changes its lowered text", "[space][moves]") {
  std::vector<task_spec> corpus = {task("examples/tasks/gelu.yaml"),
                                   task("examples/tasks/softmax.yaml"),
                                   task("examples/tasks/layernorm.yaml"),
                                   task("examples/tasks/matmul_bias_relu.yaml"),
                                   task("bench/suites/ops/avg_pool2d.yaml"),
                                   task("bench/suites/ops/cumsum.yaml"),
                                   task("bench/suites/ops/row_var.yaml"),
                                   x_task("space_sum_few_long", "torch.sum(x, -1)", {8, 1048576}, {2, 4096})};
  size_t checked = 0;
  for (const task_spec& t : corpus) {
    auto seeds = the_coder().seeds(t, 5);
    if (!seeds) FAIL(seeds.message());
    for (const candidate& c : *seeds) {
      auto space = parse_search_space(c.recipe.at("space"));
      REQUIRE(space);
      const auto moves = the_coder().moves(t, c);
      INFO(t.name << " " << c.origin << ": space " << c.recipe.at("space") << "; moves " << c.recipe.at("moves"));
      for (const space_move& m : moves) {
        INFO(m.method << ": " << m.param << " " << m.from << " -> " << m.to);
        // Legal at the task's shapes, never the current value.
        CHECK(space->allows(m.param, m.to));
        CHECK(m.from != m.to);
        CHECK_FALSE(m.expected_effect.empty());
        // It applies, and the lowered text (source or plan) changes.
        optimize_input in;
        in.task = t;
        in.base = c;
        in.plan.chosen = m.method;
        auto child = the_coder().optimize(in);
        if (!child) FAIL(child.message());
        CHECK(child->recipe.at(m.param) == m.to);
        CHECK((child->source != c.source || !(child->plan == c.plan)));
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("search space: a move outside the legal values is never offered", "[space][moves]") {
  // An 80-element tensor: one warp of float2s. The seeds' 256-thread blocks are wider
  // than the tensor; no block size above them, no float4, no run of 2 is legal.
  const task_spec t = x_task("space_tiny", "torch.relu(x)", {2, 40}, {2, 40});
  auto seeds = the_coder().seeds(t, 5);
  REQUIRE(seeds);
  for (const candidate& c : *seeds) {
    INFO(c.origin << ": " << c.recipe.at("space") << "; moves " << c.recipe.at("moves"));
    const std::string methods = "," + c.recipe.at("methods") + ",";
    CHECK(methods.find(",increase_block_size,") == std::string::npos);
    CHECK(methods.find(",increase_ilp_elements_per_thread,") == std::string::npos);
    optimize_input in;
    in.task = t;
    in.base = c;
    in.plan.chosen = "increase_block_size";
    auto r = the_coder().optimize(in);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.message(), Contains("its legal values here: 32"));
    // The skill lists float4 first; here the move is to float2, or none.
    in.plan.chosen = "vectorize_loads";
    if (auto w = the_coder().optimize(in)) CHECK(w->recipe.at("vector_width") != "4");
  }
  // The same rule against a space read directly: the listed values that are not legal
  // are skipped, the legal ones further along the method's direction follow.
  search_space s;
  s.allow("row_split", {"0", "1", "2", "8"});
  std::map<std::string, std::string> recipe = {
      {"template", "row_reduce"}, {"stages", "row_reduce"}, {"row_split", "1"}};
  coder_rule rule{"row_split", "set", {"2", "4"}};
  auto changes = rule_changes("multi_block_row_split", rule, recipe, s, {}, "");
  REQUIRE(changes);
  REQUIRE(changes->size() == 2);
  CHECK((*changes)[0].value == "2");
  CHECK((*changes)[1].value == "8");  // 4 is not legal here; 8 is, further up
  // Without the space (the coder before it): the listed values, the first that differs.
  auto listed = rule_changes("multi_block_row_split", rule, recipe, s, {}, "", false);
  REQUIRE(listed);
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].value == "2");
  // A parameter its kernels do not read is no move.
  auto none = rule_changes("multi_block_row_split", rule, recipe, search_space{}, {}, "");
  REQUIRE_FALSE(none);
  CHECK_THAT(none.message(), Contains("do not read row_split"));
}
