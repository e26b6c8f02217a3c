// A golden of what the feature extractor says about a fixed corpus, compared value by
// value: every kernel of tests/data/kernels (source alone) and every seed the rules
// coder writes in tests/golden/lower (source alone, and with its plan resolved at the
// task's shapes, as the feature agent extracts it). Refactoring features/ must leave
// every line of tests/golden/features.txt as it is.
//
// What it promises: a change in any feature value or structure class of any of these
// inputs fails with the input, the mode and the features that differ. It needs no
// NVRTC: PTX depends on the CUDA version and would make the golden brittle, and the PTX
// side is pinned by features_test's expectations.
//
// Rewrite the golden only for a change meant to change features (say so in the commit):
//   KS_FEATURES_GOLDEN_REFRESH=1 build/bin/features_golden_test
// A refresh of tests/golden/lower (new seeds) needs one too.

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "features/feature_extractor.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const fs::path source_root = KS_SOURCE_DIR;
const fs::path golden_path = source_root / "tests/golden/features.txt";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& extension, bool recursive) {
  std::vector<fs::path> out;
  auto take = [&](const fs::directory_entry& e) {
    if (e.is_regular_file() && e.path().extension() == extension) out.push_back(e.path());
  };
  if (recursive)
    for (auto& e : fs::recursive_directory_iterator(dir)) take(e);
  else
    for (auto& e : fs::directory_iterator(dir)) take(e);
  std::sort(out.begin(), out.end());
  return out;
}

// "%.17g": doubles survive the text unchanged.
std::string number(double v) {
  std::ostringstream ss;
  ss.precision(17);
  ss << v;
  return ss.str();
}

// One line: input, mode, structure class, then every feature in code_feature_names()
// order ('-' where the extractor leaves it out).
std::string golden_line(const std::string& input, const std::string& mode, const code_features& f) {
  std::ostringstream line;
  line << input << ' ' << mode << ' ' << f.structure_class;
  for (auto& name : code_feature_names()) {
    auto it = f.values.find(name);
    line << ' ' << (it == f.values.end() ? std::string("-") : number(it->second));
  }
  return line.str();
}

std::string header_line() {
  std::string line = "# input mode structure_class";
  for (auto& name : code_feature_names()) line += " " + name;
  return line;
}

// The task a golden seed was lowered from: the folder names it.
std::optional<task_spec> task_of_seed(const fs::path& seed) {
  std::string task = seed.parent_path().filename().string();
  for (const char* dir : {"examples/tasks", "bench/suites/ops", "tests/golden/tasks"}) {
    fs::path p = source_root / dir / (task + ".yaml");
    if (!fs::exists(p)) continue;
    auto t = load_task(p);
    if (t) return std::move(*t);
  }
  return std::nullopt;
}

// Every line of the golden, computed now.
std::vector<std::string> current_lines() {
  std::vector<std::string> lines = {header_line()};
  for (auto& cu : sorted_files(source_root / "tests/data/kernels", ".cu", false)) {
    feature_input in;
    in.source = read_text(cu);
    lines.push_back(golden_line(fs::relative(cu, source_root).string(), "source", extract_features(in)));
  }
  for (auto& cu : sorted_files(source_root / "tests/golden/lower", ".cu", true)) {
    const std::string name = fs::relative(cu, source_root).string();
    feature_input in;
    in.source = read_text(cu);
    lines.push_back(golden_line(name, "source", extract_features(in)));
    // With the plan resolved at the task's default shapes, as the feature agent does.
    std::optional<task_spec> task = task_of_seed(cu);
    INFO(name);
    REQUIRE(task);
    fs::path yaml = fs::path(cu).replace_extension(".yaml");
    auto plan = parse_launch_plan(read_text(yaml), yaml.string());
    REQUIRE(plan.ok());
    auto ctx = make_plan_context(*task, in.source);
    REQUIRE(ctx.ok());
    auto resolved = resolve_plan(plan.value(), ctx.value());
    REQUIRE(resolved.ok());
    in.plan = &plan.value();
    in.resolved = &resolved.value();
    in.dtype = task->inputs.empty() ? "float32" : task->inputs.front().dtype;
    lines.push_back(golden_line(name, "plan", extract_features(in)));
  }
  return lines;
}

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// What differs between a golden line and the line computed now, by feature name.
std::string differences(const std::string& golden, const std::string& now) {
  std::vector<std::string> g = split_words(golden), n = split_words(now);
  std::vector<std::string> names = {"input", "mode", "structure_class"};
  names.insert(names.end(), code_feature_names().begin(), code_feature_names().end());
  std::string out;
  for (size_t i = 0; i < std::max(g.size(), n.size()); ++i) {
    std::string a = i < g.size() ? g[i] : "(none)", b = i < n.size() ? n[i] : "(none)";
    if (a != b) out += "  " + (i < names.size() ? names[i] : "?") + ": golden " + a + ", now " + b + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("features of the corpus and of every lowered seed match the golden", "[features][golden]") {
  std::vector<std::string> now = current_lines();
  const char* refresh = std::getenv("KS_FEATURES_GOLDEN_REFRESH");
  if (refresh && *refresh && std::string(refresh) != "0") {
    std::ofstream out(golden_path, std::ios::binary);
    for (auto& line : now) out << line << "\n";
    WARN("rewrote " << golden_path.string() << " (" << now.size() - 1 << " entries)");
    return;
  }
  std::vector<std::string> golden;
  {
    std::istringstream in(read_text(golden_path));
    for (std::string line; std::getline(in, line);) golden.push_back(line);
  }
  CHECK(golden.size() == now.size());
  for (size_t i = 0; i < std::min(golden.size(), now.size()); ++i) {
    if (golden[i] == now[i]) continue;
    FAIL_CHECK("line " << i + 1 << " differs from tests/golden/features.txt:\n" << differences(golden[i], now[i]));
  }
}
