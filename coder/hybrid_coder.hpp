#pragma once
// The `hybrid` coder backend: the rules coder's templates first, a language model
// where they stop, so that tokens are spent only where the templates have nothing to
// offer (docs/llm.md, "The hybrid coder").
//
// What it promises:
// - seeds(): the rules coder's seeds; the model writes the rest of `count` when the
//   rules coder has fewer (or none: a task its templates cannot lower);
// - optimize(): a rules candidate whose recipe lists the chosen method gets the rules
//   coder's change; the model writes the candidate when the rules coder cannot apply
//   it, and for every candidate the model wrote;
// - repair(): the rules coder repairs its own candidates; the model writes the repair
//   when the rules coder has none left (its repair() is an error, as after its
//   conservative and library-reduction repairs of a seed) and for the model's
//   candidates, after its own reading of the failure (llm_coder::diagnose) refines
//   the rules' diagnosis;
// - "no legal move left": every rules candidate's recipe says `other_methods: model`,
//   so that the planner keeps to the templates' own methods while one of them is
//   allowed, and offers the others — which the model writes — when none is (no method
//   listed, or each vetoed by the decision table, a precondition or a guardrail);
// - every candidate the model writes carries recipe["coder"] = "llm" and none of the
//   rules coder's template keys (template, stages, methods): a later optimize() or
//   repair() of it goes to the model, never to a template that would rebuild the
//   kernel without the model's changes;
// - its candidates go through the same review as any other (the coordinator does not
//   know which coder wrote them); the diagnoser agent keeps the rules' reading only.

#include <memory>

#include "coder/coder.hpp"

namespace ks {

class llm_coder;

class hybrid_coder final : public coder {
 public:
  hybrid_coder(std::shared_ptr<coder> rules, std::shared_ptr<llm_coder> model);

  std::string name() const override { return "hybrid"; }
  result<std::vector<candidate>> seeds(const task_spec& task, uint32_t count) override;
  result<candidate> optimize(const optimize_input& in) override;
  result<candidate> repair(const repair_input& in) override;

  // Whether the rules coder wrote `c` (its recipe names a template).
  static bool rules_written(const candidate& c);

 private:
  candidate from_rules(candidate c) const;
  candidate from_model(candidate c) const;

  std::shared_ptr<coder> rules_;
  std::shared_ptr<llm_coder> model_;
};

}  // namespace ks
