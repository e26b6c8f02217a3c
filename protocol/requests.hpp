#pragma once
// The agents' requests and the error reply: what the task coordinator sends each
// agent (protocol/protocol.hpp names the actors that answer them). Plain structs with
// field lists, no CAF: coder backends take these without linking the actor system.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/candidate.hpp"
#include "model/decision.hpp"
#include "model/fields.hpp"
#include "model/review.hpp"
#include "model/task.hpp"
#include "model/trajectory.hpp"

namespace ks {

struct ks_error {
  std::string code;
  std::string message;
  std::string origin;  // which actor or node
  friend bool operator==(const ks_error&, const ks_error&) = default;
};
template <class F>
auto visit_fields(ks_error& x, F&& f) {
  return f("ks_error", KS_FIELD(code), KS_FIELD(message), KS_FIELD(origin));
}

// The answer to a review request that is no verdict on its candidate: internal_error
// with `message` (no GPU to review on, a review lost with its node, a module a worker
// does not hold, a device a node does not serve). The seed line never counts it against
// the candidate.
inline review_result unjudged(const review_request& req, std::string message) {
  review_result r;
  r.request_id = req.request_id;
  r.candidate_id = req.cand.id;
  r.status = review_status::internal_error;
  r.message = std::move(message);
  return r;
}

// ---------------------------------------------------------------------------
// Agent requests.

struct generate_request {
  task_spec task;
  uint32_t seeds = 4;
  friend bool operator==(const generate_request&, const generate_request&) = default;
};
template <class F>
auto visit_fields(generate_request& x, F&& f) {
  return f("generate_request", KS_FIELD(task), KS_FIELD(seeds));
}

struct diagnose_request {
  task_spec task;
  candidate cand;
  review_result review;
  std::vector<trajectory_entry> history;
  friend bool operator==(const diagnose_request&, const diagnose_request&) = default;
};
template <class F>
auto visit_fields(diagnose_request& x, F&& f) {
  return f("diagnose_request", KS_FIELD(task), KS_FIELD(cand), KS_FIELD(review), KS_FIELD(history));
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
template <class F>
auto visit_fields(repair_request& x, F&& f) {
  return f("repair_request", KS_FIELD(task), KS_FIELD(cand), KS_FIELD(plan), KS_FIELD(review), KS_FIELD(last_good),
           KS_FIELD(history));
}

struct feature_request {
  candidate cand;
  review_result review;
  friend bool operator==(const feature_request&, const feature_request&) = default;
};
template <class F>
auto visit_fields(feature_request& x, F&& f) {
  return f("feature_request", KS_FIELD(cand), KS_FIELD(review));
}

struct plan_request {
  task_spec task;
  candidate cand;
  review_result review;
  code_features features;
  std::vector<trajectory_entry> history;
  friend bool operator==(const plan_request&, const plan_request&) = default;
};
template <class F>
auto visit_fields(plan_request& x, F&& f) {
  return f("plan_request", KS_FIELD(task), KS_FIELD(cand), KS_FIELD(review), KS_FIELD(features), KS_FIELD(history));
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
template <class F>
auto visit_fields(optimize_request& x, F&& f) {
  return f("optimize_request", KS_FIELD(task), KS_FIELD(cand), KS_FIELD(plan), KS_FIELD(review), KS_FIELD(features),
           KS_FIELD(history));
}

}  // namespace ks
