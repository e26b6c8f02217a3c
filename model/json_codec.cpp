#include "model/json_codec.hpp"

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

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class T>
struct is_string_map<std::map<std::string, T>> : std::true_type {};

std::string kind_of(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();  // null, object, array, string, boolean
}

[[noreturn]] void expected(const std::string& what, const json& j) {
  throw json_decode_error("", "expected " + what + ", got " + kind_of(j));
}

// review_status by its to_string() name, not its number.
json enc(const review_status& s) { return to_string(s); }

void dec(const json& j, review_status& out) {
  if (!j.is_string()) expected("a string", j);
  auto st = parse_review_status(j.get_ref<const std::string&>());
  if (!st) throw json_decode_error("", st.message());
  out = *st;
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
  } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool> || std::is_integral_v<T>) {
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
      if (s == "NaN")
        out = std::numeric_limits<double>::quiet_NaN();
      else if (s == "Infinity")
        out = std::numeric_limits<double>::infinity();
      else if (s == "-Infinity")
        out = -std::numeric_limits<double>::infinity();
      else
        throw json_decode_error("",
                                "expected a number (or \"NaN\", \"Infinity\", "
                                "\"-Infinity\"), got the string \"" +
                                    s + "\"");
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
void read_field(const json& j, const char* name, T& out) {
  auto it = j.find(name);
  if (it == j.end()) return;
  try {
    dec(*it, out);
  } catch (const json_decode_error& e) {
    throw e.within(name);
  }
}

// Every field of a field list, under its name; bytes as base64.
template <class T>
void encode_fields(json& j, const T& x) {
  j = json::object();
  visit_fields(const_cast<T&>(x), [&j](const char*, auto... fields) {
    auto one = [&j](auto& f) {
      if constexpr (std::is_same_v<std::decay_t<decltype(f.value)>, shared_bytes>)
        j[f.name] = base64_encode(f.value.view());
      else
        j[f.name] = enc(f.value);
    };
    (one(fields), ...);
  });
}

template <class T>
void decode_fields(const json& j, T& x) {
  require_object(j);
  visit_fields(x, [&j](const char*, auto... fields) {
    auto one = [&j](auto& f) {
      if constexpr (std::is_same_v<std::decay_t<decltype(f.value)>, shared_bytes>) {
        std::string b64;
        read_field(j, f.name, b64);
        auto bytes = base64_decode(b64);
        if (!bytes) throw json_decode_error(f.name, bytes.message());
        f.value = std::move(*bytes);
      } else {
        read_field(j, f.name, f.value);
      }
    };
    (one(fields), ...);
  });
}

}  // namespace

json double_to_json(double v) { return encode_double(v); }

double double_from_json(const json& j) {
  double v = 0;
  dec(j, v);
  return v;
}

result<review_status> parse_review_status(std::string_view name) {
  static const review_status all[] = {
      review_status::ok,      review_status::compile_error, review_status::plan_error,    review_status::incorrect,
      review_status::crashed, review_status::timed_out,     review_status::internal_error};
  std::string known;
  for (auto s : all) {
    if (name == to_string(s)) return s;
    if (!known.empty()) known += ", ";
    known += to_string(s);
  }
  return error{"unknown review status \"" + std::string(name) + "\" (known: " + known + ")"};
}

// ---- the structs ------------------------------------------------------------
// Each struct's fields come from its one field list (model/fields.hpp); the round-trip
// tests set every field to a non-default value, so a field missing from a list fails
// them.

#define KS_JSON_CODEC(T)                                     \
  void to_json(json& j, const T& x) { encode_fields(j, x); } \
  void from_json(const json& j, T& x) { decode_fields(j, x); }
KS_JSON_TYPES(KS_JSON_CODEC)
#undef KS_JSON_CODEC

// ---- text -------------------------------------------------------------------

result<json> parse_json(std::string_view text, std::string_view what) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return error{std::string(what) + ": not valid JSON: " + e.what()};
  }
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {
constexpr char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

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
    uint32_t v =
        (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint32_t(uint8_t(bytes[i + 2]));
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
    return error{"base64 text of length " + std::to_string(text.size()) + " is not a multiple of 4 (truncated?)"};
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
        return error{"invalid base64 character '" + std::string(1, c) + "' at position " + std::to_string(i + k)};
      }
    }
    uint32_t n = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    out += char((n >> 16) & 0xff);
    if (pad < 2) out += char((n >> 8) & 0xff);
    if (pad < 1) out += char(n & 0xff);
  }
  return out;
}

}  // namespace ks
