// ks-scripted-llm: a replaying model server on loopback, for running `kernelskill run`
// with the llm or hybrid backend where no model is reachable (tests/llm_loop_test.cpp;
// on the GPU machine bench/agent/llm_loop.sh). It is the test server of
// tests/support/llm_fake_server.hpp answering the agents' prompts as a model would — prose
// around fenced blocks, streamed as the server it imitates streams (--style) — with
// hand-written kernels that are correct for the test tasks
// (tests/llm_replies_emulation_test.cpp checks them), and, unless --clean, with the
// mistakes models make, one of each kind, so that every recovery path of the loop runs:
//
//   generator  seed 1: the kernel written with int64_t and no header (NVRTC refuses
//              it: the review's compile error, the diagnosis and the repair follow);
//              seed 2: the reply cut off inside its ```cuda block (finish_reason
//              "length": a format repair asks again); seed 3: a plan with a typo
//              (`blok:`: a format repair with the YAML error); seed 4 on: correct
//   diagnoser  the first diagnosis of each task is JSON missing its closing brace (a
//              format repair), then a diagnosis that names the failure
//   repairer   the task's kernel, repaired
//   optimizer  the kernel written for that method (TASK.METHOD.cu/.yaml under
//              --replies) when there is one; else the current kernel with a comment
//              naming the method (a new candidate: the loop's mechanics only)
//
// Token counts are the server's own: 4 characters of request or reply text a token.
//
// Usage: ks-scripted-llm [--plans DIR] [--replies DIR] [--style vllm|llama_cpp|ollama|anthropic]
//          [--clean] [--token-delay-ms N] [--context TOKENS] [--log FILE] [--until-killed]
//          TASK=STEM...
// STEM is a path without extension, relative to --plans (TASK.cu/.yaml under --replies
// serve when no STEM is given for a task). Prints "listening on 127.0.0.1:PORT" and
// serves until stdin closes (or, with --until-killed, until it is killed).

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/llm_fake_server.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ks::testing::anthropic_ok;
using ks::testing::llm_fake_server;
using ks::testing::openai_ok;
using ks::testing::recorded_request;
using ks::testing::scripted_reply;
using ks::testing::stream_style;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream f(path);
  if (!f) {
    std::cerr << "ks-scripted-llm: cannot read " << path.string() << "\n";
    std::exit(2);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string match(const std::string& text, const std::string& re) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(re))) return m[1];
  return "";
}

struct kernel_files {
  std::string source, plan;
};

struct options {
  fs::path plans, replies;
  stream_style style = stream_style::vllm;
  bool clean = false;
  int token_delay_ms = 0;
  int64_t context = 0;
  std::string log;
  bool until_killed = false;
  std::map<std::string, kernel_files> seeds;  // task → its kernel
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ks-scripted-llm: " << why << "\n"
            << "usage: ks-scripted-llm [--plans DIR] [--replies DIR] [--style vllm|llama_cpp|ollama|anthropic] "
               "[--clean] [--token-delay-ms N] [--context TOKENS] [--log FILE] [--until-killed] TASK=STEM...\n";
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  std::map<std::string, std::string> stems;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--plans")
      o.plans = value();
    else if (a == "--replies")
      o.replies = value();
    else if (a == "--clean")
      o.clean = true;
    else if (a == "--until-killed")
      o.until_killed = true;
    else if (a == "--token-delay-ms")
      o.token_delay_ms = std::stoi(value());
    else if (a == "--context")
      o.context = std::stoll(value());
    else if (a == "--log")
      o.log = value();
    else if (a == "--style") {
      const std::string s = value();
      if (s == "vllm")
        o.style = stream_style::vllm;
      else if (s == "llama_cpp")
        o.style = stream_style::llama_cpp;
      else if (s == "ollama")
        o.style = stream_style::ollama;
      else if (s == "anthropic")
        o.style = stream_style::anthropic;
      else
        usage("unknown --style " + s);
    } else if (auto eq = a.find('='); eq != std::string::npos) {
      stems[a.substr(0, eq)] = a.substr(eq + 1);
    } else {
      usage("unexpected argument " + a);
    }
  }
  for (auto& [task, stem] : stems) {
    const fs::path p = fs::path(stem).is_absolute() ? fs::path(stem) : o.plans / stem;
    o.seeds[task] = {read_file(p.string() + ".cu"), read_file(p.string() + ".yaml")};
  }
  return o;
}

std::string blocks(const std::string& source, const std::string& plan) {
  return "```cuda\n" + source + "```\n\n```yaml\n" + plan + "```\n";
}

// The kernel as a model that forgot NVRTC's headers writes it: int64_t for the index.
std::string with_int64(const std::string& source) {
  std::string s = std::regex_replace(source, std::regex("const long long i ="),
                                     "const int64_t i =", std::regex_constants::format_first_only);
  if (s == source) s = "typedef int64_t index_t;  // the seed's index type\n" + source;
  return s;
}

class replayer {
 public:
  explicit replayer(const options& o) : o_(o) {}

  scripted_reply answer(const recorded_request& req) {
    const json body = req.body_json();
    const bool anthropic = body.contains("system") || req.path.find("/messages") != std::string::npos;
    const std::string system = anthropic ? body.value("system", "") : body["messages"][0].value("content", "");
    const json& messages = body["messages"];
    const std::string first_user = anthropic ? messages[0].value("content", "") : messages[1].value("content", "");
    const bool format_repair = messages.size() > (anthropic ? 1u : 2u);
    const std::string task = match(first_user, "## Task `([^`]+)`");
    const std::string agent = match(system, "You are the (\\w+)");

    std::string text;
    std::string finish;
    const auto it = o_.seeds.find(task);
    if (it == o_.seeds.end()) {
      text = "I have no kernel for task '" + task + "'.";
    } else if (agent == "diagnoser") {
      text = diagnosis(task, first_user, format_repair);
    } else if (agent == "repairer") {
      text = "The review's failure comes from the index type; here is the kernel with it fixed.\n\n" +
             blocks("// repaired\n" + it->second.source, it->second.plan);
    } else if (agent == "optimizer") {
      text = optimized(task, first_user, it->second);
    } else {
      const int seed = std::max(1, std::atoi(match(first_user, "Seed (\\d+) of").c_str()));
      text = seed_reply(seed, it->second, format_repair, finish);
    }
    log(req, body, agent, task, format_repair, text);
    auto reply = anthropic ? anthropic_ok(text) : openai_ok(text);
    if (!finish.empty()) reply.reply->finish_reason = anthropic && finish == "length" ? "max_tokens" : finish;
    reply.token_chars = 12;
    reply.token_delay_s = o_.token_delay_ms / 1000.0;
    return reply;
  }

 private:
  std::string seed_reply(int seed, const kernel_files& k, bool format_repair, std::string& finish) {
    const std::string prose =
        "The reference computes its output element by element; one thread per element "
        "keeps the accesses coalesced.\n\n";
    const std::string source = (seed > 1 ? "// seed " + std::to_string(seed) + "\n" : std::string()) + k.source;
    if (o_.clean || format_repair) return prose + blocks(source, k.plan) + "\nEvery output element is written.\n";
    if (seed == 1) return prose + blocks(with_int64(k.source), k.plan);
    if (seed == 2) {
      // Cut off at the token limit, inside the source.
      finish = "length";
      const std::string whole = prose + blocks(source, k.plan);
      return whole.substr(0, prose.size() + 8 + source.size() / 2);
    }
    if (seed == 3) {
      std::string plan =
          std::regex_replace(k.plan, std::regex("\\bblock:"), "blok:", std::regex_constants::format_first_only);
      return prose + blocks(source, plan);
    }
    return prose + blocks(source, k.plan);
  }

  std::string diagnosis(const std::string& task, const std::string& prompt, bool format_repair) {
    bool first;
    {
      std::lock_guard lock(mu_);
      first = diagnosed_.insert(task).second;
    }
    std::string what = "the kernel does not compute what the reference does";
    std::string action = "compare each line with the reference and fix the first difference";
    if (prompt.find("int64_t") != std::string::npos) {
      what = "int64_t is not defined under NVRTC (no host headers): the index declaration does not compile";
      action = "declare the index as long long instead of int64_t";
    }
    if (first && !o_.clean && !format_repair)
      return "Root cause found.\n\n```json\n{\"diagnosis\": \"" + what + "\", \"actions\": [\"" + action + "\"]\n```\n";
    return "```json\n{\"diagnosis\": \"" + what + "\", \"actions\": [\"" + action + "\"]}\n```\n";
  }

  std::string optimized(const std::string& task, const std::string& prompt, const kernel_files& k) {
    std::string method = match(prompt, "## Method to apply: [^\\n]*\\(`([a-z0-9_]+)`");
    if (method.empty()) method = match(prompt, "## Method: `([a-z0-9_]+)`");
    if (!o_.replies.empty()) {
      const fs::path stem = o_.replies / (task + "." + method);
      if (fs::exists(stem.string() + ".cu") && fs::exists(stem.string() + ".yaml"))
        return "Applied " + method + " as the method describes.\n\n" +
               blocks(read_file(stem.string() + ".cu"), read_file(stem.string() + ".yaml"));
    }
    // The current kernel is the first ```cuda block after "## Current kernel".
    const size_t at = prompt.find("## Current kernel");
    std::string current = match(at == std::string::npos ? prompt : prompt.substr(at), "```cuda\\n([\\s\\S]*?)```");
    if (current.empty()) current = k.source;
    const std::string plan = match(at == std::string::npos ? prompt : prompt.substr(at), "```yaml\\n([\\s\\S]*?)```");
    return "I have no better kernel for " + method + "; here is the current one, annotated.\n\n" +
           blocks("// " + method + " (scripted: unchanged code)\n" + current, plan.empty() ? k.plan : plan);
  }

  void log(const recorded_request& req, const json& body, const std::string& agent, const std::string& task,
           bool format_repair, const std::string& text) {
    if (o_.log.empty()) return;
    json line = {{"agent", agent},
                 {"task", task},
                 {"format_repair", format_repair},
                 {"path", req.path},
                 {"stream", body.value("stream", false)},
                 {"input_tokens", llm_fake_server::tokens_of(body)},
                 {"output_tokens", static_cast<int64_t>((text.size() + 3) / 4)}};
    std::lock_guard lock(mu_);
    std::ofstream(o_.log, std::ios::app) << line.dump() << "\n";
  }

  const options& o_;
  std::mutex mu_;
  std::set<std::string> diagnosed_;
};

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  if (o.seeds.empty() && !o.replies.empty())
    usage("name the tasks: TASK=STEM (a kernel's path without .cu/.yaml, relative to --plans)");
  replayer r(o);
  llm_fake_server server;
  server.count_tokens();
  server.set_stream_style(o.style == stream_style::anthropic ? stream_style::vllm : o.style);
  if (o.context > 0) server.set_context_window(o.context, o.style);
  server.set_handler([&r](const recorded_request& req) { return r.answer(req); });
  std::printf("listening on 127.0.0.1:%d\n", server.port());
  std::fflush(stdout);
  if (o.until_killed) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    int sig = 0;
    sigwait(&set, &sig);
    return 0;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
