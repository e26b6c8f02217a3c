// Runs the rules coder's candidates on the CPU (tests/kernel_emulator.hpp) at each
// task's `cpu` size and compares them with the LibTorch reference: the correctness
// check that needs no GPU. The GPU review (bench/rules_review.sh) stays the judge.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cstdlib>
#include <deque>
#include <filesystem>

#include "coder/rules_coder.hpp"
#include "gpu/library_ops.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"
#include "tests/kernel_emulator.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = KS_SOURCE_DIR;
const fs::path kWorker = fs::path(KS_BINARY_DIR) / "bin" / "kernelskill-gpu";
const fs::path kWork = fs::path(KS_BINARY_DIR) / "emulated-kernels";

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

// Runs `c` at the task's cpu size on the inputs of trial 0; returns the outputs.
result<std::vector<at::Tensor>> run_candidate(const task_spec& sized, const candidate& c,
                                              const std::vector<at::Tensor>& inputs,
                                              const std::vector<at::Tensor>& params) {
  auto ctx = make_plan_context(sized, c.source);
  if (!ctx) return ctx.error();
  auto plan = resolve_plan(c.plan, *ctx);
  if (!plan) return plan.error();
  auto module = test::emulated_module::build(c.source, kWork);
  if (!module) return module.error();
  std::map<std::string, at::Tensor> t;
  for (size_t i = 0; i < sized.inputs.size(); ++i) t[sized.inputs[i].name] = inputs[i].clone();
  for (size_t i = 0; i < sized.parameters.size(); ++i) t[sized.parameters[i].name] = params[i].clone();
  auto make = [&](const resolved_buffer& b) {
    t[b.name] = b.init == "zeros" ? at::zeros(b.shape, at::kFloat) : at::full(b.shape, NAN, at::kFloat);
  };
  for (auto& b : plan->outputs) make(b);
  for (auto& b : plan->scratch) make(b);
  for (const resolved_step& s : plan->steps) {
    if (s.kind == "library") {
      std::vector<library_arg> args;
      for (auto& a : s.args) {
        if (a.kind == "tensor") args.push_back(library_arg::of(t.at(a.tensor)));
        else if (a.kind == "int") args.push_back(library_arg::of_int(a.int_value));
        else args.push_back(library_arg::of_float(a.float_value));
      }
      auto r = run_library_op(s.name, args, s.attrs);
      if (!r) return r.error();
      const std::string& out = s.outputs.at(0);
      if (t.count(out)) t[out].copy_(*r);
      else t[out] = r->contiguous();
      continue;
    }
    std::deque<int64_t> ints;
    std::deque<int32_t> int32s;
    std::deque<float> floats;
    std::deque<void*> ptrs;
    std::vector<void*> args;
    for (auto& a : s.args) {
      if (a.kind == "tensor") {
        ptrs.push_back(t.at(a.tensor).data_ptr());
        args.push_back(&ptrs.back());
      } else if (a.kind == "int" && a.type == "int64") {
        ints.push_back(a.int_value);
        args.push_back(&ints.back());
      } else if (a.kind == "int") {
        int32s.push_back(static_cast<int32_t>(a.int_value));
        args.push_back(&int32s.back());
      } else {
        floats.push_back(static_cast<float>(a.float_value));
        args.push_back(&floats.back());
      }
    }
    if (auto st = (*module)->launch(s.name, s.grid, s.block, args); !st) return error{st.message()};
  }
  std::vector<at::Tensor> outs;
  for (auto& b : plan->outputs) outs.push_back(t.at(b.name));
  return outs;
}

void check_task(const fs::path& path, uint32_t seeds) {
  auto task = load_task(path);
  REQUIRE(task);
  auto sized = with_size(*task, "cpu");
  REQUIRE(sized);
  INFO(task->name);
  auto cands = the_coder().seeds(*task, seeds);
  if (!cands) FAIL(cands.message());
  auto prog = reference_program::load(*sized);
  REQUIRE(prog);
  auto inputs = make_inputs(*sized, trial_seed(sized->seed, 0), c10::Device(c10::kCPU));
  REQUIRE(inputs);
  auto ref = run_tensors(**prog, *inputs);
  REQUIRE(ref);
  const auto& params = parameter_tensors(**prog);
  for (const candidate& c : *cands) {
    INFO(c.origin << " " << c.recipe.at("stages") << " row_mapping=" << c.recipe.at("row_mapping")
                  << " vector_width=" << c.recipe.at("vector_width"));
    auto outs = run_candidate(*sized, c, *inputs, params);
    if (!outs) FAIL(outs.message());
    REQUIRE(outs->size() == ref->size());
    for (size_t i = 0; i < outs->size(); ++i) {
      at::Tensor want = (*ref)[i].to(at::kFloat).contiguous(), got = (*outs)[i];
      REQUIRE(want.sizes() == got.sizes());
      double err = (got - want).abs().max().item<double>();
      bool ok = at::allclose(got, want, sized->tolerance.rtol, sized->tolerance.atol);
      INFO("output " << i << ": max abs error " << err);
      CHECK(ok);
    }
  }
}

std::vector<fs::path> task_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(kSource / dir))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("emulated: example tasks' seeds match the reference", "[rules][emulated]") {
  for (auto& p : task_files("examples/tasks")) check_task(p, std::getenv("KS_EMULATE_ALL_SEEDS") ? 5 : 3);
}

// The suite in four parts (ctest bounds each test case's time); two seeds per task
// (a block and a warp per row, float4 and two vectors per trip), all five with
// KS_EMULATE_ALL_SEEDS=1. Compiled kernels are cached in <build>/emulated-kernels.
void check_suite_part(int part) {
  auto files = task_files("bench/tasks");
  const uint32_t seeds = std::getenv("KS_EMULATE_ALL_SEEDS") ? 5 : 2;
  // KS_EMULATE_TASKS=a,b: only those tasks (when working on a template).
  const char* only = std::getenv("KS_EMULATE_TASKS");
  for (size_t i = 0; i < files.size(); ++i) {
    if (static_cast<int>(i % 4) != part) continue;
    if (only && ("," + std::string(only) + ",").find("," + files[i].stem().string() + ",") == std::string::npos) continue;
    check_task(files[i], seeds);
  }
}

TEST_CASE("emulated: the suite's seeds match the reference (1/4)", "[rules][emulated][suite]") { check_suite_part(0); }
TEST_CASE("emulated: the suite's seeds match the reference (2/4)", "[rules][emulated][suite]") { check_suite_part(1); }
TEST_CASE("emulated: the suite's seeds match the reference (3/4)", "[rules][emulated][suite]") { check_suite_part(2); }
TEST_CASE("emulated: the suite's seeds match the reference (4/4)", "[rules][emulated][suite]") { check_suite_part(3); }
