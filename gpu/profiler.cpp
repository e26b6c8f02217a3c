// The reviewer's profiler (gpu/profiler.hpp): CUPTI's activity API for the kernels
// one run of a plan launches, CUPTI's range profiler for their hardware metrics.
#include "gpu/profiler.hpp"

#include <cupti_activity.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include <spdlog/spdlog.h>

namespace ks {

// ---------------------------------------------------------------------------
// The metrics (docs/metrics.md has the same table, with what each one means).

const std::vector<profiled_metric>& profiled_metrics() {
  using C = metric_combine;
  static const std::vector<profiled_metric> table = {
      {"dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed", C::weighted},
      {"l2_throughput_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed", C::weighted},
      {"l1_throughput_pct", "l1tex__throughput.avg.pct_of_peak_sustained_active", C::weighted},
      {"sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", C::weighted},
      {"achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active", C::weighted},
      {"branch_efficiency_pct", "smsp__sass_average_branch_targets_threads_uniform.pct", C::weighted},
      {"eligible_warps_per_cycle", "smsp__warps_eligible.avg.per_cycle_active", C::weighted},
      {"issued_ipc", "sm__inst_issued.avg.per_cycle_active", C::weighted},
      {"tensor_pipe_pct", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", C::weighted},
      {"fp32_pipe_pct", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", C::weighted},
      {"l1_hit_rate_pct", "l1tex__t_sector_hit_rate.pct", C::weighted},
      {"l2_hit_rate_pct", "lts__t_sector_hit_rate.pct", C::weighted},
      // Warp states: the share of active warp-cycles a warp spent stalled for each
      // reason. The range profiler has no PC sampling; these counters see every cycle
      // where sampling sees some, and measure the same proportion.
      {"stall_long_scoreboard_pct", "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct", C::weighted},
      {"stall_short_scoreboard_pct", "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct", C::weighted},
      {"stall_barrier_pct", "smsp__warp_issue_stalled_barrier_per_warp_active.pct", C::weighted},
      {"stall_math_pipe_throttle_pct", "smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct", C::weighted},
      {"stall_mio_throttle_pct", "smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct", C::weighted},
      {"stall_lg_throttle_pct", "smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct", C::weighted},
      {"stall_wait_pct", "smsp__warp_issue_stalled_wait_per_warp_active.pct", C::weighted},
      {"stall_not_selected_pct", "smsp__warp_issue_stalled_not_selected_per_warp_active.pct", C::weighted},
      {"stall_membar_pct", "smsp__warp_issue_stalled_membar_per_warp_active.pct", C::weighted},
      {"dram_bytes", "dram__bytes.sum", C::sum},
      // Branch targets executed: a kernel without any has no branch efficiency (the
      // ratio evaluates to 0 of 0, which CUPTI reports as 0).
      {"", "smsp__sass_branch_targets.sum", C::sum},
      // Operation counts for `flops` (fused multiply-adds count twice).
      {"", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", C::sum},
      {"", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", C::sum},
      {"", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", C::sum},
      {"", "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", C::sum},
      {"", "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", C::sum},
      {"", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", C::sum},
      {"", "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", C::sum},
      {"", "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum", C::sum},
      {"", "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", C::sum},
      // The kernel's duration as the profiler saw it: the weight when the trace
      // could not be matched to the profiled kernels.
      {"", "gpu__time_duration.sum", C::sum},
  };
  return table;
}

std::map<std::string, double> combine_kernel_samples(const std::vector<kernel_sample>& kernels) {
  std::map<std::string, double> out;
  if (kernels.empty()) return out;
  double total_us = 0;
  for (const auto& k : kernels) total_us += k.duration_us;
  out["kernel_launches"] = static_cast<double>(kernels.size());
  out["duration_us"] = total_us;
  for (const auto& m : profiled_metrics()) {
    if (!*m.name) continue;
    double acc = 0, weight = 0;
    bool seen = false;
    for (const auto& k : kernels) {
      auto it = k.values.find(m.cupti);
      if (it == k.values.end() || !std::isfinite(it->second)) continue;
      if (std::string_view(m.name) == "branch_efficiency_pct") {
        auto targets = k.values.find("smsp__sass_branch_targets.sum");
        if (targets != k.values.end() && targets->second == 0) continue;
      }
      seen = true;
      if (m.combine == metric_combine::sum) {
        acc += it->second;
      } else {
        // A kernel too short to have a duration still counts, barely.
        const double w = std::max(k.duration_us, 1e-3);
        acc += w * it->second;
        weight += w;
      }
    }
    if (!seen) continue;
    out[m.name] = m.combine == metric_combine::sum ? acc : acc / weight;
  }
  // flops: adds and multiplies count one, fused multiply-adds two.
  static const std::vector<std::pair<const char*, double>> ops = {{"fadd", 1}, {"fmul", 1}, {"ffma", 2},
                                                                  {"hadd", 1}, {"hmul", 1}, {"hfma", 2},
                                                                  {"dadd", 1}, {"dmul", 1}, {"dfma", 2}};
  double flops = 0;
  bool any = false;
  for (const auto& k : kernels)
    for (const auto& [op, factor] : ops) {
      auto it = k.values.find(std::string("smsp__sass_thread_inst_executed_op_") + op + "_pred_on.sum");
      if (it == k.values.end() || !std::isfinite(it->second)) continue;
      flops += factor * it->second;
      any = true;
    }
  if (any) out["flops"] = flops;
  return out;
}

// ---------------------------------------------------------------------------
// Occupancy, as the CUDA occupancy calculator and Nsight Compute's launch
// statistics compute it.

occupancy_estimate estimate_occupancy(const sm_limits& sm, const kernel_launch_shape& k) {
  occupancy_estimate o;
  if (k.threads_per_block <= 0 || sm.warp_size <= 0) return o;
  const int64_t warps_per_block = (k.threads_per_block + sm.warp_size - 1) / sm.warp_size;
  const int64_t max_warps = sm.max_threads_per_sm / sm.warp_size;
  o.limit_blocks = sm.max_blocks_per_sm;
  o.limit_warps = static_cast<int>(max_warps / warps_per_block);
  if (k.registers_per_thread <= 0) {
    o.limit_registers = sm.max_blocks_per_sm;
  } else {
    // Registers go to warps in units of `register_allocation_unit`, and warps get
    // them in groups of `warp_allocation_granularity`.
    const int64_t unit = sm.register_allocation_unit;
    const int64_t per_warp = (int64_t{k.registers_per_thread} * sm.warp_size + unit - 1) / unit * unit;
    const int64_t g = std::max(1, sm.warp_allocation_granularity);
    const int64_t warps = sm.registers_per_sm / per_warp / g * g;
    o.limit_registers = static_cast<int>(warps / warps_per_block);
  }
  const int64_t shared = k.shared_bytes_per_block + sm.reserved_shared_bytes_per_block;
  o.limit_shared_mem = k.shared_bytes_per_block <= 0
                           ? sm.max_blocks_per_sm
                           : static_cast<int>(sm.shared_bytes_per_sm / std::max<int64_t>(shared, 1));
  o.blocks_per_sm = std::min({o.limit_blocks, o.limit_warps, o.limit_registers, o.limit_shared_mem});
  o.theoretical_pct =
      max_warps > 0 ? 100.0 * static_cast<double>(o.blocks_per_sm * warps_per_block) / static_cast<double>(max_warps)
                    : 0;
  if (o.blocks_per_sm > 0 && sm.multiprocessors > 0)
    o.waves_per_sm = static_cast<double>(k.blocks) / (static_cast<double>(sm.multiprocessors) * o.blocks_per_sm);
  return o;
}

// ---------------------------------------------------------------------------
// CUPTI.

namespace {

std::string cupti_text(CUptiResult rc, const std::string& call) {
  const char* s = nullptr;
  if (cuptiGetResultString(rc, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
  return call + ": " + s + " (CUPTI error " + std::to_string(static_cast<int>(rc)) + ")";
}

// A CUPTI parameter block: zeroed, with its size set (CUPTI's versioning).
template <class P>
P params(size_t struct_size) {
  P p{};
  p.structSize = struct_size;
  return p;
}

#define KS_CUPTI(call, what)                                             \
  do {                                                                   \
    CUptiResult ks_rc_ = (call);                                         \
    if (ks_rc_ != CUPTI_SUCCESS) return error{cupti_text(ks_rc_, what)}; \
  } while (0)

// Kernel records of the activity trace. CUPTI delivers them on its own thread; the
// sink is process-wide because its callbacks are.
struct traced_kernel {
  std::string name;
  uint64_t start = 0, end = 0;
};
std::mutex trace_mu;
std::vector<traced_kernel>* trace_sink = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t bytes = 1 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer ? bytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(trace_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    if (trace_sink) trace_sink->push_back({k->name ? k->name : "?", k->start, k->end});
  }
  std::free(buffer);
}

}  // namespace

struct profiler::impl {
  CUcontext context = nullptr;
  int device = 0;
  profile_replay replay = profile_replay::user;
  bool set_up = false;
  std::string setup_error;  // set when CUPTI could not be set up: every profile fails so
  std::vector<std::string> unavailable;
  std::vector<const char*> metrics;  // the CUPTI names this chip collects
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<uint8_t> config_image;
  size_t passes = 0;

  ~impl() {
    if (host) {
      auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      p.pHostObject = host;
      cuptiProfilerHostDeinitialize(&p);
    }
  }

  status set_up_once() {
    if (set_up) return setup_error.empty() ? status::success() : status{error{setup_error}};
    set_up = true;
    auto s = set_up_cupti();
    if (!s) setup_error = s.message();
    return s;
  }

  status set_up_cupti() {
    KS_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    KS_CUPTI(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");

    auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    chip.deviceIndex = static_cast<size_t>(device);
    KS_CUPTI(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
    const std::string chip_name = chip.pChipName ? chip.pChipName : "";

    auto avail =
        params<CUpti_Profiler_GetCounterAvailability_Params>(CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
    avail.ctx = context;
    KS_CUPTI(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability (size)");
    std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    KS_CUPTI(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");

    auto hi = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = chip_name.c_str();
    hi.pCounterAvailabilityImage = availability.data();
    KS_CUPTI(cuptiProfilerHostInitialize(&hi), "cuptiProfilerHostInitialize (chip " + chip_name + ")");
    host = hi.pHostObject;

    // One at a time, so that a metric this chip lacks costs that metric only.
    for (const auto& m : profiled_metrics()) {
      const char* name = m.cupti;
      auto add =
          params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
      add.pHostObject = host;
      add.ppMetricNames = &name;
      add.numMetrics = 1;
      CUptiResult rc = cuptiProfilerHostConfigAddMetrics(&add);
      if (rc == CUPTI_SUCCESS) {
        metrics.push_back(name);
      } else {
        unavailable.push_back(std::string(name) + ": " + cupti_text(rc, "cuptiProfilerHostConfigAddMetrics"));
        spdlog::warn("profiler: {} is not collected on {}: {}", name, chip_name,
                     cupti_text(rc, "cuptiProfilerHostConfigAddMetrics"));
      }
    }
    if (metrics.empty()) return error{"none of the profiler's metrics can be collected on " + chip_name};

    auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    size.pHostObject = host;
    KS_CUPTI(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");
    config_image.resize(size.configImageSize);
    auto image =
        params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    image.pHostObject = host;
    image.pConfigImage = config_image.data();
    image.configImageSize = config_image.size();
    KS_CUPTI(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage");

    auto np = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    np.pConfigImage = config_image.data();
    np.configImageSize = config_image.size();
    if (cuptiProfilerHostGetNumOfPasses(&np) == CUPTI_SUCCESS) passes = np.numOfPasses;
    const char* mode = to_string(replay);
    spdlog::info("profiler: {} of {} metrics on {}, {} replay passes per kernel ({} replay)", metrics.size(),
                 profiled_metrics().size(), chip_name, passes, mode);
    return status::success();
  }

  // The kernels one run launches, from the activity trace.
  result<std::vector<traced_kernel>> trace(const std::function<status()>& run_once) {
    std::vector<traced_kernel> kernels;
    {
      std::lock_guard<std::mutex> lock(trace_mu);
      trace_sink = &kernels;
    }
    struct sink_reset {
      ~sink_reset() {
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        std::lock_guard<std::mutex> lock(trace_mu);
        trace_sink = nullptr;
      }
    } reset;
    KS_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)");
    if (auto s = run_once(); !s) return error{"the traced run failed: " + s.message()};
    KS_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    std::lock_guard<std::mutex> lock(trace_mu);
    trace_sink = nullptr;
    std::sort(kernels.begin(), kernels.end(),
              [](const traced_kernel& a, const traced_kernel& b) { return a.start < b.start; });
    return kernels;
  }

  // Per-kernel metric values of one run under the range profiler.
  result<std::vector<kernel_sample>> collect(const std::function<status()>& run_once, size_t max_ranges) {
    auto en = params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    en.ctx = context;
    KS_CUPTI(cuptiRangeProfilerEnable(&en), "cuptiRangeProfilerEnable");
    CUpti_RangeProfiler_Object* obj = en.pRangeProfilerObject;
    struct disable_guard {
      CUpti_RangeProfiler_Object* obj;
      ~disable_guard() {
        auto d = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
        d.pRangeProfilerObject = obj;
        cuptiRangeProfilerDisable(&d);
      }
    } guard{obj};

    auto cs = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    cs.pRangeProfilerObject = obj;
    cs.pMetricNames = metrics.data();
    cs.numMetrics = metrics.size();
    cs.maxNumOfRanges = max_ranges;
    cs.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges);
    KS_CUPTI(cuptiRangeProfilerGetCounterDataSize(&cs), "cuptiRangeProfilerGetCounterDataSize");
    std::vector<uint8_t> counter_data(cs.counterDataSize);
    auto ci = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    ci.pRangeProfilerObject = obj;
    ci.counterDataSize = counter_data.size();
    ci.pCounterData = counter_data.data();
    KS_CUPTI(cuptiRangeProfilerCounterDataImageInitialize(&ci), "cuptiRangeProfilerCounterDataImageInitialize");

    auto sc = params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    sc.pRangeProfilerObject = obj;
    sc.configSize = config_image.size();
    sc.pConfig = config_image.data();
    sc.counterDataImageSize = counter_data.size();
    sc.pCounterDataImage = counter_data.data();
    sc.range = CUPTI_AutoRange;
    sc.replayMode = replay == profile_replay::user ? CUPTI_UserReplay : CUPTI_KernelReplay;
    sc.maxRangesPerPass = max_ranges;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    KS_CUPTI(cuptiRangeProfilerSetConfig(&sc), "cuptiRangeProfilerSetConfig");

    // Kernel replay submits every pass within one run; user replay takes one run per
    // pass until CUPTI says all were submitted.
    const int max_runs = replay == profile_replay::kernel ? 64 : passes > 0 ? static_cast<int>(passes) + 8 : 128;
    bool all_submitted = false;
    int runs = 0;
    for (; runs < max_runs && !all_submitted; ++runs) {
      auto st = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
      st.pRangeProfilerObject = obj;
      KS_CUPTI(cuptiRangeProfilerStart(&st), "cuptiRangeProfilerStart");
      status ran = run_once();
      auto sp = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
      sp.pRangeProfilerObject = obj;
      CUptiResult stopped = cuptiRangeProfilerStop(&sp);
      if (!ran) return error{"the profiled run failed: " + ran.message()};
      if (stopped != CUPTI_SUCCESS) return error{cupti_text(stopped, "cuptiRangeProfilerStop")};
      all_submitted = sp.isAllPassSubmitted != 0;
    }
    if (!all_submitted)
      return error{"the range profiler did not finish its passes in " + std::to_string(runs) + " runs"};

    auto dd = params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    dd.pRangeProfilerObject = obj;
    KS_CUPTI(cuptiRangeProfilerDecodeData(&dd), "cuptiRangeProfilerDecodeData");
    if (dd.numOfRangeDropped > 0)
      spdlog::warn("profiler: {} kernels were not profiled (more than {} in one run)", dd.numOfRangeDropped,
                   max_ranges);

    auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
    info.pCounterDataImage = counter_data.data();
    info.counterDataImageSize = counter_data.size();
    KS_CUPTI(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo");

    std::vector<kernel_sample> out;
    std::vector<double> values(metrics.size());
    for (size_t r = 0; r < info.numTotalRanges; ++r) {
      kernel_sample k;
      auto ri = params<CUpti_RangeProfiler_CounterData_GetRangeInfo_Params>(
          CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE);
      ri.pCounterDataImage = counter_data.data();
      ri.counterDataImageSize = counter_data.size();
      ri.rangeIndex = r;
      ri.rangeDelimiter = "/";
      if (cuptiRangeProfilerCounterDataGetRangeInfo(&ri) == CUPTI_SUCCESS && ri.rangeName) k.name = ri.rangeName;
      auto ev = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
          CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
      ev.pHostObject = host;
      ev.pCounterDataImage = counter_data.data();
      ev.counterDataImageSize = counter_data.size();
      ev.rangeIndex = r;
      ev.ppMetricNames = metrics.data();
      ev.numMetrics = metrics.size();
      ev.pMetricValues = values.data();
      KS_CUPTI(cuptiProfilerHostEvaluateToGpuValues(&ev), "cuptiProfilerHostEvaluateToGpuValues");
      for (size_t i = 0; i < metrics.size(); ++i)
        if (std::isfinite(values[i])) k.values[metrics[i]] = values[i];
      out.push_back(std::move(k));
    }
    return out;
  }
};

profiler::profiler(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
profiler::~profiler() = default;

const char* to_string(profile_replay r) { return r == profile_replay::user ? "user" : "kernel"; }

std::unique_ptr<profiler> profiler::create(CUcontext context, int device_ordinal, profile_replay replay) {
  auto p = std::make_unique<impl>();
  p->context = context;
  p->device = device_ordinal;
  p->replay = replay;
  return std::unique_ptr<profiler>(new profiler(std::move(p)));
}

const std::vector<std::string>& profiler::unavailable() const { return impl_->unavailable; }
size_t profiler::passes() const { return impl_->passes; }

result<profiled_run> profiler::profile(const std::function<status()>& run_once) {
  if (auto s = impl_->set_up_once(); !s) return error{"CUPTI cannot profile here: " + s.message()};
  auto traced = impl_->trace(run_once);
  if (!traced) return traced.error();
  profiled_run out;
  out.launches = static_cast<uint32_t>(traced->size());
  for (const auto& t : *traced) out.duration_us += static_cast<double>(t.end - t.start) / 1000.0;
  if (traced->empty()) return out;  // library steps that launched nothing
  auto samples = impl_->collect(run_once, traced->size() + 8);
  if (!samples) return samples.error();
  // Durations come from the trace: the profiler's replays run under its control.
  // Ranges and traced kernels are both in launch order.
  const bool matched = samples->size() == traced->size();
  if (!matched)
    spdlog::warn(
        "profiler: the traced run launched {} kernels, the profiled run {}; weighting by the "
        "profiler's durations",
        traced->size(), samples->size());
  for (size_t i = 0; i < samples->size(); ++i) {
    auto& k = (*samples)[i];
    if (matched) {
      k.duration_us = static_cast<double>((*traced)[i].end - (*traced)[i].start) / 1000.0;
      k.name = (*traced)[i].name;
    } else if (auto it = k.values.find("gpu__time_duration.sum"); it != k.values.end()) {
      k.duration_us = it->second / 1000.0;  // nanoseconds
    }
  }
  out.kernels = std::move(samples.value());
  return out;
}

}  // namespace ks
