// `kernelskill bench`, step (d): eager, torch.compile and ours side by side, by
// cli/side_by_side.py (embedded; written to measure/side_by_side.py and run with the
// user's Python): the exported models built in parallel processes, torch.compile warmed
// in parallel processes, then one measuring process per GPU with the problems dealt
// round-robin. Each measured problem is one JSON line in measure/results-GPU.jsonl, so
// an interrupted measurement keeps what it finished; a problem counts as measured when
// its line names the SHA-256 of every model exported for it now.
//
// Nothing here waits without a bound (issue 46: a bench once waited more than 26
// minutes for one model's build): every Python child runs through run_bounded, each
// model's build is bounded by --build-timeout inside the script (its process group
// killed, the failure recorded in its build directory), each warm-up and each measured
// problem by --problem-timeout (the measuring process says which problem it is in; a
// watchdog here ends it and writes the problem's row, failed, with the phase as the
// reason), and the rest goes on in a fresh process.
//
// Without a GPU (PyTorch sees none) nothing is measured and the step says so: no CPU
// time is ever reported as a GPU result.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "base/bounded_child.hpp"
#include "base/content_hash.hpp"
#include "base/number_format.hpp"
#include "cli/bench_steps.hpp"
#include "plan/dtypes.hpp"
#include "report/run_report.hpp"
#include "task/task_loader.hpp"

namespace ks::cli::bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A Python child of the measurement (a build pass, the warm-ups, a measuring process),
// run through run_bounded: its own process group, killed after `wall_seconds` (the
// child's own per-model and per-problem bounds come first; this one is the net under
// them) or by cancel_children(owner). Its stderr goes to `log` and, line by line as it
// grows, to ours. `tick`, when given, is called about twice a second while it runs (the
// measuring processes' per-problem watchdog). Returns why it failed, in words; empty
// when it exited with status 0.
std::string run_python(const std::vector<std::string>& args, int wall_seconds, const fs::path& log,
                       const std::string& owner, const std::function<void()>& tick = {}) {
  std::string command = "exec";
  for (const auto& a : args) command += " " + shell_quote(a);
  // Per process, and a measuring process's PyTorch uses every core: CPU time is not what
  // bounds these (the wall clock is), nor is memory (a level-1 input is 7.5 GB).
  process_limits limits;
  limits.wall_seconds = wall_seconds;
  limits.cpu_seconds = wall_seconds * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) + 60;
  limits.memory_mb = 1 << 30;
  // The user's own problems and this bench's exports, measured with the user's Python
  // (nvcc builds, torch.compile's caches, the whole output directory): unconfined, as
  // `kernelskill bench` is the CLI's own (the daemon takes no KernelBench source).
  limits.sandbox = unconfined();
  std::error_code ec;
  fs::remove(log, ec);
  std::optional<result<bounded_run>> ran;
  std::mutex m;
  std::thread child([&] {
    auto r = run_bounded(command, limits, log, owner);
    std::lock_guard lock(m);
    ran.emplace(std::move(r));
  });
  std::ifstream follow;
  std::string partial;
  auto copy_new_lines = [&] {
    if (!follow.is_open()) follow.open(log, std::ios::binary);
    if (!follow.is_open()) return;
    follow.clear();
    char buf[4096];
    while (follow.read(buf, sizeof buf) || follow.gcount() > 0)
      partial.append(buf, static_cast<size_t>(follow.gcount()));
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1))
      std::cerr << partial.substr(0, nl) << "\n";
  };
  for (;;) {
    {
      std::lock_guard lock(m);
      if (ran) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    copy_new_lines();
    if (tick) tick();
  }
  child.join();
  copy_new_lines();
  if (!partial.empty()) std::cerr << partial << "\n";
  if (!*ran) return ran->message();
  const bounded_run& r = **ran;
  if (r.ok()) return "";
  if (r.cancelled) return "stopped";
  if (!r.limit.empty()) return r.limit;
  return WIFEXITED(r.status) ? "exit status " + std::to_string(WEXITSTATUS(r.status))
                             : "ended by signal " + std::to_string(WTERMSIG(r.status));
}

// A name for cancel_children no other process or pass shares.
std::string owner_name(const std::string& what) {
  static std::atomic<int> next{0};
  return "kernelskill-bench-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
}

// The net under a pass of `items` children, `jobs` at once, each bounded by `each`
// seconds inside the script: every wave's bound, and five minutes for Python itself.
int pass_bound(size_t items, unsigned jobs, int each) {
  const size_t waves = (items + std::max(1u, jobs) - 1) / std::max(1u, jobs);
  return static_cast<int>(std::min<size_t>(waves * static_cast<size_t>(each + 30) + 300, 7 * 24 * 3600));
}

// Problems whose inputs and parameters take more than this are not warmed beside the
// run's reviews on a GPU of `gpu_bytes` (1/32 of it: 2.5 GB on an 80 GB H100, so three
// warm-ups with their outputs and torch.compile's workspace stay within a few tenths of
// the memory the reviewer leaves outside its trial cache).
// A GPU of unknown size (0) sets no limit.
uint64_t during_run_warm_limit(uint64_t gpu_bytes) {
  return gpu_bytes ? gpu_bytes / 32 : std::numeric_limits<uint64_t>::max();
}

struct torch_probe {
  std::string version;
  int gpus = 0;
  uint64_t smallest_gpu_bytes = 0;  // the smallest GPU's memory (0: no GPU)
};

result<torch_probe> probe_torch(const std::string& python, const fs::path& dir) {
  auto run = run_bounded(
      shell_quote(python) + " -c " +
          shell_quote("import torch; print(torch.__version__); "
                      "n = torch.cuda.device_count() if torch.cuda.is_available() else 0; print(n); "
                      "print(min([torch.cuda.get_device_properties(i).total_memory for i in range(n)] or [0]))"),
      {.cpu_seconds = 120, .memory_mb = 16384, .wall_seconds = 180, .sandbox = unconfined()}, dir / "probe.err");
  if (!run || !run->ok())
    return error{"the measurement runs with " + python + " and PyTorch, which did not start (" +
                 (run ? (run->limit.empty() ? "exit status " + std::to_string(WEXITSTATUS(run->status)) : run->limit)
                      : run.message()) +
                 "); give --python a Python with torch"};
  std::istringstream out(run->out);
  torch_probe p;
  std::string gpus, memory;
  std::getline(out, p.version);
  std::getline(out, gpus);
  std::getline(out, memory);
  try {
    p.gpus = std::stoi(gpus);
  } catch (...) {
    return error{python + " printed no GPU count: " + run->out};
  }
  try {
    p.smallest_gpu_bytes = std::stoull(memory);
  } catch (...) {
    p.smallest_gpu_bytes = 0;  // unknown: warm-ups during the run are not limited by size
  }
  return p;
}

json manifest_base(const layout& l, const measure_settings& s) {
  return {{"schema", "ks.bench_measure/1"},
          {"seed", s.seed},
          {"trials", s.trials},
          {"reps", s.reps},
          {"warmup", 3},
          {"compile_timeout", s.compile_timeout},
          {"build_timeout", s.build_timeout},
          {"problem_timeout", s.problem_timeout},
          {"tolerances", {1e-4, 1e-2}},
          {"builds", (l.measure() / "build").string()},
          // inductor's cache (unless the user's TORCHINDUCTOR_CACHE_DIR names one): the
          // warm-ups fill it, the measuring processes read it
          {"inductor", (l.measure() / "inductor").string()}};
}

// The problems with a model of ours to measure, as manifest entries; `todo` gets those
// not measured yet (or measured with other models, or whose measurement failed before
// ours could be checked).
json entries(const layout& l, const std::vector<variant>& variants, const std::vector<problem>& problems,
             const std::map<std::string, json>& rows, json& todo) {
  std::vector<json> records;
  for (const auto& v : variants) records.push_back(read_export_record(l, v));
  json all = json::array();
  todo = json::array();
  for (const auto& p : problems) {
    if (!p.ok()) continue;
    json models = json::array();
    for (size_t k = 0; k < variants.size(); ++k) {
      const json& e = records[k].contains(p.name) ? records[k][p.name] : json();
      if (!e.is_object() || e.value("file", "").empty()) continue;
      const fs::path file = l.models_dir(variants[k].name) / e.value("file", "");
      models.push_back({{"variant", variants[k].name}, {"path", file.string()}, {"sha256", file_sha256(file)}});
    }
    if (models.empty()) continue;
    json entry = {
        {"key", p.key}, {"name", p.name}, {"level", p.level}, {"problem", p.copy.string()}, {"models", models}};
    // A failed row is measured again, in a fresh process.
    bool measured = rows.count(p.key) > 0 && !measurement_failed(rows.at(p.key));
    for (const auto& m : models) {
      if (!measured) break;
      const json& row = rows.at(p.key);
      measured = row.contains("variants") && row["variants"].contains(m["variant"].get<std::string>()) &&
                 row["variants"][m["variant"].get<std::string>()].value("sha256", "") == m["sha256"].get<std::string>();
    }
    if (!measured) todo.push_back(entry);
    all.push_back(std::move(entry));
  }
  return all;
}

status write_manifest(const fs::path& path, json base, json problems) {
  base["problems"] = std::move(problems);
  return write_file_atomically(path, base.dump(1) + "\n");
}

status write_script(const layout& l) {
  const fs::path path = l.measure() / "side_by_side.py";
  if (read_text_file(path) == side_by_side_script()) return {};
  return write_file_atomically(path, std::string(side_by_side_script()));
}

// One measuring process on GPU `d` over `mine` (manifest `m`), with a watchdog: the
// process keeps the problem and phase it is in in measure/current-D.json; a problem that
// runs past problem_timeout ends the process (its whole group), and its row is written
// here, failed, with the phase as the reason. Returns whether the process exited well.
bool measure_on(const layout& l, const measure_settings& s, const fs::path& script, const fs::path& m, const json& mine,
                const std::string& d, const fs::path& logs) {
  const fs::path current = l.measure() / ("current-" + d + ".json"),
                 results = l.measure() / ("results-" + d + ".jsonl");
  std::error_code ec;
  fs::remove(current, ec);
  const std::string owner = owner_name("measure-" + d);
  json killed;  // the problem the watchdog ended, as current-D.json said
  auto watchdog = [&] {
    if (!killed.is_null()) return;
    const json now = read_json_file(current);
    if (!now.is_object() || !now.contains("started") || !now["started"].is_number()) return;
    if (static_cast<double>(std::time(nullptr)) - now["started"].get<double>() <= s.problem_timeout) return;
    killed = now;
    cancel_children(owner);
  };
  const std::string why =
      run_python({s.python, script.string(), "--kb-manifest", m.string(), "--kb-measure", "--device", d, "--kb-out",
                  results.string(), "--kb-current", current.string()},
                 pass_bound(mine.size(), 1, s.problem_timeout), logs / ("measure-" + d + ".log"), owner, watchdog);
  release_owner(owner);
  if (killed.is_null()) return why.empty();
  const std::string key = killed.value("key", "");
  const std::string reason = "the measurement did not finish within " + std::to_string(s.problem_timeout) +
                             " s (--problem-timeout; ended in its phase '" + killed.value("phase", "?") + "')";
  progress("measure", key + ": " + reason);
  for (const auto& e : mine) {
    if (e.value("key", "") != key) continue;
    // A failed row for each of its models: measured (not tried again at this commit
    // unless its model changes), incorrect, with the reason.
    json row = {{"key", key},    {"name", e["name"]}, {"level", e["level"]},
                {"timed", true}, {"timeout", reason}, {"variants", json::object()}};
    for (const auto& mm : e["models"])
      row["variants"][mm["variant"].get<std::string>()] = {
          {"sha256", mm["sha256"]}, {"error", reason}, {"correct", {{"0.0001", false}, {"0.01", false}}}};
    // After a line the killed process may have left cut short (it is not read).
    const std::string had = read_text_file(results);
    std::ofstream(results, std::ios::app) << (had.empty() || had.back() == '\n' ? "" : "\n") << row.dump() << "\n";
  }
  return false;
}

// The passes of model builds during the run, side by side: each look's new models go
// to a pass of their own beside the passes still building, up to `cap` builds in all.
// A pass the looks waited for held every later model back for as long as its slowest
// build took (level 3's 12_VGG19: 555 s, in which 40 networks finished and none was
// built). The passes share one owner for cancel_children.
class build_passes {
 public:
  build_passes(unsigned cap, std::string owner) : cap_(cap), owner_(std::move(owner)) {}
  ~build_passes() { join(); }
  build_passes(const build_passes&) = delete;
  build_passes& operator=(const build_passes&) = delete;

  // How many more builds may start now (the finished passes joined first).
  unsigned room() {
    unsigned busy = 0;
    for (auto it = passes_.begin(); it != passes_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = passes_.erase(it);
        continue;
      }
      busy += it->jobs;
      ++it;
    }
    return busy >= cap_ ? 0 : cap_ - busy;
  }

  // A pass of `jobs` builds: the Python child `args`, bounded by `bound` seconds.
  void start(std::vector<std::string> args, int bound, fs::path log, unsigned jobs) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    passes_.push_back({std::thread([args = std::move(args), bound, log = std::move(log), done, owner = owner_] {
                         if (auto why = run_python(args, bound, log, owner); !why.empty())
                           progress("prepare", "a pass of builds ended: " + why);
                         done->store(true);
                       }),
                       done, jobs});
  }

  void join() {
    for (auto& p : passes_)
      if (p.thread.joinable()) p.thread.join();
    passes_.clear();
  }

 private:
  struct pass {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    unsigned jobs;
  };
  unsigned cap_;
  std::string owner_;
  std::vector<pass> passes_;
};

// Of `all` (the measurement's entries: a problem and its models), the models not in
// `tried` yet, as many whole problems as `room` builds take (the first always):
// marked tried, counted into `models`; `left_over` when some did not fit.
json pick_models(json all, unsigned room, std::set<std::string>& tried, size_t& models, bool& left_over) {
  json fresh = json::array();
  for (auto& e : all) {
    json pick = json::array();
    for (const auto& m : e["models"])
      if (!tried.count(m["sha256"].get<std::string>())) pick.push_back(m);
    if (pick.empty()) continue;
    if (models > 0 && models + pick.size() > room) {
      left_over = true;
      continue;
    }
    for (const auto& m : pick) tried.insert(m["sha256"].get<std::string>());
    models += pick.size();
    e["models"] = pick;
    fresh.push_back(e);
  }
  return fresh;
}

}  // namespace

bool measurement_failed(const json& row) {
  return row.is_object() && row.contains("error") && row["error"].is_string() &&
         !row["error"].get<std::string>().empty();
}

std::string file_sha256(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "";
  return sha256_hex(read_text_file(path));
}

std::map<std::string, json> read_measurements(const layout& l) {
  std::map<std::string, json> rows;
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::directory_iterator(l.measure(), ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("results-", 0) == 0 && it->path().extension() == ".jsonl") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    std::ifstream f(p);
    for (std::string line; std::getline(f, line);) {
      // A line cut short by a crash does not parse, and its problem is measured again.
      // Rows of the script's CPU check (timed false) are never taken for a measurement.
      json row = json::parse(line, nullptr, false);
      if (row.is_object() && row.contains("key") && row["key"].is_string() && row.value("timed", false))
        rows[row["key"].get<std::string>()] = row;
    }
  }
  return rows;
}

measure_outcome measure_step(const layout& l, const std::vector<variant>& variants,
                             const std::vector<problem>& problems, const measure_settings& s) {
  json todo;
  const json all = entries(l, variants, problems, read_measurements(l), todo);
  if (all.empty()) {
    progress("measure", "nothing to measure: no kernel was exported");
    return {0, false, "nothing to measure (no kernel was exported)"};
  }
  if (todo.empty()) {
    progress("measure",
             "complete: " + std::to_string(all.size()) + " problems measured in " + l.measure().string() + "; skipped");
    return {0, true, "measured"};
  }
  // The script is written first: it is in the directory for a person to read, or to run
  // by hand, even where there is no GPU to run it on.
  if (auto st = write_script(l); !st) {
    std::cerr << "kernelskill bench: " << st.message() << "\n";
    return {1, false, "not measured: " + st.message()};
  }
  auto torch = probe_torch(s.python, l.measure());
  if (!torch) {
    std::cerr << "kernelskill bench: " << torch.message() << "\n";
    return {1, all.size() > todo.size(), "not measured: " + torch.message()};
  }
  if (torch->gpus == 0) {
    const std::string why = s.python + " (PyTorch " + torch->version +
                            ") sees no CUDA GPU (torch.cuda.is_available() is False), and the side-by-side timing "
                            "needs one; run kernelskill bench again with the same --out on a GPU machine (the finished "
                            "steps are kept)";
    progress("measure", "skipped: " + why);
    return {3, all.size() > todo.size(), "not measured: " + why};
  }
  std::vector<int> devices = s.devices;
  if (devices.empty())
    for (int d = 0; d < torch->gpus; ++d) devices.push_back(d);
  for (int d : devices)
    if (d < 0 || d >= torch->gpus) {
      std::cerr << "kernelskill bench: --device " << d << ": PyTorch sees " << torch->gpus << " GPU(s)\n";
      return {1, all.size() > todo.size(), "not measured: no GPU " + std::to_string(d)};
    }
  const json base = manifest_base(l, s);
  const fs::path script = l.measure() / "side_by_side.py", manifest = l.measure() / "todo.json";
  if (auto st = write_manifest(manifest, base, todo); !st) {
    std::cerr << "kernelskill bench: " << st.message() << "\n";
    return {1, false, "not measured: " + st.message()};
  }
  const std::string jobs = std::to_string(std::max(1u, s.jobs));
  std::string device_list;
  for (int d : devices) device_list += (device_list.empty() ? "" : ",") + std::to_string(d);
  progress("measure", std::to_string(todo.size()) + " of " + std::to_string(all.size()) +
                          " problems to measure on GPU " + device_list + " (PyTorch " + torch->version +
                          "); building the models (" + jobs + " at once)");
  size_t models = 0;
  for (const auto& e : todo) models += e["models"].size();
  const fs::path logs = l.measure() / "logs";
  std::error_code ec;
  fs::create_directories(logs, ec);
  if (auto why =
          run_python({s.python, script.string(), "--kb-manifest", manifest.string(), "--kb-prebuild", "--jobs", jobs},
                     pass_bound(models, s.jobs, s.build_timeout), logs / "build.log", owner_name("build"));
      !why.empty())
    progress("measure", "the builds ended: " + why + " (a model not built is a failed row with the reason)");
  // Each warm-up holds a problem's model and inputs on a GPU: at most 4 per GPU at once.
  const unsigned warm_n = static_cast<unsigned>(std::min<size_t>(std::max(1u, s.jobs), 4 * devices.size()));
  const std::string warm_jobs = std::to_string(warm_n);
  progress("measure", "warming torch.compile's caches (" + warm_jobs + " at once)");
  if (auto why = run_python({s.python, script.string(), "--kb-manifest", manifest.string(), "--kb-warm", "--jobs",
                             warm_jobs, "--devices", device_list},
                            pass_bound(todo.size(), warm_n, s.problem_timeout), logs / "warm.log", owner_name("warm"));
      !why.empty())
    progress("measure", "the warm-ups ended: " + why + " (the measurement compiles what is not warm)");
  progress("measure", "measuring: one process per GPU, eager, torch.compile and ours alternated, medians of " +
                          std::to_string(s.reps) + "; at most " + std::to_string(s.problem_timeout) + " s a problem");
  // A process stops when a kernel has broken its CUDA context (its problem is recorded),
  // or is ended when a problem runs past problem_timeout (the problem is recorded as a
  // failed row with the phase it was in); the problems left go to fresh processes, as
  // long as each pass measures something.
  int failed = 0;
  json left = todo;
  for (size_t before = left.size() + 1; !left.empty() && left.size() < before;) {
    before = left.size();
    std::vector<std::thread> measuring;
    std::mutex failed_m;
    for (size_t k = 0; k < devices.size(); ++k) {
      json mine = json::array();
      for (size_t i = k; i < left.size(); i += devices.size()) mine.push_back(left[i]);
      if (mine.empty()) continue;
      const std::string d = std::to_string(devices[k]);
      const fs::path m = l.measure() / ("todo-" + d + ".json");
      if (auto st = write_manifest(m, base, mine); !st) {
        std::cerr << "kernelskill bench: " << st.message() << "\n";
        for (auto& t : measuring) t.join();
        return {1, false, "not measured: " + st.message()};
      }
      measuring.emplace_back([&, mine, d, m] {
        const bool ok = measure_on(l, s, script, m, mine, d, logs);
        std::lock_guard lock(failed_m);
        failed += !ok;
      });
    }
    for (auto& t : measuring) t.join();
    entries(l, variants, problems, read_measurements(l), left);
  }
  const size_t done = all.size() - left.size();
  progress("measure", "done: " + std::to_string(done) + " of " + std::to_string(all.size()) + " problems measured" +
                          (failed ? " (" + std::to_string(failed) + " measuring process(es) failed)" : ""));
  if (left.empty()) return {0, true, "measured"};
  return {1, done > 0,
          "partly measured: " + std::to_string(done) + " of " + std::to_string(all.size()) +
              " problems (run kernelskill bench again with the same --out to measure the rest)"};
}

// ---------------------------------------------------------------------------
// The early part, during the run.

struct early_measurement::state {
  layout l;
  std::vector<problem> problems;
  measure_settings s;
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  bool abandon = false;  // an error ends the bench: stop the warm-ups too
  std::string warm_owner = owner_name("prepare-warm");
  std::string build_owner = owner_name("prepare-build");  // every pass of builds during the run
  std::thread warm;                                       // the warm-ups' bounded child, while it runs
  std::optional<variant> current;                         // the variant being run
  std::mutex exporting;                                   // held while this thread exports `current`
  std::thread thread;
};

early_measurement::early_measurement(layout l, std::vector<problem> problems, measure_settings s)
    : s_(std::make_unique<state>()) {
  s_->l = std::move(l);
  s_->problems = std::move(problems);
  s_->s = std::move(s);
  s_->thread = std::thread([this] { work(); });
}

early_measurement::~early_measurement() {
  {
    std::lock_guard lock(s_->m);
    s_->abandon = true;
  }
  cancel_children(s_->warm_owner);
  cancel_children(s_->build_owner);
  finish();
}

void early_measurement::running(const variant* v) {
  std::lock_guard export_done(s_->exporting);
  std::lock_guard lock(s_->m);
  s_->current = v ? std::optional<variant>(*v) : std::nullopt;
}

void early_measurement::finish() {
  {
    std::lock_guard lock(s_->m);
    if (s_->stop && !s_->thread.joinable()) return;
    s_->stop = true;
  }
  s_->cv.notify_all();
  if (s_->thread.joinable()) s_->thread.join();
}

void early_measurement::work() {
  const layout& l = s_->l;
  const measure_settings& s = s_->s;
  std::error_code ec;
  fs::create_directories(l.measure() / "logs", ec);
  auto torch = probe_torch(s.python, l.measure());
  if (!torch || torch->gpus == 0) {
    progress("prepare", std::string("nothing prepared during the run: ") +
                            (torch ? s.python + " sees no CUDA GPU" : torch.message()));
    return;
  }
  std::vector<int> devices = s.devices;
  if (devices.empty())
    for (int d = 0; d < torch->gpus; ++d) devices.push_back(d);
  std::string device_list;
  for (int d : devices) device_list += (device_list.empty() ? "" : ",") + std::to_string(d);
  if (auto st = write_script(l); !st) {
    progress("prepare", "nothing prepared during the run: " + st.message());
    return;
  }
  const json base = manifest_base(l, s);
  const fs::path script = l.measure() / "side_by_side.py";
  // Every imported problem's Model, warmed while the run goes on: the GPU is shared with
  // the run's reviews, so few at once, and only problems whose tensors are small beside
  // the GPU (the reviewer plans its trial cache for the whole device: on an H100, three
  // warm-ups of level 1's 8.6 GB convolutions beside it made reviews run out of memory).
  // The others are warmed by the measurement, after the run.
  const uint64_t warm_limit = during_run_warm_limit(torch->smallest_gpu_bytes);
  json problems = json::array();
  size_t left_big = 0;
  for (const auto& p : s_->problems) {
    if (!p.ok()) continue;
    // A task that cannot be loaded (its module not re-created: finished everywhere) is
    // left to the measurement too.
    if (auto task = load_task(p.task); !task || bytes_of(task->inputs) + bytes_of(task->parameters) > warm_limit) {
      ++left_big;
      continue;
    }
    problems.push_back({{"key", p.key},
                        {"name", p.name},
                        {"level", p.level},
                        {"problem", p.copy.string()},
                        {"models", json::array()}});
  }
  if (left_big)
    progress("prepare", std::to_string(left_big) +
                            " problems left to the measurement's warm-up: their inputs and "
                            "parameters take more than " +
                            format_double("%.2f GB", static_cast<double>(warm_limit) / 1e9) +
                            " (1/32 of the smallest GPU, which the run's reviews share), or their "
                            "task's module was not re-created (finished and exported before)");
  const std::string warm_jobs = std::to_string(std::min<size_t>(std::max(1u, s.jobs), 3 * devices.size()));
  if (!problems.empty() && write_manifest(l.measure() / "prepare-warm.json", base, problems)) {
    progress("prepare", "warming torch.compile for " + std::to_string(problems.size()) + " problems during the run (" +
                            warm_jobs + " at once), building each model once its task is exported");
    std::lock_guard lock(s_->m);
    if (!s_->abandon) {
      std::vector<std::string> args = {
          s.python,    script.string(), "--kb-manifest", (l.measure() / "prepare-warm.json").string(),
          "--kb-warm", "--jobs",        warm_jobs,       "--devices",
          device_list};
      const int bound = pass_bound(problems.size(), static_cast<unsigned>(std::stoi(warm_jobs)), s.problem_timeout);
      s_->warm = std::thread([this, args, bound] {
        run_python(args, bound, s_->l.measure() / "logs" / "prepare-warm.log", s_->warm_owner);
      });
    }
  }
  // The run uses the cores too (NVRTC, graph export, the references): a third of the
  // jobs build, each compiling two files at once (MAX_JOBS=2).
  build_passes passes(std::max(1u, s.jobs / 3), s_->build_owner);
  std::set<std::string> tried;  // model files (by SHA-256) handed to a build already
  std::string seen_records;     // the variants' export.json, as last looked at
  size_t built = 0, pass_number = 0;
  for (;;) {
    std::optional<variant> v;
    bool last = false;
    {
      std::unique_lock lock(s_->m);
      s_->cv.wait_for(lock, std::chrono::seconds(5), [&] { return s_->stop; });
      last = s_->stop;
      v = s_->current;
    }
    if (v) {
      // While this holds `exporting`, running() waits: the caller's export never runs
      // beside this one.
      std::lock_guard exporting(s_->exporting);
      bool still = false;
      {
        std::lock_guard lock(s_->m);
        still = s_->current && s_->current->name == v->name;
      }
      if (still)
        if (auto st = export_step(l, *v, s_->problems, /*quiet=*/true); !st)
          progress("prepare", "early export: " + st.message());
    }
    if (last) break;
    const unsigned room = passes.room();
    if (room == 0) continue;
    // The exported models not handed to a build yet, of every variant run so far.
    std::vector<variant> variants;
    for (auto it = fs::directory_iterator(l.root / "variants", ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      if (it->is_directory()) variants.push_back({it->path().filename().string(), true, true});
    // Nothing exported since the last look (and nothing left over): no model to hash again.
    std::string records;
    for (const auto& vv : variants) records += read_text_file(l.models_dir(vv.name) / "export.json");
    if (records == seen_records) continue;
    json todo;
    size_t models = 0;
    bool left_over = false;
    json fresh = pick_models(entries(l, variants, s_->problems, {}, todo), room, tried, models, left_over);
    if (!left_over) seen_records = std::move(records);
    if (fresh.empty()) continue;
    const std::string n = std::to_string(pass_number++);
    const fs::path manifest = l.measure() / ("prepare-build-" + n + ".json");
    if (!write_manifest(manifest, base, fresh)) continue;
    built += fresh.size();
    const unsigned jobs = static_cast<unsigned>(std::min<size_t>(models, room));
    passes.start({s.python, script.string(), "--kb-manifest", manifest.string(), "--kb-prebuild", "--jobs",
                  std::to_string(jobs)},
                 pass_bound(models, jobs, s.build_timeout), l.measure() / "logs" / ("prepare-build-" + n + ".log"),
                 jobs);
  }
  // The measurement builds what is left: no pass may still be building beside it.
  passes.join();
  // The builds of the last export and the warm-ups are what the measurement needs next.
  if (built) progress("prepare", std::to_string(built) + " problems' models handed to builds during the run");
  if (s_->warm.joinable()) {
    progress("prepare", "the run is over: waiting for torch.compile's warm-ups to end (each bounded by " +
                            std::to_string(s.problem_timeout) + " s)");
    s_->warm.join();
  }
}

}  // namespace ks::cli::bench
