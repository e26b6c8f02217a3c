#include "memory/json_codec.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

namespace ks {

using json = nlohmann::json;

json_decode_error::json_decode_error(std::string path, std::string problem)
    : std::runtime_error(path.empty() ? problem : path + ": " + problem),
      path_(std::move(path)),
      problem_(std::move(problem)) {}

json_decode_error json_decode_error::within(const std::string& parent) const {
  std::string p = parent;
  if (!path_.empty()) {
    if (path_.front() != '[') p += '.';
    p += path_;
  }
  return json_decode_error(std::move(p), problem_);
}

namespace {

template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};
template <class T> struct is_string_map : std::false_type {};
template <class T> struct is_string_map<std::map<std::string, T>> : std::true_type {};

std::string kind_of(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();  // null, object, array, string, boolean
}

[[noreturn]] void expected(const std::string& what, const json& j) {
  throw json_decode_error("", "expected " + what + ", got " + kind_of(j));
}

// ---- encoding ------------------------------------------------------------

json encode_double(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

template <class T>
json enc(const T& x) {
  if constexpr (std::is_same_v<T, double>) {
    return encode_double(x);
  } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool> ||
                       std::is_integral_v<T>) {
    return json(x);
  } else if constexpr (is_vector<T>::value) {
    json a = json::array();
    for (const auto& e : x) a.push_back(enc(e));
    return a;
  } else if constexpr (is_string_map<T>::value) {
    json o = json::object();
    for (const auto& [k, v] : x) o[k] = enc(v);
    return o;
  } else {
    json j;
    to_json(j, x);
    return j;
  }
}

// ---- decoding ------------------------------------------------------------

template <class T>
void dec(const json& j, T& out) {
  if constexpr (std::is_same_v<T, double>) {
    if (j.is_number()) {
      out = j.get<double>();
    } else if (j.is_string()) {
      const auto& s = j.get_ref<const std::string&>();
      if (s == "NaN") out = std::numeric_limits<double>::quiet_NaN();
      else if (s == "Infinity") out = std::numeric_limits<double>::infinity();
      else if (s == "-Infinity") out = -std::numeric_limits<double>::infinity();
      else throw json_decode_error("", "expected a number (or \"NaN\", \"Infinity\", "
                                       "\"-Infinity\"), got the string \"" + s + "\"");
    } else {
      expected("a number", j);
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) expected("a string", j);
    out = j.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) expected("true or false", j);
    out = j.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) expected("an integer", j);
    if (j.is_number_unsigned()) {
      auto v = j.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        throw json_decode_error("", "integer " + std::to_string(v) + " is out of range (at most " +
                                        std::to_string(std::numeric_limits<T>::max()) + ")");
      }
      out = static_cast<T>(v);
    } else {
      auto v = j.get<int64_t>();
      if constexpr (std::is_unsigned_v<T>) {
        if (v < 0) {
          throw json_decode_error("", "expected a non-negative integer, got " + std::to_string(v));
        }
        if (static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
          throw json_decode_error("", "integer " + std::to_string(v) + " is out of range");
        }
      } else {
        if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            v > static_cast<int64_t>(std::numeric_limits<T>::max())) {
          throw json_decode_error("", "integer " + std::to_string(v) + " is out of range");
        }
      }
      out = static_cast<T>(v);
    }
  } else if constexpr (is_vector<T>::value) {
    if (!j.is_array()) expected("a list", j);
    out.clear();
    out.resize(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      try {
        dec(j[i], out[i]);
      } catch (const json_decode_error& e) {
        throw e.within("[" + std::to_string(i) + "]");
      }
    }
  } else if constexpr (is_string_map<T>::value) {
    if (!j.is_object()) expected("an object", j);
    out.clear();
    for (auto it = j.begin(); it != j.end(); ++it) {
      try {
        dec(it.value(), out[it.key()]);
      } catch (const json_decode_error& e) {
        throw e.within(it.key());
      }
    }
  } else {
    from_json(j, out);
  }
}

void require_object(const json& j) {
  if (!j.is_object()) expected("an object", j);
}

// Reads j[name] into out when present; a missing field keeps out's default.
template <class T>
void field(const json& j, const char* name, T& out) {
  auto it = j.find(name);
  if (it == j.end()) return;
  try {
    dec(*it, out);
  } catch (const json_decode_error& e) {
    throw e.within(name);
  }
}

void status_field(const json& j, const char* name, review_status& out) {
  std::string s;
  field(j, name, s);
  if (!j.contains(name)) return;
  auto st = parse_review_status(s);
  if (!st) throw json_decode_error(name, st.message());
  out = *st;
}

}  // namespace

result<review_status> parse_review_status(std::string_view name) {
  static const review_status all[] = {
      review_status::ok,      review_status::compile_error, review_status::plan_error,
      review_status::incorrect, review_status::crashed,     review_status::timed_out,
      review_status::internal_error};
  std::string known;
  for (auto s : all) {
    if (name == to_string(s)) return s;
    if (!known.empty()) known += ", ";
    known += to_string(s);
  }
  return error{"unknown review status \"" + std::string(name) + "\" (known: " + known + ")"};
}

// ---- the structs ------------------------------------------------------------
// Each pair lists every field once for writing and once for reading; the round-trip
// tests set every field to a non-default value, so a field missed here fails them.

#define W(f) j[#f] = enc(x.f)
#define R(f) field(j, #f, x.f)

void to_json(json& j, const distribution_spec& x) {
  j = json::object();
  W(kind); W(mean); W(std); W(low); W(high); W(value);
}
void from_json(const json& j, distribution_spec& x) {
  require_object(j);
  R(kind); R(mean); R(std); R(low); R(high); R(value);
}

void to_json(json& j, const tensor_spec& x) {
  j = json::object();
  W(name); W(shape); W(dtype); W(init);
}
void from_json(const json& j, tensor_spec& x) {
  require_object(j);
  R(name); R(shape); R(dtype); R(init);
}

void to_json(json& j, const tolerance_spec& x) {
  j = json::object();
  W(atol); W(rtol);
}
void from_json(const json& j, tolerance_spec& x) {
  require_object(j);
  R(atol); R(rtol);
}

void to_json(json& j, const task_spec& x) {
  j = json::object();
  W(name); W(description); W(torchscript);
  j["module_bytes"] = base64_encode(x.module_bytes);
  W(module_path); W(inputs); W(parameters); W(tolerance); W(seed); W(sizes);
}
void from_json(const json& j, task_spec& x) {
  require_object(j);
  R(name); R(description); R(torchscript);
  std::string b64;
  field(j, "module_bytes", b64);
  auto bytes = base64_decode(b64);
  if (!bytes) throw json_decode_error("module_bytes", bytes.message());
  x.module_bytes = std::move(*bytes);
  R(module_path); R(inputs); R(parameters); R(tolerance); R(seed); R(sizes);
}

void to_json(json& j, const plan_arg& x) {
  j = json::object();
  W(kind); W(value); W(type);
}
void from_json(const json& j, plan_arg& x) {
  require_object(j);
  R(kind); R(value); R(type);
}

void to_json(json& j, const plan_step& x) {
  j = json::object();
  W(kind); W(name); W(grid); W(block); W(shared_mem); W(args); W(outputs); W(attrs);
}
void from_json(const json& j, plan_step& x) {
  require_object(j);
  R(kind); R(name); R(grid); R(block); R(shared_mem); R(args); R(outputs); R(attrs);
}

void to_json(json& j, const buffer_spec& x) {
  j = json::object();
  W(name); W(shape); W(dtype); W(init);
}
void from_json(const json& j, buffer_spec& x) {
  require_object(j);
  R(name); R(shape); R(dtype); R(init);
}

void to_json(json& j, const launch_plan& x) {
  j = json::object();
  W(constants); W(scratch); W(outputs); W(steps);
}
void from_json(const json& j, launch_plan& x) {
  require_object(j);
  R(constants); R(scratch); R(outputs); R(steps);
}

void to_json(json& j, const candidate& x) {
  j = json::object();
  W(id); W(task); W(source); W(compile_options); W(plan); W(origin); W(parent_id);
  W(round); W(recipe);
}
void from_json(const json& j, candidate& x) {
  require_object(j);
  R(id); R(task); R(source); R(compile_options); R(plan); R(origin); R(parent_id);
  R(round); R(recipe);
}

void to_json(json& j, const review_options& x) {
  j = json::object();
  W(trials); W(profile); W(time); W(timeout_s); W(suspicious_speedup); W(size);
}
void from_json(const json& j, review_options& x) {
  require_object(j);
  R(trials); R(profile); R(time); R(timeout_s); R(suspicious_speedup); R(size);
}

void to_json(json& j, const compile_diagnostic& x) {
  j = json::object();
  W(line); W(column); W(severity); W(message);
}
void from_json(const json& j, compile_diagnostic& x) {
  require_object(j);
  R(line); R(column); R(severity); R(message);
}

void to_json(json& j, const kernel_resources& x) {
  j = json::object();
  W(kernel); W(registers); W(static_shared_bytes); W(local_bytes);
  W(max_threads_per_block);
}
void from_json(const json& j, kernel_resources& x) {
  require_object(j);
  R(kernel); R(registers); R(static_shared_bytes); R(local_bytes);
  R(max_threads_per_block);
}

void to_json(json& j, const timing_stats& x) {
  j = json::object();
  W(median_ms); W(mean_ms); W(min_ms); W(max_ms); W(stddev_ms); W(repetitions);
}
void from_json(const json& j, timing_stats& x) {
  require_object(j);
  R(median_ms); R(mean_ms); R(min_ms); R(max_ms); R(stddev_ms); R(repetitions);
}

void to_json(json& j, const profile_metrics& x) {
  j = json::object();
  W(values); W(kernel_launches); W(duration_ms);
}
void from_json(const json& j, profile_metrics& x) {
  require_object(j);
  R(values); R(kernel_launches); R(duration_ms);
}

void to_json(json& j, const review_result& x) {
  j = json::object();
  W(request_id); W(candidate_id);
  j["status"] = to_string(x.status);
  W(message); W(diagnostics); W(compile_log); W(trials_run); W(trials_passed);
  W(max_abs_error); W(max_rel_error); W(candidate_time); W(reference_time); W(speedup);
  W(profile); W(resources); W(flags); W(device);
}
void from_json(const json& j, review_result& x) {
  require_object(j);
  R(request_id); R(candidate_id);
  status_field(j, "status", x.status);
  R(message); R(diagnostics); R(compile_log); R(trials_run); R(trials_passed);
  R(max_abs_error); R(max_rel_error); R(candidate_time); R(reference_time); R(speedup);
  R(profile); R(resources); R(flags); R(device);
}

void to_json(json& j, const code_features& x) {
  j = json::object();
  W(candidate_id); W(structure_class); W(values);
}
void from_json(const json& j, code_features& x) {
  require_object(j);
  R(candidate_id); R(structure_class); R(values);
}

void to_json(json& j, const method_choice& x) {
  j = json::object();
  W(method); W(score); W(fired_rules); W(evidence);
}
void from_json(const json& j, method_choice& x) {
  require_object(j);
  R(method); R(score); R(fired_rules); R(evidence);
}

void to_json(json& j, const method_veto& x) {
  j = json::object();
  W(method); W(reason);
}
void from_json(const json& j, method_veto& x) {
  require_object(j);
  R(method); R(reason);
}

void to_json(json& j, const optimization_plan& x) {
  j = json::object();
  W(candidate_id); W(bottleneck_class); W(ranked); W(vetoed); W(chosen); W(rationale);
}
void from_json(const json& j, optimization_plan& x) {
  require_object(j);
  R(candidate_id); R(bottleneck_class); R(ranked); R(vetoed); R(chosen); R(rationale);
}

void to_json(json& j, const repair_plan& x) {
  j = json::object();
  W(candidate_id); W(diagnosis); W(actions);
}
void from_json(const json& j, repair_plan& x) {
  require_object(j);
  R(candidate_id); R(diagnosis); R(actions);
}

void to_json(json& j, const trajectory_entry& x) {
  j = json::object();
  W(task); W(seq); W(unix_ms); W(round); W(kind); W(candidate_id); W(parent_id);
  W(method);
  j["status"] = to_string(x.status);
  W(speedup); W(summary); W(metrics);
}
void from_json(const json& j, trajectory_entry& x) {
  require_object(j);
  R(task); R(seq); R(unix_ms); R(round); R(kind); R(candidate_id); R(parent_id);
  R(method);
  status_field(j, "status", x.status);
  R(speedup); R(summary); R(metrics);
}

void to_json(json& j, const experience_record& x) {
  j = json::object();
  W(method); W(bottleneck_class); W(structure_class); W(task); W(skill_library_version);
  W(speedup_before); W(speedup_after); W(correct); W(metric_delta); W(unix_ms);
}
void from_json(const json& j, experience_record& x) {
  require_object(j);
  R(method); R(bottleneck_class); R(structure_class); R(task); R(skill_library_version);
  R(speedup_before); R(speedup_after); R(correct); R(metric_delta); R(unix_ms);
}

void to_json(json& j, const method_stats& x) {
  j = json::object();
  W(method); W(bottleneck_class); W(applied); W(correct); W(improved); W(mean_gain);
  W(best_gain);
}
void from_json(const json& j, method_stats& x) {
  require_object(j);
  R(method); R(bottleneck_class); R(applied); R(correct); R(improved); R(mean_gain);
  R(best_gain);
}

#undef W
#undef R

// ---- text -------------------------------------------------------------------

result<json> parse_json(std::string_view text, std::string_view what) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return error{std::string(what) + ": not valid JSON: " + e.what()};
  }
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {
constexpr char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) |
                 uint32_t(uint8_t(bytes[i + 2]));
    out += b64_alphabet[(v >> 18) & 63];
    out += b64_alphabet[(v >> 12) & 63];
    out += b64_alphabet[(v >> 6) & 63];
    out += b64_alphabet[v & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest == 1) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    out += b64_alphabet[(v >> 18) & 63];
    out += b64_alphabet[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8);
    out += b64_alphabet[(v >> 18) & 63];
    out += b64_alphabet[(v >> 12) & 63];
    out += b64_alphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return error{"base64 text of length " + std::to_string(text.size()) +
                 " is not a multiple of 4 (truncated?)"};
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0 || (v[k] = b64_value(c)) < 0) {
        return error{"invalid base64 character '" + std::string(1, c) + "' at position " +
                     std::to_string(i + k)};
      }
    }
    uint32_t n = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) |
                 uint32_t(v[3]);
    out += char((n >> 16) & 0xff);
    if (pad < 2) out += char((n >> 8) & 0xff);
    if (pad < 1) out += char(n & 0xff);
  }
  return out;
}

}  // namespace ks
