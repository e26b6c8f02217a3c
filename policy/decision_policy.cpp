#include "policy/decision_policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "base/number_format.hpp"
#include "base/strings.hpp"
#include "policy/evidence_names.hpp"

namespace ks {

namespace {

std::vector<std::string> to_vector(const std::set<std::string>& s) { return {s.begin(), s.end()}; }

std::string fmt(double v) { return format_number(v); }

// The evidence environment for one input, with the origin of each name.
struct evidence_env {
  policy_environment env;
  std::vector<traced_value> items;
};

evidence_env build_evidence(const policy_input& in) {
  evidence_env e;
  std::map<std::string, std::pair<policy_value, std::string>> values;  // name → value, origin
  const auto put = [&](const std::string& name, policy_value v, const std::string& origin) {
    if (v.type() == policy_value::kind::number && !std::isfinite(v.as_number())) return;
    values.emplace(name, std::make_pair(std::move(v), origin));  // first one wins
  };
  for (const auto& [name, v] : in.profile.values) put(name, policy_value::number(v), "metric");
  if (in.profile.kernel_launches > 0)
    put("kernel_launches", policy_value::number(in.profile.kernel_launches), "metric");
  if (in.profile.duration_ms > 0) put("duration_us", policy_value::number(in.profile.duration_ms * 1000.0), "metric");
  for (const auto& [name, v] : in.features.values) put(name, policy_value::number(v), "feature");
  if (!in.features.structure_class.empty())
    put("structure_class", policy_value::string(in.features.structure_class), "structure");
  if (in.atol) put("task_atol", policy_value::number(*in.atol), "task");
  if (in.rtol) put("task_rtol", policy_value::number(*in.rtol), "task");
  if (!in.dtype.empty()) put("task_dtype", policy_value::string(in.dtype), "task");
  put("round", policy_value::number(in.round), "task");
  for (auto& [name, vo] : values) {
    e.env.set(name, vo.first);
    e.items.push_back({name, vo.second, vo.first, {}});
  }
  return e;
}

// Derived fields and predicates into the environment.
void add_computed(const skill_library& lib, evidence_env& e, std::vector<traced_value>& derived,
                  std::vector<traced_value>& predicates) {
  const auto eval_into = [&](const std::string& id, const policy_expr& expr, const char* origin,
                             std::vector<traced_value>& out) {
    evaluation_record rec;
    const policy_value v = expr.evaluate(e.env, &rec);
    std::vector<std::string> missing = v.known() ? std::vector<std::string>{} : to_vector(rec.missing);
    e.env.set(id, v, missing);
    out.push_back({id, origin, v, missing});
  };
  for (const auto& d : lib.derived) eval_into(d.id, d.expr, "derived", derived);
  for (const auto& p : lib.predicates) eval_into(p.id, p.expr, "predicate", predicates);
}

struct classification {
  std::string primary;
  std::vector<bottleneck_finding> holding;
  std::vector<rule_outcome> unknown;
};

// The expression behind a derived field or predicate, for explanations.
policy_expr::definition_lookup definitions(const skill_library& lib) {
  return [&lib](const std::string& name) -> const policy_expr* {
    for (const auto& p : lib.predicates) {
      if (p.id == name) return &p.expr;
    }
    for (const auto& d : lib.derived) {
      if (d.id == name) return &d.expr;
    }
    return nullptr;
  };
}

classification classify(const skill_library& lib, const policy_environment& env) {
  classification c;
  const auto defs = definitions(lib);
  for (const auto& b : lib.bottlenecks) {  // highest priority first
    evaluation_record rec;
    const policy_value v = b.when.evaluate(env, &rec);
    const auto t = v.truth();
    if (t && *t) {
      bottleneck_finding f;
      f.id = b.id;
      f.priority = b.priority;
      f.because = b.when.explain(env, defs);
      f.evidence = rec.used;
      for (const auto& name : b.evidence) {
        if (const policy_value* x = env.find(name); x && x->known()) f.evidence[name] = *x;
      }
      c.holding.push_back(std::move(f));
    } else if (!t) {
      std::vector<std::string> missing = to_vector(rec.missing);
      std::string reason = "unknown";
      if (!missing.empty()) reason += ": missing " + join(missing, ", ");
      if (!rec.notes.empty()) reason += " (" + join(to_vector(rec.notes), ", ") + ")";
      c.unknown.push_back({b.id, false, reason, missing});
    }
  }
  if (!c.holding.empty()) c.primary = c.holding.front().id;
  return c;
}

// ---------------------------------------------------------------------------
// History.

struct history_view {
  std::vector<history_attempt> attempts;
  std::vector<std::string> lineage;
  std::vector<uint64_t> lineage_seqs;
  // The candidates of the lineage, oldest first, the current one last (just the
  // current one when it is not in the history).
  std::vector<std::string> lineage_candidates;
};

history_view read_history(const std::vector<trajectory_entry>& given, const std::string& candidate, double min_gain) {
  std::vector<trajectory_entry> h = given;
  std::stable_sort(h.begin(), h.end(),
                   [](const trajectory_entry& a, const trajectory_entry& b) { return a.seq < b.seq; });
  history_view v;
  for (size_t i = 0; i < h.size(); ++i) {
    const auto& e = h[i];
    if (e.kind != "review" || e.method.empty()) continue;
    history_attempt a;
    a.seq = e.seq;
    a.method = e.method;
    a.candidate_id = e.candidate_id;
    a.parent_id = e.parent_id;
    // The class it was planned in: the review's own tag, else the latest plan entry
    // for its parent and method.
    a.bottleneck = bottleneck_from_summary(e.summary);
    if (a.bottleneck.empty()) {
      for (size_t j = i; j-- > 0;) {
        const auto& p = h[j];
        if (p.kind == "plan" && p.candidate_id == e.parent_id && (p.method.empty() || p.method == e.method)) {
          a.bottleneck = bottleneck_from_summary(p.summary);
          if (!a.bottleneck.empty()) break;
        }
      }
    }
    if (e.status == review_status::internal_error) {
      a.outcome = "not judged: internal error";
    } else if (e.status != review_status::ok) {
      a.failed = true;
      a.outcome = std::string("failed: ") + to_string(e.status);
    } else {
      const trajectory_entry* parent = nullptr;
      for (size_t j = i; j-- > 0;) {
        if (h[j].kind == "review" && h[j].candidate_id == e.parent_id && h[j].status == review_status::ok) {
          parent = &h[j];
          break;
        }
      }
      if (!parent || e.parent_id.empty()) {
        a.outcome = "ok: speedup " + two_decimals(e.speedup) + " (no parent review: gain not judged)";
      } else if (e.speedup < parent->speedup * min_gain) {
        a.failed = true;
        a.outcome = "failed: no gain, speedup " + two_decimals(e.speedup) + " < " + two_decimals(parent->speedup) +
                    " × " + fmt(min_gain);
      } else {
        a.outcome =
            "ok: speedup " + two_decimals(e.speedup) + " ≥ " + two_decimals(parent->speedup) + " × " + fmt(min_gain);
      }
    }
    v.attempts.push_back(std::move(a));
  }

  // The lineage of the current candidate: the methods that made it, oldest first.
  std::set<std::string> visited;
  std::string c = candidate;
  if (!c.empty()) v.lineage_candidates.push_back(c);
  while (!c.empty() && visited.insert(c).second) {
    const history_attempt* made = nullptr;
    for (auto it = v.attempts.rbegin(); it != v.attempts.rend(); ++it) {
      if (it->candidate_id == c) {
        made = &*it;
        break;
      }
    }
    if (!made) break;
    v.lineage.push_back(made->method);
    v.lineage_seqs.push_back(made->seq);
    c = made->parent_id;
    if (!c.empty() && !visited.count(c)) v.lineage_candidates.push_back(c);
  }
  std::reverse(v.lineage.begin(), v.lineage.end());
  std::reverse(v.lineage_seqs.begin(), v.lineage_seqs.end());
  std::reverse(v.lineage_candidates.begin(), v.lineage_candidates.end());
  return v;
}

struct candidate_method {
  double score = 0;
  std::string tier = "table";  // move_estimate::tier
  std::vector<std::string> fired_rules;
  std::map<std::string, double> evidence;
};

constexpr const char* kGainKeyPrefix = "gain/";
constexpr const char* kNoiseVeto = "expected gain ";

// The weighed expected gain: the prior counts as `weight` applications, each measured
// application as one; a geometric mean, as gains compose by multiplication.
double weighed_gain(double prior, double weight, const experience_summary* e) {
  if (!e || e->applied == 0 || !(e->mean_gain > 0) || !std::isfinite(e->mean_gain) || !(prior > 0)) return prior;
  const double n = e->applied;
  return std::exp((weight * std::log(prior) + n * std::log(e->mean_gain)) / (weight + n));
}

// 64-bit FNV-1a: a stable hash of text (the uniform order's seed must not depend on
// the standard library).
uint64_t fnv1a(const std::string& text, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

// splitmix64: the uniform order's draws.
uint64_t next_draw(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Accumulates vetoes, one entry per method, in the order first vetoed.
class veto_list {
 public:
  void add(const std::string& method, const std::string& reason) {
    auto it = index_.find(method);
    if (it == index_.end()) {
      index_[method] = list_.size();
      list_.push_back({method, reason});
    } else {
      list_[it->second].reason += "; " + reason;
    }
  }
  bool has(const std::string& method) const { return index_.count(method) > 0; }
  std::vector<method_veto> take() { return std::move(list_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<method_veto> list_;
};

void add_evidence(std::map<std::string, double>& out, const std::map<std::string, policy_value>& used) {
  for (const auto& [name, v] : used) {
    if (v.numeric()) out[name] = v.as_number();
  }
}

}  // namespace

std::string plan_gain_key(const std::string& method) { return kGainKeyPrefix + method; }

bool nothing_above_noise(const optimization_plan& plan) {
  if (!plan.ranked.empty()) return false;
  for (const auto& v : plan.vetoed)
    if (v.reason.rfind(kNoiseVeto, 0) == 0 && v.reason.find("is within the noise") != std::string::npos) return true;
  return false;
}

std::string bottleneck_tag(const std::string& bottleneck) { return "[bottleneck=" + bottleneck + "]"; }

std::string bottleneck_from_summary(const std::string& summary) {
  const std::string open = "[bottleneck=";
  const size_t at = summary.find(open);
  if (at == std::string::npos) return "";
  const size_t end = summary.find(']', at + open.size());
  if (end == std::string::npos) return "";
  return summary.substr(at + open.size(), end - at - open.size());
}

policy_input make_policy_input(const case_example& ex) {
  policy_input in;
  in.features.candidate_id = "example";
  in.features.structure_class = ex.structure_class;
  in.features.values = ex.features;
  in.profile.values = ex.metrics;
  in.atol = ex.task_atol;
  in.rtol = ex.task_rtol;
  in.dtype = ex.task_dtype;
  in.round = ex.round.value_or(0);
  return in;
}

policy_input make_policy_input(const plan_request& req) {
  policy_input in;
  in.profile = req.review.profile;
  in.features = req.features;
  if (in.features.candidate_id.empty()) in.features.candidate_id = req.cand.id;
  in.atol = req.task.tolerance.atol;
  in.rtol = req.task.tolerance.rtol;
  if (!req.task.inputs.empty()) {
    in.dtype = req.task.inputs.front().dtype;
  } else if (!req.task.parameters.empty()) {
    in.dtype = req.task.parameters.front().dtype;
  }
  in.round = req.cand.round;
  in.history = req.history;
  if (auto it = req.cand.recipe.find("methods"); it != req.cand.recipe.end()) {
    std::vector<std::string> methods;
    std::stringstream list(it->second);
    for (std::string m; std::getline(list, m, ',');)
      if (!m.empty()) methods.push_back(m);
    in.coder_methods = methods;
  }
  if (auto it = req.cand.recipe.find("other_methods"); it != req.cand.recipe.end() && it->second == "model")
    in.coder_fallback = true;
  if (auto it = req.cand.recipe.find("template"); it != req.cand.recipe.end()) in.template_name = it->second;
  return in;
}

std::string primary_bottleneck(const skill_library& lib, const policy_input& in) {
  evidence_env e = build_evidence(in);
  std::vector<traced_value> d, p;
  add_computed(lib, e, d, p);
  return classify(lib, e.env).primary;
}

namespace {

// One decision as it is made: the trace it fills, the moves still in the running and
// the vetoes so far. decide() runs the steps below on it in order.
struct decision_work {
  const skill_library& lib;
  const policy_input& in;
  decision_trace& t;
  const policy_environment& env;
  policy_expr::definition_lookup defs;
  std::map<std::string, candidate_method> candidates;
  veto_list vetoes;
};

// The decision table (long-term memory): the cases that fire allow and forbid moves.
void apply_decision_table(decision_work& w, const std::map<std::string, double>& class_evidence) {
  decision_trace& t = w.t;
  for (const auto& c : w.lib.decisions) {
    rule_outcome o;
    o.id = c.id;
    if (c.bottleneck != "any" && c.bottleneck != t.primary) {
      o.reason = "wrong bottleneck: needs " + c.bottleneck + ", primary is " +
                 (t.primary.empty() ? "none (no class holds)" : t.primary);
      t.cases_not_fired.push_back(std::move(o));
      continue;
    }
    if (!c.structure.empty()) {
      if (t.structure_class.empty()) {
        o.reason = "structure unknown: missing structure_class";
        o.missing = {"structure_class"};
        t.cases_not_fired.push_back(std::move(o));
        continue;
      }
      if (std::find(c.structure.begin(), c.structure.end(), t.structure_class) == c.structure.end()) {
        o.reason = "wrong structure: needs " + join(c.structure, " | ") + ", kernel is " + t.structure_class;
        t.cases_not_fired.push_back(std::move(o));
        continue;
      }
    }
    evaluation_record rec;
    if (c.when) {
      const policy_value v = c.when->evaluate(w.env, &rec);
      const auto truth = v.truth();
      if (!truth) {
        o.missing = to_vector(rec.missing);
        o.reason = "when unknown";
        if (!o.missing.empty()) o.reason += ": missing " + join(o.missing, ", ");
        if (!rec.notes.empty()) o.reason += " (" + join(to_vector(rec.notes), ", ") + ")";
        t.cases_not_fired.push_back(std::move(o));
        continue;
      }
      if (!*truth) {
        o.reason = "when false: " + c.when->text() + " (" + c.when->explain(w.env, w.defs) + ")";
        t.cases_not_fired.push_back(std::move(o));
        continue;
      }
    }
    o.fired = true;
    std::vector<std::string> because;
    if (c.bottleneck != "any") because.push_back("bottleneck " + c.bottleneck);
    if (!c.structure.empty()) because.push_back("structure " + t.structure_class);
    if (c.when) because.push_back(c.when->explain(w.env, w.defs));
    o.reason = because.empty() ? "always" : join(because, " and ");
    for (const auto& a : c.allow) {
      candidate_method& m = w.candidates[a.method];
      m.score = std::max(m.score, a.gain);
      m.fired_rules.push_back(c.id);
      add_evidence(m.evidence, rec.used);
      for (const auto& [k, v] : class_evidence) m.evidence.emplace(k, v);
    }
    for (const auto& f : c.forbid) {
      w.vetoes.add(f.method, "forbidden by case " + c.id + (f.why.empty() ? "" : ": " + f.why));
    }
    t.cases_fired.push_back(std::move(o));
  }
}

// Without long-term memory every method of the library is a candidate at score 1.
void allow_every_method(decision_work& w) {
  for (const auto& m : w.lib.methods) {
    w.candidates[m.id].score = 1.0;
    w.candidates[m.id].tier = "uniform";
  }
  w.t.notes.push_back(
      "ablation: long-term memory off: no decision table, no global vetoes, no experience; every "
      "method whose requires holds is allowed with score 1, in a uniform order (seed " +
      std::to_string(w.in.uniform_seed) + ")");
}

// Carried moves: what the plans of the candidate's ancestors ranked from their table
// and no candidate of the lineage since has tried. The line composes them with the
// moves that helped (the ones that made the candidate).
void carry_ancestor_plans(decision_work& w, const history_view& hv) {
  std::vector<trajectory_entry> plans;
  for (const auto& e : w.in.history)
    if (e.kind == "plan") plans.push_back(e);
  std::stable_sort(plans.begin(), plans.end(),
                   [](const trajectory_entry& a, const trajectory_entry& b) { return a.seq < b.seq; });
  const auto& lc = hv.lineage_candidates;
  for (size_t i = 0; i + 1 < lc.size(); ++i) {  // the ancestors, oldest first
    std::set<std::string> since(lc.begin() + static_cast<long>(i), lc.end());
    for (const auto& p : plans) {
      if (p.candidate_id != lc[i]) continue;
      for (const auto& [key, gain] : p.metrics) {
        if (key.rfind(kGainKeyPrefix, 0) != 0) continue;
        const std::string m = key.substr(std::string(kGainKeyPrefix).size());
        if (!w.lib.find_method(m) || !(gain > 0) || !std::isfinite(gain)) continue;
        bool tried = false;
        for (const auto& a : hv.attempts) tried = tried || (a.method == m && since.count(a.parent_id));
        if (tried) continue;
        // The candidate's own table speaks for it where it names the move.
        if (auto it = w.candidates.find(m); it != w.candidates.end() && it->second.tier == "table") continue;
        candidate_method& cm = w.candidates[m];
        cm.tier = "carried";
        cm.score = std::max(cm.score, gain);
        const std::string rule = "plan:" + lc[i].substr(0, 12);
        if (std::find(cm.fired_rules.begin(), cm.fired_rules.end(), rule) == cm.fired_rules.end())
          cm.fired_rules.push_back(rule);
      }
    }
  }
}

// Exploration: the other legal moves of the candidate's coder (known only where the
// coder lists them), at the library's exploration gain.
void add_exploration(decision_work& w) {
  if (!w.in.coder_methods) return;
  for (const auto& m : *w.in.coder_methods) {
    if (w.candidates.count(m) || !w.lib.find_method(m)) continue;
    candidate_method& cm = w.candidates[m];
    cm.score = w.lib.guardrails.exploration_gain;
    cm.tier = "explore";
  }
}

// Global vetoes (part of the long-term memory).
void check_global_vetoes(decision_work& w) {
  for (const auto& v : w.lib.vetoes) {
    evaluation_record rec;
    const auto truth = v.when.evaluate(w.env, &rec).truth();
    rule_outcome o;
    o.id = v.id;
    if (truth && *truth) {
      o.fired = true;
      o.reason = v.when.explain(w.env, w.defs);
      for (const auto& m : v.methods) {
        if (w.candidates.count(m)) w.vetoes.add(m, "global veto " + v.id + ": " + v.why);
      }
    } else if (truth) {
      o.reason = "when false";
    } else {
      o.missing = to_vector(rec.missing);
      o.reason = "when unknown" + (o.missing.empty() ? std::string() : ": missing " + join(o.missing, ", "));
    }
    w.t.vetoes_checked.push_back(std::move(o));
  }
}

// What the coder can do: a method it has no change for on this candidate would end
// the round with "could not be applied". With a fallback coder the veto waits until
// the ranking (the methods returned): it applies only while one of the coder's own
// methods is allowed.
std::vector<std::string> check_coder_methods(decision_work& w) {
  std::vector<std::string> beyond_coder;
  if (!w.in.coder_methods) return beyond_coder;
  const std::set<std::string> can(w.in.coder_methods->begin(), w.in.coder_methods->end());
  for (const auto& [id, cm] : w.candidates)
    if (!can.count(id)) {
      if (w.in.coder_fallback)
        beyond_coder.push_back(id);
      else
        w.vetoes.add(id, "the coder has no change for it on this candidate (its recipe's methods)");
    }
  return beyond_coder;
}

// Preconditions (`requires`).
void check_preconditions(decision_work& w) {
  for (auto& [id, cm] : w.candidates) {
    const method_def* m = w.lib.find_method(id);
    if (!m || !m->requirement) continue;
    evaluation_record rec;
    const auto truth = m->requirement->evaluate(w.env, &rec).truth();
    add_evidence(cm.evidence, rec.used);
    if (truth && !*truth) {
      w.vetoes.add(
          id, "precondition failed: " + m->requirement->text() + " (" + m->requirement->explain(w.env, w.defs) + ")");
    } else if (!truth) {
      w.t.notes.push_back("precondition of " + id + " unknown (missing " + join(to_vector(rec.missing), ", ") +
                          "): not enforced");
    }
  }
}

// Guardrail: repeated failures of a move in this class.
void veto_repeated_failures(decision_work& w, const history_view& hv) {
  const guardrail_settings& g = w.lib.guardrails;
  for (const auto& [id, cm] : w.candidates) {
    std::vector<std::string> seqs;
    for (const auto& a : hv.attempts) {
      if (a.method == id && a.failed && (a.bottleneck.empty() || a.bottleneck == w.t.primary))
        seqs.push_back(std::to_string(a.seq));
    }
    if (static_cast<int>(seqs.size()) >= g.max_failures_per_method) {
      w.vetoes.add(id, "guardrail: failed " + std::to_string(seqs.size()) + " time" + (seqs.size() == 1 ? "" : "s") +
                           " in class " + (w.t.primary.empty() ? "none" : w.t.primary) + " (history seqs " +
                           join(seqs, ", ") + ")");
    }
  }
}

// Guardrail: a move tried on this candidate before is not repeated.
void veto_tried_moves(decision_work& w, const history_view& hv) {
  for (const auto& [id, cm] : w.candidates) {
    std::vector<std::string> seqs;
    for (const auto& a : hv.attempts)
      if (a.method == id && a.parent_id == w.t.candidate_id && a.outcome.rfind("not judged", 0) != 0)
        seqs.push_back(std::to_string(a.seq));
    // A move the coder could not apply to it, or whose kernel the task had already
    // reviewed (the line records it as not applied), was tried too.
    for (const auto& e : w.in.history)
      if (e.kind == "optimize" && e.method == id && e.parent_id == w.t.candidate_id &&
          e.summary.rfind("not applied", 0) == 0)
        seqs.push_back(std::to_string(e.seq));
    std::sort(seqs.begin(), seqs.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    if (!seqs.empty())
      w.vetoes.add(id, "already tried on this candidate (history seq" + std::string(seqs.size() == 1 ? " " : "s ") +
                           join(seqs, ", ") + "): a move is not repeated");
  }
}

// Guardrail: oscillation along the lineage.
void veto_oscillation(decision_work& w, const history_view& hv) {
  const guardrail_settings& g = w.lib.guardrails;
  // The methods to look back on: the lineage, or, when the candidate is not in the
  // history, every attempt in order.
  std::vector<std::string> seq_methods = hv.lineage;
  std::vector<uint64_t> seq_ids = hv.lineage_seqs;
  if (seq_methods.empty()) {
    for (const auto& a : hv.attempts) {
      seq_methods.push_back(a.method);
      seq_ids.push_back(a.seq);
    }
  }
  const size_t window = static_cast<size_t>(std::max(1, g.oscillation_window - 1));
  const size_t from = seq_methods.size() > window ? seq_methods.size() - window : 0;
  for (const auto& [id, cm] : w.candidates) {
    if (seq_methods.empty() || seq_methods.back() == id) continue;
    for (size_t i = seq_methods.size(); i-- > from;) {
      if (seq_methods[i] != id) continue;
      std::vector<std::string> cycle(seq_methods.begin() + static_cast<long>(i), seq_methods.end());
      cycle.push_back(id);
      std::vector<std::string> seqs;
      for (size_t k = i; k < seq_ids.size(); ++k) seqs.push_back(std::to_string(seq_ids[k]));
      w.vetoes.add(id, "oscillation " + join(cycle, "→") + " within " + std::to_string(g.oscillation_window) +
                           " steps (history seqs " + join(seqs, ", ") + ")");
      break;
    }
  }
}

// The moves beyond the coder (check_coder_methods) are vetoed while one of its own is
// allowed; otherwise they go to its fallback.
void settle_beyond_coder(decision_work& w, const std::vector<std::string>& beyond_coder) {
  if (beyond_coder.empty()) return;
  bool own_allowed = false;
  for (const auto& [id, cm] : w.candidates)
    if (!w.vetoes.has(id) && std::find(beyond_coder.begin(), beyond_coder.end(), id) == beyond_coder.end())
      own_allowed = true;
  if (own_allowed) {
    for (const auto& id : beyond_coder)
      w.vetoes.add(id,
                   "the coder has no change for it on this candidate (its recipe's methods), and one of "
                   "its own is allowed");
  } else {
    w.t.notes.push_back(
        "none of the coder's own methods is allowed: the other allowed methods go to its "
        "fallback (the hybrid coder's model)");
  }
}

struct ranked_entry {
  std::string id;
  int tier;
  move_estimate est;
  int failures;
};

// The moves not vetoed with their expected gains (weighed with experience under
// long-term memory) and their failures in any class of the task's history.
std::vector<ranked_entry> estimate_moves(decision_work& w, const history_view& hv) {
  std::map<std::string, int> failures_any;  // method → failures in any class
  for (const auto& a : hv.attempts) {
    if (a.failed) ++failures_any[a.method];
  }
  std::vector<ranked_entry> order;
  for (const auto& [id, cm] : w.candidates) {
    if (w.vetoes.has(id)) continue;
    move_estimate e;
    e.method = id;
    e.tier = cm.tier;
    e.prior = cm.score;
    e.expected = cm.score;
    if (w.in.use_long_term_memory) {
      auto it = w.in.experience.find(id);
      const experience_summary* x = it == w.in.experience.end() ? nullptr : &it->second;
      e.expected = weighed_gain(cm.score, w.lib.guardrails.prior_weight, x);
      if (x && x->applied > 0 && x->mean_gain > 0) {
        e.applied = x->applied;
        e.measured = x->mean_gain;
      }
    }
    order.push_back({id, cm.tier == "explore" ? 1 : 0, e, failures_any[id]});
  }
  return order;
}

// With long-term memory: by expected gain (the prior — the table's gain, an ancestor
// plan's, or the exploration gain, which is no higher than the table's gains, so that
// a priori the table's moves come first — weighed with experience), then the table's
// and carried moves before the others, then fewer failures in the task's history,
// then the id; a move not expected to gain more than the noise is not offered. The
// trace says when experience moved the choice.
void rank_by_expected_gain(decision_work& w, std::vector<ranked_entry>& order) {
  const guardrail_settings& g = w.lib.guardrails;
  const auto by_expected = [](bool with_experience) {
    return [with_experience](const ranked_entry& a, const ranked_entry& b) {
      const double ga = with_experience ? a.est.expected : a.est.prior;
      const double gb = with_experience ? b.est.expected : b.est.prior;
      if (ga != gb) return ga > gb;
      if (a.tier != b.tier) return a.tier < b.tier;
      if (a.failures != b.failures) return a.failures < b.failures;
      return a.id < b.id;
    };
  };
  const auto above_noise = [&](const ranked_entry& r, bool with_experience) {
    return (with_experience ? r.est.expected : r.est.prior) > g.min_gain;
  };
  // The choice on the priors alone, to say when experience moved it.
  std::vector<ranked_entry> prior_order;
  for (const auto& r : order)
    if (above_noise(r, false)) prior_order.push_back(r);
  std::sort(prior_order.begin(), prior_order.end(), by_expected(false));
  std::sort(order.begin(), order.end(), by_expected(true));
  std::vector<ranked_entry> kept;
  for (const auto& r : order) {
    if (above_noise(r, true)) {
      kept.push_back(r);
      continue;
    }
    std::string why = kNoiseVeto + fmt(r.est.expected) + " is within the noise (≤ " + fmt(g.min_gain) + ")";
    if (r.est.applied > 0)
      why += ": prior " + fmt(r.est.prior) + " weighed with " + std::to_string(r.est.applied) + " application" +
             (r.est.applied == 1 ? "" : "s") + " that gave " + fmt(r.est.measured);
    w.vetoes.add(r.id, why);
  }
  order = std::move(kept);
  const std::string first = order.empty() ? "" : order.front().id;
  const std::string first_prior = prior_order.empty() ? "" : prior_order.front().id;
  if (first == first_prior) return;
  w.t.chosen_without_experience = first_prior;
  const auto describe = [](const move_estimate& e) {
    std::string d = e.method + " (prior " + fmt(e.prior);
    if (e.applied > 0)
      d += ", " + std::to_string(e.applied) + " application" + (e.applied == 1 ? "" : "s") + " gave " + fmt(e.measured);
    return d + ", expected " + fmt(e.expected) + ")";
  };
  std::string moved = "experience moved the choice from " + (first_prior.empty() ? std::string("none") : first_prior) +
                      " to " + (first.empty() ? std::string("none") : first);
  std::vector<std::string> parts;
  for (const auto& r : prior_order)
    if (r.id == first_prior) parts.push_back(describe(r.est));
  for (const auto& r : order)
    if (r.id == first) parts.push_back(describe(r.est));
  if (!parts.empty()) moved += ": " + join(parts, " against ");
  w.t.experience_moved = moved;
}

// Without long-term memory: a uniform order of the legal moves, a Fisher-Yates shuffle
// of the ids in order, drawn from the seed, the candidate and the round (decide()
// stays a pure function).
void shuffle_uniformly(const decision_work& w, std::vector<ranked_entry>& order) {
  std::sort(order.begin(), order.end(), [](const ranked_entry& a, const ranked_entry& b) { return a.id < b.id; });
  uint64_t state = fnv1a(w.t.candidate_id + "#" + std::to_string(w.in.round), fnv1a(std::to_string(w.in.uniform_seed)));
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(next_draw(state) % i);
    std::swap(order[i - 1], order[j]);
  }
}

}  // namespace

decision_trace decide(const skill_library& lib, const policy_input& in) {
  decision_trace t;
  t.library = lib.name;
  t.library_version = lib.version;
  t.candidate_id = in.features.candidate_id;
  t.round = in.round;
  t.use_long_term_memory = in.use_long_term_memory;
  t.structure_class = in.features.structure_class;
  t.template_name = in.template_name;

  evidence_env e = build_evidence(in);
  add_computed(lib, e, t.derived, t.predicates);
  t.evidence = e.items;
  decision_work w{lib, in, t, e.env, definitions(lib), {}, {}};

  classification cls = classify(lib, e.env);
  t.primary = cls.primary;
  t.bottlenecks = cls.holding;
  t.bottlenecks_unknown = cls.unknown;
  std::map<std::string, double> class_evidence;
  if (!t.bottlenecks.empty()) add_evidence(class_evidence, t.bottlenecks.front().evidence);

  if (in.use_long_term_memory)
    apply_decision_table(w, class_evidence);
  else
    allow_every_method(w);

  // The history: the attempts and the candidate's lineage (short-term memory).
  const history_view hv = read_history(in.history, t.candidate_id, lib.guardrails.min_gain);
  t.attempts = hv.attempts;
  t.lineage = hv.lineage;

  if (in.use_long_term_memory) {
    carry_ancestor_plans(w, hv);
    add_exploration(w);
    check_global_vetoes(w);
  }
  const std::vector<std::string> beyond_coder = check_coder_methods(w);
  check_preconditions(w);
  veto_repeated_failures(w, hv);
  veto_tried_moves(w, hv);
  veto_oscillation(w, hv);
  settle_beyond_coder(w, beyond_coder);

  std::vector<ranked_entry> order = estimate_moves(w, hv);
  if (in.use_long_term_memory)
    rank_by_expected_gain(w, order);
  else
    shuffle_uniformly(w, order);
  for (const auto& r : order) {
    const candidate_method& cm = w.candidates[r.id];
    t.ranked.push_back({r.id, cm.score, cm.fired_rules, cm.evidence});
    t.estimates.push_back(r.est);
  }
  t.vetoed = w.vetoes.take();
  return t;
}

std::string decision_trace::summary() const {
  std::vector<std::string> parts;
  if (!bottlenecks.empty()) {
    std::string s = bottlenecks.front().because;
    if (!structure_class.empty()) s += " and structure " + structure_class;
    parts.push_back(s + " → " + primary);
  } else {
    parts.push_back(std::string("no bottleneck class holds") +
                    (structure_class.empty() ? "" : " (structure " + structure_class + ")"));
  }
  if (!use_long_term_memory) parts.push_back("long-term memory off");
  for (const auto& c : cases_fired) {
    std::vector<std::string> allowed;
    for (const auto& m : ranked) {
      if (std::find(m.fired_rules.begin(), m.fired_rules.end(), c.id) != m.fired_rules.end())
        allowed.push_back(m.method + " (gain " + fmt(m.score) + ")");
    }
    parts.push_back("case " + c.id + " fired" + (allowed.empty() ? "" : " → " + join(allowed, ", ")));
  }
  if (cases_fired.empty() && use_long_term_memory) parts.push_back("no decision case fired");
  std::vector<std::string> carried, explore;
  double explore_gain = 0;
  for (size_t i = 0; i < ranked.size() && i < estimates.size(); ++i) {
    if (estimates[i].tier == "carried") carried.push_back(ranked[i].method + " (gain " + fmt(ranked[i].score) + ")");
    if (estimates[i].tier == "explore") {
      explore.push_back(ranked[i].method);
      explore_gain = estimates[i].prior;
    }
  }
  if (!carried.empty()) parts.push_back("carried from earlier plans → " + join(carried, ", "));
  if (!explore.empty())
    parts.push_back("other legal moves → " + join(explore, ", ") + " (gain " + fmt(explore_gain) + ")");
  for (const auto& v : vetoed) parts.push_back(v.method + " vetoed: " + v.reason);
  if (!experience_moved.empty()) parts.push_back(experience_moved);
  parts.push_back(ranked.empty() ? "nothing to choose" : "chosen " + ranked.front().method);
  return join(parts, "; ");
}

optimization_plan decision_trace::to_optimization_plan() const {
  optimization_plan p;
  p.candidate_id = candidate_id;
  p.bottleneck_class = primary;
  p.ranked = ranked;
  p.vetoed = vetoed;
  p.chosen = ranked.empty() ? "" : ranked.front().method;
  p.rationale = bottleneck_tag(primary) + " " + summary();
  return p;
}

std::string render_trace(const decision_trace& t) {
  std::string s;
  const auto line = [&](const std::string& x) { s += x + "\n"; };
  const auto values = [](const std::vector<traced_value>& v) {
    std::vector<std::string> parts;
    for (const auto& x : v) {
      std::string p = x.name + " " + x.value.to_string();
      if (!x.value.known() && !x.missing.empty()) p += " (missing " + join(x.missing, ", ") + ")";
      parts.push_back(p);
    }
    return parts.empty() ? std::string("none") : join(parts, ", ");
  };
  line("decision for candidate " + (t.candidate_id.empty() ? std::string("?") : t.candidate_id) + " (round " +
       std::to_string(t.round) + "), skill library " + t.library + " v" + std::to_string(t.library_version) +
       (t.use_long_term_memory ? "" : ", long-term memory OFF (ablation)"));
  if (!t.template_name.empty()) line("template: " + t.template_name);
  line("evidence: " + values(t.evidence));
  line("derived: " + values(t.derived));
  line("predicates: " + values(t.predicates));
  if (t.bottlenecks.empty()) line("bottleneck: no class holds");
  for (size_t i = 0; i < t.bottlenecks.size(); ++i) {
    const auto& b = t.bottlenecks[i];
    line(std::string(i == 0 ? "bottleneck (primary): " : "bottleneck (also): ") + b.id + " [priority " +
         std::to_string(b.priority) + "] because " + b.because);
  }
  for (const auto& b : t.bottlenecks_unknown) line("bottleneck " + b.id + ": " + b.reason);
  for (const auto& c : t.cases_fired) line("case " + c.id + " fired: " + c.reason);
  for (const auto& c : t.cases_not_fired) line("case " + c.id + " did not fire: " + c.reason);
  for (const auto& v : t.vetoes_checked) {
    line("global veto " + v.id + (v.fired ? " holds: " : " does not hold: ") + v.reason);
  }
  for (const auto& a : t.attempts) {
    line("history seq " + std::to_string(a.seq) + ": " + a.method + " on " +
         (a.parent_id.empty() ? std::string("?") : a.parent_id) + " → " + a.candidate_id + " in class " +
         (a.bottleneck.empty() ? std::string("?") : a.bottleneck) + ": " + a.outcome);
  }
  if (!t.lineage.empty()) line("lineage: " + join(t.lineage, " → "));
  for (const auto& n : t.notes) line("note: " + n);
  if (t.ranked.empty()) line("ranked: none");
  for (size_t i = 0; i < t.ranked.size(); ++i) {
    const auto& m = t.ranked[i];
    std::vector<std::string> ev;
    for (const auto& [k, v] : m.evidence) ev.push_back(k + " " + fmt(v));
    line("ranked " + std::to_string(i + 1) + ": " + m.method + " score " + fmt(m.score) +
         (m.fired_rules.empty() ? std::string() : " (cases " + join(m.fired_rules, ", ") + ")") +
         (ev.empty() ? std::string() : " evidence " + join(ev, ", ")));
    if (i < t.estimates.size()) {
      const move_estimate& e = t.estimates[i];
      std::string x = "  " + e.tier + ": expected gain " + fmt(e.expected);
      if (e.applied > 0)
        x += " (prior " + fmt(e.prior) + " weighed with " + std::to_string(e.applied) + " application" +
             (e.applied == 1 ? "" : "s") + " that gave " + fmt(e.measured) + ")";
      line(x);
    }
  }
  for (const auto& v : t.vetoed) line("vetoed: " + v.method + ": " + v.reason);
  if (!t.experience_moved.empty()) line("experience: " + t.experience_moved);
  line("chosen: " + (t.ranked.empty() ? std::string("none") : t.ranked.front().method));
  line("summary: " + t.summary());
  return s;
}

}  // namespace ks
