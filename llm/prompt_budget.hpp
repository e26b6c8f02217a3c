#pragma once
// A prompt within a budget: the agents' prompts are built as sections, each with
// shorter renderings of itself, and cut section by section in an order each agent
// states (llm/prompts.hpp says which, docs/llm.md lists them) until the prompt fits
// the characters the model's context leaves. What was cut is said at the end of the
// prompt, so that the model knows what it is not seeing.

#include <cstddef>
#include <string>
#include <vector>

namespace ks {

struct prompt_section {
  std::string id;                   // the name the cut order uses ("history", "reference")
  std::vector<std::string> levels;  // levels[0] the full text; each next one shorter ("" = left out)
  std::vector<std::string> cuts;    // cuts[i - 1]: what level i leaves out, in words
  size_t level = 0;                 // the rendering in use
};

struct assembled_prompt {
  std::string text;               // the sections joined, in their order
  std::vector<std::string> cuts;  // what was cut, in the order of the cuts
};

// Joins `sections` in order. While the text plus `fixed_chars` (the system prompt)
// exceeds `budget_chars` (0: no budget), lowers a section by one level: the sections
// named in `order`, first to last, each down to its shortest rendering before the next
// is touched. Sections not in `order` are never cut. A prompt that still does not fit
// after every cut is returned as cut as it can be (the client then lowers max_tokens,
// or refuses to send it).
assembled_prompt assemble_prompt(std::vector<prompt_section> sections, const std::vector<std::string>& order,
                                 size_t budget_chars, size_t fixed_chars);

// A section whose levels are `levels` with consecutive duplicates dropped (a short
// history renders the same at every level).
prompt_section make_section(std::string id, std::vector<std::pair<std::string, std::string>> levels_and_cuts);

// Python source without its comment lines and docstrings (a triple-quoted string that
// starts a line): what a reference says, without what it explains.
std::string strip_python_comments(const std::string& source);

// The text cut to about `keep_chars` by dropping whole lines from its middle (the
// first half of the budget from the start, the rest from the end), with a line
// "<comment> … N lines cut to fit the model's context …" where they were.
std::string cut_middle(const std::string& text, size_t keep_chars, const std::string& comment);

}  // namespace ks
