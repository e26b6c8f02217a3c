#pragma once
// The `llm` coder backend: candidates written by a language model. Each call builds
// the agent's prompt (llm/prompts.hpp), sends it through a chat function (an
// llm_client, or anything answering like one), and parses the reply into source +
// launch plan, asking again in the right format a bounded number of times
// (llm/candidate_request.hpp). Whether the code compiles or is correct is the
// reviewer's business: a reply that parses is returned as it is.

#include <functional>
#include <memory>

#include "coder/coder.hpp"
#include "config/experiment_config.hpp"
#include "llm/candidate_request.hpp"
#include "llm/prompts.hpp"
#include "policy/skill_library.hpp"
#include "protocol/requests.hpp"

namespace ks {

struct llm_coder_options {
  chat_function chat;                            // required
  std::shared_ptr<const skill_library> library;  // method knowledge; may be null
  // false (the ablation `ablation.long_term_memory: false`): the optimizer's prompt
  // names the planner's method by its id only and carries none of the skill
  // library's knowledge (name, rationale, preconditions, expected effect, forbidden
  // patterns, example), as the paper's run without long-term memory.
  bool use_long_term_memory = true;
  int max_format_repairs = 2;
  prompt_limits limits;
  // The characters a prompt may take now (0: no bound): what the model's context
  // leaves after the reply, as the client knows it (llm_client::room_for_prompt).
  // Called before each prompt is built; unset: limits.max_prompt_chars as given.
  std::function<size_t()> prompt_chars;
};

// The options an experiment config asks for: `chat` and the library, with the
// library's knowledge left out of every prompt when the config's ablation turns
// long-term memory off.
llm_coder_options llm_coder_options_for(const experiment_config& config, chat_function chat,
                                        std::shared_ptr<const skill_library> library);
// The same, asking `client` (kept alive by the options) and fitting every prompt into
// the room its model's context leaves.
llm_coder_options llm_coder_options_for(const experiment_config& config, std::shared_ptr<llm_client> client,
                                        std::shared_ptr<const skill_library> library);

class llm_coder final : public coder {
 public:
  explicit llm_coder(llm_coder_options options);

  std::string name() const override { return "llm"; }
  // One request per seed (seed k asks for design direction k). Seeds whose reply
  // cannot be used are skipped with a warning; an error only when none can.
  result<std::vector<candidate>> seeds(const task_spec& task, uint32_t count) override;
  result<candidate> optimize(const optimize_input& in) override;
  // The repaired candidate keeps the failed one's parent and recipe, so the trajectory
  // credits the method that was being tried; its origin is "repair".
  result<candidate> repair(const repair_input& in) override;

  // The diagnoser's model reading of a failure (the diagnoser agent asks this when
  // the backend is llm). candidate_id is set to req.cand.id.
  result<repair_plan> diagnose(const diagnose_request& req);

 private:
  prompt_limits limits() const;

  llm_coder_options options_;
};

}  // namespace ks
