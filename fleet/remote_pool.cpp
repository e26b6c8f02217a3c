#include "fleet/remote_pool.hpp"

#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "base/number_format.hpp"
#include "fleet/module_sender.hpp"
#include "fleet/node_link.hpp"

namespace ks {

namespace {

using backstop_atom = caf::atom_constant<caf::atom("backstop")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;

const caf::atom_value node_fault_category = caf::atom("ks_node");

caf::duration after(double s) { return caf::duration{std::chrono::milliseconds(static_cast<int64_t>(s * 1000))}; }

std::chrono::milliseconds millis(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

struct waiting_review {
  review_request request;
  caf::response_promise promise;
};

class remote_pool {
 public:
  remote_pool(caf::event_based_actor* self, remote_pool_options o)
      : self_(self), o_(std::move(o)), name_(remote_device_name(o_)) {}

  void review(review_request req, caf::response_promise rp) {
    if (queue_.size() >= o_.max_queue) {
      rp.deliver(unjudged(req, "the queue of " + name_ + " is full (" + std::to_string(o_.max_queue) +
                                   " reviews waiting); try again later"));
      return;
    }
    queue_.push_back({std::move(req), std::move(rp)});
    pump();
  }

  void describe(caf::response_promise rp) {
    if (node_) {
      rp.deliver(info_);
      return;
    }
    describes_.push_back(std::move(rp));
    connect();
  }

  void on_down(const caf::down_msg& dm) {
    if (!node_ || dm.source != node_.address()) return;
    lose_node("the connection to the node dropped (" + self_->system().render(dm.reason) + ")");
  }

  void on_backstop(uint64_t id) {
    if (!current_ || id != current_id_) return;
    lose_node("no answer within " + plain_g(limit_s_) + " s (the review's timeout plus " + plain_g(o_.review_margin_s) +
              " s)");
  }

  void on_heartbeat(uint64_t id) {
    if (!current_ || id != current_id_ || !node_) return;
    self_->request(node_, after(o_.node_timeout_s), describe_atom::value)
        .then(
            [this, id](worker_info&) {
              if (current_ && id == current_id_)
                self_->delayed_send(caf::actor_cast<caf::actor>(self_), millis(o_.heartbeat_s), heartbeat_atom::value,
                                    id);
            },
            [this, id](caf::error& err) {
              if (current_ && id == current_id_)
                lose_node("the node did not answer a heartbeat within " + plain_g(o_.node_timeout_s) +
                          " s during the review (" + self_->system().render(err) + ")");
            });
  }

  // The pool is ending: nothing it holds will be answered by the node.
  void shut_down() {
    auto fault = make_node_fault(node_fault::unavailable, name_ + ": the pool stopped");
    if (current_) current_->promise.deliver(fault);
    current_.reset();
    for (auto& w : queue_) w.promise.deliver(fault);
    queue_.clear();
    answer_describes("the pool stopped");
  }

 private:
  void pump() {
    if (current_ || queue_.empty()) return;
    if (!node_) {
      connect();
      return;
    }
    current_ = std::make_shared<waiting_review>(std::move(queue_.front()));
    queue_.pop_front();
    const uint64_t id = ++current_id_;
    limit_s_ = current_->request.options.timeout_s + o_.review_margin_s;
    if (current_->request.task.module_bytes.size() > o_.module_part_bytes)
      send_held(id, true);
    else
      self_->request(node_, caf::infinite, device_atom::value, o_.device, current_->request)
          .then([this, id](review_result& r) { answered(id, std::move(r)); },
                [this, id](caf::error& err) { failed(id, err); });
    self_->delayed_send(caf::actor_cast<caf::actor>(self_), millis(limit_s_), backstop_atom::value, id);
    self_->delayed_send(caf::actor_cast<caf::actor>(self_), millis(o_.heartbeat_s), heartbeat_atom::value, id);
  }

  void answered(uint64_t id, review_result r) {
    if (!current_ || id != current_id_) return;  // answered already: the node was lost
    current_->promise.deliver(std::move(r));
    current_.reset();
    pump();
  }

  void failed(uint64_t id, const caf::error& err) {
    if (!current_ || id != current_id_) return;
    lose_node("the request failed on the link (" + self_->system().render(err) + ")");
  }

  // The review in flight, whose module is larger than a part, as a held_review: the
  // module's parts first unless the node holds them (protocol/module_parts.hpp); a node
  // that answers that it does not (it dropped them for room) is sent them again, once.
  // The module's digest is computed here the first time (a 4 GB module holds this
  // scheduler thread for seconds, once per task: every review of it shares the digest).
  void send_held(uint64_t id, bool may_resend) {
    auto held = std::make_shared<held_review>(hold_module(current_->request));
    auto ask = [this, id, held, may_resend] {
      if (!current_ || id != current_id_ || !node_) return;
      self_->request(node_, caf::infinite, device_atom::value, o_.device, *held)
          .then(
              [this, id, held, may_resend](review_result& r) {
                if (current_ && id == current_id_ && may_resend && r.status == review_status::internal_error &&
                    r.message == module_not_held(held->module_sha256)) {
                  spdlog::info("{}: the node dropped module {}; sending it again", name_, held->module_sha256);
                  node_held_.erase(held->module_sha256);
                  return send_held(id, false);
                }
                answered(id, std::move(r));
              },
              [this, id](caf::error& err) { failed(id, err); });
    };
    if (node_held_.count(held->module_sha256)) return ask();
    spdlog::info("{}: sending module {} ({} bytes) to the node in parts of {} bytes", name_, held->module_sha256,
                 current_->request.task.module_bytes.size(), o_.module_part_bytes);
    send_module_parts(self_, node_, current_->request.task.module_bytes, held->module_sha256, 0, o_.module_part_bytes,
                      [this, id, held, ask](std::optional<caf::error> err, std::string refused) {
                        if (!current_ || id != current_id_) return;
                        if (err) return failed(id, *err);
                        if (!refused.empty()) return answered(id, refused_module(current_->request, refused));
                        node_held_.insert(held->module_sha256);
                        ask();
                      });
  }

  void connect() {
    if (connecting_ || node_) return;
    connecting_ = true;
    open_node_link(self_, o_.host, o_.port, o_.token, o_.node_timeout_s, [this](result<node_link> link) {
      connecting_ = false;
      if (link) {
        auto refused = adopt(std::move(*link));
        if (refused.empty()) {
          answer_describes("");
          pump();
          return;
        }
        last_error_ = refused;
      } else {
        last_error_ = link.message();
      }
      // Nothing was sent: whoever asked may send it elsewhere at once.
      spdlog::debug("{}: not reachable: {}", name_, last_error_);
      auto fault = make_node_fault(node_fault::unavailable, name_ + ": " + last_error_);
      for (auto& w : queue_) w.promise.deliver(fault);
      queue_.clear();
      answer_describes(last_error_);
    });
  }

  // Takes the link when the node still has the device; else says why not.
  std::string adopt(node_link link) {
    const device_info* dev = nullptr;
    for (const auto& d : link.info.devices)
      if (d.ordinal == o_.device) dev = &d;
    if (!dev)
      return "the node serves no device " + std::to_string(o_.device) +
             (link.info.driver_error.empty() ? "" : " (" + link.info.driver_error + ")");
    if (!o_.expected.name.empty() && (dev->name != o_.expected.name || dev->cc_major != o_.expected.cc_major ||
                                      dev->cc_minor != o_.expected.cc_minor))
      return "device " + std::to_string(o_.device) + " is now a " + dev->name + ", not the " + o_.expected.name +
             " it was; a task's timings are compared on one GPU model only";
    if (o_.expected.name.empty()) o_.expected = *dev;
    worker_info mine = link.info;
    mine.devices = {*dev};
    const bool again = info_.pid != 0;
    const bool restarted = again && (mine.pid != info_.pid || mine.host != info_.host);
    info_ = std::move(mine);
    node_ = std::move(link.node);
    node_held_.clear();  // a fresh link may be a restarted node: it holds nothing
    self_->monitor(node_);
    spdlog::info("{}: {} ({} pid {}){}", name_, again ? "reconnected" : "connected", info_.host, info_.pid,
                 restarted ? ", a restarted node" : "");
    return "";
  }

  void lose_node(const std::string& why) {
    spdlog::warn("{}: node lost: {}{}", name_, why,
                 current_ ? "; the review in flight goes back to the dispatcher" : "");
    if (node_) self_->demonitor(node_.address());
    node_ = nullptr;
    last_error_ = why;
    if (current_) current_->promise.deliver(make_node_fault(node_fault::lost, name_ + ": " + why));
    current_.reset();
    auto fault = make_node_fault(node_fault::unavailable, name_ + ": " + why);
    for (auto& w : queue_) w.promise.deliver(fault);
    queue_.clear();
    answer_describes(why);
  }

  void answer_describes(const std::string& why) {
    for (auto& rp : describes_) {
      if (why.empty()) {
        rp.deliver(info_);
      } else {
        worker_info down = info_;
        down.devices.clear();
        down.driver_error = name_ + ": " + why;
        rp.deliver(std::move(down));
      }
    }
    describes_.clear();
  }

  caf::event_based_actor* self_;
  remote_pool_options o_;
  std::string name_;
  gpu_node_actor node_;              // null while the link is down
  std::set<std::string> node_held_;  // modules sent to the node in parts, by digest
  worker_info info_;                 // the node's description, this device only
  bool connecting_ = false;
  std::string last_error_;
  std::deque<waiting_review> queue_;
  std::shared_ptr<waiting_review> current_;  // sent, not answered
  uint64_t current_id_ = 0;                  // bumps per review sent: late answers are ignored
  double limit_s_ = 0;
  std::vector<caf::response_promise> describes_;
};

caf::behavior remote_pool_actor(caf::event_based_actor* self, remote_pool_options o) {
  auto p = std::make_shared<remote_pool>(self, std::move(o));
  self->set_down_handler([p](caf::down_msg& dm) { p->on_down(dm); });
  self->attach_functor([p] { p->shut_down(); });
  return {
      [p, self](review_request& req) {
        auto rp = self->make_response_promise();
        p->review(std::move(req), rp);
        return rp;
      },
      [p, self](describe_atom) {
        auto rp = self->make_response_promise();
        p->describe(rp);
        return rp;
      },
      [p](backstop_atom, uint64_t id) { p->on_backstop(id); },
      [p](heartbeat_atom, uint64_t id) { p->on_heartbeat(id); },
  };
}

}  // namespace

std::string remote_device_name(const remote_pool_options& o) {
  return o.host + ":" + std::to_string(o.port) + "/" + std::to_string(o.device);
}

caf::error make_node_fault(node_fault kind, std::string message) {
  return caf::error{static_cast<uint8_t>(kind), node_fault_category, caf::make_message(std::move(message))};
}

std::optional<node_fault_info> read_node_fault(const caf::error& e) {
  if (e.category() != node_fault_category) return std::nullopt;
  if (e.code() != static_cast<uint8_t>(node_fault::unavailable) && e.code() != static_cast<uint8_t>(node_fault::lost))
    return std::nullopt;
  node_fault_info out{static_cast<node_fault>(e.code()), ""};
  const auto& ctx = e.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) out.message = ctx.get_as<std::string>(0);
  return out;
}

gpu_pool_actor spawn_remote_pool(caf::actor_system& sys, remote_pool_options opts) {
  // Scheduled, not detached: nothing here blocks (the link opens asynchronously).
  return caf::actor_cast<gpu_pool_actor>(sys.spawn(remote_pool_actor, std::move(opts)));
}

}  // namespace ks
