#include "config/experiment_config.hpp"

#include <unistd.h>

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "config/yaml_reader.hpp"

namespace ks {

namespace fs = std::filesystem;

namespace {

constexpr long long kIntMax = std::numeric_limits<int>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Every key's full path: lets an unknown key that exists elsewhere point there
// (`rounds:` at the top level → "did you mean 'budgets.rounds'?").
const std::vector<std::string> kAllKeys = {
    "name",
    "tasks",
    "gpus.local",
    "gpus.remote",
    "gpus.worker_binary",
    "gpus.review_timeout_s",
    "gpus.trial_cache_gib",
    "gpus.profile_replay",
    "gpus.remote_token_env",
    "gpus.remote_token_file",
    "budgets.seeds",
    "budgets.rounds",
    "budgets.repair_attempts",
    "budgets.tasks_in_flight",
    "budgets.llm_requests_in_flight",
    "budgets.device_queue_depth",
    "coder.backend",
    "coder.llm",
    "coder.llm.provider",
    "coder.llm.endpoint",
    "coder.llm.model",
    "coder.llm.api_key_env",
    "coder.llm.timeout_s",
    "coder.llm.reply_timeout_s",
    "coder.llm.stream",
    "coder.llm.max_retries",
    "coder.llm.temperature",
    "coder.llm.max_tokens",
    "coder.llm.reasoning",
    "coder.llm.reasoning_effort",
    "coder.llm.context_tokens",
    "coder.llm.prompt_tokens",
    "coder.llm.cache_dir",
    "review.trials",
    "review.suspicious_speedup",
    "review.size",
    "review.draw_inputs",
    "references.cpu_seconds",
    "references.memory_mb",
    "references.wall_seconds",
    "references.sandbox",
    "references.read_paths",
    "ablation.long_term_memory",
    "ablation.short_term_memory",
    "memory.path",
    "output.dir",
    "logging.level",
    "logging.file",
    "serve.listen",
    "serve.token_env",
    "serve.header_timeout_s",
    "serve.body_timeout_s",
    "serve.max_pending_connections",
};

std::string key_elsewhere(const std::string& name) {
  for (const auto& full : kAllKeys) {
    const auto dot = full.rfind('.');
    if (dot != std::string::npos && full.compare(dot + 1, std::string::npos, name) == 0) return full;
  }
  return "";
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool is_env_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// Why `host` cannot be a host name or address, or "" when it can.
std::string bad_host(const std::string& host) {
  if (host.empty()) return "the host is empty";
  if (host.find("://") != std::string::npos || host.find('/') != std::string::npos)
    return "the host \"" + host + "\" is a URL, not a host name or address (drop the scheme)";
  if (std::any_of(host.begin(), host.end(), [](unsigned char c) { return std::isspace(c); }))
    return "the host \"" + host + "\" contains whitespace";
  return "";
}

// Shortest text that reads back as the same double: 0.2 stays "0.2", not 0.2000…01.
std::string format_double(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

void positive(yaml_reader& r, const yaml_field& f, int& out) { r.integer(f, out, 1, kIntMax, "a positive integer"); }

void non_negative(yaml_reader& r, const yaml_field& f, int& out) {
  r.integer(f, out, 0, kIntMax, "a non-negative integer");
}

void seconds(yaml_reader& r, const yaml_field& f, double& out) {
  r.number(f, out, 0, false, kInf, false, "a number of seconds greater than 0");
}

// An env var's name; never echoes the value, which may be the secret itself.
void env_name(yaml_reader& r, const yaml_field& f, std::string& out, const char* example) {
  std::string v;
  const size_t before = r.errors().size();
  r.string(f, v);
  if (r.errors().size() != before) return;
  if (!v.empty() && !is_env_name(v)) {
    return r.fail(f, std::string("expected the name of an environment variable (letters, digits "
                                 "and _, like ") +
                         example +
                         "), got something else; if that was the secret itself, move it into "
                         "the environment: secrets do not belong in config files");
  }
  out = v;
}

// `local: all | none | [0, 1]`
void read_local(yaml_reader& r, const yaml_field& f, gpu_config& g) {
  const std::string exp = "expected all, none or a list of device indices";
  if (f.value.IsScalar()) {
    const std::string& v = f.value.Scalar();
    if (v == "all") {
      g.local_all = true;
      g.local_devices.clear();
    } else if (v == "none") {
      g.local_all = false;
      g.local_devices.clear();
    } else {
      const bool digits =
          !v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char ch) { return std::isdigit(ch); });
      const std::string near = closest(v, {"all", "none"});
      r.fail(f, exp + ", got " + describe(f.value) +
                    (digits         ? " (write [" + v + "] for one device)"
                     : near.empty() ? ""
                                    : " (did you mean '" + near + "'?)"));
    }
    return;
  }
  if (!f.value.IsSequence()) return r.fail(f, exp + ", got " + describe(f.value));
  std::vector<int> devices;
  std::map<int, YAML::Node> seen;
  for (size_t i = 0; i < f.value.size(); ++i) {
    const yaml_field item = f.item(i, f.value[i]);
    int d = -1;
    r.integer(item, d, 0, kIntMax, "a device index (0, 1, ...)");
    if (d < 0) continue;
    if (auto [pos, inserted] = seen.emplace(d, item.value); !inserted) {
      r.fail(item, "device " + std::to_string(d) + " is listed twice (first at " + line_col(pos->second) + ")");
      continue;
    }
    devices.push_back(d);
  }
  g.local_all = false;
  g.local_devices = std::move(devices);
}

// `remote: ["gpu1:8471", {host: gpu2, port: 8471}]`
void read_remote(yaml_reader& r, const yaml_field& f, std::vector<remote_worker>& out) {
  if (f.value.IsNull()) return;
  if (!f.value.IsSequence()) {
    return r.fail(f, "expected a list of \"HOST:PORT\" strings or {host, port} maps, got " + describe(f.value) +
                         (f.value.IsScalar() ? " (write [" + f.value.Scalar() + "] for one node)" : ""));
  }
  std::map<std::string, YAML::Node> seen;
  for (size_t i = 0; i < f.value.size(); ++i) {
    const yaml_field item = f.item(i, f.value[i]);
    remote_worker w;
    if (item.value.IsScalar()) {
      auto parsed = parse_host_port(item.value.Scalar());
      if (!parsed) {
        r.fail(item, parsed.message());
        continue;
      }
      w = *parsed;
    } else if (item.value.IsMap()) {
      const size_t before = r.errors().size();
      bool has_host = false, has_port = false;
      int port = 0;
      r.map(item, {
                      {"host",
                       [&](const yaml_field& h) {
                         has_host = true;
                         r.string(h, w.host, false);
                       }},
                      {"port",
                       [&](const yaml_field& p) {
                         has_port = true;
                         r.integer(p, port, 1, 65535, "a port number from 1 to 65535");
                       }},
                  });
      if (!has_host) r.fail(item, "missing 'host' (expected {host: NAME, port: NUMBER})");
      if (!has_port) r.fail(item, "missing 'port' (expected {host: NAME, port: NUMBER})");
      if (r.errors().size() != before) continue;
      if (std::string why = bad_host(w.host); !why.empty()) {
        r.fail(item.child("host", YAML::Node(), item.value["host"]), why);
        continue;
      }
      w.port = static_cast<uint16_t>(port);
    } else {
      r.fail(item, "expected \"HOST:PORT\" or {host, port}, got " + describe(item.value));
      continue;
    }
    const std::string id = to_string({lower(w.host), w.port});
    if (auto [pos, inserted] = seen.emplace(id, item.value); !inserted) {
      r.fail(item, "duplicate node " + to_string(w) + " (first listed at " + line_col(pos->second) + ")");
      continue;
    }
    out.push_back(std::move(w));
  }
}

bool has_wildcard(const std::string& s) { return s.find_first_of("*?") != std::string::npos; }

// Only `*` and `?` are wildcards: brackets and backslashes in names stay literal.
std::string glob_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The directory a glob starts searching from: its path before the first wildcard.
fs::path glob_root(const fs::path& pattern) {
  fs::path root;
  for (const auto& part : pattern) {
    if (has_wildcard(part.string())) break;
    root /= part;
  }
  return root;
}

void add_task(std::vector<std::string>& tasks, std::string path) {
  if (std::find(tasks.begin(), tasks.end(), path) == tasks.end()) tasks.push_back(std::move(path));
}

void read_tasks(yaml_reader& r, const yaml_field& f, const fs::path& base, std::vector<std::string>& out) {
  if (f.value.IsNull()) return;
  if (!f.value.IsSequence()) {
    return r.fail(f, "expected a list of task files or globs, got " + describe(f.value) +
                         (f.value.IsScalar() ? " (write [\"" + f.value.Scalar() + "\"])" : ""));
  }
  for (size_t i = 0; i < f.value.size(); ++i) {
    const yaml_field item = f.item(i, f.value[i]);
    std::string entry;
    const size_t before = r.errors().size();
    r.string(item, entry, false);
    if (r.errors().size() != before) continue;
    const fs::path written(entry);
    const fs::path full = (written.is_absolute() ? written : base / written).lexically_normal();
    std::error_code ec;
    if (!has_wildcard(entry)) {
      const auto st = fs::status(full, ec);
      if (!fs::exists(st)) {
        r.fail(item, "task file \"" + entry + "\" does not exist (looked in " + full.parent_path().string() + ")");
      } else if (fs::is_directory(st)) {
        r.fail(item, "\"" + entry + "\" is a directory, not a task file (use \"" +
                         (fs::path(entry) / "*.yaml").string() + "\" for the tasks in it)");
      } else if (!fs::is_regular_file(st)) {
        r.fail(item, "\"" + entry + "\" (" + full.string() + ") is not a regular file");
      } else {
        add_task(out, full.string());
      }
      continue;
    }
    glob_t g{};
    const int rc = ::glob(glob_escape(full.string()).c_str(), 0, nullptr, &g);
    std::vector<std::string> matches;
    if (rc == 0) {
      for (size_t k = 0; k < g.gl_pathc; ++k) {
        if (fs::is_regular_file(g.gl_pathv[k], ec)) matches.emplace_back(g.gl_pathv[k]);
      }
    }
    globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH) {
      r.fail(item,
             "cannot expand \"" + entry + "\": a directory under " + glob_root(full).string() + " could not be read");
      continue;
    }
    const fs::path root = glob_root(full);
    if (matches.empty()) {
      r.fail(item, "no task files match \"" + entry + "\" " +
                       (fs::is_directory(root, ec) ? "in " + root.string()
                                                   : "(directory " + root.string() + " does not exist)"));
      continue;
    }
    std::sort(matches.begin(), matches.end());
    for (auto& m : matches) add_task(out, fs::path(m).lexically_normal().string());
  }
}

}  // namespace

int reference_memory_mb(const reference_limits_config& c, int tasks_in_flight) {
  if (c.memory_mb > 0) return c.memory_mb;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const double physical_mb = pages > 0 && page > 0 ? double(pages) * double(page) / (1024.0 * 1024.0) : 16384.0;
  const double share = physical_mb * 0.75 / std::max(1, tasks_in_flight);
  return static_cast<int>(std::clamp(share, 1024.0, 16384.0));
}

sandbox_policy reference_sandbox(const reference_limits_config& c) {
  sandbox_policy p;
  if (auto mode = parse_sandbox_mode(c.sandbox)) p.mode = *mode;  // (the loader checked the word)
  for (const auto& r : c.read_paths) p.read.emplace_back(r);
  return p;
}

namespace {

// references.read_paths: existing files or directories, relative to the config file.
void read_paths(yaml_reader& r, const yaml_field& f, const fs::path& base, std::vector<std::string>& out) {
  if (f.value.IsNull()) return;
  if (!f.value.IsSequence())
    return r.fail(f, "expected a list of directories sandboxed references may read, got " + describe(f.value));
  for (size_t i = 0; i < f.value.size(); ++i) {
    const yaml_field item = f.item(i, f.value[i]);
    std::string entry;
    const size_t before = r.errors().size();
    r.string(item, entry, false);
    if (r.errors().size() != before) continue;
    const fs::path full = (fs::path(entry).is_absolute() ? fs::path(entry) : base / entry).lexically_normal();
    std::error_code ec;
    if (!fs::exists(full, ec)) {
      r.fail(item, "\"" + entry + "\" does not exist (looked for " + full.string() + ")");
      continue;
    }
    out.push_back(full.string());
  }
}

// The sections of the top level, one reader each: read_root lists them, each reads its
// own keys (and says where a key belongs when it is given in the wrong section).
struct root_reader {
  yaml_reader& r;
  const fs::path& base;
  experiment_config& c;
  gpu_config& g = c.gpus;
  budget_config& b = c.budgets;
  llm_config& l = c.coder.llm;
  yaml_field backend_field = {};  // where `coder.backend: llm` was said, for the cross-check
  bool backend_given = false;

  void gpus(const yaml_field& s) {
    r.map(s,
          {
              {"local", [&](const yaml_field& f) { read_local(r, f, g); }},
              {"remote", [&](const yaml_field& f) { read_remote(r, f, g.remote); }},
              {"worker_binary", [&](const yaml_field& f) { r.string(f, g.worker_binary); }},
              {"review_timeout_s", [&](const yaml_field& f) { seconds(r, f, g.review_timeout_s); }},
              {"trial_cache_gib",
               [&](const yaml_field& f) {
                 r.number(f, g.trial_cache_gib, 0, true, 1 << 20, true,
                          "a number of GiB from 0 (0: half of each device's memory) to 1048576");
               }},
              {"profile_replay",
               [&](const yaml_field& f) {
                 r.one_of(f, g.profile_replay, {"user", "kernel"});
               }},
              {"remote_token_env", [&](const yaml_field& f) { env_name(r, f, g.remote_token_env, "KS_WORKER_TOKEN"); }},
              {"remote_token_file", [&](const yaml_field& f) { r.string(f, g.remote_token_file); }},
          },
          key_elsewhere);
  }

  void budgets(const yaml_field& s) {
    r.map(s,
          {
              {"seeds", [&](const yaml_field& f) { positive(r, f, b.seeds); }},
              {"rounds", [&](const yaml_field& f) { non_negative(r, f, b.rounds); }},
              {"repair_attempts", [&](const yaml_field& f) { positive(r, f, b.repair_attempts); }},
              {"tasks_in_flight", [&](const yaml_field& f) { positive(r, f, b.tasks_in_flight); }},
              {"llm_requests_in_flight", [&](const yaml_field& f) { positive(r, f, b.llm_requests_in_flight); }},
              {"device_queue_depth", [&](const yaml_field& f) { positive(r, f, b.device_queue_depth); }},
          },
          key_elsewhere);
  }

  void coder(const yaml_field& s) {
    r.map(s,
          {
              {"backend",
               [&](const yaml_field& f) {
                 r.one_of(f, c.coder.backend, {"rules", "llm", "hybrid"});
                 backend_field = f;
                 backend_given = true;
               }},
              {"llm",
               [&](const yaml_field& s2) {
                 r.map(
                     s2,
                     {
                         {"provider",
                          [&](const yaml_field& f) {
                            r.one_of(f, l.provider, {"openai", "anthropic"});
                          }},
                         {"endpoint",
                          [&](const yaml_field& f) {
                            std::string v;
                            const size_t before = r.errors().size();
                            r.string(f, v);
                            if (r.errors().size() != before) return;
                            if (!v.empty() && v.rfind("http://", 0) != 0 && v.rfind("https://", 0) != 0) {
                              return r.fail(f, "expected an http:// or https:// URL, got " + describe(f.value));
                            }
                            l.endpoint = v;
                          }},
                         {"model", [&](const yaml_field& f) { r.string(f, l.model); }},
                         {"api_key_env", [&](const yaml_field& f) { env_name(r, f, l.api_key_env, "OPENAI_API_KEY"); }},
                         {"timeout_s", [&](const yaml_field& f) { seconds(r, f, l.timeout_s); }},
                         {"reply_timeout_s",
                          [&](const yaml_field& f) {
                            r.number(f, l.reply_timeout_s, 0, true, kInf, false,
                                     "a number of seconds >= 0 (0: no bound)");
                          }},
                         {"stream", [&](const yaml_field& f) { r.boolean(f, l.stream); }},
                         {"max_retries", [&](const yaml_field& f) { non_negative(r, f, l.max_retries); }},
                         {"temperature",
                          [&](const yaml_field& f) {
                            r.number(f, l.temperature, 0, true, 2, true, "a number from 0 to 2");
                          }},
                         {"max_tokens", [&](const yaml_field& f) { positive(r, f, l.max_tokens); }},
                         {"reasoning", [&](const yaml_field& f) { r.boolean(f, l.reasoning); }},
                         {"reasoning_effort",
                          [&](const yaml_field& f) {
                            // Empty leaves it out of the request (the server's default).
                            if (f.value.IsScalar() && f.value.Scalar().empty()) {
                              l.reasoning_effort.clear();
                            } else {
                              r.one_of(f, l.reasoning_effort, {"minimal", "low", "medium", "high"});
                            }
                          }},
                         {"context_tokens",
                          [&](const yaml_field& f) {
                            r.integer(f, l.context_tokens, 0, 100000000,
                                      "a whole number of tokens >= 0 (0: ask the server)");
                          }},
                         {"prompt_tokens",
                          [&](const yaml_field& f) {
                            r.integer(f, l.prompt_tokens, 0, 100000000,
                                      "a whole number of tokens >= 0 (0: what the context leaves)");
                          }},
                         {"cache_dir", [&](const yaml_field& f) { r.string(f, l.cache_dir); }},
                     },
                     key_elsewhere);
               }},
          },
          key_elsewhere);
  }

  void review(const yaml_field& s) {
    r.map(s,
          {
              {"trials", [&](const yaml_field& f) { positive(r, f, c.review.trials); }},
              {"suspicious_speedup",
               [&](const yaml_field& f) {
                 r.number(f, c.review.suspicious_speedup, 1, false, kInf, false, "a number greater than 1");
               }},
              {"size", [&](const yaml_field& f) { r.string(f, c.review.size); }},
              {"draw_inputs",
               [&](const yaml_field& f) {
                 // "gpu" is one letter from "cpu": say which value means the GPU rather than
                 // suggest the other one.
                 if (f.value.IsScalar() && (f.value.Scalar() == "gpu" || f.value.Scalar() == "cuda"))
                   return r.fail(f, "expected one of device, cpu, got \"" + f.value.Scalar() +
                                        "\" (device draws on the reviewing GPU)");
                 r.one_of(f, c.review.draw_inputs, {"device", "cpu"});
               }},
          },
          key_elsewhere);
  }

  void references(const yaml_field& s) {
    r.map(s,
          {
              {"cpu_seconds",
               [&](const yaml_field& f) {
                 r.integer(f, c.references.cpu_seconds, 1, 10000000, "a whole number of seconds from 1 to 10000000");
               }},
              {"memory_mb",
               [&](const yaml_field& f) {
                 if (f.value.IsScalar() && f.value.Scalar() == "auto")
                   c.references.memory_mb = 0;
                 else
                   r.integer(f, c.references.memory_mb, 1, kIntMax, "a positive integer (MiB) or auto");
               }},
              {"wall_seconds",
               [&](const yaml_field& f) {
                 r.integer(f, c.references.wall_seconds, 1, 10000000, "a whole number of seconds from 1 to 10000000");
               }},
              {"sandbox",
               [&](const yaml_field& f) {
                 r.one_of(f, c.references.sandbox, {"off", "auto", "required"});
               }},
              {"read_paths", [&](const yaml_field& f) { read_paths(r, f, base, c.references.read_paths); }},
          },
          key_elsewhere);
  }

  void ablation(const yaml_field& s) {
    r.map(s,
          {
              {"long_term_memory", [&](const yaml_field& f) { r.boolean(f, c.ablation.long_term_memory); }},
              {"short_term_memory", [&](const yaml_field& f) { r.boolean(f, c.ablation.short_term_memory); }},
          },
          key_elsewhere);
  }

  void memory(const yaml_field& s) {
    r.map(s,
          {
              {"path", [&](const yaml_field& f) { r.string(f, c.memory.path, false); }},
          },
          key_elsewhere);
  }

  void output(const yaml_field& s) {
    r.map(s,
          {
              {"dir", [&](const yaml_field& f) { r.string(f, c.output.dir, false); }},
          },
          key_elsewhere);
  }

  void logging(const yaml_field& s) {
    r.map(s,
          {
              {"level",
               [&](const yaml_field& f) {
                 r.one_of(f, c.logging.level, {"trace", "debug", "info", "warn", "error", "off"});
               }},
              {"file", [&](const yaml_field& f) { r.string(f, c.logging.file); }},
          },
          key_elsewhere);
  }

  void serve(const yaml_field& s) {
    r.map(
        s,
        {
            {"listen",
             [&](const yaml_field& f) {
               std::string v;
               const size_t before = r.errors().size();
               r.string(f, v);
               if (r.errors().size() != before) return;
               if (auto hp = parse_host_port(v, /*allow_any_port=*/true); !hp) return r.fail(f, hp.message());
               c.serve.listen = v;
             }},
            {"token_env", [&](const yaml_field& f) { env_name(r, f, c.serve.token_env, "KS_TOKEN"); }},
            {"header_timeout_s", [&](const yaml_field& f) { seconds(r, f, c.serve.header_timeout_s); }},
            {"body_timeout_s", [&](const yaml_field& f) { seconds(r, f, c.serve.body_timeout_s); }},
            {"max_pending_connections", [&](const yaml_field& f) { positive(r, f, c.serve.max_pending_connections); }},
        },
        key_elsewhere);
  }
};

void read_root(yaml_reader& r, const YAML::Node& root, const fs::path& base, experiment_config& c) {
  const yaml_field top{"", YAML::Node(), root};
  if (root.IsNull()) return;  // an empty file: every default
  if (!root.IsMap()) {
    return r.fail(top,
                  "the top level must be a map of settings (name:, tasks:, gpus:, "
                  "budgets:, ...), got " +
                      describe(root));
  }
  root_reader rr{r, base, c};
  r.map(top,
        {
            {"name", [&](const yaml_field& f) { r.string(f, c.name, false); }},
            {"tasks", [&](const yaml_field& f) { read_tasks(r, f, base, c.tasks); }},
            {"gpus", [&](const yaml_field& s) { rr.gpus(s); }},
            {"budgets", [&](const yaml_field& s) { rr.budgets(s); }},
            {"coder", [&](const yaml_field& s) { rr.coder(s); }},
            {"review", [&](const yaml_field& s) { rr.review(s); }},
            {"references", [&](const yaml_field& s) { rr.references(s); }},
            {"ablation", [&](const yaml_field& s) { rr.ablation(s); }},
            {"memory", [&](const yaml_field& s) { rr.memory(s); }},
            {"output", [&](const yaml_field& s) { rr.output(s); }},
            {"logging", [&](const yaml_field& s) { rr.logging(s); }},
            {"serve", [&](const yaml_field& s) { rr.serve(s); }},
        },
        key_elsewhere);

  // Checked last, once both keys are read: they may come in either order.
  if (c.coder.backend == "llm" || c.coder.backend == "hybrid") {
    const yaml_field at = rr.backend_given ? rr.backend_field : top;
    const std::string is = "is " + c.coder.backend;
    if (c.coder.llm.endpoint.empty())
      r.fail(at, is + ", so coder.llm.endpoint must be set (the URL of the model's API, "
                      "e.g. https://api.openai.com/v1)");
    if (c.coder.llm.model.empty()) r.fail(at, is + ", so coder.llm.model must be set (the model's name)");
  }
}

// yaml-cpp reports a tab in indentation as some other error; say what it is.
std::string tab_hint(const std::string& text, const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  std::istringstream lines(text);
  std::string line;
  for (int i = 0; i <= mark.line && std::getline(lines, line); ++i) {
  }
  const std::string indent = line.substr(0, line.find_first_not_of(" \t"));
  return indent.find('\t') == std::string::npos
             ? ""
             : " (line " + std::to_string(mark.line + 1) + " is indented with a tab: YAML indents with spaces only)";
}

}  // namespace

result<remote_worker> parse_host_port(const std::string& text, bool allow_any_port) {
  const std::string expected = "expected HOST:PORT (like gpu1:8471), got \"" + text + "\"";
  if (text.empty()) return error{"expected HOST:PORT (like gpu1:8471), got an empty string"};
  std::string host, port_text;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return error{expected + " (an IPv6 address goes in brackets: [::1]:8471)"};
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return error{expected + " (no :PORT)"};
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find("://") == std::string::npos && host.find(':') != std::string::npos)
      return error{expected + " (an IPv6 address goes in brackets: [::1]:8471)"};
  }
  if (std::string why = bad_host(host); !why.empty()) return error{expected + " (" + why + ")"};
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < (allow_any_port ? 0u : 1u) || port > 65535) {
    return error{expected + (allow_any_port ? " (the port must be a number from 0 to 65535)"
                                            : " (the port must be a number from 1 to 65535)")};
  }
  return remote_worker{host, static_cast<uint16_t>(port)};
}

std::string to_string(const remote_worker& w) {
  const bool v6 = w.host.find(':') != std::string::npos;
  return (v6 ? "[" + w.host + "]" : w.host) + ":" + std::to_string(w.port);
}

result<experiment_config> parse_config(const std::string& yaml_text, const std::string& source_name,
                                       const fs::path& base_dir) {
  std::error_code ec;
  fs::path base = base_dir.empty() ? fs::current_path(ec) : fs::absolute(base_dir, ec);
  if (ec) return error{source_name + ": cannot resolve the directory for task paths: " + ec.message()};
  base = base.lexically_normal();

  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(yaml_text);
  } catch (const YAML::ParserException& e) {
    const std::string pos =
        e.mark.is_null() ? "" : ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    return error{source_name + pos + ": YAML syntax error: " + e.msg + tab_hint(yaml_text, e.mark)};
  } catch (const YAML::Exception& e) {
    return error{source_name + ": YAML error: " + e.msg};
  }
  yaml_reader r(source_name);
  if (docs.size() > 1) {
    r.fail_at(docs[1], "a config is one YAML document, this file holds " + std::to_string(docs.size()) +
                           " (remove the '---' separators)");
    return error{r.message()};
  }
  experiment_config c;
  c.source = source_name;
  try {
    read_root(r, docs.empty() ? YAML::Node() : docs[0], base, c);
  } catch (const YAML::Exception& e) {
    // Should not happen: the reader checks types before it converts. Say where anyway.
    r.fail_plain("unexpected YAML error at " + std::to_string(e.mark.line + 1) + ":" +
                 std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  if (!r.ok()) return error{r.message()};
  return c;
}

result<experiment_config> load_config(const fs::path& file) {
  std::error_code ec;
  const auto st = fs::status(file, ec);
  const fs::path abs = fs::absolute(file, ec).lexically_normal();
  if (!fs::exists(st)) {
    return error{file.string() + ": config file not found (looked for " + abs.string() + ")"};
  }
  if (fs::is_directory(st)) {
    return error{file.string() + ": is a directory, not a config file"};
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return error{file.string() + ": cannot read config file: " + std::strerror(errno)};
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return error{file.string() + ": cannot read config file: " + std::strerror(errno)};
  return parse_config(text.str(), file.string(), abs.parent_path());
}

std::string to_yaml(const experiment_config& c) {
  YAML::Emitter out;
  auto str = [&](const char* key, const std::string& v) { out << YAML::Key << key << YAML::Value << v; };
  auto num = [&](const char* key, double v) { out << YAML::Key << key << YAML::Value << format_double(v); };
  auto integer = [&](const char* key, int v) { out << YAML::Key << key << YAML::Value << v; };
  auto flag = [&](const char* key, bool v) { out << YAML::Key << key << YAML::Value << v; };
  auto section = [&](const char* key) { out << YAML::Key << key << YAML::Value << YAML::BeginMap; };

  out << YAML::Comment("Effective KernelSkill configuration" +
                       (c.source.empty() ? std::string() : ", loaded from " + c.source))
      << YAML::Newline;
  out << YAML::BeginMap;
  str("name", c.name);
  out << YAML::Key << "tasks" << YAML::Value;
  if (c.tasks.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& t : c.tasks) out << t;
  out << YAML::EndSeq;

  section("gpus");
  out << YAML::Key << "local" << YAML::Value;
  if (c.gpus.local_all) {
    out << "all";
  } else if (c.gpus.local_devices.empty()) {
    out << "none";
  } else {
    out << YAML::Flow << YAML::BeginSeq;
    for (int d : c.gpus.local_devices) out << d;
    out << YAML::EndSeq;
  }
  out << YAML::Key << "remote" << YAML::Value;
  if (c.gpus.remote.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& w : c.gpus.remote) out << to_string(w);
  out << YAML::EndSeq;
  str("worker_binary", c.gpus.worker_binary);
  num("review_timeout_s", c.gpus.review_timeout_s);
  num("trial_cache_gib", c.gpus.trial_cache_gib);
  str("profile_replay", c.gpus.profile_replay);
  str("remote_token_env", c.gpus.remote_token_env);
  str("remote_token_file", c.gpus.remote_token_file);
  out << YAML::EndMap;

  section("budgets");
  integer("seeds", c.budgets.seeds);
  integer("rounds", c.budgets.rounds);
  integer("repair_attempts", c.budgets.repair_attempts);
  integer("tasks_in_flight", c.budgets.tasks_in_flight);
  integer("llm_requests_in_flight", c.budgets.llm_requests_in_flight);
  integer("device_queue_depth", c.budgets.device_queue_depth);
  out << YAML::EndMap;

  section("coder");
  str("backend", c.coder.backend);
  section("llm");
  const auto& l = c.coder.llm;
  str("provider", l.provider);
  str("endpoint", l.endpoint);
  str("model", l.model);
  str("api_key_env", l.api_key_env);
  num("timeout_s", l.timeout_s);
  num("reply_timeout_s", l.reply_timeout_s);
  flag("stream", l.stream);
  integer("max_retries", l.max_retries);
  num("temperature", l.temperature);
  integer("max_tokens", l.max_tokens);
  flag("reasoning", l.reasoning);
  str("reasoning_effort", l.reasoning_effort);
  integer("context_tokens", l.context_tokens);
  integer("prompt_tokens", l.prompt_tokens);
  str("cache_dir", l.cache_dir);
  out << YAML::EndMap << YAML::EndMap;

  section("review");
  integer("trials", c.review.trials);
  num("suspicious_speedup", c.review.suspicious_speedup);
  str("size", c.review.size);
  str("draw_inputs", c.review.draw_inputs);
  out << YAML::EndMap;

  section("references");
  integer("cpu_seconds", c.references.cpu_seconds);
  if (c.references.memory_mb == 0)
    str("memory_mb", "auto");
  else
    integer("memory_mb", c.references.memory_mb);
  integer("wall_seconds", c.references.wall_seconds);
  str("sandbox", c.references.sandbox);
  out << YAML::Key << "read_paths" << YAML::Value;
  if (c.references.read_paths.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& p : c.references.read_paths) out << p;
  out << YAML::EndSeq;
  out << YAML::EndMap;

  section("ablation");
  flag("long_term_memory", c.ablation.long_term_memory);
  flag("short_term_memory", c.ablation.short_term_memory);
  out << YAML::EndMap;

  section("memory");
  str("path", c.memory.path);
  out << YAML::EndMap;
  section("output");
  str("dir", c.output.dir);
  out << YAML::EndMap;
  section("logging");
  str("level", c.logging.level);
  str("file", c.logging.file);
  out << YAML::EndMap;
  section("serve");
  str("listen", c.serve.listen);
  str("token_env", c.serve.token_env);
  num("header_timeout_s", c.serve.header_timeout_s);
  num("body_timeout_s", c.serve.body_timeout_s);
  integer("max_pending_connections", c.serve.max_pending_connections);
  out << YAML::EndMap;

  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace ks
