#include "fleet/review_dispatcher.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <utility>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "base/number_format.hpp"
#include "fleet/node_link.hpp"

namespace ks {

namespace {

using tick_atom = caf::atom_constant<caf::atom("tick")>;
using clock = std::chrono::steady_clock;

std::chrono::milliseconds millis(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

clock::time_point in(double s) {
  return clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

// One review on its way: where it has been lost so far.
struct job {
  review_request request;
  caf::response_promise promise;
  int lost = 0;
  std::string losses;  // "; "-joined
  clock::time_point since = clock::now();
};
using job_ptr = std::shared_ptr<job>;

// A pool and what the dispatcher knows of it.
struct slot {
  dispatch_pool pool;
  size_t meter_index = 0;
  bool up = true;
  int in_flight = 0;
  std::string why_down;
  double backoff_s = 0;
  clock::time_point next_probe;
  bool probing = false;
};

// A node not reached yet.
struct pending_node {
  late_node node;
  double backoff_s = 0;
  clock::time_point next_try;
  bool trying = false;
  std::string why;
};

class dispatcher {
 public:
  dispatcher(caf::event_based_actor* self, dispatcher_options o) : self_(self), o_(std::move(o)) {
    for (size_t i = 0; i < o_.pools.size(); ++i) {
      slot s;
      s.pool = o_.pools[i];
      s.meter_index = i;
      slots_.push_back(std::move(s));
    }
    for (auto& n : o_.late_nodes) {
      pending_node p;
      p.node = n;
      p.backoff_s = o_.probe_min_s;
      p.next_try = clock::now();
      late_.emplace(next_late_++, std::move(p));
    }
    if (!late_.empty()) ensure_tick();
  }

  void review(review_request req, caf::response_promise rp) {
    if (slots_.empty() && late_.empty()) {
      rp.deliver(unjudged(req, "no GPU worker to review on"));
      return;
    }
    auto j = std::make_shared<job>();
    j->request = std::move(req);
    j->promise = std::move(rp);
    route(j);
  }

  void tick() {
    ticking_ = false;
    const auto now = clock::now();
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].up && !slots_[i].probing && now >= slots_[i].next_probe) probe(i);
    for (auto& [k, p] : late_)
      if (!p.trying && now >= p.next_try) try_late(k);
    expire_held();
    ensure_tick();
  }

  void shut_down() {
    for (auto& j : held_) j->promise.deliver(unjudged(j->request, "the reviewer stopped before the review ran"));
    held_.clear();
    // Pools of late nodes were made here; the others were handed over.
    for (size_t i = 0; i < slots_.size(); ++i)
      if (o_.own_pools || i >= o_.pools.size())
        caf::anon_send_exit(slots_[i].pool.handle, caf::exit_reason::user_shutdown);
  }

 private:
  // The device class of a task: fixed at its first review.
  const std::string* class_for(const std::string& task) {
    if (auto it = task_class_.find(task); it != task_class_.end()) return &it->second;
    std::map<std::string, std::pair<int, int>> load;  // class → (in flight, devices up)
    for (auto& s : slots_)
      if (s.up) {
        auto& l = load[s.pool.device_class];
        l.first += s.in_flight;
        l.second += 1;
      }
    if (load.empty()) return nullptr;
    const std::string* best = nullptr;
    double best_load = std::numeric_limits<double>::max();
    for (auto& [cls, l] : load) {
      const double per_device = double(l.first) / l.second;
      if (per_device < best_load) best_load = per_device, best = &cls;
    }
    auto [it, _] = task_class_.emplace(task, *best);
    spdlog::info("task '{}': reviewed on {}", task, it->second.empty() ? "the devices" : it->second);
    return &it->second;
  }

  void route(const job_ptr& j) {
    const std::string* cls = class_for(j->request.task.name);
    size_t pick = slots_.size();
    if (cls)
      for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].up && slots_[i].pool.device_class == *cls &&
            (pick == slots_.size() || slots_[i].in_flight < slots_[pick].in_flight))
          pick = i;
    if (pick == slots_.size()) {
      held_.push_back(j);
      ensure_tick();
      return;
    }
    send(pick, j);
  }

  void send(size_t i, const job_ptr& j) {
    ++slots_[i].in_flight;
    if (o_.meter) o_.meter->started(slots_[i].meter_index);
    self_->request(slots_[i].pool.handle, caf::infinite, j->request)
        .then(
            [this, i, j](review_result& r) {
              --slots_[i].in_flight;
              if (o_.meter) o_.meter->finished(slots_[i].meter_index);
              mark_up(i);
              j->promise.deliver(std::move(r));
            },
            [this, i, j](caf::error& err) { failed(i, j, err); });
  }

  // The pool could not judge the review: its node is down or went away with it.
  void failed(size_t i, const job_ptr& j, const caf::error& err) {
    --slots_[i].in_flight;
    auto fault = read_node_fault(err);
    // Any other error means the pool itself is gone; the review may have been running.
    const bool lost = !fault || fault->kind == node_fault::lost;
    const std::string why = fault ? fault->message : slots_[i].pool.name + ": " + self_->system().render(err);
    if (o_.meter) {
      if (lost)
        o_.meter->lost(slots_[i].meter_index);
      else
        o_.meter->refused(slots_[i].meter_index);
    }
    mark_down(i, why);
    if (lost) {
      ++j->lost;
      j->losses += (j->losses.empty() ? "" : "; ") + why;
      spdlog::warn("review {} of '{}' was lost with its node ({}); {}", j->request.request_id, j->request.task.name,
                   why, j->lost >= o_.max_lost ? "not sent again" : "sent to another device");
      if (j->lost >= o_.max_lost) {
        j->promise.deliver(unjudged(j->request, "the review was lost with its node " + std::to_string(j->lost) +
                                                    " times (" + j->losses + "); it is not sent again"));
        return;
      }
    }
    route(j);
  }

  void mark_down(size_t i, const std::string& why) {
    auto& s = slots_[i];
    s.why_down = why;
    if (!s.up) return;
    s.up = false;
    s.backoff_s = o_.probe_min_s;
    s.next_probe = in(s.backoff_s);
    if (o_.meter) o_.meter->set_up(s.meter_index, false);
    spdlog::warn("out of the rotation: {}", why);
    ensure_tick();
  }

  void mark_up(size_t i) {
    auto& s = slots_[i];
    if (s.up) return;
    s.up = true;
    s.why_down.clear();
    if (o_.meter) o_.meter->set_up(s.meter_index, true);
    spdlog::info("{} is back in the rotation", s.pool.name);
    drain();
  }

  // Asks a pool that is out whether its device is back (this reopens its node's link).
  void probe(size_t i) {
    slots_[i].probing = true;
    self_->request(slots_[i].pool.handle, caf::infinite, describe_atom::value)
        .then([this, i](worker_info& info) { probed(i, info.devices.empty() ? info.driver_error : ""); },
              [this, i](caf::error& err) { probed(i, self_->system().render(err)); });
  }

  void probed(size_t i, const std::string& why_not) {
    auto& s = slots_[i];
    s.probing = false;
    if (why_not.empty()) {
      mark_up(i);
      return;
    }
    s.why_down = why_not;
    s.backoff_s = std::min(o_.probe_max_s, s.backoff_s * 2);
    s.next_probe = in(s.backoff_s);
    spdlog::info("still out of the rotation: {}; next try in {} s", why_not, plain_g(s.backoff_s));
    ensure_tick();
  }

  void try_late(uint64_t k) {
    late_[k].trying = true;
    const auto n = late_[k].node;
    open_node_link(self_, n.host, n.port, o_.remote.token, o_.remote.node_timeout_s, [this, k](result<node_link> link) {
      auto& p = late_[k];
      p.trying = false;
      if (!link || link->info.devices.empty()) {
        p.why = link ? p.node.host + ":" + std::to_string(p.node.port) + ": no GPU: " + link->info.driver_error
                     : link.message();
        p.backoff_s = std::min(o_.probe_max_s, p.backoff_s * 2);
        p.next_try = in(p.backoff_s);
        spdlog::info("not reachable yet: {}; next try in {} s", p.why, plain_g(p.backoff_s));
        ensure_tick();
        return;
      }
      for (const auto& d : link->info.devices) {
        remote_pool_options ro = o_.remote;
        ro.host = p.node.host;
        ro.port = p.node.port;
        ro.device = d.ordinal;
        ro.expected = d;
        slot s;
        s.pool = {spawn_remote_pool(self_->system(), ro), remote_device_name(ro), device_class(d)};
        s.meter_index = o_.meter ? o_.meter->add_pool(s.pool.name) : slots_.size();
        spdlog::info("{} joins the rotation: {}", s.pool.name, s.pool.device_class);
        slots_.push_back(std::move(s));
      }
      late_.erase(k);
      drain();
    });
  }

  void drain() {
    auto waiting = std::move(held_);
    held_.clear();
    for (auto& j : waiting) route(j);
  }

  void expire_held() {
    const auto now = clock::now();
    for (auto it = held_.begin(); it != held_.end();) {
      auto& j = *it;
      if (now - j->since < std::chrono::duration<double>(o_.hold_limit_s)) {
        ++it;
        continue;
      }
      std::string why;
      auto cls = task_class_.find(j->request.task.name);
      for (auto& s : slots_)
        if (cls == task_class_.end() || s.pool.device_class == cls->second)
          why += (why.empty() ? "" : "; ") + s.pool.name + ": " + s.why_down;
      for (auto& [k, p] : late_) why += (why.empty() ? "" : "; ") + p.why;
      j->promise.deliver(unjudged(
          j->request, "no GPU" + (cls == task_class_.end() || cls->second.empty() ? "" : " of class " + cls->second) +
                          " was in the rotation for " + plain_g(o_.hold_limit_s) + " s (" + why + ")"));
      it = held_.erase(it);
    }
  }

  void ensure_tick() {
    if (ticking_) return;
    bool watch = !held_.empty();
    for (auto& s : slots_) watch = watch || !s.up;
    for (auto& [k, p] : late_) watch = watch || !p.trying;
    if (!watch) return;
    ticking_ = true;
    self_->delayed_send(caf::actor_cast<caf::actor>(self_), millis(std::max(0.05, o_.probe_min_s / 2)),
                        tick_atom::value);
  }

  caf::event_based_actor* self_;
  dispatcher_options o_;
  std::vector<slot> slots_;
  std::map<uint64_t, pending_node> late_;  // by a number of their own: entries leave as nodes are reached
  uint64_t next_late_ = 0;
  std::map<std::string, std::string> task_class_;
  std::deque<job_ptr> held_;
  bool ticking_ = false;
};

caf::behavior dispatcher_actor(caf::event_based_actor* self, dispatcher_options o) {
  auto d = std::make_shared<dispatcher>(self, std::move(o));
  self->attach_functor([d] { d->shut_down(); });
  return {
      [d, self](review_request& req) {
        auto rp = self->make_response_promise();
        d->review(std::move(req), rp);
        return rp;
      },
      [d](tick_atom) { d->tick(); },
  };
}

}  // namespace

std::string device_class(const device_info& d) {
  return d.name + " (sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ")";
}

reviewer_actor spawn_review_dispatcher(caf::actor_system& sys, dispatcher_options opts) {
  return caf::actor_cast<reviewer_actor>(sys.spawn(dispatcher_actor, std::move(opts)));
}

}  // namespace ks
