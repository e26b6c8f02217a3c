#pragma once
// Reading the agents' replies. A candidate reply (generator, optimizer, repairer)
// carries the CUDA source in a fenced ```cuda block (```cu, ```cpp, ```c++ and
// friends are accepted) and the launch plan in a fenced ```yaml block, with any prose
// around them; a diagnosis reply carries a ```json block {"diagnosis", "actions"}.
//
// Parsing checks the form only: the plan must parse (plan/launch_plan_yaml.hpp), the
// source is returned exactly as the model wrote it. Whether it compiles, fits the
// plan and is correct is the reviewer's job. A reply that cannot be used gets an
// error saying what is missing or wrong; repair_prompt() turns that into the message
// that asks the model to resend (the caller retries, a bounded number of times:
// llm/candidate_request.hpp).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "llm/chat.hpp"
#include "model/candidate.hpp"
#include "model/decision.hpp"
#include "model/launch_plan.hpp"

namespace ks {

// A fenced block of a Markdown reply.
struct fenced_block {
  std::string info;    // the fence's language word, lower-case ("cuda", "yaml", "")
  std::string body;    // the text between the fences, ending in '\n' unless empty
  size_t line = 0;     // 1-based line of the opening fence
  bool closed = true;  // false: the reply ended inside the block (cut off?)
};

// Every fenced block (``` or ~~~, up to 3 spaces of indentation), in order.
std::vector<fenced_block> extract_fenced_blocks(std::string_view text);

struct parsed_candidate {
  std::string source;  // exactly the code block's text
  launch_plan plan;
  std::string plan_yaml;              // the yaml block's text
  std::string commentary;             // the prose outside the blocks, trimmed
  std::vector<std::string> warnings;  // e.g. several code blocks, the last one used
};

// Reads a candidate reply. Which blocks are used:
// - code: blocks tagged cuda, cu, cuh, cpp, c++, cxx, cc, c, h, hpp; else an untagged
//   block containing `__global__`. Several: the last one with a `__global__` kernel.
// - plan: blocks tagged yaml or yml; else an untagged block with a `steps:` line.
//   Several: the last one with a `steps:` line.
// Errors (several at once, joined with "; "): no code block, an empty one, no plan
// block, a plan that does not parse (with the parser's line:column message), a block
// that never closes (the reply was probably cut off at max_tokens).
result<parsed_candidate> parse_candidate_reply(std::string_view text);

// Reads a diagnosis reply: a ```json block (or, failing that, the last {...} object of
// the text) with a non-empty string "diagnosis" and "actions", a list of strings (a
// single string is taken as one action). candidate_id is left empty.
result<repair_plan> parse_diagnosis_reply(std::string_view text);

enum class reply_kind { candidate, diagnosis };

// The user message that asks the model to resend `original_response` in the right
// format, given `problem` (the parser's error message). It says what was found, what
// is missing, and repeats the format.
std::string repair_prompt(std::string_view original_response, std::string_view problem,
                          reply_kind kind = reply_kind::candidate);

// `request` continued: the model's reply as an assistant message, then repair_prompt().
chat_request with_format_repair(const chat_request& request, const std::string& reply, const std::string& problem,
                                reply_kind kind = reply_kind::candidate);

}  // namespace ks
