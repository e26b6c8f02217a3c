#pragma once
// The deterministic decision policy: from a candidate's evidence (profile, code
// features, task, history) and the skill library, which optimisation methods are
// allowed next, in which order, which are vetoed and why (docs/skills.md, "How
// decide() works").
//
// decide() is a pure function: the same library and input give a byte-identical
// trace (render_trace) and plan, whatever the order of the history or the maps it
// was given. Every choice is explained by the trace: the evidence values read, the
// derived fields and predicates, the bottleneck classes that hold and why, each
// decision case that fired or why it did not, the history the guardrails read, and
// every veto with its reason.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/decision.hpp"
#include "model/review.hpp"
#include "model/trajectory.hpp"
#include "policy/policy_expr.hpp"
#include "policy/skill_library.hpp"
#include "protocol/requests.hpp"

namespace ks {

// What a method achieved before, across tasks, in the bottleneck class at hand (and
// the candidate's template): how many times it was applied, and the geometric mean of
// what each application gave its line (method_stats::realized_gain: the attempt over
// its parent where it was correct and faster, 1 — nothing — where it was slower or
// failed). applied == 0 or mean_gain <= 0 means "no experience".
struct experience_summary {
  uint32_t applied = 0;
  double mean_gain = 0;
};

// Everything the policy reads.
struct policy_input {
  profile_metrics profile;
  code_features features;      // candidate_id names the candidate decided for
  std::optional<double> atol;  // the task's tolerance (task_atol); nullopt = unknown
  std::optional<double> rtol;  // task_rtol
  std::string dtype;           // task_dtype, e.g. "float32"; "" = unknown
  uint32_t round = 0;
  std::vector<trajectory_entry> history;  // the task's trajectory (any order)
  // method → experience in the primary class (primary_bottleneck() tells which) and
  // for the candidate's template.
  std::map<std::string, experience_summary> experience;
  // The candidate's template (a rules-coder recipe's `template`; "" for another
  // coder's): shown in the trace, the key its experience was read under.
  std::string template_name;
  // false (ablation): no decision table, no global vetoes, no experience; every method
  // whose `requires` holds is allowed with score 1, in an order drawn uniformly from
  // uniform_seed, the candidate and the round; the guardrails still apply.
  bool use_long_term_memory = true;
  uint64_t uniform_seed = 1;
  // The methods the candidate's coder can apply to it (a rules-coder candidate's
  // recipe `methods`: those whose change alters its kernels); every other method is
  // vetoed, with or without long-term memory. nullopt: not known (any coder may try
  // any method).
  std::optional<std::vector<std::string>> coder_methods;
  // The coder has a second coder for the methods it lacks (the hybrid coder's model:
  // a rules candidate's recipe `other_methods: model`): coder_methods are preferred —
  // every other method is vetoed while one of them is allowed — and when none is, the
  // other allowed methods are offered instead of none.
  bool coder_fallback = false;
};

// The input for a planner request: profile from the review, the features, the
// task's tolerance and dtype (of its first input), its history and round, and the
// methods the candidate's recipe says its coder can apply (`methods`, when present;
// `other_methods: model` sets coder_fallback), and its `template`.
policy_input make_policy_input(const plan_request& req);

// The input a decision case's example describes (candidate id "example"): what
// `skills check` and the library tests feed the policy to see each case fire.
policy_input make_policy_input(const case_example& example);

// One named value of the trace. origin: metric, feature, structure, task, derived,
// predicate. missing: the absent names behind an unknown value.
struct traced_value {
  std::string name;
  std::string origin;
  policy_value value;
  std::vector<std::string> missing;
};

// A bottleneck class that holds, with why.
struct bottleneck_finding {
  std::string id;
  int priority = 0;
  std::string because;                           // "dram_throughput_pct 91 ≥ 70"
  std::map<std::string, policy_value> evidence;  // names read + the class's evidence list
};

// A rule (bottleneck class, decision case, global veto, precondition) that was
// considered: whether it fired, and the reason in words.
struct rule_outcome {
  std::string id;
  bool fired = false;
  std::string reason;                // fired: why it held; else why not
  std::vector<std::string> missing;  // absent names, when unknown
};

// One optimisation attempt found in the history (a "review" entry with a method).
struct history_attempt {
  uint64_t seq = 0;
  std::string method;
  std::string candidate_id;
  std::string parent_id;
  std::string bottleneck;  // the class it was planned in; "" when unknown
  bool failed = false;
  std::string outcome;  // "ok: speedup 1.30 ≥ 1.10 × 1.02", "failed: incorrect", …
};

// How a ranked move's expected gain was made (docs/skills.md, "The plan across
// rounds"). tier: "table" (a fired case allows it), "carried" (an ancestor's plan
// ranked it and it has not been tried since), "explore" (another legal move of the
// coder), "uniform" (long-term memory off: no expectation).
struct move_estimate {
  std::string method;
  std::string tier;
  double prior = 0;      // the table's gain, the ancestor's, or exploration_gain
  uint32_t applied = 0;  // applications in the experience
  double measured = 0;   // their realized gain (0: none)
  double expected = 0;   // prior and measured weighed together: what ranks it
};

struct decision_trace {
  std::string library;
  int library_version = 0;
  std::string candidate_id;
  uint32_t round = 0;
  bool use_long_term_memory = true;
  std::string structure_class;
  std::string template_name;  // policy_input::template_name

  std::vector<traced_value> evidence;    // the inputs, by name
  std::vector<traced_value> derived;     // in library order
  std::vector<traced_value> predicates;  // in evaluation order

  std::string primary;                            // "" when no class holds
  std::vector<bottleneck_finding> bottlenecks;    // the classes that hold, primary first
  std::vector<rule_outcome> bottlenecks_unknown;  // classes whose condition was unknown

  std::vector<rule_outcome> cases_fired;  // in library order
  std::vector<rule_outcome> cases_not_fired;
  std::vector<rule_outcome> vetoes_checked;  // global vetoes and their outcome
  std::vector<history_attempt> attempts;     // by seq
  std::vector<std::string> lineage;          // methods that made this candidate, oldest first

  std::vector<method_choice> ranked;     // allowed and not vetoed, best first
  std::vector<move_estimate> estimates;  // one per ranked move, in its order
  std::vector<method_veto> vetoed;       // one per method, reasons joined by "; "
  std::vector<std::string> notes;        // unknown preconditions, …
  // Where experience changed the choice: the move chosen on the priors alone, and
  // why experience moved it (empty when it did not).
  std::string chosen_without_experience;
  std::string experience_moved;

  // The protocol's plan: bottleneck_class = primary, chosen = ranked[0] (or ""),
  // rationale = "[bottleneck=CLASS] " + summary(). Each ranked move's score is its
  // prior (the table's gain, the ancestor plan's, exploration_gain, or 1); the order
  // is by tier and expected gain.
  optimization_plan to_optimization_plan() const;

  // One line: "dram_throughput_pct 91 ≥ 70 and structure streaming →
  // memory_bandwidth; case X fired → vectorize_loads (gain 1.4); …".
  std::string summary() const;
};

// Decides. Never fails: missing evidence makes conditions unknown, not errors.
decision_trace decide(const skill_library& lib, const policy_input& in);

// The primary bottleneck class for `in` ("" when none holds), for looking up the
// experience to pass to decide().
std::string primary_bottleneck(const skill_library& lib, const policy_input& in);

// The human audit text of a trace (several lines, ends with a newline).
std::string render_trace(const decision_trace& trace);

// The key under which a plan entry of the trajectory records the prior gain of each
// move it ranked from the decision table or carried (metrics["gain/METHOD"]): the
// plans of the candidate's descendants read them back and carry the moves not tried
// yet (docs/skills.md, "The plan across rounds").
std::string plan_gain_key(const std::string& method);

// Whether a plan offers nothing because every move left is expected to gain no more
// than the noise (guardrails.min_gain), rather than because no move is allowed.
bool nothing_above_noise(const optimization_plan& plan);

// The tag that records, in a trajectory entry's summary, the bottleneck class an
// attempt was planned in: "[bottleneck=memory_bandwidth]". The plan's rationale
// starts with it; the guardrails read it back (docs/skills.md, "History").
std::string bottleneck_tag(const std::string& bottleneck);
// The class named by a tag in `summary`, or "" when there is none.
std::string bottleneck_from_summary(const std::string& summary);

}  // namespace ks
