#include "actors/gpu_pool.hpp"

#include <signal.h>

#include <chrono>
#include <deque>
#include <memory>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

namespace ks {

namespace {

struct pending_review {
  review_request request;
  caf::typed_response_promise<review_result> promise;
};

// The pool's state. The actor is single-threaded: no locking.
struct pool_state {
  gpu_pool_options opts;
  std::unique_ptr<worker_process> process;
  gpu_worker_actor worker;
  uint64_t generation = 0;  // bumps with every (re)start: stale replies are ignored
  int restart_failures = 0;
  std::string last_failure;
  std::deque<pending_review> queue;
  bool busy = false;
};

review_result answer(const review_request& req, review_status status, std::string message) {
  review_result r;
  r.request_id = req.request_id;
  r.candidate_id = req.cand.id;
  r.status = status;
  r.message = std::move(message);
  return r;
}

class pool {
 public:
  pool(gpu_pool_actor::pointer self, gpu_pool_options opts) : self_(self) {
    st_.opts = std::move(opts);
  }

  // Starts (or restarts) the worker; false when it could not be started.
  bool start_worker() {
    stop_worker();
    auto proc = worker_process::start(st_.opts.worker);
    if (!proc) return fail_start(proc.message());
    auto handle = self_->system().middleman().remote_actor<gpu_worker_actor>(
        (*proc)->host(), (*proc)->port());
    if (!handle) return fail_start("cannot connect to the worker: " + self_->system().render(handle.error()));
    st_.process = std::move(*proc);
    st_.worker = *handle;
    ++st_.generation;
    st_.restart_failures = 0;
    self_->monitor(st_.worker);
    spdlog::info("gpu pool: worker pid {} on port {} (generation {})", st_.process->pid(),
                 st_.process->port(), st_.generation);
    return true;
  }

  void stop_worker() {
    if (st_.worker) self_->demonitor(st_.worker.address());
    st_.worker = nullptr;
    st_.process.reset();  // SIGTERM, then SIGKILL
  }

  void kill_worker() {
    if (st_.process) st_.process->kill_now();
    stop_worker();
  }

  bool ensure_worker() {
    if (st_.worker && st_.process && st_.process->alive()) return true;
    if (st_.restart_failures >= st_.opts.max_consecutive_restart_failures) return false;
    return start_worker();
  }

  void enqueue(review_request req, caf::typed_response_promise<review_result> rp) {
    if (st_.queue.size() >= st_.opts.max_queue) {
      rp.deliver(answer(req, review_status::internal_error,
                        "the GPU pool's queue is full (" + std::to_string(st_.opts.max_queue) +
                            " reviews waiting); try again later"));
      return;
    }
    st_.queue.push_back({std::move(req), std::move(rp)});
    dispatch();
  }

  void dispatch() {
    if (st_.busy || st_.queue.empty()) return;
    if (!ensure_worker()) {
      // The worker cannot be started: answer everything waiting with the reason.
      while (!st_.queue.empty()) {
        auto p = std::move(st_.queue.front());
        st_.queue.pop_front();
        p.promise.deliver(answer(p.request, review_status::internal_error,
                                 "the GPU worker cannot be started: " + st_.last_failure));
      }
      st_.restart_failures = 0;  // the next request tries again
      return;
    }
    st_.busy = true;
    auto current = std::make_shared<pending_review>(std::move(st_.queue.front()));
    st_.queue.pop_front();
    const uint64_t gen = st_.generation;
    const double limit_s = current->request.options.timeout_s + st_.opts.review_margin_s;
    self_->request(st_.worker, std::chrono::milliseconds(static_cast<int64_t>(limit_s * 1000)),
                   current->request)
        .then(
            [this, current, gen](review_result& r) {
              if (gen != st_.generation) return;  // answered already when the worker died
              current->promise.deliver(r);
              st_.busy = false;
              // A crashed review may have poisoned the CUDA context: start afresh.
              if (r.status == review_status::crashed) start_worker();
              dispatch();
            },
            [this, current, gen, limit_s](caf::error& err) {
              if (gen != st_.generation) return;
              if (err == caf::sec::request_timeout) {
                spdlog::warn("gpu pool: review {} timed out after {} s; killing the worker",
                             current->request.request_id, limit_s);
                kill_worker();  // before answering: whoever gets the answer sees it gone
                current->promise.deliver(answer(
                    current->request, review_status::timed_out,
                    "the review did not finish within " + std::to_string(limit_s) +
                        " s; the worker was killed and restarted"));
              } else {
                kill_worker();
                current->promise.deliver(answer(current->request, review_status::crashed,
                                                "the GPU worker stopped during the review (" +
                                                    self_->system().render(err) + ")"));
              }
              st_.busy = false;
              dispatch();
            });
    in_flight_ = current;
    in_flight_gen_ = gen;
  }

  // The worker process died or its connection dropped.
  void on_down(const caf::down_msg& dm) {
    if (!st_.worker || dm.source != st_.worker.address()) return;
    spdlog::warn("gpu pool: worker (generation {}) is gone: {}", st_.generation,
                 self_->system().render(dm.reason));
    const bool was_busy = st_.busy && in_flight_ && in_flight_gen_ == st_.generation;
    auto current = in_flight_;
    st_.worker = nullptr;
    if (st_.process) st_.process->kill_now();
    st_.process.reset();
    ++st_.generation;  // the pending request's own handlers now ignore it
    if (was_busy) {
      current->promise.deliver(answer(current->request, review_status::crashed,
                                      "the GPU worker died during the review (" +
                                          self_->system().render(dm.reason) + ")"));
      st_.busy = false;
    }
    dispatch();
  }

  void describe(caf::typed_response_promise<worker_info> rp) {
    if (!ensure_worker()) {
      worker_info info;
      info.driver_error = "the GPU worker cannot be started: " + st_.last_failure;
      rp.deliver(info);
      return;
    }
    self_->request(st_.worker, std::chrono::seconds(30), describe_atom::value)
        .then([rp](worker_info& info) mutable { rp.deliver(info); },
              [rp, this](caf::error& err) mutable {
                worker_info info;
                info.driver_error = "the GPU worker did not answer: " + self_->system().render(err);
                rp.deliver(info);
              });
  }

 private:
  bool fail_start(std::string why) {
    ++st_.restart_failures;
    st_.last_failure = std::move(why);
    spdlog::error("gpu pool: {}", st_.last_failure);
    return false;
  }

  gpu_pool_actor::pointer self_;
  pool_state st_;
  std::shared_ptr<pending_review> in_flight_;
  uint64_t in_flight_gen_ = 0;
};

}  // namespace

gpu_pool_actor::behavior_type gpu_pool(gpu_pool_actor::pointer self, gpu_pool_options opts) {
  // The pool object lives as long as the actor; handlers capture it by pointer.
  auto p = std::make_shared<pool>(self, std::move(opts));
  p->start_worker();
  self->set_down_handler([p](caf::down_msg& dm) { p->on_down(dm); });
  self->attach_functor([p] { p->stop_worker(); });
  return {
      [p, self](const review_request& req) -> caf::typed_response_promise<review_result> {
        auto rp = self->make_response_promise<review_result>();
        p->enqueue(req, rp);
        return rp;
      },
      [p, self](describe_atom) -> caf::typed_response_promise<worker_info> {
        auto rp = self->make_response_promise<worker_info>();
        p->describe(rp);
        return rp;
      },
  };
}

}  // namespace ks
