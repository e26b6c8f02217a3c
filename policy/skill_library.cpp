#include "policy/skill_library.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/content_hash.hpp"
#include "policy/library_loader.hpp"

namespace ks {

std::string source_location::to_string() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

const std::vector<std::string>& method_categories() {
  static const std::vector<std::string> v = {"memory",     "compute", "latency", "occupancy", "parallelism",
                                             "divergence", "launch",  "fusion",  "precision", "algorithm"};
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
// Canonical JSON.

using json = nlohmann::json;

json to_json(const derived_field& d) {
  return {{"schema", "ks.skill.derived/1"}, {"id", d.id}, {"expr", d.expr.text()}, {"description", d.description}};
}

json to_json(const predicate_def& p) {
  return {{"schema", "ks.skill.predicate/1"}, {"id", p.id}, {"expr", p.expr.text()}, {"description", p.description}};
}

json to_json(const bottleneck_def& b) {
  return {{"schema", "ks.skill.bottleneck/1"},
          {"id", b.id},
          {"priority", b.priority},
          {"when", b.when.text()},
          {"description", b.description},
          {"evidence", b.evidence}};
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
  json ex = {
      {"structure_class", c.example.structure_class}, {"metrics", c.example.metrics}, {"features", c.example.features}};
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
  return library_load::library_loader(dir).run();
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
  json head = {{"schema", "ks.skill.library/1"}, {"name", lib.name},
               {"version", lib.version},         {"description", lib.description},
               {"hash", library_hash(lib)},      {"guardrails", guardrails_json(lib.guardrails)}};
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
