// The real kernelskill-gpu process, started as the daemon starts it and reached over
// CAF on loopback. Where there is no GPU the worker must still start, answer, and say
// why it has no devices; on a GPU machine it must list them.

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "base/sandbox.hpp"
#include "base/secret.hpp"
#include "fleet/gpu_nodes.hpp"
#include "fleet/worker_process.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "protocol/worker_link.hpp"
#include "task/task_loader.hpp"
#include "tests/support/command_output.hpp"
#include "tests/support/gpu_skip.hpp"
#include "tests/support/recording_proxy.hpp"

using namespace ks;
using namespace std::chrono_literals;

namespace {

const std::string worker_binary = std::string(KS_BINARY_DIR) + "/bin/kernelskill-gpu";

struct daemon_config : caf::actor_system_config {
  daemon_config() {
    register_protocol(*this);
    load<caf::io::middleman>();
  }
};

using ks::test::command_output;

command_output run_command(const std::string& cmd) { return ks::test::run_shell(cmd + " 2>&1"); }

bool machine_has_gpu() {
  static int has = -1;
  if (has < 0) has = run_command(worker_binary + " --list-devices").status == 0 ? 1 : 0;
  return has == 1;
}

}  // namespace

TEST_CASE("kernelskill-gpu --list-devices lists GPUs or says plainly there are none", "[gpu_worker]") {
  auto out = run_command(worker_binary + " --list-devices");
  if (out.status == 0) {
    CHECK(out.text.find("compute capability") != std::string::npos);
    CHECK(out.text.find("GiB") != std::string::npos);
  } else {
    CHECK(out.status == 1);
    CHECK(out.text.find("no GPU available") != std::string::npos);
    CHECK(out.text.find("libcuda.so.1") != std::string::npos);
  }
}

TEST_CASE("kernelskill-gpu --help explains every option", "[gpu_worker]") {
  auto out = run_command(worker_binary + " --help");
  CHECK(out.status == 0);
  for (auto* opt : {"--list-devices", "--listen", "--device", "--run-reference", "--log-level"})
    CHECK(out.text.find(opt) != std::string::npos);
}

TEST_CASE("kernelskill-gpu rejects a malformed --listen address", "[gpu_worker]") {
  auto out = run_command(worker_binary + " --listen nonsense");
  CHECK(out.status == 2);
  CHECK(out.text.find("--listen") != std::string::npos);
  CHECK(out.text.find("HOST:PORT") != std::string::npos);
}

TEST_CASE("a worker started on loopback answers describe over the middleman", "[gpu_worker][network]") {
  worker_process_options wo;
  wo.binary = worker_binary;
  auto proc = worker_process::start(wo);
  REQUIRE(proc);
  CHECK((*proc)->port() > 0);
  CHECK((*proc)->alive());

  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto handle = connect_worker(sys, "127.0.0.1", (*proc)->port(), (*proc)->token());
  INFO((handle ? std::string() : handle.message()));
  REQUIRE(handle);
  caf::scoped_actor self{sys};
  bool answered = false;
  self->request(*handle, 10s, describe_atom::value)
      .receive(
          [&](const worker_info& info) {
            answered = true;
            CHECK(info.pid == (*proc)->pid());
            CHECK(info.version == protocol_version);
            if (machine_has_gpu()) {
              CHECK_FALSE(info.devices.empty());
              CHECK(info.driver_error.empty());
              for (auto& d : info.devices) {
                CHECK(d.cc_major >= 7);
                CHECK(d.total_memory_bytes > (1ull << 30));
              }
            } else {
              CHECK(info.devices.empty());
              CHECK(info.driver_error.find("no CUDA driver") != std::string::npos);
            }
          },
          [&](const caf::error& err) { FAIL("describe failed: " << sys.render(err)); });
  CHECK(answered);
}

TEST_CASE("destroying a worker handle ends the process, and kill -9 is noticed", "[gpu_worker]") {
  worker_process_options wo;
  wo.binary = worker_binary;
  auto a = worker_process::start(wo);
  REQUIRE(a);
  pid_t pid = (*a)->pid();
  a->reset();
  CHECK(kill(pid, 0) != 0);  // gone and reaped

  auto b = worker_process::start(wo);
  REQUIRE(b);
  ::kill((*b)->pid(), SIGKILL);
  for (int i = 0; i < 50 && (*b)->alive(); ++i) std::this_thread::sleep_for(20ms);
  CHECK_FALSE((*b)->alive());
}

TEST_CASE("a missing worker binary gives an error naming it", "[gpu_worker]") {
  worker_process_options wo;
  wo.binary = "/nonexistent/kernelskill-gpu";
  auto proc = worker_process::start(wo);
  REQUIRE_FALSE(proc);
  CHECK(proc.message().find("/nonexistent/kernelskill-gpu") != std::string::npos);
  CHECK(proc.message().find("gpus.worker_binary") != std::string::npos);
}

namespace {
gpu_discovery discover_with_unreachable_remote(caf::actor_system& sys) {
  gpu_config gc;
  gc.worker_binary = worker_binary;
  gc.remote.push_back({"127.0.0.1", 1});  // nothing listens on port 1
  return discover_gpus(sys, gc, 20);
}
}  // namespace

TEST_CASE("discover_gpus reports an unreachable remote node", "[gpu_worker][network]") {
  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto found = discover_with_unreachable_remote(sys);
  bool remote_reported = false;
  for (auto& p : found.problems)
    if (p.find("127.0.0.1:1: cannot connect") != std::string::npos) remote_reported = true;
  CHECK(remote_reported);
}

TEST_CASE("gpu: discover_gpus finds the local GPU", "[gpu_worker][network][gpu]") {
  if (!machine_has_gpu()) KS_SKIP("no GPU on this machine; this test runs on the GPU machine");
  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto found = discover_with_unreachable_remote(sys);
  REQUIRE(found.device_count() > 0);
  CHECK(found.nodes.front().name == "local");
}

TEST_CASE("discover_gpus says how to reach a GPU where there is none", "[gpu_worker][network][nogpu]") {
  if (machine_has_gpu()) KS_SKIP("this machine has a GPU: the no-GPU message is not exercised here");
  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto found = discover_with_unreachable_remote(sys);
  CHECK(found.device_count() == 0);
  auto msg = no_gpu_message(found);
  CHECK(msg.find("kernelskill-gpu --listen") != std::string::npos);
  CHECK(msg.find("gpus:") != std::string::npos);
}

namespace {

// Whether describe is answered through `handle`.
bool describes(caf::actor_system& sys, const gpu_worker_actor& handle) {
  caf::scoped_actor self{sys};
  bool answered = false;
  self->request(handle, 10s, describe_atom::value)
      .receive([&](const worker_info&) { answered = true; }, [&](const caf::error&) {});
  return answered;
}

// A raw TCP connection to the worker's port, as an attacker would open one.
int raw_connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{20, 0};  // no read below waits longer
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Everything the worker sends until it closes the connection (or 20 s pass).
std::string read_until_closed(int fd, bool* closed) {
  std::string got;
  char buf[256];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      continue;
    }
    *closed = n == 0 || errno == ECONNRESET;
    return got;
  }
}

}  // namespace

TEST_CASE("a worker with a token serves only peers that prove they know it", "[gpu_worker][network][auth]") {
  worker_process_options wo;
  wo.binary = worker_binary;
  wo.token = "the-right-token-4f9a";
  auto proc = worker_process::start(wo);
  REQUIRE(proc);
  const uint16_t port = (*proc)->port();
  daemon_config cfg;
  caf::actor_system sys{cfg};

  auto good = connect_worker(sys, "127.0.0.1", port, "the-right-token-4f9a");
  INFO((good ? std::string() : good.message()));
  REQUIRE(good);
  CHECK(describes(sys, *good));

  auto wrong = connect_worker(sys, "127.0.0.1", port, "the-wrong-token");
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.message(), Catch::Contains("refused the token"));
  CHECK_THAT(wrong.message(), !Catch::Contains("the-wrong-token"));

  auto none = connect_worker(sys, "127.0.0.1", port, "");
  REQUIRE_FALSE(none);
  CHECK_THAT(none.message(), Catch::Contains("asks for a token"));

  // A peer that answers the challenge with anything but the proof, then speaks CAF as
  // if it had passed: refused (a 0) and closed; nothing it sent is read as a message.
  int fd = raw_connect(port);
  char hello[36];
  REQUIRE(::recv(fd, hello, sizeof hello, MSG_WAITALL) == 36);
  CHECK(std::string(hello, 4) == "KSW2");
  std::string forged = "KSW2" + std::string(64, 'x') + std::string(512, '\0');
  ::send(fd, forged.data(), forged.size(), MSG_NOSIGNAL);
  bool closed = false;
  std::string answer = read_until_closed(fd, &closed);
  ::close(fd);
  CHECK(closed);
  CHECK(answer == std::string(1, '\0'));

  // A peer that says nothing is closed within the handshake's 5 s (20 s allowed here).
  const auto t0 = std::chrono::steady_clock::now();
  fd = raw_connect(port);
  closed = false;
  answer = read_until_closed(fd, &closed);
  ::close(fd);
  CHECK(closed);
  CHECK(answer.size() == 36);  // the challenge, and nothing after it
  CHECK(std::chrono::steady_clock::now() - t0 < 20s);

  // Twenty silent peers at once do not keep the right one out.
  std::vector<int> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(raw_connect(port));
  std::this_thread::sleep_for(200ms);
  auto again = connect_worker(sys, "127.0.0.1", port, "the-right-token-4f9a");
  INFO((again ? std::string() : again.message()));
  REQUIRE(again);
  CHECK(describes(sys, *again));
  for (int f : silent) ::close(f);
  CHECK((*proc)->alive());
}

// What CAF sends first on every connection it serves (its BASP handshake names the
// application): seen in clear, CAF has the connection.
const std::string caf_greeting = "generic-caf-app";

TEST_CASE("a peer that proves the token, then speaks in clear, is closed before CAF reads a byte",
          "[gpu_worker][network][auth][tls]") {
  // An older peer (the handshake, then CAF in clear), or one that stole a proof: the
  // worker expects TLS after the proof, so what follows never reaches CAF.
  const std::string token = "the-right-token-4f9a";
  worker_process_options wo;
  wo.binary = worker_binary;
  wo.token = token;
  auto proc = worker_process::start(wo);
  REQUIRE(proc);
  int fd = raw_connect((*proc)->port());
  char hello[36];
  REQUIRE(::recv(fd, hello, sizeof hello, MSG_WAITALL) == 36);
  REQUIRE(std::string(hello, 4) == "KSW2");
  const std::string cw(hello + 4, 32), cp = random_bytes(32);
  const std::string proof = "KSW2" + cp + hmac_sha256(token, "kernelskill-gpu client\n" + cw + cp);
  ::send(fd, proof.data(), proof.size(), MSG_NOSIGNAL);
  char verdict[33];
  REQUIRE(::recv(fd, verdict, sizeof verdict, MSG_WAITALL) == 33);
  REQUIRE(verdict[0] == '\1');  // the proof passed
  const std::string clear = std::string(64, '\0') + "review_request with KS_CLEAR_KERNEL" + std::string(400, '\0');
  ::send(fd, clear.data(), clear.size(), MSG_NOSIGNAL);
  bool closed = false;
  std::string answer = read_until_closed(fd, &closed);
  ::close(fd);
  CHECK(closed);
  // At most TLS's alert (a record of type 21), never CAF's greeting.
  CHECK((answer.empty() || static_cast<unsigned char>(answer[0]) == 21));
  CHECK(answer.find(caf_greeting) == std::string::npos);
  // The worker is well and serves the right peer.
  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto good = connect_worker(sys, "127.0.0.1", (*proc)->port(), token);
  INFO((good ? std::string() : good.message()));
  REQUIRE(good);
  CHECK(describes(sys, *good));
}

TEST_CASE("a worker from before encrypted links is refused, saying so", "[gpu_worker][network][auth][tls]") {
  // What such a worker sends first: the handshake's old magic and a challenge. It
  // would go on in clear after the proof, so a peer with a token goes no further.
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t len = sizeof a;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  std::string received;
  std::thread old_worker([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    const std::string hello = "KSW1" + std::string(32, 'c');
    ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
    bool closed = false;
    received = read_until_closed(fd, &closed);
    ::close(fd);
  });
  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto old = connect_worker(sys, "127.0.0.1", ntohs(a.sin_port), "the-right-token-4f9a", 10);
  old_worker.join();
  ::close(listener);
  REQUIRE_FALSE(old);
  CHECK_THAT(old.message(), Catch::Contains("older kernelskill-gpu") && Catch::Contains("not encrypted"));
  CHECK(received.empty());  // not even a proof was sent to it
}

namespace {

// A review whose kernel, reference and candidate id carry `marker`.
review_request marked_review(const std::string& marker) {
  auto t = load_task(std::string(KS_SOURCE_DIR) + "/examples/tasks/swish.yaml");
  REQUIRE(t);
  review_request req;
  req.request_id = 44;
  req.task = *t;
  req.task.name = "capture";
  req.task.torchscript = "def forward(x):\n    # " + marker + "_reference\n    return x * torch.sigmoid(x)\n";
  req.cand.task = req.task.name;
  req.cand.source = "extern \"C\" __global__ void " + marker + "_kernel(float* y, const float* x) {}\n";
  req.cand.id = marker + "_candidate";
  req.options.size = "cpu";
  req.options.timeout_s = 60;
  return req;
}

// What a recording proxy between `kernelskill-gpu --listen --worker` (with `token`, or
// none) and a real connect saw of a review carrying `marker`, and the review's answer.
struct captured_review {
  std::string wire;
  review_result answer;
  worker_info described;
  // Text the worker sent back: the review's message (or its device, when a GPU
  // answered without one), and describe's driver error (or the GPU's name).
  std::string answer_text() const { return answer.message.empty() ? answer.device : answer.message; }
  std::string described_text() const {
    return described.devices.empty() ? described.driver_error : described.devices.front().name;
  }
};

// The seccomp mode of process `pid` (2: a filter), from /proc.
int seccomp_mode(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Seccomp:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

captured_review capture_review(const std::string& token, const std::string& marker) {
  worker_process_options wo;
  wo.binary = worker_binary;
  wo.token = token;
  auto proc = worker_process::start(wo);
  REQUIRE(proc);
  ks::testing::recording_proxy proxy((*proc)->port());
  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto worker = connect_worker(sys, "127.0.0.1", proxy.port(), token);
  INFO((worker ? std::string() : worker.message()));
  REQUIRE(worker);
  captured_review out;
  caf::scoped_actor self{sys};
  self->request(*worker, 10s, describe_atom::value)
      .receive([&](worker_info& info) { out.described = std::move(info); },
               [&](const caf::error& err) { FAIL("describe failed: " << sys.render(err)); });
  self->request(*worker, 120s, marked_review(marker))
      .receive([&](review_result& r) { out.answer = std::move(r); },
               [&](const caf::error& err) { FAIL("no review: " << sys.render(err)); });
  CHECK(proxy.connections() == 1);
  // The worker's relay ran under its seccomp filter (no sockets but Unix ones).
  if (probe_sandbox().seccomp) CHECK(seccomp_mode((*proc)->pid()) == 2);
  out.wire = proxy.captured();
  return out;
}

}  // namespace

TEST_CASE("a capture of a worker link with a token shows no kernel, reference or result",
          "[gpu_worker][network][auth][tls]") {
  // The real worker (sandboxed, as the daemon starts it), a real connect, and a proxy
  // between them that records every byte: what someone on the network would read.
  const std::string marker = "KS_CAPTURE_3b9d71";
  auto sealed = capture_review("capture-token-5e1b9c07", marker);
  // The answers came back through the proxy (a worker without a GPU says so).
  CHECK(sealed.answer.request_id == 44);
  REQUIRE(sealed.answer_text().size() >= 8);
  REQUIRE(sealed.described_text().size() >= 8);
  CHECK(sealed.wire.size() > 1000);
  CHECK(sealed.wire.find(marker) == std::string::npos);
  CHECK(sealed.wire.find(sealed.answer_text()) == std::string::npos);
  CHECK(sealed.wire.find(sealed.described_text()) == std::string::npos);
  CHECK(sealed.wire.find(caf_greeting) == std::string::npos);

  // The same without a token (loopback only, in clear): the capture shows everything,
  // so the checks above can fail.
  auto open = capture_review("", marker);
  CHECK(open.wire.find(marker + "_kernel") != std::string::npos);
  CHECK(open.wire.find(marker + "_reference") != std::string::npos);
  CHECK(open.wire.find(open.answer_text()) != std::string::npos);
  CHECK(open.wire.find(open.described_text()) != std::string::npos);
  CHECK(open.wire.find(caf_greeting) != std::string::npos);
}

TEST_CASE("a daemon with a token refuses a worker that asks for none", "[gpu_worker][network][auth]") {
  worker_process_options wo;
  wo.binary = worker_binary;
  wo.token = "";  // a worker anyone on this machine may use
  auto proc = worker_process::start(wo);
  REQUIRE(proc);
  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto with = connect_worker(sys, "127.0.0.1", (*proc)->port(), "some-token");
  REQUIRE_FALSE(with);
  CHECK_THAT(with.message(), Catch::Contains("does not ask for a token"));
  auto without = connect_worker(sys, "127.0.0.1", (*proc)->port(), "");
  INFO((without ? std::string() : without.message()));
  REQUIRE(without);
  CHECK(describes(sys, *without));
}

TEST_CASE("kernelskill-gpu does not listen beyond loopback without a token", "[gpu_worker][auth]") {
  auto open = run_command("env -u KS_WORKER_TOKEN " + worker_binary + " --listen 0.0.0.0:0");
  CHECK(open.status == 2);
  CHECK_THAT(open.text, Catch::Contains("not a loopback address") && Catch::Contains("token"));
  // A token file others may read is refused, and the token is never printed.
  const auto file = std::filesystem::temp_directory_path() / ("ks-token-" + std::to_string(::getpid()));
  std::ofstream(file) << "file-token-7d1c\n";
  ::chmod(file.c_str(), 0644);
  auto loose = run_command(worker_binary + " --listen 0.0.0.0:0 --token-file " + file.string());
  CHECK(loose.status == 2);
  CHECK_THAT(loose.text, Catch::Contains("chmod 600"));
  CHECK_THAT(loose.text, !Catch::Contains("file-token-7d1c"));
  std::filesystem::remove(file);
  // The help says where the token comes from.
  auto help = run_command(worker_binary + " --help");
  CHECK_THAT(help.text, Catch::Contains("--token-file") && Catch::Contains("KS_WORKER_TOKEN"));
}

namespace {

// A review of `task` (any candidate: the reference is what is under test), answered
// within `wait`.
std::optional<review_result> review_once(caf::actor_system& sys, const gpu_worker_actor& worker, const task_spec& task,
                                         std::chrono::seconds wait) {
  review_request req;
  req.request_id = 7;
  req.task = task;
  req.cand.task = task.name;
  // A whole candidate (a GELU over the same x): on a GPU the plan is checked before the
  // reference runs, so a candidate without one would be refused before the reference.
  const std::string plans = std::string(KS_SOURCE_DIR) + "/examples/plans/";
  std::ifstream src(plans + "gelu_vec4.cu");
  req.cand.source.assign(std::istreambuf_iterator<char>(src), {});
  auto plan = load_launch_plan(plans + "gelu_vec4.yaml");
  REQUIRE(plan);
  req.cand.plan = *plan;
  req.cand.id = "c0ffee";
  req.options.size = "cpu";
  req.options.timeout_s = 60;
  caf::scoped_actor self{sys};
  std::optional<review_result> out;
  self->request(worker, wait, req)
      .receive([&](review_result& r) { out = std::move(r); },
               [&](const caf::error& err) { FAIL_CHECK("no review: " << sys.render(err)); });
  return out;
}

task_spec swish_with(const std::string& name, const std::string& torchscript) {
  auto t = load_task(std::string(KS_SOURCE_DIR) + "/examples/tasks/swish.yaml");
  REQUIRE(t);
  t->name = name;
  t->torchscript = torchscript;
  return *t;
}

}  // namespace

TEST_CASE("the worker stops a reference that loops forever or allocates without end, and says why",
          "[gpu_worker][network][limits]") {
  worker_process_options wo;
  wo.binary = worker_binary;
  wo.reference_cpu_seconds = 2;
  wo.reference_memory_mb = 2048;
  wo.reference_wall_seconds = 60;
  auto proc = worker_process::start(wo);
  REQUIRE(proc);
  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto worker = connect_worker(sys, "127.0.0.1", (*proc)->port(), (*proc)->token());
  REQUIRE(worker);

  const auto endless = swish_with("endless",
                                  "def forward(x):\n"
                                  "    y = x\n"
                                  "    for i in range(2000000000):\n"
                                  "        y = y * 1.0\n"
                                  "    return y\n");
  auto r = review_once(sys, *worker, endless, 120s);
  REQUIRE(r);
  CHECK(r->status == review_status::internal_error);
  CHECK_THAT(r->message, Catch::Contains("\"endless\"") && Catch::Contains("2 s of CPU time") &&
                             Catch::Contains("--reference-cpu-seconds"));
  // The verdict is kept: the next review of the task is answered without running it.
  const auto t0 = std::chrono::steady_clock::now();
  auto again = review_once(sys, *worker, endless, 120s);
  REQUIRE(again);
  CHECK(again->message == r->message);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);

  // 6.4 GB asked for under a 2048 MiB limit.
  const auto greedy = swish_with("greedy", "def forward(x):\n    return torch.zeros([40000, 40000]) + x.sum()\n");
  auto g = review_once(sys, *worker, greedy, 120s);
  REQUIRE(g);
  CHECK(g->status == review_status::internal_error);
  CHECK_THAT(g->message, Catch::Contains("\"greedy\"") && Catch::Contains("more than 2048 MiB of memory"));

  // A reference that computes passes the check: what answers is the review itself
  // (here, without a GPU, that this worker cannot review; on a GPU machine a verdict).
  auto ok = review_once(sys, *worker, swish_with("plain", "def forward(x):\n    return x * torch.sigmoid(x)\n"), 120s);
  REQUIRE(ok);
  CHECK_THAT(ok->message, !Catch::Contains("was stopped"));
  // The worker is well.
  CHECK((*proc)->alive());
  CHECK(describes(sys, *worker));
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One review's round trip through `worker`, in ms.
double review_round_trip_ms(caf::actor_system& sys, const gpu_worker_actor& worker, const review_request& req) {
  caf::scoped_actor self{sys};
  const auto t0 = std::chrono::steady_clock::now();
  self->request(worker, 60s, req)
      .receive([&](review_result&) {}, [&](const caf::error& err) { FAIL("no review: " << sys.render(err)); });
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// What encryption costs a review's round trip on loopback: the same stand-in worker
// (fake_gpu_worker, which answers at once), reached with a token (TLS) and without
// one (in clear: what every message cost before links were encrypted; the token's
// handshake is per connection, not per message). Interleaved, medians. Run by hand:
//   build/bin/gpu_worker_test "[link_cost]"
TEST_CASE("encryption's cost on a loopback review round trip", "[.][link_cost]") {
  daemon_config cfg;
  caf::actor_system sys{cfg};
  struct side {
    std::string name;
    std::unique_ptr<worker_process> proc;
    gpu_worker_actor handle;
  };
  std::vector<side> sides;
  for (std::string token : {std::string("cost-token-0123456789ab"), std::string()}) {
    worker_process_options wo;
    wo.binary = std::string(KS_BINARY_DIR) + "/bin/fake_gpu_worker";
    wo.token = token;
    auto proc = worker_process::start(wo);
    REQUIRE(proc);
    auto handle = connect_worker(sys, "127.0.0.1", (*proc)->port(), token);
    REQUIRE(handle);
    sides.push_back({token.empty() ? "clear (no token)" : "TLS (token)", std::move(*proc), *handle});
  }
  // A connection's setup (each a connection of its own: a fresh actor system).
  for (auto& side : sides) {
    std::vector<double> ms;
    for (int i = 0; i < 15; ++i) {
      daemon_config c;
      caf::actor_system fresh{c};
      const auto t0 = std::chrono::steady_clock::now();
      auto h = connect_worker(fresh, "127.0.0.1", side.proc->port(), side.proc->token());
      REQUIRE(h);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-30s %-18s median %8.3f ms  (%zu connections)\n", "connect (handshakes)", side.name.c_str(),
                median_of(ms), ms.size());
  }
  auto small = marked_review("KS_COST");
  small.cand.source += std::string(4000, ' ');  // a kernel's usual few KiB
  auto large = small;
  large.task.module_bytes = std::string(8 << 20, 'm');  // a saved module of 8 MiB
  struct shape {
    std::string name;
    const review_request* req;
    int rounds;
  };
  for (const shape& s : {shape{"review (~5 KiB)", &small, 400}, shape{"review with an 8 MiB module", &large, 30}}) {
    std::vector<std::vector<double>> ms(sides.size());
    for (int i = 0; i < s.rounds; ++i)
      for (size_t k = 0; k < sides.size(); ++k) ms[k].push_back(review_round_trip_ms(sys, sides[k].handle, *s.req));
    for (size_t k = 0; k < sides.size(); ++k) {
      std::sort(ms[k].begin(), ms[k].end());
      std::printf("%-30s %-18s median %8.3f ms  p10 %8.3f  p90 %8.3f  (%d round trips)\n", s.name.c_str(),
                  sides[k].name.c_str(), median_of(ms[k]), ms[k][ms[k].size() / 10], ms[k][ms[k].size() * 9 / 10],
                  s.rounds);
    }
  }
}
