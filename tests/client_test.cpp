// The daemon's clients against a real daemon: `kernelskill serve` runs as a child
// process on loopback with a temp store and the scripted GPU worker (real NVRTC
// compiles, deterministic verdicts), and the tests drive it with the `kernelskill
// submit | status | cancel | priority | result | watch` commands and the api_client
// library, over real HTTP.

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>

#include <httplib.h>

#include "daemon/api_client.hpp"
#include "tests/support/command_output.hpp"
#include "tests/support/daemon_fixture.hpp"

namespace {

using namespace ks;
using namespace ks::testing;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string ks_bin = std::string(KS_BINARY_DIR) + "/bin/kernelskill";
const std::string softmax = std::string(KS_SOURCE_DIR) + "/examples/tasks/softmax.yaml";
const std::string gelu = std::string(KS_SOURCE_DIR) + "/examples/tasks/gelu.yaml";
const std::string swish = std::string(KS_SOURCE_DIR) + "/examples/tasks/swish.yaml";

using ks::test::command_output;
using ks::test::run_shell;

// Runs kernelskill with a clean client environment: only the variables given here
// (KS_TOKEN, KS_SERVER, …) reach it, so the tests do not depend on the caller's shell.
command_output kernelskill(const std::string& args, const std::string& env = "") {
  return run_shell("env -u KS_TOKEN -u KS_SERVER " + env + " " + ks_bin + " " + args + " 2>&1");
}

// The same with stdout on a pseudo-terminal (util-linux `script`, in bsdutils, which
// Debian always installs), so that the command draws as it would for a person.
command_output kernelskill_on_tty(const std::string& args) {
  return run_shell("env -u KS_TOKEN -u KS_SERVER script -qec '" + ks_bin + " " + args + "' /dev/null 2>&1");
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string submit_quiet(running_daemon& d, const std::string& task, const std::string& extra = "") {
  auto out = kernelskill("submit " + task + " -q --server " + d.url() + " " + extra);
  INFO(out.text);
  REQUIRE(out.status == 0);
  std::string id = first_line(out.text);
  REQUIRE(!id.empty());
  return id;
}

}  // namespace

TEST_CASE("submit, status, watch until done, result", "[client]") {
  // Reviews slow enough that watch sees the task running before it ends.
  running_daemon d({.rounds = 2, .review_ms = 500});
  std::string server = "--server " + d.url();

  auto health = d.client().health();
  REQUIRE(health.ok());
  CHECK(health->status == "ok");

  auto sub = kernelskill("submit " + softmax + " " + server);
  INFO(sub.text);
  REQUIRE(sub.status == 0);
  CHECK(contains(sub.text, "submitted softmax-"));
  // "submitted ID: STATE, …"
  std::string id = sub.text.substr(sub.text.find("softmax-"));
  id = id.substr(0, id.find(':'));

  auto table = kernelskill("status " + server);
  INFO(table.text);
  CHECK(table.status == 0);
  CHECK(contains(table.text, "ID"));
  CHECK(contains(table.text, id));

  // stdout is a pipe here: one plain line per change, then a summary, exit 0 when done.
  auto watched = kernelskill("watch " + id + " --interval 0.1 " + server);
  INFO(watched.text);
  CHECK(watched.status == 0);
  CHECK(contains(watched.text, id + " running"));
  CHECK(contains(watched.text, id + " done"));
  CHECK(contains(watched.text, "1 done"));
  CHECK(!contains(watched.text, "\x1b["));  // no terminal control codes into a pipe

  // On a terminal (a pty from util-linux's script): progress bars, redrawn in place.
  auto tty = kernelskill_on_tty("watch " + id + " " + server);
  INFO(tty.text);
  CHECK(tty.status == 0);
  CHECK(contains(tty.text, "\u2588"));   // the bar's filled part: done is a full bar
  CHECK(contains(tty.text, "\x1b[2K"));  // lines cleared before they are redrawn

  auto done = d.client().status(id);
  REQUIRE(done.ok());
  CHECK(done->task.state == "done");
  CHECK(done->task.round >= 1);
  CHECK(done->task.best_speedup > 0);
  CHECK(!done->history.empty());

  auto one = kernelskill("status " + id + " " + server);
  INFO(one.text);
  CHECK(one.status == 0);
  CHECK(contains(one.text, "state         done"));
  CHECK(contains(one.text, "best speedup by round"));

  fs::path out = d.dir() / "result";
  auto res = kernelskill("result " + id + " --out " + out.string() + " " + server);
  INFO(res.text);
  CHECK(res.status == 0);
  auto api = d.client().result_of(id);
  REQUIRE(api.ok());
  REQUIRE(!api->kernel_source.empty());
  CHECK(read_text(out / "kernel.cu") == api->kernel_source);
  // plan.yaml is the launch plan in the plan file format, which plan check reads back.
  auto plan_check = kernelskill("plan check " + (out / "plan.yaml").string() + " --task " + softmax + " --source " +
                                (out / "kernel.cu").string() + " --size cpu");
  INFO(plan_check.text);
  CHECK(plan_check.status == 0);
  CHECK(nlohmann::json::parse(read_text(out / "review.json")) == api->review);
  // The daemon exports the best kernel as a ModelNew module.
  CHECK_FALSE(api->pytorch.empty());
  CHECK(fs::exists(out / "model_new.py"));

  // The trajectory tells how it got there: a seed, reviews, and the planner's decisions.
  auto traj = d.client().trajectory(id);
  REQUIRE(traj.ok());
  bool seed = false, review = false, plan = false;
  for (auto& e : *traj) {
    seed = seed || e.kind == "seed";
    review = review || e.kind == "review";
    plan = plan || e.kind == "plan";
  }
  CHECK(seed);
  CHECK(review);
  CHECK(plan);
  REQUIRE(traj->size() >= 3);
  auto tail = d.client().trajectory(id, (*traj)[2].seq);
  REQUIRE(tail.ok());
  CHECK(tail->size() == traj->size() - 2);
}

TEST_CASE("cancel a queued task at once, a running one at its next step", "[client]") {
  // One task at a time and slow reviews: the first runs for a while, the second waits.
  // Reviews slow enough that the first task is still running while the test acts (its
  // line may run out of methods after two or three rounds).
  running_daemon d({.tasks_in_flight = 1, .rounds = 50, .review_ms = 1500});
  std::string server = "--server " + d.url();
  std::string first = submit_quiet(d, softmax);
  d.wait_for(
      first, [](const api_task& t) { return t.state == "running"; }, 60s, "running");
  std::string second = submit_quiet(d, gelu);
  CHECK(d.client().status(second)->task.state == "queued");

  auto out = kernelskill("cancel " + second + " " + server);
  INFO(out.text);
  CHECK(out.status == 0);
  CHECK(contains(out.text, second + ": cancelled"));
  CHECK(d.client().status(second)->task.state == "cancelled");

  // An ended task cannot be cancelled again: the daemon's 409, exit status 1.
  auto again = kernelskill("cancel " + second + " " + server);
  INFO(again.text);
  CHECK(again.status == 1);

  auto running = kernelskill("cancel " + first + " " + server);
  INFO(running.text);
  CHECK(running.status == 0);
  auto ended = d.wait_for(
      first, [](const api_task& t) { return t.ended(); }, 60s, "ended");
  CHECK(ended.state == "cancelled");
  CHECK(ended.round < 50);

  // watch of a cancelled task: it ended without being done, exit 5.
  auto w = kernelskill("watch " + first + " " + second + " " + server);
  INFO(w.text);
  CHECK(w.status == 5);
  CHECK(contains(w.text, "2 failed or cancelled"));

  auto unknown = kernelskill("cancel nosuchtask-000099 " + server);
  CHECK(unknown.status == 1);
}

// No ";" in test names: catch_discover_tests splits a name at it, and ctest then runs
// a filter that matches nothing, which Catch2 reports as a pass.
TEST_CASE("a raised priority runs first, and priority of a running task is refused", "[client]") {
  // Reviews slow enough that the first task is still running while the test acts (its
  // line may run out of methods after two or three rounds).
  running_daemon d({.tasks_in_flight = 1, .rounds = 50, .review_ms = 1500});
  std::string server = "--server " + d.url();
  std::string blocker = submit_quiet(d, softmax);
  d.wait_for(
      blocker, [](const api_task& t) { return t.state == "running"; }, 60s, "running");
  std::string low = submit_quiet(d, gelu);
  std::string high = submit_quiet(d, swish);  // submitted later: without a change it runs last

  auto out = kernelskill("priority " + high + " 10 " + server);
  INFO(out.text);
  CHECK(out.status == 0);
  CHECK(contains(out.text, high + ": priority 10"));
  CHECK(d.client().status(high)->task.priority == 10);

  auto refused = kernelskill("priority " + blocker + " 5 " + server);
  INFO(refused.text);
  CHECK(refused.status == 1);  // 409: it is not queued
  auto range = d.client().set_priority(low, 5000);
  REQUIRE(!range.ok());
  CHECK(range.error().http_status == 400);
  CHECK(kernelskill("priority " + low + " 5000 " + server).status == 2);  // checked before sending

  auto submitted_high = kernelskill("submit " + gelu + " --priority 7 -q " + server);
  REQUIRE(submitted_high.status == 0);
  CHECK(d.client().status(first_line(submitted_high.text))->task.priority == 7);
  REQUIRE(d.client().cancel(first_line(submitted_high.text)).ok());

  // Free the GPU: the next task to start must be the raised one, not the older one.
  REQUIRE(d.client().cancel(blocker).ok());
  auto started = d.wait_for(
      high, [](const api_task& t) { return t.state != "queued"; }, 60s, "started");
  CHECK(started.state != "cancelled");
  CHECK(d.client().status(low)->task.state == "queued");
  REQUIRE(d.client().cancel(high).ok());
  REQUIRE(d.client().cancel(low).ok());
}

TEST_CASE("a daemon with a token refuses a missing or wrong one", "[client]") {
  running_daemon d({.token = "s3cret-token"});
  std::string server = "--server " + d.url();

  auto none = kernelskill("status " + server);
  INFO(none.text);
  CHECK(none.status == 7);
  CHECK(contains(none.text, "$KS_TOKEN"));

  auto wrong = kernelskill("status " + server, "KS_TOKEN=wrong");
  INFO(wrong.text);
  CHECK(wrong.status == 7);
  auto wrong_submit = kernelskill("submit " + softmax + " " + server, "KS_TOKEN=wrong");
  CHECK(wrong_submit.status == 7);

  auto right = kernelskill("status " + server, "KS_TOKEN=s3cret-token");
  INFO(right.text);
  CHECK(right.status == 0);
  CHECK(contains(right.text, "no tasks"));  // the refused submit changed nothing

  auto other_var = kernelskill("status --token-env MY_TOKEN " + server, "MY_TOKEN=s3cret-token");
  CHECK(other_var.status == 0);
  auto unset_var = kernelskill("status --token-env MY_TOKEN " + server);
  CHECK(unset_var.status == 2);
  CHECK(contains(unset_var.text, "MY_TOKEN"));

  api_client_options o;
  o.server = d.url();
  o.token = "wrong";
  auto c = api_client::make(o);
  REQUIRE(c.ok());
  auto h = c->health();
  REQUIRE(!h.ok());
  CHECK(h.error().http_status == 401);
  CHECK(h.error().code == "unauthorized");
  CHECK(!h.message().empty());
  CHECK(d.client().health().ok());  // the fixture's client carries the right token
}

TEST_CASE("no daemon at the address: a clear error and exit status 6", "[client]") {
  int port = unused_loopback_port();
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  for (const std::string& cmd : std::vector<std::string>{"status", "status x-000001", "cancel x-000001",
                                                         "watch x-000001", "result x-000001", "submit " + softmax}) {
    auto out = kernelskill(cmd + " --server " + url);
    INFO(cmd << "\n" << out.text);
    CHECK(out.status == 6);
    CHECK(contains(out.text, "no daemon is answering at " + url));
    CHECK(contains(out.text, "kernelskill serve"));
  }
  // $KS_SERVER is the default address.
  auto env = kernelskill("status", "KS_SERVER=" + url);
  CHECK(env.status == 6);
  CHECK(contains(env.text, url));

  api_client_options o;
  o.server = url;
  auto c = api_client::make(o);
  REQUIRE(c.ok());
  auto h = c->health();
  REQUIRE(!h.ok());
  CHECK(h.error().unreachable());
  CHECK(h.error().code == "unreachable");

  CHECK(kernelskill("status --server ftp://x:1").status == 2);
  CHECK(!api_client::make({.server = "http://host:99999"}).ok());
}

TEST_CASE("the daemon's refusals reach the user with its message", "[client]") {
  running_daemon d({});
  std::string server = "--server " + d.url();
  fs::path bad = d.dir() / "bad.yaml";
  {
    std::ofstream f(bad);
    f << "name: broken\nreference:\n  torchscript: |\n    def forward(x):\n        return x\n"
         "inputs:\n  - name: x\n    shape: [four]\n";
  }
  auto out = kernelskill("submit " + bad.string() + " " + server);
  INFO(out.text);
  CHECK(out.status == 1);
  CHECK(contains(out.text, "shape"));  // the daemon names the key

  auto api = d.client().submit("name: ../../etc\n");
  REQUIRE(!api.ok());
  CHECK(api.error().http_status == 400);
  CHECK(api.error().code == "bad_request");

  auto missing = d.client().status("nosuch-000001");
  REQUIRE(!missing.ok());
  CHECK(missing.error().http_status == 404);
  // A hostile id stays one path segment: a 404, never another endpoint.
  auto traversal = d.client().status("../health");
  REQUIRE(!traversal.ok());
  CHECK(traversal.error().http_status == 404);
  auto st = kernelskill("status nosuch-000001 " + server);
  CHECK(st.status == 1);

  // A module the task names but that is not there is caught before sending.
  fs::path mod = d.dir() / "mod.yaml";
  {
    std::ofstream f(mod);
    f << "name: withmodule\nreference:\n  module: missing.pt\ninputs:\n  - name: x\n    shape: [4]\n";
  }
  auto m = kernelskill("submit " + mod.string() + " " + server);
  INFO(m.text);
  CHECK(m.status == 1);
  CHECK(contains(m.text, "missing.pt"));

  auto list = d.client().list();
  REQUIRE(list.ok());
  CHECK(list->total == 0);  // nothing refused was queued
}

TEST_CASE("base64 of a module upload", "[client]") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("foobar") == "Zm9vYmFy");
  CHECK(base64_encode(std::string("\x00\xff\xfe", 3)) == "AP/+");
}

TEST_CASE("submit uploads the .pt module a task names, relative to the task file", "[client]") {
  running_daemon d({.rounds = 1});
  // tests/data/swish_module.pt: a saved TorchScript module, forward(x) = x * sigmoid(x).
  fs::path dir = d.dir() / "tasks";
  fs::create_directories(dir);
  fs::copy_file(fs::path(KS_SOURCE_DIR) / "tests" / "data" / "swish_module.pt", dir / "swish.pt");
  {
    std::ofstream f(dir / "swish_pt.yaml");
    f << "name: swish_pt\nreference:\n  module: swish.pt\ninputs:\n"
         "  - {name: x, shape: [512, 1024], init: {kind: uniform, low: -6, high: 6}}\n";
  }
  // Run from elsewhere: the module is found next to the task file, not in the cwd.
  auto out = kernelskill("submit " + (dir / "swish_pt.yaml").string() + " --server " + d.url());
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(contains(out.text, "module " + std::to_string(fs::file_size(dir / "swish.pt")) + " bytes uploaded"));
  std::string id = out.text.substr(out.text.find("swish_pt-"));
  id = id.substr(0, id.find(':'));
  auto t = d.wait_for(
      id, [](const api_task& t) { return t.ended(); }, 120s, "ended");
  INFO(d.log());
  CHECK(t.state == "done");
}

// A KernelBench problem with weights, imported by the real CLI (the user's Python and
// PyTorch) and submitted as is: the module with its weights is uploaded, the daemon takes
// the new task keys (reference.training, parameters of kind module) and its rules coder
// exports the module's graph with the weights lifted.
TEST_CASE("an imported KernelBench problem with weights is submitted and optimised as is", "[client][kernelbench]") {
  std::string python;
  for (std::string p : {std::string(std::getenv("KS_PYTHON") ? std::getenv("KS_PYTHON") : ""),
                        std::string("/usr/bin/python3"), std::string("python3")})
    if (!p.empty() && python.empty() && run_shell(p + " -c 'import torch' 2>&1").status == 0) python = p;
  if (python.empty()) FAIL("no Python with PyTorch (scripts/setup.sh installs python3-torch)");
  running_daemon d({.rounds = 1});
  const fs::path tasks = d.dir() / "imported";
  auto imported = kernelskill("import kernelbench " +
                              (fs::path(KS_SOURCE_DIR) / "tests/data/kernelbench/good/gemm_relu_divide.py").string() +
                              " --out " + tasks.string() + " --python " + python);
  INFO(imported.text);
  REQUIRE(imported.status == 0);
  auto out = kernelskill("submit " + (tasks / "gemm_relu_divide.yaml").string() + " --server " + d.url());
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(
      contains(out.text, "module " + std::to_string(fs::file_size(tasks / "gemm_relu_divide.pt")) + " bytes uploaded"));
  std::string id = out.text.substr(out.text.find("gemm_relu_divide-"));
  id = id.substr(0, id.find(':'));
  auto t = d.wait_for(
      id, [](const api_task& t) { return t.ended(); }, 120s, "ended");
  INFO(d.log());
  CHECK(t.state == "done");
  // The problem's Python stayed here (the daemon runs no submitted Python): submit said
  // so, and a request that carries it anyway is refused, naming the field.
  CHECK(contains(out.text, "reference.kernelbench"));
  std::ifstream yaml_in(tasks / "gemm_relu_divide.yaml");
  const std::string with_source((std::istreambuf_iterator<char>(yaml_in)), {});
  REQUIRE(contains(with_source, "kernelbench:"));
  std::ifstream module_in(tasks / "gemm_relu_divide.pt", std::ios::binary);
  const std::string module_bytes((std::istreambuf_iterator<char>(module_in)), {});
  auto raw = d.client().submit(with_source, module_bytes, 0);
  REQUIRE_FALSE(raw.ok());
  CHECK(raw.error().http_status == 400);
  CHECK(contains(raw.error().message, "reference.kernelbench"));
  // The daemon's export of the best kernel has the plain interface, holds no problem
  // source, and imports; its weights come from the module the user passes.
  auto api = d.client().result_of(id);
  REQUIRE(api.ok());
  REQUIRE_FALSE(api->pytorch.empty());
  CHECK_FALSE(contains(api->pytorch, "PROBLEM_SOURCE"));
  CHECK(contains(api->pytorch, "module=None"));
  const fs::path model_new = d.dir() / "model_new.py";
  std::ofstream(model_new) << api->pytorch;
  auto check = run_shell(python + " -c \"import runpy, torch; ns = runpy.run_path('" + model_new.string() +
                         "'); m = ns['ModelNew'](module=torch.jit.load('" + (tasks / "gemm_relu_divide.pt").string() +
                         "')); print(len(m.task_parameters()))\" 2>&1");
  INFO(check.text);
  CHECK(check.status == 0);
}

// The daemon writes a best speedup JSON has no number for as "Infinity" / "NaN"
// (model/json_codec.hpp); the client library reads them as numbers. A real HTTP server on
// loopback answers as the daemon would.
TEST_CASE("the client reads non-finite and extreme speedups the daemon sends", "[client]") {
  httplib::Server server;
  server.Get(R"(/api/tasks/([^/]+))", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"id": "odd-000001", "name": "odd", "state": "running", "priority": 0,
      "best_speedup": "Infinity", "round": 2,
      "history": [{"round": 1, "best_speedup": "NaN", "reviews": 3, "unix_ms": 1},
                  {"round": 2, "best_speedup": 3.4028234663852886e38, "reviews": 5, "unix_ms": 2}]})",
                    "application/json");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { server.listen_after_bind(); });
  api_client_options o;
  o.server = "http://127.0.0.1:" + std::to_string(port);
  auto client = api_client::make(o);
  REQUIRE(client);
  auto st = client->status("odd-000001");
  server.stop();
  serving.join();
  REQUIRE(st.ok());
  CHECK(st->task.best_speedup == std::numeric_limits<double>::infinity());
  REQUIRE(st->history.size() == 2);
  CHECK(std::isnan(st->history[0].best_speedup));
  CHECK(st->history[1].best_speedup == 3.4028234663852886e38);
}
