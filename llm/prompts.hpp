#pragma once
// The prompts of the LLM agents: one builder per agent, each a pure function of the
// protocol structs (and, for the optimizer, the method's knowledge from the skill
// library), so that what a model is told can be read and tested without a network.
//
// Every builder returns a chat_request with a system prompt (the role, the rules of
// the sandbox the kernel runs in, and the reply format) and one user message (the
// evidence, in Markdown sections). agent and task are filled in; max_tokens and
// temperature are left to the config. docs/llm.md shows the structure.
//
// Replies: generator, optimizer and repairer answer with a ```cuda block (the whole
// source) and a ```yaml block (the whole launch plan); the diagnoser with a ```json
// block {"diagnosis": "...", "actions": ["...", ...]}. llm/response_parser.hpp reads them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "llm/chat.hpp"
#include "model/candidate.hpp"
#include "model/decision.hpp"
#include "model/review.hpp"
#include "model/task.hpp"
#include "model/trajectory.hpp"
#include "policy/skill_library.hpp"

namespace ks {

// Bounds that keep prompts a sensible size.
struct prompt_limits {
  size_t max_history = 24;         // trajectory entries shown (the most recent)
  size_t max_diagnostics = 20;     // compiler diagnostics shown
  size_t max_log_chars = 4000;     // compile log / review message excerpt
  size_t max_summary_chars = 300;  // one trajectory entry's summary
  // The most characters the whole prompt (system prompt and user message) may take;
  // 0: no bound. The llm coder sets it from the room the model's context leaves
  // (tokens × the characters a token takes). A prompt over it is cut section by
  // section in truncation_order(agent) — each section down to its shortest rendering
  // before the next — and says at its end what was left out.
  size_t max_prompt_chars = 0;
};

// What each agent's prompt cuts first when it must fit (llm/prompt_budget.hpp), by
// section, first to last. Never cut: the task's header, inputs, parameters and
// tolerance, the kernel being optimised or repaired with its plan, the planner's
// decision, the diagnosis, the failure checklist and the instructions.
//   generator: guide (worked example, then the list of library ops), reference
//   optimizer: history (older events, then all but the per-method digest, then all),
//              method (its example), guide (example, op list, all), features,
//              review (profile metrics the decision does not rest on, then profile and
//              resources), reference
//   diagnoser: history, review (diagnostics after the first 5, most of the log), reference
//   repairer:  failed_repairs (all but the last 2, then all), guide, review, reference
// where `reference` is cut last: first its comments and docstrings, then the middle of
// its source down to a half and a quarter.
const std::vector<std::string>& truncation_order(agent_role role);

// Generator: a seed kernel for `task`. Seeds of one task differ by seed_index, which
// selects a design direction (so that seeds are diverse, and cache keys distinct);
// strategy_hint, when given, replaces it.
struct generator_options {
  uint32_t seed_index = 0;
  uint32_t seeds = 1;
  std::string strategy_hint;
};
chat_request generator_prompt(const task_spec& task, const generator_options& options = {},
                              const prompt_limits& limits = {});

// Optimizer: apply the plan's chosen method to a correct kernel. `method` is the
// chosen method's knowledge (nullptr: the method is named only by its id); history is
// the task's trajectory, oldest first.
chat_request optimizer_prompt(const task_spec& task, const candidate& cand, const review_result& review,
                              const code_features& features, const optimization_plan& plan, const method_def* method,
                              const std::vector<trajectory_entry>& history, const prompt_limits& limits = {});

// Diagnoser: explain why a candidate failed review and say what to change.
chat_request diagnoser_prompt(const task_spec& task, const candidate& cand, const review_result& review,
                              const std::vector<trajectory_entry>& history, const prompt_limits& limits = {});

// Repairer: fix the failing candidate following the diagnoser's plan. failed_repairs
// are the earlier repair attempts of this candidate's line that failed too (trajectory
// entries, oldest first): the model is told not to repeat them.
chat_request repairer_prompt(const task_spec& task, const candidate& cand, const review_result& review,
                             const repair_plan& diagnosis, const std::vector<trajectory_entry>& failed_repairs,
                             const prompt_limits& limits = {});

// Pieces the builders share, exposed for tests and for other backends' reports.
// render_task: the task with its reference's source — the KernelBench problem's own
// Python when the task came from one, else the TorchScript source, else the code a
// saved module's archive holds (llm/module_code.hpp) — inputs, parameters (a module's
// by their attribute), tolerance and other sizes.
std::string render_task(const task_spec& task);
std::string render_method(const method_def& method);
std::string render_review(const review_result& review, const task_spec& task, const candidate& cand,
                          const prompt_limits& limits = {});
std::string render_history(const std::vector<trajectory_entry>& history, const prompt_limits& limits = {});
// The launch-plan format as the model needs it (a condensed docs/launch-plan.md).
const std::string& launch_plan_guide();
// What a candidate reply must look like.
const std::string& candidate_reply_format();

}  // namespace ks
