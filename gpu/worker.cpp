#include "gpu/worker.hpp"

#include <unistd.h>

#include <caf/typed_event_based_actor.hpp>

#include "gpu/cuda_driver.hpp"
#include "gpu/reference_check.hpp"
#include "gpu/reviewer.hpp"
#include "protocol/wire_safe.hpp"

namespace ks {

worker_info describe_this_worker(const worker_options& opts) {
  worker_info info;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  info.host = host;
  info.pid = static_cast<int32_t>(getpid());
  info.version = protocol_version;
  auto drv = cuda_driver::load();
  if (!drv) {
    info.driver_error = drv.message();
    return info;
  }
  info.driver_version = (*drv)->version;
  auto devices = query_devices(**drv);
  if (!devices) {
    info.driver_error = devices.message();
    return info;
  }
  for (auto& d : *devices)
    if (opts.device < 0 || d.ordinal == opts.device) info.devices.push_back(d);
  if (opts.device >= 0 && info.devices.empty())
    info.driver_error = "device " + std::to_string(opts.device) + " does not exist (the driver sees " +
                        std::to_string(devices->size()) + ")";
  return info;
}

gpu_worker_actor::behavior_type gpu_worker(gpu_worker_actor::pointer self, worker_options opts) {
  // The actor's state: its self-description and, from the first review on, the
  // reviewer that owns the device (made lazily: describing needs no CUDA context).
  struct state {
    worker_info info;
    std::unique_ptr<reviewer> rev;
    std::string rev_error;  // why no reviewer could be made
    std::unique_ptr<reference_check> check;
    std::unique_ptr<module_store> modules;  // modules sent in parts, by digest
  };
  auto st = std::make_shared<state>();
  st->info = describe_this_worker(opts);
  reference_check_options co;
  co.limits = opts.reference_limits;
  // The child runs the reference where the reviews will: this worker's GPU, if it has one.
  co.device = st->info.devices.empty() ? "cpu" : "cuda:" + std::to_string(opts.device < 0 ? 0 : opts.device);
  co.launcher = opts.launcher;
  st->check = std::make_unique<reference_check>(co);
  st->modules = std::make_unique<module_store>(opts.module_keep_bytes);
  auto review_one = [st, opts](const review_request& req) {
    if (std::string why = st->check->refused(req.task, req.options.size, req.options.timeout_s); !why.empty()) {
      review_result r;
      r.request_id = req.request_id;
      r.candidate_id = req.cand.id;
      r.status = review_status::internal_error;
      r.message = why;
      r.device = st->info.host;
      return r;
    }
    if (!st->rev && st->rev_error.empty()) {
      reviewer_options ro;
      ro.device = opts.device < 0 ? 0 : opts.device;
      ro.node = st->info.host;
      ro.trial_cache_bytes = opts.trial_cache_bytes;
      ro.replay = opts.replay;
      auto made = reviewer::create(ro);
      if (made)
        st->rev = std::move(made.value());
      else
        st->rev_error = made.message();
    }
    if (!st->rev) {
      review_result r;
      r.request_id = req.request_id;
      r.candidate_id = req.cand.id;
      r.status = review_status::internal_error;
      r.message = "this worker cannot review: " + st->rev_error;
      r.device = st->info.host;
      return r;
    }
    // Blocks this actor for the review's length; the worker process serves one
    // device, one review at a time (the pool actor queues the rest).
    review_result r = st->rev->review(req);
    make_wire_safe(r);  // an infinite error would hang the reply (wire_safe.hpp)
    return r;
  };
  return {
      [st](describe_atom) { return st->info; },
      [review_one](const review_request& req) { return review_one(req); },
      [st](module_part& part) { return st->modules->add(std::move(part)); },
      [st, review_one](const held_review& h) { return st->modules->serve(h, review_one); },
  };
}

}  // namespace ks
