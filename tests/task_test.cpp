// Task files: the example tasks load, round-trip through to_yaml, switch sizes, and bad
// files are rejected with a message that names the file, line, key and expectation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <unistd.h>

#include "task/task_loader.hpp"

namespace fs = std::filesystem;
using namespace ks;

namespace {

const fs::path kTaskDir = fs::path(KS_SOURCE_DIR) / "examples" / "tasks";

std::vector<fs::path> example_tasks() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kTaskDir))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// A fresh directory under the system temp dir, removed at scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path =
        fs::temp_directory_path() / ("ks_task_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// A small valid task; the bad-input cases below change one thing at a time.
const std::string kGood = R"(name: good
reference:
  torchscript: |
    def forward(x, w):
        return torch.matmul(x, w)
inputs:
  - name: x
    shape: [4, 8]
parameters:
  - name: w
    shape: [8, 2]
    init: {kind: kaiming_uniform}
sizes:
  cpu: {x: [2, 8]}
)";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

// Parses `yaml` as bad.yaml and returns the error message (failing if it parsed).
std::string error_of(const std::string& yaml, const fs::path& base = ".") {
  auto t = parse_task(yaml, "bad.yaml", base);
  REQUIRE_FALSE(t.ok());
  INFO(t.message());
  // Every YAML error carries a position.
  CHECK(std::regex_search(t.message(), std::regex(R"(^bad\.yaml:\d+:\d+: )")));
  return t.message();
}

}  // namespace

TEST_CASE("every example task loads and has a cpu size", "[task]") {
  auto tasks = example_tasks();
  REQUIRE(tasks.size() >= 5);
  for (const auto& path : tasks) {
    INFO(path);
    auto t = load_task(path);
    REQUIRE(t.ok());
    CHECK(t->name == path.stem().string());
    CHECK_FALSE(t->torchscript.empty());
    CHECK_FALSE(t->description.empty());
    REQUIRE(t->sizes.count("cpu") == 1);
    auto cpu = with_size(*t, "cpu");
    REQUIRE(cpu.ok());
    // A cpu size is small: under a million elements per tensor.
    for (const auto* list : {&cpu->inputs, &cpu->parameters}) {
      for (const auto& ts : *list) {
        int64_t n = 1;
        for (int64_t d : ts.shape) n *= d;
        CHECK(n <= (1 << 20));
      }
    }
    CHECK(validate_task(*t).ok());
  }
}

TEST_CASE("the starter set covers the kinds of problem it promises", "[task]") {
  for (const char* name : {"gelu", "softmax", "layernorm", "row_sum", "matmul_bias_relu"}) {
    INFO(name);
    CHECK(fs::exists(kTaskDir / (std::string(name) + ".yaml")));
  }
}

TEST_CASE("to_yaml round-trips every example task", "[task]") {
  for (const auto& path : example_tasks()) {
    INFO(path);
    auto t = load_task(path);
    REQUIRE(t.ok());
    std::string yaml = to_yaml(*t);
    INFO(yaml);
    auto back = parse_task(yaml, "roundtrip.yaml", kTaskDir);
    REQUIRE(back.ok());
    CHECK(*back == *t);
    CHECK(to_yaml(*back) == yaml);
  }
}

TEST_CASE("to_yaml round-trips awkward sources, defaults and modules", "[task]") {
  temp_dir dir;
  static const char kBytes[] = "PK\x03\x04 not really a zip\0\x01";
  const std::string bytes(kBytes, sizeof kBytes - 1);  // with its NUL
  write_file(dir.path / "ref.pt", bytes);

  auto t = parse_task(kGood, "good.yaml", dir.path);
  REQUIRE(t.ok());

  SECTION("source without a final newline, with blank lines and indentation") {
    t->torchscript = "def forward(x, w):\n\n    y = torch.matmul(x, w)  \n    return y";
    auto back = parse_task(to_yaml(*t), "rt.yaml", dir.path);
    REQUIRE(back.ok());
    CHECK(back->torchscript == t->torchscript);
  }
  SECTION("every init kind and dtype") {
    t->inputs.push_back({"i", {3}, "int32", {.kind = "randint", .low = -5, .high = 5}});
    t->inputs.push_back({"b", {2, 2}, "bool", {.kind = "randint", .low = 0, .high = 2}});
    t->inputs.push_back({"h", {7}, "float16", {.kind = "uniform", .low = -0.5, .high = 0.25}});
    t->inputs.push_back({"c", {1}, "bfloat16", {.kind = "constant", .value = 3.5}});
    t->inputs.push_back({"a", {2, 3}, "int64", {.kind = "arange"}});
    t->inputs.push_back({"z", {2}, "float64", {.kind = "zeros"}});
    t->inputs.push_back({"o", {}, "float32", {.kind = "ones"}});
    t->tolerance = {.atol = 0.1 + 0.2, .rtol = 1e-7};
    t->seed = 18446744073709551615ull;
    t->description = "multi\nline: \"quoted\"";
    t->torchscript = "def forward(x, i, b, h, c, a, z, o, w):\n    return x\n";
    REQUIRE(validate_task(*t).ok());
    auto back = parse_task(to_yaml(*t), "rt.yaml", dir.path);
    INFO(to_yaml(*t));
    REQUIRE(back.ok());
    CHECK(*back == *t);
  }
  SECTION("a module reference is written as its path, not inlined") {
    std::string yaml = R"(name: m
reference: {module: ref.pt}
inputs: [{name: x, shape: [2]}]
)";
    auto m = parse_task(yaml, "m.yaml", dir.path);
    REQUIRE(m.ok());
    CHECK(m->module_bytes == bytes);
    CHECK(m->module_path == (dir.path / "ref.pt").string());
    std::string out = to_yaml(*m);
    CHECK(out.find("not really") == std::string::npos);
    CHECK(out.find(m->module_path) != std::string::npos);
    // Absolute, so it reads back from anywhere.
    auto back = parse_task(out, "rt.yaml", "/nonexistent");
    REQUIRE(back.ok());
    CHECK(*back == *m);
  }
}

TEST_CASE("load_task reads a module relative to the task file", "[task]") {
  temp_dir dir;
  fs::create_directories(dir.path / "sub");
  write_file(dir.path / "sub" / "net.pt", "bytes");
  write_file(dir.path / "sub" / "net.yaml",
             "name: net\nreference:\n  module: net.pt\ninputs:\n  - {name: x, shape: [3]}\n");
  auto t = load_task(dir.path / "sub" / "net.yaml");
  REQUIRE(t.ok());
  CHECK(t->module_bytes == "bytes");
  CHECK(fs::path(t->module_path).is_absolute());

  auto missing = load_task(dir.path / "nope.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains("nope.yaml") && Catch::Contains("no such task file"));
}

TEST_CASE("defaults: dtype, init and tolerance", "[task]") {
  auto t = parse_task(R"(name: d
reference: {torchscript: "def forward(a, b, c): return a"}
inputs:
  - {name: a, shape: [2]}
  - {name: b, shape: [2], dtype: int64}
  - {name: c, shape: [2], dtype: float16}
)",
                      "d.yaml", ".");
  REQUIRE(t.ok());
  CHECK(t->inputs[0].dtype == "float32");
  CHECK(t->inputs[0].init == distribution_spec{});  // normal(0, 1)
  CHECK(t->inputs[1].init.kind == "randint");
  CHECK(t->inputs[1].init.high == 10);
  // float16 anywhere loosens the default to 1e-2.
  CHECK(t->tolerance.atol == 1e-2);
  CHECK(t->tolerance.rtol == 1e-2);
  CHECK(t->seed == 0);

  auto bf = parse_task(replace(kGood, "shape: [8, 2]", "shape: [8, 2]\n    dtype: bfloat16"), "g.yaml", ".");
  REQUIRE(bf.ok());
  CHECK(bf->tolerance.atol == 2e-2);
  auto given = parse_task(kGood + "tolerance: {rtol: 0.5}\n", "g.yaml", ".");
  REQUIRE(given.ok());
  CHECK(given->tolerance.atol == 1e-4);
  CHECK(given->tolerance.rtol == 0.5);
}

TEST_CASE("with_size replaces shapes and rejects what it cannot apply", "[task]") {
  auto t = parse_task(kGood, "good.yaml", ".");
  REQUIRE(t.ok());
  auto cpu = with_size(*t, "cpu");
  REQUIRE(cpu.ok());
  CHECK(cpu->inputs[0].shape == std::vector<int64_t>{2, 8});
  CHECK(cpu->parameters[0].shape == std::vector<int64_t>{8, 2});  // not named: unchanged
  CHECK(t->inputs[0].shape == std::vector<int64_t>{4, 8});        // original untouched

  auto unknown = with_size(*t, "cpuu");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.message(),
             Catch::Contains("no size \"cpuu\"") && Catch::Contains("did you mean \"cpu\"") && Catch::Contains("good"));

  // Specs that did not come from YAML are not validated: with_size checks for itself.
  task_spec wire = *t;
  wire.sizes["gpu"] = {{"y", {1, 2}}};
  auto bad_tensor = with_size(wire, "gpu");
  REQUIRE_FALSE(bad_tensor.ok());
  CHECK_THAT(bad_tensor.message(), Catch::Contains("sizes.gpu.y") && Catch::Contains("\"y\""));
  wire.sizes["gpu"] = {{"x", {8}}};
  auto bad_rank = with_size(wire, "gpu");
  REQUIRE_FALSE(bad_rank.ok());
  CHECK_THAT(bad_rank.message(), Catch::Contains("expected rank 2"));
}

TEST_CASE("validate_task checks specs that did not come from YAML", "[task]") {
  auto t = parse_task(kGood, "good.yaml", ".");
  REQUIRE(t.ok());
  task_spec wire = *t;
  wire.inputs[0].dtype = "float33";
  auto st = validate_task(wire);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("inputs[0].dtype") && Catch::Contains("did you mean \"float32\""));
  wire = *t;
  wire.module_bytes = "x";
  CHECK_THAT(validate_task(wire).message(), Catch::Contains("reference: give either"));
}

// ---------------------------------------------------------------------------
// Bad inputs: each names the place and what was expected.

TEST_CASE("bad task files are rejected with a positioned, specific message", "[task][errors]") {
  SECTION("the good base parses") { CHECK(parse_task(kGood, "good.yaml", ".").ok()); }

  SECTION("shape is not a list") {
    auto m = error_of(replace(kGood, "shape: [4, 8]", "shape: big"));
    CHECK(m == "bad.yaml:8:12: inputs[0].shape: expected a list of positive integers, got \"big\"");
  }
  SECTION("a dimension is not positive") {
    auto m = error_of(replace(kGood, "shape: [4, 8]", "shape: [4, -3]"));
    CHECK(m == "bad.yaml:8:16: inputs[0].shape[1]: expected a positive integer, got -3");
  }
  SECTION("a dimension is not an integer") {
    auto m = error_of(replace(kGood, "shape: [4, 8]", "shape: [4, 8.5]"));
    CHECK(m == "bad.yaml:8:16: inputs[0].shape[1]: expected a positive integer, got \"8.5\"");
  }
  SECTION("unknown key, with a suggestion") {
    auto m = error_of(replace(kGood, "shape: [4, 8]", "shpae: [4, 8]"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:8:5: inputs[0].shpae: unknown key (did you "
                                    "mean \"shape\"?); expected one of name, shape, dtype, init"));
  }
  SECTION("unknown top-level key") {
    auto m = error_of(kGood + "tolerence: {atol: 1}\n");
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:15:1: tolerence: unknown key (did you mean "
                                    "\"tolerance\"?)"));
  }
  SECTION("unknown dtype") {
    auto m = error_of(replace(kGood, "shape: [4, 8]", "shape: [4, 8]\n    dtype: float"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:9:12: inputs[0].dtype: expected one of float32,") &&
                      Catch::Contains("got \"float\"") && Catch::Contains("did you mean"));
  }
  SECTION("unknown init kind") {
    auto m = error_of(replace(kGood, "kaiming_uniform", "gaussian"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:12:18: parameters[0].init.kind: expected one of "
                                    "normal, uniform,") &&
                      Catch::Contains("got \"gaussian\""));
  }
  SECTION("normal with std <= 0") {
    auto m = error_of(replace(kGood, "{kind: kaiming_uniform}", "{kind: normal, std: -1}"));
    CHECK(m == "bad.yaml:12:31: parameters[0].init.std: expected a positive number, got -1");
  }
  SECTION("uniform with low >= high") {
    auto m = error_of(replace(kGood, "{kind: kaiming_uniform}", "{kind: uniform, low: 2, high: 1}"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:12:") &&
                      Catch::Contains("parameters[0].init.high: expected high > low, got low 2, high 1"));
  }
  SECTION("a parameter the kind does not take") {
    auto m = error_of(replace(kGood, "{kind: kaiming_uniform}", "{kind: normal, low: 0}"));
    CHECK(m == "bad.yaml:12:31: parameters[0].init.low: normal does not take low; it takes mean, std");
  }
  SECTION("randint on a float tensor") {
    auto m = error_of(replace(kGood, "{kind: kaiming_uniform}", "{kind: randint, high: 4}"));
    CHECK_THAT(m, Catch::Contains("parameters[0].init.kind: randint makes integers, but dtype "
                                  "is float32"));
  }
  SECTION("normal on an integer tensor") {
    auto m = error_of(replace(kGood, "shape: [4, 8]", "shape: [4, 8]\n    dtype: int32\n    init: {kind: normal}"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:10:") &&
                      Catch::Contains("inputs[0].init.kind: normal draws real numbers, but dtype is int32"));
  }
  SECTION("kaiming_uniform on a vector") {
    auto m = error_of(replace(kGood, "shape: [8, 2]", "shape: [8]"));
    CHECK_THAT(m, Catch::Contains("parameters[0].init.kind: kaiming_uniform needs rank >= 2"));
  }
  SECTION("both torchscript and module") {
    auto m = error_of(replace(kGood, "reference:\n", "reference:\n  module: x.pt\n"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:3:3: reference: give either torchscript or module, not both"));
  }
  SECTION("neither torchscript nor module") {
    auto m = error_of("name: n\nreference: {}\ninputs: [{name: x, shape: [1]}]\n");
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:2:12: reference: expected torchscript"));
  }
  SECTION("module file missing") {
    auto m =
        error_of("name: n\nreference: {module: missing.pt}\ninputs: [{name: x, shape: [1]}]\n", "/tmp/ks_no_such_dir");
    CHECK(m == "bad.yaml:2:21: reference.module: module file \"/tmp/ks_no_such_dir/missing.pt\" does not exist");
  }
  SECTION("torchscript without forward") {
    auto m = error_of(replace(kGood, "def forward(x, w)", "def fwd(x, w)"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:3:16: reference.torchscript: the source does not define forward"));
  }
  SECTION("missing required key") {
    auto m = error_of(replace(kGood, "name: good\n", ""));
    CHECK(m == "bad.yaml:1:1: name: required key is missing");
  }
  SECTION("task name with a space") {
    auto m = error_of(replace(kGood, "name: good", "name: my task"));
    CHECK(m == "bad.yaml:1:7: name: expected [A-Za-z0-9_.-]+, got \"my task\"");
  }
  SECTION("task name that starts with a dash") {
    auto m = error_of(replace(kGood, "name: good", "name: -rf"));
    CHECK(m == "bad.yaml:1:7: name: \"-rf\" starts with '-' (it would read as an option on a command line)");
  }
  SECTION("tensor name that is not an identifier") {
    auto m = error_of(replace(kGood, "name: x", "name: 2x"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:7:11: inputs[0].name: expected an identifier"));
  }
  SECTION("tensor name that shadows torch") {
    auto m = error_of(replace(kGood, "name: x", "name: torch"));
    CHECK_THAT(m, Catch::Contains("inputs[0].name: \"torch\" is reserved"));
  }
  SECTION("duplicate tensor name across inputs and parameters") {
    auto m = error_of(replace(kGood, "name: w", "name: x"));
    CHECK(m ==
          "bad.yaml:10:11: parameters[0].name: duplicate tensor name \"x\" (names are "
          "shared by inputs and parameters)");
  }
  SECTION("negative tolerance") {
    auto m = error_of(kGood + "tolerance: {atol: -1e-3}\n");
    CHECK(m == "bad.yaml:15:19: tolerance.atol: expected a number >= 0, got -0.001");
  }
  SECTION("tolerance that is not a number") {
    auto m = error_of(kGood + "tolerance: {atol: tight}\n");
    CHECK(m == "bad.yaml:15:19: tolerance.atol: expected a number, got \"tight\"");
  }
  SECTION("negative seed") {
    auto m = error_of(kGood + "seed: -1\n");
    CHECK(m == "bad.yaml:15:7: seed: expected an integer in [0, 2^64), got \"-1\"");
  }
  SECTION("size names an unknown tensor") {
    auto m = error_of(replace(kGood, "{x: [2, 8]}", "{y: [2, 8]}"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:14:12: sizes.cpu.y: no input or parameter is "
                                    "named \"y\"") &&
                      Catch::Contains("the tensors are w, x"));
  }
  SECTION("size changes a tensor's rank") {
    auto m = error_of(replace(kGood, "{x: [2, 8]}", "{x: [16]}"));
    CHECK(m == "bad.yaml:14:12: sizes.cpu.x: expected rank 2 like [4, 8], got [16]");
  }
  SECTION("inputs is not a list") {
    auto m = error_of(replace(kGood, "inputs:\n  - name: x\n    shape: [4, 8]\n", "inputs: x\n"));
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:6:9: inputs: expected a list of tensors"));
  }
  SECTION("duplicate key") {
    auto m = error_of(replace(kGood, "shape: [4, 8]", "shape: [4, 8]\n    shape: [4, 8]"));
    CHECK(m == "bad.yaml:9:5: inputs[0].shape: duplicate key");
  }
  SECTION("invalid YAML") {
    auto m = error_of(replace(kGood, "shape: [4, 8]", "shape: [4, 8"));
    CHECK_THAT(m, Catch::Contains("invalid YAML"));
  }
  SECTION("a module reference with parameters") {
    temp_dir dir;
    write_file(dir.path / "m.pt", "x");
    auto m = error_of(replace(kGood, "  torchscript: |\n    def forward(x, w):\n        return torch.matmul(x, w)\n",
                              "  module: m.pt\n"),
                      dir.path);
    CHECK_THAT(m, Catch::StartsWith("bad.yaml:") &&
                      Catch::Contains("parameters[0].init.kind: a module reference carries its own "
                                      "parameters and its forward takes the inputs only: a parameter names the "
                                      "module attribute it mirrors ({kind: module, attr: ...})"));
  }
  SECTION("a parameter of kind module with a TorchScript reference") {
    auto m = error_of(replace(kGood, "init: {kind: kaiming_uniform}", "init: {kind: module, attr: fc.weight}"));
    CHECK_THAT(m, Catch::EndsWith("parameters[0].init.kind: kind module takes a module attribute, but the "
                                  "reference is TorchScript source"));
  }
  SECTION("kind module needs attr, a path") {
    temp_dir dir;
    write_file(dir.path / "m.pt", "x");
    std::string base = replace(kGood, "  torchscript: |\n    def forward(x, w):\n        return torch.matmul(x, w)\n",
                               "  module: m.pt\n");
    CHECK_THAT(error_of(replace(base, "init: {kind: kaiming_uniform}", "init: module"), dir.path),
               Catch::Contains("module needs its parameters: write init: {kind: module, attr}"));
    CHECK_THAT(
        error_of(replace(base, "init: {kind: kaiming_uniform}", "init: {kind: module, attr: 'fc..w'}"), dir.path),
        Catch::Contains("parameters[0].init.attr: expected the path of a tensor attribute of the module"));
  }
  SECTION("training is for modules") {
    auto m = error_of(replace(kGood, "reference:\n", "reference:\n  training: true\n"));
    CHECK_THAT(m, Catch::Contains("reference.training: training is a mode of a module reference"));
  }
  SECTION("kind program needs input_program, and input_program makes every input") {
    CHECK_THAT(error_of(replace(kGood, "shape: [4, 8]", "shape: [4, 8]\n    init: program")),
               Catch::Contains("inputs[0].init.kind: kind program needs the task's input_program"));
    std::string with_program = replace(kGood, "shape: [4, 8]", "shape: [4, 8]\n    init: {kind: normal}") +
                               "input_program: |\n  def inputs(device: Device) -> List[Tensor]:\n"
                               "      return [torch.rand([4, 8], device=device)]\n";
    CHECK_THAT(error_of(with_program),
               Catch::Contains("inputs[0].init.kind: input_program makes every input; leave out init or "
                               "write init: program (got \"normal\")"));
    CHECK_THAT(error_of(replace(with_program, "def inputs(", "def make(")),
               Catch::Contains("input_program: the source does not define inputs(device: Device) -> List[Tensor]"));
  }
}

TEST_CASE("to_yaml round-trips modules with parameters, training mode and input programs", "[task]") {
  temp_dir dir;
  write_file(dir.path / "net.pt", "bytes");
  const std::string yaml = R"(name: net
reference:
  module: net.pt
  training: true
inputs:
  - name: x
    shape: [4, 8]
  - name: mask
    shape: [4, 8]
    dtype: bool
input_program: |
  def inputs(device: Device) -> List[Tensor]:
      t1 = torch.rand([4, 8], device=device)
      return [t1, torch.randint(0, 2, [4, 8], device=device).to(11)]
parameters:
  - name: fc_weight
    shape: [8, 8]
    init: {kind: module, attr: fc.weight}
seed: 42
sizes:
  small: {fc_weight: [8, 8]}
)";
  auto t = parse_task(yaml, "net.yaml", dir.path);
  REQUIRE_FALSE(t.ok());  // a size cannot resize what the module holds
  CHECK_THAT(t.message(),
             Catch::Contains("sizes.small.fc_weight: a tensor of kind module has the shape its module holds"));
  t = parse_task(replace(yaml, "sizes:\n  small: {fc_weight: [8, 8]}\n", ""), "net.yaml", dir.path);
  REQUIRE(t.ok());
  CHECK(t->module_training);
  CHECK(t->inputs[0].init.kind == "program");  // implied by input_program
  CHECK(t->inputs[1].init.kind == "program");
  CHECK(t->parameters[0].init.kind == "module");
  CHECK(t->parameters[0].init.attr == "fc.weight");
  CHECK(t->input_program.find("torch.randint(0, 2") != std::string::npos);
  auto back = parse_task(to_yaml(*t), "rt.yaml", dir.path);
  INFO(to_yaml(*t));
  REQUIRE(back.ok());
  CHECK(*back == *t);
}

// reference.kernelbench: the problem's own source and forward's arguments, which the
// export needs to write KernelBench's ModelNew (docs/kernelbench.md).
namespace {
const std::string kKernelbench = R"(name: scaled
reference:
  module: net.pt
  training: true
  kernelbench:
    model_attr: inner
    arguments:
      - {name: A, input: A}
      - {name: s, value: "3.14"}
    source: "import torch\nclass Model(torch.nn.Module):\n    def forward(self, A, s):  \n        return self.fc(A) * s\n"
inputs:
  - name: A
    shape: [4, 8]
parameters:
  - name: inner_fc_weight
    shape: [8, 8]
    init: {kind: module, attr: inner.fc.weight}
seed: 42
)";
}  // namespace

TEST_CASE("to_yaml round-trips a KernelBench problem's source and forward arguments", "[task]") {
  temp_dir dir;
  write_file(dir.path / "net.pt", "bytes");
  auto t = parse_task(kKernelbench, "scaled.yaml", dir.path);
  REQUIRE(t.ok());
  CHECK(t->kernelbench.model_attr == "inner");
  REQUIRE(t->kernelbench.arguments.size() == 2);
  CHECK(t->kernelbench.arguments[0] == kernelbench_argument{"A", "A", ""});
  CHECK(t->kernelbench.arguments[1] == kernelbench_argument{"s", "", "3.14"});
  // Exactly as written: the trailing spaces too (the export embeds this text).
  CHECK(t->kernelbench.source.find("def forward(self, A, s):  \n") != std::string::npos);
  auto back = parse_task(to_yaml(*t), "rt.yaml", dir.path);
  INFO(to_yaml(*t));
  REQUIRE(back.ok());
  CHECK(*back == *t);

  // A source that a literal block can hold is written as one, and reads back the same.
  task_spec plain = *t;
  plain.kernelbench.source = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n";
  plain.kernelbench.model_attr.clear();
  plain.parameters[0].init.attr = "fc.weight";
  REQUIRE(validate_task(plain).ok());
  const std::string text = to_yaml(plain);
  CHECK_THAT(text, Catch::Contains("    source: |\n      import torch\n\n      class Model"));
  auto plain_back = parse_task(text, "rt.yaml", dir.path);
  REQUIRE(plain_back.ok());
  CHECK(*plain_back == plain);

  // A task without the section writes none.
  task_spec none = *t;
  none.kernelbench = {};
  CHECK(to_yaml(none).find("kernelbench") == std::string::npos);
}

TEST_CASE("a bad reference.kernelbench is named", "[task][errors]") {
  temp_dir dir;
  write_file(dir.path / "net.pt", "bytes");
  auto err = [&](const std::string& yaml) { return error_of(yaml, dir.path); };
  CHECK_THAT(err(replace(kKernelbench, "{name: s, value: \"3.14\"}", "{name: s, value: \"pi\"}")),
             Catch::Contains("reference.kernelbench.arguments[1].value: expected a number as Python writes it"));
  CHECK_THAT(err(replace(kKernelbench, "{name: A, input: A}", "{name: A, input: B}")),
             Catch::Contains("reference.kernelbench.arguments[0].input: no input is named \"B\""));
  CHECK_THAT(err(replace(kKernelbench, "{name: A, input: A}", "{name: A, input: A, value: \"1\"}")),
             Catch::Contains("reference.kernelbench.arguments[0]: give either input"));
  CHECK_THAT(err(replace(kKernelbench, "{name: s, value: \"3.14\"}", "{name: A, value: \"3.14\"}")),
             Catch::Contains("reference.kernelbench.arguments[1].name: duplicate argument \"A\""));
  CHECK_THAT(err(replace(kKernelbench, "      - {name: A, input: A}\n", "")),
             Catch::Contains("reference.kernelbench.arguments: input \"A\" is none of forward's arguments"));
  CHECK_THAT(err(replace(kKernelbench, "model_attr: inner", "model_attr: outer")),
             Catch::Contains(
                 "reference.kernelbench.model_attr: parameters[0] (attr \"inner.fc.weight\") is not inside \"outer\""));
  CHECK_THAT(err(replace(kKernelbench, "    source: \"import", "    sauce: \"import")),
             Catch::Contains("reference.kernelbench.sauce: unknown key (did you mean \"source\"?)"));
  const std::string source_line =
      "    source: \"import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, A, s):  \\n        return "
      "self.fc(A) * s\\n\"\n";
  CHECK_THAT(err(replace(kKernelbench, source_line, "    source: \"  \\n\"\n")),
             Catch::Contains("reference.kernelbench.source: expected the problem file's Python source"));
  CHECK_THAT(err(replace(replace(kKernelbench, "  module: net.pt\n  training: true\n",
                                 "  torchscript: \"def forward(A):\\n    return A\\n\"\n"),
                         "parameters:\n  - name: inner_fc_weight\n    shape: [8, 8]\n    init: {kind: module, attr: "
                         "inner.fc.weight}\n",
                         "")),
             Catch::Contains("reference.kernelbench: a KernelBench problem is imported as a module reference"));
  // validate_task: the same rules for a spec that did not come from YAML.
  auto t = parse_task(kKernelbench, "scaled.yaml", dir.path);
  REQUIRE(t.ok());
  t->kernelbench.arguments[1].value = "1e";
  auto v = validate_task(*t);
  REQUIRE_FALSE(v.ok());
  CHECK_THAT(v.message(), Catch::Contains("reference.kernelbench.arguments[1].value"));
}

namespace {

// Whether this process has `file` mapped (a line of /proc/self/maps names it).
bool mapped(const fs::path& file) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.size() >= file.string().size() &&
        line.compare(line.size() - file.string().size(), std::string::npos, file.string()) == 0)
      return true;
  return false;
}

}  // namespace

TEST_CASE("a task's module is mapped from its file and shared by every copy", "[task]") {
  // A network's weights ride in every request about its task: copies must not copy
  // them (a bench of level 2's 32768 x 32768 GEMMs grew to 110 GB and was killed).
  temp_dir dir;
  std::string weights(3u << 20, '\0');
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 7 + i / 4096);
  write_file(dir.path / "net.pt", weights);
  write_file(dir.path / "net.yaml", "name: net\nreference:\n  module: net.pt\ninputs:\n  - {name: x, shape: [3]}\n");
  const fs::path pt = fs::canonical(dir.path / "net.pt");
  std::vector<task_spec> copies;
  {
    auto t = load_task(dir.path / "net.yaml");
    REQUIRE(t.ok());
    CHECK(t->module_bytes == weights);
    CHECK(mapped(pt));  // mapped, not read into the process's own memory
    for (int i = 0; i < 3; ++i) copies.push_back(*t);
    for (const auto& c : copies) CHECK(c.module_bytes.data() == t->module_bytes.data());
  }
  // The loaded task is gone; its copies still hold the bytes.
  CHECK(copies.back().module_bytes == weights);

  // A writer that replaces the file by a rename (as kernelskill import does) leaves
  // the running task its own bytes; the next load sees the new ones.
  write_file(dir.path / "net.pt.new", "replaced");
  fs::rename(dir.path / "net.pt.new", dir.path / "net.pt");
  CHECK(copies.front().module_bytes == weights);
  auto again = load_task(dir.path / "net.yaml");
  REQUIRE(again.ok());
  CHECK(again->module_bytes == "replaced");

  again->module_bytes.clear();  // the last holder of a mapping unmaps it
  CHECK_FALSE(mapped(pt));
}

TEST_CASE("map_file names what it cannot map", "[task][errors]") {
  temp_dir dir;
  auto missing = shared_bytes::map_file(dir.path / "absent.pt");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains("absent.pt") && Catch::Contains("No such file"));
  auto folder = shared_bytes::map_file(dir.path);
  REQUIRE_FALSE(folder.ok());
  CHECK_THAT(folder.message(), Catch::Contains("not a regular file"));
  write_file(dir.path / "empty.pt", "");
  auto empty = shared_bytes::map_file(dir.path / "empty.pt");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  write_file(dir.path / "empty.yaml", "name: e\nreference:\n  module: empty.pt\ninputs:\n  - {name: x, shape: [3]}\n");
  auto t = load_task(dir.path / "empty.yaml");
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.message(), Catch::Contains("empty.pt") && Catch::Contains("empty"));
}
