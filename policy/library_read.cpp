// The skill library's loader, phase 1: each file on its own (structure, types,
// enums, syntax). Phase 2 is library_check.cpp.
#include "policy/library_loader.hpp"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <functional>
#include <memory>
#include <set>

#include "base/suggest.hpp"
#include "policy/evidence_names.hpp"

namespace ks::library_load {

source_location location_of(const std::string& file, const yaml_field& f) {
  source_location loc;
  loc.file = file;
  YAML::Node n = f.value.IsDefined() && !f.value.IsNull() ? f.value : f.key;
  if (n.IsDefined()) {
    const YAML::Mark m = n.Mark();
    if (!m.is_null()) {
      loc.line = m.line + 1;
      loc.column = m.column + 1;
    }
  }
  return loc;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string near = closest(word, candidates);
  return near.empty() ? "" : " (did you mean '" + near + "'?)";
}

void library_loader::read_library(const yaml_field& f) {
  origin o{cur_, f, {}};
  if (library_origin_) {
    r().fail(f, "a second 'library' entry (the first is in " + files_[library_origin_->file].source +
                    "; exactly one file has it)");
    return;
  }
  read_entry(
      f,
      {{"name", [&](const yaml_field& x) { r().string(x, lib_.name, false); }},
       {"version", [&](const yaml_field& x) { r().integer(x, lib_.version, 1, 1'000'000'000, "a positive integer"); }},
       {"description", [&](const yaml_field& x) { r().string(x, lib_.description); }}},
      {"name", "version"});
  library_origin_ = o;
}

void library_loader::read_guardrails(const yaml_field& f) {
  if (guardrails_origin_) {
    r().fail(f, "a second 'guardrails' entry (the first is in " + files_[guardrails_origin_->file].source + ")");
    return;
  }
  guardrails_origin_ = origin{cur_, f, {}};
  auto& g = lib_.guardrails;
  read_entry(
      f,
      {{"max_failures_per_method",
        [&](const yaml_field& x) { r().integer(x, g.max_failures_per_method, 1, 1000, "a positive integer"); }},
       {"min_gain",
        [&](const yaml_field& x) { r().number(x, g.min_gain, 0, false, 1000, true, "a positive number (e.g. 1.02)"); }},
       {"oscillation_window",
        [&](const yaml_field& x) { r().integer(x, g.oscillation_window, 2, 1000, "an integer of at least 2"); }},
       {"exploration_gain",
        [&](const yaml_field& x) {
          r().number(x, g.exploration_gain, 0, false, 1000, true, "a positive number (e.g. 1.03)");
        }},
       {"prior_weight",
        [&](const yaml_field& x) {
          r().number(x, g.prior_weight, 0, false, 1000, true, "a positive number (e.g. 1)");
        }}},
      {});
}

void library_loader::read_derived(const yaml_field& f) {
  derived_field d;
  origin o{cur_, f, {}};
  read_entry(f,
             {{"id", [&](const yaml_field& x) { read_id(x, d.id, o); }},
              {"expr", [&](const yaml_field& x) { expression(x, d.expr, o, "expr"); }},
              {"description", [&](const yaml_field& x) { r().string(x, d.description); }}},
             {"id", "expr"});
  d.where = location_of(files_[cur_].source, f);
  lib_.derived.push_back(std::move(d));
  derived_o_.push_back(std::move(o));
}

void library_loader::read_predicate(const yaml_field& f) {
  predicate_def p;
  origin o{cur_, f, {}};
  read_entry(f,
             {{"id", [&](const yaml_field& x) { read_id(x, p.id, o); }},
              {"expr", [&](const yaml_field& x) { expression(x, p.expr, o, "expr"); }},
              {"description", [&](const yaml_field& x) { r().string(x, p.description); }}},
             {"id", "expr"});
  p.where = location_of(files_[cur_].source, f);
  lib_.predicates.push_back(std::move(p));
  predicate_o_.push_back(std::move(o));
}

void library_loader::read_bottleneck(const yaml_field& f) {
  bottleneck_def b;
  origin o{cur_, f, {}};
  read_entry(f,
             {{"id", [&](const yaml_field& x) { read_id(x, b.id, o); }},
              {"priority",
               [&](const yaml_field& x) {
                 o.fields["priority"] = x;
                 r().integer(x, b.priority, -1'000'000, 1'000'000, "an integer");
               }},
              {"when", [&](const yaml_field& x) { expression(x, b.when, o, "when"); }},
              {"description", [&](const yaml_field& x) { r().string(x, b.description); }},
              {"evidence",
               [&](const yaml_field& x) {
                 o.fields["evidence"] = x;
                 string_list(x, b.evidence);
                 if (x.value.IsSequence()) {
                   for (size_t i = 0; i < x.value.size(); ++i)
                     o.fields["evidence[" + std::to_string(i) + "]"] = x.item(i, x.value[i]);
                 }
               }}},
             {"id", "priority", "when"});
  if (b.id == "any")
    r().fail(o.fields.count("id") ? o.fields["id"] : f, "'any' is reserved (a case's bottleneck: any)");
  b.where = location_of(files_[cur_].source, f);
  lib_.bottlenecks.push_back(std::move(b));
  bottleneck_o_.push_back(std::move(o));
}

void library_loader::read_coder_rule(const yaml_field& f, coder_rule& rule) {
  read_entry(f,
             {{"param",
               [&](const yaml_field& x) {
                 r().string(x, rule.param, false);
                 if (!rule.param.empty() && !is_identifier(rule.param))
                   r().fail(x, "expected a parameter name, got \"" + rule.param + "\"");
               }},
              {"op", [&](const yaml_field& x) { r().one_of(x, rule.op, coder_ops()); }},
              {"values",
               [&](const yaml_field& x) {
                 if (x.value.IsScalar()) {
                   rule.values.push_back(x.value.Scalar());
                 } else if (x.value.IsSequence()) {
                   for (size_t i = 0; i < x.value.size(); ++i) {
                     if (!x.value[i].IsScalar()) {
                       r().fail(x.item(i, x.value[i]), "expected a value, got " + describe(x.value[i]));
                     } else {
                       rule.values.push_back(x.value[i].Scalar());
                     }
                   }
                 } else {
                   r().fail(x, "expected a list of values, got " + describe(x.value));
                 }
               }}},
             {"param", "op"});
  if ((rule.op == "set" || rule.op == "choose" || rule.op == "multiply") && rule.values.empty() && f.value.IsMap()) {
    r().fail(f, "op '" + rule.op + "' needs 'values'");
  }
}

void library_loader::read_method(const yaml_field& f) {
  method_def m;
  origin o{cur_, f, {}};
  read_entry(f,
             {{"id", [&](const yaml_field& x) { read_id(x, m.id, o); }},
              {"name", [&](const yaml_field& x) { r().string(x, m.name, false); }},
              {"category", [&](const yaml_field& x) { r().one_of(x, m.category, method_categories()); }},
              {"rationale", [&](const yaml_field& x) { r().string(x, m.rationale, false); }},
              {"preconditions", [&](const yaml_field& x) { string_list(x, m.preconditions); }},
              {"requires",
               [&](const yaml_field& x) {
                 policy_expr e;
                 expression(x, e, o, "requires");
                 if (!e.empty()) m.requirement = std::move(e);
               }},
              {"expected_effect",
               [&](const yaml_field& x) {
                 if (!x.value.IsMap()) {
                   r().fail(x, "expected a map of metric: up | down | same, got " + describe(x.value));
                   return;
                 }
                 std::vector<std::string> names = evidence_names_of(evidence_kind::metric);
                 for (auto& n : evidence_names_of(evidence_kind::feature)) names.push_back(n);
                 for (auto it = x.value.begin(); it != x.value.end(); ++it) {
                   const std::string name = it->first.Scalar();
                   yaml_field c = x.child(name, it->first, it->second);
                   const evidence_name* e = find_evidence_name(name);
                   if (!e || (e->kind != evidence_kind::metric && e->kind != evidence_kind::feature)) {
                     r().fail_at(it->first, c.path + ": unknown metric '" + name + "'" + did_you_mean(name, names));
                     continue;
                   }
                   std::string dir;
                   r().one_of(c, dir, effect_directions());
                   if (!dir.empty()) m.expected_effect[name] = dir;
                 }
               }},
              {"forbidden_patterns", [&](const yaml_field& x) { string_list(x, m.forbidden_patterns); }},
              {"example", [&](const yaml_field& x) { r().string(x, m.example); }},
              {"rules_coder",
               [&](const yaml_field& x) {
                 if (x.value.IsSequence()) {
                   for (size_t i = 0; i < x.value.size(); ++i) {
                     coder_rule rule;
                     read_coder_rule(x.item(i, x.value[i]), rule);
                     m.rules_coder.push_back(std::move(rule));
                   }
                 } else {
                   coder_rule rule;
                   read_coder_rule(x, rule);
                   m.rules_coder.push_back(std::move(rule));
                 }
               }},
              {"sources",
               [&](const yaml_field& x) {
                 string_list(x, m.sources);
                 if (m.sources.empty()) r().fail(x, "expected at least one source (a guide, paper or manual section)");
               }}},
             {"id", "name", "category", "rationale", "expected_effect", "sources"});
  m.where = location_of(files_[cur_].source, f);
  lib_.methods.push_back(std::move(m));
  method_o_.push_back(std::move(o));
}

void library_loader::read_number_map(const yaml_field& f, std::map<std::string, double>& out, evidence_kind kind) {
  if (!f.value.IsDefined() || f.value.IsNull()) return;
  if (!f.value.IsMap()) {
    r().fail(f, "expected a map of name: number, got " + describe(f.value));
    return;
  }
  const std::vector<std::string> names = evidence_names_of(kind);
  const char* what = kind == evidence_kind::metric ? "metric" : "feature";
  for (auto it = f.value.begin(); it != f.value.end(); ++it) {
    const std::string name = it->first.Scalar();
    yaml_field c = f.child(name, it->first, it->second);
    const evidence_name* e = find_evidence_name(name);
    if (!e || e->kind != kind) {
      std::string msg = std::string("unknown ") + what + " '" + name + "'";
      if (e && e->kind == evidence_kind::metric)
        msg += " (it is a profile metric: put it under metrics)";
      else if (e && e->kind == evidence_kind::feature)
        msg += " (it is a code feature: put it under features)";
      else if (e)
        msg += std::string(" (it is a ") + to_string(e->kind) + " field)";
      else
        msg += did_you_mean(name, names);
      r().fail_at(it->first, c.path + ": " + msg);
      continue;
    }
    double v = 0;
    const size_t errors_before = r().errors().size();
    r().number(c, v, -DBL_MAX, true, DBL_MAX, true, "a number");
    if (r().errors().size() == errors_before) out[name] = v;
  }
}

void library_loader::read_example(const yaml_field& f, case_example& ex) {
  read_entry(f,
             {{"structure_class", [&](const yaml_field& x) { r().one_of(x, ex.structure_class, structure_classes()); }},
              {"metrics", [&](const yaml_field& x) { read_number_map(x, ex.metrics, evidence_kind::metric); }},
              {"features", [&](const yaml_field& x) { read_number_map(x, ex.features, evidence_kind::feature); }},
              {"task",
               [&](const yaml_field& x) {
                 read_entry(x,
                            {{"atol",
                              [&](const yaml_field& y) {
                                double v = -1;
                                r().number(y, v, 0, true, DBL_MAX, true, "a non-negative number");
                                if (v >= 0) ex.task_atol = v;
                              }},
                             {"rtol",
                              [&](const yaml_field& y) {
                                double v = -1;
                                r().number(y, v, 0, true, DBL_MAX, true, "a non-negative number");
                                if (v >= 0) ex.task_rtol = v;
                              }},
                             {"dtype", [&](const yaml_field& y) { r().string(y, ex.task_dtype, false); }}},
                            {});
               }},
              {"round",
               [&](const yaml_field& x) {
                 int v = -1;
                 r().integer(x, v, 0, 1'000'000, "a non-negative integer");
                 if (v >= 0) ex.round = static_cast<uint32_t>(v);
               }}},
             {});
}

void library_loader::read_case(const yaml_field& f) {
  decision_case c;
  origin o{cur_, f, {}};
  bool has_allow = false, has_forbid = false;
  read_entry(f,
             {{"id", [&](const yaml_field& x) { read_id(x, c.id, o); }},
              {"description", [&](const yaml_field& x) { r().string(x, c.description); }},
              {"bottleneck",
               [&](const yaml_field& x) {
                 r().string(x, c.bottleneck, false);
                 o.fields["bottleneck"] = x;
               }},
              {"structure",
               [&](const yaml_field& x) {
                 if (x.value.IsScalar()) {
                   std::string s;
                   r().one_of(x, s, structure_classes());
                   if (!s.empty()) c.structure.push_back(s);
                   return;
                 }
                 if (!x.value.IsSequence()) {
                   r().fail(x, "expected a list of structure classes, got " + describe(x.value));
                   return;
                 }
                 for (size_t i = 0; i < x.value.size(); ++i) {
                   std::string s;
                   r().one_of(x.item(i, x.value[i]), s, structure_classes());
                   if (!s.empty()) c.structure.push_back(s);
                 }
               }},
              {"when",
               [&](const yaml_field& x) {
                 policy_expr e;
                 expression(x, e, o, "when");
                 if (!e.empty()) c.when = std::move(e);
               }},
              {"allow",
               [&](const yaml_field& x) {
                 has_allow = true;
                 each_item(x, [&](const yaml_field& item) {
                   allowed_method a;
                   a.gain = 0;
                   const size_t i = c.allow.size();
                   read_entry(item,
                              {{"method",
                                [&](const yaml_field& y) {
                                  r().string(y, a.method, false);
                                  o.fields["allow[" + std::to_string(i) + "].method"] = y;
                                }},
                               {"gain",
                                [&](const yaml_field& y) {
                                  r().number(y, a.gain, 0, false, 1000, true,
                                             "a positive expected speedup factor (e.g. 1.3)");
                                }},
                               {"why", [&](const yaml_field& y) { r().string(y, a.why); }}},
                              {"method", "gain"});
                   c.allow.push_back(std::move(a));
                 });
               }},
              {"forbid",
               [&](const yaml_field& x) {
                 has_forbid = true;
                 each_item(x, [&](const yaml_field& item) {
                   forbidden_method fm;
                   const size_t i = c.forbid.size();
                   read_entry(item,
                              {{"method",
                                [&](const yaml_field& y) {
                                  r().string(y, fm.method, false);
                                  o.fields["forbid[" + std::to_string(i) + "].method"] = y;
                                }},
                               {"why", [&](const yaml_field& y) { r().string(y, fm.why); }}},
                              {"method"});
                   c.forbid.push_back(std::move(fm));
                 });
               }},
              {"example", [&](const yaml_field& x) { read_example(x, c.example); }}},
             {"id", "bottleneck", "example"});
  if (f.value.IsMap() && !has_allow && !has_forbid) {
    r().fail(f, "a case must allow or forbid at least one method (missing 'allow')");
  }
  c.where = location_of(files_[cur_].source, f);
  lib_.decisions.push_back(std::move(c));
  case_o_.push_back(std::move(o));
}

void library_loader::read_veto(const yaml_field& f) {
  global_veto v;
  origin o{cur_, f, {}};
  read_entry(f,
             {{"id", [&](const yaml_field& x) { read_id(x, v.id, o); }},
              {"methods",
               [&](const yaml_field& x) {
                 string_list(x, v.methods);
                 if (x.value.IsSequence()) {
                   for (size_t i = 0; i < x.value.size(); ++i)
                     o.fields["methods[" + std::to_string(i) + "]"] = x.item(i, x.value[i]);
                 } else {
                   o.fields["methods[0]"] = x;
                 }
                 if (v.methods.empty()) r().fail(x, "expected at least one method");
               }},
              {"when", [&](const yaml_field& x) { expression(x, v.when, o, "when"); }},
              {"why", [&](const yaml_field& x) { r().string(x, v.why, false); }}},
             {"id", "methods", "when", "why"});
  v.where = location_of(files_[cur_].source, f);
  lib_.vetoes.push_back(std::move(v));
  veto_o_.push_back(std::move(o));
}

void library_loader::read_file(size_t index) {
  cur_ = index;
  const yaml_field root{"", YAML::Node(), files_[index].root};
  if (!root.value.IsDefined() || root.value.IsNull()) return;  // an empty file is fine
  r().map(
      root,
      {{"library", [&](const yaml_field& f) { read_library(f); }},
       {"guardrails", [&](const yaml_field& f) { read_guardrails(f); }},
       {"derived", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_derived(e); }); }},
       {"predicates", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_predicate(e); }); }},
       {"bottlenecks", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_bottleneck(e); }); }},
       {"methods", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_method(e); }); }},
       {"decisions", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_case(e); }); }},
       {"vetoes", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_veto(e); }); }}});
}

}  // namespace ks::library_load
