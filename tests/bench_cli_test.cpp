// `kernelskill bench` as a user runs it, where there is no GPU: the real CLI imports two
// small KernelBench-format problems with the user's Python and PyTorch, runs the rules
// coder against the stand-in GPU worker (ks-scripted-gpu: real NVRTC compiles, scripted
// verdicts), exports the best kernels, reports the side-by-side measurement as not
// possible (no fake numbers), and a second invocation keeps every finished step; an
// interrupted import and run go on from where their files stop. The side-by-side
// script's correctness check runs on the CPU against the problem's own Model (no timing).

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/command_output.hpp"
#include "tests/support/gpu_skip.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using Catch::Matchers::Contains;

namespace {

const fs::path kSource = KS_SOURCE_DIR;
const fs::path kBin = fs::path(KS_BINARY_DIR) / "bin";
const fs::path kGood = kSource / "tests" / "data" / "kernelbench" / "good";
// docs/results' columns (scripts/results_page.py), as `bench` writes results-VARIANT.csv.
const std::string kResultsHeader =
    "run,date,commit,device,level,problem,eager_ms,compile_ms,ours_ms,over_eager,over_compile,correct,correct_1e-2,"
    "review_speedup,rounds,max_abs_error,reverted,note";

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

ks::test::command_output kernelskill(const std::string& args) {
  return ks::test::run_shell((kBin / "kernelskill").string() + " " + args + " 2>&1");
}

// The Python with PyTorch the project uses (KS_PYTHON, Debian's python3-torch, python3).
std::string python_with_torch() {
  for (std::string p : {std::string(std::getenv("KS_PYTHON") ? std::getenv("KS_PYTHON") : ""),
                        std::string("/usr/bin/python3"), std::string("python3")})
    if (!p.empty() && ks::test::run_shell(p + " -c 'import torch' 2>&1").status == 0) return p;
  return "";
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json read_json(const fs::path& p) { return json::parse(read(p)); }

fs::path scratch(const std::string& name) {
  auto d = fs::temp_directory_path() / ("ks-bench-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// What a step left, by modification time: a step that is skipped changes none of it.
std::map<std::string, fs::file_time_type> stamps(const fs::path& dir, const std::vector<std::string>& files) {
  std::map<std::string, fs::file_time_type> out;
  for (const auto& f : files) out[f] = fs::last_write_time(dir / f);
  return out;
}

}  // namespace

TEST_CASE("bench --help says what it does, and bad requests get clear messages", "[bench]") {
  auto help = kernelskill("bench --help");
  CHECK(help.status == 0);
  for (const char* what : {"--out", "--ablation", "--python", "--reps", "--trials", "fast_p", "torch.compile", "1e-2",
                           "Resumable", "--no-overlap", "--build-timeout", "--problem-timeout"})
    CHECK_THAT(help.text, Contains(what));
  const fs::path dir = scratch("usage");
  auto unknown =
      kernelskill("bench " + quote(kGood / "relu.py") + " --out " + quote(dir / "o") + " --ablation full,no-memory");
  CHECK(unknown.status == 2);
  CHECK_THAT(unknown.text, Contains("unknown variant 'no-memory' (known: full, no-ltm, no-stm, no-ltm-stm)"));
  auto llm = kernelskill("bench " + quote(kGood / "relu.py") + " --out " + quote(dir / "o") + " --coder llm");
  CHECK(llm.status == 1);
  CHECK_THAT(llm.text, Contains("--coder llm needs the model's endpoint"));
  auto missing = kernelskill("bench " + quote(kGood / "absent.py") + " --out " + quote(dir / "o"));
  CHECK(missing.status == 1);
  CHECK_THAT(missing.text, Contains("absent.py: no such file or directory"));
  auto no_out = kernelskill("bench " + quote(kGood / "relu.py"));
  CHECK(no_out.status == 2);
  fs::remove_all(dir);
}

// The script's KernelBench check on the CPU: it builds the problem's Model and each
// ModelNew(*get_init_inputs()) after the same seed, as KernelBench's evaluator does, and
// compares them with torch.allclose at 1e-4 and 1e-2. Stand-ins in plain PyTorch take the
// place of exported models (which need CUDA). No timing on the CPU: the rows say so.
TEST_CASE("the side-by-side script checks ModelNew against the problem's Model at 1e-4 and 1e-2", "[bench]") {
  const std::string python = python_with_torch();
  if (python.empty()) FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
  const fs::path dir = scratch("cpu-check");
  const fs::path stand_ins = kSource / "tests" / "data" / "kernelbench" / "bench";
  json models = json::array();
  for (const char* v : {"exact", "loose", "wrong", "reseeded", "broken"})
    models.push_back({{"variant", v}, {"path", (stand_ins / (std::string(v) + "_new.py")).string()}, {"sha256", v}});
  json manifest = {{"seed", 42},
                   {"trials", 2},
                   {"reps", 1},
                   {"tolerances", {1e-4, 1e-2}},
                   {"builds", (dir / "build").string()},
                   {"problems",
                    {{{"key", "good/gemm_relu_divide"},
                      {"name", "gemm_relu_divide"},
                      {"level", "good"},
                      {"problem", (kGood / "gemm_relu_divide.py").string()},
                      {"models", models}}}}};
  std::ofstream(dir / "manifest.json") << manifest.dump();
  auto out = ks::test::run_shell(python + " " + quote(kSource / "cli" / "side_by_side.py") + " --kb-manifest " +
                                 quote(dir / "manifest.json") + " --kb-measure --kb-cpu-check --kb-out " +
                                 quote(dir / "rows.jsonl") + " 2>&1");
  INFO(out.text);
  REQUIRE(out.status == 0);
  const json row = json::parse(read(dir / "rows.jsonl"));
  CHECK(row["key"] == "good/gemm_relu_divide");
  CHECK(row["timed"] == false);
  CHECK_FALSE(row.contains("eager_ms"));
  CHECK_FALSE(row.contains("error"));
  const json& v = row["variants"];
  auto correct = [&](const char* variant, const char* tol) { return v[variant]["correct"][tol].get<bool>(); };
  CHECK(correct("exact", "0.0001"));
  CHECK(correct("exact", "0.01"));
  CHECK(v["exact"]["max_abs_error"] == 0.0);
  CHECK(v["exact"]["passed"]["0.0001"] == 2);
  CHECK_FALSE(correct("loose", "0.0001"));
  CHECK(correct("loose", "0.01"));
  CHECK(v["loose"]["max_abs_error"].get<double>() == Approx(2e-3).epsilon(1e-3));
  CHECK_FALSE(correct("wrong", "0.0001"));
  CHECK_FALSE(correct("wrong", "0.01"));
  CHECK_FALSE(correct("reseeded", "0.01"));  // its own weights: the seeding matters
  CHECK_FALSE(correct("broken", "0.01"));
  CHECK_THAT(v["broken"]["error"].get<std::string>(), Contains("ModelNew(*get_init_inputs())"));
  fs::remove_all(dir);
}

TEST_CASE("bench imports, runs, exports, says the measurement needs a GPU, and resumes", "[bench][nogpu]") {
  const std::string python = python_with_torch();
  if (python.empty()) FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
  if (ks::test::run_shell(python + " -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'").status ==
      0)
    KS_SKIP(
        "PyTorch sees a GPU here: the measurement would run (bench/kernelbench/bench.sh measures on the GPU machine)");
  const fs::path dir = scratch("e2e");
  std::ofstream(dir / "gpu.yaml") << "gpus:\n  worker_binary: " << (kBin / "ks-scripted-gpu").string()
                                  << "\n  local: [0]\nbudgets: {repair_attempts: 1}\nreview: {trials: 2}\n";
  const fs::path out = dir / "out";
  const std::string args = "bench " + quote(kGood / "relu.py") + " " + quote(kGood / "gemm_relu_divide.py") +
                           " --out " + quote(out) + " --config " + quote(dir / "gpu.yaml") +
                           " --seeds 1 --rounds 1 --coder rules --jobs 1 --python " + python;
  auto first = kernelskill(args);
  INFO(first.text);
  // Exit 3: no GPU for the measurement; everything before it is done.
  REQUIRE(first.status == 3);
  CHECK_THAT(first.text, Contains("[import] done: 2 of 2 problems imported"));
  CHECK_THAT(first.text, Contains("[run full] done: 2 of 2 tasks with a correct kernel"));
  CHECK_THAT(first.text, Contains("[export full] done: 2 of 2 tasks exported"));
  CHECK_THAT(first.text, Contains("[measure] skipped: " + python));
  CHECK_THAT(first.text, Contains("sees no CUDA GPU"));
  // Nothing is built or warmed during the run without a GPU, and it says so.
  CHECK_THAT(first.text, Contains("[prepare] nothing prepared during the run: " + python + " sees no CUDA GPU"));
  const std::vector<std::string> files = {"import/good/relu.json",
                                          "tasks/good/relu.yaml",
                                          "tasks/good/gemm_relu_divide.pt",
                                          "problems/good/relu.py",
                                          "variants/full/config.yaml",
                                          "variants/full/run/tasks/relu/outcome.json",
                                          "variants/full/run/tasks/gemm_relu_divide/kernel.cu",
                                          "variants/full/rounds.json",
                                          "variants/full/models/relu.py",
                                          "variants/full/models/gemm_relu_divide.py",
                                          "variants/full/models/export.json"};
  for (const auto& f : files) CHECK(fs::exists(out / f));
  CHECK_THAT(read(out / "variants/full/models/relu.py"), Contains("class ModelNew"));
  // The script ships in the binary: the copy it wrote is the source's, byte for byte.
  CHECK(read(out / "measure/side_by_side.py") == read(kSource / "cli/side_by_side.py"));
  // The summary: what ran, and no measured number.
  const json s = read_json(out / "summary.json");
  CHECK(s["measurement"]["ran"] == false);
  CHECK_THAT(s["measurement"]["status"].get<std::string>(), Contains("not measured"));
  const json& overall = s["variants"][0]["overall"];
  CHECK(overall["problems"] == 2);
  CHECK(overall["known"] == 0);
  CHECK(overall["correct_rate_1e-4"].is_null());
  CHECK(overall["geomean_speedup_over_eager"].is_null());
  CHECK(overall["fast_p_over_eager"]["1"].is_null());
  for (const auto& p : s["problems"]) {
    CHECK(p["eager_ms"].is_null());
    CHECK(p["variants"]["full"]["run_success"] == true);
    CHECK(p["variants"]["full"]["exported"] == true);
    CHECK(p["variants"]["full"]["state"] == "pending");
  }
  // Speedup by round: the run's own reviews, rounds 0 and 1, both tasks.
  const json& rounds = s["variants"][0]["speedup_by_round"];
  REQUIRE(rounds.size() == 2);
  CHECK(rounds[1]["tasks"] == 2);
  CHECK(rounds[1]["mean"].is_number());
  // The rounds against the seeds, from the same rounds.json: both tasks had a seed kernel.
  CHECK(s["variants"][0]["rounds_vs_seeds"]["tasks"] == 2);
  CHECK(s["variants"][0]["rounds_vs_seeds"]["beat"].get<int>() <= 2);
  CHECK_THAT(read(out / "summary.md"), Contains("rounds beat the best seed on "));
  CHECK_THAT(read(out / "summary.md"), Contains("**Measurement: not measured:"));
  // The per-problem rows (docs/results' format) say so too: no time, no verdict, why.
  {
    std::istringstream rows(read(out / "results-full.csv"));
    std::string line;
    std::getline(rows, line);
    CHECK(line == kResultsHeader);
    int n = 0;
    while (std::getline(rows, line)) {
      INFO(line);
      ++n;
      CHECK_THAT(line, Contains(",none (not measured),,"));
      // Times, ratios and verdicts empty; the run's own speedup and its 1 round.
      CHECK(std::regex_search(line, std::regex(",(relu|gemm_relu_divide),,,,,,,,[0-9.]+,1,,,")));
      CHECK_THAT(line, Contains("not measured: "));  // and why, as the summary says it
    }
    CHECK(n == 2);
  }
  CHECK(fs::exists(out / "speedup_by_round.svg"));
  CHECK_FALSE(fs::exists(out / "speedup_distribution.svg"));  // nothing measured, nothing drawn

  // Again: every finished step is kept (nothing rewritten), the measurement still skipped.
  const auto before = stamps(out, files);
  auto second = kernelskill(args);
  INFO(second.text);
  CHECK(second.status == 3);
  CHECK_THAT(second.text, Contains("[import] complete: 2 problems (2 imported, 0 failed)"));
  CHECK_THAT(second.text, Contains("[run full] complete: 2 tasks finished"));
  CHECK_THAT(second.text, Contains("[export full] complete: 2 tasks"));
  CHECK_THAT(second.text, !Contains("[run full] [relu]"));
  CHECK(stamps(out, files) == before);

  // The CPU check's rows are never taken for the measurement, even for the exported model.
  const std::string sha = read_json(out / "variants/full/models/export.json")["relu"]["sha256"];
  std::ofstream(out / "measure/results-cpu.jsonl")
      << json{{"key", "good/relu"},
              {"timed", false},
              {"variants", {{"full", {{"sha256", sha}, {"correct", {{"0.0001", true}, {"0.01", true}}}}}}}}
             .dump()
      << "\n";
  auto third = kernelskill(args);
  CHECK(third.status == 3);
  const json after_cpu_rows = read_json(out / "summary.json");
  REQUIRE(after_cpu_rows["problems"].size() == 2);
  for (const auto& p : after_cpu_rows["problems"]) CHECK(p["variants"]["full"]["state"] == "pending");

  // A GPU's rows (as a measuring process writes them) are kept, except one whose problem
  // could not be checked (its Model failed: out of memory beside other work, say): that
  // problem is measured again, here where there is no GPU to do it.
  const std::string gemm_sha = read_json(out / "variants/full/models/export.json")["gemm_relu_divide"]["sha256"];
  auto timed_row = [](const std::string& key, const std::string& model_sha, bool failed) {
    json row = {
        {"key", key},
        {"timed", true},
        {"eager_ms", 1.0},
        {"variants",
         {{"full", {{"sha256", model_sha}, {"ours_ms", 0.5}, {"correct", {{"0.0001", true}, {"0.01", true}}}}}}}};
    if (failed) row["error"] = "the problem's Model: CUDA out of memory";
    return row.dump() + "\n";
  };
  std::ofstream(out / "measure/results-0.jsonl")
      << timed_row("good/relu", sha, false) << timed_row("good/gemm_relu_divide", gemm_sha, false);
  auto measured = kernelskill(args + " --run-name 'a test run' --commit 0123abc");
  INFO(measured.text);
  CHECK(measured.status == 0);
  CHECK_THAT(measured.text, Contains("[measure] complete: 2 problems measured"));
  CHECK_THAT(measured.text, Contains("mean 2.000x and geomean 2.000x over eager"));
  // The per-problem rows name the run and the commit, and hold the times and verdicts;
  // scripts/results_page.py takes them as docs/results data and draws the table.
  const std::string rows = read(out / "results-full.csv");
  CHECK_THAT(rows, Contains("\na test run,"));
  CHECK_THAT(rows, Contains(",0123abc,unknown,,relu,1.0000,,0.5000,,,yes,yes,"));
  CHECK_THAT(rows, Contains(",0123abc,unknown,,gemm_relu_divide,1.0000,,0.5000,,,yes,yes,"));
  {
    const fs::path site = dir / "site";
    fs::create_directories(site / "results");
    fs::copy_file(kSource / "tests/data/results_page/page.md", site / "page.md");
    std::ofstream(site / "results" / "kb.csv") << rows;
    auto page = ks::test::run_shell("python3 " + quote(kSource / "scripts/results_page.py") + " --page " +
                                    quote(site / "page.md") + " --results " + quote(site / "results") + " 2>&1");
    INFO(page.text);
    CHECK(page.status == 0);
    // The page has the suite's summary; its per-problem table is the suite's own page.
    const std::string md = read(site / "page.md");
    CHECK_THAT(
        md, Contains("2 problems, 2 correct; ours over eager 2.000x in geometric mean over the 2 correct and timed"));
    CHECK_THAT(md, Contains("[results/kb.md](results/kb.md)"));
    CHECK_THAT(read(site / "results" / "kb.md"), Contains("| relu | 1.0000 | — | 0.5000 | 2.00x | — | yes |"));
  }
  auto bad_commit = kernelskill(args + " --commit HEAD");
  CHECK(bad_commit.status == 2);
  CHECK_THAT(bad_commit.text, Contains("--commit 'HEAD' is not a commit"));
  std::ofstream(out / "measure/results-0.jsonl")
      << timed_row("good/relu", sha, true) << timed_row("good/gemm_relu_divide", gemm_sha, false);
  auto remeasure = kernelskill(args);
  INFO(remeasure.text);
  CHECK(remeasure.status == 3);
  CHECK_THAT(remeasure.text, Contains("[measure] skipped: " + python));
  // Meanwhile the summary counts it as pending, with its error, not as incorrect.
  const json after_error = read_json(out / "summary.json");
  for (const auto& p : after_error["problems"]) {
    INFO(p.dump());
    if (p["name"] == "relu") {
      CHECK(p["variants"]["full"]["state"] == "pending");
      CHECK_THAT(p["error"].get<std::string>(), Contains("CUDA out of memory"));
    } else {
      CHECK(p["variants"]["full"]["state"] == "measured");
    }
  }
  CHECK(after_error["variants"][0]["overall"]["known"] == 1);
  fs::remove(out / "measure/results-0.jsonl");

  // An interrupted import and run: the record of one import and the outcome of one task
  // are gone (as if the process had been stopped before writing them). Only those are
  // done again; the other problem and task are kept.
  fs::remove(out / "import/good/relu.json");
  fs::remove(out / "variants/full/run/tasks/gemm_relu_divide/outcome.json");
  const auto kept = stamps(out, {"import/good/gemm_relu_divide.json", "variants/full/run/tasks/relu/outcome.json"});
  auto fourth = kernelskill(args);
  INFO(fourth.text);
  CHECK(fourth.status == 3);
  CHECK_THAT(fourth.text, Contains("[import] 1 of 2 problems to import (1 imported before)"));
  CHECK_THAT(fourth.text, Contains("[run full] 1 of 2 tasks to run (1 finished before; unfinished ones resume)"));
  CHECK_THAT(fourth.text, !Contains("[run full] [relu]"));
  CHECK(fs::exists(out / "variants/full/run/tasks/gemm_relu_divide/outcome.json"));
  CHECK(stamps(out, {"import/good/gemm_relu_divide.json", "variants/full/run/tasks/relu/outcome.json"}) == kept);

  // The state a GPU machine hands on (bench/kernelbench/bench.sh's kb-bench.tgz)
  // has no .pt modules. A task every variant has finished and exported needs its module
  // no more: it is not made again, and the run and the export keep what they did.
  fs::remove(out / "tasks/good/gemm_relu_divide.pt");
  auto fifth = kernelskill(args);
  INFO(fifth.text);
  CHECK(fifth.status == 3);
  CHECK_THAT(fifth.text, Contains("[import] complete: 2 problems (2 imported, 0 failed)"));
  CHECK_THAT(fifth.text, Contains("[run full] complete: 2 tasks finished"));
  CHECK_THAT(fifth.text, Contains("[export full] complete: 2 tasks"));
  CHECK_FALSE(fs::exists(out / "tasks/good/gemm_relu_divide.pt"));
  // One the run must still do gets its module again from the copied problem file.
  fs::remove_all(out / "variants/full/run/tasks/gemm_relu_divide");
  auto sixth = kernelskill(args);
  INFO(sixth.text);
  CHECK(sixth.status == 3);
  CHECK_THAT(sixth.text, Contains("[import] 1 of 2 problems to import (1 imported before)"));
  CHECK_THAT(sixth.text, Contains("[run full] 1 of 2 tasks to run (1 finished before; unfinished ones resume)"));
  CHECK(fs::exists(out / "tasks/good/gemm_relu_divide.pt"));
  CHECK(fs::exists(out / "variants/full/run/tasks/gemm_relu_divide/outcome.json"));

  // Another config for the same variant is refused, not mixed into its results.
  auto other = kernelskill("bench " + quote(kGood / "relu.py") + " " + quote(kGood / "gemm_relu_divide.py") +
                           " --out " + quote(out) + " --config " + quote(dir / "gpu.yaml") +
                           " --seeds 1 --rounds 2 --jobs 1 --python " + python);
  CHECK(other.status == 1);
  CHECK_THAT(other.text, Contains("records the config variant full ran with"));
  CHECK_THAT(other.text, Contains("rounds: 2"));
  // Other concurrency (or other GPUs) is the same experiment: it resumes.
  std::ofstream(dir / "gpu2.yaml") << "gpus:\n  worker_binary: " << (kBin / "ks-scripted-gpu").string()
                                   << "\n  local: [0]\n  review_timeout_s: 90\n"
                                   << "budgets: {repair_attempts: 1, tasks_in_flight: 1}\nreview: {trials: 2}\n";
  std::string again = args;
  again.replace(again.find("gpu.yaml"), 8, "gpu2.yaml");
  auto same = kernelskill(again);
  INFO(same.text);
  CHECK(same.status == 3);
  CHECK_THAT(same.text, Contains("[run full] complete: 2 tasks finished"));
  fs::remove_all(dir);
}

// The ablation as the paper runs it (issue 48, point 4), end to end on the stand-in GPU:
// full, no-ltm and no-stm over the same problems with the same budget, each variant in
// its own store; the summary reports each one's reviews and moves, full against the
// others at the same number of reviews, the short-term memory's check (no-stm repeats
// no move that full's trajectories hold) and the speedup-by-round curves as CSV.
TEST_CASE("bench runs the ablation full, no-ltm, no-stm on the stand-in and reports its checks", "[bench][nogpu]") {
  const std::string python = python_with_torch();
  if (python.empty()) FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
  if (ks::test::run_shell(python + " -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'").status ==
      0)
    KS_SKIP("PyTorch sees a GPU here: the measurement would run (the GPU machine runs the ablation with a GPU)");
  const fs::path dir = scratch("ablation");
  std::ofstream(dir / "gpu.yaml") << "gpus:\n  worker_binary: " << (kBin / "ks-scripted-gpu").string()
                                  << "\n  local: [0]\nbudgets: {repair_attempts: 1}\nreview: {trials: 2}\n";
  const fs::path out = dir / "out";
  const uint32_t rounds = 4;
  auto r =
      kernelskill("bench " + quote(kGood / "relu.py") + " " + quote(kGood / "scalar_multiply.py") + " --out " +
                  quote(out) + " --config " + quote(dir / "gpu.yaml") + " --seeds 1 --rounds " +
                  std::to_string(rounds) + " --coder rules --jobs 1 --ablation full,no-ltm,no-stm --python " + python);
  INFO(r.text);
  REQUIRE(r.status == 3);  // everything but the measurement
  for (const char* v : {"full", "no-ltm", "no-stm"}) {
    CHECK_THAT(r.text, Contains(std::string("[run ") + v + "] done: 2 of 2 tasks with a correct kernel"));
    CHECK_THAT(r.text, Contains(std::string("[export ") + v + "] done: 2 of 2 tasks exported"));
  }
  // The same budget for every variant: their recorded configs differ in the ablation only.
  auto without_ablation = [&](const std::string& v) {
    std::string text = read(out / "variants" / v / "config.yaml"), kept;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("#", 0) != 0 && line.find("memory:") == std::string::npos &&
          line.find("name:") == std::string::npos)
        kept += line + "\n";
    return kept;
  };
  CHECK(without_ablation("no-ltm") == without_ablation("full"));
  CHECK(without_ablation("no-stm") == without_ablation("full"));
  CHECK_THAT(read(out / "variants/no-ltm/config.yaml"), Contains("long_term_memory: false"));
  CHECK_THAT(read(out / "variants/no-stm/config.yaml"), Contains("short_term_memory: false"));
  // no-ltm's planner ran without the library's table: its plans say so.
  auto traj = kernelskill("trajectory relu --memory " + quote(out / "variants/no-ltm/memory"));
  CHECK_THAT(traj.text, Contains("long-term memory off"));

  const json s = read_json(out / "summary.json");
  REQUIRE(s["variants"].size() == 3);
  std::map<std::string, json> var;
  for (const auto& v : s["variants"]) var[v["name"].get<std::string>()] = v;
  for (const auto& [name, v] : var) {
    INFO(name << ": " << v.dump());
    // The curve: rounds 0..4 for both tasks.
    REQUIRE(v["speedup_by_round"].size() == rounds + 1);
    CHECK(v["speedup_by_round"][0]["tasks"] == 2);
    CHECK(v["reviews"]["tasks"] == 2);
    CHECK(v["reviews"]["total"].get<int>() >= 2);
    REQUIRE(v["moves"].is_object());
    CHECK(v["moves"]["tasks"] == 2);
  }
  // With short-term memory no move is ever repeated.
  CHECK(var["full"]["moves"]["repeated"] == 0);
  CHECK(var["no-ltm"]["moves"]["repeated"] == 0);
  CHECK(var["full"]["moves"]["attempts"].get<int>() >= 2);
  // Full against the others at the same number of reviews.
  CHECK(var["full"].count("full_at_equal_reviews") == 0);
  for (const char* v : {"no-ltm", "no-stm"}) {
    INFO(v);
    REQUIRE(var[v].contains("full_at_equal_reviews"));
    CHECK(var[v]["full_at_equal_reviews"]["tasks"] == 2);
    CHECK(var[v]["full_at_equal_reviews"]["geomean_full_over_this"].is_number());
  }

  // The short-term memory's check, computed here again from the variants' moves.
  auto moves = [&](const std::string& v) {
    std::map<std::string, std::map<std::pair<std::string, std::string>, int>> out_moves;
    const json j = read_json(out / "variants" / v / "rounds.json");
    for (const auto& [task, list] : j["moves"].items())
      for (const auto& m : list) ++out_moves[task][{m[0].get<std::string>(), m[1].get<std::string>()}];
    return out_moves;
  };
  const auto full = moves("full"), no_stm = moves("no-stm");
  size_t repeated = 0, in_full = 0;
  for (const auto& [task, ms] : no_stm)
    for (const auto& [move, n] : ms) {
      if (n < 2) continue;
      ++repeated;
      in_full += full.count(task) && full.at(task).count(move);
    }
  REQUIRE(s.contains("short_term_memory_check"));
  const json& check = s["short_term_memory_check"];
  CHECK(check["no_stm_repeated_moves"] == repeated);
  CHECK(check["of_them_in_full"] == in_full);
  CHECK(check["holds"] == (in_full == 0));
  CHECK_THAT(read(out / "summary.md"), Contains("Short-term memory check (no-stm repeats no move that full's"));
  CHECK_THAT(read(out / "summary.md"), Contains("at the same number of reviews"));

  // The curves' data, for a page to draw: a row per variant and round.
  const std::string csv = read(out / "speedup_by_round.csv");
  std::istringstream lines(csv);
  std::string header;
  std::getline(lines, header);
  CHECK(header == "variant,round,tasks,of,mean,geomean");
  size_t rows = 0;
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK(std::count(line.begin(), line.end(), ',') == 5);
    ++rows;
  }
  CHECK(rows == 3 * (rounds + 1));
  CHECK_THAT(csv, Contains("\nno-stm,4,2,2,"));
  CHECK(fs::exists(out / "speedup_by_round.svg"));
  fs::remove_all(dir);
}

// On the GPU machine: the measurement's preparation overlaps the run. torch.compile of
// every problem is warmed and each finished task's model is built while the others are
// reviewed (one task in flight, so the first ones finish while the last runs), and the
// measurement then finds them done instead of doing them again.
TEST_CASE("bench on a GPU builds models and warms torch.compile during the run, then measures", "[bench][gpu]") {
  const std::string python = python_with_torch();
  if (python.empty()) FAIL("no Python with PyTorch");
  if (ks::test::run_shell(python + " -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'").status !=
      0)
    KS_SKIP("PyTorch sees no GPU here (the GPU machine runs this case)");
  const fs::path dir = scratch("overlap");
  std::ofstream(dir / "gpu.yaml") << "gpus:\n  local: [0]\nbudgets: {repair_attempts: 1, tasks_in_flight: 1}\n"
                                  << "review: {trials: 1}\n";
  const fs::path out = dir / "out";
  // Two rounds: the preparation hands out builds every 5 s after PyTorch has loaded
  // (5-15 s); with no rounds the H100 ran the three tasks in 6 s, before its first look,
  // and every model was built by the measurement instead.
  auto r =
      kernelskill("bench " + quote(kGood / "relu.py") + " " + quote(kGood / "scalar_multiply.py") + " " +
                  quote(kGood / "layer_norm.py") + " --out " + quote(out) + " --config " + quote(dir / "gpu.yaml") +
                  " --seeds 1 --rounds 2 --reps 5 --trials 1 --jobs 4 --python " + python);
  INFO(r.text);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.text, Contains("[prepare] warming torch.compile for 3 problems during the run"));
  const size_t run_done = r.text.find("[run full] done:");
  const size_t first_warm = r.text.find("[warm] good/");
  REQUIRE(run_done != std::string::npos);
  CHECK(first_warm < r.text.find("[measure]"));
  // The measurement's warm-up found every problem warmed, and its builds at least the
  // model of the task that finished first.
  CHECK_THAT(r.text, Contains("[warm] 3 of 3 problems warmed already"));
  std::smatch m;
  REQUIRE(std::regex_search(r.text, m, std::regex(R"(\[build\] ([0-9]+) of 3 models built already)")));
  CHECK(std::stoi(m[1]) >= 1);
  // Every problem measured and correct at 1e-4, with torch.compile's time beside ours.
  const json s = read_json(out / "summary.json");
  CHECK(s["measurement"]["ran"] == true);
  const json& overall = s["variants"][0]["overall"];
  CHECK(overall["measured"] == 3);
  CHECK(overall["correct_1e-4"] == 3);
  for (const auto& p : s["problems"]) {
    CHECK(p["eager_ms"].is_number());
    CHECK(p["compile_ms"].is_number());
  }
  fs::remove_all(dir);
}

// No step of the measurement waits without a bound (issue 46). The script's own bound on
// each model's build: a build that never ends (a child that sleeps, as nvcc or ninja
// would run) is killed with its child at build_timeout and recorded; a stale lock left by
// a killed build does not stop the next one; the measurement then reports the model as a
// failed cell with the reason, and measures the other.
TEST_CASE("the side-by-side script bounds each model's build and reports one that ran out of time", "[bench][bounds]") {
  const std::string python = python_with_torch();
  if (python.empty()) FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
  const fs::path dir = scratch("build-bound");
  const fs::path stand_ins = kSource / "tests" / "data" / "kernelbench" / "bench";
  fs::create_directories(dir / "build" / "ks_quick_build");
  std::ofstream(dir / "build" / "ks_quick_build" / "lock");  // as a killed build leaves it
  json models = {{{"variant", "stuck"}, {"path", (stand_ins / "stuck_build_new.py").string()}, {"sha256", "a"}},
                 {{"variant", "quick"}, {"path", (stand_ins / "quick_build_new.py").string()}, {"sha256", "b"}}};
  json manifest = {{"seed", 42},
                   {"trials", 1},
                   {"reps", 1},
                   {"tolerances", {1e-4, 1e-2}},
                   {"builds", (dir / "build").string()},
                   {"build_timeout", 15},
                   {"problems",
                    {{{"key", "good/relu"},
                      {"name", "relu"},
                      {"level", "good"},
                      {"problem", (kGood / "relu.py").string()},
                      {"models", models}}}}};
  std::ofstream(dir / "manifest.json") << manifest.dump();
  const std::string script =
      python + " " + quote(kSource / "cli" / "side_by_side.py") + " --kb-manifest " + quote(dir / "manifest.json");
  const auto t0 = std::chrono::steady_clock::now();
  auto built = ks::test::run_shell(script + " --kb-prebuild --jobs 2 2>&1");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(built.text);
  REQUIRE(built.status == 0);
  CHECK(secs < 60);
  CHECK_THAT(built.text, Contains("stuck_build_new.py: FAILED in"));
  CHECK_THAT(built.text, Contains("did not build within 15 s (the build's time bound; killed)"));
  CHECK_THAT(built.text, Contains("quick_build_new.py: built in"));
  const json stuck = read_json(dir / "build" / "ks_stuck_build" / "ks-build.json");
  CHECK(stuck["ok"] == false);
  CHECK(stuck["timed_out"] == true);
  CHECK(stuck["bound"] == 15);
  CHECK(fs::exists(dir / "build" / "ks_quick_build" / "ks_quick_build.so"));
  CHECK_FALSE(fs::exists(dir / "build" / "ks_quick_build" / "lock"));
  // The build's own child was killed with it: gone, or a zombie waiting to be reaped.
  const std::string pid = read(dir / "build" / "ks_stuck_build" / "child.pid");
  REQUIRE_FALSE(pid.empty());
  const std::string stat = read(fs::path("/proc") / pid / "stat");
  CHECK((stat.empty() || stat.find(") Z ") != std::string::npos));
  // Not tried again under the same bound: the second pass spends no time on it.
  auto again = ks::test::run_shell(script + " --kb-prebuild --jobs 2 2>&1");
  CHECK_THAT(again.text, Contains("2 of 2 models built already (or not to be tried again)"));
  // The measurement reports the reason and measures the other model.
  auto measured =
      ks::test::run_shell(script + " --kb-measure --kb-cpu-check --kb-out " + quote(dir / "rows.jsonl") + " 2>&1");
  INFO(measured.text);
  REQUIRE(measured.status == 0);
  const json row = json::parse(read(dir / "rows.jsonl"));
  CHECK_THAT(row["variants"]["stuck"]["error"].get<std::string>(), Contains("did not build within 15 s"));
  CHECK(row["variants"]["stuck"]["correct"]["0.0001"] == false);
  CHECK(row["variants"]["quick"]["correct"]["0.0001"] == true);
  fs::remove_all(dir);
}

// The bound on each torch.compile warm-up (--problem-timeout, the manifest's
// problem_timeout): a warm-up worker that never ends (tests/data/bench_bounds/hang_warm:
// it waits on a child that sleeps, as a compile that hangs would) is killed with its
// child after the bound, its problem named with the reason, and a fresh worker goes on
// to the next problem; nothing is recorded as warmed.
TEST_CASE("the side-by-side script bounds each torch.compile warm-up and names one that ran out of time",
          "[bench][bounds]") {
  const std::string python = python_with_torch();
  if (python.empty()) FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
  const fs::path dir = scratch("warm-bound");
  json problems = json::array();
  for (const char* name : {"relu", "layer_norm"})
    problems.push_back({{"key", std::string("good/") + name},
                        {"name", name},
                        {"level", "good"},
                        {"problem", (kGood / (std::string(name) + ".py")).string()},
                        {"models", json::array()}});
  json manifest = {{"seed", 42},
                   {"trials", 1},
                   {"reps", 1},
                   {"tolerances", {1e-4, 1e-2}},
                   {"builds", (dir / "build").string()},
                   {"problem_timeout", 3},
                   {"problems", problems}};
  std::ofstream(dir / "manifest.json") << manifest.dump();
  const fs::path sleeps = dir / "sleeps";
  const auto t0 = std::chrono::steady_clock::now();
  auto warmed =
      ks::test::run_shell("PYTHONPATH=" + quote(kSource / "tests" / "data" / "bench_bounds" / "hang_warm") +
                          " KS_HANG_WARM=" + quote(sleeps) + " TORCHINDUCTOR_CACHE_DIR=" + quote(dir / "inductor") +
                          " " + python + " " + quote(kSource / "cli" / "side_by_side.py") + " --kb-manifest " +
                          quote(dir / "manifest.json") + " --kb-warm --jobs 1 2>&1");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(warmed.text);
  CHECK(warmed.status == 0);
  CHECK(secs < 60);  // two bounds of 3 s, one after the other, and the start-ups
  CHECK_THAT(warmed.text, Contains("[warm] good/relu: did not finish within 3 s (killed)"));
  CHECK_THAT(warmed.text, Contains("[warm] good/layer_norm: did not finish within 3 s (killed)"));
  CHECK_FALSE(fs::exists(dir / "inductor" / "ks-warmed"));
  // Each hung warm-up's own child went with it: gone, or a zombie waiting to be reaped.
  std::ifstream pids(sleeps);
  int killed = 0;
  for (std::string pid; std::getline(pids, pid);) {
    const std::string stat = read(fs::path("/proc") / pid / "stat");
    CHECK((stat.empty() || stat.find(") Z ") != std::string::npos));
    ++killed;
  }
  CHECK(killed == 2);
  fs::remove_all(dir);
}

// The warm-ups share worker processes (PyTorch's and inductor's start-up paid once per
// worker, not per problem), and the bound is still per problem: one worker takes
// relu, a problem whose file hangs when loaded (tests/data/bench_bounds/hang_problem.py),
// and layer_norm in turn; relu's answer comes back (on this CPU machine, an error: no
// GPU), the hanging problem is killed after its bound and named, and a fresh worker
// takes layer_norm. Two workers for three problems.
TEST_CASE("torch.compile warm-ups share a worker and a problem that hangs loses only itself", "[bench][bounds]") {
  const std::string python = python_with_torch();
  if (python.empty()) FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
  const fs::path dir = scratch("warm-worker");
  json problems = json::array();
  for (const auto& [key, file] : {std::pair<std::string, fs::path>{"good/relu", kGood / "relu.py"},
                                  {"bounds/hang", kSource / "tests" / "data" / "bench_bounds" / "hang_problem.py"},
                                  {"good/layer_norm", kGood / "layer_norm.py"}})
    problems.push_back(
        {{"key", key}, {"name", key}, {"level", "good"}, {"problem", file.string()}, {"models", json::array()}});
  json manifest = {{"seed", 42},
                   {"trials", 1},
                   {"reps", 1},
                   {"tolerances", {1e-4, 1e-2}},
                   {"builds", (dir / "build").string()},
                   {"problem_timeout", 5},
                   {"problems", problems}};
  std::ofstream(dir / "manifest.json") << manifest.dump();
  const fs::path sleeps = dir / "sleeps";
  auto warmed =
      ks::test::run_shell("KS_HANG_WARM=" + quote(sleeps) + " TORCHINDUCTOR_CACHE_DIR=" + quote(dir / "inductor") +
                          " " + python + " " + quote(kSource / "cli" / "side_by_side.py") + " --kb-manifest " +
                          quote(dir / "manifest.json") + " --kb-warm --jobs 1 2>&1");
  INFO(warmed.text);
  CHECK(warmed.status == 0);
  const size_t relu = warmed.text.find("[warm] good/relu: ");
  const size_t hang = warmed.text.find("[warm] bounds/hang: did not finish within 5 s (killed)");
  const size_t norm = warmed.text.find("[warm] good/layer_norm: ");
  CHECK(relu != std::string::npos);
  CHECK(hang != std::string::npos);
  CHECK(norm != std::string::npos);
  CHECK((relu < hang && hang < norm));
  CHECK_THAT(warmed.text, Contains("[warm] 3 problems in 2 worker processes"));
  std::ifstream pids(sleeps);
  std::string pid;
  REQUIRE(std::getline(pids, pid));
  const std::string stat = read(fs::path("/proc") / pid / "stat");
  CHECK((stat.empty() || stat.find(") Z ") != std::string::npos));
  fs::remove_all(dir);
}

// The bench's own bound on each measured problem: a measuring process that never
// finishes a problem (tests/data/bench_bounds/fake_gpu_python.sh: it says PyTorch sees a
// GPU, and its measuring process waits on a child that sleeps) is ended, with that child,
// after --problem-timeout; the problem is a failed row with the phase as the reason, and
// the next problem goes to a fresh process.
TEST_CASE("bench ends a problem whose measurement runs past its bound, records why, and goes on", "[bench][bounds]") {
  const std::string python = python_with_torch();
  if (python.empty()) FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
  if (ks::test::run_shell(python + " -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'").status ==
      0)
    KS_SKIP("PyTorch sees a GPU here: the stand-in Python's builds and warm-ups would really run");
  const fs::path dir = scratch("problem-bound");
  std::ofstream(dir / "gpu.yaml") << "gpus:\n  worker_binary: " << (kBin / "ks-scripted-gpu").string()
                                  << "\n  local: [0]\nbudgets: {repair_attempts: 1}\nreview: {trials: 1}\n";
  const fs::path out = dir / "out", sleeps = dir / "sleeps";
  const auto t0 = std::chrono::steady_clock::now();
  auto run = ks::test::run_shell("KS_REAL_PYTHON=" + python + " KS_SLEEPS=" + quote(sleeps) + " " +
                                 (kBin / "kernelskill").string() + " bench " + quote(kGood / "relu.py") + " " +
                                 quote(kGood / "gemm_relu_divide.py") + " --out " + quote(out) + " --config " +
                                 quote(dir / "gpu.yaml") +
                                 " --seeds 1 --rounds 0 --coder rules --jobs 1 --no-overlap --problem-timeout 3"
                                 " --build-timeout 60 --python " +
                                 quote(kSource / "tests" / "data" / "bench_bounds" / "fake_gpu_python.sh") + " 2>&1");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(run.text);
  CHECK(secs < 400);
  CHECK_THAT(run.text, Contains("[export full] done: 2 of 2 tasks exported"));
  CHECK_THAT(run.text, Contains("did not finish within 3 s (--problem-timeout; ended in its phase 'torch.compile and "
                                "timing')"));
  CHECK_THAT(run.text, Contains("[measure] done: 2 of 2 problems measured"));
  // Each problem's row: failed, with the reason; the stand-in's sleeping children are gone.
  const json s = read_json(out / "summary.json");
  REQUIRE(s["problems"].size() == 2);
  for (const auto& p : s["problems"]) {
    INFO(p.dump());
    CHECK(p["variants"]["full"]["state"] == "measured");
    CHECK_THAT(p["variants"]["full"].dump(), Contains("did not finish within 3 s"));
  }
  std::ifstream pids(sleeps);
  int killed = 0;
  for (std::string pid; std::getline(pids, pid);) {
    const std::string stat = read(fs::path("/proc") / pid / "stat");
    CHECK((stat.empty() || stat.find(") Z ") != std::string::npos));
    ++killed;
  }
  CHECK(killed == 2);
  fs::remove_all(dir);
}
