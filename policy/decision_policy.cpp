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
  if (in.profile.duration_ms > 0)
    put("duration_us", policy_value::number(in.profile.duration_ms * 1000.0), "metric");
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
};

history_view read_history(const std::vector<trajectory_entry>& given, const std::string& candidate,
                          double min_gain) {
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
        a.outcome = "failed: no gain, speedup " + two_decimals(e.speedup) + " < " + two_decimals(parent->speedup) + " × " +
                    fmt(min_gain);
      } else {
        a.outcome = "ok: speedup " + two_decimals(e.speedup) + " ≥ " + two_decimals(parent->speedup) + " × " + fmt(min_gain);
      }
    }
    v.attempts.push_back(std::move(a));
  }

  // The lineage of the current candidate: the methods that made it, oldest first.
  std::set<std::string> visited;
  std::string c = candidate;
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
  }
  std::reverse(v.lineage.begin(), v.lineage.end());
  std::reverse(v.lineage_seqs.begin(), v.lineage_seqs.end());
  return v;
}

struct candidate_method {
  double score = 0;
  std::vector<std::string> fired_rules;
  std::map<std::string, double> evidence;
};

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

std::string bottleneck_tag(const std::string& bottleneck) {
  return "[bottleneck=" + bottleneck + "]";
}

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
  return in;
}

std::string primary_bottleneck(const skill_library& lib, const policy_input& in) {
  evidence_env e = build_evidence(in);
  std::vector<traced_value> d, p;
  add_computed(lib, e, d, p);
  return classify(lib, e.env).primary;
}

decision_trace decide(const skill_library& lib, const policy_input& in) {
  decision_trace t;
  t.library = lib.name;
  t.library_version = lib.version;
  t.candidate_id = in.features.candidate_id;
  t.round = in.round;
  t.use_long_term_memory = in.use_long_term_memory;
  t.structure_class = in.features.structure_class;

  evidence_env e = build_evidence(in);
  add_computed(lib, e, t.derived, t.predicates);
  t.evidence = e.items;
  const policy_environment& env = e.env;
  const auto defs = definitions(lib);

  classification cls = classify(lib, env);
  t.primary = cls.primary;
  t.bottlenecks = cls.holding;
  t.bottlenecks_unknown = cls.unknown;
  std::map<std::string, double> class_evidence;
  if (!t.bottlenecks.empty()) add_evidence(class_evidence, t.bottlenecks.front().evidence);

  // The decision table.
  std::map<std::string, candidate_method> candidates;
  veto_list vetoes;
  if (in.use_long_term_memory) {
    for (const auto& c : lib.decisions) {
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
        const policy_value v = c.when->evaluate(env, &rec);
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
          o.reason = "when false: " + c.when->text() + " (" + c.when->explain(env, defs) + ")";
          t.cases_not_fired.push_back(std::move(o));
          continue;
        }
      }
      o.fired = true;
      std::vector<std::string> because;
      if (c.bottleneck != "any") because.push_back("bottleneck " + c.bottleneck);
      if (!c.structure.empty()) because.push_back("structure " + t.structure_class);
      if (c.when) because.push_back(c.when->explain(env, defs));
      o.reason = because.empty() ? "always" : join(because, " and ");
      for (const auto& a : c.allow) {
        candidate_method& m = candidates[a.method];
        m.score = std::max(m.score, a.gain);
        m.fired_rules.push_back(c.id);
        add_evidence(m.evidence, rec.used);
        for (const auto& [k, v] : class_evidence) m.evidence.emplace(k, v);
      }
      for (const auto& f : c.forbid) {
        vetoes.add(f.method, "forbidden by case " + c.id + (f.why.empty() ? "" : ": " + f.why));
      }
      t.cases_fired.push_back(std::move(o));
    }
  } else {
    for (const auto& m : lib.methods) candidates[m.id].score = 1.0;
    t.notes.push_back("ablation: long-term memory off: no decision table, no global vetoes; every method "
                      "whose requires holds is allowed with score 1");
  }

  // Global vetoes (part of the long-term memory).
  if (in.use_long_term_memory) {
    for (const auto& v : lib.vetoes) {
      evaluation_record rec;
      const auto truth = v.when.evaluate(env, &rec).truth();
      rule_outcome o;
      o.id = v.id;
      if (truth && *truth) {
        o.fired = true;
        o.reason = v.when.explain(env, defs);
        for (const auto& m : v.methods) {
          if (candidates.count(m)) vetoes.add(m, "global veto " + v.id + ": " + v.why);
        }
      } else if (truth) {
        o.reason = "when false";
      } else {
        o.missing = to_vector(rec.missing);
        o.reason = "when unknown" + (o.missing.empty() ? std::string() : ": missing " + join(o.missing, ", "));
      }
      t.vetoes_checked.push_back(std::move(o));
    }
  }

  // What the coder can do: a method it has no change for on this candidate would end
  // the round with "could not be applied".
  // With a fallback coder the veto waits until the ranking: it applies only while
  // one of the coder's own methods is allowed.
  std::vector<std::string> beyond_coder;
  if (in.coder_methods) {
    const std::set<std::string> can(in.coder_methods->begin(), in.coder_methods->end());
    for (const auto& [id, cm] : candidates)
      if (!can.count(id)) {
        if (in.coder_fallback) beyond_coder.push_back(id);
        else vetoes.add(id, "the coder has no change for it on this candidate (its recipe's methods)");
      }
  }

  // Preconditions (`requires`).
  for (auto& [id, cm] : candidates) {
    const method_def* m = lib.find_method(id);
    if (!m || !m->requirement) continue;
    evaluation_record rec;
    const auto truth = m->requirement->evaluate(env, &rec).truth();
    add_evidence(cm.evidence, rec.used);
    if (truth && !*truth) {
      vetoes.add(id, "precondition failed: " + m->requirement->text() + " (" + m->requirement->explain(env, defs) + ")");
    } else if (!truth) {
      t.notes.push_back("precondition of " + id + " unknown (missing " + join(to_vector(rec.missing), ", ") +
                        "): not enforced");
    }
  }

  // Guardrails: repeated failures in this class, oscillation along the lineage.
  const guardrail_settings& g = lib.guardrails;
  history_view hv = read_history(in.history, t.candidate_id, g.min_gain);
  t.attempts = hv.attempts;
  t.lineage = hv.lineage;
  std::map<std::string, int> failures_any;  // method → failures in any class (ranking)
  for (const auto& a : hv.attempts) {
    if (a.failed) ++failures_any[a.method];
  }
  for (const auto& [id, cm] : candidates) {
    std::vector<std::string> seqs;
    for (const auto& a : hv.attempts) {
      if (a.method == id && a.failed && (a.bottleneck.empty() || a.bottleneck == t.primary))
        seqs.push_back(std::to_string(a.seq));
    }
    if (static_cast<int>(seqs.size()) >= g.max_failures_per_method) {
      vetoes.add(id, "guardrail: failed " + std::to_string(seqs.size()) + " time" +
                         (seqs.size() == 1 ? "" : "s") + " in class " +
                         (t.primary.empty() ? "none" : t.primary) + " (history seqs " + join(seqs, ", ") + ")");
    }
  }
  {
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
    for (const auto& [id, cm] : candidates) {
      if (seq_methods.empty() || seq_methods.back() == id) continue;
      for (size_t i = seq_methods.size(); i-- > from;) {
        if (seq_methods[i] != id) continue;
        std::vector<std::string> cycle(seq_methods.begin() + static_cast<long>(i), seq_methods.end());
        cycle.push_back(id);
        std::vector<std::string> seqs;
        for (size_t k = i; k < seq_ids.size(); ++k) seqs.push_back(std::to_string(seq_ids[k]));
        vetoes.add(id, "oscillation " + join(cycle, "→") + " within " + std::to_string(g.oscillation_window) +
                           " steps (history seqs " + join(seqs, ", ") + ")");
        break;
      }
    }
  }

  if (!beyond_coder.empty()) {
    bool own_allowed = false;
    for (const auto& [id, cm] : candidates)
      if (!vetoes.has(id) && std::find(beyond_coder.begin(), beyond_coder.end(), id) == beyond_coder.end())
        own_allowed = true;
    if (own_allowed) {
      for (const auto& id : beyond_coder)
        vetoes.add(id, "the coder has no change for it on this candidate (its recipe's methods), and one of "
                       "its own is allowed");
    } else {
      t.notes.push_back("none of the coder's own methods is allowed: the other allowed methods go to its "
                        "fallback (the hybrid coder's model)");
    }
  }

  // Ranking.
  struct ranked_entry {
    std::string id;
    double score;
    double experience;
    int failures;
  };
  std::vector<ranked_entry> order;
  for (const auto& [id, cm] : candidates) {
    if (vetoes.has(id)) continue;
    double exp = 1.0;
    if (auto it = in.experience.find(id); it != in.experience.end() && it->second.applied > 0 &&
                                          it->second.mean_gain > 0) {
      exp = it->second.mean_gain;
    }
    order.push_back({id, cm.score, exp, failures_any[id]});
  }
  std::sort(order.begin(), order.end(), [](const ranked_entry& a, const ranked_entry& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.experience != b.experience) return a.experience > b.experience;
    if (a.failures != b.failures) return a.failures < b.failures;
    return a.id < b.id;
  });
  for (const auto& r : order) {
    const candidate_method& cm = candidates[r.id];
    t.ranked.push_back({r.id, cm.score, cm.fired_rules, cm.evidence});
  }
  t.vetoed = vetoes.take();
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
  for (const auto& v : vetoed) parts.push_back(v.method + " vetoed: " + v.reason);
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
  }
  for (const auto& v : t.vetoed) line("vetoed: " + v.method + ": " + v.reason);
  line("chosen: " + (t.ranked.empty() ? std::string("none") : t.ranked.front().method));
  line("summary: " + t.summary());
  return s;
}

}  // namespace ks
