// fake_gpu_worker: a stand-in for kernelskill-gpu in gpu_pool_test. It speaks the
// worker's protocol over CAF and prints the same "listening on" line, and it
// misbehaves on request, from inside: a review whose candidate source is "abort"
// calls std::abort(), "hang" never returns; any other is answered internal_error.
// Signals sent from outside cannot stage these reliably: a multi-threaded worker
// keeps running for a while after SIGSTOP on a loaded machine (the stop waits for one
// of its threads to be scheduled), and one resumed to take a SIGABRT may answer first.

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "protocol/protocol.hpp"
#include "tests/support/test_worker_main.hpp"

namespace {

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

int main(int argc, char** argv) { return ks::test::serve_test_worker(argc, argv, fake_worker); }
