#pragma once
// The KernelSkill protocol: every message that crosses an actor or process boundary,
// and the typed interfaces of the actors that exchange them. Daemon, agents and GPU
// workers (local or remote, over CAF's middleman) all speak exactly this.
//
// Rules for this header:
// - messages are plain structs with an inspect() overload listing every field, so
//   they serialize across the network; each has a stable wire name, registered by
//   register_protocol() on both ends of a link;
// - enums travel as their underlying integer: only append new enumerators;
// - free-form measurements travel as string→double maps with documented names, so a
//   new metric or feature needs no protocol change.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace ks {

// ---------------------------------------------------------------------------
// Tasks: a reference program and how to make its inputs.

// How the values of an input or a parameter are drawn. Kinds:
//   normal(mean, std), uniform(low, high), randint(low, high) — integers in [low, high),
//   constant(value), zeros, ones, arange (0, 1, 2, … reshaped), and for parameters
//   kaiming_uniform: uniform(±1/sqrt(fan_in)) as torch.nn.Linear/Conv initialise.
struct distribution_spec {
  std::string kind = "normal";
  double mean = 0.0;
  double std = 1.0;
  double low = 0.0;
  double high = 1.0;
  double value = 0.0;
  friend bool operator==(const distribution_spec&, const distribution_spec&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, distribution_spec& x) {
  return f(caf::meta::type_name("distribution_spec"), x.kind, x.mean, x.std, x.low,
           x.high, x.value);
}

// One tensor of the reference's signature (an input, or a parameter that is passed
// after the inputs). dtype is a torch name: float32, float16, bfloat16, float64,
// int32, int64, bool.
struct tensor_spec {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "float32";
  distribution_spec init;
  friend bool operator==(const tensor_spec&, const tensor_spec&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_spec& x) {
  return f(caf::meta::type_name("tensor_spec"), x.name, x.shape, x.dtype, x.init);
}

// Per-dtype comparison: |out - ref| <= atol + rtol * |ref| element-wise.
struct tolerance_spec {
  double atol = 1e-4;
  double rtol = 1e-4;
  friend bool operator==(const tolerance_spec&, const tolerance_spec&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tolerance_spec& x) {
  return f(caf::meta::type_name("tolerance_spec"), x.atol, x.rtol);
}

// A task: what to make faster. The reference is TorchScript source defining
// `forward(inputs..., parameters...)`, or the bytes of a TorchScript module saved with
// torch.jit.save (whose forward takes the inputs only). Loaded from YAML by
// task/task_loader.hpp; see docs/task-format.md.
struct task_spec {
  std::string name;
  std::string description;
  std::string torchscript;            // inline source, or empty
  std::string module_bytes;           // a saved .pt module, or empty
  std::string module_path;            // where module_bytes came from (for messages)
  std::vector<tensor_spec> inputs;
  std::vector<tensor_spec> parameters;
  tolerance_spec tolerance;
  uint64_t seed = 0;                  // base seed; trial k uses a seed derived from it
  // Named alternative shapes ("cpu", "small", …): size name → tensor name → shape.
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> sizes;
  friend bool operator==(const task_spec&, const task_spec&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_spec& x) {
  return f(caf::meta::type_name("task_spec"), x.name, x.description, x.torchscript,
           x.module_bytes, x.module_path, x.inputs, x.parameters, x.tolerance, x.seed,
           x.sizes);
}

// ---------------------------------------------------------------------------
// Candidates: CUDA device code for NVRTC plus a declarative launch plan.
// The plan format is documented in docs/launch-plan.md and parsed by plan/.

// One argument of a kernel launch, or one input of a library step.
//   kind "tensor": value names an input, parameter, scratch or output tensor;
//   kind "int"/"float": value is an expression over shapes and plan constants,
//   passed as `type` (int32, int64, float32, float64).
struct plan_arg {
  std::string kind;
  std::string value;
  std::string type;
  friend bool operator==(const plan_arg&, const plan_arg&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan_arg& x) {
  return f(caf::meta::type_name("plan_arg"), x.kind, x.value, x.type);
}

// One step of a plan. kind "kernel": launch `name` from the candidate's source with
// grid/block (three expressions each) and dynamic shared memory; kind "library":
// call the ATen op `name` (e.g. aten::matmul) on `args`, writing `outputs`.
struct plan_step {
  std::string kind;
  std::string name;
  std::vector<std::string> grid;
  std::vector<std::string> block;
  std::string shared_mem = "0";
  std::vector<plan_arg> args;
  std::vector<std::string> outputs;
  std::map<std::string, std::string> attrs;
  friend bool operator==(const plan_step&, const plan_step&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan_step& x) {
  return f(caf::meta::type_name("plan_step"), x.kind, x.name, x.grid, x.block,
           x.shared_mem, x.args, x.outputs, x.attrs);
}

// A tensor the plan allocates: scratch space or an output. shape holds expressions.
// init: "none" (uninitialised; outputs are poisoned by the verifier), "zeros".
struct buffer_spec {
  std::string name;
  std::vector<std::string> shape;
  std::string dtype = "float32";
  std::string init = "none";
  friend bool operator==(const buffer_spec&, const buffer_spec&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, buffer_spec& x) {
  return f(caf::meta::type_name("buffer_spec"), x.name, x.shape, x.dtype, x.init);
}

struct launch_plan {
  std::map<std::string, std::string> constants;  // name → expression
  std::vector<buffer_spec> scratch;
  std::vector<buffer_spec> outputs;  // in the order the reference returns them
  std::vector<plan_step> steps;
  friend bool operator==(const launch_plan&, const launch_plan&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, launch_plan& x) {
  return f(caf::meta::type_name("launch_plan"), x.constants, x.scratch, x.outputs,
           x.steps);
}

struct candidate {
  std::string id;                 // content hash of source + options + plan
  std::string task;               // task name
  std::string source;             // CUDA C++ device code
  std::vector<std::string> compile_options;  // extra NVRTC options (e.g. --use_fast_math)
  launch_plan plan;
  std::string origin;             // "seed:TEMPLATE", "optimize:METHOD", "repair", …
  std::string parent_id;          // candidate this one was derived from, or empty
  uint32_t round = 0;
  // How a template backend built it (the rules coder: template name and parameters),
  // so that a later method can be applied as a parameter change; empty for code an
  // LLM wrote. Not part of the id: the source and plan already say what runs.
  std::map<std::string, std::string> recipe;
  friend bool operator==(const candidate&, const candidate&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, candidate& x) {
  return f(caf::meta::type_name("candidate"), x.id, x.task, x.source,
           x.compile_options, x.plan, x.origin, x.parent_id, x.round, x.recipe);
}

// ---------------------------------------------------------------------------
// Reviews: compile, verify, time and profile one candidate against its task.

enum class review_status : uint8_t {
  ok = 0,             // compiled, correct in every trial, timed
  compile_error = 1,  // NVRTC rejected the source (see diagnostics)
  plan_error = 2,     // the launch plan does not fit the source or the shapes
  incorrect = 3,      // ran, but an output differs from the reference
  crashed = 4,        // the worker died or the CUDA context was lost
  timed_out = 5,      // killed after the review timeout
  internal_error = 6, // KernelSkill's own failure (not the candidate's fault)
};
const char* to_string(review_status s);

struct review_options {
  uint32_t trials = 5;
  bool profile = true;
  bool time = true;
  double timeout_s = 60.0;
  double suspicious_speedup = 20.0;  // flag speedups above this
  std::string size;                   // named size from task_spec::sizes, or empty
  friend bool operator==(const review_options&, const review_options&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, review_options& x) {
  return f(caf::meta::type_name("review_options"), x.trials, x.profile, x.time,
           x.timeout_s, x.suspicious_speedup, x.size);
}

struct review_request {
  uint64_t request_id = 0;
  task_spec task;
  candidate cand;
  review_options options;
  friend bool operator==(const review_request&, const review_request&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, review_request& x) {
  return f(caf::meta::type_name("review_request"), x.request_id, x.task, x.cand,
           x.options);
}

// One compiler message, positioned in the candidate's source.
struct compile_diagnostic {
  int32_t line = 0;
  int32_t column = 0;
  std::string severity;  // "error", "warning"
  std::string message;
  friend bool operator==(const compile_diagnostic&, const compile_diagnostic&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compile_diagnostic& x) {
  return f(caf::meta::type_name("compile_diagnostic"), x.line, x.column, x.severity,
           x.message);
}

// Resource use of one compiled kernel, as the compiler reports it.
struct kernel_resources {
  std::string kernel;
  int32_t registers = 0;
  int32_t static_shared_bytes = 0;
  int32_t local_bytes = 0;        // per thread; > 0 means spills or local arrays
  int32_t max_threads_per_block = 0;
  friend bool operator==(const kernel_resources&, const kernel_resources&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kernel_resources& x) {
  return f(caf::meta::type_name("kernel_resources"), x.kernel, x.registers,
           x.static_shared_bytes, x.local_bytes, x.max_threads_per_block);
}

struct timing_stats {
  double median_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0, stddev_ms = 0;
  uint32_t repetitions = 0;
  friend bool operator==(const timing_stats&, const timing_stats&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, timing_stats& x) {
  return f(caf::meta::type_name("timing_stats"), x.median_ms, x.mean_ms, x.min_ms,
           x.max_ms, x.stddev_ms, x.repetitions);
}

// Hardware metrics of a candidate's run. Names are stable (the decision policy reads
// them): dram_throughput_pct, l2_throughput_pct, l1_throughput_pct,
// sm_throughput_pct, achieved_occupancy_pct, branch_efficiency_pct,
// eligible_warps_per_cycle, stall_long_scoreboard_pct, … (see docs/metrics.md).
struct profile_metrics {
  std::map<std::string, double> values;
  uint32_t kernel_launches = 0;
  double duration_ms = 0;
  friend bool operator==(const profile_metrics&, const profile_metrics&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, profile_metrics& x) {
  return f(caf::meta::type_name("profile_metrics"), x.values, x.kernel_launches,
           x.duration_ms);
}

struct review_result {
  uint64_t request_id = 0;
  std::string candidate_id;
  review_status status = review_status::internal_error;
  std::string message;                        // one-paragraph summary for people and agents
  std::vector<compile_diagnostic> diagnostics;
  std::string compile_log;
  uint32_t trials_run = 0;
  uint32_t trials_passed = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  timing_stats candidate_time;
  timing_stats reference_time;
  double speedup = 0;                          // reference median / candidate median
  profile_metrics profile;
  std::vector<kernel_resources> resources;
  std::vector<std::string> flags;              // suspicious findings, e.g. "no_custom_kernel"
  std::string device;                          // "node/ordinal: name"
  friend bool operator==(const review_result&, const review_result&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, review_result& x) {
  return f(caf::meta::type_name("review_result"), x.request_id, x.candidate_id,
           x.status, x.message, x.diagnostics, x.compile_log, x.trials_run,
           x.trials_passed, x.max_abs_error, x.max_rel_error, x.candidate_time,
           x.reference_time, x.speedup, x.profile, x.resources, x.flags, x.device);
}

// ---------------------------------------------------------------------------
// Analysis and planning.

// Static features of a kernel (docs/features.md): numeric or 0/1 values by name,
// plus the structure class (streaming, reuse, irregular, reduction, multi_kernel).
struct code_features {
  std::string candidate_id;
  std::string structure_class;
  std::map<std::string, double> values;
  friend bool operator==(const code_features&, const code_features&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, code_features& x) {
  return f(caf::meta::type_name("code_features"), x.candidate_id, x.structure_class,
           x.values);
}

// A method the decision policy allows, with the rules that fired and the evidence.
struct method_choice {
  std::string method;
  double score = 0;
  std::vector<std::string> fired_rules;
  std::map<std::string, double> evidence;
  friend bool operator==(const method_choice&, const method_choice&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, method_choice& x) {
  return f(caf::meta::type_name("method_choice"), x.method, x.score, x.fired_rules,
           x.evidence);
}

struct method_veto {
  std::string method;
  std::string reason;
  friend bool operator==(const method_veto&, const method_veto&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, method_veto& x) {
  return f(caf::meta::type_name("method_veto"), x.method, x.reason);
}

// The planner's decision for one round: the bottleneck it diagnosed, the ranked
// allowed methods, the vetoed ones, and the one chosen.
struct optimization_plan {
  std::string candidate_id;
  std::string bottleneck_class;
  std::vector<method_choice> ranked;
  std::vector<method_veto> vetoed;
  std::string chosen;
  std::string rationale;
  friend bool operator==(const optimization_plan&, const optimization_plan&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, optimization_plan& x) {
  return f(caf::meta::type_name("optimization_plan"), x.candidate_id,
           x.bottleneck_class, x.ranked, x.vetoed, x.chosen, x.rationale);
}

// The diagnoser's reading of a failure and what the repairer should do about it.
struct repair_plan {
  std::string candidate_id;
  std::string diagnosis;
  std::vector<std::string> actions;
  friend bool operator==(const repair_plan&, const repair_plan&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, repair_plan& x) {
  return f(caf::meta::type_name("repair_plan"), x.candidate_id, x.diagnosis, x.actions);
}

// One event of a task's trajectory (short-term memory). Append-only, numbered by seq.
struct trajectory_entry {
  std::string task;
  uint64_t seq = 0;
  int64_t unix_ms = 0;
  uint32_t round = 0;
  std::string kind;          // seed, review, diagnose, repair, plan, optimize, note
  std::string candidate_id;
  std::string parent_id;
  std::string method;        // method applied or repair action, if any
  review_status status = review_status::ok;
  double speedup = 0;
  std::string summary;
  std::map<std::string, double> metrics;
  friend bool operator==(const trajectory_entry&, const trajectory_entry&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trajectory_entry& x) {
  return f(caf::meta::type_name("trajectory_entry"), x.task, x.seq, x.unix_ms, x.round,
           x.kind, x.candidate_id, x.parent_id, x.method, x.status, x.speedup,
           x.summary, x.metrics);
}

// An error reported as a reply (an agent or worker could not do what was asked).
// code: a short machine-readable word (bad_request, unavailable, …).
struct ks_error {
  std::string code;
  std::string message;
  std::string origin;  // which actor or node
  friend bool operator==(const ks_error&, const ks_error&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ks_error& x) {
  return f(caf::meta::type_name("ks_error"), x.code, x.message, x.origin);
}

// ---------------------------------------------------------------------------
// Agent requests.

struct generate_request {
  task_spec task;
  uint32_t seeds = 4;
  friend bool operator==(const generate_request&, const generate_request&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generate_request& x) {
  return f(caf::meta::type_name("generate_request"), x.task, x.seeds);
}

struct diagnose_request {
  task_spec task;
  candidate cand;
  review_result review;
  std::vector<trajectory_entry> history;
  friend bool operator==(const diagnose_request&, const diagnose_request&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, diagnose_request& x) {
  return f(caf::meta::type_name("diagnose_request"), x.task, x.cand, x.review,
           x.history);
}

// cand failed review (review says how); plan is the diagnoser's reading. last_good
// holds the latest correct ancestor of cand, when there is one (0 or 1 entries).
struct repair_request {
  task_spec task;
  candidate cand;
  repair_plan plan;
  review_result review;
  std::vector<candidate> last_good;
  std::vector<trajectory_entry> history;
  friend bool operator==(const repair_request&, const repair_request&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, repair_request& x) {
  return f(caf::meta::type_name("repair_request"), x.task, x.cand, x.plan, x.review,
           x.last_good, x.history);
}

struct feature_request {
  candidate cand;
  review_result review;
  friend bool operator==(const feature_request&, const feature_request&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feature_request& x) {
  return f(caf::meta::type_name("feature_request"), x.cand, x.review);
}

struct plan_request {
  task_spec task;
  candidate cand;
  review_result review;
  code_features features;
  std::vector<trajectory_entry> history;
  friend bool operator==(const plan_request&, const plan_request&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, plan_request& x) {
  return f(caf::meta::type_name("plan_request"), x.task, x.cand, x.review, x.features,
           x.history);
}

// Apply plan.chosen to cand (correct; review and features are its own).
struct optimize_request {
  task_spec task;
  candidate cand;
  optimization_plan plan;
  review_result review;
  code_features features;
  std::vector<trajectory_entry> history;
  friend bool operator==(const optimize_request&, const optimize_request&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, optimize_request& x) {
  return f(caf::meta::type_name("optimize_request"), x.task, x.cand, x.plan, x.review,
           x.features, x.history);
}

// ---------------------------------------------------------------------------
// Task runs: what a task coordinator reports while it works and when it ends.

// A task's state as its coordinator last reported it. state: queued, generating,
// reviewing, repairing, planning, optimizing, done, failed.
struct task_progress {
  std::string task;
  std::string state;
  uint32_t round = 0;
  uint32_t reviews = 0;
  double best_speedup = 0;     // of the best correct candidate so far; 0: none yet
  std::string best_candidate;
  std::string detail;          // one line for people: what just happened
  friend bool operator==(const task_progress&, const task_progress&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_progress& x) {
  return f(caf::meta::type_name("task_progress"), x.task, x.state, x.round, x.reviews,
           x.best_speedup, x.best_candidate, x.detail);
}

// How one task's run ended. success: a correct kernel was found (best/best_review
// hold it). reason says how the run stopped ("round budget spent", "no allowed
// method left", or why it failed).
struct task_outcome {
  std::string task;
  bool success = false;
  std::string reason;
  candidate best;
  review_result best_review;
  uint32_t rounds = 0;         // optimisation rounds run, over all seed lines
  uint32_t reviews = 0;
  uint32_t agent_restarts = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  double wall_s = 0;
  friend bool operator==(const task_outcome&, const task_outcome&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_outcome& x) {
  return f(caf::meta::type_name("task_outcome"), x.task, x.success, x.reason, x.best,
           x.best_review, x.rounds, x.reviews, x.agent_restarts, x.input_tokens,
           x.output_tokens, x.cost_usd, x.wall_s);
}

// ---------------------------------------------------------------------------
// GPU workers.

struct device_info {
  int32_t ordinal = 0;
  std::string name;
  int32_t cc_major = 0;
  int32_t cc_minor = 0;
  uint64_t total_memory_bytes = 0;
  int32_t multiprocessors = 0;
  int32_t clock_mhz = 0;
  friend bool operator==(const device_info&, const device_info&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_info& x) {
  return f(caf::meta::type_name("device_info"), x.ordinal, x.name, x.cc_major,
           x.cc_minor, x.total_memory_bytes, x.multiprocessors, x.clock_mhz);
}

// What a worker process says about itself. driver_error is non-empty when the CUDA
// driver could not be loaded or initialised (then devices is empty).
struct worker_info {
  std::string host;
  int32_t pid = 0;
  std::string version;
  int32_t driver_version = 0;
  std::string driver_error;
  std::vector<device_info> devices;
  friend bool operator==(const worker_info&, const worker_info&) = default;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_info& x) {
  return f(caf::meta::type_name("worker_info"), x.host, x.pid, x.version,
           x.driver_version, x.driver_error, x.devices);
}

// ---------------------------------------------------------------------------
// Atoms and actor interfaces.

using describe_atom = caf::atom_constant<caf::atom("describe")>;

// A kernelskill-gpu process (one per GPU): does all GPU work for its device.
using gpu_worker_actor = caf::typed_actor<
    caf::replies_to<describe_atom>::with<worker_info>,
    caf::replies_to<review_request>::with<review_result>>;

// In the daemon, one per device: queues review requests, sends one at a time to its
// worker, restarts the worker when it dies.
using gpu_pool_actor = caf::typed_actor<
    caf::replies_to<describe_atom>::with<worker_info>,
    caf::replies_to<review_request>::with<review_result>>;

// The agents. Each answers one kind of request; the task coordinator drives them.
using generator_actor =
    caf::typed_actor<caf::replies_to<generate_request>::with<std::vector<candidate>>>;
using reviewer_actor =
    caf::typed_actor<caf::replies_to<review_request>::with<review_result>>;
using feature_extractor_actor =
    caf::typed_actor<caf::replies_to<feature_request>::with<code_features>>;
using diagnoser_actor =
    caf::typed_actor<caf::replies_to<diagnose_request>::with<repair_plan>>;
using repairer_actor = caf::typed_actor<caf::replies_to<repair_request>::with<candidate>>;
using planner_actor =
    caf::typed_actor<caf::replies_to<plan_request>::with<optimization_plan>>;
using optimizer_actor =
    caf::typed_actor<caf::replies_to<optimize_request>::with<candidate>>;

// Registers every message type above under its wire name. Both ends of a network
// link must call it, or remote_actor fails with unexpected_actor_messaging_interface.
void register_protocol(caf::actor_system_config& cfg);

// The protocol's version, exchanged in worker_info: "kernelskill/1".
inline constexpr const char* protocol_version = "kernelskill/1";

}  // namespace ks
