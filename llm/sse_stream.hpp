#pragma once
// Streamed replies: a Server-Sent Events parser and the decoder of each provider's
// stream into the same decoded_reply a whole reply gives. Pure (bytes in, events and
// text out), so that the chunking real servers use can be tested without a network.
//
// The SSE grammar is WHATWG HTML's "server-sent events" section: lines end in CRLF, LF
// or CR; "data:" lines accumulate (joined by '\n'), "event:" names the event, lines
// starting with ':' are comments (keep-alives), an empty line dispatches the event;
// one leading space after the colon is dropped. Bytes may arrive split anywhere — in
// the middle of a line, of a CRLF, of a UTF-8 sequence — the parser keeps the rest.
//
// What the servers send (checked against each one's documentation and code):
// - OpenAI-compatible (api.openai.com, vLLM, llama.cpp's server, Ollama's /v1):
//   `data: {"choices":[{"index":0,"delta":{"content":"..."},"finish_reason":null}],...}`
//   per chunk, no `event:` lines; the first delta carries only the role, the last one
//   the finish_reason; with `stream_options: {"include_usage": true}` a final chunk
//   with `"choices": []` and `usage` (vLLM, OpenAI; llama.cpp puts `usage` on its last
//   chunk); then `data: [DONE]`. Reasoning models add `delta.reasoning_content` (vLLM's
//   reasoning parsers, llama.cpp) or `delta.reasoning` (Ollama): not part of the reply.
//   An error mid-stream is a data line with an `error` object (OpenAI, vLLM) or an
//   object with `"object": "error"` (older vLLM).
// - Anthropic Messages (`stream: true`): `event: message_start` (message.model,
//   message.usage.input_tokens), `content_block_start`, `content_block_delta` with
//   delta.type `text_delta` (text) or `thinking_delta` / `signature_delta` /
//   `input_json_delta` (not text), `content_block_stop`, `message_delta`
//   (delta.stop_reason, usage.output_tokens — cumulative), `message_stop`; `ping` at
//   any time; `event: error` with `{"type":"error","error":{"type":"overloaded_error",
//   "message":"Overloaded"}}` when the stream fails after its 200.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "llm/provider_format.hpp"

namespace ks {

struct sse_event {
  std::string event;  // "" when the server sent no event: line ("message" by the spec)
  std::string data;   // the data lines joined by '\n'
  friend bool operator==(const sse_event&, const sse_event&) = default;
};

class sse_parser {
 public:
  // The events that `bytes` completes, in order.
  std::vector<sse_event> feed(std::string_view bytes);
  // The stream ended: an event whose blank line never came is dispatched as the spec
  // says a stream's end does not — it is returned here so that a caller can tell a
  // cut-off event from none; empty when the stream ended on an event boundary.
  std::vector<sse_event> finish();
  // Comment lines seen (": ping", OpenRouter's ": PROCESSING").
  uint64_t comments() const { return comments_; }

 private:
  void line(std::string_view text, std::vector<sse_event>& out);

  std::string pending_;   // bytes of a line not yet ended
  bool skip_lf_ = false;  // the last byte was a CR: a LF right after it ends no line
  std::string event_;
  std::string data_;
  bool has_data_ = false;
  bool has_fields_ = false;
  uint64_t comments_ = 0;
};

// A mid-stream error the provider reported (its own type and message).
struct stream_error {
  std::string type;  // "overloaded_error", "api_error", "BadRequestError", …
  std::string message;
  int code = 0;  // the HTTP-like code some servers put in the error (vLLM), else 0
};

// Decodes one provider's stream into a reply. feed() the body's bytes as they come;
// the reply is complete when complete() is true ([DONE] or message_stop seen, or a
// finish_reason followed by the end of the stream — Ollama's and llama.cpp's older
// servers end some streams without [DONE]).
class chat_stream_decoder {
 public:
  explicit chat_stream_decoder(std::string provider);

  // Feeds bytes. An error when a data line is not JSON, or the stream carries an
  // error event (failure() then says which).
  status feed(std::string_view bytes);
  // The body ended. An error when the reply is not complete: the stream was cut
  // mid-reply (the text so far is kept in reply() for the message).
  status finish();

  bool complete() const { return done_; }
  bool usage_seen() const { return usage_seen_; }
  const decoded_reply& reply() const { return reply_; }
  const stream_error* failure() const { return error_.type.empty() && error_.message.empty() ? nullptr : &error_; }
  uint64_t events() const { return events_; }
  // Characters of reasoning (thinking) the model streamed besides its reply.
  uint64_t reasoning_chars() const { return reasoning_chars_; }

 private:
  status event(const sse_event& e);
  status openai_event(const sse_event& e);
  status anthropic_event(const sse_event& e);

  std::string provider_;
  sse_parser parser_;
  decoded_reply reply_;
  stream_error error_;
  bool done_ = false;
  bool finish_seen_ = false;
  bool usage_seen_ = false;
  uint64_t events_ = 0;
  uint64_t reasoning_chars_ = 0;
  int64_t anthropic_input_ = 0;
};

}  // namespace ks
