// kernelskill submit | status | cancel | priority | result | watch: the command-line
// clients of a running daemon (docs/daemon.md, "Client commands"). They talk to it only
// through its HTTP API (daemon/api_client.hpp), so they work the same against a daemon
// on this machine or on another one.

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "daemon/api_client.hpp"
#include "model/json_codec.hpp"
#include "plan/launch_plan_yaml.hpp"

namespace ks::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Exit statuses of the client commands (README, docs/daemon.md).
constexpr int exit_ok = 0;
constexpr int exit_refused = 1;  // the daemon refused the request, or a local file is bad
constexpr int exit_usage = 2;
constexpr int exit_not_correct = 5;   // a task ended without a correct kernel
constexpr int exit_unreachable = 6;   // no daemon answered at the address
constexpr int exit_unauthorized = 7;  // the daemon refused the token
constexpr int exit_daemon_error = 8;  // the daemon failed (5xx) or answered nonsense

int fail(const std::string& command, const api_error& e, const daemon_client_options& o) {
  std::cerr << "kernelskill " << command << ": " << e.message << "\n";
  if (e.http_status == 401) {
    std::cerr << "  the daemon at " << o.server << " needs its token: set $" << o.token_env
              << " to it (or name another variable with --token-env)\n";
    return exit_unauthorized;
  }
  if (e.unreachable()) return exit_unreachable;
  if (e.http_status >= 500 || e.code == "bad_response") return exit_daemon_error;
  return exit_refused;
}

// The client, or a usage error already reported.
std::optional<api_client> connect(const std::string& command, const daemon_client_options& o, int& rc) {
  api_client_options opts;
  opts.server = o.server.empty() ? default_server() : o.server;
  if (!o.token_env.empty()) {
    const char* token = std::getenv(o.token_env.c_str());
    if (token)
      opts.token = token;
    else if (o.token_env_given) {
      std::cerr << "kernelskill " << command << ": --token-env " << o.token_env
                << ": the environment variable is not set\n";
      rc = exit_usage;
      return std::nullopt;
    }
  }
  auto client = api_client::make(opts);
  if (!client) {
    std::cerr << "kernelskill " << command << ": " << client.message() << "\n";
    rc = exit_usage;
    return std::nullopt;
  }
  return std::move(client).value();
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string speedup_text(double x) { return x > 0 ? fixed(x, 3) + "x" : "-"; }

std::string clock_time(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = unix_ms / 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string rounds_text(const api_task& t) {
  return std::to_string(t.round) + "/" + (t.rounds_budget ? std::to_string(t.rounds_budget) : "?");
}

std::string what_now(const api_task& t) {
  if (!t.reason.empty() && t.ended()) return t.reason;
  std::string s = t.detail;
  if (t.cancel_requested && !t.ended()) s = "cancelling" + (s.empty() ? "" : ": " + s);
  return s;
}

bool read_file(const fs::path& p, std::string& out, std::string& err) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    err = p.string() + ": cannot read (" + (fs::exists(p) ? "permission denied?" : "no such file") + ")";
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

bool write_file(const fs::path& p, const std::string& text, std::string& err) {
  // Temporary file + rename: a reader (or a second `result`) never sees half a file.
  fs::path tmp = p;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) {
      err = tmp.string() + ": cannot write";
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    err = p.string() + ": " + ec.message();
    return false;
  }
  return true;
}

// ---- submit -------------------------------------------------------------------------

int submit(const daemon_client_options& o, const std::string& task_path, int priority, bool quiet) {
  int rc = exit_ok;
  auto client = connect("submit", o, rc);
  if (!client) return rc;
  std::string yaml, err;
  if (!read_file(task_path, yaml, err)) {
    std::cerr << "kernelskill submit: " << err << "\n";
    return exit_refused;
  }
  // A task whose reference is a saved module names a file on this machine; the daemon
  // may run elsewhere, so the module travels with the request.
  std::string module_bytes;
  std::string module_path;
  bool problem_left_out = false;
  try {
    YAML::Node doc = YAML::Load(yaml);
    if (doc.IsMap() && doc["reference"] && doc["reference"].IsMap() && doc["reference"]["module"] &&
        doc["reference"]["module"].IsScalar())
      module_path = doc["reference"]["module"].as<std::string>();
    // The daemon runs no submitted Python (a KernelBench problem's source would run
    // wherever the result is imported): the task goes without it, its TorchScript or
    // module reference is what is optimised.
    if (doc.IsMap() && doc["reference"] && doc["reference"].IsMap() && doc["reference"]["kernelbench"]) {
      doc["reference"].remove("kernelbench");
      YAML::Emitter out;
      out << doc;
      yaml = out.c_str();
      problem_left_out = true;
    }
  } catch (const YAML::Exception&) {
    // The daemon validates the file and names the line of a syntax error.
  }
  api_result<api_task> task = api_error{};
  if (!module_path.empty()) {
    fs::path p = module_path;
    if (p.is_relative()) p = fs::path(task_path).parent_path() / p;
    if (!read_file(p, module_bytes, err)) {
      std::cerr << "kernelskill submit: " << task_path << ": reference.module: " << err << "\n";
      return exit_refused;
    }
    task = client->submit(yaml, module_bytes, priority);
  } else {
    task = client->submit(yaml, priority);
  }
  if (!task) {
    if (task.error().http_status == 400 || task.error().http_status == 413)
      std::cerr << "kernelskill submit: " << task_path << ":\n  ";
    return fail("submit", task.error(), o);
  }
  if (quiet) {
    std::cout << task->id << "\n";
  } else {
    std::cout << "submitted " << task->id << ": " << task->state << ", priority " << task->priority
              << (module_bytes.empty() ? "" : ", module " + std::to_string(module_bytes.size()) + " bytes uploaded")
              << (problem_left_out ? "\n  (reference.kernelbench, the problem's Python, stays here: the daemon runs no "
                                     "submitted Python, so the result's ModelNew has the plain interface; "
                                     "`kernelskill export` here gives KernelBench's)"
                                   : "")
              << "\n  kernelskill watch " << task->id << "     (progress)\n  kernelskill result " << task->id
              << "    (the kernel, once it is done)\n";
  }
  return exit_ok;
}

// ---- status -------------------------------------------------------------------------

void print_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<size_t> width;
  for (auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  for (auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      bool last = i + 1 == r.size();
      std::string pad(width[i] - r[i].size(), ' ');
      line += right[i] ? pad + r[i] : (last ? r[i] : r[i] + pad);
      if (!last) line += "  ";
    }
    std::cout << line << "\n";
  }
}

int status_all(const api_client& client, const daemon_client_options& o, const std::string& state, uint32_t limit,
               bool as_json) {
  auto list = client.list(state, limit);
  if (!list) return fail("status", list.error(), o);
  if (as_json) {
    json out = {{"tasks", json::array()}, {"total", list->total}};
    for (auto& t : list->tasks) out["tasks"].push_back(t.raw);
    std::cout << out.dump(2) << "\n";
    return exit_ok;
  }
  if (list->tasks.empty()) {
    std::cout << (state.empty() ? "no tasks" : "no " + state + " tasks") << " at " << client.server() << "\n";
    return exit_ok;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "STATE", "PRIO", "ROUND", "REVIEWS", "BEST", "SUBMITTED", "NOW"}};
  for (auto& t : list->tasks)
    rows.push_back({t.id, t.state, std::to_string(t.priority), rounds_text(t), std::to_string(t.reviews),
                    speedup_text(t.best_speedup), clock_time(t.submitted_unix_ms), what_now(t)});
  print_table(rows, {false, false, true, true, true, true, false, false});
  if (list->total > list->tasks.size())
    std::cout << "(newest " << list->tasks.size() << " of " << list->total << "; --limit N shows more)\n";
  return exit_ok;
}

int status_one(const api_client& client, const daemon_client_options& o, const std::string& id, bool as_json) {
  auto d = client.status(id);
  if (!d) return fail("status", d.error(), o);
  const api_task& t = d->task;
  if (as_json) {
    std::cout << t.raw.dump(2) << "\n";
    return exit_ok;
  }
  auto field = [](const std::string& k, const std::string& v) {
    std::cout << "  " << k << std::string(k.size() < 14 ? 14 - k.size() : 1, ' ') << v << "\n";
  };
  std::cout << t.id << "\n";
  field("state", t.state + (t.cancel_requested && !t.ended() ? " (cancel requested)" : ""));
  field("priority", std::to_string(t.priority));
  field("round", rounds_text(t) + ", " + std::to_string(t.reviews) + " reviews");
  field("best", speedup_text(t.best_speedup) + (t.best_candidate.empty() ? "" : "  " + t.best_candidate));
  if (!t.detail.empty() && !t.ended()) field("now", t.detail);
  if (!t.reason.empty()) field("reason", t.reason);
  field("submitted", clock_time(t.submitted_unix_ms));
  if (t.started_unix_ms) field("started", clock_time(t.started_unix_ms));
  if (t.finished_unix_ms) field("finished", clock_time(t.finished_unix_ms));
  if (t.resumed) field("resumed", std::to_string(t.resumed) + " restart(s)");
  if (!d->history.empty()) {
    std::cout << "  best speedup by round:\n";
    double top = 1;
    for (auto& h : d->history) top = std::max(top, h.best_speedup);
    for (auto& h : d->history) {
      int n = static_cast<int>(std::lround(30.0 * h.best_speedup / top));
      std::string bar;
      for (int i = 0; i < n; ++i) bar += "\u2588";
      char head[64];
      std::snprintf(head, sizeof head, "    %4u  %8s  ", h.round, speedup_text(h.best_speedup).c_str());
      std::cout << head << bar << "\n";
    }
  }
  if (t.ended()) std::cout << "  kernelskill result " << t.id << "   writes its kernel, plan and review\n";
  return exit_ok;
}

// ---- result -------------------------------------------------------------------------

int fetch_result(const daemon_client_options& o, const std::string& id, const std::string& out_dir_arg) {
  int rc = exit_ok;
  auto client = connect("result", o, rc);
  if (!client) return rc;
  auto r = client->result_of(id);
  if (!r) {
    if (r.error().http_status == 409)
      std::cerr << "kernelskill result: " << id << " has no result yet (kernelskill watch " << id
                << " waits for it)\n  ";
    return fail("result", r.error(), o);
  }
  fs::path dir = out_dir_arg.empty() ? fs::path(r->task.id) : fs::path(out_dir_arg);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::cerr << "kernelskill result: " << dir.string() << ": " << ec.message() << "\n";
    return exit_refused;
  }
  std::vector<std::pair<std::string, std::string>> files;
  if (!r->kernel_source.empty()) files.push_back({"kernel.cu", r->kernel_source});
  // The API carries the plan as the store keeps it (JSON); plan.yaml is written the way
  // `kernelskill run` writes it, so that `kernelskill plan check` and
  // `kernelskill-gpu --review --plan` read it.
  std::string plan_text = r->kernel_plan;
  if (r->raw.contains("kernel") && r->raw["kernel"].is_object() && r->raw["kernel"].contains("plan") &&
      r->raw["kernel"]["plan"].is_object()) {
    auto plan = decode_json<launch_plan>(r->raw["kernel"]["plan"], "kernel.plan");
    if (plan) plan_text = to_yaml(*plan);
  }
  if (!plan_text.empty()) files.push_back({"plan.yaml", plan_text});
  if (!r->review.is_null()) files.push_back({"review.json", r->review.dump(2) + "\n"});
  if (!r->outcome.is_null()) files.push_back({"outcome.json", r->outcome.dump(2) + "\n"});
  if (!r->pytorch.empty()) files.push_back({"model_new.py", r->pytorch});
  std::string err;
  for (auto& [name, text] : files)
    if (!write_file(dir / name, text, err)) {
      std::cerr << "kernelskill result: " << err << "\n";
      return exit_refused;
    }
  const api_task& t = r->task;
  std::cout << t.id << ": " << t.state;
  if (t.best_speedup > 0) std::cout << ", best " << speedup_text(t.best_speedup);
  std::cout << " after " << t.round << " rounds and " << t.reviews << " reviews";
  if (!t.reason.empty()) std::cout << " (" << t.reason << ")";
  std::cout << "\n";
  for (auto& f : files) std::cout << "  wrote " << (dir / f.first).string() << "\n";
  if (r->kernel_source.empty()) {
    std::cout << "  no correct kernel: nothing else to write\n";
    return exit_not_correct;
  }
  return exit_ok;
}

// ---- watch --------------------------------------------------------------------------

int terminal_width() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  return 100;
}

// Cuts a line to `cols` columns (counting UTF-8 code points, which is right for the
// block characters of the bar), so that a redraw can move the cursor up line by line.
std::string fit(const std::string& s, size_t cols) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == cols) return s.substr(0, i);
      ++n;
    }
  }
  return s;
}

std::string progress_bar(const api_task& t, int width) {
  double frac = 0;
  if (t.state == "done")
    frac = 1;
  else if (t.rounds_budget > 0)
    frac = std::min(1.0, double(t.round) / t.rounds_budget);
  int filled = static_cast<int>(std::floor(frac * width));
  std::string bar = "[";
  for (int i = 0; i < width; ++i) bar += i < filled ? "\u2588" : "\u2591";
  return bar + "]";
}

std::string pad_right(std::string s, size_t n) {
  if (s.size() < n) s += std::string(n - s.size(), ' ');
  return s;
}

std::string pad_left(std::string s, size_t n) {
  if (s.size() < n) s.insert(0, n - s.size(), ' ');
  return s;
}

std::string watch_line(const api_task& t, size_t id_width) {
  std::string s = pad_right(t.id, id_width) + "  " + pad_right(t.state, 9) + " " + progress_bar(t, 20) + " round " +
                  pad_right(rounds_text(t), 7) + " reviews " + pad_left(std::to_string(t.reviews), 4) + "  best " +
                  pad_right(speedup_text(t.best_speedup), 8);
  std::string now = what_now(t);
  if (!now.empty()) s += " " + now;
  return s;
}

// What a plain-text watcher prints when something it shows changed.
std::string change_key(const api_task& t) {
  return t.state + "|" + std::to_string(t.round) + "|" + std::to_string(t.reviews) + "|" + fixed(t.best_speedup, 4) +
         "|" + t.detail + "|" + t.reason + "|" + (t.cancel_requested ? "c" : "");
}

int watch(const daemon_client_options& o, std::vector<std::string> ids, double interval_s) {
  int rc = exit_ok;
  auto client = connect("watch", o, rc);
  if (!client) return rc;
  if (ids.empty()) {
    // Everything that has not ended, oldest first (the order they will run in, mostly).
    for (const char* state : {"running", "queued"}) {
      auto list = client->list(state, 1000);
      if (!list) return fail("watch", list.error(), o);
      for (auto it = list->tasks.rbegin(); it != list->tasks.rend(); ++it) ids.push_back(it->id);
    }
    if (ids.empty()) {
      std::cout << "nothing to watch: no task is queued or running at " << client->server() << "\n";
      return exit_ok;
    }
  }
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  size_t id_width = 0;
  for (auto& id : ids) id_width = std::max(id_width, id.size());
  std::map<std::string, std::string> printed;  // plain mode: the last state printed per task
  std::map<std::string, api_task> last;
  int drawn = 0;
  bool reached = false;  // a daemon never reached is an error at once, not after `patience`
  auto unreachable_since = std::chrono::steady_clock::time_point{};
  const auto patience = std::chrono::seconds(15);
  auto interval = std::chrono::milliseconds(static_cast<int64_t>(std::max(0.05, interval_s) * 1000));
  for (;;) {
    bool all_ended = true;
    for (auto& id : ids) {
      if (last.count(id) && last[id].ended()) continue;
      auto d = client->status(id);
      if (!d) {
        // A daemon that restarts (or is briefly too busy) should not end a long watch;
        // one that stays away does.
        if (d.error().unreachable() && reached) {
          auto now = std::chrono::steady_clock::now();
          if (unreachable_since == std::chrono::steady_clock::time_point{}) unreachable_since = now;
          if (now - unreachable_since < patience) {
            all_ended = false;
            continue;
          }
        }
        if (tty && drawn) std::cout << "\n";
        return fail("watch", d.error(), o);
      }
      unreachable_since = {};
      reached = true;
      last[id] = d->task;
      all_ended = all_ended && d->task.ended();
    }
    if (tty) {
      int cols = terminal_width() - 1;
      std::string frame;
      if (drawn) frame += "\x1b[" + std::to_string(drawn) + "F";  // back to the first line
      for (auto& id : ids) {
        std::string line =
            last.count(id) ? watch_line(last[id], id_width) : pad_right(id, id_width) + "  waiting for the daemon";
        frame += "\x1b[2K" + fit(line, cols) + "\n";
      }
      std::cout << frame << std::flush;
      drawn = static_cast<int>(ids.size());
    } else {
      for (auto& id : ids) {
        if (!last.count(id)) continue;
        std::string key = change_key(last[id]);
        if (printed[id] == key) continue;
        printed[id] = key;
        std::time_t now = std::time(nullptr);
        std::tm tm{};
        localtime_r(&now, &tm);
        char stamp[16];
        std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
        const api_task& t = last[id];
        std::cout << stamp << " " << t.id << " " << t.state << " round " << rounds_text(t) << " reviews " << t.reviews
                  << " best " << speedup_text(t.best_speedup);
        std::string now_text = what_now(t);
        if (!now_text.empty()) std::cout << "  " << now_text;
        std::cout << "\n" << std::flush;
      }
    }
    if (all_ended) break;
    std::this_thread::sleep_for(interval);
  }
  int done = 0, other = 0;
  for (auto& id : ids) (last[id].state == "done" ? done : other)++;
  std::cout << done << " done";
  if (other) std::cout << ", " << other << " failed or cancelled";
  std::cout << "\n";
  return other ? exit_not_correct : exit_ok;
}

const char* exit_codes_help =
    "Exit status: 0 ok, 1 the daemon refused the request (bad task file, unknown id,\n"
    "a task in the wrong state), 2 usage, 5 a task ended without a correct kernel\n"
    "(watch, result), 6 no daemon answers at the address, 7 the daemon refused the\n"
    "token, 8 the daemon failed (HTTP 5xx) or answered something unexpected.";

}  // namespace

std::function<std::optional<int>()> add_client_commands(CLI::App& app) {
  // Shared by every client subcommand: CLI11 fills whichever one was used.
  auto o = std::make_shared<daemon_client_options>();
  o->token_env = "KS_TOKEN";
  auto common = [o](CLI::App* sub) {
    sub->add_option("--server", o->server,
                    "The daemon, http://HOST:PORT (default: $KS_SERVER, else http://127.0.0.1:8470)");
    sub->add_option_function<std::string>(
        "--token-env",
        [o](const std::string& name) {
          o->token_env = name;
          o->token_env_given = true;
        },
        "The environment variable holding the daemon's token (default KS_TOKEN)");
    sub->footer(exit_codes_help);
  };
  struct args {
    std::string task_path, id, out_dir, state;
    std::vector<std::string> ids;
    int priority = 0;
    uint32_t limit = 100;
    double interval = 1.0;
    bool quiet = false, as_json = false;
  };
  auto a = std::make_shared<args>();

  auto* submit_cmd = app.add_subcommand("submit",
                                        "Queue a task on a running daemon (kernelskill serve). A task whose\n"
                                        "reference.module names a .pt file has the file uploaded with it.\n"
                                        "Prints the task's id.");
  submit_cmd->add_option("task", a->task_path, "Task file (YAML; see docs/task-format.md)")->required();
  submit_cmd->add_option("--priority", a->priority, "-1000..1000, higher runs first (default 0)")
      ->check(CLI::Range(-1000, 1000));
  submit_cmd->add_flag("-q,--quiet", a->quiet, "Print only the task id");
  common(submit_cmd);

  auto* status_cmd =
      app.add_subcommand("status",
                         "Without ID: the daemon's tasks, newest first, as a table (state, priority,\n"
                         "round, reviews, best speedup, what it is doing). With ID: one task in detail,\n"
                         "with its best speedup after each round.");
  status_cmd->add_option("id", a->id, "Task id (NAME-XXXXXXXXXXXXXXXXXXXXXXXXXX, as submit printed it)");
  status_cmd->add_option("--state", a->state, "Only tasks in this state: queued, running, done, failed, cancelled");
  status_cmd->add_option("--limit", a->limit, "At most this many tasks (default 100, at most 1000)")
      ->check(CLI::Range(1, 1000));
  status_cmd->add_flag("--json", a->as_json, "Print the API's JSON instead of a table");
  common(status_cmd);

  auto* cancel_cmd = app.add_subcommand("cancel",
                                        "Cancel a task: a queued one at once, a running one at its next step\n"
                                        "(its best kernel so far is kept as its result).");
  cancel_cmd->add_option("id", a->id, "Task id")->required();
  common(cancel_cmd);

  auto* priority_cmd =
      app.add_subcommand("priority", "Change a queued task's priority (-1000..1000, higher runs first).");
  priority_cmd->add_option("id", a->id, "Task id")->required();
  priority_cmd->add_option("priority", a->priority, "The new priority")->required()->check(CLI::Range(-1000, 1000));
  common(priority_cmd);

  auto* result_cmd = app.add_subcommand("result",
                                        "Fetch an ended task's result into a directory: kernel.cu (the best kernel),\n"
                                        "plan.yaml (its launch plan), review.json (its review), outcome.json and,\n"
                                        "when exported, model_new.py (a PyTorch ModelNew module).");
  result_cmd->add_option("id", a->id, "Task id")->required();
  result_cmd->add_option("--out", a->out_dir, "Output directory (default: ./ID)");
  common(result_cmd);

  auto* watch_cmd = app.add_subcommand("watch",
                                       "Follow tasks until they end: a progress bar per task on a terminal, one line\n"
                                       "per change otherwise (a log, a pipe). Without IDs: every task queued or\n"
                                       "running now. Exit status 0 when every watched task is done, 5 when some\n"
                                       "failed or were cancelled.");
  watch_cmd->add_option("ids", a->ids, "Task ids");
  watch_cmd->add_option("--interval", a->interval, "Seconds between polls (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  common(watch_cmd);

  return [=]() -> std::optional<int> {
    if (*submit_cmd) return submit(*o, a->task_path, a->priority, a->quiet);
    if (*status_cmd) {
      int rc = exit_ok;
      auto client = connect("status", *o, rc);
      if (!client) return rc;
      return a->id.empty() ? status_all(*client, *o, a->state, a->limit, a->as_json)
                           : status_one(*client, *o, a->id, a->as_json);
    }
    if (*cancel_cmd || *priority_cmd) {
      const char* name = *cancel_cmd ? "cancel" : "priority";
      int rc = exit_ok;
      auto client = connect(name, *o, rc);
      if (!client) return rc;
      auto t = *cancel_cmd ? client->cancel(a->id) : client->set_priority(a->id, a->priority);
      if (!t) return fail(name, t.error(), *o);
      if (*cancel_cmd)
        std::cout << t->id << ": "
                  << (t->state == "cancelled" ? "cancelled"
                                              : t->state + ", cancel requested (it stops at its next step)")
                  << "\n";
      else
        std::cout << t->id << ": priority " << t->priority << "\n";
      return exit_ok;
    }
    if (*result_cmd) return fetch_result(*o, a->id, a->out_dir);
    if (*watch_cmd) return watch(*o, a->ids, a->interval);
    return std::nullopt;
  };
}

}  // namespace ks::cli
