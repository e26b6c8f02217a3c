#include "fleet/gpu_pool.hpp"

#include <signal.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "fleet/module_sender.hpp"
#include "protocol/worker_link.hpp"

namespace ks {

namespace {

struct pending_review {
  review_request request;
  caf::typed_response_promise<review_result> promise;
  int lost = 0;        // times its worker was lost under it (not the candidate's doing)
  std::string losses;  // how, "; "-joined
};

// The modules a courier has sent its worker in parts, by digest (protocol/module_parts.hpp).
// A courier lives as long as its worker's connection: a fresh worker holds nothing.
struct courier_state {
  uint64_t part_bytes = kModulePartBytes;
  std::set<std::string> held;
};

// Reviews `req`, whose module is larger than a part, as a held_review: the module's
// parts first unless the worker holds them; a worker that answers that it does not
// (it dropped them for room) is sent them again, once.
void review_held(caf::event_based_actor* self, const gpu_worker_actor& worker, const std::shared_ptr<courier_state>& cs,
                 const review_request& req, caf::response_promise rp, bool may_resend) {
  auto held = std::make_shared<held_review>(hold_module(req));
  auto ask = [=]() mutable {
    self->request(worker, caf::infinite, *held)
        .then(
            [=](review_result& r) mutable {
              if (may_resend && r.status == review_status::internal_error &&
                  r.message == module_not_held(held->module_sha256)) {
                spdlog::info("gpu pool: the worker dropped module {}; sending it again", held->module_sha256);
                cs->held.erase(held->module_sha256);
                return review_held(self, worker, cs, req, rp, false);
              }
              rp.deliver(std::move(r));
            },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  };
  if (cs->held.count(held->module_sha256)) return ask();
  spdlog::info("gpu pool: sending module {} ({} bytes) to the worker in parts of {} bytes", held->module_sha256,
               req.task.module_bytes.size(), cs->part_bytes);
  send_module_parts(self, worker, req.task.module_bytes, held->module_sha256, 0, cs->part_bytes,
                    [=](std::optional<caf::error> err, std::string refused) mutable {
                      if (err) return rp.deliver(std::move(*err));
                      if (!refused.empty()) return rp.deliver(refused_module(req, refused));
                      cs->held.insert(held->module_sha256);
                      ask();
                    });
}

// Carries the pool's requests to the worker, so that the worker's node never sees
// the pool itself. A node that receives a message learns its sender, and the local
// BASP broker then monitors that sender; when the sender ends, its down message waits
// in the broker's mailbox holding a strong reference to it. For the detached pool
// that reference outlived the broker's last turn at shutdown now and then, and the
// actor system's destructor then waited for the pool's thread forever (gpu_pool_test
// hung at exit about every other run; found by looking for the pool's control block
// in a hung process). The courier is an ordinary scheduled actor: whatever keeps it
// alive at shutdown keeps no thread waiting. A task's module larger than a part
// reaches the worker once, in parts, ahead of its reviews (review_held).
caf::behavior courier(caf::event_based_actor* self, gpu_worker_actor worker, uint64_t part_bytes) {
  auto cs = std::make_shared<courier_state>();
  cs->part_bytes = std::max<uint64_t>(1, part_bytes);
  return {
      [self, worker, cs](review_request& req) {
        auto rp = self->make_response_promise();
        if (req.task.module_bytes.size() > cs->part_bytes) {
          review_held(self, worker, cs, req, rp, true);
          return rp;
        }
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

// Watches the worker process from a thread of its own, and kills it (SIGKILL) when
// - a review outlives its time limit (a hung kernel can only be stopped with its
//   process), or
// - it has been stopped (SIGSTOP, SIGTSTP: state T in /proc/PID/stat) for
//   stopped_limit_s: a stopped worker keeps its connection open and never answers, so
//   the pool would otherwise wait for the review's whole time limit and then blame the
//   candidate. A kernel that hangs leaves its process running or sleeping, never
//   stopped; a worker under a debugger is in a tracing stop (t) and is left alone.
// The dropped connection then reaches the pool as a down message, and what the
// watchdog did tells the pool whose fault the death was.
//
// The pool's requests carry no CAF timeout: CAF 0.17 keeps a strong reference to the
// requesting actor on its clock until the timeout is due, and drops none when the
// actor system shuts down, so a detached actor with a timeout pending never ends and
// the system's destructor waits for its thread forever (gpu_pool_test hung at exit
// about every other run). This thread holds no reference to the actor.
class worker_watchdog {
 public:
  enum class fired { none, deadline, stopped };

  explicit worker_watchdog(double stopped_limit_s)
      : stopped_limit_(std::chrono::milliseconds(static_cast<int64_t>(stopped_limit_s * 1000))),
        thread_([this] { run(); }) {}
  ~worker_watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Watches `pid` from now on. The pool reaps the process only after unwatch(), so the
  // pid cannot be reused while it is watched.
  void watch(pid_t pid) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pid_ = pid;
      has_deadline_ = false;
      fired_ = fired::none;
      stopped_since_.reset();
      last_look_ = {};
    }
    cv_.notify_all();
  }

  // The review in flight must end by `deadline`.
  void arm(std::chrono::steady_clock::time_point deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      deadline_ = deadline;
      has_deadline_ = true;
    }
    cv_.notify_all();
  }

  // The review ended in time; what the watchdog did meanwhile, if anything.
  fired disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    has_deadline_ = false;
    return fired_;
  }

  // Stops watching (before the process is reaped); what the watchdog did, if anything.
  fired unwatch() {
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = -1;
    has_deadline_ = false;
    return std::exchange(fired_, fired::none);
  }

  // How long the worker had been stopped when the watchdog killed it for that.
  double stopped_for_s() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_for_s_;
  }

 private:
  static bool stopped(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T';
  }

  void kill_it(fired why, std::chrono::steady_clock::time_point now) {
    ::kill(pid_, SIGKILL);
    stopped_for_s_ = stopped_since_ ? std::chrono::duration<double>(now - *stopped_since_).count() : 0;
    fired_ = why;
    pid_ = -1;
    has_deadline_ = false;
  }

  void run() {
    using clock = std::chrono::steady_clock;
    const auto look_every = std::chrono::milliseconds(250);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (pid_ <= 0) {
        cv_.wait(lock);
        continue;
      }
      const auto now = clock::now();
      // A gap far longer than the interval means this thread was not running (the
      // whole process group was stopped, as a terminal's ctrl-Z does): the worker's
      // stop is counted from now, not from before the gap.
      const bool gap = last_look_ != clock::time_point{} && now - last_look_ > 4 * look_every;
      last_look_ = now;
      const bool is_stopped = stopped(pid_);
      if (!is_stopped)
        stopped_since_.reset();
      else if (!stopped_since_ || gap)
        stopped_since_ = now;
      if (is_stopped && now - *stopped_since_ >= stopped_limit_) {
        kill_it(fired::stopped, now);
        continue;
      }
      if (has_deadline_ && now >= deadline_) {
        // A worker that is stopped at its review's deadline did not hang in the kernel.
        kill_it(is_stopped ? fired::stopped : fired::deadline, now);
        continue;
      }
      auto wake = now + look_every;
      if (has_deadline_ && deadline_ < wake) wake = deadline_;
      cv_.wait_until(lock, wake);
    }
  }

  const std::chrono::steady_clock::duration stopped_limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  pid_t pid_ = -1;
  bool has_deadline_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::optional<std::chrono::steady_clock::time_point> stopped_since_;
  std::chrono::steady_clock::time_point last_look_;
  fired fired_ = fired::none;
  double stopped_for_s_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// Whether a worker that ended so was ended from outside (an operator, the OOM killer,
// a stop of the machine's services; status 0: it was asked to stop, and did): no
// kernel makes its process end so. An abort, a segfault, a bus error or an error
// status may come from the review itself.
bool ended_from_outside(const worker_process& p) {
  const int sig = p.exit_signal();
  return sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP || p.exit_status() == 0;
}

class pool {
 public:
  pool(gpu_pool_actor::pointer self, gpu_pool_options opts) : self_(self), watchdog_(opts.stopped_limit_s) {
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
    st_.courier = self_->spawn(courier, st_.worker, st_.opts.module_part_bytes);
    ++st_.generation;
    st_.restart_failures = 0;
    self_->monitor(st_.worker);
    watchdog_.watch(st_.process->pid());
    spdlog::info("gpu pool: worker pid {} on port {} (generation {})", st_.process->pid(), st_.process->port(),
                 st_.generation);
    return true;
  }

  void stop_worker() {
    watchdog_.unwatch();  // before the process is reaped
    if (st_.worker) self_->demonitor(st_.worker.address());
    if (st_.courier) self_->send_exit(st_.courier, caf::exit_reason::user_shutdown);
    st_.courier = nullptr;
    st_.worker = nullptr;
    st_.process.reset();  // SIGTERM, then SIGKILL
  }

  // A worker whose process has ended before its down message came is handled now,
  // as that message would be (so that a review in flight is never left unanswered by
  // a restart under it); true when it had.
  bool notice_exit() {
    // exited() does not reap: the watchdog may still be watching the pid.
    if (!st_.worker || !st_.process || !st_.process->exited()) return false;
    worker_gone("its process ended");
    return true;
  }

  bool ensure_worker() {
    if (st_.worker && st_.process && !st_.process->exited()) return true;
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
    if (notice_exit()) return;  // it dispatched again
    if (!ensure_worker()) {
      // The worker cannot be started: answer everything waiting with the reason.
      while (!st_.queue.empty()) {
        auto p = std::move(st_.queue.front());
        st_.queue.pop_front();
        p.promise.deliver(
            answer(p.request, review_status::internal_error, "the GPU worker cannot be started: " + st_.last_failure));
      }
      st_.restart_failures = 0;  // the next request tries again
      return;
    }
    st_.busy = true;
    auto current = std::make_shared<pending_review>(std::move(st_.queue.front()));
    st_.queue.pop_front();
    const uint64_t gen = st_.generation;
    // A module sent in parts is named by its digest: hashed here, on the pool's own
    // thread (detached), before the review's clock starts, not on the courier's
    // (a scheduler thread); every review of the task shares the digest.
    if (current->request.task.module_bytes.size() > st_.opts.module_part_bytes)
      current->request.task.module_bytes.sha256_hex();
    limit_s_ = current->request.options.timeout_s + st_.opts.review_margin_s;
    spdlog::info("gpu pool: review {} of '{}' to worker pid {}", current->request.request_id,
                 current->request.task.name, st_.process->pid());
    watchdog_.arm(std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(limit_s_ * 1000)));
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
            [this, gen](caf::error& err) {
              // The link failed under the request: the worker is gone, as its down
              // message would say (whichever comes first answers).
              if (gen != st_.generation) return;
              worker_gone(self_->system().render(err));
            });
    in_flight_ = current;
    in_flight_gen_ = gen;
  }

  // The worker process died or its connection dropped.
  void on_down(const caf::down_msg& dm) {
    if (!st_.worker || dm.source != st_.worker.address()) return;
    worker_gone(self_->system().render(dm.reason));
  }

  // The pool is ending: answer whatever waits and stop the worker.
  void shut_down() {
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
    notice_exit();
    if (!ensure_worker()) {
      worker_info info;
      info.driver_error = "the GPU worker cannot be started: " + st_.last_failure;
      rp.deliver(info);
      return;
    }
    // No CAF timeout (see worker_watchdog): a worker that dies answers through
    // worker_gone, a stopped one is killed by the watchdog, and a busy one answers
    // when its review ends or the watchdog kills it.
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
  // The worker is gone (`caf_reason`: what CAF said). How it ended decides what the
  // review it was serving gets:
  //   killed by the watchdog at the review's time limit   timed_out (the candidate's)
  //   died of itself (an abort, a segfault, an exit)       crashed (the candidate's)
  //   stopped, or killed from outside, or its connection   the review runs again on a
  //   dropped while the process lived                      fresh worker: not the
  //                                                        candidate's doing
  void worker_gone(const std::string& caf_reason) {
    const auto fired = watchdog_.unwatch();  // before the process is reaped
    std::string how = "its connection dropped";
    bool not_the_review = false;
    pid_t pid = -1;
    if (st_.process) {
      pid = st_.process->pid();
      if (st_.process->reap_within(2000)) {
        how = "it " + st_.process->exit_description();
        not_the_review = ended_from_outside(*st_.process);
      } else {
        st_.process->kill_now();
        how = "its connection dropped and the process was killed";
        not_the_review = true;
      }
    }
    if (fired == worker_watchdog::fired::stopped) {
      how = "it was stopped (SIGSTOP) for " + seconds(std::round(watchdog_.stopped_for_s() * 10) / 10) +
            " s, its link open; the pool killed it";
      not_the_review = true;
    }
    const bool timed_out = fired == worker_watchdog::fired::deadline;
    spdlog::warn("gpu pool: worker pid {} (generation {}) is gone: {}{} ({})", pid, st_.generation, how,
                 timed_out ? ", killed by the pool after the review's time limit" : "", caf_reason);
    const bool was_busy = st_.busy && in_flight_ && in_flight_gen_ == st_.generation;
    auto current = std::move(in_flight_);
    in_flight_.reset();
    if (st_.worker) self_->demonitor(st_.worker.address());
    if (st_.courier) self_->send_exit(st_.courier, caf::exit_reason::user_shutdown);
    st_.courier = nullptr;
    st_.worker = nullptr;
    st_.process.reset();
    ++st_.generation;  // the pending request's own handlers now ignore it
    if (was_busy) {
      st_.busy = false;
      if (timed_out)
        current->promise.deliver(answer(current->request, review_status::timed_out,
                                        "the review did not finish within " + seconds(limit_s_) +
                                            " s (its timeout plus the pool's margin); the worker was "
                                            "killed and restarted"));
      else if (not_the_review)
        run_again(current, "worker pid " + std::to_string(pid) + ": " + how);
      else
        current->promise.deliver(answer(current->request, review_status::crashed,
                                        "the GPU worker died during the review: " + how + " (" + caf_reason +
                                            "); a fresh worker serves the next review"));
    }
    answer_describes("the GPU worker died before it answered: " + how);
    dispatch();
  }

  // The review's worker was lost for a reason that is not the review's: it goes first
  // to a fresh worker, at most max_lost times in all; then it is answered
  // internal_error (unjudged: never the candidate's verdict).
  void run_again(const std::shared_ptr<pending_review>& p, const std::string& why) {
    ++p->lost;
    p->losses += (p->losses.empty() ? "" : "; ") + why;
    if (p->lost >= st_.opts.max_lost) {
      spdlog::warn("gpu pool: review {} of '{}' lost its worker {} times; not run again", p->request.request_id,
                   p->request.task.name, p->lost);
      p->promise.deliver(answer(p->request, review_status::internal_error,
                                "the GPU worker was lost " + std::to_string(p->lost) + " times during this review (" +
                                    p->losses + "); it is not run again"));
      return;
    }
    spdlog::warn(
        "gpu pool: review {} of '{}' goes to a fresh worker: its worker was lost, not by the "
        "candidate's doing ({})",
        p->request.request_id, p->request.task.name, why);
    st_.queue.push_front(std::move(*p));
  }

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
  worker_watchdog watchdog_;
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
