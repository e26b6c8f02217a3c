// kernelskill export: a candidate as a PyTorch ModelNew module. The kernels and plans
// in tests/data/export/ are real rules-coder output (`kernelskill lower TASK --seeds 2`,
// seed 0, 2026-11-29): an elementwise chain (gelu), a row reduction (layernorm), a row
// reduction with a fused epilogue (l2_normalize_rows), a whole-tensor reduction into a
// 0-d output through a scratch buffer (mse_loss) and library steps with a fused
// epilogue (matmul_bias_relu, conv2d_relu_bias); plus the hand-written example plans with dynamic shared
// memory (softmax_rows) and a scratch buffer (l2_normalize).
//
// Checked here, without a GPU or PyTorch: the export succeeds and carries the numbers
// of the resolved plan; the Python file parses (python3's ast, where python3 exists) and
// its CUDA_SOURCE string reads back byte for byte; the generated launcher compiles with
// the host compiler against stand-ins for ATen (tests/data/export/aten_stub.hpp), its
// kernel launches as plain calls checked against the kernels' parameter types; what
// cannot be exported is refused with a message naming it. Building and running the
// module with PyTorch happens on the GPU machine (cli/side_by_side.py).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include "export/pytorch_export.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "plan/plan_validator.hpp"
#include "plan/shape_expr.hpp"
#include "task/task_loader.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = KS_SOURCE_DIR;
const fs::path kData = kSource / "tests" / "data" / "export";

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

task_spec task(const std::string& rel) {
  auto t = load_task(kSource / rel);
  if (!t) FAIL(t.message());
  return *t;
}

candidate cand(const fs::path& cu, const fs::path& yaml) {
  candidate c;
  c.id = "test";
  c.source = read(cu);
  auto p = load_launch_plan(yaml.string());
  if (!p) FAIL(p.message());
  c.plan = *p;
  return c;
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("ks_export_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

int run(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool have_python() { return run("command -v python3 >/dev/null 2>&1") == 0; }

struct example {
  std::string task, cu, yaml;
};

const std::vector<example>& examples() {
  static const std::vector<example> v = {
      {"examples/tasks/gelu.yaml", "tests/data/export/gelu.cu", "tests/data/export/gelu.yaml"},
      {"examples/tasks/layernorm.yaml", "tests/data/export/layernorm.cu", "tests/data/export/layernorm.yaml"},
      {"bench/suites/ops/l2_normalize_rows.yaml", "tests/data/export/l2_normalize_rows.cu",
       "tests/data/export/l2_normalize_rows.yaml"},
      {"examples/tasks/matmul_bias_relu.yaml", "tests/data/export/matmul_bias_relu.cu",
       "tests/data/export/matmul_bias_relu.yaml"},
      {"examples/tasks/softmax.yaml", "examples/plans/softmax_rows.cu", "examples/plans/softmax_rows.yaml"},
      {"bench/suites/ops/mse_loss.yaml", "tests/data/export/mse_loss.cu", "tests/data/export/mse_loss.yaml"},
      {"bench/suites/ops/conv2d_relu_bias.yaml", "tests/data/export/conv2d_relu_bias.cu",
       "tests/data/export/conv2d_relu_bias.yaml"},
      // 3xTF32 at odd sizes: each third of K padded (scratch shapes with round_up), B
      // split transposed and the product run as linear.
      {"tests/golden/tasks/linear_odd_sizes.yaml", "tests/golden/lower/linear_odd_sizes/seed-1.cu",
       "tests/golden/lower/linear_odd_sizes/seed-1.yaml"},
      {"tests/golden/tasks/matmul_odd_n.yaml", "tests/golden/lower/matmul_odd_n/seed-1.cu",
       "tests/golden/lower/matmul_odd_n/seed-1.yaml"},
  };
  return v;
}

}  // namespace

TEST_CASE("export: rules-coder plans become a ModelNew file with the resolved numbers", "[export]") {
  for (const auto& e : examples()) {
    INFO(e.yaml);
    task_spec t = task(e.task);
    candidate c = cand(kSource / e.cu, kSource / e.yaml);
    auto ex = export_pytorch(t, c);
    if (!ex) FAIL(ex.message());
    CHECK(ex->python.find("class ModelNew(torch.nn.Module):") != std::string::npos);
    CHECK(ex->module_name.rfind("ks_" + t.name + "_", 0) == 0);
    REQUIRE(!ex->sizes.empty());
    CHECK(ex->sizes[0] == "default");
    // Every task here has a cpu size, at which its plan resolves too.
    CHECK(std::find(ex->sizes.begin(), ex->sizes.end(), "cpu") != ex->sizes.end());
    // The device code is carried verbatim; the launcher is the tail of the host
    // compiler's source (the kernels take only types it knows), with the kernels'
    // declarations, and not in nvcc's, which keeps the kernels alone.
    CHECK(ex->cuda_source.find(c.source) != std::string::npos);
    CHECK(ex->cpp_source.size() >= ex->launcher.size());
    CHECK(ex->cpp_source.compare(ex->cpp_source.size() - ex->launcher.size(), ex->launcher.size(), ex->launcher) == 0);
    CHECK(ex->cpp_source.find(ex->kernel_declarations) != std::string::npos);
    CHECK(ex->cuda_source.find("KS_LAUNCH") == std::string::npos);
    CHECK(ex->cuda_source.find("ATen") == std::string::npos);
    CHECK(ex->cpp_source.find("<<<") == std::string::npos);
    // The launch configuration is the validator's, at the default shapes.
    auto ctx = make_plan_context(t, c.source);
    REQUIRE(ctx);
    auto rp = resolve_plan(c.plan, *ctx);
    REQUIRE(rp);
    for (const auto& s : rp->steps) {
      if (s.kind != "kernel") {
        CHECK(ex->launcher.find("at::" + s.name.substr(6) + "(") != std::string::npos);
        continue;
      }
      std::string launch = "KS_LAUNCH(" + s.name + ", dim3(" + std::to_string(s.grid[0]) + "u, " +
                           std::to_string(s.grid[1]) + "u, " + std::to_string(s.grid[2]) + "u), dim3(" +
                           std::to_string(s.block[0]) + "u, " + std::to_string(s.block[1]) + "u, " +
                           std::to_string(s.block[2]) + "u), " + std::to_string(s.shared_mem_bytes) + ", stream";
      CHECK(ex->launcher.find(launch) != std::string::npos);
      for (const auto& a : s.args)
        if (a.kind == "int" && a.type == "int64")
          CHECK(ex->launcher.find("static_cast<long long>(" + std::to_string(a.int_value) + "LL)") !=
                std::string::npos);
    }
    for (const auto& b : rp->outputs) {
      std::string braced = shape_to_string(b.shape);
      braced.front() = '{';
      braced.back() = '}';
      if (b.shape.empty()) braced = "at::IntArrayRef()";
      CHECK(ex->launcher.find("at::Tensor t_" + b.name + " = at::" + (b.init == "zeros" ? "zeros" : "empty") + "(" +
                              braced) != std::string::npos);
    }
    // The default shapes select the specialised launcher; other shapes go to the
    // general one.
    std::string first = shape_to_string(t.inputs[0].shape);
    first.front() = '{';
    first.back() = '}';
    CHECK(ex->launcher.find("if (!general && ks_shapes_are(in, std::vector<std::vector<int64_t>>{std::vector<int64_t>" +
                            first) != std::string::npos);
    CHECK(ex->general_launcher_note == "");
    CHECK(ex->launcher.find("return ks_run_general(in);") != std::string::npos);
    CHECK(ex->python.find("GENERAL_LAUNCHER = True") != std::string::npos);
    // pytorch_module_source is the same text.
    auto py = pytorch_module_source(t, c);
    REQUIRE(py);
    CHECK(*py == ex->python);
  }
}

TEST_CASE("export: conv2d attributes, 0-d outputs", "[export]") {
  auto conv = export_pytorch(task("bench/suites/ops/conv2d_relu_bias.yaml"),
                             cand(kData / "conv2d_relu_bias.cu", kData / "conv2d_relu_bias.yaml"));
  REQUIRE(conv);
  CHECK(conv->launcher.find("const std::vector<int64_t> s0_padding{1, 1};") != std::string::npos);
  CHECK(
      conv->launcher.find("at::conv2d(t_x, t_weight, t_bias, at::IntArrayRef(s0_stride), at::IntArrayRef(s0_padding), "
                          "at::IntArrayRef(s0_dilation), static_cast<int64_t>(1))") != std::string::npos);
  // Computed channels-last: input and weight converted first, as the reviewer runs it.
  candidate nhwc = cand(kData / "conv2d_relu_bias.cu", kData / "conv2d_relu_bias.yaml");
  nhwc.plan.steps[0].attrs["memory_format"] = "channels_last";
  auto cl = export_pytorch(task("bench/suites/ops/conv2d_relu_bias.yaml"), nhwc);
  REQUIRE(cl);
  CHECK(cl->launcher.find("at::conv2d(t_x.contiguous(at::MemoryFormat::ChannelsLast), "
                          "t_weight.contiguous(at::MemoryFormat::ChannelsLast), t_bias, ") != std::string::npos);
  // Its result handed on as [N, H, W, C]: a permuted view, as the reviewer runs it.
  nhwc.plan.steps[0].attrs["result_layout"] = "nhwc";
  auto view = export_pytorch(task("bench/suites/ops/conv2d_relu_bias.yaml"), nhwc);
  REQUIRE(view);
  CHECK(view->launcher.find("static_cast<int64_t>(1)).permute({0, 2, 3, 1})") != std::string::npos);
  nhwc.plan.steps[0].attrs["result_layout"] = "hwc";
  CHECK_FALSE(export_pytorch(task("bench/suites/ops/conv2d_relu_bias.yaml"), nhwc));
  nhwc.plan.steps[0].attrs.erase("result_layout");
  nhwc.plan.steps[0].attrs["memory_format"] = "nhwc";
  CHECK_FALSE(export_pytorch(task("bench/suites/ops/conv2d_relu_bias.yaml"), nhwc));
  auto mse =
      export_pytorch(task("bench/suites/ops/mse_loss.yaml"), cand(kData / "mse_loss.cu", kData / "mse_loss.yaml"));
  REQUIRE(mse);
  CHECK(mse->launcher.find("at::Tensor t_out = at::empty(at::IntArrayRef(), options.dtype(at::kFloat));  // output") !=
        std::string::npos);
}

TEST_CASE("export: a split-precision product runs with TF32 allowed for its call only", "[export][cxx]") {
  candidate c = cand(kSource / "examples/plans/relu.cu", kData / "matmul_library.yaml");
  auto plain = export_pytorch(task("tests/data/export/matmul_task.yaml"), c);
  REQUIRE(plain);
  const std::string runtime = export_detail::matmul_precision_runtime();
  CHECK(runtime.find("auto with_tf32(F&& f)") != std::string::npos);
  CHECK(plain->launcher.find(runtime) == std::string::npos);  // only where a step asks for it
  c.plan.steps[0].attrs["math"] = "tf32";
  auto ex = export_pytorch(task("tests/data/export/matmul_task.yaml"), c);
  if (!ex) FAIL(ex.message());
  CHECK(ex->launcher.find(runtime) != std::string::npos);
  CHECK(ex->launcher.find("ks::matmul_precision::with_tf32([&] { return at::matmul(t_x, t_weight); })") !=
        std::string::npos);
  // It compiles against the stand-ins, with the helper declared as the module has it.
  std::string launcher = ex->launcher;
  launcher.erase(launcher.find(runtime), runtime.size());
  const std::string adoption = export_detail::library_results_runtime();
  launcher.erase(launcher.find(adoption), adoption.size());
  fs::path dir = temp_dir();
  write(dir / "tf32.cpp", "#include \"" + (kData / "aten_stub.hpp").string() + "\"\n" +
                              "namespace ks { namespace matmul_precision { template <class F> auto with_tf32(F&& f) -> "
                              "decltype(f()) { return f(); } } }\n" +
                              ex->kernel_declarations + launcher);
  int rc = run(std::string(KS_CXX_COMPILER) + " -std=c++17 -fsyntax-only " + (dir / "tf32.cpp").string() + " 2>" +
               (dir / "log.txt").string());
  INFO(read(dir / "log.txt"));
  CHECK(rc == 0);
  fs::remove_all(dir);
  c.plan.steps[0].attrs["math"] = "fast";
  auto bad = export_pytorch(task("tests/data/export/matmul_task.yaml"), c);
  REQUIRE_FALSE(bad);
  CHECK(bad.message().find("attrs.math") != std::string::npos);
}

TEST_CASE("export: a library step's result becomes its declared buffer where nothing else sees it", "[export][cxx]") {
  auto ex = export_pytorch(task("tests/data/export/matmul_task.yaml"),
                           cand(kSource / "examples/plans/relu.cu", kData / "matmul_library.yaml"));
  if (!ex) FAIL(ex.message());
  const std::string runtime = export_detail::library_results_runtime();
  CHECK(ex->launcher.find(runtime) != std::string::npos);
  CHECK(runtime.find("inline bool adoptable(") != std::string::npos);
  // Both launchers (the size-specialised one and the general one) name the step's
  // tensor arguments, in their order: the only memory an op's result can share.
  const std::string adopt =
      "    if (ks::result_adoption::adoptable(r, 0, t_out, {&t_x, &t_weight})) t_out = r[0];\n"
      "    else t_out.copy_(r[0]);\n";
  const size_t first = ex->launcher.find(adopt);
  REQUIRE(first != std::string::npos);
  CHECK(ex->launcher.find(adopt, first + 1) != std::string::npos);
  // The launcher compiles against the stand-ins (the helper's body needs the real
  // at::Tensor: export_dispatch_test runs it on CPU LibTorch).
  std::string launcher = ex->launcher;
  launcher.erase(launcher.find(runtime), runtime.size());
  fs::path dir = temp_dir();
  write(dir / "adopt.cpp",
        "#include \"" + (kData / "aten_stub.hpp").string() + "\"\n" + ex->kernel_declarations + launcher);
  int rc = run(std::string(KS_CXX_COMPILER) + " -std=c++17 -fsyntax-only " + (dir / "adopt.cpp").string() + " 2>" +
               (dir / "log.txt").string());
  INFO(read(dir / "log.txt"));
  CHECK(rc == 0);
  fs::remove_all(dir);
  // Scratch that no kernel touches (a transposed view of a parameter) stands for the
  // op's result as it came: the product gets the view's strides, as eager's does.
  auto tr = export_pytorch(task("tests/data/export/matmul_transposed_task.yaml"),
                           cand(kSource / "examples/plans/relu.cu", kData / "matmul_transposed_library.yaml"));
  if (!tr) FAIL(tr.message());
  CHECK(tr->launcher.find("    t_wt = r[0];  // scratch only library steps use: as the op returned it\n") !=
        std::string::npos);
  CHECK(tr->launcher.find("t_wt.copy_") == std::string::npos);
  // The product's operands are x and the view wt: the parameter under the view is
  // not an argument of the step, and wt's storage is the parameter's.
  CHECK(tr->launcher.find("if (ks::result_adoption::adoptable(r, 0, t_out, {&t_x, &t_wt})) t_out = r[0];") !=
        std::string::npos);
  // A plan of kernels alone carries no such helper.
  auto gelu = export_pytorch(task("examples/tasks/gelu.yaml"), cand(kData / "gelu.cu", kData / "gelu.yaml"));
  REQUIRE(gelu);
  CHECK(gelu->launcher.find(runtime) == std::string::npos);
}

// A kernel parameter of a type the source defines (unknown to the host compiler's
// source) keeps the launcher in CUDA_SOURCE, after the kernels, launching with <<<>>>.
TEST_CASE("export: a kernel parameter of the source's own type keeps the launcher with the kernels", "[export]") {
  candidate c = cand(kData / "gelu.cu", kData / "gelu.yaml");
  const std::string param = "const float* __restrict__ in0";
  REQUIRE(c.source.find(param) != std::string::npos);
  c.source.replace(c.source.find(param), param.size(), "const ks_real* __restrict__ in0");
  c.source = "typedef float ks_real;\n" + c.source;
  auto ex = export_pytorch(task("examples/tasks/gelu.yaml"), c);
  if (!ex) FAIL(ex.message());
  CHECK(ex->cuda_source.compare(ex->cuda_source.size() - ex->launcher.size(), ex->launcher.size(), ex->launcher) == 0);
  CHECK(ex->launcher.find("kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)") != std::string::npos);
  CHECK(ex->launcher.find("static_cast<const ks_real*>(t_x.data_ptr())") != std::string::npos);
  CHECK(ex->cpp_source ==
        "std::vector<at::Tensor> ks_forward(const std::vector<at::Tensor>& tensors, bool general);\n");
  // The usual export has it in CPP_SOURCE, launching through ks_launch.
  auto usual = export_pytorch(task("examples/tasks/gelu.yaml"), cand(kData / "gelu.cu", kData / "gelu.yaml"));
  REQUIRE(usual);
  CHECK(usual->launcher.find(export_detail::host_launch_runtime()) != std::string::npos);
  CHECK(usual->cuda_source.find(usual->launcher) == std::string::npos);
}

TEST_CASE("export: KS_EXPORT_LAUNCHER=nvcc keeps the launcher with the kernels, a bad value is named", "[export]") {
  const task_spec t = task("examples/tasks/gelu.yaml");
  const candidate c = cand(kData / "gelu.cu", kData / "gelu.yaml");
  ::setenv("KS_EXPORT_LAUNCHER", "nvcc", 1);
  auto nvcc = export_pytorch(t, c);
  ::setenv("KS_EXPORT_LAUNCHER", "sideways", 1);
  auto bad = export_pytorch(t, c);
  ::setenv("KS_EXPORT_LAUNCHER", "host", 1);
  auto host = export_pytorch(t, c);
  ::unsetenv("KS_EXPORT_LAUNCHER");
  if (!nvcc) FAIL(nvcc.message());
  CHECK(nvcc->cuda_source.compare(nvcc->cuda_source.size() - nvcc->launcher.size(), nvcc->launcher.size(),
                                  nvcc->launcher) == 0);
  CHECK(nvcc->cpp_source ==
        "std::vector<at::Tensor> ks_forward(const std::vector<at::Tensor>& tensors, bool general);\n");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.message(), Catch::Contains("KS_EXPORT_LAUNCHER is 'sideways'"));
  REQUIRE(host);
  CHECK(host->cuda_source.find(host->launcher) == std::string::npos);
  CHECK(host->module_name != nvcc->module_name);
}

// The module's load_extension gives nvcc the kernels alone (cuda.h and cuda_runtime.h,
// then CUDA_SOURCE): no PyTorch header (with load_inline's torch/types.h, nvcc took
// 25.2 s over a level-2 model's kernels on the 2-core machine; 1.5 s without). So
// CUDA_SOURCE must compile on its own, as nvcc sees it there; and the module says where
// the launcher is (LAUNCHER_IN_CUDA), which KS_EXPORT_LAUNCHER=nvcc turns on.
TEST_CASE("export: nvcc compiles the kernels alone, with no PyTorch header", "[export][nvcc]") {
  const fs::path dir = fs::temp_directory_path() / ("ks-export-nvcc-" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const auto& e : examples()) {
    INFO(e.yaml);
    auto ex = export_pytorch(task(e.task), cand(kSource / e.cu, kSource / e.yaml));
    REQUIRE(ex);
    CHECK_FALSE(ex->launcher_in_cuda);
    CHECK(ex->python.find("\nLAUNCHER_IN_CUDA = False\n") != std::string::npos);
    const fs::path cu = dir / (ex->module_name + ".cu");
    write(cu, "#include <cuda.h>\n#include <cuda_runtime.h>\n" + ex->cuda_source);
    const int rc = run(std::string(KS_NVCC) + " -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -c " +
                       cu.string() + " -o " + (dir / "k.o").string() + " 2>" + (dir / "log.txt").string());
    INFO(read(dir / "log.txt"));
    CHECK(rc == 0);
  }
  ::setenv("KS_EXPORT_LAUNCHER", "nvcc", 1);
  auto nvcc = export_pytorch(task("examples/tasks/gelu.yaml"), cand(kData / "gelu.cu", kData / "gelu.yaml"));
  ::unsetenv("KS_EXPORT_LAUNCHER");
  REQUIRE(nvcc);
  CHECK(nvcc->launcher_in_cuda);
  CHECK(nvcc->python.find("\nLAUNCHER_IN_CUDA = True\n") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("export: dynamic shared memory is opted in, scratch buffers are allocated", "[export]") {
  auto ex = export_pytorch(task("examples/tasks/softmax.yaml"), cand(kSource / "examples/plans/softmax_rows.cu",
                                                                     kSource / "examples/plans/softmax_rows.yaml"));
  REQUIRE(ex);
  CHECK(ex->launcher.find("cudaFuncSetAttribute(softmax_rows_f32, cudaFuncAttributeMaxDynamicSharedMemorySize") !=
        std::string::npos);

  // l2_normalize: a 1-D input; the example task is written inline here.
  auto t = parse_task(R"(name: l2n
reference:
  torchscript: |
    def forward(x):
        return x / x.norm().clamp_min(1e-12)
inputs:
  - {name: x, shape: [1048576]}
sizes:
  cpu: {x: [1000]}
)",
                      "<l2n>", kSource);
  REQUIRE(t);
  auto ex2 = export_pytorch(
      *t, cand(kSource / "examples/plans/l2_normalize.cu", kSource / "examples/plans/l2_normalize.yaml"));
  if (!ex2) FAIL(ex2.message());
  CHECK(ex2->launcher.find("at::Tensor t_partial = at::empty(") != std::string::npos);
  CHECK(ex2->launcher.find("// scratch") != std::string::npos);
}

TEST_CASE("export: the Python file parses and carries the sources exactly", "[export][python]") {
  if (!have_python()) {
    WARN("python3 not found: the Python syntax check is skipped");
    return;
  }
  fs::path dir = temp_dir();
  for (const auto& e : examples()) {
    INFO(e.yaml);
    auto ex = export_pytorch(task(e.task), cand(kSource / e.cu, kSource / e.yaml));
    REQUIRE(ex);
    fs::path py = dir / (ex->module_name + ".py");
    write(py, ex->python);
    fs::path got = dir / (ex->module_name + ".cuda");
    // Parse without importing (no torch here): the module's CUDA_SOURCE and CPP_SOURCE
    // string constants, read back by Python, must equal what was exported.
    std::string script =
        "import ast, sys\n"
        "tree = ast.parse(open(sys.argv[1]).read())\n"
        "names = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)\n"
        "         for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}\n"
        "assert any(isinstance(n, ast.ClassDef) and n.name == 'ModelNew' for n in tree.body)\n"
        "assert {'get_inputs', 'get_init_inputs', 'load_extension'} <= {n.name for n in tree.body if isinstance(n, "
        "ast.FunctionDef)}\n"
        "open(sys.argv[2], 'w', newline='').write(names['CUDA_SOURCE'])\n"
        "open(sys.argv[2] + '.cpp', 'w', newline='').write(names['CPP_SOURCE'])\n";
    write(dir / "check.py", script);
    REQUIRE(run("python3 " + (dir / "check.py").string() + " " + py.string() + " " + got.string()) == 0);
    CHECK(read(got) == ex->cuda_source);
    CHECK(read(got.string() + ".cpp") == ex->cpp_source);
  }
  fs::remove_all(dir);
}

TEST_CASE("export: the launcher compiles against ATen stand-ins, launches checked against the kernels",
          "[export][cxx]") {
  fs::path dir = temp_dir();
  for (const auto& e : examples()) {
    INFO(e.yaml);
    auto ex = export_pytorch(task(e.task), cand(kSource / e.cu, kSource / e.yaml));
    REQUIRE(ex);
    fs::path cpp = dir / (ex->module_name + ".cpp");
    std::string launcher = ex->launcher;  // without the results helper's body (as the stand-ins declare it)
    const std::string& runtime = export_detail::library_results_runtime();
    if (auto at = launcher.find(runtime); at != std::string::npos) launcher.erase(at, runtime.size());
    // A split-precision product's helper (ATen's context) declared as the module has it.
    std::string tf32;
    const std::string& precision = export_detail::matmul_precision_runtime();
    if (auto at = launcher.find(precision); at != std::string::npos) {
      launcher.erase(at, precision.size());
      tf32 =
          "namespace ks { namespace matmul_precision { template <class F> auto with_tf32(F&& f) -> decltype(f()) { "
          "return f(); } } }\n";
    }
    write(cpp, "#include \"" + (kData / "aten_stub.hpp").string() + "\"\n" + tf32 + ex->kernel_declarations + launcher);
    std::string cmd = std::string(KS_CXX_COMPILER) + " -std=c++17 -fsyntax-only -Wall -Werror=return-type " +
                      cpp.string() + " 2>" + (dir / "log.txt").string();
    int rc = run(cmd);
    INFO(read(dir / "log.txt"));
    CHECK(rc == 0);
  }
  // A launcher whose argument does not fit its kernel does not compile: the check bites.
  auto ex = export_pytorch(task("examples/tasks/gelu.yaml"), cand(kData / "gelu.cu", kData / "gelu.yaml"));
  REQUIRE(ex);
  std::string launcher = ex->launcher;
  auto pos = launcher.find("static_cast<const float*>");
  REQUIRE(pos != std::string::npos);
  launcher.replace(pos, std::string("static_cast<const float*>").size(), "static_cast<const double*>");
  fs::path bad = dir / "bad.cpp";
  write(bad, "#include \"" + (kData / "aten_stub.hpp").string() + "\"\n" + ex->kernel_declarations + launcher);
  CHECK(run(std::string(KS_CXX_COMPILER) + " -std=c++17 -fsyntax-only " + bad.string() + " 2>/dev/null") != 0);
  fs::remove_all(dir);
}

// The launcher in CPP_SOURCE launches through ks_launch (the host compiler has no <<<>>>):
// compiled and run on the host against a cudaLaunchKernel that records what it is given,
// the kernel's host stub, the launch configuration and each argument as the kernel's
// parameter type reads it (an int64 literal narrowed to an int parameter, as a call
// narrows it; a float literal to a double). A wrong argument count or pointer type does
// not compile. cudaFuncSetAttribute takes the kernel as nvcc's runtime header lets it.
TEST_CASE("export: a launch from the host compiler's source passes the kernel's parameters", "[export][cxx]") {
  const std::string head = R"(#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;
enum cudaError_t { cudaSuccess = 0 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
const void* attribute_of = nullptr;
int attribute_value = 0;
cudaError_t cudaFuncSetAttribute(const void* f, cudaFuncAttribute attr, int value) {
  attribute_of = f;
  attribute_value = attr == cudaFuncAttributeMaxDynamicSharedMemorySize ? value : -1;
  return cudaSuccess;
}
struct launch {
  const void* f;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const float* x;
  float* y;
  int n;
  long long m;
  float a;
  double b;
  void* end;
} got;
cudaError_t cudaLaunchKernel(const void* f, dim3 grid, dim3 block, void** args, size_t smem, cudaStream_t stream) {
  got = {f, grid, block, smem, stream, {}, {}, {}, {}, {}, {}, {}};
  std::memcpy(&got.x, args[0], sizeof got.x);
  std::memcpy(&got.y, args[1], sizeof got.y);
  std::memcpy(&got.n, args[2], sizeof got.n);
  std::memcpy(&got.m, args[3], sizeof got.m);
  std::memcpy(&got.a, args[4], sizeof got.a);
  std::memcpy(&got.b, args[5], sizeof got.b);
  got.end = args[6];
  return cudaSuccess;
}
)";
  const std::string kernel =
      "extern \"C\" void k(const float* __restrict__ x, float* __restrict__ y, int n, long long m, float a, double b) "
      "{}\n";
  const std::string call = R"(int main() {
  float buf[4];
  cudaStream_t s = reinterpret_cast<cudaStream_t>(&buf[2]);
  if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 4096) != cudaSuccess) return 1;
  KS_LAUNCH(k, dim3(3u, 2u, 1u), dim3(128u, 1u, 1u), static_cast<int64_t>(4096), s,
            static_cast<const float*>(buf), static_cast<float*>(buf + 1), static_cast<long long>(7LL),
            static_cast<long long>(1099511627776LL), static_cast<float>(2.5), 0.25f);
  bool ok = got.f == reinterpret_cast<const void*>(&k) && got.grid.x == 3 && got.grid.y == 2 && got.grid.z == 1 &&
            got.block.x == 128 && got.block.y == 1 && got.smem == 4096 && got.stream == s && got.x == buf &&
            got.y == buf + 1 && got.n == 7 && got.m == 1099511627776LL && got.a == 2.5f && got.b == 0.25 &&
            got.end == nullptr && attribute_of == reinterpret_cast<const void*>(&k) && attribute_value == 4096;
  std::printf("%s\n", ok ? "ok" : "wrong");
  return ok ? 0 : 1;
}
)";
  fs::path dir = temp_dir();
  auto build = [&](const std::string& name, const std::string& body) {
    write(dir / (name + ".cpp"), head + export_detail::host_launch_runtime() + kernel + body);
    return run(std::string(KS_CXX_COMPILER) + " -std=c++17 -O1 -Wall -o " + (dir / name).string() + " " +
               (dir / (name + ".cpp")).string() + " 2>" + (dir / (name + ".log")).string());
  };
  int rc = build("launch", call);
  INFO(read(dir / "launch.log"));
  REQUIRE(rc == 0);
  CHECK(run((dir / "launch").string() + " >" + (dir / "out.txt").string()) == 0);
  CHECK(read(dir / "out.txt") == "ok\n");
  std::string fewer = call;
  fewer.replace(fewer.find(", 0.25f"), 7, "");
  CHECK(build("fewer", fewer) != 0);
  std::string wrong = call;
  wrong.replace(wrong.find("static_cast<const float*>(buf)"), 30, "static_cast<const double*>(nullptr)");
  CHECK(build("wrong", wrong) != 0);
  fs::remove_all(dir);
}

TEST_CASE("export: what cannot be exported is named", "[export]") {
  task_spec t = task("examples/tasks/matmul_bias_relu.yaml");
  candidate c = cand(kData / "matmul_bias_relu.cu", kData / "matmul_bias_relu.yaml");

  SECTION("a library op without an at:: counterpart") {
    c.plan.steps[0].name = "aten::flip";
    auto ex = export_pytorch(t, c);
    REQUIRE(!ex);
    CHECK(ex.message().find("aten::flip has no at:: counterpart") != std::string::npos);
    CHECK(ex.message().find("task 'matmul_bias_relu'") != std::string::npos);
  }
  SECTION("a plan that does not resolve at the task's shapes") {
    c.plan.steps[1].block = {"2048"};
    auto ex = export_pytorch(t, c);
    REQUIRE(!ex);
    CHECK(ex.message().find("does not resolve at the task's shapes") != std::string::npos);
    CHECK(ex.message().find("block") != std::string::npos);
  }
  SECTION("a compile option nvcc has no equivalent for") {
    c.compile_options = {"--device-debug-info-weird"};
    auto ex = export_pytorch(t, c);
    REQUIRE(!ex);
    CHECK(ex.message().find("'--device-debug-info-weird' has no nvcc equivalent") != std::string::npos);
  }
  SECTION("fast math travels to nvcc; -std is PyTorch's") {
    c.compile_options = {"--use_fast_math", "-std=c++17"};
    auto ex = export_pytorch(t, c);
    REQUIRE(ex);
    CHECK(ex->nvcc_options == std::vector<std::string>{"--use_fast_math"});
    CHECK(ex->python.find("NVCC_OPTIONS = [\"--use_fast_math\"]") != std::string::npos);
  }
}

TEST_CASE("export: the general launcher's expressions agree with the plan evaluator", "[export][cxx]") {
  // Each expression is translated to C++, compiled with the runtime helpers on the host
  // and run; its value (or its failure) must equal plan/shape_expr's.
  const std::vector<std::string> exprs = {
      "ceil_div(x.numel, BLOCK)",
      "-7 / 2",
      "-7 % 3",
      "7 % -3",
      "7 / 2.0",
      "-7.5 % 2",
      "round_up(x.shape[-1], 32)",
      "max(1, min(ceil_div(N, 4), 4096))",
      "floor(sqrt(N))",
      "ceil(N / 3.0)",
      "abs(-5) + abs(-2.5)",
      "x.ndim * 2",
      "x.shape[x.ndim - 1] - x.shape[0]",
      ".5 + 1",
      "2e-3 * 1000",
      "round_up(N, 7) % 7",
      "ceil_div(-N, 7)",
      "min(N, 2.5)",
      "4611686018427387904 * 2",
      "N / 0",
      "N % (BLOCK - 256)",
      "x.shape[2]",
      "sqrt(-1)",
      "(N + BLOCK - 1) / BLOCK * BLOCK",
      "-N / -3 + +2",
      "((x.shape[1] + 2 - 3) / 2 + 1) * ((x.shape[1] + 2 - 3) / 2 + 1) - x.shape[1]",
      "max(x.shape[1] * 2, x.shape[1] * 2 + 1) % ceil_div(x.shape[1] * 2, 7)"};
  expr_env env;
  env.constants["N"] = expr_value::integer(1000);
  env.constants["BLOCK"] = expr_value::integer(256);
  env.tensors["x"] = {8, 1000};
  std::string prog = R"(#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <vector>
template <class... A> std::string ks_msg(const A&... a) { std::ostringstream o; (o << ... << a); return o.str(); }
#define TORCH_CHECK(cond, ...) do { if (!(cond)) throw std::runtime_error(ks_msg(__VA_ARGS__)); } while (0)
namespace at {
struct Tensor {
  std::vector<int64_t> s;
  int64_t dim() const { return static_cast<int64_t>(s.size()); }
  int64_t size(int64_t i) const { return s.at(static_cast<size_t>(i)); }
  int64_t numel() const { int64_t n = 1; for (auto d : s) n *= d; return n; }
};
}
)";
  prog += export_detail::expression_runtime();
  prog += "int main() {\n  const at::Tensor t_x{{8, 1000}};\n  const ks_v c_N = ks_int(1000), c_BLOCK = ks_int(256);\n";
  std::vector<std::string> expected;
  for (const auto& e : exprs) {
    auto cpp = export_detail::translate_expression(e, {"N", "BLOCK"}, {"x"});
    if (!cpp) FAIL(e << ": " << cpp.message());
    // As the general launcher writes it too: each call computed once, into variables
    // declared before the expression (the same value, or the same error).
    std::string decls;
    auto shared = export_detail::translate_expression(e, {"N", "BLOCK"}, {"x"}, &decls);
    if (!shared) FAIL(e << ": " << shared.message());
    for (const std::string& body : {"ks_v v = " + *cpp + ";", decls + "  ks_v v = " + *shared + ";"})
      prog += "  try { " + body +
              " if (v.f) std::printf(\"f %.17g\\n\", v.d); else std::printf(\"i %lld\\n\", (long long)v.i); }"
              " catch (const std::exception&) { std::printf(\"error\\n\"); }\n";
    auto v = eval_expr(e, env);
    char buf[64];
    if (!v)
      expected.push_back("error");
    else if (v->is_float)
      std::snprintf(buf, sizeof buf, "f %.17g", v->f), expected.push_back(buf);
    else
      std::snprintf(buf, sizeof buf, "i %lld", static_cast<long long>(v->i)), expected.push_back(buf);
  }
  prog += "}\n";
  fs::path dir = temp_dir();
  write(dir / "exprs.cpp", prog);
  std::string cmd = std::string(KS_CXX_COMPILER) + " -std=c++17 -O0 -o " + (dir / "exprs").string() + " " +
                    (dir / "exprs.cpp").string() + " 2>" + (dir / "log.txt").string();
  int rc = run(cmd);
  INFO(read(dir / "log.txt"));
  REQUIRE(rc == 0);
  REQUIRE(run((dir / "exprs").string() + " >" + (dir / "out.txt").string()) == 0);
  std::istringstream got(read(dir / "out.txt"));
  std::string line;
  for (size_t i = 0; i < exprs.size(); ++i) {
    INFO(exprs[i]);
    REQUIRE(std::getline(got, line));
    CHECK(line == expected[i]);
    INFO("shared");
    REQUIRE(std::getline(got, line));
    CHECK(line == expected[i]);
  }
  // Shared: a call that recurs is declared once and named again, a network's nested
  // shapes growing with its layers, not with their square.
  std::string decls;
  auto nested = export_detail::translate_expression(exprs[exprs.size() - 2], {"N", "BLOCK"}, {"x"}, &decls);
  REQUIRE(nested);
  CHECK(*nested == "e_6");
  CHECK(decls ==
        "  const ks_v e_0 = ks_dim(t_x, ks_int(1LL), \"x\");\n"
        "  const ks_v e_1 = ks_add(e_0, ks_int(2LL));\n"
        "  const ks_v e_2 = ks_sub(e_1, ks_int(3LL));\n"
        "  const ks_v e_3 = ks_div(e_2, ks_int(2LL));\n"
        "  const ks_v e_4 = ks_add(e_3, ks_int(1LL));\n"
        "  const ks_v e_5 = ks_mul(e_4, e_4);\n"
        "  const ks_v e_6 = ks_sub(e_5, e_0);\n");
  // Some expressions must fail in both: the test must see failures too.
  CHECK(std::count(expected.begin(), expected.end(), "error") >= 4);
  fs::remove_all(dir);
}

TEST_CASE("export: a dispatcher step (any ATen op by its schema) with two results", "[export][cxx]") {
  auto ex = export_pytorch(task("examples/tasks/softmax.yaml"),
                           cand(kSource / "examples/plans/relu.cu", kData / "dispatch_sort.yaml"));
  if (!ex) FAIL(ex.message());
  const std::string runtime = export_detail::dispatch_runtime();
  CHECK(ex->launcher.find(runtime) != std::string::npos);
  // Prepared once (a function-local static), called with the step's arguments.
  CHECK(ex->launcher.find("    const std::vector<ks_arg> s0_args{ks_targ(t_x)};\n"
                          "    static const ks_prepared_step s0_op = ks_prepare_by_schema(std::map<std::string, "
                          "std::string>{{\"dim\", \"1\"}, {\"schema\", \"aten::sort(Tensor self, int dim=-1, bool "
                          "descending=False) -> (Tensor values, Tensor indices)\"}}, s0_args);\n") !=
        std::string::npos);
  CHECK(ex->launcher.find("const std::vector<at::Tensor> r = ks_call_prepared(s0_op, s0_args, in[0].device());") !=
        std::string::npos);
  // The kernel reads vals (made contiguous); nothing but the op made idx (kept as it came).
  CHECK(ex->launcher.find("    t_vals = r[0].contiguous();\n    t_idx = r[1];") != std::string::npos);
  CHECK(ex->general_launcher_note == "");
  // The launcher around the call compiles against the stand-ins (the helpers' bodies
  // need the real dispatcher: they are left out here).
  std::string launcher = ex->launcher;
  launcher.erase(launcher.find(runtime), runtime.size());
  const std::string& results = export_detail::library_results_runtime();
  launcher.erase(launcher.find(results), results.size());
  fs::path dir = temp_dir();
  write(dir / "dispatch.cpp",
        "#include \"" + (kData / "aten_stub.hpp").string() + "\"\n" + ex->kernel_declarations + launcher);
  int rc = run(std::string(KS_CXX_COMPILER) + " -std=c++17 -fsyntax-only " + (dir / "dispatch.cpp").string() + " 2>" +
               (dir / "log.txt").string());
  INFO(read(dir / "log.txt"));
  CHECK(rc == 0);
  fs::remove_all(dir);
  // A table op with two results is refused: only dispatcher steps return several.
  candidate c = cand(kSource / "examples/plans/relu.cu", kData / "dispatch_sort.yaml");
  c.plan.steps[0].attrs.erase("schema");
  c.plan.steps[0].attrs.erase("dim");
  c.plan.steps[0].name = "aten::relu";
  auto bad = export_pytorch(task("examples/tasks/softmax.yaml"), c);
  REQUIRE(!bad);
  INFO(bad.message());
  CHECK(bad.message().find("one tensor") != std::string::npos);
}

// Issue 46, point 1: a size where the plan is launch-bound (plan/launch_bound.hpp, as the
// reviewer decides it) is replayed as one CUDA graph by forward (export/cuda_graph.py);
// CPU tensors and other sizes run plain launches. The graph itself runs on the GPU
// machine (reviewer_test "[graph]", and the exported modules of bench/).
TEST_CASE("export: launch-bound sizes are replayed as a CUDA graph", "[export][python][graph]") {
  auto ex = export_pytorch(task("examples/tasks/softmax.yaml"),
                           cand(kSource / "examples/plans/relu.cu", kData / "relu_chain.yaml"));
  if (!ex) FAIL(ex.message());
  // The softmax task's cpu size (x [64, 512]) is launch-bound; its default (x [4096,
  // 16384]: 268 MB a buffer) is not.
  CHECK(ex->python.find("CUDA_GRAPHS = {\n    \"cpu\": \"launch-bound plan (7 kernel launches and 2 library steps "
                        "moving 1.31 MB (0.146 MB a step))\",\n}\n") != std::string::npos);
  CHECK(ex->python.find("def _forward(tensors, general):") != std::string::npos);
  CHECK(ex->python.find("outputs = _forward(list(inputs) + self.task_parameters(), False)") != std::string::npos);
  // A one-launch plan is never launch-bound.
  auto one = export_pytorch(task("examples/tasks/softmax.yaml"),
                            cand(kSource / "examples/plans/relu.cu", kSource / "examples/plans/relu.yaml"));
  if (!one) FAIL(one.message());
  CHECK(one->python.find("CUDA_GRAPHS = {\n}\n") != std::string::npos);
  if (run("python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    WARN("python3 with torch not found: the module's CPU run is skipped");
    return;
  }
  // The module as Python runs it, its extension stood in for (it needs nvcc and a GPU):
  // the graph's shapes are the cpu size's, and CPU tensors take plain launches.
  fs::path dir = temp_dir();
  write(dir / "model.py", ex->python);
  write(dir / "check.py", R"PY(import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("model", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
assert set(m.CUDA_GRAPHS) == {"cpu"}, m.CUDA_GRAPHS
assert m._GRAPH_SHAPES == {((64, 512),)}, m._GRAPH_SHAPES
calls = []
class Extension:
    def ks_forward(self, tensors, general):
        calls.append(general)
        return [torch.relu(tensors[0])]
m.load_extension = lambda *a, **k: Extension()
x = torch.randn(64, 512)
y = m.ModelNew(size="cpu")(x)
assert torch.equal(y, torch.relu(x)), "plain result"
assert calls == [False], calls
assert not m._GRAPHS, m._GRAPHS
# The graphs' key for the parameters: their addresses, dtypes and shapes, read anew
# where the addresses are not the last call's.
a, b = torch.zeros(3), torch.zeros(2, 2)
want = ((a.data_ptr(), torch.float32, (3,)), (b.data_ptr(), torch.float32, (2, 2)))
assert m._parameters_key([a, b]) == want, m._parameters_key([a, b])
assert m._parameters_key([a, b]) == want
c = torch.zeros(3, dtype=torch.float64)
assert m._parameters_key([c, b]) == ((c.data_ptr(), torch.float64, (3,)), want[1])
assert m._parameters_key([a, b]) == want
)PY");
  const int rc = run("python3 " + (dir / "check.py").string() + " " + (dir / "model.py").string() + " 2>" +
                     (dir / "log.txt").string());
  INFO(read(dir / "log.txt"));
  CHECK(rc == 0);
  fs::remove_all(dir);
}

// The module's load_extension as Python runs it, with PyTorch's builder and the GPU's
// compute capability stood in for (they need nvcc and a GPU): it writes cuda.cu (the
// kernels after cuda.h and cuda_runtime.h, no PyTorch header) and main.cpp
// (torch/extension.h, CPP_SOURCE, the binding) into the build directory, hands both to
// torch.utils.cpp_extension.load with the architecture's -gencode and the options, builds
// once, and leaves a file whose text is unchanged untouched (ninja would rebuild it).
TEST_CASE("export: load_extension writes the two sources and builds them with load", "[export][python]") {
  auto ex = export_pytorch(task("examples/tasks/gelu.yaml"), cand(kData / "gelu.cu", kData / "gelu.yaml"));
  REQUIRE(ex);
  if (run("python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    WARN("python3 with torch not found: the module's load_extension is not run");
    return;
  }
  fs::path dir = temp_dir();
  write(dir / "model.py", ex->python);
  write(dir / "check.py", R"PY(import importlib.util, os, sys, time, torch
import torch.utils.cpp_extension as ext
calls = []
ext.load = lambda **k: calls.append(k) or "the extension"
torch.cuda.get_device_capability = lambda *a: (9, 0)
spec = importlib.util.spec_from_file_location("model", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
build = sys.argv[2]
assert m.load_extension(build_directory=build) == "the extension"
assert m.load_extension(build_directory=build) == "the extension"
assert len(calls) == 1, calls
k = calls[0]
cu, cpp = os.path.join(build, "cuda.cu"), os.path.join(build, "main.cpp")
assert k["sources"] == [cpp, cu], k["sources"]
assert k["name"] == m.MODULE_NAME and k["build_directory"] == build
assert "-gencode=arch=compute_90a,code=sm_90a" in k["extra_cuda_cflags"], k["extra_cuda_cflags"]
assert k["extra_cflags"] == m.CXX_OPTIONS
text = open(cu).read()
assert text == "#include <cuda.h>\n#include <cuda_runtime.h>\n" + m.CUDA_SOURCE, text[:200]
assert "#include <torch" not in text, "a PyTorch header before the kernels"
main = open(cpp).read()
assert main.startswith("#include <torch/extension.h>\n" + m.CPP_SOURCE), main[:200]
assert 'm.def("ks_forward", torch::wrap_pybind_function(ks_forward), "ks_forward");' in main
before = os.stat(cu).st_mtime_ns
time.sleep(0.05)
m._write_source(cu, text)
assert os.stat(cu).st_mtime_ns == before, "an unchanged source was rewritten"
m._write_source(cu, text + "// changed\n")
assert open(cu).read().endswith("// changed\n") and not os.path.exists(cu + ".part")
)PY");
  const int rc = run("python3 " + (dir / "check.py").string() + " " + (dir / "model.py").string() + " " +
                     (dir / "build").string() + " 2>" + (dir / "log.txt").string());
  INFO(read(dir / "log.txt"));
  CHECK(rc == 0);
  fs::remove_all(dir);
}
