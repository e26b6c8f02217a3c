#include "gpu/worker.hpp"

#include <unistd.h>

#include <caf/typed_event_based_actor.hpp>

#include "gpu/cuda_driver.hpp"

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

gpu_worker_actor::behavior_type gpu_worker(gpu_worker_actor::pointer self,
                                           worker_options opts) {
  auto info = std::make_shared<worker_info>(describe_this_worker(opts));
  return {
      [info](describe_atom) { return *info; },
      [info](const review_request& req) {
        // Reviews (compile, verify, time, profile) arrive with the reviewer issue;
        // until then a worker answers honestly instead of pretending to check.
        review_result r;
        r.request_id = req.request_id;
        r.candidate_id = req.cand.id;
        r.status = review_status::internal_error;
        r.message = "this kernelskill-gpu build cannot review candidates yet";
        r.device = info->host;
        return r;
      },
  };
}

}  // namespace ks
