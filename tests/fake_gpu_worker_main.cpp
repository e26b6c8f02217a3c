// fake_gpu_worker: a stand-in for kernelskill-gpu in gpu_pool_test. It speaks the
// worker's protocol over CAF and prints the same "listening on" line, and it
// misbehaves on request, from inside: a review whose candidate source is "abort"
// calls std::abort(), "hang" never returns; any other is answered internal_error.
// Signals sent from outside cannot stage these reliably: a multi-threaded worker
// keeps running for a while after SIGSTOP on a loaded machine (the stop waits for one
// of its threads to be scheduled), and one resumed to take a SIGABRT may answer first.

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/protocol.hpp"

namespace {

struct config : caf::actor_system_config {
  config() {
    ks::register_protocol(*this);
    load<caf::io::middleman>();
  }
};

ks::gpu_worker_actor::behavior_type fake_worker(ks::gpu_worker_actor::pointer) {
  return {
      [](ks::describe_atom) {
        ks::worker_info info;
        info.host = "fake";
        info.pid = static_cast<int32_t>(getpid());
        info.version = ks::protocol_version;
        info.driver_error = "a fake worker for tests";
        return info;
      },
      [](const ks::review_request& req) {
        if (req.cand.source == "abort") std::abort();
        if (req.cand.source == "hang")
          for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        ks::review_result r;
        r.request_id = req.request_id;
        r.candidate_id = req.cand.id;
        r.status = ks::review_status::internal_error;
        r.message = "a fake worker reviews nothing";
        return r;
      },
  };
}

}  // namespace

int main(int argc, char** argv) {
  // The pool passes --listen HOST:0 --exit-with-parent --log-level L [--device N].
  std::string host = "127.0.0.1";
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--listen") host = std::string(argv[i + 1]).substr(0, std::string(argv[i + 1]).rfind(':'));
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  config cfg;
  caf::actor_system sys{cfg};
  auto worker = sys.spawn<caf::detached>(fake_worker);
  auto port = sys.middleman().publish(worker, 0, host.c_str(), true);
  if (!port) return 2;
  std::printf("kernelskill-gpu: listening on %s:%u\n", host.c_str(), unsigned{*port});
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  std::_Exit(0);  // a hung review holds the worker actor: no orderly shutdown
}
