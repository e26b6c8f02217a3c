#include "fleet/node_link.hpp"

#include <chrono>
#include <future>
#include <memory>
#include <set>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>

#include "base/number_format.hpp"
#include "protocol/worker_link.hpp"

namespace ks {

namespace {

caf::duration bound(double s) { return caf::duration{std::chrono::milliseconds(static_cast<int64_t>(s * 1000))}; }

}  // namespace

void node_handshake(caf::event_based_actor* self, const gpu_node_actor& node, const std::string& name, double timeout_s,
                    node_link_done done) {
  // One answer, whichever comes first; `done` is shared by both handlers.
  auto once = std::make_shared<node_link_done>(std::move(done));
  self->request(node, bound(timeout_s), describe_atom::value)
      .then(
          [=](worker_info& info) {
            if (info.version != protocol_version)
              return (*once)(ks::error{name + ": the node speaks " + info.version + ", this daemon " +
                                       protocol_version + "; run the same KernelSkill version on both"});
            (*once)(node_link{node, std::move(info)});
          },
          [=](caf::error& err) {
            (*once)(ks::error{name + ": the node did not answer describe within " + plain_g(timeout_s) + " s (" +
                              self->system().render(err) + "); is it stopped or overloaded?"});
          });
}

void open_node_link(caf::event_based_actor* self, const std::string& host, uint16_t port, const std::string& token,
                    double timeout_s, node_link_done done) {
  const std::string name = host + ":" + std::to_string(port);
  const auto started = std::chrono::steady_clock::now();
  auto once = std::make_shared<node_link_done>(std::move(done));
  // A middleman actor's connect (not middleman::remote_actor, which blocks the
  // caller): a node that accepts TCP but never completes the handshakes must not hold
  // the actor, and the request's own timeout bounds it. The connector runs the token's
  // handshake first (protocol/worker_link.hpp) and is dropped once it has answered.
  auto why = std::make_shared<std::string>();
  auto mm = spawn_guarded_connector(self->system(), token, why, timeout_s);
  auto drop = [mm] { caf::anon_send_exit(mm, caf::exit_reason::user_shutdown); };
  self->request(mm, bound(timeout_s), caf::connect_atom::value, host, port)
      .then(
          [=](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
            drop();
            if (!ptr)
              return (*once)(ks::error{name + ": nothing is published there (is `kernelskill-gpu --listen " + name +
                                       "` running?)"});
            if (!self->system().assignable<gpu_node_actor>(ifs))
              return (*once)(ks::error{name +
                                       ": what listens there is not a KernelSkill node agent of this version (a "
                                       "`kernelskill-gpu --worker`, or another KernelSkill version); start the node "
                                       "with `kernelskill-gpu --listen " +
                                       name + "`"});
            const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            node_handshake(self, caf::actor_cast<gpu_node_actor>(std::move(ptr)), name,
                           std::max(0.1, timeout_s - spent), [once](result<node_link> r) { (*once)(std::move(r)); });
          },
          [=](caf::error& err) {
            drop();
            (*once)(ks::error{name + ": cannot connect (" + (why->empty() ? self->system().render(err) : *why) +
                              "); is `kernelskill-gpu --listen " + name + "` running there?"});
          });
}

result<node_link> open_node_link(caf::actor_system& sys, const std::string& host, uint16_t port,
                                 const std::string& token, double timeout_s) {
  auto answer = std::make_shared<std::promise<result<node_link>>>();
  auto fut = answer->get_future();
  sys.spawn([=](caf::event_based_actor* self) {
    open_node_link(self, host, port, token, timeout_s, [self, answer](result<node_link> r) {
      answer->set_value(std::move(r));
      self->quit();
    });
  });
  return fut.get();
}

}  // namespace ks
