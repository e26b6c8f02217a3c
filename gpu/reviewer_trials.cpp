// The reviewer's trials: a candidate verified against the reference on several draws
// of its inputs, then timed against it (CUDA graphs, the recheck of a speedup) and
// profiled. reviewer::impl is in reviewer_impl.hpp; the rest of it in reviewer.cpp.
#include "gpu/reviewer_impl.hpp"

namespace ks {

std::string reviewer::impl::trial_label(const task_entry& e, uint32_t trial) {
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

void reviewer::impl::verify(const review_request& req, task_entry& e, const prepared_plan& pp, review_result& r,
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
                                         " s after " + std::to_string(k) + " of " + std::to_string(trials) + " trials");
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
                           index_string(out_a[i].sizes().vec(), d) + ": " + plain_g(element_at(out_a[i], d)) + " vs " +
                           plain_g(element_at(out_b[i], d)) +
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

void reviewer::impl::add_flag(review_result& r, const std::string& flag) {
  if (std::find(r.flags.begin(), r.flags.end(), flag) == r.flags.end()) r.flags.push_back(flag);
}

void reviewer::impl::check_shapes(task_entry& e, const prepared_plan& pp, const std::vector<at::Tensor>& ref) {
  if (e.reference_outputs.empty())
    for (auto& t : ref) e.reference_outputs.push_back({t.sizes().vec(), dtype_name(t)});
  if (ref.size() != pp.plan.outputs.size())
    fail(review_status::plan_error, "outputs: the plan returns " + std::to_string(pp.plan.outputs.size()) +
                                        " tensors, the reference " + std::to_string(ref.size()));
  for (size_t i = 0; i < ref.size(); ++i) {
    const resolved_buffer& b = pp.plan.outputs[i];
    if (b.shape != ref[i].sizes().vec() || b.dtype != dtype_name(ref[i]))
      fail(review_status::plan_error, "outputs[" + std::to_string(i) + "] '" + b.name +
                                          "': " + shape_to_string(b.shape) + " " + b.dtype +
                                          ", but the reference returns " + shape_of(ref[i]) + " " + dtype_name(ref[i]));
  }
}

bool reviewer::impl::inputs_differ(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (first_bitwise_difference(a[i], b[i]) >= 0) return true;
  return false;
}

bool reviewer::impl::outputs_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (first_bitwise_difference(a[i], b[i]) >= 0) return false;
  return true;
}

bool reviewer::impl::holds_poison(const at::Tensor& t, double v, int pattern) {
  const double p = poison_value(t, pattern);
  return std::isnan(p) ? std::isnan(v) : v == p;
}

std::string reviewer::impl::mismatch_message(const std::string& name, const at::Tensor& got, const at::Tensor& second,
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

double reviewer::impl::timed_once(const std::function<void()>& run) {
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

void reviewer::impl::time_both(const review_request& req, task_entry& e, const prepared_plan& pp, review_result& r,
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

std::unique_ptr<plan_graph> reviewer::impl::graph_for(task_entry& e, const prepared_plan& pp, tensor_env& env,
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

void reviewer::impl::recheck_speedup(const review_request& req, task_entry& e, const prepared_plan& pp, tensor_env& env,
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

void reviewer::impl::add_occupancy(const prepared_plan& pp, const review_result& r,
                                   const std::vector<kernel_sample>& kernels, std::map<std::string, double>& values) {
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

void reviewer::impl::profile_plan(task_entry& e, const prepared_plan& pp, review_result& r) {
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

}  // namespace ks
