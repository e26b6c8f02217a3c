#include "daemon/bounded_json.hpp"

namespace ks {

namespace {

std::string too_deep(const std::string& what, size_t limit) {
  return what + " nests arrays and objects deeper than " + std::to_string(limit) + " levels (the limit)";
}

std::string too_many(const std::string& what, size_t limit) {
  return what + " holds more than " + std::to_string(limit) + " JSON values (the limit)";
}

// Thrown from the parser callback: nlohmann's parser does not catch it, so the parse
// stops where the limit was passed.
struct limit_passed {
  json_refusal why;
};

}  // namespace

bool json_scan::feed(std::string_view bytes) {
  if (refusal_) return false;
  for (char ch : bytes) {
    if (in_string_) {
      if (escaped_)
        escaped_ = false;
      else if (ch == '\\')
        escaped_ = true;
      else if (ch == '"')
        in_string_ = false;
      continue;
    }
    switch (ch) {
      case '"':
        in_string_ = true;
        break;
      case '[':
      case '{':
        if (++depth_ > limits_.max_depth) {
          refusal_ = json_refusal{400, too_deep("the body", limits_.max_depth)};
          return false;
        }
        [[fallthrough]];
      case ',':
        if (++values_ > limits_.max_values) {
          refusal_ = json_refusal{413, too_many("the body", limits_.max_values)};
          return false;
        }
        break;
      case ']':
      case '}':
        if (depth_ > 0) --depth_;
        break;
      default:
        break;
    }
  }
  return true;
}

std::optional<nlohmann::json> parse_bounded_json(std::string_view text, const json_limits& limits,
                                                 const std::string& what, json_refusal* refused) {
  using json = nlohmann::json;
  size_t values = 0;
  // depth: how many containers hold the value the event is about.
  auto count = [&](int depth, json::parse_event_t event, json&) {
    const bool container = event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (container && static_cast<size_t>(depth) + 1 > limits.max_depth)
      throw limit_passed{{400, too_deep(what, limits.max_depth)}};
    if ((container || event == json::parse_event_t::value) && ++values > limits.max_values)
      throw limit_passed{{413, too_many(what, limits.max_values)}};
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), count);
  } catch (const limit_passed& e) {
    *refused = e.why;
  } catch (const json::exception& e) {
    *refused = {400, what + " is not valid JSON: " + e.what()};
  }
  return std::nullopt;
}

}  // namespace ks
