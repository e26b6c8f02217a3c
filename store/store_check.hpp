#pragma once
// Checking and repairing a memory store: `kernelskill store check` and `store repair`.
//
// What it promises:
// - check_store changes nothing (not even RocksDB's LOG): it makes the checks an open
//   makes (the verdict is what store::open would say), verifies every table's checksums,
//   and reports what a salvage could read.
// - repair_store never deletes or changes the damaged files: the damaged store is moved
//   aside whole (DIR.damaged-TIME) and a new store is built at DIR from a copy of it,
//   reading everything that can be read (RocksDB's own recovery skipping only damaged
//   write-ahead log records, or, with a damaged MANIFEST or a missing table, RocksDB's
//   RepairDB over the tables and logs, then every whole log record put back in order:
//   RepairDB drops those of a column family with no table left). Its report lists every
//   thing it could not recover — a missing table, dropped log records, records it could
//   not place, unreadable key ranges, acknowledged writes beyond what the salvage
//   reached — so a loss is never silent; `complete` is true only when none.
// - Both refuse a store another process has open for writing.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ks {

struct store_check_report {
  bool healthy = false;
  std::vector<std::string> lines;  // what was looked at and what was found
  std::string verdict;             // "" when the store opens; else why it is refused
};

result<store_check_report> check_store(const std::filesystem::path& dir);

struct store_repair_report {
  std::filesystem::path kept;              // the damaged store, moved aside untouched
  std::vector<std::string> recovered;      // per column family: records copied
  std::vector<std::string> not_recovered;  // everything known or suspected lost
  uint64_t acked_before = 0;               // last acknowledged write (0: unknown)
  uint64_t reached = 0;                    // the last write the salvage reached
  bool complete = false;                   // not_recovered is empty
};

result<store_repair_report> repair_store(const std::filesystem::path& dir);

}  // namespace ks
