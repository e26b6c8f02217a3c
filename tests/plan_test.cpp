// Tests of plan/: shape expressions, kernel signatures, the YAML form of launch plans,
// validation, and the example plans in examples/plans (which must also compile with
// NVRTC).

#include <catch2/catch.hpp>

#include <nvrtc.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "plan/attr_parse.hpp"
#include "plan/kernel_signatures.hpp"
#include "plan/launch_bound.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "plan/op_schema.hpp"
#include "plan/plan_validator.hpp"
#include "plan/shape_expr.hpp"

using namespace ks;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string examples_dir = std::string(KS_SOURCE_DIR) + "/examples/plans";

expr_env test_env() {
  expr_env env;
  env.constants["BLOCK"] = expr_value::integer(256);
  env.constants["N"] = expr_value::integer(1000);
  env.tensors["x"] = {4, 8, 16};
  env.tensors["v"] = {10};
  return env;
}

expr_value eval_ok(const std::string& text, const expr_env& env = test_env()) {
  auto r = eval_expr(text, env);
  INFO("expression: " << text);
  if (!r.ok()) FAIL(r.message());
  return r.value();
}

std::string eval_error(const std::string& text, const expr_env& env = test_env()) {
  auto r = eval_expr(text, env);
  INFO("expression: " << text);
  REQUIRE_FALSE(r.ok());
  return r.message();
}

int64_t ival(const std::string& text, const expr_env& env = test_env()) {
  expr_value v = eval_ok(text, env);
  INFO("expression: " << text);
  REQUIRE_FALSE(v.is_float);
  return v.i;
}

double fval(const std::string& text, const expr_env& env = test_env()) {
  expr_value v = eval_ok(text, env);
  INFO("expression: " << text);
  REQUIRE(v.is_float);
  return v.f;
}

launch_plan parse_ok(const std::string& yaml) {
  auto r = parse_launch_plan(yaml, "test.yaml");
  if (!r.ok()) FAIL(r.message());
  return r.value();
}

std::string parse_error(const std::string& yaml) {
  auto r = parse_launch_plan(yaml, "test.yaml");
  REQUIRE_FALSE(r.ok());
  return r.message();
}

}  // namespace

// ===========================================================================
// Shape expressions

TEST_CASE("expressions: integer arithmetic and precedence", "[plan][expr]") {
  CHECK(ival("42") == 42);
  CHECK(ival("1 + 2 * 3") == 7);
  CHECK(ival("(1 + 2) * 3") == 9);
  CHECK(ival("10 - 4 - 3") == 3);
  CHECK(ival("100 / 10 / 5") == 2);
  CHECK(ival("7 / 2") == 3);
  CHECK(ival("-7 / 2") == -4);  // floor division, as Python's //
  CHECK(ival("-7 % 3") == 2);
  CHECK(ival("7 % -3") == -2);
  CHECK(ival("7 % 3") == 1);
  CHECK(ival("-3") == -3);
  CHECK(ival("- -3") == 3);
  CHECK(ival("+4") == 4);
  CHECK(ival("2 * -3") == -6);
  CHECK(ival("  N   ") == 1000);
  CHECK(ival("N*2+BLOCK") == 2256);
}

TEST_CASE("expressions: floats promote to double", "[plan][expr]") {
  CHECK(fval("7 / 2.0") == 3.5);
  CHECK(fval("1.5") == 1.5);
  CHECK(fval(".5") == 0.5);
  CHECK(fval("2.5e1") == 25.0);
  CHECK(fval("1e3") == 1000.0);
  CHECK(fval("N * 0.5") == 500.0);
  CHECK(fval("-7.5 % 2") == 0.5);
  CHECK(fval("max(3, 4.5)") == 4.5);
  CHECK(fval("min(3, 4.5)") == 3.0);
  CHECK(fval("sqrt(16)") == 4.0);
  CHECK(fval("ceil_div(7.0, 2)") == 4.0);
  CHECK(fval("round_up(7.5, 2)") == 8.0);
  CHECK(fval("abs(-2.5)") == 2.5);
  CHECK(expr_value::real(3.5).to_string() == "3.5");
  CHECK(expr_value::real(4.0).to_string() == "4.0");
  CHECK(expr_value::integer(-12).to_string() == "-12");
}

TEST_CASE("expressions: functions", "[plan][expr]") {
  CHECK(ival("ceil_div(1000, 256)") == 4);
  CHECK(ival("ceil_div(1024, 256)") == 4);
  CHECK(ival("ceil_div(1025, 256)") == 5);
  CHECK(ival("ceil_div(0, 256)") == 0);
  CHECK(ival("ceil_div(N, BLOCK)") == 4);
  CHECK(ival("round_up(1000, 256)") == 1024);
  CHECK(ival("round_up(1024, 256)") == 1024);
  CHECK(ival("min(3, 4)") == 3);
  CHECK(ival("max(3, 4)") == 4);
  CHECK(ival("max(1, min(N, 64))") == 64);
  CHECK(ival("abs(-3)") == 3);
  CHECK(ival("floor(2.7)") == 2);
  CHECK(ival("ceil(2.1)") == 3);
  CHECK(ival("floor(-2.5)") == -3);
  CHECK(ival("ceil(7)") == 7);
  CHECK(ival("floor(sqrt(17))") == 4);
}

TEST_CASE("expressions: tensor properties", "[plan][expr]") {
  CHECK(ival("x.shape[0]") == 4);
  CHECK(ival("x.shape[2]") == 16);
  CHECK(ival("x.shape[-1]") == 16);
  CHECK(ival("x.shape[-3]") == 4);
  CHECK(ival("x.shape[x.ndim - 2]") == 8);
  CHECK(ival("x.numel") == 512);
  CHECK(ival("x.ndim") == 3);
  CHECK(ival("ceil_div(x.numel, BLOCK)") == 2);
  CHECK(ival("x.numel / x.shape[-1]") == 32);
  CHECK(ival("v.shape[0] * 4") == 40);
  expr_env env;
  env.tensors["s"] = {};  // 0-d tensor
  CHECK(ival("s.numel", env) == 1);
  CHECK(ival("s.ndim", env) == 0);
}

TEST_CASE("expressions: referenced names", "[plan][expr]") {
  auto e = shape_expr::parse("ceil_div(x.numel, BLOCK) + y.shape[N - 1] + BLOCK");
  REQUIRE(e.ok());
  CHECK(e->constant_names() == std::vector<std::string>{"BLOCK", "N"});
  CHECK(e->tensor_names() == std::vector<std::string>{"x", "y"});
  CHECK(e->text() == "ceil_div(x.numel, BLOCK) + y.shape[N - 1] + BLOCK");
  // Parsed once, evaluated against different environments.
  auto f = shape_expr::parse("x.shape[0] * 2");
  REQUIRE(f.ok());
  expr_env a, b;
  a.tensors["x"] = {3};
  b.tensors["x"] = {5, 5};
  CHECK(f->eval(a)->i == 6);
  CHECK(f->eval(b)->i == 10);
}

TEST_CASE("expressions: name errors point at the text", "[plan][expr]") {
  expr_env empty;
  CHECK(eval_error("ceil_div(M, 256)", empty) == "unknown name 'M' at column 10 in \"ceil_div(M, 256)\"");
  CHECK(eval_error("M + 1") == "unknown name 'M' at column 1 in \"M + 1\" (constants: BLOCK, N)");
  CHECK(eval_error("x + 1") ==
        "'x' is a tensor, not a number at column 1 in \"x + 1\"; use x.numel, x.ndim or x.shape[i]");
  CHECK(eval_error("2 * y.numel") == "unknown tensor 'y' at column 5 in \"2 * y.numel\" (tensors: v, x)");
  CHECK(eval_error("x.shape[3]") == "x has 3 dims, shape[3] is out of range at column 1 in \"x.shape[3]\"");
  CHECK(eval_error("v.shape[-2]") == "v has 1 dim, shape[-2] is out of range at column 1 in \"v.shape[-2]\"");
  CHECK(eval_error("x.shape[0.5]") == "a shape index must be an integer, got 0.5 at column 9 in \"x.shape[0.5]\"");
  expr_env env;
  env.unknown_shape_tensors["t"] = "it comes from aten::foo";
  CHECK(eval_error("t.numel", env) ==
        "the shape of 't' is not known before the plan runs (it comes from aten::foo) at column 1 in \"t.numel\"");
}

TEST_CASE("expressions: arithmetic errors", "[plan][expr]") {
  CHECK(eval_error("N / 0") == "division by zero at column 3 in \"N / 0\"");
  CHECK(eval_error("N % (BLOCK - 256)") == "division by zero at column 3 in \"N % (BLOCK - 256)\"");
  CHECK(eval_error("1.0 / 0") == "division by zero at column 5 in \"1.0 / 0\"");
  CHECK(eval_error("ceil_div(4, 0)") == "division by zero in ceil_div at column 1 in \"ceil_div(4, 0)\"");
  CHECK(eval_error("round_up(4, N - N)") == "division by zero in round_up at column 1 in \"round_up(4, N - N)\"");
  CHECK(eval_error("9223372036854775807 + 1") == "integer overflow in '+' at column 21 in \"9223372036854775807 + 1\"");
  CHECK(eval_error("4611686018427387904 * 2") == "integer overflow in '*' at column 21 in \"4611686018427387904 * 2\"");
  CHECK(eval_error("-9223372036854775807 - 2") ==
        "integer overflow in '-' at column 22 in \"-9223372036854775807 - 2\"");
  CHECK(eval_error("floor(1e300)") == "integer overflow in 'floor' at column 1 in \"floor(1e300)\"");
  CHECK(eval_error("sqrt(-4)") == "sqrt of a negative number (-4) at column 1 in \"sqrt(-4)\"");
  CHECK(eval_error("1e308 * 10") == "the result of '*' is not a finite number at column 7 in \"1e308 * 10\"");
  expr_env big;
  big.tensors["h"] = {1LL << 40, 1LL << 40};
  CHECK(eval_error("h.numel", big) == "integer overflow in 'h.numel' at column 1 in \"h.numel\"");
}

TEST_CASE("expressions: syntax errors", "[plan][expr]") {
  auto err = [](const std::string& text) {
    auto r = shape_expr::parse(text);
    INFO("expression: " << text);
    REQUIRE_FALSE(r.ok());
    return r.message();
  };
  CHECK(err("") == "empty expression at column 1 in \"\"");
  CHECK(err("   ") == "empty expression at column 1 in \"   \"");
  CHECK(err("N 2") == "unexpected '2' at column 3 in \"N 2\" (expected an operator or the end of the expression)");
  CHECK(err("N + 1)") == "unmatched ')' at column 6 in \"N + 1)\"");
  CHECK(err("(N + 1") == "'(' at column 1 is never closed in \"(N + 1\"");
  CHECK(err("ceil_div(N, 4") == "'(' at column 9 is never closed in \"ceil_div(N, 4\"");
  CHECK(err("x.shape[0") == "'[' at column 8 is never closed in \"x.shape[0\"");
  CHECK(err("N + )") == "unexpected ')' at column 5 in \"N + )\" (expected a number, a name or '(')");
  CHECK(err("N +") == "unexpected end of expression at column 4 in \"N +\" (expected a number, a name or '(')");
  CHECK(err("N $ 2") == "unexpected character '$' at column 3 in \"N $ 2\"");
  CHECK(err("foo(1)") ==
        "unknown function 'foo' at column 1 in \"foo(1)\" (functions: ceil_div, round_up, min, max, abs, "
        "floor, ceil, sqrt)");
  CHECK(err("min(1)") == "min takes 2 arguments, got 1 at column 1 in \"min(1)\"");
  CHECK(err("sqrt(1, 2)") == "sqrt takes 1 argument, got 2 at column 1 in \"sqrt(1, 2)\"");
  CHECK(err("x.size") == "unknown tensor property 'size' at column 3 in \"x.size\" (expected shape[i], numel or ndim)");
  CHECK(err("x.shape") == "unexpected end of expression at column 8 in \"x.shape\" (expected '[' after shape)");
  CHECK(err("99999999999999999999") ==
        "integer literal '99999999999999999999' is out of range at column 1 in \"99999999999999999999\"");
  CHECK(err("2N") == "unexpected 'N' at column 2 in \"2N\" (expected an operator or the end of the expression)");
  CHECK(is_identifier("BLOCK_2"));
  CHECK_FALSE(is_identifier("2BLOCK"));
  CHECK_FALSE(is_identifier(""));
  CHECK_FALSE(is_identifier("a-b"));
}

// ===========================================================================
// Kernel signatures

namespace {
const char* signature_source = R"CU(#include <cuda_fp16.h>
#define FAKE extern "C" __global__ void from_define(float* p) { \
    p[0] = 1; }
// extern "C" __global__ void in_line_comment(float* p) {}
/* extern "C" __global__ void in_block_comment(float* p) {} */
__device__ const char* s = "extern \"C\" __global__ void in_string(float* p) {}";
__device__ char q = '"';

extern "C" __global__ void __launch_bounds__(256, 2)
multi_line(const float* __restrict__ in,   // input
           float*       __restrict__ out,  /* output, (with parens) */
           const int64_t n,
           unsigned int flags,
           float alpha = 1.0f)
{
  if (n > 0) { out[0] = in[0] * alpha; }
}

extern "C" {
__global__ void in_block(double* d, const half* h, size_t count, float4* v) {}
__global__ void no_params(void) {}
}

template <int BLOCK, typename T>
__global__ void templated(T* p) {}

__global__ void not_extern(float* p) {}

extern "C" __global__ void declared_first(const float*, float*);
extern "C" __global__ void declared_first(const float* a, float* b) { b[0] = a[0]; }
extern "C" __global__ void arrays(float x[], const long long y[4], bool flag, char c,
                                  float* const z, unsigned long long big, long double ld) {}
)CU";
}  // namespace

TEST_CASE("signatures: kernels, in source order, skipping comments, strings and #defines", "[plan][signatures]") {
  auto ks = extract_kernel_signatures(signature_source);
  std::vector<std::string> names;
  for (auto& k : ks) names.push_back(k.name);
  CHECK(names == std::vector<std::string>{"multi_line", "in_block", "no_params", "templated", "not_extern",
                                          "declared_first", "arrays"});
}

TEST_CASE("signatures: a multi-line signature with launch bounds and restrict pointers", "[plan][signatures]") {
  auto ks = extract_kernel_signatures(signature_source);
  const kernel_signature* k = find_kernel(ks, "multi_line");
  REQUIRE(k);
  CHECK(k->launchable);
  CHECK(k->launch_bounds == 256);
  CHECK(k->line == 10);
  REQUIRE(k->params.size() == 5);
  CHECK(k->params[0] == kernel_param{"const float* __restrict__", "in", true, true, false, scalar_kind::float32, 1});
  CHECK(k->params[1] == kernel_param{"float* __restrict__", "out", true, false, false, scalar_kind::float32, 1});
  CHECK(k->params[2] == kernel_param{"const int64_t", "n", false, false, false, scalar_kind::int64, 1});
  CHECK(k->params[3] == kernel_param{"unsigned int", "flags", false, false, true, scalar_kind::int32, 1});
  CHECK(k->params[4] == kernel_param{"float", "alpha", false, false, false, scalar_kind::float32, 1});
  CHECK(k->params_text() ==
        "const float* __restrict__ in, float* __restrict__ out, const int64_t n, unsigned int flags, float alpha");
}

TEST_CASE("signatures: extern \"C\" blocks, vector and half types", "[plan][signatures]") {
  auto ks = extract_kernel_signatures(signature_source);
  const kernel_signature* k = find_kernel(ks, "in_block");
  REQUIRE(k);
  CHECK(k->launchable);
  CHECK(k->launch_bounds == 0);
  REQUIRE(k->params.size() == 4);
  CHECK(k->params[0] == kernel_param{"double*", "d", true, false, false, scalar_kind::float64, 1});
  CHECK(k->params[1] == kernel_param{"const half*", "h", true, true, false, scalar_kind::float16, 1});
  CHECK(k->params[2] == kernel_param{"size_t", "count", false, false, true, scalar_kind::int64, 1});
  CHECK(k->params[3] == kernel_param{"float4*", "v", true, false, false, scalar_kind::float32, 4});
  const kernel_signature* none = find_kernel(ks, "no_params");
  REQUIRE(none);
  CHECK(none->launchable);
  CHECK(none->params.empty());
}

TEST_CASE("signatures: templates and C++ linkage are not launchable", "[plan][signatures]") {
  auto ks = extract_kernel_signatures(signature_source);
  const kernel_signature* t = find_kernel(ks, "templated");
  REQUIRE(t);
  CHECK_FALSE(t->launchable);
  CHECK_THAT(t->not_launchable_reason, StartsWith("it is a template"));
  REQUIRE(t->params.size() == 1);
  CHECK(t->params[0].kind == scalar_kind::other);
  CHECK(t->params[0].is_pointer);
  const kernel_signature* m = find_kernel(ks, "not_extern");
  REQUIRE(m);
  CHECK_FALSE(m->launchable);
  CHECK_THAT(m->not_launchable_reason, Contains("not declared extern \"C\""));
}

TEST_CASE("signatures: declarations, unnamed and array parameters", "[plan][signatures]") {
  auto ks = extract_kernel_signatures(signature_source);
  const kernel_signature* d = find_kernel(ks, "declared_first");
  REQUIRE(d);
  CHECK(d->params_text() == "const float* a, float* b");  // names from the definition
  const kernel_signature* a = find_kernel(ks, "arrays");
  REQUIRE(a);
  REQUIRE(a->params.size() == 7);
  CHECK(a->params[0] == kernel_param{"float[]", "x", true, false, false, scalar_kind::float32, 1});
  CHECK(a->params[1] == kernel_param{"const long long[4]", "y", true, true, false, scalar_kind::int64, 1});
  CHECK(a->params[2] == kernel_param{"bool", "flag", false, false, false, scalar_kind::boolean, 1});
  CHECK(a->params[3].kind == scalar_kind::other);  // char
  CHECK(a->params[4] == kernel_param{"float* const", "z", true, false, false, scalar_kind::float32, 1});
  CHECK(a->params[5] == kernel_param{"unsigned long long", "big", false, false, true, scalar_kind::int64, 1});
  CHECK(a->params[6].kind == scalar_kind::other);  // long double

  auto unnamed = extract_kernel_signatures("extern \"C\" __global__ void u(const float*, int);");
  REQUIRE(unnamed.size() == 1);
  CHECK(unnamed[0].params[0] == kernel_param{"const float*", "", true, true, false, scalar_kind::float32, 1});
  CHECK(unnamed[0].params[1] == kernel_param{"int", "", false, false, false, scalar_kind::int32, 1});
  CHECK(unnamed[0].params_text() == "const float*, int");
}

TEST_CASE("signatures: odd but valid sources", "[plan][signatures]") {
  CHECK(extract_kernel_signatures("").empty());
  CHECK(extract_kernel_signatures("__device__ float f(float x) { return x; }").empty());
  // Raw strings and digit separators do not derail the tokenizer.
  auto ks = extract_kernel_signatures(
      "const char* r = R\"x(__global__ void no(int a) {})x\";\n"
      "constexpr long big = 1'000'000;\n"
      "extern \"C\" __global__ void __launch_bounds__(128) yes(__nv_bfloat16* p, std::size_t n) {}\n"
      "extern \"C\" __global__ void spec_like(float* p, int n) { if (n < 2) p[0] = 1; }\n");
  REQUIRE(ks.size() == 2);
  CHECK(ks[0].name == "yes");
  CHECK(ks[0].line == 3);
  CHECK(ks[0].launch_bounds == 128);
  CHECK(ks[0].params[0].kind == scalar_kind::bfloat16);
  CHECK(ks[0].params[1].kind == scalar_kind::int64);
  CHECK(ks[0].params[1].type == "std::size_t");
  CHECK(ks[1].name == "spec_like");
  CHECK(to_string(scalar_kind::float16) == std::string("float16"));
}

// ===========================================================================
// YAML

namespace {
const char* full_plan_yaml = R"(# every feature of the format
constants:
  BLOCK: 256
  N: x.numel
outputs:
  - {name: out, shape: [x.shape[0], x.shape[1]], dtype: float32}
scratch:
  - {name: partial, shape: [ceil_div(N, BLOCK)], dtype: float32, init: zeros}
steps:
  - kernel: relu_kernel
    grid: [ceil_div(N, BLOCK)]
    block: [BLOCK]
    shared_mem: 0
    args: [x, out, {int64: N}, {tensor: partial}, {int: 3}, {float: 0.5}, {float64: N / 2.0}, {int32: ceil_div(N, 4)}]
  - library: aten::matmul
    args: [x, w]
    outputs: [tmp]
    attrs: {alpha: "1.0", stride: [2, 2]}
  - kernel: two_d
    grid: [4, 2]
    block: 128
    shared_mem: BLOCK * 4
    args: []
)";
}  // namespace

TEST_CASE("yaml: a plan with every feature parses into the protocol structs", "[plan][yaml]") {
  launch_plan p = parse_ok(full_plan_yaml);
  CHECK(p.constants == std::map<std::string, std::string>{{"BLOCK", "256"}, {"N", "x.numel"}});
  REQUIRE(p.outputs.size() == 1);
  CHECK(p.outputs[0] == buffer_spec{"out", {"x.shape[0]", "x.shape[1]"}, "float32", "none"});
  REQUIRE(p.scratch.size() == 1);
  CHECK(p.scratch[0] == buffer_spec{"partial", {"ceil_div(N, BLOCK)"}, "float32", "zeros"});
  REQUIRE(p.steps.size() == 3);
  const plan_step& k = p.steps[0];
  CHECK(k.kind == "kernel");
  CHECK(k.name == "relu_kernel");
  CHECK(k.grid == std::vector<std::string>{"ceil_div(N, BLOCK)", "1", "1"});
  CHECK(k.block == std::vector<std::string>{"BLOCK", "1", "1"});
  CHECK(k.shared_mem == "0");
  CHECK(k.args == std::vector<plan_arg>{{"tensor", "x", ""},
                                        {"tensor", "out", ""},
                                        {"int", "N", "int64"},
                                        {"tensor", "partial", ""},
                                        {"int", "3", "int32"},
                                        {"float", "0.5", "float32"},
                                        {"float", "N / 2.0", "float64"},
                                        {"int", "ceil_div(N, 4)", "int32"}});
  const plan_step& l = p.steps[1];
  CHECK(l.kind == "library");
  CHECK(l.name == "aten::matmul");
  CHECK(l.args == std::vector<plan_arg>{{"tensor", "x", ""}, {"tensor", "w", ""}});
  CHECK(l.outputs == std::vector<std::string>{"tmp"});
  CHECK(l.attrs == std::map<std::string, std::string>{{"alpha", "1.0"}, {"stride", "[2, 2]"}});
  CHECK(l.grid.empty());
  const plan_step& t = p.steps[2];
  CHECK(t.grid == std::vector<std::string>{"4", "2", "1"});
  CHECK(t.block == std::vector<std::string>{"128", "1", "1"});
  CHECK(t.shared_mem == "BLOCK * 4");
  CHECK(t.args.empty());
}

TEST_CASE("yaml: to_yaml writes the documented layout and round-trips", "[plan][yaml]") {
  launch_plan p = parse_ok(full_plan_yaml);
  std::string text = to_yaml(p);
  CHECK(text ==
        "constants:\n"
        "  BLOCK: 256\n"
        "  N: x.numel\n"
        "outputs:\n"
        "  - {name: out, shape: [\"x.shape[0]\", \"x.shape[1]\"], dtype: float32}\n"
        "scratch:\n"
        "  - {name: partial, shape: [\"ceil_div(N, BLOCK)\"], dtype: float32, init: zeros}\n"
        "steps:\n"
        "  - kernel: relu_kernel\n"
        "    grid: [\"ceil_div(N, BLOCK)\"]\n"
        "    block: [BLOCK]\n"
        "    args: [x, out, {int64: N}, partial, {int32: 3}, {float32: 0.5}, {float64: N / 2.0}, "
        "{int32: \"ceil_div(N, 4)\"}]\n"
        "  - library: aten::matmul\n"
        "    args: [x, w]\n"
        "    outputs: [tmp]\n"
        "    attrs: {alpha: \"1.0\", stride: \"[2, 2]\"}\n"
        "  - kernel: two_d\n"
        "    grid: [4, 2]\n"
        "    block: [128]\n"
        "    shared_mem: BLOCK * 4\n"
        "    args: []\n");
  CHECK(parse_ok(text) == p);
  CHECK(to_yaml(parse_ok(text)) == text);
}

TEST_CASE("yaml: awkward names and values survive the round trip", "[plan][yaml]") {
  launch_plan p;
  p.constants["A"] = "-1";
  p.constants["B"] = "x.shape[0] * 2";
  p.outputs.push_back({"y", {}, "bool", "none"});
  plan_step s;
  s.kind = "library";
  s.name = "aten::add.Tensor";
  s.args = {{"tensor", "true", ""}, {"float", "-0.5", "float64"}};
  s.outputs = {"y"};
  s.attrs = {{"note", "a: b # c"}, {"q", "say \"hi\"\\"}};
  p.steps.push_back(s);
  std::string text = to_yaml(p);
  CHECK_THAT(text, Contains("{tensor: \"true\"}"));
  CHECK(parse_ok(text) == p);
}

TEST_CASE("yaml: expressions with commas and brackets need no quotes in flow lists", "[plan][yaml]") {
  launch_plan p = parse_ok(
      "outputs:\n"
      "  - {name: y, shape: [x.shape[0], ceil_div(x.shape[1], 2), 3], dtype: float32}\n"
      "steps:\n"
      "  - kernel: k\n"
      "    grid: [ceil_div(N, 4), max(1, min(x.shape[-1], 8))]  # comment, [with] brackets\n"
      "    block: [\"32\", '2']\n"
      "    args: [{int64: ceil_div(N, 4)}, {float32: min(1.0, 2)}, y]\n");
  CHECK(p.outputs[0].shape == std::vector<std::string>{"x.shape[0]", "ceil_div(x.shape[1], 2)", "3"});
  CHECK(p.steps[0].grid == std::vector<std::string>{"ceil_div(N, 4)", "max(1, min(x.shape[-1], 8))", "1"});
  CHECK(p.steps[0].args[0] == plan_arg{"int", "ceil_div(N, 4)", "int64"});
  CHECK(p.steps[0].args[1] == plan_arg{"float", "min(1.0, 2)", "float32"});
  CHECK(p.steps[0].args[2] == plan_arg{"tensor", "y", ""});
  CHECK(p.steps[0].block == std::vector<std::string>{"32", "2", "1"});
}

TEST_CASE("yaml: errors carry FILE:LINE:COL and the field path", "[plan][yaml]") {
  const std::string steps_ok = "steps:\n  - kernel: k\n    grid: [1]\n    block: [32]\n    args: []\n";
  CHECK(parse_error("step:\n  - kernel: k\n") ==
        "test.yaml:1:1: unknown key 'step' in a plan (did you mean 'steps'?); expected one of: constants, "
        "outputs, scratch, steps");
  CHECK(parse_error("steps:\n  - kernel: k\n    grid: [1]\n    blok: [32]\n") ==
        "test.yaml:4:5: steps[0]: unknown key 'blok' in a kernel step (did you mean 'block'?); expected one "
        "of: kernel, grid, block, shared_mem, args");
  CHECK(parse_error("steps:\n  - kernel: k\n    grid: [1, 2]\n    block: [32]\n  - kernel: k\n"
                    "    grid: [1, ceil_div(M, 4), M +]\n    block: [32]\n") ==
        "test.yaml:6:31: steps[1].grid[2]: unexpected end of expression at column 4 in \"M +\" (expected a "
        "number, a name or '(')");
  CHECK(parse_error("steps:\n  - kernel: k\n    grid: [1, 1, 1, 1]\n    block: [32]\n") ==
        "test.yaml:3:11: steps[0].grid: expected 1 to 3 expressions (x, y, z), got 4");
  CHECK(parse_error("steps:\n  - kernel: k\n    block: [32]\n") == "test.yaml:2:5: steps[0]: missing key 'grid'");
  CHECK(parse_error("steps: [\n") == "test.yaml:2:1: invalid YAML: end of sequence flow not found");
  CHECK(parse_error("") == "test.yaml: the plan is empty; expected a mapping with at least 'outputs' and 'steps'");
  CHECK(parse_error("constants:\n  N: 1\n") == "test.yaml:1:1: missing key 'steps'");
  CHECK(parse_error("constants:\n  N: 1\n  N: 2\n" + steps_ok) == "test.yaml:3:3: constants: duplicate key 'N'");
  CHECK(parse_error("constants:\n  2N: 1\n" + steps_ok) ==
        "test.yaml:2:3: constants: '2N' is not a valid name (letters, digits and _, not starting with a digit)");
  CHECK(parse_error("constants:\n  N: ceil_div(x.numel 4)\n" + steps_ok) ==
        "test.yaml:2:6: constants.N: unexpected '4' at column 18 in \"ceil_div(x.numel 4)\" (expected ',' or ')')");
}

TEST_CASE("yaml: buffer errors", "[plan][yaml]") {
  const std::string steps_ok = "steps:\n  - kernel: k\n    grid: [1]\n    block: [32]\n";
  CHECK(parse_error("outputs:\n  - {name: y, shape: [4], dtype: float}\n" + steps_ok) ==
        "test.yaml:2:34: outputs[0].dtype: unknown dtype 'float' (did you mean 'float32'?); expected one of: "
        "float32, float16, bfloat16, float64, int32, int64, bool");
  CHECK(parse_error("outputs:\n  - {name: y, shape: [4], dtype: float23}\n" + steps_ok) ==
        "test.yaml:2:34: outputs[0].dtype: unknown dtype 'float23' (did you mean 'float32'?); expected one of: "
        "float32, float16, bfloat16, float64, int32, int64, bool");
  CHECK(parse_error("scratch:\n  - {name: t, shape: [4], init: zero}\n" + steps_ok) ==
        "test.yaml:2:33: scratch[0].init: expected 'none' or 'zeros', got 'zero'");
  CHECK(parse_error("outputs:\n  - {name: y, shape: [4], dtpye: float32}\n" + steps_ok) ==
        "test.yaml:2:27: outputs[0]: unknown key 'dtpye' in a buffer (did you mean 'dtype'?); expected one of: "
        "name, shape, dtype, init");
  CHECK(parse_error("outputs:\n  - {name: y}\n" + steps_ok) ==
        "test.yaml:2:5: outputs[0]: missing key 'shape' (a list of expressions; [] for a 0-d tensor)");
  CHECK(parse_error("outputs:\n  - {name: y, shape: 4}\n" + steps_ok) ==
        "test.yaml:2:22: outputs[0].shape: expected a list of expressions, got '4'");
  CHECK(parse_error("outputs:\n  - y\n" + steps_ok) ==
        "test.yaml:2:5: outputs[0]: expected a mapping {name: ..., shape: [...], dtype: ...}, got 'y'");
  CHECK(parse_error("outputs:\n  - {name: y, shape: [x.shape[0], x.shape[]]}\n" + steps_ok) ==
        "test.yaml:2:35: outputs[0].shape[1]: unexpected ']' at column 9 in \"x.shape[]\" (expected a number, a "
        "name or '(')");
}

TEST_CASE("yaml: step and argument errors", "[plan][yaml]") {
  auto step = [](const std::string& body) { return parse_error("outputs: []\nsteps:\n  - " + body + "\n"); };
  CHECK(step("kernel: k\n    grid: [1]\n    block: [32]\n    outputs: [y]") ==
        "test.yaml:6:5: steps[0]: 'outputs' is only for library steps");
  CHECK(step("library: aten::mm\n    args: [a, b]\n    outputs: [c]\n    grid: [1]") ==
        "test.yaml:6:5: steps[0]: 'grid' is only for kernel steps");
  CHECK(step("kernel: k\n    library: aten::mm") ==
        "test.yaml:3:5: steps[0]: a step has either 'kernel' or 'library', not both");
  CHECK(step("kernal: k") ==
        "test.yaml:3:5: steps[0]: unknown key 'kernal' in a step (did you mean 'kernel'?); expected one of: "
        "kernel, grid, block, shared_mem, args, library, outputs, attrs");
  CHECK(step("library: matmul\n    outputs: [c]") ==
        "test.yaml:3:14: steps[0].library: 'matmul' is not an op name; write NAMESPACE::OP, e.g. aten::matmul");
  CHECK(step("library: aten::mm\n    args: [a, b]") ==
        "test.yaml:3:5: steps[0]: missing key 'outputs' (the names the op's results get)");
  CHECK(step("kernel: k\n    grid: [1]\n    block: [32]\n    args: [x, 5]") ==
        "test.yaml:6:15: steps[0].args[1]: '5' is not a tensor name; a bare argument names a tensor, write a "
        "number as {int32: ...}, {int64: ...}, {float32: ...} or {float64: ...}");
  CHECK(step("kernel: k\n    grid: [1]\n    block: [32]\n    args: [{int8: 5}]") ==
        "test.yaml:6:13: steps[0].args[0]: unknown key 'int8' in an argument (did you mean 'int'?); expected "
        "one of: tensor, int32, int64, float32, float64, int, float");
  CHECK(step("kernel: k\n    grid: [1]\n    block: [32]\n    args: [{int64: N, int32: M}]") ==
        "test.yaml:6:12: steps[0].args[0]: expected a tensor name or a one-key mapping such as {int64: N} or "
        "{tensor: x}, got a mapping with 2 keys");
  CHECK(step("kernel: k\n    grid: [1]\n    block: [32]\n    args: [{int64: }]") ==
        "test.yaml:6:13: steps[0].args[0].int64: expected an expression, got nothing");
  CHECK(step("kernel: k\n    grid: [1]\n    block: [32]\n    args: [{tensor: 1x}]") ==
        "test.yaml:6:21: steps[0].args[0].tensor: '1x' is not a valid name (letters, digits and _, not starting "
        "with a digit)");
  CHECK(step("kernel: k\n    grid: [1]\n    block: [32]\n    shared_mem: [4]") ==
        "test.yaml:6:17: steps[0].shared_mem: expected an expression, got a list");
  CHECK(parse_error("steps: []\n") == "test.yaml:1:8: steps: expected a non-empty list of steps, got an empty list");
}

TEST_CASE("yaml: load_launch_plan reads files and names them in errors", "[plan][yaml]") {
  auto missing = load_launch_plan("/nonexistent/plan.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message() == "/nonexistent/plan.yaml: cannot open the launch plan");
  auto dir = std::filesystem::temp_directory_path() / "ks_plan_test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "bad.yaml").string();
  { std::ofstream(path) << "steps:\n  - kernel: k\n    grid: [1]\n    block: [32]\n    shared: 4\n"; }
  auto bad = load_launch_plan(path);
  REQUIRE_FALSE(bad.ok());
  // 'shared' abbreviates 'shared_mem': the shared suggestion rule (base/suggest.hpp) says so.
  CHECK(bad.message() == path +
                             ":5:5: steps[0]: unknown key 'shared' in a kernel step "
                             "(did you mean 'shared_mem'?); expected one of: "
                             "kernel, grid, block, shared_mem, args");
  std::filesystem::remove_all(dir);
}

// ===========================================================================
// Validation

namespace {

const char* validation_source = R"CU(
extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, long long n, float alpha) {}
extern "C" __global__ void __launch_bounds__(256) bounded(const float* x, float* y, long long n) {}
template <int B> __global__ void templ(float* y) {}
__global__ void mangled(float* y) {}
extern "C" __global__ void accumulate(const float* x, float* acc, int n) {}
extern "C" __global__ void read_acc(const float* acc, float* y, int n) {}
extern "C" __global__ void half_arg(const float* x, float* y, __half h) {}
extern "C" __global__ void unsigned_arg(const float* x, float* y, unsigned int n) {}
extern "C" __global__ void inplace(float* x, long long n) {}
extern "C" __global__ void two_outputs(const float* x, float* y, float* z) {}
)CU";

plan_context validation_context() {
  plan_context ctx;
  ctx.inputs["x"] = {{128, 64}, "float32"};
  ctx.inputs["w"] = {{64, 32}, "float32"};
  ctx.inputs["b"] = {{32}, "float32"};
  ctx.inputs["idx"] = {{10}, "int64"};
  ctx.inputs["img"] = {{2, 3, 32, 32}, "float32"};
  ctx.inputs["filt"] = {{8, 3, 3, 3}, "float32"};
  ctx.kernels = extract_kernel_signatures(validation_source);
  return ctx;
}

const std::string base_plan =
    "constants: {BLOCK: 256, N: x.numel}\n"
    "outputs:\n"
    "  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}\n"
    "steps:\n"
    "  - kernel: scale\n"
    "    grid: [ceil_div(N, BLOCK)]\n"
    "    block: [BLOCK]\n"
    "    args: [x, y, {int64: N}, {float32: 0.5}]\n";

// base_plan with `from` replaced by `to` (which must occur).
std::string edit(const std::string& from, const std::string& to, std::string text = base_plan) {
  size_t p = text.find(from);
  REQUIRE(p != std::string::npos);
  return text.replace(p, from.size(), to);
}

result<resolved_plan> resolve_yaml(const std::string& yaml, const plan_context& ctx = validation_context()) {
  auto p = parse_launch_plan(yaml, "test.yaml");
  if (!p.ok()) FAIL(p.message());
  return resolve_plan(p.value(), ctx);
}

resolved_plan resolve_ok(const std::string& yaml, const plan_context& ctx = validation_context()) {
  auto r = resolve_yaml(yaml, ctx);
  if (!r.ok()) FAIL(r.message());
  return r.value();
}

std::string resolve_error(const std::string& yaml, const plan_context& ctx = validation_context()) {
  auto r = resolve_yaml(yaml, ctx);
  REQUIRE_FALSE(r.ok());
  return r.message();
}

resolved_arg tensor_arg(const std::string& name) { return {"tensor", name, "", 0, 0}; }
resolved_arg int_arg(const std::string& type, int64_t v) { return {"int", "", type, v, 0}; }
resolved_arg float_arg(const std::string& type, double v) { return {"float", "", type, 0, v}; }

}  // namespace

TEST_CASE("validate: the base plan resolves to concrete numbers", "[plan][validate]") {
  resolved_plan r = resolve_ok(base_plan);
  CHECK(r.constants ==
        std::map<std::string, expr_value>{{"BLOCK", expr_value::integer(256)}, {"N", expr_value::integer(8192)}});
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0] == resolved_buffer{"y", buffer_role::output, {128, 64}, true, "float32", "none"});
  CHECK(r.outputs[0].numel() == 8192);
  CHECK(r.outputs[0].bytes() == 32768);
  REQUIRE(r.steps.size() == 1);
  const resolved_step& s = r.steps[0];
  CHECK(s.label() == "step 0 (kernel scale)");
  CHECK(s.grid == std::array<int64_t, 3>{32, 1, 1});
  CHECK(s.block == std::array<int64_t, 3>{256, 1, 1});
  CHECK(s.shared_mem_bytes == 0);
  CHECK(s.args ==
        std::vector<resolved_arg>{tensor_arg("x"), tensor_arg("y"), int_arg("int64", 8192), float_arg("float32", 0.5)});
  CHECK(s.writes == std::vector<std::string>{"y"});
  CHECK(r.warnings.empty());
  CHECK(r.find_buffer("y") == &r.outputs[0]);
  CHECK(r.find_buffer("x") == nullptr);
}

TEST_CASE("validate: constants are evaluated in dependency order", "[plan][validate]") {
  resolved_plan r = resolve_ok(edit("constants: {BLOCK: 256, N: x.numel}",
                                    "constants: {A: B * 2, B: C + 1, C: x.shape[1], BLOCK: 256, N: x.numel}"));
  CHECK(r.constants.at("A") == expr_value::integer(130));
  CHECK(r.constants.at("B") == expr_value::integer(65));
  CHECK(resolve_error(
            edit("constants: {BLOCK: 256, N: x.numel}", "constants: {A: B + 1, B: A, BLOCK: 256, N: x.numel}")) ==
        "constants.A: the constants depend on each other in a cycle: A -> B -> A");
  CHECK(resolve_error(edit("constants: {BLOCK: 256, N: x.numel}", "constants: {BLOCK: 256, N: x.numel, x: 3}")) ==
        "constants.x: 'x' is also the name of an input tensor; rename the constant");
  CHECK(resolve_error(edit("N: x.numel", "N: y.numel")) ==
        "constants.N: unknown tensor 'y' at column 1 in \"y.numel\" (tensors: b, filt, idx, img, w, x)");
}

TEST_CASE("validate: unknown and non-launchable kernels", "[plan][validate]") {
  CHECK(resolve_error(edit("kernel: scale", "kernel: scal")) ==
        "step 0 (kernel scal): kernel: 'scal' is not a __global__ function of the source (did you mean "
        "'scale'?); kernels found: scale, bounded, templ, mangled, accumulate, read_acc, half_arg, "
        "unsigned_arg, inplace, two_outputs");
  CHECK_THAT(
      resolve_error(edit("kernel: scale", "kernel: templ")),
      StartsWith("step 0 (kernel templ): kernel: 'templ' (line 4) cannot be launched by name: it is a template"));
  CHECK_THAT(resolve_error(edit("kernel: scale", "kernel: mangled")),
             StartsWith("step 0 (kernel mangled): kernel: 'mangled' (line 5) cannot be launched by name: it is not "
                        "declared extern \"C\""));
  plan_context no_kernels = validation_context();
  no_kernels.kernels.clear();
  CHECK(resolve_error(base_plan, no_kernels) ==
        "step 0 (kernel scale): kernel: the source defines no __global__ function named 'scale' (it defines none at "
        "all)");
}

TEST_CASE("validate: argument count and kinds against the signature", "[plan][validate]") {
  CHECK(resolve_error(edit("args: [x, y, {int64: N}, {float32: 0.5}]", "args: [x, y, {int64: N}]")) ==
        "step 0 (kernel scale): args: 3 given, but scale takes 4 (const float* __restrict__ x, "
        "float* __restrict__ y, long long n, float alpha)");
  CHECK(resolve_error(edit("{int64: N}", "x")) ==
        "step 0 (kernel scale): args[2]: tensor 'x' passed to parameter 2 'n' (long long), which takes a "
        "number; write {int64: EXPRESSION}");
  CHECK(resolve_error(edit("args: [x, y,", "args: [x, {int64: 0},")) ==
        "step 0 (kernel scale): args[1]: a number passed to parameter 1 'y' (float* __restrict__), which takes "
        "a tensor; pass a tensor name");
  CHECK(resolve_error(edit("{int64: N}", "{int32: N}")) ==
        "step 0 (kernel scale): args[2]: int32 value passed to parameter 2 'n' (long long); write {int64: N}");
  CHECK(resolve_error(edit("{float32: 0.5}", "{float64: 0.5}")) ==
        "step 0 (kernel scale): args[3]: float64 value passed to parameter 3 'alpha' (float); write {float32: 0.5}");
  CHECK(resolve_error(edit("{int64: N}", "{int64: N / 3.0}")) ==
        "step 0 (kernel scale): args[2]: \"N / 3.0\" is 2730.6666666666665, not an integer, but the int64 argument "
        "needs one (use floor(), ceil() or {float32: ...})");
  CHECK(resolve_error(edit("{int64: N}", "{int64: M}")) ==
        "step 0 (kernel scale): args[2]: unknown name 'M' at column 1 in \"M\" (constants: BLOCK, N)");
}

TEST_CASE("validate: scalar types a plan cannot pass, unsigned and int32 ranges", "[plan][validate]") {
  CHECK(resolve_error(edit("kernel: scale", "kernel: half_arg", edit("{int64: N}, {float32: 0.5}", "{float32: 1}"))) ==
        "step 0 (kernel half_arg): args[2]: parameter 2 'h' (__half) has a type a plan cannot pass; kernel scalars "
        "must be int32, int64, float32 or float64 (int, long, float, double)");
  const std::string u = edit("kernel: scale", "kernel: unsigned_arg", edit("{int64: N}, {float32: 0.5}", "{int32: N}"));
  CHECK(resolve_ok(u).steps[0].args[2] == int_arg("int32", 8192));
  CHECK(resolve_error(edit("{int32: N}", "{int32: -N}", u)) ==
        "step 0 (kernel unsigned_arg): args[2]: \"-N\" is -8192, but parameter 2 'n' (unsigned int) is unsigned");
  CHECK(resolve_ok(edit("{int32: N}", "{int32: 4000000000}", u)).steps[0].args[2] == int_arg("int32", 4000000000));
  CHECK(resolve_error(edit("{int32: N}", "{int32: 5000000000}", u)) ==
        "step 0 (kernel unsigned_arg): args[2]: \"5000000000\" is 5000000000, which does not fit in int32; use an "
        "int64 parameter and {int64: ...}");
  CHECK(resolve_error(edit("{float32: 0.5}", "{float32: 1e300}")) ==
        "step 0 (kernel scale): args[3]: \"1e300\" is 1e+300, which does not fit in float32");
}

TEST_CASE("validate: tensors must exist and match the pointer's element type", "[plan][validate]") {
  CHECK(resolve_error(edit("args: [x,", "args: [z,")) ==
        "step 0 (kernel scale): args[0]: unknown tensor 'z'; tensors at this step: b, filt, idx, img, w, x, y");
  CHECK(resolve_error(edit("args: [x,", "args: [xx,")) ==
        "step 0 (kernel scale): args[0]: unknown tensor 'xx' (did you mean 'x'?); tensors at this step: b, filt, "
        "idx, img, w, x, y");
  CHECK(resolve_error(edit("args: [x,", "args: [idx,")) ==
        "step 0 (kernel scale): args[0]: tensor 'idx' is int64, but parameter 0 'x' (const float* __restrict__) "
        "points to float32");
}

TEST_CASE("validate: read before write", "[plan][validate]") {
  const std::string two_steps =
      "outputs:\n"
      "  - {name: y, shape: [128, 64]}\n"
      "scratch:\n"
      "  - {name: acc, shape: [128, 64]}\n"
      "steps:\n"
      "  - kernel: read_acc\n"
      "    grid: [32]\n"
      "    block: [256]\n"
      "    args: [acc, y, {int32: 8192}]\n";
  // Uninitialised scratch read through a const pointer before any step writes it.
  CHECK(resolve_error(two_steps) ==
        "step 0 (kernel read_acc): args[0]: 'acc' is read (by parameter 0 'acc' (const float*)) before any step "
        "writes it; it is scratch with init: none — write it in an earlier step or declare it with init: zeros");
  // init: zeros makes it readable.
  CHECK(resolve_ok(edit("{name: acc, shape: [128, 64]}", "{name: acc, shape: [128, 64], init: zeros}", two_steps))
            .scratch[0]
            .init == "zeros");
  // So does an earlier step that writes it (a non-const pointer counts as a write).
  resolved_plan r = resolve_ok(edit("steps:\n",
                                    "steps:\n  - kernel: accumulate\n    grid: [32]\n    block: [256]\n"
                                    "    args: [x, acc, {int32: 8192}]\n",
                                    two_steps));
  CHECK(r.steps[0].writes == std::vector<std::string>{"acc"});
  CHECK(r.steps[1].writes == std::vector<std::string>{"y"});
  // An output read before it is written.
  CHECK(resolve_error(edit("args: [acc, y,", "args: [y, y,", two_steps)) ==
        "step 0 (kernel read_acc): args[0]: 'y' is read (by parameter 0 'acc' (const float*)) before any step "
        "writes it; it is an output with init: none (outputs are poisoned before the plan runs) — write it in an "
        "earlier step or declare it with init: zeros");
  // Library steps read all their tensor arguments.
  CHECK(resolve_error("outputs:\n  - {name: y, shape: [128, 32]}\nscratch:\n  - {name: t, shape: [128, 64]}\n"
                      "steps:\n  - library: aten::matmul\n    args: [t, w]\n    outputs: [y]\n") ==
        "step 0 (library aten::matmul): args[0]: 't' is read before any step writes it; it is scratch with init: "
        "none — write it in an earlier step or declare it with init: zeros");
}

TEST_CASE("validate: bad expressions in steps and buffers", "[plan][validate]") {
  CHECK(resolve_error(edit("grid: [ceil_div(N, BLOCK)]", "grid: [ceil_div(M, BLOCK)]")) ==
        "step 0 (kernel scale): grid[0]: unknown name 'M' at column 10 in \"ceil_div(M, BLOCK)\" (constants: "
        "BLOCK, N)");
  CHECK(resolve_error(edit("block: [BLOCK]", "block: [BLOCK / 0]")) ==
        "step 0 (kernel scale): block[0]: division by zero at column 7 in \"BLOCK / 0\"");
  CHECK(resolve_error(edit("grid: [ceil_div(N, BLOCK)]", "grid: [N / 3.0]")) ==
        "step 0 (kernel scale): grid[0]: \"N / 3.0\" is 2730.6666666666665, not an integer (use floor(), ceil() "
        "or integer arithmetic)");
  CHECK(resolve_error(edit("x.shape[1]]", "x.shape[2]]")) ==
        "outputs[0] 'y': shape[1]: x has 2 dims, shape[2] is out of range at column 1 in \"x.shape[2]\"");
  CHECK(resolve_error(edit("x.shape[1]]", "-x.shape[1]]")) ==
        "outputs[0] 'y': shape[1]: \"-x.shape[1]\" is -64; a dimension cannot be negative");
}

TEST_CASE("validate: launch dimensions and limits", "[plan][validate]") {
  CHECK(resolve_error(edit("grid: [ceil_div(N, BLOCK)]", "grid: [N - N]")) ==
        "step 0 (kernel scale): grid[0]: \"N - N\" is 0; a launch dimension must be at least 1");
  CHECK(resolve_error(edit("block: [BLOCK]", "block: [32, -1]")) ==
        "step 0 (kernel scale): block[1]: \"-1\" is -1; a launch dimension must be at least 1");
  CHECK(resolve_error(edit("block: [BLOCK]", "block: [2048]")) ==
        "step 0 (kernel scale): block[0]: \"2048\" is 2048, above the device limit of 1024");
  CHECK(resolve_error(edit("block: [BLOCK]", "block: [1, 1, 128]")) ==
        "step 0 (kernel scale): block[2]: \"128\" is 128, above the device limit of 64");
  CHECK(resolve_error(edit("block: [BLOCK]", "block: [32, 64]")) ==
        "step 0 (kernel scale): block: 32 x 64 x 1 = 2048 threads, above the device limit of 1024 per block");
  CHECK(resolve_error(edit("grid: [ceil_div(N, BLOCK)]", "grid: [1, 65536]")) ==
        "step 0 (kernel scale): grid[1]: \"65536\" is 65536, above the device limit of 65535");
  CHECK(resolve_ok(edit("grid: [ceil_div(N, BLOCK)]", "grid: [2147483647]")).steps[0].grid[0] == 2147483647);
  CHECK(resolve_error(edit("grid: [ceil_div(N, BLOCK)]", "grid: [2147483648]")) ==
        "step 0 (kernel scale): grid[0]: \"2147483648\" is 2147483648, above the device limit of 2147483647");
  launch_plan p = parse_ok(base_plan);
  p.steps[0].grid = {"1", "1", "1", "1"};
  auto four = resolve_plan(p, validation_context());
  REQUIRE_FALSE(four.ok());
  CHECK(four.message() == "step 0 (kernel scale): grid: expected 1 to 3 expressions (x, y, z), got 4");
}

TEST_CASE("validate: __launch_bounds__ caps the block", "[plan][validate]") {
  const std::string b = edit("kernel: scale", "kernel: bounded", edit(", {float32: 0.5}", ""));
  CHECK(resolve_ok(b).steps[0].block[0] == 256);
  CHECK(resolve_error(edit("block: [BLOCK]", "block: [512]", b)) ==
        "step 0 (kernel bounded): block: 512 threads, above the kernel's __launch_bounds__(256)");
}

TEST_CASE("validate: dynamic shared memory", "[plan][validate]") {
  CHECK(resolve_ok(edit("block: [BLOCK]\n", "block: [BLOCK]\n    shared_mem: BLOCK * 4 + 16\n"))
            .steps[0]
            .shared_mem_bytes == 1040);
  CHECK(resolve_ok(edit("block: [BLOCK]\n", "block: [BLOCK]\n    shared_mem: 232448\n")).steps[0].shared_mem_bytes ==
        232448);
  CHECK(resolve_error(edit("block: [BLOCK]\n", "block: [BLOCK]\n    shared_mem: 300000\n")) ==
        "step 0 (kernel scale): shared_mem: \"300000\" is 300000 bytes, above the device limit of 232448 bytes of "
        "dynamic shared memory per block");
  CHECK(resolve_error(edit("block: [BLOCK]\n", "block: [BLOCK]\n    shared_mem: -4\n")) ==
        "step 0 (kernel scale): shared_mem: \"-4\" is -4 bytes; it cannot be negative");
  plan_context small = validation_context();
  small.limits.max_shared_mem_bytes = 49152;
  small.limits.max_threads_per_block = 512;
  CHECK(resolve_error(edit("block: [BLOCK]\n", "block: [BLOCK]\n    shared_mem: 49153\n"), small) ==
        "step 0 (kernel scale): shared_mem: \"49153\" is 49153 bytes, above the device limit of 49152 bytes of "
        "dynamic shared memory per block");
  CHECK(resolve_error(edit("block: [BLOCK]", "block: [1024]"), small) ==
        "step 0 (kernel scale): block: 1024 x 1 x 1 = 1024 threads, above the device limit of 512 per block");
}

TEST_CASE("validate: buffer names and dtypes", "[plan][validate]") {
  CHECK(resolve_error(edit("steps:", "scratch:\n  - {name: y, shape: [4]}\nsteps:")) ==
        "scratch[0] 'y': duplicate name: outputs[0] is also 'y'");
  CHECK(resolve_error(edit("{name: y,", "{name: x,")) ==
        "outputs[0] 'x': shadows the input 'x'; give the buffer another name");
  CHECK(resolve_error(edit("{name: y,", "{name: N,")) ==
        "outputs[0] 'N': 'N' is also a constant; give the buffer another name");
  launch_plan p = parse_ok(base_plan);
  p.outputs[0].dtype = "float";
  auto bad = resolve_plan(p, validation_context());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message() ==
        "outputs[0] 'y': dtype: unknown dtype 'float'; expected one of: float32, float16, bfloat16, float64, int32, "
        "int64, bool");
  p.outputs[0].dtype = "float32";
  p.outputs[0].init = "ones";
  auto init = resolve_plan(p, validation_context());
  REQUIRE_FALSE(init.ok());
  CHECK(init.message() == "outputs[0] 'y': init: expected 'none' or 'zeros', got 'ones'");
  for (const auto& d : plan_dtypes()) CHECK(dtype_size(d) > 0);
  CHECK(dtype_size("bfloat16") == 2);
  CHECK(dtype_size("float") == 0);
}

TEST_CASE("validate: outputs must be declared, written, and as many as the reference's", "[plan][validate]") {
  CHECK(resolve_error(edit("  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}\n",
                           "  - {name: y, shape: [x.shape[0], x.shape[1]], dtype: float32}\n"
                           "  - {name: z, shape: [4]}\n")) ==
        "outputs[1] 'z': never written by any step (a kernel writes the tensors passed to its non-const pointer "
        "parameters; a library step writes its outputs)");
  CHECK(resolve_error("outputs: []\nsteps:\n  - kernel: scale\n    grid: [1]\n    block: [32]\n"
                      "    args: [x, x, {int64: 1}, {float32: 1}]\n") ==
        "outputs: the plan declares no outputs; list the tensors it returns, in the reference's order");
  plan_context two = validation_context();
  two.expected_outputs = 2;
  CHECK(resolve_error(base_plan, two) == "outputs: the plan declares 1 output, the reference returns 2");
  plan_context ref = validation_context();
  ref.reference_outputs = {{{128, 32}, "float32"}};
  CHECK(resolve_error(base_plan, ref) ==
        "outputs[0] 'y': shape [128, 64] does not match the reference's output 0 [128, 32]");
  ref.reference_outputs = {{{128, 64}, "float16"}};
  CHECK(resolve_error(base_plan, ref) ==
        "outputs[0] 'y': dtype float32 does not match the reference's output 0 (float16)");
  ref.reference_outputs = {{{128, 64}, "float32"}};
  CHECK(resolve_ok(base_plan, ref).outputs.size() == 1);
}

namespace {

plan_context library_context() {
  plan_context ctx;
  ctx.inputs["x"] = {{128, 64}, "float32"};
  ctx.inputs["w"] = {{64, 32}, "float32"};
  ctx.inputs["b"] = {{32}, "float32"};
  ctx.inputs["v"] = {{64}, "float32"};
  ctx.inputs["bx"] = {{5, 128, 64}, "float32"};
  ctx.inputs["bw"] = {{5, 64, 16}, "float32"};
  ctx.inputs["lw"] = {{32, 64}, "float32"};
  ctx.inputs["h"] = {{128, 64}, "float16"};
  ctx.inputs["i"] = {{128, 64}, "int32"};
  ctx.inputs["img"] = {{2, 3, 32, 32}, "float32"};
  ctx.inputs["filt"] = {{8, 3, 3, 3}, "float32"};
  ctx.inputs["dw"] = {{3, 1, 3, 3}, "float32"};
  ctx.inputs["cb"] = {{8}, "float32"};
  ctx.kernels = extract_kernel_signatures(validation_source);
  return ctx;
}

// A library step producing the intermediate `r`, then a kernel whose grid reads r's
// shape (so that intermediates' shapes are seen by later expressions).
std::string library_plan(const std::string& op, const std::string& args, const std::string& attrs = "") {
  return "outputs:\n  - {name: out, shape: [1]}\nsteps:\n  - library: " + op + "\n    args: " + args +
         "\n    outputs: [r]\n" + (attrs.empty() ? "" : "    attrs: " + attrs + "\n") +
         "  - kernel: scale\n    grid: [r.numel]\n    block: [32]\n    args: [x, out, {int64: r.ndim}, {float32: 1}]\n";
}

resolved_buffer library_result(const std::string& op, const std::string& args, const std::string& attrs = "") {
  resolved_plan r = resolve_ok(library_plan(op, args, attrs), library_context());
  const resolved_buffer* b = r.find_buffer("r");
  REQUIRE(b);
  CHECK(b->role == buffer_role::intermediate);
  CHECK(b->shape_known);
  int64_t numel = 1;
  for (int64_t d : b->shape) numel *= d;
  CHECK(r.steps[1].grid[0] == numel);
  return *b;
}

std::vector<int64_t> library_shape(const std::string& op, const std::string& args, const std::string& attrs = "") {
  return library_result(op, args, attrs).shape;
}

std::string library_error(const std::string& op, const std::string& args, const std::string& attrs = "") {
  return resolve_error(library_plan(op, args, attrs), library_context());
}

using shape = std::vector<int64_t>;

}  // namespace

TEST_CASE("validate: library shape inference for matrix products", "[plan][validate][library]") {
  CHECK(library_shape("aten::matmul", "[x, w]") == shape{128, 32});
  CHECK(library_shape("aten::matmul", "[v, v]") == shape{});
  CHECK(library_shape("aten::matmul", "[x, v]") == shape{128});
  CHECK(library_shape("aten::matmul", "[v, w]") == shape{32});
  CHECK(library_shape("aten::matmul", "[bx, w]") == shape{5, 128, 32});
  CHECK(library_shape("aten::matmul", "[bx, bw]") == shape{5, 128, 16});
  CHECK(library_shape("aten::mm", "[x, w]") == shape{128, 32});
  CHECK(library_shape("aten::bmm", "[bx, bw]") == shape{5, 128, 16});
  CHECK(library_shape("aten::addmm", "[b, x, w]", "{beta: 1, alpha: 2.5}") == shape{128, 32});
  CHECK(library_shape("aten::linear", "[x, lw]") == shape{128, 32});
  CHECK(library_shape("aten::linear", "[x, lw, b]") == shape{128, 32});
  CHECK(library_shape("aten::linear", "[bx, lw, b]") == shape{5, 128, 32});
  CHECK(library_result("aten::matmul", "[h, w]").dtype == "float32");  // promoted
  CHECK(library_result("aten::matmul", "[x, w]").dtype == "float32");
}

TEST_CASE("validate: library shape inference for conv2d, elementwise and softmax", "[plan][validate][library]") {
  CHECK(library_shape("aten::conv2d", "[img, filt]") == shape{2, 8, 30, 30});
  CHECK(library_shape("aten::conv2d", "[img, filt, cb]", "{stride: 2, padding: 1}") == shape{2, 8, 16, 16});
  CHECK(library_shape("aten::conv2d", "[img, filt]", "{stride: [1, 2], padding: [0, 1]}") == shape{2, 8, 30, 16});
  CHECK(library_shape("aten::conv2d", "[img, filt]", "{padding: same}") == shape{2, 8, 32, 32});
  CHECK(library_shape("aten::conv2d", "[img, filt]", "{padding: valid, dilation: 2}") == shape{2, 8, 28, 28});
  CHECK(library_shape("aten::conv2d", "[img, dw]", "{groups: 3}") == shape{2, 3, 30, 30});
  CHECK(library_shape("aten::conv2d", "[img, filt]", "{memory_format: channels_last}") == shape{2, 8, 30, 30});
  // result_layout nhwc: the result handed on as [N, H, W, C].
  CHECK(library_shape("aten::conv2d", "[img, filt]", "{memory_format: channels_last, result_layout: nhwc}") ==
        shape{2, 30, 30, 8});
  CHECK(library_shape("aten::conv2d", "[img, filt]", "{stride: [1, 2], result_layout: nhwc}") == shape{2, 30, 15, 8});
  CHECK(library_shape("aten::conv2d", "[img, filt]", "{result_layout: nchw}") == shape{2, 8, 30, 30});
  CHECK(library_shape("aten::add", "[x, v]", "{alpha: 2}") == shape{128, 64});
  CHECK(library_shape("aten::mul", "[bx, x]") == shape{5, 128, 64});
  CHECK(library_shape("aten::sub", "[x, {float32: 1.5}]") == shape{128, 64});
  CHECK(library_result("aten::add", "[i, {float32: 0.5}]").dtype == "float32");
  CHECK(library_result("aten::add", "[i, {int32: 1}]").dtype == "int32");
  CHECK(library_result("aten::div", "[i, i]").dtype == "float32");
  CHECK(library_result("aten::add", "[h, x]").dtype == "float32");
  CHECK(library_shape("aten::relu", "[bx]") == shape{5, 128, 64});
  CHECK(library_shape("aten::gelu", "[x]", "{approximate: tanh}") == shape{128, 64});
  CHECK(library_shape("aten::softmax", "[x]", "{dim: -1}") == shape{128, 64});
}

TEST_CASE("validate: library shape errors", "[plan][validate][library]") {
  CHECK(library_error("aten::matmul", "[w, x]") ==
        "step 0 (library aten::matmul): args: aten::matmul of args[0] 'w' [64, 32] and args[1] 'x' [128, 64]: "
        "inner dimensions differ (32 vs 128)");
  CHECK(library_error("aten::bmm", "[x, bw]") ==
        "step 0 (library aten::bmm): args[0]: aten::bmm needs a 3-D tensor, 'x' is [128, 64]");
  CHECK(library_error("aten::addmm", "[v, x, w]") ==
        "step 0 (library aten::addmm): args[0]: the bias of aten::addmm: shapes [64] and [128, 32] do not "
        "broadcast (dimension -1: 64 vs 32)");
  CHECK(library_error("aten::addmm", "[b, w, x]") ==
        "step 0 (library aten::addmm): args: aten::addmm of args[1] 'w' [64, 32] and args[2] 'x' [128, 64]: "
        "inner dimensions differ (32 vs 128)");
  CHECK(library_error("aten::linear", "[x, w]") ==
        "step 0 (library aten::linear): args: aten::linear of args[0] 'x' [128, 64] with weight args[1] 'w' "
        "[64, 32]: the input's last dimension 64 is not the weight's in_features 32");
  CHECK(library_error("aten::conv2d", "[img, dw]") ==
        "step 0 (library aten::conv2d): args: aten::conv2d of args[0] 'img' [2, 3, 32, 32] with weight args[1] "
        "'dw' [3, 1, 3, 3]: the input has 3 channels, the weight expects 1 x groups 1 = 1");
  CHECK(library_error("aten::conv2d", "[img, filt]", "{stride: [1, x]}") ==
        "step 0 (library aten::conv2d): attrs.stride: expected an integer or a list of 2 integers, got \"[1, x]\"");
  CHECK(library_error("aten::conv2d", "[img, filt]", "{strides: 2}") ==
        "step 0 (library aten::conv2d): attrs.strides: aten::conv2d has no attribute 'strides' (did you mean "
        "'stride'?); its attributes: stride, padding, dilation, groups, memory_format, result_layout");
  CHECK(library_error("aten::conv2d", "[img, filt]", "{result_layout: chw}") ==
        "step 0 (library aten::conv2d): attrs.result_layout: expected nchw or nhwc, got \"chw\"");
  CHECK(library_error("aten::conv2d", "[img, filt]", "{memory_format: nhwc}") ==
        "step 0 (library aten::conv2d): attrs.memory_format: expected contiguous or channels_last, got \"nhwc\"");
  // A product's math: ieee or tf32 (a split-precision GEMM's operands), nothing else.
  CHECK(library_shape("aten::linear", "[x, lw]", "{math: tf32}") == shape{128, 32});
  CHECK(library_shape("aten::addmm", "[b, x, w]", "{math: ieee}") == shape{128, 32});
  CHECK(library_shape("aten::bmm", "[bx, bw]", "{math: tf32}") == shape{5, 128, 16});
  CHECK(library_error("aten::mm", "[x, w]", "{math: fast}") ==
        "step 0 (library aten::mm): attrs.math: expected ieee or tf32, got \"fast\"");
  CHECK(library_error("aten::relu", "[x]", "{math: tf32}") ==
        "step 0 (library aten::relu): attrs.math: aten::relu has no attribute 'math' (it takes none)");
  CHECK(library_error("aten::conv2d", "[img, filt]", "{padding: same, stride: 2}") ==
        "step 0 (library aten::conv2d): attrs.padding: \"same\" needs stride 1, as in PyTorch");
  CHECK(library_error("aten::conv2d", "[img, filt, b]") ==
        "step 0 (library aten::conv2d): args[2]: the bias of aten::conv2d must be [8], 'b' is [32]");
  CHECK(library_error("aten::add", "[x, b]") ==
        "step 0 (library aten::add): args: shapes [128, 64] and [32] do not broadcast (dimension -1: 64 vs 32)");
  CHECK(library_error("aten::softmax", "[x]") ==
        "step 0 (library aten::softmax): attrs: aten::softmax needs the attribute dim");
  CHECK(library_error("aten::softmax", "[x]", "{dim: 2}") ==
        "step 0 (library aten::softmax): attrs.dim: 2 is out of range for 'x' [128, 64]");
  CHECK(library_error("aten::matmul", "[x]") ==
        "step 0 (library aten::matmul): args: aten::matmul takes 2 arguments, got 1");
  CHECK(library_error("aten::linear", "[x]") ==
        "step 0 (library aten::linear): args: aten::linear takes 2 or 3 arguments, got 1");
  CHECK(library_error("aten::matmul", "[x, {float32: 1}]") ==
        "step 0 (library aten::matmul): args[1]: aten::matmul takes a tensor here, got the number \"1\"");
  CHECK(library_error("aten::matmul", "[x, w]", "{alpha: 1}") ==
        "step 0 (library aten::matmul): attrs.alpha: aten::matmul has no attribute 'alpha'; its attributes: math");
  CHECK(library_error("aten::addmm", "[b, x, w]", "{alpha: two}") ==
        "step 0 (library aten::addmm): attrs.alpha: expected a number, got \"two\"");
  CHECK(library_error("aten::matmul", "[x, zz]") ==
        "step 0 (library aten::matmul): args[1]: unknown tensor 'zz'; tensors at this step: b, bw, bx, cb, dw, "
        "filt, h, i, img, lw, out, v, w, x");
}

TEST_CASE("validate: library outputs into declared buffers", "[plan][validate][library]") {
  const std::string two_steps =
      "outputs:\n"
      "  - {name: out, shape: [128, 64]}\n"
      "  - {name: y, shape: [128, 64]}\n"
      "steps:\n"
      "  - kernel: scale\n"
      "    grid: [32]\n"
      "    block: [256]\n"
      "    args: [x, y, {int64: 8192}, {float32: 2}]\n"
      "  - library: aten::matmul\n"
      "    args: [x, w]\n"
      "    outputs: [out]\n";
  CHECK(resolve_error(two_steps, library_context()) ==
        "step 1 (library aten::matmul): outputs[0] 'out': shape [128, 64] does not match the op's result [128, 32]");
  resolved_plan ok =
      resolve_ok(edit("{name: out, shape: [128, 64]}", "{name: out, shape: [128, 32]}", two_steps), library_context());
  CHECK(ok.intermediates.empty());
  CHECK(ok.steps[1].outputs == std::vector<std::string>{"out"});
  CHECK(ok.steps[1].writes == std::vector<std::string>{"out"});
  CHECK(resolve_error(edit("{name: out, shape: [128, 64]}", "{name: out, shape: [128, 32], dtype: float16}", two_steps),
                      library_context()) ==
        "step 1 (library aten::matmul): outputs[0] 'out': dtype float16 does not match the op's result (float32)");
  CHECK(resolve_error(edit("outputs: [out]", "outputs: [out, y]", two_steps), library_context()) ==
        "step 1 (library aten::matmul): outputs: aten::matmul returns one tensor, 2 names given");
  CHECK(resolve_error(edit("outputs: [out]", "outputs: [x]", two_steps), library_context()) ==
        "step 1 (library aten::matmul): outputs[0] 'x': is an input; a library step may not overwrite inputs");
}

TEST_CASE("the tensors kernels read: a library intermediate only library ops read may stay a view",
          "[plan][validate][library]") {
  const std::string plan =
      "outputs:\n"
      "  - {name: out, shape: [128, 32]}\n"
      "  - {name: y, shape: [128, 64]}\n"
      "steps:\n"
      "  - library: aten::matmul\n"
      "    args: [x, w]\n"
      "    outputs: [p]\n"
      "  - library: aten::matmul\n"
      "    args: [x, w]\n"
      "    outputs: [q]\n"
      "  - kernel: scale\n"
      "    grid: [32]\n"
      "    block: [256]\n"
      "    args: [x, y, {int64: 8192}, {float32: 2}]\n"
      "  - kernel: scale\n"
      "    grid: [32]\n"
      "    block: [256]\n"
      "    args: [p, out, {int64: 4096}, {float32: 2}]\n";
  const std::set<std::string> want{"out", "p", "x", "y"};  // q: only made, never read by a kernel
  auto parsed = parse_launch_plan(plan, "test.yaml");
  if (!parsed.ok()) FAIL(parsed.message());
  CHECK(tensors_read_by_kernels(parsed.value()) == want);
  CHECK(tensors_read_by_kernels(resolve_ok(plan, library_context())) == want);
}

TEST_CASE("the outputs a library step writes last are known, for the reviewer's run-to-run check",
          "[plan][validate][library]") {
  const std::string plan =
      "outputs:\n"
      "  - {name: out, shape: [128, 32]}\n"
      "  - {name: y, shape: [128, 64]}\n"
      "steps:\n"
      "  - kernel: scale\n"
      "    grid: [32]\n"
      "    block: [256]\n"
      "    args: [x, y, {int64: 8192}, {float32: 2}]\n"
      "  - library: aten::matmul\n"
      "    args: [x, w]\n"
      "    outputs: [out]\n";
  CHECK(outputs_last_written_by_library(resolve_ok(plan, library_context())) == std::set<std::string>{"out"});
  // A kernel that writes `out` after the library step makes it the kernel's again.
  const std::string rewritten = plan +
                                "  - kernel: scale\n"
                                "    grid: [16]\n"
                                "    block: [256]\n"
                                "    args: [out, out, {int64: 4096}, {float32: 2}]\n";
  resolved_plan r = resolve_ok(rewritten, library_context());
  REQUIRE(r.steps.size() == 3);
  CHECK(r.steps[2].writes == std::vector<std::string>{"out"});
  CHECK(outputs_last_written_by_library(r).empty());
}

TEST_CASE("validate: ops without shape inference", "[plan][validate][library]") {
  // An unknown op's new result has no shape until the plan runs; naming it is an error.
  CHECK(library_error("aten::cumsum", "[x]", "{dim: 1}") ==
        "step 1 (kernel scale): grid[0]: the shape of 'r' is not known before the plan runs (it is the result of "
        "step 0 (library aten::cumsum), and aten::cumsum has no shape inference in plan/; declare it as scratch "
        "to give it a shape) at column 1 in \"r.numel\"");
  // Declared as an output, its shape is the declared one (checked when the plan runs).
  resolved_plan r = resolve_ok(
      "outputs:\n  - {name: r, shape: [128, 64]}\nsteps:\n  - library: aten::cumsum\n    args: [x]\n"
      "    outputs: [r]\n    attrs: {dim: 1}\n",
      library_context());
  CHECK(r.outputs[0].shape == shape{128, 64});
  CHECK(r.steps[0].attrs == std::map<std::string, std::string>{{"dim", "1"}});
  // Unknown results may still be passed on to kernels and other steps, and several of them.
  resolved_plan multi = resolve_ok(
      "outputs:\n  - {name: out, shape: [128, 64]}\nsteps:\n  - library: aten::sort\n    args: [x]\n"
      "    outputs: [vals, order]\n  - kernel: scale\n    grid: [32]\n    block: [256]\n"
      "    args: [vals, out, {int64: 8192}, {float32: 1}]\n",
      library_context());
  REQUIRE(multi.intermediates.size() == 2);
  CHECK_FALSE(multi.intermediates[0].shape_known);
  CHECK(multi.intermediates[1].name == "order");
  CHECK(resolve_error("outputs:\n  - {name: r, shape: [1]}\nsteps:\n  - library: prims::foo\n    args: [x]\n"
                      "    outputs: [r]\n",
                      library_context()) ==
        "step 0 (library prims::foo): library: 'prims::foo' is not an ATen op; library steps run aten::NAME ops "
        "through LibTorch");
  CHECK(resolve_error("outputs:\n  - {name: out, shape: [1]}\nsteps:\n  - library: aten::relu\n    args: [x]\n"
                      "    outputs: [t]\n  - library: aten::relu\n    args: [t]\n    outputs: [t]\n",
                      library_context()) ==
        "step 1 (library aten::relu): outputs[0] 't': already produced by step 0 (library aten::relu); give this "
        "result a new name, or declare it as scratch to reuse it");
}

TEST_CASE("attr parse: an integer or a list of n integers", "[plan][attrs]") {
  using v = std::vector<int64_t>;
  auto ok = [](std::string_view text, size_t n) {
    auto r = parse_int_list(text, n, "attrs.x");
    INFO(text);
    REQUIRE(r.ok());
    return r.value();
  };
  CHECK(ok("2", 2) == v{2, 2});
  CHECK(ok(" -3 ", 1) == v{-3});
  CHECK(ok("[1, 2]", 2) == v{1, 2});
  CHECK(ok("(1,2)", 2) == v{1, 2});
  CHECK(ok("  [ 4 ,\t5 ]\n", 2) == v{4, 5});
  CHECK(ok("[3]", 2) == v{3, 3});
  CHECK(ok("[7, 8, 9]", 3) == v{7, 8, 9});
  for (const char* bad : {"", " ", "[]", "()", "[", "x", "1.5", "[1, x]", "[1, 2)", "(1, 2]", "1, 2, 3", "[1, 2, 3]",
                          "[1,]", "[,1]", "[1 2]", "99999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(parse_int_list(bad, 2, "attrs.x").ok());
  }
  CHECK(parse_int_list("[1, x]", 2, "attrs.stride").message() ==
        "attrs.stride: expected an integer or a list of 2 integers, got \"[1, x]\"");
  CHECK(parse_int_list("[1, 2]", 1, "attrs.dim").message() ==
        "attrs.dim: expected an integer or a list of 1 integers, got \"[1, 2]\"");

  const std::map<std::string, std::string> attrs{{"stride", "[2, 3]"}, {"groups", "bad"}};
  auto stride = int_list_attr(attrs, "stride", 2, {1, 1});
  REQUIRE(stride.ok());
  CHECK(stride.value() == v{2, 3});
  auto dilation = int_list_attr(attrs, "dilation", 2, {1, 1});
  REQUIRE(dilation.ok());
  CHECK(dilation.value() == v{1, 1});
  auto groups = int_list_attr(attrs, "groups", 1, {1});
  REQUIRE_FALSE(groups.ok());
  CHECK(groups.message() == "attrs.groups: expected an integer or a list of 1 integers, got \"bad\"");

  int64_t i = 0;
  CHECK((parse_int(" 42\t", i) && i == 42));
  CHECK_FALSE(parse_int("42x", i));
  CHECK_FALSE(parse_int("", i));
  double d = 0;
  CHECK((parse_double(" 0.5 ", d) && d == 0.5));
  CHECK_FALSE(parse_double("0.5.1", d));
  CHECK(trim_blanks(" \t a b \n") == "a b");
  CHECK(trim_blanks(" \t\n").empty());
}

TEST_CASE("op schema: ATen schemas are read without LibTorch", "[plan][schema]") {
  auto s = parse_op_schema(
      "aten::sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor "
      "indices)");
  REQUIRE(s.ok());
  CHECK(s.value().name == "aten::sort");
  CHECK(s.value().overload == "stable");
  CHECK(s.value().qualified() == "aten::sort.stable");
  REQUIRE(s.value().args.size() == 4);
  CHECK(s.value().args[0].is_tensor());
  CHECK(s.value().args[1].kwarg_only);
  CHECK(s.value().args[1].is_optional());
  CHECK(s.value().args[2].default_value == "-1");
  CHECK(s.value().returns == std::vector<std::string>{"Tensor", "Tensor"});
  auto cat = parse_op_schema("aten::cat(Tensor[] tensors, int dim=0) -> Tensor");
  REQUIRE(cat.ok());
  CHECK(cat.value().overload.empty());
  CHECK(cat.value().args[0].is_tensor_list());
  CHECK_FALSE(cat.value().args[0].is_tensor());
  auto view = parse_op_schema("aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)");
  REQUIRE(view.ok());
  CHECK(view.value().args[0].is_tensor());
  CHECK(view.value().args[1].type == "SymInt[]");
  CHECK(view.value().returns == std::vector<std::string>{"Tensor"});
  auto gelu = parse_op_schema("aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor");
  REQUIRE(gelu.ok());
  CHECK(gelu.value().args[1].default_value == "\"none\"");
  CHECK_FALSE(parse_op_schema("sort(Tensor self) -> Tensor").ok());
  CHECK_FALSE(parse_op_schema("aten::sort(Tensor self").ok());
}

TEST_CASE("validate: dispatcher steps (attrs.schema)", "[plan][validate][library]") {
  const std::string schema =
      "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)";
  const std::string plan =
      "outputs:\n  - {name: out, shape: [128, 64]}\nscratch:\n  - {name: vals, shape: [x.shape[0], x.shape[1]]}\n"
      "steps:\n  - library: aten::sort\n    args: [x]\n    outputs: [vals, order]\n"
      "    attrs: {schema: \"" +
      schema +
      "\", dim: 1, descending: \"False\"}\n"
      "  - kernel: scale\n    grid: [32]\n    block: [256]\n    args: [vals, out, {int64: vals.numel}, {float32: 1}]\n";
  resolved_plan r = resolve_ok(plan, library_context());
  CHECK(r.steps[0].attrs.at("schema") == schema);
  CHECK(r.steps[0].outputs == std::vector<std::string>{"vals", "order"});
  // A known op with its schema is a dispatcher call too: its attributes are the schema's.
  const std::string softmax = "aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor";
  resolve_ok(
      "outputs:\n  - {name: out, shape: [128, 64]}\nsteps:\n  - library: aten::softmax.int\n    args: [x]\n"
      "    outputs: [out]\n    attrs: {schema: \"" +
          softmax + "\", dim: 1, dtype: None}\n",
      library_context());
  CHECK(resolve_error(edit("descending: \"False\"", "descend: \"False\"", plan), library_context()) ==
        "step 0 (library aten::sort): attrs.descend: aten::sort has no argument 'descend' (did you mean "
        "'descending'?); its arguments: self, dim, descending");
  // run_layout says how the step runs its op (gpu/dispatch_runtime.hpp): no argument of it.
  resolve_ok(edit("descending: \"False\"", "descending: \"False\", run_layout: channels_last", plan),
             library_context());
  CHECK(resolve_error(edit("descending: \"False\"", "descending: \"False\", run_layout: nhwc", plan),
                      library_context()) ==
        "step 0 (library aten::sort): attrs.run_layout: expected channels_last, got \"nhwc\"");
  CHECK(resolve_error(edit("outputs: [vals, order]", "outputs: [vals, order, extra]", plan), library_context()) ==
        "step 0 (library aten::sort): outputs: aten::sort returns 2 value(s), 3 names given");
  CHECK(resolve_error(edit("library: aten::sort", "library: aten::argsort", plan), library_context()) ==
        "step 0 (library aten::argsort): attrs.schema names aten::sort, but the step runs aten::argsort");
}

TEST_CASE("validate: warnings", "[plan][validate]") {
  resolved_plan r = resolve_ok(
      "outputs:\n  - {name: y, shape: [4]}\nscratch:\n  - {name: unused, shape: [4]}\nsteps:\n"
      "  - kernel: inplace\n    grid: [1]\n    block: [48]\n    args: [x, {int64: 4}]\n"
      "  - kernel: scale\n    grid: [1]\n    block: [32]\n    args: [x, y, {int64: 4}, {float32: 1}]\n");
  CHECK(r.warnings == std::vector<std::string>{
                          "step 0 (kernel inplace): block: 48 threads is not a multiple of 32 (the warp size); the "
                          "last warp runs partly idle",
                          "step 0 (kernel inplace): args[0]: input 'x' is passed to non-const parameter 0 'x' "
                          "(float*); the kernel may modify an input, which fails verification — declare the "
                          "parameter const",
                          "scratch[0] 'unused': never used by any step"});
}

TEST_CASE("validate: make_plan_context takes shapes from the task and kernels from the source", "[plan][validate]") {
  task_spec task;
  task.name = "t";
  task.inputs = {{"x", {4, 8}, "float32", {}}};
  task.parameters = {{"w", {8, 2}, "float16", {}}};
  task.sizes["small"] = {{"x", {2, 8}}};
  auto ctx = make_plan_context(task, "extern \"C\" __global__ void k(float* p) {}");
  REQUIRE(ctx.ok());
  CHECK(ctx->inputs.at("x") == tensor_info{{4, 8}, "float32"});
  CHECK(ctx->inputs.at("w") == tensor_info{{8, 2}, "float16"});
  REQUIRE(ctx->kernels.size() == 1);
  CHECK(ctx->kernels[0].name == "k");
  auto small = make_plan_context(task, "", "small");
  REQUIRE(small.ok());
  CHECK(small->inputs.at("x").shape == shape{2, 8});
  CHECK(small->inputs.at("w").shape == shape{8, 2});
  auto missing = make_plan_context(task, "", "huge");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message() == "task 't' has no size 'huge'; its sizes: small");
}

// ===========================================================================
// The example plans in examples/plans: each parses, resolves with concrete shapes to
// the numbers below, round-trips through to_yaml, and its source compiles with NVRTC.

namespace {

const std::vector<std::string> example_names = {"relu", "gelu_vec4", "softmax_rows", "matmul_bias_relu",
                                                "l2_normalize"};

struct example {
  launch_plan plan;
  std::string source;
};

example load_example(const std::string& name) {
  auto plan = load_launch_plan(examples_dir + "/" + name + ".yaml");
  if (!plan.ok()) FAIL(plan.message());
  return {plan.value(), read_text(examples_dir + "/" + name + ".cu")};
}

resolved_plan resolve_example(const std::string& name, std::map<std::string, tensor_info> inputs) {
  example e = load_example(name);
  plan_context ctx;
  ctx.inputs = std::move(inputs);
  ctx.kernels = extract_kernel_signatures(e.source);
  ctx.expected_outputs = 1;
  auto r = resolve_plan(e.plan, ctx);
  if (!r.ok()) FAIL(name << ": " << r.message());
  CHECK(r->warnings.empty());
  return r.value();
}

std::string resolve_example_error(const std::string& name, std::map<std::string, tensor_info> inputs) {
  example e = load_example(name);
  plan_context ctx;
  ctx.inputs = std::move(inputs);
  ctx.kernels = extract_kernel_signatures(e.source);
  auto r = resolve_plan(e.plan, ctx);
  REQUIRE_FALSE(r.ok());
  return r.message();
}

using dims = std::array<int64_t, 3>;

}  // namespace

TEST_CASE("examples: every plan in examples/plans has a source and a test", "[plan][examples]") {
  std::set<std::string> yaml, cu;
  for (auto& entry : std::filesystem::directory_iterator(examples_dir)) {
    auto ext = entry.path().extension().string();
    if (ext == ".yaml") yaml.insert(entry.path().stem().string());
    if (ext == ".cu") cu.insert(entry.path().stem().string());
  }
  CHECK(yaml == std::set<std::string>(example_names.begin(), example_names.end()));
  CHECK(cu == yaml);
  for (auto& name : example_names) {
    example e = load_example(name);
    INFO(name);
    CHECK(parse_ok(to_yaml(e.plan)) == e.plan);
  }
}

TEST_CASE("examples: relu", "[plan][examples]") {
  resolved_plan r = resolve_example("relu", {{"x", {{3, 1001}, "float32"}}});
  CHECK(r.constants.at("N") == expr_value::integer(3003));
  CHECK(r.outputs[0] == resolved_buffer{"y", buffer_role::output, {3, 1001}, true, "float32", "none"});
  REQUIRE(r.steps.size() == 1);
  CHECK(r.steps[0].grid == dims{12, 1, 1});
  CHECK(r.steps[0].block == dims{256, 1, 1});
  CHECK(r.steps[0].args == std::vector<resolved_arg>{tensor_arg("x"), tensor_arg("y"), int_arg("int64", 3003)});
  CHECK_THAT(resolve_example_error("relu", {{"x", {{3003}, "float32"}}}),
             StartsWith("outputs[0] 'y': shape[1]: x has 1 dim, shape[1] is out of range"));
  CHECK(resolve_example_error("relu", {{"x", {{3, 1001}, "float64"}}}) ==
        "step 0 (kernel relu_f32): args[0]: tensor 'x' is float64, but parameter 0 'x' (const float* __restrict__) "
        "points to float32");
}

TEST_CASE("examples: gelu_vec4", "[plan][examples]") {
  resolved_plan r = resolve_example("gelu_vec4", {{"x", {{1000, 1001}, "float32"}}});
  CHECK(r.constants.at("BLOCKS") == expr_value::integer(978));
  CHECK(r.steps[0].grid == dims{978, 1, 1});
  CHECK(r.steps[0].block == dims{256, 1, 1});
  CHECK(r.steps[0].args == std::vector<resolved_arg>{tensor_arg("x"), tensor_arg("y"), int_arg("int64", 1001000)});
  // Large inputs: the grid is capped and the kernel's loop strides over the rest.
  resolved_plan big = resolve_example("gelu_vec4", {{"x", {{8192, 8192}, "float32"}}});
  CHECK(big.steps[0].grid == dims{4096, 1, 1});
  // Tiny inputs still launch one block.
  resolved_plan tiny = resolve_example("gelu_vec4", {{"x", {{1, 3}, "float32"}}});
  CHECK(tiny.steps[0].grid == dims{1, 1, 1});
  // The kernel's __launch_bounds__(256) is read from the source.
  example e = load_example("gelu_vec4");
  CHECK(find_kernel(extract_kernel_signatures(e.source), "gelu_f32x4")->launch_bounds == 256);
}

TEST_CASE("examples: softmax_rows", "[plan][examples]") {
  resolved_plan r = resolve_example("softmax_rows", {{"x", {{128, 1000}, "float32"}}});
  CHECK(r.constants.at("C") == expr_value::integer(1000));
  CHECK(r.constants.at("ROWS") == expr_value::integer(128));
  CHECK(r.constants.at("BLOCK") == expr_value::integer(256));
  CHECK(r.steps[0].grid == dims{128, 1, 1});
  CHECK(r.steps[0].block == dims{256, 1, 1});
  CHECK(r.steps[0].shared_mem_bytes == (1000 + 8) * 4);
  CHECK(r.steps[0].args ==
        std::vector<resolved_arg>{tensor_arg("x"), tensor_arg("y"), int_arg("int64", 128), int_arg("int32", 1000)});
  resolved_plan wide = resolve_example("softmax_rows", {{"x", {{4, 50000}, "float32"}}});
  CHECK(wide.steps[0].block == dims{1024, 1, 1});
  CHECK(wide.steps[0].shared_mem_bytes == (50000 + 32) * 4);
  resolved_plan narrow = resolve_example("softmax_rows", {{"x", {{7, 10}, "float32"}}});
  CHECK(narrow.steps[0].block == dims{32, 1, 1});
  CHECK(narrow.steps[0].shared_mem_bytes == (10 + 1) * 4);
  // Rows too long for shared memory are refused before anything runs.
  CHECK(resolve_example_error("softmax_rows", {{"x", {{4, 60000}, "float32"}}}) ==
        "step 0 (kernel softmax_rows_f32): shared_mem: \"(C + BLOCK / 32) * 4\" is 240128 bytes, above the device "
        "limit of 232448 bytes of dynamic shared memory per block");
}

TEST_CASE("examples: matmul_bias_relu", "[plan][examples]") {
  resolved_plan r = resolve_example(
      "matmul_bias_relu", {{"x", {{128, 64}, "float32"}}, {"w", {{64, 32}, "float32"}}, {"b", {{32}, "float32"}}});
  REQUIRE(r.intermediates.size() == 1);
  CHECK(r.intermediates[0] == resolved_buffer{"prod", buffer_role::intermediate, {128, 32}, true, "float32", ""});
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[0].kind == "library");
  CHECK(r.steps[0].args == std::vector<resolved_arg>{tensor_arg("x"), tensor_arg("w")});
  CHECK(r.steps[1].grid == dims{1, 16, 1});
  CHECK(r.steps[1].block == dims{32, 8, 1});
  CHECK(r.steps[1].args == std::vector<resolved_arg>{tensor_arg("prod"), tensor_arg("b"), tensor_arg("y"),
                                                     int_arg("int64", 128), int_arg("int64", 32)});
  CHECK(
      resolve_example_error("matmul_bias_relu",
                            {{"x", {{128, 64}, "float32"}}, {"w", {{60, 32}, "float32"}}, {"b", {{32}, "float32"}}}) ==
      "step 0 (library aten::matmul): args: aten::matmul of args[0] 'x' [128, 64] and args[1] 'w' [60, 32]: inner "
      "dimensions differ (64 vs 60)");
}

TEST_CASE("examples: l2_normalize", "[plan][examples]") {
  resolved_plan r = resolve_example("l2_normalize", {{"x", {{1000000}, "float32"}}});
  CHECK(r.constants.at("PARTS") == expr_value::integer(977));
  CHECK(r.scratch[0] == resolved_buffer{"partial", buffer_role::scratch, {977}, true, "float32", "none"});
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[0].grid == dims{977, 1, 1});
  CHECK(r.steps[0].writes == std::vector<std::string>{"partial"});
  CHECK(r.steps[1].grid == dims{3907, 1, 1});
  CHECK(r.steps[1].args == std::vector<resolved_arg>{tensor_arg("x"), tensor_arg("partial"), int_arg("int32", 977),
                                                     tensor_arg("y"), int_arg("int64", 1000000)});
  // The steps in the wrong order read the scratch buffer before it is written.
  example e = load_example("l2_normalize");
  std::swap(e.plan.steps[0], e.plan.steps[1]);
  plan_context ctx;
  ctx.inputs = {{"x", {{1000000}, "float32"}}};
  ctx.kernels = extract_kernel_signatures(e.source);
  auto swapped = resolve_plan(e.plan, ctx);
  REQUIRE_FALSE(swapped.ok());
  CHECK(swapped.message() ==
        "step 0 (kernel scale_f32): args[1]: 'partial' is read (by parameter 1 'partial' (const float* __restrict__)) "
        "before any step writes it; it is scratch with init: none — write it in an earlier step or declare it with "
        "init: zeros");
  resolved_plan small = resolve_example("l2_normalize", {{"x", {{10}, "float32"}}});
  CHECK(small.scratch[0].shape == shape{1});
  CHECK(small.steps[1].grid == dims{1, 1, 1});
}

TEST_CASE("examples: every source compiles to PTX with NVRTC", "[plan][examples][nvrtc]") {
  std::vector<std::string> options = {"--gpu-architecture=compute_90", "-std=c++17"};
  std::string dirs = KS_PLAN_TEST_CUDA_INCLUDES;
  for (size_t start = 0; start <= dirs.size();) {
    size_t bar = dirs.find('|', start);
    std::string dir = dirs.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    if (!dir.empty()) options.push_back("--include-path=" + dir);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  std::vector<const char*> argv;
  for (auto& o : options) argv.push_back(o.c_str());
  for (auto& name : example_names) {
    INFO(name);
    std::string source = read_text(examples_dir + "/" + name + ".cu");
    nvrtcProgram prog;
    REQUIRE(nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr) == NVRTC_SUCCESS);
    nvrtcResult rc = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    INFO(log);
    REQUIRE(rc == NVRTC_SUCCESS);
    size_t ptx_size = 0;
    nvrtcGetPTXSize(prog, &ptx_size);
    std::string ptx(ptx_size, '\0');
    nvrtcGetPTX(prog, ptx.data());
    nvrtcDestroyProgram(&prog);
    // Every launchable kernel the plan may name is an entry point under its own name.
    auto kernels = extract_kernel_signatures(source);
    REQUIRE_FALSE(kernels.empty());
    for (auto& k : kernels) {
      INFO(k.name);
      CHECK(k.launchable);
      CHECK_THAT(ptx, Contains(".entry " + k.name + "("));
    }
    // And every kernel the plan names is one of them.
    for (auto& step : load_example(name).plan.steps)
      if (step.kind == "kernel") CHECK(find_kernel(kernels, step.name) != nullptr);
  }
}

TEST_CASE("attr parse: booleans and list items", "[plan][attrs]") {
  bool b = false;
  CHECK((parse_bool(" True ", b) && b));
  CHECK((parse_bool("0", b) && !b));
  CHECK_FALSE(parse_bool("yes", b));
  CHECK(list_items("[1, 2.5 , x]") == std::vector<std::string>{"1", "2.5", "x"});
  CHECK(list_items("(True,False)") == std::vector<std::string>{"True", "False"});
  CHECK(list_items(" 7 ") == std::vector<std::string>{"7"});
  CHECK(list_items("[]").empty());
  CHECK(list_items("[ ]").empty());
}

TEST_CASE("attr parse: one of a few words", "[plan][attrs]") {
  const std::map<std::string, std::string> attrs = {{"approximate", " tanh "}, {"rounding_mode", "round"}};
  auto mode = choice_attr(attrs, "approximate", "none", {"none", "tanh"});
  REQUIRE(mode);
  CHECK(*mode == "tanh");
  auto fallback = choice_attr(attrs, "padding", "valid", {"same", "valid"});
  REQUIRE(fallback);
  CHECK(*fallback == "valid");
  auto bad = choice_attr(attrs, "rounding_mode", "", {"trunc", "floor"});
  REQUIRE_FALSE(bad);
  CHECK(bad.message() == "attrs.rounding_mode: expected one of trunc, floor, got \"round\"");
}

// The one rule that sends a plan through CUDA graph replay (plan/launch_bound.hpp).
TEST_CASE("launch-bound: many short steps, not a few long ones", "[plan][graph]") {
  auto plan_of = [](size_t kernels, size_t library, std::vector<int64_t> out_shape) {
    resolved_plan p;
    for (size_t k = 0; k < kernels; ++k) p.steps.push_back(resolved_step{k, "kernel", "k"});
    for (size_t k = 0; k < library; ++k) p.steps.push_back(resolved_step{kernels + k, "library", "aten::relu"});
    resolved_buffer out;
    out.name = "y";
    out.role = buffer_role::output;
    out.shape = std::move(out_shape);
    out.dtype = "float32";
    p.outputs.push_back(out);
    resolved_buffer unknown;  // a library result sized only when it runs: counts nothing
    unknown.name = "t";
    unknown.role = buffer_role::intermediate;
    unknown.shape_known = false;
    p.intermediates.push_back(unknown);
    return p;
  };
  // A network at a small batch: 40 launches and 20 library steps over 4 MB.
  plan_weight net = weigh_plan(plan_of(40, 20, {1000, 1000}), 0);
  CHECK(net.kernel_launches == 40);
  CHECK(net.library_steps == 20);
  CHECK(net.bytes == 4000000);
  CHECK(launch_bound(net));
  CHECK(describe_weight(net) == "40 kernel launches and 20 library steps moving 4 MB (0.0667 MB a step)");
  // Inputs and parameters count: 60 steps over 4 MB + 2 GB is 33 MB a step.
  CHECK_FALSE(launch_bound(weigh_plan(plan_of(40, 20, {1000, 1000}), 2000000000)));
  // Too few steps to pay for a graph, however small.
  CHECK_FALSE(launch_bound(weigh_plan(plan_of(2, 1, {8}), 0)));
  CHECK(launch_bound(weigh_plan(plan_of(3, 1, {8}), 0)));
  // The bound is per step (the 4-byte output counts): 4 steps of exactly 16 MiB are
  // launch-bound, a few bytes more are not.
  const uint64_t limit = uint64_t{16} << 20;
  CHECK(launch_bound(weigh_plan(plan_of(4, 0, {1}), 4 * limit - 4)));
  CHECK_FALSE(launch_bound(weigh_plan(plan_of(4, 0, {1}), 4 * limit + 4)));
  CHECK_FALSE(launch_bound(weigh_plan(resolved_plan{}, 0)));
  graph_rule never;
  never.min_steps = 1000;
  CHECK_FALSE(launch_bound(net, never));
}
