#pragma once
// The acknowledgement watermark: a small file beside a store's RocksDB files
// (KERNELSKILL-WATERMARK) that remembers how far the store got, so that an open can tell a
// store that lost acknowledged writes from one that did not.
//
// RocksDB alone cannot: a write-ahead log cut at a record boundary, or a MANIFEST cut so
// that it forgets a table it had added, opens "successfully" with the data gone (both
// measured: 30 of 60 tasks, and 0 of 60). The watermark records
//   acked_seq      the RocksDB sequence number of the last write the store acknowledged;
//                  an open that recovers less has lost acknowledged writes;
//   manifest, size, hash
//                  the MANIFEST file, its length after the last change RocksDB made to
//                  it (flush, compaction, open) and a hash of those bytes: the same
//                  MANIFEST shorter than that, or with other bytes there, was cut or
//                  overwritten (zeroed bytes at its end read as a clean end to RocksDB).
//
// What it promises:
// - the file is one 256-byte block rewritten in place (pwrite at offset 0, below a
//   sector, so never torn in practice) and carries a checksum: damage to it is found,
//   never read as a lower or higher mark;
// - it is advanced after a write is acknowledged, never before, so it never claims a
//   write RocksDB does not have. It is fsync'ed by the store at most a second later
//   (and at close): after a power cut the mark may be up to a second old, which weakens
//   the check for that second and never raises a false alarm;
// - RocksDB ignores files it does not know, so it never deletes this one.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/result.hpp"

namespace ks::store_detail {

inline constexpr const char* watermark_name = "KERNELSKILL-WATERMARK";

struct watermark {
  uint64_t acked_seq = 0;
  std::string manifest;  // "MANIFEST-000010", empty when not known yet
  uint64_t manifest_size = 0;
  uint64_t manifest_hash = 0;  // of its first manifest_size bytes
  friend bool operator==(const watermark&, const watermark&) = default;
};

// The watermark in `dir`: nullopt when there is no file; an error naming the file when
// it exists but is not a valid watermark (damaged).
result<std::optional<watermark>> read_watermark(const std::filesystem::path& dir);

// The text of a watermark file (exposed for the tests that damage it).
std::string encode_watermark(const watermark& w);

// The hash the watermark keeps of the first `size` bytes of `file`; nullopt when the file
// is shorter or cannot be read.
std::optional<uint64_t> hash_prefix(const std::filesystem::path& file, uint64_t size);

class watermark_file {
 public:
  // Creates or replaces the file with `initial`, synced (file and directory).
  static result<std::unique_ptr<watermark_file>> create(const std::filesystem::path& dir, const watermark& initial);
  ~watermark_file();
  watermark_file(const watermark_file&) = delete;
  watermark_file& operator=(const watermark_file&) = delete;

  // Raises acked_seq to `seq` (never lowers it) and writes the file (not synced).
  void advance(uint64_t seq);
  // Records the MANIFEST's name, length and hash (not synced).
  void set_manifest(const std::string& name, uint64_t size, uint64_t hash);
  // Writes the mark again if the last write failed, then fdatasync when something was
  // written since the last sync.
  void sync();
  watermark current() const;

 private:
  watermark_file(int fd, watermark w) : fd_(fd), w_(std::move(w)) {}
  void write_locked();
  int fd_;
  mutable std::mutex mu_;
  watermark w_;
  bool unwritten_ = false;  // the last pwrite failed: the file holds an older mark
  bool unsynced_ = false;   // written since the last fdatasync
};

}  // namespace ks::store_detail
