// The LibTorch reference runner: every example task runs at its cpu size, and its
// values agree with computations written out by hand; inputs are deterministic per
// trial seed; bad references fail with clear messages; saved modules load.
#include "tests/support/catch_torch.hpp"
#include "tests/support/gpu_skip.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <tuple>

#include <sys/wait.h>
#include <unistd.h>

#include <torch/cuda.h>
#include <torch/script.h>
#include <nlohmann/json.hpp>

#include "gpu/graph_export.hpp"
#include "gpu/reference_launcher.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "task/task_loader.hpp"

namespace fs = std::filesystem;
using namespace ks;

namespace {

const fs::path kTaskDir = fs::path(KS_SOURCE_DIR) / "examples" / "tasks";

task_spec example(const std::string& name, const std::string& size = "cpu") {
  auto t = load_task(kTaskDir / (name + ".yaml"));
  REQUIRE(t.ok());
  if (size.empty()) return *t;
  auto sized = with_size(*t, size);
  REQUIRE(sized.ok());
  return *sized;
}

std::unique_ptr<reference_program> load_program(const task_spec& task, const std::string& device = "cpu") {
  reference_options options;
  options.device = device;
  options.threads = 2;
  auto p = reference_program::load(task, options);
  INFO((p.ok() ? "" : p.message()));
  REQUIRE(p.ok());
  return std::move(p.value());
}

struct run_result {
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
};

// Inputs and outputs of one trial, on the CPU, as float64 for hand computations.
run_result run_trial(reference_program& program, uint32_t trial = 0) {
  auto inputs = make_inputs(program.task(), trial_seed(program.task().seed, trial), program_device(program));
  REQUIRE(inputs.ok());
  auto outputs = run_tensors(program, *inputs);
  INFO((outputs.ok() ? "" : outputs.message()));
  REQUIRE(outputs.ok());
  run_result r;
  for (auto& t : *inputs) r.inputs.push_back(t.cpu().to(at::kDouble).contiguous());
  for (auto& t : *outputs) r.outputs.push_back(t.cpu().to(at::kDouble).contiguous());
  return r;
}

// max |a - b| - (atol + rtol |b|) over all elements: <= 0 means close.
double excess(const at::Tensor& got, const at::Tensor& want, double atol, double rtol) {
  REQUIRE(got.sizes() == want.sizes());
  return ((got - want).abs() - (atol + rtol * want.abs())).max().item<double>();
}

std::vector<fs::path> example_tasks() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kTaskDir))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("ks_reference_test_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<int64_t> shape_of(const task_spec& t, const std::string& tensor) {
  for (const auto* list : {&t.inputs, &t.parameters})
    for (const auto& ts : *list)
      if (ts.name == tensor) return ts.shape;
  FAIL("no tensor " << tensor);
  return {};
}

task_spec inline_task(const std::string& source, std::vector<tensor_spec> inputs,
                      std::vector<tensor_spec> parameters = {}) {
  task_spec t;
  t.name = "inline";
  t.torchscript = source;
  t.inputs = std::move(inputs);
  t.parameters = std::move(parameters);
  t.seed = 123;
  return t;
}

}  // namespace

TEST_CASE("every example task runs on the CPU at its cpu size with the expected shapes", "[reference]") {
  // What each starter task returns, from its input shapes. A new example task must
  // say here what it returns.
  auto expected = [](const task_spec& t) -> std::vector<std::vector<int64_t>> {
    auto x = shape_of(t, "x");
    if (t.name == "gelu" || t.name == "swish" || t.name == "softmax" || t.name == "layernorm") return {x};
    if (t.name == "row_sum" || t.name == "logsumexp") return {{x[0]}};
    if (t.name == "matmul_bias_relu") return {{x[0], shape_of(t, "weight")[1]}};
    FAIL("no expected output shape for example task " << t.name << ": add one here");
    return {};
  };

  for (const auto& path : example_tasks()) {
    auto task = example(path.stem().string());
    INFO(task.name);
    auto load_start = std::chrono::steady_clock::now();
    auto program = load_program(task);
    double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
    auto first = program->run(trial_seed(task.seed, 0));
    INFO((first.ok() ? "" : first.message()));
    REQUIRE(first.ok());
    auto second = program->run(trial_seed(task.seed, 1));
    REQUIRE(second.ok());
    std::printf(
        "reference %-18s cpu: load %6.1f ms, inputs %6.2f ms, forward %6.2f ms "
        "(first), %6.2f ms (second)\n",
        task.name.c_str(), load_ms, first->inputs_ms, first->forward_ms, second->forward_ms);

    auto want = expected(task);
    REQUIRE(first->outputs.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const tensor_summary& s = first->outputs[i];
      CHECK(s.shape == want[i]);
      CHECK(s.dtype == "float32");
      CHECK(s.nan_count == 0);
      CHECK(s.inf_count == 0);
      CHECK(s.min <= s.mean);
      CHECK(s.mean <= s.max);
      CHECK(s.abs_max == Approx(std::max(-s.min, s.max)));
      // A different trial draws different inputs, so a different fingerprint.
      CHECK(s.sum != second->outputs[i].sum);
    }
    CHECK(first->forward_ms < 1000);
  }
}

TEST_CASE("gelu and swish match their formulas", "[reference][values]") {
  {
    auto program = load_program(example("gelu"));
    auto r = run_trial(*program);
    auto x = r.inputs[0].flatten();
    auto y = r.outputs[0].flatten();
    auto xa = x.accessor<double, 1>();
    auto ya = y.accessor<double, 1>();
    double worst = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      double want = 0.5 * xa[i] * (1.0 + std::erf(xa[i] / std::sqrt(2.0)));
      worst = std::max(worst, std::abs(ya[i] - want) - (1e-5 + 1e-5 * std::abs(want)));
    }
    CHECK(worst <= 0);
  }
  {
    auto program = load_program(example("swish"));
    auto r = run_trial(*program);
    auto x = r.inputs[0].flatten();
    auto y = r.outputs[0].flatten();
    auto xa = x.accessor<double, 1>();
    auto ya = y.accessor<double, 1>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double want = xa[i] / (1.0 + std::exp(-xa[i]));
      REQUIRE(std::abs(ya[i] - want) <= 1e-5 + 1e-5 * std::abs(want));
    }
    // uniform(-6, 6): the inputs honour their distribution.
    CHECK(x.min().item<double>() >= -6);
    CHECK(x.max().item<double>() < 6);
  }
}

TEST_CASE("softmax rows sum to one and match exp(x - max) / sum", "[reference][values]") {
  auto program = load_program(example("softmax"));
  auto r = run_trial(*program);
  auto x = r.inputs[0];
  auto y = r.outputs[0];
  auto row_sums = y.sum(-1);
  CHECK(excess(row_sums, at::ones_like(row_sums), 1e-5, 0) <= 0);
  CHECK(y.min().item<double>() >= 0);
  auto xa = x.accessor<double, 2>();
  auto ya = y.accessor<double, 2>();
  for (int64_t row = 0; row < x.size(0); ++row) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < x.size(1); ++j) mx = std::max(mx, xa[row][j]);
    for (int64_t j = 0; j < x.size(1); ++j) sum += std::exp(xa[row][j] - mx);
    for (int64_t j = 0; j < x.size(1); ++j) REQUIRE(std::abs(ya[row][j] - std::exp(xa[row][j] - mx) / sum) <= 1e-6);
  }
}

TEST_CASE("row_sum and logsumexp match loops over each row", "[reference][values]") {
  for (const char* name : {"row_sum", "logsumexp"}) {
    INFO(name);
    auto program = load_program(example(name));
    auto r = run_trial(*program);
    auto xa = r.inputs[0].accessor<double, 2>();
    auto ya = r.outputs[0].accessor<double, 1>();
    for (int64_t row = 0; row < r.inputs[0].size(0); ++row) {
      double want = 0;
      int64_t n = r.inputs[0].size(1);
      if (std::string(name) == "row_sum") {
        for (int64_t j = 0; j < n; ++j) want += xa[row][j];
        REQUIRE(std::abs(ya[row] - want) <= 1e-4);
      } else {
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, xa[row][j]);
        for (int64_t j = 0; j < n; ++j) want += std::exp(xa[row][j] - mx);
        want = mx + std::log(want);
        REQUIRE(std::abs(ya[row] - want) <= 1e-4 * std::abs(want));
      }
    }
  }
}

TEST_CASE("layernorm normalises each row and applies weight and bias", "[reference][values]") {
  auto program = load_program(example("layernorm"));
  auto r = run_trial(*program);
  auto x = r.inputs[0];
  auto w = parameter_tensors(*program)[0].to(at::kDouble);
  auto b = parameter_tensors(*program)[1].to(at::kDouble);
  auto xa = x.accessor<double, 2>();
  auto wa = w.accessor<double, 1>();
  auto ba = b.accessor<double, 1>();
  auto ya = r.outputs[0].accessor<double, 2>();
  int64_t n = x.size(1);
  for (int64_t row = 0; row < x.size(0); ++row) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += xa[row][j];
    mean /= n;
    for (int64_t j = 0; j < n; ++j) var += (xa[row][j] - mean) * (xa[row][j] - mean);
    var /= n;  // biased, as LayerNorm
    for (int64_t j = 0; j < n; ++j) {
      double want = (xa[row][j] - mean) / std::sqrt(var + 1e-5) * wa[j] + ba[j];
      REQUIRE(std::abs(ya[row][j] - want) <= 1e-4 + 1e-4 * std::abs(want));
    }
  }
  // The parameters are the task's, not LayerNorm's ones/zeros.
  CHECK(w.mean().item<double>() == Approx(1).margin(0.05));
  CHECK(w.std().item<double>() == Approx(0.1).margin(0.03));

  // With unit weight and zero bias each row comes out with mean 0 and variance 1.
  auto plain = example("layernorm");
  plain.parameters[0].init = {.kind = "ones"};
  plain.parameters[1].init = {.kind = "zeros"};
  auto unit = load_program(plain);
  auto u = run_trial(*unit).outputs[0];
  CHECK(u.mean(-1).abs().max().item<double>() < 1e-5);
  CHECK(excess(u.var(-1, /*unbiased=*/false), at::ones({u.size(0)}, at::kDouble), 1e-3, 0) <= 0);
}

TEST_CASE("the matmul epilogue matches a triple loop", "[reference][values]") {
  auto task = example("matmul_bias_relu", "");
  // Tiny, so that the loop is quick and every element is checked.
  task.inputs[0].shape = {5, 7};
  task.parameters[0].shape = {7, 3};
  task.parameters[1].shape = {3};
  auto program = load_program(task);
  auto r = run_trial(*program);
  auto xa = r.inputs[0].accessor<double, 2>();
  auto w = parameter_tensors(*program)[0].to(at::kDouble);
  auto b = parameter_tensors(*program)[1].to(at::kDouble);
  auto wa = w.accessor<double, 2>();
  auto ba = b.accessor<double, 1>();
  auto ya = r.outputs[0].accessor<double, 2>();
  REQUIRE(r.outputs[0].sizes().vec() == std::vector<int64_t>({5, 3}));
  int positive = 0;
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 3; ++j) {
      double acc = ba[j];
      for (int k = 0; k < 7; ++k) acc += xa[i][k] * wa[k][j];
      double want = std::max(acc, 0.0) * 0.5;
      positive += want > 0;
      CHECK(std::abs(ya[i][j] - want) <= 1e-5);
    }
  }
  CHECK(positive > 0);  // the relu did not zero everything: the check means something
  // kaiming_uniform: uniform(±1/sqrt(fan_in)), fan_in = 3.
  CHECK(w.abs().max().item<double>() <= 1 / std::sqrt(3.0));
}

TEST_CASE("inputs are deterministic per trial seed, parameters per task", "[reference][determinism]") {
  auto task = example("layernorm");
  auto a = load_program(task);
  auto b = load_program(task);
  // Parameters: the same for two programs of the same task.
  for (size_t i = 0; i < task.parameters.size(); ++i)
    CHECK(at::equal(parameter_tensors(*a)[i], parameter_tensors(*b)[i]));

  auto r1 = a->run(trial_seed(task.seed, 4));
  auto r2 = b->run(trial_seed(task.seed, 4));
  auto r3 = a->run(trial_seed(task.seed, 5));
  REQUIRE((r1.ok() && r2.ok() && r3.ok()));
  CHECK(r1->outputs[0].sum == r2->outputs[0].sum);
  CHECK(r1->outputs[0].abs_max == r2->outputs[0].abs_max);
  CHECK(r1->outputs[0].sum != r3->outputs[0].sum);

  auto i1 = make_inputs(task, trial_seed(task.seed, 4), c10::Device(c10::kCPU));
  auto i2 = make_inputs(task, trial_seed(task.seed, 4), c10::Device(c10::kCPU));
  auto i3 = make_inputs(task, trial_seed(task.seed, 5), c10::Device(c10::kCPU));
  REQUIRE((i1.ok() && i2.ok() && i3.ok()));
  CHECK(at::equal((*i1)[0], (*i2)[0]));
  CHECK_FALSE(at::equal((*i1)[0], (*i3)[0]));

  // Another task seed changes the parameters.
  auto other = task;
  other.seed += 1;
  auto c = load_program(other);
  CHECK_FALSE(at::equal(parameter_tensors(*a)[0], parameter_tensors(*c)[0]));
}

TEST_CASE("trial seeds are distinct and stable", "[reference][determinism]") {
  std::set<uint64_t> seen;
  for (uint64_t task_seed : {0ull, 1ull, 42ull})
    for (uint32_t trial = 0; trial < 1000; ++trial) seen.insert(trial_seed(task_seed, trial));
  CHECK(seen.size() == 3000);
  CHECK(trial_seed(42, 3) == trial_seed(42, 3));
  CHECK(trial_seed(0, 0) == 0xE220A8397B1DCDAFull);  // splitmix64's first output from 0
}

TEST_CASE("every dtype and distribution is made as specified", "[reference][inputs]") {
  std::vector<tensor_spec> in = {
      {"n", {200, 500}, "float32", {.kind = "normal", .mean = 3, .std = 2}},
      {"u", {1000}, "float16", {.kind = "uniform", .low = -2, .high = -1}},
      {"r", {1000}, "int32", {.kind = "randint", .low = -3, .high = 4}},
      {"b", {1000}, "bool", {.kind = "randint", .low = 0, .high = 2}},
      {"c", {2, 3}, "bfloat16", {.kind = "constant", .value = 1.5}},
      {"a", {2, 3}, "int64", {.kind = "arange"}},
      {"z", {4}, "float64", {.kind = "zeros"}},
      {"o", {}, "float32", {.kind = "ones"}},
      {"k", {16, 64}, "float32", {.kind = "kaiming_uniform"}},
  };
  auto task = inline_task("def forward(n, u, r, b, c, a, z, o, k):\n    return n\n", in);
  REQUIRE(validate_task(task).ok());
  auto made = make_inputs(task, 99, c10::Device(c10::kCPU));
  REQUIRE(made.ok());
  auto& t = *made;
  CHECK(t[0].scalar_type() == at::kFloat);
  CHECK(t[0].mean().item<double>() == Approx(3).margin(0.05));
  CHECK(t[0].std().item<double>() == Approx(2).margin(0.05));
  CHECK(t[1].scalar_type() == at::kHalf);
  CHECK(t[1].min().item<double>() >= -2);
  CHECK(t[1].max().item<double>() <= -1);
  CHECK(t[2].scalar_type() == at::kInt);
  CHECK(t[2].min().item<int64_t>() == -3);
  CHECK(t[2].max().item<int64_t>() == 3);  // high is exclusive
  CHECK(t[3].scalar_type() == at::kBool);
  CHECK(t[3].sum().item<int64_t>() > 400);
  CHECK(t[3].sum().item<int64_t>() < 600);
  CHECK(t[4].scalar_type() == at::kBFloat16);
  CHECK(t[4].eq(1.5).all().item<bool>());
  CHECK(t[5].scalar_type() == at::kLong);
  CHECK(at::equal(t[5], at::arange(6, at::kLong).reshape({2, 3})));
  CHECK(t[6].scalar_type() == at::kDouble);
  CHECK(t[6].eq(0).all().item<bool>());
  CHECK(t[7].dim() == 0);
  CHECK(t[7].item<double>() == 1);
  CHECK(t[8].abs().max().item<double>() <= 1 / 8.0);  // fan_in 64
  CHECK(t[8].abs().max().item<double>() > 0.1);

  // The runner's summary agrees with the tensor.
  auto s = summarize(t[0]);
  CHECK(s.shape == std::vector<int64_t>({200, 500}));
  CHECK(s.numel == 100000);
  CHECK(s.sum == Approx(t[0].to(at::kDouble).sum().item<double>()));
  CHECK(s.min == t[0].min().item<double>());
  auto nan = summarize(at::tensor({1.0, NAN, INFINITY, -2.0}));
  CHECK(nan.nan_count == 1);
  CHECK(nan.inf_count == 1);
  CHECK(nan.sum == -1);
  CHECK(nan.abs_max == 2);
  CHECK(nan.dtype == "float64");
}

TEST_CASE("forward may return a tuple of tensors", "[reference]") {
  auto task =
      inline_task("def forward(x):\n    return x + 1, torch.sum(x)\n", {{"x", {3, 4}, "float32", {.kind = "ones"}}});
  auto program = load_program(task);
  auto r = program->run(1);
  REQUIRE(r.ok());
  REQUIRE(r->outputs.size() == 2);
  CHECK(r->outputs[0].sum == 24);
  CHECK(r->outputs[1].shape.empty());
  CHECK(r->outputs[1].sum == 12);
}

TEST_CASE("bad references give errors that name the task and the problem", "[reference][errors]") {
  tensor_spec x{"x", {4}, "float32", {}};
  SECTION("TorchScript syntax error") {
    auto p = reference_program::load(inline_task("def forward(x):\n    return torch.gelu(x\n", {x}));
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::StartsWith("task \"inline\": the TorchScript does not compile"));
  }
  SECTION("unknown builtin") {
    auto p = reference_program::load(inline_task("def forward(x):\n    return torch.no_such_op(x)\n", {x}));
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains("does not compile") && Catch::Contains("no_such_op"));
  }
  SECTION("no forward function") {
    auto p =
        reference_program::load(inline_task("# def forward(x): is only mentioned\ndef fwd(x):\n    return x\n", {x}));
    REQUIRE_FALSE(p.ok());
    CHECK(p.message() == "task \"inline\": the TorchScript defines no function named forward");
  }
  SECTION("forward takes a different number of tensors") {
    auto p = reference_program::load(inline_task("def forward(x, y):\n    return x + y\n", {x}));
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains("forward takes 2 arguments, but the task declares 1 tensors (x)"));
  }
  SECTION("forward returns something other than tensors") {
    auto p = reference_program::load(inline_task("def forward(x):\n    return 3\n", {x}));
    REQUIRE(p.ok());
    auto r = (*p)->run(0);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Catch::Contains("forward returned Int; expected a Tensor"));
  }
  SECTION("forward fails at run time") {
    auto p = reference_program::load(inline_task("def forward(x):\n    return torch.matmul(x, torch.ones(3))\n", {x}));
    REQUIRE(p.ok());
    auto r = (*p)->run(0);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Catch::StartsWith("task \"inline\": forward failed: "));
  }
  SECTION("invalid task spec") {
    auto t = inline_task("def forward(x):\n    return x\n", {x});
    t.inputs[0].dtype = "float8";
    auto p = reference_program::load(t);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains("inputs[0].dtype"));
  }
  SECTION("unknown device name") {
    reference_options o;
    o.device = "gpu0";
    auto p = reference_program::load(inline_task("def forward(x):\n    return x\n", {x}), o);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains("expected cpu, cuda or cuda:N"));
  }
  SECTION("a module that is not a module") {
    auto t = inline_task("", {x});
    t.torchscript.clear();
    t.module_bytes = "not a zip file";
    t.module_path = "/somewhere/net.pt";
    auto p = reference_program::load(t);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::StartsWith("task \"inline\": cannot load module \"/somewhere/net.pt\""));
  }
}

TEST_CASE("a task can reference a saved TorchScript module", "[reference][module]") {
  temp_dir dir;
  // Build and save a small module in C++, as torch.jit.save would from Python.
  torch::jit::Module m("Scale");
  auto weight = at::arange(12, at::kFloat).reshape({4, 3}) / 10;
  m.register_parameter("weight", weight, /*is_buffer=*/false);
  m.define(R"(
def forward(self, x):
    return torch.relu(torch.matmul(x, self.weight) - 1.0)
)");
  m.save((dir.path / "scale.pt").string());

  std::ofstream(dir.path / "scale.yaml") << R"(name: scale
description: relu(x @ W - 1) from a saved module
reference:
  module: scale.pt
inputs:
  - {name: x, shape: [5, 4], init: {kind: uniform, low: -1, high: 2}}
seed: 8
)";
  auto task = load_task(dir.path / "scale.yaml");
  INFO((task.ok() ? "" : task.message()));
  REQUIRE(task.ok());
  CHECK_FALSE(task->module_bytes.empty());

  auto program = load_program(*task);
  CHECK(parameter_tensors(*program).empty());
  auto summary = program->run(trial_seed(task->seed, 0));
  REQUIRE(summary.ok());
  REQUIRE(summary->outputs.size() == 1);
  CHECK(summary->outputs[0].shape == std::vector<int64_t>({5, 3}));

  auto r = run_trial(*program);
  auto want = at::relu(at::matmul(r.inputs[0], weight.to(at::kDouble)) - 1.0);
  CHECK(excess(r.outputs[0], want, 1e-6, 1e-6) <= 0);
  CHECK(want.gt(0).any().item<bool>());
  CHECK(summary->outputs[0].sum == Approx(want.sum().item<double>()).epsilon(1e-6));

  SECTION("a module whose forward takes other inputs than the task declares") {
    auto two = *task;
    two.inputs.push_back(two.inputs[0]);
    two.inputs[1].name = "y";
    auto p = reference_program::load(two);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains("scale.pt\": forward takes 1 inputs, but the task declares 2"));
  }
}

TEST_CASE("without CUDA, a reference on the cuda device says LibTorch sees none", "[reference][cuda][nogpu]") {
  if (torch::cuda::is_available()) KS_SKIP("LibTorch sees a CUDA device here");
  reference_options o;
  o.device = "cuda";
  auto p = reference_program::load(example("gelu"), o);
  REQUIRE_FALSE(p.ok());
  CHECK_THAT(p.message(), Catch::Contains("LibTorch sees no CUDA device"));
}

TEST_CASE("gpu: CUDA runs see the CPU's inputs and agree with the CPU's outputs", "[reference][cuda][gpu]") {
  if (!torch::cuda::is_available()) KS_SKIP("LibTorch sees no CUDA device here");
  {
    reference_options o;
    o.device = "cuda:" + std::to_string(torch::cuda::device_count());
    auto p = reference_program::load(example("gelu"), o);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains("CUDA device(s) visible"));
  }
  for (const auto& path : example_tasks()) {
    auto task = example(path.stem().string());
    INFO(task.name);
    auto cpu = load_program(task, "cpu");
    auto gpu = load_program(task, "cuda");
    CHECK(gpu->device() == "cuda:0");
    for (size_t i = 0; i < task.parameters.size(); ++i)
      CHECK(at::equal(parameter_tensors(*cpu)[i], parameter_tensors(*gpu)[i].cpu()));
    auto seed = trial_seed(task.seed, 2);
    auto in_cpu = make_inputs(task, seed, c10::Device(c10::kCPU));
    auto in_gpu = make_inputs(task, seed, c10::Device(c10::kCUDA, 0));
    REQUIRE((in_cpu.ok() && in_gpu.ok()));
    CHECK((*in_gpu)[0].is_cuda());
    CHECK(at::equal((*in_cpu)[0], (*in_gpu)[0].cpu()));
    auto out_cpu = run_tensors(*cpu, *in_cpu);
    auto out_gpu = run_tensors(*gpu, *in_gpu);
    REQUIRE((out_cpu.ok() && out_gpu.ok()));
    CHECK(excess((*out_gpu)[0].cpu().to(at::kDouble), (*out_cpu)[0].to(at::kDouble), task.tolerance.atol,
                 task.tolerance.rtol) <= 0);
    auto summary = gpu->run(seed);
    REQUIRE(summary.ok());
    std::printf("reference %-18s cuda: inputs %6.2f ms, forward %6.2f ms\n", task.name.c_str(), summary->inputs_ms,
                summary->forward_ms);
  }
}

// Hidden (run it with `reference_test "[full]"` on a GPU machine): every example at
// its real size, to see that inputs fit and how long the reference takes there.
TEST_CASE("every example task runs at full size on CUDA", "[.][cuda][full]") {
  if (!torch::cuda::is_available()) KS_SKIP("LibTorch sees no CUDA device here");
  for (const auto& path : example_tasks()) {
    auto task = example(path.stem().string(), "");
    INFO(task.name);
    auto program = load_program(task, "cuda");
    double best = 1e30, inputs = 0;
    for (uint32_t trial = 0; trial < 3; ++trial) {
      auto r = program->run(trial_seed(task.seed, trial));
      INFO((r.ok() ? "" : r.message()));
      REQUIRE(r.ok());
      CHECK(r->outputs[0].nan_count == 0);
      CHECK(r->outputs[0].inf_count == 0);
      best = std::min(best, r->forward_ms);
      inputs = r->inputs_ms;
    }
    std::printf("reference %-18s cuda full size: inputs %8.1f ms, forward %7.3f ms (best of 3)\n", task.name.c_str(),
                inputs, best);
  }
}

// A reference is untrusted: file, print and foreign operators are refused by name before
// anything runs it (loading for the reviewer, or the graph export, whose constant
// propagation would already execute them), and nothing is read, written or printed.
TEST_CASE("references that read or write files, or print, are refused before they run", "[reference][untrusted]") {
  const fs::path written = fs::path(KS_BINARY_DIR) / "ks-untrusted-written.pt";
  fs::remove(written);
  const std::pair<std::string, std::string> cases[] = {
      {"aten::from_file", "    y = torch.from_file('/etc/passwd', False, 16)\n    return x * 2.0 + y.sum()\n"},
      {"aten::save", "    torch.save(x, '" + written.string() + "')\n    return x * 2.0\n"},
      {"prim::Print", "    print(x)\n    return x * 2.0\n"},
      {"prim::Print",
       "    y = x\n    for i in range(3):\n        if i == 2:\n            print('in a loop')\n"
       "        y = y + 1.0\n    return y\n"},
  };
  for (const auto& [op, body] : cases) {
    INFO(op << "\n" << body);
    task_spec t = example("gelu");
    t.name = "untrusted";
    t.torchscript = "def forward(x):\n" + body;
    auto p = reference_program::load(t);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains("untrusted") && Catch::Contains(op));
    auto g = export_graph_json(t);
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(g.message(), Catch::Contains(op));
  }
  CHECK_FALSE(fs::exists(written));
  // What only computes still loads and exports.
  task_spec ok = example("gelu");
  ok.torchscript =
      "def forward(x):\n    y = x\n    for i in range(3):\n        y = torch.relu(y) + 1.0\n    return y\n";
  CHECK(reference_program::load(ok).ok());
  CHECK(export_graph_json(ok).ok());
}

// prim::fork keeps its body in a graph attribute that torch::jit::Inline does not enter:
// the check follows it, and the calls inside it, however deep (tests/data/untrusted/
// make_modules.py made the saved modules with PyTorch; the TorchScript variants are
// the same attacks written as task source). Nothing is read or written, and the
// secret's bytes appear in no message.
TEST_CASE("a reference that reaches a file operator through a fork is refused with the operator named",
          "[reference][untrusted][fork]") {
  const fs::path dir = fs::path(KS_SOURCE_DIR) / "tests" / "data" / "untrusted";
  const fs::path secret = "/tmp/ks-untrusted-secret", written = "/tmp/ks-untrusted-written.pt";
  std::ofstream(secret) << "hello secret";
  fs::remove(written);
  auto with_module = [&](const std::string& file) {
    auto t = load_task(dir / "untrusted_task.yaml");
    REQUIRE(t.ok());
    auto mapped = shared_bytes::map_file(dir / file);
    REQUIRE(mapped.ok());
    t->module_bytes = std::move(*mapped);
    REQUIRE_FALSE(t->module_bytes.empty());
    t->module_path = (dir / file).string();
    return *t;
  };
  auto refused = [&](const task_spec& t, const std::string& op) {
    auto p = reference_program::load(t);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains(op));
    auto g = export_graph_json(t);
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(g.message(), Catch::Contains(op));
    // "hell" as the reference would have read it (104 101 108 108), or as text.
    for (const std::string& m : {p.message(), g.message()}) {
      CHECK_THAT(m, !Catch::Contains("104") && !Catch::Contains("hello"));
    }
  };
  const std::pair<std::string, std::string> modules[] = {
      {"fork_function.pt", "aten::from_file"}, {"fork_write.pt", "aten::save"},
      {"fork_nested.pt", "aten::from_file"},   {"fork_in_loop.pt", "aten::from_file"},
      {"fork_method.pt", "aten::from_file"},   {"fork_class.pt", "aten::from_file"},
  };
  for (const auto& [file, op] : modules) {
    INFO(file);
    refused(with_module(file), op);
  }
  // TorchScript given as text (compiled by LibTorch's C++ front end, which knows no
  // fork) reaches raw storage directly: refused by name.
  {
    task_spec t = with_module("fork_computes.pt");
    t.module_bytes.clear();
    t.module_path.clear();
    t.torchscript = "def forward(x):\n    y = torch.zeros(1)\n    y.set_(x)\n    return y * 2.0\n";
    refused(t, "aten::set_");
  }
  // The real worker refuses the issue's repro before anything runs, and prints no byte of it.
  const fs::path task_file = fs::path(KS_BINARY_DIR) / "ks-untrusted-task.yaml";
  std::ofstream(task_file) << "name: untrusted\nreference:\n  module: " << (dir / "fork_function.pt").string()
                           << "\ninputs:\n  - {name: x, shape: [4]}\n";
  const std::string worker = (fs::path(KS_BINARY_DIR) / "bin" / "kernelskill-gpu").string();
  for (const std::string mode : {" --graph ", " --run-reference "}) {
    INFO(mode);
    const std::string cmd = worker + mode + task_file.string() + (mode == " --graph " ? "" : " --on cpu") + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe);
    std::string out;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
    const int status = ::pclose(pipe);
    CHECK(WEXITSTATUS(status) != 0);
    CHECK_THAT(out, Catch::Contains("aten::from_file") && Catch::Contains("prim::fork"));
    CHECK_THAT(out, !Catch::Contains("hello") && !Catch::Contains("104"));
  }
  fs::remove(task_file);
  CHECK_FALSE(fs::exists(written));
  fs::remove(secret);

  // A fork that only computes loads, exports and runs: x * 2 + 1.
  const task_spec computes = with_module("fork_computes.pt");
  CHECK(export_graph_json(computes).ok());
  auto program = load_program(computes);
  auto r = run_trial(*program);
  CHECK(excess(r.outputs[0], r.inputs[0] * 2.0 + 1.0, 1e-6, 0) <= 0);
}

// The graph export needs shapes, not values: a graph whose ops all have meta kernels is
// probed on tensors without data, so a task far larger than this machine's memory
// (64 GiB of input; the CPU allocator refuses it) exports at once with its shapes.
TEST_CASE("the graph of a task larger than memory is exported from shapes alone", "[reference][graph]") {
  task_spec t = example("gelu");
  t.name = "larger_than_memory";
  t.torchscript = "def forward(x, w):\n    return torch.softmax(x * 2.0 + w, dim=1).sum(dim=1)\n";
  distribution_spec uniform;
  uniform.kind = "uniform";
  t.inputs = {tensor_spec{"x", {131072, 131072}, "float32", uniform}};
  t.parameters = {tensor_spec{"w", {131072}, "float32", distribution_spec{}}};
  t.sizes.clear();
  auto g = export_graph_json(t);
  REQUIRE(g.ok());
  auto j = nlohmann::json::parse(*g);
  const std::string out = j["outputs"][0];
  CHECK(j["values"][out]["shape"] == std::vector<int64_t>{131072});
  CHECK(j["values"][out]["dtype"] == "float32");
  CHECK(j["values"][std::string(j["inputs"][0]["value"])]["shape"] == std::vector<int64_t>{131072, 131072});
  // The same graph at a size the CPU can hold gives the same shapes per element count.
  t.inputs[0].shape = {64, 128};
  t.parameters[0].shape = {128};
  auto small = export_graph_json(t);
  REQUIRE(small.ok());
  CHECK(nlohmann::json::parse(*small)["values"][out]["shape"] == std::vector<int64_t>{64});
}

namespace {

// A float32 tensor of a graph-export test's task; `kind` empty: the default draw.
tensor_spec f32(const std::string& name, std::vector<int64_t> shape, const std::string& kind = "") {
  distribution_spec d;
  if (!kind.empty()) d.kind = kind;
  return tensor_spec{name, std::move(shape), "float32", d};
}

task_spec graph_task(const std::string& name, const std::string& torchscript, std::vector<tensor_spec> inputs,
                     std::vector<tensor_spec> parameters) {
  task_spec t = example("gelu");
  t.name = name;
  t.torchscript = torchscript;
  t.inputs = std::move(inputs);
  t.parameters = std::move(parameters);
  t.sizes.clear();
  return t;
}

// The exported graph of `t`, which must have been probed on meta.
nlohmann::json exported_on_meta(const task_spec& t) {
  std::string note;
  auto g = export_graph_json(t, &note);
  REQUIRE(g.ok());
  CHECK(note == "probed on meta");
  return nlohmann::json::parse(*g);
}

std::vector<int64_t> first_output_shape(const nlohmann::json& graph) {
  return graph["values"][graph["outputs"][0].get<std::string>()]["shape"].get<std::vector<int64_t>>();
}

}  // namespace

// Some ops have no meta kernel in LibTorch's C++ (relu in 1.13; abs, group_norm,
// instance_norm in 2.x register theirs from Python): the probe still runs on meta, with a
// copy of the input in their place, so KernelBench's Softsign, L1Norm, GroupNorm and
// InstanceNorm at their published sizes export without a GPU or their 6.4 GB on the CPU.
// A check of the device the tensor is on folds to the GPU's branch.
TEST_CASE("the graph of ops without meta kernels is still exported from shapes alone", "[reference][graph]") {
  const std::string source =
      "def forward(x, w, b):\n"
      "    y = torch.abs(x) + torch.relu(x) / (1.0 + torch.abs(x))\n"
      "    z = torch.group_norm(y, 8, w, b, 1e-5, False)\n"
      "    if z.is_cuda and z.device.type in ['cpu', 'cuda', 'meta']:\n"
      "        return torch.instance_norm(z, None, None, None, None, True, 0.1, 1e-5, False) * 2.0\n"
      "    return z + 1.0\n";
  task_spec t = graph_task("no_meta_kernels", source, {f32("x", {4096, 64, 512, 512}, "uniform")},  // 256 GiB
                           {f32("w", {64}), f32("b", {64})});
  const nlohmann::json j = exported_on_meta(t);
  std::vector<std::string> kinds;
  for (const auto& n : j["nodes"]) kinds.push_back(n["kind"]);
  // The nodes are the task's own (the stand-ins were only in the probe's copy), the
  // device check gone, and the GPU's branch kept.
  CHECK(kinds == std::vector<std::string>{"aten::abs", "aten::relu", "aten::abs", "aten::add", "aten::div", "aten::add",
                                          "aten::group_norm", "aten::instance_norm", "aten::mul"});
  for (const auto& n : j["nodes"])
    for (const auto& v : n["outputs"]) {
      INFO(n["kind"]);
      CHECK(j["values"][std::string(v)]["shape"] == std::vector<int64_t>{4096, 64, 512, 512});
      CHECK(j["values"][std::string(v)]["dtype"] == "float32");
    }
  // At a size the CPU could hold, still meta: the CPU is never the first choice.
  t.inputs[0].shape = {2, 16, 4, 4};
  t.parameters[0].shape = t.parameters[1].shape = {16};
  CHECK(first_output_shape(exported_on_meta(t)) == std::vector<int64_t>{2, 16, 4, 4});
}

// flip has no meta kernel in LibTorch 1.13's C++: KernelBench's reverse cumsum
// (flip, cumsum, flip over 32768 x 32768) fell to the CPU and its 16 GB of copies.
// Its stand-in keeps the shape, as roll's does.
TEST_CASE("a reverse scan's flips are probed on meta", "[reference][graph]") {
  const task_spec t =
      graph_task("flip_meta", "def forward(x):\n    return torch.roll(torch.cumsum(x.flip(1), 1).flip(1), 1, 1)\n",
                 {f32("x", {65536, 1048576}, "uniform")}, {});  // 256 GiB
  const nlohmann::json j = exported_on_meta(t);
  std::vector<std::string> kinds;
  for (const auto& n : j["nodes"]) kinds.push_back(n["kind"]);
  CHECK(kinds == std::vector<std::string>{"aten::flip", "aten::cumsum", "aten::flip", "aten::roll"});
  CHECK(first_output_shape(j) == std::vector<int64_t>{65536, 1048576});
}

// Convolutions have no meta kernel in LibTorch's C++ (convolution_overrideable): the
// export registers one computing the output's shape. Checked against the shapes the CPU
// computes, over ranks, strides, padding, dilation, groups and transposed convolutions
// with output padding; and at a level-2 size (64 GiB of output) it exports at once.
TEST_CASE("convolutions are probed on meta with the shapes the CPU computes", "[reference][graph]") {
  struct conv_case {
    std::string call;  // of x and w
    std::vector<int64_t> x, w;
  };
  const std::vector<conv_case> cases = {
      {"torch.conv1d(x, w, None, [2], [1], [1], 1)", {2, 4, 17}, {6, 4, 3}},
      {"torch.conv2d(x, w, None, [1, 2], [0, 1], [2, 1], 2)", {3, 4, 13, 11}, {6, 2, 3, 3}},
      {"torch.conv3d(x, w, None, [2, 1, 1], [1, 0, 2], [1, 1, 2], 1)", {1, 2, 9, 8, 7}, {3, 2, 3, 3, 2}},
      {"torch.conv_transpose1d(x, w, None, [3], [1], [2], 1, [2])", {2, 4, 5}, {4, 3, 4}},
      {"torch.conv_transpose2d(x, w, None, [2, 2], [1, 1], [1, 0], 2, [1, 1])", {2, 4, 7, 6}, {4, 3, 3, 3}},
      {"torch.conv_transpose3d(x, w, None, [2, 1, 2], [0, 1, 1], [0, 0, 1], 1, [1, 1, 2])",
       {1, 2, 4, 5, 3},
       {2, 3, 3, 3, 2}},
  };
  for (const auto& c : cases) {
    INFO(c.call);
    const task_spec t = graph_task("conv_meta", "def forward(x, w):\n    return " + c.call + " * 2.0\n",
                                   {f32("x", c.x, "uniform")}, {f32("w", c.w, "uniform")});
    const std::vector<int64_t> exported = first_output_shape(exported_on_meta(t));
    auto program = load_program(t);
    const run_result r = run_trial(*program);
    CHECK(exported == r.outputs.at(0).sizes().vec());
  }
  const task_spec big = graph_task(
      "conv_meta_large",
      "def forward(x, w, b):\n    return torch.conv_transpose2d(x, w, b, [2, 2], [1, 1], [1, 1], 1, [1, 1])\n",
      {f32("x", {1024, 64, 256, 256})}, {f32("w", {64, 32, 3, 3}), f32("b", {32})});
  CHECK(first_output_shape(exported_on_meta(big)) == std::vector<int64_t>{1024, 32, 512, 512});
  // A kernel wider than its padded input: an error, why the meta probe failed first,
  // then the CPU's, not a shape of zero or less.
  const task_spec too_wide = graph_task("conv_meta_too_wide", "def forward(x, w):\n    return torch.conv1d(x, w)\n",
                                        {f32("x", {1, 2, 3})}, {f32("w", {4, 2, 5})});
  auto g = export_graph_json(too_wide);
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(g.message(), Catch::StartsWith("task \"conv_meta_too_wide\": graph export: not probed on meta") &&
                              Catch::Contains("Kernel size can't be greater") && Catch::Contains("on the cpu"));
}

// A saved module runs its __setstate__ while torch::jit::load loads it, before its
// forward could be checked: the load-time code is checked first, against the same
// rules (tests/data/setstate/make_modules.py made these modules with PyTorch).
TEST_CASE("a saved module whose __setstate__ reads files or prints is refused before it loads",
          "[reference][untrusted][setstate]") {
  const fs::path dir = fs::path(KS_SOURCE_DIR) / "tests" / "data" / "setstate";
  auto with_module = [&](const std::string& file) {
    auto t = load_task(dir / "setstate_task.yaml");
    REQUIRE(t.ok());
    auto mapped = shared_bytes::map_file(dir / file);
    REQUIRE(mapped.ok());
    t->module_bytes = std::move(*mapped);
    REQUIRE_FALSE(t->module_bytes.empty());
    t->module_path = (dir / file).string();
    return *t;
  };
  const std::tuple<std::string, std::string, std::string> cases[] = {
      {"printing.pt", "__torch__.Printing", "prim::Print"},
      {"reading.pt", "__torch__.Reading", "aten::from_file"},
      {"helper.pt", "__torch__.ThroughHelper", "prim::Print"},  // through a method it calls
      {"nested.pt", "__torch__.Printing", "prim::Print"},       // a submodule's
  };
  for (const auto& [file, cls, op] : cases) {
    INFO(file);
    const task_spec t = with_module(file);
    auto p = reference_program::load(t);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), Catch::Contains(cls) && Catch::Contains("__setstate__") && Catch::Contains(op));
    auto g = export_graph_json(t);
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(g.message(), Catch::Contains(cls) && Catch::Contains(op));
  }
  // Nothing of it ran: the real worker refuses the module and prints nothing of its.
  const fs::path task_file = fs::path(KS_BINARY_DIR) / "ks-setstate-task.yaml";
  std::ofstream(task_file) << "name: setstate\nreference:\n  module: " << (dir / "printing.pt").string()
                           << "\ninputs:\n  - {name: x, shape: [4]}\n";
  const std::string worker = (fs::path(KS_BINARY_DIR) / "bin" / "kernelskill-gpu").string();
  FILE* pipe = ::popen((worker + " --run-reference " + task_file.string() + " --on cpu 2>&1").c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = ::pclose(pipe);
  fs::remove(task_file);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK_THAT(out, Catch::Contains("__setstate__") && Catch::Contains("prim::Print"));
  CHECK_THAT(out, !Catch::Contains("SETSTATE-RAN"));

  // A __setstate__ that only computes loads, and ran: forward gives x * (1 * 2).
  auto program = load_program(with_module("computing.pt"));
  auto r = run_trial(*program);
  CHECK(excess(r.outputs[0], r.inputs[0] * 2.0, 0, 0) <= 0);
}

// gpu/reference_launcher: the process a confined worker forks to start its reference
// checks' children, each in a sandbox of its own. Real processes: the launcher, the
// kernelskill-gpu children it starts, a launcher killed for real.
namespace {

const std::string launcher_worker_binary = std::string(KS_BINARY_DIR) + "/bin/kernelskill-gpu";

process_limits launcher_limits() {
  process_limits l;
  l.cpu_seconds = 30;
  l.memory_mb = 4096;
  l.wall_seconds = 60;
  l.sandbox.mode = sandbox_mode::best_effort;
  return l;
}

task_spec launcher_swish(const std::string& name, const std::string& torchscript) {
  auto t = load_task(std::string(KS_SOURCE_DIR) + "/examples/tasks/swish.yaml");
  REQUIRE(t);
  t->name = name;
  t->torchscript = torchscript;
  return *t;
}

// A task whose reference is a saved module, as every imported KernelBench problem's is.
task_spec launcher_module_task(const fs::path& dir) {
  torch::jit::Module m("Scale");
  m.register_parameter("weight", at::arange(12, at::kFloat).reshape({4, 3}) / 10, false);
  m.define("def forward(self, x):\n    return torch.relu(torch.matmul(x, self.weight) - 1.0)\n");
  m.save((dir / "scale.pt").string());
  std::ofstream(dir / "scale.yaml") << "name: scale\nreference:\n  module: scale.pt\n"
                                       "inputs:\n  - {name: x, shape: [5, 4]}\nseed: 8\n";
  auto t = load_task(dir / "scale.yaml");
  REQUIRE(t);
  return *t;
}

}  // namespace

TEST_CASE("the reference launcher runs a reference in a sandboxed child, and nothing else",
          "[reference_launcher][limits]") {
  auto launcher = reference_launcher::start(launcher_worker_binary, launcher_limits());
  REQUIRE(launcher);

  SECTION("an inline reference and a saved module run and print their summaries") {
    auto ok = (*launcher)->run(launcher_swish("fine", "def forward(x):\n    return x * torch.sigmoid(x)\n"), "cpu",
                               "cpu", 60);
    INFO((ok ? ok->err : ok.message()));
    REQUIRE(ok);
    CHECK(ok->ok());
    const fs::path dir = fs::temp_directory_path() / ("ks-launcher-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto module = (*launcher)->run(launcher_module_task(dir), "", "cpu", 60);
    fs::remove_all(dir);
    INFO((module ? module->err : module.message()));
    REQUIRE(module);
    CHECK(module->ok());
  }
  SECTION("a request may lower the wall clock, never raise it") {
    const auto endless = launcher_swish("endless",
                                        "def forward(x):\n    y = x\n    for i in range(2000000000):\n"
                                        "        y = y * 1.0\n    return y\n");
    const auto t0 = std::chrono::steady_clock::now();
    auto r = (*launcher)->run(endless, "cpu", "cpu", 2);
    REQUIRE(r);
    CHECK_FALSE(r->ok());
    CHECK_THAT(r->limit, Catch::Contains("wall"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  }
  SECTION("a device that is not cpu or cuda:N is refused, and the launcher goes on") {
    auto r =
        (*launcher)->run(launcher_swish("fine", "def forward(x):\n    return x\n"), "cpu", "cpu; touch /tmp/owned", 60);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.message(), Catch::Contains("cpu or cuda:N"));
    CHECK_FALSE(fs::exists("/tmp/owned"));
    auto again = (*launcher)->run(launcher_swish("fine", "def forward(x):\n    return x\n"), "cpu", "cpu", 60);
    REQUIRE(again);
    CHECK(again->ok());
  }
}

namespace {

// Sends SIGKILL to this process's children named `name` (/proc/PID/comm); whether
// there was one.
bool kill_child_named(const std::string& name) {
  bool killed = false;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream comm(e.path() / "comm"), stat(e.path() / "stat");
    std::string comm_name, line;
    std::getline(comm, comm_name);
    std::getline(stat, line);
    if (comm_name != name) continue;
    // stat: pid (comm) state ppid ...
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid);
    if (ppid != ::getpid()) continue;
    ::kill(std::stoi(e.path().filename().string()), SIGKILL);
    killed = true;
  }
  return killed;
}

}  // namespace

TEST_CASE("a launcher that died answers with an error, not a hang", "[reference_launcher]") {
  auto launcher = reference_launcher::start(launcher_worker_binary, launcher_limits());
  REQUIRE(launcher);
  // Its process is the only child this test has started so far with that name. The
  // fork returns before the child names itself: under load (ctest -j) the first look
  // can come too early, so look again for up to 10 s.
  bool killed = false;
  for (int look = 0; look < 500 && !killed; ++look) {
    if (look) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    killed = kill_child_named("ks-reflaunch");
  }
  REQUIRE(killed);
  auto r = (*launcher)->run(launcher_swish("fine", "def forward(x):\n    return x\n"), "cpu", "cpu", 60);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.message(), Catch::Contains("gone"));
}
