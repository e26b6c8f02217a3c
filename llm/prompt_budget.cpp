#include "llm/prompt_budget.hpp"

#include <algorithm>
#include <sstream>

namespace ks {

namespace {

size_t total(const std::vector<prompt_section>& s) {
  size_t n = 0;
  for (const auto& x : s) n += x.levels[x.level].size();
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

prompt_section make_section(std::string id, std::vector<std::pair<std::string, std::string>> levels_and_cuts) {
  prompt_section s;
  s.id = std::move(id);
  for (auto& [text, cut] : levels_and_cuts) {
    if (!s.levels.empty() && s.levels.back() == text) continue;
    if (!s.levels.empty()) s.cuts.push_back(std::move(cut));
    s.levels.push_back(std::move(text));
  }
  if (s.levels.empty()) s.levels.push_back("");
  return s;
}

assembled_prompt assemble_prompt(std::vector<prompt_section> sections, const std::vector<std::string>& order,
                                 size_t budget_chars, size_t fixed_chars) {
  assembled_prompt out;
  if (budget_chars > 0) {
    for (const auto& id : order) {
      for (auto& s : sections) {
        if (s.id != id) continue;
        while (fixed_chars + total(sections) > budget_chars && s.level + 1 < s.levels.size()) ++s.level;
      }
      if (fixed_chars + total(sections) <= budget_chars) break;
    }
    for (const auto& s : sections)
      if (s.level > 0) out.cuts.push_back(s.cuts[s.level - 1]);
  }
  for (const auto& s : sections) out.text += s.levels[s.level];
  return out;
}

std::string strip_python_comments(const std::string& source) {
  std::string out;
  std::string closing;  // the quotes that end the docstring being skipped
  for (const auto& line : lines_of(source)) {
    const size_t first = line.find_first_not_of(" \t");
    const std::string body = first == std::string::npos ? "" : line.substr(first);
    if (!closing.empty()) {
      if (body.find(closing) != std::string::npos) closing.clear();
      continue;
    }
    if (body.rfind("#", 0) == 0) continue;
    if (body.rfind("\"\"\"", 0) == 0 || body.rfind("'''", 0) == 0) {
      const std::string q = body.substr(0, 3);
      if (body.find(q, 3) == std::string::npos) closing = q;  // a docstring over several lines
      continue;
    }
    out += line + "\n";
  }
  return out;
}

std::string cut_middle(const std::string& text, size_t keep_chars, const std::string& comment) {
  if (text.size() <= keep_chars) return text;
  const auto lines = lines_of(text);
  size_t head = 0, tail = lines.size(), used = 0;
  while (head < tail && used + lines[head].size() + 1 <= keep_chars / 2) used += lines[head++].size() + 1;
  while (tail > head && used + lines[tail - 1].size() + 1 <= keep_chars) used += lines[--tail].size() + 1;
  std::string out;
  for (size_t i = 0; i < head; ++i) out += lines[i] + "\n";
  out += comment + " … " + std::to_string(tail - head) + " lines cut to fit the model's context …\n";
  for (size_t i = tail; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

}  // namespace ks
