#include "tests/support/test_worker_main.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "protocol/worker_link.hpp"

namespace ks::test {

namespace {

struct config : caf::actor_system_config {
  config() {
    register_protocol(*this);
    load<caf::io::middleman>();
  }
};

int device_arg = -1;

}  // namespace

int requested_device() { return device_arg; }

int serve_test_worker(int argc, char** argv, worker_behavior behavior) {
  // The pool passes --listen HOST:0 --worker --exit-with-parent --log-level L [--device N].
  std::string host = "127.0.0.1";
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--listen")
      host = std::string(argv[i + 1]).substr(0, std::string(argv[i + 1]).rfind(':'));
    if (std::string(argv[i]) == "--device") device_arg = std::atoi(argv[i + 1]);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // A parent that died before the prctl sends no signal: it has been reaped already.
  if (getppid() == 1) return 0;
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  config cfg;
  caf::actor_system sys{cfg};
  auto worker = sys.spawn<caf::detached>(behavior);
  // The token as kernelskill-gpu takes it by default: the daemon hands its local
  // workers one in $KS_WORKER_TOKEN, and the stand-ins ask for it too.
  const char* token = std::getenv(default_worker_token_env);
  auto port = publish_worker(sys, worker, host, 0, token ? token : "");
  if (!port) return 2;
  std::printf("kernelskill-gpu: listening on %s:%u\n", host.c_str(), unsigned{*port});
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  std::_Exit(0);  // a hung review holds the worker actor: no orderly shutdown
}

}  // namespace ks::test
