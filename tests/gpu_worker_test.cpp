// The real kernelskill-gpu process, started as the daemon starts it and reached over
// CAF on loopback. Where there is no GPU the worker must still start, answer, and say
// why it has no devices; on a GPU machine it must list them.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <string>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "fleet/gpu_nodes.hpp"
#include "fleet/worker_process.hpp"
#include "tests/command_output.hpp"
#include "tests/gpu_skip.hpp"

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

TEST_CASE("kernelskill-gpu --list-devices lists GPUs or says plainly there are none",
          "[gpu_worker]") {
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

TEST_CASE("a worker started on loopback answers describe over the middleman",
          "[gpu_worker][network]") {
  worker_process_options wo;
  wo.binary = worker_binary;
  auto proc = worker_process::start(wo);
  REQUIRE(proc);
  CHECK((*proc)->port() > 0);
  CHECK((*proc)->alive());

  daemon_config cfg;
  caf::actor_system sys{cfg};
  auto handle = sys.middleman().remote_actor<gpu_worker_actor>("127.0.0.1", (*proc)->port());
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

TEST_CASE("destroying a worker handle ends the process, and kill -9 is noticed",
          "[gpu_worker]") {
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
