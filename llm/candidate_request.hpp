#pragma once
// Ask, parse, and ask again in the right format: the bounded loop around a model whose
// reply does not have the expected shape. A reply that parses is returned as it is —
// whether it compiles or is correct is the reviewer's business, not a format problem.

#include <functional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "llm/chat.hpp"
#include "llm/response_parser.hpp"

namespace ks {

class llm_client;

// Anything that answers a chat request: an llm_client, or a stand-in.
using chat_function = std::function<result<chat_response>(const chat_request&)>;
chat_function chat_with(llm_client& client);

struct candidate_reply {
  parsed_candidate parsed;
  std::vector<chat_response> responses;  // every reply received, in order
  int format_repairs = 0;                // repair prompts sent (responses.size() - 1)
};

struct diagnosis_reply {
  repair_plan plan;
  std::vector<chat_response> responses;
  int format_repairs = 0;
};

// Sends `request`; while the reply cannot be parsed and fewer than max_format_repairs
// repair prompts were sent, continues the conversation with with_format_repair(). The
// continuation is never answered from the cache of a reply that failed to parse (its
// request differs). Errors: the client's error, or "the model's reply could not be
// used after N format repairs: PROBLEM".
result<candidate_reply> ask_for_candidate(const chat_function& chat, chat_request request, int max_format_repairs = 2);
result<diagnosis_reply> ask_for_diagnosis(const chat_function& chat, chat_request request, int max_format_repairs = 2);

}  // namespace ks
