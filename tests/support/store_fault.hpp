#pragma once
// The store fault-injection sweep, shared by tests/store_fault_test.cpp (a short seeded
// run for CI) and bench/store/fault_sweep_main.cpp (a long one).
//
// What it does, with real processes and real RocksDB files, nothing mocked:
// 1. builds a store with store_writer processes that acknowledge writes on stdout and are
//    killed with SIGKILL at random points (2–3 runs, so that the store has tables written
//    by recovery flushes, MANIFEST edits and a live write-ahead log);
// 2. copies it and damages one file of the copy — the MANIFEST, a write-ahead log, a
//    table, CURRENT, or the watermark — by cutting it at a random length, flipping random
//    bytes, zeroing a random range, or removing it;
// 3. reopens the copy for writing in a new store_writer process (`--verify`), which
//    checks every write the killed writers acknowledged.
// Each case must end "intact" (everything acknowledged is there) or "refused" (the open
// refused with a message that names the damaged file and the way out, and no data file
// changed). Anything else — an acknowledged write missing ("LOST"), a refusal that
// changed files or does not say what is damaged, a crash — is a failure.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ks::test {

struct fault_options {
  std::string writer;          // path of store_writer
  std::filesystem::path work;  // scratch directory (created; cases are removed)
  uint32_t seed = 1;
  int bases = 6;                                     // stores built by killed writers
  int damages_per_base = 6;                          // damaged copies of each
  int min_acks = 20, max_acks = 150;                 // a writer is killed after this many acks
  bool sync = false;                                 // the writers' sync_writes (kill -9 needs none)
  std::function<void(const std::string&)> progress;  // one line per case, when set
};

struct fault_case {
  int base = 0;
  std::string kind;  // MANIFEST, WAL, SST, CURRENT, WATERMARK
  std::string file;
  std::string op;  // cut, flip, zero, remove
  uint64_t size = 0, offset = 0, length = 0;
  std::string outcome;  // intact, refused, LOST, changed, unclear, crashed, error
  std::string detail;   // the verifier's output
  double open_ms = 0;
  bool ok() const { return outcome == "intact" || outcome == "refused"; }
  std::string describe() const;
};

struct fault_summary {
  std::vector<fault_case> cases;
  uint64_t acked_writes = 0;  // trajectory entries acknowledged over all bases
  double seconds = 0;
  // kind → outcome → count
  std::map<std::string, std::map<std::string, int>> counts() const;
  std::vector<const fault_case*> failures() const;
  std::string table() const;
};

fault_summary run_fault_sweep(const fault_options& o);

}  // namespace ks::test
