#include "policy/skill_library.hpp"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <functional>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "base/content_hash.hpp"
#include "base/suggest.hpp"
#include "config/yaml_reader.hpp"
#include "policy/evidence_names.hpp"

namespace ks {

namespace fs = std::filesystem;

std::string source_location::to_string() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

const std::vector<std::string>& method_categories() {
  static const std::vector<std::string> v = {"memory",     "compute",     "latency",
                                             "occupancy",  "parallelism", "divergence",
                                             "launch",     "fusion",      "precision",
                                             "algorithm"};
  return v;
}

const std::vector<std::string>& effect_directions() {
  static const std::vector<std::string> v = {"up", "down", "same"};
  return v;
}

const std::vector<std::string>& coder_ops() {
  static const std::vector<std::string> v = {"set", "multiply", "toggle", "choose"};
  return v;
}

const method_def* skill_library::find_method(const std::string& id) const {
  for (const auto& m : methods) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

const bottleneck_def* skill_library::find_bottleneck(const std::string& id) const {
  for (const auto& b : bottlenecks) {
    if (b.id == id) return &b;
  }
  return nullptr;
}

const decision_case* skill_library::find_case(const std::string& id) const {
  for (const auto& c : decisions) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

namespace {

// ---------------------------------------------------------------------------
// Loading, phase 1: each file on its own (structure, types, enums, syntax).
// Phase 2 (cross-file): ids, references, expression names and types.

// Where each checked part of an entry sits, for phase-2 messages.
struct origin {
  size_t file = 0;
  yaml_field entry;
  std::map<std::string, yaml_field> fields;  // "id", "when", "allow[0].method", …
};

struct loaded_file {
  std::string source;
  YAML::Node root;
  std::unique_ptr<yaml_reader> reader;
};

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

class library_loader {
 public:
  explicit library_loader(fs::path dir) : dir_(std::move(dir)) {}

  result<skill_library> run();

 private:
  // ---- phase 1 helpers ----
  yaml_reader& r() { return *files_[cur_].reader; }

  void read_id(const yaml_field& f, std::string& out, origin& o) {
    r().string(f, out, false);
    if (!out.empty() && !is_identifier(out)) {
      r().fail(f, "expected an identifier (letters, digits, '_'), got \"" + out + "\"");
    }
    o.fields["id"] = f;
  }

  void string_list(const yaml_field& f, std::vector<std::string>& out) {
    if (f.value.IsScalar()) {  // a single string reads as a list of one
      std::string s;
      r().string(f, s, false);
      if (!s.empty()) out.push_back(s);
      return;
    }
    if (!f.value.IsDefined() || f.value.IsNull()) return;
    if (!f.value.IsSequence()) {
      r().fail(f, "expected a list of strings, got " + describe(f.value));
      return;
    }
    for (size_t i = 0; i < f.value.size(); ++i) {
      std::string s;
      r().string(f.item(i, f.value[i]), s, false);
      out.push_back(s);
    }
  }

  // Parses an expression field (syntax only; names are checked in phase 2).
  void expression(const yaml_field& f, policy_expr& out, origin& o, const std::string& key) {
    std::string text;
    r().string(f, text, false);
    o.fields[key] = f;
    if (text.empty()) return;
    auto e = policy_expr::parse(text);
    if (!e) {
      r().fail(f, "cannot parse expression \"" + text + "\": " + e.message());
      return;
    }
    out = std::move(*e);
  }

  // The path prefix for list item `i` of `section`, with its id when it has one:
  // "methods[12] (vectorize_loads)".
  yaml_field entry_field(const yaml_field& section, size_t i) {
    const YAML::Node item = section.value[i];
    std::string path = section.path + "[" + std::to_string(i) + "]";
    if (item.IsMap()) {
      const YAML::Node id = static_cast<const YAML::Node&>(item)["id"];
      if (id && id.IsScalar() && !id.Scalar().empty()) path += " (" + id.Scalar() + ")";
    }
    return {path, YAML::Node(), item};
  }

  // Reads a map entry: known keys through `keys`, then the required ones present.
  void read_entry(const yaml_field& f, const std::vector<yaml_reader::key_handler>& keys,
                  const std::vector<std::string>& required) {
    if (!f.value.IsMap()) {
      r().fail(f, "expected a map, got " + describe(f.value));
      return;
    }
    r().map(f, keys);
    const YAML::Node& entry = f.value;
    for (const auto& k : required) {
      if (!entry[k]) r().fail(f, "missing required field '" + k + "'");
    }
  }

  template <class Fn>
  void each_item(const yaml_field& section, Fn fn) {
    if (!section.value.IsDefined() || section.value.IsNull()) return;
    if (!section.value.IsSequence()) {
      r().fail(section, "expected a list, got " + describe(section.value));
      return;
    }
    for (size_t i = 0; i < section.value.size(); ++i) fn(entry_field(section, i));
  }

  void read_file(size_t index);
  void read_library(const yaml_field& f);
  void read_guardrails(const yaml_field& f);
  void read_derived(const yaml_field& f);
  void read_predicate(const yaml_field& f);
  void read_bottleneck(const yaml_field& f);
  void read_method(const yaml_field& f);
  void read_case(const yaml_field& f);
  void read_veto(const yaml_field& f);
  void read_example(const yaml_field& f, case_example& ex);
  void read_coder_rule(const yaml_field& f, coder_rule& rule);
  void read_number_map(const yaml_field& f, std::map<std::string, double>& out,
                       evidence_kind kind);

  // ---- phase 2 ----
  void check_all();
  void check_unique_ids();
  void check_expression(const origin& o, const std::string& key, const policy_expr& e,
                        const std::map<std::string, value_type>& scope, bool condition,
                        const std::function<std::string(const std::string&)>& explain_unknown,
                        value_type* type_out = nullptr);
  void check_method_ref(const origin& o, const std::string& key, const std::string& id);
  void fail(const origin& o, const std::string& key, const std::string& message) {
    auto it = o.fields.find(key);
    files_[o.file].reader->fail(it != o.fields.end() ? it->second : o.entry, message);
  }
  std::vector<std::string> scope_names(const std::map<std::string, value_type>& scope) const {
    std::vector<std::string> v;
    for (const auto& [n, t] : scope) v.push_back(n);
    return v;
  }

  fs::path dir_;
  std::vector<loaded_file> files_;
  size_t cur_ = 0;
  std::vector<std::string> global_errors_;

  skill_library lib_;
  std::optional<origin> library_origin_, guardrails_origin_;
  std::vector<origin> derived_o_, predicate_o_, bottleneck_o_, method_o_, case_o_, veto_o_;
};

void library_loader::read_library(const yaml_field& f) {
  origin o{cur_, f, {}};
  if (library_origin_) {
    r().fail(f, "a second 'library' entry (the first is in " +
                    files_[library_origin_->file].source + "; exactly one file has it)");
    return;
  }
  read_entry(f,
             {{"name", [&](const yaml_field& x) { r().string(x, lib_.name, false); }},
              {"version",
               [&](const yaml_field& x) {
                 r().integer(x, lib_.version, 1, 1'000'000'000, "a positive integer");
               }},
              {"description", [&](const yaml_field& x) { r().string(x, lib_.description); }}},
             {"name", "version"});
  library_origin_ = o;
}

void library_loader::read_guardrails(const yaml_field& f) {
  if (guardrails_origin_) {
    r().fail(f, "a second 'guardrails' entry (the first is in " +
                    files_[guardrails_origin_->file].source + ")");
    return;
  }
  guardrails_origin_ = origin{cur_, f, {}};
  auto& g = lib_.guardrails;
  read_entry(f,
             {{"max_failures_per_method",
               [&](const yaml_field& x) {
                 r().integer(x, g.max_failures_per_method, 1, 1000, "a positive integer");
               }},
              {"min_gain",
               [&](const yaml_field& x) {
                 r().number(x, g.min_gain, 0, false, 1000, true, "a positive number (e.g. 1.02)");
               }},
              {"oscillation_window",
               [&](const yaml_field& x) {
                 r().integer(x, g.oscillation_window, 2, 1000, "an integer of at least 2");
               }},
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
  if (b.id == "any") r().fail(o.fields.count("id") ? o.fields["id"] : f, "'any' is reserved (a case's bottleneck: any)");
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
  if ((rule.op == "set" || rule.op == "choose" || rule.op == "multiply") && rule.values.empty() &&
      f.value.IsMap()) {
    r().fail(f, "op '" + rule.op + "' needs 'values'");
  }
}

void library_loader::read_method(const yaml_field& f) {
  method_def m;
  origin o{cur_, f, {}};
  read_entry(
      f,
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

void library_loader::read_number_map(const yaml_field& f, std::map<std::string, double>& out,
                                     evidence_kind kind) {
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
      if (e && e->kind == evidence_kind::metric) msg += " (it is a profile metric: put it under metrics)";
      else if (e && e->kind == evidence_kind::feature) msg += " (it is a code feature: put it under features)";
      else if (e) msg += std::string(" (it is a ") + to_string(e->kind) + " field)";
      else msg += did_you_mean(name, names);
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
  read_entry(
      f,
      {{"structure_class",
        [&](const yaml_field& x) { r().one_of(x, ex.structure_class, structure_classes()); }},
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
  read_entry(
      f,
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
  r().map(root,
          {{"library", [&](const yaml_field& f) { read_library(f); }},
           {"guardrails", [&](const yaml_field& f) { read_guardrails(f); }},
           {"derived", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_derived(e); }); }},
           {"predicates",
            [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_predicate(e); }); }},
           {"bottlenecks",
            [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_bottleneck(e); }); }},
           {"methods", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_method(e); }); }},
           {"decisions", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_case(e); }); }},
           {"vetoes", [&](const yaml_field& f) { each_item(f, [&](const yaml_field& e) { read_veto(e); }); }}});
}

// ---------------------------------------------------------------------------
// Phase 2.

void library_loader::check_expression(
    const origin& o, const std::string& key, const policy_expr& e,
    const std::map<std::string, value_type>& scope, bool condition,
    const std::function<std::string(const std::string&)>& explain_unknown, value_type* type_out) {
  if (e.empty()) return;  // a parse error was reported already
  const expression_check c = e.check(scope);
  const std::vector<std::string> names = scope_names(scope);
  for (const auto& [name, column] : c.unknown_names) {
    std::string why = explain_unknown ? explain_unknown(name) : "";
    if (why.empty()) why = "unknown name '" + name + "'" + did_you_mean(name, names);
    fail(o, key, "in \"" + e.text() + "\" at column " + std::to_string(column) + ": " + why);
  }
  for (const auto& p : c.problems) fail(o, key, "in \"" + e.text() + "\": " + p);
  if (condition && c.type == value_type::string) {
    fail(o, key, "\"" + e.text() + "\" is a string, not a condition");
  }
  if (type_out && c.type) *type_out = *c.type;
}

void library_loader::check_method_ref(const origin& o, const std::string& key, const std::string& id) {
  if (id.empty() || lib_.find_method(id)) return;
  std::vector<std::string> ids;
  for (const auto& m : lib_.methods) ids.push_back(m.id);
  fail(o, key, "unknown method '" + id + "'" + did_you_mean(id, ids));
}

void library_loader::check_unique_ids() {
  // Ids are unique within each kind; derived fields and predicates share one
  // namespace (both are names in expressions) and may not shadow evidence.
  struct first_def {
    std::string kind;
    const origin* o;
  };
  const auto where = [&](const origin& o) {
    auto it = o.fields.find("id");
    return files_[o.file].reader->where(it != o.fields.end() ? it->second : o.entry);
  };
  const auto check = [&](const std::string& kind, const std::vector<std::string>& ids,
                         const std::vector<origin>& origins, std::map<std::string, first_def>& seen) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].empty()) continue;
      auto [it, inserted] = seen.emplace(ids[i], first_def{kind, &origins[i]});
      if (!inserted) {
        std::string first = where(*it->second.o);
        first = first.substr(0, first.size() - 2);  // drop ": "
        fail(origins[i], "id",
             "duplicate " + kind + " id '" + ids[i] + "' (" +
                 (it->second.kind == kind ? "first defined" : "already a " + it->second.kind) + " at " +
                 first + ")");
      }
    }
  };
  const auto ids_of = [](const auto& v) {
    std::vector<std::string> ids;
    for (const auto& x : v) ids.push_back(x.id);
    return ids;
  };
  std::map<std::string, first_def> names, bottlenecks, methods, cases, vetoes;
  check("derived field", ids_of(lib_.derived), derived_o_, names);
  check("predicate", ids_of(lib_.predicates), predicate_o_, names);
  check("bottleneck", ids_of(lib_.bottlenecks), bottleneck_o_, bottlenecks);
  check("method", ids_of(lib_.methods), method_o_, methods);
  check("decision case", ids_of(lib_.decisions), case_o_, cases);
  check("veto", ids_of(lib_.vetoes), veto_o_, vetoes);
  const auto shadow = [&](const std::vector<std::string>& ids, const std::vector<origin>& o) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (const evidence_name* e = find_evidence_name(ids[i])) {
        fail(o[i], "id",
             "'" + ids[i] + "' is already a " + to_string(e->kind) +
                 " name (docs/metrics.md); choose another id");
      }
    }
  };
  shadow(ids_of(lib_.derived), derived_o_);
  shadow(ids_of(lib_.predicates), predicate_o_);
}

void library_loader::check_all() {
  check_unique_ids();

  std::map<std::string, value_type> scope;
  for (const auto& e : evidence_names()) {
    scope[e.name] = e.type == evidence_type::string ? value_type::string : value_type::number;
  }
  std::set<std::string> derived_ids, predicate_ids;
  for (const auto& d : lib_.derived) derived_ids.insert(d.id);
  for (const auto& p : lib_.predicates) predicate_ids.insert(p.id);

  // Derived fields: evidence and earlier derived fields only.
  for (size_t i = 0; i < lib_.derived.size(); ++i) {
    const auto& d = lib_.derived[i];
    value_type t = value_type::number;
    check_expression(
        derived_o_[i], "expr", d.expr, scope, false,
        [&](const std::string& name) -> std::string {
          if (name == d.id) return "a derived field cannot use itself ('" + name + "')";
          if (predicate_ids.count(name))
            return "'" + name + "' is a predicate; derived fields may use only evidence and earlier derived fields";
          if (derived_ids.count(name))
            return "derived field '" + name + "' is defined after '" + d.id +
                   "' (a derived field may use only earlier ones)";
          return "";
        },
        &t);
    if (!d.id.empty() && !scope.count(d.id)) scope[d.id] = t;
  }
  // Predicates: anything but a cycle.
  for (const auto& p : lib_.predicates) {
    if (!p.id.empty() && !scope.count(p.id)) scope[p.id] = value_type::boolean;
  }
  for (size_t i = 0; i < lib_.predicates.size(); ++i) {
    check_expression(predicate_o_[i], "expr", lib_.predicates[i].expr, scope, true, {});
  }
  // Cycles among predicates, and evaluation order (dependencies first, otherwise
  // file order).
  {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < lib_.predicates.size(); ++i) index.emplace(lib_.predicates[i].id, i);
    std::vector<int> state(lib_.predicates.size(), 0);  // 0 new, 1 visiting, 2 done
    std::vector<size_t> order;
    std::vector<std::string> stack;
    std::set<size_t> reported;
    std::function<void(size_t)> visit = [&](size_t i) {
      if (state[i] == 2) return;
      if (state[i] == 1) {
        auto from = std::find(stack.begin(), stack.end(), lib_.predicates[i].id);
        std::string cycle;
        for (auto it = from; it != stack.end(); ++it) cycle += *it + " → ";
        cycle += lib_.predicates[i].id;
        if (reported.insert(i).second) {
          fail(predicate_o_[i], "expr", "predicates form a cycle: " + cycle);
        }
        return;
      }
      state[i] = 1;
      stack.push_back(lib_.predicates[i].id);
      for (const auto& name : lib_.predicates[i].expr.identifiers()) {
        auto it = index.find(name);
        if (it != index.end()) visit(it->second);
      }
      stack.pop_back();
      state[i] = 2;
      order.push_back(i);
    };
    for (size_t i = 0; i < lib_.predicates.size(); ++i) visit(i);
    std::vector<predicate_def> sorted;
    std::vector<origin> sorted_o;
    for (size_t i : order) {
      sorted.push_back(lib_.predicates[i]);
      sorted_o.push_back(predicate_o_[i]);
    }
    lib_.predicates = std::move(sorted);
    predicate_o_ = std::move(sorted_o);
  }

  const std::vector<std::string> all_names = scope_names(scope);

  // Bottlenecks: unique priorities, conditions, evidence names.
  std::map<int, size_t> priorities;
  for (size_t i = 0; i < lib_.bottlenecks.size(); ++i) {
    const auto& b = lib_.bottlenecks[i];
    if (bottleneck_o_[i].fields.count("priority")) {
      auto [it, inserted] = priorities.emplace(b.priority, i);
      if (!inserted) {
        const auto& other = lib_.bottlenecks[it->second];
        fail(bottleneck_o_[i], "priority",
             "priority " + std::to_string(b.priority) + " is already used by bottleneck '" + other.id +
                 "' (" + other.where.to_string() + "); priorities must be unique");
      }
    }
    check_expression(bottleneck_o_[i], "when", b.when, scope, true, {});
    for (size_t k = 0; k < b.evidence.size(); ++k) {
      if (!scope.count(b.evidence[k])) {
        fail(bottleneck_o_[i], "evidence[" + std::to_string(k) + "]",
             "unknown name '" + b.evidence[k] + "'" + did_you_mean(b.evidence[k], all_names));
      }
    }
  }

  // Methods: preconditions.
  for (size_t i = 0; i < lib_.methods.size(); ++i) {
    if (lib_.methods[i].requirement) {
      check_expression(method_o_[i], "requires", *lib_.methods[i].requirement, scope, true, {});
    }
  }

  // Decision cases: references and conditions.
  std::vector<std::string> bottleneck_ids = {"any"};
  for (const auto& b : lib_.bottlenecks) bottleneck_ids.push_back(b.id);
  for (size_t i = 0; i < lib_.decisions.size(); ++i) {
    const auto& c = lib_.decisions[i];
    const origin& o = case_o_[i];
    if (!c.bottleneck.empty() && std::find(bottleneck_ids.begin(), bottleneck_ids.end(), c.bottleneck) == bottleneck_ids.end()) {
      fail(o, "bottleneck", "unknown bottleneck '" + c.bottleneck + "'" + did_you_mean(c.bottleneck, bottleneck_ids));
    }
    if (c.when) check_expression(o, "when", *c.when, scope, true, {});
    std::set<std::string> allowed;
    for (size_t k = 0; k < c.allow.size(); ++k) {
      const std::string key = "allow[" + std::to_string(k) + "].method";
      check_method_ref(o, key, c.allow[k].method);
      if (!allowed.insert(c.allow[k].method).second)
        fail(o, key, "method '" + c.allow[k].method + "' is allowed twice in this case");
    }
    for (size_t k = 0; k < c.forbid.size(); ++k) {
      const std::string key = "forbid[" + std::to_string(k) + "].method";
      check_method_ref(o, key, c.forbid[k].method);
      if (allowed.count(c.forbid[k].method))
        fail(o, key, "method '" + c.forbid[k].method + "' is both allowed and forbidden in this case");
    }
  }

  // Global vetoes.
  for (size_t i = 0; i < lib_.vetoes.size(); ++i) {
    const auto& v = lib_.vetoes[i];
    for (size_t k = 0; k < v.methods.size(); ++k) {
      check_method_ref(veto_o_[i], "methods[" + std::to_string(k) + "]", v.methods[k]);
    }
    check_expression(veto_o_[i], "when", v.when, scope, true, {});
  }

  std::stable_sort(lib_.bottlenecks.begin(), lib_.bottlenecks.end(),
                   [](const bottleneck_def& a, const bottleneck_def& b) { return a.priority > b.priority; });
}

result<skill_library> library_loader::run() {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    return ks::error{dir_.string() + ": not a directory (the skill library is a directory of *.yaml files)"};
  }
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) paths.push_back(entry.path());
  }
  if (ec) return ks::error{dir_.string() + ": " + ec.message()};
  std::sort(paths.begin(), paths.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  if (paths.empty()) return ks::error{dir_.string() + ": no *.yaml files (the skill library is empty)"};

  for (const auto& p : paths) {
    loaded_file f;
    f.source = (dir_ / p.filename()).lexically_normal().string();
    f.reader = std::make_unique<yaml_reader>(f.source);
    try {
      f.root = YAML::LoadFile(p.string());
    } catch (const YAML::ParserException& e) {
      const std::string pos = e.mark.is_null() ? "" : ":" + std::to_string(e.mark.line + 1) + ":" +
                                                          std::to_string(e.mark.column + 1);
      global_errors_.push_back(f.source + pos + ": YAML syntax error: " + e.msg);
      continue;
    } catch (const YAML::Exception& e) {
      global_errors_.push_back(f.source + ": cannot read: " + e.msg);
      continue;
    }
    lib_.files.push_back(f.source);
    files_.push_back(std::move(f));
  }
  for (size_t i = 0; i < files_.size(); ++i) read_file(i);
  if (!library_origin_ && global_errors_.empty()) {
    global_errors_.push_back(dir_.string() +
                             ": no file has a 'library' entry (exactly one file must have "
                             "`library: {name: NAME, version: N}`)");
  }
  check_all();

  std::vector<std::string> all = global_errors_;
  for (const auto& f : files_) {
    for (const auto& e : f.reader->errors()) all.push_back(e);
  }
  if (!all.empty()) {
    std::string msg;
    for (size_t i = 0; i < all.size(); ++i) msg += (i ? "\n" : "") + all[i];
    return ks::error{msg};
  }
  return std::move(lib_);
}

// ---------------------------------------------------------------------------
// Canonical JSON.

using json = nlohmann::json;

json to_json(const derived_field& d) {
  return {{"schema", "ks.skill.derived/1"}, {"id", d.id}, {"expr", d.expr.text()}, {"description", d.description}};
}

json to_json(const predicate_def& p) {
  return {{"schema", "ks.skill.predicate/1"}, {"id", p.id}, {"expr", p.expr.text()}, {"description", p.description}};
}

json to_json(const bottleneck_def& b) {
  return {{"schema", "ks.skill.bottleneck/1"}, {"id", b.id},
          {"priority", b.priority},            {"when", b.when.text()},
          {"description", b.description},      {"evidence", b.evidence}};
}

json to_json(const method_def& m) {
  json rules = json::array();
  for (const auto& r : m.rules_coder) rules.push_back({{"param", r.param}, {"op", r.op}, {"values", r.values}});
  return {{"schema", "ks.skill.method/1"},
          {"id", m.id},
          {"name", m.name},
          {"category", m.category},
          {"rationale", m.rationale},
          {"preconditions", m.preconditions},
          {"requires", m.requirement ? m.requirement->text() : ""},
          {"expected_effect", m.expected_effect},
          {"forbidden_patterns", m.forbidden_patterns},
          {"example", m.example},
          {"rules_coder", rules},
          {"sources", m.sources}};
}

json to_json(const decision_case& c) {
  json allow = json::array(), forbid = json::array();
  for (const auto& a : c.allow) allow.push_back({{"method", a.method}, {"gain", a.gain}, {"why", a.why}});
  for (const auto& f : c.forbid) forbid.push_back({{"method", f.method}, {"why", f.why}});
  json ex = {{"structure_class", c.example.structure_class},
             {"metrics", c.example.metrics},
             {"features", c.example.features}};
  json task = json::object();
  if (c.example.task_atol) task["atol"] = *c.example.task_atol;
  if (c.example.task_rtol) task["rtol"] = *c.example.task_rtol;
  if (!c.example.task_dtype.empty()) task["dtype"] = c.example.task_dtype;
  if (!task.empty()) ex["task"] = task;
  if (c.example.round) ex["round"] = *c.example.round;
  return {{"schema", "ks.skill.decision/1"},
          {"id", c.id},
          {"description", c.description},
          {"bottleneck", c.bottleneck},
          {"structure", c.structure},
          {"when", c.when ? c.when->text() : ""},
          {"allow", allow},
          {"forbid", forbid},
          {"example", ex}};
}

json to_json(const global_veto& v) {
  return {{"schema", "ks.skill.veto/1"}, {"id", v.id}, {"methods", v.methods}, {"when", v.when.text()}, {"why", v.why}};
}

json guardrails_json(const guardrail_settings& g) {
  return {{"max_failures_per_method", g.max_failures_per_method},
          {"min_gain", g.min_gain},
          {"oscillation_window", g.oscillation_window},
          {"exploration_gain", g.exploration_gain},
          {"prior_weight", g.prior_weight}};
}

template <class T>
json array_of(const std::vector<T>& v) {
  json a = json::array();
  for (const auto& x : v) a.push_back(to_json(x));
  return a;
}

}  // namespace

result<skill_library> load_skill_library(const std::filesystem::path& dir) {
  return library_loader(dir).run();
}

std::string canonical_text(const skill_library& lib) {
  // Order matters where the library's semantics depend on it (derived fields,
  // predicates in evaluation order, bottlenecks by priority); lists of methods,
  // cases and vetoes are in file order, which decides trace order.
  json j = {{"library", {{"name", lib.name}, {"version", lib.version}, {"description", lib.description}}},
            {"guardrails", guardrails_json(lib.guardrails)},
            {"derived", array_of(lib.derived)},
            {"predicates", array_of(lib.predicates)},
            {"bottlenecks", array_of(lib.bottlenecks)},
            {"methods", array_of(lib.methods)},
            {"decisions", array_of(lib.decisions)},
            {"vetoes", array_of(lib.vetoes)}};
  return j.dump();
}

std::string library_hash(const skill_library& lib) { return sha256_hex(canonical_text(lib)); }

std::vector<std::pair<std::string, std::string>> to_store_docs(const skill_library& lib) {
  std::vector<std::pair<std::string, std::string>> docs;
  json head = {{"schema", "ks.skill.library/1"},
               {"name", lib.name},
               {"version", lib.version},
               {"description", lib.description},
               {"hash", library_hash(lib)},
               {"guardrails", guardrails_json(lib.guardrails)}};
  json order = {{"derived", json::array()}, {"predicates", json::array()}, {"bottlenecks", json::array()},
                {"methods", json::array()}, {"decisions", json::array()},  {"vetoes", json::array()}};
  for (const auto& x : lib.derived) order["derived"].push_back(x.id);
  for (const auto& x : lib.predicates) order["predicates"].push_back(x.id);
  for (const auto& x : lib.bottlenecks) order["bottlenecks"].push_back(x.id);
  for (const auto& x : lib.methods) order["methods"].push_back(x.id);
  for (const auto& x : lib.decisions) order["decisions"].push_back(x.id);
  for (const auto& x : lib.vetoes) order["vetoes"].push_back(x.id);
  head["order"] = order;
  docs.emplace_back("library", head.dump());
  for (const auto& x : lib.derived) docs.emplace_back("derived/" + x.id, to_json(x).dump());
  for (const auto& x : lib.predicates) docs.emplace_back("predicate/" + x.id, to_json(x).dump());
  for (const auto& x : lib.bottlenecks) docs.emplace_back("bottleneck/" + x.id, to_json(x).dump());
  for (const auto& x : lib.methods) docs.emplace_back("method/" + x.id, to_json(x).dump());
  for (const auto& x : lib.decisions) docs.emplace_back("decision/" + x.id, to_json(x).dump());
  for (const auto& x : lib.vetoes) docs.emplace_back("veto/" + x.id, to_json(x).dump());
  std::sort(docs.begin(), docs.end());
  return docs;
}

}  // namespace ks
