#pragma once
// RocksDB plumbing shared by the memory store's files (store.cpp, store_check.cpp); private
// to store/: nothing outside this folder includes RocksDB.
//
// What it promises:
// - store_logger is RocksDB's info log for a store. It never aborts: RocksDB's own log
//   writer asserts when a write fails after an earlier failure (the Debian build keeps
//   assertions), which made a full disk a SIGABRT at every start. This one writes LOG with
//   plain write(2) and drops lines it cannot write. It also keeps the recent warnings, so
//   that an error can say which file RocksDB found damaged ("000012.log: dropping 15870
//   bytes; Corruption: checksum mismatch").
// - rocks_options() is the one set of RocksDB options every open of a store uses (see the
//   comments there for why each is set).
// - is_no_space() says whether a RocksDB error means the disk (or a quota, or a file size
//   limit) is full: those are answered as "insufficient storage", not as failures.

#include <cstdarg>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>

namespace ks::store_detail {

class store_logger : public rocksdb::Logger {
 public:
  // file empty: keep the warnings in memory only (read-only opens: the writer owns LOG).
  // Otherwise lines are appended to `file`; above 16 MiB it becomes LOG.old.<micros>
  // and the newest four of those are kept.
  explicit store_logger(const std::filesystem::path& file);
  ~store_logger() override;

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override;

  // A position in the stream of warnings; warnings_since(mark()) are those logged after.
  uint64_t mark() const;
  std::vector<std::string> warnings_since(uint64_t mark) const;

 private:
  void write_line(const std::string& line);
  std::filesystem::path file_;
  int fd_ = -1;
  uint64_t written_ = 0;
  mutable std::mutex mu_;
  std::deque<std::string> warnings_;
  uint64_t warnings_total_ = 0;
};

// The options of every open. create: make a missing database and column families.
rocksdb::Options rocks_options(bool create, std::shared_ptr<rocksdb::Logger> logger, rocksdb::WALRecoveryMode wal_mode);
rocksdb::ColumnFamilyOptions rocks_cf_options();

// ENOSPC, EDQUOT or EFBIG behind a RocksDB status.
bool is_no_space(const rocksdb::Status& s);
// Free bytes for an unprivileged writer on the filesystem holding `dir` (0 when unknown).
uint64_t free_bytes(const std::filesystem::path& dir);
// Sum of the sizes of the write-ahead logs (*.log) in dir.
uint64_t wal_bytes(const std::filesystem::path& dir);
// Free space an open for writing needs: room to flush the write-ahead logs into tables,
// plus a MiB for the new MANIFEST, OPTIONS and log. Below it, opens are read-only.
uint64_t bytes_to_open(const std::filesystem::path& dir);
// "000030.log (5000 bytes), 000031.log (0 bytes)", or "none".
std::string wal_listing(const std::filesystem::path& dir);

// RocksDB's file kinds by name, for messages and inventories.
bool is_wal_name(const std::string& name);
bool is_sst_name(const std::string& name);
bool is_rocksdb_file_name(const std::string& name);

}  // namespace ks::store_detail
