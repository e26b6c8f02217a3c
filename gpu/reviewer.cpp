// The reviewer: compile, resolve, run, verify and time one candidate (docs/reviewer.md).
// With gpu/reviewer_trials.cpp, gpu/library_ops.cpp and gpu/output_check.cpp, one of the
// translation units of the reviewer that include ATen's functions (each costs 10-40 s to
// compile). reviewer_impl.hpp holds reviewer::impl; its verification and timing are in
// reviewer_trials.cpp.
#include "gpu/reviewer.hpp"

#include "gpu/device_memory.hpp"
#include "gpu/reviewer_impl.hpp"

namespace ks {

// ---------------------------------------------------------------------------
// Torch-free helpers declared in reviewer.hpp.

std::string arch_for(int cc_major, int cc_minor) {
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + (cc_major >= 9 ? "a" : "");
}

// ---------------------------------------------------------------------------
// The reviewer.

void reviewer::impl::check_cu(CUresult rc, const std::string& what) {
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

void reviewer::impl::sync(const std::string& what) {
  check_cu(drv->cuStreamSynchronize(nullptr), what + ": cuStreamSynchronize");
}

[[noreturn]] void reviewer::impl::after_torch_error(const std::string& where, const std::string& message,
                                                    review_status otherwise) {
  if (capturing) fail(otherwise, where + ": " + message);
  CUresult rc = drv->cuCtxSynchronize();
  if (rc != CUDA_SUCCESS) check_cu(rc, where + ": " + message + "; then cuCtxSynchronize");
  std::string text = where + ": " + message;
  if (message.find("out of memory") != std::string::npos) text += " (" + memory_note() + ")";
  fail(otherwise, text);
}

void reviewer::impl::make_current() { check_cu(drv->cuCtxSetCurrent(context), "cuCtxSetCurrent"); }

task_entry& reviewer::impl::task_for(const task_spec& task, input_draw draw) {
  std::string key = sha256_hex(to_yaml(task) + "\n" + task.module_bytes.sha256_hex() + "\ndraw " + to_string(draw));
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

std::vector<at::Tensor> reviewer::impl::inputs_for(task_entry& e, uint32_t trial) {
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

std::vector<at::Tensor> reviewer::impl::reference_for(task_entry& e, uint32_t trial,
                                                      const std::vector<at::Tensor>& originals,
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

std::vector<at::Tensor> reviewer::impl::clones(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (auto& t : ts) out.push_back(t.clone(at::MemoryFormat::Contiguous));
  return out;
}

tensor_env reviewer::impl::candidate_env(const task_entry& e, const std::vector<at::Tensor>& inputs) {
  tensor_env env;
  for (size_t i = 0; i < e.task.inputs.size(); ++i)
    env[e.task.inputs[i].name] = inputs[i].clone(at::MemoryFormat::Contiguous);
  for (size_t i = 0; i < e.task.parameters.size() && i < e.pristine_params.size(); ++i)
    env[e.task.parameters[i].name] = e.pristine_params[i].clone(at::MemoryFormat::Contiguous);
  return env;
}

void reviewer::impl::make_room(const task_entry& e, const prepared_plan& pp) {
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

std::string reviewer::impl::memory_note() const {
  if (footprint.cached() == 0)  // before make_room: the task's sizes are not known yet
    return "the trial cache held " + describe_bytes(trials.used()) + " of the device's " +
           describe_bytes(dev.total_memory_bytes);
  return "one trial of this task takes inputs " + describe_bytes(footprint.inputs) + ", outputs " +
         describe_bytes(footprint.outputs) + ", parameters " + describe_bytes(footprint.parameters) + ", scratch " +
         describe_bytes(footprint.scratch) + "; the trial cache held " + describe_bytes(trials.used()) + " (cap " +
         describe_bytes(cache_cap) + ") of the device's " + describe_bytes(dev.total_memory_bytes);
}

prepared_plan reviewer::impl::prepare(resolved_plan plan, const std::string& cubin, module_guard& mod,
                                      review_result& r) {
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

void reviewer::impl::launch(const prepared_plan& pp, const resolved_step& s, tensor_env& env) {
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

void reviewer::impl::library(const prepared_plan& pp, const resolved_step& s, tensor_env& env) {
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
  auto outs = run_prepared_library_op(prepared->second, args, torch_device);
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

std::vector<at::Tensor> reviewer::impl::run_plan(const prepared_plan& pp, tensor_env env, int pattern) {
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

std::vector<at::Tensor> reviewer::impl::run_reference(task_entry& e, const std::vector<at::Tensor>& inputs,
                                                      const std::string& where) {
  auto out = run_tensors(*e.program, inputs);
  if (!out) after_torch_error(where, out.message(), review_status::internal_error);
  return std::move(out.value());
}

void reviewer::impl::check_unchanged(const task_entry& e, const tensor_env& env,
                                     const std::vector<at::Tensor>& originals, const std::string& when,
                                     std::vector<std::string>& problems) {
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

void reviewer::impl::review_body(const review_request& req, review_result& r, clock_type::time_point deadline) {
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
             "x, so the candidate ran once more in the timed buffers on fresh inputs and was correct (" + recheck_note +
             ")";
  }
  if (!warnings.empty()) msg += ". Plan warnings: " + join(warnings, "; ");
  r.message = msg;
}

review_result reviewer::impl::blank_result(const review_request& req) const {
  review_result r;
  r.request_id = req.request_id;
  r.candidate_id = req.cand.id;
  r.device = node + "/" + std::to_string(dev.ordinal) + ": " + dev.name;
  return r;
}

review_result reviewer::impl::review(const review_request& req) {
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
  // What the review allocated and freed (candidate outputs, scratch, the reference's
  // intermediates) goes back to the driver: other processes share the GPU (the bench's
  // torch.compile warm-ups beside the run), and the next task's tensors have other
  // sizes anyway. The trial cache's tensors are alive and stay.
  if (!lost) release_cached_device_memory();
  r.phases = phases;
  return r;
}

void reviewer::impl::attempt(const review_request& req, review_result& r, clock_type::time_point deadline) {
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
