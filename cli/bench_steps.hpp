#pragma once
// `kernelskill bench` in steps, one file each (cli/bench_*.cpp): import the KernelBench
// problems, run the optimisation per ablation variant, export each task's best kernel,
// measure eager / torch.compile / ours side by side, and gather the summary.
//
// What it promises:
// - the output directory is the state: every step reads what the earlier ones wrote
//   there and writes its own files there (besides reading the problem files and
//   running the GPU workers and the user's Python); a step whose outputs are complete
//   is skipped with a progress line saying so, and an interrupted step goes on from
//   where its files stop (an imported problem, a finished task, an exported kernel, a
//   measured problem are kept; a task that was running resumes from its last round);
// - files are written whole (a temporary name, then a rename), so a crash never leaves
//   half a file for the next invocation to trust;
// - each step reuses the code of the command that does the same alone: `import
//   kernelbench` (import_problems), `run` (run_tasks), `export` (run_candidate,
//   export_pytorch); the measurement is cli/side_by_side.py, embedded in the binary
//   and run with the user's Python;
// - progress goes to stderr as "kernelskill bench: [step] …" lines.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "config/experiment_config.hpp"
#include "importer/kernelbench_import.hpp"
#include "report/bench_summary.hpp"

namespace ks::cli::bench {

// One ablation variant: which memories the run keeps.
struct variant {
  std::string name;
  bool long_term_memory = true;
  bool short_term_memory = true;
};
// "full,no-ltm,no-stm,no-ltm-stm" → the variants, in order; an unknown or repeated name
// is an error that lists the known ones.
result<std::vector<variant>> parse_variants(const std::string& list);
// The variant a config's own ablation section describes.
variant variant_of(const ablation_config& a);

// Where each step keeps its files under the output directory.
struct layout {
  std::filesystem::path root;                                               // absolute
  std::filesystem::path problems() const { return root / "problems"; }      // LEVEL/NAME.py copies
  std::filesystem::path tasks() const { return root / "tasks"; }            // LEVEL/NAME.yaml and .pt
  std::filesystem::path import_records() const { return root / "import"; }  // LEVEL/NAME.json
  std::filesystem::path variant_dir(const std::string& v) const { return root / "variants" / v; }
  std::filesystem::path run_dir(const std::string& v) const { return variant_dir(v) / "run"; }
  std::filesystem::path models_dir(const std::string& v) const { return variant_dir(v) / "models"; }
  std::filesystem::path measure() const { return root / "measure"; }
};

// "kernelskill bench: [step] text" on stderr.
void progress(const std::string& step, const std::string& text);

// A file's bytes ("" when it cannot be read), and its JSON (discarded when it cannot be
// read or parsed: a step's file that is missing or cut short counts as not written).
std::string read_text_file(const std::filesystem::path& path);
nlohmann::json read_json_file(const std::filesystem::path& path);

// (a) One problem file and what its import gave.
struct problem {
  std::string key;               // LEVEL/NAME
  std::string level;             // "level1" (the directory it was found in; see level_of)
  std::string name;              // the file's stem, the task's name
  std::filesystem::path source;  // the file as given
  std::filesystem::path copy;    // problems/LEVEL/NAME.py: what the measurement runs
  std::filesystem::path task;    // tasks/LEVEL/NAME.yaml; empty when the import failed
  std::string error;             // why the import failed
  bool ok() const { return error.empty(); }
};
// The level of a problem file: the nearest directory named levelN in the path it was
// found under (or its own path), else the directory it was found in.
std::string level_of(const problem_file& f);
// A problem imported before is kept as it was when its record and files are there; its
// module (TASK.pt, the task's weights: the import's most expensive part) may be missing
// where module_needed(problem) says so (a bench resumed on a fresh machine, whose
// tarball leaves the modules out, re-creates only those a later step reads: see
// finished_everywhere). Without module_needed every module is needed.
result<std::vector<problem>> import_step(const layout& l, const std::vector<std::string>& paths,
                                         const kernelbench_import_options& options, unsigned jobs,
                                         const std::function<bool(const problem&)>& module_needed = {});

// (b) The variant's run over the imported tasks (cfg: the bench's config; the variant's
// store, output directory and ablation are set here). 0 done, 1 an error (printed),
// 3 no GPU.
int run_step(const layout& l, const variant& v, experiment_config cfg, const std::vector<problem>& problems);

// (c) Each finished task's best kernel as variants/V/models/NAME.py. `quiet`: no progress
// lines (the early preparation below exports while the run goes on, many times).
status export_step(const layout& l, const variant& v, const std::vector<problem>& problems, bool quiet = false);
// What the export step recorded: task name → {candidate, file (its name in models/),
// sha256, error}.
nlohmann::json read_export_record(const layout& l, const variant& v);
// Whether every variant has run the task named `name` to its end and exported its best
// kernel (or recorded that it has none): then no later step reads the task's module.
bool finished_everywhere(const layout& l, const std::vector<variant>& variants, const std::string& name);

// (d) The side-by-side measurement.
struct measure_settings {
  std::string python = "python3";
  std::vector<int> devices;  // empty: every GPU the Python's PyTorch sees
  int reps = 30, trials = 3, compile_timeout = 120;
  // Bounds: one model's build; one problem's measurement and one warm-up. A model past
  // its bound is a failed row with the reason, and the rest goes on.
  int build_timeout = 600, problem_timeout = 900;
  unsigned jobs = 1;  // parallel builds and torch.compile warm-ups
  uint64_t seed = 42;
};
struct measure_outcome {
  int status = 0;       // 0, 1 (the Python failed), 3 (no GPU)
  bool ran = false;     // some problem is measured
  std::string summary;  // "measured", or why not, for people
};
measure_outcome measure_step(const layout& l, const std::vector<variant>& variants,
                             const std::vector<problem>& problems, const measure_settings& s);
// (d, early) The measurement's slow preparation, while the run reviews kernels (the GPU
// busy, most cores idle): torch.compile of every imported problem's Model is warmed
// (inductor's on-disk cache, measure/inductor), and each finished task's kernel is
// exported and its model built (measure/build) as soon as its task ends, so that after
// the run the measurement mostly measures. It shares the GPU with the run's reviews (up
// to three warm-ups per GPU at once), which the run's own timings then see; --no-overlap leaves it
// out. Where the Python has no GPU it does nothing. What it makes is what measure_step
// would make: a build or warm-up it finished is reused there, one that failed is tried
// again there.
class early_measurement {
 public:
  early_measurement(layout l, std::vector<problem> problems, measure_settings s);
  ~early_measurement();  // finish()
  early_measurement(const early_measurement&) = delete;
  early_measurement& operator=(const early_measurement&) = delete;
  // The variant whose run is going on (its finished tasks are exported and built), or
  // none; returns once an export of the previous one under way has ended, so that the
  // caller's own export step never runs beside it.
  void running(const variant* v);
  // Stops looking for finished tasks and waits for the builds and warm-ups under way.
  void finish();

 private:
  void work();
  struct state;
  std::unique_ptr<state> s_;
};

// Every measured problem's row (key → the last complete row in measure/results-*.jsonl).
std::map<std::string, nlohmann::json> read_measurements(const layout& l);
// Whether a row's problem could not be checked (its Model, or the measurement around
// it, failed: out of memory, say): such a problem is measured again and, until then,
// pending in the summary with the row's error as its note.
bool measurement_failed(const nlohmann::json& row);
// The SHA-256 of a file's bytes ("" when it cannot be read): a model measured is the
// model exported.
std::string file_sha256(const std::filesystem::path& path);

// The summary's input, from the steps' files.
struct gather_settings {
  experiment_config config;
  measure_outcome measurement;
  int reps = 0, trials = 0;
};
bench_report gather(const layout& l, const std::vector<variant>& variants, const std::vector<problem>& problems,
                    const gather_settings& s);
// summary.json, summary.md, the pictures and each variant's per-problem rows
// (results-VARIANT.csv, docs/results' format, naming `origin`) into the output directory.
status write_summary_files(const layout& l, const bench_report& r, const results_origin& origin);

// cli/side_by_side.py, embedded at build time (cli/CMakeLists.txt).
std::string_view side_by_side_script();

}  // namespace ks::cli::bench
