// The skill library's predicate language and loader: expression semantics
// (three-valued logic included), parse and type errors with their columns, the
// evidence vocabulary against docs/metrics.md, every kind of bad library refused
// with a message naming file, entry and field, the hash and store documents — and
// that the real library in skills/ loads.

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

#include "policy/evidence_names.hpp"
#include "policy/policy_expr.hpp"
#include "policy/skill_library.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using ks::policy_value;

namespace {

const fs::path fixture = fs::path(KS_SOURCE_DIR) / "tests" / "data" / "skills_min";

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A copy of the fixture library in a fresh temp dir, removed afterwards.
struct lib_dir {
  fs::path path;
  explicit lib_dir(bool copy_fixture = true) {
    static std::atomic<int> counter{0};
    path =
        fs::temp_directory_path() / ("ks-skills-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
    if (copy_fixture) {
      for (const auto& e : fs::directory_iterator(fixture)) fs::copy_file(e.path(), path / e.path().filename());
    }
  }
  ~lib_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
  // Replaces the first occurrence of `from` in file `name` (which must be there).
  void replace(const std::string& name, const std::string& from, const std::string& to) const {
    std::string text = read_file(path / name);
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    write(name, text);
  }
  // The load error, which must exist; each line must start with the directory.
  std::string error() const {
    auto r = ks::load_skill_library(path);
    REQUIRE_FALSE(r.ok());
    INFO(r.message());
    std::istringstream lines(r.message());
    for (std::string line; std::getline(lines, line);) CHECK_THAT(line, StartsWith(path.string()));
    return r.message();
  }
};

// Evaluates `text` in `env`.
policy_value eval(const std::string& text, const ks::policy_environment& env, ks::evaluation_record* rec = nullptr) {
  auto e = ks::policy_expr::parse(text);
  INFO(text);
  REQUIRE(e.ok());
  return e->evaluate(env, rec);
}

std::string parse_error(const std::string& text) {
  auto e = ks::policy_expr::parse(text);
  INFO(text);
  REQUIRE_FALSE(e.ok());
  return e.message();
}

ks::policy_environment sample_env() {
  ks::policy_environment env;
  env.set("dram_throughput_pct", policy_value::number(91));
  env.set("l2_throughput_pct", policy_value::number(40));
  env.set("uses_vector_loads", policy_value::number(0));
  env.set("flops", policy_value::number(1000));
  env.set("dram_bytes", policy_value::number(0));
  env.set("structure_class", policy_value::string("streaming"));
  env.set("task_dtype", policy_value::string("float16"));
  return env;
}

}  // namespace

// ---------------------------------------------------------------------------
// Expressions.

TEST_CASE("expressions: arithmetic, precedence and functions", "[expr]") {
  const auto env = sample_env();
  CHECK(eval("1 + 2 * 3", env) == policy_value::number(7));
  CHECK(eval("(1 + 2) * 3", env) == policy_value::number(9));
  CHECK(eval("10 - 4 - 3", env) == policy_value::number(3));
  CHECK(eval("10 / 4", env) == policy_value::number(2.5));
  CHECK(eval("-2 + 5", env) == policy_value::number(3));
  CHECK(eval("min(3, 1, 2)", env) == policy_value::number(1));
  CHECK(eval("max(dram_bytes, 1)", env) == policy_value::number(1));
  CHECK(eval("flops / max(dram_bytes, 1)", env) == policy_value::number(1000));
  CHECK(eval("abs(-3.5)", env) == policy_value::number(3.5));
  CHECK(eval("1e-3 * 1000", env) == policy_value::number(1));
  CHECK(eval(".5 + 0.25", env) == policy_value::number(0.75));
}

TEST_CASE("expressions: comparisons, logic, strings and lists", "[expr]") {
  const auto env = sample_env();
  CHECK(eval("dram_throughput_pct >= 60 || l2_throughput_pct >= 70", env) == policy_value::boolean(true));
  CHECK(eval("dram_throughput_pct >= 60 && l2_throughput_pct >= 70", env) == policy_value::boolean(false));
  CHECK(eval("!uses_vector_loads", env) == policy_value::boolean(true));
  CHECK(eval("!uses_vector_loads && dram_throughput_pct < 95", env) == policy_value::boolean(true));
  CHECK(eval("not uses_vector_loads and dram_throughput_pct > 95 or true", env) == policy_value::boolean(true));
  CHECK(eval("structure_class == 'streaming'", env) == policy_value::boolean(true));
  CHECK(eval("structure_class != \"streaming\"", env) == policy_value::boolean(false));
  CHECK(eval("structure_class in ['reuse', 'streaming']", env) == policy_value::boolean(true));
  CHECK(eval("task_dtype in ['float32']", env) == policy_value::boolean(false));
  CHECK(eval("dram_throughput_pct in [90, 91]", env) == policy_value::boolean(true));
  CHECK(eval("-1 in [-1, 2]", env) == policy_value::boolean(true));
  CHECK(eval("(dram_throughput_pct > 90) + 1", env) == policy_value::number(2));
  CHECK(eval("has(dram_throughput_pct) && !has(sm_throughput_pct)", env) == policy_value::boolean(true));
}

TEST_CASE("expressions: three-valued logic over absent names", "[expr]") {
  const auto env = sample_env();  // sm_throughput_pct and achieved_occupancy_pct are absent
  ks::evaluation_record rec;
  CHECK(eval("sm_throughput_pct > 50", env, &rec) == policy_value::unknown());
  CHECK(rec.missing == std::set<std::string>{"sm_throughput_pct"});

  // unknown && false = false, unknown || true = true; otherwise unknown.
  CHECK(eval("sm_throughput_pct > 50 && dram_throughput_pct < 10", env) == policy_value::boolean(false));
  CHECK(eval("dram_throughput_pct < 10 && sm_throughput_pct > 50", env) == policy_value::boolean(false));
  CHECK(eval("sm_throughput_pct > 50 || dram_throughput_pct > 10", env) == policy_value::boolean(true));
  CHECK(eval("sm_throughput_pct > 50 && dram_throughput_pct > 10", env) == policy_value::unknown());
  CHECK(eval("sm_throughput_pct > 50 || dram_throughput_pct < 10", env) == policy_value::unknown());
  CHECK(eval("!(sm_throughput_pct > 50)", env) == policy_value::unknown());
  CHECK(eval("sm_throughput_pct + 1 > 0", env) == policy_value::unknown());
  CHECK(eval("max(sm_throughput_pct, 1)", env) == policy_value::unknown());
  CHECK(eval("sm_throughput_pct in [1, 2]", env) == policy_value::unknown());
  CHECK(eval("has(sm_throughput_pct)", env) == policy_value::boolean(false));
  CHECK(eval("sm_throughput_pct == sm_throughput_pct", env) == policy_value::unknown());

  SECTION("the missing names are those that made the result unknown") {
    ks::evaluation_record r2;
    CHECK(eval("(achieved_occupancy_pct > 1 && dram_throughput_pct < 10) || sm_throughput_pct > 5", env, &r2) ==
          policy_value::unknown());
    CHECK(r2.missing == std::set<std::string>{"sm_throughput_pct"});
    ks::evaluation_record r3;
    CHECK(eval("achieved_occupancy_pct > 1 || sm_throughput_pct > 5", env, &r3) == policy_value::unknown());
    CHECK(r3.missing == std::set<std::string>{"achieved_occupancy_pct", "sm_throughput_pct"});
    ks::evaluation_record r4;
    CHECK(eval("achieved_occupancy_pct > 1 && dram_throughput_pct < 10", env, &r4) == policy_value::boolean(false));
    CHECK(r4.missing.empty());
  }
  SECTION("a computed name that is unknown reports the base names behind it") {
    auto e2 = env;
    e2.set("arithmetic_intensity", policy_value::unknown(), {"flops", "dram_bytes"});
    ks::evaluation_record r;
    CHECK(eval("arithmetic_intensity > 10", e2, &r) == policy_value::unknown());
    CHECK(r.missing == std::set<std::string>{"dram_bytes", "flops"});
    CHECK(eval("has(arithmetic_intensity)", e2) == policy_value::boolean(false));
  }
  SECTION("division by zero is unknown, with a note") {
    ks::evaluation_record r;
    CHECK(eval("flops / dram_bytes > 1", env, &r) == policy_value::unknown());
    CHECK(r.notes.count("division by zero") == 1);
    CHECK(r.missing.empty());
  }
  SECTION("the values read are recorded") {
    ks::evaluation_record r;
    eval("dram_throughput_pct > 1 && structure_class == 'streaming'", env, &r);
    CHECK(r.used.at("dram_throughput_pct") == policy_value::number(91));
    CHECK(r.used.at("structure_class") == policy_value::string("streaming"));
  }
}

TEST_CASE("expressions: parse errors give the column", "[expr]") {
  CHECK_THAT(parse_error("dram_throughput_pct >= "), StartsWith("column 24: expected a value"));
  CHECK_THAT(parse_error("a = 1"), StartsWith("column 3:") && Contains("'=='"));
  CHECK_THAT(parse_error("a & b"), StartsWith("column 3:") && Contains("'&&'"));
  CHECK_THAT(parse_error("(a > 1"), StartsWith("column 7: expected ')'"));
  CHECK_THAT(parse_error("a < b < c"), StartsWith("column 7:") && Contains("do not chain"));
  CHECK_THAT(parse_error("foo(1)"), StartsWith("column 1: unknown function 'foo'"));
  CHECK_THAT(parse_error("has(1)"), StartsWith("column 5:") && Contains("bare name"));
  CHECK_THAT(parse_error("min(1)"), StartsWith("column 1:") && Contains("two or more"));
  CHECK_THAT(parse_error("x == 'abc"), StartsWith("column 6: unterminated string"));
  CHECK_THAT(parse_error("a > 1 b"), StartsWith("column 7: expected an operator"));
  CHECK_THAT(parse_error("x in [1, 'a']"), Contains("mixes numbers and strings"));
  CHECK_THAT(parse_error("x in 'a'"), StartsWith("column 6: expected '['"));
  CHECK_THAT(parse_error("1.2.3 > 0"), StartsWith("column 1: bad number"));
  CHECK_THAT(parse_error("a $ b"), StartsWith("column 3: unexpected character '$'"));
  CHECK_THAT(parse_error(""), Contains("empty"));
  CHECK_THAT(parse_error("a && and"), StartsWith("column 6: expected a value"));
}

TEST_CASE("expressions: load-time checks find unknown names and type errors", "[expr]") {
  const std::map<std::string, ks::value_type> scope = {
      {"x", ks::value_type::number}, {"s", ks::value_type::string}, {"p", ks::value_type::boolean}};
  const auto check = [&](const std::string& text) {
    auto e = ks::policy_expr::parse(text);
    REQUIRE(e.ok());
    return e->check(scope);
  };
  auto c = check("x > 1 && y < 2 || has(zz)");
  REQUIRE(c.unknown_names.size() == 2);
  CHECK(c.unknown_names[0] == std::make_pair(std::string("y"), 10));
  CHECK(c.unknown_names[1] == std::make_pair(std::string("zz"), 23));
  CHECK(check("s + 1").problems.at(0) == "column 3: '+' needs numbers, got a string");
  CHECK_THAT(check("s > 'a'").problems.at(0), Contains("strings compare only with == and !="));
  CHECK_THAT(check("s == 1").problems.at(0), Contains("compares a string with a number"));
  CHECK_THAT(check("x in ['a']").problems.at(0), Contains("against a list of strings"));
  CHECK_THAT(check("!s").problems.at(0), Contains("needs a condition"));
  CHECK_THAT(check("min(s, 1)").problems.at(0), Contains("needs numbers"));
  CHECK(check("s").type == ks::value_type::string);
  CHECK(check("x * 2").type == ks::value_type::number);
  CHECK(check("p && x > 1").type == ks::value_type::boolean);
  CHECK(check("p && x > 1 && s in ['a', 'b']").problems.empty());
}

TEST_CASE("expressions: identifiers, canonical form and explanations", "[expr]") {
  auto e = ks::policy_expr::parse("b>=1&&(a<2||has(c)) && b != 3");
  REQUIRE(e.ok());
  CHECK(e->identifiers() == std::vector<std::string>{"a", "b", "c"});
  CHECK(e->canonical() == "b >= 1 && (a < 2 || has(c)) && b != 3");
  CHECK(ks::policy_expr::parse("not a and (b or c)")->canonical() == "!a && (b || c)");
  CHECK(ks::policy_expr::parse("a - (b - c)")->canonical() == "a - (b - c)");
  CHECK(ks::policy_expr::parse("!(a < 1)")->canonical() == "!(a < 1)");
  CHECK(ks::policy_expr::parse("x in ['a','b']")->canonical() == "x in ['a', 'b']");

  const auto env = sample_env();
  auto w = ks::policy_expr::parse("dram_throughput_pct >= 70 && !uses_vector_loads && structure_class == 'streaming'");
  CHECK(w->explain(env) ==
        "dram_throughput_pct 91 ≥ 70 and not uses_vector_loads (0) and structure_class 'streaming' = 'streaming'");
  auto o = ks::policy_expr::parse("dram_throughput_pct >= 60 || l2_throughput_pct >= 70");
  CHECK(o->explain(env) == "dram_throughput_pct 91 ≥ 60");
  auto r = ks::policy_expr::parse("flops / max(dram_bytes, 1) > 10");
  CHECK(r->explain(env) == "flops / max(dram_bytes, 1) = 1000 > 10");
}

TEST_CASE("numbers print in their shortest exact form", "[expr]") {
  CHECK(ks::format_number(91) == "91");
  CHECK(ks::format_number(1.4) == "1.4");
  CHECK(ks::format_number(0.1) == "0.1");
  CHECK(ks::format_number(1e-5) == "1e-05");
  CHECK(ks::format_number(-0.0) == "0");
  CHECK(policy_value::string("x").to_string() == "'x'");
  CHECK(policy_value::boolean(true).to_string() == "true");
  CHECK(policy_value::unknown().to_string() == "unknown");
}

// ---------------------------------------------------------------------------
// The evidence vocabulary.

TEST_CASE("evidence names agree with docs/metrics.md", "[evidence]") {
  const std::string doc = read_file(fs::path(KS_SOURCE_DIR) / "docs" / "metrics.md");
  REQUIRE_FALSE(doc.empty());
  // Every metric, feature and structure name the code knows is documented there;
  // the task fields in docs/skills.md...
  const std::string skills_doc = read_file(fs::path(KS_SOURCE_DIR) / "docs" / "skills.md");
  for (const auto& e : ks::evidence_names()) {
    INFO(e.name);
    const std::string& d = e.kind == ks::evidence_kind::task ? skills_doc : doc;
    CHECK(d.find("`" + e.name + "`") != std::string::npos);
  }
  // ... and every name in the doc's tables is known to the code.
  std::regex row(R"(^\| `([a-z0-9_]+)` \|)");
  std::istringstream lines(doc);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      ++rows;
      INFO(m[1].str());
      CHECK(ks::find_evidence_name(m[1].str()) != nullptr);
    }
  }
  CHECK(rows > 50);
  CHECK(ks::find_evidence_name("structure_class")->type == ks::evidence_type::string);
  CHECK(ks::find_evidence_name("task_dtype")->kind == ks::evidence_kind::task);
  for (const auto& s : ks::structure_classes()) CHECK(doc.find("`" + s + "`") != std::string::npos);
}

// ---------------------------------------------------------------------------
// Loading.

TEST_CASE("the fixture library loads completely", "[loader]") {
  auto r = ks::load_skill_library(fixture);
  INFO((r.ok() ? "" : r.message()));
  REQUIRE(r.ok());
  const ks::skill_library& lib = *r;
  CHECK(lib.name == "skills-min");
  CHECK(lib.version == 3);
  CHECK(lib.files.size() == 4);
  CHECK(lib.guardrails.max_failures_per_method == 2);
  CHECK(lib.guardrails.min_gain == 1.05);
  CHECK(lib.guardrails.oscillation_window == 4);
  REQUIRE(lib.derived.size() == 3);
  CHECK(lib.derived[0].id == "memory_bound");
  // Predicates in dependency order: streaming before scalar_streaming, which uses it.
  REQUIRE(lib.predicates.size() == 3);
  CHECK(lib.predicates[0].id == "streaming");
  CHECK(lib.predicates[1].id == "scalar_streaming");
  // Bottlenecks by priority, highest first.
  REQUIRE(lib.bottlenecks.size() == 3);
  CHECK(lib.bottlenecks[0].id == "memory_bandwidth");
  CHECK(lib.bottlenecks[1].id == "compute_bound");
  CHECK(lib.bottlenecks[2].id == "latency_bound");
  REQUIRE(lib.methods.size() == 6);
  const ks::method_def* v = lib.find_method("vectorize_loads");
  REQUIRE(v);
  CHECK(v->category == "memory");
  REQUIRE(v->requirement);
  CHECK(v->requirement->text() == "!uses_vector_loads");
  CHECK(v->expected_effect.at("dram_throughput_pct") == "up");
  REQUIRE(v->rules_coder.size() == 1);
  CHECK(v->rules_coder[0].param == "vector_width");
  CHECK(v->rules_coder[0].op == "set");
  CHECK(v->rules_coder[0].values == std::vector<std::string>{"4", "2"});
  CHECK_THAT(v->example, Contains("float4"));
  CHECK_THAT(v->where.to_string(), Contains("methods.yaml:2:5"));
  CHECK(lib.find_method("fast_math")->rules_coder[0].values.empty());
  REQUIRE(lib.decisions.size() == 5);
  const ks::decision_case* c = lib.find_case("mem_stream_no_vector");
  REQUIRE(c);
  CHECK(c->bottleneck == "memory_bandwidth");
  CHECK(c->structure == std::vector<std::string>{"streaming"});
  REQUIRE(c->allow.size() == 2);
  CHECK(c->allow[0].gain == 1.4);
  CHECK(c->forbid.at(0).why == "no reuse: tiles only add traffic");
  CHECK(c->example.metrics.at("dram_throughput_pct") == 72);
  CHECK(c->example.features.at("is_pointwise") == 1);
  CHECK(lib.find_case("compute_gemm")->example.task_atol == 1e-2);
  CHECK(lib.find_case("compute_gemm")->example.task_dtype == "float32");
  CHECK(lib.find_case("any_transcendental")->example.round == 2u);
  REQUIRE(lib.vetoes.size() == 1);
  CHECK(lib.vetoes[0].methods == std::vector<std::string>{"use_tensor_cores_tf32"});
}

TEST_CASE("library hash and store documents", "[loader]") {
  auto a = ks::load_skill_library(fixture);
  REQUIRE(a.ok());
  const std::string h = ks::library_hash(*a);
  CHECK(h.size() == 64);
  CHECK(h.find_first_not_of("0123456789abcdef") == std::string::npos);

  SECTION("the same content elsewhere, reformatted, hashes the same") {
    lib_dir d;
    d.replace("methods.yaml", "methods:\n", "# a comment moves every line\n\nmethods:\n");
    auto b = ks::load_skill_library(d.path);
    REQUIRE(b.ok());
    CHECK(ks::library_hash(*b) == h);
    CHECK(ks::canonical_text(*b) == ks::canonical_text(*a));
  }
  SECTION("any change of content changes the hash") {
    lib_dir d;
    d.replace("decisions.yaml", "gain: 1.4", "gain: 1.45");
    auto b = ks::load_skill_library(d.path);
    REQUIRE(b.ok());
    CHECK(ks::library_hash(*b) != h);
  }
  SECTION("store documents: one per entry, sorted, JSON naming its schema") {
    const auto docs = ks::to_store_docs(*a);
    std::vector<std::string> keys;
    for (const auto& [k, v] : docs) keys.push_back(k);
    CHECK(std::is_sorted(keys.begin(), keys.end()));
    CHECK(keys.size() == 1 + 3 + 3 + 3 + 6 + 5 + 1);
    CHECK(std::count(keys.begin(), keys.end(), "method/vectorize_loads") == 1);
    CHECK(std::count(keys.begin(), keys.end(), "decision/mem_stream_no_vector") == 1);
    CHECK(std::count(keys.begin(), keys.end(), "veto/tf32_needs_tolerance") == 1);
    for (const auto& [k, v] : docs) {
      if (k == "library") {
        CHECK_THAT(v, Contains("\"hash\":\"" + h + "\"") && Contains("\"version\":3"));
      }
      if (k == "method/vectorize_loads") {
        CHECK_THAT(v, Contains("\"schema\":\"ks.skill.method/1\"") && Contains("\"requires\":\"!uses_vector_loads\""));
      }
    }
  }
}

TEST_CASE("loader errors name file, entry and field", "[loader]") {
  SECTION("YAML syntax error") {
    lib_dir d;
    d.write("zz.yaml", "methods:\n  - {id: x, name: [\n");
    CHECK_THAT(d.error(), Contains("zz.yaml:") && Contains("YAML syntax error"));
  }
  SECTION("unknown top-level key, with did-you-mean") {
    lib_dir d;
    d.write("extra.yaml", "methodz: []\n");
    CHECK_THAT(d.error(), Contains("extra.yaml:1:1: unknown key 'methodz' (did you mean 'methods'?)"));
  }
  SECTION("unknown field of an entry") {
    lib_dir d;
    d.replace("methods.yaml", "    rationale: \"Fewer", "    rationle: x\n    rationale: \"Fewer");
    CHECK_THAT(d.error(), Contains("methods.yaml:5:5: unknown key 'methods[0] (vectorize_loads).rationle' "
                                   "(did you mean 'methods[0] (vectorize_loads).rationale'?)"));
  }
  SECTION("missing required field") {
    lib_dir d;
    d.write("extra.yaml",
            "methods:\n  - {id: new_method, name: N, category: memory, expected_effect: {duration_us: down},\n"
            "     sources: [s]}\n");
    CHECK_THAT(d.error(), Contains("extra.yaml:2:5: methods[0] (new_method): missing required field 'rationale'"));
  }
  SECTION("duplicate id across files names both files") {
    lib_dir d;
    d.write("zz.yaml",
            "methods:\n  - {id: vectorize_loads, name: N, category: memory, rationale: r,\n"
            "     expected_effect: {duration_us: down}, sources: [s]}\n");
    const std::string e = d.error();
    CHECK_THAT(e, Contains("zz.yaml:2:10: methods[0] (vectorize_loads).id: duplicate method id "
                           "'vectorize_loads' (first defined at "));
    CHECK_THAT(e, Contains("methods.yaml:2:9)"));
  }
  SECTION("duplicate id between a derived field and a predicate") {
    lib_dir d;
    d.write("extra.yaml", "predicates:\n  - {id: memory_bound, expr: \"1 > 0\"}\n");
    CHECK_THAT(d.error(), Contains("extra.yaml:2:10: predicates[0] (memory_bound).id: duplicate predicate id "
                                   "'memory_bound' (already a derived field at ") &&
                              Contains("library.yaml:"));
  }
  SECTION("an id that shadows an evidence name") {
    lib_dir d;
    d.write("extra.yaml", "derived:\n  - {id: flops, expr: \"1\"}\n");
    CHECK_THAT(d.error(), Contains("extra.yaml:2:10: derived[0] (flops).id: 'flops' is already a metric name"));
  }
  SECTION("unknown method in a case's allow list, with did-you-mean") {
    lib_dir d;
    d.replace("decisions.yaml", "{method: vectorize_loads, gain: 1.4", "{method: vectorise_loads, gain: 1.4");
    CHECK_THAT(d.error(), Contains("decisions.yaml:8:18: decisions[0] (mem_stream_no_vector).allow[0].method: "
                                   "unknown method 'vectorise_loads' (did you mean 'vectorize_loads'?)"));
  }
  SECTION("unknown method in a case's forbid list") {
    lib_dir d;
    d.replace("decisions.yaml", "{method: shared_memory_tiling, why", "{method: smem_tiling, why");
    CHECK_THAT(d.error(), Contains("decisions[0] (mem_stream_no_vector).forbid[0].method: unknown method "
                                   "'smem_tiling'"));
  }
  SECTION("unknown bottleneck in a case") {
    lib_dir d;
    d.replace("decisions.yaml", "bottleneck: compute_bound", "bottleneck: compute_bond");
    CHECK_THAT(d.error(),
               Contains("decisions.yaml:") && Contains("decisions[2] (compute_gemm).bottleneck: unknown bottleneck "
                                                       "'compute_bond' (did you mean 'compute_bound'?)"));
  }
  SECTION("unknown method in a global veto") {
    lib_dir d;
    d.replace("decisions.yaml", "methods: [use_tensor_cores_tf32]", "methods: [use_tensor_cores_tf23]");
    CHECK_THAT(d.error(), Contains("decisions.yaml:") &&
                              Contains("vetoes[0] (tf32_needs_tolerance).methods[0]: unknown method "
                                       "'use_tensor_cores_tf23' (did you mean 'use_tensor_cores_tf32'?)"));
  }
  SECTION("bad category") {
    lib_dir d;
    d.replace("methods.yaml", "category: memory", "category: memroy");
    CHECK_THAT(d.error(), Contains("methods.yaml:4:15: methods[0] (vectorize_loads).category: expected one of "
                                   "memory, compute,") &&
                              Contains("got \"memroy\" (did you mean 'memory'?)"));
  }
  SECTION("bad effect direction") {
    lib_dir d;
    d.replace("methods.yaml", "{dram_throughput_pct: up,", "{dram_throughput_pct: upp,");
    CHECK_THAT(d.error(), Contains("methods[0] (vectorize_loads).expected_effect.dram_throughput_pct: expected "
                                   "one of up, down, same, got \"upp\" (did you mean 'up'?)"));
  }
  SECTION("unknown metric in expected_effect") {
    lib_dir d;
    d.replace("methods.yaml", "{dram_throughput_pct: up,", "{dram: up,");
    CHECK_THAT(d.error(), Contains("methods.yaml:8:23: methods[0] (vectorize_loads).expected_effect.dram: "
                                   "unknown metric 'dram' (did you mean '"));
  }
  SECTION("bad rules_coder op") {
    lib_dir d;
    d.replace("methods.yaml", "op: set", "op: sett");
    CHECK_THAT(d.error(), Contains("methods[0] (vectorize_loads).rules_coder.op: expected one of set, multiply, "
                                   "toggle, choose, got \"sett\" (did you mean 'set'?)"));
  }
  SECTION("a gain that is not positive") {
    lib_dir d;
    d.replace("decisions.yaml", "gain: 1.4", "gain: 0");
    CHECK_THAT(d.error(), Contains("decisions[0] (mem_stream_no_vector).allow[0].gain: expected a positive "
                                   "expected speedup factor"));
  }
  SECTION("a method without sources") {
    lib_dir d;
    d.replace("methods.yaml", "sources: [\"CUDA C++ Best Practices Guide, §9.2.1\"]", "sources: []");
    CHECK_THAT(d.error(), Contains("methods.yaml:13:14: methods[0] (vectorize_loads).sources: expected at "
                                   "least one source"));
  }
  SECTION("a case without an example") {
    lib_dir d;
    d.replace("decisions.yaml",
              "    example:\n      structure_class: reduction\n      metrics: {dram_throughput_pct: 80}\n", "");
    CHECK_THAT(d.error(), Contains("decisions[1] (mem_stream_any): missing required field 'example'"));
  }
  SECTION("duplicate bottleneck priorities") {
    lib_dir d;
    d.replace("bottlenecks.yaml", "priority: 80", "priority: 90");
    CHECK_THAT(d.error(), Contains("bottlenecks.yaml:") &&
                              Contains("bottlenecks[2] (compute_bound).priority: priority 90 is already used by "
                                       "bottleneck 'memory_bandwidth'"));
  }
  SECTION("an expression that does not parse gives the column") {
    lib_dir d;
    d.replace("decisions.yaml", "\"!uses_vector_loads && dram_throughput_pct < 90\"",
              "\"!uses_vector_loads && (dram_throughput_pct < 90\"");
    CHECK_THAT(d.error(), Contains("decisions.yaml:6:11: decisions[0] (mem_stream_no_vector).when: cannot parse "
                                   "expression \"!uses_vector_loads && (dram_throughput_pct < 90\": column 48: "
                                   "expected ')'"));
  }
  SECTION("an unknown name in an expression, with did-you-mean") {
    lib_dir d;
    d.replace("decisions.yaml", "dram_throughput_pct < 90", "dram_througput_pct < 90");
    CHECK_THAT(d.error(), Contains("decisions[0] (mem_stream_no_vector).when: in \"!uses_vector_loads && "
                                   "dram_througput_pct < 90\" at column 23: unknown name 'dram_througput_pct' "
                                   "(did you mean 'dram_throughput_pct'?)"));
  }
  SECTION("an unknown name in a method's requires") {
    lib_dir d;
    d.replace("methods.yaml", "requires: \"!uses_vector_loads\"", "requires: \"!uses_vectors\"");
    CHECK_THAT(d.error(), Contains("methods[0] (vectorize_loads).requires: in \"!uses_vectors\" at column 2: "
                                   "unknown name 'uses_vectors'"));
  }
  SECTION("a derived field that uses a later one") {
    lib_dir d;
    d.replace("library.yaml", "expr: \"flops / max(dram_bytes, 1)\"",
              "expr: \"flops / max(dram_bytes, 1) * high_intensity\"");
    CHECK_THAT(d.error(), Contains("library.yaml:") &&
                              Contains("derived[1] (arithmetic_intensity).expr: in \"flops / max(dram_bytes, 1) * "
                                       "high_intensity\" at column 30: derived field 'high_intensity' is defined "
                                       "after 'arithmetic_intensity'"));
  }
  SECTION("a derived field that uses a predicate") {
    lib_dir d;
    d.replace("library.yaml", "expr: \"arithmetic_intensity > 10\"",
              "expr: \"arithmetic_intensity > 10 && streaming\"");
    CHECK_THAT(d.error(), Contains("derived[2] (high_intensity).expr:") &&
                              Contains("'streaming' is a predicate; derived fields may use only evidence"));
  }
  SECTION("predicates that form a cycle") {
    lib_dir d;
    d.replace("library.yaml", "expr: \"structure_class == 'streaming'\"",
              "expr: \"structure_class == 'streaming' && scalar_streaming\"");
    CHECK_THAT(d.error(), Contains("predicates[") && Contains(".expr: predicates form a cycle: ") &&
                              Contains("scalar_streaming → streaming → scalar_streaming"));
  }
  SECTION("a type error in an expression") {
    lib_dir d;
    d.replace("library.yaml", "expr: \"task_atol < 1e-3\"", "expr: \"task_dtype < 1e-3\"");
    CHECK_THAT(d.error(), Contains("predicates[2] (tight_tolerance).expr: in \"task_dtype < 1e-3\": column 12: "
                                   "'<' compares a string with a number"));
  }
  SECTION("a condition that is a string") {
    lib_dir d;
    d.replace("library.yaml", "expr: \"task_atol < 1e-3\"", "expr: \"task_dtype\"");
    CHECK_THAT(d.error(), Contains("predicates[2] (tight_tolerance).expr: \"task_dtype\" is a string, not a "
                                   "condition"));
  }
  SECTION("an unknown structure class") {
    lib_dir d;
    d.replace("decisions.yaml", "structure: [streaming, reduction]", "structure: [streaming, reductions]");
    CHECK_THAT(d.error(), Contains("decisions[1] (mem_stream_any).structure[1]: expected one of streaming, "
                                   "reuse, reduction, irregular, multi_kernel, got \"reductions\" (did you mean "
                                   "'reduction'?)"));
  }
  SECTION("an example that names an unknown metric, or a feature under metrics") {
    lib_dir d;
    d.replace("decisions.yaml", "metrics: {dram_throughput_pct: 80}", "metrics: {dram_throughput: 80, registers: 3}");
    const std::string e = d.error();
    CHECK_THAT(e, Contains("decisions[1] (mem_stream_any).example.metrics.dram_throughput: unknown metric "
                           "'dram_throughput' (did you mean 'dram_throughput_pct'?)"));
    CHECK_THAT(e, Contains("decisions[1] (mem_stream_any).example.metrics.registers: unknown metric 'registers' "
                           "(it is a code feature: put it under features)"));
  }
  SECTION("a method both allowed and forbidden by one case") {
    lib_dir d;
    d.replace("decisions.yaml", "{method: shared_memory_tiling, why", "{method: vectorize_loads, why");
    CHECK_THAT(d.error(), Contains("decisions[0] (mem_stream_no_vector).forbid[0].method: method "
                                   "'vectorize_loads' is both allowed and forbidden"));
  }
  SECTION("a bad bottleneck evidence name") {
    lib_dir d;
    d.replace("bottlenecks.yaml", "evidence: [sm_throughput_pct]}", "evidence: [sm_throughput]}");
    CHECK_THAT(d.error(), Contains("bottlenecks[2] (compute_bound).evidence[0]: unknown name 'sm_throughput' "
                                   "(did you mean 'sm_throughput_pct'?)"));
  }
  SECTION("a wrong type: a priority that is not an integer") {
    lib_dir d;
    d.replace("bottlenecks.yaml", "priority: 50", "priority: high");
    CHECK_THAT(d.error(), Contains("bottlenecks.yaml:2:35: bottlenecks[0] (latency_bound).priority: expected an "
                                   "integer, got \"high\""));
  }
  SECTION("no library entry") {
    lib_dir d;
    d.replace("library.yaml",
              "library: {name: skills-min, version: 3, description: \"test fixture: a few methods and cases\"}", "");
    CHECK_THAT(d.error(), Contains(": no file has a 'library' entry"));
  }
  SECTION("two library entries") {
    lib_dir d;
    d.write("zz.yaml", "library: {name: other, version: 1}\n");
    CHECK_THAT(d.error(), Contains("zz.yaml:1:10: library: a second 'library' entry (the first is in ") &&
                              Contains("library.yaml"));
  }
  SECTION("a directory without YAML files, and none at all") {
    lib_dir d(false);
    CHECK_THAT(d.error(), Contains("no *.yaml files"));
    auto r = ks::load_skill_library(d.path / "nope");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Contains("nope: not a directory"));
  }
  SECTION("every error is reported, one per line") {
    lib_dir d;
    d.replace("methods.yaml", "category: memory", "category: memroy");
    d.replace("decisions.yaml", "gain: 1.4", "gain: -1");
    d.replace("bottlenecks.yaml", "priority: 80", "priority: 90");
    d.write("extra.yaml", "methodz: []\n");
    const std::string e = d.error();
    CHECK(std::count(e.begin(), e.end(), '\n') == 3);
  }
}

// ---------------------------------------------------------------------------
// The real library.

TEST_CASE("the skill library in skills/ loads", "[skills]") {
  const fs::path dir = fs::path(KS_SOURCE_DIR) / "skills";
  auto r = ks::load_skill_library(dir);
  INFO((r.ok() ? std::string() : r.message()));
  REQUIRE(r.ok());
  const ks::skill_library& lib = *r;
  CHECK_FALSE(lib.name.empty());
  CHECK(lib.version >= 1);
  CHECK_FALSE(lib.methods.empty());
  CHECK_FALSE(lib.decisions.empty());
  CHECK_FALSE(lib.bottlenecks.empty());
  // Its store documents cover every entry.
  const auto docs = ks::to_store_docs(lib);
  CHECK(docs.size() == 1 + lib.derived.size() + lib.predicates.size() + lib.bottlenecks.size() + lib.methods.size() +
                           lib.decisions.size() + lib.vetoes.size());
  // A method that no case allows is reachable only in the ablation: say so.
  for (const auto& m : lib.methods) {
    bool allowed = false;
    for (const auto& c : lib.decisions) {
      for (const auto& a : c.allow) allowed = allowed || a.method == m.id;
    }
    if (!allowed) WARN("method " << m.id << " is allowed by no decision case");
  }
}
