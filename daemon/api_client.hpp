#pragma once
// A client of the daemon's HTTP/JSON API (docs/daemon.md): what `kernelskill submit |
// status | cancel | result | watch`, the tests and the benchmarks use to talk to a
// running `kernelskill serve`.
//
// Promises:
// - Every call is one HTTP request (no retries: a submit that timed out may or may not
//   have been queued, and only the caller can decide whether to list before resending).
// - Errors are values: an api_error says whether the daemon answered at all
//   (http_status 0: nothing listens at that address, or it did not answer in time),
//   and otherwise carries the server's own code and message.
// - No CAF, no LibTorch: the client links cpp-httplib and nlohmann-json only.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.hpp"

namespace ks {

// Why a request did not succeed.
struct api_error {
  // 0 when no HTTP answer came back (no daemon there, a timeout, a broken connection);
  // otherwise the HTTP status the daemon answered with.
  int http_status = 0;
  // The server's error code (bad_request, unauthorized, not_found, conflict, …), or
  // for http_status 0: unreachable, timeout, transport; bad_response when the answer
  // was not the JSON the API promises.
  std::string code;
  // A message for the user: the server's, or what went wrong and what to do.
  std::string message;

  bool unreachable() const { return http_status == 0; }
};

// Either a value or an api_error (base/result.hpp's result, with the HTTP details kept).
template <class T>
class [[nodiscard]] api_result {
 public:
  api_result(T value) : v_(std::move(value)) {}
  api_result(api_error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const api_error& error() const { return std::get<1>(v_); }
  const std::string& message() const { return error().message; }
  // As base/result.hpp's result, for code that only needs the message.
  result<T> to_result() const& {
    if (ok()) return value();
    return ks::error{message()};
  }

 private:
  std::variant<T, api_error> v_;
};

// The task object of the API (docs/daemon.md, "The task object").
struct api_task {
  std::string id, name, state;  // state: queued, running, done, failed, cancelled
  int priority = 0;
  int64_t submitted_unix_ms = 0, started_unix_ms = 0, finished_unix_ms = 0;
  uint32_t round = 0, rounds_budget = 0, reviews = 0;
  double best_speedup = 0;
  std::string best_candidate, detail, reason;
  bool cancel_requested = false;
  uint32_t resumed = 0;
  nlohmann::json raw;  // the object as the daemon sent it, fields this build ignores included

  // done, failed or cancelled: the task will not change any more.
  bool ended() const;
};

// The best speedup after one round (GET /api/tasks/ID "history").
struct api_round {
  uint32_t round = 0;
  double best_speedup = 0;
  uint32_t reviews = 0;
  int64_t unix_ms = 0;
};

struct api_task_detail {
  api_task task;
  std::vector<api_round> history;
};

struct api_task_list {
  std::vector<api_task> tasks;  // newest first
  uint64_t total = 0;           // how many match, beyond the limit too
};

// GET /api/tasks/ID/result.
struct api_task_result {
  api_task task;
  nlohmann::json outcome;     // the task's row of a run's summary.json
  std::string kernel_source;  // CUDA source of the best kernel (empty when none)
  std::string kernel_plan;    // its launch plan (YAML)
  nlohmann::json review;      // the best kernel's review
  std::string pytorch;        // the ModelNew module (Python), empty when not exported
  nlohmann::json raw;
};

// One trajectory entry (docs/agent-loop.md, "Short-term memory").
struct api_trajectory_entry {
  uint64_t seq = 0;
  int64_t unix_ms = 0;
  uint32_t round = 0;
  std::string kind;  // seed, review, diagnose, repair, plan, optimize, note
  std::string candidate_id, parent_id, method, status, summary;
  double speedup = 0;
  nlohmann::json raw;
};

// GET /api/health.
struct api_health {
  std::string status, version;
  std::map<std::string, uint64_t> tasks;  // state → count
  uint32_t gpus = 0;
};

struct api_client_options {
  // http://HOST:PORT (a trailing slash or path is ignored). https works where
  // cpp-httplib was built with OpenSSL.
  std::string server = "http://127.0.0.1:8470";
  // Sent as "Authorization: Bearer TOKEN" when not empty.
  std::string token;
  std::chrono::milliseconds connect_timeout{3000};
  // Long enough for a submit of a 16 MiB module on a busy machine.
  std::chrono::milliseconds read_timeout{30000};
};

// The default server: $KS_SERVER, else http://127.0.0.1:8470.
std::string default_server();

// A client of one daemon. Cheap to make; one connection per call; safe to use from one
// thread at a time (make one per thread).
class api_client {
 public:
  // An error when options.server is not an http(s)://HOST[:PORT] URL.
  static ks::result<api_client> make(api_client_options options);

  const std::string& server() const { return options_.server; }

  api_result<api_health> health() const;

  // Submits the task file's text. priority: −1000…1000, higher runs first.
  api_result<api_task> submit(const std::string& task_yaml, int priority = 0) const;
  // Submits the task file with a TorchScript archive (the bytes of a .pt file) that
  // replaces its reference.module.
  api_result<api_task> submit(const std::string& task_yaml, const std::string& module_bytes, int priority) const;

  // state: only tasks in that state (empty: all). limit: 1…1000.
  api_result<api_task_list> list(const std::string& state = "", uint32_t limit = 100) const;
  api_result<api_task_detail> status(const std::string& id) const;
  api_result<api_task> cancel(const std::string& id) const;
  api_result<api_task> set_priority(const std::string& id, int priority) const;
  // The best kernel, its review and the PyTorch export of an ended task.
  api_result<api_task_result> result_of(const std::string& id) const;
  api_result<std::vector<api_trajectory_entry>> trajectory(const std::string& id, uint64_t from_seq = 0) const;

  // Any GET, for what the typed calls above do not cover (/metrics, …): the body.
  api_result<std::string> get_text(const std::string& path) const;

 private:
  explicit api_client(api_client_options options, std::string origin);
  api_result<nlohmann::json> request(const std::string& method, const std::string& path, const std::string& body,
                                     const std::string& content_type) const;
  // code: an httplib::Error (kept out of this header).
  api_error transport_error(int code, const std::string& method, const std::string& path) const;

  api_client_options options_;
  std::string origin_;  // scheme://host:port
};

// Decoders of the API's objects (lenient: a missing field keeps its default; a field
// of the wrong type is an error naming it).
result<api_task> decode_task(const nlohmann::json& j);
std::string base64_encode(const std::string& bytes);

}  // namespace ks
