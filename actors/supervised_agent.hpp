#pragma once
// One agent of a task under supervision (actors/task_coordinator.hpp, "agents are
// monitored"): the requester spawns the agent on first use and keeps it.
//
// What it promises:
// - an agent that dies or does not answer within the timeout is killed, a fresh one
//   is spawned and the request re-sent, at most max_restarts times in all (the count
//   is shared: several agents of one line draw on the same budget); the error after
//   the last says why ("it did not answer within 30 s", or how it died);
// - an agent killed while it works (an exit message with any reason but normal) ends
//   once its call returns: CAF delivers its answer first, and the next request, sent
//   to the dead agent, restarts it like any death;
// - an agent's own failure (agent_failure, actors/agents.hpp) is handed back as an
//   error at once, without a restart;
// - the agent is told to exit when its supervisor goes out of scope.
//
// A hung agent cannot be stopped: its thread sits in its call (a model request, a
// compile) until the call returns, and its answer then goes nowhere. What bounds that
// is the call's own limit (the model client's timeout_s and retries; NVRTC's compile
// timeout); the supervisor goes on at once with a fresh agent.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/agents.hpp"
#include "actors/task_coordinator.hpp"
#include "base/number_format.hpp"
#include "base/result.hpp"

namespace ks {

// One agent with its supervision: spawns it, re-spawns it when it dies or hangs, and
// re-sends the request, at most `max_restarts` times in all.
template <class Handle, class Factory>
class supervised_agent {
 public:
  // `spawned` (may be empty) is told of each agent as it starts.
  supervised_agent(caf::blocking_actor* self, std::string name, Factory factory, int* restarts, int max_restarts,
                   double timeout_s, std::function<void(const caf::actor&)> spawned = {})
      : self_(self),
        name_(std::move(name)),
        factory_(std::move(factory)),
        restarts_(restarts),
        max_restarts_(max_restarts),
        timeout_s_(timeout_s),
        timeout_(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))),
        spawned_(std::move(spawned)) {}

  ~supervised_agent() {
    if (handle_) self_->send_exit(handle_, caf::exit_reason::user_shutdown);
  }

  // The reply, or an error: the agent's own failure message, or why it was given up.
  template <class Reply, class Request>
  result<Reply> call(const Request& req) {
    for (;;) {
      if (!handle_) {
        handle_ = factory_(self_);
        if (spawned_) spawned_(caf::actor_cast<caf::actor>(handle_));
      }
      std::optional<Reply> reply;
      caf::error err;
      self_->request(handle_, timeout_, req)
          .receive([&](Reply& r) { reply = std::move(r); }, [&](caf::error& e) { err = e; });
      if (reply) return std::move(*reply);
      if (auto msg = agent_failure_message(err)) return error{*msg};
      std::string why = err == caf::sec::request_timeout ? "it did not answer within " + plain_g(timeout_s_) + " s"
                                                         : self_->system().render(err);
      if (*restarts_ >= max_restarts_) {
        gave_up_ = true;
        return error{"the " + name_ + " failed again (" + why + ") after " + std::to_string(*restarts_) +
                     " restarts; giving up"};
      }
      ++*restarts_;
      spdlog::warn("{} failed ({}); restarting it and re-sending the request ({} of {})", name_, why, *restarts_,
                   max_restarts_);
      self_->send_exit(handle_, caf::exit_reason::kill);
      handle_ = Handle{};
    }
  }

  // The agent failed more often than allowed: the caller should stop using it.
  bool gave_up() const { return gave_up_; }

 private:
  bool gave_up_ = false;
  caf::blocking_actor* self_;
  std::string name_;
  Factory factory_;
  Handle handle_;
  int* restarts_;
  int max_restarts_;
  double timeout_s_;
  caf::duration timeout_;
  std::function<void(const caf::actor&)> spawned_;
};

// `role` names the agent to o.on_spawn ("optimizer of line 0"); empty: its name.
template <class Handle, class Factory>
supervised_agent<Handle, Factory> make_agent(caf::blocking_actor* self, std::string name, Factory f, int* restarts,
                                             const coordinator_options& o, std::string role = "") {
  std::function<void(const caf::actor&)> spawned;
  if (o.on_spawn)
    spawned = [cb = o.on_spawn, role = role.empty() ? name : std::move(role)](const caf::actor& a) { cb(role, a); };
  return supervised_agent<Handle, Factory>(self, std::move(name), std::move(f), restarts, o.max_agent_restarts,
                                           o.agent_timeout_s, std::move(spawned));
}

// A supervised agent whose factory is a std::function: a type that can be named, so
// that the agent can be held as a member.
template <class Handle>
using agent_of = supervised_agent<Handle, std::function<Handle(caf::blocking_actor*)>>;

}  // namespace ks
