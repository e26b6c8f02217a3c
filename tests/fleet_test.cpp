// GPU nodes across machines, with real processes over TCP on loopback: each node is
// the real node agent (`kernelskill-gpu --listen`), started independently of the
// daemon side, its workers the stand-in ks-scripted-gpu (tests/support/node_process.hpp). The
// daemon side is the real fleet code: remote pools, the review dispatcher, and
// `kernelskill run` itself. Nodes are killed (-9), stopped (SIGSTOP) and started
// again; what must hold is that every review is answered with its candidate's
// verdict, a review lost with its node is answered by another one, a node out of the
// rotation returns when it is back, and nothing is counted against a candidate or a
// method for a node's fault. No assertion depends on how fast anything runs: waits
// are for events, with generous deadlines.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <nlohmann/json.hpp>

#include "base/content_hash.hpp"
#include "fleet/node_link.hpp"
#include "fleet/remote_pool.hpp"
#include "fleet/review_dispatcher.hpp"
#include "fleet/worker_process.hpp"
#include "store/store.hpp"
#include "tests/support/daemon_process.hpp"
#include "tests/support/node_process.hpp"
#include "tests/support/recording_proxy.hpp"

using namespace ks;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using ks::testing::node_options;
using ks::testing::node_process;
using ks::testing::wait_until;

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct fleet_config : caf::actor_system_config {
  fleet_config() {
    register_protocol(*this);
    load<caf::io::middleman>();
  }
};

// Quick to notice a stopped node, generous for everything else.
remote_pool_options pool_for(const node_process& n, int32_t device = 0) {
  remote_pool_options o;
  o.host = "127.0.0.1";
  o.port = static_cast<uint16_t>(n.port());
  o.device = device;
  o.review_margin_s = 60;
  o.node_timeout_s = 2;
  o.heartbeat_s = 0.2;
  return o;
}

// A candidate the stand-in compiles with NVRTC; `verdict` as ks-scripted-gpu reads it.
review_request scripted_review(uint64_t id, const std::string& task, const std::string& verdict = "ok",
                               double timeout_s = 60) {
  review_request r;
  r.request_id = id;
  r.task.name = task;
  r.task.torchscript = "def forward(x):\n    return x\n";
  r.task.inputs = {{"x", {8}, "float32", {}}};
  r.cand.id = "cand" + std::to_string(id);
  r.cand.task = task;
  r.cand.source = "// verdict: " + verdict + "\n// candidate " + std::to_string(id) +
                  "\nextern \"C\" __global__ void k(float* y) { y[threadIdx.x] = 1.f; }\n";
  r.options.trials = 1;
  r.options.time = false;
  r.options.profile = false;
  r.options.timeout_s = timeout_s;
  return r;
}

template <class Handle>
review_result ask(caf::actor_system& sys, const Handle& to, const review_request& req) {
  caf::scoped_actor self{sys};
  review_result out;
  self->request(to, 300s, req)
      .receive([&](review_result& r) { out = std::move(r); },
               [&](caf::error& err) { FAIL("review " << req.request_id << " failed: " << sys.render(err)); });
  return out;
}

// The worker pid in a stand-in's `device` ("MODEL/N pid P").
std::string worker_pid(const review_result& r) { return r.device.substr(r.device.rfind(' ') + 1); }

review_meter::pool_reading reading(const review_meter& m, size_t i) { return m.read().at(i); }

dispatch_pool remote(caf::actor_system& sys, const node_process& n, const std::string& cls,
                     const remote_pool_options& o) {
  return {spawn_remote_pool(sys, o), remote_device_name(o), cls};
}

struct two_nodes {
  fleet_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<review_meter> meter;
  reviewer_actor dispatcher;

  void start(const node_process& a, const node_process& b, double hold_limit_s = 600) {
    dispatcher_options o;
    o.pools = {remote(sys, a, "", pool_for(a)), remote(sys, b, "", pool_for(b))};
    meter = std::make_shared<review_meter>(std::vector<std::string>{o.pools[0].name, o.pools[1].name});
    o.meter = meter;
    o.probe_min_s = 0.2;
    o.probe_max_s = 1;
    o.hold_limit_s = hold_limit_s;
    dispatcher = spawn_review_dispatcher(sys, o);
  }
  ~two_nodes() { caf::anon_send_exit(dispatcher, caf::exit_reason::user_shutdown); }
};

}  // namespace

TEST_CASE("a node agent serves each of its devices as its own pool", "[fleet]") {
  node_process n({.devices = "0,1"});
  REQUIRE(n.start());
  fleet_config cfg;
  caf::actor_system sys{cfg};
  auto link = open_node_link(sys, "127.0.0.1", static_cast<uint16_t>(n.port()), "", 30);
  REQUIRE(link.ok());
  CHECK(link->info.pid == n.pid());
  CHECK(link->info.driver_error.empty());  // this machine has no driver, but the node serves devices
  REQUIRE(link->info.devices.size() == 2);
  CHECK(link->info.devices[0].ordinal == 0);
  CHECK(link->info.devices[1].ordinal == 1);

  auto p0 = spawn_remote_pool(sys, pool_for(n, 0));
  auto p1 = spawn_remote_pool(sys, pool_for(n, 1));
  auto r0 = ask(sys, p0, scripted_review(1, "t"));
  auto r1 = ask(sys, p1, scripted_review(2, "t"));
  CHECK(r0.status == review_status::ok);
  CHECK(r1.status == review_status::ok);
  CHECK_THAT(r0.device, Contains("/0 pid"));
  CHECK_THAT(r1.device, Contains("/1 pid"));
  // A worker process per device, neither of them the agent.
  CHECK(worker_pid(r0) != worker_pid(r1));
  CHECK(worker_pid(r0) != std::to_string(n.pid()));
  caf::anon_send_exit(p0, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(p1, caf::exit_reason::user_shutdown);
}

TEST_CASE("a node agent stopped with SIGTERM takes its workers with it", "[fleet]") {
  node_process n({.devices = "0,1"});
  REQUIRE(n.start());
  fleet_config cfg;
  caf::actor_system sys{cfg};
  auto p0 = spawn_remote_pool(sys, pool_for(n, 0));
  auto p1 = spawn_remote_pool(sys, pool_for(n, 1));
  const pid_t w0 = std::stoi(worker_pid(ask(sys, p0, scripted_review(1, "t"))));
  const pid_t w1 = std::stoi(worker_pid(ask(sys, p1, scripted_review(2, "t"))));
  CHECK(::kill(w0, 0) == 0);
  CHECK(::kill(w1, 0) == 0);
  CHECK(n.terminate() == 0);
  // The agent reaped them before it left: no such processes any more.
  CHECK(::kill(w0, 0) != 0);
  CHECK(::kill(w1, 0) != 0);
  caf::anon_send_exit(p0, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(p1, caf::exit_reason::user_shutdown);
}

TEST_CASE("a plain worker is refused as a node, with a message saying what to start", "[fleet]") {
  fleet_config cfg;
  caf::actor_system sys{cfg};
  worker_process_options wo;
  wo.binary = (ks::testing::bin_dir() / "kernelskill-gpu").string();
  auto worker = worker_process::start(wo);
  REQUIRE(worker.ok());
  auto link = open_node_link(sys, "127.0.0.1", (*worker)->port(), (*worker)->token(), 30);
  REQUIRE_FALSE(link.ok());
  CHECK_THAT(link.message(), Contains("not a KernelSkill node agent"));
  CHECK_THAT(link.message(), Contains("kernelskill-gpu --listen"));
  auto nothing = open_node_link(sys, "127.0.0.1", 1, "", 30);
  REQUIRE_FALSE(nothing.ok());
  CHECK_THAT(nothing.message(), Contains("127.0.0.1:1: cannot connect"));
}

// The node agent's port takes the same token handshake as a worker's
// (protocol/worker_link.hpp): without the token nothing reaches the agent.
TEST_CASE("a node agent with a token serves only peers that prove it", "[fleet][token]") {
  node_process n({.token = "node-token-7c1e5a90"});
  REQUIRE(n.start());
  fleet_config cfg;
  caf::actor_system sys{cfg};
  auto good = open_node_link(sys, "127.0.0.1", static_cast<uint16_t>(n.port()), "node-token-7c1e5a90", 30);
  REQUIRE(good.ok());
  CHECK(good->info.pid == n.pid());
  auto wrong = open_node_link(sys, "127.0.0.1", static_cast<uint16_t>(n.port()), "not-the-node-token", 30);
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.message(), Contains(n.address()) && Contains("token"));
  CHECK_THAT(wrong.message(), !Contains("node-token-7c1e5a90"));
  auto none = open_node_link(sys, "127.0.0.1", static_cast<uint16_t>(n.port()), "", 30);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.message(), Contains("token"));
  // A daemon with a token refuses a node that asks for none (anyone could use it).
  node_process open_node;
  REQUIRE(open_node.start());
  auto unasked = open_node_link(sys, "127.0.0.1", static_cast<uint16_t>(open_node.port()), "some-token-0123456789", 30);
  REQUIRE_FALSE(unasked.ok());
  CHECK_THAT(unasked.message(), Contains("token"));
  // Reviews go through the authenticated link.
  auto po = pool_for(n, 0);
  po.token = "node-token-7c1e5a90";
  auto pool = spawn_remote_pool(sys, po);
  CHECK(ask(sys, pool, scripted_review(1, "t")).status == review_status::ok);
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}

// What crosses the network between the daemon and a node: with a token, TLS keyed by
// it (protocol/link_tls.hpp); a recording proxy between a remote pool and the agent
// reads no kernel, and without a token (loopback only) it reads the kernel.
TEST_CASE("a capture of a node link with a token shows no kernel text", "[fleet][token][tls]") {
  const std::string marker = "KS_NODE_CAPTURE_c81f";
  for (const std::string token : {"node-token-7c1e5a90", ""}) {
    INFO("token: " << (token.empty() ? "none" : "set"));
    node_process n({.token = token});
    REQUIRE(n.start());
    ks::testing::recording_proxy proxy(static_cast<uint16_t>(n.port()));
    fleet_config cfg;
    caf::actor_system sys{cfg};
    auto po = pool_for(n, 0);
    po.port = proxy.port();
    po.token = token;
    auto pool = spawn_remote_pool(sys, po);
    auto req = scripted_review(1, "t");
    req.cand.source += "// " + marker + "\n";
    auto r = ask(sys, pool, req);
    CHECK(r.status == review_status::ok);
    REQUIRE(r.device.size() > 8);  // the stand-in's model and pid, sent back by the node
    const std::string wire = proxy.captured();
    CHECK(proxy.connections() >= 1);
    if (token.empty()) {
      CHECK(wire.find(marker) != std::string::npos);
      CHECK(wire.find(r.device) != std::string::npos);
    } else {
      CHECK(wire.size() > 1000);
      CHECK(wire.find(marker) == std::string::npos);
      CHECK(wire.find(r.device) == std::string::npos);
    }
    caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("a node's worker that aborts is answered crashed for that candidate alone, and restarted", "[fleet]") {
  node_process n;
  REQUIRE(n.start());
  fleet_config cfg;
  caf::actor_system sys{cfg};
  auto pool = spawn_remote_pool(sys, pool_for(n));
  auto before = ask(sys, pool, scripted_review(1, "t"));
  REQUIRE(before.status == review_status::ok);
  auto aborted = ask(sys, pool, scripted_review(2, "t", "abort"));
  CHECK(aborted.status == review_status::crashed);
  CHECK_THAT(aborted.message, Contains("killed by signal 6"));
  auto after = ask(sys, pool, scripted_review(3, "t"));
  CHECK(after.status == review_status::ok);
  CHECK(worker_pid(after) != worker_pid(before));  // a fresh worker
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}

TEST_CASE("a review that hangs on a node times out for that candidate alone, and the node goes on", "[fleet]") {
  node_process n({.review_margin_s = 1});
  REQUIRE(n.start());
  fleet_config cfg;
  caf::actor_system sys{cfg};
  auto pool = spawn_remote_pool(sys, pool_for(n));
  auto hung = ask(sys, pool, scripted_review(1, "t", "hang", 0.5));
  CHECK(hung.status == review_status::timed_out);  // the candidate's verdict, not a node fault
  CHECK_THAT(hung.message, Contains("killed and restarted"));
  auto next = ask(sys, pool, scripted_review(2, "t"));
  CHECK(next.status == review_status::ok);
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}

namespace {

// Sends review 1 through the dispatcher (both idle: it goes to the first pool, a),
// waits until a's worker has begun it, does `fault` to a, and checks that the review
// is answered all the same (by b: the loss is not the candidate's) and a is out.
void lose_a_review_on_a(two_nodes& f, const node_process& a, const std::function<void()>& fault) {
  caf::scoped_actor self{f.sys};
  auto pending = self->request(f.dispatcher, 300s, scripted_review(1, "t"));
  REQUIRE(wait_until(120, [&] { return a.reviews_begun() >= 1; }));
  fault();
  std::move(pending).receive(
      [&](review_result& r) {
        CHECK(r.status == review_status::ok);
        CHECK(r.request_id == 1);
      },
      [&](caf::error& err) { FAIL(f.sys.render(err)); });
  CHECK(reading(*f.meter, 0).lost == 1);
  CHECK(reading(*f.meter, 0).reviews == 0);
  CHECK_FALSE(reading(*f.meter, 0).up);
  CHECK(reading(*f.meter, 1).reviews == 1);
}

// Waits until a is back in the rotation, then sends 4 reviews at once (ids from
// first_id): all are answered, and a takes some of them.
void check_a_takes_work_again(two_nodes& f, uint64_t first_id) {
  REQUIRE(wait_until(60, [&] { return reading(*f.meter, 0).up; }));
  caf::scoped_actor self{f.sys};
  std::vector<decltype(self->request(f.dispatcher, 300s, review_request{}))> batch;
  for (uint64_t id = first_id; id < first_id + 4; ++id)
    batch.push_back(self->request(f.dispatcher, 300s, scripted_review(id, "t")));
  for (auto& h : batch)
    std::move(h).receive([&](review_result& r) { CHECK(r.status == review_status::ok); },
                         [&](caf::error& err) { FAIL(f.sys.render(err)); });
  CHECK(reading(*f.meter, 0).reviews >= 1);
}

}  // namespace

TEST_CASE(
    "a node killed during a review: another node answers it, and the dead node is out until it "
    "is back",
    "[fleet]") {
  node_process a({.review_ms = 600000});  // every review on a is still running when it is killed
  node_process b;
  REQUIRE(a.start());
  REQUIRE(b.start());
  two_nodes f;
  f.start(a, b);
  const int port = a.port();
  lose_a_review_on_a(f, a, [&] { a.kill9(); });
  // While a is down everything goes to b, and nothing waits for a.
  for (uint64_t id = 2; id <= 4; ++id)
    CHECK(ask(f.sys, f.dispatcher, scripted_review(id, "t")).status == review_status::ok);
  CHECK(reading(*f.meter, 0).reviews == 0);
  CHECK(reading(*f.meter, 1).reviews == 4);
  CHECK(b.reviews_begun() == 4);

  // a comes back on its port: it rejoins the rotation and takes work again.
  node_process a2({.port = port});
  REQUIRE(a2.start());
  check_a_takes_work_again(f, 5);
  CHECK(a2.reviews_begun() >= 1);
  CHECK(reading(*f.meter, 0).reviews + reading(*f.meter, 1).reviews == 8);
}

TEST_CASE(
    "a node that stops answering during a review: another node answers it, and the node is "
    "used again once it answers",
    "[fleet]") {
  node_process a({.review_ms = 6000});  // still running when the node is stopped
  node_process b;
  REQUIRE(a.start());
  REQUIRE(b.start());
  two_nodes f;
  f.start(a, b);
  // The machine hangs: the connection stays open, nothing answers.
  lose_a_review_on_a(f, a, [&] { a.stop(); });
  a.resume();
  check_a_takes_work_again(f, 2);
}

TEST_CASE("a task is reviewed on one GPU model only, and waits for it when its devices are gone", "[fleet]") {
  node_process a({.gpu_name = "Model A"});
  node_process b({.gpu_name = "Model B"});
  REQUIRE(a.start());
  REQUIRE(b.start());
  fleet_config cfg;
  caf::actor_system sys{cfg};
  dispatcher_options o;
  for (auto* n : {&a, &b}) {
    auto link = open_node_link(sys, "127.0.0.1", static_cast<uint16_t>(n->port()), "", 30);
    REQUIRE(link.ok());
    REQUIRE(link->info.devices.size() == 1);
    auto po = pool_for(*n);
    po.expected = link->info.devices[0];
    o.pools.push_back(remote(sys, *n, device_class(link->info.devices[0]), po));
  }
  CHECK(o.pools[0].device_class == "Model A (sm_90)");
  o.hold_limit_s = 2;
  o.probe_min_s = 0.2;
  o.probe_max_s = 1;
  auto d = spawn_review_dispatcher(sys, o);
  caf::scoped_actor self{sys};
  // t1's first review finds both idle and takes model A; t2's, sent after it, finds
  // model A busy with it and takes model B. From then on each stays with its model.
  std::vector<std::pair<std::string, decltype(self->request(d, 300s, review_request{}))>> batch;
  uint64_t id = 0;
  batch.emplace_back("t1", self->request(d, 300s, scripted_review(++id, "t1")));
  batch.emplace_back("t2", self->request(d, 300s, scripted_review(++id, "t2")));
  for (int k = 0; k < 3; ++k)
    for (const char* t : {"t2", "t1"}) batch.emplace_back(t, self->request(d, 300s, scripted_review(++id, t)));
  for (auto& [task, h] : batch)
    std::move(h).receive(
        [&](review_result& r) {
          INFO(task << " reviewed on " << r.device);
          CHECK(r.status == review_status::ok);
          CHECK_THAT(r.device, Contains(task == "t1" ? "Model A/" : "Model B/"));
        },
        [&](caf::error& err) { FAIL(sys.render(err)); });
  // Model A's only node is gone: t1 waits for it (it is not sent to model B), then is
  // told why; t2 goes on.
  a.kill9();
  auto waited = ask(sys, d, scripted_review(++id, "t1"));
  CHECK(waited.status == review_status::internal_error);
  CHECK_THAT(waited.message, Contains("Model A (sm_90)"));
  CHECK(ask(sys, d, scripted_review(++id, "t2")).status == review_status::ok);
  caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
}

TEST_CASE("a node that was not reachable at start is tried again and joins when it answers", "[fleet]") {
  int port = 0;
  {
    node_process probe;  // a port that was free a moment ago
    REQUIRE(probe.start());
    port = probe.port();
  }
  fleet_config cfg;
  caf::actor_system sys{cfg};
  dispatcher_options o;
  o.late_nodes = {{"127.0.0.1", static_cast<uint16_t>(port)}};
  o.remote.node_timeout_s = 2;
  o.probe_min_s = 0.2;
  o.probe_max_s = 1;
  o.meter = std::make_shared<review_meter>(std::vector<std::string>{});
  auto d = spawn_review_dispatcher(sys, o);
  caf::scoped_actor self{sys};
  auto pending = self->request(d, 300s, scripted_review(1, "t"));
  node_process late({.port = port});
  REQUIRE(late.start());
  std::move(pending).receive([&](review_result& r) { CHECK(r.status == review_status::ok); },
                             [&](caf::error& err) { FAIL(sys.render(err)); });
  auto pools = o.meter->read();
  REQUIRE(pools.size() == 1);
  CHECK(pools[0].name == "127.0.0.1:" + std::to_string(port) + "/0");
  CHECK(pools[0].reviews == 1);
  caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
}

// ===========================================================================
// `kernelskill run` across two nodes, one of them killed in the middle.

namespace {

struct run_result {
  int status = -1;
  std::string log;
};

// Starts `kernelskill run CONFIG`, calls `during` once (while it runs), waits for it.
run_result run_kernelskill(const fs::path& config, const fs::path& log, const std::function<void()>& during) {
  const std::string bin = (ks::testing::bin_dir() / "kernelskill").string();
  std::vector<std::string> args = {bin, "run", config.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  run_result out;
  if (rc != 0) return out;
  during();
  int ws = 0;
  waitpid(pid, &ws, 0);
  out.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  out.log = ss.str();
  return out;
}

}  // namespace

TEST_CASE(
    "kernelskill run across two nodes finishes every task when one is killed mid-run, and "
    "records nothing against a method for it",
    "[fleet][run]") {
  // Their devices report 66 SMs: the rules coder writes for the GPUs found.
  node_process a({.review_ms = 600000, .sms = 66});  // a's reviews are in flight until it is killed
  node_process b({.review_ms = 50, .sms = 66});
  REQUIRE(a.start());
  REQUIRE(b.start());
  std::random_device rd;
  const fs::path dir =
      fs::temp_directory_path() / ("ks-fleet-run-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(dir);
  const fs::path src = KS_SOURCE_DIR;
  const std::vector<std::string> tasks = {"softmax", "gelu"};
  {
    std::ofstream cfg(dir / "run.yaml");
    cfg << "name: fleet-run\n"
        << "tasks: [" << (src / "examples/tasks/softmax.yaml").string() << ", "
        << (src / "examples/tasks/gelu.yaml").string() << "]\n"
        << "gpus:\n"
        << "  local: none\n"
        << "  remote: [\"" << a.address() << "\", \"" << b.address() << "\"]\n"
        << "budgets: {seeds: 2, rounds: 2, repair_attempts: 1, tasks_in_flight: 2}\n"
        << "review: {trials: 2}\n"
        << "memory: {path: " << (dir / "memory").string() << "}\n"
        << "output: {dir: " << (dir / "out").string() << "}\n";
  }
  auto run = run_kernelskill(dir / "run.yaml", dir / "run.log", [&] {
    // Kill a while its first review runs.
    if (wait_until(240, [&] { return a.reviews_begun() >= 1; })) a.kill9();
  });
  INFO("kernelskill run's log:\n" << run.log);
  CHECK_FALSE(a.running());
  REQUIRE(run.status == 0);
  CHECK_THAT(run.log, Contains("lost with its node"));
  CHECK_THAT(run.log, Contains("out of the rotation"));
  CHECK_THAT(run.log, Contains("graph for 66 SMs"));

  // Every task, once, with a correct kernel.
  std::ifstream sj(dir / "out" / "summary.json");
  auto summary = nlohmann::json::parse(sj);
  REQUIRE(summary["tasks"].size() == tasks.size());
  std::set<std::string> seen;
  std::map<std::string, uint32_t> reviews;
  for (auto& t : summary["tasks"]) {
    seen.insert(t["task"].get<std::string>());
    CHECK(t["success"].get<bool>());
    reviews[t["task"]] = t["reviews"].get<uint32_t>();
  }
  CHECK(seen == std::set<std::string>(tasks.begin(), tasks.end()));

  auto memory = store::open(dir / "memory");
  REQUIRE(memory.ok());
  for (const auto& task : tasks) {
    INFO(task);
    auto traj = (*memory)->read_trajectory(task);
    REQUIRE(traj.ok());
    uint32_t ran = 0;
    for (const auto& e : *traj) {
      if (e.kind != "review") continue;
      // No review was lost to the line: every verdict is the candidate's own.
      CHECK(e.status != review_status::internal_error);
      if (e.phases.total_s() > 0) ++ran;
    }
    // Every review the task counts ran once and is in its trajectory once: the one
    // lost with a, answered by b, is not there twice.
    CHECK(ran == reviews[task]);
  }
  // Every failure in the experience is a candidate's failure in a trajectory.
  auto exp = (*memory)->read_experience();
  REQUIRE(exp.ok());
  for (const auto& rec : *exp) {
    if (rec.correct) continue;
    auto traj = (*memory)->read_trajectory(rec.task);
    REQUIRE(traj.ok());
    bool judged_failure = false;
    for (const auto& e : *traj)
      if (e.kind == "review" && e.method == rec.method && e.status != review_status::ok &&
          e.status != review_status::internal_error)
        judged_failure = true;
    CHECK(judged_failure);
  }
  memory->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// ===========================================================================
// `kernelskill serve` with two nodes: its metrics follow each device out of the
// rotation and back.

namespace {

std::string http_get(const ks::testing::daemon_process& d, const std::string& path) {
  httplib::Client c(d.host(), d.port());
  c.set_read_timeout(30, 0);
  auto r = c.Get(path.c_str());
  return r && r->status == 200 ? r->body : "";
}

// Submits examples/tasks/NAME.yaml and waits until it has ended; its final state.
std::string run_task(const ks::testing::daemon_process& d, const std::string& name) {
  std::ifstream in(fs::path(KS_SOURCE_DIR) / "examples" / "tasks" / (name + ".yaml"));
  std::stringstream yaml;
  yaml << in.rdbuf();
  httplib::Client c(d.host(), d.port());
  c.set_read_timeout(30, 0);
  auto r = c.Post("/api/tasks", yaml.str(), "application/yaml");
  REQUIRE(r);
  REQUIRE(r->status == 201);
  const std::string id = nlohmann::json::parse(r->body)["id"];
  std::string state;
  wait_until(240, [&] {
    auto t = c.Get(("/api/tasks/" + id).c_str());
    if (t && t->status == 200) state = nlohmann::json::parse(t->body)["state"];
    return state == "done" || state == "failed" || state == "cancelled";
  });
  return state;
}

}  // namespace

TEST_CASE(
    "kernelskill serve reviews on its nodes, and its metrics follow a device out of the "
    "rotation and back",
    "[fleet][serve]") {
  node_process a;
  node_process b;
  REQUIRE(a.start());
  REQUIRE(b.start());
  const std::string dev_a = a.address() + "/0", dev_b = b.address() + "/0";
  ks::testing::daemon_process d({.remote_nodes = {a.address(), b.address()}, .with_gpu = false});
  REQUIRE(!d.start().empty());
  INFO("the daemon's log:\n" << d.log());
  auto metrics = [&] { return http_get(d, "/metrics"); };
  CHECK(nlohmann::json::parse(http_get(d, "/api/health"))["gpus"] == 2);
  CHECK_THAT(metrics(), Contains("ks_gpu_up{device=\"" + dev_a + "\"} 1"));
  CHECK_THAT(metrics(), Contains("ks_gpu_up{device=\"" + dev_b + "\"} 1"));
  CHECK(run_task(d, "softmax") == "done");

  // a goes away while idle: the next task's first review, sent to it (both idle, a
  // first), comes back unsent, a leaves the rotation, and b reviews the task.
  const int port = a.port();
  a.kill9();
  CHECK(run_task(d, "gelu") == "done");
  const std::string after_kill = metrics();
  CHECK_THAT(after_kill, Contains("ks_gpu_up{device=\"" + dev_a + "\"} 0"));
  CHECK_THAT(after_kill, Contains("ks_gpu_up{device=\"" + dev_b + "\"} 1"));
  CHECK_THAT(after_kill, Contains("ks_gpu_reviews_lost_total{device=\"" + dev_a + "\"} 0"));

  // a is back on its port: the daemon's probes find it.
  node_process a2({.port = port});
  REQUIRE(a2.start());
  CHECK(wait_until(120, [&] { return metrics().find("ks_gpu_up{device=\"" + dev_a + "\"} 1") != std::string::npos; }));
  CHECK(d.terminate() == 0);
}

TEST_CASE(
    "a daemon whose only node is not up yet keeps its tasks queued, and runs them once the node "
    "answers",
    "[fleet][serve]") {
  int port = 0;
  {
    node_process probe;  // a port that was free a moment ago
    REQUIRE(probe.start());
    port = probe.port();
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  ks::testing::daemon_process d({.remote_nodes = {address}, .with_gpu = false});
  REQUIRE(!d.start().empty());
  httplib::Client c(d.host(), d.port());
  c.set_read_timeout(30, 0);
  std::ifstream in(fs::path(KS_SOURCE_DIR) / "examples" / "tasks" / "gelu.yaml");
  std::stringstream yaml;
  yaml << in.rdbuf();
  auto r = c.Post("/api/tasks", yaml.str(), "application/yaml");
  REQUIRE(r);
  REQUIRE(r->status == 201);
  const std::string id = nlohmann::json::parse(r->body)["id"];
  auto state = [&] {
    auto t = c.Get(("/api/tasks/" + id).c_str());
    return t && t->status == 200 ? nlohmann::json::parse(t->body)["state"].get<std::string>() : "";
  };
  // The daemon has tried the node and failed (twice: after start and once more), and
  // the task has not started: there is no device to review it.
  auto tries = [&] {
    const std::string log = d.log();
    size_t n = 0;
    for (size_t at = log.find(address + ": cannot connect"); at != std::string::npos;
         at = log.find(address + ": cannot connect", at + 1))
      ++n;
    return n;
  };
  INFO("the daemon's log:\n" << d.log());
  REQUIRE(wait_until(120, [&] { return tries() >= 2; }));
  CHECK(state() == "queued");
  node_process late({.port = port});
  REQUIRE(late.start());
  CHECK(wait_until(240, [&] { return state() == "done"; }));
  CHECK(late.reviews_begun() >= 1);
  CHECK(d.terminate() == 0);
}

// A module larger than a part (1 KiB here, 256 MiB in use) reaches a node's device in
// parts ahead of its reviews (CAF carries no message of 4 GiB or more), and the node's
// worker reviews the whole module (its size and digest): the first review, the next
// (by digest alone), and one after the node was restarted (a fresh link holds nothing:
// the parts go again).
TEST_CASE("a large module reaches a node in parts and its reviews name it by digest", "[fleet]") {
  node_process n;
  REQUIRE(n.start());
  fleet_config cfg;
  caf::actor_system sys{cfg};
  auto o = pool_for(n);
  o.module_part_bytes = 1024;
  auto pool = spawn_remote_pool(sys, o);
  std::string module(5000, '\0');
  for (size_t i = 0; i < module.size(); ++i) module[i] = static_cast<char>(i * 31 + i / 97);
  auto req = scripted_review(1, "big");
  req.task.module_bytes = module;
  const std::string whole = "(module of 5000 bytes, sha256 " + sha256_hex(module) + ")";
  auto first = ask(sys, pool, req);
  CHECK(first.status == review_status::ok);
  CHECK_THAT(first.message, Contains(whole));
  req.request_id = 2;
  req.cand.source += "// again\n";
  auto second = ask(sys, pool, req);
  CHECK_THAT(second.message, Contains(whole));
  n.kill9();
  REQUIRE(n.start());
  req.request_id = 3;
  req.cand.source += "// after a restart\n";
  review_result third;
  for (int i = 0; i < 50 && third.status != review_status::ok; ++i) {
    caf::scoped_actor self{sys};
    self->request(pool, 300s, req)
        .receive([&](review_result& r) { third = std::move(r); },
                 [&](caf::error&) { std::this_thread::sleep_for(200ms); });
  }
  CHECK(third.status == review_status::ok);
  CHECK_THAT(third.message, Contains(whole));
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
}
