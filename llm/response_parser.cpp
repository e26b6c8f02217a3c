#include "llm/response_parser.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "llm/prompts.hpp"
#include "plan/launch_plan_yaml.hpp"

namespace ks {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

struct fence {
  char ch = 0;
  size_t len = 0;
  std::string rest;
};

// A fence line: optional indentation, then 3+ backticks or tildes.
bool read_fence(std::string_view line, fence& f) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
  const char ch = line[i];
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == ch) ++n;
  if (n < 3) return false;
  f.ch = ch;
  f.len = n;
  f.rest = trim(line.substr(i + n));
  return true;
}

std::string info_word(const std::string& rest) {
  std::string w = rest.substr(0, rest.find_first_of(" \t"));
  while (!w.empty() && (w.front() == '{' || w.front() == '.')) w.erase(w.begin());
  while (!w.empty() && w.back() == '}') w.pop_back();
  return lower(w);
}

bool is_code_tag(const std::string& info) {
  static const std::set<std::string> tags = {"cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c", "h", "hpp"};
  return tags.count(info) > 0;
}

bool is_yaml_tag(const std::string& info) { return info == "yaml" || info == "yml"; }

bool has_kernel(const std::string& body) { return body.find("__global__") != std::string::npos; }

bool has_steps_line(const std::string& body) {
  return body.rfind("steps:", 0) == 0 || body.find("\nsteps:") != std::string::npos;
}

std::string block_name(const fenced_block& b) { return "```" + b.info + " block at line " + std::to_string(b.line); }

const std::string& diagnosis_format() {
  static const std::string text =
      "End your reply with exactly one ```json block of this form, and nothing after it:\n\n"
      "```json\n"
      "{\"diagnosis\": \"the root cause in one paragraph\", \"actions\": [\"one concrete "
      "change per entry\", \"...\"]}\n"
      "```\n";
  return text;
}

}  // namespace

// The fenced blocks of `text`; the lines outside them go to *prose when given.
static std::vector<fenced_block> scan_blocks(std::string_view text, std::string* prose) {
  std::vector<fenced_block> blocks;
  size_t pos = 0, line_no = 0;
  bool inside = false;
  fence open;
  fenced_block cur;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_no;
    fence f;
    if (!inside) {
      if (read_fence(line, f) && !(f.ch == '`' && f.rest.find('`') != std::string::npos)) {
        inside = true;
        open = f;
        cur = fenced_block{info_word(f.rest), "", line_no, true};
      } else if (prose) {
        prose->append(line.data(), line.size());
        *prose += '\n';
      }
    } else if (read_fence(line, f) && f.ch == open.ch && f.len >= open.len && f.rest.empty()) {
      inside = false;
      blocks.push_back(std::move(cur));
    } else {
      cur.body.append(line.data(), line.size());
      cur.body += '\n';
    }
    if (end == text.size()) break;
    pos = end + 1;
  }
  if (inside) {
    cur.closed = false;
    blocks.push_back(std::move(cur));
  }
  return blocks;
}

std::vector<fenced_block> extract_fenced_blocks(std::string_view text) { return scan_blocks(text, nullptr); }

result<parsed_candidate> parse_candidate_reply(std::string_view text) {
  std::string prose;
  const auto blocks = scan_blocks(text, &prose);
  std::vector<const fenced_block*> code, plans;
  for (const auto& b : blocks) {
    if (is_code_tag(b.info))
      code.push_back(&b);
    else if (is_yaml_tag(b.info))
      plans.push_back(&b);
  }
  // Untagged blocks count when nothing is tagged and their content says what they are.
  for (const auto& b : blocks) {
    if (!b.info.empty()) continue;
    if (code.empty() && has_kernel(b.body))
      code.push_back(&b);
    else if (plans.empty() && has_steps_line(b.body))
      plans.push_back(&b);
  }

  parsed_candidate out;
  std::vector<std::string> problems;

  const fenced_block* src = nullptr;
  if (!code.empty()) {
    src = code.back();
    for (auto it = code.rbegin(); it != code.rend(); ++it)
      if (has_kernel((*it)->body)) {
        src = *it;
        break;
      }
    if (code.size() > 1)
      out.warnings.push_back(std::to_string(code.size()) + " code blocks; used the " + block_name(*src));
  }
  const fenced_block* plan = nullptr;
  if (!plans.empty()) {
    plan = plans.back();
    for (auto it = plans.rbegin(); it != plans.rend(); ++it)
      if (has_steps_line((*it)->body)) {
        plan = *it;
        break;
      }
    if (plans.size() > 1)
      out.warnings.push_back(std::to_string(plans.size()) + " yaml blocks; used the " + block_name(*plan));
  }

  if (!src) {
    problems.push_back(blocks.empty() ? "the reply has no fenced code block at all (expected a ```cuda "
                                        "block with the source and a ```yaml block with the launch plan)"
                                      : "no ```cuda block with the CUDA source");
  } else if (!src->closed) {
    problems.push_back("the " + block_name(*src) +
                       " is never closed: the reply was probably cut off at the token limit");
  } else if (trim(src->body).empty()) {
    problems.push_back("the " + block_name(*src) + " is empty");
  } else if (!has_kernel(src->body)) {
    out.warnings.push_back("the source defines no __global__ kernel");
  }

  if (!plan) {
    if (!blocks.empty()) problems.push_back("no ```yaml block with the launch plan");
  } else if (!plan->closed) {
    problems.push_back("the " + block_name(*plan) +
                       " is never closed: the reply was probably cut off at the token limit");
  } else {
    auto parsed = parse_launch_plan(plan->body, "plan");
    if (!parsed) {
      problems.push_back("the launch plan in the " + block_name(*plan) +
                         " does not parse (positions are line:column within the block): " + parsed.message());
    } else {
      out.plan = std::move(*parsed);
      out.plan_yaml = plan->body;
    }
  }
  if (!problems.empty()) {
    std::string msg;
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    return ks::error{msg};
  }
  out.source = src->body;

  out.commentary = trim(prose);
  return out;
}

result<repair_plan> parse_diagnosis_reply(std::string_view text) {
  using json = nlohmann::json;
  const auto blocks = extract_fenced_blocks(text);
  std::vector<std::string> candidates;
  for (const auto& b : blocks)
    if (b.info == "json" || (b.info.empty() && trim(b.body).rfind('{', 0) == 0)) candidates.push_back(b.body);
  if (candidates.empty()) {
    const auto open = text.find('{');
    const auto close = text.rfind('}');
    if (open != std::string_view::npos && close != std::string_view::npos && close > open)
      candidates.emplace_back(text.substr(open, close - open + 1));
  }
  if (candidates.empty())
    return ks::error{
        "no ```json block with the diagnosis (expected {\"diagnosis\": \"...\", "
        "\"actions\": [\"...\"]})"};
  std::string last_problem;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    json doc;
    try {
      doc = json::parse(*it);
    } catch (const std::exception& e) {
      last_problem = "the ```json block is not valid JSON: " + std::string(e.what());
      continue;
    }
    if (!doc.is_object()) {
      last_problem = "the ```json block is not a JSON object";
      continue;
    }
    repair_plan plan;
    auto d = doc.find("diagnosis");
    if (d == doc.end() || !d->is_string() || trim(d->get<std::string>()).empty()) {
      last_problem = "the JSON object has no non-empty string \"diagnosis\"";
      continue;
    }
    plan.diagnosis = trim(d->get<std::string>());
    auto a = doc.find("actions");
    if (a == doc.end()) {
      last_problem = "the JSON object has no \"actions\" list";
      continue;
    }
    if (a->is_string()) {
      plan.actions.push_back(a->get<std::string>());
    } else if (a->is_array()) {
      for (const auto& item : *a) plan.actions.push_back(item.is_string() ? item.get<std::string>() : item.dump());
    } else {
      last_problem = "\"actions\" is not a list of strings";
      continue;
    }
    if (plan.actions.empty()) {
      last_problem = "\"actions\" is empty: name at least one change";
      continue;
    }
    return plan;
  }
  return ks::error{last_problem};
}

std::string repair_prompt(std::string_view original_response, std::string_view problem, reply_kind kind) {
  std::string s = "Your previous reply could not be used: " + std::string(problem) + ".\n\n";
  const auto blocks = extract_fenced_blocks(original_response);
  if (blocks.empty()) {
    s += "It contained no fenced code block at all.\n\n";
  } else {
    s += "It contained " + std::to_string(blocks.size()) + " fenced block" + (blocks.size() == 1 ? "" : "s") + ":";
    for (const auto& b : blocks)
      s += " ```" + (b.info.empty() ? std::string("(untagged)") : b.info) + (b.closed ? "" : " (not closed)");
    s += ".\n\n";
  }
  const bool cut_off =
      problem.find("cut off") != std::string_view::npos || problem.find("never closed") != std::string_view::npos;
  if (kind == reply_kind::diagnosis) {
    s += "Send the diagnosis again. " + diagnosis_format();
  } else {
    s += "Send the whole answer again, in the required format — the complete CUDA source "
         "in one ```cuda block, then the complete launch plan in one ```yaml block — with "
         "at most a few sentences of explanation before them and nothing after them. Keep "
         "the kernel you intended; change only what this problem requires.\n";
    if (problem.find("does not parse") != std::string_view::npos)
      s += "The launch plan format, for reference:\n\n" + launch_plan_guide();
  }
  if (cut_off)
    s += "\nYour reply hit the token limit: keep this one shorter — no explanation, no "
         "long comments, no repeated code.\n";
  return s;
}

chat_request with_format_repair(const chat_request& request, const std::string& reply, const std::string& problem,
                                reply_kind kind) {
  chat_request next = request;
  next.messages.push_back({"assistant", reply});
  next.messages.push_back({"user", repair_prompt(reply, problem, kind)});
  return next;
}

}  // namespace ks
