// `kernelskill skills …`: the long-term memory as a person audits it.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "base/suggest.hpp"
#include "cli/commands.hpp"
#include "model/json_codec.hpp"
#include "policy/decision_policy.hpp"
#include "policy/skill_library.hpp"
#include "store/store.hpp"

namespace ks::cli {

namespace {

result<skill_library> load_or_report(const std::string& dir) {
  auto lib = load_skill_library(dir);
  if (!lib) std::cerr << lib.message() << "\n";
  return lib;
}

void print_list(const char* title, const std::vector<std::string>& items) {
  if (items.empty()) return;
  std::printf("%s:\n", title);
  for (auto& i : items) std::printf("  - %s\n", i.c_str());
}

// A name → number object; numbers JSON cannot hold come as "NaN" / "Infinity" /
// "-Infinity" (model/json_codec.hpp).
std::map<std::string, double> number_map(const nlohmann::json& j) {
  if (!j.is_object()) throw json_decode_error("", std::string("expected an object, got ") + j.type_name());
  std::map<std::string, double> out;
  for (auto& [name, v] : j.items()) {
    try {
      out[name] = double_from_json(v);
    } catch (const json_decode_error& e) {
      throw e.within(name);
    }
  }
  return out;
}

// Reads the evidence file of `skills explain`: the shape of a decision case's
// example ({structure_class, metrics, features, task: {atol, rtol, dtype}, round}).
result<policy_input> read_evidence(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ks::error{path + ": cannot read the evidence file"};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    return ks::error{path + ": not valid JSON: " + e.what()};
  }
  if (!j.is_object()) return ks::error{path + ": expected a JSON object"};
  static const std::set<std::string> keys = {"structure_class", "metrics",  "features", "task",
                                             "round",           "template", "methods"};
  policy_input p;
  for (auto& [k, v] : j.items()) {
    if (!keys.count(k))
      return ks::error{path + ": unknown key '" + k +
                       "' (expected structure_class, metrics, features, task, round, template, methods)"};
    try {
      if (k == "structure_class") p.features.structure_class = v.get<std::string>();
      if (k == "metrics") p.profile.values = number_map(v);
      if (k == "features") p.features.values = number_map(v);
      if (k == "round") p.round = v.get<uint32_t>();
      if (k == "template") p.template_name = v.get<std::string>();
      if (k == "methods") p.coder_methods = v.get<std::vector<std::string>>();
      if (k == "task") {
        if (v.contains("atol")) p.atol = double_from_json(v.at("atol"));
        if (v.contains("rtol")) p.rtol = double_from_json(v.at("rtol"));
        if (v.contains("dtype")) p.dtype = v.at("dtype").get<std::string>();
      }
    } catch (const nlohmann::json::exception& e) {
      return ks::error{path + ": " + k + ": " + e.what()};
    } catch (const json_decode_error& e) {
      return ks::error{path + ": " + k + ": " + e.what()};
    }
  }
  return p;
}

}  // namespace

int skills_list(const std::string& dir) {
  auto lib = load_or_report(dir);
  if (!lib) return 1;
  std::printf("%s v%d: %zu methods, %zu bottleneck classes, %zu decision cases, %zu vetoes\n\n", lib->name.c_str(),
              lib->version, lib->methods.size(), lib->bottlenecks.size(), lib->decisions.size(), lib->vetoes.size());
  std::printf("%-34s %-12s %s\n", "METHOD", "CATEGORY", "NAME");
  for (auto& m : lib->methods) std::printf("%-34s %-12s %s\n", m.id.c_str(), m.category.c_str(), m.name.c_str());
  std::printf("\n%-28s %-8s %s\n", "BOTTLENECK", "PRIORITY", "WHEN");
  for (auto& b : lib->bottlenecks) std::printf("%-28s %-8d %s\n", b.id.c_str(), b.priority, b.when.text().c_str());
  return 0;
}

int skills_show(const std::string& dir, const std::string& method) {
  auto lib = load_or_report(dir);
  if (!lib) return 1;
  const method_def* m = lib->find_method(method);
  if (!m) {
    std::vector<std::string> ids;
    for (auto& x : lib->methods) ids.push_back(x.id);
    std::cerr << "kernelskill: no method '" << method << "' in " << dir;
    if (auto near = closest(method, ids); !near.empty()) std::cerr << " (did you mean '" << near << "'?)";
    std::cerr << "; `kernelskill skills list` shows them all\n";
    return 1;
  }
  std::printf("%s — %s [%s]\n  defined at %s\n\n%s\n\n", m->id.c_str(), m->name.c_str(), m->category.c_str(),
              m->where.to_string().c_str(), m->rationale.c_str());
  print_list("Preconditions", m->preconditions);
  if (m->requirement) std::printf("Requires (checked): %s\n", m->requirement->text().c_str());
  if (!m->expected_effect.empty()) {
    std::printf("Expected effect:\n");
    for (auto& [metric, dir_] : m->expected_effect) std::printf("  %s: %s\n", metric.c_str(), dir_.c_str());
  }
  print_list("Forbidden patterns", m->forbidden_patterns);
  for (auto& r : m->rules_coder) {
    std::string values;
    for (auto& v : r.values) values += (values.empty() ? "" : ", ") + v;
    std::printf("Rules coder: %s %s [%s]\n", r.op.c_str(), r.param.c_str(), values.c_str());
  }
  std::vector<std::string> allowed_by, forbidden_by, vetoed_by;
  for (auto& c : lib->decisions) {
    for (auto& a : c.allow)
      if (a.method == m->id) allowed_by.push_back(c.id + " (gain " + std::to_string(a.gain).substr(0, 4) + ")");
    for (auto& f : c.forbid)
      if (f.method == m->id) forbidden_by.push_back(c.id + ": " + f.why);
  }
  for (auto& v : lib->vetoes)
    for (auto& vm : v.methods)
      if (vm == m->id) vetoed_by.push_back(v.id + " when " + v.when.text() + ": " + v.why);
  print_list("Allowed by cases", allowed_by);
  print_list("Forbidden by cases", forbidden_by);
  print_list("Global vetoes", vetoed_by);
  print_list("Sources", m->sources);
  if (!m->example.empty()) std::printf("\nExample:\n%s\n", m->example.c_str());
  return 0;
}

int skills_check(const std::string& dir) {
  auto lib = load_or_report(dir);
  if (!lib) return 1;
  // Beyond the schema: every case must fire on its own example, or the table has a
  // case that can never be reached.
  int unreachable = 0;
  for (auto& c : lib->decisions) {
    auto trace = decide(*lib, make_policy_input(c.example));
    bool fired = false;
    for (auto& f : trace.cases_fired) fired = fired || f.id == c.id;
    if (!fired) {
      ++unreachable;
      std::string why = "primary class " + (trace.primary.empty() ? std::string("none") : trace.primary);
      for (auto& n : trace.cases_not_fired)
        if (n.id == c.id) why = n.reason;
      std::cerr << c.where.to_string() << ": decisions (" << c.id
                << "): the case does not fire on its own example: " << why << "\n";
    }
  }
  std::printf("%s: %s v%d, %zu methods, %zu bottleneck classes, %zu decision cases, %zu vetoes, hash %s\n", dir.c_str(),
              lib->name.c_str(), lib->version, lib->methods.size(), lib->bottlenecks.size(), lib->decisions.size(),
              lib->vetoes.size(), library_hash(*lib).substr(0, 16).c_str());
  return unreachable == 0 ? 0 : 1;
}

int skills_explain(const std::string& dir, const std::string& evidence_path, const std::string& memory_path) {
  auto lib = load_or_report(dir);
  if (!lib) return 1;
  auto in = read_evidence(evidence_path);
  if (!in) {
    std::cerr << in.message() << "\n";
    return 1;
  }
  if (!memory_path.empty()) {
    auto db = open_store_for_reading(memory_path);
    if (!db) {
      std::cerr << db.message() << "\n";
      return 1;
    }
    std::optional<std::string> templ;
    if (!in->template_name.empty()) templ = in->template_name;
    auto stats = (*db)->experience_stats(primary_bottleneck(*lib, *in), templ);
    if (!stats) {
      std::cerr << stats.message() << "\n";
      return 1;
    }
    for (auto& s : *stats) in->experience[s.method] = {s.applied, s.realized_gain};
  }
  std::cout << render_trace(decide(*lib, *in));
  return 0;
}

int skills_install(const std::string& dir, const std::string& memory_path) {
  auto lib = load_or_report(dir);
  if (!lib) return 1;
  auto db = store::open(memory_path);
  if (!db) {
    std::cerr << db.message() << "\n";
    return 1;
  }
  auto before = (*db)->installed_skill_library();
  auto s = (*db)->install_skill_library(static_cast<uint32_t>(lib->version), library_hash(*lib), to_store_docs(*lib));
  if (!s) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  std::printf("%s: skill library %s v%d installed (was v%u)\n", memory_path.c_str(), lib->name.c_str(), lib->version,
              before ? before->version : 0u);
  return 0;
}

int skills_stats(const std::string& memory_path, const std::string& bottleneck) {
  auto db = open_store_for_reading(memory_path);
  if (!db) {
    std::cerr << db.message() << "\n";
    return 1;
  }
  auto stats = (*db)->experience_stats(bottleneck);
  if (!stats) {
    std::cerr << stats.message() << "\n";
    return 1;
  }
  if (stats->empty()) {
    std::printf("no experience recorded in %s yet%s\n", memory_path.c_str(),
                bottleneck.empty() ? "" : (" for " + bottleneck).c_str());
    return 0;
  }
  std::printf("%-30s %-24s %7s %7s %8s %9s %9s %9s\n", "METHOD", "BOTTLENECK", "APPLIED", "CORRECT", "IMPROVED",
              "MEAN GAIN", "BEST GAIN", "REALIZED");
  for (auto& s : *stats)
    std::printf("%-30s %-24s %7u %7u %8u %8.3fx %8.3fx %8.3fx\n", s.method.c_str(), s.bottleneck_class.c_str(),
                s.applied, s.correct, s.improved, s.mean_gain, s.best_gain, s.realized_gain);
  return 0;
}

}  // namespace ks::cli
