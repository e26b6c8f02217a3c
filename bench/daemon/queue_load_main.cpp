// ks-queue-load: fills a running daemon's queue through its API and reads it back, for
// bench/daemon/queue_rss.sh (the daemon's memory with a long queue). Prints one
// "key value" line per measurement on stdout.
//
//   ks-queue-load --server URL --task FILE [--count N] [--token-env NAME]

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "daemon/api_client.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ks-queue-load: submit N copies of a task to a daemon, then list and read them all"};
  std::string server = ks::default_server(), task_path, token_env = "KS_TOKEN", phase = "all";
  uint32_t count = 1000;
  app.add_option("--server", server, "The daemon (default $KS_SERVER or http://127.0.0.1:8470)");
  app.add_option("--task", task_path, "Task file to submit")->required();
  app.add_option("--count", count, "How many tasks (default 1000)");
  app.add_option("--token-env", token_env, "Variable holding the token (default KS_TOKEN)");
  app.add_option("--phase", phase, "submit, read or all (default all)")
      ->check(CLI::IsMember({"submit", "read", "all"}));
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(task_path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) {
    std::cerr << "ks-queue-load: cannot read " << task_path << "\n";
    return 1;
  }
  ks::api_client_options o;
  o.server = server;
  if (const char* t = std::getenv(token_env.c_str())) o.token = t;
  auto client = ks::api_client::make(o);
  if (!client) {
    std::cerr << "ks-queue-load: " << client.message() << "\n";
    return 2;
  }
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };

  if (phase == "submit" || phase == "all") {
    auto t0 = clock::now();
    for (uint32_t i = 0; i < count; ++i) {
      // Priorities spread over the range so that the scheduler's order is not trivial.
      auto r = client->submit(ss.str(), static_cast<int>(i % 21) - 10);
      if (!r) {
        std::cerr << "ks-queue-load: submit " << i << ": " << r.message() << "\n";
        return 1;
      }
    }
    double ms = ms_since(t0);
    std::cout << "submitted " << count << "\nsubmit_ms_total " << ms << "\nsubmit_ms_each " << ms / count << "\n";
  }
  if (phase == "read" || phase == "all") {
    auto t0 = clock::now();
    auto list = client->list("", 1000);
    if (!list) {
      std::cerr << "ks-queue-load: list: " << list.message() << "\n";
      return 1;
    }
    std::cout << "listed " << list->tasks.size() << "\nlist_total " << list->total << "\nlist_ms " << ms_since(t0)
              << "\n";
    auto queued = client->list("queued", 1000);
    if (!queued) {
      std::cerr << "ks-queue-load: list queued: " << queued.message() << "\n";
      return 1;
    }
    std::cout << "queued_total " << queued->total << "\n";
    t0 = clock::now();
    for (auto& t : list->tasks) {
      auto s = client->status(t.id);
      if (!s) {
        std::cerr << "ks-queue-load: status " << t.id << ": " << s.message() << "\n";
        return 1;
      }
    }
    std::cout << "status_ms_each " << (list->tasks.empty() ? 0 : ms_since(t0) / list->tasks.size()) << "\n";
  }
  return 0;
}
