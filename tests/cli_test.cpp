// The kernelskill command line as a user meets it: help for every subcommand, the
// checks on good and bad files, and `run` on a machine without a GPU.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "store/store.hpp"
#include "tests/support/command_output.hpp"
#include "tests/support/gpu_skip.hpp"

namespace {

const std::string ks_bin = std::string(KS_BINARY_DIR) + "/bin/kernelskill";
const std::string gpu_bin = std::string(KS_BINARY_DIR) + "/bin/kernelskill-gpu";
const std::string src = KS_SOURCE_DIR;

using ks::test::command_output;

command_output run(const std::string& args) { return ks::test::run_shell(ks_bin + " " + args + " 2>&1"); }

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::filesystem::path scratch_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("ks-cli-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("help explains the program and every subcommand", "[cli]") {
  auto top = run("--help");
  CHECK(top.status == 0);
  for (auto* sub : {"run", "check", "task", "plan", "devices"}) CHECK(contains(top.text, sub));
  for (auto* sub : {"run --help", "check --help", "task check --help", "plan check --help", "devices --help"}) {
    auto out = run(sub);
    INFO(sub);
    CHECK(out.status == 0);
    CHECK(contains(out.text, "Usage"));
  }
  CHECK(contains(run("plan check --help").text, "--source"));
}

TEST_CASE("no subcommand, or an unknown one, is a usage error", "[cli]") {
  CHECK(run("").status != 0);
  auto out = run("frobnicate");
  CHECK(out.status != 0);
  CHECK(contains(out.text, "frobnicate"));
}

TEST_CASE("check accepts the example experiment and every task it names", "[cli]") {
  auto out = run("check " + src + "/examples/experiment.yaml");
  CHECK(out.status == 0);
  CHECK(contains(out.text, ": ok ("));
}

TEST_CASE("check names the file, line and key of a bad config", "[cli]") {
  auto dir = scratch_dir();
  std::ofstream(dir / "bad.yaml") << "name: x\nbudgets:\n  rounds: lots\n";
  auto out = run("check " + (dir / "bad.yaml").string());
  CHECK(out.status == 1);
  CHECK(contains(out.text, "bad.yaml:3:"));
  CHECK(contains(out.text, "budgets.rounds"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("task check validates the example tasks and reports a bad one", "[cli]") {
  auto ok = run("task check " + src + "/examples/tasks/softmax.yaml " + src + "/examples/tasks/layernorm.yaml");
  CHECK(ok.status == 0);
  CHECK(contains(ok.text, "task 'softmax'"));
  auto dir = scratch_dir();
  std::ofstream(dir / "t.yaml") << "name: t\nreference: {torchscript: 'def forward(x):\n  return x'}\n"
                                   "inputs:\n  - {name: x, shape: [4, -2]}\n";
  auto bad = run("task check " + (dir / "t.yaml").string());
  CHECK(bad.status == 1);
  CHECK(contains(bad.text, "inputs[0].shape"));
  std::filesystem::remove_all(dir);
}

// task check runs the reference's operator check (kernelskill-gpu --check-reference, in a
// sandboxed child): a reference the export would refuse is not "ok", and the saved module
// whose forward forks a file read (tests/data/untrusted) is refused naming the operator.
TEST_CASE("task check refuses a reference whose operators the export refuses", "[cli][untrusted]") {
  auto dir = scratch_dir();
  std::ofstream(dir / "reads.yaml") << "name: reads\nreference:\n  torchscript: |\n    def forward(x):\n"
                                       "        return x + torch.from_file('/etc/passwd', False, 4)\n"
                                       "inputs:\n  - {name: x, shape: [4]}\n";
  auto bad = run("task check " + (dir / "reads.yaml").string());
  CHECK(bad.status == 1);
  CHECK(contains(bad.text, "aten::from_file"));
  CHECK_FALSE(contains(bad.text, ": ok"));
  const std::string untrusted = src + "/tests/data/untrusted";
  std::ofstream(dir / "fork.yaml") << "name: fork\nreference:\n  module: " << untrusted
                                   << "/fork_function.pt\ninputs:\n  - {name: x, shape: [4]}\n";
  std::ofstream(dir / "computes.yaml") << "name: computes\nreference:\n  module: " << untrusted
                                       << "/fork_computes.pt\ninputs:\n  - {name: x, shape: [4]}\n";
  auto forked = run("task check " + (dir / "fork.yaml").string() + " " + (dir / "computes.yaml").string());
  CHECK(forked.status == 1);
  CHECK(contains(forked.text, "aten::from_file"));
  CHECK(contains(forked.text, "prim::fork"));
  CHECK(contains(forked.text, "computes.yaml: ok"));
  CHECK(contains(forked.text, "operators are allowed"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("plan check prints the concrete launch of an example plan", "[cli]") {
  auto out = run("plan check " + src + "/examples/plans/softmax_rows.yaml --task " + src +
                 "/examples/tasks/softmax.yaml --source " + src + "/examples/plans/softmax_rows.cu");
  CHECK(out.status == 0);
  CHECK(contains(out.text, "kernel softmax_rows_f32"));
  CHECK(contains(out.text, "grid (4096, 1, 1)"));
}

TEST_CASE("plan check names the step and field of a broken plan", "[cli]") {
  auto dir = scratch_dir();
  std::ofstream(dir / "p.yaml") << "outputs:\n  - {name: y, shape: [x.shape[0], x.shape[1]]}\n"
                                   "steps:\n  - kernel: softmax_rows_f32\n    grid: [ceil_div(M, 4)]\n"
                                   "    block: [256]\n    args: [x, y, {int64: 1}, {int: 2}]\n";
  auto out = run("plan check " + (dir / "p.yaml").string() + " --task " + src +
                 "/examples/tasks/softmax.yaml --source " + src + "/examples/plans/softmax_rows.cu");
  CHECK(out.status == 1);
  CHECK(contains(out.text, "step 0"));
  CHECK(contains(out.text, "grid[0]"));
  CHECK(contains(out.text, "'M'"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("export writes a ModelNew file from a run's output, and refuses what it cannot export", "[cli][export]") {
  auto dir = scratch_dir();
  // A run's output for one task: kernel.cu, plan.yaml, outcome.json.
  auto task_dir = dir / "out" / "tasks" / "gelu";
  std::filesystem::create_directories(task_dir);
  std::filesystem::copy_file(src + "/tests/data/export/gelu.cu", task_dir / "kernel.cu");
  std::filesystem::copy_file(src + "/tests/data/export/gelu.yaml", task_dir / "plan.yaml");
  std::ofstream(task_dir / "outcome.json")
      << R"({"task": "gelu", "success": true, "best_candidate": "abc123", "best_origin": "seed:elementwise",
             "compile_options": ["--use_fast_math"], "rounds": 2})";
  auto out = run("export --task " + src + "/examples/tasks/gelu.yaml --run-dir " + (dir / "out").string() + " --out " +
                 (dir / "gelu_new.py").string());
  INFO(out.text);
  CHECK(out.status == 0);
  CHECK(contains(out.text, "ModelNew for gelu"));
  std::ifstream f(dir / "gelu_new.py");
  std::string py((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(contains(py, "class ModelNew(torch.nn.Module):"));
  CHECK(contains(py, "CANDIDATE = \"abc123\""));
  CHECK(contains(py, "NVCC_OPTIONS = [\"--use_fast_math\"]"));
  // From files, to stdout.
  auto files = run("export --task " + src + "/examples/tasks/gelu.yaml --kernel " + src +
                   "/tests/data/export/gelu.cu --plan " + src + "/tests/data/export/gelu.yaml --out -");
  CHECK(files.status == 0);
  CHECK(contains(files.text, "def get_inputs("));
  // A task that ended without a correct kernel has nothing to export.
  std::ofstream(task_dir / "outcome.json") << R"({"task": "gelu", "success": false, "reason": "every seed failed"})";
  auto failed = run("export --task " + src + "/examples/tasks/gelu.yaml --run-dir " + task_dir.string());
  CHECK(failed.status == 1);
  CHECK(contains(failed.text, "ended without a correct kernel (every seed failed)"));
  // A plan that does not fit the task is refused with the validator's message.
  auto wrong = run("export --task " + src + "/examples/tasks/matmul_bias_relu.yaml --kernel " + src +
                   "/tests/data/export/gelu.cu --plan " + src + "/tests/data/export/layernorm.yaml --out -");
  CHECK(wrong.status == 1);
  CHECK(contains(wrong.text, "export of task 'matmul_bias_relu'"));
  // Neither --run-dir nor --kernel/--plan: a usage error.
  CHECK(run("export --task " + src + "/examples/tasks/gelu.yaml").status == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("run stops with a plain message where there is no GPU", "[cli][nogpu]") {
  auto has_gpu = std::system((gpu_bin + " --list-devices >/dev/null 2>&1").c_str()) == 0;
  // There the example would run a whole experiment: bench/agent/llm_loop.sh does that.
  if (has_gpu) KS_SKIP("this machine has a GPU (the example run is bench/agent/llm_loop.sh's job)");
  auto out = run("run " + src + "/examples/experiment.yaml");
  {
    CHECK(out.status == 3);
    CHECK(contains(out.text, "no GPU is available"));
    CHECK(contains(out.text, "gpus:"));
    CHECK(contains(out.text, "remote:"));
  }
}

TEST_CASE("an unknown --log-level is rejected", "[cli]") {
  auto out = run("--log-level loud devices");
  CHECK(out.status != 0);
  CHECK(contains(out.text, "loud"));
}

// ---- kernelskill skills ----------------------------------------------------------

TEST_CASE("skills list and check describe the repo's library", "[cli][skills]") {
  auto list = run("skills list");
  CHECK(list.status == 0);
  CHECK(contains(list.text, "vectorize_loads"));
  CHECK(contains(list.text, "memory_bandwidth"));
  auto check = run("skills check");
  CHECK(check.status == 0);
  CHECK(contains(check.text, "decision cases"));
}

TEST_CASE("skills show prints a method's knowledge and where the table uses it", "[cli][skills]") {
  auto out = run("skills show vectorize_loads");
  CHECK(out.status == 0);
  for (auto* part : {"Preconditions:", "Expected effect:", "Forbidden patterns:", "Sources:", "Allowed by cases:",
                     "Example:", "Rules coder:"})
    CHECK(contains(out.text, part));
  auto typo = run("skills show vectorise_loads");
  CHECK(typo.status == 1);
  CHECK(contains(typo.text, "did you mean 'vectorize_loads'"));
}

TEST_CASE("skills check names the file, entry and field of a broken library", "[cli][skills]") {
  auto dir = scratch_dir() / "skills";
  std::filesystem::create_directories(dir);
  for (auto& f : std::filesystem::directory_iterator(src + "/skills"))
    if (f.path().extension() == ".yaml") std::filesystem::copy(f.path(), dir / f.path().filename());
  {
    std::ofstream extra(dir / "zz_broken.yaml");
    extra << "methods:\n  - id: broken_method\n    name: Broken\n    category: memroy\n"
             "    rationale: r\n    expected_effect: {duration_us: down}\n    sources: [s]\n";
  }
  auto out = run("skills check --skills " + dir.string());
  CHECK(out.status == 1);
  CHECK(contains(out.text, "zz_broken.yaml:4:"));
  CHECK(contains(out.text, "broken_method"));
  CHECK(contains(out.text, "category"));
  std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("skills explain prints an auditable decision trace", "[cli][skills]") {
  auto out = run("skills explain " + src + "/examples/evidence/streaming_scalar.json");
  CHECK(out.status == 0);
  CHECK(contains(out.text, "bottleneck (primary): memory_bandwidth"));
  CHECK(contains(out.text, "case mem_stream_scalar fired"));
  CHECK(contains(out.text, "chosen: vectorize_loads"));
  CHECK(contains(out.text, "vetoed: shared_memory_tiling"));
  // Same evidence, same trace: the policy is deterministic.
  CHECK(run("skills explain " + src + "/examples/evidence/streaming_scalar.json").text == out.text);
  auto bad = run("skills explain " + src + "/examples/experiment.yaml");
  CHECK(bad.status == 1);
  CHECK(contains(bad.text, "not valid JSON"));
}

// Experience of (bottleneck class, template, method) weighs in the ranking; the trace
// says when it moved the choice, and experience of another template does not count.
TEST_CASE("skills explain says when experience moved the choice", "[cli][skills][store]") {
  auto dir = scratch_dir() / "memory";
  {
    auto db = ks::store::open(dir);
    REQUIRE(db);
    // vectorize_loads, the table's choice for this evidence, gave its lines nothing in
    // six applications to elementwise kernels (wrong three times, slower three times).
    for (int i = 0; i < 6; ++i) {
      ks::experience_record r{"vectorize_loads",
                              "memory_bandwidth",
                              "streaming",
                              "t" + std::to_string(i),
                              2,
                              1.0,
                              i < 3 ? 0.0 : 0.9,
                              i >= 3,
                              {},
                              0};
      r.template_name = "elementwise";
      REQUIRE((*db)->record_experience(r));
    }
  }
  auto evidence = [&](const std::string& templ) {
    auto j = nlohmann::json::parse(std::ifstream(src + "/examples/evidence/streaming_scalar.json"));
    j["template"] = templ;
    const auto path = dir.parent_path() / ("evidence-" + templ + ".json");
    std::ofstream(path) << j.dump();
    return path.string();
  };
  auto plain = run("skills explain " + evidence("elementwise"));
  CHECK(contains(plain.text, "chosen: vectorize_loads"));
  CHECK(contains(plain.text, "template: elementwise"));
  CHECK_FALSE(contains(plain.text, "experience moved"));
  auto moved = run("skills explain " + evidence("elementwise") + " --memory " + dir.string());
  INFO(moved.text);
  CHECK(moved.status == 0);
  CHECK(contains(moved.text, "experience: experience moved the choice from vectorize_loads to "));
  CHECK(contains(moved.text, "6 applications gave 1"));
  CHECK_FALSE(contains(moved.text, "chosen: vectorize_loads"));
  // The same evidence for a pool kernel: the elementwise kernels' experience is not its.
  auto other = run("skills explain " + evidence("pool") + " --memory " + dir.string());
  CHECK(contains(other.text, "chosen: vectorize_loads"));
  CHECK_FALSE(contains(other.text, "experience moved"));
  auto stats = run("skills stats --memory " + dir.string());
  CHECK(contains(stats.text, "REALIZED"));
  std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("skills install versions the library into a store, and stats reads experience", "[cli][skills][store]") {
  auto dir = scratch_dir() / "memory";
  auto install = run("skills install --memory " + dir.string());
  CHECK(install.status == 0);
  CHECK(contains(install.text, "installed (was v0)"));
  auto again = run("skills install --memory " + dir.string());
  CHECK(again.status == 0);
  auto empty = run("skills stats --memory " + dir.string());
  CHECK(empty.status == 0);
  CHECK(contains(empty.text, "no experience recorded"));
  {
    auto db = ks::store::open(dir);
    REQUIRE(db);
    ks::experience_record a{"vectorize_loads", "memory_bandwidth", "streaming", "gelu", 1, 1.0, 1.5, true, {}, 0};
    ks::experience_record b{"vectorize_loads", "memory_bandwidth", "streaming", "relu", 1, 2.0, 2.0, true, {}, 0};
    ks::experience_record c{"fast_math_intrinsics", "compute_fp32", "streaming", "gelu", 1, 1.0, 0.0, false, {}, 0};
    REQUIRE((*db)->record_experience(a));
    REQUIRE((*db)->record_experience(b));
    REQUIRE((*db)->record_experience(c));
  }
  auto stats = run("skills stats --memory " + dir.string());
  CHECK(stats.status == 0);
  CHECK(contains(stats.text, "vectorize_loads"));
  CHECK(contains(stats.text, "1.225x"));  // geometric mean of 1.5 and 1.0
  auto only = run("skills stats --memory " + dir.string() + " --bottleneck compute_fp32");
  CHECK(contains(only.text, "fast_math_intrinsics"));
  CHECK_FALSE(contains(only.text, "vectorize_loads"));
  auto missing = run("skills stats --memory " + (dir.parent_path() / "absent").string());
  CHECK(missing.status == 1);
  std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("trajectory prints a task's timeline from the store", "[cli][store]") {
  auto dir = scratch_dir() / "memory";
  {
    auto db = ks::store::open(dir);
    REQUIRE(db);
    ks::trajectory_entry seed;
    seed.kind = "seed";
    seed.candidate_id = "aaaaaaaaaaaaaaaa";
    seed.summary = "template elementwise, vector width 1";
    REQUIRE((*db)->append_trajectory("gelu", seed));
    ks::trajectory_entry review = seed;
    review.kind = "review";
    review.status = ks::review_status::ok;
    review.speedup = 0.94;
    review.summary = "[bottleneck=memory_bandwidth] correct in 5/5 trials";
    REQUIRE((*db)->append_trajectory("gelu", review));
    ks::trajectory_entry opt;
    opt.kind = "optimize";
    opt.round = 1;
    opt.method = "vectorize_loads";
    opt.candidate_id = "bbbbbbbbbbbbbbbb";
    opt.parent_id = "aaaaaaaaaaaaaaaa";
    REQUIRE((*db)->append_trajectory("gelu", opt));
  }
  auto list = run("trajectory --memory " + dir.string());
  CHECK(list.status == 0);
  CHECK(contains(list.text, "gelu"));
  auto out = run("trajectory gelu --memory " + dir.string());
  CHECK(out.status == 0);
  CHECK(contains(out.text, "trajectory of gelu (3 entries)"));
  CHECK(contains(out.text, "round 0"));
  CHECK(contains(out.text, "round 1"));
  CHECK(contains(out.text, "review"));
  CHECK(contains(out.text, "speedup 0.940x"));
  CHECK(contains(out.text, "optimize vectorize_loads"));
  CHECK(contains(out.text, "bbbbbbbb <- aaaaaaaa"));
  CHECK(out.text.find("#1 ") < out.text.find("#3 "));
  auto missing = run("trajectory relu --memory " + dir.string());
  CHECK(missing.status == 1);
  CHECK(contains(missing.text, "no trajectory for task 'relu'"));
  std::filesystem::remove_all(dir.parent_path());
}

// An evidence file is JSON: metrics JSON has no number for come as "Infinity",
// "-Infinity" or "NaN" (as the store writes them) and are read, not refused.
TEST_CASE("skills explain reads non-finite and extreme evidence values", "[cli][skills]") {
  auto dir = std::filesystem::temp_directory_path() / ("ks-evidence-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "odd.json").string();
  std::ofstream(path) << R"({"structure_class": "streaming",
    "metrics": {"dram_throughput_pct": "Infinity", "l2_throughput_pct": 3.4028234663852886e38,
                "sm_throughput_pct": "NaN", "stall_long_scoreboard_pct": "-Infinity"},
    "features": {"is_pointwise": 1, "vector_width": 1},
    "task": {"atol": 1e-4, "rtol": "Infinity", "dtype": "float32"}, "round": 1})";
  auto out = run("skills explain " + path);
  INFO(out.text);
  CHECK(out.status == 0);
  CHECK(contains(out.text, "dram_throughput_pct"));
  std::ofstream(path) << R"({"metrics": {"dram_throughput_pct": "lots"}})";
  auto bad = run("skills explain " + path);
  CHECK(bad.status == 1);
  CHECK(contains(bad.text, "metrics"));
  CHECK(contains(bad.text, "dram_throughput_pct"));
  std::filesystem::remove_all(dir);
}
