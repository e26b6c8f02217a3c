#pragma once
// The experiment/daemon configuration: one YAML file that says which tasks to run,
// on which GPUs, with which budgets and which coder. docs/configuration.md is the
// schema reference; examples/experiment.yaml is an annotated example.
//
// What this module promises:
// - every key is optional and every default lives here, in-class, once;
// - a config that loads is fully validated: an unknown key, a wrong type, a number
//   out of range or a missing task file is an error, never a silent default;
// - each error names the file, line and column (1-based) where known, the full key
//   path (e.g. `budgets.rounds`), what was expected and what was found. All problems
//   in a file are reported together, one per line, so a user fixes them in one pass;
// - to_yaml() writes the effective config, and parse_config() reads it back equal.
//
// Relative paths: `tasks` entries are resolved against the config file's directory
// (a config names its tasks the way a Makefile names its sources). The other paths
// (memory, output, logging.file, llm.cache_dir, worker_binary) are kept as written
// and are relative to the working directory of the process, like command-line paths.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/sandbox.hpp"

namespace ks {

// A node running `kernelskill-gpu --listen HOST:PORT` that the daemon connects to.
struct remote_worker {
  std::string host;
  uint16_t port = 0;
  friend bool operator==(const remote_worker&, const remote_worker&) = default;
};

// Which GPUs check candidates. Local GPUs each get a worker process spawned on
// loopback; remote nodes are already running their workers.
struct gpu_config {
  bool local_all = true;              // `local: all` (default): every visible device
  std::vector<int> local_devices;     // `local: [0, 1]`; empty + !local_all = `local: none`
  std::vector<remote_worker> remote;  // distinct nodes
  std::string worker_binary;          // empty: `kernelskill-gpu` next to `kernelskill`
  double review_timeout_s = 60;       // per review request, > 0
  // Device memory each local worker keeps for trial inputs and reference outputs
  // (docs/reviewer.md, "Trial cache"), in GiB; 0 = half of the device's memory.
  double trial_cache_gib = 0;
  // How each local worker's CUPTI profile replays its passes: "user" (the plan runs once
  // per pass) or "kernel" (CUPTI saves and restores device memory around each kernel).
  std::string profile_replay = "user";
  // The shared secret remote workers (`kernelskill-gpu --listen` with a token) ask for:
  // read from the file remote_token_file when set, else from the environment variable
  // remote_token_env. Never written in the config itself (docs/configuration.md).
  std::string remote_token_env = "KS_WORKER_TOKEN";
  std::string remote_token_file;
  friend bool operator==(const gpu_config&, const gpu_config&) = default;
};

// Bounds on work and concurrency: the only things that limit how much runs at once.
struct budget_config {
  int seeds = 4;            // seed kernels per task
  int rounds = 15;          // optimisation rounds per seed; 0 = seeds only
  int repair_attempts = 3;  // fixes tried for a candidate that fails review
  int tasks_in_flight = 2;
  int llm_requests_in_flight = 4;
  int device_queue_depth = 8;  // pending review requests per GPU
  friend bool operator==(const budget_config&, const budget_config&) = default;
};

// The LLM endpoint used by the `llm` and `hybrid` coder backends (docs/llm.md).
struct llm_config {
  std::string provider = "openai";  // openai | anthropic (request/response format)
  std::string endpoint;             // http(s) URL; required for backend `llm`
  std::string model;                // required for backend `llm`
  std::string api_key_env;          // name of the environment variable with the key
  // The longest silence from the server before an attempt is abandoned: the wait for
  // the first byte (the server reading the prompt) and every gap between streamed
  // tokens. Not a bound on the whole reply (a slow server streaming a long reply is
  // fine); without streaming the whole reply is one silence. > 0.
  double timeout_s = 120;
  double reply_timeout_s = 0;  // a bound on one attempt's whole reply; 0 = none
  bool stream = true;          // ask for a streamed (SSE) reply
  int max_retries = 3;         // retries after the first attempt; 0 = none
  double temperature = 0.2;    // 0–2 (not sent when `reasoning`)
  int max_tokens = 8192;
  // Reasoning models (OpenAI's o-series and gpt-5, which refuse max_tokens and
  // temperature): send max_completion_tokens and no temperature.
  bool reasoning = false;
  std::string reasoning_effort;  // "" (not sent) | minimal | low | medium | high
  // The model's context window in tokens; 0: read it from the server where it says
  // (vLLM's /v1/models max_model_len, llama.cpp's /props n_ctx; Anthropic's models:
  // 200000), else not checked before sending.
  int context_tokens = 0;
  // The most tokens one agent's prompt may take (cut by each agent's truncation
  // rules, docs/llm.md); 0: what the context leaves after max_tokens.
  int prompt_tokens = 0;
  std::string cache_dir;  // empty: no response cache
  friend bool operator==(const llm_config&, const llm_config&) = default;
};

// Who writes kernels: the built-in template `rules` (no network), an `llm`, or
// `hybrid` (the rules coder first; the model where the templates have no move left).
struct coder_config {
  std::string backend = "rules";  // rules | llm | hybrid
  llm_config llm;
  friend bool operator==(const coder_config&, const coder_config&) = default;
};

// How candidates are checked and timed.
struct review_config {
  int trials = 5;                  // timed runs per measurement
  double suspicious_speedup = 20;  // speedups above this are re-checked, > 1
  std::string size;                // a task's named size; empty = the full size
  // Where trial inputs are drawn: device (on the reviewing GPU: fast, the same values
  // on the same GPU model and PyTorch build) or cpu (on the CPU and copied: the same
  // values on every machine, slow at large sizes). docs/reviewer.md.
  std::string draw_inputs = "device";
  friend bool operator==(const review_config&, const review_config&) = default;
};

// Limits on a submitted reference wherever it runs outside a review's own process
// checks: the rules coder's graph export and each worker's reference check
// (base/bounded_child.hpp). Past them the child is stopped and the task says why.
struct reference_limits_config {
  int cpu_seconds = 120;  // CPU time
  // Memory it may allocate (RLIMIT_DATA), MiB; 0 (`auto`, the default): three quarters
  // of this machine's memory shared among the tasks in flight, at most 16384
  // (reference_memory_mb below), so that the children of all tasks fit at once.
  int memory_mb = 0;
  int wall_seconds = 300;  // wall-clock time
  // The OS sandbox of every process that runs a reference (base/sandbox.hpp): off, auto
  // (every layer the kernel offers) or required (refuse to run without Landlock and
  // seccomp); and directories it may read besides the system's (absolute paths).
  std::string sandbox = "auto";
  std::vector<std::string> read_paths;
  friend bool operator==(const reference_limits_config&, const reference_limits_config&) = default;
};

// references.memory_mb as a number: itself, or for `auto` three quarters of physical
// memory divided by budgets.tasks_in_flight, at most 16384 and at least 1024.
int reference_memory_mb(const reference_limits_config& c, int tasks_in_flight);

// The sandbox policy of references.sandbox and references.read_paths (the scratch
// directory is each child's own, set where it starts).
sandbox_policy reference_sandbox(const reference_limits_config& c);

// Switches for ablation studies: turn memory off to measure what it contributes.
struct ablation_config {
  bool long_term_memory = true;
  bool short_term_memory = true;
  friend bool operator==(const ablation_config&, const ablation_config&) = default;
};

struct memory_config {
  std::string path = "ks-memory";  // the RocksDB directory
  friend bool operator==(const memory_config&, const memory_config&) = default;
};

struct output_config {
  std::string dir = "ks-output";  // reports and final kernels
  friend bool operator==(const output_config&, const output_config&) = default;
};

struct logging_config {
  std::string level = "info";  // trace | debug | info | warn | error | off
  std::string file;            // empty: stderr only
  friend bool operator==(const logging_config&, const logging_config&) = default;
};

// The daemon's control endpoint (`kernelskill serve`).
struct serve_config {
  std::string listen = "127.0.0.1:8470";  // HOST:PORT
  std::string token_env = "KS_TOKEN";     // env var holding the bearer token
  // Slow clients (slowloris): a request's line and headers must arrive within
  // header_timeout_s of the connection (or of its previous answer), its body within
  // body_timeout_s of its headers; at most max_pending_connections connections may wait
  // for their headers at once (the oldest is dropped for a new one).
  double header_timeout_s = 10;
  double body_timeout_s = 60;
  int max_pending_connections = 32;
  friend bool operator==(const serve_config&, const serve_config&) = default;
};

// A whole configuration. A default-constructed one is what an empty file gives.
struct experiment_config {
  std::string name = "kernelskill";
  std::string source;              // the file it was loaded from ("<string>" from text)
  std::vector<std::string> tasks;  // absolute, normalised task file paths; see below
  gpu_config gpus;
  budget_config budgets;
  coder_config coder;
  review_config review;
  reference_limits_config references;
  ablation_config ablation;
  memory_config memory;
  output_config output;
  logging_config logging;
  serve_config serve;
  friend bool operator==(const experiment_config&, const experiment_config&) = default;
};
// `tasks`: relative entries are relative to the config file's directory; entries
// with `*` or `?` are globs, expanded to the regular files they match, sorted; a glob
// that matches nothing or a file that does not exist is an error. A file named twice
// (say by a glob and by name) is kept once, at its first position.

// Reads and validates a config file. The error says so when the file is missing.
result<experiment_config> load_config(const std::filesystem::path& file);

// Validates config text. source_name prefixes messages and becomes `source`;
// base_dir resolves relative task paths (empty: the current directory).
result<experiment_config> parse_config(const std::string& yaml_text, const std::string& source_name,
                                       const std::filesystem::path& base_dir);

// The effective config as YAML, every key present; parse_config() reads it back
// equal (apart from `source`). Task paths are written absolute.
std::string to_yaml(const experiment_config& config);

// Parses "HOST:PORT" (IPv6 hosts in brackets: "[::1]:8470"); port 1–65535, or 0–65535
// with allow_any_port (a listening socket, where 0 asks the system for a free port).
// Shared with the command line (`kernelskill-gpu --listen`). The error says what is
// wrong without a position or key: callers prefix their own.
result<remote_worker> parse_host_port(const std::string& text, bool allow_any_port = false);

// "HOST:PORT", bracketing IPv6 hosts; parse_host_port's inverse.
std::string to_string(const remote_worker& worker);

}  // namespace ks
