#include "fleet/gpu_nodes.hpp"

#include "fleet/node_link.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <spdlog/spdlog.h>
#include "base/secret.hpp"
#include "protocol/worker_link.hpp"

#include <algorithm>
#include <chrono>

namespace ks {

namespace {

result<worker_info> ask_describe(caf::actor_system& sys, const gpu_worker_actor& worker, double timeout_s) {
  caf::scoped_actor self{sys};
  result<worker_info> out = ks::error{"no answer"};
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  self->request(worker, timeout, describe_atom::value)
      .receive([&](worker_info& info) { out = std::move(info); },
               [&](caf::error& err) { out = ks::error{sys.render(err)}; });
  return out;
}

void log_devices(const std::string& name, const worker_info& info) {
  for (auto& d : info.devices)
    spdlog::info("{}: gpu {}: {} (sm_{}{}, {:.1f} GiB)", name, d.ordinal, d.name, d.cc_major, d.cc_minor,
                 d.total_memory_bytes / 1073741824.0);
}

void add_node(gpu_discovery& found, caf::actor_system& sys, std::string name, gpu_worker_actor handle,
              std::unique_ptr<worker_process> proc, const std::vector<int>& only, double timeout_s) {
  auto info = ask_describe(sys, handle, timeout_s);
  if (!info) {
    found.problems.push_back(name + ": no answer to describe (" + info.message() + ")");
    return;
  }
  if (!only.empty()) {
    auto& d = info->devices;
    d.erase(std::remove_if(
                d.begin(), d.end(),
                [&](const device_info& x) { return std::find(only.begin(), only.end(), x.ordinal) == only.end(); }),
            d.end());
  }
  if (info->devices.empty()) {
    found.problems.push_back(
        name + " (" + info->host +
        "): no GPU: " + (info->driver_error.empty() ? "none of the configured devices exist" : info->driver_error));
    return;
  }
  log_devices(name, *info);
  gpu_node node;
  node.name = std::move(name);
  node.info = std::move(*info);
  node.handle = std::move(handle);
  node.process = std::move(proc);
  found.nodes.push_back(std::move(node));
}

}  // namespace

size_t gpu_discovery::device_count() const {
  size_t n = 0;
  for (auto& node : nodes) n += node.info.devices.size();
  return n;
}

gpu_discovery discover_gpus(caf::actor_system& sys, const gpu_config& cfg, double timeout_s) {
  gpu_discovery found;
  if (cfg.local_all || !cfg.local_devices.empty()) {
    worker_process_options wo;
    wo.binary = cfg.worker_binary;
    wo.start_timeout_s = timeout_s;
    // The worker logs warnings (a profiler that failed, a slow compile) into the
    // daemon's stderr; at debug or trace it logs at the daemon's level.
    wo.log_level = spdlog::get_level() <= spdlog::level::debug
                       ? std::string(spdlog::level::to_string_view(spdlog::get_level()).data())
                       : "warn";
    auto proc = worker_process::start(wo);
    if (!proc) {
      found.problems.push_back("local: " + proc.message());
    } else {
      auto handle = connect_worker(sys, (*proc)->host(), (*proc)->port(), (*proc)->token(), timeout_s);
      if (!handle)
        found.problems.push_back("local: cannot connect to the worker on port " + std::to_string((*proc)->port()) +
                                 ": " + handle.message());
      else
        add_node(found, sys, "local", *handle, std::move(*proc), cfg.local_devices, timeout_s);
    }
  }
  if (cfg.remote.empty()) return found;
  // The shared secret remote nodes ask for (protocol/worker_link.hpp).
  auto token = read_shared_token(cfg.remote_token_file, cfg.remote_token_env, "gpus.remote_token_file");
  if (!token) {
    found.problems.push_back(token.message());
    return found;
  }
  found.remote_token = *token;
  for (auto& remote : cfg.remote) {
    auto name = to_string(remote);
    auto link = open_node_link(sys, remote.host, remote.port, *token, timeout_s);
    if (!link) {
      found.problems.push_back(link.message());
      found.unreachable.push_back(remote);
      continue;
    }
    if (link->info.devices.empty()) {
      found.problems.push_back(name + " (" + link->info.host + "): no GPU: " + link->info.driver_error);
      continue;
    }
    log_devices(name, link->info);
    gpu_node node;
    node.name = name;
    node.info = std::move(link->info);
    node.remote = remote;
    found.nodes.push_back(std::move(node));
  }
  return found;
}

std::string no_gpu_message(const gpu_discovery& found) {
  std::string msg = "no GPU is available, so there is nothing to check kernels on.\n";
  for (auto& p : found.problems) msg += "  - " + p + "\n";
  msg +=
      "To use a GPU on another machine, start its node agent there with a token (a file only\n"
      "you can read, the same on both machines):\n"
      "    kernelskill-gpu --listen 0.0.0.0:8471 --token-file ~/.ks-worker-token\n"
      "and name it in the config:\n"
      "    gpus:\n"
      "      remote: [\"gpu-host:8471\"]\n"
      "      remote_token_file: ~/.ks-worker-token\n"
      "`kernelskill-gpu --list-devices` shows what a machine's driver sees.";
  return msg;
}

}  // namespace ks
