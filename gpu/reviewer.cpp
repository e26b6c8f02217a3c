// The reviewer: compile, resolve, run, verify and time one candidate (docs/reviewer.md).
// With gpu/library_ops.cpp and gpu/output_check.cpp, one of the three translation
// units of the reviewer that include ATen's functions (each costs 10-40 s to compile).
#include "gpu/reviewer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <list>
#include <map>
#include <optional>
#include <set>

#include <ATen/Functions.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include "base/content_hash.hpp"
#include "base/number_format.hpp"
#include "base/strings.hpp"
#include "gpu/cuda_driver.hpp"
#include "gpu/graph_replay.hpp"
#include "gpu/kernel_args.hpp"
#include "gpu/library_ops.hpp"
#include "gpu/output_check.hpp"
#include "gpu/profiler.hpp"
#include "gpu/result_adoption.hpp"
#include "gpu/torch_reference_tensors.hpp"
#include "gpu/trial_cache.hpp"
#include "plan/launch_bound.hpp"
#include "plan/plan_validator.hpp"
#include "task/task_loader.hpp"

namespace ks {

// ---------------------------------------------------------------------------
// Torch-free helpers declared in reviewer.hpp.

std::string arch_for(int cc_major, int cc_minor) {
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + (cc_major >= 9 ? "a" : "");
}

// ---------------------------------------------------------------------------
// The reviewer.

namespace {

using clock_type = std::chrono::steady_clock;

// Thrown inside the reviewer to end a review with a status and a message; review()
// catches it. Never escapes this file.
struct review_failure {
  review_status status;
  std::string message;
};

[[noreturn]] void fail(review_status s, std::string message) { throw review_failure{s, std::move(message)}; }

// Adds the wall time of its scope to one phase of `phases`, less the time that scopes
// inside it added to other phases meanwhile (the reference's runs inside verification
// count as reference, not twice). Ends with its scope, also when a review fails.
class phase_scope {
 public:
  phase_scope(review_phases& phases, double review_phases::*phase)
      : phases_(phases), phase_(phase), inner0_(phases.total_s()) {}
  ~phase_scope() {
    const double all = std::chrono::duration<double>(clock_type::now() - t0_).count();
    const double inner = phases_.total_s() - inner0_;
    phases_.*phase_ += std::max(0.0, all - inner);
  }
  phase_scope(const phase_scope&) = delete;
  phase_scope& operator=(const phase_scope&) = delete;

 private:
  review_phases& phases_;
  double review_phases::*phase_;
  double inner0_;
  clock_type::time_point t0_ = clock_type::now();
};

at::ScalarType scalar_type_of(const std::string& dtype) {
  if (auto t = scalar_type(dtype)) return *t;
  fail(review_status::plan_error, "unknown dtype '" + dtype + "'");
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string shape_of(const at::Tensor& t) { return shape_to_string(t.sizes().vec()); }

// One task the reviewer has seen: its reference, ready to run. Its trials' inputs and
// reference outputs are in the trial cache, under `key`, which covers where they are
// drawn: device and CPU draws of a task are different values, so different entries.
struct task_entry {
  std::string key;
  task_spec task;  // at the requested size
  input_draw draw = input_draw::device;
  std::unique_ptr<reference_program> program;
  std::vector<at::Tensor> pristine_params;     // copies of the program's parameters
  std::vector<tensor_info> reference_outputs;  // learned from its first run
};

uint64_t bytes_of(const std::vector<at::Tensor>& ts) {
  uint64_t b = 0;
  for (auto& t : ts) b += static_cast<uint64_t>(t.numel()) * t.element_size();
  return b;
}

std::vector<int64_t> fingerprints(const std::vector<at::Tensor>& ts) {
  std::vector<int64_t> out;
  for (const auto& t : ts) out.push_back(bit_fingerprint(t));
  return out;
}

// One trial in the trial cache: its inputs as drawn (pristine: runs get copies) and,
// once the reference has run on them, the reference's outputs; with the fingerprints
// they had when stored, checked whenever they are used (a candidate that writes
// outside its own buffers could otherwise corrupt every later review of the task).
struct trial_data {
  std::vector<at::Tensor> inputs;
  std::vector<int64_t> input_prints;
  bool has_reference = false;
  std::vector<at::Tensor> reference;
  std::vector<int64_t> reference_prints;
  bool intact() const {
    return fingerprints(inputs) == input_prints && (!has_reference || fingerprints(reference) == reference_prints);
  }
};

// A candidate's plan, ready to launch: the resolved plan and its kernels' functions.
struct prepared_plan {
  resolved_plan plan;
  std::map<std::string, CUfunction> functions;
  bool launches_kernel = false;
  std::set<std::string> kernel_reads;  // tensors_read_by_kernels(plan)
  // Library steps by index, prepared on their first run (gpu/library_ops.hpp): the
  // dispatcher's operator and stack are built once per plan, not once per call.
  mutable std::map<size_t, prepared_library_op> library_ops;
};

struct module_guard {
  const cuda_driver* drv = nullptr;
  CUmodule module = nullptr;
  ~module_guard() {
    if (module) drv->cuModuleUnload(module);
  }
};

using tensor_env = std::map<std::string, at::Tensor>;

}  // namespace

struct reviewer::impl {
  reviewer_options opts;
  const cuda_driver* drv = nullptr;
  device_info dev;
  CUdevice cu_device = 0;
  CUcontext context = nullptr;
  c10::Device torch_device{c10::kCUDA, 0};
  std::unique_ptr<nvrtc_compiler> compiler;
  std::string arch;
  device_limits limits;
  int64_t l2_bytes = 0;
  at::Tensor flush_buffer;
  uint32_t flush_value = 0;
  CUevent start_event = nullptr, end_event = nullptr;
  bool lost = false;
  std::string lost_reason;
  CUstream stream_ = nullptr;   // where launch() enqueues: a CUDA graph's capture stream while captured
  bool capturing = false;       // a failure then refuses the graph; no synchronising
  std::list<task_entry> tasks;  // most recently used first
  ks::trial_cache<trial_data> trials{0};
  uint64_t reference_runs = 0;           // in verification (trial_cache_state::reference_runs)
  uint64_t cache_cap = 0;                // what the trial cache may hold during this review
  bool bypass_cache = false;             // this review caches nothing (a retry after running out of memory)
  std::set<std::string> uncached_tasks;  // tasks (keys) whose reviews ran out of memory with trials cached
  trial_footprint footprint;             // of this review's task and plan (for messages)
  std::string node;
  std::unique_ptr<profiler> prof;
  sm_limits sm;

  ~impl() {
    prof.reset();
    tasks.clear();
    trials = ks::trial_cache<trial_data>(0);
    flush_buffer = at::Tensor();
    if (!lost) {
      if (start_event) drv->cuEventDestroy(start_event);
      if (end_event) drv->cuEventDestroy(end_event);
    }
    if (context) drv->cuDevicePrimaryCtxRelease(cu_device);
  }

  // --- CUDA errors ---

  // Ends the review as crashed when rc is an error; marks the context lost when the
  // error is sticky.
  void check_cu(CUresult rc, const std::string& what) {
    if (rc == CUDA_SUCCESS) return;
    std::string text = drv->describe(rc, what.c_str());
    if (poisons_context(rc)) {
      lost = true;
      lost_reason = text;
      text +=
          ". The CUDA context is lost: this worker answers every later review with "
          "'crashed' until it is restarted";
    }
    fail(review_status::crashed, text);
  }

  void sync(const std::string& what) { check_cu(drv->cuStreamSynchronize(nullptr), what + ": cuStreamSynchronize"); }

  // After LibTorch threw: a crash when the context is broken, else `otherwise`.
  [[noreturn]] void after_torch_error(const std::string& where, const std::string& message, review_status otherwise) {
    if (capturing) fail(otherwise, where + ": " + message);
    CUresult rc = drv->cuCtxSynchronize();
    if (rc != CUDA_SUCCESS) check_cu(rc, where + ": " + message + "; then cuCtxSynchronize");
    std::string text = where + ": " + message;
    if (message.find("out of memory") != std::string::npos) text += " (" + memory_note() + ")";
    fail(otherwise, text);
  }

  void make_current() { check_cu(drv->cuCtxSetCurrent(context), "cuCtxSetCurrent"); }

  // --- tasks and their inputs ---

  task_entry& task_for(const task_spec& task, input_draw draw) {
    std::string key = sha256_hex(to_yaml(task) + "\n" + sha256_hex(task.module_bytes) + "\ndraw " + to_string(draw));
    for (auto it = tasks.begin(); it != tasks.end(); ++it)
      if (it->key == key) {
        tasks.splice(tasks.begin(), tasks, it);
        return tasks.front();
      }
    reference_options ro;
    ro.device = "cuda:" + std::to_string(dev.ordinal);
    ro.draw = draw;
    auto program = reference_program::load(task, ro);
    if (!program) fail(review_status::internal_error, "the task's reference cannot run: " + program.message());
    task_entry e;
    e.key = key;
    e.task = task;
    e.draw = draw;
    e.program = std::move(program.value());
    for (auto& p : parameter_tensors(*e.program)) e.pristine_params.push_back(p.clone());
    tasks.push_front(std::move(e));
    while (tasks.size() > 4) tasks.pop_back();
    return tasks.front();
  }

  // Trial `trial`'s inputs: from the trial cache, or drawn now (and cached when they
  // fit). A cached trial whose data no longer matches its fingerprints (a candidate of
  // an earlier review wrote outside its buffers after its checks, while timed or
  // profiled) is dropped and drawn again.
  std::vector<at::Tensor> inputs_for(task_entry& e, uint32_t trial) {
    if (trial_data* d = trials.find(e.key, trial)) {
      if (d->intact()) return d->inputs;
      spdlog::warn(
          "the cached data of trial {} of task '{}' changed since it was stored (a candidate wrote "
          "outside its buffers); drawing it again",
          trial, e.task.name);
      trials.erase(e.key, trial);
    }
    auto made = make_inputs(trial_task(e.task, trial), trial_seed(e.task.seed, trial), torch_device, e.draw);
    if (!made) fail(review_status::internal_error, "cannot make the task's inputs: " + made.message());
    const uint64_t need = bytes_of(*made);
    if (trials.fits(e.key, trial, need, cache_cap)) {
      trial_data d;
      d.inputs = *made;
      d.input_prints = fingerprints(d.inputs);
      trials.put(e.key, trial, std::move(d), need, cache_cap);
    }
    return std::move(made.value());
  }

  // The reference's outputs of trial `trial`, whose inputs are `originals`: from the
  // trial cache, or run now on copies of them (and cached beside them when they fit).
  // Called after the candidate's runs: cached data that changed meanwhile was changed by
  // the candidate, which is then a problem of this trial (and the data is dropped).
  std::vector<at::Tensor> reference_for(task_entry& e, uint32_t trial, const std::vector<at::Tensor>& originals,
                                        const std::string& label, std::vector<std::string>& problems) {
    bool tampered = false;
    if (trial_data* d = trials.find(e.key, trial)) {
      if (!d->intact()) {
        tampered = true;
        problems.push_back("the reviewer's cached " +
                           std::string(d->has_reference ? "inputs or reference outputs" : "inputs") +
                           " of this trial changed while the candidate ran: it writes outside its own buffers");
        trials.erase(e.key, trial);
      } else if (d->has_reference) {
        return d->reference;
      }
    }
    std::vector<at::Tensor> ref_inputs;
    {
      phase_scope in(phases, &review_phases::inputs_s);
      ref_inputs = clones(originals);
      sync(label + ", copying the inputs for the reference");
    }
    std::vector<at::Tensor> ref;
    {
      phase_scope reference(phases, &review_phases::reference_s);
      ++reference_runs;
      ref = run_reference(e, std::move(ref_inputs), label + ", reference");
      sync(label + ", reference");
    }
    if (tampered) return ref;  // the originals may be what the candidate changed
    const uint64_t need = bytes_of(originals) + bytes_of(ref);
    if (trials.fits(e.key, trial, need, cache_cap)) {
      trial_data d;
      d.inputs = originals;
      d.input_prints = fingerprints(originals);
      d.has_reference = true;
      d.reference = ref;
      d.reference_prints = fingerprints(ref);
      trials.put(e.key, trial, std::move(d), need, cache_cap);
    }
    return ref;
  }

  std::vector<at::Tensor> clones(const std::vector<at::Tensor>& ts) {
    std::vector<at::Tensor> out;
    for (auto& t : ts) out.push_back(t.clone(at::MemoryFormat::Contiguous));
    return out;
  }

  // The candidate's own copies of the inputs and parameters, by name.
  tensor_env candidate_env(const task_entry& e, const std::vector<at::Tensor>& inputs) {
    tensor_env env;
    for (size_t i = 0; i < e.task.inputs.size(); ++i)
      env[e.task.inputs[i].name] = inputs[i].clone(at::MemoryFormat::Contiguous);
    for (size_t i = 0; i < e.task.parameters.size() && i < e.pristine_params.size(); ++i)
      env[e.task.parameters[i].name] = e.pristine_params[i].clone(at::MemoryFormat::Contiguous);
    return env;
  }

  // What one trial of this task and plan takes; an error naming the sizes when it does
  // not fit the device at all; then the trial cache's cap for this review, and the
  // cache trimmed to it (other tasks' trials first).
  void make_room(const task_entry& e, const prepared_plan& pp) {
    footprint = trial_footprint{};
    footprint.inputs = bytes_of(e.task.inputs);
    footprint.parameters = bytes_of(e.task.parameters);
    for (const auto& b : pp.plan.outputs) {
      const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(b.numel(), 0));
      footprint.outputs += static_cast<uint64_t>(std::max<int64_t>(b.bytes(), 0));
      footprint.compare += estimate_compare_bytes(n, static_cast<uint64_t>(std::max<int64_t>(dtype_size(b.dtype), 0)));
    }
    for (const auto& b : pp.plan.scratch) footprint.scratch += static_cast<uint64_t>(std::max<int64_t>(b.bytes(), 0));
    trial_footprint task_only = footprint;
    task_only.scratch = 0;
    if (auto st = check_fits_device(task_only, dev.total_memory_bytes, dev.name); !st)
      fail(review_status::internal_error, st.message());
    if (auto st = check_fits_device(footprint, dev.total_memory_bytes, dev.name); !st)
      fail(review_status::plan_error, "with the plan's scratch buffers, " + st.message());
    // A task that ran out of memory once caches nothing from then on: its later reviews
    // do not pay for a failed first attempt each.
    if (bypass_cache) uncached_tasks.insert(e.key);
    const bool no_cache = uncached_tasks.count(e.key) > 0;
    cache_cap = no_cache ? 0 : trial_cache_cap(trials.budget(), dev.total_memory_bytes, footprint);
    trials.trim(e.key, cache_cap);
  }

  // "inputs 6.40 GB, outputs …": for an out-of-memory message.
  std::string memory_note() const {
    if (footprint.cached() == 0)  // before make_room: the task's sizes are not known yet
      return "the trial cache held " + describe_bytes(trials.used()) + " of the device's " +
             describe_bytes(dev.total_memory_bytes);
    return "one trial of this task takes inputs " + describe_bytes(footprint.inputs) + ", outputs " +
           describe_bytes(footprint.outputs) + ", parameters " + describe_bytes(footprint.parameters) + ", scratch " +
           describe_bytes(footprint.scratch) + "; the trial cache held " + describe_bytes(trials.used()) + " (cap " +
           describe_bytes(cache_cap) + ") of the device's " + describe_bytes(dev.total_memory_bytes);
  }

  // --- the plan ---

  prepared_plan prepare(resolved_plan plan, const std::string& cubin, module_guard& mod, review_result& r) {
    prepared_plan pp;
    pp.plan = std::move(plan);
    pp.kernel_reads = tensors_read_by_kernels(pp.plan);
    mod.drv = drv;
    check_cu(drv->cuModuleLoadData(&mod.module, cubin.data()), "cuModuleLoadData");
    auto attr = [&](CUfunction fn, CUfunction_attribute a, const std::string& what) {
      int v = 0;
      check_cu(drv->cuFuncGetAttribute(&v, a, fn), what + ": cuFuncGetAttribute");
      return v;
    };
    std::map<std::string, int64_t> max_dynamic;
    for (const auto& s : pp.plan.steps) {
      if (s.kind != "kernel") continue;
      pp.launches_kernel = true;
      const std::string label = s.label();
      if (!pp.functions.count(s.name)) {
        CUfunction fn = nullptr;
        CUresult rc = drv->cuModuleGetFunction(&fn, mod.module, s.name.c_str());
        if (rc == CUDA_ERROR_NOT_FOUND)
          fail(review_status::plan_error, label + ": the compiled module has no kernel named '" + s.name + "'");
        check_cu(rc, label + ": cuModuleGetFunction");
        pp.functions[s.name] = fn;
      }
      CUfunction fn = pp.functions[s.name];
      const int64_t threads = s.block[0] * s.block[1] * s.block[2];
      const int max_threads = attr(fn, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, label);
      if (threads > max_threads)
        fail(review_status::plan_error,
             label + ": block: " + std::to_string(threads) + " threads, but the compiled kernel can run at most " +
                 std::to_string(max_threads) + " per block (it uses " +
                 std::to_string(attr(fn, CU_FUNC_ATTRIBUTE_NUM_REGS, label)) +
                 " registers per thread); use a smaller block, __launch_bounds__ or -maxrregcount");
      const int64_t static_shared = attr(fn, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, label);
      if (static_shared + s.shared_mem_bytes > limits.max_shared_mem_bytes)
        fail(review_status::plan_error, label + ": shared_mem: " + std::to_string(s.shared_mem_bytes) +
                                            " bytes of dynamic shared memory plus the kernel's " +
                                            std::to_string(static_shared) +
                                            " bytes of static shared memory exceed the device's limit of " +
                                            std::to_string(limits.max_shared_mem_bytes) + " bytes per block");
      int64_t& m = max_dynamic[s.name];
      m = std::max(m, s.shared_mem_bytes);
    }
    for (auto& [name, dyn] : max_dynamic) {
      CUfunction fn = pp.functions[name];
      const int64_t static_shared = attr(fn, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, name);
      if (static_shared + dyn > 48 * 1024)
        check_cu(drv->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(dyn)),
                 "kernel " + name + ": cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, " + std::to_string(dyn) + ")");
    }
    // Resources: the compiler's numbers, completed from the loaded module.
    if (r.resources.empty())
      for (auto& [name, fn] : pp.functions) r.resources.push_back({name, 0, 0, 0, 0});
    for (auto& k : r.resources) {
      CUfunction fn = nullptr;
      if (drv->cuModuleGetFunction(&fn, mod.module, k.kernel.c_str()) != CUDA_SUCCESS) continue;
      k.max_threads_per_block = attr(fn, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k.kernel);
      if (k.registers == 0) k.registers = attr(fn, CU_FUNC_ATTRIBUTE_NUM_REGS, k.kernel);
      if (k.static_shared_bytes == 0) k.static_shared_bytes = attr(fn, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k.kernel);
      if (k.local_bytes == 0) k.local_bytes = attr(fn, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k.kernel);
    }
    return pp;
  }

  void launch(const prepared_plan& pp, const resolved_step& s, tensor_env& env) {
    auto args = pack_kernel_args(s, [&](const std::string& name) -> result<uint64_t> {
      auto it = env.find(name);
      if (it == env.end()) return error{"no tensor named '" + name + "'"};
      return reinterpret_cast<uint64_t>(it->second.data_ptr());
    });
    if (!args) fail(review_status::plan_error, args.message());
    check_cu(
        drv->cuLaunchKernel(pp.functions.at(s.name), static_cast<unsigned>(s.grid[0]), static_cast<unsigned>(s.grid[1]),
                            static_cast<unsigned>(s.grid[2]), static_cast<unsigned>(s.block[0]),
                            static_cast<unsigned>(s.block[1]), static_cast<unsigned>(s.block[2]),
                            static_cast<unsigned>(s.shared_mem_bytes), stream_, args->pointers(), nullptr),
        s.label() + ": cuLaunchKernel");
  }

  void library(const prepared_plan& pp, const resolved_step& s, tensor_env& env) {
    std::vector<library_arg> args;
    for (auto& a : s.args) {
      if (a.kind == "tensor") {
        auto it = env.find(a.tensor);
        if (it == env.end()) fail(review_status::plan_error, s.label() + ": no tensor named '" + a.tensor + "'");
        args.push_back(library_arg::of(it->second));
      } else if (a.kind == "int") {
        args.push_back(library_arg::of_int(a.int_value));
      } else {
        args.push_back(library_arg::of_float(a.float_value));
      }
    }
    auto prepared = pp.library_ops.find(s.index);
    if (prepared == pp.library_ops.end()) {
      auto p = prepare_library_op(s.name, args, s.attrs);
      if (!p) after_torch_error(s.label(), p.message(), review_status::plan_error);
      prepared = pp.library_ops.emplace(s.index, std::move(p.value())).first;
    }
    auto outs = run_prepared_library_op(prepared->second, args);
    if (!outs) after_torch_error(s.label(), outs.message(), review_status::plan_error);
    if (s.outputs.empty() || s.outputs.size() > outs->size())
      fail(review_status::plan_error, s.label() + ": outputs: the op returns " + std::to_string(outs->size()) +
                                          " tensor(s), " + std::to_string(s.outputs.size()) + " names given");
    for (size_t k = 0; k < s.outputs.size(); ++k) {
      const at::Tensor& out = (*outs)[k];
      const std::string& name = s.outputs[k];
      const resolved_buffer* declared = pp.plan.find_buffer(name);
      const bool buffer = declared && declared->role != buffer_role::intermediate;
      const result_target to =
          target_of(buffer, buffer && declared->role == buffer_role::scratch, pp.kernel_reads.count(name) > 0);
      if (to == result_target::kernel_intermediate || to == result_target::library_intermediate) {
        // Kernels index an intermediate row-major; library ops take a view's strides
        // (a transposed operand of a matmul stays a transpose flag, as in eager).
        env[name] = to == result_target::kernel_intermediate ? out.contiguous() : out;
        continue;
      }
      at::Tensor& dst = env.at(name);
      if (out.sizes() != dst.sizes() || out.scalar_type() != dst.scalar_type())
        fail(review_status::plan_error, s.label() + ": outputs[" + std::to_string(k) + "] '" + name +
                                            "': the op returned " + shape_of(out) + " " + dtype_name(out) +
                                            ", but the buffer is declared " + shape_of(dst) + " " + dtype_name(dst));
      // Scratch that no kernel touches stands for the result as the op returned it (a
      // transposed view of an input: the next library op takes its strides, as eager
      // does). Otherwise taken as the buffer when nothing else can see its memory
      // (gpu/result_adoption.hpp): the copy was a full pass over the output.
      if (to == result_target::library_scratch) {
        dst = out;
        continue;
      }
      std::vector<const at::Tensor*> live;
      for (const auto& a : s.args)
        if (a.kind == "tensor" && a.tensor != name) live.push_back(&env.at(a.tensor));
      if (result_adoption::adoptable(*outs, k, dst, live))
        dst = out;
      else
        dst.copy_(out);
    }
  }

  // Runs the plan once on `env` (the candidate's inputs and parameters): allocates its
  // buffers (zero-filled for init: zeros; otherwise poisoned with `pattern` 0 or 1, or
  // left as allocated for -1, as in timed runs), runs the steps, returns the outputs.
  std::vector<at::Tensor> run_plan(const prepared_plan& pp, tensor_env env, int pattern) {
    try {
      auto options = at::TensorOptions().device(torch_device);
      for (const auto* list : {&pp.plan.outputs, &pp.plan.scratch})
        for (const auto& b : *list) {
          at::Tensor t = at::empty(b.shape, options.dtype(scalar_type_of(b.dtype)));
          if (b.init == "zeros")
            t.zero_();
          else if (pattern >= 0)
            poison(t, pattern);
          env[b.name] = t;
        }
      for (const auto& s : pp.plan.steps) {
        if (s.kind == "kernel")
          launch(pp, s, env);
        else
          library(pp, s, env);
      }
      std::vector<at::Tensor> outs;
      for (const auto& b : pp.plan.outputs) outs.push_back(env.at(b.name));
      return outs;
    } catch (const c10::Error& e) {
      after_torch_error("running the plan", torch_message(e), review_status::plan_error);
    }
  }

  std::vector<at::Tensor> run_reference(task_entry& e, const std::vector<at::Tensor>& inputs,
                                        const std::string& where) {
    auto out = run_tensors(*e.program, inputs);
    if (!out) after_torch_error(where, out.message(), review_status::internal_error);
    return std::move(out.value());
  }

  // --- verification ---

  // Problems with the candidate's copies of the inputs and parameters after a run.
  void check_unchanged(const task_entry& e, const tensor_env& env, const std::vector<at::Tensor>& originals,
                       const std::string& when, std::vector<std::string>& problems) {
    auto check = [&](const std::string& name, const at::Tensor& now, const at::Tensor& before) {
      int64_t d = first_bitwise_difference(now, before);
      if (d < 0) return;
      problems.push_back("mutates input " + name + " (" + when + ", first change at " + name +
                         index_string(before.sizes().vec(), d) + ": was " + plain_g(element_at(before, d)) + ", now " +
                         plain_g(element_at(now, d)) + "); a candidate must not write its inputs");
    };
    for (size_t i = 0; i < e.task.inputs.size(); ++i)
      check(e.task.inputs[i].name, env.at(e.task.inputs[i].name), originals[i]);
    for (size_t i = 0; i < e.task.parameters.size() && i < e.pristine_params.size(); ++i)
      check(e.task.parameters[i].name, env.at(e.task.parameters[i].name), e.pristine_params[i]);
  }

  std::string trial_label(const task_entry& e, uint32_t trial) {
    std::string label = "trial " + std::to_string(trial) + " (seed " + hex(trial_seed(e.task.seed, trial)) + ", ";
    if (trial % 2 == 0) return label + "the task's own distributions)";
    task_spec t = trial_task(e.task, trial);
    std::vector<std::string> changed;
    for (size_t i = 0; i < t.inputs.size(); ++i)
      if (!(t.inputs[i].init == e.task.inputs[i].init))
        changed.push_back(t.inputs[i].name + " ~ " + describe_distribution(t.inputs[i].init));
    if (changed.empty()) return label + "the task's own distributions: none of its inputs has a second one)";
    return label + "second distribution: " + join(changed, ", ") + ")";
  }

  void verify(const review_request& req, task_entry& e, const prepared_plan& pp, review_result& r,
              clock_type::time_point deadline) {
    const uint32_t trials = std::max<uint32_t>(req.options.trials, 1);
    const tolerance_spec& tol = e.task.tolerance;
    std::vector<std::string> failed;
    std::string first_failure;
    std::vector<at::Tensor> prev_outputs, prev_inputs, prev_refs;
    uint32_t independent_at = 0;
    uint32_t passed = 0;
    const std::set<std::string> library_outputs = outputs_last_written_by_library(pp.plan);
    bool library_nondeterministic = false;
    for (uint32_t k = 0; k < trials; ++k) {
      if (clock_type::now() > deadline)
        fail(review_status::timed_out, "the review took longer than its timeout of " + plain_g(req.options.timeout_s) +
                                           " s after " + std::to_string(k) + " of " + std::to_string(trials) +
                                           " trials");
      const std::string label = trial_label(e, k);
      std::vector<at::Tensor> originals;
      tensor_env env;
      {
        phase_scope in(phases, &review_phases::inputs_s);
        originals = inputs_for(e, k);
        env = candidate_env(e, originals);
        sync(label + ", copying the inputs");
      }
      std::vector<std::string> problems;

      // The candidate first, twice, on its own copies, with different poison.
      std::vector<at::Tensor> out_a = run_plan(pp, env, 0);
      sync(label + ", first candidate run");
      check_unchanged(e, env, originals, "first run", problems);
      const int second_poison = k % 2 == 0 ? 1 : 2;
      std::vector<at::Tensor> out_b = run_plan(pp, env, second_poison);
      sync(label + ", second candidate run");
      if (problems.empty()) check_unchanged(e, env, originals, "second run", problems);

      // Then the reference, on copies too (a reference may write its inputs in place),
      // or its outputs from an earlier review of the task.
      std::vector<at::Tensor> ref = reference_for(e, k, originals, label, problems);
      try {
        check_shapes(e, pp, ref);
        for (size_t i = 0; i < ref.size(); ++i) {
          const std::string& name = pp.plan.outputs[i].name;
          output_comparison c = compare_output(out_a[i], ref[i], tol);
          r.max_abs_error = std::max(r.max_abs_error, c.max_abs_error);
          r.max_rel_error = std::max(r.max_rel_error, c.max_rel_error);
          if (!c.ok) problems.push_back(mismatch_message(name, out_a[i], out_b[i], second_poison, c, tol));
        }
        for (size_t i = 0; i < out_a.size(); ++i) {
          int64_t d = first_bitwise_difference(out_a[i], out_b[i]);
          if (d < 0) continue;
          const std::string& name = pp.plan.outputs[i].name;
          // A library op's result may change in its last bits from run to run (as
          // eager's does): the second run is held to the tolerance instead.
          if (library_outputs.count(name) && i < ref.size()) {
            output_comparison c = compare_output(out_b[i], ref[i], tol);
            if (c.ok) {
              library_nondeterministic = true;
              continue;
            }
          }
          problems.push_back("output " + name + " differs between two runs on the same inputs (first at " + name +
                             index_string(out_a[i].sizes().vec(), d) + ": " + plain_g(element_at(out_a[i], d)) +
                             " vs " + plain_g(element_at(out_b[i], d)) +
                             "): a race, a read of memory nothing wrote (outputs and scratch are poisoned "
                             "differently in the two runs), or order-dependent atomics");
        }
        // Only where the reference's outputs differ too: a problem whose output does not
        // depend on its input at these distributions (a ReLU after a large subtraction,
        // all zeros) has correct kernels that look the same.
        if (k > 0 && !independent_at && inputs_differ(prev_inputs, originals) && outputs_equal(prev_outputs, out_a) &&
            !outputs_equal(prev_refs, ref))
          independent_at = k;
      } catch (const c10::Error& err) {
        after_torch_error(label + ", comparing outputs", torch_message(err), review_status::internal_error);
      }
      prev_outputs = out_a;
      prev_inputs = originals;
      prev_refs = ref;
      if (problems.empty()) {
        ++passed;
      } else {
        failed.push_back(std::to_string(k));
        if (first_failure.empty()) first_failure = label + ": " + join(problems, "; ");
      }
    }
    r.trials_run = trials;
    r.trials_passed = passed;
    if (independent_at) add_flag(r, "output_independent_of_input");
    if (library_nondeterministic) add_flag(r, "library_output_nondeterministic");
    if (passed < trials) {
      std::string msg = "incorrect in " + std::to_string(trials - passed) + " of " + std::to_string(trials) +
                        " trials (" + join(failed, ", ") + "). First: " + first_failure;
      if (independent_at)
        msg += ". The outputs of trials " + std::to_string(independent_at - 1) + " and " +
               std::to_string(independent_at) + " are bit-identical although their inputs differ";
      fail(review_status::incorrect, msg);
    }
    if (independent_at)
      independence_note = "its outputs in trials " + std::to_string(independent_at - 1) + " and " +
                          std::to_string(independent_at) + " are bit-identical although the inputs differ";
  }
  std::string independence_note;

  static void add_flag(review_result& r, const std::string& flag) {
    if (std::find(r.flags.begin(), r.flags.end(), flag) == r.flags.end()) r.flags.push_back(flag);
  }

  // The plan's outputs against the reference's: count, shapes and dtypes. Learned on
  // the task's first run; later reviews check them in the validator already.
  void check_shapes(task_entry& e, const prepared_plan& pp, const std::vector<at::Tensor>& ref) {
    if (e.reference_outputs.empty())
      for (auto& t : ref) e.reference_outputs.push_back({t.sizes().vec(), dtype_name(t)});
    if (ref.size() != pp.plan.outputs.size())
      fail(review_status::plan_error, "outputs: the plan returns " + std::to_string(pp.plan.outputs.size()) +
                                          " tensors, the reference " + std::to_string(ref.size()));
    for (size_t i = 0; i < ref.size(); ++i) {
      const resolved_buffer& b = pp.plan.outputs[i];
      if (b.shape != ref[i].sizes().vec() || b.dtype != dtype_name(ref[i]))
        fail(review_status::plan_error,
             "outputs[" + std::to_string(i) + "] '" + b.name + "': " + shape_to_string(b.shape) + " " + b.dtype +
                 ", but the reference returns " + shape_of(ref[i]) + " " + dtype_name(ref[i]));
    }
  }

  static bool inputs_differ(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
      if (first_bitwise_difference(a[i], b[i]) >= 0) return true;
    return false;
  }

  static bool outputs_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    if (a.size() != b.size() || a.empty()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (first_bitwise_difference(a[i], b[i]) >= 0) return false;
    return true;
  }

  // Whether `v`, an element of `t`, is the poison `pattern` wrote (NaN for pattern 0).
  static bool holds_poison(const at::Tensor& t, double v, int pattern) {
    const double p = poison_value(t, pattern);
    return std::isnan(p) ? std::isnan(v) : v == p;
  }

  std::string mismatch_message(const std::string& name, const at::Tensor& got, const at::Tensor& second,
                               int second_poison, const output_comparison& c, const tolerance_spec& tol) {
    const std::string at_index = name + index_string(got.sizes().vec(), c.first_bad);
    std::string msg = "output " + name + " " + shape_of(got) + ": " + std::to_string(c.bad_count) + " of " +
                      std::to_string(c.numel) + " elements outside |out - ref| <= " + plain_g(tol.atol) + " + " +
                      plain_g(tol.rtol) + " * |ref|; first at " + at_index + " (flat " + std::to_string(c.first_bad) +
                      "): got " + plain_g(c.got) + ", expected " + plain_g(c.want);
    const double b = element_at(second, c.first_bad);
    if (holds_poison(got, c.got, 0) && holds_poison(got, b, second_poison))
      msg += " (never written: it still holds the verifier's poison)";
    msg += "; max abs error " + plain_g(c.max_abs_error) + ", max rel error " + plain_g(c.max_rel_error);
    if (c.nonfinite_count > 0)
      msg += "; " + std::to_string(c.nonfinite_count) + " NaN/Inf elements where the reference is finite";
    return msg;
  }

  // --- timing ---

  double timed_once(const std::function<void()>& run) {
    if (opts.timing.flush_l2 && flush_buffer.defined()) {
      check_cu(drv->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(flush_buffer.data_ptr()), ++flush_value,
                                     static_cast<size_t>(flush_buffer.numel() / 4), nullptr),
               "L2 flush: cuMemsetD32Async");
    }
    check_cu(drv->cuEventRecord(start_event, nullptr), "cuEventRecord");
    run();
    check_cu(drv->cuEventRecord(end_event, nullptr), "cuEventRecord");
    check_cu(drv->cuEventSynchronize(end_event), "timed run: cuEventSynchronize");
    float ms = 0;
    check_cu(drv->cuEventElapsedTime(&ms, start_event, end_event), "cuEventElapsedTime");
    return ms;
  }

  void time_both(const review_request& req, task_entry& e, const prepared_plan& pp, review_result& r,
                 clock_type::time_point deadline) {
    phase_scope timing(phases, &review_phases::timing_s);
    std::vector<at::Tensor> originals, ref_inputs;
    tensor_env env;
    {
      phase_scope in(phases, &review_phases::inputs_s);
      originals = inputs_for(e, 0);
      env = candidate_env(e, originals);
      ref_inputs = clones(originals);
      sync("timing: copying the inputs");
    }
    timing_options topt = opts.timing;
    const double left = std::chrono::duration<double>(deadline - clock_type::now()).count();
    topt.max_seconds = std::max(0.0, std::min(topt.max_seconds, left));
    std::vector<at::Tensor> buffers;  // the graph's inputs: each call copies the inputs in, as a module does
    for (const auto& in : e.task.inputs) buffers.push_back(env.at(in.name));
    std::unique_ptr<plan_graph> graph = graph_for(e, pp, env, originals, buffers, r);
    timed_run candidate = [&]() -> result<double> {
      if (!graph) return timed_once([&] { run_plan(pp, env, -1); });
      result<std::vector<at::Tensor>> out = error{""};
      const double ms = timed_once([&] { out = graph->call(originals, buffers); });
      if (!out) return error{"CUDA graph replay: " + out.message()};
      return ms;
    };
    timed_run reference = [&]() -> result<double> {
      return timed_once([&] { run_reference(e, ref_inputs, "timing the reference"); });
    };
    auto m = measure_pair(topt, candidate, reference);
    if (!m) fail(review_status::internal_error, "timing: " + m.message());
    r.candidate_time = m->first.stats;
    r.reference_time = m->second.stats;
    r.speedup = r.candidate_time.median_ms > 0 ? r.reference_time.median_ms / r.candidate_time.median_ms : 0;
    if (!m->first.stable || !m->second.stable)
      timing_note = "medians not stable to " + plain_g(100 * opts.timing.stable_rel_iqr) +
                    "% when the time or repetition bound was reached (interquartile half-width: candidate " +
                    plain_g(100 * m->first.rel_iqr) + "%, reference " + plain_g(100 * m->second.rel_iqr) + "%)";
    if (r.speedup > req.options.suspicious_speedup) recheck_speedup(req, e, pp, env, r);
  }
  std::string timing_note;

  // The plan as one CUDA graph when it is launch-bound (plan/launch_bound.hpp), checked
  // against the reference on trial 0's inputs as plain launches were; else null: plain
  // launches, and graph_note says why when a capture was tried (docs/reviewer.md).
  std::unique_ptr<plan_graph> graph_for(task_entry& e, const prepared_plan& pp, tensor_env& env,
                                        const std::vector<at::Tensor>& originals,
                                        const std::vector<at::Tensor>& buffers, review_result& r) {
    const plan_weight w = weigh_plan(pp.plan, footprint.inputs + footprint.parameters);
    if (!opts.cuda_graphs || !launch_bound(w)) return nullptr;
    const std::string why = "launch-bound plan (" + describe_weight(w) + ")";
    capturing = true;
    auto g = plan_graph::capture([&](CUstream s) {
      stream_ = s;
      try {
        return run_plan(pp, env, -1);
      } catch (const review_failure& f) {
        throw std::runtime_error(f.message);
      }
    });
    capturing = false;
    stream_ = nullptr;
    if (lost) fail(review_status::crashed, lost_reason);
    std::vector<std::string> problems;
    if (!g) problems.push_back("its capture failed: " + g.message());
    if (g) {
      auto out = (*g)->call(originals, buffers);
      sync("timing: the CUDA graph's first replay");
      if (!out) problems.push_back("its replay failed: " + out.message());
      std::vector<at::Tensor> ref;
      if (out) ref = reference_for(e, 0, originals, "CUDA graph check", problems);
      for (size_t i = 0; i < ref.size() && i < out->size(); ++i)
        if (output_comparison c = compare_output((*out)[i], ref[i], e.task.tolerance); !c.ok)
          problems.push_back(mismatch_message(pp.plan.outputs[i].name, (*out)[i], (*out)[i], 1, c, e.task.tolerance));
    }
    add_flag(r, problems.empty() ? "cuda_graph" : "cuda_graph_refused");
    graph_note = problems.empty() ? why + ": timed as one CUDA graph replay (inputs copied in, outputs cloned)"
                                  : why + ", but as a CUDA graph " + join(problems, "; ") + ": timed as plain launches";
    return problems.empty() ? std::move(*g) : nullptr;
  }
  std::string graph_note;

  // A speedup above review.suspicious_speedup is checked again instead of believed or
  // refused (a correct kernel can be that fast: KernelBench's 40_LayerNorm at its
  // published size runs 29.7x faster than eager): one more run, after the timed ones,
  // in the buffers they used, on the inputs of a trial verification did not draw,
  // written into those buffers in place, with the outputs poisoned first. A kernel that
  // does its work only while it is being verified (counts its calls, keys on its input
  // buffers) leaves stale or poisoned outputs and is incorrect; one that passes keeps
  // its speedup and the flag speedup_rechecked says it was looked at twice.
  void recheck_speedup(const review_request& req, task_entry& e, const prepared_plan& pp, tensor_env& env,
                       review_result& r) {
    const uint32_t trial = std::max<uint32_t>(req.options.trials, 1);
    const std::string label = "re-check of the " + plain_g(r.speedup) + "x speedup, " + trial_label(e, trial);
    std::vector<at::Tensor> originals;
    {
      phase_scope in(phases, &review_phases::inputs_s);
      originals = inputs_for(e, trial);
      for (size_t i = 0; i < e.task.inputs.size(); ++i) env.at(e.task.inputs[i].name).copy_(originals[i]);
      sync(label + ", writing its inputs into the timed buffers");
    }
    std::vector<std::string> problems;
    std::vector<at::Tensor> out = run_plan(pp, env, 1);
    sync(label + ", candidate run");
    check_unchanged(e, env, originals, "re-check run", problems);
    std::vector<at::Tensor> ref = reference_for(e, trial, originals, label, problems);
    try {
      for (size_t i = 0; i < ref.size() && i < out.size(); ++i) {
        output_comparison c = compare_output(out[i], ref[i], e.task.tolerance);
        if (c.ok) continue;
        std::string m = mismatch_message(pp.plan.outputs[i].name, out[i], out[i], 1, c, e.task.tolerance);
        if (holds_poison(out[i], c.got, 1)) m += " (never written: it still holds the poison)";
        problems.push_back(m);
      }
    } catch (const c10::Error& err) {
      after_torch_error(label + ", comparing outputs", torch_message(err), review_status::internal_error);
    }
    if (!problems.empty()) {
      add_flag(r, "speedup_above_threshold");
      fail(review_status::incorrect,
           "correct while verified, but its speedup of " + plain_g(r.speedup) + "x (above review.suspicious_speedup, " +
               plain_g(req.options.suspicious_speedup) + ") did not hold up: " + label + ": " + join(problems, "; "));
    }
    add_flag(r, "speedup_rechecked");
    recheck_note = label;
  }
  std::string recheck_note;

  // --- profile ---

  // Occupancy and resources of the plan's longest-running kernel of its own (the
  // first kernel step when nothing was traced), from the compiled kernel and the
  // device's limits: no CUPTI needed.
  void add_occupancy(const prepared_plan& pp, const review_result& r, const std::vector<kernel_sample>& kernels,
                     std::map<std::string, double>& values) {
    const resolved_step* step = nullptr;
    double longest = -1;
    for (const auto& k : kernels)
      for (const auto& s : pp.plan.steps)
        if (s.kind == "kernel" && s.name == k.name && k.duration_us > longest) {
          step = &s;
          longest = k.duration_us;
        }
    for (const auto& s : pp.plan.steps)
      if (!step && s.kind == "kernel") step = &s;
    if (!step) return;
    const kernel_resources* res = nullptr;
    for (const auto& k : r.resources)
      if (k.kernel == step->name) res = &k;
    if (!res) return;
    kernel_launch_shape shape;
    shape.threads_per_block = step->block[0] * step->block[1] * step->block[2];
    shape.registers_per_thread = res->registers;
    shape.shared_bytes_per_block = res->static_shared_bytes + step->shared_mem_bytes;
    shape.blocks = step->grid[0] * step->grid[1] * step->grid[2];
    const occupancy_estimate o = estimate_occupancy(sm, shape);
    values["theoretical_occupancy_pct"] = o.theoretical_pct;
    values["occupancy_limit_registers"] = o.limit_registers;
    values["occupancy_limit_shared_mem"] = o.limit_shared_mem;
    values["occupancy_limit_warps"] = o.limit_warps;
    values["occupancy_limit_blocks"] = o.limit_blocks;
    values["waves_per_sm"] = o.waves_per_sm;
    values["registers_per_thread"] = res->registers;
    values["shared_mem_per_block"] = static_cast<double>(shape.shared_bytes_per_block);
    values["local_bytes_per_thread"] = res->local_bytes;
  }

  // One more run of the plan, traced, and one under CUPTI's range profiler, on trial
  // 0's inputs. A profiler failure is logged and leaves the metrics out: the review
  // stays what verification and timing made it.
  void profile_plan(task_entry& e, const prepared_plan& pp, review_result& r) {
    phase_scope profiling(phases, &review_phases::profile_s);
    profile_note.clear();
    std::map<std::string, double> values;
    std::vector<kernel_sample> kernels;
    if (!pp.plan.steps.empty()) {
      tensor_env env;
      {
        phase_scope in(phases, &review_phases::inputs_s);
        env = candidate_env(e, inputs_for(e, 0));
        sync("profile: copying the inputs");
      }
      auto run_once = [&]() -> status {
        try {
          run_plan(pp, env, -1);
          check_cu(drv->cuCtxSynchronize(), "profiled run: cuCtxSynchronize");
          return status::success();
        } catch (const review_failure& f) {
          return error{f.message};
        }
      };
      auto run = prof->profile(run_once);
      if (run) {
        kernels = run->kernels;
        values = combine_kernel_samples(kernels);
        values["kernel_launches"] = run->launches;
        values["duration_us"] = run->duration_us;
        r.profile.kernel_launches = run->launches;
        r.profile.duration_ms = run->duration_us / 1000.0;
      } else {
        spdlog::warn("review {}: no hardware profile: {}", r.request_id, run.message());
        profile_note = "no hardware profile (" + run.message() + ")";
        if (lost) profile_note += "; the CUDA context was lost while profiling";
      }
    }
    add_occupancy(pp, r, kernels, values);
    r.profile.values = std::move(values);
  }
  std::string profile_note;

  // --- one review ---

  void review_body(const review_request& req, review_result& r, clock_type::time_point deadline) {
    task_spec task = req.task;
    if (!req.options.size.empty()) {
      auto sized = with_size(task, req.options.size);
      if (!sized) fail(review_status::plan_error, sized.message());
      task = std::move(sized.value());
    }

    auto draw = parse_input_draw(req.options.draw_inputs);
    if (!draw) fail(review_status::internal_error, "review option draw_inputs " + draw.message());

    // 1. Compile (with 2 and 3: the compile phase).
    std::optional<phase_scope> compiling(std::in_place, phases, &review_phases::compile_s);
    auto compiled = compiler->compile(req.cand.source, req.cand.compile_options);
    if (!compiled) fail(review_status::compile_error, compiled.message());
    r.compile_log = compiled->log;
    r.diagnostics = compiled->diagnostics;
    r.resources = compiled->resources;
    if (!compiled->ok) {
      if (compiled->timed_out) fail(review_status::compile_error, compiled->log);
      std::string first;
      size_t errors = 0;
      for (auto& d : compiled->diagnostics)
        if (d.severity == "error") {
          if (!errors)
            first = "candidate.cu:" + std::to_string(d.line) + ":" + std::to_string(d.column) + ": " + d.message;
          ++errors;
        }
      fail(review_status::compile_error,
           errors ? "NVRTC rejected the source with " + std::to_string(errors) + " error(s); first: " + first
                  : "NVRTC rejected the source (see the compile log)");
    }

    // 2. Resolve the plan against the task's shapes and this device.
    auto context = make_plan_context(task, req.cand.source);
    if (!context) fail(review_status::plan_error, context.message());
    context->limits = limits;
    task_entry& entry = [&]() -> task_entry& {
      phase_scope reference(phases, &review_phases::reference_s);
      return task_for(task, *draw);
    }();
    context->reference_outputs = entry.reference_outputs;
    auto plan = resolve_plan(req.cand.plan, *context);
    if (!plan) fail(review_status::plan_error, plan.message());
    for (const auto& s : plan->steps)
      if (s.kind == "library")
        if (auto st = check_library_op(s.name, s.attrs); !st)
          fail(review_status::plan_error, s.label() + ": " + st.message());
    const std::vector<std::string> warnings = plan->warnings;

    // 3. Load the module and look its kernels up.
    module_guard mod;
    prepared_plan pp = prepare(std::move(plan.value()), compiled->cubin, mod, r);
    if (!pp.launches_kernel) add_flag(r, "no_custom_kernel");
    compiling.reset();
    make_room(entry, pp);

    // 4. Verify; 5. time.
    independence_note.clear();
    timing_note.clear();
    graph_note.clear();
    recheck_note.clear();
    {
      phase_scope verifying(phases, &review_phases::verify_s);
      verify(req, entry, pp, r, deadline);
    }
    if (req.options.time) time_both(req, entry, pp, r, deadline);
    profile_note.clear();
    if (req.options.profile) {
      // Profiling replays every kernel dozens of times; a review already out of time
      // keeps its verdict and goes without.
      if (clock_type::now() < deadline)
        profile_plan(entry, pp, r);
      else
        profile_note = "no hardware profile (the review's timeout was used up by verification and timing)";
    }

    r.status = review_status::ok;
    std::string msg = "correct in " + std::to_string(r.trials_passed) + " of " + std::to_string(r.trials_run) +
                      " trials (max abs error " + plain_g(r.max_abs_error) + ", max rel error " +
                      plain_g(r.max_rel_error) + ")";
    if (req.options.time) {
      char buf[200];
      std::snprintf(buf, sizeof(buf),
                    "; candidate %.4f ms vs reference %.4f ms (medians of %u and %u runs): speedup %.3fx",
                    r.candidate_time.median_ms, r.reference_time.median_ms, r.candidate_time.repetitions,
                    r.reference_time.repetitions, r.speedup);
      msg += buf;
    }
    if (!timing_note.empty()) msg += "; " + timing_note;
    if (!graph_note.empty()) msg += "; " + graph_note;
    if (!profile_note.empty()) msg += "; " + profile_note;
    for (auto& f : r.flags) {
      if (f == "no_custom_kernel")
        msg += ". Flag no_custom_kernel: the plan launches no kernel of its own, only library steps";
      if (f == "output_independent_of_input") msg += ". Flag output_independent_of_input: " + independence_note;
      if (f == "speedup_rechecked")
        msg += ". Flag speedup_rechecked: a speedup above " + plain_g(req.options.suspicious_speedup) +
               "x, so the candidate ran once more in the timed buffers on fresh inputs and was correct (" +
               recheck_note + ")";
    }
    if (!warnings.empty()) msg += ". Plan warnings: " + join(warnings, "; ");
    r.message = msg;
  }

  review_phases phases;  // of the review in progress

  // A result naming the request, the candidate and this device, nothing judged yet.
  review_result blank_result(const review_request& req) const {
    review_result r;
    r.request_id = req.request_id;
    r.candidate_id = req.cand.id;
    r.device = node + "/" + std::to_string(dev.ordinal) + ": " + dev.name;
    return r;
  }

  review_result review(const review_request& req) {
    phases = {};
    footprint = {};
    review_result r = blank_result(req);
    if (lost) {
      r.status = review_status::crashed;
      r.message = "the CUDA context of this worker was lost in an earlier review (" + lost_reason +
                  "); the worker must be restarted";
      return r;
    }
    const auto deadline =
        clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                std::chrono::duration<double>(req.options.timeout_s > 0 ? req.options.timeout_s : 1e9));
    attempt(req, r, deadline);
    // Out of device memory with trials cached (other tasks', or this task's own: the
    // footprint's estimate does not see the reference's intermediates): drop the whole
    // trial cache and try once more caching nothing; what then fails says so with the
    // sizes. The first attempt's work is not counted.
    if (r.status != review_status::ok && !lost && r.message.find("out of memory") != std::string::npos &&
        trials.used() > 0) {
      spdlog::warn(
          "review of '{}' ran out of device memory with {} cached; retrying with the trial cache emptied, caching "
          "nothing",
          req.task.name, describe_bytes(trials.used()));
      trials = ks::trial_cache<trial_data>(trials.budget());
      const std::string first = r.message;
      r = blank_result(req);
      phases = {};
      footprint = {};
      bypass_cache = true;
      attempt(req, r, deadline);
      bypass_cache = false;
      if (r.status != review_status::ok)
        r.message +=
            " (also with the trial cache emptied and nothing cached; the first attempt: " + first.substr(0, 300) + ")";
    }
    if (r.status != review_status::ok) {
      // A failed review reports no speedup.
      r.speedup = 0;
    }
    r.phases = phases;
    return r;
  }

  void attempt(const review_request& req, review_result& r, clock_type::time_point deadline) {
    try {
      make_current();
      review_body(req, r, deadline);
    } catch (const review_failure& f) {
      r.status = f.status;
      r.message = f.message;
    } catch (const c10::Error& e) {
      // LibTorch threw outside the places that classify its errors.
      CUresult rc = drv->cuCtxSynchronize();
      r.status = rc == CUDA_SUCCESS ? review_status::internal_error : review_status::crashed;
      r.message = torch_message(e);
      if (r.message.find("out of memory") != std::string::npos) r.message += " (" + memory_note() + ")";
      if (rc != CUDA_SUCCESS) {
        r.message += "; " + drv->describe(rc, "cuCtxSynchronize");
        if (poisons_context(rc)) {
          lost = true;
          lost_reason = r.message;
        }
      }
    } catch (const std::exception& e) {
      r.status = review_status::internal_error;
      r.message = std::string("internal error: ") + e.what();
    }
  }
};

reviewer::reviewer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
reviewer::~reviewer() = default;

review_result reviewer::review(const review_request& request) { return impl_->review(request); }
bool reviewer::context_lost() const { return impl_->lost; }
const device_info& reviewer::device() const { return impl_->dev; }
const std::string& reviewer::arch() const { return impl_->arch; }
reviewer::trial_cache_state reviewer::trial_cache() const {
  return {impl_->trials.budget(), impl_->trials.used(), impl_->trials.size(), impl_->reference_runs};
}
void reviewer::set_trial_cache_bytes(uint64_t bytes) {
  impl_->trials = ks::trial_cache<trial_data>(bytes ? bytes : default_trial_cache_bytes(impl_->dev.total_memory_bytes));
}

result<std::unique_ptr<reviewer>> reviewer::create(reviewer_options opts) {
  auto drv = cuda_driver::load();
  if (!drv) return drv.error();
  auto devices = query_devices(**drv);
  if (!devices) return devices.error();
  if (opts.device < 0 || opts.device >= static_cast<int>(devices->size()))
    return error{"device " + std::to_string(opts.device) + " does not exist (the driver sees " +
                 std::to_string(devices->size()) + ")"};
  try {
    if (!torch::cuda::is_available() || static_cast<int>(torch::cuda::device_count()) <= opts.device)
      return error{"LibTorch sees no CUDA device " + std::to_string(opts.device) +
                   " (a LibTorch built without CUDA, or CUDA_VISIBLE_DEVICES hides it)"};
  } catch (const std::exception& e) {
    return error{"LibTorch cannot use CUDA: " + torch_message(e)};
  }

  auto p = std::make_unique<impl>();
  p->opts = opts;
  p->drv = *drv;
  p->dev = (*devices)[static_cast<size_t>(opts.device)];
  p->torch_device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(opts.device));
  const cuda_driver& d = **drv;
  if (auto s = d.check(d.cuDeviceGet(&p->cu_device, opts.device), "cuDeviceGet"); !s) return error{s.message()};
  if (auto s = d.check(d.cuDevicePrimaryCtxRetain(&p->context, p->cu_device), "cuDevicePrimaryCtxRetain"); !s) {
    p->context = nullptr;
    return error{s.message()};
  }
  if (auto s = d.check(d.cuCtxSetCurrent(p->context), "cuCtxSetCurrent"); !s) return error{s.message()};

  auto attribute = [&](CUdevice_attribute a) {
    int v = 0;
    d.cuDeviceGetAttribute(&v, a, p->cu_device);
    return static_cast<int64_t>(v);
  };
  p->limits.max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  p->limits.max_block_dims = {attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
                              attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                              attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)};
  p->limits.max_grid_dims = {attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
                             attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                             attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)};
  p->limits.max_shared_mem_bytes = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  p->l2_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);

  p->arch = opts.arch.empty() ? arch_for(p->dev.cc_major, p->dev.cc_minor) : opts.arch;
  nvrtc_options co = opts.compiler;
  co.arch = p->arch;
  p->compiler = std::make_unique<nvrtc_compiler>(co);

  if (auto s = d.check(d.cuEventCreate(&p->start_event, CU_EVENT_DEFAULT), "cuEventCreate"); !s)
    return error{s.message()};
  if (auto s = d.check(d.cuEventCreate(&p->end_event, CU_EVENT_DEFAULT), "cuEventCreate"); !s)
    return error{s.message()};
  try {
    const int64_t flush = std::max<int64_t>(2 * p->l2_bytes, 64 << 20);
    p->flush_buffer = at::empty({flush / 4 * 4}, at::TensorOptions().dtype(at::kByte).device(p->torch_device));
  } catch (const std::exception& e) {
    return error{"cannot allocate the L2 flush buffer: " + torch_message(e)};
  }
  p->trials = ks::trial_cache<trial_data>(
      opts.trial_cache_bytes ? opts.trial_cache_bytes : default_trial_cache_bytes(p->dev.total_memory_bytes));
  p->sm.max_threads_per_sm = static_cast<int>(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR));
  p->sm.max_blocks_per_sm = static_cast<int>(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR));
  p->sm.registers_per_sm = static_cast<int>(attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR));
  p->sm.shared_bytes_per_sm = static_cast<int>(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  p->sm.reserved_shared_bytes_per_block =
      static_cast<int>(attribute(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK));
  p->sm.multiprocessors = static_cast<int>(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  p->sm.warp_size = static_cast<int>(attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE));
  p->prof = profiler::create(p->context, opts.device, opts.replay);
  if (opts.node.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    p->node = host;
  } else {
    p->node = opts.node;
  }
  return std::unique_ptr<reviewer>(new reviewer(std::move(p)));
}

}  // namespace ks
