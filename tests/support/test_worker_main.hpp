#pragma once
// The main() shared by the test stand-ins for kernelskill-gpu (fake_gpu_worker,
// ks-scripted-gpu): each supplies only its worker actor's behaviour.

#include "protocol/protocol.hpp"

namespace ks::test {

using worker_behavior = gpu_worker_actor::behavior_type (*)(gpu_worker_actor::pointer);

// Serves `behavior` the way kernelskill-gpu --listen does, for the pool and the daemon
// that start it: reads the host of --listen HOST:PORT (127.0.0.1 without it; the port
// is always an ephemeral one, as the pool passes HOST:0; other arguments are ignored),
// dies with its parent (PR_SET_PDEATHSIG), spawns the worker detached and publishes it
// over CAF (asking for the token in $KS_WORKER_TOKEN when it is set, as the real one
// does; protocol/worker_link.hpp), prints "kernelskill-gpu: listening on HOST:PORT" to stdout (callers parse
// that line), then waits for SIGINT or SIGTERM and leaves with std::_Exit(0): no
// orderly shutdown, since a hung review holds the worker actor. Returns 2, having
// printed nothing, when it cannot publish. --device N is kept for requested_device().
int serve_test_worker(int argc, char** argv, worker_behavior behavior);

// The N of --device N on the command line (what the daemon's pools and the node agent
// pass each worker); -1 without one. Set before the behaviour runs.
int requested_device();

}  // namespace ks::test
