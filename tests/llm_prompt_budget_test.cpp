// What the agents' prompts carry and how they fit a model's context: the reference's
// own source (a KernelBench problem's Python, TorchScript, or the code inside a saved
// module's archive), and the cuts each agent makes, in its stated order, when its
// prompt must fit a budget. No network.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "llm/module_code.hpp"
#include "llm/prompt_budget.hpp"
#include "llm/prompts.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "policy/skill_library.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const fs::path kData = fs::path(KS_SOURCE_DIR) / "tests" / "data";

// The KernelBench problem conv_hardtanh as `kernelskill import kernelbench` makes it:
// a module reference, its parameters read from the module's attributes.
ks::task_spec kernelbench_task() {
  ks::task_spec t;
  t.name = "conv_hardtanh";
  t.description = "Conv2d then Hardtanh with integer bounds (which torch.jit.script refuses): traced.";
  t.module_bytes = "PK\x03\x04 not read: the problem's source is shown";
  t.module_path = "conv_hardtanh.pt";
  t.kernelbench.source = read(kData / "kernelbench" / "good" / "conv_hardtanh.py");
  t.kernelbench.arguments = {{"x", "x", ""}, {"scale", "", "3.0"}};
  t.inputs.push_back({"x", {2, 3, 10, 9}, "float32", {"uniform", 0, 1, 0, 1, 0, ""}});
  ks::tensor_spec w{"conv_weight", {4, 3, 3, 3}, "float32", {}};
  w.init.kind = "module";
  w.init.attr = "conv.weight";
  t.parameters.push_back(w);
  t.tolerance = {1e-3, 1e-3};
  return t;
}

ks::candidate kernel_of(const std::string& body) {
  ks::candidate c;
  c.id = "feedfacecafe0001";
  c.task = "conv_hardtanh";
  c.source = "extern \"C\" __global__ void k(const float* x, float* y, long long n) {\n" + body + "\n}\n";
  c.plan = ks::parse_launch_plan(
               "outputs:\n  - {name: y, shape: [x.numel], dtype: float32}\nsteps:\n"
               "  - kernel: k\n    grid: [1]\n    block: [32]\n    args: [x, y, {int64: 1}]\n")
               .value();
  c.round = 4;
  return c;
}

std::vector<ks::trajectory_entry> long_history(size_t n) {
  std::vector<ks::trajectory_entry> h(n);
  for (size_t i = 0; i < n; ++i) {
    h[i].round = static_cast<uint32_t>(i);
    h[i].kind = "optimize";
    h[i].method = i % 2 ? "vectorize_loads" : "increase_block_size";
    h[i].status = i % 3 ? ks::review_status::ok : ks::review_status::incorrect;
    h[i].summary = "attempt " + std::to_string(i) + ": " + std::string(200, 'h');
  }
  return h;
}

size_t prompt_size(const ks::chat_request& r) { return r.system.size() + r.messages.at(0).content.size(); }

}  // namespace

TEST_CASE("a KernelBench task's prompt shows the problem's own Python", "[llm][prompts][reference]") {
  const std::string t = ks::render_task(kernelbench_task());
  CHECK_THAT(t, Contains("KernelBench problem"));
  CHECK_THAT(t, Contains("self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)"));
  CHECK_THAT(t, Contains("return self.hardtanh(self.conv(x) * 3)"));
  CHECK_THAT(t, Contains("def get_inputs():"));
  CHECK_THAT(t, Contains("`scale` = 3.0"));
  CHECK_THAT(t, Contains("`conv_weight`: float32 [4, 3, 3, 3], the module's `conv.weight`"));
  CHECK_THAT(t, !Contains("its source is not shown"));
  // The generator's prompt carries it too.
  CHECK_THAT(ks::generator_prompt(kernelbench_task()).messages[0].content, Contains("nn.Hardtanh(min_val=-1"));
}

TEST_CASE("a saved module's prompt shows the code inside its archive", "[llm][prompts][reference]") {
  ks::task_spec t;
  t.name = "swish";
  t.module_bytes = read(kData / "swish_module.pt");
  t.module_path = "swish_module.pt";
  t.inputs.push_back({"x", {1024}, "float32", {}});
  const std::string text = ks::render_task(t);
  CHECK_THAT(text, Contains("swish_module/code/__torch__.py"));
  CHECK_THAT(text, Contains("return torch.mul(x, torch.sigmoid(x))"));

  auto files = ks::module_code(t.module_bytes);
  REQUIRE(files.ok());
  REQUIRE(files->size() == 1);  // the compressed .debug_pkl is not code
  CHECK(files->at(0).path == "swish_module/code/__torch__.py");
  // Damaged archives are errors, never reads past the bytes.
  CHECK_FALSE(ks::module_code("not a zip").ok());
  for (size_t keep : {size_t{30}, t.module_bytes.size() / 2, t.module_bytes.size() - 5}) {
    auto cut = ks::module_code(t.module_bytes.view().substr(0, keep));
    CHECK_FALSE(cut.ok());
  }
  std::string corrupt = t.module_bytes.str();
  corrupt[corrupt.size() - 6] = '\x7f';  // the central directory's offset, far past the end
  CHECK_FALSE(ks::module_code(corrupt).ok());
  // An archive whose code cannot be read falls back to saying so.
  t.module_bytes = "garbage";
  CHECK_THAT(ks::render_task(t), Contains("its source is not shown"));
}

TEST_CASE("Python comments and docstrings go first, then the middle of the source", "[llm][prompts][budget]") {
  const std::string src =
      "import torch\n# a comment\nclass Model:\n    \"\"\"One line.\"\"\"\n    def f(self):\n"
      "        '''Several\n        lines.'''\n        return 1  # kept: code\n";
  CHECK(ks::strip_python_comments(src) ==
        "import torch\nclass Model:\n    def f(self):\n        return 1  # kept: code\n");
  std::string lines;
  for (int i = 0; i < 100; ++i) lines += "line " + std::to_string(i) + "\n";
  const std::string cut = ks::cut_middle(lines, 200, "#");
  CHECK(cut.size() < 300);
  CHECK_THAT(cut, Contains("line 0\n"));
  CHECK_THAT(cut, Contains("line 99\n"));
  CHECK_THAT(cut, Contains("lines cut to fit the model's context"));
  CHECK(ks::cut_middle("short\n", 200, "#") == "short\n");
}

TEST_CASE("sections are cut in the stated order, each to its shortest before the next", "[llm][prompts][budget]") {
  std::vector<ks::prompt_section> s = {
      ks::make_section("a", {{std::string(100, 'a'), ""}, {"a", "most of a"}}),
      ks::make_section("b", {{std::string(100, 'b'), ""}, {"bb", "most of b"}, {"", "all of b"}}),
      ks::make_section("", {{std::string(50, 'k'), ""}})};
  auto none = ks::assemble_prompt(s, {"b", "a"}, 0, 0);
  CHECK(none.text.size() == 250);
  CHECK(none.cuts.empty());
  auto one = ks::assemble_prompt(s, {"b", "a"}, 160, 0);
  CHECK(one.text == std::string(100, 'a') + "bb" + std::string(50, 'k'));
  CHECK(one.cuts == std::vector<std::string>{"most of b"});
  auto both = ks::assemble_prompt(s, {"b", "a"}, 60, 0);
  CHECK(both.text == "a" + std::string(50, 'k'));
  CHECK(both.cuts == std::vector<std::string>{"most of a", "all of b"});
  auto impossible = ks::assemble_prompt(s, {"b", "a"}, 10, 0);  // never below the uncut section
  CHECK(impossible.text == both.text);
}

TEST_CASE("the optimizer's prompt fits its budget, cutting history, then the method's example, then more",
          "[llm][prompts][budget]") {
  auto lib = ks::load_skill_library(fs::path(KS_SOURCE_DIR) / "skills");
  REQUIRE(lib.ok());
  const ks::method_def* method = lib->find_method("vectorize_loads");
  REQUIRE(method);
  const auto task = kernelbench_task();
  const auto cand = kernel_of("  y[0] = x[0];");
  ks::review_result review;
  review.status = ks::review_status::ok;
  review.speedup = 1.2;
  for (int i = 0; i < 30; ++i) review.profile.values["metric_" + std::to_string(i)] = i;
  review.profile.values["dram_throughput_pct"] = 71.5;
  ks::code_features features;
  features.values = {{"uses_vector_loads", 0}};
  ks::optimization_plan plan;
  plan.chosen = "vectorize_loads";
  plan.ranked.push_back({"vectorize_loads", 1.4, {"mem_stream_no_vector"}, {{"dram_throughput_pct", 71.5}}});
  const auto history = long_history(40);

  ks::prompt_limits unbounded;
  const auto full = ks::optimizer_prompt(task, cand, review, features, plan, method, history, unbounded);
  const std::string& f = full.messages[0].content;
  CHECK_THAT(f, Contains("the last 24 of 40 events"));
  CHECK_THAT(f, Contains(method->example.substr(0, 40)));
  CHECK_THAT(f, !Contains("Shortened to fit"));

  // A budget a little short: only older history goes.
  ks::prompt_limits l;
  l.max_prompt_chars = prompt_size(full) - 2000;
  auto a = ks::optimizer_prompt(task, cand, review, features, plan, method, history, l);
  const std::string& au = a.messages[0].content;
  CHECK(prompt_size(a) <= l.max_prompt_chars + 200);  // the note itself is the only overshoot
  CHECK_THAT(au, Contains("the last 8 of 40 events"));
  CHECK_THAT(au, Contains(method->example.substr(0, 40)));
  CHECK_THAT(au, Contains("Shortened to fit the model's context: left out the history's older events"));

  // Much shorter: the history is gone, the method's example and the guide's too; the
  // kernel, the decision and the method's rules stay.
  l.max_prompt_chars = prompt_size(full) / 2;
  auto b = ks::optimizer_prompt(task, cand, review, features, plan, method, history, l);
  const std::string& bu = b.messages[0].content;
  CHECK(prompt_size(b) < prompt_size(a));
  CHECK_THAT(bu, !Contains("attempt 39"));
  CHECK_THAT(bu, !Contains(method->example.substr(0, 40)));
  CHECK_THAT(bu, Contains(cand.source));
  CHECK_THAT(bu, Contains(method->preconditions.at(0)));
  CHECK_THAT(bu, Contains("Chosen method: `vectorize_loads`"));
  CHECK_THAT(bu, Contains("self.conv = nn.Conv2d"));  // the reference is cut last

  // So short that everything that can go goes: the profile keeps the digest's metric
  // only if that level was enough, the reference loses its comments and its middle.
  l.max_prompt_chars = 1000;
  auto c = ks::optimizer_prompt(task, cand, review, features, plan, method, history, l);
  const std::string& cu = c.messages[0].content;
  CHECK_THAT(cu, Contains("lines cut to fit the model's context"));
  CHECK_THAT(cu, !Contains("metric_7 ="));
  CHECK_THAT(cu, Contains(cand.source));
  CHECK_THAT(cu, Contains("`conv_weight`"));
  CHECK_THAT(cu, Contains("Tolerance"));
}

TEST_CASE("each agent states its truncation order, and the repairer's and diagnoser's follow it",
          "[llm][prompts][budget]") {
  CHECK(ks::truncation_order(ks::agent_role::generator) == std::vector<std::string>{"guide", "reference"});
  CHECK(ks::truncation_order(ks::agent_role::optimizer).front() == "history");
  CHECK(ks::truncation_order(ks::agent_role::optimizer).back() == "reference");
  CHECK(ks::truncation_order(ks::agent_role::repairer).front() == "failed_repairs");

  const auto task = kernelbench_task();
  const auto cand = kernel_of("  int64_t i = 0;\n  y[i] = x[i];");
  ks::review_result r;
  r.status = ks::review_status::compile_error;
  for (int i = 0; i < 30; ++i)
    r.diagnostics.push_back({2, 3, "error", "identifier \"int64_t\" is undefined " + std::to_string(i)});
  ks::repair_plan d;
  d.diagnosis = "int64_t is undefined under NVRTC";
  d.actions = {"write long long"};
  const auto failed = long_history(10);

  const auto full = ks::repairer_prompt(task, cand, r, d, failed);
  ks::prompt_limits l;
  l.max_prompt_chars = prompt_size(full) - 1500;
  const auto cut = ks::repairer_prompt(task, cand, r, d, failed, l);
  const std::string& u = cut.messages[0].content;
  CHECK_THAT(u, Contains("the last 2 of 10"));
  CHECK_THAT(u, Contains("identifier \"int64_t\" is undefined 19"));  // diagnostics not yet cut
  CHECK_THAT(u, Contains("int64_t is undefined under NVRTC"));

  // The diagnoser's cuts, as the budget shrinks: older events, then the events (the
  // digest stays), then the history, and only then the diagnostics.
  const auto diag_full = ks::diagnoser_prompt(task, cand, r, long_history(30));
  std::vector<std::string> stages;
  for (size_t budget = prompt_size(diag_full); budget > 2000; budget -= 100) {
    l.max_prompt_chars = budget;
    const std::string du = ks::diagnoser_prompt(task, cand, r, long_history(30), l).messages[0].content;
    std::string stage = du.find("the last 24 of 30") != std::string::npos      ? "24"
                        : du.find("the last 8 of 30") != std::string::npos     ? "8"
                        : du.find("the last 3 of 30") != std::string::npos     ? "3"
                        : du.find("30 events, summed up") != std::string::npos ? "digest"
                        : du.find("undefined 19") != std::string::npos         ? "no history"
                                                                               : "5 diagnostics";
    if (stages.empty() || stages.back() != stage) stages.push_back(stage);
  }
  CHECK(stages == std::vector<std::string>{"24", "8", "3", "digest", "no history", "5 diagnostics"});
}
