#include "coder/hybrid_coder.hpp"

#include <algorithm>
#include <sstream>

#include <spdlog/spdlog.h>

#include "coder/llm_coder.hpp"

namespace ks {

namespace {

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string m; std::getline(in, m, ',');)
    if (!m.empty()) out.push_back(m);
  return out;
}

}  // namespace

hybrid_coder::hybrid_coder(std::shared_ptr<coder> rules, std::shared_ptr<llm_coder> model)
    : rules_(std::move(rules)), model_(std::move(model)) {}

bool hybrid_coder::rules_written(const candidate& c) { return c.recipe.count("template") > 0; }

candidate hybrid_coder::from_rules(candidate c) const {
  // The planner prefers the templates' methods and offers the others, for the model,
  // only when none of theirs is allowed (policy_input::coder_fallback).
  c.recipe["other_methods"] = "model";
  return c;
}

candidate hybrid_coder::from_model(candidate c) const {
  for (const char* k : {"template", "stages", "methods", "other_methods"}) c.recipe.erase(k);
  c.recipe["coder"] = "llm";
  return c;
}

result<std::vector<candidate>> hybrid_coder::seeds(const task_spec& task, uint32_t count) {
  std::vector<candidate> out;
  std::string rules_problem;
  if (auto r = rules_->seeds(task, count)) {
    for (auto& c : *r) out.push_back(from_rules(std::move(c)));
  } else {
    rules_problem = r.message();
  }
  if (out.size() >= count) return out;
  const uint32_t missing = count - static_cast<uint32_t>(out.size());
  spdlog::info("task '{}': the rules coder has {} of {} seeds{}; the model writes {}", task.name, out.size(), count,
               rules_problem.empty() ? "" : " (" + rules_problem + ")", missing);
  auto m = model_->seeds(task, missing);
  if (!m) {
    if (!out.empty()) {
      spdlog::warn("task '{}': the model wrote no seed ({}); going on with the rules coder's {}", task.name,
                   m.message(), out.size());
      return out;
    }
    return error{"neither coder wrote a seed for task '" + task.name + "': rules: " + rules_problem +
                 "; model: " + m.message()};
  }
  for (auto& c : *m)
    if (std::none_of(out.begin(), out.end(), [&](const candidate& s) { return s.id == c.id; }))
      out.push_back(from_model(std::move(c)));
  return out;
}

result<candidate> hybrid_coder::optimize(const optimize_input& in) {
  std::string rules_problem;
  if (rules_written(in.base)) {
    auto methods = split(in.base.recipe.count("methods") ? in.base.recipe.at("methods") : "");
    if (std::find(methods.begin(), methods.end(), in.plan.chosen) != methods.end()) {
      auto r = rules_->optimize(in);
      if (r) return from_rules(std::move(*r));
      rules_problem = r.message();
    } else {
      rules_problem = "the templates have no change for " + in.plan.chosen + " on this candidate";
    }
    spdlog::info("task '{}': {}; the model writes it", in.task.name, rules_problem);
  }
  auto m = model_->optimize(in);
  if (!m) return error{rules_problem.empty() ? m.message() : m.message() + " (rules: " + rules_problem + ")"};
  return from_model(std::move(*m));
}

result<candidate> hybrid_coder::repair(const repair_input& in) {
  std::string rules_problem;
  if (rules_written(in.failed)) {
    auto r = rules_->repair(in);
    if (r) return from_rules(std::move(*r));
    rules_problem = r.message();
    spdlog::info("task '{}': the rules coder has no repair left ({}); the model writes one", in.task.name,
                 rules_problem);
  }
  // The model's own reading first, behind the rules' facts (as the diagnoser agent
  // does for the llm backend), and what the templates already tried.
  repair_input ask = in;
  diagnose_request d{in.task, in.failed, in.review, in.history};
  if (auto reading = model_->diagnose(d)) {
    ask.diagnosis.diagnosis = in.diagnosis.diagnosis + ". " + reading->diagnosis;
    ask.diagnosis.actions = reading->actions;
    for (const auto& a : in.diagnosis.actions) ask.diagnosis.actions.push_back(a);
  } else {
    spdlog::warn("task '{}': the model's diagnosis failed ({}); repairing from the rules' reading", in.task.name,
                 reading.message());
  }
  if (!rules_problem.empty())
    ask.diagnosis.actions.push_back("the templates' own repairs are spent (" + rules_problem +
                                    "): change the kernel itself");
  auto m = model_->repair(ask);
  if (!m) return error{rules_problem.empty() ? m.message() : m.message() + " (rules: " + rules_problem + ")"};
  return from_model(std::move(*m));
}

}  // namespace ks
