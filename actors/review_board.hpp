#pragma once
// The reviews a task's seed lines share while they run (short-term memory within one
// run of the task).
//
// Two lines can reach the same kernel: both seeds repaired to the plainest parameters,
// or the same move from the kernel both stand on. Without this board each reviewed it
// on the GPU, and both then planned the same move from it: on an H100, 16 KernelBench
// GEMMs at odd sizes, 2 seeds x 1 round, had 11 of their 76 reviews of a kernel the task
// had reviewed already (76_Gemm_Add_ReLU: 6 reviews, 3 kernels). With it, a kernel is
// reviewed once per task: a line that reaches a kernel another line has reviewed takes
// that verdict, one that reaches it while another line reviews it waits for the
// verdict, and a move that gives back a kernel another line is reviewing is skipped
// for the line's next ranked move (seed_line.cpp).
//
// Promises:
// - claim() hands each kernel to one line at a time: the first caller reviews it; the
//   others wait (up to `wait`) and get its verdict, or, if that line gave it up (its
//   review was not judged, or the line ended), one of them reviews it in turn;
// - only judged verdicts are kept (an internal_error says nothing about the kernel);
// - thread-safe: every line of the task calls it from its own thread.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "model/review.hpp"

namespace ks {

class review_board {
 public:
  struct claim_result {
    std::optional<review_result> verdict;  // another line's, when it has one
    bool mine = false;                     // no verdict, and the caller now reviews it for every line
  };
  // The verdict of kernel `id` when a line has it; else the caller is to review it: as
  // its owner (mine: it then owes publish() or abandon(), see review_claim) when no
  // line is reviewing it. While another line reviews it, waits up to `wait` for its
  // verdict, giving up early when `stop` says so (the caller then reviews it itself,
  // not as its owner).
  claim_result claim(const std::string& id, std::chrono::milliseconds wait, const std::function<bool()>& stop);
  // The caller's verdict of `id`: kept when judged, else the kernel is free to claim.
  void publish(const std::string& id, const review_result& r);
  // The caller will not review `id` after all (its line is ending).
  void abandon(const std::string& id);
  // Whether a line has reviewed `id` or is reviewing it.
  bool known(const std::string& id) const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::optional<review_result>> reviews_;  // nullopt: being reviewed
};

// A claim held while its line reviews the kernel: abandoned when the line leaves
// without publishing (an exception, a stop).
class review_claim {
 public:
  review_claim(review_board* board, std::string id) : board_(board), id_(std::move(id)) {}
  review_claim(const review_claim&) = delete;
  review_claim& operator=(const review_claim&) = delete;
  ~review_claim() {
    if (board_) board_->abandon(id_);
  }
  void publish(const review_result& r) {
    if (board_) board_->publish(id_, r);
    board_ = nullptr;
  }

 private:
  review_board* board_;
  std::string id_;
};

}  // namespace ks
