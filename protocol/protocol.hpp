#pragma once
// The KernelSkill protocol: the typed interfaces of the actors, the atoms they use, and
// how every message crosses an actor or process boundary. Daemon, agents and GPU
// workers (local or remote, over CAF's middleman) all speak exactly this.
//
// The messages themselves are the model's plain structs (model/) and the agents'
// requests (protocol/requests.hpp). Rules for them:
// - each lists its fields once (model/fields.hpp); the inspect() below serializes them
//   in that order, and each has a stable wire name, registered by register_protocol()
//   on both ends of a link;
// - enums travel as their underlying integer: only append new enumerators;
// - free-form measurements travel as string→double maps with documented names, so a
//   new metric or feature needs no protocol change;
// - doubles must be finite on the wire (protocol/wire_safe.hpp).

#include <cstdint>  // before CAF: its atom_val.hpp uses uint64_t without it (g++ 13)
#include <string>
#include <type_traits>
#include <vector>

#include <caf/atom.hpp>
#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/serializer.hpp>
#include <caf/typed_actor.hpp>

#include "model/candidate.hpp"
#include "model/decision.hpp"
#include "model/device.hpp"
#include "model/fields.hpp"
#include "model/launch_plan.hpp"
#include "model/review.hpp"
#include "model/run.hpp"
#include "model/task.hpp"
#include "model/trajectory.hpp"
#include "protocol/module_parts.hpp"
#include "protocol/requests.hpp"

namespace ks {

// Shared bytes on the wire exactly as a std::string of them (a length, then the bytes),
// written straight from the shared buffer: no copy of a module's weights per message.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shared_bytes& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    size_t n = x.size();
    return caf::error::eval([&] { return f.begin_sequence(n); },
                            [&] { return n > 0 ? f.apply_raw(n, const_cast<char*>(x.data())) : caf::error{}; },
                            [&] { return f.end_sequence(); });
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    std::string bytes;
    auto err = f(bytes);
    if (!err) x = std::move(bytes);
    return err;
  } else {  // printing a message: the size, not the bytes
    std::string shown = std::to_string(x.size()) + " bytes";
    return f(shown);
  }
}

// CAF's serialization of every struct with a field list: the fields in list order,
// under the struct's name (found by ADL, as CAF 0.17 looks for inspect()).
template <class Inspector, has_field_list T>
typename Inspector::result_type inspect(Inspector& f, T& x) {
  return visit_fields(
      x, [&f](const char* name, auto... fields) { return f(caf::meta::type_name(name), fields.value...); });
}

// ---------------------------------------------------------------------------
// Atoms and actor interfaces.

using describe_atom = caf::atom_constant<caf::atom("describe")>;

// A kernelskill-gpu process (one per GPU): does all GPU work for its device. A task's
// module larger than one part arrives ahead of its reviews as module_parts (each
// answered with why it was refused, or nothing) and its reviews as held_reviews
// (protocol/module_parts.hpp).
using gpu_worker_actor = caf::typed_actor<
    caf::replies_to<describe_atom>::with<worker_info>, caf::replies_to<review_request>::with<review_result>,
    caf::replies_to<module_part>::with<std::string>, caf::replies_to<held_review>::with<review_result>>;

// A GPU machine's node agent (`kernelskill-gpu --listen`, fleet/node_agent.hpp): it
// supervises one worker process per device. describe lists every device it serves;
// (device, N, request) reviews on device N; a large module comes ahead in parts, as to
// a worker, and (device, N, held_review) reviews with it. The daemon reaches other machines only
// through this interface, so a plain worker published by mistake is refused at connect.
using device_atom = caf::atom_constant<caf::atom("device")>;
using gpu_node_actor = caf::typed_actor<caf::replies_to<describe_atom>::with<worker_info>,
                                        caf::replies_to<device_atom, int32_t, review_request>::with<review_result>,
                                        caf::replies_to<module_part>::with<std::string>,
                                        caf::replies_to<device_atom, int32_t, held_review>::with<review_result>>;

// In the daemon, one per device: queues review requests, sends one at a time to its
// worker, restarts the worker when it dies (fleet/gpu_pool.hpp for a local device,
// fleet/remote_pool.hpp for a device of a node).
using gpu_pool_actor = caf::typed_actor<caf::replies_to<describe_atom>::with<worker_info>,
                                        caf::replies_to<review_request>::with<review_result>>;

// The agents. Each answers one kind of request; the task coordinator drives them.
using generator_actor = caf::typed_actor<caf::replies_to<generate_request>::with<std::vector<candidate>>>;
using reviewer_actor = caf::typed_actor<caf::replies_to<review_request>::with<review_result>>;
using feature_extractor_actor = caf::typed_actor<caf::replies_to<feature_request>::with<code_features>>;
using diagnoser_actor = caf::typed_actor<caf::replies_to<diagnose_request>::with<repair_plan>>;
using repairer_actor = caf::typed_actor<caf::replies_to<repair_request>::with<candidate>>;
using planner_actor = caf::typed_actor<caf::replies_to<plan_request>::with<optimization_plan>>;
using optimizer_actor = caf::typed_actor<caf::replies_to<optimize_request>::with<candidate>>;

// Registers every message type above under its wire name. Both ends of a network
// link must call it, or remote_actor fails with unexpected_actor_messaging_interface.
void register_protocol(caf::actor_system_config& cfg);

// The protocol's version, exchanged in worker_info: "kernelskill/1".
inline constexpr const char* protocol_version = "kernelskill/1";

}  // namespace ks
