// The rules coder's op table (coder/rules/plan/op_table.hpp): every elementwise row is
// lowered from a one-node graph into an elementwise kernel that real NVRTC compiles
// (no GPU needed), so a row whose expression is not CUDA fails here, not in a review.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "coder/lowering.hpp"
#include "coder/rules/plan/op_table.hpp"
#include "gpu/nvrtc_compiler.hpp"

using namespace ks;
using rules::op_class;

namespace {

nvrtc_compiler& compiler() {
  static nvrtc_compiler c([] {
    nvrtc_options o;
    o.isolate = false;
    return o;
  }());
  return c;
}

// A graph of one node `kind` over a float32 x [4, 256], with the arguments the op
// reads (a second tensor broadcast along the rows where it takes one).
task_graph one_node(const std::string& kind, const rules::op_info& op) {
  task_graph g;
  g.task = "op_table_" + kind.substr(kind.find(':') + 2);
  auto tensor = [&](const std::string& id, std::vector<int64_t> shape, const std::string& dtype, bool input) {
    graph_value v;
    v.id = id;
    v.type = "Tensor";
    v.shape = std::move(shape);
    v.dtype = dtype;
    g.values[id] = v;
    if (input) {
      g.input_values.push_back(id);
      g.input_names.push_back(id);
    }
    return id;
  };
  auto constant = [&](const std::string& id, const std::string& type, std::vector<double> numbers,
                      const std::string& text = "") {
    graph_value v;
    v.id = id;
    v.type = type;
    v.numbers = std::move(numbers);
    v.text = text;
    v.constant = true;
    g.values[id] = v;
    return id;
  };
  const std::string x = tensor("x", {4, 256}, "float32", true);
  std::vector<std::string> in = {x};
  const std::string e(op.expr);
  if (kind == "aten::where") {
    in = {tensor("c", {4, 256}, "bool", true), x, tensor("y", {256}, "float32", true)};
  } else if (kind == "aten::masked_fill") {
    in = {x, tensor("m", {4, 256}, "bool", true), constant("v", "float", {0.5})};
  } else if (kind == "aten::clamp" || kind == "aten::clip") {
    in.push_back(constant("lo", "float", {-0.5}));
    in.push_back(constant("hi", "float", {0.5}));
  } else if (kind == "aten::pow") {
    in.push_back(constant("p", "float", {2.5}));
  } else if (kind == "aten::gelu") {
    in.push_back(constant("a", "str", {}, "tanh"));
  } else if (kind == "aten::logit") {
    in.push_back(constant("eps", "None", {}));
  } else if (kind == "aten::dropout" || kind == "aten::feature_dropout" || kind == "aten::alpha_dropout") {
    in.push_back(constant("p", "float", {0.1}));
    in.push_back(constant("train", "bool", {0}));
  } else if (kind == "aten::add" || kind == "aten::sub" || kind == "aten::subtract" || kind == "aten::rsub") {
    in.push_back(tensor("y", {256}, "float32", true));
    in.push_back(constant("alpha", "int", {2}));
  } else if (kind == "aten::div" || kind == "aten::divide" || kind == "aten::true_divide") {
    in.push_back(tensor("y", {256}, "float32", true));
    in.push_back(constant("mode", "str", {}, "floor"));
  } else if (kind == "aten::type_as" || kind == "aten::expand_as") {
    in.push_back(tensor("y", {4, 256}, "float32", true));
  } else if (e.find("{1}") != std::string::npos) {
    in.push_back(tensor("y", {256}, "float32", true));
  }
  tensor("out", {4, 256}, "float32", false);
  g.nodes.push_back(graph_node{kind, in, {"out"}, ""});
  g.outputs = {"out"};
  return g;
}

}  // namespace

TEST_CASE("op table: every op is in one row", "[op_table]") {
  std::set<std::string_view> seen;
  for (const rules::op_info& op : rules::op_table()) {
    INFO(op.name);
    CHECK(seen.insert(op.name).second);
    CHECK(rules::find_op(op.name) == &op);
    // Only elementwise rows carry an expression; every elementwise row's shape is the
    // broadcast of its operands.
    if (op.cls != op_class::elementwise)
      CHECK(op.expr.empty());
    else
      CHECK(op.shape == rules::shape_rule::broadcast);
  }
  CHECK(rules::find_op("aten::sort") == nullptr);
  CHECK(rules::ops_of(op_class::product) ==
        std::vector<std::string>{"aten::matmul", "aten::mm", "aten::bmm", "aten::addmm", "aten::linear"});
}

TEST_CASE("op table: every elementwise op lowers to a kernel that NVRTC compiles", "[op_table][nvrtc]") {
  int lowered = 0;
  for (const rules::op_info& op : rules::op_table()) {
    if (op.cls != op_class::elementwise) continue;
    const std::string kind(op.name);
    for (bool fast : {false, true}) {
      INFO(kind << (fast ? " (fast_math)" : ""));
      lowering_params p;
      p.fast_math = fast;
      auto r = lower_graph(one_node(kind, op), p);
      REQUIRE(r);
      CHECK(r->stages == std::vector<std::string>{"elementwise"});
      auto compiled = compiler().compile(r->source, r->compile_options);
      REQUIRE(compiled);
      INFO(r->source << "\n" << compiled->log);
      CHECK(compiled->ok);
    }
    ++lowered;
  }
  CHECK(lowered == 76);
}

TEST_CASE("op table: a row that calls the fast-math helpers says so, and only it gets their header", "[op_table]") {
  // The lowering picks fast_math's header from the rows' flag, not from the text it
  // wrote: a row that calls KS_EXP or KS_DIV without the flag would keep IEEE math.
  int fast_rows = 0;
  for (const rules::op_info& op : rules::op_table()) {
    if (op.cls != op_class::elementwise) continue;
    const std::string kind(op.name);
    INFO(kind);
    const bool calls =
        op.expr.find("KS_EXP") != std::string_view::npos || op.expr.find("KS_DIV") != std::string_view::npos;
    CHECK(op.fast_math == calls);
    fast_rows += op.fast_math ? 1 : 0;
    lowering_params p;
    p.fast_math = true;
    auto r = lower_graph(one_node(kind, op), p);
    REQUIRE(r);
    CHECK((r->source.find("#define KS_EXP __expf") != std::string::npos) == op.fast_math);
  }
  CHECK(fast_rows == 3);  // sigmoid, exp, silu
}

TEST_CASE("op table: a table expression's operands and constants are filled in", "[op_table]") {
  // hardtanh's bounds from its arguments, leaky_relu's slope from its default.
  auto source = [](const std::string& kind) {
    auto r = lower_graph(one_node(kind, *rules::find_op(kind)), {});
    REQUIRE(r);
    return r->source;
  };
  CHECK(source("aten::leaky_relu").find("* (0.01f)") != std::string::npos);
  CHECK(source("aten::hardtanh").find("fminf(fmaxf(") != std::string::npos);
  const std::string where = source("aten::where");
  CHECK(where.find(" != 0.0f ? ") != std::string::npos);
  CHECK(where.find("{1}") == std::string::npos);
  CHECK(where.find("{x}") == std::string::npos);
}
