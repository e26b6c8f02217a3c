#pragma once
// JSON from clients, parsed within limits. nlohmann::json's plain parse builds the
// whole document: a 16 MiB body of `[[[[…` took 1.3 GiB and 6.7 s (issue 44), and
// four at once 6.4 GiB. What it promises:
// - json_scan looks at a body as it arrives and refuses it at the first byte past a
//   limit (nesting deeper than max_depth, more than max_values values), before the rest
//   is kept or parsed: a hostile body costs what was read up to there;
// - parse_bounded_json parses with a parser callback that counts depth and values, and
//   stops at the first one past a limit; what it builds is at most max_values values
//   (and the text's strings);
// - a refusal names the limit: 400 for nesting, 413 for too many values, 400 for text
//   that is not JSON.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ks {

struct json_limits {
  size_t max_depth = 32;      // arrays and objects inside one another
  size_t max_values = 10000;  // values of every kind, containers included
};

struct json_refusal {
  int status = 400;  // 400 or 413
  std::string message;
};

// A body's JSON checked piece by piece as it arrives: nesting and an upper bound of the
// values (each container, each comma, and the first value), outside strings.
class json_scan {
 public:
  explicit json_scan(json_limits limits) : limits_(limits) {}
  // The next bytes; false once a limit is passed (refusal() says which; later bytes
  // are not looked at).
  bool feed(std::string_view bytes);
  const std::optional<json_refusal>& refusal() const { return refusal_; }

 private:
  json_limits limits_;
  size_t depth_ = 0;
  size_t values_ = 1;
  bool in_string_ = false;
  bool escaped_ = false;
  std::optional<json_refusal> refusal_;
};

// `text` parsed as JSON within `limits`; `what` names the text in messages ("the
// body"). On a refusal, *refused says why and the result is nullopt.
std::optional<nlohmann::json> parse_bounded_json(std::string_view text, const json_limits& limits,
                                                 const std::string& what, json_refusal* refused);

}  // namespace ks
