#include "actors/line_checkpoint.hpp"

#include "actors/task_coordinator.hpp"
#include "model/json_codec.hpp"

namespace ks {

std::string line_key(const std::string& task, size_t line) {
  return checkpoint_prefix(task) + "line/" + std::to_string(line);
}
std::string seeds_key(const std::string& task) { return checkpoint_prefix(task) + "seeds"; }

nlohmann::json to_record(const line_checkpoint& c) {
  return {{"schema", "ks.line_checkpoint/1"},
          {"round", c.round},
          {"reviews", c.reviews},
          {"restarts", c.restarts},
          {"cur", c.cur},
          {"best", c.best},
          {"cur_review", c.cur_review},
          {"best_review", c.best_review},
          {"finished", c.finished},
          {"reason", c.reason},
          {"review_time", c.review_time}};
}

result<line_checkpoint> checkpoint_from(const nlohmann::json& j) {
  try {
    line_checkpoint c;
    c.round = j.at("round").get<uint32_t>();
    c.reviews = j.at("reviews").get<uint32_t>();
    c.restarts = j.at("restarts").get<int>();
    c.cur = j.at("cur").get<std::string>();
    c.best = j.at("best").get<std::string>();
    c.cur_review = j.at("cur_review").get<review_result>();
    c.best_review = j.at("best_review").get<review_result>();
    c.finished = j.at("finished").get<bool>();
    c.reason = j.at("reason").get<std::string>();
    // Absent from checkpoints written before reviews had phase times.
    if (j.contains("review_time")) c.review_time = j.at("review_time").get<review_phases>();
    return c;
  } catch (const std::exception& e) {
    return error{std::string("a line checkpoint that cannot be read: ") + e.what()};
  }
}

}  // namespace ks
