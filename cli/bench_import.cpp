// `kernelskill bench`, step (a): the KernelBench problem files as tasks, through the
// code of `kernelskill import kernelbench` (import_problems). A record per problem
// (import/LEVEL/NAME.json) is written as soon as its import ends, so an interrupted
// import keeps what it finished; the problem file is copied beside it for the
// measurement, so that the output directory holds everything a later invocation needs.

#include <algorithm>
#include <regex>

#include "cli/bench_steps.hpp"
#include "cli/commands.hpp"
#include "report/run_report.hpp"

namespace ks::cli::bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool is_level(const std::string& s) { return std::regex_match(s, std::regex("level[0-9]+")); }

// The record of an import that finished, when its files are all there (its module
// only where module_needed says so).
bool reuse_record(const layout& l, problem& p, const std::function<bool(const problem&)>& module_needed) {
  const json rec = read_json_file(l.import_records() / p.level / (p.name + ".json"));
  if (!rec.is_object() || rec.value("source", "") != fs::absolute(p.source).lexically_normal().string()) return false;
  if (!fs::exists(p.copy)) return false;
  p.error = rec.value("error", "");
  if (!p.ok()) return true;
  p.task = l.root / rec.value("task", "");  // relative: the directory may move
  fs::path module = p.task;
  module.replace_extension(".pt");
  return rec.value("task", "") != "" && fs::exists(p.task) &&
         (fs::exists(module) || (module_needed && !module_needed(p)));
}

status record(const layout& l, const problem& p) {
  json rec = {{"source", fs::absolute(p.source).lexically_normal().string()},
              {"task", p.task.empty() ? "" : p.task.lexically_relative(l.root).string()},
              {"error", p.error}};
  return write_file_atomically(l.import_records() / p.level / (p.name + ".json"), rec.dump(1) + "\n");
}

// "[3/40]"
std::string count_of(size_t k, size_t n) {
  std::string s = "[";
  s += std::to_string(k);
  s += '/';
  s += std::to_string(n);
  s += ']';
  return s;
}

}  // namespace

std::string level_of(const problem_file& f) {
  for (auto it = f.subdir.end(); it != f.subdir.begin();) {
    --it;
    if (is_level(it->string())) return it->string();
  }
  for (fs::path d = fs::absolute(f.path).parent_path(); !d.empty() && d != d.parent_path(); d = d.parent_path())
    if (is_level(d.filename().string())) return d.filename().string();
  if (!f.subdir.empty()) return f.subdir.filename().string();
  std::string parent = fs::absolute(f.path).parent_path().filename().string();
  return parent.empty() ? "problems" : parent;
}

result<std::vector<problem>> import_step(const layout& l, const std::vector<std::string>& paths,
                                         const kernelbench_import_options& options, unsigned jobs,
                                         const std::function<bool(const problem&)>& module_needed) {
  auto files = find_problem_files(paths);
  if (!files) return error{files.message()};
  if (files->empty()) return error{"no .py files among the paths given"};
  std::vector<problem> problems;
  std::map<std::string, fs::path> by_name;
  for (const auto& f : *files) {
    problem p;
    p.level = level_of(f);
    p.name = f.task_name;
    p.key = p.level + "/" + p.name;
    p.source = f.path;
    p.copy = l.problems() / p.level / (p.name + ".py");
    // The run keeps one trajectory per task name: two files with one name cannot both run.
    if (auto [it, fresh] = by_name.emplace(p.name, f.path); !fresh)
      return error{"two problems would be the task '" + p.name + "': " + it->second.string() + " and " +
                   f.path.string() + " (a run keeps one trajectory per task name; bench one of them)"};
    problems.push_back(std::move(p));
  }
  std::vector<problem_file> todo;
  std::vector<size_t> todo_index;
  for (size_t i = 0; i < problems.size(); ++i) {
    if (reuse_record(l, problems[i], module_needed)) continue;
    problem& p = problems[i];
    p.error.clear();
    p.task.clear();
    std::error_code ec;
    fs::create_directories(p.copy.parent_path(), ec);
    fs::copy_file(p.source, p.copy, fs::copy_options::overwrite_existing, ec);
    if (ec) return error{"cannot copy " + p.source.string() + " to " + p.copy.string() + ": " + ec.message()};
    todo.push_back({p.source, p.name, p.level});
    todo_index.push_back(i);
  }
  const size_t before = problems.size() - todo.size();
  if (todo.empty()) {
    size_t failed = 0;
    for (const auto& p : problems) failed += !p.ok();
    progress("import", "complete: " + std::to_string(problems.size()) + " problems (" +
                           std::to_string(problems.size() - failed) + " imported, " + std::to_string(failed) +
                           " failed) in " + l.tasks().string() + "; skipped");
    return problems;
  }
  if (auto ok = check_python(options); !ok) return error{ok.message()};
  progress("import", std::to_string(todo.size()) + " of " + std::to_string(problems.size()) + " problems to import" +
                         (before ? " (" + std::to_string(before) + " imported before)" : ""));
  size_t finished = 0;
  status write_error;
  import_problems(todo, l.tasks(), options, jobs, [&](size_t k, const import_outcome& o) {
    problem& p = problems[todo_index[k]];
    p.task = o.ok() ? o.task_path : fs::path();
    p.error = o.ok() ? "" : o.error;
    if (auto st = record(l, p); !st && write_error) write_error = st;
    progress("import", count_of(++finished, todo.size()) + " " + describe_import(todo[k], o));
  });
  if (!write_error) return error{write_error.message()};
  size_t failed = 0;
  for (const auto& p : problems) failed += !p.ok();
  progress("import", "done: " + std::to_string(problems.size() - failed) + " of " + std::to_string(problems.size()) +
                         " problems imported" + (failed ? " (the others count as not correct)" : ""));
  return problems;
}

}  // namespace ks::cli::bench
