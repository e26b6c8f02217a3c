#pragma once
// One exchange with a language model, independent of the provider: what an agent asks
// (chat_request) and what comes back (chat_response). llm/llm_client.hpp sends them.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ks {

// The agent on whose behalf a request is made: accounting is kept per task and agent.
enum class agent_role : uint8_t { generator, repairer, optimizer, diagnoser, planner };
const char* to_string(agent_role a);
result<agent_role> parse_agent_role(const std::string& name);

// One turn of the conversation. role: "user" or "assistant" (the system prompt has
// its own field: OpenAI sends it as a leading "system" message, Anthropic as `system`).
struct chat_message {
  std::string role;
  std::string content;
  friend bool operator==(const chat_message&, const chat_message&) = default;
};

struct chat_request {
  std::string system;
  std::vector<chat_message> messages;  // non-empty; the last one is the user's
  std::optional<int> max_tokens;       // unset: coder.llm.max_tokens
  std::optional<double> temperature;   // unset: coder.llm.temperature
  agent_role agent = agent_role::generator;
  std::string task;       // the task accounted for; "" counts as "-"
  bool use_cache = true;  // false: the response cache is neither read nor written
};

struct chat_response {
  std::string text;          // the model's reply (text blocks joined)
  int64_t input_tokens = 0;  // from the API's usage fields (as recorded, for cache hits)
  int64_t output_tokens = 0;
  std::string model;             // the model that answered, as the API names it
  std::string finish_reason;     // stop | length | end_turn | max_tokens | … ("" if not given)
  double latency_ms = 0;         // wall time of the whole call, retries and waits included
  bool cached = false;           // answered from the on-disk cache; no request was sent
  int attempts = 0;              // HTTP attempts made (0 for a cache hit)
  double cost_usd = 0;           // what this call cost (0 for a cache hit or an unpriced model)
  int max_tokens = 0;            // the max_tokens sent (lowered when the context is short)
  bool streamed = false;         // the reply came as a stream of events
  bool usage_estimated = false;  // the server reported no token counts: they are estimates

  // The reply stopped at max_tokens: the text is cut off.
  bool truncated() const { return finish_reason == "length" || finish_reason == "max_tokens"; }
};

}  // namespace ks
