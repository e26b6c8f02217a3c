// CAF 0.17's deserializer default-constructs enum elements of sequences without
// initialising them before reading into them; GCC warns about that inside CAF.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "actors/protocol.hpp"
#include "actors/wire_safe.hpp"

#include <cfloat>
#include <cmath>

#include <caf/actor_system_config.hpp>

namespace ks {

const char* to_string(review_status s) {
  switch (s) {
    case review_status::ok: return "ok";
    case review_status::compile_error: return "compile_error";
    case review_status::plan_error: return "plan_error";
    case review_status::incorrect: return "incorrect";
    case review_status::crashed: return "crashed";
    case review_status::timed_out: return "timed_out";
    case review_status::internal_error: return "internal_error";
  }
  return "unknown";
}

double wire_safe(double v) {
  if (std::isnan(v)) return DBL_MAX;
  if (std::isinf(v)) return v > 0 ? DBL_MAX : -DBL_MAX;
  return v;
}

void make_wire_safe(review_result& r) {
  r.max_abs_error = wire_safe(r.max_abs_error);
  r.max_rel_error = wire_safe(r.max_rel_error);
  r.speedup = wire_safe(r.speedup);
  for (timing_stats* t : {&r.candidate_time, &r.reference_time}) {
    t->median_ms = wire_safe(t->median_ms);
    t->mean_ms = wire_safe(t->mean_ms);
    t->min_ms = wire_safe(t->min_ms);
    t->max_ms = wire_safe(t->max_ms);
    t->stddev_ms = wire_safe(t->stddev_ms);
  }
  r.profile.duration_ms = wire_safe(r.profile.duration_ms);
  for (auto it = r.profile.values.begin(); it != r.profile.values.end();) {
    if (std::isfinite(it->second)) ++it;
    else it = r.profile.values.erase(it);
  }
}

void register_protocol(caf::actor_system_config& cfg) {
  cfg.add_message_type<distribution_spec>("ks::distribution_spec");
  cfg.add_message_type<tensor_spec>("ks::tensor_spec");
  cfg.add_message_type<tolerance_spec>("ks::tolerance_spec");
  cfg.add_message_type<task_spec>("ks::task_spec");
  cfg.add_message_type<plan_arg>("ks::plan_arg");
  cfg.add_message_type<plan_step>("ks::plan_step");
  cfg.add_message_type<buffer_spec>("ks::buffer_spec");
  cfg.add_message_type<launch_plan>("ks::launch_plan");
  cfg.add_message_type<candidate>("ks::candidate");
  cfg.add_message_type<std::vector<candidate>>("std::vector<ks::candidate>");
  cfg.add_message_type<review_status>("ks::review_status");
  cfg.add_message_type<review_options>("ks::review_options");
  cfg.add_message_type<review_request>("ks::review_request");
  cfg.add_message_type<compile_diagnostic>("ks::compile_diagnostic");
  cfg.add_message_type<kernel_resources>("ks::kernel_resources");
  cfg.add_message_type<timing_stats>("ks::timing_stats");
  cfg.add_message_type<profile_metrics>("ks::profile_metrics");
  cfg.add_message_type<review_result>("ks::review_result");
  cfg.add_message_type<code_features>("ks::code_features");
  cfg.add_message_type<method_choice>("ks::method_choice");
  cfg.add_message_type<method_veto>("ks::method_veto");
  cfg.add_message_type<optimization_plan>("ks::optimization_plan");
  cfg.add_message_type<repair_plan>("ks::repair_plan");
  cfg.add_message_type<trajectory_entry>("ks::trajectory_entry");
  cfg.add_message_type<std::vector<trajectory_entry>>("std::vector<ks::trajectory_entry>");
  cfg.add_message_type<ks_error>("ks::ks_error");
  cfg.add_message_type<generate_request>("ks::generate_request");
  cfg.add_message_type<diagnose_request>("ks::diagnose_request");
  cfg.add_message_type<repair_request>("ks::repair_request");
  cfg.add_message_type<feature_request>("ks::feature_request");
  cfg.add_message_type<plan_request>("ks::plan_request");
  cfg.add_message_type<optimize_request>("ks::optimize_request");
  cfg.add_message_type<task_progress>("ks::task_progress");
  cfg.add_message_type<task_outcome>("ks::task_outcome");
  cfg.add_message_type<device_info>("ks::device_info");
  cfg.add_message_type<worker_info>("ks::worker_info");
}

}  // namespace ks
