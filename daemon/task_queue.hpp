#pragma once
// The daemon's task queue: every submitted task, its state, progress and result, in
// the store's tasks column family (docs/daemon.md). What it promises:
// - a task that submit() returned is in the store (write-ahead logged) before the
//   call returns, so a crash of the daemon, kill -9 included, never loses it;
// - ids are NAME-XXXXXXXXXXXXXXXXXXXXXXXXXX: the name and 128 random bits (26 letters
//   and digits of base32) from the kernel's generator, so that no id tells another;
//   kept in the store (the same after a restart) and never given twice in one store;
//   tasks are listed in submission order by an internal sequence number;
// - memory: only a small index entry per task (id, state, priority, sequence) is kept
//   in RAM; specs, progress histories and results stay in the store;
// - thread-safe: the HTTP threads and the scheduler use it at once.
//
// Store layout (ids in the tasks column family; each value a JSON object with a
// "schema"): task/ID (ks.daemon_task/1, the task object of the API), spec/ID
// (ks.task_spec/1), result/ID (ks.task_outcome/1), counter/task_seq.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "model/run.hpp"
#include "model/task.hpp"

namespace ks {

class store;

enum class task_state { queued, running, done, failed, cancelled };
const char* to_string(task_state s);
std::optional<task_state> parse_task_state(const std::string& s);
inline bool has_ended(task_state s) {
  return s == task_state::done || s == task_state::failed || s == task_state::cancelled;
}

// The best speedup after a round (the dashboard's chart).
struct round_point {
  uint32_t round = 0;
  double best_speedup = 0;
  uint32_t reviews = 0;
  int64_t unix_ms = 0;
};

// A task as the API shows it.
struct queued_task {
  std::string id;
  std::string name;
  task_state state = task_state::queued;
  int priority = 0;
  uint64_t seq = 0;
  int64_t submitted_unix_ms = 0, started_unix_ms = 0, finished_unix_ms = 0;
  uint32_t round = 0, rounds_budget = 0, reviews = 0;
  double best_speedup = 0;
  std::string best_candidate;
  std::string detail;
  std::string reason;
  bool cancel_requested = false;
  uint32_t resumed = 0;
  std::vector<round_point> history;
};
// The API's JSON; with_history adds "history".
nlohmann::json to_json(const queued_task& t, bool with_history);

// Why an operation was refused, for the API's status codes.
enum class refusal { none, not_found, conflict };

inline constexpr int min_priority = -1000;
inline constexpr int max_priority = 1000;

class task_queue {
 public:
  // Loads the index of every task in `db`.
  static result<std::unique_ptr<task_queue>> open(std::shared_ptr<store> db);

  // Adds a validated task. Its name must be a valid task name (see valid_task_name).
  result<queued_task> submit(const task_spec& spec, int priority, uint32_t rounds_budget);

  result<std::optional<queued_task>> get(const std::string& id) const;
  result<task_spec> spec(const std::string& id) const;
  // Newest first; only `state` when given; at most `limit`. total: how many match.
  result<std::vector<queued_task>> list(std::optional<task_state> state, size_t limit, size_t* total) const;
  // How many tasks are in each state.
  std::map<task_state, size_t> counts() const;

  // The tasks that were running when the daemon stopped, oldest first.
  std::vector<std::string> interrupted() const;
  // Marks an interrupted task as resumed (resumed + 1, `detail` as its detail) and
  // returns it.
  result<queued_task> resume(const std::string& id, const std::string& detail = "resuming after a restart");
  // The queued task with the highest priority (then the oldest), now running; nullopt
  // when none is queued.
  result<std::optional<queued_task>> start_next();
  // Progress of a running task (round, reviews, best so far; history per new round).
  status progress(const std::string& id, const task_progress& p);
  // The task ended: done, failed, or cancelled when a cancel was requested. Stores
  // the outcome, then removes the task's checkpoints.
  status finish(const std::string& id, const task_outcome& o);
  // The stored outcome (ks.task_outcome/1), once the task has ended.
  result<std::optional<nlohmann::json>> outcome(const std::string& id) const;

  // A queued task is cancelled at once; a running one gets cancel_requested (the
  // scheduler stops it). conflict: it has already ended.
  result<queued_task> cancel(const std::string& id, refusal* why);
  // conflict: it is not queued.
  result<queued_task> set_priority(const std::string& id, int priority, refusal* why);

 private:
  struct entry {
    task_state state;
    int priority;
    uint64_t seq;
  };
  explicit task_queue(std::shared_ptr<store> db) : db_(std::move(db)) {}
  result<queued_task> load(const std::string& id) const;  // under mu_
  status save(const queued_task& t);                      // under mu_

  std::shared_ptr<store> db_;
  mutable std::mutex mu_;
  std::map<std::string, entry> index_;
  uint64_t next_seq_ = 1;
};

// Task names the daemon accepts: 1–64 of A–Z a–z 0–9 _ . -, not starting with '.' or
// '-' (a name becomes file names and command-line arguments).
bool valid_task_name(const std::string& name);
// Ids: a valid name, '-', then 26 of a–z 2–7 (or six or more digits: the sequential
// ids of stores made before ids were random).
bool valid_task_id(const std::string& id);

// What a store says of tasks it lost (`kernelskill store repair`, after damage): the
// numbers handed out that have no task, and the ids other records still name.
struct lost_tasks {
  uint64_t handed_out = 0;                             // the last task number the counter had given (0: counter lost)
  uint64_t last_found = 0;                             // the highest number of a task that is there (0: none)
  std::vector<std::pair<uint64_t, uint64_t>> missing;  // ranges of numbers with no task
  // Ids with no task record that a spec, result, checkpoint or trajectory still names,
  // each with what names it ("spec, trajectory").
  std::vector<std::pair<std::string, std::string>> named;
};
result<lost_tasks> find_lost_tasks(const store& db);

// The JSON form of a task_outcome (ks.task_outcome/1).
nlohmann::json outcome_json(const task_outcome& o);

}  // namespace ks
