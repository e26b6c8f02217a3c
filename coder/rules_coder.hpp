#pragma once
// The `rules` coder backend: writes kernels without an LLM or a network, by lowering
// the reference's TorchScript graph through templates (coder/lowering.hpp), and
// applies optimisation methods as parameter changes of those templates.
//
// - seeds(): distinct parameter sets of the same lowering (vector width, block size,
//   elements per thread, a block or a warp per row, rows kept in registers),
//   duplicates dropped; a warp per row for rows over 2048 elements, or a block per
//   row for rows under 4 elements a thread (at the task's size), only when the
//   other seeds run out;
// - every candidate's recipe carries its search space (`space`: the parameters its
//   templates read and their legal values at the task's shapes, coder/search_space.hpp);
// - optimize(): the chosen method's `rules_coder` entry (skills/*.yaml) is a move in
//   that space: it changes one parameter of base's recipe to the first of the method's
//   values (coder/space_moves.hpp) that is legal there and changes a kernel; a method
//   whose parameter the templates lack, or whose every legal value would change
//   nothing, is an error "method M does not apply to template T: why";
// - every candidate it returns lists in its recipe's `methods` the methods whose
//   optimize() would change its kernels (tried, not guessed): the decision policy
//   offers no other for it (docs/skills.md, "How decide() works");
// - repair(): back to the last good candidate, the failed change recorded in the
//   recipe's `excluded` list so it is not tried again (the method's next value is
//   tried when it has one); a failing seed falls back to the most conservative
//   parameters.
//
// The graph comes from `kernelskill-gpu --graph` (a subprocess: this library links
// neither LibTorch nor the CUDA driver), exported once per task at the task's small
// size (`cpu` when it has one: shapes only decide structure) and cached.
// Thread-safe: calls for different tasks may run at once.

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/bounded_child.hpp"
#include "coder/coder.hpp"
#include "coder/lowering.hpp"
#include "coder/space_moves.hpp"
#include "coder/task_graph.hpp"
#include "policy/skill_library.hpp"

namespace ks {

// A submitted reference is untrusted code: the child that exports its graph (and so
// runs it once on the CPU) gets these bounds, and is killed past them.
using reference_limits = process_limits;  // base/bounded_child.hpp

struct rules_coder_options {
  // kernelskill-gpu, which prints graphs (--graph). Next to `kernelskill` in <build>/bin.
  std::filesystem::path gpu_worker;
  // The skill library whose methods' `rules_coder` entries optimize() applies.
  std::filesystem::path skills_dir;
  // The task size to export graphs at, when the task has it.
  std::string graph_size = "cpu";
  // The GPU the kernels are written for (how many blocks fill it: few long rows are
  // split to do so). Defaults are an H200's.
  lowering_device device;
  reference_limits limits;
  // Methods move through each template's search space (coder/space_moves.hpp); off,
  // a method takes its listed values only, the first that differs (as before the
  // space: what a test compares against).
  bool explore_space = true;
};

class rules_coder : public coder {
 public:
  // Loads the skill library; fails when it does not load.
  static result<std::unique_ptr<rules_coder>> create(const rules_coder_options& options);
  // With a library at hand (tests, or a daemon that already loaded one).
  rules_coder(rules_coder_options options, skill_library skills);

  std::string name() const override { return "rules"; }
  result<std::vector<candidate>> seeds(const task_spec& task, uint32_t count) override;
  result<candidate> optimize(const optimize_input& in) override;
  result<candidate> repair(const repair_input& in) override;

  // The task's graph (exported and cached on first use).
  result<task_graph> graph(const task_spec& task);
  // Uses `graph` for tasks named graph.task from now on, instead of exporting one.
  void set_graph(const task_graph& graph);

  // The parameter sets seeds() tries, in order. A graph with deep_normalisation_chain
  // puts plainest_params() with ATen's reductions before them.
  static std::vector<lowering_params> seed_params();
  // The plainest parameters: a failed seed's repair, and a safe seed.
  static lowering_params plainest_params();
  // Whether `g` has at least rules::kDeepNormalisations normalisations on the batch's
  // own statistics (batch_norm in training mode, instance_norm, group_norm): a network
  // whose templates' sums, in another order than the reference's, miss a tight
  // tolerance (coder/rules/plan/op_specs.hpp).
  static bool deep_normalisation_chain(const task_graph& g);

  // The methods of the skill library whose optimize() changes `c`'s kernels (a
  // different source or launch), in library order.
  std::vector<std::string> applicable_methods(const task_spec& task, const candidate& c);
  // The same as moves: each applicable method's parameter change on `c` (from, to)
  // and the skill's expected metric changes.
  std::vector<space_move> moves(const task_spec& task, const candidate& c);
  // `c`'s search space: its recipe's, or its lowering's when the recipe has none.
  result<search_space> space_of(const task_spec& task, const candidate& c);

 private:
  result<candidate> build(const task_spec& task, const lowering_params& params, const std::string& origin,
                          const std::string& parent, const std::string& excluded, bool with_methods = true);
  // optimize() of `task` (in.task is not read: applicable_methods passes the task
  // without copying it); with_methods false leaves the result's `methods` out (what
  // applicable_methods tries with).
  result<candidate> optimize_once(const task_spec& task, const optimize_input& in, bool with_methods);

  // Writes `c`'s `methods` (the applicable ones) and `moves` (each one's change,
  // "method:param=value") into its recipe.
  void record_moves(const task_spec& task, candidate& c);

  rules_coder_options options_;
  skill_library skills_;
  std::mutex mutex_;
  std::map<std::string, task_graph> graphs_;  // by task name + source hash
  // Exports a limit stopped, by the same key: a reference that ran past its limits
  // once does so again, and each try holds a slot for up to the wall-clock limit.
  std::map<std::string, std::string> stopped_;
};

// Runs `gpu_worker --graph` on `task` and parses what it prints. The task (and an
// uploaded module) is written to a private directory (0700) that is removed on return;
// the child runs under `limits` in its sandbox, and an error says which limit it
// crossed (and sets *stopped, when given).
result<task_graph> export_task_graph(const std::filesystem::path& gpu_worker, const task_spec& task,
                                     const std::string& size, const reference_limits& limits = {},
                                     bool* stopped = nullptr);

}  // namespace ks
