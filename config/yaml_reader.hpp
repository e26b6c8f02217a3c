#pragma once
// Schema-driven reading of a yaml-cpp tree with errors a user can act on.
//
// yaml-cpp's own conversions throw a BadConversion that names neither the key nor
// what was expected, and take quoted "15" for a number. This reader instead collects
// one message per problem, each `SOURCE:LINE:COL: key.path: expected ..., got ...`, so that a file
// with several mistakes is fixed in one pass. It is used by the config loader and
// is small enough for other YAML formats (tasks, plans) to reuse.

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/suggest.hpp"

namespace ks {

// A value together with where it sits: its key path (`budgets.rounds`,
// `gpus.remote[1]`) and its key node. The key's position stands in for the value's
// when the value is empty (yaml-cpp marks an empty value at the *next* token).
struct yaml_field {
  std::string path;
  YAML::Node key;  // undefined for list items and the document root
  YAML::Node value;

  yaml_field child(std::string_view name, YAML::Node k, YAML::Node v) const;
  yaml_field item(size_t index, YAML::Node v) const;
};

// Collects errors while walking one document. Never throws for bad input.
class yaml_reader {
 public:
  explicit yaml_reader(std::string source_name) : source_(std::move(source_name)) {}

  // One entry per recognised key of a map section.
  using handler = std::function<void(const yaml_field&)>;
  struct key_handler {
    std::string name;
    handler read;
  };

  // Reads a map: each known key calls its handler; unknown, duplicate and non-string
  // keys are errors. An empty value (`budgets:` with nothing under it) reads as an
  // empty map, so commenting out every key of a section keeps its defaults.
  // `hint(name)` may suggest where an unknown key belongs (e.g. "budgets.rounds").
  void map(const yaml_field& f, const std::vector<key_handler>& keys,
           const std::function<std::string(const std::string&)>& hint = {});

  // Leaves. Each checks the type and range and leaves `out` unchanged on error.
  // `expected` completes "expected ..." in the message, e.g. "a positive integer".
  void integer(const yaml_field& f, int& out, long long min, long long max, std::string_view expected);
  void number(const yaml_field& f, double& out, double min, bool min_inclusive, double max, bool max_inclusive,
              std::string_view expected);
  void boolean(const yaml_field& f, bool& out);
  void string(const yaml_field& f, std::string& out, bool allow_empty = true);
  void one_of(const yaml_field& f, std::string& out, const std::vector<std::string>& choices);

  // Records an error at the field (value position, or its key's when empty).
  void fail(const yaml_field& f, const std::string& message);
  // Records an error at a node's own position, without a key path.
  void fail_at(const YAML::Node& node, const std::string& message);
  // Records an error with no position.
  void fail_plain(const std::string& message);

  bool ok() const { return errors_.empty(); }
  const std::vector<std::string>& errors() const { return errors_; }
  // All errors, one per line.
  std::string message() const;
  const std::string& source() const { return source_; }

  // "SOURCE:LINE:COL: " for the field, or "SOURCE: " when no position is known.
  std::string where(const yaml_field& f) const;
  std::string where(const YAML::Node& node) const;

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

// How a node reads in a message: `"fifteen"`, `15`, `a map`, `a list`, `nothing`.
std::string describe(const YAML::Node& node);

// The 1-based "LINE:COL" of a node, or "" when yaml-cpp knows no position.
std::string line_col(const YAML::Node& node);

}  // namespace ks
