#pragma once
// Plain HTTP helpers for tests that drive a real `kernelskill serve`
// (tests/support/daemon_process.hpp) with cpp-httplib: files read whole, the example tasks, a
// client with the tests' timeouts, and polling a task until a condition holds.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tests/support/daemon_process.hpp"

namespace ks::testing {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// examples/tasks/NAME.yaml, as text.
inline std::string example_task(const std::string& name) {
  return read_file(std::filesystem::path(KS_SOURCE_DIR) / "examples" / "tasks" / (name + ".yaml"));
}

// A client of the daemon: 30 s to read an answer, 5 s to connect; `token` as bearer.
inline httplib::Client client_for(const daemon_process& d, const std::string& token = "") {
  httplib::Client c(d.host(), d.port());
  c.set_read_timeout(30, 0);
  c.set_connection_timeout(5, 0);
  if (!token.empty()) c.set_bearer_token_auth(token.c_str());
  return c;
}

// Polls GET /api/tasks/ID until pred(task as JSON) holds; false after timeout_s.
template <class Pred>
bool wait_for(httplib::Client& c, const std::string& id, Pred pred, double timeout_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = c.Get(("/api/tasks/" + id).c_str());
    if (r && r->status == 200 && pred(nlohmann::json::parse(r->body))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace ks::testing
