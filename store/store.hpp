#pragma once
// The memory store: KernelSkill's persistent state in one RocksDB database (one
// directory, the config's memory.path), with a column family per concern:
//
//   skills        the long-term skill library, installed from skills/*.yaml
//   experience    what each method achieved in which situation, across tasks
//   trajectories  short-term memory: each task's attempts, append-only
//   kernels       candidate kernels, content-addressed
//   tasks         the daemon's queue and task states
//   default       store metadata (format version, skill-library version)
//
// Values are JSON objects naming their schema ("schema": "ks.trajectory_entry/1"), so
// a person with RocksDB's ldb or any JSON tool can read a store without this code.
// docs/store.md describes every key and value.
//
// Promises:
// - Durability: a write is acknowledged (the call returns success) only once it is in
//   RocksDB's write-ahead log and, with sync_writes (the default), fsync'ed: a crash of
//   the process (kill -9 included), of the kernel or of the power loses nothing that a
//   call reported as done.
// - Damage is refused, never repaired by deleting: open looks at the store read-only
//   first and refuses (naming the damaged file, changing nothing) a store that lost an
//   acknowledged write or whose MANIFEST, CURRENT, write-ahead log or tables are damaged.
//   The acknowledgement watermark (store/ack_watermark.hpp) is what makes loss visible.
//   store/store_check.hpp checks a store and salvages a damaged one.
// - A full disk is not a crash: a write that finds no space fails with out_of_space()
//   true, reads go on, and the store reopens itself for writing once space is back; an
//   open on a full disk opens read-only (read_only_when_full) with the same state.
// - Atomicity: each call is one RocksDB write batch: a skill-library install, an
//   experience record and its counter, a format migration are all-or-nothing.
// - Concurrency: a store object may be used from many threads at once. Only one
//   process may open a store for writing (RocksDB's LOCK file); a second gets an
//   error naming the directory. Read-only opens do not take the lock.
// - Versioning: the store records the format it was written in. A build opens
//   stores of its own format or older (migrating older ones once, atomically) and
//   refuses newer ones instead of misreading them.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "model/candidate.hpp"
#include "model/experience.hpp"
#include "model/trajectory.hpp"

namespace ks {

// The store format this build writes, and the newest it can read.
inline constexpr uint32_t store_format_version = 1;

struct store_options {
  // Create an empty store when `dir` holds none. A directory that exists, is not
  // empty and holds no RocksDB database is never written to.
  bool create_if_missing = true;
  // fsync every write before it is acknowledged. The write-ahead log is always on;
  // without sync a process crash loses nothing, a power loss or OS crash may lose the
  // last writes (for throwaway stores: some tests and benches).
  bool sync_writes = true;
  // Open without taking the lock (another process may be writing): reads see the
  // store as it was when opened; every write is refused. A store that needs a format
  // migration cannot be opened read-only.
  bool read_only = false;
  // A disk too full to open the store for writing: open it read-only instead (writes
  // fail with out_of_space() until space returns, then it reopens for writing). Off:
  // such an open is an error.
  bool read_only_when_full = true;
};

// The skill library a store holds. version 0: none installed yet.
struct skill_library_info {
  uint32_t version = 0;
  std::string hash;
  friend bool operator==(const skill_library_info&, const skill_library_info&) = default;
};

// A KernelSkill memory store (see the top of this file for what it promises).
class store {
 public:
  // Opens the store in `dir`, creating it when allowed, migrating an older format.
  // Errors name the directory and say what to do: the store is in use by another
  // process, was written by a newer KernelSkill, is not a KernelSkill store, …
  static result<std::unique_ptr<store>> open(const std::filesystem::path& dir, const store_options& options = {});
  ~store();
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  const std::filesystem::path& dir() const;
  bool read_only() const;
  // Writes are being refused for lack of space (the disk, a quota or a file size limit):
  // a write failed with "no space", or the store was opened on a full disk. Clears itself
  // when a later write finds space again. Reads work throughout.
  bool out_of_space() const;
  // Why writes would be refused now ("" when they would not): read-only, out of space.
  std::string write_problem() const;
  // The RocksDB sequence number of the last acknowledged write (the watermark; 0 for a
  // read-only store).
  uint64_t acknowledged_writes() const;
  // For a store rebuilt by repair_store (store/store_check.hpp): the last write the
  // damaged store had acknowledged or that the salvage reached; 0 for a store never
  // repaired. Every counter a caller bumps once per write (the daemon's task numbers)
  // was at most this before the repair, so numbers above it were never handed out.
  uint64_t writes_before_repair() const;
  // When the store was created (meta/created_unix_ms).
  int64_t created_unix_ms() const;

  // ---- skills: the long-term library --------------------------------------------
  // A library is a version number (bumped by whoever edits skills/*.yaml) and a hash
  // of its contents (which catches an edit without a bump). docs: key → JSON object
  // with a "schema" field.

  result<skill_library_info> installed_skill_library() const;
  // Whether install_skill_library(version, hash, …) would be accepted, without
  // writing: an error when the store holds a newer library (no downgrades). The
  // hash does not change the answer (a changed hash means a reinstall); it is taken
  // so that a check reads like the install it stands for.
  status check_skill_library(uint32_t version, const std::string& hash) const;
  // Makes `docs` the store's skill library. Same version and hash: nothing to do.
  // Newer version, or same version with another hash (logged as a warning): replaces
  // every skill doc atomically; experience is kept. Older than the store's: refused.
  status install_skill_library(uint32_t version, const std::string& hash,
                               const std::vector<std::pair<std::string, std::string>>& docs);
  // The doc stored under `key`, or nullopt.
  result<std::optional<std::string>> get_skill_doc(const std::string& key) const;
  // Every doc whose key starts with `prefix`, in key order.
  result<std::vector<std::pair<std::string, std::string>>> list_skill_docs(const std::string& prefix = "") const;

  // ---- trajectories: short-term memory, append-only per task ---------------------

  // Appends `e` to `task`'s trajectory and returns its seq: 1 for a task's first
  // entry, then one more than the last (across reopens). Sets e.task and e.seq, and
  // e.unix_ms to now when it is 0. Safe to call from several threads for one task.
  result<uint64_t> append_trajectory(const std::string& task, trajectory_entry e);
  // `task`'s entries with seq >= from_seq, in seq order (empty for an unknown task).
  result<std::vector<trajectory_entry>> read_trajectory(const std::string& task, uint64_t from_seq = 0) const;
  // The tasks that have a trajectory, sorted.
  result<std::vector<std::string>> list_trajectory_tasks() const;

  // ---- kernels: content-addressed -------------------------------------------------

  // Stores `c` under candidate_id(c) and returns the id (c.id is replaced by it).
  // Idempotent: when the content is already stored, the first record (its task,
  // origin, parent and round) is kept.
  result<std::string> put_kernel(const candidate& c);
  // The candidate stored under `id`; an error when there is none.
  result<candidate> get_kernel(const std::string& id) const;

  // ---- tasks: the daemon's queue and task states -----------------------------------
  // Records are JSON objects whose "schema" field the caller sets.

  status put_task_record(const std::string& id, const nlohmann::json& record);
  // Several records in one atomic write (one fsync): all of them are stored, or none.
  status put_task_records(const std::vector<std::pair<std::string, nlohmann::json>>& records);
  result<std::optional<nlohmann::json>> get_task_record(const std::string& id) const;
  // The records whose id starts with `prefix` (every record when empty), in id
  // order; at most `limit` of them when limit > 0.
  result<std::vector<std::pair<std::string, nlohmann::json>>> list_task_records(const std::string& prefix = "",
                                                                                size_t limit = 0) const;
  // Deleting an id that has no record is not an error.
  status delete_task_record(const std::string& id);
  // Deletes every record whose id starts with `prefix` (not empty), in one batch.
  status delete_task_records(const std::string& prefix);

  // ---- experience -------------------------------------------------------------------

  // Appends a record (unix_ms set to now when 0). method must not be empty.
  status record_experience(experience_record rec);
  // Every record of `method` (all methods when empty), grouped by method and
  // bottleneck class, oldest first within a group.
  result<std::vector<experience_record>> read_experience(const std::string& method = "") const;
  // summarize_experience() over every record, for one bottleneck class or all, for
  // one template (with the records that name none) when it is given, and without the
  // records of task `other_than` when it is not empty.
  result<std::vector<method_stats>> experience_stats(const std::string& bottleneck = "",
                                                     const std::optional<std::string>& template_name = std::nullopt,
                                                     const std::string& other_than = "") const;

  struct impl;  // RocksDB handles and locks; defined in store.cpp

 private:
  explicit store(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

}  // namespace ks
