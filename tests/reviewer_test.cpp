// The reviewer (gpu/reviewer.hpp): its CPU-testable parts everywhere — argument
// packing, timing statistics and the measurement loop, trial distributions, the ATen
// op table and the output checks on CPU tensors, the report — and, where there is a
// GPU, whole reviews: the example plans must come out `ok`, and an adversarial suite
// of broken or cheating candidates must each fail or be flagged. Without a GPU the
// GPU tests ([gpu]) are reported to ctest as skipped (tests/support/gpu_skip.hpp).
//
// A test tagged [crash] (hidden; run it alone: reviewer_test "[crash]") makes a kernel
// fault, which poisons the process's CUDA context for good.
#include "model/json_codec.hpp"
#include "tests/support/catch_torch.hpp"
#include "tests/support/gpu_skip.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <caf/all.hpp>

#include "base/content_hash.hpp"
#include "gpu/cuda_driver.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/kernel_args.hpp"
#include "gpu/library_ops.hpp"
#include "gpu/output_check.hpp"
#include "gpu/review_report.hpp"
#include "gpu/reviewer.hpp"
#include "gpu/timing.hpp"
#include "gpu/torch_reference.hpp"
#include "gpu/worker.hpp"
#include "plan/launch_bound.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"

using namespace ks;
using Catch::Matchers::Contains;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kExamples = std::string(KS_SOURCE_DIR) + "/examples/plans/";

task_spec task_from(const std::string& yaml) {
  auto t = parse_task(yaml, "<test task>", ".");
  INFO((t.ok() ? "" : t.message()));
  REQUIRE(t.ok());
  return *t;
}

launch_plan plan_from(const std::string& yaml) {
  auto p = parse_launch_plan(yaml, "<test plan>");
  INFO((p.ok() ? "" : p.message()));
  REQUIRE(p.ok());
  return *p;
}

}  // namespace

// ===========================================================================
// CPU: pieces that need no GPU.

TEST_CASE("arch_for: sm_XY, with the 'a' suffix from compute capability 9.0", "[reviewer]") {
  CHECK(arch_for(9, 0) == "sm_90a");
  CHECK(arch_for(10, 0) == "sm_100a");
  CHECK(arch_for(12, 0) == "sm_120a");
  CHECK(arch_for(8, 0) == "sm_80");
  CHECK(arch_for(8, 9) == "sm_89");
  CHECK(arch_for(7, 5) == "sm_75");
}

TEST_CASE("trial_task: even trials keep the task's inputs, odd trials use a second distribution",
          "[reviewer][trials]") {
  task_spec t = task_from(R"(
name: mix
reference:
  torchscript: |
    def forward(x, u, i, c, w):
        return x
inputs:
  - {name: x, shape: [4, 4], init: {kind: normal, mean: 1, std: 2}}
  - {name: u, shape: [4], init: {kind: uniform, low: 0.5, high: 4.5}}
  - {name: i, shape: [4], dtype: int64, init: {kind: randint, low: 0, high: 10}}
  - {name: c, shape: [4], init: {kind: constant, value: 3}}
parameters:
  - {name: w, shape: [4, 4], init: {kind: normal}}
seed: 7
)");
  CHECK(trial_task(t, 0) == t);
  CHECK(trial_task(t, 2) == t);

  task_spec t1 = trial_task(t, 1);
  CHECK(t1.inputs[0].init.kind == "normal");
  CHECK(t1.inputs[0].init.mean == 1);
  CHECK(t1.inputs[0].init.std == 8);
  CHECK(t1.inputs[1].init.kind == "uniform");
  CHECK(t1.inputs[1].init.low == 0.5);
  CHECK(t1.inputs[1].init.high == 1.5);    // the lower quarter: stays inside (0.5, 4.5)
  CHECK(t1.inputs[2] == t.inputs[2]);      // integers never change
  CHECK(t1.inputs[3] == t.inputs[3]);      // nor structural inits
  CHECK((t1.parameters == t.parameters));  // nor parameters (parenthesised: a tensor_spec does not print)

  task_spec t3 = trial_task(t, 3);
  CHECK(t3.inputs[0].init.kind == "uniform");
  CHECK(t3.inputs[0].init.low == -5);
  CHECK(t3.inputs[0].init.high == 7);
  CHECK(t3.inputs[1].init.low == 3.5);  // the upper quarter
  CHECK(t3.inputs[1].init.high == 4.5);
  CHECK(trial_task(t, 5) == t1);

  CHECK(describe_distribution(t1.inputs[0].init) == "normal(1, 8)");
  CHECK(describe_distribution(t3.inputs[1].init) == "uniform(3.5, 4.5)");
  CHECK(describe_distribution(t.inputs[3].init) == "constant(3)");

  tensor_spec k{"k", {16, 64}, "float32", {}};
  k.init.kind = "kaiming_uniform";
  auto a = alternative_distribution(k, 1);
  CHECK(a.kind == "uniform");
  CHECK(a.high == Approx(0.125));
  CHECK(a.low == Approx(0.0625));
}

TEST_CASE("pack_kernel_args: tensors as addresses, numbers at their plan width", "[reviewer][args]") {
  resolved_step s;
  s.index = 0;
  s.kind = "kernel";
  s.name = "k";
  s.args = {{"tensor", "x", "", 0, 0},        {"int", "", "int32", -5, 0},        {"int", "", "int64", 1ll << 40, 0},
            {"float", "", "float32", 0, 1.5}, {"float", "", "float64", 0, -2.25}, {"tensor", "y", "", 0, 0}};
  auto packed = pack_kernel_args(s, [](const std::string& name) -> result<uint64_t> {
    if (name == "x") return uint64_t{0x7f0000001000};
    if (name == "y") return uint64_t{0x7f0000002000};
    return error{"no tensor named '" + name + "'"};
  });
  REQUIRE(packed.ok());
  REQUIRE(packed->size() == 6);
  CHECK(packed->bytes(0) == 8);
  CHECK(packed->bytes(1) == 4);
  CHECK(packed->bytes(2) == 8);
  CHECK(packed->bytes(3) == 4);
  CHECK(packed->bytes(4) == 8);
  void** p = packed->pointers();
  CHECK(*static_cast<uint64_t*>(p[0]) == 0x7f0000001000);
  CHECK(*static_cast<int32_t*>(p[1]) == -5);
  CHECK(*static_cast<int64_t*>(p[2]) == (1ll << 40));
  CHECK(*static_cast<float*>(p[3]) == 1.5f);
  CHECK(*static_cast<double*>(p[4]) == -2.25);
  CHECK(*static_cast<uint64_t*>(p[5]) == 0x7f0000002000);
  // The pointers stay valid when the packed arguments move.
  kernel_args moved = std::move(packed.value());
  CHECK(*static_cast<int32_t*>(moved.pointers()[1]) == -5);

  s.args.push_back({"tensor", "z", "", 0, 0});
  auto missing = pack_kernel_args(s, [](const std::string& name) -> result<uint64_t> {
    if (name == "z") return error{"no tensor named 'z'"};
    return uint64_t{1};
  });
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message() == "step 0 (kernel k): args[6]: no tensor named 'z'");
}

TEST_CASE("pack_kernel_args: the relu example plan, resolved, packs as its kernel expects", "[reviewer][args]") {
  std::string source = read_text(kExamples + "relu.cu");
  launch_plan plan = plan_from(read_text(kExamples + "relu.yaml"));
  plan_context ctx;
  ctx.inputs["x"] = {{3, 1001}, "float32"};
  ctx.kernels = extract_kernel_signatures(source);
  auto rp = resolve_plan(plan, ctx);
  REQUIRE(rp.ok());
  auto packed = pack_kernel_args(rp->steps[0], [](const std::string& name) -> result<uint64_t> {
    return name == "x" ? uint64_t{0x1000} : uint64_t{0x2000};
  });
  REQUIRE(packed.ok());
  REQUIRE(packed->size() == 3);
  CHECK(*static_cast<uint64_t*>(packed->pointers()[0]) == 0x1000);
  CHECK(*static_cast<uint64_t*>(packed->pointers()[1]) == 0x2000);
  CHECK(packed->bytes(2) == 8);
  CHECK(*static_cast<int64_t*>(packed->pointers()[2]) == 3003);
}

TEST_CASE("timing statistics: quantiles, summary, interquartile stability", "[reviewer][timing]") {
  CHECK(quantile_sorted({}, 0.5) == 0);
  CHECK(quantile_sorted({1, 2, 3, 4}, 0.5) == 2.5);
  CHECK(quantile_sorted({1, 2, 3, 4, 5}, 0.5) == 3);
  CHECK(quantile_sorted({1, 2, 3, 4, 5}, 0.25) == 2);
  CHECK(quantile_sorted({10, 20}, 0.75) == 17.5);

  timing_stats s = summarize_times({4, 1, 3, 2});
  CHECK(s.repetitions == 4);
  CHECK(s.median_ms == 2.5);
  CHECK(s.mean_ms == 2.5);
  CHECK(s.min_ms == 1);
  CHECK(s.max_ms == 4);
  CHECK(s.stddev_ms == Approx(std::sqrt(5.0 / 3.0)));
  CHECK(summarize_times({}).repetitions == 0);

  CHECK(std::isinf(relative_iqr({})));
  CHECK(relative_iqr({1, 1, 1, 1}) == 0);
  // q1 = 1.75, q3 = 3.25 (numpy), median 2.5: half-width 0.75 / 2.5 = 0.3
  CHECK(relative_iqr({1, 2, 3, 4}) == Approx(0.3));

  timing_options o;
  o.min_runs = 5;
  o.stable_rel_iqr = 0.02;
  CHECK_FALSE(is_stable({1, 1, 1, 1}, o));  // too few samples
  CHECK(is_stable({1, 1, 1, 1, 1}, o));
  CHECK(is_stable({1.0, 1.01, 0.99, 1.0, 1.0, 1.005}, o));
  CHECK_FALSE(is_stable({1, 2, 1, 2, 1, 2}, o));
  // An outlier moves the mean but not the interquartile range.
  CHECK(is_stable({1, 1, 1, 1, 1, 1, 1, 50}, o));
}

TEST_CASE("measure_pair: alternates, stops when both medians are stable or at the bounds", "[reviewer][timing]") {
  timing_options o;
  o.warmup_runs = 2;
  o.min_runs = 10;
  o.max_runs = 100;
  o.max_seconds = 1e9;
  std::vector<char> order;
  double now = 0;
  auto clock = [&] { return now; };

  SECTION("steady programs stop at min_runs, after the warm-up") {
    timed_run a = [&]() -> result<double> {
      order.push_back('a');
      return 2.0;
    };
    timed_run b = [&]() -> result<double> {
      order.push_back('b');
      return 3.0;
    };
    auto m = measure_pair(o, a, b, clock);
    REQUIRE(m.ok());
    CHECK(m->first.stats.repetitions == 10);
    CHECK(m->second.stats.repetitions == 10);
    CHECK(m->first.stats.median_ms == 2.0);
    CHECK(m->second.stats.median_ms == 3.0);
    CHECK(m->first.stable);
    REQUIRE(order.size() == 24);  // 2 warm-up runs each, then 10 samples each
    for (size_t i = 0; i < order.size(); ++i) CHECK(order[i] == (i % 2 == 0 ? 'a' : 'b'));
  }
  SECTION("a noisy program runs to max_runs and is reported unstable") {
    int i = 0;
    timed_run a = [&]() -> result<double> { return 1.0 + (i++ % 2); };
    timed_run b = [&]() -> result<double> { return 3.0; };
    auto m = measure_pair(o, a, b, clock);
    REQUIRE(m.ok());
    CHECK(m->first.stats.repetitions == 100);
    CHECK_FALSE(m->first.stable);
    CHECK(m->second.stable);
    CHECK(m->first.rel_iqr > 0.02);
  }
  SECTION("the time bound ends the loop, after at least one sample each") {
    o.max_seconds = 5;
    timed_run a = [&]() -> result<double> {
      now += 1;
      return 1.0 + now;
    };
    timed_run b = [&]() -> result<double> {
      now += 1;
      return 1.0;
    };
    auto m = measure_pair(o, a, b, clock);
    REQUIRE(m.ok());
    CHECK(m->first.stats.repetitions == 1);  // 2 x 2 warm-up seconds, then one pair: 6 s
    o.max_seconds = 0;
    now = 0;
    auto m0 = measure_pair(o, a, b, clock);
    REQUIRE(m0.ok());
    CHECK(m0->first.stats.repetitions == 1);
  }
  SECTION("an error ends the measurement") {
    timed_run a = [&]() -> result<double> { return 1.0; };
    timed_run b = [&]() -> result<double> { return error{"boom"}; };
    auto m = measure_pair(o, a, b, clock);
    REQUIRE_FALSE(m.ok());
    CHECK(m.message() == "boom");
  }
}

// --- the ATen op table, on CPU tensors ---

namespace {

at::Tensor randn(std::vector<int64_t> shape) { return at::randn(shape, at::TensorOptions().dtype(at::kFloat)); }

at::Tensor run_op(const std::string& op, std::vector<library_arg> args, std::map<std::string, std::string> attrs = {}) {
  auto r = run_library_op(op, args, attrs);
  INFO(op << ": " << (r.ok() ? "" : r.message()));
  REQUIRE(r.ok());
  return *r;
}

std::string op_error(const std::string& op, std::vector<library_arg> args,
                     std::map<std::string, std::string> attrs = {}) {
  auto r = run_library_op(op, args, attrs);
  REQUIRE_FALSE(r.ok());
  return r.message();
}

using A = library_arg;

}  // namespace

TEST_CASE("library ops: the table holds the validator's ops and computes what ATen does", "[reviewer][library]") {
  const auto& names = library_op_names();
  for (const char* op :
       {"aten::matmul",  "aten::mm",   "aten::bmm", "aten::addmm",   "aten::linear",      "aten::conv2d", "aten::add",
        "aten::sub",     "aten::mul",  "aten::div", "aten::softmax", "aten::log_softmax", "aten::gelu",   "aten::relu",
        "aten::sigmoid", "aten::tanh", "aten::exp", "aten::log",     "aten::neg",         "aten::abs",    "aten::sqrt",
        "aten::rsqrt",   "aten::silu", "aten::sin", "aten::cos"})
    CHECK(std::find(names.begin(), names.end(), op) != names.end());
  CHECK(is_library_op("aten::add.Tensor"));
  CHECK_FALSE(is_library_op("aten::erf"));

  at::Tensor a = randn({5, 3}), b = randn({3, 4}), bias = randn({4});
  CHECK(run_op("aten::matmul", {A::of(a), A::of(b)}).sizes() == at::IntArrayRef({5, 4}));
  CHECK(run_op("aten::matmul", {A::of(randn({2, 5, 3})), A::of(b)}).sizes() == at::IntArrayRef({2, 5, 4}));
  CHECK(run_op("aten::mm", {A::of(a), A::of(b)}).allclose(at::mm(a, b)));
  CHECK(run_op("aten::bmm", {A::of(randn({2, 5, 3})), A::of(randn({2, 3, 4}))}).sizes() == at::IntArrayRef({2, 5, 4}));
  CHECK(run_op("aten::addmm", {A::of(bias), A::of(a), A::of(b)}, {{"beta", "0.5"}, {"alpha", "2"}})
            .allclose(bias * 0.5 + at::mm(a, b) * 2, 1e-5, 1e-5));
  at::Tensor w = randn({4, 3});
  CHECK(run_op("aten::linear", {A::of(a), A::of(w), A::of(bias)}).allclose(at::mm(a, w.t()) + bias, 1e-5, 1e-5));
  CHECK(run_op("aten::linear", {A::of(a), A::of(w)}).sizes() == at::IntArrayRef({5, 4}));
  // math tf32 (a split-precision product's operands): cuBLAS may use TF32 for that call
  // only; on the CPU it computes the same, and the setting is back afterwards.
  REQUIRE_FALSE(at::globalContext().allowTF32CuBLAS());
  CHECK(run_op("aten::linear", {A::of(a), A::of(w), A::of(bias)}, {{"math", "tf32"}})
            .allclose(at::mm(a, w.t()) + bias, 1e-5, 1e-5));
  CHECK(run_op("aten::bmm", {A::of(randn({2, 5, 3})), A::of(randn({2, 3, 4}))}, {{"math", "tf32"}}).sizes() ==
        at::IntArrayRef({2, 5, 4}));
  CHECK(run_op("aten::mm", {A::of(a), A::of(b)}, {{"math", "ieee"}}).allclose(at::mm(a, b)));
  CHECK_FALSE(at::globalContext().allowTF32CuBLAS());

  at::Tensor img = randn({2, 3, 9, 9}), k = randn({6, 3, 3, 3}), kb = randn({6});
  CHECK(run_op("aten::conv2d", {A::of(img), A::of(k), A::of(kb)}).sizes() == at::IntArrayRef({2, 6, 7, 7}));
  CHECK(run_op("aten::conv2d", {A::of(img), A::of(k)}, {{"stride", "[2, 2]"}, {"padding", "1"}}).sizes() ==
        at::IntArrayRef({2, 6, 5, 5}));
  CHECK(run_op("aten::conv2d", {A::of(img), A::of(k)}, {{"padding", "same"}}).sizes() == at::IntArrayRef({2, 6, 9, 9}));
  CHECK(run_op("aten::conv2d", {A::of(img), A::of(k)}, {{"dilation", "2"}}).sizes() == at::IntArrayRef({2, 6, 5, 5}));

  at::Tensor x = randn({4, 6});
  CHECK(run_op("aten::add", {A::of(x), A::of(bias.new_ones({6}))}, {{"alpha", "3"}}).allclose(x + 3));
  CHECK(run_op("aten::add", {A::of(x), A::of_float(1.5)}).allclose(x + 1.5));
  CHECK(run_op("aten::sub", {A::of(x), A::of_int(2)}).allclose(x - 2));
  CHECK(run_op("aten::mul", {A::of(x), A::of_float(0.5)}).allclose(x * 0.5));
  at::Tensor ints = at::arange(-6, 6, at::TensorOptions().dtype(at::kLong));
  CHECK(run_op("aten::div", {A::of(ints), A::of_int(4)}, {{"rounding_mode", "floor"}})
            .equal(at::floor(ints.to(at::kDouble) / 4).to(at::kLong)));
  CHECK(run_op("aten::div", {A::of(ints), A::of_int(4)}).scalar_type() == at::kFloat);
  at::Tensor sm = run_op("aten::softmax", {A::of(x)}, {{"dim", "-1"}});
  CHECK(sm.sum(-1).allclose(at::ones({4})));
  CHECK(run_op("aten::log_softmax", {A::of(x)}, {{"dim", "[1]"}}).allclose(at::log_softmax(x, 1)));
  CHECK(run_op("aten::gelu", {A::of(x)}, {{"approximate", "tanh"}}).allclose(at::gelu(x, "tanh")));
  CHECK_FALSE(run_op("aten::gelu", {A::of(x)}).equal(at::gelu(x, "tanh")));
  CHECK(run_op("aten::relu", {A::of(x)}).equal(at::relu(x)));
  CHECK(run_op("aten::silu.default", {A::of(x)}).allclose(x * at::sigmoid(x)));
}

TEST_CASE("library ops: any ATen op through the dispatcher by its schema", "[reviewer][library][dispatcher]") {
  at::Tensor x = randn({4, 6});
  using attrs = std::map<std::string, std::string>;
  auto outs = [](const std::string& op, std::vector<library_arg> args, const attrs& a) {
    auto r = run_library_op_outputs(op, args, a);
    if (!r) FAIL(r.message());
    return *r;
  };
  at::Tensor y = at::tanh(x) * 0.5;
  CHECK(
      outs("aten::erfinv", {A::of(y)}, {{"schema", "aten::erfinv(Tensor self) -> Tensor"}})[0].allclose(at::erfinv(y)));
  const std::string sort =
      "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)";
  auto sorted = outs("aten::sort", {A::of(x)}, {{"schema", sort}, {"dim", "1"}, {"descending", "True"}});
  REQUIRE(sorted.size() == 2);
  auto want = at::sort(x, 1, true);
  CHECK(sorted[0].equal(std::get<0>(want)));
  CHECK(sorted[1].equal(std::get<1>(want)));
  CHECK(check_library_op("aten::sort", {{"schema", sort}}).ok());
  // A table op with a schema runs the schema's overload, with the schema's attributes.
  CHECK(outs("aten::softmax.int", {A::of(x)},
             {{"schema", "aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"},
              {"dim", "0"},
              {"dtype", "None"}})[0]
            .allclose(at::softmax(x, 0)));
  // A tensor list, a ScalarType (as its number), a Scalar and a list of ints.
  CHECK(
      outs("aten::cat", {A::of(x), A::of(x * 2)},
           {{"schema", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"}, {"tensors", "2 tensors"}, {"dim", "1"}})[0]
          .equal(at::cat({x, x * 2}, 1)));
  at::Tensor mask = outs("aten::gt.Scalar", {A::of(x)},
                         {{"schema", "aten::gt.Scalar(Tensor self, Scalar other) -> Tensor"}, {"other", "0.5"}})[0];
  CHECK(mask.scalar_type() == at::kBool);
  CHECK(mask.equal(x > 0.5));
  at::Tensor f = outs("aten::to.dtype", {A::of(mask)},
                      {{"schema",
                        "aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, "
                        "MemoryFormat? memory_format=None) -> Tensor(a)"},
                       {"dtype", "6"},
                       {"non_blocking", "False"},
                       {"copy", "False"},
                       {"memory_format", "None"}})[0];
  CHECK(f.scalar_type() == at::kFloat);
  CHECK(
      outs("aten::flip", {A::of(x)}, {{"schema", "aten::flip(Tensor self, int[] dims) -> Tensor"}, {"dims", "[1]"}})[0]
          .equal(at::flip(x, {1})));
  // Errors name the attribute, the argument or the operator.
  auto err = [](const std::string& op, std::vector<library_arg> args, const attrs& a) {
    auto r = run_library_op_outputs(op, args, a);
    REQUIRE_FALSE(r);
    return r.message();
  };
  CHECK_THAT(err("aten::sort", {A::of(x)}, {{"schema", sort}, {"dimension", "1"}}),
             Contains("attrs.dimension") && Contains("has no argument 'dimension'"));
  CHECK_THAT(err("aten::sort", {A::of(x)}, {{"schema", sort}, {"dim", "last"}}),
             Contains("attrs.dim: expected an integer"));
  CHECK_THAT(err("aten::sort", {}, {{"schema", sort}}), Contains("needs a positional argument for self"));
  CHECK_THAT(err("aten::sort", {A::of(x), A::of(x)}, {{"schema", sort}}), Contains("args: 2 given"));
  CHECK_THAT(err("aten::no_such_op", {A::of(x)}, {{"schema", "aten::no_such_op(Tensor self) -> Tensor"}}),
             Contains("no operator aten::no_such_op"));
  CHECK_FALSE(check_library_op("aten::no_such_op", {{"schema", "aten::no_such_op(Tensor self) -> Tensor"}}).ok());
  CHECK_THAT(check_library_op("aten::erf", {}).message(), Contains("carries no attrs.schema"));
}

// A step prepared once per plan (gpu/library_ops.hpp) computes what the unprepared path
// computes, call after call on new tensors, and fails with the same words.
TEST_CASE("library ops: a step without tensor arguments makes its result on the plan's device",
          "[reviewer][library][dispatcher]") {
  // A traced `torch.randn(..., device=x.device)` (level 3's 35_LSTM draws its initial
  // state so): the plan's device, not the CPU. The meta device stands in for the GPU.
  const std::map<std::string, std::string> randn{
      {"schema",
       "aten::randn(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
       "pin_memory=None) -> Tensor"},
      {"size", "[6, 10, 4]"},
      {"device", "inputs"},
      {"dtype", "None"},
      {"layout", "None"},
      {"pin_memory", "False"}};
  const c10::Device meta{c10::kMeta};
  auto made = run_library_op_outputs("aten::randn", {}, randn, meta);
  REQUIRE(made);
  CHECK(made->at(0).device() == meta);
  CHECK(made->at(0).sizes() == at::IntArrayRef({6, 10, 4}));
  auto step = prepare_library_op("aten::randn", {}, randn);
  REQUIRE(step);
  auto again = run_prepared_library_op(*step, {}, meta);
  REQUIRE(again);
  CHECK(again->at(0).device() == meta);
  // By default (the CPU plans of the tests) the CPU.
  CHECK(run_library_op_outputs("aten::randn", {}, randn)->at(0).device() == c10::Device(c10::kCPU));
}

TEST_CASE("library ops: a prepared step gives the unprepared path's results and errors",
          "[reviewer][library][dispatcher][prepared]") {
  using attrs = std::map<std::string, std::string>;
  struct step_case {
    std::string op;
    std::vector<std::vector<int64_t>> tensors;  // shapes; then numbers
    std::vector<library_arg> numbers;
    attrs a;
  };
  const std::string sort =
      "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)";
  const std::vector<step_case> cases = {
      {"aten::matmul", {{2, 5, 3}, {3, 4}}, {}, {}},
      {"aten::addmm", {{4}, {5, 3}, {3, 4}}, {}, {{"beta", "0.5"}, {"alpha", "2"}}},
      {"aten::linear", {{5, 3}, {4, 3}, {4}}, {}, {{"math", "tf32"}}},
      {"aten::conv2d", {{2, 3, 9, 9}, {6, 3, 3, 3}}, {}, {{"stride", "[2, 2]"}, {"padding", "1"}}},
      {"aten::conv2d", {{2, 3, 9, 9}, {6, 3, 3, 3}, {6}}, {}, {{"padding", "same"}, {"dilation", "2"}}},
      {"aten::add", {{4, 6}}, {A::of_float(1.5)}, {{"alpha", "3"}}},
      {"aten::div", {{4, 6}}, {A::of_int(4)}, {}},
      {"aten::softmax", {{4, 6}}, {}, {{"dim", "-1"}}},
      {"aten::gelu", {{4, 6}}, {}, {{"approximate", "tanh"}}},
      {"aten::silu.default", {{4, 6}}, {}, {}},
      {"aten::erfinv", {{4, 6}}, {}, {{"schema", "aten::erfinv(Tensor self) -> Tensor"}}},
      {"aten::sort", {{4, 6}}, {}, {{"schema", sort}, {"dim", "1"}, {"descending", "True"}}},
      {"aten::softmax.int",
       {{4, 6}},
       {},
       {{"schema", "aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"},
        {"dim", "0"},
        {"dtype", "None"}}},
      {"aten::cat",
       {{4, 6}, {4, 6}, {4, 6}},
       {},
       {{"schema", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"}, {"tensors", "3 tensors"}, {"dim", "1"}}},
      {"aten::add.Scalar",
       {{4, 6}},
       {A::of_float(2.5)},
       {{"schema", "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"}, {"alpha", "2"}}},
      {"aten::flip", {{4, 6}}, {}, {{"schema", "aten::flip(Tensor self, int[] dims) -> Tensor"}, {"dims", "[0, 1]"}}},
      // A Device argument is the tensors' device, whatever its text (a device slot).
      {"aten::to.device",
       {{4, 6}},
       {},
       {{"schema",
         "aten::to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False, bool "
         "copy=False, MemoryFormat? memory_format=None) -> Tensor(a)"},
        {"device", "cuda"},
        {"dtype", "7"},
        {"copy", "True"}}},
  };
  auto args_of = [](const step_case& c) {
    std::vector<library_arg> args;
    for (auto& shape : c.tensors) args.push_back(A::of(randn(shape)));
    for (auto& n : c.numbers) args.push_back(n);
    return args;
  };
  for (const auto& c : cases) {
    INFO(c.op);
    const std::vector<library_arg> first = args_of(c);
    auto step = prepare_library_op(c.op, first, c.a);
    if (!step) FAIL(step.message());
    CHECK(step->op() == c.op);
    // Three calls on new tensors each: nothing of an earlier call's stays in the stack.
    for (int call = 0; call < 3; ++call) {
      const std::vector<library_arg> args = call == 0 ? first : args_of(c);
      auto want = run_library_op_outputs(c.op, args, c.a);
      auto got = run_prepared_library_op(*step, args);
      if (!want) FAIL(want.message());
      if (!got) FAIL(got.message());
      REQUIRE(got->size() == want->size());
      for (size_t k = 0; k < got->size(); ++k) {
        CHECK((*got)[k].scalar_type() == (*want)[k].scalar_type());
        // Bit for bit, NaN where NaN (erfinv outside [-1, 1]).
        const at::Tensor& g = (*got)[k];
        const at::Tensor& w = (*want)[k];
        CHECK((g.is_floating_point() ? at::isclose(g, w, 0, 0, true).all().item<bool>() : g.equal(w)));
      }
    }
  }
  // Every failure preparation finds is worded as the unprepared path words it.
  const at::Tensor x = randn({4, 6});
  const std::vector<step_case> bad = {
      {"aten::erf", {{4, 6}}, {}, {}},
      {"aten::relu", {{4, 6}, {4, 6}}, {}, {}},
      {"aten::sort", {{4, 6}}, {}, {{"schema", sort}, {"dimension", "1"}}},
      {"aten::sort", {{4, 6}}, {}, {{"schema", sort}, {"dim", "last"}}},
      {"aten::sort", {}, {}, {{"schema", sort}}},
      {"aten::sort", {{4, 6}, {4, 6}}, {}, {{"schema", sort}}},
      {"aten::sort", {}, {A::of_int(1)}, {{"schema", sort}}},
      {"aten::cat", {{4, 6}}, {}, {{"schema", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"}}},
      {"aten::cat", {{4, 6}}, {}, {{"schema", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"}, {"tensors", "two"}}},
      {"aten::flip", {{4, 6}}, {}, {{"schema", "aten::flip(Tensor self, int[] dims) -> Tensor"}}},
      {"aten::no_such_op", {{4, 6}}, {}, {{"schema", "aten::no_such_op(Tensor self) -> Tensor"}}},
  };
  for (const auto& c : bad) {
    INFO(c.op);
    const std::vector<library_arg> args = args_of(c);
    auto want = run_library_op_outputs(c.op, args, c.a);
    REQUIRE_FALSE(want);
    auto step = prepare_library_op(c.op, args, c.a);
    REQUIRE_FALSE(step);
    CHECK(step.message() == want.message());
  }
  // Failures that depend on the values stay with the run, worded as before.
  {
    auto step = prepare_library_op("aten::softmax", {A::of(x)}, {{"dim", "last"}});
    REQUIRE(step);
    auto got = run_prepared_library_op(*step, {A::of(x)});
    REQUIRE_FALSE(got);
    CHECK(got.message() == "attrs.dim: expected an integer or a list of 1 integers, got \"last\"");
    auto mm = prepare_library_op("aten::mm", {A::of(x), A::of(x)}, {});
    REQUIRE(mm);
    auto shapes = run_prepared_library_op(*mm, {A::of(x), A::of(x)});
    REQUIRE_FALSE(shapes);
    CHECK(shapes.message() == run_library_op_outputs("aten::mm", {A::of(x), A::of(x)}, {}).message());
    CHECK(run_prepared_library_op(*mm, {A::of(x), A::of(x.t())}));
  }
  // A step run with arguments of other kinds than it was prepared for is refused.
  auto step = prepare_library_op("aten::sort", {A::of(x)}, {{"schema", sort}});
  REQUIRE(step);
  auto other = run_prepared_library_op(*step, {A::of_int(3)});
  REQUIRE_FALSE(other);
  CHECK_THAT(other.message(), Contains("was prepared for 1 arguments of other kinds"));
  CHECK_FALSE(run_prepared_library_op(*step, {A::of(x), A::of(x)}));
}

TEST_CASE("library ops: errors name the op, the argument or the attribute", "[reviewer][library]") {
  at::Tensor x = randn({4, 6});
  CHECK_THAT(op_error("aten::erf", {A::of(x)}),
             Contains("aten::erf is not among the ATen ops the reviewer runs") && Contains("aten::matmul"));
  CHECK(op_error("aten::softmax", {A::of(x)}) == "attrs: this op needs the attribute dim");
  CHECK(op_error("aten::softmax", {A::of(x)}, {{"dim", "last"}}) ==
        "attrs.dim: expected an integer or a list of 1 integers, got \"last\"");
  CHECK(op_error("aten::gelu", {A::of(x)}, {{"approximate", "fast"}}) ==
        "attrs.approximate: expected one of none, tanh, got \"fast\"");
  CHECK(op_error("aten::relu", {A::of(x), A::of(x)}) == "args: aten::relu takes 1 arguments, got 2");
  CHECK(op_error("aten::matmul", {A::of(x), A::of(x.t())}, {{"math", "fast"}}) ==
        "attrs.math: expected one of ieee, tf32, got \"fast\"");
  CHECK(op_error("aten::mul", {A::of_int(2), A::of(x)}) == "args[0]: expected a tensor");
  CHECK_THAT(op_error("aten::mm", {A::of(x), A::of(x)}), Contains("aten::mm: ") && Contains("mat1 and mat2"));
  // A product that throws with TF32 allowed leaves the setting as it was.
  CHECK_THAT(op_error("aten::mm", {A::of(x), A::of(x)}, {{"math", "tf32"}}), Contains("mat1 and mat2"));
  CHECK_FALSE(at::globalContext().allowTF32CuBLAS());
}

TEST_CASE("library ops: result shapes agree with the validator's inference", "[reviewer][library]") {
  // For each op: a plan with one library step producing an intermediate, resolved at
  // CPU shapes; the op then runs on CPU tensors of those shapes.
  struct cse {
    std::string op, args, attrs;
    std::map<std::string, std::vector<int64_t>> shapes;
  };
  std::vector<cse> cases = {
      {"aten::matmul", "[a, b]", "", {{"a", {2, 5, 3}}, {"b", {3, 4}}}},
      {"aten::matmul", "[a, b]", "", {{"a", {3}}, {"b", {2, 3, 4}}}},
      {"aten::addmm", "[c, a, b]", "{beta: \"2\"}", {{"c", {4}}, {"a", {5, 3}}, {"b", {3, 4}}}},
      {"aten::linear", "[a, b]", "", {{"a", {7, 2, 3}}, {"b", {4, 3}}}},
      {"aten::conv2d", "[a, b]", "{stride: 2, padding: 1}", {{"a", {1, 2, 8, 8}}, {"b", {3, 2, 3, 3}}}},
      {"aten::add", "[a, b]", "", {{"a", {4, 1}}, {"b", {3}}}},
      {"aten::softmax", "[a]", "{dim: 0}", {{"a", {4, 3}}}},
  };
  for (auto& c : cases) {
    std::string yaml = "outputs:\n  - {name: out, shape: [1]}\nsteps:\n  - library: " + c.op + "\n    args: " + c.args +
                       "\n    outputs: [r]\n" + (c.attrs.empty() ? "" : "    attrs: " + c.attrs + "\n") +
                       "  - library: aten::mul\n    args: [x, {float32: 1.0}]\n    outputs: [out]\n";
    plan_context ctx;
    ctx.inputs["x"] = {{1}, "float32"};
    std::vector<library_arg> args;
    for (auto& [name, shape] : c.shapes) ctx.inputs[name] = {shape, "float32"};
    auto rp = resolve_plan(plan_from(yaml), ctx);
    INFO(c.op << " " << c.args << ": " << (rp.ok() ? "" : rp.message()));
    REQUIRE(rp.ok());
    const resolved_buffer* r = rp->find_buffer("r");
    REQUIRE(r);
    REQUIRE(r->shape_known);
    for (auto& a : rp->steps[0].args) args.push_back(A::of(randn(c.shapes[a.tensor])));
    at::Tensor out = run_op(c.op, args, rp->steps[0].attrs);
    CHECK(out.sizes().vec() == r->shape);
  }
}

// --- output checks, on CPU tensors ---

TEST_CASE("compare_output and first_bitwise_difference answer the same in chunks", "[reviewer][verify]") {
  // Large outputs are compared a stretch at a time (bounded temporaries); every chunk
  // size must give the whole comparison's answer.
  tolerance_spec tol{1e-4, 1e-4};
  at::Tensor want = at::linspace(-3, 3, 60).reshape({3, 4, 5});
  at::Tensor got = want.clone();
  got[1][0][3] = 7.0f;                                // flat 23
  got[2][3][0] = NAN;                                 // flat 55
  got[0][1][1] = got[0][1][1].item<float>() + 5e-5f;  // within the tolerance
  const auto whole = compare_output(got, want, tol);
  REQUIRE_FALSE(whole.ok);
  CHECK(whole.first_bad == 23);
  CHECK(whole.bad_count == 2);
  for (int64_t chunk : {1, 7, 23, 24, 59, 60, 1000}) {
    INFO("chunk " << chunk);
    const auto c = compare_output(got, want, tol, chunk);
    CHECK(c.ok == whole.ok);
    CHECK(c.first_bad == whole.first_bad);
    CHECK(c.bad_count == whole.bad_count);
    CHECK(c.nonfinite_count == whole.nonfinite_count);
    CHECK(c.got == whole.got);
    CHECK(c.want == whole.want);
    CHECK(c.max_abs_error == whole.max_abs_error);
    CHECK(c.max_rel_error == whole.max_rel_error);
    CHECK(first_bitwise_difference(got, want, chunk) == 6);  // the +5e-5 at flat 6
    CHECK(first_bitwise_difference(want.clone(), want, chunk) == -1);
  }
}

TEST_CASE("compare_output: tolerance, NaN and Inf, integers, first bad element", "[reviewer][verify]") {
  tolerance_spec tol{1e-4, 1e-4};
  at::Tensor want = at::tensor({0.0f, 1.0f, -2.0f, 100.0f, INFINITY});
  SECTION("identical and within tolerance pass") {
    CHECK(compare_output(want.clone(), want, tol).ok);
    at::Tensor near = want.clone();
    near[3] = 100.0f + 0.0100f;  // allowed: 1e-4 + 1e-4 * 100 = 0.0101
    auto c = compare_output(near, want, tol);
    CHECK(c.ok);
    CHECK(c.max_abs_error == Approx(0.01).epsilon(1e-3));
  }
  SECTION("outside the tolerance: the first bad element and its values") {
    at::Tensor got = want.clone();
    got[1] = 1.001f;
    got[2] = -2.1f;
    auto c = compare_output(got, want, tol);
    CHECK_FALSE(c.ok);
    CHECK(c.bad_count == 2);
    CHECK(c.first_bad == 1);
    CHECK(c.got == Approx(1.001));
    CHECK(c.want == 1.0);
    CHECK(c.max_abs_error == Approx(0.1).epsilon(1e-5));
    CHECK(c.max_rel_error == Approx(0.05).epsilon(1e-5));
  }
  SECTION("NaN where the reference is finite fails; NaN where it has NaN passes") {
    at::Tensor got = want.clone();
    got[0] = NAN;
    auto c = compare_output(got, want, tol);
    CHECK_FALSE(c.ok);
    CHECK(c.nonfinite_count == 1);
    CHECK(std::isinf(c.max_abs_error));
    at::Tensor both = at::tensor({NAN, 1.0f});
    CHECK(compare_output(both.clone(), both, tol).ok);
  }
  SECTION("an infinity must be the same infinity") {
    at::Tensor got = want.clone();
    got[4] = -INFINITY;
    CHECK_FALSE(compare_output(got, want, tol).ok);
    got[4] = 3.4e38f;
    CHECK_FALSE(compare_output(got, want, tol).ok);
    got = want.clone();
    got[3] = INFINITY;
    CHECK(compare_output(got, want, tol).nonfinite_count == 1);
  }
  SECTION("float16 and float64 outputs compare in their own precision") {
    at::Tensor h = want.to(at::kHalf);
    CHECK(compare_output(h.clone(), h, tol).ok);
    at::Tensor d = at::tensor({1.0, 2.0}, at::TensorOptions().dtype(at::kDouble));
    at::Tensor d2 = d.clone();
    d2[1] = 2.0 + 1e-9;
    CHECK(compare_output(d2, d, tol).ok);
    CHECK(compare_output(d2, d, {0, 0}).first_bad == 1);
  }
  SECTION("integers must be equal") {
    at::Tensor i = at::arange(10, at::TensorOptions().dtype(at::kLong));
    at::Tensor j = i.clone();
    CHECK(compare_output(j, i, tol).ok);
    j[7] = 8;
    auto c = compare_output(j, i, {1, 1});
    CHECK_FALSE(c.ok);
    CHECK(c.first_bad == 7);
  }
  SECTION("the first bad index of a multi-dimensional output") {
    at::Tensor w2 = at::zeros({3, 4});
    at::Tensor g2 = w2.clone();
    g2[2][1] = 1.0f;
    auto c = compare_output(g2, w2, tol);
    CHECK(c.first_bad == 9);
    CHECK(index_string({3, 4}, c.first_bad) == "[2, 1]");
  }
}

TEST_CASE("bit_fingerprint changes with any one element and not otherwise", "[reviewer][verify]") {
  at::Tensor a = at::randn({64, 33});
  CHECK(bit_fingerprint(a) == bit_fingerprint(a.clone()));
  at::Tensor b = a.clone();
  b[17][5] = std::nextafter(b[17][5].item<float>(), 1e30f);  // one bit of one element
  CHECK(bit_fingerprint(b) != bit_fingerprint(a));
  // A view that is not contiguous is read as its elements, in order.
  CHECK(bit_fingerprint(a.t()) == bit_fingerprint(a.t().contiguous()));
  // A size that is not a multiple of 4 bytes is summed byte by byte.
  at::Tensor c = at::tensor({1, 2, 3}, at::kChar);
  CHECK(bit_fingerprint(c) == 6);
  c[1] = 7;
  CHECK(bit_fingerprint(c) == 11);
  CHECK(bit_fingerprint(at::empty({0})) == 0);
}

TEST_CASE("first_bitwise_difference and poison", "[reviewer][verify]") {
  at::Tensor a = at::tensor({1.0f, NAN, 0.0f});
  CHECK(first_bitwise_difference(a, a.clone()) == -1);  // NaN equals itself bit for bit
  at::Tensor b = a.clone();
  b[2] = -0.0f;
  CHECK(first_bitwise_difference(a, b) == 2);
  CHECK(first_bitwise_difference(a, at::zeros({4})) == 0);
  CHECK(first_bitwise_difference(at::ones({2}, at::kBool), at::ones({2}, at::kBool)) == -1);
  at::Tensor h = at::ones({5}, at::kHalf), h2 = h.clone();
  h2[4] = 2;
  CHECK(first_bitwise_difference(h, h2) == 4);

  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kInt, at::kLong, at::kBool}) {
    at::Tensor t = at::empty({7}, at::TensorOptions().dtype(dtype));
    std::vector<double> seen;
    for (int pattern : {0, 1, 2}) {
      poison(t, pattern);
      double v = element_at(t, 6);
      INFO("dtype " << dtype_name(t) << " pattern " << pattern);
      if (std::isnan(poison_value(t, pattern)))
        CHECK(std::isnan(v));
      else
        CHECK(v == poison_value(t, pattern));
      seen.push_back(v);
    }
    if (dtype != at::kBool) {
      CHECK(seen[1] != seen[2]);
      if (at::isFloatingType(dtype)) CHECK(seen[1] < 0);
      if (at::isFloatingType(dtype)) CHECK(seen[2] > 0);
    }
  }
}

TEST_CASE("format_review and review_to_json show what a reader needs", "[reviewer][report]") {
  review_result r;
  r.status = review_status::ok;
  r.candidate_id = "abc";
  r.message = "correct in 5 of 5 trials";
  r.trials_run = 5;
  r.trials_passed = 5;
  r.candidate_time = {0.5, 0.51, 0.49, 0.6, 0.01, 40};
  r.reference_time = {1.0, 1.0, 1.0, 1.1, 0.01, 40};
  r.speedup = 2.0;
  r.flags = {"no_custom_kernel"};
  r.resources = {{"relu_f32", 16, 0, 0, 1024}};
  r.phases = {0.125, 0.5, 0.25, 0.75, 0.0625, 1.75};
  std::string text = format_review(r);
  CHECK_THAT(text, Contains("review ok") && Contains("speedup: 2.000x") && Contains("flags: no_custom_kernel") &&
                       Contains("kernel relu_f32: 16 registers") && Contains("5/5 passed"));
  CHECK_THAT(text, Contains("  time: 3.44 s (compile 0.12 s, inputs 0.50 s, reference 0.25 s, verify 0.75 s, "
                            "timing 0.06 s, profile 1.75 s)\n"));
  CHECK_THAT(review_to_json(r), Contains("\"speedup\": 2.0") && Contains("\"status\": \"ok\""));
  // The phase times go out in the JSON and come back, every one of them.
  auto back = decode_json<review_result>(*parse_json(review_to_json(r), "review"), "review");
  REQUIRE(back);
  CHECK(back->phases == r.phases);
  CHECK_THAT(review_to_json(r), Contains("\"profile_s\": 1.75") && Contains("\"inputs_s\": 0.5"));
  // Errors and times JSON has no number for are written by name and read back.
  review_result odd = r;
  odd.max_abs_error = std::numeric_limits<double>::infinity();
  odd.max_rel_error = std::numeric_limits<double>::quiet_NaN();
  odd.speedup = 3.4028234663852886e38;
  odd.reference_time.median_ms = -std::numeric_limits<double>::infinity();
  std::string odd_json = review_to_json(odd);
  CHECK_THAT(odd_json, Contains("\"max_abs_error\": \"Infinity\"") && Contains("\"max_rel_error\": \"NaN\"") &&
                           Contains("\"median_ms\": \"-Infinity\""));
  auto odd_back = decode_json<review_result>(*parse_json(odd_json, "review"), "review");
  REQUIRE(odd_back);
  CHECK(odd_back->max_abs_error == odd.max_abs_error);
  CHECK(std::isnan(odd_back->max_rel_error));
  CHECK(odd_back->speedup == odd.speedup);
  CHECK(odd_back->reference_time.median_ms == odd.reference_time.median_ms);

  review_result c;
  c.status = review_status::compile_error;
  c.message = "NVRTC rejected the source";
  c.diagnostics = {{3, 7, "error", "identifier \"foo\" is undefined"}};
  c.compile_log = "candidate.cu(3): error: identifier \"foo\" is undefined";
  CHECK_THAT(format_review(c),
             Contains("candidate.cu:3:7: error: identifier \"foo\" is undefined") && Contains("compile log:"));
}

TEST_CASE("reviewer::create says why there is no GPU", "[reviewer][nogpu]") {
  auto drv = cuda_driver::load();
  if (drv.ok()) KS_SKIP("this machine has a CUDA driver: the no-GPU branch is not exercised here");
  auto r = reviewer::create();
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == drv.message());
}

// ===========================================================================
// GPU: whole reviews.

namespace {

std::string& skip_reason() {
  static std::string reason;
  return reason;
}

// One reviewer for all GPU tests of this process (as one worker would hold), or null
// with skip_reason() set.
reviewer* gpu_reviewer() {
  static std::unique_ptr<reviewer> rev;
  static bool tried = false;
  if (tried) return rev.get();
  tried = true;
  auto drv = cuda_driver::load();
  if (!drv) {
    skip_reason() = drv.message();
    return nullptr;
  }
  auto devices = query_devices(**drv);
  if (!devices || devices->empty()) {
    skip_reason() = devices ? "the driver sees no GPU" : devices.message();
    return nullptr;
  }
  reviewer_options o;
  o.timing.max_seconds = 1.5;
  auto made = reviewer::create(o);
  if (!made) {
    skip_reason() = made.message();
    return nullptr;
  }
  rev = std::move(made.value());
  return rev.get();
}

#define REQUIRE_GPU(rev)          \
  reviewer* rev = gpu_reviewer(); \
  if (!rev) KS_SKIP("no GPU here (" << skip_reason() << "); these tests run on the GPU machine")

review_result review_of(reviewer& rev, const task_spec& task, const std::string& source, const std::string& plan_yaml,
                        review_options opts = {}) {
  review_request req;
  req.request_id = 7;
  req.task = task;
  req.cand.task = task.name;
  req.cand.source = source;
  req.cand.plan = plan_from(plan_yaml);
  req.cand.id = sha256_hex(source + plan_yaml).substr(0, 16);
  req.options = opts;
  review_result r = rev.review(req);
  std::printf("[%s] %s\n", task.name.c_str(), format_review(r).c_str());
  return r;
}

bool has_flag(const review_result& r, const std::string& f) {
  return std::find(r.flags.begin(), r.flags.end(), f) != r.flags.end();
}

review_options verify_only() {
  review_options o;
  o.time = false;
  return o;
}

const char* kReluTask = R"(
name: relu_test
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x)
inputs:
  - {name: x, shape: [1023, 1031], init: {kind: normal, mean: 0, std: 1}}
seed: 3
)";

const char* kGeluTask = R"(
name: gelu_test
reference:
  torchscript: |
    def forward(x):
        return torch.gelu(x)
inputs:
  - {name: x, shape: [2047, 2053], init: {kind: normal, mean: 0, std: 1}}
seed: 4
)";

const char* kSoftmaxTask = R"(
name: softmax_test
reference:
  torchscript: |
    def forward(x):
        return torch.softmax(x, -1)
inputs:
  - {name: x, shape: [1024, 4000], init: {kind: normal, mean: 0, std: 4}}
seed: 5
)";

const char* kMatmulTask = R"(
name: matmul_bias_relu_test
reference:
  torchscript: |
    def forward(x, w, b):
        return torch.relu(torch.matmul(x, w) + b)
inputs:
  - {name: x, shape: [512, 384], init: {kind: normal, mean: 0, std: 1}}
parameters:
  - {name: w, shape: [384, 256], init: {kind: uniform, low: -0.05, high: 0.05}}
  - {name: b, shape: [256], init: {kind: uniform, low: -0.05, high: 0.05}}
seed: 6
)";

const char* kL2Task = R"(
name: l2_normalize_test
reference:
  torchscript: |
    def forward(x):
        return x / torch.clamp_min(torch.norm(x), 1e-12)
inputs:
  - {name: x, shape: [1000003], init: {kind: normal, mean: 0, std: 1}}
seed: 8
)";

const char* kRowSumTask = R"(
name: row_sum_test
reference:
  torchscript: |
    def forward(x):
        return torch.sum(x, -1)
inputs:
  - {name: x, shape: [512, 1024], init: {kind: uniform, low: -1, high: 1}}
seed: 9
)";

const char* kRelu1D = R"(
constants:
  N: x.numel
outputs:
  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}
steps:
  - kernel: k
    grid: [ceil_div(N, 256)]
    block: [256]
    args: [x, y, {int64: N}]
)";

// An elementwise candidate for the relu task whose body is `body` (i, n, x, y in scope).
std::string relu_like(const std::string& body, const std::string& x_type = "const float*") {
  return "extern \"C\" __global__ void k(" + x_type +
         " __restrict__ x, float* __restrict__ y, long long n) {\n"
         "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n" +
         body + "\n}\n";
}

void check_ok_example(const review_result& r) {
  CHECK(r.status == review_status::ok);
  CHECK(r.trials_run == 5);
  CHECK(r.trials_passed == 5);
  CHECK(r.speedup > 0);
  CHECK(r.candidate_time.repetitions >= 1);
  CHECK(r.reference_time.repetitions >= 1);
  CHECK(r.candidate_time.median_ms > 0);
  CHECK(r.flags.empty());
  CHECK_FALSE(r.resources.empty());
  for (auto& k : r.resources) CHECK(k.max_threads_per_block > 0);
}

}  // namespace

TEST_CASE("gpu: the example plans review ok against their tasks", "[reviewer][gpu]") {
  REQUIRE_GPU(rev);
  CHECK(rev->arch() == arch_for(rev->device().cc_major, rev->device().cc_minor));
  SECTION("relu") {
    auto r =
        review_of(*rev, task_from(kReluTask), read_text(kExamples + "relu.cu"), read_text(kExamples + "relu.yaml"));
    check_ok_example(r);
    CHECK(r.max_abs_error == 0);
  }
  SECTION("gelu_vec4") {
    auto r = review_of(*rev, task_from(kGeluTask), read_text(kExamples + "gelu_vec4.cu"),
                       read_text(kExamples + "gelu_vec4.yaml"));
    check_ok_example(r);
  }
  SECTION("softmax_rows") {
    auto r = review_of(*rev, task_from(kSoftmaxTask), read_text(kExamples + "softmax_rows.cu"),
                       read_text(kExamples + "softmax_rows.yaml"));
    check_ok_example(r);
  }
  SECTION("matmul_bias_relu (a library step plus a kernel)") {
    auto r = review_of(*rev, task_from(kMatmulTask), read_text(kExamples + "matmul_bias_relu.cu"),
                       read_text(kExamples + "matmul_bias_relu.yaml"));
    check_ok_example(r);
  }
  SECTION("l2_normalize (two kernels and a scratch buffer)") {
    auto r = review_of(*rev, task_from(kL2Task), read_text(kExamples + "l2_normalize.cu"),
                       read_text(kExamples + "l2_normalize.yaml"));
    check_ok_example(r);
  }
}

// A plan of nine short steps (six ReLU launches, a dispatcher step, a table op, one
// more launch), for tasks of any 2-D float32 x: launch-bound at small sizes
// (plan/launch_bound.hpp), not at large ones.
std::string relu_chain_plan() {
  std::string y =
      "constants: {BLOCK: 256, N: x.numel}\noutputs:\n  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: "
      "float32}\nscratch:\n";
  for (int k = 0; k < 8; ++k)
    y += "  - {name: s" + std::to_string(k) + ", shape: [x.shape[0], x.shape[1]], dtype: float32}\n";
  y += "steps:\n";
  auto relu = [&](const std::string& in, const std::string& out) {
    y += "  - kernel: relu_f32\n    grid: [ceil_div(N, BLOCK)]\n    block: [BLOCK]\n    args: [" + in + ", " + out +
         ", {int64: N}]\n";
  };
  relu("x", "s0");
  for (int k = 1; k < 6; ++k) relu("s" + std::to_string(k - 1), "s" + std::to_string(k));
  y += "  - library: aten::abs\n    args: [s5]\n    outputs: [s6]\n    attrs: {schema: \"aten::abs(Tensor self) -> "
       "Tensor\"}\n";
  y += "  - library: aten::mul\n    args: [s6, {float32: 1.0}]\n    outputs: [s7]\n";
  relu("s7", "y");
  return y;
}

task_spec relu_task_of(const std::string& shape) {
  return task_from("name: relu_chain_" + shape.substr(1, shape.find(',') - 1) +
                   "\nreference:\n  torchscript: |\n    def forward(x):\n        return torch.relu(x)\ninputs:\n"
                   "  - {name: x, shape: " +
                   shape + ", init: {kind: normal, mean: 0, std: 1}}\nseed: 11\n");
}

// The premise of the GPU case below, checked here: the chain resolves, and the rule
// (plan/launch_bound.hpp) calls it launch-bound at [33, 65], not at [4096, 4099].
TEST_CASE("the relu chain plan is launch-bound at small sizes only", "[reviewer][graph]") {
  const std::string source = read_text(kExamples + "relu.cu");
  for (const auto& [shape, bound] : {std::pair<std::string, bool>{"[33, 65]", true}, {"[4096, 4099]", false}}) {
    INFO(shape);
    const task_spec task = relu_task_of(shape);
    auto ctx = make_plan_context(task, source);
    if (!ctx) FAIL(ctx.message());
    auto plan = resolve_plan(plan_from(relu_chain_plan()), *ctx);
    if (!plan) FAIL(plan.message());
    uint64_t in = 0;
    for (const auto& t : task.inputs) in += 4 * static_cast<uint64_t>(t.shape[0] * t.shape[1]);
    const plan_weight w = weigh_plan(*plan, in);
    CHECK(w.kernel_launches == 7);
    CHECK(w.library_steps == 2);
    CHECK(launch_bound(w) == bound);
  }
}

// Issue 46, point 1: a launch-bound plan is timed as one CUDA graph replay (as an
// exported ModelNew runs it), checked against the reference first; a plan that is not
// launch-bound keeps plain launches.
TEST_CASE("gpu: a launch-bound plan is timed as one CUDA graph replay", "[reviewer][gpu][graph]") {
  REQUIRE_GPU(rev);
  const std::string source = read_text(kExamples + "relu.cu");
  auto small = review_of(*rev, relu_task_of("[33, 65]"), source, relu_chain_plan());
  CHECK(small.status == review_status::ok);
  CHECK(small.trials_passed == 5);
  CHECK(has_flag(small, "cuda_graph"));
  CHECK_FALSE(has_flag(small, "cuda_graph_refused"));
  CHECK_THAT(small.message, Contains("launch-bound plan (7 kernel launches and 2 library steps") &&
                                Contains("timed as one CUDA graph replay"));
  CHECK(small.candidate_time.median_ms > 0);
  CHECK(small.candidate_time.repetitions >= 1);
  // 10 buffers of 67 MB over nine steps: 74 MB a step, not launch-bound.
  auto large = review_of(*rev, relu_task_of("[4096, 4099]"), source, relu_chain_plan());
  CHECK(large.status == review_status::ok);
  CHECK_FALSE(has_flag(large, "cuda_graph"));
  CHECK_FALSE(has_flag(large, "cuda_graph_refused"));
  CHECK_THAT(large.message, !Contains("CUDA graph"));
}

// What a review freed goes back to the driver (gpu/device_memory.hpp): the relu chain
// at [4096, 4099] frees ten 67 MB buffers a trial into LibTorch's allocator, which
// would keep them; after the review no more than a few of the allocator's pages are
// reserved beyond the tensors alive (the trial cache's).
TEST_CASE("gpu: a review gives the device memory it freed back to the driver", "[reviewer][gpu][memory]") {
  REQUIRE_GPU(rev);
  auto r = review_of(*rev, relu_task_of("[4096, 4099]"), read_text(kExamples + "relu.cu"), relu_chain_plan());
  CHECK(r.status == review_status::ok);
  CHECK(cached_device_bytes() < (uint64_t{64} << 20));
}

// The rules coder's first seeds of the suite's long-row tasks (tests/golden/lower, what
// `kernelskill lower` writes for them): each row spread over a thread-block cluster,
// its blocks' partial states read through distributed shared memory. Compiled by
// NVRTC and launched by cuLaunchKernel with the kernel's compile-time cluster size,
// checked against the reference over every trial.
TEST_CASE("gpu: rows spread over a cluster's shared memory review ok", "[reviewer][gpu][cluster]") {
  REQUIRE_GPU(rev);
  if (rev->device().cc_major < 9) KS_SKIP("compute capability below 9.0: no clusters");
  const std::string golden = std::string(KS_SOURCE_DIR) + "/tests/golden/lower/";
  for (const char* name : {"softmax_long_rows", "l1_normalize_long_rows"}) {
    INFO(name);
    auto task = load_task(std::string(KS_SOURCE_DIR) + "/bench/suites/ops/" + name + ".yaml");
    REQUIRE(task);
    const std::string source = read_text(golden + name + "/seed-0.cu");
    REQUIRE(source.find("__cluster_dims__(") != std::string::npos);
    auto r = review_of(*rev, *task, source, read_text(golden + name + "/seed-0.yaml"));
    check_ok_example(r);
  }
}

TEST_CASE("gpu: compile and plan errors are reported as such", "[reviewer][gpu]") {
  REQUIRE_GPU(rev);
  task_spec relu = task_from(kReluTask);
  SECTION("a compile error, with its position") {
    auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i] = undefined_thing;"), kRelu1D, verify_only());
    CHECK(r.status == review_status::compile_error);
    REQUIRE_FALSE(r.diagnostics.empty());
    CHECK(r.diagnostics[0].line == 3);
    CHECK_THAT(r.message, Contains("undefined_thing"));
  }
  SECTION("a plan that names a missing kernel") {
    std::string plan = kRelu1D;
    plan.replace(plan.find("kernel: k"), 9, "kernel: kk");
    auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i] = fmaxf(x[i], 0.f);"), plan, verify_only());
    CHECK(r.status == review_status::plan_error);
  }
  SECTION("a library op outside the table") {
    auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i] = fmaxf(x[i], 0.f);"),
                       R"(
outputs:
  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}
scratch:
  - {name: t, shape: [x.shape[0], x.shape[1]], dtype: float32}
steps:
  - library: aten::erf
    args: [x]
    outputs: [t]
  - kernel: k
    grid: [ceil_div(x.numel, 256)]
    block: [256]
    args: [t, y, {int64: x.numel}]
)",
                       verify_only());
    CHECK(r.status == review_status::plan_error);
    CHECK_THAT(r.message, Contains("aten::erf is not among the ATen ops the reviewer runs"));
  }
  SECTION("an output whose shape is not the reference's") {
    std::string plan = kRelu1D;
    plan.replace(plan.find("[x.shape[0], x.shape[1]]"), 24, "[N]");
    auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i] = fmaxf(x[i], 0.f);"), plan, verify_only());
    CHECK(r.status == review_status::plan_error);
    CHECK_THAT(r.message, Contains("reference"));
  }
  SECTION("an unknown size") {
    review_options o = verify_only();
    o.size = "huge";
    auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i] = fmaxf(x[i], 0.f);"), kRelu1D, o);
    CHECK(r.status == review_status::plan_error);
  }
}

TEST_CASE("gpu: adversarial candidates fail or are flagged", "[reviewer][gpu][adversarial]") {
  REQUIRE_GPU(rev);
  task_spec relu = task_from(kReluTask);
  const review_options v = verify_only();

  SECTION("writes nothing") {
    auto r = review_of(*rev, relu, relu_like("  (void)i;"), kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK_THAT(r.message, Contains("never written"));
    CHECK(r.trials_passed == 0);
  }
  SECTION("writes only the first half of the output") {
    auto r = review_of(*rev, relu, relu_like("  if (i < n / 2) y[i] = fmaxf(x[i], 0.f);"), kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK_THAT(r.message, Contains("never written"));
  }
  SECTION("returns a constant") {
    auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i] = 0.5f;"), kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK(has_flag(r, "output_independent_of_input"));
  }
  SECTION("a constant where the reference's output is constant too is not flagged") {
    // relu(x - 10) of x in [0, 1) is all zeros whatever x is (KernelBench's
    // 9_Matmul_Subtract_Multiply_ReLU at its published sizes): correct kernels, the
    // honest one and the constant one alike, have outputs that do not change either.
    task_spec zeros = task_from(R"(
name: relu_of_shifted
reference:
  torchscript: |
    def forward(x):
        return torch.relu(x - 10.0)
inputs:
  - {name: x, shape: [1023, 1031], init: {kind: uniform, low: 0, high: 1}}
seed: 3
)");
    for (const char* body : {"  if (i < n) y[i] = fmaxf(x[i] - 10.f, 0.f);", "  if (i < n) y[i] = 0.f;"}) {
      auto r = review_of(*rev, zeros, relu_like(body), kRelu1D, v);
      INFO(body << ": " << r.message);
      CHECK(r.status == review_status::ok);
      CHECK_FALSE(has_flag(r, "output_independent_of_input"));
    }
  }
  SECTION("off by one: skips the last element") {
    auto r = review_of(*rev, relu, relu_like("  if (i < n - 1) y[i] = fmaxf(x[i], 0.f);"), kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK_THAT(r.message, Contains("1 of 1054713 elements") && Contains("[1022, 1030]"));
  }
  SECTION("produces NaN") {
    auto r = review_of(*rev, relu,
                       relu_like("  if (i < n) y[i] = i == 12345 ? __int_as_float(0x7fc00000) : fmaxf(x[i], 0.f);"),
                       kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK_THAT(r.message, Contains("NaN/Inf elements where the reference is finite"));
  }
  SECTION("mutates its input") {
    auto r = review_of(*rev, relu, relu_like("  if (i < n) { x[i] = fmaxf(x[i], 0.f); y[i] = x[i]; }", "float*"),
                       kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK_THAT(r.message, Contains("mutates input x"));
  }
  SECTION("reads its output before writing it") {
    auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i] = y[i] * 0.0f + fmaxf(x[i], 0.f);"), kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
  }
  SECTION("downgrades precision to float16") {
    auto r = review_of(
        *rev, relu,
        "#include <cuda_fp16.h>\n" + relu_like("  if (i < n) y[i] = __half2float(__float2half(fmaxf(x[i], 0.f)));"),
        kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK(r.max_rel_error > 1e-4);
  }
  SECTION("downgrades precision to bfloat16 in a transcendental") {
    std::string src =
        "#include <cuda_bf16.h>\n"
        "extern \"C\" __global__ void __launch_bounds__(256) gelu_f32x4(const float* __restrict__ x, "
        "float* __restrict__ y, long long n) {\n"
        "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  for (; i < n; i += (long long)gridDim.x * blockDim.x) {\n"
        "    float v = __bfloat162float(__float2bfloat16(x[i]));\n"
        "    y[i] = 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));\n  }\n}\n";
    auto r = review_of(*rev, task_from(kGeluTask), src, read_text(kExamples + "gelu_vec4.yaml"), v);
    CHECK(r.status == review_status::incorrect);
  }
  SECTION("returns the previous call's result (a cache in a __device__ global)") {
    std::string src = "__device__ float cache[1 << 21];\n__device__ int filled[1 << 21];\n" +
                      relu_like(
                          "  if (i >= n) return;\n"
                          "  if (filled[i]) { y[i] = cache[i]; return; }\n"
                          "  const float v = fmaxf(x[i], 0.f);\n  cache[i] = v;\n  filled[i] = 1;\n  y[i] = v;");
    auto r = review_of(*rev, relu, src, kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK(r.trials_passed == 1);  // trial 0 computes; later trials get trial 0's values
  }
  SECTION("accumulates into uninitialised scratch") {
    std::string src = relu_like("  if (i < n) { s[i] += fmaxf(x[i], 0.f); y[i] = s[i]; }");
    src.replace(src.find("long long n)"), 12, "long long n, float* __restrict__ s)");
    std::string plan = kRelu1D;
    plan.replace(plan.find("args: [x, y, {int64: N}]"), 24, "args: [x, y, {int64: N}, acc]");
    plan.replace(plan.find("steps:"), 6, "scratch:\n  - {name: acc, shape: [N]}\nsteps:");
    auto r = review_of(*rev, relu, src, plan, v);
    CHECK(r.status == review_status::incorrect);
  }
  SECTION("reads uninitialised scratch through fmaxf, which drops NaN") {
    // Harmless with NaN and with -2^100; the +2^100 poison of odd trials shows it.
    std::string src = relu_like("  if (i < n) y[i] = fmaxf(fmaxf(x[i], 0.f), s[i]);");
    src.replace(src.find("long long n)"), 12, "long long n, float* __restrict__ s)");
    std::string plan = kRelu1D;
    plan.replace(plan.find("args: [x, y, {int64: N}]"), 24, "args: [x, y, {int64: N}, junk]");
    plan.replace(plan.find("steps:"), 6, "scratch:\n  - {name: junk, shape: [N]}\nsteps:");
    auto r = review_of(*rev, relu, src, plan, v);
    CHECK(r.status == review_status::incorrect);
    CHECK_THAT(r.message, Contains("differs between two runs"));
  }
  SECTION("a race: a shared-memory reduction without __syncthreads") {
    const char* plan = R"(
constants:
  C: x.shape[1]
outputs:
  - {name: y, shape: [x.shape[0]], dtype: float32}
steps:
  - kernel: row_sum
    grid: [x.shape[0]]
    block: [256]
    args: [x, y, {int32: C}]
)";
    auto kernel = [](bool sync) {
      std::string s = sync ? "__syncthreads();" : "";
      return "extern \"C\" __global__ void row_sum(const float* __restrict__ x, float* __restrict__ y, int cols) {\n"
             "  __shared__ float part[256];\n"
             "  const float* row = x + (long long)blockIdx.x * cols;\n"
             "  float acc = 0.f;\n"
             "  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c];\n"
             "  if (threadIdx.x >= 128) __nanosleep(2000);  // the upper warps store late\n"
             "  part[threadIdx.x] = acc;\n  " +
             s +
             "\n"
             "  for (int stride = 128; stride > 0; stride >>= 1) {\n"
             "    if (threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];\n    " +
             s +
             "\n  }\n"
             "  if (threadIdx.x == 0) y[blockIdx.x] = part[0];\n}\n";
    };
    task_spec rs = task_from(kRowSumTask);
    auto honest = review_of(*rev, rs, kernel(true), plan, v);
    CHECK(honest.status == review_status::ok);
    auto racy = review_of(*rev, rs, kernel(false), plan, v);
    CHECK(racy.status == review_status::incorrect);
  }
  SECTION("launches no kernel: a library step only") {
    auto r = review_of(*rev, relu, "// no device code\n", R"(
outputs:
  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}
steps:
  - library: aten::relu
    args: [x]
    outputs: [y]
)");
    CHECK(r.status == review_status::ok);
    CHECK(has_flag(r, "no_custom_kernel"));
    CHECK_THAT(r.message, Contains("no_custom_kernel"));
  }
  SECTION("a speedup above the suspicious threshold is checked again, and kept when it holds") {
    review_options o;
    o.suspicious_speedup = 1e-6;
    o.profile = false;
    auto r = review_of(*rev, relu, read_text(kExamples + "relu.cu"), read_text(kExamples + "relu.yaml"), o);
    CHECK(r.status == review_status::ok);
    CHECK(has_flag(r, "speedup_rechecked"));
    CHECK_FALSE(has_flag(r, "speedup_above_threshold"));
    CHECK(r.speedup > 0);
    CHECK_THAT(r.message, Contains("Flag speedup_rechecked") && Contains("trial 5"));
  }
  SECTION("a kernel that stops working once it is no longer verified fails the re-check") {
    // Correct in verification's 2 trials x 2 runs; from its 6th launch on (timing) every
    // block returns at once, and the outputs keep whatever the buffer held.
    review_options o;
    o.trials = 2;
    o.suspicious_speedup = 1e-6;
    o.profile = false;
    const std::string src = "__device__ unsigned int launches;\n" +
                            relu_like(
                                "  __shared__ unsigned int seen;\n"
                                "  if (threadIdx.x == 0) seen = atomicAdd(&launches, blockIdx.x == 0 ? 1u : 0u);\n"
                                "  __syncthreads();\n"
                                "  if (seen >= 5u) return;\n"
                                "  if (i < n) y[i] = fmaxf(x[i], 0.f);");
    auto r = review_of(*rev, relu, src, kRelu1D, o);
    CHECK(r.status == review_status::incorrect);
    CHECK(r.trials_passed == 2);
    CHECK(has_flag(r, "speedup_above_threshold"));
    CHECK_THAT(r.message, Contains("did not hold up") && Contains("re-check") && Contains("never written"));
  }
  SECTION("passes only the task's own distribution (assumes |x| < 8)") {
    // Clamps its input to [-8, 8]: invisible under normal(0, 1), caught by normal(0, 4).
    auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i] = fmaxf(fminf(x[i], 8.f), 0.f);"), kRelu1D, v);
    CHECK(r.status == review_status::incorrect);
    CHECK_THAT(r.message, Contains("second distribution"));
    CHECK(r.trials_passed >= 2);
  }
}

TEST_CASE(
    "gpu: the trial cache keeps inputs and reference outputs, a task that does not fit "
    "the cache still reviews, one that does not fit the device says so",
    "[reviewer][gpu][cache]") {
  REQUIRE_GPU(rev);
  task_spec t = task_from(kReluTask);
  t.name = "relu_cache_test";
  t.seed = 31;  // a task no other case has reviewed: its first review is cold
  const std::string src = read_text(kExamples + "relu.cu"), plan = read_text(kExamples + "relu.yaml");
  const std::string off_by_scale = relu_like("  if (i < n) y[i] = x[i] > 0.f ? x[i] * 1.001f : 0.f;");
  review_options o = verify_only();
  o.profile = false;
  const uint64_t trial_bytes = 2ull * 1023 * 1031 * 4;  // x and y, float32

  const auto before = rev->trial_cache();
  auto cold = review_of(*rev, t, src, plan, o);
  REQUIRE(cold.status == review_status::ok);
  const auto after = rev->trial_cache();
  // Five trials, each its input and the reference's output (the cache is far from full).
  CHECK(after.trials == before.trials + 5);
  CHECK(after.used_bytes == before.used_bytes + 5 * trial_bytes);
  CHECK(after.reference_runs == before.reference_runs + 5);
  CHECK(cold.phases.reference_s > 0);
  CHECK(cold.phases.inputs_s > 0);
  CHECK(cold.phases.verify_s > 0);
  CHECK(cold.phases.compile_s > 0);
  CHECK(cold.phases.timing_s == 0);
  CHECK(cold.phases.profile_s == 0);

  // The next candidate of the task runs no reference in verification (counted, not
  // timed: a small reference's cold run can be as quick as a lookup).
  auto warm = review_of(*rev, t, src + "\n// another candidate\n", plan, o);
  CHECK(warm.status == review_status::ok);
  CHECK(warm.max_abs_error == cold.max_abs_error);
  CHECK(rev->trial_cache().reference_runs == after.reference_runs);
  CHECK(rev->trial_cache().used_bytes == after.used_bytes);
  // A wrong candidate is still caught against the cached outputs.
  auto wrong = review_of(*rev, t, off_by_scale, kRelu1D, o);
  CHECK(wrong.status == review_status::incorrect);
  CHECK(wrong.trials_passed == 0);

  // A cache too small for one trial's inputs: the same verdicts, every trial drawn and
  // run afresh.
  rev->set_trial_cache_bytes(trial_bytes / 2 - 1);
  CHECK(rev->trial_cache().used_bytes == 0);
  const uint64_t runs_before_uncached = rev->trial_cache().reference_runs;
  auto uncached = review_of(*rev, t, src + "\n// uncached\n", plan, o);
  CHECK(uncached.status == review_status::ok);
  CHECK(uncached.max_abs_error == cold.max_abs_error);
  CHECK(uncached.phases.reference_s > 0);
  CHECK(rev->trial_cache().reference_runs == runs_before_uncached + 5);
  auto wrong_uncached = review_of(*rev, t, off_by_scale + "// uncached\n", kRelu1D, o);
  CHECK(wrong_uncached.status == review_status::incorrect);
  CHECK(wrong_uncached.message == wrong.message);
  CHECK(rev->trial_cache().used_bytes == 0);
  // Room for two trials: the first two stay, the other three are run afresh each time.
  rev->set_trial_cache_bytes(2 * trial_bytes);
  auto partly = review_of(*rev, t, src + "\n// partly\n", plan, o);
  CHECK(partly.status == review_status::ok);
  CHECK(rev->trial_cache().trials == 2);
  auto partly_again = review_of(*rev, t, src + "\n// partly again\n", plan, o);
  CHECK(partly_again.status == review_status::ok);
  CHECK(rev->trial_cache().trials == 2);
  rev->set_trial_cache_bytes(0);
  CHECK(rev->trial_cache().budget_bytes == rev->device().total_memory_bytes / 2);

  // 2^36 float32 elements (275 GB) in and out: an error naming the sizes, before any
  // allocation (not an out-of-memory inside LibTorch).
  task_spec huge = t;
  huge.name = "relu_too_big";
  huge.inputs[0].shape = {1 << 18, 1 << 18};
  auto r = review_of(*rev, huge, src, plan, o);
  CHECK(r.status == review_status::internal_error);
  CHECK_THAT(r.message, Contains("the task does not fit " + rev->device().name) &&
                            Contains("inputs 274.88 GB (274877906944 bytes)") && Contains("but the device has"));
  CHECK(r.phases.inputs_s == 0);
  // The reviewer goes on.
  auto after_huge = review_of(*rev, t, src + "\n// after the huge one\n", plan, o);
  CHECK(after_huge.status == review_status::ok);
}

TEST_CASE(
    "gpu: inputs drawn on the device or on the CPU give the same verdicts, in trial-cache entries "
    "of their own",
    "[reviewer][gpu][cache][draw]") {
  REQUIRE_GPU(rev);
  task_spec t = task_from(kReluTask);
  t.name = "relu_draw_test";
  t.seed = 41;  // a task no other case has reviewed
  const std::string src = read_text(kExamples + "relu.cu"), plan = read_text(kExamples + "relu.yaml");
  const std::string off_by_scale = relu_like("  if (i < n) y[i] = x[i] > 0.f ? x[i] * 1.001f : 0.f;");
  const std::string clamps = relu_like("  if (i < n) y[i] = fmaxf(fminf(x[i], 8.f), 0.f);");
  review_options o = verify_only();
  o.profile = false;

  const size_t before = rev->trial_cache().trials;
  o.draw_inputs = "device";
  auto on_device = review_of(*rev, t, src, plan, o);
  CHECK(on_device.status == review_status::ok);
  CHECK(on_device.phases.inputs_s > 0);
  CHECK(rev->trial_cache().trials == before + 5);
  o.draw_inputs = "cpu";
  auto on_cpu = review_of(*rev, t, src + "\n// drawn on the CPU\n", plan, o);
  CHECK(on_cpu.status == review_status::ok);
  // The CPU's draws are other values than the device's: five more entries, not hits.
  CHECK(rev->trial_cache().trials == before + 10);
  CHECK(on_cpu.phases.reference_s > 0);

  for (const char* where : {"device", "cpu"}) {
    INFO(where);
    o.draw_inputs = where;
    auto wrong = review_of(*rev, t, off_by_scale, kRelu1D, o);
    CHECK(wrong.status == review_status::incorrect);
    CHECK(wrong.trials_passed == 0);
    auto clamped = review_of(*rev, t, clamps, kRelu1D, o);
    CHECK(clamped.status == review_status::incorrect);
    CHECK_THAT(clamped.message, Contains("second distribution"));
  }
  CHECK(rev->trial_cache().trials == before + 10);

  o.draw_inputs = "gpu";
  auto bad = review_of(*rev, t, src, plan, o);
  CHECK(bad.status == review_status::internal_error);
  CHECK_THAT(bad.message, Contains("review option draw_inputs \"gpu\": expected device"));
}

TEST_CASE("gpu: a correct review carries a hardware profile from CUPTI", "[reviewer][gpu][profile]") {
  REQUIRE_GPU(rev);
  auto r = review_of(*rev, task_from(kReluTask), read_text(kExamples + "relu.cu"), read_text(kExamples + "relu.yaml"));
  REQUIRE(r.status == review_status::ok);
  CHECK_THAT(r.message, !Contains("no hardware profile"));
  CHECK(r.profile.kernel_launches == 1);  // relu.yaml: one kernel step, no zero-filled buffer
  CHECK(r.profile.duration_ms > 0);
  const auto& v = r.profile.values;
  auto has = [&](const char* name) {
    INFO(name);
    CHECK(v.count(name) == 1);
    return v.count(name) == 1;
  };
  for (const char* pct :
       {"dram_throughput_pct", "l2_throughput_pct", "l1_throughput_pct", "sm_throughput_pct", "achieved_occupancy_pct",
        "stall_long_scoreboard_pct", "stall_short_scoreboard_pct", "theoretical_occupancy_pct"})
    if (has(pct)) {
      INFO(pct << " = " << v.at(pct));
      CHECK(v.at(pct) >= 0);
      CHECK(v.at(pct) <= 100.5);
    }
  // A kernel without a branch instruction has no branch efficiency (0 of 0): absent.
  if (v.count("branch_efficiency_pct")) CHECK(v.at("branch_efficiency_pct") <= 100.5);
  if (has("eligible_warps_per_cycle")) CHECK(v.at("eligible_warps_per_cycle") > 0);
  if (has("dram_bytes")) CHECK(v.at("dram_bytes") > 0);
  if (has("achieved_occupancy_pct")) CHECK(v.at("achieved_occupancy_pct") > 10);
  // A streaming kernel waits on global memory more than on anything else.
  if (has("stall_long_scoreboard_pct") && has("stall_short_scoreboard_pct"))
    CHECK(v.at("stall_long_scoreboard_pct") > v.at("stall_short_scoreboard_pct"));
  // 256 threads, few registers, no shared memory: warps limit occupancy to 8 blocks.
  CHECK(v.at("occupancy_limit_warps") == 8);
  CHECK(v.at("theoretical_occupancy_pct") == Approx(100));
  CHECK(v.at("registers_per_thread") > 0);
  CHECK(v.at("kernel_launches") == 1);

  review_options no_profile;
  no_profile.profile = false;
  no_profile.time = false;
  auto plain = review_of(*rev, task_from(kReluTask), read_text(kExamples + "relu.cu"),
                         read_text(kExamples + "relu.yaml"), no_profile);
  CHECK(plain.status == review_status::ok);
  CHECK(plain.profile.values.empty());
  CHECK(plain.profile.kernel_launches == 0);
}

TEST_CASE("gpu: a kernel that faults crashes the review and loses the context", "[.][crash][gpu]") {
  // Hidden: it poisons this process's CUDA context. Run alone: reviewer_test "[crash]".
  REQUIRE_GPU(rev);
  task_spec relu = task_from(kReluTask);
  auto r = review_of(*rev, relu, relu_like("  if (i < n) y[i + (1ll << 40)] = 1.f;"), kRelu1D, verify_only());
  CHECK(r.status == review_status::crashed);
  CHECK_THAT(r.message, Contains("CUDA_ERROR_ILLEGAL_ADDRESS") && Contains("context is lost"));
  CHECK(rev->context_lost());
  auto again = review_of(*rev, relu, read_text(kExamples + "relu.cu"), read_text(kExamples + "relu.yaml"));
  CHECK(again.status == review_status::crashed);
  CHECK_THAT(again.message, Contains("restarted"));
}

TEST_CASE("the worker actor answers a review_request with the reviewer", "[reviewer][worker]") {
  caf::actor_system_config cfg;
  register_protocol(cfg);
  caf::actor_system sys{cfg};
  auto worker = sys.spawn<caf::detached>(gpu_worker, worker_options{});
  caf::scoped_actor self{sys};
  review_request req;
  req.request_id = 42;
  req.task = task_from(kReluTask);
  req.cand.id = "relu-example";
  req.cand.source = read_text(kExamples + "relu.cu");
  req.cand.plan = plan_from(read_text(kExamples + "relu.yaml"));
  req.options.time = false;
  bool answered = false;
  self->request(worker, std::chrono::seconds(300), req)
      .receive(
          [&](const review_result& r) {
            answered = true;
            CHECK(r.request_id == 42);
            CHECK(r.candidate_id == "relu-example");
            if (gpu_reviewer()) {
              CHECK(r.status == review_status::ok);
            } else {
              CHECK(r.status == review_status::internal_error);
              CHECK_THAT(r.message, Contains("this worker cannot review"));
            }
          },
          [&](const caf::error& e) { FAIL("no answer: " << sys.render(e)); });
  CHECK(answered);
  self->send_exit(worker, caf::exit_reason::user_shutdown);
}
