#include "coder/llm_coder.hpp"

#include <set>

#include <spdlog/spdlog.h>

#include "llm/llm_client.hpp"
#include "model/candidate_id.hpp"

namespace ks {

namespace {

candidate from_reply(const parsed_candidate& p, const std::string& task, const std::string& origin,
                     const std::string& parent) {
  candidate c;
  c.task = task;
  c.source = p.source;
  c.plan = p.plan;
  c.origin = origin;
  c.parent_id = parent;
  c.id = candidate_id(c);
  return c;
}

}  // namespace

llm_coder_options llm_coder_options_for(const experiment_config& config, chat_function chat,
                                        std::shared_ptr<const skill_library> library) {
  llm_coder_options o;
  o.chat = std::move(chat);
  o.library = std::move(library);
  o.use_long_term_memory = config.ablation.long_term_memory;
  return o;
}

llm_coder_options llm_coder_options_for(const experiment_config& config, std::shared_ptr<llm_client> client,
                                        std::shared_ptr<const skill_library> library) {
  auto o = llm_coder_options_for(
      config, [client](const chat_request& r) { return client->chat(r); }, std::move(library));
  o.prompt_chars = [client]() -> size_t {
    const auto room = client->room_for_prompt();
    return room.tokens > 0 ? static_cast<size_t>(static_cast<double>(room.tokens) * room.chars_per_token) : 0;
  };
  return o;
}

llm_coder::llm_coder(llm_coder_options options) : options_(std::move(options)) {}

prompt_limits llm_coder::limits() const {
  prompt_limits l = options_.limits;
  if (options_.prompt_chars) l.max_prompt_chars = options_.prompt_chars();
  return l;
}

result<std::vector<candidate>> llm_coder::seeds(const task_spec& task, uint32_t count) {
  std::vector<candidate> out;
  std::set<std::string> ids;
  std::string problems;
  for (uint32_t i = 0; i < count; ++i) {
    generator_options g;
    g.seed_index = i;
    g.seeds = count;
    auto req = generator_prompt(task, g, limits());
    req.task = task.name;
    auto reply = ask_for_candidate(options_.chat, req, options_.max_format_repairs);
    if (!reply) {
      spdlog::warn("task '{}': llm seed {} of {} unusable: {}", task.name, i + 1, count, reply.message());
      problems += (problems.empty() ? "" : "; ") + ("seed " + std::to_string(i + 1) + ": " + reply.message());
      continue;
    }
    auto c = from_reply(reply->parsed, task.name, "seed:llm-" + std::to_string(i + 1), "");
    if (!ids.insert(c.id).second) {
      spdlog::info("task '{}': llm seed {} repeats an earlier seed; dropped", task.name, i + 1);
      continue;
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) return error{"the model wrote no usable seed for task '" + task.name + "': " + problems};
  return out;
}

result<candidate> llm_coder::optimize(const optimize_input& in) {
  // Without long-term memory the method is named only: its knowledge is the skill
  // library's, which the ablation takes away from the model as from the planner.
  const method_def* method =
      options_.library && options_.use_long_term_memory ? options_.library->find_method(in.plan.chosen) : nullptr;
  auto req = optimizer_prompt(in.task, in.base, in.review, in.features, in.plan, method, in.history, limits());
  req.task = in.task.name;
  auto reply = ask_for_candidate(options_.chat, req, options_.max_format_repairs);
  if (!reply) return error{"optimizer (" + in.plan.chosen + "): " + reply.message()};
  auto c = from_reply(reply->parsed, in.task.name, "optimize:" + in.plan.chosen, in.base.id);
  if (c.id == in.base.id) return error{"the model returned the kernel unchanged for method " + in.plan.chosen};
  return c;
}

result<candidate> llm_coder::repair(const repair_input& in) {
  // Earlier repairs on the same line (same correct ancestor) whose result failed too:
  // the prompt tells the model not to repeat them.
  std::set<std::string> failed_ids;
  for (const auto& e : in.history)
    if (e.kind == "review" && e.status != review_status::ok) failed_ids.insert(e.candidate_id);
  std::vector<trajectory_entry> failed_repairs;
  for (const auto& e : in.history)
    if (e.kind == "repair" && e.parent_id == in.failed.parent_id && failed_ids.count(e.candidate_id))
      failed_repairs.push_back(e);
  auto req = repairer_prompt(in.task, in.failed, in.review, in.diagnosis, failed_repairs, limits());
  req.task = in.task.name;
  auto reply = ask_for_candidate(options_.chat, req, options_.max_format_repairs);
  if (!reply) return error{"repairer: " + reply.message()};
  auto c = from_reply(reply->parsed, in.task.name, "repair", in.failed.parent_id);
  c.recipe = in.failed.recipe;
  if (c.id == in.failed.id) return error{"the model returned the failing kernel unchanged"};
  return c;
}

result<repair_plan> llm_coder::diagnose(const diagnose_request& req) {
  auto chat = diagnoser_prompt(req.task, req.cand, req.review, req.history, limits());
  chat.task = req.task.name;
  auto reply = ask_for_diagnosis(options_.chat, chat, options_.max_format_repairs);
  if (!reply) return error{"diagnoser: " + reply.message()};
  reply->plan.candidate_id = req.cand.id;
  return reply->plan;
}

}  // namespace ks
