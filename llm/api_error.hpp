#pragma once
// What an error reply of an LLM API means, read from each provider's own format, so
// that the client can say what to change (the key, the context, the model name) and
// decide whether to retry. Pure: status and body in, a classification out.
//
// The formats it reads (from each server's documentation and source):
// - OpenAI: {"error": {"message", "type", "param", "code"}}; code
//   "context_length_exceeded" ("This model's maximum context length is 128000 tokens.
//   However, your messages resulted in 130412 tokens…"), "invalid_api_key" (401),
//   "model_not_found" (404), "rate_limit_exceeded" (429), "insufficient_quota" (429,
//   and no wait helps: not retried).
// - vLLM (OpenAI-compatible server): {"error": {"message", "type": "BadRequestError",
//   "code": 400}} (older releases: the same fields at the top level, "object":
//   "error"); its context messages: "This model's maximum context length is 4096
//   tokens. However, you requested 5000 tokens (3000 in the messages, 2000 in the
//   completion)…", "'max_tokens' or 'max_completion_tokens' is too large: 8000. This
//   model's maximum context length is 4096 tokens and your request has 2778 input
//   tokens (8000 > 4096 - 2778)", "The decoder prompt (length 5000) is longer than the
//   maximum model length of 4096"; a server started with --api-key answers 401
//   {"error": "Unauthorized"}.
// - llama.cpp's server: {"error": {"code": 400, "message": "request (4476 tokens)
//   exceeds the available context size (4096 tokens)…", "type":
//   "exceed_context_size_error", "n_prompt_tokens": 4476, "n_ctx": 4096}}; 401
//   {"error": {"code": 401, "message": "Invalid API Key", "type":
//   "authentication_error"}}; 503 "Loading model" while it starts.
// - Ollama (/v1): {"error": {"message": "model \"x\" not found, try pulling it first",
//   "type": "api_error"}} (404). Ollama does not refuse a long prompt: it cuts it to
//   its num_ctx silently, which is why the client checks the context itself.
// - Anthropic: {"type": "error", "error": {"type", "message"}} with types
//   invalid_request_error (400; "prompt is too long: 205000 tokens > 200000 maximum",
//   "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000…"),
//   authentication_error (401), permission_error (403), not_found_error (404),
//   request_too_large (413), rate_limit_error (429, with retry-after),
//   api_error (500), overloaded_error (529).

#include <cstdint>
#include <optional>
#include <string>

namespace ks {

enum class api_error_kind {
  context_length,  // the prompt (plus max_tokens) does not fit the model's window
  authentication,  // a missing or wrong key
  permission,      // a key without access to the model or the endpoint
  not_found,       // a wrong endpoint path or model name
  rate_limit,      // 429: wait and retry
  quota,           // 429 insufficient_quota: no wait helps
  overloaded,      // 529 / 503 / overloaded_error: wait and retry
  server,          // 5xx
  bad_request,     // any other 4xx
  other,
};
const char* to_string(api_error_kind k);

struct api_error_info {
  api_error_kind kind = api_error_kind::other;
  std::string text;                       // the API's own words ("type: message"), cut
  std::optional<int64_t> context_tokens;  // the model's window, where the error names it
  std::optional<int64_t> prompt_tokens;   // the request's input tokens, where named
  bool retryable = false;                 // worth another attempt (after a wait)
};

// Classifies a non-2xx reply. `status` 0 with a body: an error that came inside a
// stream (its type decides).
api_error_info classify_api_error(int status, const std::string& body);

// Reads the numbers out of a context-length message (any of the forms above); both
// unset when it names none.
void read_context_numbers(const std::string& message, api_error_info& info);

// What the user can do about it, naming the config key or the server flag
// ("; check the key in OPENAI_API_KEY (coder.llm.api_key_env)"). "" when nothing to add.
std::string api_error_hint(const api_error_info& info, const std::string& provider, const std::string& api_key_env);

}  // namespace ks
