// ks-daemon-load: a running daemon under a burst of legitimate requests beside
// slow-body connections (issue 44; bench/daemon/load.sh starts the daemon). Opens
// --slow connections that send a POST head and then a body byte every --every-ms (from
// --slow-clients loopback addresses, 127.0.0.2 on), then sends --requests requests at
// once, each on a connection of its own (health checks, lists, one task's status,
// submits), while a probe asks /api/health every 100 ms on a fresh connection. Prints
// what came back, and exits 0 when every legitimate request was answered 2xx and every
// health probe in under --health-ms.
//
//   ks-daemon-load --url http://127.0.0.1:PORT [--requests 2000] [--slow 300]
//                  [--slow-clients 1] [--every-ms 2000] [--token-env KS_TOKEN]
//                  [--task FILE] [--pid PID]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/http_burst.hpp"

namespace {

using clock = std::chrono::steady_clock;
using ks::testing::http_request;

long status_kib(long pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ks-daemon-load: a burst of legitimate requests beside slow bodies, against a running daemon"};
  std::string url, token_env = "KS_TOKEN", task_path;
  size_t requests = 2000, slow = 300, slow_clients = 1;
  int every_ms = 2000;
  double health_limit_ms = 1000;
  long pid = 0;
  app.add_option("--url", url, "The daemon, http://127.0.0.1:PORT")->required();
  app.add_option("--requests", requests, "Legitimate requests sent at once (default 2000)");
  app.add_option("--slow", slow, "Slow-body connections (default 300)");
  app.add_option("--slow-clients", slow_clients, "Loopback addresses they come from, 127.0.0.2 on (default 1)");
  app.add_option("--every-ms", every_ms, "A slow body's byte every this many ms (default 2000)");
  app.add_option("--health-ms", health_limit_ms, "The most a health probe may take (default 1000)");
  app.add_option("--token-env", token_env, "Variable holding the token (default KS_TOKEN)");
  app.add_option("--task", task_path, "A task file for the submits (default: none are sent)");
  app.add_option("--pid", pid, "The daemon's pid, for its memory (VmRSS, VmHWM)");
  CLI11_PARSE(app, argc, argv);

  const std::string host = "127.0.0.1";
  const auto colon = url.rfind(':');
  if (url.rfind("http://127.0.0.1:", 0) != 0 || colon == std::string::npos) {
    std::cerr << "ks-daemon-load: --url must be http://127.0.0.1:PORT (loopback clients are told apart by "
                 "127.0.0.x)\n";
    return 2;
  }
  const int port = std::atoi(url.c_str() + colon + 1);
  std::string token;
  if (const char* t = std::getenv(token_env.c_str())) token = t;
  std::string task;
  if (!task_path.empty()) {
    std::ifstream in(task_path);
    std::stringstream ss;
    ss << in.rdbuf();
    task = ss.str();
  }
  ks::testing::raise_descriptor_limit();
  httplib::Client probe(host, port);
  probe.set_connection_timeout(30, 0);
  probe.set_read_timeout(30, 0);
  if (!token.empty()) probe.set_bearer_token_auth(token.c_str());
  auto first = probe.Get("/api/health");
  if (!first || first->status != 200) {
    std::cerr << "ks-daemon-load: " << url << " does not answer /api/health with 200\n";
    return 2;
  }
  // A task to ask about, when submits are part of the mix.
  std::string task_id;
  if (!task.empty()) {
    auto r = probe.Post("/api/tasks", task, "application/yaml");
    if (!r || r->status != 201) {
      std::cerr << "ks-daemon-load: the task was not accepted: " << (r ? r->body : "no answer") << "\n";
      return 2;
    }
    task_id = nlohmann::json::parse(r->body)["id"];
  }
  if (pid)
    std::printf("daemon before: VmRSS %ld MiB, VmHWM %ld MiB\n", status_kib(pid, "VmRSS") / 1024,
                status_kib(pid, "VmHWM") / 1024);

  // The mix: 70% health, 15% lists, and with a task 10% its status and 5% submits.
  std::vector<std::string> mix;
  for (size_t i = 0; i < requests; ++i) {
    const size_t k = i % 20;
    if (!task.empty() && k == 0)
      mix.push_back(http_request("POST", "/api/tasks", task, "application/yaml", token));
    else if (!task.empty() && k <= 2)
      mix.push_back(http_request("GET", "/api/tasks/" + task_id, "", "", token));
    else if (k <= 5)
      mix.push_back(http_request("GET", "/api/tasks?limit=20", "", "", token));
    else
      mix.push_back(http_request("GET", "/api/health", "", "", token));
  }

  std::vector<std::string> from;
  for (size_t i = 0; i < std::max<size_t>(slow_clients, 1); ++i) from.push_back("127.0.0." + std::to_string(2 + i));
  const auto t_slow = clock::now();
  ks::testing::slow_bodies slowpokes(host, port, slow, from, std::chrono::milliseconds(every_ms), token);
  std::printf("slow bodies: %zu connected from %zu client(s) in %.1f s, a byte each every %d ms\n",
              slowpokes.connected(), from.size(), std::chrono::duration<double>(clock::now() - t_slow).count(),
              every_ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::printf("slow bodies open after 1.5 s: %zu\n", slowpokes.open());

  std::atomic<bool> stop{false};
  std::vector<double> health_ms;
  size_t health_failed = 0;
  std::thread prober([&] {
    while (!stop) {
      httplib::Client c(host, port);
      c.set_connection_timeout(30, 0);
      c.set_read_timeout(30, 0);
      if (!token.empty()) c.set_bearer_token_auth(token.c_str());
      const auto t0 = clock::now();
      auto h = c.Get("/api/health");
      const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (h && h->status == 200)
        health_ms.push_back(ms);
      else
        ++health_failed;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  auto burst = ks::testing::http_burst(host, port, mix, 300);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop = true;
  prober.join();

  std::printf("burst: %s\n", burst.summary().c_str());
  size_t ok = 0;
  for (auto& [st, n] : burst.by_status)
    if (st >= 200 && st < 300) ok += n;
  std::sort(health_ms.begin(), health_ms.end());
  const double health_max = health_ms.empty() ? -1 : health_ms.back();
  std::printf("health probes: %zu answered, %zu failed; ms median %.1f, max %.1f\n", health_ms.size(), health_failed,
              health_ms.empty() ? -1.0 : health_ms[health_ms.size() / 2], health_max);
  std::printf("slow bodies still open: %zu of %zu (bytes sent %zu)\n", slowpokes.open(), slowpokes.connected(),
              slowpokes.bytes_sent());
  if (auto m = probe.Get("/metrics"); m && m->status == 200) {
    std::istringstream lines(m->body);
    for (std::string l; std::getline(lines, l);)
      if (l.rfind("ks_http_connections_dropped_total", 0) == 0 || l.rfind("ks_queue_depth", 0) == 0)
        std::printf("%s\n", l.c_str());
  }
  if (pid)
    std::printf("daemon after: VmRSS %ld MiB, VmHWM %ld MiB\n", status_kib(pid, "VmRSS") / 1024,
                status_kib(pid, "VmHWM") / 1024);
  const bool pass = ok == requests && health_failed == 0 && !health_ms.empty() && health_max < health_limit_ms;
  std::printf("%s: %zu of %zu legitimate requests answered 2xx; health at most %.1f ms (limit %.0f)\n",
              pass ? "PASS" : "FAIL", ok, requests, health_max, health_limit_ms);
  return pass ? 0 : 1;
}
