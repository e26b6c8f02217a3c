#include "fleet/node_agent.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

namespace ks {

namespace {

struct agent_state {
  node_agent_options opts;
  std::map<int32_t, gpu_pool_actor> pools;
  std::unique_ptr<module_store> modules;   // modules a daemon sent in parts, by digest
  std::map<int32_t, device_info> devices;  // as their workers describe them
  std::string problems;                    // devices whose worker could not start
  size_t described = 0;
  std::vector<caf::typed_response_promise<worker_info>> waiting;  // describes before all workers answered

  bool ready() const { return described == pools.size(); }

  worker_info info() const {
    worker_info out = opts.base;
    out.devices.clear();
    for (auto& [ordinal, d] : devices) out.devices.push_back(d);
    // driver_error is for a node with no device: then it says why (the machine's
    // driver, or each worker's problem); a node that serves devices has none.
    if (!out.devices.empty())
      out.driver_error.clear();
    else if (!problems.empty())
      out.driver_error = problems;
    else if (out.driver_error.empty())
      out.driver_error = "no device to serve";
    return out;
  }

  std::string served() const {
    std::string s;
    for (auto& [ordinal, p] : pools) s += (s.empty() ? "" : ", ") + std::to_string(ordinal);
    return s.empty() ? "none" : s;
  }
};

}  // namespace

namespace {

// The pool of device `d`, when this node serves it.
std::optional<gpu_pool_actor> pool_of(const agent_state& st, int32_t d) {
  auto it = st.pools.find(d);
  if (it == st.pools.end() || (st.ready() && !st.devices.count(d))) return std::nullopt;
  return it->second;
}

std::string not_served(const agent_state& st, int32_t d) {
  return "this node (" + st.opts.base.host + ") serves no device " + std::to_string(d) + " (it serves " + st.served() +
         ")";
}

gpu_node_actor::behavior_type node_agent(gpu_node_actor::pointer self, std::shared_ptr<agent_state> st) {
  // Each worker says what its device is; describe answers from this record.
  for (auto& [ordinal, pool] : st->pools) {
    const int32_t d = ordinal;
    self->request(pool, caf::infinite, describe_atom::value).then([st, d](worker_info& w) {
      const device_info* mine = nullptr;
      for (auto& x : w.devices)
        if (x.ordinal == d || w.devices.size() == 1) mine = &x;
      if (mine) {
        device_info dev = *mine;
        dev.ordinal = d;
        spdlog::info("device {}: {}, compute capability {}.{}, {:.1f} GiB (worker pid {})", d, dev.name, dev.cc_major,
                     dev.cc_minor, dev.total_memory_bytes / 1073741824.0, w.pid);
        st->devices[d] = dev;
      } else {
        const std::string why = "device " + std::to_string(d) + ": " +
                                (w.driver_error.empty() ? "its worker describes no such device" : w.driver_error);
        spdlog::error("{}; it is not served", why);
        st->problems += (st->problems.empty() ? "" : "; ") + why;
      }
      if (++st->described == st->pools.size()) {
        for (auto& rp : st->waiting) rp.deliver(st->info());
        st->waiting.clear();
      }
    });
  }
  return {
      [self, st](describe_atom) -> caf::result<worker_info> {
        if (st->ready()) return st->info();
        auto rp = self->make_response_promise<worker_info>();
        st->waiting.push_back(rp);
        return rp;
      },
      [self, st](device_atom, int32_t d, review_request& req) -> caf::result<review_result> {
        auto it = pool_of(*st, d);
        if (!it) return unjudged(req, not_served(*st, d));
        return self->delegate(*it, std::move(req));
      },
      [st](module_part& part) { return st->modules->add(std::move(part)); },
      // A review of a module sent in parts goes to the device's pool whole: the pool
      // sends it on to its worker in parts again (its courier, fleet/gpu_pool.cpp).
      [self, st](device_atom, int32_t d, const held_review& h) -> caf::result<review_result> {
        auto it = pool_of(*st, d);
        if (!it) return unjudged(h.request, not_served(*st, d));
        auto req = st->modules->resolve(h);
        if (!req) return unjudged(h.request, module_not_held(h.module_sha256));
        return self->delegate(*it, std::move(*req));
      },
  };
}

}  // namespace

struct pools_stopped {
  std::mutex mu;
  std::condition_variable cv;
  size_t count = 0;
};

node_agent_handle spawn_node_agent(caf::actor_system& sys, node_agent_options opts) {
  auto st = std::make_shared<agent_state>();
  st->opts = std::move(opts);
  st->modules = std::make_unique<module_store>(st->opts.module_keep_bytes);
  node_agent_handle out;
  out.stopped = std::make_shared<pools_stopped>();
  for (int32_t d : st->opts.devices) {
    gpu_pool_options po = st->opts.pool;
    po.worker.device = d;
    po.on_stopped = [stopped = out.stopped] {
      std::lock_guard lock(stopped->mu);
      ++stopped->count;
      stopped->cv.notify_all();
    };
    auto pool = sys.spawn<caf::detached>(gpu_pool, po);
    st->pools[d] = pool;
    out.pools.push_back(pool);
  }
  out.agent = sys.spawn(node_agent, st);
  return out;
}

void stop_node_agent(const node_agent_handle& node, double timeout_s) {
  caf::anon_send_exit(node.agent, caf::exit_reason::user_shutdown);
  for (auto& p : node.pools) caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  std::unique_lock lock(node.stopped->mu);
  node.stopped->cv.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)),
                            [&] { return node.stopped->count >= node.pools.size(); });
}

}  // namespace ks
