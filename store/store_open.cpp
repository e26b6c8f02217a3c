// Opening a store's RocksDB safely (see store_impl.hpp and docs/store.md, "Damage").
//
// RocksDB, left to itself, "recovers" from damage in ways that lose data without a word:
// a MANIFEST that lost its last edits opens fine and deletes the tables those edits had
// added; a write-ahead log with a bad record replays up to it and drops the rest (point-in-
// time recovery, the default); a log cut at a record boundary looks like a clean end. So
// every open first looks at the store read-only (a read-only open writes and deletes
// nothing), compares what it finds with the acknowledgement watermark, and only then
// opens for writing. What is damaged is refused with the file named; nothing is changed.
//
// Write-ahead log recovery mode. kTolerateCorruptedTailRecords: an incomplete last record
// (what a crash in the middle of a write leaves) is ignored, any checksum mismatch is an
// error. kAbsoluteConsistency would also refuse that incomplete record, though it was never
// acknowledged (the store answers only after the write returned), so every unlucky crash
// would need a repair; it still misses a log cut exactly at a record boundary. Point-in-
// time recovery silently drops everything after a bad record. None of the three can tell
// acknowledged from unacknowledged records; the watermark can. So: open with
// kTolerateCorruptedTailRecords; when that fails on a write-ahead log, look again with
// point-in-time recovery, and accept it only when what it recovers reaches the watermark,
// i.e. the damaged records were never acknowledged (a power cut during a write can leave
// such a record). The damaged log is copied to lost/ first, so even those bytes are kept.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <set>

#include <fstream>
#include <regex>
#include <sstream>

#include <spdlog/spdlog.h>

#include "store/store_impl.hpp"

namespace ks {

namespace fs = std::filesystem;
using namespace store_detail;

namespace store_detail {

const std::vector<std::string>& our_column_families() {
  static const std::vector<std::string> names = {
      rocksdb::kDefaultColumnFamilyName, "skills", "experience", "trajectories", "kernels", "tasks"};
  return names;
}

namespace {

std::mutex& locks_mu() {
  static std::mutex mu;
  return mu;
}
std::set<std::pair<uint64_t, uint64_t>>& locks_held() {
  static std::set<std::pair<uint64_t, uint64_t>> held;
  return held;
}

std::optional<std::pair<uint64_t, uint64_t>> file_id(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

}  // namespace

result<writer_lock> take_writer_lock(const fs::path& dir) {
  const fs::path file = dir / lock_name;
  const std::string in_use = "memory store " + dir.string() +
                             " is in use: another process (or another open store in this one) "
                             "has it open for writing. Stop it, open the store read-only, or "
                             "use another memory.path";
  std::lock_guard g(locks_mu());
  if (auto id = file_id(file); id && locks_held().count(*id)) return error{in_use};
  writer_lock l;
  l.fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (l.fd < 0)
    return error{"memory store " + dir.string() + ": cannot open " + lock_name + ": " + std::strerror(errno)};
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(l.fd, F_SETLK, &fl) != 0) {
    ::close(l.fd);  // this process holds no lock on it: closing drops nothing
    return error{in_use};
  }
  struct stat st {};
  ::fstat(l.fd, &st);
  l.dev = st.st_dev;
  l.ino = st.st_ino;
  locks_held().insert({l.dev, l.ino});
  return l;
}

void release_writer_lock(writer_lock& l) {
  if (!l.held()) return;
  std::lock_guard g(locks_mu());
  locks_held().erase({l.dev, l.ino});
  ::close(l.fd);
  l.fd = -1;
}

bool writer_active(const fs::path& dir) {
  const fs::path file = dir / lock_name;
  std::lock_guard g(locks_mu());
  auto id = file_id(file);
  if (!id) return false;
  if (locks_held().count(*id)) return true;
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  bool held = ::fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  ::close(fd);  // not locked by this process (the registry says so): nothing to drop
  return held;
}

void rocks_instance::close() {
  if (!db) return;
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  handles.clear();
  auto s = db->Close();
  // A store that ran out of space reports the write it could not finish; the data it
  // acknowledged is in the log already.
  if (!s.ok()) spdlog::debug("memory store: close: {}", s.ToString());
  delete db;
  db = nullptr;
}

std::string damaged_message(const fs::path& dir, const std::string& what) {
  const std::string d = dir.string();
  return "memory store " + d + " is damaged: " + what +
         ". Nothing was changed or deleted. Restore the directory from a backup, or run "
         "`kernelskill store check --memory " +
         d +
         "` to see the damage and `kernelskill "
         "store repair --memory " +
         d +
         "` to salvage what can be read (it keeps the damaged "
         "files and lists everything it could not recover)";
}

std::string current_manifest(const fs::path& dir) {
  std::ifstream in(dir / "CURRENT");
  std::string name;
  if (!std::getline(in, name)) return "";
  if (name.rfind("MANIFEST-", 0) != 0) return "";
  return name;
}

std::string damaged_file(const std::string& status_text, const std::vector<std::string>& warnings) {
  static const std::regex wal_re(R"(([0-9]{6,})\.log)");
  static const std::regex sst_re(R"(([0-9]{6,})\.(sst|ldb))");
  static const std::regex manifest_re(R"((MANIFEST-[0-9]+))");
  std::smatch m;
  // RocksDB's warnings name the log it was reading; its status often does not.
  for (auto it = warnings.rbegin(); it != warnings.rend(); ++it) {
    if (it->find("dropping") != std::string::npos && std::regex_search(*it, m, wal_re)) {
      return "the write-ahead log " + m[1].str() + ".log";
    }
  }
  if (status_text.find("CURRENT") != std::string::npos) {
    return "CURRENT (the file that names the live MANIFEST)";
  }
  if (std::regex_search(status_text, m, sst_re)) return "the table " + m[1].str() + ".sst";
  if (std::regex_search(status_text, m, manifest_re)) return "the MANIFEST " + m[1].str();
  if (std::regex_search(status_text, m, wal_re)) return "the write-ahead log " + m[1].str() + ".log";
  return "";
}

}  // namespace store_detail

namespace {

// Tells the store that RocksDB changed its MANIFEST (a flush or compaction finished), so
// that the keeper records the new length in the watermark.
class manifest_listener : public rocksdb::EventListener {
 public:
  explicit manifest_listener(std::atomic<bool>* changed) : changed_(changed) {}
  void OnFlushCompleted(rocksdb::DB*, const rocksdb::FlushJobInfo&) override { *changed_ = true; }
  void OnCompactionCompleted(rocksdb::DB*, const rocksdb::CompactionJobInfo&) override { *changed_ = true; }

 private:
  std::atomic<bool>* changed_;
};

uint64_t manifest_number(const std::string& name) {
  auto dash = name.find('-');
  if (dash == std::string::npos) return 0;
  return std::strtoull(name.c_str() + dash + 1, nullptr, 10);
}

std::string open_error(const fs::path& dir, const rocksdb::Status& s) {
  std::string text = s.ToString();
  std::string lower = text;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.IsIOError() && lower.find("lock") != std::string::npos) {
    return "memory store " + dir.string() +
           " is in use: another process (or another open store in this one) has it open "
           "for writing. Stop it, open the store read-only, or use another memory.path (" +
           text + ")";
  }
  return "memory store " + dir.string() + ": open: " + text;
}

// The MANIFEST RocksDB has open and its length, from the live-file list.
std::pair<std::string, uint64_t> live_manifest(rocksdb::DB* db) {
  std::vector<std::string> files;
  uint64_t size = 0;
  if (!db->GetLiveFiles(files, &size, /*flush_memtable=*/false).ok()) return {"", 0};
  for (auto& f : files) {
    std::string name = f.substr(f.find_last_not_of('/') == std::string::npos ? 0 : f.rfind('/') + 1);
    if (name.rfind("MANIFEST-", 0) == 0) return {name, size};
  }
  return {"", 0};
}

}  // namespace

store::impl::~impl() {
  stop_keeper();
  close_rocks();
  mark.reset();
  release_writer_lock(lock);
}

void store::impl::close_rocks() {
  rocks_instance r{db, handles, db_read_only};
  r.close();
  db = nullptr;
  handles.clear();
  by_name.clear();
}

status store::impl::usable(const std::string& op) const {
  if (db) return {};
  return fail(op, broken.empty() ? "the store is closed" : broken);
}

namespace {

// Step 2 of open_rocks: what a read-only look recovered (`ro`) against the watermark
// (`acked`): nothing acknowledged is missing, and the MANIFEST was neither cut, changed
// nor replaced by an older one. Closes `ro` when it refuses.
status check_against_watermark(const fs::path& dir, const std::optional<watermark>& acked, rocks_instance& ro) {
  const uint64_t recovered = ro.db->GetLatestSequenceNumber();
  if (!acked) {
    std::string flag;
    if (ro.db->Get(rocksdb::ReadOptions(), "meta/watermark", &flag).ok()) {
      ro.close();
      return error{damaged_message(
          dir,
          std::string(watermark_name) + " is missing, so the store cannot show that no acknowledged write was lost")};
    }
    return {};
  }
  const watermark& w = *acked;
  if (recovered < w.acked_seq) {
    ro.close();
    return error{damaged_message(dir, "writes up to " + std::to_string(w.acked_seq) +
                                          " were acknowledged, but the store holds only those up to " +
                                          std::to_string(recovered) +
                                          ": a write-ahead log was cut, damaged or removed "
                                          "(write-ahead logs now: " +
                                          wal_listing(dir) + "), or the store was restored from an older copy")};
  }
  const std::string cur = current_manifest(dir);
  if (!w.manifest.empty() && cur == w.manifest) {
    std::error_code ec;
    uint64_t size = fs::file_size(dir / cur, ec);
    if (!ec && size < w.manifest_size) {
      ro.close();
      return error{damaged_message(dir, "the MANIFEST " + cur + " is " + std::to_string(size) + " bytes long but was " +
                                            std::to_string(w.manifest_size) +
                                            ": it was cut, and the tables its lost end listed would be deleted by an "
                                            "ordinary open")};
    }
    auto h = hash_prefix(dir / cur, w.manifest_size);
    if (h && *h != w.manifest_hash) {
      ro.close();
      return error{damaged_message(dir, "the MANIFEST " + cur + " no longer holds what it held (its first " +
                                            std::to_string(w.manifest_size) +
                                            " bytes changed): edits may be lost, and the tables they listed would be "
                                            "deleted by an ordinary open")};
    }
  } else if (!w.manifest.empty() && manifest_number(w.manifest) > manifest_number(cur)) {
    ro.close();
    return error{damaged_message(dir, "CURRENT names " + (cur.empty() ? std::string("no MANIFEST") : cur) +
                                          ", but the store had already moved on to " + w.manifest)};
  }
  return {};
}

// Step 3 of open_rocks: every table's checksums. Closes `ro` when one is wrong.
status verify_tables(const fs::path& dir, rocks_instance& ro) {
  auto v = ro.db->VerifyChecksum();
  if (v.ok()) return {};
  ro.close();
  std::string file = damaged_file(v.ToString(), {});
  return error{damaged_message(dir, (file.empty() ? "" : file + ": ") + v.ToString())};
}

}  // namespace

std::vector<rocksdb::ColumnFamilyDescriptor> store::impl::descriptors() const {
  std::vector<rocksdb::ColumnFamilyDescriptor> d;
  for (const auto& n : column_families) d.emplace_back(n, rocks_cf_options());
  return d;
}

rocksdb::Status store::impl::open_writable(bool creating, rocksdb::WALRecoveryMode mode, rocks_instance& r) {
  auto o = rocks_options(creating, logger, mode);
  if (!options.read_only) o.listeners.push_back(listener);
  r.read_only = false;
  return rocksdb::DB::Open(o, dir.string(), descriptors(), &r.handles, &r.db);
}

rocksdb::Status store::impl::open_read_only(rocksdb::WALRecoveryMode mode, rocks_instance& r) {
  r.read_only = true;
  return rocksdb::DB::OpenForReadOnly(rocks_options(false, logger, mode), dir.string(), descriptors(), &r.handles,
                                      &r.db);
}

void store::impl::adopt(rocks_instance& r) {
  close_rocks();
  db = r.db;
  handles = r.handles;
  db_read_only = r.read_only;
  by_name.clear();
  for (auto* h : handles) by_name[h->GetName()] = h;
  r.db = nullptr;
  r.handles.clear();
}

status store::impl::look_read_only(const std::optional<watermark>& acked, rocks_look& look) {
  look.mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  auto mark0 = logger->mark();
  auto s = open_read_only(look.mode, look.ro);
  if (s.ok()) return {};
  auto warnings = logger->warnings_since(mark0);
  std::string file = damaged_file(s.ToString(), warnings);
  std::string what = (file.empty() ? std::string() : file + ": ") + s.ToString();
  if (!s.IsCorruption() || file.rfind("the write-ahead log", 0) != 0 || !acked)
    return error{damaged_message(dir, what)};
  rocks_instance pit;
  auto p = open_read_only(rocksdb::WALRecoveryMode::kPointInTimeRecovery, pit);
  uint64_t recovered = p.ok() ? pit.db->GetLatestSequenceNumber() : 0;
  if (p.ok() && recovered >= acked->acked_seq) {
    look.mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
    look.accepted_damage = file;
    look.ro = pit;
    pit.db = nullptr;
    return {};
  }
  pit.close();
  if (p.ok()) {
    what += "; writes up to " + std::to_string(acked->acked_seq) + " were acknowledged and only those up to " +
            std::to_string(recovered) + " can be read";
  }
  return error{damaged_message(dir, what)};
}

status store::impl::stay_read_only(rocks_look& look, const std::string& why) {
  if (!options.read_only_when_full) {
    look.ro.close();
    return error{"memory store " + dir.string() + ": " + why + "; free space on that disk and try again"};
  }
  if (!look.ro.db) {
    auto r = open_read_only(look.mode, look.ro);
    if (!r.ok()) return error{open_error(dir, r)};
  }
  adopt(look.ro);
  enter_out_of_space(why);
  return {};
}

status store::impl::open_for_writing(rocks_look& look) {
  const uint64_t need = bytes_to_open(dir);
  const uint64_t free = free_bytes(dir);
  if (free < need) {
    return stay_read_only(look, "only " + std::to_string(free) + " bytes are free on its disk (" +
                                    std::to_string(need) + " needed to open it for writing)");
  }
  if (!look.accepted_damage.empty()) {
    // The damaged records were never acknowledged; keep a copy of the log all the same.
    std::error_code ec;
    fs::create_directories(dir / "lost", ec);
    std::string log = look.accepted_damage.substr(look.accepted_damage.rfind(' ') + 1);
    fs::copy_file(dir / log, dir / "lost" / (log + ".damaged-" + std::to_string(std::time(nullptr))),
                  fs::copy_options::overwrite_existing, ec);
    spdlog::warn(
        "memory store {}: {} has a damaged record after the last acknowledged write (never "
        "acknowledged: a write cut short); it was dropped, a copy is in {}/lost",
        dir.string(), log, dir.string());
  }
  const uint64_t recovered = look.ro.db->GetLatestSequenceNumber();
  look.ro.close();
  close_rocks();  // a reopen: RocksDB allows one writer
  rocks_instance rw;
  auto s = open_writable(false, look.mode, rw);
  if (!s.ok()) {
    if (is_no_space(s)) return stay_read_only(look, "the disk is full (" + s.ToString() + ")");
    return error{open_error(dir, s)};
  }
  if (rw.db->GetLatestSequenceNumber() < recovered) {
    rw.close();
    return error{damaged_message(dir, "opening for writing recovered less than a read-only look did")};
  }
  adopt(rw);
  return {};
}

status store::impl::open_rocks(bool creating) {
  if (!logger) {
    logger = std::make_shared<store_logger>(options.read_only ? fs::path() : dir / "LOG");
  }
  if (creating) column_families = our_column_families();
  if (column_families.empty()) {
    auto s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.string(), &column_families);
    if (!s.ok()) {
      std::string file = damaged_file(s.ToString(), {});
      return error{damaged_message(dir, (file.empty() ? "" : file + " cannot be read: ") + s.ToString())};
    }
  }
  if (!listener) listener = std::make_shared<manifest_listener>(&manifest_changed);

  if (creating) {
    rocks_instance rw;
    auto s = open_writable(true, wal_mode, rw);
    if (!s.ok()) return error{open_error(dir, s)};
    adopt(rw);
    return {};
  }

  // 1. Look read-only: nothing is written or deleted.
  auto acked = read_watermark(dir);
  if (!acked) return error{damaged_message(dir, acked.message())};
  rocks_look look;
  if (auto s = look_read_only(*acked, look); !s) return s;
  // 2. Compare with the watermark.
  if (auto s = check_against_watermark(dir, *acked, look.ro); !s) return s;
  // 3. Every table's checksums (writable opens: the daemon and runs; a reader beside a
  //    running writer skips this).
  if (!options.read_only) {
    if (auto s = verify_tables(dir, look.ro); !s) return s;
  }
  wal_mode = look.mode;
  if (options.read_only) {
    adopt(look.ro);
    return {};
  }
  // 4. Open for writing, or stay read-only when the disk is full.
  return open_for_writing(look);
}

status store::impl::start_watermark() {
  if (db_read_only || options.read_only) return {};
  auto old = read_watermark(dir);
  watermark w;
  if (old && *old) w = **old;
  w.acked_seq = std::max(w.acked_seq, db->GetLatestSequenceNumber());
  auto [name, size] = live_manifest(db);
  auto hash = name.empty() ? std::nullopt : hash_prefix(dir / name, size);
  // Unknown (it could not be read): no MANIFEST check at the next open, never a false one.
  w.manifest = hash ? name : std::string();
  w.manifest_size = hash ? size : 0;
  w.manifest_hash = hash.value_or(0);
  auto created = watermark_file::create(dir, w);
  if (!created) return fail("open", created.message());
  mark = std::move(*created);
  std::string flag;
  if (!db->Get(rocksdb::ReadOptions(), "meta/watermark", &flag).ok()) {
    rocksdb::WriteBatch batch;
    batch.Put(db->DefaultColumnFamily(), "meta/watermark", watermark_name);
    if (auto c = commit("open", batch, /*force_sync=*/true); !c) return c;
  }
  return {};
}

void store::impl::start_keeper() {
  if (!mark || keeper.joinable()) return;
  keeper = std::thread([this] {
    std::unique_lock lock(keeper_mu);
    while (!stopping) {
      keeper_cv.wait_for(lock, std::chrono::seconds(1));
      if (manifest_changed.exchange(false)) {
        std::shared_lock g(db_mu);
        if (db && !db_read_only) {
          auto [name, size] = live_manifest(db);
          auto hash = name.empty() ? std::nullopt : hash_prefix(dir / name, size);
          if (hash) mark->set_manifest(name, size, *hash);
        }
      }
      mark->sync();
    }
  });
}

void store::impl::stop_keeper() {
  {
    std::lock_guard lock(keeper_mu);
    stopping = true;
  }
  keeper_cv.notify_all();
  if (keeper.joinable()) keeper.join();
  if (mark) mark->sync();
}

bool store::impl::out_of_space() {
  std::lock_guard lock(space_mu);
  return no_space;
}

std::string store::impl::out_of_space_text() {
  std::lock_guard lock(space_mu);
  return "no space left for the store (" + space_problem +
         "); writes are refused until space is freed on that disk (reads still work)";
}

void store::impl::enter_out_of_space(const std::string& why) {
  std::lock_guard lock(space_mu);
  if (!no_space) {
    spdlog::error("memory store {}: out of space, writes are refused until space is freed: {}", dir.string(), why);
  }
  no_space = true;
  space_problem = why;
  last_recovery = std::chrono::steady_clock::now();
}

status store::impl::writable(const std::string& op) {
  if (auto u = usable(op); !u) return u;
  if (options.read_only) return fail(op, "the store was opened read-only");
  if (out_of_space() || db_read_only) return fail(op, out_of_space_text());
  return {};
}

status store::impl::commit(const std::string& op, rocksdb::WriteBatch& batch, bool force_sync) {
  rocksdb::WriteOptions wo = write_options;
  if (force_sync) wo.sync = true;
  auto s = db->Write(wo, &batch);
  if (s.ok()) {
    if (mark) mark->advance(db->GetLatestSequenceNumber());
    return {};
  }
  if (is_no_space(s)) {
    enter_out_of_space(s.ToString());
    return fail(op, out_of_space_text());
  }
  return fail(op, s);
}

void store::impl::recover_space_if_due() {
  {
    std::lock_guard lock(space_mu);
    if (!no_space) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_recovery < std::chrono::seconds(1)) return;
    last_recovery = now;
  }
  if (free_bytes(dir) < bytes_to_open(dir)) return;
  // RocksDB cannot always resume writing after a failed write-ahead log append; a fresh
  // open, with the same checks as at start, can. The keeper is stopped first: it takes
  // db_mu too.
  stop_keeper();
  {
    std::unique_lock g(db_mu);
    if (out_of_space()) {
      {
        std::lock_guard lock(space_mu);
        no_space = false;
      }
      auto s = open_rocks(false);
      if (!s) {
        if (!db) broken = s.message();
        spdlog::error("memory store {}: reopening after the disk was full failed: {}", dir.string(), s.message());
        enter_out_of_space("reopening failed: " + s.message());
      } else if (!db_read_only) {
        broken.clear();
        if (auto w = start_watermark(); !w) spdlog::warn("{}", w.message());
        spdlog::info("memory store {}: space is available again; writes are accepted", dir.string());
      }
    }
  }
  {
    std::lock_guard lock(keeper_mu);
    stopping = false;
  }
  start_keeper();
}

}  // namespace ks
