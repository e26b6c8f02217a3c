// CAF 0.17's deserializer default-constructs enum elements of sequences without
// initialising them before reading into them; GCC warns about that inside CAF.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "protocol/protocol.hpp"

#include <caf/actor_system_config.hpp>

namespace ks {

void register_protocol(caf::actor_system_config& cfg) {
  cfg.add_message_type<distribution_spec>("ks::distribution_spec");
  cfg.add_message_type<tensor_spec>("ks::tensor_spec");
  cfg.add_message_type<tolerance_spec>("ks::tolerance_spec");
  cfg.add_message_type<kernelbench_argument>("ks::kernelbench_argument");
  cfg.add_message_type<kernelbench_spec>("ks::kernelbench_spec");
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
  cfg.add_message_type<module_part>("ks::module_part");
  cfg.add_message_type<held_review>("ks::held_review");
  cfg.add_message_type<compile_diagnostic>("ks::compile_diagnostic");
  cfg.add_message_type<kernel_resources>("ks::kernel_resources");
  cfg.add_message_type<timing_stats>("ks::timing_stats");
  cfg.add_message_type<profile_metrics>("ks::profile_metrics");
  cfg.add_message_type<review_phases>("ks::review_phases");
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
