#include "model/review.hpp"

namespace ks {

const char* to_string(review_status s) {
  switch (s) {
    case review_status::ok: return "ok";
    case review_status::compile_error: return "compile_error";
    case review_status::plan_error: return "plan_error";
    case review_status::incorrect: return "incorrect";
    case review_status::crashed: return "crashed";
    case review_status::timed_out: return "timed_out";
    case review_status::internal_error: return "internal_error";
  }
  return "unknown";
}

}  // namespace ks
