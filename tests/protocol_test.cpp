// Every protocol message crosses a real CAF middleman link on loopback and must
// arrive equal to what was sent. Each sample sets every field to a non-default value,
// so a field missing from an inspect() overload shows up as an inequality.

#include <catch2/catch.hpp>

#include <chrono>
#include <limits>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "base/content_hash.hpp"
#include "protocol/protocol.hpp"
#include "protocol/refusal_log.hpp"
#include "protocol/wire_safe.hpp"
#include "protocol/worker_link.hpp"

using namespace ks;
using namespace std::chrono_literals;

namespace {

struct loopback_config : caf::actor_system_config {
  loopback_config() {
    register_protocol(*this);
    load<caf::io::middleman>();
    set("scheduler.max-threads", 2);
  }
};

distribution_spec sample_distribution() { return {"uniform", 0.5, 2.0, -3.0, 3.0, 7.0}; }

tensor_spec sample_tensor(const std::string& name) { return {name, {16384, 4096}, "bfloat16", sample_distribution()}; }

task_spec sample_task() {
  task_spec t;
  t.name = "layernorm";
  t.description = "LayerNorm over the last dim";
  t.torchscript = "def forward(x, w, b):\n    return torch.layer_norm(x, [4096], w, b)\n";
  t.module_bytes = std::string("PK\0\x01\xff binary", 13);
  t.module_path = "/tmp/ln.pt";
  t.inputs = {sample_tensor("x")};
  t.parameters = {sample_tensor("w"), sample_tensor("b")};
  t.tolerance = {1e-3, 2e-3};
  t.seed = 0xfeedfacecafebeefull;
  t.sizes["cpu"]["x"] = {64, 128};
  t.sizes["cpu"]["w"] = {128};
  t.kernelbench = {"class Model:\n    pass\n", "inner", {{"x", "x", ""}, {"eps", "", "1e-05"}}};
  return t;
}

launch_plan sample_plan() {
  launch_plan p;
  p.constants = {{"BLOCK", "256"}, {"N", "x.numel"}};
  p.scratch = {{"partial", {"ceil_div(N, BLOCK)"}, "float32", "zeros"}};
  p.outputs = {{"out", {"x.shape[0]", "x.shape[1]"}, "float16", "none"}};
  plan_step k;
  k.kind = "kernel";
  k.name = "ln_kernel";
  k.grid = {"ceil_div(N, BLOCK)", "1", "1"};
  k.block = {"BLOCK", "1", "1"};
  k.shared_mem = "BLOCK * 4";
  k.args = {{"tensor", "x", ""}, {"tensor", "out", ""}, {"int", "N", "int64"}, {"float", "1e-5", "float32"}};
  plan_step l;
  l.kind = "library";
  l.name = "aten::matmul";
  l.args = {{"tensor", "x", ""}, {"tensor", "w", ""}};
  l.outputs = {"tmp"};
  l.attrs = {{"alpha", "1.0"}};
  p.steps = {l, k};
  return p;
}

candidate sample_candidate() {
  candidate c;
  c.id = "c0ffee";
  c.task = "layernorm";
  c.source = "extern \"C\" __global__ void ln_kernel(const float* x, float* y) {}\n";
  c.compile_options = {"--use_fast_math", "-DVEC=4"};
  c.plan = sample_plan();
  c.origin = "optimize:vectorize_loads";
  c.parent_id = "beef";
  c.round = 7;
  c.recipe = {{"template", "elementwise"}, {"vector_width", "4"}};
  return c;
}

review_options sample_options() { return {3, false, false, 12.5, 40.0, "cpu", "cpu"}; }

review_request sample_review_request() { return {42, sample_task(), sample_candidate(), sample_options()}; }

timing_stats sample_timing(double base) { return {base, base * 1.1, base * 0.9, base * 1.5, base * 0.01, 111}; }

profile_metrics sample_profile() {
  return {{{"dram_throughput_pct", 91.5}, {"achieved_occupancy_pct", 62.25}}, 3, 0.75};
}

review_result sample_review_result() {
  review_result r;
  r.request_id = 42;
  r.candidate_id = "c0ffee";
  r.status = review_status::incorrect;
  r.message = "output 0 differs at [3, 7]";
  r.diagnostics = {{12, 5, "error", "identifier \"foo\" is undefined"}};
  r.compile_log = "kernel.cu(12): error: identifier \"foo\" is undefined";
  r.trials_run = 5;
  r.trials_passed = 4;
  r.max_abs_error = 0.25;
  r.max_rel_error = 0.5;
  r.candidate_time = sample_timing(0.1);
  r.reference_time = sample_timing(0.3);
  r.speedup = 3.0;
  r.profile = sample_profile();
  r.resources = {{"ln_kernel", 40, 1024, 16, 1024}};
  r.flags = {"no_custom_kernel", "speedup_above_threshold"};
  r.device = "gpu0/0: NVIDIA H200";
  r.phases = {0.125, 0.5, 0.25, 0.75, 0.0625, 1.75};
  return r;
}

code_features sample_features() { return {"c0ffee", "reduction", {{"vector_loads", 1.0}, {"shared_tiles", 2.0}}}; }

optimization_plan sample_optimization_plan() {
  optimization_plan p;
  p.candidate_id = "c0ffee";
  p.bottleneck_class = "memory_bandwidth";
  p.ranked = {{"vectorize_loads", 0.9, {"dram_ge_80", "streaming"}, {{"dram", 91.0}}}};
  p.vetoed = {{"smem_tiling", "kernel streams without reuse"}};
  p.chosen = "vectorize_loads";
  p.rationale = "DRAM throughput 91% >= 80% and the kernel streams without reuse";
  return p;
}

repair_plan sample_repair_plan() {
  return {"c0ffee", "out-of-bounds read in the tail", {"add bounds check", "revert vec4"}};
}

trajectory_entry sample_trajectory_entry() {
  trajectory_entry e;
  e.task = "layernorm";
  e.seq = 9;
  e.unix_ms = 1764435712000;
  e.round = 3;
  e.kind = "review";
  e.candidate_id = "c0ffee";
  e.parent_id = "beef";
  e.method = "vectorize_loads";
  e.status = review_status::timed_out;
  e.speedup = 1.75;
  e.summary = "timed out after 60 s";
  e.metrics = {{"dram_throughput_pct", 55.0}};
  return e;
}

device_info sample_device() { return {1, "NVIDIA H200", 9, 0, 150'000'000'000ull, 132, 1980}; }

worker_info sample_worker() {
  return {"gpu-node-3", 4242, protocol_version, 13000, "", {sample_device(), sample_device()}};
}

// A remote echo: replies with the very message it received.
caf::behavior echo(caf::event_based_actor* self) {
  self->set_default_handler(caf::reflect);
  return {[](caf::unit_t) {}};
}

struct loopback {
  loopback_config server_cfg;
  loopback_config client_cfg;
  caf::actor_system server{server_cfg};
  caf::actor_system client{client_cfg};
  caf::actor local;
  caf::actor remote;

  loopback() {
    local = server.spawn(echo);
    auto port = server.middleman().publish(local, 0, "127.0.0.1", true);
    REQUIRE(port);
    auto handle = client.middleman().remote_actor("127.0.0.1", *port);
    REQUIRE(handle);
    remote = *handle;
  }

  // An actor_system's destructor waits for its actors: stop the echo first.
  ~loopback() {
    caf::anon_send_exit(local, caf::exit_reason::user_shutdown);
    local = nullptr;
    remote = nullptr;
  }

  template <class T>
  void round_trip(const T& sent) {
    caf::scoped_actor self{client};
    bool arrived = false;
    // Generous: this checks correctness, and CI machines can be busy.
    self->request(remote, 60s, sent)
        .receive(
            [&](const T& got) {
              arrived = true;
              CHECK(got == sent);
            },
            [&](const caf::error& err) { FAIL("round trip failed: " << client.render(err)); });
    CHECK(arrived);
  }
};

}  // namespace

TEST_CASE("samples differ from default-constructed messages", "[protocol]") {
  // Guards the round-trip test: a sample equal to the default would hide a missing field.
  CHECK_FALSE(sample_task() == task_spec{});
  CHECK_FALSE(sample_candidate() == candidate{});
  CHECK_FALSE(sample_review_result() == review_result{});
  CHECK_FALSE(sample_trajectory_entry() == trajectory_entry{});
  CHECK_FALSE(sample_worker() == worker_info{});
}

TEST_CASE("every protocol message crosses a loopback middleman link unchanged", "[protocol][network]") {
  loopback link;
  link.round_trip(sample_distribution());
  link.round_trip(sample_tensor("x"));
  link.round_trip(tolerance_spec{1e-2, 3e-2});
  link.round_trip(sample_task());
  link.round_trip(plan_arg{"float", "0.5 * x.shape[1]", "float64"});
  link.round_trip(sample_plan().steps[1]);
  link.round_trip(sample_plan().scratch[0]);
  link.round_trip(sample_plan());
  link.round_trip(sample_candidate());
  link.round_trip(std::vector<candidate>{sample_candidate(), sample_candidate()});
  link.round_trip(review_status::crashed);
  link.round_trip(sample_options());
  link.round_trip(sample_review_request());
  link.round_trip(compile_diagnostic{3, 14, "warning", "unused variable"});
  link.round_trip(kernel_resources{"k", 255, 48 * 1024, 64, 256});
  link.round_trip(sample_timing(2.5));
  link.round_trip(sample_profile());
  link.round_trip(sample_review_result());
  link.round_trip(sample_features());
  link.round_trip(sample_optimization_plan().ranked[0]);
  link.round_trip(sample_optimization_plan().vetoed[0]);
  link.round_trip(sample_optimization_plan());
  link.round_trip(sample_repair_plan());
  link.round_trip(sample_trajectory_entry());
  link.round_trip(std::vector<trajectory_entry>{sample_trajectory_entry()});
  link.round_trip(ks_error{"unavailable", "worker gpu0 is restarting", "gpu_pool/0"});
  link.round_trip(generate_request{sample_task(), 6});
  link.round_trip(
      diagnose_request{sample_task(), sample_candidate(), sample_review_result(), {sample_trajectory_entry()}});
  link.round_trip(repair_request{sample_task(),
                                 sample_candidate(),
                                 sample_repair_plan(),
                                 sample_review_result(),
                                 {sample_candidate()},
                                 {sample_trajectory_entry()}});
  link.round_trip(feature_request{sample_candidate(), sample_review_result()});
  link.round_trip(plan_request{
      sample_task(), sample_candidate(), sample_review_result(), sample_features(), {sample_trajectory_entry()}});
  link.round_trip(optimize_request{sample_task(),
                                   sample_candidate(),
                                   sample_optimization_plan(),
                                   sample_review_result(),
                                   sample_features(),
                                   {sample_trajectory_entry()}});
  link.round_trip(task_progress{"softmax", "optimizing", 3, 11, 1.7, "abc123", "round 3: vectorize_loads"});
  link.round_trip(task_outcome{"softmax", true, "round budget spent", sample_candidate(), sample_review_result(), 15,
                               40, 1, 12000, 3400, 0.25, 812.5});
  link.round_trip(sample_device());
  link.round_trip(sample_worker());
}

TEST_CASE("a large message (a 64 MiB module) crosses the link", "[protocol][network]") {
  loopback link;
  auto task = sample_task();
  std::string big(64u << 20, '\x5a');
  big[12345] = '\0';
  task.module_bytes = std::move(big);
  link.round_trip(task);
}

TEST_CASE("review_status names are stable", "[protocol]") {
  CHECK(std::string(to_string(review_status::ok)) == "ok");
  CHECK(std::string(to_string(review_status::compile_error)) == "compile_error");
  CHECK(std::string(to_string(review_status::timed_out)) == "timed_out");
  CHECK(std::string(to_string(review_status::internal_error)) == "internal_error");
}

TEST_CASE("a review with infinite or NaN numbers crosses the link once made wire-safe", "[protocol][network]") {
  // CAF 0.17 loops forever serializing an infinity (protocol/wire_safe.hpp); a verifier
  // that finds a never-written output reports max_abs_error = inf. Without
  // make_wire_safe this round trip fails (seen: the reply never comes).
  review_result r = sample_review_result();
  r.status = review_status::incorrect;
  r.max_abs_error = std::numeric_limits<double>::infinity();
  r.max_rel_error = std::numeric_limits<double>::quiet_NaN();
  r.candidate_time.stddev_ms = -std::numeric_limits<double>::infinity();
  r.profile.values["dram_throughput_pct"] = std::numeric_limits<double>::quiet_NaN();
  r.profile.values["sm_throughput_pct"] = 42.0;
  make_wire_safe(r);
  CHECK(r.max_abs_error == std::numeric_limits<double>::max());
  CHECK(r.max_rel_error == std::numeric_limits<double>::max());
  CHECK(r.candidate_time.stddev_ms == -std::numeric_limits<double>::max());
  CHECK(r.profile.values.count("dram_throughput_pct") == 0);
  CHECK(r.profile.values.at("sm_throughput_pct") == 42.0);
  loopback link;
  link.round_trip(r);
}

namespace {

// Connects from `from` to 127.0.0.1:port, reads the worker's challenge and leaves
// without the proof: a refused peer.
void refused_peer(uint16_t port, const std::string& from) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  char hello[36];
  ::recv(fd, hello, sizeof hello, MSG_WAITALL);
  ::close(fd);
}

size_t lines_with(const std::vector<std::string>& lines, const std::string& part) {
  size_t n = 0;
  for (const auto& l : lines) n += l.find(part) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("a flood of refused peers writes a line per address and a count, not a line each",
          "[protocol][network][refusals]") {
  // Issue 44: each refused connection wrote a warning of its own.
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(10000);
  spdlog::default_logger()->sinks().push_back(sink);
  set_refusal_log_interval(std::chrono::seconds(5));
  loopback_config cfg;
  caf::actor_system sys{cfg};
  auto door = sys.spawn([]() -> caf::behavior { return {[](int) {}}; });
  auto port =
      publish_guarded(sys, caf::actor_cast<caf::strong_actor_ptr>(door), {}, "127.0.0.1", 0, "a-token-of-twenty-chars");
  REQUIRE(port);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) refused_peer(*port, "127.0.0.1");
  for (int i = 0; i < 20; ++i) refused_peer(*port, "127.0.0.2");
  REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(4000));  // all in one interval
  std::this_thread::sleep_for(std::chrono::milliseconds(500));                       // the handshake threads are done
  auto lines = sink->last_formatted();
  INFO(lines.size() << " lines; the first: " << (lines.empty() ? "" : lines.front()));
  CHECK(lines_with(lines, "closed the connection without proving the token") == 2);  // one per address
  CHECK(lines_with(lines, "refused 127.0.0.1:") == 1);
  CHECK(lines_with(lines, "refused 127.0.0.2:") == 1);
  // The next interval: the counts in one line, and the next refusal logged again.
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(5500));
  refused_peer(*port, "127.0.0.1");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  lines = sink->last_formatted();
  CHECK(lines_with(lines, "refused 218 more connection(s) in the last 5 s, not logged: 127.0.0.1 199, 127.0.0.2 19") ==
        1);
  CHECK(lines_with(lines, "closed the connection without proving the token") == 3);
  CHECK(lines.size() <= 6);
  anon_send_exit(door, caf::exit_reason::user_shutdown);
  spdlog::default_logger()->sinks().pop_back();
  set_refusal_log_interval(std::chrono::seconds(60));
}

namespace {

// Connects to 127.0.0.1:port from `from`, reads the worker's greeting, and answers
// with `magic`, a challenge and a proof that is wrong.
void wrong_proof(uint16_t port, const std::string& from, const std::string& magic) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  char hello[36];
  REQUIRE(::recv(fd, hello, sizeof hello, MSG_WAITALL) == 36);
  const std::string reply = magic + std::string(32, 'p') + std::string(32, 'x');
  ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
  char verdict = 1;
  CHECK(::recv(fd, &verdict, 1, MSG_WAITALL) == 1);
  CHECK(verdict == 0);
  ::close(fd);
}

}  // namespace

TEST_CASE("the worker's log says why a peer was refused", "[protocol][network][refusals]") {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
  spdlog::default_logger()->sinks().push_back(sink);
  loopback_config cfg;
  caf::actor_system sys{cfg};
  auto door = sys.spawn([]() -> caf::behavior { return {[](int) {}}; });
  auto port =
      publish_guarded(sys, caf::actor_cast<caf::strong_actor_ptr>(door), {}, "127.0.0.1", 0, "a-token-of-twenty-chars");
  REQUIRE(port);
  // One address each: the log writes an address's first refusal of a minute.
  refused_peer(*port, "127.0.0.3");                             // closes after the greeting, as a KSW1 daemon does
  wrong_proof(*port, "127.0.0.4", "KSW2");                      // a wrong token
  wrong_proof(*port, "127.0.0.5", "KSW1");                      // an older peer's handshake
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the handshake threads are done
  auto lines = sink->last_formatted();
  INFO(lines.size() << " lines");
  for (const auto& l : lines) INFO(l);
  CHECK(lines_with(lines, "refused 127.0.0.3:") == 1);
  CHECK(lines_with(lines,
                   "closed the connection without proving the token (a KernelSkill from before "
                   "encrypted links does so: run the same version on both sides)") == 1);
  CHECK(lines_with(lines, "refused 127.0.0.4:") == 1);
  CHECK(lines_with(lines, "did not prove the token: its proof is wrong") == 1);
  CHECK(lines_with(lines, "refused 127.0.0.5:") == 1);
  CHECK(lines_with(lines, "before encrypted links (KSW1)") == 1);
  anon_send_exit(door, caf::exit_reason::user_shutdown);
  spdlog::default_logger()->sinks().pop_back();
}

TEST_CASE("refusal_log: at most max_lines lines an interval, and memory for max_peers addresses", "[refusals]") {
  std::vector<std::string> out;
  refusal_log log(
      std::chrono::hours(1), 3, [&](const std::string& l) { out.push_back(l); }, 5);
  for (int i = 0; i < 10; ++i)
    for (int k = 0; k < 4; ++k) log.refused("10.0.0." + std::to_string(i), "10.0.0." + std::to_string(i) + ":1", "why");
  // Three addresses logged; the others (and the repeats) counted, in memory for five.
  CHECK(out.size() == 3);
  CHECK(out[0] == "refused 10.0.0.0:1: why");
  log.set_interval(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  log.refused("10.0.0.0", "10.0.0.0:2", "why");
  REQUIRE(out.size() == 5);
  CHECK(out[3] ==
        "refused 37 more connection(s) in the last 0.001 s, not logged: 10.0.0.4 4, 10.0.0.3 4, 10.0.0.2 3, "
        "10.0.0.1 3, 10.0.0.0 3, 20 from addresses not told apart");
  CHECK(out[4] == "refused 10.0.0.0:2: why");
}

TEST_CASE("shared bytes go on the wire exactly as a string of them", "[protocol]") {
  // Written from the shared buffer without a copy, yet byte for byte what a
  // std::string would be: a peer built before the change reads them as it always did.
  loopback_config cfg;
  caf::actor_system sys{cfg};
  std::string text("PK\x03\x04\0 weights \xff", 16);
  for (const std::string& s : {std::string(), text, std::string(300, 'w')}) {
    std::vector<char> as_string, as_shared;
    std::string copy = s;
    shared_bytes shared(s);
    caf::binary_serializer a{sys, as_string}, b{sys, as_shared};
    REQUIRE_FALSE(a(copy));
    REQUIRE_FALSE(b(shared));
    CHECK(as_string == as_shared);
    shared_bytes back;
    caf::binary_deserializer in{sys, as_string};
    REQUIRE_FALSE(in(back));
    CHECK(back == s);
  }
}

// The worker's side of a module sent in parts (protocol/module_parts.hpp): parts are
// taken in order and the whole is checked against its digest; anything else is refused,
// naming why, and what was assembled is dropped (the sender starts over); the modules
// kept stay within the budget, the last one used always kept.
TEST_CASE("a module store assembles parts in order, checks the digest and keeps within its budget", "[protocol]") {
  auto parts_of = [](const std::string& m, size_t n) {
    std::vector<module_part> out;
    const shared_bytes all(m);
    for (size_t off = 0; off < m.size(); off += n) out.push_back({all.sha256_hex(), off, m.size(), all.slice(off, n)});
    return out;
  };
  const std::string a(3000, 'a'), b(2500, 'b'), c(100, 'c');
  module_store store(4000);
  auto pa = parts_of(a, 1024);
  REQUIRE(pa.size() == 3);
  CHECK(pa[2].bytes.size() == 3000 - 2048);
  CHECK(pa[0].bytes.sha256_hex() == sha256_hex(std::string(1024, 'a')));  // a slice hashes its own bytes
  CHECK_THAT(store.add(pa[1]), Catch::Contains("expected the part at offset 0"));
  CHECK(store.add(pa[0]).empty());
  CHECK(store.add(pa[1]).empty());
  CHECK_FALSE(store.find(pa[0].sha256));  // not whole yet
  CHECK(store.add(pa[0]).empty());        // sent again from the start: the module starts over
  CHECK(store.add(pa[1]).empty());
  CHECK(store.add(pa[2]).empty());
  REQUIRE(store.find(pa[0].sha256));
  CHECK(*store.find(pa[0].sha256) == a);

  // Bytes that are not the module the digest names.
  auto wrong = parts_of(c, 1024);
  wrong[0].sha256 = std::string(64, '0');
  CHECK_THAT(store.add(wrong[0]), Catch::Contains("arrived with sha256 " + sha256_hex(c)));
  CHECK_FALSE(store.find(std::string(64, '0')));
  // A part past the module's end.
  auto past = parts_of(c, 1024);
  past[0].total = 50;
  CHECK_THAT(store.add(past[0]), Catch::Contains("past the module's 50 bytes"));

  // b does not fit beside a within 4000 bytes: a, the least recently used, goes.
  for (auto& p : parts_of(b, 1000)) CHECK(store.add(p).empty());
  CHECK(store.held_modules() == 1);
  CHECK(store.held_bytes() == 2500);
  CHECK_FALSE(store.find(sha256_hex(a)));
  // A held_review is resolved to its request with the module back in it, or answered
  // module_not_held.
  review_request req;
  req.request_id = 7;
  req.task.module_bytes = b;
  const held_review h = hold_module(req);
  CHECK(h.module_sha256 == sha256_hex(b));
  CHECK(h.request.task.module_bytes.empty());
  auto back = store.resolve(h);
  REQUIRE(back);
  CHECK(back->task.module_bytes == b);
  const review_result served = store.serve(h, [&](const review_request& r) {
    review_result out;
    out.message = r.task.module_bytes == b ? "reviewed with the module" : "reviewed without it";
    return out;
  });
  CHECK(served.message == "reviewed with the module");
  req.task.module_bytes = a;
  CHECK_FALSE(store.resolve(hold_module(req)));
  const review_result not_held = store.serve(hold_module(req), [](const review_request&) -> review_result {
    FAIL("a module not held was reviewed");
    return {};
  });
  CHECK(not_held.message == module_not_held(sha256_hex(a)));
  CHECK(not_held.status == review_status::internal_error);
  CHECK(not_held.request_id == 7);
  // A module larger than the whole budget is still kept: the last one is always kept.
  module_store tiny(10);
  for (auto& p : parts_of(a, 1024)) CHECK(tiny.add(p).empty());
  CHECK(tiny.find(sha256_hex(a)));
}
