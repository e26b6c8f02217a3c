#pragma once
// Token and cost accounting: what each task (and each agent within it) has spent on
// the LLM. Costs come from a price table per model, in US dollars per million tokens.
//
// default_prices() are list prices as published by the vendors (see docs/llm.md for
// the date); a config or a caller adds or overrides entries. A model found in no table
// has its tokens counted and its cost counted as 0, with a note saying so — never a
// guessed price.

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace ks {

struct model_price {
  double input_usd_per_mtok = 0;
  double output_usd_per_mtok = 0;
  friend bool operator==(const model_price&, const model_price&) = default;
};

// Known list prices, keyed by model name (or name prefix, below).
const std::map<std::string, model_price>& default_prices();

// The price of `model` in `table`: an exact match, else the longest key that is a
// prefix of the model followed by '-', ':', '@' or '.' ("gpt-4o-2024-08-06" →
// "gpt-4o", never "gpt-4o-mini"). A routing prefix such as "openai/" is ignored.
// nullptr when none matches.
const model_price* find_price(const std::map<std::string, model_price>& table, const std::string& model);

// Cost of one reply in USD.
double cost_usd(const model_price& price, int64_t input_tokens, int64_t output_tokens);

// Counts for one task, one agent, or everything.
struct usage_counts {
  int64_t requests = 0;      // calls answered, by the API or the cache
  int64_t cache_hits = 0;    // of which from the cache (their tokens are not billed)
  int64_t failures = 0;      // calls that ended in an error
  int64_t attempts = 0;      // HTTP attempts, retries included
  int64_t input_tokens = 0;  // billed tokens: API replies only, cache hits excluded
  int64_t output_tokens = 0;
  double cost_usd = 0;
  std::set<std::string> notes{};  // e.g. "no price for model 'x': its cost is counted as 0"

  usage_counts& operator+=(const usage_counts& other);
};

// Thread-safe totals per (task, agent). Agents are named as to_string(agent_role).
class usage_ledger {
 public:
  void record(const std::string& task, const std::string& agent, const usage_counts& delta);

  usage_counts total() const;
  usage_counts task_total(const std::string& task) const;
  std::map<std::string, usage_counts> by_agent(const std::string& task) const;
  std::vector<std::string> tasks() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, usage_counts>> counts_;
};

}  // namespace ks
