// `kernelskill export` of tasks imported from KernelBench problems: the file has
// KernelBench's interface (export/kernelbench_module.hpp, docs/kernelbench.md). The
// problems of tests/data/kernelbench/good are imported by the real CLI with the real
// Python and PyTorch (python3-torch), lowered by the rules coder (`kernelskill lower`,
// one seed), exported by `kernelskill export`, and each export is checked in Python
// against its problem, in KernelBench's evaluator's order (check_export.py: no extension
// is built, the weights are Model's bit for bit, forward has Model.forward's signature
// and hands the kernel the right tensors, another number is refused). No GPU here:
// bench/kernelbench/eval_export.sh runs the exports through KernelBench's own evaluator.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/bounded_child.hpp"
#include "export/pytorch_export.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "task/task_loader.hpp"
#include "tests/support/command_output.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(KS_SOURCE_DIR) / "tests" / "data" / "kernelbench";
const std::string kBin = std::string(KS_BINARY_DIR) + "/bin/kernelskill";
// One directory per process: ctest runs each case in its own process, several at once.
const fs::path kWork = fs::path(KS_BINARY_DIR) / "kernelbench-export-test" / std::to_string(::getpid());
struct remove_work_at_exit {
  ~remove_work_at_exit() {
    std::error_code ec;
    fs::remove_all(kWork, ec);
  }
} remove_work;

// A Python that imports torch: $KS_PYTHON, else the system's, else python3 on PATH.
const std::string& python() {
  static const std::string p = [] {
    std::vector<std::string> candidates;
    if (const char* e = std::getenv("KS_PYTHON")) candidates.push_back(e);
    candidates.insert(candidates.end(), {"/usr/bin/python3", "python3"});
    for (const auto& c : candidates)
      if (ks::test::run_shell(shell_quote(c) + " -c 'import torch' 2>&1").status == 0) return c;
    FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
    return std::string();
  }();
  return p;
}

ks::test::command_output kernelskill(const std::string& args) {
  return ks::test::run_shell(shell_quote(kBin) + " " + args + " 2>&1");
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct exported {
  fs::path task, module, lowered, file;  // file: empty where the rules coder wrote nothing
  std::string lower_text, export_text;
  int export_status = -1;
};

// Every problem of good/: imported, lowered (seed 0), exported.
const std::map<std::string, exported>& exports() {
  static const std::map<std::string, exported> out = [] {
    std::map<std::string, exported> m;
    const fs::path tasks = kWork / "tasks";
    auto imported = kernelskill("import kernelbench " + shell_quote((kData / "good").string()) + " --out " +
                                shell_quote(tasks.string()) + " --python " + shell_quote(python()));
    INFO(imported.text);
    REQUIRE(imported.status == 0);
    for (const auto& e : fs::directory_iterator(tasks / "good")) {
      if (e.path().extension() != ".yaml") continue;
      const std::string name = e.path().stem().string();
      exported x;
      x.task = e.path();
      x.module = tasks / "good" / (name + ".pt");
      x.lowered = kWork / "lowered" / name;
      x.lower_text = kernelskill("lower " + shell_quote(x.task.string()) + " --out " + shell_quote(x.lowered.string()) +
                                 " --seeds 1")
                         .text;
      if (fs::exists(x.lowered / "seed-0.cu")) {
        const fs::path file = kWork / (name + ".py");
        auto ex =
            kernelskill("export --task " + shell_quote(x.task.string()) + " --kernel " +
                        shell_quote((x.lowered / "seed-0.cu").string()) + " --plan " +
                        shell_quote((x.lowered / "seed-0.yaml").string()) + " --out " + shell_quote(file.string()));
        x.export_text = ex.text;
        x.export_status = ex.status;
        if (ex.status == 0) x.file = file;
      }
      m[name] = x;
    }
    return m;
  }();
  return out;
}

candidate seed_candidate(const exported& x) {
  candidate c;
  c.id = "seed-0";
  c.source = read(x.lowered / "seed-0.cu");
  auto plan = load_launch_plan((x.lowered / "seed-0.yaml").string());
  REQUIRE(plan);
  c.plan = *plan;
  return c;
}

}  // namespace

TEST_CASE("kernelbench export: imported problems export with KernelBench's interface", "[kernelbench]") {
  REQUIRE(exports().size() == 13);
  // The rules coder lowers these (with and without weights, traced, with a number).
  for (const char* name : {"batch_norm", "conv_hardtanh", "gemm_relu_divide", "group_norm", "layer_norm", "relu",
                           "scalar_multiply", "symmetric_matmul"}) {
    INFO(name << ": " << exports().at(name).lower_text << exports().at(name).export_text);
    CHECK_FALSE(exports().at(name).file.empty());
  }
  for (const auto& [name, x] : exports()) {
    INFO(name << ": " << x.lower_text << x.export_text);
    if (!fs::exists(x.lowered / "seed-0.cu")) continue;  // nothing to export (told in lower_text)
    REQUIRE(x.export_status == 0);
    CHECK(x.export_text.find("with KernelBench's interface") != std::string::npos);
    auto task = load_task(x.task);
    REQUIRE(task);
    // The file carries the problem's source as imported, and the same kernel and
    // launcher as the task's own export: only the Python around them differs.
    const std::string py = read(x.file);
    CHECK(task->kernelbench.source == read(kData / "good" / (name + ".py")));
    CHECK(py.find("def __init__(self, *init_inputs, **init_kwargs):") != std::string::npos);
    task_spec plain = *task;
    plain.kernelbench = {};
    auto with = export_pytorch(*task, seed_candidate(x));
    auto without = export_pytorch(plain, seed_candidate(x));
    REQUIRE(with);
    REQUIRE(without);
    CHECK(with->cuda_source == without->cuda_source);
    CHECK(with->module_name == without->module_name);
    CHECK(py.find("CUDA_SOURCE = ") != std::string::npos);
    CHECK(without->python.find("PROBLEM_SOURCE") == std::string::npos);
    CHECK(
        without->python.find("def __init__(self, size=\"default\", seed=SEED, parameter_shapes=None, module=None):") !=
        std::string::npos);
  }
  // Model's attribute paths, without the wrapper a traced import adds; the number as
  // get_inputs passes it.
  const std::string conv = read(exports().at("conv_hardtanh").file);
  CHECK(conv.find("    (\"inner_conv_bias\", \"conv.bias\"),\n    (\"inner_conv_weight\", \"conv.weight\"),\n") !=
        std::string::npos);
  const std::string scalar = read(exports().at("scalar_multiply").file);
  CHECK(scalar.find("ARGUMENTS = [\n    (\"A\", \"A\", None),\n    (\"s\", None, 3.14),\n]") != std::string::npos);
}

TEST_CASE("kernelbench export: under KernelBench's seeding ModelNew holds Model's weights and takes its arguments",
          "[kernelbench]") {
  size_t checked = 0;
  for (const auto& [name, x] : exports()) {
    if (x.file.empty()) continue;
    INFO(name);
    auto run = run_bounded("exec " + shell_quote(python()) + " " + shell_quote((kData / "check_export.py").string()) +
                               " " + shell_quote((kData / "good" / (name + ".py")).string()) + " " +
                               shell_quote(x.file.string()) + " " + shell_quote(x.module.string()),
                           {.cpu_seconds = 120, .memory_mb = 8192, .wall_seconds = 180, .sandbox = unconfined()},
                           kWork / (name + "-check.err"));
    REQUIRE(run);
    INFO(run->out << run->err);
    CHECK(run->ok());
    if (name == "scalar_multiply") CHECK(run->out.find("ok (1 number argument checked)") != std::string::npos);
    ++checked;
  }
  CHECK(checked >= 8);
}

TEST_CASE("kernelbench export: what the interface cannot use is named", "[kernelbench]") {
  const exported& x = exports().at("scalar_multiply");
  REQUIRE_FALSE(x.file.empty());
  auto task = load_task(x.task);
  REQUIRE(task);
  const candidate c = seed_candidate(x);
  auto message = [&](const task_spec& t) {
    auto ex = export_pytorch(t, c);
    REQUIRE_FALSE(ex);
    return ex.message();
  };
  task_spec t = *task;
  t.kernelbench.arguments[0].input = "B";
  CHECK_THAT(message(t),
             Catch::Contains("export of task 'scalar_multiply': forward argument 'A' names no task input ('B')"));
  t = *task;
  t.kernelbench.arguments[1].value = "3.14); import os";
  CHECK_THAT(message(t), Catch::Contains("forward argument 's': '3.14); import os' is not a number"));

  const exported& y = exports().at("conv_hardtanh");
  REQUIRE_FALSE(y.file.empty());
  auto conv = load_task(y.task);
  REQUIRE(conv);
  task_spec u = *conv;
  u.parameters[0].init.attr = "conv.bias";  // not under the wrapper (inner) that holds Model
  auto ex = export_pytorch(u, seed_candidate(y));
  REQUIRE_FALSE(ex);
  CHECK_THAT(ex.message(),
             Catch::Contains("parameter 'inner_conv_bias' (attr conv.bias) is not inside the problem's Model (inner)"));
}

// A result handed to others (the daemon's /api/tasks/ID/result) runs no submitted Python:
// a KernelBench problem's source, which the KernelBench interface runs at import, is left
// out (export/pytorch_export.hpp, shared_module_source). Shown with a problem whose source
// plants a file when it runs: the KernelBench-interface file plants it at import (the
// hazard), the shared file does not, and its ModelNew reads the weights from the module
// the user gives it.
TEST_CASE("kernelbench export: a result handed to others imports without running the problem's source",
          "[kernelbench][untrusted]") {
  const exported& x = exports().at("gemm_relu_divide");
  REQUIRE_FALSE(x.file.empty());
  auto task = load_task(x.task);
  REQUIRE(task);
  const fs::path marker = kWork / "planted-by-problem";
  task->kernelbench.source += "\nimport os\nos.system('touch " + marker.string() + "')\n";
  const candidate c = seed_candidate(x);
  auto import_file = [&](const std::string& text, const std::string& name, const std::string& then) {
    const fs::path file = kWork / name;
    std::ofstream(file) << text;
    const std::string script = "import runpy, torch\nns = runpy.run_path('" + file.string() + "')\n" + then;
    return run_bounded("exec " + shell_quote(python()) + " -c " + shell_quote(script),
                       {.cpu_seconds = 120, .memory_mb = 8192, .wall_seconds = 180, .sandbox = unconfined()},
                       kWork / (name + ".err"));
  };
  fs::remove(marker);
  auto kb = export_pytorch(*task, c);
  REQUIRE(kb);
  auto ran = import_file(kb->python, "hostile_kb.py", "");
  REQUIRE(ran);
  CHECK(fs::exists(marker));  // the KernelBench interface runs the problem's source

  fs::remove(marker);
  auto shared = shared_module_source(*task, c);
  REQUIRE(shared);
  CHECK(shared->find("os.system") == std::string::npos);
  CHECK(shared->find("PROBLEM_SOURCE") == std::string::npos);
  const std::string then =
      "try:\n    ns['ModelNew']()\n    raise SystemExit('built without the module')\n"
      "except ValueError as e:\n    assert 'module' in str(e), e\n"
      "m = ns['ModelNew'](module=torch.jit.load('" +
      x.module.string() +
      "'))\n"
      "assert len(m.task_parameters()) == " +
      std::to_string(task->parameters.size()) + "\n";
  auto imported = import_file(*shared, "hostile_shared.py", then);
  REQUIRE(imported);
  INFO(imported->out << imported->err);
  CHECK(imported->ok());
  CHECK_FALSE(fs::exists(marker));
}
