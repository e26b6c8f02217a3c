#include "model/review.hpp"

#include <cstdio>

namespace ks {

const char* to_string(review_status s) {
  switch (s) {
    case review_status::ok:
      return "ok";
    case review_status::compile_error:
      return "compile_error";
    case review_status::plan_error:
      return "plan_error";
    case review_status::incorrect:
      return "incorrect";
    case review_status::crashed:
      return "crashed";
    case review_status::timed_out:
      return "timed_out";
    case review_status::internal_error:
      return "internal_error";
  }
  return "unknown";
}

std::string describe_phases(const review_phases& p) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "compile %.2f s, inputs %.2f s, reference %.2f s, verify %.2f s, timing %.2f s, profile %.2f s",
                p.compile_s, p.inputs_s, p.reference_s, p.verify_s, p.timing_s, p.profile_s);
  return buf;
}

}  // namespace ks
