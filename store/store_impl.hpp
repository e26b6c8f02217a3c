#pragma once
// The memory store's insides, shared by its source files (store.cpp: the API;
// store_open.cpp: opening RocksDB safely and reopening it when disk space returns;
// store_check.cpp: check and repair). Private to store/.
//
// What it promises to those files:
// - db_mu guards the RocksDB instance: every use holds it shared; only reopen() takes it
//   exclusively, to replace the instance (a full disk can leave RocksDB unable to write
//   until it is reopened). Iterators never outlive the method that made them.
// - commit() is the one way a write reaches RocksDB: it advances the acknowledgement
//   watermark after a write succeeded, and turns "no space" into the store's
//   out-of-space state instead of an ordinary error.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "store/ack_watermark.hpp"
#include "store/rocks_support.hpp"
#include "store/store.hpp"

namespace ks {

namespace store_detail {

// KernelSkill's writer lock in the store directory: a POSIX record lock (fcntl) on
// KERNELSKILL-LOCK, taken before anything is looked at. Not flock: a flock belongs to the
// open file, which forked children share — a killed daemon's NVRTC compile child (forked,
// no exec) would keep the store locked until it finished. A record lock belongs to the
// process. Since closing any descriptor of a file drops the process's record locks on it,
// the files this process has locked are kept in a registry and never opened twice.
inline constexpr const char* lock_name = "KERNELSKILL-LOCK";
struct writer_lock {
  int fd = -1;
  uint64_t dev = 0, ino = 0;
  bool held() const { return fd >= 0; }
};
// Takes the lock; an error says the store is in use (or why the lock file cannot be made).
result<writer_lock> take_writer_lock(const std::filesystem::path& dir);
void release_writer_lock(writer_lock& lock);
// Whether a process (this one included) has the store open for writing.
bool writer_active(const std::filesystem::path& dir);

// The column families of a KernelSkill store, in the order a new store creates them.
const std::vector<std::string>& our_column_families();

// An open RocksDB and its column family handles.
struct rocks_instance {
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  bool read_only = false;
  void close();  // destroys the handles, closes and deletes the DB; no-op when closed
};

// What open_rocks' read-only look found: the instance, the write-ahead log recovery
// mode that opened it, and the damaged log it accepted (records never acknowledged).
struct rocks_look {
  rocks_instance ro;
  rocksdb::WALRecoveryMode mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  std::string accepted_damage;
};

// The message of a refusal to open a damaged store: what is damaged, that nothing was
// changed, and what to do.
std::string damaged_message(const std::filesystem::path& dir, const std::string& what);

// "MANIFEST-000010" as CURRENT names it; empty when CURRENT cannot be read.
std::string current_manifest(const std::filesystem::path& dir);

// The file a RocksDB error or its logged warnings name, when one can be told, as a short
// phrase ("the write-ahead log 000012.log"); empty otherwise.
std::string damaged_file(const std::string& status_text, const std::vector<std::string>& warnings);

}  // namespace store_detail

struct store::impl {
  // Per-task sequence allocation: appends to one task are serialised so that seqs
  // are dense and in write order; different tasks append in parallel.
  struct trajectory_lane {
    std::mutex mu;
    bool loaded = false;
    uint64_t last = 0;
  };

  std::filesystem::path dir;
  store_options options;

  mutable std::shared_mutex db_mu;
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  bool db_read_only = false;  // this RocksDB instance cannot write (read_only, or a full disk)
  std::string broken;         // set when a reopen failed and left no instance
  rocksdb::WALRecoveryMode wal_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  std::vector<std::string> column_families;  // as the database lists them
  rocksdb::WriteOptions write_options;
  int64_t created_ms = 0;

  store_detail::writer_lock lock;  // held while open for writing
  std::shared_ptr<store_detail::store_logger> logger;
  std::unique_ptr<store_detail::watermark_file> mark;
  std::atomic<bool> manifest_changed{false};
  std::shared_ptr<rocksdb::EventListener> listener;

  // Out of space: writes are refused (507 in the daemon) until a reopen succeeds.
  std::mutex space_mu;
  bool no_space = false;
  std::string space_problem;
  std::chrono::steady_clock::time_point last_recovery{};

  // The keeper thread: records MANIFEST changes and syncs the watermark every second.
  std::thread keeper;
  std::mutex keeper_mu;
  std::condition_variable keeper_cv;
  bool stopping = false;

  std::mutex lanes_mu;
  std::map<std::string, std::shared_ptr<trajectory_lane>> lanes;
  std::mutex kernels_mu;
  std::mutex experience_mu;
  std::optional<uint64_t> experience_seq;
  std::mutex skills_mu;

  ~impl();

  rocksdb::ColumnFamilyHandle* cf(const std::string& name) const { return by_name.at(name); }

  // "memory store DIR: OP: PROBLEM" — every error says where and what was attempted.
  error fail(const std::string& op, const std::string& problem) const {
    return error{"memory store " + dir.string() + ": " + op + ": " + problem};
  }
  error fail(const std::string& op, const rocksdb::Status& s) const { return fail(op, s.ToString()); }
  // Under db_mu (shared): whether an instance is there to use.
  status usable(const std::string& op) const;
  // Under db_mu (shared): whether a write may be tried (not read-only, space left).
  status writable(const std::string& op);
  // Under db_mu (shared): writes `batch`; see the top of this file.
  status commit(const std::string& op, rocksdb::WriteBatch& batch, bool force_sync = false);
  bool out_of_space();
  std::string out_of_space_text();
  void enter_out_of_space(const std::string& why);
  // Without db_mu: when out of space, at most once a second and only when the disk has
  // room again, reopens RocksDB for writing (store_open.cpp).
  void recover_space_if_due();

  // Opens RocksDB for this store (store_open.cpp): checks for damage first, then opens
  // for writing, or read-only when options.read_only or the disk is full. Sets db,
  // handles, by_name, db_read_only, column_families. `creating`: a new store.
  status open_rocks(bool creating);
  // Its steps. Step 1: opens read-only, accepting a damaged write-ahead log tail only
  // when point-in-time recovery still reaches the watermark (`acked`).
  status look_read_only(const std::optional<store_detail::watermark>& acked, store_detail::rocks_look& look);
  // Step 4: replaces the read-only look with a writable instance, or stays read-only
  // when the disk is full (options.read_only_when_full).
  status open_for_writing(store_detail::rocks_look& look);
  status stay_read_only(store_detail::rocks_look& look, const std::string& why);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors() const;  // of column_families
  rocksdb::Status open_writable(bool creating, rocksdb::WALRecoveryMode mode, store_detail::rocks_instance& r);
  rocksdb::Status open_read_only(rocksdb::WALRecoveryMode mode, store_detail::rocks_instance& r);
  // Makes `r` the instance in use, closing the one before (only once `r` is ready).
  void adopt(store_detail::rocks_instance& r);
  // Writes the watermark after a writable open (acked = what RocksDB recovered).
  status start_watermark();
  void start_keeper();
  void stop_keeper();
  void close_rocks();

  result<std::optional<std::string>> get(rocksdb::ColumnFamilyHandle* h, const std::string& key,
                                         const std::string& op) const;
  result<std::optional<uint64_t>> get_meta_number(const char* key, const std::string& op) const;
  std::unique_ptr<rocksdb::Iterator> iterate(const char* cf_name) const;
  // The highest seq of `task`, 0 when it has no entry.
  result<uint64_t> last_trajectory_seq(const std::string& task, const std::string& op) const;
};

}  // namespace ks
