// Where a task's inputs are drawn (gpu/torch_reference.hpp, input_draw; docs/reviewer.md,
// "Where inputs are drawn"). On the CPU, a device draw is exactly the CPU draw of today.
// On a GPU ([gpu] cases): device draws are on the device, the same in every call and in
// another process, different between trials, with the moments and ranges of their
// distributions (both trial distributions); input programs run on the device from its
// seeded generator; and the cpu option still gives the CPU's values bit for bit.
#include "tests/support/catch_torch.hpp"
#include "tests/support/gpu_skip.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include <unistd.h>

#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <torch/cuda.h>

#include "gpu/reviewer.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "task/task_loader.hpp"

namespace fs = std::filesystem;
using namespace ks;

namespace {

const c10::Device kCpu(c10::kCPU);
const c10::Device kCuda(c10::kCUDA, 0);

// Every init kind and dtype, with sizes large enough that a CUDA draw needs more than
// one pass of its grid-stride loop on a large GPU (more than 132 SMs x 2048 threads x 4).
task_spec every_kind() {
  task_spec t;
  t.name = "draws";
  t.torchscript = "def forward(n, u, r, b, c, a, z, o, k, d, h, w):\n    return n\n";
  t.inputs = {
      {"n", {2048, 1024}, "float32", {.kind = "normal", .mean = 3, .std = 2}},
      {"u", {1000, 1000}, "float16", {.kind = "uniform", .low = -2, .high = -1}},
      {"r", {100000}, "int32", {.kind = "randint", .low = -3, .high = 4}},
      {"b", {1000}, "bool", {.kind = "randint", .low = 0, .high = 2}},
      {"c", {2, 3}, "bfloat16", {.kind = "constant", .value = 1.5}},
      {"a", {2, 3}, "int64", {.kind = "arange"}},
      {"z", {4}, "float64", {.kind = "zeros"}},
      {"o", {}, "float32", {.kind = "ones"}},
      {"k", {16, 64}, "float32", {.kind = "kaiming_uniform"}},
      {"d", {300000}, "float64", {.kind = "normal", .mean = -1, .std = 0.5}},
      {"h", {513, 517}, "bfloat16", {.kind = "uniform", .low = 0, .high = 10}},
  };
  t.parameters = {{"w", {256, 300}, "float32", {.kind = "uniform", .low = -0.5, .high = 0.5}}};
  t.seed = 77;
  return t;
}

bool is_random(const tensor_spec& s) {
  return s.init.kind == "normal" || s.init.kind == "uniform" || s.init.kind == "randint" ||
         s.init.kind == "kaiming_uniform";
}

// A task whose inputs an input_program makes (as KernelBench's get_inputs would).
task_spec program_task() {
  task_spec t;
  t.name = "program";
  t.torchscript = "def forward(a, s):\n    return a * s\n";
  t.inputs = {{"a", {300, 1000}, "float32", {.kind = "program"}}, {"s", {1000}, "float32", {.kind = "program"}}};
  t.input_program =
      "def inputs(device: Device) -> List[Tensor]:\n"
      "    a = torch.rand([300, 1000], device=device)\n"
      "    return [a, torch.randn([1000], device=device) * 2.0]\n";
  t.seed = 5;
  return t;
}

std::vector<at::Tensor> draw(const task_spec& task, uint64_t seed, const c10::Device& device, input_draw how) {
  auto made = make_inputs(task, seed, device, how);
  INFO((made.ok() ? "" : made.message()));
  REQUIRE(made.ok());
  return std::move(made.value());
}

void check_all_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << i);
    CHECK(a[i].scalar_type() == b[i].scalar_type());
    CHECK(at::equal(a[i].cpu(), b[i].cpu()));
  }
}

std::unique_ptr<reference_program> program_on(const task_spec& task, const std::string& device, input_draw how) {
  reference_options o;
  o.device = device;
  o.threads = 2;
  o.draw = how;
  auto p = reference_program::load(task, o);
  INFO((p.ok() ? "" : p.message()));
  REQUIRE(p.ok());
  return std::move(p.value());
}

double mean_of(const at::Tensor& t) { return t.to(at::kDouble).mean().item<double>(); }
double std_of(const at::Tensor& t) { return t.to(at::kDouble).std().item<double>(); }
double min_of(const at::Tensor& t) { return t.to(at::kDouble).min().item<double>(); }
double max_of(const at::Tensor& t) { return t.to(at::kDouble).max().item<double>(); }

// The bytes of every tensor, in order, as the CPU sees them.
std::string bytes_of(const std::vector<at::Tensor>& ts) {
  std::string out;
  for (const auto& t : ts) {
    at::Tensor c = t.cpu().contiguous();
    out.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
  }
  return out;
}

// What one process draws on the device: two trials of every kind (the second on the
// second distribution), a program's parameters and an input program's inputs.
std::string device_draws() {
  const task_spec t = every_kind();
  std::string out = bytes_of(draw(t, trial_seed(t.seed, 0), kCuda, input_draw::device));
  out += bytes_of(draw(trial_task(t, 1), trial_seed(t.seed, 1), kCuda, input_draw::device));
  out += bytes_of(parameter_tensors(*program_on(t, "cuda", input_draw::device)));
  const task_spec p = program_task();
  out += bytes_of(draw(p, trial_seed(p.seed, 0), kCuda, input_draw::device));
  return out;
}

#define REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) KS_SKIP("LibTorch sees no CUDA device here; these cases run on the GPU machine")

}  // namespace

TEST_CASE("input_draw: the names device and cpu, and a clear error for others", "[draw]") {
  CHECK(std::string(to_string(input_draw::device)) == "device");
  CHECK(std::string(to_string(input_draw::cpu)) == "cpu");
  CHECK(*parse_input_draw("device") == input_draw::device);
  CHECK(*parse_input_draw("cpu") == input_draw::cpu);
  auto bad = parse_input_draw("gpu");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::StartsWith("\"gpu\": expected device") && Catch::Contains("or cpu"));
  CHECK(reference_options{}.draw == input_draw::cpu);
  CHECK(review_options{}.draw_inputs == "device");
}

TEST_CASE("a device draw on the CPU is the CPU draw: inputs, parameters, input programs", "[draw]") {
  const task_spec t = every_kind();
  for (uint32_t trial : {0u, 1u, 3u}) {
    INFO("trial " << trial);
    const task_spec tt = trial_task(t, trial);
    check_all_equal(draw(tt, trial_seed(t.seed, trial), kCpu, input_draw::device),
                    draw(tt, trial_seed(t.seed, trial), kCpu, input_draw::cpu));
  }
  auto pd = make_parameters(t, kCpu, input_draw::device);
  auto pc = make_parameters(t, kCpu, input_draw::cpu);
  REQUIRE((pd.ok() && pc.ok()));
  check_all_equal(*pd, *pc);
  auto by_device = program_on(t, "cpu", input_draw::device);
  auto by_cpu = program_on(t, "cpu", input_draw::cpu);
  CHECK(by_device->draw() == input_draw::device);
  check_all_equal(parameter_tensors(*by_device), parameter_tensors(*by_cpu));
  auto r1 = by_device->run(trial_seed(t.seed, 2));
  auto r2 = by_cpu->run(trial_seed(t.seed, 2));
  REQUIRE((r1.ok() && r2.ok()));
  CHECK(r1->outputs[0].sum == r2->outputs[0].sum);

  const task_spec p = program_task();
  check_all_equal(draw(p, 9, kCpu, input_draw::device), draw(p, 9, kCpu, input_draw::cpu));
}

TEST_CASE("gpu: device draws are on the device, the same in every call, different between trials", "[draw][gpu]") {
  REQUIRE_CUDA();
  const task_spec t = every_kind();
  const uint64_t s0 = trial_seed(t.seed, 0), s2 = trial_seed(t.seed, 2);
  auto a = draw(t, s0, kCuda, input_draw::device);
  for (const auto& x : a) CHECK(x.is_cuda());
  // Draws of other seeds and of the device's default generator in between change nothing.
  auto other = draw(t, s2, kCuda, input_draw::device);
  (void)at::randn({4096}, at::TensorOptions().device(kCuda));
  auto again = draw(t, s0, kCuda, input_draw::device);
  check_all_equal(a, again);

  for (size_t i = 0; i < t.inputs.size(); ++i) {
    INFO(t.inputs[i].name << " (" << t.inputs[i].init.kind << ")");
    if (is_random(t.inputs[i]))
      CHECK_FALSE(at::equal(a[i].cpu(), other[i].cpu()));
    else
      CHECK(at::equal(a[i].cpu(), other[i].cpu()));
  }

  // Each tensor has a generator state of its own: another shape of n leaves u's values.
  task_spec reshaped = t;
  reshaped.inputs[0].shape = {77, 13};
  auto b = draw(reshaped, s0, kCuda, input_draw::device);
  for (size_t i = 1; i < t.inputs.size(); ++i) CHECK(at::equal(a[i].cpu(), b[i].cpu()));

  // The values are the device's own, not the CPU's.
  auto on_cpu = draw(t, s0, kCpu, input_draw::cpu);
  CHECK_FALSE(at::equal(a[0].cpu(), on_cpu[0]));

  // Two programs of the task draw the same parameters on the device; another task seed
  // other ones.
  auto p1 = program_on(t, "cuda", input_draw::device);
  auto p2 = program_on(t, "cuda", input_draw::device);
  REQUIRE(parameter_tensors(*p1)[0].is_cuda());
  check_all_equal(parameter_tensors(*p1), parameter_tensors(*p2));
  task_spec reseeded = t;
  reseeded.seed += 1;
  CHECK_FALSE(at::equal(parameter_tensors(*p1)[0].cpu(),
                        parameter_tensors(*program_on(reseeded, "cuda", input_draw::device))[0].cpu()));
  auto r1 = p1->run(s2);
  auto r2 = p2->run(s2);
  REQUIRE((r1.ok() && r2.ok()));
  CHECK(r1->outputs[0].sum == r2->outputs[0].sum);
  std::printf("device draw of %zu tensors: %.2f ms\n", t.inputs.size(), r1->inputs_ms);
}

TEST_CASE("gpu: device draws follow their distributions, in both trial distributions", "[draw][gpu]") {
  REQUIRE_CUDA();
  const task_spec t = every_kind();
  auto x = draw(t, trial_seed(t.seed, 0), kCuda, input_draw::device);
  CHECK(x[0].scalar_type() == at::kFloat);
  CHECK(mean_of(x[0]) == Approx(3).margin(0.01));
  CHECK(std_of(x[0]) == Approx(2).margin(0.01));
  CHECK(x[1].scalar_type() == at::kHalf);
  CHECK(min_of(x[1]) >= -2);
  CHECK(max_of(x[1]) <= -1);
  CHECK(min_of(x[1]) < -1.99);
  CHECK(max_of(x[1]) > -1.01);
  CHECK(mean_of(x[1]) == Approx(-1.5).margin(0.01));
  CHECK(x[2].scalar_type() == at::kInt);
  CHECK(min_of(x[2]) == -3);
  CHECK(max_of(x[2]) == 3);  // high is exclusive
  auto counts = at::bincount((x[2].to(at::kLong) + 3).cpu());
  REQUIRE(counts.numel() == 7);
  for (int v = 0; v < 7; ++v) CHECK(counts[v].item<int64_t>() == Approx(100000 / 7.0).epsilon(0.05));
  CHECK(x[3].scalar_type() == at::kBool);
  CHECK(x[3].sum().item<int64_t>() > 400);
  CHECK(x[3].sum().item<int64_t>() < 600);
  CHECK(x[4].scalar_type() == at::kBFloat16);
  CHECK(x[4].eq(1.5).all().item<bool>());
  CHECK(at::equal(x[5].cpu(), at::arange(6, at::kLong).reshape({2, 3})));
  CHECK(x[6].scalar_type() == at::kDouble);
  CHECK(x[6].eq(0).all().item<bool>());
  CHECK(x[7].dim() == 0);
  CHECK(x[7].item<double>() == 1);
  CHECK(max_of(x[8].abs()) <= 1 / 8.0);  // kaiming_uniform, fan_in 64
  CHECK(max_of(x[8].abs()) > 0.1);
  CHECK(x[9].scalar_type() == at::kDouble);
  CHECK(mean_of(x[9]) == Approx(-1).margin(0.01));
  CHECK(std_of(x[9]) == Approx(0.5).margin(0.01));
  CHECK(x[10].scalar_type() == at::kBFloat16);
  CHECK(min_of(x[10]) >= 0);
  CHECK(max_of(x[10]) <= 10);
  CHECK(mean_of(x[10]) == Approx(5).margin(0.05));

  // Trial 1: normal(m, 4s) and the lowest quarter of a uniform; trial 3: uniform(m ± 3s)
  // and the highest quarter. Integers and structural inits do not change.
  auto t1 = draw(trial_task(t, 1), trial_seed(t.seed, 1), kCuda, input_draw::device);
  CHECK(std_of(t1[0]) == Approx(8).margin(0.04));
  CHECK(mean_of(t1[0]) == Approx(3).margin(0.04));
  CHECK(min_of(t1[1]) >= -2);
  CHECK(max_of(t1[1]) <= -1.75);
  CHECK(std_of(t1[9]) == Approx(2).margin(0.04));
  CHECK(min_of(t1[2]) == -3);
  CHECK(max_of(t1[2]) == 3);
  auto t3 = draw(trial_task(t, 3), trial_seed(t.seed, 3), kCuda, input_draw::device);
  CHECK(min_of(t3[0]) >= 3 - 6);
  CHECK(max_of(t3[0]) <= 3 + 6);
  CHECK(mean_of(t3[0]) == Approx(3).margin(0.02));
  CHECK(min_of(t3[1]) >= -1.25);
  CHECK(max_of(t3[1]) <= -1);
  CHECK(min_of(t3[10]) >= 7.5);
}

TEST_CASE("gpu: an input program runs on the device from its seeded generator", "[draw][gpu]") {
  REQUIRE_CUDA();
  const task_spec p = program_task();
  auto a = draw(p, 11, kCuda, input_draw::device);
  REQUIRE(a.size() == 2);
  CHECK(a[0].is_cuda());
  CHECK(a[1].is_cuda());
  (void)at::rand({1000}, at::TensorOptions().device(kCuda));
  (void)at::rand({1000});
  check_all_equal(a, draw(p, 11, kCuda, input_draw::device));
  auto other = draw(p, 12, kCuda, input_draw::device);
  CHECK_FALSE(at::equal(a[0].cpu(), other[0].cpu()));
  CHECK_FALSE(at::equal(a[1].cpu(), other[1].cpu()));
  CHECK(min_of(a[0]) >= 0);
  CHECK(max_of(a[0]) <= 1);
  CHECK(mean_of(a[0]) == Approx(0.5).margin(0.01));
  CHECK(std_of(a[1]) == Approx(2).margin(0.3));

  // Exactly what the program's ops give on the device from its default generator seeded
  // with the trial's seed: it ran there, not on the CPU.
  at::Generator gen = at::globalContext().defaultGenerator(kCuda);
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(11);
  }
  auto opts = at::TensorOptions().device(kCuda);
  at::Tensor want_a = at::rand({300, 1000}, opts);
  at::Tensor want_s = at::randn({1000}, opts) * 2.0;
  CHECK(at::equal(a[0], want_a));
  CHECK(at::equal(a[1], want_s));

  // The cpu option runs it on the CPU and copies: today's values, bit for bit.
  auto c = draw(p, 11, kCuda, input_draw::cpu);
  CHECK(c[0].is_cuda());
  check_all_equal(c, draw(p, 11, kCpu, input_draw::cpu));
  CHECK_FALSE(at::equal(c[0].cpu(), a[0].cpu()));
}

TEST_CASE("gpu: the cpu option gives exactly the CPU's values on the device", "[draw][gpu]") {
  REQUIRE_CUDA();
  const task_spec t = every_kind();
  for (uint32_t trial : {0u, 1u, 3u}) {
    INFO("trial " << trial);
    const task_spec tt = trial_task(t, trial);
    auto on_gpu = draw(tt, trial_seed(t.seed, trial), kCuda, input_draw::cpu);
    for (const auto& x : on_gpu) CHECK(x.is_cuda());
    check_all_equal(on_gpu, draw(tt, trial_seed(t.seed, trial), kCpu, input_draw::cpu));
  }
  auto gpu_program = program_on(t, "cuda", input_draw::cpu);
  CHECK(parameter_tensors(*gpu_program)[0].is_cuda());
  check_all_equal(parameter_tensors(*gpu_program), parameter_tensors(*program_on(t, "cpu", input_draw::cpu)));
}

// Run by the next case in a child process (hidden: ctest does not run it alone). Writes
// the bytes of device_draws() to $KS_DRAW_CHILD_OUT.
TEST_CASE("device draws of a child process", "[.][draw_child]") {
  const char* path = std::getenv("KS_DRAW_CHILD_OUT");
  if (!path) {
    WARN("run by \"gpu: device draws are the same in another process\" only");
    return;
  }
  REQUIRE(torch::cuda::is_available());
  std::ofstream(path, std::ios::binary) << device_draws();
}

TEST_CASE("gpu: device draws are the same in another process", "[draw][gpu]") {
  REQUIRE_CUDA();
  const std::string here = device_draws();
  CHECK(here.size() > 10'000'000);
  CHECK(device_draws() == here);
  const fs::path out = fs::temp_directory_path() / ("ks_input_draw_child_" + std::to_string(::getpid()));
  fs::remove(out);
  ::setenv("KS_DRAW_CHILD_OUT", out.c_str(), 1);
  const std::string child = "'" + fs::read_symlink("/proc/self/exe").string() + "' '[draw_child]' >/dev/null 2>&1";
  const int rc = std::system(child.c_str());
  ::unsetenv("KS_DRAW_CHILD_OUT");
  REQUIRE(rc == 0);
  std::ifstream in(out, std::ios::binary);
  const std::string there((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(out);
  CHECK(there.size() == here.size());
  CHECK(there == here);
}
