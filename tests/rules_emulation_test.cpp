// Runs the rules coder's candidates on the CPU (tests/support/kernel_emulator.hpp) at each
// task's `cpu` size and compares them with the LibTorch reference: the correctness
// check that needs no GPU. The GPU review (bench/ops/review_seeds.sh) stays the judge.
#include "tests/support/catch_torch.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <tuple>

#include "coder/rules_coder.hpp"
#include "gpu/graph_export.hpp"
#include "gpu/library_ops.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "importer/kernelbench_import.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"
#include "tests/support/cpu_plan_runner.hpp"
#include "tests/support/kernel_emulator.hpp"

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
  return test::run_candidate_on_cpu(sized, c, inputs, params, kWork);
}

// Runs `cands` (candidates for `task`) at its cpu size against the reference. With
// nan_positions, a NaN passes where (and only where) the reference has one, as the
// reviewer's check (gpu/output_check) takes it; infinities must match exactly.
void check_candidates(const task_spec& task, const std::vector<candidate>& cands_, bool nan_positions = false) {
  const std::vector<candidate>* cands = &cands_;
  auto sized = task.sizes.count("cpu") ? with_size(task, "cpu") : result<task_spec>(task);
  REQUIRE(sized);
  INFO(task.name);
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
      at::Tensor want = (*ref)[i].to(at::kFloat).contiguous(), got = (*outs)[i].to(at::kFloat);
      REQUIRE(want.sizes() == got.sizes());
      double err = (got - want).abs().max().item<double>();
      bool ok = at::allclose(got, want, sized->tolerance.rtol, sized->tolerance.atol, nan_positions);
      INFO("output " << i << ": max abs error " << err);
      CHECK(ok);
      if (nan_positions) CHECK(at::equal(got.isnan(), want.isnan()));
    }
  }
}

void check_task(const result<task_spec>& task, uint32_t seeds, bool nan_positions = false) {
  REQUIRE(task);
  INFO(task->name);
  auto cands = the_coder().seeds(*task, seeds);
  if (!cands) FAIL(cands.message());
  check_candidates(*task, *cands, nan_positions);
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
  for (auto& p : task_files("examples/tasks")) check_task(load_task(p), std::getenv("KS_EMULATE_ALL_SEEDS") ? 5 : 3);
}

// The suite in four parts (ctest bounds each test case's time); two seeds per task
// (a block and a warp per row, float4 and two vectors per trip), all five with
// KS_EMULATE_ALL_SEEDS=1. Compiled kernels are cached in <build>/emulated-kernels.
void check_suite_part(int part) {
  auto files = task_files("bench/suites/ops");
  const uint32_t seeds = std::getenv("KS_EMULATE_ALL_SEEDS") ? 5 : 2;
  // KS_EMULATE_TASKS=a,b: only those tasks (when working on a template).
  const char* only = std::getenv("KS_EMULATE_TASKS");
  for (size_t i = 0; i < files.size(); ++i) {
    if (static_cast<int>(i % 4) != part) continue;
    if (only && ("," + std::string(only) + ",").find("," + files[i].stem().string() + ",") == std::string::npos)
      continue;
    check_task(load_task(files[i]), seeds);
  }
}

TEST_CASE("emulated: the suite's seeds match the reference (1/4)", "[rules][emulated][suite]") { check_suite_part(0); }
TEST_CASE("emulated: the suite's seeds match the reference (2/4)", "[rules][emulated][suite]") { check_suite_part(1); }
TEST_CASE("emulated: the suite's seeds match the reference (3/4)", "[rules][emulated][suite]") { check_suite_part(2); }
TEST_CASE("emulated: the suite's seeds match the reference (4/4)", "[rules][emulated][suite]") { check_suite_part(3); }

// A task whose reference is `return BODY` over ARGS, with the tensors TENSORS (the task's
// YAML for inputs and parameters), and its two seeds; the test fails where either fails.
std::pair<task_spec, std::vector<candidate>> script_seeds(const std::string& name, const std::string& args,
                                                          const std::string& body, const std::string& tensors) {
  const std::string yaml = "name: " + name + "\nreference:\n  torchscript: |\n    def forward(" + args +
                           "):\n        return " + body + "\n" + tensors + "seed: 3\n";
  auto t = parse_task(yaml, name + ".yaml", kSource);
  if (!t) FAIL(t.message());
  auto cands = the_coder().seeds(*t, 2);
  if (!cands) FAIL(cands.message());
  return {*t, *cands};
}

// Ops no template takes run as library steps (ATen through its schema, here on the
// CPU) between fused kernels; rules_coder_test checks the plans' shape.
result<task_spec> fallback_task(const std::string& name, const std::string& body) {
  auto t = load_task(kSource / "examples/tasks/gelu.yaml");
  if (!t) return t;
  t->name = name;
  t->torchscript = "def forward(x):\n" + body;
  return t;
}

TEST_CASE("emulated: library-step fallbacks between fused kernels match the reference", "[rules][emulated][fallback]") {
  const std::pair<const char*, const char*> tasks[] = {
      {"fallback_erfinv", "    return torch.erfinv(torch.tanh(x) * 0.5) * 2.0 + 1.0\n"},
      {"fallback_sort", "    v, i = torch.sort(x * 2.0, 1)\n    return torch.relu(v) + 1.0\n"},
      {"fallback_topk", "    v, i = torch.topk(x, 5, 1)\n    return torch.sigmoid(v) * 3.0\n"},
      {"fallback_flip", "    return torch.softmax(torch.flip(x, [1]) * 0.5, dim=1)\n"},
      {"fallback_mask", "    return x * (x > 0.5).float() + 1.0\n"},
      {"fallback_cat", "    return torch.cat([torch.relu(x), x * 2.0], dim=1) - 1.0\n"},
      // Indices returned as they are: an int64 output of the plan.
      {"fallback_argsort", "    v, i = torch.sort(x, 1)\n    return v * 2.0, i\n"},
  };
  for (auto& [name, body] : tasks) {
    INFO(name);
    check_task(fallback_task(name, body), 1);
  }
}

// Losses ATen computes in one call are written out (coder/rules/passes/composites.hpp) and
// run as one fused reduction with its prologue, not as a library step; every
// reduction mode and the edge b = 0 (smooth L1 is then L1).
TEST_CASE("emulated: pointwise losses run as fused reductions and match the reference", "[rules][emulated][losses]") {
  const std::pair<const char*, const char*> losses[] = {
      {"loss_smooth_l1_mean", "torch.smooth_l1_loss(a, b, 1, 0.5)"},
      {"loss_smooth_l1_beta0", "torch.smooth_l1_loss(a, b, 1, 0.0)"},
      {"loss_huber_sum", "torch.huber_loss(a, b, 2, 2.0)"},
      {"loss_mse_sum", "torch.mse_loss(a, b, 2)"},
      {"loss_l1_none", "torch.l1_loss(a, b, 0) * 2.0"},
      {"loss_huber_none", "torch.huber_loss(a, b, 0, 0.25)"},
      // KL divergence as KernelBench writes it: log-probabilities against probabilities.
      {"loss_kl_div_mean", "torch.kl_div(torch.log_softmax(a, 1), torch.softmax(b, 1), 1, log_target=False)"},
      {"loss_kl_div_log_target_sum",
       "torch.kl_div(torch.log_softmax(a, 1), torch.log_softmax(b, 1), 2, log_target=True)"},
  };
  for (auto& [name, expr] : losses) {
    INFO(name);
    auto t = load_task(kSource / "bench/suites/ops/mse_loss.yaml");
    REQUIRE(t);
    t->name = name;
    t->torchscript = std::string("def forward(a, b):\n    return ") + expr + "\n";
    auto cands = the_coder().seeds(*t, 2);
    if (!cands) FAIL(cands.message());
    for (const auto& c : *cands) CHECK_THAT(c.recipe.at("stages"), !Catch::Contains("fallback"));
    check_candidates(*t, *cands);
  }
}

// The triplet margin loss written out (composites.hpp): the distances as row norms
// over the last dim with the difference and eps fused into their loads, the hinge and
// the reduction after them; p 1 and 2, swap, every reduction mode, 2-d and 3-d inputs.
TEST_CASE("emulated: the triplet margin loss runs as row norms and a reduction and matches the reference",
          "[rules][emulated][losses][triplet]") {
  struct triplet_case {
    const char* name;
    const char* expr;
    std::vector<int64_t> shape;
  };
  const triplet_case cases[] = {
      {"triplet_mean", "torch.triplet_margin_loss(a, p, n, 1.0, 2.0, 1e-6, False, 1)", {48, 200}},
      {"triplet_sum_p1", "torch.triplet_margin_loss(a, p, n, 0.5, 1.0, 1e-6, False, 2)", {33, 130}},
      {"triplet_swap_none", "torch.triplet_margin_loss(a, p, n, 2.0, 2.0, 1e-3, True, 0) * 2.0", {6, 5, 64}},
  };
  for (const auto& tc : cases) {
    INFO(tc.name);
    std::string dims;
    for (size_t i = 0; i < tc.shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(tc.shape[i]);
    // Anchors scaled down so that some triplets are inside the margin and some not.
    std::string yaml = std::string("name: ") + tc.name +
                       "\nreference:\n  torchscript: |\n    def forward(a, p, n):\n        return " + tc.expr +
                       "\ninputs:\n";
    for (const char* in : {"a", "p", "n"})
      yaml += std::string("  - name: ") + in + "\n    shape: [" + dims +
              "]\n    init: {kind: uniform, low: 0, high: " + (std::string(in) == "a" ? "0.3" : "1") + "}\n";
    yaml += "seed: 3\n";
    auto t = parse_task(yaml, std::string(tc.name) + ".yaml", kSource);
    REQUIRE(t);
    auto cands = the_coder().seeds(*t, 2);
    if (!cands) FAIL(cands.message());
    for (const auto& c : *cands) {
      CHECK_THAT(c.recipe.at("stages"), !Catch::Contains("fallback"));
      CHECK_THAT(c.source, Catch::Contains("_norm"));
    }
    check_candidates(*t, *cands);
  }
}

// cross_entropy with class indices written out (composites.hpp): logsumexp over each
// row as a row reduction that reads the logits once, the target's logit gathered by a
// library step, the ignored targets masked out and left out of the mean. Every
// reduction mode; rows not a multiple of 4 and a single row; targets drawn from a few
// classes so that ignore_index is hit by some of them, or by all (the mean is then
// NaN, 0 / 0, as ATen's; the sum 0); ignored targets made in the graph itself. The
// op is called as F.cross_entropy calls it (a script from text has no
// torch.nn.functional; the int64 test below imports F.cross_entropy itself).
TEST_CASE("emulated: cross-entropy written out matches the reference", "[rules][emulated][loss]") {
  struct ce_case {
    const char* name;
    const char* expr;
    int64_t rows, classes, targets_below;  // targets drawn from [0, targets_below)
    bool nan = false;
  };
  const ce_case cases[] = {
      {"ce_mean", "torch.cross_entropy_loss(x, t, None, 1, -100, 0.0)", 64, 256, 256},
      {"ce_mean_ignore", "torch.cross_entropy_loss(x, t, None, 1, 3, 0.0)", 37, 11, 5},
      {"ce_sum_ignore", "torch.cross_entropy_loss(x, t, None, 2, 0, 0.0)", 130, 257, 4},
      {"ce_none_ignore", "torch.cross_entropy_loss(x, t, None, 0, 2, 0.0) * 2.0", 9, 1000, 3},
      {"ce_one_row", "torch.cross_entropy_loss(x, t, None, 1, -100, 0.0)", 1, 64, 64},
      {"ce_all_ignored_mean", "torch.cross_entropy_loss(x, t, None, 1, 0, 0.0)", 3, 8, 1, true},
      {"ce_all_ignored_sum", "torch.cross_entropy_loss(x, t, None, 2, 0, 0.0)", 3, 8, 1},
      {"ce_ignored_in_graph",
       "torch.cross_entropy_loss(torch.relu(x) * 2.0, torch.where(t == 3, -100, t), None, 1, -100, 0.0)", 50, 7, 7},
  };
  for (const auto& tc : cases) {
    INFO(tc.name);
    std::string yaml = std::string("name: ") + tc.name + "\nreference:\n  torchscript: |\n    def forward(x, t):\n" +
                       "        return " + tc.expr + "\ninputs:\n  - name: x\n    shape: [" + std::to_string(tc.rows) +
                       ", " + std::to_string(tc.classes) + "]\n    init: {kind: normal, mean: 0, std: 2}\n" +
                       "  - name: t\n    shape: [" + std::to_string(tc.rows) + "]\n    dtype: int64\n" +
                       "    init: {kind: randint, low: 0, high: " + std::to_string(tc.targets_below) + "}\nseed: 5\n";
    auto t = parse_task(yaml, std::string(tc.name) + ".yaml", kSource);
    if (!t) FAIL(t.message());
    auto cands = the_coder().seeds(*t, 2);
    if (!cands) FAIL(cands.message());
    REQUIRE(cands->size() == 2);
    for (const auto& c : *cands) {
      INFO(c.recipe.at("stages"));
      CHECK_THAT(c.recipe.at("stages"), Catch::Contains("row_reduce"));
      CHECK_THAT(c.recipe.at("stages"), !Catch::Contains("fallback:aten::cross_entropy_loss"));
      CHECK_THAT(c.recipe.at("stages"), Catch::Contains("fallback:aten::gather"));
    }
    check_candidates(*t, *cands, tc.nan);
  }
}

// A global average pool (adaptive_avg_pool{1,2,3}d to one element per plane; level 2's
// 67_Conv2d_GELU_GlobalAvgPool, level 3's ResNets and EfficientNets) as the row mean
// ATen computes it by (composites.hpp), the elementwise chain before it computed on
// the mean's load rather than written whole for a library pool to read again. Planes
// not a multiple of 4, a rank-3 input; a pool to 2 x 2 stays ATen's.
TEST_CASE("emulated: a global average pool is a row mean with the chain before it on its load",
          "[rules][emulated][pool]") {
  struct pool_case {
    const char* name;
    const char* expr;
    const char* shape;
    bool mean;  // written as a row mean
  };
  const pool_case cases[] = {
      {"gap2d", "torch.adaptive_avg_pool2d(torch.gelu(x * 2.0 + 1.0), [1, 1])", "[4, 16, 9, 7]", true},
      {"gap2d_rank3", "torch.adaptive_avg_pool2d(torch.relu(x), [1, 1]).squeeze(-1)", "[8, 5, 5]", true},
      {"gap1d", "torch.adaptive_avg_pool1d(torch.tanh(x) - 0.5, [1])", "[3, 5, 33]", true},
      {"gap3d", "torch.adaptive_avg_pool3d(torch.sigmoid(x), [1, 1, 1])", "[2, 3, 4, 5, 6]", true},
      {"pool_2x2", "torch.adaptive_avg_pool2d(torch.relu(x), [2, 2])", "[2, 3, 8, 8]", false},
  };
  for (const auto& tc : cases) {
    INFO(tc.name);
    auto [t, cands] =
        script_seeds(tc.name, "x", tc.expr, std::string("inputs:\n  - {name: x, shape: ") + tc.shape + "}\n");
    for (const auto& c : cands) {
      INFO(c.recipe.at("stages"));
      CHECK((c.recipe.at("stages").find("fallback:aten::adaptive_avg_pool") == std::string::npos) == tc.mean);
    }
    if (tc.mean) CHECK(cands.front().recipe.at("stages").find("row_reduce+prologue") == 0);
    check_candidates(t, cands);
  }
}

// A dropout that draws nothing (p 0 in training mode, as level 3's DenseNets have after
// every convolution) is read through (identities.hpp): the concatenation reads the
// convolution's result itself, with no kernel copying it first. Returned, it stays a
// copy into the output (a plan writes its outputs).
TEST_CASE("emulated: a dropout of p 0 is read through, not copied", "[rules][emulated][dropout]") {
  struct drop_case {
    const char* name;
    const char* body;
    bool copied;  // an elementwise kernel remains
  };
  const drop_case cases[] = {
      {"dropout_cat", "torch.cat([x, torch.dropout(torch.conv2d(x, w, None, 1, 1), 0.0, True)], 1)", false},
      {"dropout_eval_cat", "torch.cat([torch.dropout(torch.conv2d(x, w, None, 1, 1), 0.3, False), x], 1)", false},
      {"dropout_returned", "torch.dropout(torch.conv2d(x, w, None, 1, 1), 0.0, True)", true},
  };
  for (const auto& tc : cases) {
    INFO(tc.name);
    auto [t, cands] = script_seeds(tc.name, "x, w", tc.body,
                                   "inputs:\n  - {name: x, shape: [2, 4, 6, 5]}\nparameters:\n"
                                   "  - {name: w, shape: [4, 4, 3, 3]}\n");
    // (A channels-last seed copies the convolution back to NCHW for the cat, an
    // elementwise stage either way: the NCHW seeds show the read-through.)
    size_t nchw = 0;
    for (const auto& c : cands) {
      INFO(c.recipe.at("stages"));
      if (c.recipe.count("conv_layout")) continue;
      ++nchw;
      CHECK((c.recipe.at("stages").find("elementwise") != std::string::npos) == tc.copied);
      CHECK(c.recipe.at("stages").find("dropout") == std::string::npos);
    }
    CHECK(nchw > 0);
    check_candidates(t, cands);
  }
}

// An input of another dtype than float32 (cross_entropy's int64 class indices) is
// read by library steps only; the float32 work around it stays the templates' (here
// the logits' logsumexp, cross_entropy being written out: composites.hpp). The
// problems are KernelBench files written here and imported as a user would.
TEST_CASE("emulated: int64 inputs go to library steps and the seed matches the reference",
          "[rules][emulated][fallback][int64]") {
  kernelbench_import_options o;
  o.python = std::getenv("KS_PYTHON") ? std::getenv("KS_PYTHON") : "/usr/bin/python3";
  if (!check_python(o)) o.python = "python3";
  const fs::path dir = fs::path(KS_BINARY_DIR) / "emulated-int64";
  fs::remove_all(dir);
  fs::create_directories(dir / "problems");
  const std::pair<const char*, const char*> cases[] = {
      {"cross_entropy", "torch.nn.functional.cross_entropy(x, t)"},
      {"cross_entropy_scaled", "torch.nn.functional.cross_entropy(torch.relu(x) * 2.0, t, reduction='sum') + 1.0"},
  };
  for (auto& [name, body] : cases) {
    INFO(name);
    const fs::path file = dir / "problems" / (std::string(name) + ".py");
    std::ofstream(file) << "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                        << "    def __init__(self):\n        super().__init__()\n\n"
                        << "    def forward(self, x, t):\n        return " << body << "\n\n"
                        << "def get_inputs():\n    return [torch.randn(37, 11), torch.randint(0, 11, (37,))]\n\n"
                        << "def get_init_inputs():\n    return []\n";
    auto files = find_problem_files({file.string()});
    REQUIRE(files);
    REQUIRE(files->size() == 1);
    auto imported = import_kernelbench_problem(files->front(), dir / "tasks", o);
    if (!imported.ok()) FAIL(imported.error);
    auto t = load_task(imported.task_path);
    REQUIRE(t);
    auto seeds = the_coder().seeds(*t, 2);
    if (!seeds) FAIL(seeds.message());
    for (const auto& c : *seeds) {
      CHECK_THAT(c.recipe.at("fallback_why"), Catch::Contains("int64"));
      CHECK_THAT(c.recipe.at("stages"), Catch::Contains("row_reduce") && !Catch::Contains("cross_entropy"));
    }
    check_candidates(*t, *seeds);
  }
}

// What expand_composites promises to leave alone. Operands that broadcast: the ATen
// call stays, run as a library step, and the seed is still correct. A reduction or beta
// computed at run time (here from the rank): not rewritten either, and since a library
// step's attributes are fixed text, the coder says so instead of guessing.
TEST_CASE("emulated: losses the rewrite must not take are left to ATen or refused by name",
          "[rules][emulated][losses]") {
  auto task = [](const std::string& name, const std::string& expr) {
    auto t = load_task(kSource / "bench/suites/ops/mse_loss.yaml");
    REQUIRE(t);
    t->name = name;
    t->torchscript = "def forward(a, b):\n    return " + expr + "\n";
    return *t;
  };
  {
    const task_spec t = task("loss_broadcast", "torch.l1_loss(a, b[0], 1)");
    auto cands = the_coder().seeds(t, 2);
    if (!cands) FAIL(cands.message());
    for (const auto& c : *cands) CHECK_THAT(c.recipe.at("stages"), Catch::Contains("aten::l1_loss"));
    check_candidates(t, *cands);
  }
  const std::tuple<const char*, const char*, const char*> computed[] = {
      {"loss_reduction_computed", "torch.mse_loss(a, b, a.dim() - 1)", "aten::mse_loss"},
      {"loss_beta_computed", "torch.huber_loss(a, b, 1, float(a.dim()) * 0.25)", "aten::huber_loss"},
  };
  for (auto& [name, expr, op] : computed) {
    INFO(name);
    auto cands = the_coder().seeds(task(name, expr), 2);
    REQUIRE_FALSE(cands);
    CHECK_THAT(cands.message(), Catch::Contains(op) && Catch::Contains("computed at run time"));
  }
}

result<task_spec> with_body(const std::string& rel, const std::string& name, const std::string& body) {
  auto t = load_task(kSource / rel);
  if (!t) return t;
  t->name = name;
  t->torchscript = "def forward(x):\n" + body;
  return t;
}

TEST_CASE("emulated: elementwise epilogues fused into pool and scan kernels match the reference",
          "[rules][emulated][epilogue]") {
  const char* pool = "bench/suites/ops/avg_pool2d_relu_scale.yaml";
  check_task(
      with_body(pool, "max_pool_tanh",
                "    return torch.tanh(torch.max_pool2d(x, [3, 3], [2, 2], [1, 1], [1, 1], False)) * 0.5 + 1.0\n"),
      1);
  check_task(
      with_body(pool, "avg_pool_pad_sigmoid",
                "    return torch.sigmoid(torch.avg_pool2d(x, [3, 3], [2, 2], [1, 1], False, True, None)) - 0.5\n"),
      1);
  check_task(with_body("bench/suites/ops/cumsum.yaml", "cumsum_exp",
                       "    return torch.exp(torch.cumsum(x, 1) * 0.01) - 1.0\n"),
             1);
  check_task(with_body("bench/suites/ops/cumsum_dim1.yaml", "cumprod_mid_sigmoid",
                       "    return torch.sigmoid(torch.cumprod(x, 1)) * 2.0\n"),
             1);
  check_task(with_body("bench/suites/ops/cumsum.yaml", "cumsum_and_relu",
                       "    c = torch.cumsum(x, 1)\n    return c, torch.relu(c)\n"),
             1);
}

// Methods as template changes: each seed optimized by the method runs against the
// reference (rules_coder_test checks what changes in the source).
TEST_CASE("emulated: methods applied as template changes match the reference", "[rules][emulated][methods]") {
  // Two seeds (a block and a warp per row: the row cache's stride differs) where the
  // row mapping matters, one elsewhere: CI time.
  const std::pair<const char*, const char*> cases[] = {
      {"examples/tasks/softmax.yaml", "cache_row_in_registers"},
      {"examples/tasks/layernorm.yaml", "cache_row_in_registers"},
      {"bench/suites/ops/layernorm_gelu.yaml", "cache_row_in_registers"},  // with a fused epilogue
      {"bench/suites/ops/softmax_temperature.yaml", "online_softmax"},     // with a fused prologue
      {"bench/suites/ops/log_softmax.yaml", "online_softmax"},
      {"examples/tasks/gelu.yaml", "streaming_cache_hints"},
      {"bench/suites/ops/bias_add_broadcast.yaml", "streaming_cache_hints"},
      {"bench/suites/ops/bias_add_broadcast.yaml", "readonly_restrict_ldg"},
  };
  for (auto& [path, method] : cases) {
    auto task = load_task(kSource / path);
    REQUIRE(task);
    INFO(path << " " << method);
    const bool rows = std::string(method) != "streaming_cache_hints" && std::string(method) != "readonly_restrict_ldg";
    auto seeds = the_coder().seeds(*task, rows ? 2 : 1);
    if (!seeds) FAIL(seeds.message());
    std::vector<candidate> changed;
    for (const candidate& seed : *seeds) {
      optimize_input in;
      in.task = *task;
      in.base = seed;
      in.plan.chosen = method;
      auto c = the_coder().optimize(in);
      if (!c && rows && seed.recipe.at("row_cache") != "none") {
        // The seed keeps its rows on chip already: it is the cached case.
        CHECK_THAT(c.message(), Catch::Contains("already"));
        changed.push_back(seed);
        continue;
      }
      if (!c) FAIL(c.message());
      changed.push_back(*c);
    }
    check_candidates(*task, changed);
  }
}

// The row cache is sized for the task's own size; at a larger size, the part of a row
// beyond the cache is read from memory again. Tasks declared with rows of 1024 (a block
// of 256 keeps 4 values a thread, a warp 32 a lane), run with rows of 2100 (the cpu
// size, widened), check both parts under both row mappings.
TEST_CASE("emulated: rows longer than the row cache match the reference", "[rules][emulated][row_cache]") {
  const char* cases[] = {
      "bench/suites/ops/rmsnorm.yaml",                // epilogue re-reads x, weight at c
      "bench/suites/ops/logsumexp_keepdim_sub.yaml",  // epilogue re-reads x
      "bench/suites/ops/softmax_temperature.yaml",    // prologue, the value kept
      "bench/suites/ops/layernorm_gelu.yaml",         // moments, affine, epilogue
      "bench/suites/ops/l2_normalize_rows.yaml",
  };
  for (const char* path : cases) {
    auto task = load_task(kSource / path);
    REQUIRE(task);
    INFO(path);
    for (auto* list : {&task->inputs, &task->parameters})
      for (auto& t : *list)
        if (!t.shape.empty()) t.shape.back() = 1024;
    for (auto& [name, shape] : task->sizes.at("cpu"))
      if (!shape.empty()) shape.back() = 2100;
    auto seeds = the_coder().seeds(*task, 2);
    if (!seeds) FAIL(seeds.message());
    REQUIRE(seeds->size() == 2);
    const candidate& block = seeds->at(0);
    const candidate& warp = seeds->at(1);
    INFO(block.source);
    REQUIRE(block.recipe.at("row_mapping") == "block");
    REQUIRE(block.recipe.at("row_cache") == "on_chip");
    REQUIRE(block.source.find("rc_in0[4];") != std::string::npos);
    INFO(warp.source);
    REQUIRE(warp.recipe.at("row_mapping") == "warp");
    REQUIRE(warp.source.find("rc_in0[32];") != std::string::npos);
    check_candidates(*task, *seeds);
  }
}

// Rows too long for registers at the task's size (16384) are staged in shared memory
// by the first seed (on_chip): rows whose length is a multiple of 4 (16-byte copies),
// rows that are not (4-byte copies), and rows longer than the staging space, whose
// rest is read twice.
TEST_CASE("emulated: rows staged in shared memory match the reference", "[rules][emulated][row_cache]") {
  const char* cases[] = {
      "examples/tasks/softmax.yaml",                  // online max and sum, no prologue
      "bench/suites/ops/softmax_temperature.yaml",    // prologue, recomputed from the staged row
      "bench/suites/ops/logsumexp_keepdim_sub.yaml",  // epilogue re-reads x
      "bench/suites/ops/rmsnorm.yaml",                // epilogue re-reads x, weight at c
      "bench/suites/ops/layernorm_gelu.yaml",         // moments, affine, epilogue
      "bench/suites/ops/l2_normalize_rows.yaml",
  };
  for (const char* path : cases) {
    for (int64_t len : {2048, 2101, 16390}) {
      auto task = load_task(kSource / path);
      REQUIRE(task);
      INFO(path << " rows of " << len);
      for (auto* list : {&task->inputs, &task->parameters})
        for (auto& t : *list)
          if (!t.shape.empty()) t.shape.back() = 16384;
      for (auto& [name, shape] : task->sizes.at("cpu")) {
        if (shape.empty()) continue;
        shape.back() = len;
        if (shape.size() > 1) shape.front() = len > 8192 ? 3 : 9;
      }
      auto seeds = the_coder().seeds(*task, 1);
      if (!seeds) FAIL(seeds.message());
      const candidate& c = seeds->at(0);
      INFO(c.source);
      REQUIRE(c.recipe.at("row_cache") == "on_chip");
      REQUIRE(c.source.find("KS_DYNAMIC_SHARED(ks_row);") != std::string::npos);
      check_candidates(*task, *seeds);
    }
  }
}

// Rows too long for one block's staging space at the task's size are spread over a
// cluster by the first seed (on_chip): 4 blocks a row of 65536, each staging its
// chunk, and 8 blocks a row of 393216, staging 49152 floats each. At the cpu size:
// short rows (chunks of 256 elements), rows whose length is not a multiple of 4
// (4-byte copies, the last chunk shorter), rows so short that the last blocks' chunks
// are empty, and rows longer than the cluster's staging space, whose rest is read
// twice. The blocks' partial states cross through the emulator's distributed shared
// memory.
TEST_CASE("emulated: rows spread over a cluster's shared memory match the reference",
          "[rules][emulated][row_cache][cluster]") {
  const char* cases[] = {
      "examples/tasks/softmax.yaml",                  // online max and sum, no prologue
      "bench/suites/ops/softmax_temperature.yaml",    // prologue, recomputed from the staged row
      "bench/suites/ops/logsumexp_keepdim_sub.yaml",  // epilogue re-reads x
      "bench/suites/ops/rmsnorm.yaml",                // epilogue re-reads x, weight at the column
      "bench/suites/ops/layernorm_gelu.yaml",         // moments (the row's shift), affine at the column, epilogue
      "bench/suites/ops/l2_normalize_rows.yaml",
  };
  const std::tuple<int64_t, int, std::vector<int64_t>> sizes[] = {{65536, 4, {2048, 2101, 9, 4 * 16384 + 40}},
                                                                  {393216, 8, {2048, 2101, 8 * 49152 + 12}}};
  for (const char* path : cases) {
    for (const auto& [target, blocks, lens] : sizes) {
      for (int64_t len : lens) {
        auto task = load_task(kSource / path);
        REQUIRE(task);
        INFO(path << ": rows of " << target << " at the task's size, " << len << " at the cpu size");
        for (auto* list : {&task->inputs, &task->parameters})
          for (auto& t : *list) {
            if (t.shape.empty()) continue;
            t.shape.back() = target;
            if (t.shape.size() > 1) t.shape.front() = 4096;
          }
        for (auto& [name, shape] : task->sizes.at("cpu")) {
          if (shape.empty()) continue;
          shape.back() = len;
          if (shape.size() > 1) shape.front() = len > 8192 ? 2 : 5;
        }
        auto seeds = the_coder().seeds(*task, 1);
        if (!seeds) FAIL(seeds.message());
        const candidate& c = seeds->at(0);
        INFO(c.source);
        REQUIRE(c.recipe.at("row_cache") == "on_chip");
        REQUIRE(c.source.find("__cluster_dims__(" + std::to_string(blocks) + ", 1, 1)") != std::string::npos);
        REQUIRE(c.source.find("ks_cluster_map(ks_part, q)") != std::string::npos);
        check_candidates(*task, *seeds);
      }
    }
  }
}

// A device without clusters (compute capability 8) keeps a block per row, staging
// what its shared memory holds of the row.
TEST_CASE("rules coder: rows over a cluster only where the device has clusters", "[rules][row_cache][cluster]") {
  auto task = load_task(kSource / "examples/tasks/softmax.yaml");
  REQUIRE(task);
  task->inputs.at(0).shape = {4096, 65536};
  auto g = the_coder().graph(*task);
  REQUIRE(g);
  target_shapes target{{"x", {4096, 65536}}};
  lowering_params p = rules_coder::seed_params().front();
  auto hopper = lower_graph(*g, p, target, lowering_device{});
  REQUIRE(hopper);
  CHECK(hopper->source.find("__cluster_dims__(4, 1, 1)") != std::string::npos);
  lowering_device ampere;
  ampere.cc_major = 8;
  ampere.shared_per_block_optin = 166912;
  auto older = lower_graph(*g, p, target, ampere);
  REQUIRE(older);
  CHECK(older->source.find("__cluster_dims__") == std::string::npos);
  CHECK(older->source.find("ks_cluster") == std::string::npos);
  CHECK(older->source.find("KS_DYNAMIC_SHARED(ks_row);") != std::string::npos);
  // A row longer than 8 blocks can stage (8 x 227 KiB) is not spread either.
  task->inputs.at(0).shape = {64, 8 * 60000};
  auto huge = lower_graph(*g, p, {{"x", {64, 8 * 60000}}}, lowering_device{});
  REQUIRE(huge);
  CHECK(huge->source.find("__cluster_dims__") == std::string::npos);
  // row_cache shared: one block's shared memory, never a cluster.
  p.row_cache = param::row_cache::shared;
  auto one = lower_graph(*g, p, target, lowering_device{});
  REQUIRE(one);
  CHECK(one->source.find("__cluster_dims__") == std::string::npos);
}

// A sum over thousands of products that cancel (KernelBench's level-2 14_Gemm_Divide_
// Sum_Scaling, smaller): the repair that runs reductions as ATen library steps gives
// the reference's bits, ATen's order of the sum on the same values (the product is
// ATen's too, the halving exact).
TEST_CASE("emulated: reductions as ATen library steps give the reference's bits",
          "[rules][emulated][fallback][library_reductions]") {
  auto t = parse_task(R"(name: gemm_divide_sum
reference:
  torchscript: |
    def forward(x, weight):
        y = torch.matmul(x, weight.t())
        y = y / 2.0
        y = torch.sum(y, 1, True)
        return y * 1.5
inputs:
  - {name: x, shape: [1024, 8192], init: {kind: uniform, low: 0, high: 1}}
parameters:
  - {name: weight, shape: [8192, 8192], init: {kind: normal, mean: 0, std: 1}}
seed: 4
sizes:
  cpu: {x: [16, 1024], weight: [512, 1024]}
)",
                      "gemm_divide_sum.yaml", kSource);
  REQUIRE(t);
  auto seeds = the_coder().seeds(*t, 1);
  REQUIRE(seeds);
  // Wrong values (as 14 gave on the GPU): the reference's product first (no 3xTF32, no
  // matrix-vector sum), then ATen's reductions: the two repairs the bench allows.
  repair_input r;
  r.task = *t;
  r.failed = seeds->front();
  r.review.status = review_status::incorrect;
  auto first = the_coder().repair(r);
  REQUIRE(first);
  CHECK(first->origin == "repair:reference_library");
  r.failed = *first;
  auto lib = the_coder().repair(r);
  if (!lib) FAIL(lib.message());
  INFO(lib->source);
  REQUIRE(lib->origin == "repair:library_reductions");
  auto sized = with_size(*t, "cpu");
  REQUIRE(sized);
  auto prog = reference_program::load(*sized);
  REQUIRE(prog);
  auto inputs = make_inputs(*sized, trial_seed(sized->seed, 0), c10::Device(c10::kCPU));
  REQUIRE(inputs);
  auto want = run_tensors(**prog, *inputs);
  REQUIRE(want);
  auto got = run_candidate(*sized, *lib, *inputs, parameter_tensors(**prog));
  if (!got) FAIL(got.message());
  REQUIRE(got->size() == 1);
  CHECK(at::equal((*got)[0], (*want)[0].contiguous()));
}

// A softmax over rows with -inf entries (log(relu(x - 3)): about 3 in 4 masked) where
// many threads hold only -inf: their part adds nothing, not NaN. Rows kept in
// registers (rows of 1024 at the task's size), staged in shared memory (16384),
// spread over a cluster (65536), and split over several blocks (64 rows of 16384: blocks whose chunk is all -inf).
TEST_CASE("emulated: a softmax over masked rows is not NaN", "[rules][emulated][row_cache]") {
  const std::tuple<int64_t, int64_t, const char*, std::vector<int64_t>> cases[] = {
      {64, 1024, "float rv[", {9, 2048}},
      {4096, 16384, "KS_DYNAMIC_SHARED(ks_row);", {9, 2048}},
      {4096, 65536, "__cluster_dims__(4, 1, 1)", {3, 2048}},  // blocks whose chunk is all -inf
      {64, 16384, "_part(", {3, 13000}}};                     // 4 blocks a row at the cpu size
  for (auto [rows, target, form, cpu] : cases) {
    auto task = load_task(kSource / "examples/tasks/softmax.yaml");
    REQUIRE(task);
    INFO(rows << " rows of " << target << " at the task's size");
    task->torchscript = "def forward(x):\n    return torch.softmax(torch.log(torch.relu(x - 3.0)), -1)\n";
    task->inputs.at(0).shape = {rows, target};
    task->sizes.at("cpu").at("x") = cpu;
    auto seeds = the_coder().seeds(*task, 1);
    if (!seeds) FAIL(seeds.message());
    INFO(seeds->front().source);
    CHECK(seeds->front().source.find(form) != std::string::npos);
    check_candidates(*task, *seeds);
  }
}

// Elementwise kernels over rows x columns (broadcast operands indexed by row or by
// column, no division per element): rows whose length is a multiple of 4 (float4
// path) and rows that are not (element by element), with row and column broadcasts.
TEST_CASE("emulated: elementwise kernels over rows x columns match the reference", "[rules][emulated][split]") {
  auto check_split = [](task_spec t) {
    INFO(t.name);
    auto seeds = the_coder().seeds(t, 1);
    if (!seeds) FAIL(seeds.message());
    INFO(seeds->front().source);
    REQUIRE(seeds->front().source.find("blockIdx.y walks the rows") != std::string::npos);
    check_candidates(t, *seeds);
  };
  auto channel = load_task(kSource / "bench/suites/ops/channel_scale.yaml");
  REQUIRE(channel);
  check_split(*channel);  // rows of 8 x 8
  channel->sizes["cpu"] = {{"x", {2, 4, 7, 9}}, {"scale", {4, 1, 1}}, {"shift", {4, 1, 1}}};
  check_split(*channel);  // rows of 63
  auto bias = load_task(kSource / "bench/suites/ops/bias_add_broadcast.yaml");
  REQUIRE(bias);
  check_split(*bias);  // rows of 256
  bias->sizes["cpu"] = {{"x", {8, 250}}, {"bias", {250}}};
  check_split(*bias);  // rows of 250
  // A row operand and a column operand in one chain.
  task_spec both = *bias;
  both.name = "row_and_column_broadcast";
  both.torchscript = "def forward(x, a, bias):\n    return torch.relu(x * a + bias)\n";
  tensor_spec a = both.parameters.at(0);
  a.name = "a";
  a.shape = {16384, 1};
  both.parameters.insert(both.parameters.begin(), a);
  both.sizes["cpu"] = {{"x", {12, 260}}, {"a", {12, 1}}, {"bias", {260}}};
  check_split(both);
  both.sizes["cpu"] = {{"x", {12, 258}}, {"a", {12, 1}}, {"bias", {258}}};
  check_split(both);
}

// A whole-tensor reduction whose prologue broadcasts an operand (KernelBench's hinge
// loss: targets along the columns) walks rows x columns, so that the operand is
// indexed by the column (or the row) instead of a 64-bit modulo of the flat index.
TEST_CASE("emulated: whole-tensor reductions over rows x columns match the reference",
          "[rules][emulated][split][whole]") {
  auto base = load_task(kSource / "bench/suites/ops/hinge_loss.yaml");
  REQUIRE(base);
  auto check_split = [](task_spec t, const std::string& kernel) {
    INFO(t.name);
    auto seeds = the_coder().seeds(t, 2);
    if (!seeds) FAIL(seeds.message());
    for (const auto& c : *seeds) {
      INFO(c.source);
      CHECK(c.source.find(kernel + "_part") != std::string::npos);
      CHECK(c.source.find("blockIdx.y walks the rows") != std::string::npos);
    }
    check_candidates(t, *seeds);
  };
  // Targets along the columns, as KernelBench's 100_HingeLoss.
  task_spec cols = *base;
  cols.name = "hinge_loss_column_targets";
  cols.inputs[1].shape = {16384};
  for (auto size : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {{6, 1100}, 1100}, {{3, 2048}, 2048}, {{70, 1030}, 1030}}) {
    cols.sizes["cpu"] = {{"pred", size.first}, {"target", {size.second}}};
    check_split(cols, "mean");
  }
  // A row operand and a sum (its scale along the rows), then a column and a row together.
  task_spec rows = *base;
  rows.name = "row_scaled_sum";
  rows.torchscript = "def forward(pred, target):\n    return torch.sum(pred * target)\n";
  rows.inputs[1].shape = {16384, 1};
  rows.sizes["cpu"] = {{"pred", {9, 1500}}, {"target", {9, 1}}};
  check_split(rows, "sum");
  task_spec both = cols;
  both.name = "row_and_column_max";
  both.torchscript = "def forward(pred, target, a):\n    return torch.amax(pred * target + a)\n";
  tensor_spec a = both.inputs[1];
  a.name = "a";
  a.shape = {16384, 1};
  both.inputs.push_back(a);
  both.sizes["cpu"] = {{"pred", {7, 1300}}, {"target", {1300}}, {"a", {7, 1}}};
  check_split(both, "max");
}

// A running sum is carried in double: within an fp32 rounding of the exact running
// sum, where fp32 carries drift by ~sqrt(n) roundings (two fp32 orders of 4096
// values differed by 2.1e-4 on the H200, beyond a 1e-4 tolerance).
TEST_CASE("emulated: cumsum is within an fp32 rounding of the exact running sum", "[rules][emulated][scan]") {
  auto task = load_task(kSource / "bench/suites/ops/cumsum.yaml");
  REQUIRE(task);
  task->sizes["cpu"] = {{"x", {2, 30000}}};
  auto seeds = the_coder().seeds(*task, 1);
  if (!seeds) FAIL(seeds.message());
  REQUIRE(seeds->front().source.find("double carry") != std::string::npos);
  auto sized = with_size(*task, "cpu");
  REQUIRE(sized);
  // Values near 1 so that the sums grow to 30000: fp32 steps of 2e-3 there.
  at::Tensor x = at::rand({2, 30000}, at::kFloat) * 0.5 + 0.75;
  auto outs = run_candidate(*sized, seeds->front(), {x}, {});
  if (!outs) FAIL(outs.message());
  at::Tensor exact = at::cumsum(x.to(at::kDouble), 1);
  at::Tensor ours = (*outs)[0].to(at::kDouble);
  // Within one rounding of fp32 (half an ulp, 2^-24 relative, plus slack) everywhere.
  const double worst = ((ours - exact).abs() / exact.abs()).max().item<double>();
  INFO("largest relative error " << worst);
  CHECK(worst <= 1.5 * std::ldexp(1.0, -24));
  // An fp32 carry is far off at this length: the bound above tells the two apart.
  at::Tensor sequential = at::empty_like(x);
  for (int64_t r = 0; r < 2; ++r) {
    float s = 0.0f;
    auto xs = x[r].contiguous();
    const float* px = xs.data_ptr<float>();
    float* ps = sequential[r].data_ptr<float>();
    for (int64_t c = 0; c < 30000; ++c) ps[c] = s += px[c];
  }
  CHECK(((sequential.to(at::kDouble) - exact).abs() / exact.abs()).max().item<double>() > 10 * std::ldexp(1.0, -24));
}

// References with +inf, -inf and NaN constants and the extreme finite floats (issue 21):
// the graph carries them ("Infinity", "-Infinity", "NaN" in its JSON), the lowering
// writes them as bit patterns, library steps take them as attributes; every seed must
// match LibTorch, NaN positions included (a softmax over a wholly masked row is NaN in
// PyTorch and must be NaN here too).
TEST_CASE("emulated: references with inf, -inf, NaN and extreme constants match the reference",
          "[rules][emulated][nonfinite]") {
  auto files = task_files("tests/data/nonfinite");
  REQUIRE(files.size() >= 7);
  for (const auto& f : files) {
    INFO(f.filename().string());
    check_task(load_task(f), 2, /*nan_positions=*/true);
  }
}

// KernelBench problems imported as tasks (tests/data/kernelbench/good, small shapes):
// modules that own their weights, training-mode norms, input programs, traced modules.
TEST_CASE("emulated: seeds of imported KernelBench problems match the imported reference",
          "[rules][emulated][kernelbench]") {
  kernelbench_import_options o;
  o.python = std::getenv("KS_PYTHON") ? std::getenv("KS_PYTHON") : "/usr/bin/python3";
  if (!check_python(o)) o.python = "python3";
  const fs::path out = fs::path(KS_BINARY_DIR) / "emulated-kernelbench";
  fs::remove_all(out);
  auto files = find_problem_files({(kSource / "tests/data/kernelbench/good").string()});
  REQUIRE(files);
  // masked_cumsum takes a bool mask: its product with x is computed on the scan's loads.
  for (const auto& f : *files) {
    INFO(f.path.string());
    auto imported = import_kernelbench_problem(f, out, o);
    if (!imported.ok()) FAIL(imported.error);
    check_task(load_task(imported.task_path), 2);
  }
}

// Small problems shaped like level 3's networks (tests/data/kernelbench/networks), one
// for each way a level-3 network failed to lower (issue 46): copy_ into module state, a
// split unpacked into q, k and v, a list grown by append and concatenated, Dropout(0.0)
// in training mode, view(x.size(0), -1), randn with a size read in forward,
// nn.MultiheadAttention (its fast-path checks and (output, weights) tuple), a scripted
// bidirectional nn.GRU (its Optional state and its weights held in a list), nn.LSTM given
// (h0, c0), a loop appending to a list, a traced Swin-like window attention, and (as
// level 2's 31_Conv2d_Min_Add_Multiply) torch.min / max / minimum of a tensor and a
// 0-dim tensor made in forward, (as 48_Mamba2ReturnY's einops) a traced size
// multiplied in place before it is read as a size, and (as the NetVlads) a slice whose
// end is INT64_MAX, and (as nn.MultiheadAttention in PyTorch 2.x) q, k and v unpacked
// from a list of three selects of one projection. Each graph is probed on the meta device (not on the CPU at the
// network's size). Each lowers to seeds whose plans resolve at its own shapes; those whose output does not depend on a
// random draw in forward run on the CPU against the imported reference.
TEST_CASE("emulated: level-3-shaped networks lower and match the imported reference",
          "[rules][emulated][kernelbench][networks]") {
  kernelbench_import_options o;
  o.python = std::getenv("KS_PYTHON") ? std::getenv("KS_PYTHON") : "/usr/bin/python3";
  if (!check_python(o)) o.python = "python3";
  const fs::path out = fs::path(KS_BINARY_DIR) / "emulated-networks";
  fs::remove_all(out);
  auto files = find_problem_files({(kSource / "tests/data/kernelbench/networks").string()});
  REQUIRE(files);
  REQUIRE(files->size() == 13);
  const std::set<std::string> random_in_forward = {"lstm_random_state"};
  for (const auto& f : *files) {
    INFO(f.path.string());
    auto imported = import_kernelbench_problem(f, out, o);
    if (!imported.ok()) FAIL(imported.error);
    auto task = load_task(imported.task_path);
    REQUIRE(task);
    // Probed from shapes alone (a probe on the CPU runs the network at its size): the
    // module loads, its constants and the device its state and draws go to follow the
    // probe onto the meta device.
    std::string note;
    auto json = export_graph_json(*task, &note);
    if (!json) FAIL(json.message());
    CHECK(note == "probed on meta");
    auto cands = the_coder().seeds(*task, 2);
    if (!cands) FAIL(cands.message());
    REQUIRE_FALSE(cands->empty());
    for (const candidate& c : *cands) {
      INFO(c.origin);
      // No step of the ops these problems were refused for is left.
      for (const char* gone : {"aten::copy_", "prim::ListUnpack", "aten::append", "aten::dropout", "prim::TupleUnpack",
                               "prim::TupleIndex", "prim::unchecked_cast", "prim::If", "aten::mul_"})
        CHECK(c.recipe.at("stages").find(gone) == std::string::npos);
      // A minimum or maximum with a constant is a bound of the template's, not a library step.
      if (task->name == "min_tensor_constant")
        for (const char* gone : {"aten::min", "aten::max"})
          CHECK(c.recipe.at("stages").find(gone) == std::string::npos);
      auto ctx = make_plan_context(*task, c.source);
      REQUIRE(ctx);
      auto plan = resolve_plan(c.plan, *ctx);
      CHECK(plan);
    }
    if (!random_in_forward.count(task->name)) check_candidates(*task, *cands);
  }
}

// Lowering reads the shapes of a module's weights, not their values (issue 46: level
// 3's 1_MLP and 2_ShallowWideMLP carry 2.7 and 8.6 GB of weights, and 2_ShallowWideMLP's
// graph export ran out of memory). tests/data/kernelbench/large/wide_mlp.py has 512 MiB
// of weights: its graph exports within 900 MiB of data, the module file mapped (outside
// the data limit) and one tensor at a time while the module loads onto the meta device
// (at first: the file's bytes three times and the weights once, about 2 GiB; with the
// file read once, 1400 MiB). Under 300 MiB the export is stopped, the error naming the
// limit and how to raise it.
TEST_CASE("emulated: a network's graph exports with its weights' bytes held once",
          "[rules][kernelbench][networks][memory]") {
  kernelbench_import_options o;
  o.python = std::getenv("KS_PYTHON") ? std::getenv("KS_PYTHON") : "/usr/bin/python3";
  if (!check_python(o)) o.python = "python3";
  const fs::path out = fs::path(KS_BINARY_DIR) / "emulated-large";
  fs::remove_all(out);
  auto files = find_problem_files({(kSource / "tests/data/kernelbench/large/wide_mlp.py").string()});
  REQUIRE(files);
  REQUIRE(files->size() == 1);
  auto imported = import_kernelbench_problem(files->front(), out, o);
  if (!imported.ok()) FAIL(imported.error);
  auto task = load_task(imported.task_path);
  REQUIRE(task);
  REQUIRE(task->module_bytes.size() > (512u << 20));
  reference_limits mem;
  mem.memory_mb = 900;
  auto g = export_task_graph(kWorker, *task, "", mem);
  if (!g) FAIL(g.message());
  CHECK(std::count_if(g->nodes.begin(), g->nodes.end(), [](const graph_node& n) { return n.kind == "aten::linear"; }) ==
        2);
  mem.memory_mb = 300;
  g = export_task_graph(kWorker, *task, "", mem);
  REQUIRE_FALSE(g);
  CHECK_THAT(g.message(), Catch::Contains("more than 300 MiB of memory") && Catch::Contains("--memory-mb"));
  fs::remove_all(out);
}

// Few long rows are split over several blocks each (coder/rules/templates/row_split.hpp). A
// coder for a device of 2 SMs makes 3 rows of 13001 elements few: with 256 threads
// and at least 16 elements a thread, SPLIT = min(ceil(13001 / 4096), ceil(16 / 3)) = 4
// blocks a row. Every seed that splits runs against the reference, twice: the two
// runs must give the same bits (the merges are in a fixed order; the sources hold no
// atomics). Rows of 13001 are not a multiple of 4 (element by element) and rows of
// 13000 are (float4 chunks).
rules_coder& small_device_coder() {
  static std::unique_ptr<rules_coder> c = [] {
    rules_coder_options o;
    o.gpu_worker = kWorker;
    o.skills_dir = kSource / "skills";
    o.device.multiprocessors = 2;
    auto r = rules_coder::create(o);
    if (!r) FAIL(r.message());
    return std::move(r.value());
  }();
  return *c;
}

// `rel` with its last dim `len` and its rows `rows`, declared and at its cpu size.
result<task_spec> reshaped(const std::string& rel, int64_t rows, int64_t len) {
  auto t = load_task(kSource / rel);
  if (!t) return t;
  auto fix = [&](std::vector<int64_t>& shape, bool input) {
    if (shape.empty()) return;
    shape.back() = len;
    if (input && shape.size() > 1) shape.front() = rows;
  };
  for (auto& i : t->inputs) fix(i.shape, true);
  for (auto& p : t->parameters) fix(p.shape, false);
  for (auto& [name, shape] : t->sizes["cpu"]) {
    bool input = std::any_of(t->inputs.begin(), t->inputs.end(), [&](const tensor_spec& s) { return s.name == name; });
    fix(shape, input);
  }
  return t;
}

// Runs `c` twice on the task's trial-0 inputs; the outputs must be the same bits.
void check_bit_identical(const task_spec& task, const candidate& c) {
  auto sized = task.sizes.count("cpu") ? with_size(task, "cpu") : result<task_spec>(task);
  REQUIRE(sized);
  auto prog = reference_program::load(*sized);
  REQUIRE(prog);
  auto inputs = make_inputs(*sized, trial_seed(sized->seed, 0), c10::Device(c10::kCPU));
  REQUIRE(inputs);
  const auto& params = parameter_tensors(**prog);
  auto a = run_candidate(*sized, c, *inputs, params);
  auto b = run_candidate(*sized, c, *inputs, params);
  if (!a || !b) FAIL((a ? b.message() : a.message()));
  for (size_t i = 0; i < a->size(); ++i) CHECK(at::equal((*a)[i], (*b)[i]));
}

TEST_CASE("emulated: few long rows split over several blocks match the reference, bit for bit on reruns",
          "[rules][emulated][split]") {
  const char* cases[] = {
      "examples/tasks/layernorm.yaml",  // moments (Welford), affine, float4 chunks
      "examples/tasks/row_sum.yaml",    // a plain sum: a warp per row merges the partials
      "bench/suites/ops/row_var.yaml",  // Welford's variance, unbiased
      "bench/suites/ops/row_max.yaml",
      "examples/tasks/softmax.yaml",  // online max and sum merged across blocks
      "bench/suites/ops/log_softmax.yaml",
      "bench/suites/ops/softmax_temperature.yaml",    // prologue recomputed in the second pass
      "bench/suites/ops/logsumexp_keepdim_sub.yaml",  // an epilogue that re-reads x
      "bench/suites/ops/rmsnorm.yaml",                // prologue and epilogue, weight at c
      "bench/suites/ops/layernorm_gelu.yaml",         // a chain after the normalisation
  };
  for (const char* rel : cases) {
    for (int64_t len : {13001, 13000}) {
      auto task = reshaped(rel, 3, len);
      REQUIRE(task);
      INFO(rel << " rows of " << len);
      auto seeds = small_device_coder().seeds(*task, 5);
      if (!seeds) FAIL(seeds.message());
      std::vector<candidate> split;
      for (const candidate& c : *seeds)
        if (c.source.find("_part(") != std::string::npos) split.push_back(c);
      REQUIRE(split.size() >= 2);
      split.resize(2);  // CI time: the first two (256 threads with float4, 512)
      for (const candidate& c : split) {
        INFO(c.source);
        CHECK(c.source.find("atomic") == std::string::npos);
        CHECK(c.plan.constants.count("SPLIT" + std::to_string(0)) + c.plan.constants.count("SPLIT1") +
                  c.plan.constants.count("SPLIT2") >=
              1);
      }
      check_candidates(*task, split);
      check_bit_identical(*task, split.front());
    }
  }
}

// Rows of 4M elements (KernelBench's LayerNorm normalises 16 rows of 64 x 256 x 256):
// split over SPLIT blocks with Welford's partials, the layer norm and the variance
// stay within 1e-4 of PyTorch's, and of the same computed in double.
TEST_CASE("emulated: split rows of 4M elements stay within 1e-4 of the reference", "[rules][emulated][split][long]") {
  const int64_t len = int64_t{1} << 22;
  for (const char* rel : {"examples/tasks/layernorm.yaml", "bench/suites/ops/row_var.yaml"}) {
    auto task = reshaped(rel, 2, len);
    REQUIRE(task);
    INFO(rel);
    auto seeds = the_coder().seeds(*task, 1);
    if (!seeds) FAIL(seeds.message());
    const candidate& c = seeds->front();
    REQUIRE(c.source.find("ks_wf_merge") != std::string::npos);
    auto sized = with_size(*task, "cpu");
    REQUIRE(sized);
    auto prog = reference_program::load(*sized);
    REQUIRE(prog);
    auto inputs = make_inputs(*sized, trial_seed(sized->seed, 0), c10::Device(c10::kCPU));
    REQUIRE(inputs);
    auto ref = run_tensors(**prog, *inputs);
    REQUIRE(ref);
    const auto& params = parameter_tensors(**prog);
    auto outs = run_candidate(*sized, c, *inputs, params);
    if (!outs) FAIL(outs.message());
    at::Tensor x = (*inputs)[0].to(at::kDouble);
    at::Tensor exact = std::string(rel).find("layernorm") != std::string::npos
                           ? at::layer_norm(x, {len}, params[0].to(at::kDouble), params[1].to(at::kDouble), 1e-5)
                           : at::var(x, {1}, /*unbiased=*/true, /*keepdim=*/false);
    const double vs_torch = ((*outs)[0] - (*ref)[0]).abs().max().item<double>();
    const double vs_exact = ((*outs)[0].to(at::kDouble) - exact).abs().max().item<double>();
    INFO("max abs error: " << vs_torch << " against PyTorch, " << vs_exact << " against double");
    CHECK(vs_torch <= 1e-4);
    CHECK(vs_exact <= 1e-4);
  }
}

// group_norm and instance_norm as row normalisations: a row is a (batch, group) or a
// (batch, channel) pair; group_norm's second pass walks a row channel by channel (its
// scale and shift read once a channel), instance_norm reads its channel's once a row.
// Spatial sizes that are a multiple of 4 (float4) and that are not, with and without
// the affine, with a chain before (a prologue) and after (an epilogue); many rows (a
// block or a warp per row) and, on a 2-SM device, few long rows (split).
result<task_spec> norm_task(const std::string& name, const std::string& body, std::vector<int64_t> shape, bool affine) {
  std::string yaml = "name: " + name + "\nreference:\n  torchscript: |\n    def forward(x" +
                     (affine ? ", weight, bias" : "") + "):\n        return " + body +
                     "\ninputs:\n  - name: x\n    shape: [";
  for (size_t i = 0; i < shape.size(); ++i) yaml += (i ? ", " : "") + std::to_string(shape[i]);
  yaml += "]\n    init: {kind: normal, mean: 0.5, std: 2}\n";
  if (affine)
    yaml += "parameters:\n  - name: weight\n    shape: [" + std::to_string(shape[1]) +
            "]\n    init: {kind: normal, mean: 1, std: 0.1}\n  - name: bias\n    shape: [" + std::to_string(shape[1]) +
            "]\n    init: {kind: normal, mean: 0, std: 0.1}\n";
  yaml += "seed: 5\n";
  return parse_task(yaml, name + ".yaml", kSource);
}

// instance_norm over rows too long for a block (KernelBench's 34_InstanceNorm: rows of
// 512 x 512): 128 rows of 65536 at the task's size would be split over 9 blocks each,
// but 4 blocks a row in a cluster reach every SM and read a row once. The split's
// choice of Welford states stays: their merge across the cluster, the channel's affine
// at row % C, a chain after the norm; bit for bit on reruns.
TEST_CASE("emulated: instance norms spread over a cluster match the reference", "[rules][emulated][norms][cluster]") {
  const std::pair<const char*, bool> cases[] = {
      {"torch.instance_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False)", true},
      {"torch.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, False)", false},
      {"torch.gelu(torch.instance_norm(x * 2.0, weight, bias, None, None, True, 0.1, 1e-5, False)) + 1.0", true},
  };
  for (const auto& [body, affine] : cases) {
    for (std::vector<int64_t> cpu : {std::vector<int64_t>{2, 3, 37, 41}, std::vector<int64_t>{1, 2, 260, 260}}) {
      auto t = norm_task("instance_norm_cluster", body, {16, 8, 256, 256}, affine);
      REQUIRE(t);
      t->sizes["cpu"]["x"] = cpu;
      if (affine) t->sizes["cpu"]["weight"] = t->sizes["cpu"]["bias"] = {cpu[1]};
      INFO(body << " at " << cpu[0] << "x" << cpu[1] << "x" << cpu[2] << "x" << cpu[3]);
      auto seeds = the_coder().seeds(*t, 1);
      if (!seeds) FAIL(seeds.message());
      const candidate& c = seeds->front();
      INFO(c.source);
      REQUIRE(c.source.find("__cluster_dims__(4, 1, 1)") != std::string::npos);
      CHECK(c.source.find("_part(") == std::string::npos);
      CHECK(c.source.find("ks_wf_merge(wn, wm, w2, p_wn, p_wm, p_w2)") != std::string::npos);
      check_candidates(*t, *seeds);
      check_bit_identical(*t, c);
    }
  }
}

TEST_CASE("emulated: group_norm and instance_norm as row normalisations match the reference",
          "[rules][emulated][norms]") {
  struct norm_case {
    const char* name;
    const char* body;
    bool affine;
  };
  const norm_case cases[] = {
      {"group_norm", "torch.group_norm(x, 4, weight, bias, 1e-5)", true},
      {"group_norm_plain", "torch.group_norm(x, 2, None, None, 1e-5)", false},
      {"group_norm_chain", "torch.gelu(torch.group_norm(x * 2.0, 4, weight, bias, 1e-5)) + 1.0", true},
      {"instance_norm", "torch.instance_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False)", true},
      {"instance_norm_plain", "torch.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, False)", false},
  };
  for (const auto& nc : cases) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 8, 6, 8}, std::vector<int64_t>{2, 8, 5, 7}}) {
      auto t = norm_task(nc.name, nc.body, shape, nc.affine);
      REQUIRE(t);
      INFO(nc.name << " of " << shape[0] << "x" << shape[1] << "x" << shape[2] << "x" << shape[3]);
      auto seeds = the_coder().seeds(*t, 5);
      if (!seeds) FAIL(seeds.message());
      for (auto& c : *seeds) CHECK(c.recipe.at("stages").find("row_reduce") != std::string::npos);
      check_candidates(*t, *seeds);
    }
    // Few long rows on a 2-SM device: 4 groups of 2 x 320 x 41 (or 8 instances of
    // 320 x 41), split by the seeds whose block wants more than a block per row.
    auto t = norm_task(nc.name, nc.body, {1, 8, 320, 41}, nc.affine);
    REQUIRE(t);
    INFO(nc.name << " split");
    auto seeds = small_device_coder().seeds(*t, 5);
    if (!seeds) FAIL(seeds.message());
    std::vector<candidate> split;
    for (auto& c : *seeds)
      if (c.source.find("_part(") != std::string::npos) split.push_back(c);
    REQUIRE(!split.empty());
    check_candidates(*t, split);
    check_bit_identical(*t, split.front());
  }
  // Channels shorter than the lanes (a group norm after a GEMM: [batch, C], one element
  // a channel; or 3 a channel): pass 2 walks the row flat. Also split on a 2-SM device
  // (few rows of 4096 single-element channels).
  for (const char* body : {"torch.group_norm(x, 4, weight, bias, 1e-5)",
                           "torch.clamp(torch.group_norm(x, 2, weight, bias, 1e-5), -1.0, 1.0)"}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{5, 64}, std::vector<int64_t>{3, 16, 3}}) {
      auto t = norm_task("group_norm_short_channels", body, shape, true);
      REQUIRE(t);
      INFO(body << " of rank " << shape.size());
      auto seeds = the_coder().seeds(*t, 5);
      if (!seeds) FAIL(seeds.message());
      check_candidates(*t, *seeds);
    }
    auto t = norm_task("group_norm_short_channels_split", body, {2, 8192}, true);
    REQUIRE(t);
    auto seeds = small_device_coder().seeds(*t, 5);
    if (!seeds) FAIL(seeds.message());
    check_candidates(*t, *seeds);
  }
}

// Pools over one and three dims (the pool template's window over the last 1, 2 or 3
// dims): max with padding and dilation (NaN from log of negatives propagates), average
// counting padding or not, divisor_override, strides that do not divide, inputs with
// and without the batch dim, and an epilogue fused before the store.
TEST_CASE("emulated: 1-d and 3-d max and average pools match the reference", "[rules][emulated][pool]") {
  struct pool_case {
    const char* name;
    const char* body;
    std::vector<int64_t> shape;
  };
  const pool_case cases[] = {
      {"max_pool1d_dil", "torch.max_pool1d(x, [8], [1], [4], [3], False)", {2, 3, 70}},
      {"max_pool1d_nan", "torch.max_pool1d(torch.log(x), [3], [2], [1], [1], False)", {2, 3, 41}},
      {"max_pool1d_2d_input", "torch.max_pool1d(x, [4], [3], [2], [1], False) * 2.0 + 1.0", {5, 37}},
      {"avg_pool1d_pad", "torch.avg_pool1d(x, [8], [1], [4], False, True)", {2, 3, 70}},
      {"avg_pool1d_no_pad_count", "torch.tanh(torch.avg_pool1d(x, [5], [2], [2], False, False))", {2, 4, 33}},
      {"max_pool3d_dil", "torch.max_pool3d(x, [3, 3, 3], [2, 2, 2], [1, 1, 1], [3, 3, 3], False)", {2, 2, 13, 12, 11}},
      {"max_pool3d_4d_input",
       "torch.relu(torch.max_pool3d(x, [2, 3, 2], [1, 2, 2], [1, 1, 0], [1, 1, 1], False) - 0.5)",
       {3, 7, 9, 8}},
      {"avg_pool3d_pad", "torch.avg_pool3d(x, [3, 3, 3], [2, 2, 2], [1, 1, 1], False, True, None)", {2, 2, 9, 10, 11}},
      {"avg_pool3d_no_pad_count",
       "torch.avg_pool3d(x, [3, 2, 3], [2, 2, 1], [1, 1, 1], False, False, None)",
       {1, 3, 7, 6, 9}},
      {"avg_pool3d_divisor", "torch.avg_pool3d(x, [2, 2, 2], [2, 2, 2], [0, 0, 0], False, True, 5)", {2, 2, 6, 7, 8}},
  };
  for (const auto& pc : cases) {
    auto t = norm_task(pc.name, pc.body, pc.shape, false);
    REQUIRE(t);
    INFO(pc.name);
    auto seeds = the_coder().seeds(*t, 2);
    if (!seeds) FAIL(seeds.message());
    // (log(x) before a pool is its own elementwise kernel: pools take no prologue.)
    for (auto& c : *seeds)
      CHECK_THAT(c.recipe.at("stages"), Catch::EndsWith("pool") || Catch::Contains("pool+epilogue"));
    check_candidates(*t, *seeds, /*nan_positions=*/true);
  }
}

// The rounds change a pool's run of outputs a thread (thread_coarsening: longer runs;
// increase_grid_parallelism: shorter) where windows overlap; each result matches the
// reference, and disjoint windows (one output a thread) are left alone.
TEST_CASE("emulated: pools whose runs a round changed match the reference", "[rules][emulated][pool]") {
  struct pool_case {
    const char* name;
    const char* body;
    std::vector<int64_t> shape;
    bool overlap;
  };
  const pool_case cases[] = {
      {"max_pool1d_dil", "torch.max_pool1d(x, [8], [1], [4], [3], False)", {2, 3, 70}, true},
      {"avg_pool3d_pad",
       "torch.avg_pool3d(x, [3, 3, 3], [2, 2, 2], [1, 1, 1], False, True, None)",
       {2, 2, 9, 10, 23},
       true},
      {"avg_pool2d_disjoint", "torch.avg_pool2d(x, [3, 3], [3, 3], [0, 0], False, True, None)", {2, 2, 9, 12}, false},
  };
  for (const auto& pc : cases) {
    auto t = norm_task(pc.name, pc.body, pc.shape, false);
    REQUIRE(t);
    INFO(pc.name);
    auto seeds = the_coder().seeds(*t, 1);
    if (!seeds) FAIL(seeds.message());
    std::vector<candidate> changed;
    for (const char* method : {"thread_coarsening", "increase_grid_parallelism"}) {
      optimize_input in;
      in.task = *t;
      in.base = seeds->front();
      in.plan.chosen = method;
      auto c = the_coder().optimize(in);
      INFO(method << (c ? std::string() : ": " + c.message()));
      CHECK(bool(c) == pc.overlap);
      if (c) {
        CHECK(c->recipe.at("elements_per_thread") != seeds->front().recipe.at("elements_per_thread"));
        changed.push_back(*c);
      }
    }
    check_candidates(*t, changed, /*nan_positions=*/true);
  }
}

// batch_norm with the batch's statistics (training mode, as KernelBench runs it): a
// channel's rows in every batch are reduced into partial states, which each block of
// the second kernel merges batch by batch before it normalises its chunk. Many
// batches and one, spatial sizes a multiple of 4 and not, with and without the
// affine, a chain before and after it; on a 2-SM device the rows are also split over
// several blocks each (partials per batch and part). Reruns are bit for bit.
TEST_CASE("emulated: batch_norm with the batch's statistics matches the reference",
          "[rules][emulated][norms][batch_norm]") {
  struct bn_case {
    const char* name;
    const char* body;
    bool affine;
  };
  const bn_case cases[] = {
      {"batch_norm", "torch.batch_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False)", true},
      {"batch_norm_plain", "torch.batch_norm(x, None, None, None, None, True, 0.1, 1e-3, False)", false},
      {"batch_norm_chain",
       "torch.tanh(torch.batch_norm(x * 2.0 - 1.0, weight, bias, None, None, True, 0.1, 1e-5, False)) * 0.5", true},
  };
  for (const auto& bc : cases) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 8, 6, 8}, std::vector<int64_t>{5, 4, 5, 7},
                                       std::vector<int64_t>{1, 6, 9, 12}, std::vector<int64_t>{4, 3, 13}}) {
      auto t = norm_task(bc.name, bc.body, shape, bc.affine);
      REQUIRE(t);
      INFO(bc.name << " of " << shape.size() << "-d shape " << shape[0] << "x" << shape[1] << "x" << shape[2]);
      auto seeds = the_coder().seeds(*t, 5);
      if (!seeds) FAIL(seeds.message());
      for (auto& c : *seeds) {
        CHECK(c.recipe.at("stages").find("row_reduce") != std::string::npos);
        CHECK(c.source.find("_part(") != std::string::npos);
        CHECK(c.source.find("atomic") == std::string::npos);
      }
      check_candidates(*t, *seeds);
    }
    // Few long rows on a 2-SM device: each (batch, channel) row split over blocks too.
    auto t = norm_task(bc.name, bc.body, {3, 4, 320, 41}, bc.affine);
    REQUIRE(t);
    INFO(bc.name << " split");
    auto seeds = small_device_coder().seeds(*t, 5);
    if (!seeds) FAIL(seeds.message());
    check_candidates(*t, *seeds);
    check_bit_identical(*t, seeds->front());
  }
}

// Reductions over a middle dim that read their column twice (middle_reduce.hpp): a
// normalisation over dim 1, or a keepdim reduction with the chain after it fused
// (RMSNorm over the channels of NCHW). Columns that the registers hold whole at the
// task's size (one slice a column and 8 groups of 32 columns a block up to 32 values,
// two slices and 4 groups for 64), and columns longer at run time than at the task's
// size (the rest read from memory again).
TEST_CASE("emulated: middle-dim reductions read twice match the reference", "[rules][emulated][middle]") {
  struct middle_case {
    const char* name;
    const char* body;
    std::vector<int64_t> declared, run;
  };
  const middle_case cases[] = {
      {"rms_channels", "x / torch.sqrt(torch.mean(x ** 2, 1, True) + 1e-5)", {2, 8, 5, 7}, {2, 8, 5, 7}},
      {"rms_channels_long", "x / torch.sqrt(torch.mean(x ** 2, 1, True) + 1e-5)", {2, 16, 5, 7}, {2, 70, 3, 5}},
      {"rms_channels_64", "x / torch.sqrt(torch.mean(x ** 2, 1, True) + 1e-5)", {2, 64, 5, 7}, {2, 100, 3, 5}},
      {"softmax_dim1", "torch.softmax(x, 1)", {2, 40, 33}, {2, 40, 33}},
      {"log_softmax_dim1_long", "torch.log_softmax(x * 0.5, 1)", {2, 24, 33}, {3, 50, 7}},
      {"sub_logsumexp_dim1", "x - torch.logsumexp(x, [1], True)", {3, 50, 7}, {3, 50, 7}},
      {"scale_by_sum_dim1", "x * torch.sum(x, [1], True)", {2, 9, 11}, {2, 9, 11}},
      {"l1_over_two_dims", "x / torch.mean(torch.abs(x), [1, 2], True)", {2, 6, 5, 7}, {2, 6, 5, 7}},
      {"var_dim1",
       "(x - torch.mean(x, [1], True)) * torch.rsqrt(torch.var(x, [1], False, True) + 1e-5)",
       {2, 12, 9},
       {2, 12, 9}},
  };
  for (const auto& mc : cases) {
    auto t = norm_task(mc.name, mc.body, mc.declared, false);
    REQUIRE(t);
    t->sizes["cpu"] = {{"x", mc.run}};
    INFO(mc.name);
    auto seeds = the_coder().seeds(*t, 5);
    if (!seeds) FAIL(seeds.message());
    bool two_pass = false;
    for (auto& c : *seeds) two_pass = two_pass || c.source.find("read twice") != std::string::npos;
    CHECK(two_pass);
    check_candidates(*t, *seeds);
  }
}

// Reverse and exclusive scans (the flips and the zero-padded shift fused into the
// scan's loads and stores) and scans of few long rows (a block per row, or split over
// several blocks: reduce, then scan), against the reference; split scans rerun bit
// for bit. Declared shapes pick the form: many rows (a warp per row), 8 rows (a block
// per row), 2 rows of 50000 (13 blocks a row on an H200).
TEST_CASE("emulated: reverse, exclusive and long-row scans match the reference", "[rules][emulated][scan]") {
  struct scan_case {
    const char* name;
    const char* body;
  };
  const scan_case cases[] = {
      {"cumsum_reverse", "torch.cumsum(x.flip(1), 1).flip(1)"},
      {"cumsum_flip_in", "torch.cumsum(x.flip(1), 1)"},
      {"cumsum_flip_out", "torch.cumsum(x, 1).flip(1)"},
      {"cumsum_exclusive",
       "torch.cumsum(torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x), dim=1).narrow(1, 0, x.size(1)), "
       "dim=1)"},
      {"cumsum_exclusive_after",
       "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), torch.cumsum(x.narrow(1, 0, x.size(1) - 1), 1)), 1)"},
      {"cumprod_reverse", "torch.cumprod((x * 0.001 + 1.0).flip(1), 1).flip(1)"},
      {"cumsum_reverse_exp", "torch.exp(torch.cumsum(x.flip(1), 1).flip(1) * 0.01) - 1.0"},
  };
  struct form_case {
    std::vector<int64_t> declared, run;
    const char* form;
  };
  const form_case forms[] = {
      {{32768, 4096}, {5, 1000}, "a warp per row"},
      {{8, 4096}, {3, 1001}, "a block per row"},
      {{2, 50000}, {2, 50000}, "few long rows"},
  };
  for (const auto& sc : cases) {
    for (const auto& fc : forms) {
      auto t = norm_task(sc.name, sc.body, fc.declared, false);
      REQUIRE(t);
      t->sizes["cpu"] = {{"x", fc.run}};
      INFO(sc.name << " " << fc.form);
      auto seeds = the_coder().seeds(*t, 1);
      if (!seeds) FAIL(seeds.message());
      const candidate& c = seeds->front();
      INFO(c.source);
      CHECK(c.recipe.at("stages").find("scan") != std::string::npos);
      CHECK(c.recipe.count("fallback") == 0);  // no flip, cat or narrow left as a library step
      CHECK(c.source.find(fc.form) != std::string::npos);
      check_candidates(*t, *seeds);
      if (std::string(fc.form) == "few long rows") check_bit_identical(*t, c);
    }
  }
  // Along a middle dim: a thread per position walks its column reversed.
  auto mid = norm_task("cumsum_reverse_dim1", "torch.cumsum(x.flip(1), 1).flip(1)", {4, 30, 9}, false);
  REQUIRE(mid);
  check_task(mid, 2);
  // The shift after the scan along a middle dim, with an epilogue after the cat.
  auto mid_ex = norm_task("cumsum_exclusive_after_dim1",
                          "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), torch.cumsum(x.narrow(1, 0, "
                          "x.size(1) - 1), 1)), 1) * 2.0",
                          {4, 30, 9}, false);
  REQUIRE(mid_ex);
  auto mid_seeds = the_coder().seeds(*mid_ex, 2);
  if (!mid_seeds) FAIL(mid_seeds.message());
  for (const candidate& c : *mid_seeds) {
    INFO(c.source);
    CHECK(c.recipe.count("fallback") == 0);
    CHECK(c.source.find("with the elementwise chain after it fused") != std::string::npos);
  }
  check_candidates(*mid_ex, *mid_seeds);
}

// A bool mask (KernelBench's 93_masked_cumsum: cumsum(x * mask)) is read by the
// kernels as ATen promotes it, 0.0f or 1.0f, by byte loads of its own: the chain before
// a scan computed on the scan's loads (every form of the scan, and along a middle dim),
// and the mask in elementwise kernels (vector and tail paths, broadcast along rows) and
// in row reductions' prologues (cached rows), as a factor or as where's condition and
// masked_fill's mask (a softmax over masked rows: -inf where masked). Nothing is left
// to a library step.
// Declared at x_shape (the layout's size), run at `run` (x's; the mask's broadcast dims
// stay 1) when given.
result<task_spec> masked_task(const std::string& name, const std::string& body, const std::vector<int64_t>& x_shape,
                              const std::vector<int64_t>& mask_shape, const std::vector<int64_t>& run) {
  auto dims = [](const std::vector<int64_t>& s) {
    std::string t;
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return "[" + t + "]";
  };
  const std::string yaml =
      "name: " + name + "\nreference:\n  torchscript: |\n    def forward(x, mask):\n        return " + body +
      "\ninputs:\n  - name: x\n    shape: " + dims(x_shape) +
      "\n    init: {kind: normal, mean: 0.5, std: 2}\n  - name: mask\n    shape: " + dims(mask_shape) +
      "\n    dtype: bool\nseed: 5\n";
  auto t = parse_task(yaml, name + ".yaml", kSource);
  if (t && !run.empty()) {
    std::vector<int64_t> m = run;
    for (size_t d = 0; d < m.size(); ++d)
      if (mask_shape[d] == 1) m[d] = 1;
    t->sizes["cpu"] = {{"x", run}, {"mask", m}};
  }
  return t;
}

TEST_CASE("emulated: a bool mask read by scan, elementwise and row kernels matches the reference",
          "[rules][emulated][scan][bool]") {
  struct mask_case {
    const char* name;
    const char* body;
    std::vector<int64_t> x, mask, run;
    const char* stage;  // what the seeds' stages must contain
    const char* form;   // a phrase of the source, or ""
  };
  const mask_case cases[] = {
      {"masked_cumsum_warp",
       "torch.cumsum(x * mask, dim=1)",
       {32768, 4096},
       {32768, 4096},
       {5, 1001},
       "scan+prologue",
       "a warp per row"},
      {"masked_cumsum_block",
       "torch.cumsum(x * mask, dim=1)",
       {8, 4096},
       {8, 4096},
       {3, 1001},
       "scan+prologue",
       "a block per row"},
      {"masked_cumsum_long",
       "torch.cumsum(x * mask, dim=1)",
       {2, 50000},
       {2, 50000},
       {},
       "scan+prologue",
       "few long rows"},
      {"masked_cumsum_mid",
       "torch.cumsum(x * mask, dim=1) * 2.0",
       {4, 30, 9},
       {4, 30, 9},
       {},
       "scan+prologue+epilogue",
       "a middle dim"},
      {"masked_cumprod_rows", "torch.cumprod(x * 0.01 + mask, dim=1)", {5, 333}, {5, 1}, {}, "scan+prologue", ""},
      {"mask_elementwise", "torch.relu(x * mask + 1.0) - mask * 0.5", {7, 1003}, {7, 1003}, {}, "elementwise", ""},
      {"mask_elementwise_rows", "x * mask", {64, 4096}, {64, 1}, {}, "elementwise", ""},
      {"mask_only", "mask * 2.0", {5, 7}, {5, 7}, {}, "elementwise", ""},
      {"masked_row_sum", "torch.sum(x * mask, dim=1)", {9, 2050}, {9, 2050}, {}, "row_reduce+prologue", ""},
      {"masked_softmax_cached", "torch.softmax(x * mask, dim=1)", {16, 1000}, {16, 1000}, {}, "row_reduce", ""},
      {"where_mask", "torch.where(mask, x, x * 0.1) + 1.0", {7, 1003}, {7, 1003}, {}, "elementwise", ""},
      {"where_scalar_other", "torch.where(mask, torch.exp(x), 0.0)", {5, 333}, {5, 1}, {}, "elementwise", ""},
      {"where_scalar_self", "torch.where(mask, 1.5, x)", {5, 333}, {5, 333}, {}, "elementwise", ""},
      {"masked_fill_scalar", "torch.masked_fill(x, mask, 0.5) * 2.0", {6, 1001}, {6, 1001}, {}, "elementwise", ""},
      {"masked_fill_softmax",
       "torch.softmax(torch.masked_fill(x, mask, float('-inf')), -1)",
       {12, 1000},
       {12, 1000},
       {},
       "row_reduce",
       ""},
      {"masked_fill_rows_sum",
       "torch.sum(torch.masked_fill(x, mask, 0.0), dim=1)",
       {9, 2050},
       {9, 1},
       {},
       "row_reduce+prologue",
       ""},
  };
  for (const auto& mc : cases) {
    INFO(mc.name);
    auto t = masked_task(mc.name, mc.body, mc.x, mc.mask, mc.run);
    if (!t) FAIL(t.message());
    auto seeds = the_coder().seeds(*t, 2);
    if (!seeds) FAIL(seeds.message());
    for (const candidate& c : *seeds) {
      INFO(c.recipe.at("stages"));
      CHECK(c.recipe.count("fallback") == 0);
      CHECK_THAT(c.recipe.at("stages"), Catch::Contains(mc.stage));
      CHECK_THAT(c.source, Catch::Contains("const bool* __restrict__ m"));
    }
    if (*mc.form) CHECK_THAT(seeds->front().source, Catch::Contains(mc.form));
    check_candidates(*t, *seeds);
  }
  // A causal-attention mask made in the graph (`att.masked_fill(b == 0, -inf)`, then a
  // softmax): the comparison is a library step writing bool, the masked_fill the
  // softmax's prologue reading it.
  {
    const std::string yaml =
        "name: attention_mask\nreference:\n  torchscript: |\n    def forward(x, b):\n"
        "        return torch.softmax(torch.masked_fill(x, torch.lt(b, 0.3), float('-inf')), -1)\n"
        "inputs:\n  - {name: x, shape: [16, 1000]}\n  - {name: b, shape: [16, 1000], init: {kind: uniform, low: 0, "
        "high: 1}}\nseed: 5\n";
    auto at = parse_task(yaml, "attention_mask.yaml", kSource);
    if (!at) FAIL(at.message());
    auto seeds = the_coder().seeds(*at, 2);
    if (!seeds) FAIL(seeds.message());
    CHECK(seeds->front().recipe.at("stages") == "fallback:aten::lt,row_reduce+prologue");
    for (const candidate& c : *seeds) CHECK_THAT(c.source, Catch::Contains("const bool* __restrict__ m"));
    check_candidates(*at, *seeds);
  }
  // The plainest seed keeps the chain a kernel of its own (fuse_prologue 0); fusing it
  // into the scan's loads is a method that seed offers, and its result matches too.
  auto t = masked_task("masked_cumsum_unfused", "torch.cumsum(x * mask, dim=1)", {6, 700}, {6, 700}, {});
  REQUIRE(t);
  auto all = the_coder().seeds(*t, 8);
  if (!all) FAIL(all.message());
  std::vector<candidate> fused;
  for (const candidate& c : *all) {
    if (c.recipe.at("fuse_prologue") != "0") continue;
    CHECK(c.recipe.at("stages") == "elementwise,scan");
    CHECK_THAT(c.recipe.at("methods"), Catch::Contains("fuse_elementwise_chain"));
    optimize_input in;
    in.task = *t;
    in.base = c;
    in.plan.chosen = "fuse_elementwise_chain";
    auto f = the_coder().optimize(in);
    if (!f) FAIL(f.message());
    CHECK(f->recipe.at("stages") == "scan+prologue");
    fused.push_back(*f);
  }
  REQUIRE(fused.size() == 1);
  check_candidates(*t, fused);
}

// A split cumsum's chunks start from the partials of the chunks before them, summed in
// double: still within an fp32 rounding of the exact running sum.
TEST_CASE("emulated: a split cumsum is within an fp32 rounding of the exact running sum",
          "[rules][emulated][scan][split]") {
  auto task = norm_task("cumsum_long", "torch.cumsum(x, 1)", {2, 60000}, false);
  REQUIRE(task);
  auto seeds = the_coder().seeds(*task, 1);
  if (!seeds) FAIL(seeds.message());
  REQUIRE(seeds->front().source.find("_part(") != std::string::npos);
  at::Tensor x = at::rand({2, 60000}, at::kFloat) * 0.5 + 0.75;
  auto outs = run_candidate(*task, seeds->front(), {x}, {});
  if (!outs) FAIL(outs.message());
  at::Tensor exact = at::cumsum(x.to(at::kDouble), 1);
  const double worst = (((*outs)[0].to(at::kDouble) - exact).abs() / exact.abs()).max().item<double>();
  INFO("largest relative error " << worst);
  CHECK(worst <= 1.5 * std::ldexp(1.0, -24));
}

// Many short rows share a warp (at least 4 elements a lane): rows of 5 to 24 elements,
// 37 rows (the last warp's groups past the end repeat the last row), every seed (the
// warp ones pack rows; the block ones stay a block per row).
TEST_CASE("emulated: short rows packed several a warp match the reference", "[rules][emulated][short]") {
  const std::pair<const char*, const char*> cases[] = {
      {"softmax_short", "torch.softmax(x, -1)"},
      {"log_softmax_short", "torch.log_softmax(x * 2.0, -1)"},
      {"layer_norm_short", "torch.layer_norm(x, [x.size(-1)], None, None, 1e-5)"},
      {"sub_logsumexp_short", "x - torch.logsumexp(x, [-1], True)"},
      {"sum_short", "torch.sum(x, [-1])"},
      {"var_short", "torch.var(x, [-1], True, True)"},
  };
  for (auto [name, body] : cases) {
    for (int64_t len : {5, 16, 24}) {
      auto t = norm_task(name, body, {37, len}, false);
      REQUIRE(t);
      INFO(name << " rows of " << len);
      auto seeds = the_coder().seeds(*t, 5);
      if (!seeds) FAIL(seeds.message());
      bool packed = false;
      for (auto& c : *seeds) packed = packed || c.source.find(" rows a warp") != std::string::npos;
      CHECK(packed);
      check_candidates(*t, *seeds);
    }
  }
}

// argmax and argmin as reductions (the best value and its index, the index carried in
// a float state variable as an int's bits): over the last dim (a warp or a block per
// row, short rows packed), a middle dim (KernelBench's 51_Argmax_over_a_dimension at a
// small size), the first dim and a whole 1-d tensor, with keepdim, behind a fused
// prologue, on ties (the first index wins) and on NaN (the first NaN wins, as torch).
TEST_CASE("emulated: argmax and argmin match the reference, first index on ties and NaN", "[rules][emulated][arg]") {
  struct arg_case {
    const char* name;
    const char* body;
    std::vector<int64_t> shape;
  };
  const arg_case cases[] = {
      {"argmax_last", "torch.argmax(x, -1)", {37, 129}},
      {"argmin_last_keepdim", "torch.argmin(x, 1, True)", {5, 1000}},
      {"argmax_short_rows", "torch.argmax(x, 2)", {4, 9, 6}},
      {"argmax_middle", "torch.argmax(x, 1)", {3, 40, 33}},
      {"argmin_middle_keepdim", "torch.argmin(x, 1, True)", {2, 17, 5, 7}},
      {"argmax_first_dim", "torch.argmax(x, 0)", {30, 6, 5}},
      {"argmax_1d", "torch.argmax(x, 0)", {1000}},
      {"argmax_ties", "torch.argmax(torch.floor(x), 1)", {16, 300}},
      {"argmin_ties_middle", "torch.argmin(torch.floor(x), 1)", {3, 40, 33}},
      {"argmax_nan", "torch.argmax(torch.log(x), 1)", {16, 300}},
      {"argmin_nan_middle", "torch.argmin(torch.log(x), 1)", {3, 40, 33}},
  };
  for (const auto& ac : cases) {
    auto t = norm_task(ac.name, ac.body, ac.shape, false);
    REQUIRE(t);
    INFO(ac.name);
    auto seeds = the_coder().seeds(*t, 5);
    if (!seeds) FAIL(seeds.message());
    for (auto& c : *seeds) CHECK(c.recipe.at("stages").find("row_reduce") != std::string::npos);
    check_candidates(*t, *seeds);
  }
}

// A candidate's library step that runs `op` (any overload: aten::conv3d, ...); null
// where it has none.
const plan_step* library_step(const candidate& c, const std::string& op) {
  for (const plan_step& s : c.plan.steps)
    if (s.kind == "library" && (s.name == op || s.name.rfind(op + ".", 0) == 0)) return &s;
  return nullptr;
}

// A [conv_layout] case: `t`'s two seeds, the first with its `op` step channels-last
// exactly when `nhwc` (the step's attribute `attr` -- result_layout for conv2d's
// template, run_layout for the ops run through their schema -- and the recipe's
// conv_layout; a stage `stage` where one is named), the second NCHW (no step has
// `attr`); `more` checks what one case alone has; both seeds match the reference.
void check_conv_layout_seeds(const task_spec& t, const std::string& op, const std::string& attr, bool nhwc,
                             const char* stage,
                             const std::function<void(const candidate&, const plan_step&)>& more = {}) {
  auto cands = the_coder().seeds(t, 2);
  if (!cands) FAIL(cands.message());
  REQUIRE(cands->size() == 2);
  const candidate& first = (*cands)[0];
  const plan_step* lib = library_step(first, op);
  REQUIRE(lib);
  CHECK(lib->attrs.count(attr) == (nhwc ? 1u : 0u));
  CHECK(first.recipe.count("conv_layout") == (nhwc ? 1u : 0u));
  if (nhwc) {
    if (attr == "run_layout") CHECK(lib->attrs.at(attr) == "channels_last");
    if (*stage) CHECK(first.recipe.at("stages").find(stage) != std::string::npos);
    if (more) more(first, *lib);
  }
  for (const plan_step& s : (*cands)[1].plan.steps) CHECK(s.attrs.count(attr) == 0);
  check_candidates(t, *cands);
}

// The convolution the [conv_bias] and [conv_layout] variants build on: the suite's
// conv2d_relu_bias task's own (x, weight, bias), 3x3, padding 1.
const std::string kBiasedConv = "torch.conv2d(x, weight, bias, [1, 1], [1, 1], [1, 1], 1)";

std::optional<task_spec> biased_conv_task() {
  auto base = load_task(kSource / "bench/suites/ops/conv2d_relu_bias.yaml");
  REQUIRE(base);
  return *base;
}

// `base` as task `name` computing `body` from (x, weight, bias, bias2) at the CPU size
// `sz` (their shapes in that order); declared at that size too where `declare` (ranks
// or channels the suite's task does not have).
task_spec conv_variant(const task_spec& base, const std::string& name, const std::string& body,
                       const std::vector<std::vector<int64_t>>& sz, bool declare = false) {
  task_spec t = base;
  t.name = name;
  t.torchscript = "def forward(x, weight, bias, bias2):\n" + body;
  t.sizes["cpu"] = {{"x", sz.at(0)}, {"weight", sz.at(1)}, {"bias", sz.at(2)}, {"bias2", sz.at(3)}};
  if (declare)
    for (auto* list : {&t.inputs, &t.parameters})
      for (auto& e : *list) e.shape = t.sizes["cpu"].at(e.name);
  return t;
}

// A convolution's bias added by the kernel that reads its result (split_conv_bias):
// the library step runs without it and the kernel reads the task's own bias as
// [C, 1, ...]; over a middle dim it is read at the channel, over rows at the row.
// Where nothing but an output reads the convolution, the bias stays ATen's.
TEST_CASE("emulated: a convolution's bias added in the kernel after it matches the reference",
          "[rules][emulated][conv_bias]") {
  const std::optional<task_spec> base = biased_conv_task();
  const std::string conv = kBiasedConv;
  struct variant {
    const char* name;
    std::string body;
    bool split;  // the convolution runs without its bias
  };
  const variant variants[] = {
      {"conv_bias_min_channels", "    return torch.tanh(torch.min(" + conv + ", 1, True)[0])\n", true},
      {"conv_bias_instance_norm",
       "    return torch.instance_norm(" + conv + ", None, None, None, None, True, 0.1, 1e-5, False) / 2.0\n", true},
      {"conv_bias_spatial_amax", "    return torch.sigmoid(torch.amax(" + conv + " * 2.0, [2, 3]))\n", true},
      {"conv_transpose_bias_clamp",
       "    y = torch.conv2d(x, weight, None, [1, 1], [1, 1], [1, 1], 1)\n"
       "    return torch.clamp(torch.conv_transpose2d(y, weight_t, bias, [2, 2], [1, 1], [1, 1], 1, [1, 1]), -0.5, "
       "0.5)\n",
       true},
      {"convolution_bias_sigmoid",
       "    return torch.sigmoid(torch._convolution(x, weight, bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, False, "
       "False, True, True))\n",
       true},
      {"conv_bias_returned", "    y = " + conv + "\n    return y, torch.relu(y + bias2)\n", false},
      {"conv_bias_max_pool", "    return torch.max_pool2d(" + conv + ", [2, 2], [2, 2], [0, 0], [1, 1], False)\n",
       false},
  };
  for (const variant& v : variants) {
    INFO(v.name);
    task_spec t = *base;
    t.name = v.name;
    t.torchscript = "def forward(x, weight, bias, bias2, weight_t):\n" + v.body;
    t.parameters.push_back({"weight_t", {128, 128, 3, 3}, "float32", t.parameters[0].init});
    t.sizes["cpu"]["weight_t"] = {8, 8, 3, 3};
    auto cands = the_coder().seeds(t, 2);
    if (!cands) FAIL(cands.message());
    for (const candidate& c : *cands) {
      const plan_step* lib = nullptr;
      bool kernel_reads_bias = false;
      for (const plan_step& s : c.plan.steps) {
        if (s.kind == "library" && !lib) lib = &s;
        for (const plan_arg& a : s.args)
          if (s.kind == "kernel" && a.kind == "tensor" && a.value == "bias") kernel_reads_bias = true;
      }
      REQUIRE(lib);
      CHECK(lib->args.size() == (v.split ? 2u : 3u));
      CHECK(kernel_reads_bias == v.split);
      for (const plan_step& s : c.plan.steps) CHECK(s.name.find("unsqueeze") == std::string::npos);
    }
    check_candidates(t, *cands);
  }
  // An unsqueezed input read by a kernel is a view (no step); returned as is, it is an
  // output some step must write (a library step, as before).
  {
    task_spec t = *base;
    t.name = "bias_view_returned";
    t.torchscript =
        "def forward(x, weight, bias, bias2):\n    v = bias.unsqueeze(-1)\n    return torch.relu(v) * 2.0, v\n";
    auto cands = the_coder().seeds(t, 2);
    if (!cands) FAIL(cands.message());
    for (const candidate& c : *cands) {
      int library = 0;
      for (const plan_step& s : c.plan.steps) library += s.kind == "library";
      CHECK(library == 1);
    }
    check_candidates(t, *cands);
  }
  // Few long rows on a 2-SM device: the reduction is split, and its first kernel reads
  // the bias at the block's row too (a batch norm: every row's partials are merged).
  for (const char* body :
       {"    return torch.sigmoid(torch.amax(torch.conv2d(x, weight, bias, [1, 1], [1, 1], [1, 1], 1)"
        " * 2.0, [2, 3]))\n",
        "    return torch.batch_norm(torch.conv2d(x, weight, bias, [1, 1], [1, 1], [1, 1], 1), None, None, "
        "None, None, True, 0.1, 1e-5, False)\n"}) {
    INFO(body);
    task_spec t = *base;
    t.name = "conv_bias_split_rows";
    t.torchscript = std::string("def forward(x, weight, bias, bias2):\n") + body;
    // (the layout is chosen at the task's own shapes: these, not the suite's)
    t.inputs[0].shape = {1, 4, 96, 96};
    t.parameters[0].shape = {2, 4, 3, 3};
    t.parameters[1].shape = {2};
    t.parameters[2].shape = {2, 1, 1};
    t.sizes.clear();
    auto cands = small_device_coder().seeds(t, 5);
    if (!cands) FAIL(cands.message());
    std::vector<candidate> split;
    for (auto& c : *cands)
      if (c.source.find("_part(") != std::string::npos) split.push_back(c);
    REQUIRE(!split.empty());
    check_candidates(t, split);
  }
}

// A convolution computed channels-last (conv_layout.hpp): the first seed runs cuDNN on
// NHWC input and weight, hands its result on as [N, H, W, C], and the kernels after
// it read it so: elementwise chains over [N, H, W, C] (the bias read at the channel),
// reductions over the channels as rows of the last dim, and what the graph returns
// stored back as [N, C, H, W] (a transposed tile, or the same memory where the
// channels are reduced to one; what no chain makes, the convolution itself or a
// softmax, is copied back by one). Readers the rewrite does not take leave it NCHW.
TEST_CASE("emulated: channels-last convolutions read as NHWC by the kernels match the reference",
          "[rules][emulated][conv_layout]") {
  const std::optional<task_spec> base = biased_conv_task();
  const std::string conv = kBiasedConv;
  struct variant {
    const char* name;
    std::string body;
    bool nhwc;          // the first seed's convolution runs channels-last
    const char* stage;  // a stage the first seed has ("" for none)
  };
  const variant variants[] = {
      {"nhwc_relu_bias", "    return torch.relu(" + conv + " + bias2)\n", true, "elementwise+transposed_store"},
      {"nhwc_min_tanh_tanh", "    return torch.tanh(torch.tanh(torch.min(" + conv + ", 1, True)[0]))\n", true,
       "row_reduce"},
      {"nhwc_mish_mish", "    return torch.mish(torch.mish(" + conv + "))\n", true, "elementwise+transposed_store"},
      {"nhwc_softmax_channels", "    return torch.softmax(" + conv + ", 1) * 2.0\n", true,
       "elementwise+transposed_store"},
      {"nhwc_sum_channels", "    return torch.sum(" + conv + " * 0.5, [1])\n", true, ""},
      {"nhwc_two_outputs", "    y = torch.relu(" + conv + ")\n    return y, torch.amax(y, [1], True) + bias2\n", true,
       "elementwise+transposed_store"},
      {"nhwc_batch_scale", "    return torch.sigmoid(" + conv + " * x[:, :1, :1, :1])\n", true,
       "elementwise+transposed_store"},
      // (an operand whose memory the permutation moves: the product reads NCHW, the
      // convolution copied back)
      {"nhwc_spatial_operand", "    return torch.sigmoid(" + conv + " * x[:1, :1])\n", true,
       "elementwise+transposed_store"},
      {"nhwc_conv_returned", "    y = " + conv + "\n    return y, torch.relu(y + bias2)\n", true,
       "elementwise+transposed_store"},
      {"nhwc_conv_alone", "    return " + conv + "\n", true, "elementwise+transposed_store"},
      // A traced convolution (aten::_convolution) is the named one (conv_names.hpp).
      {"nhwc_traced",
       "    return torch.relu(torch._convolution(x, weight, bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, False, "
       "False, True, True) + bias2)\n",
       true, "elementwise+transposed_store"},
      {"nhwc_softmax_returned", "    return torch.softmax(" + conv + ", 1)\n", true, "elementwise+transposed_store"},
      // The graph's only convolution stays channels-last before a reader the rewrite
      // does not take, which reads the NCHW value back (copied by a chain of its own).
      {"nhwc_instance_norm",
       "    return torch.instance_norm(" + conv + ", None, None, None, None, True, 0.1, 1e-5, False) / 2.0\n", true,
       "elementwise+transposed_store"},
      {"nhwc_relu_maxpool", "    return torch.max_pool2d(torch.relu(" + conv + " + bias2), [2, 2], [2, 2])\n", true,
       "elementwise+transposed_store"},
  };
  // The suite's own small size, and one whose channels and positions fill no tile.
  const std::vector<std::vector<std::vector<int64_t>>> sizes = {{{2, 4, 8, 8}, {8, 4, 3, 3}, {8}, {8, 1, 1}},
                                                                {{3, 3, 11, 13}, {40, 3, 3, 3}, {40}, {40, 1, 1}}};
  for (const variant& v : variants)
    for (const auto& sz : sizes) {
      INFO(v.name << " at " << sz[1][0] << " channels");
      const task_spec t = conv_variant(*base, v.name, v.body, sz);
      check_conv_layout_seeds(t, "aten::conv2d", "result_layout", v.nhwc, v.stage,
                              [](const candidate& first, const plan_step& lib) {
                                CHECK(lib.attrs.at("memory_format") == "channels_last");
                                CHECK(first.origin.find("channels-last") != std::string::npos);
                              });
    }
  // A traced convolution whose flags are not the named op's defaults (benchmark on)
  // keeps its name: a library step of its own, NCHW, still correct. (At the suite's
  // size only: an aten::_convolution fallback's result shape is matched by value to the
  // traced sizes, as any fallback's without a formula in shapes.cpp.)
  for (const auto& sz : {sizes[0]}) {
    INFO("traced with benchmark at " << sz[1][0] << " channels");
    task_spec t = *base;
    t.name = "nchw_traced_benchmark";
    t.torchscript =
        "def forward(x, weight, bias, bias2):\n    return torch.relu(torch._convolution(x, weight, bias, [1, 1], [1, "
        "1], [1, 1], False, [0, 0], 1, True, False, True, True) + bias2)\n";
    t.sizes["cpu"] = {{"x", sz[0]}, {"weight", sz[1]}, {"bias", sz[2]}, {"bias2", sz[3]}};
    auto cands = the_coder().seeds(t, 2);
    if (!cands) FAIL(cands.message());
    for (const candidate& c : *cands) {
      CHECK(library_step(c, "aten::_convolution"));
      CHECK_FALSE(library_step(c, "aten::conv2d"));
      CHECK(c.recipe.count("conv_layout") == 0);
    }
    check_candidates(t, *cands);
  }
  // Between two convolutions a reader the rewrite does not take (an instance norm)
  // reads the first's NCHW value back; the second runs channels-last too.
  for (const auto& sz : sizes) {
    INFO("two convolutions at " << sz[1][0] << " channels");
    task_spec t = *base;
    t.name = "nhwc_two_convolutions";
    t.torchscript = "def forward(x, weight, bias, bias2):\n    z = torch.instance_norm(" + conv +
                    ", None, None, None, None, True, 0.1, 1e-5, False)\n    return torch.relu(torch.conv2d(z[:, :" +
                    std::to_string(sz[0][1]) + "], weight, bias, [1, 1], [1, 1], [1, 1], 1) + bias2)\n";
    t.sizes["cpu"] = {{"x", sz[0]}, {"weight", sz[1]}, {"bias", sz[2]}, {"bias2", sz[3]}};
    auto cands = the_coder().seeds(t, 2);
    if (!cands) FAIL(cands.message());
    REQUIRE(cands->size() == 2);
    std::vector<size_t> layouts;
    for (const plan_step& s : (*cands)[0].plan.steps)
      if (s.kind == "library" && s.name.rfind("aten::conv2d", 0) == 0)
        layouts.push_back(s.attrs.count("result_layout"));
    CHECK(layouts == std::vector<size_t>{1, 1});
    check_candidates(t, *cands);
  }
}

// A transposed convolution computed channels-last: no template takes it, so the first
// seed runs it through its ATen schema with attrs.run_layout channels_last (its 4-d
// operands passed channels-last, its result handed on as [N, H, W, C]) and the kernels
// after it read that, as for conv2d above. An operand of one element made on the
// result's device (level 2's 93_..._Min reads x.device) reads the same in either order.
// A reader the rewrite does not take (a pool, a batch norm, a sum over H) reads the
// NCHW value back, stored by the chain before it through a transposed tile into a
// buffer of its own, or copied back by a chain of its own.
TEST_CASE("emulated: channels-last transposed convolutions read as NHWC match the reference",
          "[rules][emulated][conv_layout]") {
  const std::optional<task_spec> base = biased_conv_task();
  const std::string conv = "torch.conv_transpose2d(x, weight, bias, [2, 2], [1, 1], [1, 1], 1, [1, 1])";
  struct variant {
    const char* name;
    std::string body;
    bool nhwc;  // the first seed's transposed convolution runs channels-last
  };
  const variant variants[] = {
      {"nhwc_t_bias_clamp", "    return torch.clamp(" + conv + " + bias2, 0.0, 1.0) / 2.0\n", true},
      {"nhwc_t_softmax_sigmoid", "    return torch.sigmoid(torch.softmax(" + conv + ", 1) + bias2)\n", true},
      {"nhwc_t_device_operand",
       "    y = " + conv + " + 0.5\n    return torch.gelu(y + torch.ones([1], device=y.device)) * 2.0\n", true},
      {"nhwc_t_alone", "    return " + conv + "\n", true},
      {"nhwc_t_traced",
       "    return torch.relu(torch._convolution(x, weight, bias, [2, 2], [1, 1], [1, 1], True, [1, 1], 1, False, "
       "False, True, True) + bias2)\n",
       true},
      {"nhwc_t_dilated",
       "    return torch.relu(torch.conv_transpose2d(x, weight, bias, [2, 3], [1, 2], [1, 0], 1, [2, 3]))\n", true},
      // Readers the rewrite does not take read the NCHW value back: stored by the chain
      // that makes its twin (a transposed tile into a buffer), or copied by one.
      {"nhwc_t_height_sum", "    return torch.sum(" + conv + ", [2], True) * 0.5\n", true},
      {"nhwc_t_relu_maxpool", "    return torch.max_pool2d(torch.relu(" + conv + " + bias2), [2, 2], [2, 2]) * 2.0\n",
       true},
      {"nhwc_t_batch_norm",
       "    return torch.tanh(torch.batch_norm(" + conv + ", None, None, None, None, True, 0.1, 1e-5, False))\n", true},
      {"nhwc_t_mean_hw", "    return torch.mean(" + conv + " * 2.0, [2, 3], True) + bias2\n", true},
      {"nhwc_t_both_readers",
       "    y = torch.relu(" + conv +
           ")\n    return torch.softmax(y, 1) - torch.avg_pool2d(y, [3, 3], [1, 1], [1, 1])\n",
       true},
  };
  const std::vector<std::vector<std::vector<int64_t>>> sizes = {{{2, 4, 8, 8}, {4, 8, 3, 3}, {8}, {8, 1, 1}},
                                                                {{3, 3, 11, 13}, {3, 40, 3, 3}, {40}, {40, 1, 1}}};
  for (const variant& v : variants)
    for (const auto& sz : sizes) {
      INFO(v.name << " at " << sz[1][1] << " channels");
      const task_spec t = conv_variant(*base, v.name, v.body, sz);
      check_conv_layout_seeds(t, "aten::conv_transpose2d", "run_layout", v.nhwc, "transposed_store");
    }
}

// 3-d convolutions, transposed or not, channels-last the same way: [N, D, H, W, C]
// twins (cuDNN's channels_last_3d through attrs.run_layout), reductions over the
// channels as rows of the last dim, and what the graph returns stored back as [N, C,
// D, H, W] through the same transposed tile over D * H * W positions.
TEST_CASE("emulated: channels-last 3-d convolutions read as NDHWC match the reference",
          "[rules][emulated][conv_layout]") {
  const std::optional<task_spec> base = biased_conv_task();
  const std::string conv = "torch.conv3d(x, weight, bias, [1, 1, 1], [1, 1, 1], [1, 1, 1], 1)";
  const std::string convt = "torch.conv_transpose3d(x, weight, bias, [2, 2, 2], [1, 1, 1], [1, 1, 1], 1, [1, 1, 1])";
  struct variant {
    const char* name;
    std::string body;
    bool transposed;
    bool nhwc;          // the first seed's convolution runs channels-last
    const char* stage;  // a stage the first seed has ("" for none)
  };
  const variant variants[] = {
      {"ndhwc_relu_bias", "    return torch.relu(" + conv + " + bias2)\n", false, true, "transposed_store"},
      {"ndhwc_alone", "    return " + conv + "\n", false, true, "transposed_store"},
      {"ndhwc_dilated_strided", "    return torch.conv3d(x, weight, bias, [2, 1, 2], [2, 1, 2], [2, 1, 2], 1) * 0.5\n",
       false, true, "transposed_store"},
      {"ndhwc_t_dilated",
       "    return torch.conv_transpose3d(x, weight, bias, [1, 2, 3], [1, 0, 1], [0, 1, 2], 1, [2, 1, 3])\n", true,
       true, "transposed_store"},
      {"ndhwc_depth_mean", "    return torch.mean(" + conv + ", [2], True) * 2.0\n", false, true, "transposed_store"},
      {"ndhwc_t_maxpool", "    return torch.max_pool3d(torch.sigmoid(" + convt + "), [2, 2, 2], [2, 2, 2]) - 0.5\n",
       true, true, "transposed_store"},
      {"ndhwc_t_lse_hardswish", "    return torch.hardswish(torch.logsumexp(" + convt + ", [1], True) - 0.5)\n", true,
       true, "row_reduce"},
      {"ndhwc_t_clamp_divide", "    return torch.clamp(" + convt + " + bias2, -0.5, 0.5) / 2.0\n", true, true,
       "transposed_store"},
  };
  for (const variant& v : variants)
    for (int64_t channels : {8, 40}) {
      INFO(v.name << " at " << channels << " channels");
      const int64_t in = channels == 8 ? 4 : 3;
      const std::vector<int64_t> x =
          channels == 8 ? std::vector<int64_t>{2, 4, 5, 6, 7} : std::vector<int64_t>{1, 3, 4, 5, 6};
      const std::vector<int64_t> w =
          v.transposed ? std::vector<int64_t>{in, channels, 3, 3, 3} : std::vector<int64_t>{channels, in, 3, 3, 3};
      // Declared at the CPU size: the suite's task is 2-d.
      const task_spec t = conv_variant(*base, v.name, v.body, {x, w, {channels}, {channels, 1, 1, 1}}, true);
      check_conv_layout_seeds(t, v.transposed ? "aten::conv_transpose3d" : "aten::conv3d", "run_layout", v.nhwc,
                              v.stage);
    }
}

// A network's layers after a channels-last convolution read its twin themselves: the
// next convolution, a pool, a batch norm and a join over the channels run on the
// twin's memory through an NCHW view with channels-last strides (an ATen permute step,
// no copy), their results twins too; no layout round trip between layers. The second
// seed keeps NCHW. Both match the reference, at a size whose channels and positions
// fill no tile too.
TEST_CASE("emulated: a network's layers read channels-last values without round trips",
          "[rules][emulated][conv_layout]") {
  const std::optional<task_spec> base = biased_conv_task();
  const std::string conv = kBiasedConv;
  auto conv_of = [](const std::string& x, const char* bias) {
    return "torch.conv2d(" + x + ", weight, " + bias + ", [1, 1], [1, 1], [1, 1], 1)";
  };
  struct variant {
    const char* name;
    std::string body;
    std::vector<std::string> layers;  // the library steps run channels-last on a view
    int on_view = 1;                  // convolutions that read a view
    const char* ends = "";            // how the first seed's stages end ("": any way)
  };
  const variant variants[] = {
      {"net_conv_conv",
       "    y = torch.relu(" + conv + " + bias2)\n    return torch.relu(" + conv_of("y", "bias") + " * 0.5)\n",
       {}},
      // A batch norm is a layer in a deep chain of them only (the first seed is then
      // ATen's NCHW sums, the channels-last one the second); alone it reads the NCHW
      // value back, the templates' statistics.
      {"net_norm_pool",
       "    y = torch.batch_norm(" + conv + ", bias, None, None, None, True, 0.1, 1e-5, False)\n" +
           "    y = torch.batch_norm(torch.relu(y), bias, None, None, None, True, 0.1, 1e-5, False)\n" +
           "    z = torch.max_pool2d(torch.relu(y), [2, 2], [2, 2])\n    return torch.batch_norm(" +
           conv_of("z", "None") + ", None, bias, None, None, True, 0.1, 1e-5, False)\n",
       {"aten::batch_norm", "aten::max_pool2d"}},
      {"net_one_norm",
       "    y = torch.batch_norm(" + conv + ", bias, None, None, None, True, 0.1, 1e-5, False)\n" +
           "    z = torch.max_pool2d(torch.relu(y), [2, 2], [2, 2])\n    return " + conv_of("z", "None") + " + bias2\n",
       {},
       0},
      {"net_join_pool",
       "    y = torch.relu(" + conv + ")\n    z = " + conv_of("y", "None") +
           "\n    return torch.avg_pool2d(torch.cat([y, z], 1), [2, 2], [2, 2])\n",
       {"aten::avg_pool2d"}},
      {"net_residual_gap",
       "    y = torch.relu(" + conv + " + bias2)\n    z = torch.relu(" + conv_of("y", "bias") +
           " + y)\n    return torch.flatten(torch.adaptive_avg_pool2d(z, [2, 2]), 1)\n",
       {"aten::adaptive_avg_pool2d"}},
      // Two branches from the NCHW input joined over the channels (an Inception
      // module): both convolutions twins, the join too, the pool on it.
      {"net_branches_join",
       "    a = torch.relu(" + conv + ")\n    b = torch.sigmoid(" + conv_of("x", "None") +
           ")\n    return torch.max_pool2d(torch.cat([a, b], 1), [2, 2], [2, 2])\n",
       {"aten::max_pool2d"},
       0},
      // A block's NCHW input added to its result (a ResNet block's identity) is read in
      // the twin's order: the chain that adds it stores the output back, no NCHW chain
      // after a copy of the convolution.
      {"net_input_residual",
       "    y = torch.relu(" + conv + " + bias2)\n    return torch.relu(" + conv_of("y", "bias") + " + x)\n",
       {},
       1,
       "fallback:aten::permute,library:aten::conv2d,elementwise+transposed_store"},
      // A dense block's join of its NCHW input and a new feature map.
      // (x read in the twin's order twice: one permute of it.)
      {"net_dense_join",
       "    y = torch.relu(" + conv + ")\n    z = " + conv_of("y", "bias") +
           "\n    return torch.avg_pool2d(torch.cat([x, z, z - x], 1), [2, 2], [2, 2])\n",
       {"aten::avg_pool2d"}},
  };
  // x's channels are the weight's both ways: each convolution reads the one before.
  const std::vector<std::vector<std::vector<int64_t>>> sizes = {{{2, 8, 8, 8}, {8, 8, 3, 3}, {8}, {8, 1, 1}},
                                                                {{3, 5, 11, 13}, {5, 5, 3, 3}, {5}, {5, 1, 1}}};
  for (const variant& v : variants)
    for (const auto& sz : sizes) {
      INFO(v.name << " at " << sz[1][0] << " channels");
      const task_spec t = conv_variant(*base, v.name, v.body, sz, true);
      auto all = the_coder().seeds(t, 3);
      if (!all) FAIL(all.message());
      // The channels-last seed, and an NCHW one (first where a deep chain of batch
      // norms puts ATen's NCHW sums first, or where a row mapping unsuited to the rows
      // puts the layout's seed after).
      auto layout = [](const candidate& c) { return c.recipe.count("conv_layout") > 0; };
      auto cl = std::find_if(all->begin(), all->end(), layout);
      auto other = std::find_if_not(all->begin(), all->end(), layout);
      REQUIRE(cl != all->end());
      REQUIRE(other != all->end());
      const candidate& first = *cl;
      const candidate& nchw = *other;
      const std::vector<candidate> cands = {first, nchw};
      INFO(first.recipe.at("stages"));
      // What each library step's result is: the NCHW views.
      std::set<std::string> views;
      int convolutions = 0, on_view = 0;
      std::set<std::string> layers;
      for (const plan_step& s : first.plan.steps) {
        if (s.kind != "library") continue;
        if (s.name.rfind("aten::permute", 0) == 0) views.insert(s.outputs.at(0));
        const bool reads_view = !s.args.empty() && views.count(s.args[0].value);
        if (s.name == "aten::conv2d") {
          ++convolutions;
          CHECK(s.attrs.count("result_layout") == 1);
          on_view += reads_view;
        } else if (s.attrs.count("run_layout")) {
          CHECK(reads_view);
          layers.insert(s.name.substr(0, s.name.find('.')));
        }
      }
      CHECK(convolutions == 2);
      // The second convolution reads the first's twin (through a view), a pool's
      // result or a join's being twins too.
      CHECK(on_view == v.on_view);
      CHECK(std::count_if(first.plan.steps.begin(), first.plan.steps.end(), [](const plan_step& s) {
              return s.kind == "library" && s.name.rfind("aten::permute", 0) == 0 && s.args.at(0).value == "x";
            }) <= 1);
      const std::string& stages = first.recipe.at("stages");
      CHECK(stages.substr(stages.size() - std::min(stages.size(), std::strlen(v.ends))) == v.ends);
      CHECK(layers == std::set<std::string>(v.layers.begin(), v.layers.end()));
      for (const plan_step& s : nchw.plan.steps) {
        CHECK(s.attrs.count("run_layout") == 0);
        CHECK(s.attrs.count("result_layout") == 0);
      }
      check_candidates(t, cands);
    }
}

// Float32 products bound by arithmetic run split-precision (3xTF32): two kernels write
// each operand as TF32 big and small parts three times along K, and one library
// product over 3K with TF32 allowed sums big*small + small*big + big*big. On the CPU the
// product is FP32's, so the outputs match at the task's tolerance only if the parts and
// their order are right (the second operand as [big | small | big] gives ~2x).
TEST_CASE("emulated: split-precision products (3xTF32) match the reference", "[rules][emulated][split_tf32]") {
  for (const char* file : {"bench/suites/ops/linear_gelu.yaml", "bench/suites/ops/addmm_tanh_scale.yaml",
                           "bench/suites/ops/bmm_softmax.yaml", "examples/tasks/matmul_bias_relu.yaml"}) {
    auto t = load_task(kSource / file);
    REQUIRE(t);
    INFO(t->name);
    auto seeds = the_coder().seeds(*t, 5);
    if (!seeds) FAIL(seeds.message());
    int split = 0;
    for (const candidate& c : *seeds) {
      INFO(c.origin);
      const plan_step* product = nullptr;
      std::vector<std::string> before;
      for (const plan_step& s : c.plan.steps) {
        if (s.kind == "library" && !product)
          product = &s;
        else if (!product)
          before.push_back(s.name);
      }
      REQUIRE(product);
      const bool tf32 = product->attrs.count("math") && product->attrs.at("math") == "tf32";
      // Every seed but the plainest (cuBLAS's SGEMM) splits.
      CHECK(tf32 == (c.recipe.count("gemm_precision") > 0));
      if (!tf32) continue;
      ++split;
      CHECK(c.origin.find("3xTF32") != std::string::npos);
      REQUIRE(before.size() >= 2);
      CHECK(before[before.size() - 2].find("_split_a") != std::string::npos);
      CHECK(before.back().find("_split_b") != std::string::npos);
      int tripled = 0;
      for (const buffer_spec& b : c.plan.scratch)
        for (const std::string& d : b.shape) tripled += d.rfind("3 * ", 0) == 0;
      CHECK(tripled == 2);
    }
    CHECK(split >= 3);
    check_candidates(*t, *seeds);
  }
}

// The split itself: big is x's nearest TF32 value (the low 13 bits clear), small the
// nearest to what is left, and big + small is x to ~2^-22; both row layouts and both
// loops (float4 where a row's run is aligned, scalars otherwise).
TEST_CASE("emulated: the 3xTF32 split is exact to 2^-22 and laid out along K", "[rules][emulated][split_tf32]") {
  auto t = load_task(kSource / "bench/suites/ops/linear_gelu.yaml");
  REQUIRE(t);
  auto seeds = the_coder().seeds(*t, 1);
  if (!seeds) FAIL(seeds.message());
  const candidate& c = seeds->front();
  auto module = test::emulated_module::build(c.source, kWork);
  if (!module) FAIL(module.message());
  std::string split_a, split_b;
  for (const plan_step& s : c.plan.steps) {
    if (s.name.find("_split_a") != std::string::npos) split_a = s.name;
    if (s.name.find("_split_b") != std::string::npos) split_b = s.name;
  }
  REQUIRE(!split_a.empty());
  REQUIRE(!split_b.empty());
  for (auto [rows, run] : std::vector<std::pair<int64_t, int64_t>>{{3, 40}, {5, 37}}) {
    for (const std::string& kernel : {split_a, split_b}) {
      INFO(kernel << " over " << rows << " x " << run);
      at::Tensor x = at::randn({rows, run}) * 1000.0;
      x[0][1] = 0.0f;
      x[1][2] = std::numeric_limits<float>::infinity();
      at::Tensor out = at::full({rows, 3 * run}, NAN);
      void* in_ptr = x.data_ptr();
      void* out_ptr = out.data_ptr();
      int64_t r = rows, n = run;
      auto st = (*module)->launch(kernel, {2, 2, 1}, {256, 1, 1}, 0, {&in_ptr, &out_ptr, &r, &n});
      if (!st) FAIL(st.message());
      // A as [big | small | big], B as [small | big | big]: the cross terms first.
      at::Tensor first = out.narrow(1, 0, run), mid = out.narrow(1, run, run), big = out.narrow(1, 2 * run, run);
      const bool second = kernel == split_b;
      at::Tensor small = second ? first : mid;
      CHECK(at::equal(second ? mid : first, big));
      at::Tensor bits = big.contiguous().view(at::kInt);
      CHECK(at::equal(bits.bitwise_and(0x1fff), at::zeros_like(bits)));
      at::Tensor finite = x.isfinite();
      at::Tensor sbits = small.contiguous().view(at::kInt);
      CHECK(at::equal(sbits.bitwise_and(0x1fff), at::zeros_like(sbits)));
      at::Tensor xf = x.masked_select(finite), bf = big.masked_select(finite), sf = small.masked_select(finite);
      CHECK(((xf - bf).abs() <= xf.abs() * std::ldexp(1.0, -11)).all().item<bool>());
      CHECK(((xf - bf - sf).abs() <= xf.abs() * std::ldexp(1.0, -21)).all().item<bool>());
      CHECK(big[1][2].item<float>() == std::numeric_limits<float>::infinity());
    }
  }
}

// Where K is short or the product small, the split's passes would cost more than the
// product saves: the product stays cuBLAS's SGEMM.
TEST_CASE("rules coder: products that memory bounds keep FP32 SGEMM", "[rules][emulated][split_tf32]") {
  auto t = load_task(kSource / "bench/suites/ops/linear_gelu.yaml");
  REQUIRE(t);
  for (auto [x, w] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{16384, 64}, {16384, 64}},   // K = 64
           {{4096, 4096}, {8, 4096}},    // a few outputs a row: ~16 FLOPs per operand element
           {{256, 256}, {256, 256}}}) {  // 33 MFLOP in all
    t->inputs[0].shape = x;
    t->parameters[0].shape = w;
    t->parameters[1].shape = {w[0]};
    t->name = "linear_gelu_" + std::to_string(x[0]) + "x" + std::to_string(x[1]) + "x" + std::to_string(w[0]);
    t->sizes["cpu"] = {{"x", {16, 64}}, {"weight", {8, 64}}, {"bias", {8}}};
    auto seeds = the_coder().seeds(*t, 2);
    if (!seeds) FAIL(seeds.message());
    for (const candidate& c : *seeds) {
      CHECK(c.recipe.count("gemm_precision") == 0);
      for (const plan_step& s : c.plan.steps) CHECK(s.attrs.count("math") == 0);
    }
  }
}

// A sum or mean over a product's output features is a matrix-vector product: the
// weight's sum over its outputs, then one dot per row (no library product left).
TEST_CASE("emulated: a sum over a product's outputs as a matrix-vector product matches the reference",
          "[rules][emulated][sum_of_product]") {
  auto base = load_task(kSource / "bench/suites/ops/linear_gelu.yaml");
  REQUIRE(base);
  struct form {
    const char* name;
    const char* body;
    bool rewritten;
  };
  for (const form& f : std::vector<form>{
           {"linear_sum", "    return torch.sum(torch.linear(x, weight, bias), dim=1, keepdim=True)\n", true},
           {"linear_mean", "    return torch.mean(torch.linear(x, weight, bias), dim=-1)\n", true},
           {"linear_sum_no_bias", "    return torch.sum(torch.linear(x, weight), dim=1) * 0.5\n", true},
           {"matmul_sum", "    return torch.sum(torch.matmul(x, weight), dim=1, keepdim=True)\n", true},
           // Read elsewhere too, or summed over the rows: the product stays.
           {"linear_sum_and_max",
            "    y = torch.linear(x, weight, bias)\n    return torch.sum(y, dim=1) + torch.amax(y, dim=1)\n", false},
           {"linear_sum_rows", "    return torch.sum(torch.linear(x, weight, bias), dim=0)\n", false}}) {
    INFO(f.name);
    task_spec t = *base;
    t.name = f.name;
    t.torchscript = std::string("def forward(x, weight, bias):\n") + f.body;
    t.sizes["cpu"] = {{"x", {24, 128}}, {"weight", {128, 128}}, {"bias", {128}}};
    auto seeds = the_coder().seeds(t, 5);
    if (!seeds) FAIL(seeds.message());
    int plain = 0;
    for (const candidate& c : *seeds) {
      INFO(c.origin);
      // The first and the last seed rewrite (lowering param matvec_sums); the others
      // keep the product, for where the review fails the rewrite.
      const bool rewritten = f.rewritten && c.recipe.count("matvec_sums");
      plain += !c.recipe.count("matvec_sums");
      int products = 0;
      for (const plan_step& s : c.plan.steps) products += s.kind == "library" && !s.attrs.count("schema");
      CHECK((products == 0) == rewritten);
      CHECK((c.origin.find("a matrix-vector product") != std::string::npos) == rewritten);
      // The weight's sum accumulates in float64 (ATen's, through the dispatcher), then
      // is rounded once: in float its errors add up over K in the dot.
      bool f64 = false;
      for (const plan_step& s : c.plan.steps)
        f64 = f64 || (s.kind == "library" && s.attrs.count("dtype") && s.attrs.at("dtype") == "7");
      CHECK(f64 == rewritten);
    }
    CHECK(plain >= 3);
    CHECK((plain < static_cast<int>(seeds->size())) == f.rewritten);
    check_candidates(t, *seeds);
  }
}

// A product of transposed operands (views ATen makes) split for 3xTF32: the split
// kernels read the transposes as the plan materialises them for a kernel.
TEST_CASE("emulated: 3xTF32 products of transposed operands match the reference", "[rules][emulated][split_tf32]") {
  auto base = load_task(kSource / "bench/suites/ops/linear_gelu.yaml");
  REQUIRE(base);
  for (const char* body : {"    return torch.matmul(x.T, weight)\n", "    return torch.matmul(x, weight.T) + bias\n",
                           "    return torch.matmul(x.T, weight.T)\n"}) {
    INFO(body);
    task_spec t = *base;
    t.name = std::string("split_transposed_") + std::to_string(std::hash<std::string>{}(body) % 1000);
    t.torchscript = std::string("def forward(x, weight, bias):\n") + body;
    t.sizes["cpu"] = {{"x", {48, 48}}, {"weight", {48, 48}}, {"bias", {48}}};
    auto seeds = the_coder().seeds(t, 2);
    if (!seeds) FAIL(seeds.message());
    int split = 0;
    for (const candidate& c : *seeds) split += c.recipe.count("gemm_precision") > 0;
    CHECK(split >= 1);
    check_candidates(t, *seeds);
  }
}

// At odd sizes (issue 46) the product's operands stay 16-byte aligned: where the task's K
// is not a multiple of 4 each third of a split operand is K rounded up to one, zeros
// after (they add nothing to the product), as the plan's scratch shapes say. Checked
// against the reference at odd CPU sizes too, and the split kernels' layout element by
// element.
TEST_CASE("emulated: 3xTF32 products at odd K pad each third to a multiple of 4", "[rules][emulated][split_tf32]") {
  auto base = load_task(kSource / "bench/suites/ops/linear_gelu.yaml");
  REQUIRE(base);
  task_spec t = *base;
  t.name = "linear_gelu_odd";
  t.inputs[0].shape = {1023, 1021};
  t.parameters[0].shape = {1019, 1021};
  t.parameters[1].shape = {1019};
  t.sizes["cpu"] = {{"x", {37, 131}}, {"weight", {29, 131}}, {"bias", {29}}};
  auto seeds = the_coder().seeds(t, 3);
  if (!seeds) FAIL(seeds.message());
  int split = 0;
  for (const candidate& c : *seeds) {
    INFO(c.origin);
    if (!c.recipe.count("gemm_precision")) continue;
    ++split;
    std::map<std::string, std::vector<std::string>> scratch;
    for (const buffer_spec& b : c.plan.scratch) scratch[b.name] = b.shape;
    REQUIRE(scratch.count("split0_a"));
    REQUIRE(scratch.count("split0_b"));
    CHECK(scratch["split0_a"] == std::vector<std::string>{"x.shape[0]", "3 * (round_up(x.shape[1], 4))"});
    // N (1019) too: only the gelu kernel reads the product, so it is stored
    // [M, round_up(N, 4)] and the weight's rows and the bias are padded.
    CHECK(scratch["split0_b"] ==
          std::vector<std::string>{"round_up(weight.shape[0], 4)", "3 * (round_up(weight.shape[1], 4))"});
    CHECK(scratch["split0_bias"] == std::vector<std::string>{"round_up(weight.shape[0], 4)"});
    CHECK(c.source.find("[row * ") != std::string::npos);
  }
  CHECK(split >= 2);
  check_candidates(t, *seeds);
  // Other odd CPU sizes (the plan is symbolic): K = 1, 5, 130, 132; rows of 1, 3, 6.
  for (auto [m, k, n] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{3, 1, 5}, {5, 5, 3}, {2, 130, 6}, {7, 132, 1}}) {
    INFO(m << " x " << k << " x " << n);
    t.sizes["cpu"] = {{"x", {m, k}}, {"weight", {n, k}}, {"bias", {n}}};
    check_candidates(t, *seeds);
  }

  // The split kernels themselves at K = 37 (padded to 40) and 40 (no padding):
  // [big, 0.. | small, 0.. | big, 0..] and [small, 0.. | big, 0.. | big, 0..], every
  // element of the padded scratch written; B's rows padded from 3 to 4 (zeros).
  const candidate* c = nullptr;
  for (const candidate& s : *seeds)
    if (s.recipe.count("gemm_precision") && !c) c = &s;
  REQUIRE(c);
  auto module = test::emulated_module::build(c->source, kWork);
  if (!module) FAIL(module.message());
  for (const char* kernel : {"ks0_split_a", "ks0_split_b"}) {
    for (int64_t run : {37, 40}) {
      const bool second = std::string(kernel) == "ks0_split_b";
      const int64_t rows = 3, pad = (run + 3) / 4 * 4, rows_pad = second ? 4 : 3;
      INFO(kernel << " over " << rows << " x " << run);
      at::Tensor x = at::randn({rows, run}) * 1000.0;
      at::Tensor all = at::full({rows_pad, 3 * pad}, NAN);
      void* in_ptr = x.data_ptr();
      void* out_ptr = all.data_ptr();
      int64_t r = rows, n = run, p = pad, rp = rows_pad;
      std::vector<void*> args = {&in_ptr, &out_ptr, &r, &n, &p};
      if (second) args.push_back(&rp);
      auto st = (*module)->launch(kernel, {1, 2, 1}, {256, 1, 1}, 0, args);
      if (!st) FAIL(st.message());
      CHECK_FALSE(all.isnan().any().item<bool>());
      CHECK(at::equal(all.narrow(0, rows, rows_pad - rows), at::zeros({rows_pad - rows, 3 * pad})));
      at::Tensor out = all.narrow(0, 0, rows);
      at::Tensor first = out.narrow(1, 0, run), mid = out.narrow(1, pad, run), big = out.narrow(1, 2 * pad, run);
      CHECK(at::equal(second ? mid : first, big));
      at::Tensor small = second ? first : mid;
      CHECK(((x - big - small).abs() <= x.abs() * std::ldexp(1.0, -21)).all().item<bool>());
      for (int64_t third = 0; third < 3; ++third)
        CHECK(at::equal(out.narrow(1, third * pad + run, pad - run), at::zeros({rows, pad - run})));
    }
  }
}

// Products whose B is [..., K, N] (mm, matmul, bmm, addmm) at N not a multiple of 4:
// B's leading dim would be unaligned for the TF32 product. A matrix B (mm, matmul,
// addmm with beta = alpha = 1) is split transposed, [N, 3K] as linear's weight, and
// the product runs as linear; a batched B (bmm) stays SGEMM, which reads B unaligned
// too at a third of the work. At odd K the thirds are padded either way.
TEST_CASE("rules coder: 3xTF32 at odd N splits B transposed where linear can run it", "[rules][emulated][split_tf32]") {
  struct form {
    const char* file;
    const char* body;  // "" for the file's own
    bool splits_odd_n;
  };
  for (const form& f : std::vector<form>{
           {"examples/tasks/matmul_bias_relu.yaml", "", true},
           {"bench/suites/ops/addmm_tanh_scale.yaml", "", true},
           {"bench/suites/ops/addmm_tanh_scale.yaml",
            "def forward(x, w, bias):\n    return torch.tanh(torch.addmm(bias, x, w, beta=0.5, alpha=2.0))\n",
            false}}) {
    auto base = load_task(kSource / f.file);
    REQUIRE(base);
    for (auto [k, n] :
         std::vector<std::pair<int64_t, int64_t>>{{1021, 1019}, {1024, 1019}, {1021, 1024}, {1024, 1024}}) {
      INFO(f.file << " " << f.body << " K " << k << ", N " << n);
      task_spec t = *base;
      if (*f.body) t.torchscript = f.body;
      t.name = base->name + "_" + std::to_string(k) + "x" + std::to_string(n) + (*f.body ? "_scaled" : "");
      t.inputs[0].shape = {1023, k};
      t.parameters[0].shape = {k, n};
      t.parameters[1].shape = {n};
      const std::string x = t.inputs[0].name, w = t.parameters[0].name, b = t.parameters[1].name;
      t.sizes["cpu"] = {{x, {19, 133}}, {w, {133, 23}}, {b, {23}}};
      auto seeds = the_coder().seeds(t, 3);
      if (!seeds) FAIL(seeds.message());
      int split = 0;
      for (const candidate& c : *seeds) {
        if (!c.recipe.count("gemm_precision")) continue;
        ++split;
        std::map<std::string, std::vector<std::string>> scratch;
        for (const buffer_spec& sb : c.plan.scratch) scratch[sb.name] = sb.shape;
        const std::string kk = w + ".shape[0]", nn = w + ".shape[1]";
        const std::string third = k % 4 ? "(round_up(" + kk + ", 4))" : kk;
        const plan_step* product = nullptr;
        for (const plan_step& s : c.plan.steps)
          if (s.kind == "library" && !product) product = &s;
        REQUIRE(product);
        if (n % 4) {
          // Only elementwise kernels read the product: its rows padded too.
          CHECK(scratch["split0_b"] == std::vector<std::string>{"round_up(" + nn + ", 4)", "3 * " + third});
          CHECK(scratch.count("split0_bias") == (product->args.size() == 3));
          CHECK(c.source.find("[row * ") != std::string::npos);
          CHECK(product->name == "aten::linear");
          CHECK(product->attrs.count("beta") == 0);
        } else {
          CHECK(scratch["split0_b"] == std::vector<std::string>{"3 * " + third, nn});
          CHECK(product->name != "aten::linear");
        }
      }
      CHECK((split > 0) == (n % 4 == 0 || f.splits_odd_n));
      check_candidates(t, *seeds);
      // Other CPU sizes: N a multiple of 4, K = 1 and 4, N = 1.
      for (auto [m, kc, nc] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{5, 130, 24}, {3, 1, 5}, {2, 4, 1}}) {
        INFO(m << " x " << kc << " x " << nc);
        t.sizes["cpu"] = {{x, {m, kc}}, {w, {kc, nc}}, {b, {nc}}};
        check_candidates(t, *seeds);
      }
    }
  }
  // bmm at odd N: SGEMM; at odd K and aligned N: padded.
  auto bmm = load_task(kSource / "bench/suites/ops/bmm_softmax.yaml");
  REQUIRE(bmm);
  for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{131, 1023}, {131, 1024}}) {
    INFO("bmm K " << k << ", N " << n);
    task_spec t = *bmm;
    t.name = "bmm_softmax_" + std::to_string(k) + "x" + std::to_string(n);
    t.inputs[0].shape = {32, 1023, k};
    t.inputs[1].shape = {32, k, n};
    t.sizes["cpu"] = {{"q", {2, 9, 131}}, {"k", {2, 131, 12}}};
    auto seeds = the_coder().seeds(t, 3);
    if (!seeds) FAIL(seeds.message());
    int split = 0;
    for (const candidate& c : *seeds) {
      if (!c.recipe.count("gemm_precision")) continue;
      ++split;
      std::map<std::string, std::vector<std::string>> scratch;
      for (const buffer_spec& sb : c.plan.scratch) scratch[sb.name] = sb.shape;
      CHECK(scratch["split0_b"] ==
            std::vector<std::string>{"k.shape[0]", "3 * (round_up(k.shape[1], 4))", "k.shape[2]"});
    }
    CHECK((split > 0) == (n % 4 == 0));
    check_candidates(t, *seeds);
  }
}

// A product at N not a multiple of 4 read by a reduction over its rows (a row softmax,
// a logsumexp, through a prologue or not): the product's rows are padded to
// round_up(N, 4) as for an elementwise reader, and the reduction's kernels read row r at
// r * pitch (row_reduce.cpp's pitched_rows); what the plan returns is [M, N]. Where the
// rows cannot be padded (a reduction over the other dim, a batch norm, the product
// returned too), the TF32 product's stores would be unaligned and three of them lose to
// FP32's SGEMM (bench/probes/tf32_odd_probe.py): the product is not split. At N a
// multiple of 4 every form splits, unpadded.
TEST_CASE("rules coder: 3xTF32 at odd N pads the rows a row reduction reads, else keeps SGEMM",
          "[rules][emulated][split_tf32]") {
  auto base = load_task(kSource / "bench/suites/ops/linear_gelu.yaml");
  REQUIRE(base);
  struct form {
    const char* body;
    bool pads;  // at odd N: the rows padded and the product split (else SGEMM)
  };
  const std::string y = "torch.linear(x, weight, bias)";
  for (const form& f :
       std::vector<form>{{"    return torch.softmax(Y, dim=1)\n", true},
                         {"    return torch.log_softmax(torch.gelu(Y), dim=1)\n", true},
                         {"    return torch.logsumexp(torch.clamp(Y * 2.0, -0.5, 0.5), dim=1)\n", true},
                         {"    return torch.amax(Y, dim=1)\n", true},
                         {"    return torch.var(Y, dim=1)\n", true},
                         {"    z = Y\n    return torch.amax(z, dim=1) + torch.sum(z, dim=1)\n", true},
                         {"    return torch.softmax(Y, dim=0)\n", false},
                         {"    return torch.batch_norm(Y, None, None, None, None, True, 0.1, 1e-5, False)\n", false},
                         {"    z = Y\n    return z, torch.softmax(z, dim=1)\n", false}}) {
    std::string body = f.body;
    body.replace(body.find('Y'), 1, y);
    for (int64_t n : {1019, 1020}) {
      INFO(body << " at N " << n);
      task_spec t = *base;
      t.name = "linear_rows_" + std::to_string(n) + "_" + std::to_string(std::hash<std::string>{}(body) % 1000);
      t.torchscript = "def forward(x, weight, bias):\n" + body;
      t.inputs[0].shape = {1023, 1024};
      t.parameters[0].shape = {n, 1024};
      t.parameters[1].shape = {n};
      t.sizes["cpu"] = {{"x", {7, 131}}, {"weight", {n % 4 ? 37 : 36, 131}}, {"bias", {n % 4 ? 37 : 36}}};
      auto seeds = the_coder().seeds(t, 4);
      if (!seeds) FAIL(seeds.message());
      int split = 0;
      for (const candidate& c : *seeds) {
        const bool tf32 = c.recipe.count("gemm_precision") > 0;
        split += tf32;
        for (const plan_step& s : c.plan.steps)
          if (s.kind == "library" && s.name == "aten::linear") CHECK(s.attrs.count("math") == (tf32 ? 1u : 0u));
        bool padded = false;
        for (const buffer_spec& b : c.plan.scratch)
          padded = padded || (b.name == "split0_b" && b.shape.at(0) == "round_up(weight.shape[0], 4)");
        CHECK(padded == (tf32 && n % 4 != 0));
      }
      CHECK((split > 0) == (n % 4 == 0 || f.pads));
      check_candidates(t, *seeds);
      if (n % 4 == 0) continue;
      // Other CPU sizes (the plan is symbolic): N = 1, 3, 5 and 4093; one row. (The
      // variance of one element is NaN, in the reference too.)
      for (auto [m, k, nc] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
               {3, 5, 1}, {2, 7, 3}, {5, 130, 5}, {1, 6, 5}, {3, 9, 4093}}) {
        INFO(m << " x " << k << " x " << nc);
        t.sizes["cpu"] = {{"x", {m, k}}, {"weight", {nc, k}}, {"bias", {nc}}};
        check_candidates(t, *seeds, true);
      }
    }
  }
}

// An elementwise epilogue over rows whose length (at the task's size) is not a
// multiple of 4 peels each row: its head to the first aligned element and its tail
// one by one, float4 between them. Rows shorter than a vector, rows with no head.
TEST_CASE("emulated: elementwise rows of odd length are peeled, not done one by one", "[rules][emulated][split]") {
  auto bias = load_task(kSource / "bench/suites/ops/bias_add_broadcast.yaml");
  REQUIRE(bias);
  task_spec t = *bias;
  t.name = "bias_add_odd_rows";
  const int64_t odd = 4093;
  t.inputs.at(0).shape = {1023, odd};
  t.parameters.at(0).shape = {odd};
  auto seeds = the_coder().seeds(t, 3);
  if (!seeds) FAIL(seeds.message());
  int peeled = 0;
  for (const candidate& c : *seeds) {
    const bool split = c.source.find("blockIdx.y walks the rows") != std::string::npos;
    const bool vec = c.recipe.at("vector_width") != "1";
    peeled += c.source.find("const long long head = ") != std::string::npos;
    if (split && vec) CHECK(c.source.find("const long long head = ") != std::string::npos);
  }
  CHECK(peeled >= 1);
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{5, 3}, {4, 1}, {7, 1029}, {3, 1027}, {2, 1024}}) {
    INFO(rows << " rows of " << cols);
    t.sizes["cpu"] = {{"x", {rows, cols}}, {"bias", {cols}}};
    check_candidates(t, *seeds);
  }
  // At a size whose rows are aligned, the kernel is what it was.
  t.inputs.at(0).shape = {1024, 4096};
  t.parameters.at(0).shape = {4096};
  auto even = the_coder().seeds(t, 1);
  if (!even) FAIL(even.message());
  CHECK(even->front().source.find("const long long head = ") == std::string::npos);
}

// A whole-tensor reduction's first pass takes elements_per_thread elements a thread a
// trip, their loads written before their updates (U loads in flight), then the rest
// one at a time: every element once, at sizes that leave a tail, leave no tail, or
// give some threads nothing.
TEST_CASE("emulated: whole-tensor reductions with several loads in flight match the reference",
          "[rules][emulated][whole]") {
  const std::pair<const char*, const char*> cases[] = {
      {"kl_like_sum", "torch.sum(torch.log(x * x + 1.0) * x)"},
      {"abs_mean", "torch.mean(torch.abs(x - 0.5))"},
      {"whole_max", "torch.max(x * 2.0)"},
      {"whole_min", "torch.min(torch.sin(x))"},
      {"whole_var", "torch.var(x)"},
  };
  const std::vector<std::vector<int64_t>> runs = {{3, 2049}, {2, 4096}, {1, 5}};
  for (const auto& [name, body] : cases) {
    INFO(name);
    auto t = norm_task(name, body, {4096, 4096}, false);
    REQUIRE(t);
    auto seeds = the_coder().seeds(*t, 2);
    if (!seeds) FAIL(seeds.message());
    REQUIRE(seeds->size() == 2);
    CHECK(seeds->at(0).source.find("c += 4 * stride") != std::string::npos);
    CHECK(seeds->at(1).source.find("c += 2 * stride") != std::string::npos);
    for (const auto& run : runs) {
      INFO(name << " at " << run[0] << " x " << run[1]);
      t->sizes["cpu"] = {{"x", run}};
      check_candidates(*t, *seeds);
    }
  }
  // The argmax of a 1-d tensor: each unrolled element's index is its own (ties: the
  // first index wins).
  auto arg = norm_task("argmax_1d_ties", "torch.argmax(torch.floor(x), 0)", {16777216}, false);
  REQUIRE(arg);
  auto seeds = the_coder().seeds(*arg, 2);
  if (!seeds) FAIL(seeds.message());
  REQUIRE(seeds->size() == 2);
  CHECK(seeds->at(0).source.find("const long long c = cu;") != std::string::npos);
  for (int64_t n : {5000, 7, 4096}) {
    INFO("argmax over " << n);
    arg->sizes["cpu"] = {{"x", {n}}};
    check_candidates(*arg, *seeds);
  }
}

// Rows whose reduction reads a fused prologue (scalar loads) take elements_per_thread
// elements a thread a trip as well, the rest one at a time: sums, a max, an argmax
// on ties, moments and a softmax, over rows a block or a warp each and short rows
// packed into a warp.
TEST_CASE("emulated: row reductions over a prologue with several loads in flight match the reference",
          "[rules][emulated][rows]") {
  const std::pair<const char*, const char*> cases[] = {
      {"sq_diff_sum", "torch.sum((x - 0.5) ** 2, 1)"},           {"abs_amax", "torch.amax(torch.abs(x - 1.0), 1)"},
      {"argmax_floor", "torch.argmax(torch.floor(x * 2.0), 1)"}, {"var_scaled", "torch.var(x * 2.0, 1)"},
      {"softmax_scaled", "torch.softmax(x * 0.5, 1)"},
  };
  struct form {
    std::vector<int64_t> declared;
    std::vector<std::vector<int64_t>> runs;
    bool unrolled;  // a block per row, nothing on chip: the loop is the strided one
  };
  const form forms[] = {
      {{32768, 8192}, {{3, 1000}, {2, 4096}, {4, 37}}, true},
      {{65536, 512}, {{5, 300}, {9, 512}}, false},
      {{1 << 20, 6}, {{9, 6}, {33, 6}}, false},
  };
  for (const auto& [name, body] : cases)
    for (const auto& f : forms) {
      INFO(name << " declared " << f.declared[0] << " x " << f.declared[1]);
      auto t = norm_task(name, body, f.declared, false);
      REQUIRE(t);
      auto seeds = the_coder().seeds(*t, 2);
      if (!seeds) FAIL(seeds.message());
      bool unrolled = false;
      for (const auto& c : *seeds)
        unrolled = unrolled || c.source.find("c += 4 * (int)blockDim.x") != std::string::npos;
      // A softmax's row of 8192 stays on chip between its passes: no strided loop.
      if (f.unrolled && std::string(name) != "softmax_scaled") CHECK(unrolled);
      for (const auto& run : f.runs) {
        INFO("run at " << run[0] << " x " << run[1]);
        t->sizes["cpu"] = {{"x", run}};
        check_candidates(*t, *seeds);
      }
    }
}

namespace {

result<task_spec> three_input_task(const std::string& name, const std::string& body,
                                   const std::vector<int64_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  std::string yaml = "name: " + name + "\nreference:\n  torchscript: |\n    def forward(x, y, z):\n        return " +
                     body + "\ninputs:\n";
  for (const char* in : {"x", "y", "z"})
    yaml +=
        std::string("  - name: ") + in + "\n    shape: [" + dims + "]\n    init: {kind: normal, mean: 0.5, std: 2}\n";
  yaml += "seed: 7\n";
  return parse_task(yaml, name + ".yaml", kSource);
}

}  // namespace

// Two plain reductions over the same rows, each behind its own prologue, read in one
// kernel (twin_rows.hpp): the triplet loss's two distances, a sum beside a max, at
// row lengths that leave a tail; each result bit for bit what its own kernel gives.
// A reduction whose prologue reads the other's result keeps its own kernel.
TEST_CASE("emulated: sibling row reductions read in one pass match the reference", "[rules][emulated][twin]") {
  const std::vector<std::vector<int64_t>> runs = {{5, 1000}, {3, 4096}, {2, 37}};
  auto twin_seeds = [](const task_spec& t) {
    auto seeds = the_coder().seeds(t, 2);
    REQUIRE(seeds);
    for (const auto& c : *seeds) {
      INFO(c.source);
      CHECK(c.recipe.at("stages").find("+twin") != std::string::npos);
      CHECK(c.source.find("read in one pass") != std::string::npos);
    }
    return *seeds;
  };
  auto sized = [](task_spec t, const std::vector<int64_t>& run) {
    t.sizes["cpu"] = {{"x", run}, {"y", run}, {"z", run}};
    return t;
  };
  auto triplet =
      three_input_task("triplet_rows", "torch.triplet_margin_loss(x, y, z, 1.0, 2.0, 1e-6, False, 1)", {32768, 8192});
  REQUIRE(triplet);
  const auto triplet_seeds = twin_seeds(*triplet);
  auto pair = three_input_task("sum_beside_max", "(torch.sum((x - y) ** 2, 1), torch.amax(torch.abs(x * z), 1))",
                               {32768, 8192});
  REQUIRE(pair);
  const auto pair_seeds = twin_seeds(*pair);
  for (const auto& run : runs) {
    INFO("rows of " << run[1]);
    check_candidates(sized(*triplet, run), triplet_seeds);
    const task_spec p = sized(*pair, run);
    check_candidates(p, pair_seeds);
    // The twin's sum against the sum's own kernel (its own seeds), bit for bit.
    task_spec alone = *pair;
    alone.name = "sum_alone_of_pair";
    alone.torchscript = "def forward(x, y, z):\n    return torch.sum((x - y) ** 2, 1)\n";
    alone = sized(alone, run);
    auto alone_seeds = the_coder().seeds(alone, 2);
    REQUIRE(alone_seeds);
    auto sp = with_size(p, "cpu");
    auto sa = with_size(alone, "cpu");
    REQUIRE(sp);
    REQUIRE(sa);
    auto prog = reference_program::load(*sp);
    REQUIRE(prog);
    auto inputs = make_inputs(*sp, trial_seed(sp->seed, 0), c10::Device(c10::kCPU));
    REQUIRE(inputs);
    for (size_t k = 0; k < pair_seeds.size(); ++k) {
      auto twin = run_candidate(*sp, pair_seeds[k], *inputs, parameter_tensors(**prog));
      auto own = run_candidate(*sa, alone_seeds->at(k), *inputs, parameter_tensors(**prog));
      if (!twin || !own) FAIL((twin ? own.message() : twin.message()));
      CHECK(alone_seeds->at(k).recipe.at("stages").find("+twin") == std::string::npos);
      CHECK(at::equal(twin->at(0), own->at(0)));
    }
  }
  // The second's prologue reads the first's result: two kernels, in order.
  auto chained =
      three_input_task("sum_of_scaled_by_sum", "torch.sum(x * torch.sum(y * 2.0, 1, True), 1)", {32768, 8192});
  REQUIRE(chained);
  auto chained_seeds = the_coder().seeds(*chained, 2);
  REQUIRE(chained_seeds);
  for (const auto& c : *chained_seeds) CHECK(c.recipe.at("stages").find("+twin") == std::string::npos);
  check_candidates(sized(*chained, {4, 900}), *chained_seeds);
}

// The emulator itself: a block whose thread 0 ends without a barrier runs its other
// threads as plain calls; one whose thread 0 waits at a barrier runs them all as
// fibers, thread 0 held there until every thread has reached it; and threads that
// reach a barrier thread 0 never does are reported, as CUDA leaves that undefined.
TEST_CASE("emulated: blocks run as plain calls or as fibers, and a barrier thread 0 skips is reported",
          "[emulated][emulator]") {
  const std::string source = R"(extern "C" __global__ void twice(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = 2.f * x[i];
}
extern "C" __global__ void reverse(const float* x, float* y) {
  __shared__ float s[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = x[i];
  __syncthreads();
  y[i] = s[blockDim.x - 1 - threadIdx.x];
}
extern "C" __global__ void skipped(float* y) {
  if (threadIdx.x > 0) __syncthreads();
  y[threadIdx.x] = 1.f;
}
)";
  auto m = test::emulated_module::build(source, kWork);
  INFO((m ? std::string() : m.message()));
  REQUIRE(m.ok());
  std::vector<float> x(3 * 64), y(3 * 64, NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  float* xp = x.data();
  float* yp = y.data();
  REQUIRE((*m)->launch("twice", {3, 1, 1}, {64, 1, 1}, 0, {&xp, &yp}).ok());
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == 2.f * x[i]);
  std::fill(y.begin(), y.end(), NAN);
  REQUIRE((*m)->launch("reverse", {3, 1, 1}, {64, 1, 1}, 0, {&xp, &yp}).ok());
  for (size_t b = 0; b < 3; ++b)
    for (size_t t = 0; t < 64; ++t) CHECK(y[b * 64 + t] == x[b * 64 + 63 - t]);
  auto bad = (*m)->launch("skipped", {1, 1, 1}, {64, 1, 1}, 0, {&yp});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Matchers::Contains("that its thread 0 does not"));
  // The report is that launch's: the module's next launch runs as any other.
  std::fill(y.begin(), y.end(), NAN);
  REQUIRE((*m)->launch("twice", {3, 1, 1}, {64, 1, 1}, 0, {&xp, &yp}).ok());
  CHECK(y[191] == 2.f * x[191]);
}
