#include "daemon/http_api.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "base/private_dir.hpp"
#include "base/secret.hpp"
#include "daemon/bounded_json.hpp"
#include "daemon/guarded_server.hpp"
#include "daemon/parse_gate.hpp"
#include "daemon/scheduler.hpp"
#include "daemon/task_queue.hpp"
#include "fleet/review_meter.hpp"
#include "llm/usage_ledger.hpp"
#include "model/json_codec.hpp"
#include "store/store.hpp"
#include "task/task_loader.hpp"

namespace ks {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// An API error: its status, code word and message.
struct api_error {
  int status;
  std::string code;
  std::string message;
};

void reply_error(httplib::Response& res, const api_error& e) {
  res.status = e.status;
  res.set_content(
      json{{"error", {{"code", e.code}, {"message", e.message}}}}.dump(-1, ' ', false, json::error_handler_t::replace) +
          "\n",
      "application/json");
}

void reply_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", "application/json");
}

const char* code_for(int status) {
  switch (status) {
    case 400:
      return "bad_request";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 409:
      return "conflict";
    case 413:
      return "payload_too_large";
    case 415:
      return "unsupported_media_type";
    case 503:
      return "unavailable";
    case 507:
      return "insufficient_storage";
    default:
      return status >= 500 ? "internal" : "bad_request";
  }
}

bool is_yaml(const std::string& mt) {
  return mt == "application/yaml" || mt == "text/yaml" || mt == "application/x-yaml";
}

std::string media_type(const httplib::Request& req) {
  std::string ct = req.get_header_value("Content-Type");
  ct = ct.substr(0, ct.find(';'));
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  for (auto& c : ct) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ct;
}

// The host of a Host header ("127.0.0.1:8470", "[::1]:8470", "localhost") or of an
// Origin ("http://localhost:8470"); empty when there is none.
std::string host_part(std::string v, bool is_origin) {
  if (is_origin) {
    auto scheme = v.find("://");
    if (scheme == std::string::npos) return "";
    v = v.substr(scheme + 3);
  }
  if (!v.empty() && v.front() == '[') {
    auto close = v.find(']');
    return close == std::string::npos ? "" : v.substr(0, close + 1);
  }
  return v.substr(0, v.find(':'));
}

// An integer JSON value in [lo, hi], checked before any conversion (2^64 - 1 must not
// become -1); the error names `what`.
result<int> json_int(const json& v, const std::string& what, int lo, int hi) {
  if (!v.is_number_integer()) return error{what + ": expected an integer, got " + std::string(v.type_name())};
  const bool outside = v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(hi) ||
                                                    static_cast<int64_t>(v.get<uint64_t>()) < lo
                                              : v.get<int64_t>() < lo || v.get<int64_t>() > hi;
  if (outside) return error{what + ": " + v.dump() + " is outside " + std::to_string(lo) + ".." + std::to_string(hi)};
  return static_cast<int>(v.get<int64_t>());
}

// An integer query or body value in [lo, hi]; the error names `what`.
result<int> parse_int(const std::string& text, const std::string& what, int lo, int hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    return error{what + ": expected an integer, got \"" + text.substr(0, 40) + "\""};
  if (v < lo || v > hi)
    return error{what + ": " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi)};
  return static_cast<int>(v);
}

// Query parameters other than `allowed`: 400, naming the first one (docs/daemon.md:
// unknown parameters are refused, so a misspelt one does not go unnoticed).
std::optional<api_error> unknown_param(const httplib::Request& req, const std::vector<std::string_view>& allowed) {
  for (const auto& [k, v] : req.params) {
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    std::string expected;
    for (auto a : allowed) expected += (expected.empty() ? "" : ", ") + std::string(a);
    return api_error{400, "bad_request",
                     "unknown parameter '" + k.substr(0, 40) + "' (" +
                         (expected.empty() ? std::string("this endpoint takes none") : "expected " + expected) + ")"};
  }
  return std::nullopt;
}

// Whether the request says it has a body: a Content-Length or a chunked transfer. One
// with neither has none (HTTP/1.1), and is not waited for.
bool has_body(const httplib::Request& req) {
  return req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
}

}  // namespace

// The most a body that says little (a priority, a cancel) may have.
constexpr size_t kSmallBody = 64u << 10;

struct http_api::impl {
  http_api_options opts;
  http_api_context ctx;
  guarded_server server;
  parse_gate parses;
  std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();

  impl(http_api_options o, http_api_context c)
      : opts(std::move(o)),
        ctx(std::move(c)),
        server(connection_limits{.header_timeout_s = opts.header_timeout_s,
                                 .body_timeout_s = opts.body_timeout_s,
                                 .max_pending = opts.max_pending_connections,
                                 .max_body_per_client = opts.max_body_connections_per_client}),
        parses(opts.max_parses, std::chrono::milliseconds(static_cast<int64_t>(opts.parse_wait_s * 1000)), 256u << 10) {
  }

  // A route's handler runs once the request's body is in: from then on the daemon's
  // work has no deadline (daemon/guarded_server.hpp).
  // `params` are the query parameters it takes (others: 400).
  httplib::Server::Handler handled(std::initializer_list<std::string_view> params, httplib::Server::Handler h) {
    return [this, allowed = std::vector<std::string_view>(params), h = std::move(h)](const httplib::Request& req,
                                                                                     httplib::Response& res) {
      server.body_received();
      if (auto bad = unknown_param(req, allowed)) return reply_error(res, *bad);
      h(req, res);
    };
  }

  // A request body read as it arrives, within limits: at most `keep` bytes are kept,
  // and `scan` (when given) looks at each piece first. Past a limit nothing more is
  // kept or looked at, but the body is still read to its end (up to max_body_bytes),
  // so that the answer reaches a client that is still sending; a chunked body past
  // max_body_bytes is not read further and the connection closes.
  struct body {
    std::string text;
    std::optional<api_error> refused;
    size_t size = 0;         // bytes read
    bool over_keep = false;  // refused for more than `keep` bytes
  };
  body read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader, size_t keep,
                 json_scan* scan) {
    body b;
    if (!has_body(req)) {
      server.body_received();
      return b;
    }
    size_t total = 0;
    const bool read = reader([&](const char* data, size_t n) {
      total += n;
      if (total > opts.max_body_bytes) {
        b.refused = api_error{
            413, "payload_too_large",
            "the request body is larger than the daemon accepts (" + std::to_string(opts.max_body_bytes) + " bytes)"};
        return false;
      }
      if (b.refused) return true;  // read to the end, keep nothing
      if (scan && !scan->feed({data, n})) {
        b.refused = api_error{scan->refusal()->status, code_for(scan->refusal()->status), scan->refusal()->message};
      } else if (b.text.size() + n > keep) {
        b.over_keep = true;
        b.refused =
            api_error{413, "payload_too_large",
                      "the request body is larger than this endpoint accepts (" + std::to_string(keep) + " bytes)"};
      } else {
        b.text.append(data, n);
        return true;
      }
      b.text = std::string();  // what was kept goes now
      return true;
    });
    if (!read) {
      // httplib refused a Content-Length over the limit (413, body skipped), the body
      // stopped short of its length, or a chunked one passed max_body_bytes.
      server.close_after_answer();
      if (!b.refused)
        b.refused = res.status == 413 ? api_error{413, "payload_too_large",
                                                  "the request body is larger than the daemon accepts (" +
                                                      std::to_string(opts.max_body_bytes) + " bytes)"}
                                      : api_error{400, "bad_request", "the request body could not be read to its end"};
    }
    b.size = total;
    server.body_received();
    return b;
  }

  // A route that reads its own body (read_body); `params` are the query parameters it
  // takes (others: 400, the body drained unread).
  httplib::Server::HandlerWithContentReader reading(
      std::initializer_list<std::string_view> params,
      std::function<void(const httplib::Request&, httplib::Response&, const httplib::ContentReader&)> h) {
    return [this, allowed = std::vector<std::string_view>(params), h = std::move(h)](
               const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      if (auto bad = unknown_param(req, allowed)) {
        read_body(req, res, reader, 0, nullptr);
        return reply_error(res, *bad);
      }
      h(req, res, reader);
    };
  }

  // A parse slot (parse_gate): none in time is a 503 the client may retry.
  std::optional<api_error> busy_parsing(const parse_gate::slot& s, httplib::Response& res) const {
    if (s.granted()) return std::nullopt;
    res.set_header("Retry-After", "1");
    return api_error{
        503, "unavailable",
        "the daemon is parsing " + std::to_string(opts.max_parses) + " request bodies already; try again in a second"};
  }

  // A write the queue could not make: 507 when the store is out of space (the daemon
  // keeps serving reads and takes writes again once space returns), else 500.
  api_error write_failure(const std::string& message) const {
    if (ctx.memory && ctx.memory->out_of_space()) return {507, "insufficient_storage", message};
    return {500, "internal", message};
  }

  // The task a path names: 400 for something that is not an id, 404 for none.
  result<queued_task> task_at(const std::string& id, api_error* err) {
    if (!valid_task_id(id)) {
      *err = {400, "bad_request",
              "'" + id.substr(0, 80) + "' is not a task id (NAME-, then the 26 letters and digits submit gave)"};
      return error{err->message};
    }
    auto t = ctx.queue->get(id);
    if (!t) {
      *err = {500, "internal", t.message()};
      return error{err->message};
    }
    if (!*t) {
      *err = {404, "not_found", "no task '" + id + "'"};
      return error{err->message};
    }
    return std::move(**t);
  }

  // A task from a submit request: YAML text, or JSON with task_yaml (+ module_base64).
  result<std::pair<task_spec, int>> read_submission(const httplib::Request& req, const std::string& body,
                                                    api_error* err) {
    auto bad = [&](int status, std::string msg) -> result<std::pair<task_spec, int>> {
      *err = {status, code_for(status), std::move(msg)};
      return error{err->message};
    };
    const std::string mt = media_type(req);
    std::string yaml_text;
    std::string module_b64;
    bool has_module = false;
    int priority = 0;
    if (is_yaml(mt)) {
      yaml_text = body;
      if (req.has_param("priority")) {
        auto p = parse_int(req.get_param_value("priority"), "priority", min_priority, max_priority);
        if (!p) return bad(400, p.message());
        priority = *p;
      }
    } else if (mt == "application/json") {
      if (req.has_param("priority"))
        return bad(400, "unknown parameter 'priority' (a JSON body gives it as the field priority)");
      json_refusal why;
      auto parsed = parse_bounded_json(body, opts.json, "the body", &why);
      if (!parsed) return bad(why.status, why.message);
      json& j = *parsed;
      if (!j.is_object()) return bad(400, "the body must be a JSON object with task_yaml");
      for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& k = it.key();
        if (k == "task_yaml") {
          if (!it->is_string()) return bad(400, "task_yaml: expected a string (the task file's text)");
          yaml_text = it->get<std::string>();
        } else if (k == "priority") {
          auto v = json_int(*it, "priority", min_priority, max_priority);
          if (!v) return bad(400, v.message());
          priority = *v;
        } else if (k == "module_base64") {
          if (!it->is_string()) return bad(400, "module_base64: expected a string (a base64 .pt file)");
          module_b64 = it->get<std::string>();
          has_module = true;
        } else {
          return bad(400, "unknown field '" + k.substr(0, 60) + "' (expected task_yaml, priority, module_base64)");
        }
      }
      if (!j.contains("task_yaml")) return bad(400, "task_yaml: missing (the task file's text)");
    } else {
      return bad(415,
                 "send the task as application/yaml, or as application/json with task_yaml "
                 "(got \"" +
                     mt.substr(0, 60) + "\")");
    }
    if (yaml_text.empty()) return bad(400, "the task is empty");
    if (yaml_text.size() > opts.max_task_yaml_bytes)
      return bad(413, "the task's YAML is " + std::to_string(yaml_text.size()) + " bytes; at most " +
                          std::to_string(opts.max_task_yaml_bytes) +
                          " are accepted (a .pt module travels beside it, in module_base64)");

    // A module path in the file must not make the daemon read its own files: the
    // module comes with the request, or the task is refused.
    std::optional<private_dir> dir;
    bool names_module = false;
    YAML::Node root;
    try {
      root = YAML::Load(yaml_text);
      const YAML::Node& croot = root;
      names_module = croot.IsMap() && croot["reference"] && croot["reference"].IsMap() && croot["reference"]["module"];
    } catch (const YAML::Exception&) {
      // parse_task reports the syntax error with its position.
    }
    if (names_module || has_module) {
      if (!has_module)
        return bad(400,
                   "reference.module: upload the .pt file with the task (module_base64 in a "
                   "JSON body; `kernelskill submit` does this); the daemon does not read its "
                   "own files for a request");
      if (!names_module) return bad(400, "module_base64 was sent but the task has no reference.module");
      auto bytes = base64_decode(module_b64);
      if (!bytes) return bad(400, "module_base64: " + bytes.message());
      auto made = private_dir::create("ks-upload");
      if (!made) return bad(500, made.message());
      dir.emplace(std::move(*made));
      std::ofstream(dir->path() / "upload.pt", std::ios::binary) << *bytes;
      root["reference"]["module"] = "upload.pt";
      YAML::Emitter out;
      out << root;
      yaml_text = out.c_str();
    }
    root.reset();  // its memory goes before parse_task reads the text again (~250 bytes a byte)
    auto spec = parse_task(yaml_text, "task", dir ? dir->path() : fs::path("/nonexistent"));
    if (!spec) return bad(400, spec.message());
    // A KernelBench problem's Python would run wherever its export is imported: the
    // daemon takes no Python from a request (the CLI's import and bench keep it, for the
    // user's own files).
    if (spec->kernelbench != kernelbench_spec{})
      return bad(400,
                 "reference.kernelbench: the daemon accepts no KernelBench problem source from a "
                 "request (it would run as Python wherever the result's ModelNew is imported); "
                 "submit the task without reference.kernelbench (the TorchScript or module "
                 "reference is what is optimised), or run it with `kernelskill run` or "
                 "`kernelskill bench` on your own machine");
    if (spec->module_bytes.size() > 0) spec->module_path = "upload.pt";
    if (!valid_task_name(spec->name))
      return bad(400, "name: '" + spec->name.substr(0, 80) +
                          "' is not a valid task name (1-64 of A-Z a-z 0-9 _ . -, not starting "
                          "with '.' or '-')");
    return std::make_pair(std::move(*spec), priority);
  }

  std::string metrics_text() {
    std::string out;
    auto line = [&](const std::string& name, const std::string& labels, double v) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g", v);
      out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + buf + "\n";
    };
    auto counts = ctx.queue->counts();
    out += "# HELP ks_queue_depth Tasks waiting to run.\n# TYPE ks_queue_depth gauge\n";
    line("ks_queue_depth", "", static_cast<double>(counts[task_state::queued]));
    out += "# HELP ks_tasks Tasks by state.\n# TYPE ks_tasks gauge\n";
    for (auto& [st, n] : counts) line("ks_tasks", "state=\"" + std::string(to_string(st)) + "\"", n);
    if (ctx.memory) {
      out +=
          "# HELP ks_store_out_of_space 1 while the store refuses writes for lack of disk space.\n"
          "# TYPE ks_store_out_of_space gauge\n";
      line("ks_store_out_of_space", "", ctx.memory->out_of_space() ? 1 : 0);
    }
    out += "# HELP ks_gpus Devices the daemon reviews on.\n# TYPE ks_gpus gauge\n";
    line("ks_gpus", "", static_cast<double>(opts.gpus));
    if (ctx.meter) {
      out +=
          "# HELP ks_gpu_busy_seconds_total Seconds each GPU pool had a review running or queued.\n"
          "# TYPE ks_gpu_busy_seconds_total counter\n";
      auto pools = ctx.meter->read();
      for (auto& p : pools) line("ks_gpu_busy_seconds_total", "device=\"" + p.name + "\"", p.busy_s);
      out +=
          "# HELP ks_gpu_up Whether each GPU pool is in the rotation (a node's device: its node answers).\n"
          "# TYPE ks_gpu_up gauge\n";
      for (auto& p : pools) line("ks_gpu_up", "device=\"" + p.name + "\"", p.up ? 1 : 0);
      out += "# HELP ks_gpu_reviews_total Reviews each GPU pool answered.\n# TYPE ks_gpu_reviews_total counter\n";
      for (auto& p : pools) line("ks_gpu_reviews_total", "device=\"" + p.name + "\"", static_cast<double>(p.reviews));
      out +=
          "# HELP ks_gpu_reviews_lost_total Reviews lost with a GPU pool's node and sent to another device.\n"
          "# TYPE ks_gpu_reviews_lost_total counter\n";
      for (auto& p : pools) line("ks_gpu_reviews_lost_total", "device=\"" + p.name + "\"", static_cast<double>(p.lost));
      out += "# HELP ks_reviews_total Reviews answered.\n# TYPE ks_reviews_total counter\n";
      line("ks_reviews_total", "", static_cast<double>(ctx.meter->reviews()));
      out +=
          "# HELP ks_reviews_per_second Reviews answered per second over the last minute.\n"
          "# TYPE ks_reviews_per_second gauge\n";
      line("ks_reviews_per_second", "", ctx.meter->reviews_per_second(60));
    }
    auto usage = ctx.usage ? ctx.usage->total() : usage_counts{};
    out += "# HELP ks_llm_tokens_total LLM tokens billed.\n# TYPE ks_llm_tokens_total counter\n";
    line("ks_llm_tokens_total", "direction=\"input\"", static_cast<double>(usage.input_tokens));
    line("ks_llm_tokens_total", "direction=\"output\"", static_cast<double>(usage.output_tokens));
    out +=
        "# HELP ks_http_connections_dropped_total Connections closed for a request head or body past "
        "its deadline, or dropped for room (slow clients).\n# TYPE ks_http_connections_dropped_total counter\n";
    line("ks_http_connections_dropped_total", "", static_cast<double>(server.dropped()));
    out += "# HELP ks_uptime_seconds Seconds since the daemon started.\n# TYPE ks_uptime_seconds gauge\n";
    line("ks_uptime_seconds", "", std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    return out;
  }

  // Web pages must not drive the daemon: a page elsewhere can make a browser send
  // requests to 127.0.0.1 (and, by DNS rebinding, under a name of its own). So unless a
  // token guards a daemon served beyond loopback, the Host must be a loopback name, an
  // Origin (sent by browsers) must be one too, and a request that changes state must
  // carry a JSON or YAML body type: never a form post, which needs no preflight.
  std::optional<api_error> check_origin(const httplib::Request& req) const {
    const bool open_to_names = !opts.token.empty() && !is_loopback_name(opts.host);
    if (!open_to_names) {
      const std::string host = host_part(req.get_header_value("Host"), false);
      if (!is_loopback_name(host))
        return api_error{403, "forbidden",
                         "Host \"" + host.substr(0, 80) +
                             "\" is not a loopback name; this daemon answers "
                             "requests to localhost, 127.0.0.1 or [::1] only"};
      if (req.has_header("Origin")) {
        const std::string origin = req.get_header_value("Origin");
        if (!is_loopback_name(host_part(origin, true)))
          return api_error{403, "forbidden",
                           "Origin \"" + origin.substr(0, 80) +
                               "\" is not this machine; web pages elsewhere "
                               "may not use this daemon"};
      }
    }
    if (req.method == "POST" || req.method == "PUT" || req.method == "DELETE" || req.method == "PATCH") {
      const std::string mt = media_type(req);
      if (mt != "application/json" && mt != "application/yaml" && mt != "text/yaml" && mt != "application/x-yaml")
        return api_error{415, "unsupported_media_type",
                         "requests that change state take application/json or application/yaml "
                         "bodies (got \"" +
                             mt.substr(0, 60) + "\")"};
    }
    return std::nullopt;
  }

  // Before routing: the body limit, and the refusals of check_origin and of a missing
  // or wrong token. After: a JSON body for the statuses httplib sets itself and for
  // exceptions.
  void guard_requests() {
    server.set_payload_max_length(opts.max_body_bytes);
    server.set_tcp_nodelay(true);  // small answers on a kept-alive connection: no Nagle wait
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      server.head_received();
      // A request refused here leaves its body unread: the connection ends with the
      // answer (what follows on it is not a request).
      auto refuse = [&](const api_error& e) {
        if (has_body(req)) server.close_after_answer();
        reply_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
      };
      if (auto refused = check_origin(req)) return refuse(*refused);
      if (opts.token.empty()) return httplib::Server::HandlerResponse::Unhandled;
      // The dashboard page holds no data and a browser cannot send a bearer token when
      // it navigates: the page is served to anyone, and its API calls carry the token
      // (from the URL fragment #token=…), so everything it shows is still guarded.
      if (req.method == "GET" && req.path == "/") return httplib::Server::HandlerResponse::Unhandled;
      if (equal_secrets(req.get_header_value("Authorization"), "Bearer " + opts.token))
        return httplib::Server::HandlerResponse::Unhandled;
      return refuse({401, "unauthorized",
                     "this daemon needs `Authorization: Bearer TOKEN` (the client reads it "
                     "from $KS_TOKEN)"});
    });
    // Statuses httplib sets itself (404 for an unknown path, 413 for a body over the
    // limit, 400 for a malformed request) get a JSON body like every other error.
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string msg = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path.substr(0, 100)
                        : res.status == 413 ? "the request body is larger than the daemon accepts"
                                            : "the request could not be handled";
      reply_error(res, {res.status, code_for(res.status), msg});
    });
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      spdlog::error("http: {}", what);
      reply_error(res, {500, "internal", what});
    });
  }

  // GET /: the dashboard page.
  void dashboard_page(const httplib::Request&, httplib::Response& res) {
    if (!ctx.dashboard) return reply_error(res, {404, "not_found", "this build has no dashboard"});
    auto page = ctx.dashboard();
    res.set_content(std::string(page), "text/html; charset=utf-8");
  }

  // GET /api/health: the version, the tasks by state, the GPUs and whether the store
  // takes writes.
  void health(const httplib::Request&, httplib::Response& res) {
    json tasks = json::object();
    for (auto& [st, n] : ctx.queue->counts()) tasks[to_string(st)] = n;
    // "store": whether submits are taken (a full disk: not, until space returns).
    json store_state{{"writable", true}};
    if (ctx.memory) {
      std::string problem = ctx.memory->write_problem();
      store_state = {{"writable", problem.empty()}, {"out_of_space", ctx.memory->out_of_space()}};
      if (!problem.empty()) store_state["problem"] = problem;
    }
    reply_json(
        res, 200,
        {{"status", "ok"}, {"version", opts.version}, {"tasks", tasks}, {"gpus", opts.gpus}, {"store", store_state}});
  }

  // POST /api/tasks: a task (YAML or JSON) into the queue.
  void submit_task(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    // A task's YAML is kept up to its own limit; JSON is checked as it arrives.
    const bool yaml = is_yaml(media_type(req));
    json_scan scan(opts.json);
    auto in =
        read_body(req, res, reader, yaml ? opts.max_task_yaml_bytes : opts.max_body_bytes, yaml ? nullptr : &scan);
    if (in.refused && yaml && in.over_keep)
      in.refused->message = "the task's YAML is " + std::to_string(in.size) + " bytes; at most " +
                            std::to_string(opts.max_task_yaml_bytes) +
                            " are accepted (a .pt module travels beside it, in module_base64)";
    if (in.refused) return reply_error(res, *in.refused);
    auto slot = parses.enter(in.text.size());
    if (auto busy = busy_parsing(slot, res)) return reply_error(res, *busy);
    api_error err;
    auto sub = read_submission(req, in.text, &err);
    if (!sub) return reply_error(res, err);
    auto t = ctx.queue->submit(sub->first, sub->second, opts.rounds_budget);
    if (!t) return reply_error(res, write_failure(t.message()));
    spdlog::info("task '{}': queued (priority {})", t->id, t->priority);
    reply_json(res, 201, to_json(*t, false));
  }

  // GET /api/tasks: the tasks, by state, at most limit.
  void list_tasks(const httplib::Request& req, httplib::Response& res) {
    std::optional<task_state> state;
    size_t limit = 100;
    for (auto& [k, v] : req.params) {
      if (k == "state") {
        state = parse_task_state(v);
        if (!state)
          return reply_error(res, {400, "bad_request",
                                   "state: expected queued, running, done, failed or cancelled, "
                                   "got \"" +
                                       v.substr(0, 40) + "\""});
      } else if (k == "limit") {
        auto n = parse_int(v, "limit", 1, 1000);
        if (!n) return reply_error(res, {400, "bad_request", n.message()});
        limit = static_cast<size_t>(*n);
      } else {
        return reply_error(res,
                           {400, "bad_request", "unknown parameter '" + k.substr(0, 40) + "' (expected state, limit)"});
      }
    }
    size_t total = 0;
    auto tasks = ctx.queue->list(state, limit, &total);
    if (!tasks) return reply_error(res, {500, "internal", tasks.message()});
    json arr = json::array();
    for (auto& t : *tasks) arr.push_back(to_json(t, false));
    reply_json(res, 200, {{"tasks", arr}, {"total", total}});
  }

  // GET /api/tasks/ID.
  void show_task(const httplib::Request& req, httplib::Response& res) {
    api_error err;
    auto t = task_at(req.matches[1], &err);
    if (!t) return reply_error(res, err);
    reply_json(res, 200, to_json(*t, true));
  }

  // POST /api/tasks/ID/cancel.
  void cancel_task(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    // The body says nothing (clients send {} or none); it is read and let go.
    if (auto in = read_body(req, res, reader, kSmallBody, nullptr); in.refused) return reply_error(res, *in.refused);
    api_error err;
    auto t = task_at(req.matches[1], &err);
    if (!t) return reply_error(res, err);
    refusal why;
    auto c = ctx.queue->cancel(t->id, &why);
    if (!c) {
      if (why == refusal::none) return reply_error(res, write_failure(c.message()));
      int st = why == refusal::conflict ? 409 : 404;
      return reply_error(res, {st, code_for(st), c.message()});
    }
    if (ctx.tasks) ctx.tasks->cancel(t->id);
    spdlog::info("task '{}': cancel requested", t->id);
    reply_json(res, 200, to_json(*c, false));
  }

  // POST /api/tasks/ID/priority: {"priority": N}.
  void change_priority(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    json_scan scan(opts.json);
    auto in = read_body(req, res, reader, kSmallBody, &scan);
    if (in.refused) return reply_error(res, *in.refused);
    api_error err;
    auto t = task_at(req.matches[1], &err);
    if (!t) return reply_error(res, err);
    if (media_type(req) != "application/json")
      return reply_error(res, {415, "unsupported_media_type", "send {\"priority\": N} as application/json"});
    json_refusal bad_json;
    auto parsed = parse_bounded_json(in.text, opts.json, "the body", &bad_json);
    if (!parsed) return reply_error(res, {bad_json.status, code_for(bad_json.status), bad_json.message});
    json& j = *parsed;
    if (!j.is_object() || !j.contains("priority"))
      return reply_error(res, {400, "bad_request", "expected {\"priority\": N}"});
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "priority")
        return reply_error(res,
                           {400, "bad_request", "unknown field '" + it.key().substr(0, 60) + "' (expected priority)"});
    auto v = json_int(j["priority"], "priority", min_priority, max_priority);
    if (!v) return reply_error(res, {400, "bad_request", v.message()});
    refusal why;
    auto c = ctx.queue->set_priority(t->id, *v, &why);
    if (!c) {
      if (why == refusal::none) return reply_error(res, write_failure(c.message()));
      return reply_error(res, {why == refusal::conflict ? 409 : 404,
                               why == refusal::conflict ? "conflict" : "not_found", c.message()});
    }
    reply_json(res, 200, to_json(*c, false));
  }

  // GET /api/tasks/ID/result: an ended task's outcome, best kernel and its PyTorch
  // export.
  void task_result(const httplib::Request& req, httplib::Response& res) {
    api_error err;
    auto t = task_at(req.matches[1], &err);
    if (!t) return reply_error(res, err);
    if (!has_ended(t->state))
      return reply_error(
          res,
          {409, "conflict", "task '" + t->id + "' is " + to_string(t->state) + "; its result is there when it ends"});
    auto o = ctx.queue->outcome(t->id);
    if (!o) return reply_error(res, {500, "internal", o.message()});
    json body{{"task", to_json(*t, false)}};
    if (*o) {
      json oj = **o;
      body["outcome"] = {{"success", oj.value("success", false)},
                         {"reason", oj.value("reason", "")},
                         {"rounds", oj.value("rounds", 0)},
                         {"reviews", oj.value("reviews", 0)},
                         {"input_tokens", oj.value("input_tokens", 0)},
                         {"output_tokens", oj.value("output_tokens", 0)},
                         {"wall_s", oj.contains("wall_s") ? oj["wall_s"] : json(0.0)}};
      if (oj.value("success", false)) {
        body["kernel"] = oj["best"];
        body["review"] = oj["best_review"];
        if (ctx.export_pytorch) {
          auto spec = ctx.queue->spec(t->id);
          auto best = decode_json<candidate>(oj["best"], "best");
          if (spec && best) {
            auto py = ctx.export_pytorch(*spec, *best);
            if (py)
              body["pytorch"] = *py;
            else
              body["pytorch_error"] = py.message();
          }
        }
      }
    }
    reply_json(res, 200, body);
  }

  // GET /api/tasks/ID/trajectory: its entries from from_seq on.
  void task_trajectory(const httplib::Request& req, httplib::Response& res) {
    api_error err;
    auto t = task_at(req.matches[1], &err);
    if (!t) return reply_error(res, err);
    uint64_t from = 0;
    for (auto& [k, v] : req.params) {
      if (k != "from_seq")
        return reply_error(res,
                           {400, "bad_request", "unknown parameter '" + k.substr(0, 40) + "' (expected from_seq)"});
      auto n = parse_int(v, "from_seq", 0, 1 << 30);
      if (!n) return reply_error(res, {400, "bad_request", n.message()});
      from = static_cast<uint64_t>(*n);
    }
    auto entries = ctx.memory->read_trajectory(t->id, from);
    if (!entries) return reply_error(res, {500, "internal", entries.message()});
    json arr = json::array();
    for (auto& e : *entries) arr.push_back(e);
    reply_json(res, 200, {{"entries", arr}});
  }

  // A handler that calls one of the member functions above.
  using request_member = void (impl::*)(const httplib::Request&, httplib::Response&);
  using reading_member = void (impl::*)(const httplib::Request&, httplib::Response&, const httplib::ContentReader&);
  httplib::Server::Handler call(request_member f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) { (this->*f)(req, res); };
  }
  std::function<void(const httplib::Request&, httplib::Response&, const httplib::ContentReader&)> call(
      reading_member f) {
    return [this, f](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      (this->*f)(req, res, reader);
    };
  }

  void routes() {
    guard_requests();
    server.Get("/", handled({}, call(&impl::dashboard_page)));
    server.Get("/api/health", handled({}, call(&impl::health)));
    server.Get("/metrics", handled({}, [this](const httplib::Request&, httplib::Response& res) {
                 res.set_content(metrics_text(), "text/plain; version=0.0.4");
               }));
    server.Post("/api/tasks", reading({"priority"}, call(&impl::submit_task)));
    server.Get("/api/tasks", handled({"state", "limit"}, call(&impl::list_tasks)));
    server.Get(R"(/api/tasks/([^/]+))", handled({}, call(&impl::show_task)));
    server.Post(R"(/api/tasks/([^/]+)/cancel)", reading({}, call(&impl::cancel_task)));
    server.Post(R"(/api/tasks/([^/]+)/priority)", reading({}, call(&impl::change_priority)));
    server.Get(R"(/api/tasks/([^/]+)/result)", handled({}, call(&impl::task_result)));
    server.Get(R"(/api/tasks/([^/]+)/trajectory)", handled({"from_seq"}, call(&impl::task_trajectory)));
    // Any other request with a body: read within the limits (httplib would keep a
    // chunked body whole, whatever its size) and answered 404.
    auto elsewhere = [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      read_body(req, res, reader, 0, nullptr);
      reply_error(res, {404, "not_found", "no such endpoint: " + req.method + " " + req.path.substr(0, 100)});
    };
    server.Post(".*", elsewhere);
    server.Put(".*", elsewhere);
    server.Patch(".*", elsewhere);
    server.Delete(".*", elsewhere);
  }
};

http_api::http_api(http_api_options opts, http_api_context ctx)
    : impl_(std::make_unique<impl>(std::move(opts), std::move(ctx))) {
  impl_->routes();
}

http_api::~http_api() { stop(); }

result<uint16_t> http_api::bind() {
  const auto& o = impl_->opts;
  if (o.token.empty() && !is_loopback_host(o.host))
    return error{"serve.listen: " + o.host +
                 " is not a loopback address; set a token (the environment variable named by "
                 "serve.token_env) before serving beyond this machine"};
  if (!o.token.empty() && o.token.size() < min_token_length && !is_loopback_host(o.host))
    return error{"serve.listen: " + o.host + " is not a loopback address, and the token (serve.token_env) has " +
                 std::to_string(o.token.size()) + " characters; beyond this machine it needs at least " +
                 std::to_string(min_token_length) + " (`head -c 24 /dev/urandom | base64` makes one)"};
  std::string host = o.host;
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  uint16_t bound = o.port;
  if (o.port == 0) {
    int port = impl_->server.bind_to_any_port(host);
    if (port <= 0) return error{"cannot listen on " + o.host + " (any port)"};
    bound = static_cast<uint16_t>(port);
  } else if (!impl_->server.bind_to_port(host, o.port)) {
    return error{"cannot listen on " + o.host + ":" + std::to_string(o.port) + " (is another daemon running there?)"};
  }
  impl_->server.widen_backlog();
  return bound;
}

void http_api::serve() { impl_->server.listen_after_bind(); }

void http_api::stop() {
  if (impl_) impl_->server.stop();
}

}  // namespace ks
