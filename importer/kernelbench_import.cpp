#include "importer/kernelbench_import.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "base/private_dir.hpp"
#include "task/task_loader.hpp"

namespace ks {

namespace fs = std::filesystem;

namespace {

// A task name from a file stem: the stem itself when it is one ([A-Za-z0-9_.-]+),
// other characters replaced by '_'.
std::string task_name_of(const fs::path& file) {
  std::string s = file.stem().string();
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) c = '_';
  return s.empty() ? "problem" : s;
}

// The last lines of a child's standard error: where a Python traceback says what broke.
std::string tail_lines(const std::string& text, size_t lines) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  size_t pos = t.size();
  for (size_t k = 0; k < lines && pos != std::string::npos && pos > 0; ++k) pos = t.rfind('\n', pos - 1);
  return pos == std::string::npos ? t : t.substr(pos + 1);
}

}  // namespace

result<std::vector<problem_file>> find_problem_files(const std::vector<std::string>& paths) {
  std::vector<problem_file> out;
  for (const auto& given : paths) {
    fs::path p = given;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) {
      out.push_back({p, task_name_of(p), {}});
      continue;
    }
    if (!fs::is_directory(p, ec)) return error{given + ": no such file or directory"};
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_regular_file() && it->path().extension() == ".py" && it->path().filename() != "__init__.py")
        found.push_back(it->path());
    if (ec) return error{given + ": cannot list: " + ec.message()};
    std::sort(found.begin(), found.end());
    // Kept under the directory's own name, and below it as found: DIR/level1/x.py
    // becomes OUT/DIR/level1/x.yaml.
    fs::path base = p.lexically_normal();
    if (base.filename().empty()) base = base.parent_path();
    for (const auto& f : found)
      out.push_back({f, task_name_of(f), base.filename() / f.parent_path().lexically_relative(base)});
  }
  for (auto& f : out) {
    f.subdir = f.subdir.lexically_normal();  // "bad/." is "bad/": drop the separator
    if (!f.subdir.empty() && !f.subdir.has_filename()) f.subdir = f.subdir.parent_path();
    if (f.subdir == ".") f.subdir.clear();
  }
  return out;
}

// What a problem's Python reads besides the system's directories: the interpreter's
// prefixes and its sys.path (site-packages in a virtual environment or a home directory),
// asked once per interpreter. The question runs outside the sandbox: it imports nothing
// of the problem's.
std::vector<fs::path> python_read_paths(const std::string& python) {
  static std::mutex mu;
  static std::map<std::string, std::vector<fs::path>> known;
  std::lock_guard lock(mu);
  if (auto it = known.find(python); it != known.end()) return it->second;
  std::vector<fs::path> out;
  auto dir = private_dir::create("ks-import");
  if (!dir) return out;
  process_limits quick{.cpu_seconds = 60, .memory_mb = 4096, .wall_seconds = 60, .sandbox = unconfined()};
  auto run = run_bounded(shell_quote(python) + " -c " +
                             shell_quote("import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, "
                                         "sys.exec_prefix] + [p for p in sys.path if p]))"),
                         quick, dir->path() / "err");
  try {
    if (run && run->ok())
      for (const auto& p : nlohmann::json::parse(tail_lines(run->out, 1)))
        if (std::error_code ec; fs::exists(p.get<std::string>(), ec)) out.emplace_back(p.get<std::string>());
  } catch (const std::exception&) {
  }
  std::error_code ec;
  if (auto real = fs::canonical(python, ec); !ec) out.push_back(real.parent_path());
  known[python] = out;
  return out;
}

status check_python(const kernelbench_import_options& options) {
  auto dir = private_dir::create("ks-import");
  if (!dir) return error{dir.message()};
  // Imports torch, nothing of a problem's: unconfined.
  process_limits quick{
      .cpu_seconds = 120, .memory_mb = options.limits.memory_mb, .wall_seconds = 120, .sandbox = unconfined()};
  auto run = run_bounded(shell_quote(options.python) + " -c " + shell_quote("import torch; print(torch.__version__)"),
                         quick, dir->path() / "err");
  if (!run || !run->ok())
    return error{"the importer runs problems with " + options.python + " and PyTorch, which did not start (" +
                 (run ? tail_lines(run->err.empty() ? run->limit : run->err, 1) : run.message()) +
                 "); install PyTorch for it (on Debian: apt install python3-torch) or name "
                 "another interpreter with --python"};
  return status::success();
}

import_outcome import_kernelbench_problem(const problem_file& problem, const fs::path& out_dir,
                                          const kernelbench_import_options& options) {
  import_outcome r;
  r.problem = problem;
  auto t0 = std::chrono::steady_clock::now();
  auto finish = [&](std::string why) {
    r.error = problem.path.string() + ": " + why;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  auto dir = private_dir::create("ks-import");
  if (!dir) return finish(dir.message());
  const fs::path script = dir->path() / "kernelbench_problem.py";
  std::ofstream(script, std::ios::binary) << kernelbench_problem_script();
  std::error_code ec;
  const fs::path source = fs::absolute(problem.path, ec);
  const fs::path yaml = dir->path() / (problem.task_name + ".yaml");
  const fs::path module = dir->path() / (problem.task_name + ".pt");
  const std::string label = (problem.subdir / problem.path.filename()).string();
  // The child starts in the private directory, so that a relative write lands there
  // if the guard misses it.
  const fs::path scratch = dir->path() / "tmp";
  fs::create_directory(scratch, ec);
  // The guard lets the child change files under TMPDIR only, and PyTorch 2 makes its
  // cache directories on the first operation it dispatches (recording get_inputs did,
  // on PyTorch 2.11): every cache it keeps goes under TMPDIR too. HOME with them where
  // the sandbox moves it anyway; unconfined, the user's home (and its site packages)
  // stays, and a write there is refused by name.
  std::string env = "TMPDIR=" + shell_quote(scratch.string());
  for (const auto& [name, sub] : {std::pair{"XDG_CACHE_HOME", ".cache"},
                                  {"XDG_CONFIG_HOME", ".config"},
                                  {"TRITON_CACHE_DIR", ".triton"},
                                  {"TORCHINDUCTOR_CACHE_DIR", "inductor"},
                                  {"TORCH_EXTENSIONS_DIR", "torch_extensions"}})
    env += std::string(" ") + name + "=" + shell_quote((scratch / sub).string());
  if (options.limits.sandbox.mode != sandbox_mode::off) env += " HOME=" + shell_quote(scratch.string());
  std::string cmd = "cd " + shell_quote(dir->path().string()) + " && " + env + " PYTHONDONTWRITEBYTECODE=1 exec " +
                    shell_quote(options.python) + " " + shell_quote(script.string()) + " --problem " +
                    shell_quote(source.string()) + " --name " + shell_quote(problem.task_name) + " --label " +
                    shell_quote(label) + " --out-yaml " + shell_quote(yaml.string()) + " --out-module " +
                    shell_quote(module.string()) + " --seed " + std::to_string(options.seed) + " --trace-gib " +
                    std::to_string(options.trace_gib);
  // The problem's Python runs sandboxed (base/sandbox.hpp): it reads its file, the
  // interpreter's, and the system's; it writes only into the private directory.
  process_limits limits = options.limits;
  limits.sandbox.scratch = dir->path();
  limits.sandbox.read.push_back(source);
  for (const fs::path& p : python_read_paths(options.python)) limits.sandbox.read.push_back(p);
  auto run = run_bounded(cmd, limits, dir->path() / "stderr.txt");
  if (!run) return finish(run.message());
  nlohmann::json answer;
  try {
    std::string last = tail_lines(run->out, 1);
    if (!last.empty()) answer = nlohmann::json::parse(last);
  } catch (const std::exception&) {
  }
  if (!run->ok() || !answer.is_object() || answer.contains("error")) {
    if (answer.is_object() && answer.contains("error")) return finish(answer["error"].get<std::string>());
    if (!run->limit.empty()) return finish("stopped: " + run->limit);
    std::string why = tail_lines(run->err, 1);
    return finish("the import failed (exit status " + std::to_string(run->status) + ")" +
                  (why.empty() ? "" : ": " + why));
  }
  // The task must load as written, its module beside it, before it is kept.
  auto task = load_task(yaml);
  if (!task) return finish("the importer wrote a task that does not load: " + task.message());
  const fs::path dest = out_dir / problem.subdir;
  fs::create_directories(dest, ec);
  if (ec) return finish("cannot create " + dest.string() + ": " + ec.message());
  // The module first: a task never names a missing module. Each file is replaced by a
  // rename, never rewritten in place: a run may have the old module mapped
  // (base/shared_bytes.hpp), and a crash leaves the old file or the new one whole.
  for (const auto& f : {module, yaml}) {
    const fs::path to = dest / f.filename();
    const fs::path part = dest / ("." + f.filename().string() + ".part");
    fs::copy_file(f, part, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(part, to, ec);
    if (ec) {
      std::error_code ignored;
      fs::remove(part, ignored);
      return finish("cannot write " + to.string() + ": " + ec.message());
    }
  }
  r.task_path = dest / yaml.filename();
  r.inputs = answer.value("inputs", 0u);
  r.parameters = answer.value("parameters", 0u);
  r.input_program = answer.value("input_program", false);
  if (answer.contains("notes"))
    for (const auto& n : answer["notes"]) r.notes.push_back(n.get<std::string>());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ks
