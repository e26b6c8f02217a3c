#include "llm/api_error.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

#include <nlohmann/json.hpp>

namespace ks {

using json = nlohmann::json;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string cut(const std::string& s, size_t limit) {
  return s.size() <= limit ? s : s.substr(0, limit) + "… (" + std::to_string(s.size() - limit) + " more bytes)";
}

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return {};
}

std::optional<int64_t> number_of(const json& obj, const char* name) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(name);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::optional<int64_t> first_match(const std::string& text, const std::vector<std::regex>& patterns) {
  std::smatch m;
  for (const auto& re : patterns)
    if (std::regex_search(text, m, re)) {
      try {
        return std::stoll(m[1].str());
      } catch (const std::exception&) {
      }
    }
  return std::nullopt;
}

bool mentions_context(const std::string& m) {
  for (const char* needle : {"maximum context length", "context length", "context size", "context window",
                             "context limit", "prompt is too long", "maximum model length", "too many tokens"})
    if (m.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

const char* to_string(api_error_kind k) {
  switch (k) {
    case api_error_kind::context_length:
      return "context_length";
    case api_error_kind::authentication:
      return "authentication";
    case api_error_kind::permission:
      return "permission";
    case api_error_kind::not_found:
      return "not_found";
    case api_error_kind::rate_limit:
      return "rate_limit";
    case api_error_kind::quota:
      return "quota";
    case api_error_kind::overloaded:
      return "overloaded";
    case api_error_kind::server:
      return "server";
    case api_error_kind::bad_request:
      return "bad_request";
    case api_error_kind::other:
      return "other";
  }
  return "other";
}

void read_context_numbers(const std::string& message, api_error_info& info) {
  static const std::vector<std::regex> window = {
      std::regex(R"(maximum context length is (\d+))", std::regex::icase),
      std::regex(R"(maximum model length of (\d+))", std::regex::icase),
      std::regex(R"(available context size \((\d+) tokens\))", std::regex::icase),
      std::regex(R"(context limit: \d+ \+ \d+ > (\d+))", std::regex::icase),
      std::regex(R"(tokens > (\d+) maximum)", std::regex::icase),
      std::regex(R"(context window of (\d+))", std::regex::icase),
  };
  static const std::vector<std::regex> prompt = {
      std::regex(R"(your request has (\d+) input tokens)", std::regex::icase),
      std::regex(R"(\((\d+) in the messages)", std::regex::icase),
      std::regex(R"(your messages resulted in (\d+) tokens)", std::regex::icase),
      std::regex(R"(prompt \(length (\d+)\))", std::regex::icase),
      std::regex(R"(request \((\d+) tokens\))", std::regex::icase),
      std::regex(R"(prompt is too long: (\d+) tokens)", std::regex::icase),
      std::regex(R"(context limit: (\d+) \+)", std::regex::icase),
  };
  if (!info.context_tokens) info.context_tokens = first_match(message, window);
  if (!info.prompt_tokens) info.prompt_tokens = first_match(message, prompt);
}

api_error_info classify_api_error(int status, const std::string& body) {
  api_error_info info;
  std::string type, code, message;
  json err;
  const json doc = json::parse(body, nullptr, false);
  if (!doc.is_discarded() && doc.is_object()) {
    if (auto it = doc.find("error"); it != doc.end()) {
      if (it->is_object())
        err = *it;
      else
        message = text_of(*it);  // vLLM's 401: {"error": "Unauthorized"}
    } else {
      err = doc;  // older vLLM: the fields at the top level; a bare {"message"} or {"detail"}
    }
    if (err.is_object()) {
      type = text_of(err.value("type", json()));
      code = text_of(err.value("code", json()));
      message = text_of(err.value("message", json()));
      if (message.empty()) message = text_of(err.value("detail", json()));
      info.context_tokens = number_of(err, "n_ctx");
      info.prompt_tokens = number_of(err, "n_prompt_tokens");
    }
  }
  if (message.empty() && type.empty()) {
    info.text = cut(body, 2000);
  } else {
    const bool generic_type = type.empty() || type == "error";
    info.text = cut(generic_type ? message : message.empty() ? type : type + ": " + message, 2000);
  }
  const std::string t = lower(type), c = lower(code), m = lower(message);
  // Mid-stream errors carry no status; vLLM puts one in `code`.
  if (status == 0 && !c.empty() && std::all_of(c.begin(), c.end(), ::isdigit)) status = std::stoi(c);

  auto set = [&](api_error_kind k, bool retry) {
    info.kind = k;
    info.retryable = retry;
    return info;
  };
  if (c == "context_length_exceeded" || t == "exceed_context_size_error" ||
      ((status == 400 || status == 413 || status == 0 || t == "invalid_request_error") && mentions_context(m))) {
    read_context_numbers(message, info);
    return set(api_error_kind::context_length, false);
  }
  if (c == "insufficient_quota" || t == "insufficient_quota") return set(api_error_kind::quota, false);
  if (status == 401 || t == "authentication_error" || c == "invalid_api_key")
    return set(api_error_kind::authentication, false);
  if (status == 403 || t == "permission_error") return set(api_error_kind::permission, false);
  if (status == 404 || t == "not_found_error" || c == "model_not_found") return set(api_error_kind::not_found, false);
  if (status == 429 || t == "rate_limit_error" || c == "rate_limit_exceeded")
    return set(api_error_kind::rate_limit, true);
  if (status == 529 || status == 503 || t == "overloaded_error") return set(api_error_kind::overloaded, true);
  if (status == 408) return set(api_error_kind::other, true);
  if (status >= 500 || t == "api_error" || t == "server_error") return set(api_error_kind::server, true);
  if (status >= 400) return set(api_error_kind::bad_request, false);
  // A mid-stream error of a type not known here: the server's trouble, worth one more try.
  return set(api_error_kind::other, status == 0 && t != "invalid_request_error");
}

std::string api_error_hint(const api_error_info& info, const std::string& provider, const std::string& api_key_env) {
  switch (info.kind) {
    case api_error_kind::authentication:
      if (api_key_env.empty())
        return "; no key was sent (coder.llm.api_key_env is empty) and this endpoint wants one: set api_key_env "
               "to the name of the variable that holds it";
      return "; check the key in the variable " + api_key_env + " (coder.llm.api_key_env)" +
             (provider == "anthropic" ? " — Anthropic's keys start with sk-ant-" : "");
    case api_error_kind::permission:
      return "; the key in " + (api_key_env.empty() ? std::string("(none)") : api_key_env) +
             " has no access to this model or endpoint";
    case api_error_kind::not_found:
      return "; check coder.llm.model (the name the server serves: GET /v1/models lists them; for Ollama, "
             "`ollama pull NAME` first) and coder.llm.endpoint";
    case api_error_kind::context_length: {
      std::string s = "; the request does not fit the model's context";
      if (info.context_tokens) s += " of " + std::to_string(*info.context_tokens) + " tokens";
      if (info.prompt_tokens) s += " (the prompt alone is " + std::to_string(*info.prompt_tokens) + " tokens)";
      return s +
             ": lower coder.llm.max_tokens, set coder.llm.context_tokens to the server's window so that "
             "prompts are cut to fit, or give the server a longer context (vLLM --max-model-len, llama.cpp "
             "-c, Ollama OLLAMA_CONTEXT_LENGTH)";
    }
    case api_error_kind::quota:
      return "; the account's quota is spent (waiting does not help: check its billing)";
    case api_error_kind::bad_request:
      // OpenAI's reasoning models: "Unsupported parameter: 'max_tokens' … Use
      // 'max_completion_tokens' instead", "Unsupported value: 'temperature' …".
      if (info.text.find("max_completion_tokens") != std::string::npos ||
          info.text.find("'temperature'") != std::string::npos)
        return "; a reasoning model: set coder.llm.reasoning: true (max_completion_tokens, no temperature)";
      return "";
    default:
      return "";
  }
}

}  // namespace ks
