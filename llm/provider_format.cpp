#include "llm/provider_format.hpp"

#include <nlohmann/json.hpp>

namespace ks {

using json = nlohmann::json;

namespace {

constexpr auto replace = json::error_handler_t::replace;

std::string cut(const std::string& s, size_t limit) {
  if (s.size() <= limit) return s;
  return s.substr(0, limit) + "… (" + std::to_string(s.size() - limit) + " more bytes)";
}

int64_t int_field(const json& obj, const char* name) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(name);
  if (it == obj.end() || !it->is_number()) return 0;
  return it->get<int64_t>();
}

std::string string_field(const json& obj, const char* name) {
  if (!obj.is_object()) return {};
  auto it = obj.find(name);
  if (it == obj.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

}  // namespace

bool is_known_provider(const std::string& provider) { return provider == "openai" || provider == "anthropic"; }

std::string encode_chat_body(const std::string& provider, const std::string& model, const std::string& system,
                             const std::vector<chat_message>& messages, const body_options& o) {
  json msgs = json::array();
  json body = json::object();
  body["model"] = model;
  const bool anthropic = provider == "anthropic";
  body[!anthropic && o.max_completion_tokens ? "max_completion_tokens" : "max_tokens"] = o.max_tokens;
  if (o.temperature) body["temperature"] = *o.temperature;
  if (anthropic) {
    if (!system.empty()) body["system"] = system;
  } else if (!system.empty()) {
    msgs.push_back({{"role", "system"}, {"content", system}});
  }
  for (const auto& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  body["messages"] = std::move(msgs);
  if (o.stream) {
    body["stream"] = true;
    if (!anthropic) body["stream_options"] = {{"include_usage", true}};
  }
  if (!anthropic && !o.reasoning_effort.empty()) body["reasoning_effort"] = o.reasoning_effort;
  return body.dump(-1, ' ', false, replace);
}

std::string encode_chat_body(const std::string& provider, const std::string& model, const std::string& system,
                             const std::vector<chat_message>& messages, int max_tokens, double temperature) {
  body_options o;
  o.max_tokens = max_tokens;
  o.temperature = temperature;
  return encode_chat_body(provider, model, system, messages, o);
}

std::vector<std::pair<std::string, std::string>> auth_headers(const std::string& provider, const std::string& api_key,
                                                              const std::string& anthropic_version, bool stream) {
  std::vector<std::pair<std::string, std::string>> h;
  if (provider == "anthropic") {
    if (!api_key.empty()) h.emplace_back("x-api-key", api_key);
    h.emplace_back("anthropic-version", anthropic_version);
  } else if (!api_key.empty()) {
    h.emplace_back("Authorization", "Bearer " + api_key);
  }
  h.emplace_back("Accept", stream ? "text/event-stream" : "application/json");
  return h;
}

result<decoded_reply> decode_chat_body(const std::string& provider, const std::string& body) {
  json doc;
  try {
    doc = json::parse(body);
  } catch (const std::exception& e) {
    return ks::error{"the reply is not JSON (" + std::string(e.what()) + "): " + cut(body, 300)};
  }
  if (!doc.is_object()) return ks::error{"the reply is not a JSON object: " + cut(body, 300)};
  if (doc.contains("error") && !doc["error"].is_null())
    return ks::error{"the API reported an error: " + api_error_text(body)};
  decoded_reply out;
  out.model = string_field(doc, "model");
  if (provider == "anthropic") {
    auto it = doc.find("content");
    if (it == doc.end() || !it->is_array()) return ks::error{"the reply has no 'content' array: " + cut(body, 300)};
    for (const auto& block : *it)
      if (block.is_object() && string_field(block, "type") == "text") out.text += string_field(block, "text");
    out.finish_reason = string_field(doc, "stop_reason");
    const json usage = doc.value("usage", json::object());
    out.input_tokens = int_field(usage, "input_tokens") + int_field(usage, "cache_creation_input_tokens") +
                       int_field(usage, "cache_read_input_tokens");
    out.output_tokens = int_field(usage, "output_tokens");
  } else {
    auto it = doc.find("choices");
    if (it == doc.end() || !it->is_array() || it->empty())
      return ks::error{"the reply has no 'choices': " + cut(body, 300)};
    const json& choice = (*it)[0];
    if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object())
      return ks::error{"choices[0] has no 'message': " + cut(body, 300)};
    const json& content = choice["message"].value("content", json());
    if (content.is_string()) {
      out.text = content.get<std::string>();
    } else if (content.is_array()) {  // content parts, as some servers send them
      for (const auto& part : content)
        if (part.is_object()) out.text += string_field(part, "text");
    }
    out.finish_reason = string_field(choice, "finish_reason");
    const json usage = doc.value("usage", json::object());
    out.input_tokens = int_field(usage, "prompt_tokens");
    out.output_tokens = int_field(usage, "completion_tokens");
  }
  return out;
}

std::string api_error_text(const std::string& body, size_t limit) {
  try {
    const json doc = json::parse(body);
    if (doc.is_object()) {
      if (auto it = doc.find("error"); it != doc.end()) {
        if (it->is_string()) return cut(it->get<std::string>(), limit);
        if (it->is_object()) {
          std::string msg = string_field(*it, "message");
          const std::string type = string_field(*it, "type");
          if (!msg.empty()) return cut(type.empty() ? msg : type + ": " + msg, limit);
        }
      }
      if (auto msg = string_field(doc, "message"); !msg.empty()) return cut(msg, limit);
      if (auto detail = string_field(doc, "detail"); !detail.empty()) return cut(detail, limit);
    }
  } catch (const std::exception&) {
  }
  return cut(body, limit);
}

}  // namespace ks
