// kernelskill-gpu: the worker process that owns one GPU. See --help.

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>
#include <torch/version.h>
#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <nlohmann/json.hpp>

#include "base/content_hash.hpp"
#include "base/logging.hpp"
#include "base/loopback.hpp"
#include "base/private_dir.hpp"
#include "base/sandbox.hpp"
#include "base/secret.hpp"
#include "config/experiment_config.hpp"
#include "fleet/node_agent.hpp"
#include "fleet/worker_process.hpp"
#include "gpu/graph_export.hpp"
#include "gpu/reference_launcher.hpp"
#include "gpu/review_report.hpp"
#include "gpu/reviewer.hpp"
#include "gpu/torch_reference.hpp"
#include "gpu/worker.hpp"
#include "plan/launch_plan_yaml.hpp"
#include "protocol/protocol.hpp"
#include "protocol/worker_link.hpp"
#include "task/task_loader.hpp"

namespace {

using namespace ks;

struct worker_system_config : caf::actor_system_config {
  worker_system_config() {
    register_protocol(*this);
    load<caf::io::middleman>();
    set("scheduler.max-threads", 4);
  }
};

nlohmann::json to_json(const worker_info& info) {
  nlohmann::json devices = nlohmann::json::array();
  for (auto& d : info.devices)
    devices.push_back({{"ordinal", d.ordinal},
                       {"name", d.name},
                       {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                       {"total_memory_bytes", d.total_memory_bytes},
                       {"multiprocessors", d.multiprocessors},
                       {"clock_mhz", d.clock_mhz}});
  return {{"host", info.host},
          {"pid", info.pid},
          {"version", info.version},
          {"driver_version", info.driver_version},
          {"driver_error", info.driver_error},
          {"devices", devices}};
}

int list_devices(const worker_options& opts, bool json) {
  auto info = describe_this_worker(opts);
  if (json) {
    std::cout << to_json(info).dump(2) << "\n";
    return info.devices.empty() ? 1 : 0;
  }
  if (info.devices.empty()) {
    std::cerr << "kernelskill-gpu: no GPU available on " << info.host << ": " << info.driver_error << "\n";
    return 1;
  }
  std::printf("host %s, CUDA driver %d.%d\n", info.host.c_str(), info.driver_version / 1000,
              (info.driver_version % 1000) / 10);
  for (auto& d : info.devices)
    std::printf("gpu %d: %s, compute capability %d.%d (sm_%d%d), %.1f GiB, %d SMs, %d MHz\n", d.ordinal, d.name.c_str(),
                d.cc_major, d.cc_minor, d.cc_major, d.cc_minor, d.total_memory_bytes / 1073741824.0, d.multiprocessors,
                d.clock_mhz);
  return 0;
}

int run_reference(const std::string& task_path, const std::string& size, std::string on, const std::string& draw) {
  auto task = load_task(task_path);
  if (!task) {
    std::cerr << "kernelskill-gpu: " << task.message() << "\n";
    return 2;
  }
  if (!size.empty()) {
    auto sized = with_size(*task, size);
    if (!sized) {
      std::cerr << "kernelskill-gpu: " << sized.message() << "\n";
      return 2;
    }
    task = std::move(sized);
  }
  if (on.empty()) on = describe_this_worker({}).devices.empty() ? "cpu" : "cuda";
  reference_options ro;
  ro.device = on;
  ro.draw = *parse_input_draw(draw);  // checked by the command line
  auto prog = reference_program::load(*task, ro);
  if (!prog) {
    std::cerr << "kernelskill-gpu: " << prog.message() << "\n";
    return 2;
  }
  for (uint32_t trial = 0; trial < 2; ++trial) {
    auto out = (*prog)->run(trial_seed(task->seed, trial));
    if (!out) {
      std::cerr << "kernelskill-gpu: " << out.message() << "\n";
      return 2;
    }
    std::printf("%s on %s, trial %u: inputs %.2f ms (drawn: %s), forward %.2f ms\n", task->name.c_str(),
                (*prog)->device().c_str(), trial, out->inputs_ms, to_string((*prog)->draw()), out->forward_ms);
    for (size_t i = 0; i < out->outputs.size(); ++i) {
      auto& o = out->outputs[i];
      std::string shape;
      for (auto d : o.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
      std::printf("  output %zu: %s %s  sum %.6g  mean %.6g  min %.6g  max %.6g  nan %lld inf %lld\n", i,
                  o.dtype.c_str(), shape.c_str(), o.sum, o.mean, o.min, o.max, static_cast<long long>(o.nan_count),
                  static_cast<long long>(o.inf_count));
    }
  }
  return 0;
}

// The reference's graph as JSON on stdout (gpu/graph_export.hpp).
// --check-reference: the reference compiles or loads and uses only allowed operators;
// nothing of it runs.
int check_reference(const std::string& task_path) {
  auto task = load_task(task_path);
  if (!task) {
    std::cerr << "kernelskill-gpu: " << task.message() << "\n";
    return 2;
  }
  if (auto st = check_reference_code(*task); !st) {
    std::cerr << "kernelskill-gpu: " << st.message() << "\n";
    return 1;
  }
  std::cout << "ok\n";
  return 0;
}

int export_graph(const std::string& task_path, const std::string& size) {
  auto task = load_task(task_path);
  if (!task) {
    std::cerr << "kernelskill-gpu: " << task.message() << "\n";
    return 2;
  }
  if (!size.empty()) {
    auto sized = with_size(*task, size);
    if (!sized) {
      std::cerr << "kernelskill-gpu: " << sized.message() << "\n";
      return 2;
    }
    task = std::move(sized);
  }
  std::string probe_note;
  auto json = export_graph_json(*task, &probe_note);
  spdlog::info("graph export of {}: {}", task->name, probe_note);
  if (!json) {
    std::cerr << "kernelskill-gpu: " << json.message() << "\n";
    return 2;
  }
  std::cout << *json << "\n";
  return 0;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct review_cli {
  std::string task, source, plan, size, draw_inputs = "device";
  uint32_t trials = 5;
  bool no_time = false;
  bool no_profile = false;
  bool json = false;
  double timeout_s = 600;
  std::vector<std::string> compile_options;
  uint32_t repeat = 1;
};

// One review in this process, printed; exit status 0 when the candidate is ok.
int run_review(const review_cli& cli, const worker_options& opts) {
  auto task = load_task(cli.task);
  if (!task) {
    std::cerr << "kernelskill-gpu: " << task.message() << "\n";
    return 2;
  }
  auto source = read_file(cli.source);
  if (!source) {
    std::cerr << "kernelskill-gpu: --source: cannot read " << cli.source << "\n";
    return 2;
  }
  auto plan = load_launch_plan(cli.plan);
  if (!plan) {
    std::cerr << "kernelskill-gpu: " << plan.message() << "\n";
    return 2;
  }
  review_request req;
  req.request_id = 1;
  req.task = *task;
  req.cand.task = task->name;
  req.cand.source = *source;
  req.cand.plan = *plan;
  req.cand.compile_options = cli.compile_options;
  req.cand.origin = "cli";
  req.cand.id = sha256_hex(*source + "\n" + to_yaml(*plan));
  req.options.trials = cli.trials;
  req.options.time = !cli.no_time;
  req.options.profile = !cli.no_profile;
  req.options.size = cli.size;
  req.options.timeout_s = cli.timeout_s;
  req.options.draw_inputs = cli.draw_inputs;
  reviewer_options ro;
  ro.device = opts.device < 0 ? 0 : opts.device;
  ro.trial_cache_bytes = opts.trial_cache_bytes;
  ro.replay = opts.replay;
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  auto t0 = clock::now();
  auto rev = reviewer::create(ro);
  if (!rev) {
    std::cerr << "kernelskill-gpu: cannot review here: " << rev.message() << "\n";
    return 2;
  }
  if (cli.repeat > 1) std::cerr << "reviewer::create: " << ms_since(t0) << " ms\n";
  review_result r;
  // --repeat N: N reviews in this process, each of a new candidate (the source with a
  // comment appended, so that it is compiled and loaded again) of identical code: the
  // first pays for the task (reference compile, inputs), the later ones show what one
  // more candidate costs a running worker.
  for (uint32_t k = 0; k < cli.repeat; ++k) {
    review_request rk = req;
    if (k > 0) {
      rk.cand.source += "\n// repeat " + std::to_string(k) + "\n";
      rk.cand.id = sha256_hex(rk.cand.source + "\n" + to_yaml(*plan));
    }
    auto t1 = clock::now();
    r = (*rev)->review(rk);
    if (cli.repeat > 1)
      std::cerr << "review " << k + 1 << " of " << cli.repeat << ": " << ms_since(t1) << " ms wall, "
                << to_string(r.status) << ", candidate " << r.candidate_time.repetitions << " x "
                << r.candidate_time.mean_ms << " ms, reference " << r.reference_time.repetitions << " x "
                << r.reference_time.mean_ms << " ms; phases " << describe_phases(r.phases) << "\n";
  }
  if (cli.json)
    std::cout << review_to_json(r) << "\n";
  else
    std::cout << format_review(r);
  return r.status == review_status::ok ? 0 : 1;
}

// Blocks the signals that end us before CAF starts its threads, so that only the main
// thread receives them (sigwait in serve_until_signal) and shutdown is orderly.
sigset_t block_stop_signals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return stop;
}

// Publishes `actor` on `where`, prints the "listening on" line, and serves until
// SIGINT or SIGTERM.
template <class Handle>
int serve_until_signal(caf::actor_system& sys, const Handle& actor, const remote_worker& where,
                       const std::string& address, const std::string& token, sigset_t stop,
                       sandbox_mode seal = sandbox_mode::off) {
  // With a token, peers prove it before CAF reads anything of theirs (protocol/worker_link.hpp).
  auto bound = publish_guarded(sys, caf::actor_cast<caf::strong_actor_ptr>(actor), sys.message_types(actor), where.host,
                               where.port, token);
  if (!bound) {
    std::cerr << "kernelskill-gpu: cannot listen on " << address << ": " << bound.message() << "\n";
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    return 2;
  }
  // Listening: from now on no sockets but Unix ones, in every thread (base/sandbox.hpp).
  if (auto sealed = seal_network(seal); !sealed) {
    if (seal == sandbox_mode::required) {
      std::cerr << "kernelskill-gpu: " << sealed.message() << "\n";
      caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
      return 2;
    }
    spdlog::warn("{} (references.sandbox: auto; the worker goes on)", sealed.message());
  }
  if (!token.empty())
    spdlog::info("peers must prove the token before anything else is read; links are encrypted with it (TLS 1.3)");
  // The daemon (or the node agent) reads this exact line to learn the port when it
  // asked for port 0.
  std::printf("kernelskill-gpu: listening on %s:%u\n", where.host.c_str(), unsigned{*bound});
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  spdlog::info("signal {}: shutting down", sig);
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  return 0;
}

// --listen --worker: one device, served directly (the daemon and the node agent start
// these and supervise them).
int serve_one_device(const remote_worker& where, const std::string& address, const std::string& token,
                     const worker_options& opts) {
  // The worker runs references and reviews in this process: it confines itself before
  // its first thread starts (base/sandbox.hpp), writing only in a scratch directory of
  // its own and binding only its port.
  const sandbox_policy& asked = opts.reference_limits.sandbox;
  auto scratch = private_dir::create("ks-worker");
  if (!scratch) {
    std::cerr << "kernelskill-gpu: " << scratch.message() << "\n";
    return 2;
  }
  sandbox_policy self = asked;
  self.scratch = scratch->path();
  self.tcp_bind_port = where.port;
  worker_options served = opts;
  if (asked.mode != sandbox_mode::off) {
    // Its reference checks' children get their own sandbox, not this one's
    // (gpu/reference_launcher.hpp): their starter is forked while there is one thread.
    std::error_code ec;
    auto launcher =
        reference_launcher::start(std::filesystem::read_symlink("/proc/self/exe", ec).string(), opts.reference_limits);
    if (!launcher) {
      std::cerr << "kernelskill-gpu: " << launcher.message() << "\n";
      return 2;
    }
    served.launcher = *launcher;
  }
  if (auto confined = sandbox_self(self); !confined) {
    std::cerr << "kernelskill-gpu: the worker's sandbox: " << confined.message() << "\n";
    return 2;
  }
  auto stop = block_stop_signals();
  worker_system_config cfg;
  caf::actor_system sys{cfg};
  // Detached: a review blocks its actor for seconds, and must not hold one of CAF's
  // scheduler threads (which also serve the network) while it does.
  auto worker = sys.spawn<caf::detached>(gpu_worker, served);
  auto info = describe_this_worker(served);
  if (info.devices.empty()) spdlog::warn("no GPU: {} (the worker answers describe requests only)", info.driver_error);
  return serve_until_signal(sys, worker, where, address, token, stop, asked.mode);
}

struct agent_cli {
  std::vector<int> devices;     // --devices; empty: every device the driver sees
  std::string worker_binary;    // --worker-binary; empty: this program
  double review_margin_s = 30;  // --review-margin
};

// --listen: the node agent (fleet/node_agent.hpp), a supervised worker per device.
int serve_node(const remote_worker& where, const std::string& address, const std::string& token,
               const worker_options& opts, const agent_cli& agent, const std::string& log_level) {
  auto stop = block_stop_signals();
  node_agent_options ao;
  ao.base = describe_this_worker({});
  if (agent.devices.empty()) {
    for (auto& d : ao.base.devices) ao.devices.push_back(d.ordinal);
  } else {
    ao.devices.assign(agent.devices.begin(), agent.devices.end());
  }
  if (ao.devices.empty())
    spdlog::warn("no GPU: {} (the node answers describe requests only; --devices names devices to serve)",
                 ao.base.driver_error);
  ao.pool.worker.binary = agent.worker_binary.empty() ? default_worker_binary() : agent.worker_binary;
  ao.pool.worker.log_level = log_level;
  ao.pool.review_margin_s = agent.review_margin_s;
  ao.pool.worker.trial_cache_gib = opts.trial_cache_bytes / double(1ull << 30);
  ao.pool.worker.module_keep_gib = opts.module_keep_bytes / double(1ull << 30);
  ao.module_keep_bytes = opts.module_keep_bytes;
  ao.pool.worker.profile_replay = opts.replay == profile_replay::kernel ? "kernel" : "user";
  ao.pool.worker.reference_cpu_seconds = opts.reference_limits.cpu_seconds;
  ao.pool.worker.reference_memory_mb = opts.reference_limits.memory_mb;
  ao.pool.worker.reference_wall_seconds = opts.reference_limits.wall_seconds;
  ao.pool.worker.sandbox = to_string(opts.reference_limits.sandbox.mode);
  for (const auto& p : opts.reference_limits.sandbox.read) ao.pool.worker.sandbox_read.push_back(p.string());
  worker_system_config cfg;
  caf::actor_system sys{cfg};
  auto node = spawn_node_agent(sys, std::move(ao));
  const int rc = serve_until_signal(sys, node.agent, where, address, token, stop);
  stop_node_agent(node);  // every worker is gone before the agent is
  // Leave without the actor system's orderly shutdown: the pools answered daemons on
  // other machines, and the network layer's references to them may hold it (the
  // courier in fleet/gpu_pool.cpp says why); everything the node started has ended.
  std::fflush(nullptr);
  std::_Exit(rc);
}

struct token_cli {
  std::string file;                            // --token-file
  std::string env = default_worker_token_env;  // --token-env
};

int listen(const std::string& address, const token_cli& secret, const worker_options& opts, bool one_worker,
           const agent_cli& agent, const std::string& log_level, char** argv) {
  auto where = parse_host_port(address, /*allow_any_port=*/true);
  if (!where) {
    std::cerr << "kernelskill-gpu: --listen: " << where.message() << "\n";
    return 2;
  }
  auto token = read_shared_token(secret.file, secret.env, "--token-file");
  if (!token) {
    std::cerr << "kernelskill-gpu: " << token.message() << "\n";
    return 2;
  }
  if (token->empty() && !is_loopback_host(where->host)) {
    std::cerr << "kernelskill-gpu: --listen " << address
              << ": not a loopback address, and no token is set: anyone who reaches this port "
                 "would run code on this GPU. Give a token (--token-file F, a file only you can "
                 "read, or $"
              << secret.env
              << ") and the same to the daemon (gpus.remote_token_file "
                 "or gpus.remote_token_env), or listen on 127.0.0.1 and tunnel to it\n";
    return 2;
  }
  if (one_worker) {
    // Before anything is printed: a library's threads from load time would stay
    // outside the sandbox (base/sandbox.hpp).
    if (opts.reference_limits.sandbox.mode != sandbox_mode::off)
      if (auto alone = reexec_single_threaded(argv); !alone) {
        std::cerr << "kernelskill-gpu: the worker's sandbox: " << alone.message() << "\n";
        return 2;
      }
    return serve_one_device(*where, address, *token, opts);
  }
  return serve_node(*where, address, *token, opts, agent, log_level);
}

}  // namespace

// PyTorch's CUDA allocator, unless the user configured it: expandable segments, so that
// freed blocks of one size serve allocations of another. Reviews at KernelBench's sizes
// alternate between tasks whose tensors are gigabytes of different shapes, and with
// fixed segments a worker ran out of memory with 31-39 GiB reserved but unused (an
// H200, 40 level-1 problems, two tasks in flight). Set before LibTorch reads it (the
// first CUDA allocation); children (graph export, reference checks) inherit it.
static void configure_cuda_allocator() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  if (!std::getenv("PYTORCH_CUDA_ALLOC_CONF") && !std::getenv("PYTORCH_ALLOC_CONF"))
    ::setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 0);
#endif
}

// What the command line says, filled in by add_options and read by main.
struct worker_cli {
  bool list = false, json = false, exit_with_parent = false;
  std::string listen_at, reference_task, size, on, log_level = "info";
  worker_options opts;
  bool one_worker = false;
  agent_cli agent;
  token_cli secret;
  double trial_cache_gib = 0;
  double module_keep_gib = 16;
  std::string replay = "user";
  std::string check_task;
  std::string graph_task;
  review_cli review;
  std::string sandbox = "auto";
  std::vector<std::string> sandbox_read;
};

// The options of kernelskill-gpu, in the order --help lists them.
void add_options(CLI::App& app, worker_cli& c) {
  app.add_flag("--list-devices", c.list, "Print the GPUs the driver sees (name, compute capability, memory) and exit");
  app.add_flag("--json", c.json, "With --list-devices or --review: print JSON");
  app.add_option("--listen", c.listen_at,
                 "Serve daemons on HOST:PORT over CAF's network layer as this machine's node agent:\n"
                 "one worker process per GPU (or per --devices entry), each restarted after a crash\n"
                 "or a hung review; the daemon sees every device as its own pool (docs/distributed.md).\n"
                 "Port 0 picks a free port. Prints 'kernelskill-gpu: listening on HOST:PORT' once ready");
  app.add_flag("--worker", c.one_worker,
               "With --listen: serve one device directly, unsupervised (what the daemon and the node\n"
               "agent start for each device; use --listen alone on a GPU machine)");
  app.add_option("--devices", c.agent.devices,
                 "With --listen: the GPU ordinals to serve, comma-separated (default: every device the\n"
                 "driver sees). Two nodes on one machine may each serve the same device")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  app.add_option("--review-margin", c.agent.review_margin_s,
                 "With --listen: seconds past a review's own timeout before a worker is taken as hung,\n"
                 "killed and restarted, and the review answered timed_out (default 30)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--worker-binary", c.agent.worker_binary,
                 "With --listen: the program each device's worker runs (default: this one); tests\n"
                 "use a stand-in");
  app.add_option("--device", c.opts.device,
                 "With --worker: the GPU ordinal this worker serves (default: all\n"
                 "for describe, 0 for reviews)");
  app.add_option("--token-file", c.secret.file,
                 "With --listen: a file (mode 600) whose first line is the shared secret peers\n"
                 "must prove they know before anything is read from them; the daemon gives the\n"
                 "same secret (gpus.remote_token_file or gpus.remote_token_env). Never on the\n"
                 "command line itself: every user of the machine can read that. A host beyond\n"
                 "loopback needs a token");
  app.add_option("--token-env", c.secret.env,
                 "With --listen and no --token-file: the environment variable holding the token\n"
                 "(default KS_WORKER_TOKEN; unset or empty: no token, loopback only)");
  app.add_option("--trial-cache-gib", c.trial_cache_gib,
                 "Device memory kept for trial inputs and reference outputs, in GiB (default 0:\n"
                 "half of the device's memory); the config's gpus.trial_cache_gib")
      ->check(CLI::Range(0.0, double(1 << 20)));
  app.add_option("--module-keep-gib", c.module_keep_gib,
                 "With --worker or --listen: host memory kept for tasks' modules sent in parts (those larger than\n"
                 "256 MiB), in GiB (default 16; the last one used is always kept): a module kept is\n"
                 "not sent again for the task's next review")
      ->check(CLI::Range(0.0, double(1 << 20)));
  app.add_option("--profile-replay", c.replay,
                 "How the CUPTI profile replays its passes: user (default: the plan runs once per\n"
                 "pass) or kernel (CUPTI saves and restores device memory around each kernel's\n"
                 "replays; slow with large inputs); the config's gpus.profile_replay")
      ->check(CLI::IsMember({"user", "kernel"}));
  app.add_option("--run-reference", c.reference_task,
                 "Run a task's reference (a task YAML) twice with LibTorch and print a summary\n"
                 "of its outputs; a quick check that a task and the device work");
  app.add_option("--check-reference", c.check_task,
                 "Check a task's reference (a task YAML) without running it: it compiles or loads,\n"
                 "and uses only the operators a reference may use (what `kernelskill task check`\n"
                 "asks); prints ok, or why not and exits 1");
  app.add_option("--graph", c.graph_task,
                 "Print a task's reference graph as JSON (inlined TorchScript, every value's\n"
                 "shape, dtype or constant value from one run: meta, else GPU, else CPU); what\n"
                 "the rules coder lowers");
  app.add_option("--review", c.review.task,
                 "Review one candidate against a task (a task YAML) in this process: compile,\n"
                 "run, verify, time and profile it, and print the result. Needs --source and --plan");
  app.add_option("--source", c.review.source, "With --review: the candidate's CUDA source (.cu)");
  app.add_option("--plan", c.review.plan, "With --review: the candidate's launch plan (.yaml)");
  app.add_option("--trials", c.review.trials, "With --review: verification trials (default 5)");
  app.add_flag("--no-time", c.review.no_time, "With --review: verify only, do not time");
  app.add_flag("--no-profile", c.review.no_profile,
               "With --review: collect no hardware metrics (CUPTI); needed under another\n"
               "profiler such as ncu, which holds the GPU's counters itself");
  app.add_option("--compile-option", c.review.compile_options,
                 "With --review: an extra NVRTC option (repeatable), e.g. --use_fast_math");
  app.add_option("--repeat", c.review.repeat,
                 "With --review: review N new candidates of the same code in this process and\n"
                 "print each one's wall time to stderr (what a candidate costs a warm worker)");
  app.add_option("--timeout", c.review.timeout_s, "With --review: the review's time bound in seconds (default 600)");
  app.add_option("--size", c.size, "With --run-reference, --graph or --review: the task's named size (e.g. cpu)");
  app.add_option("--on", c.on,
                 "With --run-reference: cpu, cuda or cuda:N (default: cuda if a GPU is\n"
                 "available, else cpu)");
  app.add_option("--draw-inputs", c.review.draw_inputs,
                 "With --review or --run-reference: where inputs are drawn. device (default):\n"
                 "on the GPU, seeded per trial, the same values on the same GPU model and\n"
                 "PyTorch build; cpu: on the CPU and copied, the same values on every machine\n"
                 "(seconds per trial at large sizes). The config's review.draw_inputs")
      ->check(CLI::IsMember({"device", "cpu"}));
  app.add_option("--reference-cpu-seconds", c.opts.reference_limits.cpu_seconds,
                 "With --listen: CPU seconds a task's reference may use when it is first run, in\n"
                 "a child, before any review runs it in this process (default 120; the config's\n"
                 "references.cpu_seconds)")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--reference-memory-mb", c.opts.reference_limits.memory_mb,
                 "With --listen: MiB that child may allocate (default: half of this machine's memory,\n"
                 "at most 16384; the daemon passes references.memory_mb)")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--reference-wall-seconds", c.opts.reference_limits.wall_seconds,
                 "With --listen: wall-clock seconds for that child (default 300, and at most 80%\n"
                 "of the review's timeout; references.wall_seconds)")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--sandbox", c.sandbox,
                 "The OS sandbox of what runs submitted code: this worker itself with --listen\n"
                 "--worker (it reviews in this process), and every child that runs a reference\n"
                 "(--graph, --run-reference). auto (default): every layer the kernel offers\n"
                 "(Landlock, seccomp, a network namespace), the missing ones logged; required:\n"
                 "refuse to run without Landlock and seccomp; off: unconfined. The config's\n"
                 "references.sandbox (docs/daemon.md, \"Untrusted references\")")
      ->check(CLI::IsMember({"off", "auto", "required"}));
  app.add_option("--sandbox-read", c.sandbox_read,
                 "A directory (or file) sandboxed code may read besides the system's (repeatable):\n"
                 "where LibTorch or CUDA lives outside /usr and /opt; references.read_paths");
  app.add_flag("--exit-with-parent", c.exit_with_parent,
               "Exit when the parent process dies (the daemon passes this to its workers)");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error or off (default info)");
}

int main(int argc, char** argv) {
  configure_cuda_allocator();
  CLI::App app{
      "kernelskill-gpu: the GPU worker of KernelSkill.\n"
      "It owns one GPU: compiles candidate kernels with NVRTC, runs the task's PyTorch\n"
      "reference with LibTorch, verifies, times and profiles candidates. The kernelskill\n"
      "daemon starts one per local GPU; on another machine, --listen runs the node agent,\n"
      "which starts and supervises one per GPU there for daemons that connect to it\n"
      "(docs/distributed.md). The CUDA driver is loaded at run time: on a machine without\n"
      "one this program still starts and says so."};
  app.set_version_flag("--version", std::string("kernelskill-gpu 0.1.0 (") + protocol_version + ")");
  worker_cli c;
  add_options(app, c);
  CLI11_PARSE(app, argc, argv);
  c.opts.trial_cache_bytes = static_cast<uint64_t>(c.trial_cache_gib * double(1ull << 30));
  c.opts.module_keep_bytes = static_cast<uint64_t>(c.module_keep_gib * double(1ull << 30));
  c.opts.reference_limits.sandbox.mode = *parse_sandbox_mode(c.sandbox);
  if (app.count("--reference-memory-mb") == 0) {
    // Half of this machine's memory, at most 16384 MiB: the reference check runs one
    // child at a time, beside the worker's own reviews.
    const double physical_mb = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / (1 << 20);
    if (physical_mb > 0)
      c.opts.reference_limits.memory_mb = static_cast<int>(std::clamp(physical_mb / 2, 1024.0, 16384.0));
  }
  for (const auto& p : c.sandbox_read) c.opts.reference_limits.sandbox.read.emplace_back(p);
  c.opts.replay = c.replay == "kernel" ? profile_replay::kernel : profile_replay::user;

  if (auto s = setup_logging(c.log_level); !s) {
    std::cerr << "kernelskill-gpu: --log-level: " << s.message() << "\n";
    return 2;
  }
  // The daemon reads our stdout only until the "listening on" line and then closes
  // its end: a later write to stdout must fail with EPIPE, not kill the worker.
  signal(SIGPIPE, SIG_IGN);
  if (c.exit_with_parent) {
    // SIGKILL, not SIGTERM: a worker whose daemon or node agent died has nobody to
    // answer, and an orderly exit would wait for a review in flight (for ever, when
    // its kernel hangs).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 0;  // the parent is already gone
  }
  if (c.list) return list_devices(c.opts, c.json);
  if (!c.check_task.empty()) return check_reference(c.check_task);
  if (!c.graph_task.empty()) return export_graph(c.graph_task, c.size);
  if (!c.reference_task.empty()) return run_reference(c.reference_task, c.size, c.on, c.review.draw_inputs);
  if (!c.review.task.empty()) {
    if (c.review.source.empty() || c.review.plan.empty()) {
      std::cerr << "kernelskill-gpu: --review needs --source K.cu and --plan P.yaml\n";
      return 2;
    }
    c.review.size = c.size;
    c.review.json = c.json;
    return run_review(c.review, c.opts);
  }
  if (!c.listen_at.empty()) return listen(c.listen_at, c.secret, c.opts, c.one_worker, c.agent, c.log_level, argv);
  std::cerr << app.help()
            << "\nkernelskill-gpu: nothing to do: give --list-devices, --listen, "
               "--run-reference or --review\n";
  return 2;
}
