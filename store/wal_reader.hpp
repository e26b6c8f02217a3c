#pragma once
// Reading a RocksDB write-ahead log file directly, for store repair (store/store_check.hpp).
// RocksDB's RepairDB turns each log into a table, but only for column families that
// still have a table: records of one that lost its only table (or never had one) are
// dropped ("Invalid column family specified in write batch") — issue 44's repair
// recovered 0 of 60 tasks, 30 of them in an intact log. The records are still in the
// log; this reads them, so the repair can put them back.
//
// What it promises:
// - read_wal returns every record of the file whose checksum matches (crc32c, as RocksDB
//   writes it), in file order, as RocksDB write batches: the batch's sequence number and
//   its bytes (rocksdb::WriteBatch(rep) reads them);
// - a record whose checksum does not match, or that is cut, is not returned: the rest of
//   its 32 KiB block is skipped (as RocksDB's kSkipAnyCorruptedRecords does) and each
//   such place is named in `problems`; a compressed log (not KernelSkill's setting) is
//   not read and says so.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ks::store_detail {

struct wal_batch {
  uint64_t sequence = 0;  // of the batch's first write
  uint32_t count = 0;     // writes in it
  std::string rep;        // the batch's bytes (sequence and count included)
};

struct wal_contents {
  std::vector<wal_batch> batches;
  std::vector<std::string> problems;  // "000021.log: bytes 32768-65535 skipped: …"
};

wal_contents read_wal(const std::filesystem::path& file, uint64_t log_number);

}  // namespace ks::store_detail
