// `kernelskill import kernelbench`, with real problem files written in KernelBench's
// format (tests/data/kernelbench/: good/ ones that must import, bad/ ones that must
// fail alone with their reason), the real Python and PyTorch (python3-torch, which
// scripts/setup.sh installs), and LibTorch running what was imported. The imported
// reference is checked against the problem's own Model, run in Python on the same
// inputs: same weights (seed 42, as KernelBench's evaluator), same outputs.
#include "tests/support/catch_torch.hpp"

#include <ATen/ATen.h>
#include <torch/serialize.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

#include "base/bounded_child.hpp"
#include "gpu/graph_export.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "importer/kernelbench_import.hpp"
#include "task/task_loader.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(KS_SOURCE_DIR) / "tests" / "data" / "kernelbench";
// One directory per process: ctest runs each case in its own process, several at once.
const fs::path kWork = fs::path(KS_BINARY_DIR) / "kernelbench-import-test" / std::to_string(::getpid());
struct remove_work_at_exit {
  ~remove_work_at_exit() {
    std::error_code ec;
    fs::remove_all(kWork, ec);
  }
} remove_work;

// A Python that imports torch: $KS_PYTHON, else the system's, else python3 on PATH.
const kernelbench_import_options& options() {
  static kernelbench_import_options o = [] {
    kernelbench_import_options o;
    o.limits = {.cpu_seconds = 60, .memory_mb = 8192, .wall_seconds = 120, .sandbox = {}};
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("KS_PYTHON")) candidates.push_back(p);
    candidates.insert(candidates.end(), {"/usr/bin/python3", "python3"});
    std::string why;
    for (const auto& c : candidates) {
      o.python = c;
      auto ok = check_python(o);
      if (ok) return o;
      why = ok.message();
    }
    FAIL("no Python with PyTorch for the importer (scripts/setup.sh installs python3-torch): " << why);
    return o;
  }();
  return o;
}

// The test's own checking scripts read the build tree: they run unconfined.
process_limits trusted_limits() {
  process_limits l = options().limits;
  l.sandbox.mode = sandbox_mode::off;
  return l;
}

// Imports every problem under `dir` into a fresh `out`; outcomes by task name.
std::map<std::string, import_outcome> import_all(const fs::path& dir, const fs::path& out,
                                                 const kernelbench_import_options& o) {
  fs::remove_all(out);
  auto files = find_problem_files({dir.string()});
  REQUIRE(files);
  std::map<std::string, import_outcome> outcomes;
  for (const auto& f : *files) outcomes[f.task_name] = import_kernelbench_problem(f, out, o);
  return outcomes;
}

const std::map<std::string, import_outcome>& good() {
  static auto outcomes = import_all(kData / "good", kWork / "good", options());
  return outcomes;
}

std::vector<std::string> graph_kinds(const std::string& json) {
  std::vector<std::string> kinds;
  // Parsed into a local: a range-for over a member of the temporary parse() returns
  // would read it after its end (and found no nodes).
  const nlohmann::json graph = nlohmann::json::parse(json);
  for (const auto& n : graph.at("nodes")) kinds.push_back(n.at("kind"));
  return kinds;
}

}  // namespace

TEST_CASE("kernelbench import: every problem of good/ imports, loads and names what it chose", "[kernelbench]") {
  REQUIRE(good().size() == 13);
  for (const auto& [name, o] : good()) {
    INFO(name << ": " << o.error);
    REQUIRE(o.ok());
    CHECK(o.task_path == kWork / "good" / "good" / (name + ".yaml"));
    CHECK(fs::exists(o.task_path.parent_path() / (name + ".pt")));
    auto task = load_task(o.task_path);
    REQUIRE(task);
    CHECK(task->name == name);
    CHECK(task->module_training);  // as KernelBench runs models
    CHECK(task->seed == 42);
    CHECK(task->description.find("KernelBench good/" + name + ".py") == 0);
    for (const auto& p : task->parameters) CHECK(p.init.kind == "module");
    // What the export needs for KernelBench's interface: the problem's source, byte for
    // byte (trailing blanks, a tab and UTF-8 in gemm_relu_divide), and forward's arguments.
    std::ifstream file(kData / "good" / (name + ".py"), std::ios::binary);
    std::string source((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    CHECK(task->kernelbench.source == source);
    REQUIRE(task->kernelbench.arguments.size() >= task->inputs.size());
  }
  auto scalar = load_task(good().at("scalar_multiply").task_path);
  REQUIRE(scalar);
  CHECK((scalar->kernelbench.arguments == std::vector<kernelbench_argument>{{"A", "A", ""}, {"s", "", "3.14"}}));
  CHECK(scalar->kernelbench.model_attr == "inner");  // traced: Model inside a wrapper
  auto conv = load_task(good().at("conv_hardtanh").task_path);
  REQUIRE(conv);
  CHECK(conv->kernelbench.model_attr == "inner");
  CHECK(conv->parameters.at(0).init.attr == "inner.conv.bias");
  // The weights the module owns are declared, by attribute path.
  auto gemm = load_task(good().at("gemm_relu_divide").task_path);
  REQUIRE(gemm);
  REQUIRE(gemm->parameters.size() == 2);
  CHECK(gemm->parameters[0].init.attr == "linear.weight");
  CHECK(gemm->parameters[0].shape == std::vector<int64_t>{48, 64});
  CHECK(gemm->parameters[1].init.attr == "linear.bias");
  CHECK(gemm->kernelbench.model_attr.empty());  // scripted: the module is Model
  CHECK((gemm->kernelbench.arguments == std::vector<kernelbench_argument>{{"x", "x", ""}}));
  // Plain torch.rand is a plain distribution; compositions become an input program.
  auto relu = load_task(good().at("relu").task_path);
  REQUIRE(relu);
  CHECK(relu->input_program.empty());
  CHECK(relu->inputs[0].init.kind == "uniform");
  CHECK(relu->inputs[0].shape == std::vector<int64_t>{16, 384});
  auto huber = load_task(good().at("huber_scaled").task_path);
  REQUIRE(huber);
  CHECK(huber->input_program.find("torch.rand([]") != std::string::npos);
  auto masked = load_task(good().at("masked_cumsum").task_path);
  REQUIRE(masked);
  CHECK(masked->inputs[1].dtype == "bool");
  // What could not be scripted was traced, and says so.
  CHECK(good().at("conv_hardtanh").notes.at(0).find("torch.jit.script failed") != std::string::npos);
  CHECK(good().at("scalar_multiply").notes.at(0).find("3.14") != std::string::npos);
}

TEST_CASE("kernelbench import: the imported reference computes what the problem's Model computes", "[kernelbench]") {
  for (const auto& [name, o] : good()) {
    INFO(name << ": " << o.error);
    REQUIRE(o.ok());
    auto task = load_task(o.task_path);
    REQUIRE(task);
    auto program = reference_program::load(*task);
    REQUIRE(program);
    for (uint32_t trial : {0u, 1u}) {
      auto inputs = make_inputs(*task, trial_seed(task->seed, trial), c10::Device(c10::kCPU));
      REQUIRE(inputs);
      auto outputs = run_tensors(**program, *inputs);
      REQUIRE(outputs);
      const fs::path in_file = kWork / (name + "-inputs.pt"), out_file = kWork / (name + "-outputs.pt");
      for (auto [file, list] : {std::pair{in_file, &*inputs}, std::pair{out_file, &*outputs}}) {
        c10::List<at::Tensor> l;
        for (const auto& t : *list) l.push_back(t);
        auto bytes = torch::pickle_save(c10::IValue(l));
        std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      }
      auto run = run_bounded("exec " + shell_quote(options().python) + " " +
                                 shell_quote((kData / "check_against_model.py").string()) + " " +
                                 shell_quote((kData / "good" / (name + ".py")).string()) + " " +
                                 shell_quote(in_file.string()) + " " + shell_quote(out_file.string()),
                             trusted_limits(), kWork / (name + "-check.err"));
      REQUIRE(run);
      INFO("trial " << trial << ": " << run->out << run->err);
      CHECK(run->ok());
    }
  }
}

TEST_CASE("kernelbench import: graphs of imported modules lift the weights and fold the shape checks",
          "[kernelbench]") {
  for (const auto& [name, o] : good()) {
    INFO(name);
    auto task = load_task(o.task_path);
    REQUIRE(task);
    auto json = export_graph_json(*task);
    if (!json) FAIL(json.message());
    auto graph = nlohmann::json::parse(*json);
    REQUIRE(graph["inputs"].size() == task->inputs.size() + task->parameters.size());
    const std::vector<std::string> kinds = graph_kinds(*json);
    REQUIRE_FALSE(kinds.empty());
    for (const auto& kind : kinds) {
      INFO(kind);
      CHECK(kind != "prim::If");
      CHECK(kind != "prim::Loop");
      CHECK(kind != "prim::ListUnpack");
      CHECK(kind != "prim::GetAttr");
      CHECK(kind != "aten::warn");
      CHECK(kind != "aten::add_");  // BatchNorm's step counter: module state, not output
    }
    // A branch on the tensor's layout and device (torch.norm's in PyTorch 2.x) folds to
    // the branch the GPU takes.
    if (name == "device_branch_norm") {
      CHECK(std::find(kinds.begin(), kinds.end(), "aten::linalg_vector_norm") != kinds.end());
      CHECK(std::find(kinds.begin(), kinds.end(), "aten::norm") == kinds.end());
    }
  }
}

TEST_CASE("kernelbench import: input programs draw the same inputs for a seed and others for another",
          "[kernelbench]") {
  auto task = load_task(good().at("symmetric_matmul").task_path);
  REQUIRE(task);
  auto a = make_inputs(*task, 7, c10::Device(c10::kCPU));
  auto b = make_inputs(*task, 7, c10::Device(c10::kCPU));
  auto c = make_inputs(*task, 8, c10::Device(c10::kCPU));
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(at::equal((*a)[0], (*b)[0]));
  CHECK_FALSE(at::equal((*a)[0], (*c)[0]));
  CHECK(at::equal((*a)[0], (*a)[0].t()));  // (A + A.T) / 2, as get_inputs makes it
  CHECK((*a)[0].min().item<float>() >= 0);
  // A program that makes a tensor of another shape than the task declares is refused.
  task_spec wrong = *task;
  wrong.inputs[1].shape = {24, 25};
  auto bad = make_inputs(wrong, 7, c10::Device(c10::kCPU));
  REQUIRE_FALSE(bad);
  CHECK(bad.message().find("input \"B\" is [24, 24] float32, the task declares [24, 25] float32") != std::string::npos);
  // And one that reads a file is refused before it runs, as a reference would be.
  wrong = *task;
  wrong.input_program =
      "def inputs(device: Device) -> List[Tensor]:\n"
      "    return [torch.from_file('/etc/passwd', False, 576), torch.rand([24, 24])]\n";
  bad = make_inputs(wrong, 7, c10::Device(c10::kCPU));
  REQUIRE_FALSE(bad);
  CHECK(bad.message().find("aten::from_file") != std::string::npos);
}

TEST_CASE("kernelbench import: a bad problem fails alone, with its reason and nothing written", "[kernelbench]") {
  kernelbench_import_options o = options();
  o.limits = {.cpu_seconds = 8, .memory_mb = 8192, .wall_seconds = 60, .sandbox = {}};
  const fs::path out = kWork / "bad";
  auto outcomes = import_all(kData / "bad", out, o);
  const std::map<std::string, std::string> reasons = {
      {"no_model", "does not define Model"},
      {"string_input", "get_inputs returns a str at position 1"},
      {"writes_file", "may not write files"},
      {"reads_network", "may not use the network"},
      {"spins", "more than 8 s of CPU time"},
      {"dropout", "aten::dropout with p=0.5 in training mode"},
      {"syntax_error", "SyntaxError"},
      {"missing_package", "imports the Python package 'ks_no_such_package', which "},
  };
  REQUIRE(outcomes.size() == reasons.size());
  for (const auto& [name, why] : reasons) {
    INFO(name);
    REQUIRE(outcomes.count(name));
    const auto& r = outcomes.at(name);
    CHECK_FALSE(r.ok());
    INFO(r.error);
    CHECK(r.error.find((kData / "bad" / (name + ".py")).string() + ": ") == 0);
    CHECK(r.error.find(why) != std::string::npos);
    CHECK(r.task_path.empty());
  }
  // How to get the package, for the interpreter that lacks it.
  CHECK(outcomes.at("missing_package").error.find("pip install ks_no_such_package") != std::string::npos);
  CHECK(outcomes.at("missing_package").error.find("--python") != std::string::npos);
  // Nothing of theirs was written: no task, and not the file writes_file tried.
  size_t files = 0;
  if (fs::exists(out))
    for (auto it = fs::recursive_directory_iterator(out); it != fs::recursive_directory_iterator(); ++it)
      files += it->is_regular_file();
  CHECK(files == 0);
  CHECK_FALSE(fs::exists(fs::current_path() / "kernelbench-import-was-here.txt"));
  CHECK_FALSE(fs::exists(kData / "bad" / "kernelbench-import-was-here.txt"));
}

TEST_CASE("kernelbench import: torch's caches lie in the scratch and no other directory opens", "[kernelbench]") {
  // PyTorch 2.11 made its cache directories while get_inputs was recorded, and the
  // guard refused level 1's 13-15 and 94-100: the caches now lie under TMPDIR, in
  // the sandbox and out of it.
  for (sandbox_mode mode : {sandbox_mode::best_effort, sandbox_mode::off}) {
    INFO("sandbox " << to_string(mode));
    kernelbench_import_options o = options();
    o.limits.sandbox.mode = mode;
    auto outcomes = import_all(kData / "caches", kWork / "caches", o);
    REQUIRE(outcomes.size() == 1);
    INFO(outcomes.at("torch_caches").error);
    CHECK(outcomes.at("torch_caches").ok());
  }
  // A directory anywhere else is refused, and the refusal names it.
  const fs::path dir = kWork / "makes_dir";
  fs::create_directories(dir);
  std::ofstream(dir / "makes_dir.py") << "import os\nimport torch\nimport torch.nn as nn\n"
                                         "class Model(nn.Module):\n"
                                         "    def forward(self, x):\n        return x\n"
                                         "def get_inputs():\n"
                                         "    os.mkdir(os.path.join(os.path.dirname(__file__), 'ks-made'))\n"
                                         "    return [torch.rand(4)]\n"
                                         "def get_init_inputs():\n    return []\n";
  auto outcomes = import_all(dir, kWork / "makes_dir-out", options());
  REQUIRE(outcomes.size() == 1);
  const std::string& why = outcomes.at("makes_dir").error;
  INFO(why);
  CHECK(why.find("may not change files (os.mkdir '" + (dir / "ks-made").string() + "')") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "ks-made"));
}

TEST_CASE("kernelbench import: paths name the problems, directories keep their layout", "[kernelbench]") {
  auto files = find_problem_files({(kData / "good" / "relu.py").string(), (kData / "bad").string()});
  REQUIRE(files);
  REQUIRE(files->size() == 9);
  CHECK((*files)[0].task_name == "relu");
  CHECK((*files)[0].subdir.empty());
  CHECK((*files)[1].subdir == fs::path("bad"));
  auto missing = find_problem_files({(kData / "nope").string()});
  REQUIRE_FALSE(missing);
  CHECK(missing.message().find("nope: no such file or directory") != std::string::npos);
}
