#include "llm/usage_ledger.hpp"

namespace ks {

const std::map<std::string, model_price>& default_prices() {
  // USD per million tokens, input / output; vendors' list prices (standard tier,
  // no batch or cache discounts) as of 2025. Local servers (vLLM, SGLang, llama.cpp,
  // Ollama) have no entry: their cost is 0 with a note, unless the caller prices them.
  static const std::map<std::string, model_price> table = {
      {"gpt-4o", {2.50, 10.00}},
      {"gpt-4o-mini", {0.15, 0.60}},
      {"gpt-4.1", {2.00, 8.00}},
      {"gpt-4.1-mini", {0.40, 1.60}},
      {"gpt-4.1-nano", {0.10, 0.40}},
      {"gpt-5", {1.25, 10.00}},
      {"gpt-5-mini", {0.25, 2.00}},
      {"gpt-5-nano", {0.05, 0.40}},
      {"o3", {2.00, 8.00}},
      {"o4-mini", {1.10, 4.40}},
      {"claude-opus-4", {15.00, 75.00}},
      {"claude-opus-4-1", {15.00, 75.00}},
      {"claude-sonnet-4", {3.00, 15.00}},
      {"claude-sonnet-4-5", {3.00, 15.00}},
      {"claude-haiku-4-5", {1.00, 5.00}},
      {"claude-3-7-sonnet", {3.00, 15.00}},
      {"claude-3-5-sonnet", {3.00, 15.00}},
      {"claude-3-5-haiku", {0.80, 4.00}},
      {"deepseek-chat", {0.27, 1.10}},
      {"deepseek-reasoner", {0.55, 2.19}},
  };
  return table;
}

const model_price* find_price(const std::map<std::string, model_price>& table, const std::string& model_in) {
  std::string model = model_in;
  if (const auto slash = model.rfind('/'); slash != std::string::npos) model = model.substr(slash + 1);
  if (auto it = table.find(model); it != table.end()) return &it->second;
  const model_price* best = nullptr;
  size_t best_len = 0;
  for (const auto& [key, price] : table) {
    if (key.size() >= model.size() || key.size() <= best_len) continue;
    if (model.compare(0, key.size(), key) != 0) continue;
    const char next = model[key.size()];
    if (next == '-' || next == ':' || next == '@' || next == '.') {
      best = &price;
      best_len = key.size();
    }
  }
  return best;
}

double cost_usd(const model_price& price, int64_t input_tokens, int64_t output_tokens) {
  return (static_cast<double>(input_tokens) * price.input_usd_per_mtok +
          static_cast<double>(output_tokens) * price.output_usd_per_mtok) /
         1e6;
}

usage_counts& usage_counts::operator+=(const usage_counts& o) {
  requests += o.requests;
  cache_hits += o.cache_hits;
  failures += o.failures;
  attempts += o.attempts;
  input_tokens += o.input_tokens;
  output_tokens += o.output_tokens;
  cost_usd += o.cost_usd;
  notes.insert(o.notes.begin(), o.notes.end());
  return *this;
}

void usage_ledger::record(const std::string& task, const std::string& agent, const usage_counts& delta) {
  std::lock_guard lock(mu_);
  counts_[task.empty() ? "-" : task][agent] += delta;
}

usage_counts usage_ledger::total() const {
  std::lock_guard lock(mu_);
  usage_counts sum;
  for (const auto& [task, agents] : counts_)
    for (const auto& [agent, c] : agents) sum += c;
  return sum;
}

usage_counts usage_ledger::task_total(const std::string& task) const {
  std::lock_guard lock(mu_);
  usage_counts sum;
  if (auto it = counts_.find(task.empty() ? "-" : task); it != counts_.end())
    for (const auto& [agent, c] : it->second) sum += c;
  return sum;
}

std::map<std::string, usage_counts> usage_ledger::by_agent(const std::string& task) const {
  std::lock_guard lock(mu_);
  if (auto it = counts_.find(task.empty() ? "-" : task); it != counts_.end()) return it->second;
  return {};
}

std::vector<std::string> usage_ledger::tasks() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [task, agents] : counts_) out.push_back(task);
  return out;
}

}  // namespace ks
