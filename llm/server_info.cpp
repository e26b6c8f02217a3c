#include "llm/server_info.hpp"

#include <nlohmann/json.hpp>

namespace ks {

using json = nlohmann::json;

namespace {

std::optional<int64_t> positive(const json& obj, const char* name) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(name);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  const int64_t v = it->get<int64_t>();
  return v > 0 ? std::optional<int64_t>(v) : std::nullopt;
}

std::string str(const json& obj, const char* name) {
  if (!obj.is_object()) return {};
  auto it = obj.find(name);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

}  // namespace

std::optional<int64_t> context_from_models(const std::string& body, const std::string& model) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  auto data = doc.find("data");
  if (data == doc.end() || !data->is_array()) return std::nullopt;
  for (const auto& m : *data)
    if (str(m, "id") == model || (!str(m, "root").empty() && str(m, "root") == model))
      return positive(m, "max_model_len");
  if (data->size() == 1) return positive((*data)[0], "max_model_len");
  return std::nullopt;
}

std::optional<int64_t> context_from_props(const std::string& body) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  if (auto it = doc.find("default_generation_settings"); it != doc.end())
    if (auto n = positive(*it, "n_ctx")) return n;
  return positive(doc, "n_ctx");
}

std::optional<int64_t> known_context(const std::string& provider, const std::string& model) {
  if (provider == "anthropic" && model.rfind("claude-", 0) == 0) return 200000;
  return std::nullopt;
}

}  // namespace ks
