#include "daemon/api_client.hpp"

#include <limits>

#include <cctype>
#include <cstdlib>
#include <type_traits>

#include <httplib.h>

namespace ks {

using json = nlohmann::json;

namespace {

// Ids and names are [A-Za-z0-9_.-] on the server side; anything else a user types is
// escaped so that it reaches the server as one path segment (and gets its 404) instead
// of walking to another endpoint.
std::string path_segment(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  // "." and ".." would be resolved away by URL normalisation somewhere on the way.
  bool dots_only = !s.empty() && s.find_first_not_of('.') == std::string::npos;
  std::string out;
  for (unsigned char c : s) {
    if (!dots_only && (std::isalnum(c) || c == '_' || c == '.' || c == '-')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  auto s = ms.count() / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// The daemon writes doubles JSON has no number for as these strings (model/json_codec.hpp;
// this client library links no model code, so it reads them itself).
bool non_finite_text(const json& j) {
  if (!j.is_string()) return false;
  const std::string& t = j.get_ref<const std::string&>();
  return t == "NaN" || t == "Infinity" || t == "-Infinity";
}

// Reads j[key] into out when present and not null; a value of another type is an error
// naming the key.
template <class T>
bool read_field(const json& j, const char* key, T& out, std::string& err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  bool type_ok;
  if constexpr (std::is_same_v<T, std::string>)
    type_ok = it->is_string();
  else if constexpr (std::is_same_v<T, bool>)
    type_ok = it->is_boolean();
  else if constexpr (std::is_floating_point_v<T>)
    type_ok = it->is_number() || non_finite_text(*it);
  else if constexpr (std::is_unsigned_v<T>)
    type_ok = it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0);
  else
    type_ok = it->is_number_integer();
  if (!type_ok) {
    err = std::string("field \"") + key + "\": unexpected " + it->type_name() + " " + it->dump();
    return false;
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (it->is_string()) {
      const std::string& t = it->get_ref<const std::string&>();
      out = t == "NaN" ? std::numeric_limits<T>::quiet_NaN()
                       : (t == "Infinity" ? 1 : -1) * std::numeric_limits<T>::infinity();
      return true;
    }
  }
  out = it->get<T>();
  return true;
}

api_error bad_response(const std::string& what) {
  return api_error{
      200, "bad_response",
      "the daemon's answer is not what the API promises (" + what + "); is the client the same version as the daemon?"};
}

result<api_round> decode_round(const json& j) {
  if (!j.is_object()) return error{"a history entry is not an object"};
  api_round r;
  std::string err;
  if (!read_field(j, "round", r.round, err) || !read_field(j, "best_speedup", r.best_speedup, err) ||
      !read_field(j, "reviews", r.reviews, err) || !read_field(j, "unix_ms", r.unix_ms, err))
    return error{"history: " + err};
  return r;
}

result<api_trajectory_entry> decode_entry(const json& j) {
  if (!j.is_object()) return error{"a trajectory entry is not an object"};
  api_trajectory_entry e;
  std::string err;
  if (!read_field(j, "seq", e.seq, err) || !read_field(j, "unix_ms", e.unix_ms, err) ||
      !read_field(j, "round", e.round, err) || !read_field(j, "kind", e.kind, err) ||
      !read_field(j, "candidate_id", e.candidate_id, err) || !read_field(j, "parent_id", e.parent_id, err) ||
      !read_field(j, "method", e.method, err) || !read_field(j, "status", e.status, err) ||
      !read_field(j, "summary", e.summary, err) || !read_field(j, "speedup", e.speedup, err))
    return error{"trajectory entry: " + err};
  e.raw = j;
  return e;
}

// A plan or source may come as text or, from a server that keeps them structured, as
// JSON; either way the user gets text.
std::string text_of(const json& j) {
  if (j.is_null()) return {};
  if (j.is_string()) return j.get<std::string>();
  return j.dump(2);
}

}  // namespace

bool api_task::ended() const { return state == "done" || state == "failed" || state == "cancelled"; }

result<api_task> decode_task(const json& j) {
  if (!j.is_object()) return error{"a task is not a JSON object"};
  api_task t;
  std::string err;
  bool ok =
      read_field(j, "id", t.id, err) && read_field(j, "name", t.name, err) && read_field(j, "state", t.state, err) &&
      read_field(j, "priority", t.priority, err) && read_field(j, "submitted_unix_ms", t.submitted_unix_ms, err) &&
      read_field(j, "started_unix_ms", t.started_unix_ms, err) &&
      read_field(j, "finished_unix_ms", t.finished_unix_ms, err) && read_field(j, "round", t.round, err) &&
      read_field(j, "rounds_budget", t.rounds_budget, err) && read_field(j, "reviews", t.reviews, err) &&
      read_field(j, "best_speedup", t.best_speedup, err) && read_field(j, "best_candidate", t.best_candidate, err) &&
      read_field(j, "detail", t.detail, err) && read_field(j, "reason", t.reason, err) &&
      read_field(j, "cancel_requested", t.cancel_requested, err) && read_field(j, "resumed", t.resumed, err);
  if (!ok) return error{"task: " + err};
  if (t.id.empty()) return error{"task: no \"id\""};
  t.raw = j;
  return t;
}

std::string base64_encode(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += table[v & 63];
  }
  if (i + 1 == bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string default_server() {
  const char* env = std::getenv("KS_SERVER");
  return env && *env ? std::string(env) : std::string("http://127.0.0.1:8470");
}

api_client::api_client(api_client_options options, std::string origin)
    : options_(std::move(options)), origin_(std::move(origin)) {}

ks::result<api_client> api_client::make(api_client_options options) {
  std::string url = options.server;
  if (url.find("://") == std::string::npos) url = "http://" + url;
  auto scheme_end = url.find("://");
  std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return error{"server " + options.server + ": expected http://HOST:PORT"};
  std::string rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find('/'));  // a path after the authority is not ours to use
  if (rest.empty()) return error{"server " + options.server + ": no host; expected http://HOST:PORT"};
  auto colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']') == std::string::npos) {
    std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) == 0 || std::stoi(port) > 65535)
      return error{"server " + options.server + ": bad port \"" + port + "\"; expected 1-65535"};
  }
  std::string origin = scheme + "://" + rest;
  httplib::Client probe(origin);
  if (!probe.is_valid())
    return error{"server " + options.server + ": this build cannot talk to " + scheme +
                 " URLs (cpp-httplib without TLS); use http:// on loopback or an SSH tunnel"};
  options.server = origin;
  return api_client(std::move(options), std::move(origin));
}

api_error api_client::transport_error(int code, const std::string& method, const std::string& path) const {
  auto err = static_cast<httplib::Error>(code);
  api_error e;
  if (err == httplib::Error::Connection) {
    e.code = "unreachable";
    e.message = "no daemon is answering at " + origin_ +
                " (connection refused). Start one with `kernelskill serve --config C`, or "
                "point --server or $KS_SERVER at the one that runs";
  } else if (err == httplib::Error::ConnectionTimeout) {
    e.code = "timeout";
    e.message = "no daemon answered at " + origin_ + " within " + seconds_text(options_.connect_timeout) +
                " (is the host right, and the port open?)";
  } else if (err == httplib::Error::Read) {
    e.code = "timeout";
    e.message = origin_ + " accepted the connection but sent no complete answer to " + method + " " + path +
                " within " + seconds_text(options_.read_timeout) +
                " (is it a KernelSkill daemon, and is it overloaded?)";
  } else {
    e.code = "transport";
    e.message = method + " " + origin_ + path + ": " + httplib::to_string(err);
  }
  return e;
}

api_result<json> api_client::request(const std::string& method, const std::string& path, const std::string& body,
                                     const std::string& content_type) const {
  httplib::Client cli(origin_);
  cli.set_connection_timeout(options_.connect_timeout);
  cli.set_read_timeout(options_.read_timeout);
  cli.set_write_timeout(options_.read_timeout);
  cli.set_keep_alive(false);
  httplib::Headers headers;
  if (!options_.token.empty()) headers.emplace("Authorization", "Bearer " + options_.token);
  httplib::Result res = method == "GET" ? cli.Get(path, headers) : cli.Post(path, headers, body, content_type);
  if (!res) return transport_error(static_cast<int>(res.error()), method, path);
  json j = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (res->status >= 200 && res->status < 300) {
    if (j.is_discarded())
      return bad_response(method + " " + path + " answered " + std::to_string(res->status) +
                          " with a body that is not JSON");
    return j;
  }
  api_error e;
  e.http_status = res->status;
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& err = j["error"];
    if (err.contains("code") && err["code"].is_string()) e.code = err["code"].get<std::string>();
    if (err.contains("message") && err["message"].is_string()) e.message = err["message"].get<std::string>();
  }
  if (e.code.empty()) {
    switch (res->status) {
      case 400:
        e.code = "bad_request";
        break;
      case 401:
        e.code = "unauthorized";
        break;
      case 404:
        e.code = "not_found";
        break;
      case 405:
        e.code = "method_not_allowed";
        break;
      case 409:
        e.code = "conflict";
        break;
      case 413:
        e.code = "payload_too_large";
        break;
      case 415:
        e.code = "unsupported_media_type";
        break;
      default:
        e.code = res->status >= 500 ? "internal" : "http_" + std::to_string(res->status);
    }
  }
  if (e.message.empty()) {
    std::string snippet = res->body.substr(0, 200);
    e.message = method + " " + path + ": HTTP " + std::to_string(res->status) +
                (snippet.empty() ? std::string() : " " + snippet);
  }
  return e;
}

api_result<api_health> api_client::health() const {
  auto r = request("GET", "/api/health", "", "");
  if (!r) return r.error();
  const json& j = *r;
  if (!j.is_object()) return bad_response("health is not an object");
  api_health h;
  std::string err;
  if (!read_field(j, "status", h.status, err) || !read_field(j, "version", h.version, err) ||
      !read_field(j, "gpus", h.gpus, err))
    return bad_response("health: " + err);
  if (j.contains("tasks") && j["tasks"].is_object())
    for (auto& [state, n] : j["tasks"].items())
      if (n.is_number_unsigned()) h.tasks[state] = n.get<uint64_t>();
  return h;
}

namespace {
api_result<api_task> task_from(const api_result<json>& r) {
  if (!r) return r.error();
  auto t = decode_task(*r);
  if (!t) return bad_response(t.message());
  return std::move(t).value();
}
}  // namespace

api_result<api_task> api_client::submit(const std::string& task_yaml, int priority) const {
  return task_from(request("POST", "/api/tasks?priority=" + std::to_string(priority), task_yaml, "application/yaml"));
}

api_result<api_task> api_client::submit(const std::string& task_yaml, const std::string& module_bytes,
                                        int priority) const {
  json body = {{"task_yaml", task_yaml}, {"priority", priority}};
  if (!module_bytes.empty()) body["module_base64"] = base64_encode(module_bytes);
  return task_from(request("POST", "/api/tasks", body.dump(), "application/json"));
}

api_result<api_task_list> api_client::list(const std::string& state, uint32_t limit) const {
  std::string path = "/api/tasks?limit=" + std::to_string(limit);
  if (!state.empty()) path += "&state=" + path_segment(state);
  auto r = request("GET", path, "", "");
  if (!r) return r.error();
  const json& j = *r;
  if (!j.is_object() || !j.contains("tasks") || !j["tasks"].is_array())
    return bad_response("the task list has no \"tasks\" array");
  api_task_list out;
  for (const json& t : j["tasks"]) {
    auto task = decode_task(t);
    if (!task) return bad_response(task.message());
    out.tasks.push_back(std::move(task).value());
  }
  out.total = out.tasks.size();
  std::string err;
  if (!read_field(j, "total", out.total, err)) return bad_response(err);
  return out;
}

api_result<api_task_detail> api_client::status(const std::string& id) const {
  auto r = request("GET", "/api/tasks/" + path_segment(id), "", "");
  if (!r) return r.error();
  auto task = decode_task(*r);
  if (!task) return bad_response(task.message());
  api_task_detail out{std::move(task).value(), {}};
  if (r->contains("history") && (*r)["history"].is_array()) {
    for (const json& h : (*r)["history"]) {
      auto round = decode_round(h);
      if (!round) return bad_response(round.message());
      out.history.push_back(*round);
    }
  }
  return out;
}

api_result<api_task> api_client::cancel(const std::string& id) const {
  return task_from(request("POST", "/api/tasks/" + path_segment(id) + "/cancel", "{}", "application/json"));
}

api_result<api_task> api_client::set_priority(const std::string& id, int priority) const {
  return task_from(request("POST", "/api/tasks/" + path_segment(id) + "/priority", json{{"priority", priority}}.dump(),
                           "application/json"));
}

api_result<api_task_result> api_client::result_of(const std::string& id) const {
  auto r = request("GET", "/api/tasks/" + path_segment(id) + "/result", "", "");
  if (!r) return r.error();
  const json& j = *r;
  if (!j.is_object() || !j.contains("task")) return bad_response("the result has no \"task\"");
  auto task = decode_task(j["task"]);
  if (!task) return bad_response(task.message());
  api_task_result out;
  out.task = std::move(task).value();
  out.outcome = j.value("outcome", json());
  if (j.contains("kernel") && j["kernel"].is_object()) {
    out.kernel_source = text_of(j["kernel"].value("source", json()));
    out.kernel_plan = text_of(j["kernel"].value("plan", json()));
  }
  out.review = j.value("review", json());
  out.pytorch = text_of(j.value("pytorch", json()));
  out.raw = j;
  return out;
}

api_result<std::vector<api_trajectory_entry>> api_client::trajectory(const std::string& id, uint64_t from_seq) const {
  std::string path = "/api/tasks/" + path_segment(id) + "/trajectory";
  if (from_seq > 0) path += "?from_seq=" + std::to_string(from_seq);
  auto r = request("GET", path, "", "");
  if (!r) return r.error();
  if (!r->is_object() || !r->contains("entries") || !(*r)["entries"].is_array())
    return bad_response("the trajectory has no \"entries\" array");
  std::vector<api_trajectory_entry> out;
  for (const json& e : (*r)["entries"]) {
    auto entry = decode_entry(e);
    if (!entry) return bad_response(entry.message());
    out.push_back(std::move(entry).value());
  }
  return out;
}

api_result<std::string> api_client::get_text(const std::string& path) const {
  httplib::Client cli(origin_);
  cli.set_connection_timeout(options_.connect_timeout);
  cli.set_read_timeout(options_.read_timeout);
  httplib::Headers headers;
  if (!options_.token.empty()) headers.emplace("Authorization", "Bearer " + options_.token);
  auto res = cli.Get(path, headers);
  if (!res) return transport_error(static_cast<int>(res.error()), "GET", path);
  if (res->status >= 200 && res->status < 300) return res->body;
  return api_error{res->status, res->status == 401 ? "unauthorized" : "http_" + std::to_string(res->status),
                   "GET " + path + ": HTTP " + std::to_string(res->status) + " " + res->body.substr(0, 200)};
}

}  // namespace ks
