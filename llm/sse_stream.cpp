#include "llm/sse_stream.hpp"

#include <nlohmann/json.hpp>

namespace ks {

using json = nlohmann::json;

namespace {

std::string cut(const std::string& s, size_t limit) { return s.size() <= limit ? s : s.substr(0, limit) + "…"; }

std::string str(const json& obj, const char* name) {
  if (!obj.is_object()) return {};
  auto it = obj.find(name);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

int64_t integer(const json& obj, const char* name) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(name);
  return it != obj.end() && it->is_number() ? it->get<int64_t>() : 0;
}

}  // namespace

// ---------------------------------------------------------------------------

std::vector<sse_event> sse_parser::feed(std::string_view bytes) {
  std::vector<sse_event> out;
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c != '\n' && c != '\r') {
      skip_lf_ = false;
      continue;
    }
    if (c == '\n' && skip_lf_) {  // the LF of a CRLF whose CR ended the line
      skip_lf_ = false;
      start = i + 1;
      continue;
    }
    pending_.append(bytes.substr(start, i - start));
    line(pending_, out);
    pending_.clear();
    skip_lf_ = c == '\r';
    start = i + 1;
  }
  pending_.append(bytes.substr(start));
  return out;
}

std::vector<sse_event> sse_parser::finish() {
  std::vector<sse_event> out;
  if (!pending_.empty()) {
    line(pending_, out);
    pending_.clear();
  }
  if (has_fields_) {
    sse_event e{event_, data_};
    if (!e.data.empty() && e.data.back() == '\n') e.data.pop_back();
    out.push_back(std::move(e));
  }
  event_.clear();
  data_.clear();
  has_data_ = has_fields_ = false;
  return out;
}

void sse_parser::line(std::string_view text, std::vector<sse_event>& out) {
  if (text.empty()) {
    if (has_data_) {
      sse_event e{event_, data_};
      e.data.pop_back();  // the '\n' after the last data line
      out.push_back(std::move(e));
    }
    event_.clear();
    data_.clear();
    has_data_ = has_fields_ = false;
    return;
  }
  if (text.front() == ':') {
    ++comments_;
    return;
  }
  const size_t colon = text.find(':');
  std::string_view field = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    data_.append(value);
    data_.push_back('\n');
    has_data_ = has_fields_ = true;
  } else if (field == "event") {
    event_ = std::string(value);
    has_fields_ = true;
  }
  // id and retry are for EventSource reconnection; a chat stream is not resumed.
}

// ---------------------------------------------------------------------------

chat_stream_decoder::chat_stream_decoder(std::string provider) : provider_(std::move(provider)) {}

status chat_stream_decoder::feed(std::string_view bytes) {
  for (const auto& e : parser_.feed(bytes))
    if (auto st = event(e); !st) return st;
  return {};
}

status chat_stream_decoder::finish() {
  for (const auto& e : parser_.finish())
    if (auto st = event(e); !st) return st;
  // An OpenAI-compatible stream that said why it finished and then ended without
  // [DONE] is whole (older llama.cpp and Ollama servers end so).
  if (!done_ && provider_ != "anthropic" && finish_seen_) done_ = true;
  if (done_) return {};
  std::string what = events_ == 0 ? "before the first event"
                                  : "after " + std::to_string(events_) + " event" + (events_ == 1 ? "" : "s") +
                                        " and " + std::to_string(reply_.text.size()) + " characters of reply";
  return error{"the stream ended " + what + ", without " +
               (provider_ == "anthropic" ? std::string("message_stop") : std::string("[DONE] or a finish_reason")) +
               ": the reply was cut off"};
}

status chat_stream_decoder::event(const sse_event& e) {
  ++events_;
  return provider_ == "anthropic" ? anthropic_event(e) : openai_event(e);
}

status chat_stream_decoder::openai_event(const sse_event& e) {
  if (e.data == "[DONE]") {
    done_ = true;
    return {};
  }
  json doc = json::parse(e.data, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return error{"a stream event is not a JSON object: " + cut(e.data, 200)};
  if (auto it = doc.find("error"); it != doc.end() && !it->is_null()) {
    if (it->is_object()) {
      error_.type = str(*it, "type");
      error_.message = str(*it, "message");
      error_.code = static_cast<int>(integer(*it, "code"));
    } else {
      error_.message = it->is_string() ? it->get<std::string>() : it->dump();
    }
    if (error_.type.empty() && error_.message.empty()) error_.message = cut(e.data, 300);
    return error{"the server reported an error mid-stream: " + (error_.type.empty() ? "" : error_.type + ": ") +
                 error_.message};
  }
  if (str(doc, "object") == "error") {
    error_.type = str(doc, "type");
    error_.message = str(doc, "message");
    error_.code = static_cast<int>(integer(doc, "code"));
    return error{"the server reported an error mid-stream: " + (error_.type.empty() ? "" : error_.type + ": ") +
                 error_.message};
  }
  if (auto m = str(doc, "model"); !m.empty()) reply_.model = m;
  if (auto it = doc.find("choices"); it != doc.end() && it->is_array() && !it->empty()) {
    const json& choice = (*it)[0];
    if (choice.is_object()) {
      const json delta = choice.value("delta", json::object());
      if (delta.is_object()) {
        if (auto c = delta.find("content"); c != delta.end()) {
          if (c->is_string())
            reply_.text += c->get<std::string>();
          else if (c->is_array())
            for (const auto& part : *c) reply_.text += str(part, "text");
        }
        for (const char* r : {"reasoning_content", "reasoning"})
          if (auto t = delta.find(r); t != delta.end() && t->is_string())
            reasoning_chars_ += t->get_ref<const std::string&>().size();
      }
      if (auto fr = str(choice, "finish_reason"); !fr.empty()) {
        reply_.finish_reason = fr;
        finish_seen_ = true;
      }
    }
  }
  if (auto u = doc.find("usage"); u != doc.end() && u->is_object()) {
    usage_seen_ = true;
    reply_.input_tokens = integer(*u, "prompt_tokens");
    reply_.output_tokens = integer(*u, "completion_tokens");
  }
  return {};
}

status chat_stream_decoder::anthropic_event(const sse_event& e) {
  json doc = json::parse(e.data, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return error{"a stream event is not a JSON object: " + cut(e.data, 200)};
  const std::string type = e.event.empty() ? str(doc, "type") : e.event;
  if (type == "error") {
    const json err = doc.value("error", json::object());
    error_.type = str(err, "type");
    error_.message = str(err, "message");
    if (error_.type.empty() && error_.message.empty()) error_.message = cut(e.data, 300);
    return error{"the server reported an error mid-stream: " + (error_.type.empty() ? "" : error_.type + ": ") +
                 error_.message};
  }
  if (type == "message_start") {
    const json msg = doc.value("message", json::object());
    if (auto m = str(msg, "model"); !m.empty()) reply_.model = m;
    const json usage = msg.value("usage", json::object());
    anthropic_input_ = integer(usage, "input_tokens") + integer(usage, "cache_creation_input_tokens") +
                       integer(usage, "cache_read_input_tokens");
    reply_.input_tokens = anthropic_input_;
    reply_.output_tokens = integer(usage, "output_tokens");
  } else if (type == "content_block_delta") {
    const json delta = doc.value("delta", json::object());
    const std::string kind = str(delta, "type");
    if (kind == "text_delta")
      reply_.text += str(delta, "text");
    else if (kind == "thinking_delta")
      reasoning_chars_ += str(delta, "thinking").size();
  } else if (type == "message_delta") {
    const json delta = doc.value("delta", json::object());
    if (auto sr = str(delta, "stop_reason"); !sr.empty()) {
      reply_.finish_reason = sr;
      finish_seen_ = true;
    }
    if (auto u = doc.find("usage"); u != doc.end() && u->is_object()) {
      usage_seen_ = true;
      // Cumulative counts; input_tokens appears here too on newer API versions.
      reply_.output_tokens = integer(*u, "output_tokens");
      if (int64_t in = integer(*u, "input_tokens") + integer(*u, "cache_creation_input_tokens") +
                       integer(*u, "cache_read_input_tokens");
          in > 0)
        reply_.input_tokens = in;
    }
  } else if (type == "message_stop") {
    done_ = true;
  }
  // ping, content_block_start/stop: nothing to keep.
  return {};
}

}  // namespace ks
