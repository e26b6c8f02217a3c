#include "fleet/gpu_pool.hpp"

#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include "protocol/worker_link.hpp"

namespace ks {

namespace {

struct pending_review {
  review_request request;
  caf::typed_response_promise<review_result> promise;
};

// Carries the pool's requests to the worker, so that the worker's node never sees
// the pool itself. A node that receives a message learns its sender, and the local
// BASP broker then monitors that sender; when the sender ends, its down message waits
// in the broker's mailbox holding a strong reference to it. For the detached pool
// that reference outlived the broker's last turn at shutdown now and then, and the
// actor system's destructor then waited for the pool's thread forever (gpu_pool_test
// hung at exit about every other run; found by looking for the pool's control block
// in a hung process). The courier is an ordinary scheduled actor: whatever keeps it
// alive at shutdown keeps no thread waiting.
caf::behavior courier(caf::event_based_actor* self, gpu_worker_actor worker) {
  return {
      [self, worker](review_request& req) {
        auto rp = self->make_response_promise();
        self->request(worker, caf::infinite, std::move(req))
            .then([rp](review_result& r) mutable { rp.deliver(std::move(r)); },
                  [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
      },
      [self, worker](describe_atom) {
        auto rp = self->make_response_promise();
        self->request(worker, caf::infinite, describe_atom::value)
            .then([rp](worker_info& info) mutable { rp.deliver(std::move(info)); },
                  [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
      },
  };
}

// The pool's state. The actor is single-threaded: no locking.
struct pool_state {
  gpu_pool_options opts;
  std::unique_ptr<worker_process> process;
  gpu_worker_actor worker;  // monitored: its down message is how a death shows
  caf::actor courier;       // talks to `worker` on the pool's behalf
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

// Kills the worker when a review outlives its time limit. The pool's requests carry no
// CAF timeout: CAF 0.17 keeps a strong reference to the requesting actor on its clock
// until the timeout is due, and drops none when the actor system shuts down, so a
// detached actor with a timeout pending never ends and the system's destructor waits
// for its thread forever (gpu_pool_test hung at exit about every other run). This
// thread holds no reference to the actor: it kills the process, and the dropped
// connection reaches the pool as a down message.
class review_watchdog {
 public:
  review_watchdog() : thread_([this] { run(); }) {}
  ~review_watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Kills `pid` with SIGKILL at `deadline` unless disarmed first. The pool reaps the
  // process only after disarm(), so the pid cannot be reused while armed.
  void arm(pid_t pid, std::chrono::steady_clock::time_point deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pid_ = pid;
      deadline_ = deadline;
      fired_ = false;
    }
    cv_.notify_all();
  }

  // Stops watching; true when the watchdog killed the process.
  bool disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = -1;
    return std::exchange(fired_, false);
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (pid_ <= 0) {
        cv_.wait(lock);
      } else if (std::chrono::steady_clock::now() >= deadline_) {
        ::kill(pid_, SIGKILL);
        fired_ = true;
        pid_ = -1;
      } else {
        cv_.wait_until(lock, deadline_);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point deadline_;
  bool fired_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

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
    auto handle = connect_worker(self_->system(), (*proc)->host(), (*proc)->port(), (*proc)->token());
    if (!handle) return fail_start("cannot connect to the worker: " + handle.message());
    st_.process = std::move(*proc);
    st_.worker = *handle;
    st_.courier = self_->spawn(courier, st_.worker);
    ++st_.generation;
    st_.restart_failures = 0;
    self_->monitor(st_.worker);
    spdlog::info("gpu pool: worker pid {} on port {} (generation {})", st_.process->pid(),
                 st_.process->port(), st_.generation);
    return true;
  }

  void stop_worker() {
    watchdog_.disarm();
    if (st_.worker) self_->demonitor(st_.worker.address());
    if (st_.courier) self_->send_exit(st_.courier, caf::exit_reason::user_shutdown);
    st_.courier = nullptr;
    st_.worker = nullptr;
    st_.process.reset();  // SIGTERM, then SIGKILL
  }

  void kill_worker() {
    watchdog_.disarm();
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
    limit_s_ = current->request.options.timeout_s + st_.opts.review_margin_s;
    spdlog::info("gpu pool: review {} of '{}' to worker pid {}", current->request.request_id,
                 current->request.task.name, st_.process->pid());
    watchdog_.arm(st_.process->pid(), std::chrono::steady_clock::now() +
                                          std::chrono::milliseconds(static_cast<int64_t>(limit_s_ * 1000)));
    self_->request(st_.courier, caf::infinite, current->request)
        .then(
            [this, current, gen](review_result& r) {
              if (gen != st_.generation) return;  // answered already when the worker died
              // A result that beat the watchdog by a hair is still the result; the
              // killed worker's down message then only replaces it.
              watchdog_.disarm();
              spdlog::info("gpu pool: review {} answered by worker pid {}: {}", r.request_id,
                           st_.process ? st_.process->pid() : -1, to_string(r.status));
              current->promise.deliver(r);
              in_flight_.reset();
              st_.busy = false;
              // A crashed review may have poisoned the CUDA context: start afresh.
              if (r.status == review_status::crashed) start_worker();
              dispatch();
            },
            [this, current, gen](caf::error& err) {
              if (gen != st_.generation) return;
              watchdog_.disarm();
              in_flight_.reset();
              kill_worker();  // before answering: whoever gets the answer sees it gone
              current->promise.deliver(answer(current->request, review_status::crashed,
                                              "the GPU worker stopped during the review (" +
                                                  self_->system().render(err) + ")"));
              st_.busy = false;
              dispatch();
            });
    in_flight_ = current;
    in_flight_gen_ = gen;
  }

  // The worker process died or its connection dropped.
  void on_down(const caf::down_msg& dm) {
    if (!st_.worker || dm.source != st_.worker.address()) return;
    const bool timed_out = watchdog_.disarm();
    // The connection is gone, and the process has almost always ended too: say how
    // (a signal names a crash: 6 is an abort, 9 a kill, 11 a segfault).
    std::string how = "its connection dropped";
    pid_t pid = -1;
    if (st_.process) {
      pid = st_.process->pid();
      if (st_.process->reap_within(2000)) {
        how = "it " + st_.process->exit_description();
      } else {
        st_.process->kill_now();
        how = "its connection dropped and the process was killed";
      }
    }
    spdlog::warn("gpu pool: worker pid {} (generation {}) is gone: {}{} ({})", pid, st_.generation, how,
                 timed_out ? ", killed by the pool after the review's time limit" : "",
                 self_->system().render(dm.reason));
    const bool was_busy = st_.busy && in_flight_ && in_flight_gen_ == st_.generation;
    auto current = std::move(in_flight_);
    in_flight_.reset();
    if (st_.courier) self_->send_exit(st_.courier, caf::exit_reason::user_shutdown);
    st_.courier = nullptr;
    st_.worker = nullptr;
    st_.process.reset();
    ++st_.generation;  // the pending request's own handlers now ignore it
    if (was_busy) {
      if (timed_out)
        current->promise.deliver(answer(current->request, review_status::timed_out,
                                        "the review did not finish within " + seconds(limit_s_) +
                                            " s (its timeout plus the pool's margin); the worker was "
                                            "killed and restarted"));
      else
        current->promise.deliver(answer(current->request, review_status::crashed,
                                        "the GPU worker died during the review: " + how + " (" +
                                            self_->system().render(dm.reason) +
                                            "); a fresh worker serves the next review"));
      st_.busy = false;
    }
    answer_describes("the GPU worker died before it answered: " + how);
    dispatch();
  }

  // The pool is ending: answer whatever waits and stop the worker.
  void shut_down() {
    watchdog_.disarm();
    auto stopping = [](const review_request& req) {
      return answer(req, review_status::internal_error, "the GPU pool stopped before the review finished");
    };
    if (in_flight_ && st_.busy) in_flight_->promise.deliver(stopping(in_flight_->request));
    in_flight_.reset();
    st_.busy = false;
    while (!st_.queue.empty()) {
      st_.queue.front().promise.deliver(stopping(st_.queue.front().request));
      st_.queue.pop_front();
    }
    answer_describes("the GPU pool stopped");
    stop_worker();
    if (st_.opts.on_stopped) st_.opts.on_stopped();
  }

  void describe(caf::typed_response_promise<worker_info> rp) {
    if (!ensure_worker()) {
      worker_info info;
      info.driver_error = "the GPU worker cannot be started: " + st_.last_failure;
      rp.deliver(info);
      return;
    }
    // No CAF timeout (see review_watchdog): a worker that dies answers through
    // on_down, and a busy one answers when its review ends or the watchdog kills it.
    const uint64_t id = ++last_describe_;
    describes_.emplace(id, rp);
    self_->request(st_.courier, caf::infinite, describe_atom::value)
        .then(
            [this, id](worker_info& info) {
              if (auto it = describes_.find(id); it != describes_.end()) {
                it->second.deliver(info);
                describes_.erase(it);
              }
            },
            [this, id](caf::error& err) {
              if (auto it = describes_.find(id); it != describes_.end()) {
                worker_info info;
                info.driver_error = "the GPU worker did not answer: " + self_->system().render(err);
                it->second.deliver(info);
                describes_.erase(it);
              }
            });
  }

 private:
  bool fail_start(std::string why) {
    ++st_.restart_failures;
    st_.last_failure = std::move(why);
    spdlog::error("gpu pool: {}", st_.last_failure);
    return false;
  }

  void answer_describes(const std::string& why) {
    for (auto& [id, rp] : describes_) {
      worker_info info;
      info.driver_error = why;
      rp.deliver(info);
    }
    describes_.clear();
  }

  static std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", s);
    return buf;
  }

  gpu_pool_actor::pointer self_;
  pool_state st_;
  std::shared_ptr<pending_review> in_flight_;
  uint64_t in_flight_gen_ = 0;
  double limit_s_ = 0;  // of the review in flight
  std::map<uint64_t, caf::typed_response_promise<worker_info>> describes_;
  uint64_t last_describe_ = 0;
  review_watchdog watchdog_;
};

}  // namespace

gpu_pool_actor::behavior_type gpu_pool(gpu_pool_actor::pointer self, gpu_pool_options opts) {
  // The pool object lives as long as the actor; handlers capture it by pointer.
  auto p = std::make_shared<pool>(self, std::move(opts));
  p->start_worker();
  self->set_down_handler([p](caf::down_msg& dm) { p->on_down(dm); });
  self->attach_functor([p] { p->shut_down(); });
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
