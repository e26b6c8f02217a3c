#pragma once
// The subcommands of `kernelskill`. Each returns the process exit status:
// 0 success, 1 the checked input is invalid, 2 bad usage, 3 no GPU available,
// 4 the requested work is not available in this build, 5 a run finished but some
// task ended without a correct kernel.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/bounded_child.hpp"
#include "base/result.hpp"
#include "importer/kernelbench_import.hpp"
#include "model/candidate.hpp"
#include "model/task.hpp"

namespace ks {
class store;
}
namespace CLI {
class App;
}

namespace ks::cli {

struct global_options {
  std::string log_level;  // empty = from the config, else info
};

int check_config(const std::string& config_path, bool print, const global_options& g);
int check_tasks(const std::vector<std::string>& task_paths, const std::string& size, bool print);
int check_plan(const std::string& plan_path, const std::string& task_path, const std::string& source_path,
               const std::string& size);
int list_devices(const std::string& config_path, const global_options& g);
int run_experiment(const std::string& config_path, const global_options& g);
// The daemon: serves the HTTP API on `listen` (empty: the config's serve.listen) and
// runs queued tasks until SIGINT or SIGTERM.
int serve(const std::string& config_path, const std::string& listen, const global_options& g);

// The skill library (long-term memory) in `dir`, and the experience in a store.
int skills_list(const std::string& dir);
int skills_show(const std::string& dir, const std::string& method);
int skills_check(const std::string& dir);
int skills_explain(const std::string& dir, const std::string& evidence_path, const std::string& memory_path);
int skills_install(const std::string& dir, const std::string& memory_path);
int skills_stats(const std::string& memory_path, const std::string& bottleneck);

// Writes the rules coder's seeds for a task as DIR/seed-K.cu and DIR/seed-K.yaml and
// checks each plan against the task's shapes (at `size` when given). The graph export
// (kernelskill-gpu --graph) runs under `limits`.
int lower_task(const std::string& task_path, const std::string& out_dir, uint32_t seeds, const std::string& skills_dir,
               const std::string& gpu_worker, const std::string& size, const process_limits& limits = {});

// `kernelskill export`: a finished kernel as a PyTorch module file (ModelNew), from a
// run's output (run_dir: output.dir/tasks/NAME/, or output.dir) or from a kernel source
// and its plan. out_path "-" writes to stdout.
struct export_request {
  std::string task_path, run_dir, kernel_path, plan_path, out_path = "model_new.py";
  std::vector<std::string> compile_options;
};
int export_model(const export_request& r);
// The best kernel of `task` in a `kernelskill run` output (output.dir/tasks/NAME/ or
// output.dir): what `export --run-dir` exports. Fails naming the file, or saying the task
// ended without a correct kernel.
result<candidate> run_candidate(const task_spec& task, const std::filesystem::path& run_dir);

// `kernelskill import kernelbench PATH... --out DIR`: each KernelBench problem file
// (directories searched for *.py) as a task file and its module; one problem that
// fails is reported and the others still imported. 0: all imported, 1: some failed.
struct import_request {
  std::vector<std::string> paths;
  std::string out_dir = "tasks";
  std::string python = "python3";
  uint64_t seed = 42;
  double trace_gib = 4.0;
  int cpu_seconds = 300, memory_mb = 16384, wall_seconds = 600;
  unsigned jobs = 2;
};
int import_kernelbench(const import_request& r);
// The work of it, shared with `kernelskill bench`: the problems imported into out_dir,
// `jobs` at once; `done` is called (one call at a time) as each one finishes.
std::vector<import_outcome> import_problems(const std::vector<problem_file>& problems,
                                            const std::filesystem::path& out_dir,
                                            const kernelbench_import_options& options, unsigned jobs,
                                            const std::function<void(size_t, const import_outcome&)>& done);
// One line for a person: the file, and the task it became or why it failed.
std::string describe_import(const problem_file& problem, const import_outcome& outcome);

// `kernelskill bench PROBLEMS… --out DIR`: import, run per ablation variant, export,
// and the side-by-side measurement, resumable (docs/bench.md). 0: everything measured,
// 1: an error (or the measurement is incomplete), 2: bad usage, 3: no GPU for the run or
// the measurement (the finished steps' results and the summary are written).
struct bench_request {
  std::vector<std::string> paths;
  std::string out_dir;
  std::string config_path;
  std::optional<int> seeds, rounds;
  std::string coder;     // empty: the config's
  std::string ablation;  // "full,no-ltm,…"; empty: the config's own ablation section
  std::string python = "python3";
  std::vector<int> devices;
  int reps = 30, trials = 3, compile_timeout = 120;
  int build_timeout = 600;    // seconds one exported model's build may take
  int problem_timeout = 900;  // seconds one problem's measurement (or warm-up) may take
  unsigned jobs = 0;          // 0: half the cores
  uint64_t seed = 42;
  bool overlap = true;  // build models and warm torch.compile while the run goes on
  // The per-problem rows (results-VARIANT.csv): the run's name (empty: "DATE kernelskill
  // bench OUT") and the commit they name (empty: the one the binary was built from).
  std::string run_name, commit;
};
int bench_problems(const bench_request& r, const global_options& g);

// Opens a memory store read-only (so that a running daemon may hold it) without
// creating it: the inspecting commands never write.
result<std::unique_ptr<store>> open_store_for_reading(const std::string& memory_path);

// A task's trajectory (short-term memory) as a timeline; the tasks when task is empty.
int show_trajectory(const std::string& memory_path, const std::string& task);

// `kernelskill store check | repair`: exit 0 healthy (check) or nothing lost (repair);
// 1 damaged (check) or the repair failed; 5 repaired, with what could not be recovered
// listed. store_path: --memory, else the config's memory.path.
result<std::string> store_path(const std::string& memory_path, const std::string& config_path, const global_options& g);
int store_check(const std::string& memory_path);
int store_repair(const std::string& memory_path);

// The clients of a running daemon (cli/client_commands.cpp): submit, status, cancel,
// priority, result, watch. Their exit statuses add 6 (no daemon answers), 7 (the
// daemon refused the token) and 8 (the daemon failed) to the ones above.
struct daemon_client_options {
  std::string server;     // empty: $KS_SERVER, else http://127.0.0.1:8470
  std::string token_env;  // the variable holding the token
  bool token_env_given = false;
};
// Adds the client subcommands to `app`; after parsing, the returned function runs the
// one that was given (its exit status), or returns nullopt when none was.
std::function<std::optional<int>()> add_client_commands(CLI::App& app);

}  // namespace ks::cli
