#pragma once
// The skill library's loader, inside policy/ only: phase 1 reads each file on its
// own (structure, types, enums, syntax: library_read.cpp), phase 2 checks across
// files (ids, references, expression names and types: library_check.cpp).
// load_skill_library() (skill_library.hpp) is its one public entry.

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/result.hpp"
#include "config/yaml_reader.hpp"
#include "policy/evidence_names.hpp"
#include "policy/policy_expr.hpp"
#include "policy/skill_library.hpp"

namespace ks::library_load {

namespace fs = std::filesystem;

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

source_location location_of(const std::string& file, const yaml_field& f);
bool is_identifier(const std::string& s);
// " (did you mean 'X'?)", or "" when no candidate is near.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

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
  void read_number_map(const yaml_field& f, std::map<std::string, double>& out, evidence_kind kind);

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

}  // namespace ks::library_load
