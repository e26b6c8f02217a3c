// The layers of the source tree (docs/architecture.md): every #include "folder/…"
// points to a folder on the same layer or below, and no two folders include each other,
// directly or through others. A new top-level folder must be placed in the table first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/support/source_shape.hpp"

namespace fs = std::filesystem;

namespace {

// Lower numbers are lower layers. Keep in step with docs/architecture.md.
const std::map<std::string, int>& layer_table() {
  static const std::map<std::string, int> layers = {
      {"base", 0},   {"model", 1},    {"protocol", 2}, {"config", 3}, {"task", 3},  {"plan", 3},  {"store", 4},
      {"policy", 4}, {"features", 5}, {"gpu", 5},      {"fleet", 5},  {"coder", 5}, {"llm", 5},   {"report", 5},
      {"export", 5}, {"importer", 5}, {"actors", 6},   {"daemon", 7}, {"cli", 7},   {"bench", 8}, {"tests", 8},
  };
  return layers;
}

// The sub-folders of coder/rules (coder/rules/plan/lowering_context.hpp's map): the
// plan at the bottom (stages, shapes, the op table and the expressions planning
// writes), the graph rewrites and the text helpers on it, the templates on top.
// Checked as the top-level folders are, on includes of "coder/rules/<sub>/...".
const char* const kRulesDir = "coder/rules";
const std::map<std::string, int>& rules_layer_table() {
  static const std::map<std::string, int> layers = {
      {"plan", 0}, {"passes", 1}, {"text", 1}, {"cuda", 1}, {"templates", 2},
  };
  return layers;
}

// Folders that hold no C++ (or none that is built as a library).
const std::set<std::string> not_code = {"build", "cmake", "docs", "examples", "scripts", "skills"};

struct include_edge {
  std::string file;  // relative to the source root
  int line = 0;
  std::string target;  // the included path
};

// folder → folder it includes → the includes that make that edge.
using include_graph = std::map<std::string, std::map<std::string, std::vector<include_edge>>>;

bool is_source(const fs::path& p) {
  auto e = p.extension().string();
  return e == ".cpp" || e == ".hpp" || e == ".h" || e == ".cu" || e == ".cuh";
}

// The include graph between the folders right below `root` / `dir` ("": the source
// root's top-level folders; "coder/rules": its sub-folders), from includes of
// "dir/<folder>/...". `layers` names the placed folders.
include_graph read_includes(const fs::path& root, std::vector<std::string>& unplaced, const std::string& dir = "",
                            const std::map<std::string, int>& layers = layer_table()) {
  include_graph g;
  const std::regex include_re("^\\s*#\\s*include\\s*\"" + (dir.empty() ? std::string() : dir + "/") +
                              "([A-Za-z0-9_]+)/[^\"]+\"");
  const fs::path base = dir.empty() ? root : root / dir;
  if (!fs::is_directory(base)) return g;
  for (const auto& top : fs::directory_iterator(base)) {
    if (!top.is_directory()) continue;
    std::string folder = top.path().filename().string();
    if (folder.empty() || folder[0] == '.' || not_code.count(folder) || folder.rfind("build", 0) == 0) {
      continue;
    }
    bool has_source = false;
    for (const auto& e : fs::recursive_directory_iterator(top.path())) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      has_source = true;
      std::ifstream in(e.path());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        std::smatch m;
        if (!std::regex_search(line, m, include_re)) continue;
        std::string target_folder = m[1].str();
        if (target_folder == folder) continue;
        if (!fs::is_directory(base / target_folder)) continue;  // <caf/…> style paths
        std::string rel = fs::relative(e.path(), root).string();
        auto first = line.find('"');
        auto last = line.rfind('"');
        g[folder][target_folder].push_back({rel, n, line.substr(first + 1, last - first - 1)});
      }
    }
    if (has_source && !layers.count(folder)) unplaced.push_back(folder);
  }
  return g;
}

std::string describe(const std::vector<include_edge>& edges) {
  std::string s;
  for (size_t i = 0; i < edges.size() && i < 3; ++i) {
    s += "\n    " + edges[i].file + ":" + std::to_string(edges[i].line) + " includes " + edges[i].target;
  }
  if (edges.size() > 3) s += "\n    … and " + std::to_string(edges.size() - 3) + " more";
  return s;
}

// A cycle through `start`, as a list of folders, or empty.
std::vector<std::string> cycle_from(const include_graph& g, const std::string& start) {
  std::vector<std::string> path{start};
  std::set<std::string> seen;
  std::function<bool(const std::string&)> walk = [&](const std::string& at) -> bool {
    auto it = g.find(at);
    if (it == g.end()) return false;
    for (const auto& [next, _] : it->second) {
      if (next == start) {
        path.push_back(next);
        return true;
      }
      if (!seen.insert(next).second) continue;
      path.push_back(next);
      if (walk(next)) return true;
      path.pop_back();
    }
    return false;
  };
  return walk(start) ? path : std::vector<std::string>{};
}

// Each include edge of `g` from a folder to one on a higher layer of `layers`.
std::vector<std::string> upward_includes(const include_graph& g, const std::map<std::string, int>& layers) {
  std::vector<std::string> upward;
  for (const auto& [from, targets] : g) {
    auto lf = layers.find(from);
    if (lf == layers.end()) continue;
    for (const auto& [to, edges] : targets) {
      auto lt = layers.find(to);
      if (lt == layers.end()) continue;
      if (lt->second > lf->second) {
        upward.push_back(from + " (layer " + std::to_string(lf->second) + ") includes " + to + " (layer " +
                         std::to_string(lt->second) + "):" + describe(edges));
      }
    }
  }
  return upward;
}

// Each cycle of folders in `g` (but through `skip`), once.
std::vector<std::string> include_cycles(include_graph& g, const std::set<std::string>& skip = {}) {
  std::set<std::string> reported;
  std::vector<std::string> cycles;
  for (const auto& [folder, _] : g) {
    if (skip.count(folder)) continue;
    auto c = cycle_from(g, folder);
    if (c.empty()) continue;
    std::set<std::string> members(c.begin(), c.end());
    std::string key;
    for (const auto& m : members) key += m + " ";
    if (!reported.insert(key).second) continue;
    std::string text;
    for (size_t i = 0; i < c.size(); ++i) text += (i ? " -> " : "") + c[i];
    for (size_t i = 0; i + 1 < c.size(); ++i) text += describe(g[c[i]][c[i + 1]]);
    cycles.push_back(text);
  }
  return cycles;
}

}  // namespace

TEST_CASE("every folder with C++ sources has a layer") {
  std::vector<std::string> unplaced;
  read_includes(KS_SOURCE_DIR, unplaced);
  INFO("place these folders in tests/layering_test.cpp and docs/architecture.md");
  for (const auto& f : unplaced) INFO(f);
  CHECK(unplaced.empty());
}

TEST_CASE("includes point to the same layer or below") {
  std::vector<std::string> unplaced;
  auto g = read_includes(KS_SOURCE_DIR, unplaced);
  const auto upward = upward_includes(g, layer_table());
  for (const auto& u : upward) UNSCOPED_INFO(u);
  CHECK(upward.empty());
}

TEST_CASE("no two folders include each other") {
  std::vector<std::string> unplaced;
  auto g = read_includes(KS_SOURCE_DIR, unplaced);
  const auto cycles = include_cycles(g, {"tests", "bench"});
  for (const auto& c : cycles) UNSCOPED_INFO(c);
  CHECK(cycles.empty());
}

TEST_CASE("the layering check finds an upward include and a cycle") {
  // A tree of its own, so that the check itself is shown to fail where it should.
  fs::path root = fs::temp_directory_path() / ("ks-layering-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "model");
  fs::create_directories(root / "base");
  std::ofstream(root / "model" / "a.hpp") << "#include \"base/b.hpp\"\n";
  std::ofstream(root / "base" / "b.hpp") << "#include \"model/a.hpp\"\n";
  std::vector<std::string> unplaced;
  auto g = read_includes(root, unplaced);
  CHECK(unplaced.empty());
  REQUIRE(g["base"].count("model") == 1);
  CHECK(g["base"]["model"].front().file == "base/b.hpp");
  CHECK(g["base"]["model"].front().line == 1);
  CHECK(layer_table().at("model") > layer_table().at("base"));  // so base → model is upward
  CHECK(upward_includes(g, layer_table()).size() == 1);
  CHECK(cycle_from(g, "base") == std::vector<std::string>{"base", "model", "base"});
  fs::create_directories(root / "newfolder");
  std::ofstream(root / "newfolder" / "c.cpp") << "int c;\n";
  unplaced.clear();
  read_includes(root, unplaced);
  CHECK(unplaced == std::vector<std::string>{"newfolder"});
  fs::remove_all(root);
}

TEST_CASE("layering of coder/rules: sub-folders include the same layer or below, and no two each other") {
  std::vector<std::string> unplaced;
  auto g = read_includes(KS_SOURCE_DIR, unplaced, kRulesDir, rules_layer_table());
  INFO("place new coder/rules sub-folders in rules_layer_table and lowering_context.hpp's map");
  for (const auto& f : unplaced) INFO(f);
  CHECK(unplaced.empty());
  // The graph is read at all: the templates include the plan and the text helpers.
  CHECK(g["templates"].count("plan") == 1);
  CHECK(g["templates"].count("text") == 1);
  const auto upward = upward_includes(g, rules_layer_table());
  for (const auto& u : upward) UNSCOPED_INFO(u);
  CHECK(upward.empty());
  const auto cycles = include_cycles(g);
  for (const auto& c : cycles) UNSCOPED_INFO(c);
  CHECK(cycles.empty());
}

TEST_CASE("the layering check of coder/rules finds a backward include and a cycle") {
  // plan/ including templates/ (what stages.cpp did for twin_rows.hpp) is upward;
  // text/ and passes/ including each other is a cycle on one layer.
  fs::path root = fs::temp_directory_path() / ("ks-rules-layering-" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (const char* sub : {"plan", "templates", "text", "passes"}) fs::create_directories(root / kRulesDir / sub);
  std::ofstream(root / kRulesDir / "plan" / "stages.cpp") << "#include \"coder/rules/templates/twin_rows.hpp\"\n";
  std::ofstream(root / kRulesDir / "templates" / "twin_rows.hpp") << "#include \"coder/rules/plan/stages.hpp\"\n";
  std::ofstream(root / kRulesDir / "text" / "chain.hpp") << "#include \"coder/rules/passes/a.hpp\"\n";
  std::ofstream(root / kRulesDir / "passes" / "a.hpp") << "#include \"coder/rules/text/chain.hpp\"\n";
  std::vector<std::string> unplaced;
  auto g = read_includes(root, unplaced, kRulesDir, rules_layer_table());
  CHECK(unplaced.empty());
  REQUIRE(g["plan"].count("templates") == 1);
  CHECK(g["plan"]["templates"].front().file == "coder/rules/plan/stages.cpp");
  const auto upward = upward_includes(g, rules_layer_table());
  REQUIRE(upward.size() == 1);
  CHECK(upward[0].rfind("plan (layer 0) includes templates (layer 2)", 0) == 0);
  CHECK(include_cycles(g).size() == 2);  // plan <-> templates, text <-> passes
  fs::remove(root / kRulesDir / "plan" / "stages.cpp");
  g = read_includes(root, unplaced, kRulesDir, rules_layer_table());
  CHECK(upward_includes(g, rules_layer_table()).empty());
  CHECK(include_cycles(g).size() == 1);
  fs::remove_all(root);
}

// Big files and long functions hide what code does. Every folder of the product (not
// tests/, whose cases read best whole) is held to a size; what was over it when the
// rule came is listed in tests/size_allowlist.txt with its size then, and the list
// can only shrink: a listed file or function may not grow, and an entry that is no
// longer over the limit must be removed. A file over the limit is split by concern, a
// function by step.
namespace {

constexpr int kMaxFileLines = 1000;
constexpr int kMaxFunctionLines = 150;

struct oversize {
  std::string key;  // "file\tPATH" or "function\tPATH\tHEAD"
  int lines = 0;
};

std::vector<oversize> oversized(const fs::path& root) {
  std::vector<oversize> out;
  for (const auto& top : fs::directory_iterator(root)) {
    const std::string folder = top.path().filename().string();
    if (!top.is_directory() || folder.empty() || folder[0] == '.' || not_code.count(folder) ||
        folder.rfind("build", 0) == 0 || folder == "tests")
      continue;
    for (const auto& e : fs::recursive_directory_iterator(top.path())) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      std::ifstream in(e.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const std::string rel = fs::relative(e.path(), root).string();
      if (int lines = ks::test::line_count(text); lines > kMaxFileLines) out.push_back({"file\t" + rel, lines});
      for (const auto& f : ks::test::function_spans(text))
        if (f.lines() > kMaxFunctionLines) out.push_back({"function\t" + rel + "\t" + f.head, f.lines()});
    }
  }
  std::sort(out.begin(), out.end(), [](const oversize& a, const oversize& b) { return a.key < b.key; });
  return out;
}

// KIND<TAB>PATH[<TAB>HEAD]<TAB>LINES per line; '#' starts a comment.
std::map<std::string, int> read_allowlist(const fs::path& file) {
  std::map<std::string, int> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.rfind('\t');
    out[line.substr(0, tab)] = std::stoi(line.substr(tab + 1));
  }
  return out;
}

}  // namespace

TEST_CASE("no file over 1000 lines and no function over 150 but those listed, which only shrink", "[size]") {
  const fs::path root = KS_SOURCE_DIR;
  // The list may be empty (nothing over the limits), but not missing.
  REQUIRE(fs::is_regular_file(root / "tests" / "size_allowlist.txt"));
  const auto allowed = read_allowlist(root / "tests" / "size_allowlist.txt");
  std::vector<std::string> wrong;
  std::set<std::string> seen;
  for (const auto& o : oversized(root)) {
    seen.insert(o.key);
    auto it = allowed.find(o.key);
    if (it == allowed.end())
      wrong.push_back("over the limit and not listed (split it): " + o.key + "\t" + std::to_string(o.lines));
    else if (o.lines > it->second)
      wrong.push_back("grew from " + std::to_string(it->second) + " lines (listed ones may only shrink): " + o.key +
                      "\t" + std::to_string(o.lines));
  }
  for (const auto& [key, lines] : allowed)
    if (!seen.count(key))
      wrong.push_back("listed but no longer over the limit (remove the line): " + key + "\t" + std::to_string(lines));
  for (const auto& w : wrong) UNSCOPED_INFO(w);
  if (!wrong.empty()) {  // unwrapped, to compare with the list
    std::cout << "what is over the limit now:\n";
    for (const auto& o : oversized(root)) std::cout << o.key << "\t" << o.lines << "\n";
  }
  CHECK(wrong.empty());
}

TEST_CASE("the source shape reader counts functions, not scopes, literals or comments") {
  std::string src =
      "namespace ks {\n"                         // 1
      "struct s {\n"                             // 2
      "  int f() const {\n"                      // 3
      "    auto g = [](int x) { return x; };\n"  // 4
      "    const char* t = \"}{\"; // }\n"       // 5
      "    return 1;\n"                          // 6
      "  }\n"                                    // 7
      "};\n"                                     // 8
      "/* int h() { */\n"                        // 9
      "auto r = R\"x(})x\";\n"                   // 10
      "int h(int a) noexcept -> int {\n"         // 11
      "  return a;\n"                            // 12
      "}\n"                                      // 13
      "}  // namespace ks\n";                    // 14
  auto spans = ks::test::function_spans(src);
  REQUIRE(spans.size() == 2);
  CHECK(spans[0].first_line == 3);
  CHECK(spans[0].last_line == 7);
  CHECK(spans[0].head == "int f() const");
  CHECK(spans[1].first_line == 11);
  CHECK(spans[1].lines() == 3);
  CHECK(ks::test::line_count(src) == 14);
}

// ctest registers a Catch2 case by its name and silently runs nothing for a name with
// a ';' in it (the list separator): such a case would pass without running.
TEST_CASE("no test case name holds a semicolon") {
  const std::regex test_case(R"re(TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+))re");
  size_t names = 0;
  for (const auto& e : fs::directory_iterator(fs::path(KS_SOURCE_DIR) / "tests")) {
    if (e.path().extension() != ".cpp") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::sregex_iterator it(text.begin(), text.end(), test_case), end; it != end; ++it) {
      ++names;
      INFO(e.path().filename().string() << ": " << (*it)[1].str());
      CHECK((*it)[1].str().find(';') == std::string::npos);
    }
  }
  CHECK(names > 300);
}
