#pragma once
// The daemon's HTTP/JSON API and dashboard (docs/daemon.md is the reference). What it
// promises:
// - every request is answered; a bad one (malformed YAML or JSON, a wrong type, an
//   unknown field, a body over the limit, a name or id that is not one) gets a 4xx
//   with {"error": {"code", "message"}} naming what is wrong, and changes nothing;
// - a submitted task is in the store before the 201 goes out;
// - with a token, every request without `Authorization: Bearer TOKEN` is refused
//   (401, compared in constant time); without one, only addresses that resolve to
//   loopback may be served, and beyond loopback the token has min_token_length
//   characters at least;
// - a body is bounded while it arrives (max_body_bytes, a task's YAML at
//   max_task_yaml_bytes, JSON by its nesting and number of values) and parsed by at most
//   max_parses requests at once; unknown query parameters are refused (400);
// - web pages cannot drive it: unless a token guards a daemon served beyond loopback,
//   a Host or Origin that is not a loopback name is refused (403), and requests that
//   change state must be JSON or YAML (415 for form posts);
// - slow clients cannot hold it, and bursts are answered: a request's head and body have
//   deadlines, only connections slower than a grace are dropped for room, and one
//   client's slow bodies are capped (daemon/guarded_server.hpp);
// - the daemon never reads its own files for a request: a task's .pt module comes in
//   the request or not at all.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/loopback.hpp"
#include "base/result.hpp"
#include "daemon/bounded_json.hpp"
#include "model/candidate.hpp"
#include "model/task.hpp"

namespace ks {

class review_meter;
class scheduler;
class store;
class task_queue;
class usage_ledger;

struct http_api_options {
  std::string host = "127.0.0.1";
  uint16_t port = 8470;               // 0: a free port (bind() says which)
  std::string token;                  // empty: no authentication (loopback only)
  size_t max_body_bytes = 16u << 20;  // any request (a JSON body may carry a .pt module)
  // A task's YAML text. yaml-cpp needs up to ~250 bytes of memory and ~1 s per MiB to
  // parse it (measured: a flow list of small numbers, 1 MiB → 249 MiB, 4 MiB → 987 MiB
  // and 3.6 s), so the YAML is bounded well below the body: 1 MiB costs at most ~0.25 GiB.
  size_t max_task_yaml_bytes = 1u << 20;
  uint32_t rounds_budget = 0;  // seeds × rounds, recorded with each task
  size_t gpus = 0;             // devices the daemon reviews on (health, metrics)
  // Slow clients (daemon/guarded_server.hpp): the request head's and body's deadlines,
  // and how many connections may wait for their heads at once.
  double header_timeout_s = 10;
  double body_timeout_s = 60;
  size_t max_pending_connections = 32;
  // Connections of one client whose body has been arriving for over a second (a slow
  // body): the oldest of them is dropped for one more.
  size_t max_body_connections_per_client = 8;
  // JSON bodies are refused while they arrive and while they are parsed past these
  // (400 nesting, 413 values; daemon/bounded_json.hpp).
  json_limits json;
  // Bodies parsed at once (JSON, a task's YAML); another waits up to parse_wait_s and is
  // then answered 503 with Retry-After (daemon/parse_gate.hpp).
  size_t max_parses = 2;
  double parse_wait_s = 5;
  std::string version;
};

// A token for a daemon served beyond loopback has at least this many characters (as
// the workers' tokens: protocol/worker_link.hpp).
inline constexpr size_t min_token_length = 16;

// What the API reads and acts on; the pointers must outlive it. meter, usage,
// export_pytorch and dashboard may be null.
struct http_api_context {
  task_queue* queue = nullptr;
  scheduler* tasks = nullptr;
  store* memory = nullptr;
  const review_meter* meter = nullptr;
  const usage_ledger* usage = nullptr;
  std::function<result<std::string>(const task_spec&, const candidate&)> export_pytorch;
  std::function<std::string_view()> dashboard;
};

class http_api {
 public:
  http_api(http_api_options opts, http_api_context ctx);
  ~http_api();
  http_api(const http_api&) = delete;
  http_api& operator=(const http_api&) = delete;

  // Binds the socket; returns the port. Refuses a non-loopback host without a token.
  result<uint16_t> bind();
  // Serves until stop(); call after bind(), from a thread of its own.
  void serve();
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace ks
