#include "llm/candidate_request.hpp"

#include <type_traits>

#include <spdlog/spdlog.h>

#include "llm/llm_client.hpp"

namespace ks {

chat_function chat_with(llm_client& client) {
  return [&client](const chat_request& r) { return client.chat(r); };
}

namespace {

template <class Reply, class Parse>
result<Reply> ask(const chat_function& chat, chat_request request, int max_format_repairs, reply_kind kind,
                  Parse parse) {
  Reply out;
  std::string problem;
  for (int round = 0;; ++round) {
    auto response = chat(request);
    if (!response) return response.error();
    out.responses.push_back(*response);
    auto parsed = parse(response->text);
    if (parsed) {
      if constexpr (std::is_same_v<Reply, candidate_reply>)
        out.parsed = std::move(*parsed);
      else
        out.plan = std::move(*parsed);
      out.format_repairs = round;
      return out;
    }
    problem = parsed.message();
    if (response->truncated() && problem.find("cut off") == std::string::npos)
      problem += " (the reply stopped at the token limit: it was cut off)";
    if (round >= max_format_repairs) break;
    spdlog::info("llm {} for task '{}': reply unusable ({}); asking again in the right format",
                 to_string(request.agent), request.task, problem);
    request = with_format_repair(request, response->text, problem, kind);
  }
  return ks::error{"the model's reply could not be used after " + std::to_string(max_format_repairs) +
                   " format repair" + (max_format_repairs == 1 ? "" : "s") + ": " + problem};
}

}  // namespace

result<candidate_reply> ask_for_candidate(const chat_function& chat, chat_request request, int max_format_repairs) {
  return ask<candidate_reply>(chat, std::move(request), max_format_repairs, reply_kind::candidate,
                              [](const std::string& text) { return parse_candidate_reply(text); });
}

result<diagnosis_reply> ask_for_diagnosis(const chat_function& chat, chat_request request, int max_format_repairs) {
  return ask<diagnosis_reply>(chat, std::move(request), max_format_repairs, reply_kind::diagnosis,
                              [](const std::string& text) { return parse_diagnosis_reply(text); });
}

}  // namespace ks
