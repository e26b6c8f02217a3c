#pragma once
// The wire formats of the two provider families, as pure functions (no I/O), so that
// what is sent and how a reply is read can be tested without a network.
//
//   openai:    POST …/chat/completions  {model, messages: [{role: system, …}, …],
//              max_tokens (or max_completion_tokens), temperature, stream}  →
//              choices[0].message.content,
//              choices[0].finish_reason, usage.prompt_tokens / completion_tokens
//   anthropic: POST …/v1/messages       {model, system, messages, max_tokens,
//              temperature}  →  content[*].text (type "text"), stop_reason,
//              usage.input_tokens / output_tokens

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "llm/chat.hpp"

namespace ks {

// "openai" and "anthropic"; anything else is refused by the client.
bool is_known_provider(const std::string& provider);

// What a request body carries besides the conversation.
struct body_options {
  int max_tokens = 1;
  std::optional<double> temperature;  // unset: not sent (reasoning models refuse it)
  // openai: a streamed reply (`stream: true` with `stream_options: {include_usage:
  // true}`, so that the last chunk carries the token counts); anthropic: `stream: true`.
  bool stream = false;
  // openai: `max_completion_tokens` instead of `max_tokens` (OpenAI's reasoning
  // models refuse max_tokens; vLLM and llama.cpp accept either).
  bool max_completion_tokens = false;
  std::string reasoning_effort;  // openai: sent as reasoning_effort when not empty
};

// The JSON request body.
std::string encode_chat_body(const std::string& provider, const std::string& model, const std::string& system,
                             const std::vector<chat_message>& messages, const body_options& options);
// The classic body: max_tokens and temperature, not streamed.
std::string encode_chat_body(const std::string& provider, const std::string& model, const std::string& system,
                             const std::vector<chat_message>& messages, int max_tokens, double temperature);

// Header name/value pairs besides Content-Type. api_key may be empty (no auth header).
// openai: Authorization: Bearer KEY. anthropic: x-api-key: KEY, anthropic-version.
// Accept: text/event-stream for a streamed request, application/json otherwise.
std::vector<std::pair<std::string, std::string>> auth_headers(const std::string& provider, const std::string& api_key,
                                                              const std::string& anthropic_version,
                                                              bool stream = false);

struct decoded_reply {
  std::string text;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::string model;
  std::string finish_reason;
};

// Reads a 2xx body. An error says what is missing; an error object inside a 2xx body
// (some compatible servers do that) is reported with its message.
result<decoded_reply> decode_chat_body(const std::string& provider, const std::string& body);

// The human-readable part of an error body: error.message (both providers' shape),
// else the body itself, cut to `limit` characters.
std::string api_error_text(const std::string& body, size_t limit = 2000);

}  // namespace ks
