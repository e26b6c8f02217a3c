// ks-scripted-llm: an OpenAI-compatible chat server on loopback that answers like a
// model from the example kernels, for running `kernelskill run` with the llm backend
// where no model is reachable (the GPU machine; bench/agent/llm_loop.sh). It is the test
// server of tests/llm_fake_server.hpp with a script:
//   generator  seed 1: the example kernel with its bounds check off by one (wrong:
//              the reviewer must catch it and the loop must repair it); later seeds:
//              the example kernel
//   repairer   the example kernel
//   diagnoser  a JSON diagnosis
//   optimizer  the current kernel with a comment naming the method (correct, and a
//              new candidate: the loop's mechanics, not a real optimisation)
// Usage: ks-scripted-llm --plans DIR TASK=STEM... ; prints "listening on 127.0.0.1:PORT"
// and serves until stdin closes or it is killed.

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "llm_fake_server.hpp"

using ks::testing::llm_fake_server;
using ks::testing::openai_ok;
using ks::testing::recorded_request;
using ks::testing::scripted_reply;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    std::cerr << "ks-scripted-llm: cannot read " << path << "\n";
    std::exit(2);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string reply(const std::string& source, const std::string& plan) {
  return "```cuda\n" + source + "```\n\n```yaml\n" + plan + "```\n";
}

std::string match(const std::string& text, const std::string& re) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(re))) return m[1];
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  std::string plans;
  std::map<std::string, std::string> stems;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--plans" && i + 1 < argc) {
      plans = argv[++i];
    } else if (auto eq = a.find('='); eq != std::string::npos) {
      stems[a.substr(0, eq)] = a.substr(eq + 1);
    } else {
      std::cerr << "usage: ks-scripted-llm --plans DIR TASK=STEM...\n";
      return 2;
    }
  }
  std::map<std::string, std::pair<std::string, std::string>> examples;
  for (auto& [task, stem] : stems)
    examples[task] = {read_file(plans + "/" + stem + ".cu"), read_file(plans + "/" + stem + ".yaml")};

  std::mutex mu;
  std::map<std::string, int> seeds;
  llm_fake_server server;
  server.set_handler([&](const recorded_request& req) -> scripted_reply {
    auto body = req.body_json();
    std::string system = body["messages"][0]["content"];
    std::string user = body["messages"].back()["content"];
    std::string task = match(user, "## Task `([^`]+)`");
    auto it = examples.find(task);
    if (it == examples.end())
      return openai_ok("I have no kernel for task '" + task + "'.");
    const auto& [source, plan] = it->second;
    if (system.find("You are the diagnoser") != std::string::npos)
      return openai_ok("```json\n{\"diagnosis\": \"the bounds check skips the last element\", "
                       "\"actions\": [\"compare the index with n, not n - 1\"]}\n```\n");
    if (system.find("You are the repairer") != std::string::npos)
      return openai_ok(reply(source, plan));
    if (system.find("You are the optimizer") != std::string::npos) {
      std::string method = match(user, "## Method to apply: [^\\n]*\\(`([a-z0-9_]+)`");
      // The current kernel is the first ```cuda block of the prompt.
      std::string current = match(user, "```cuda\\n([\\s\\S]*?)```");
      if (current.empty()) current = source;
      return openai_ok(reply("// " + method + " (scripted: unchanged code)\n" + current, plan));
    }
    int n;
    {
      std::lock_guard<std::mutex> lock(mu);
      n = ++seeds[task];
    }
    if (n == 1) {
      std::string broken = std::regex_replace(source, std::regex("< n\\)"), "< n - 1)",
                                              std::regex_constants::format_first_only);
      return openai_ok(reply(broken, plan));
    }
    return openai_ok(reply("// seed " + std::to_string(n) + "\n" + source, plan));
  });
  std::printf("listening on 127.0.0.1:%d\n", server.port());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
