#include "model/candidate_id.hpp"

#include "model/json_codec.hpp"

namespace ks {

std::string candidate_id(const candidate& c) {
  nlohmann::json j = nlohmann::json::object();
  j["source"] = c.source;
  j["compile_options"] = c.compile_options;
  j["plan"] = c.plan;
  return sha256_hex(dump_json(j)).substr(0, 16);
}

}  // namespace ks
