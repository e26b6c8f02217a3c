#pragma once
// The agents of the optimisation loop, each a typed actor answering one kind of
// request (protocol/protocol.hpp). Their work blocks — a model call, an NVRTC compile,
// a subprocess — so spawn them with caf::detached. They hold no state between
// requests: a crashed agent is replaced by a fresh one and the request re-sent
// (actors/task_coordinator.hpp).
//
// An agent that cannot do what was asked (the model wrote nothing usable, a method
// does not apply) replies with agent_failure(message); any other error a requester
// sees (the agent died, the request timed out) means the agent itself failed.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "coder/coder.hpp"
#include "policy/skill_library.hpp"
#include "protocol/protocol.hpp"

namespace ks {

class llm_coder;
class store;
class nvrtc_compiler;

// The error an agent replies with when it could not do the work, and the message
// back from such an error (nullopt: the error is not a reported failure).
caf::error agent_failure(std::string message);
std::optional<std::string> agent_failure_message(const caf::error& e);

// Generator, optimizer and repairer: the coder backend writes the code.
generator_actor::behavior_type generator_agent(generator_actor::pointer self, std::shared_ptr<coder> backend);
optimizer_actor::behavior_type optimizer_agent(optimizer_actor::pointer self, std::shared_ptr<coder> backend);
repairer_actor::behavior_type repairer_agent(repairer_actor::pointer self, std::shared_ptr<coder> backend);

// Diagnoser: reads a failed review (and the task's trajectory) into a repair plan.
// The deterministic reading (rule_diagnosis) always comes first; with a model it is
// refined by the model's own reading, and falls back to the rules when the model fails.
diagnoser_actor::behavior_type diagnoser_agent(diagnoser_actor::pointer self, std::shared_ptr<llm_coder> model);
repair_plan rule_diagnosis(const diagnose_request& req);

// Feature extractor: static features of a reviewed candidate, with NVRTC's PTX and
// the plan resolved at the task's shapes (features/feature_extractor.hpp).
struct feature_agent_options {
  std::shared_ptr<nvrtc_compiler> compiler;  // null: no PTX (source analysis only)
  task_spec task;                            // empty name: no resolved plan
  std::string size;                          // the task size reviews run at
};
feature_extractor_actor::behavior_type feature_agent(feature_extractor_actor::pointer self,
                                                     feature_agent_options options);

// Planner: the decision policy (policy/decision_policy.hpp) over the candidate's
// evidence, the task's trajectory and the experience in the store.
struct planner_options {
  std::shared_ptr<const skill_library> library;  // required
  std::shared_ptr<store> memory;                 // experience; null: none
  bool use_long_term_memory = true;              // false: no decision table, no experience
  bool use_short_term_memory = true;             // false: the trajectory is not read
};
planner_actor::behavior_type planner_agent(planner_actor::pointer self, planner_options options);

// Reviewer: the front of the GPU pools, as a fleet dispatcher
// (fleet/review_dispatcher.hpp) over `pools`, all of one device class. The daemon and
// `run` start the dispatcher themselves, with device classes, remote nodes and a
// meter (cli/run_setup.hpp).
reviewer_actor::behavior_type reviewer_agent(reviewer_actor::pointer self, std::vector<gpu_pool_actor> pools);

}  // namespace ks
