// The kernels the replaying model server (ks-scripted-llm) answers with are correct:
// each one, with its launch plan, runs on the CPU (tests/support/kernel_emulator.hpp) at its
// task's `cpu` size and matches the reference computed here in double precision, within
// the task's tolerance. So the loop that runs on them (tests/llm_loop_test.cpp) runs on
// kernels that a GPU review would pass too — bench/agent/llm_loop.sh runs them there.
// The softmax example (examples/plans/softmax_rows) keeps its row in dynamic shared
// memory, which the emulator does not model; the GPU review checks it.

#include <catch2/catch.hpp>

#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "plan/launch_plan_yaml.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"
#include "tests/support/kernel_emulator.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kSource = KS_SOURCE_DIR;
const fs::path kWork = fs::path(KS_BINARY_DIR) / "emulated-kernels";

std::string read(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using reference_fn = std::function<std::vector<double>(const std::vector<float>& x, const std::vector<int64_t>& shape)>;

std::vector<double> pointwise(const std::vector<float>& x, double (*f)(double)) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

double relu(double v) { return v < 0 ? 0 : v; }
double swish(double v) { return v / (1 + std::exp(-v)); }
double gelu(double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }

// Runs `stem` (.cu and .yaml) for `task_file` at its cpu size on inputs drawn as the
// task says (normal or uniform), and compares output 0 with `ref`.
void check_reply(const fs::path& task_file, const fs::path& stem, const reference_fn& ref) {
  INFO("task " << task_file.filename().string() << ", reply " << stem.filename().string());
  auto task = ks::load_task(task_file);
  REQUIRE(task.ok());
  REQUIRE(task->inputs.size() == 1);
  const std::string source = read(stem.string() + ".cu");
  auto plan = ks::parse_launch_plan(read(stem.string() + ".yaml"));
  INFO((plan ? std::string() : plan.message()));
  REQUIRE(plan.ok());
  auto ctx = ks::make_plan_context(*task, source, "cpu");
  INFO((ctx ? std::string() : ctx.message()));
  REQUIRE(ctx.ok());
  auto resolved = ks::resolve_plan(*plan, *ctx);
  INFO((resolved ? std::string() : resolved.message()));
  REQUIRE(resolved.ok());
  auto module = ks::test::emulated_module::build(source, kWork);
  INFO((module ? std::string() : module.message()));
  REQUIRE(module.ok());

  const std::vector<int64_t> shape = task->sizes.at("cpu").at(task->inputs[0].name);
  int64_t n = 1;
  for (auto d : shape) n *= d;
  // n + 3 floats: a plan that reads past the input shows as NaN in the result.
  std::vector<float> x(n + 3, NAN);
  std::mt19937 rng(task->seed);
  const auto& init = task->inputs[0].init;
  std::normal_distribution<float> normal(static_cast<float>(init.mean), static_cast<float>(init.std));
  std::uniform_real_distribution<float> uniform(static_cast<float>(init.low), static_cast<float>(init.high));
  for (int64_t i = 0; i < n; ++i) x[i] = init.kind == "uniform" ? uniform(rng) : normal(rng);

  std::map<std::string, std::vector<float>> buffers;
  for (const auto& b : resolved->outputs) buffers[b.name].assign(b.numel(), NAN);  // outputs start as garbage
  for (const auto& s : resolved->steps) {
    REQUIRE(s.kind == "kernel");
    std::deque<int64_t> ints;
    std::deque<int32_t> int32s;
    std::deque<void*> ptrs;
    std::vector<void*> args;
    for (const auto& a : s.args) {
      if (a.kind == "tensor") {
        ptrs.push_back(a.tensor == task->inputs[0].name ? x.data() : buffers.at(a.tensor).data());
        args.push_back(&ptrs.back());
      } else if (a.type == "int64") {
        ints.push_back(a.int_value);
        args.push_back(&ints.back());
      } else {
        int32s.push_back(static_cast<int32_t>(a.int_value));
        args.push_back(&int32s.back());
      }
    }
    auto st = (*module)->launch(s.name, s.grid, s.block, s.shared_mem_bytes, args);
    INFO(st.message());
    REQUIRE(st.ok());
  }
  const std::vector<float> xs(x.begin(), x.begin() + n);
  const std::vector<double> want = ref(xs, shape);
  const std::vector<float>& got = buffers.at(resolved->outputs.at(0).name);
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= task->tolerance.atol + task->tolerance.rtol * std::fabs(want[i]))) {
      if (bad++ < 3) UNSCOPED_INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("the replaying server's elementwise kernels match the reference", "[llm][replies][emulated]") {
  const fs::path replies = kSource / "tests" / "data" / "llm_replies";
  const fs::path examples = kSource / "examples";
  auto relu_ref = [](const std::vector<float>& x, const std::vector<int64_t>&) { return pointwise(x, relu); };
  auto swish_ref = [](const std::vector<float>& x, const std::vector<int64_t>&) { return pointwise(x, swish); };
  check_reply(kSource / "bench" / "suites" / "ops" / "relu.yaml", examples / "plans" / "relu", relu_ref);
  check_reply(kSource / "bench" / "suites" / "ops" / "relu.yaml", replies / "relu.vectorize_loads", relu_ref);
  check_reply(examples / "tasks" / "swish.yaml", replies / "swish", swish_ref);
  check_reply(examples / "tasks" / "swish.yaml", replies / "swish.vectorize_loads", swish_ref);
  check_reply(examples / "tasks" / "gelu.yaml", examples / "plans" / "gelu_vec4",
              [](const std::vector<float>& x, const std::vector<int64_t>&) { return pointwise(x, gelu); });
}

TEST_CASE("the replaying server's row sums match the reference", "[llm][replies][emulated]") {
  const fs::path replies = kSource / "tests" / "data" / "llm_replies";
  auto row_sum = [](const std::vector<float>& x, const std::vector<int64_t>& shape) {
    const int64_t cols = shape.back(), rows = static_cast<int64_t>(x.size()) / cols;
    std::vector<double> y(rows, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) y[r] += x[r * cols + c];
    return y;
  };
  check_reply(kSource / "examples" / "tasks" / "row_sum.yaml", replies / "row_sum", row_sum);
  check_reply(kSource / "examples" / "tasks" / "row_sum.yaml", replies / "row_sum.multiple_accumulators", row_sum);
}
