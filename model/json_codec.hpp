#pragma once
// The JSON form of the model's structs that the memory store keeps (and that reports and
// the daemon's API can reuse): nlohmann-style to_json / from_json found by ADL, so
// `nlohmann::json j = cand;` and `j.get<ks::candidate>()` work.
//
// The encoding is meant to be read by people and by other tools:
// - every field of the struct's field list (model/fields.hpp) is written, under its
//   C++ name;
// - review_status travels as its to_string() name ("compile_error"), not a number;
// - doubles that JSON cannot hold travel as the strings "NaN", "Infinity" and
//   "-Infinity" (nlohmann would otherwise write null and lose the value);
// - shared_bytes (task_spec::module_bytes, a binary TorchScript archive) travels as
//   base64.
//
// Reading is lenient about what is absent and strict about what is present: a missing
// field keeps its default, so values written before a field existed still read; a
// field of the wrong type, an unknown status name or bad base64 is an error whose
// message names the field by its path, e.g.
//   plan.steps[1].grid[0]: expected a string, got number
// Unknown fields (such as the "schema" the store adds) are ignored.

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "model/candidate.hpp"
#include "model/decision.hpp"
#include "model/experience.hpp"
#include "model/launch_plan.hpp"
#include "model/review.hpp"
#include "model/task.hpp"
#include "model/trajectory.hpp"

namespace ks {

// Thrown by the from_json overloads below; decode_json() turns it into an error.
class json_decode_error : public std::runtime_error {
 public:
  json_decode_error(std::string path, std::string problem);
  const std::string& path() const { return path_; }        // "plan.steps[1].grid[0]"
  const std::string& problem() const { return problem_; }  // "expected a string, got number"
  // The same problem seen from one level up: "steps" + "[1].grid[0]".
  json_decode_error within(const std::string& parent) const;

 private:
  std::string path_;
  std::string problem_;
};

// The structs with a JSON form, once: json_codec.cpp defines a codec for each.
#define KS_JSON_TYPES(X)  \
  X(distribution_spec)    \
  X(tensor_spec)          \
  X(tolerance_spec)       \
  X(kernelbench_argument) \
  X(kernelbench_spec)     \
  X(task_spec)            \
  X(plan_arg)             \
  X(plan_step)            \
  X(buffer_spec)          \
  X(launch_plan)          \
  X(candidate)            \
  X(review_options)       \
  X(compile_diagnostic)   \
  X(kernel_resources)     \
  X(timing_stats)         \
  X(profile_metrics)      \
  X(review_phases)        \
  X(review_result)        \
  X(code_features)        \
  X(method_choice)        \
  X(method_veto)          \
  X(optimization_plan)    \
  X(repair_plan)          \
  X(trajectory_entry)     \
  X(experience_record)    \
  X(method_stats)

#define KS_JSON_CODEC_DECL(T)                  \
  void to_json(nlohmann::json& j, const T& x); \
  void from_json(const nlohmann::json& j, T& x);
KS_JSON_TYPES(KS_JSON_CODEC_DECL)
#undef KS_JSON_CODEC_DECL

// A double as JSON: a number, or the string "NaN", "Infinity" or "-Infinity" where JSON
// has no number for it (every JSON the project writes that can hold a float uses this).
nlohmann::json double_to_json(double v);
// The reverse: a number, or one of those three strings; anything else throws
// json_decode_error ("expected a number (or \"NaN\", …), got …").
double double_from_json(const nlohmann::json& j);

// review_status by its to_string() name. Unknown names are an error listing the
// known ones.
result<review_status> parse_review_status(std::string_view name);

// Decodes `j` as a T. Errors read "<what>: <field path>: <problem>".
template <class T>
result<T> decode_json(const nlohmann::json& j, std::string_view what) {
  try {
    T x{};
    from_json(j, x);
    return x;
  } catch (const json_decode_error& e) {
    return error{std::string(what) + ": " + e.what()};
  } catch (const nlohmann::json::exception& e) {
    return error{std::string(what) + ": " + e.what()};
  }
}

// Parses JSON text. Errors read "<what>: not valid JSON: <parser message>".
result<nlohmann::json> parse_json(std::string_view text, std::string_view what);

// Compact JSON with object keys sorted (nlohmann keeps them sorted), so equal values
// give equal bytes: the form the store writes and content hashes are taken of.
// Strings that are not valid UTF-8 have the bad bytes replaced by U+FFFD instead of
// failing: a compiler log with stray bytes must not make a review unstorable.
std::string dump_json(const nlohmann::json& j);

// Base64 (RFC 4648, standard alphabet, '=' padding).
std::string base64_encode(std::string_view bytes);
// Strict: rejects characters outside the alphabet, bad padding and a length that is
// not a multiple of 4, naming the offending position.
result<std::string> base64_decode(std::string_view text);

}  // namespace ks
