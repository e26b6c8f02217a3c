#include "store/store_check.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <regex>
#include <set>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "store/store_impl.hpp"
#include "store/wal_reader.hpp"

namespace ks {

namespace fs = std::filesystem;
using namespace store_detail;

namespace {

std::string human(uint64_t bytes) { return std::to_string(bytes) + " bytes"; }

// Opens `dir` with the column families it lists (or `fallback` when it cannot list them).
rocksdb::Status open_plain(const fs::path& dir, const std::vector<std::string>& names, rocksdb::WALRecoveryMode mode,
                           bool read_only, std::shared_ptr<rocksdb::Logger> logger, rocks_instance& r) {
  std::vector<rocksdb::ColumnFamilyDescriptor> d;
  for (const auto& n : names) d.emplace_back(n, rocks_cf_options());
  auto o = rocks_options(!read_only, std::move(logger), mode);
  r.read_only = read_only;
  if (read_only) return rocksdb::DB::OpenForReadOnly(o, dir.string(), d, &r.handles, &r.db);
  return rocksdb::DB::Open(o, dir.string(), d, &r.handles, &r.db);
}

std::vector<std::string> column_families_of(const fs::path& dir) {
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.string(), &names).ok()) names.clear();
  for (const auto& n : our_column_families())
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  return names;
}

std::set<std::string> sst_files(const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (is_sst_name(e.path().filename().string())) out.insert(e.path().filename().string());
  return out;
}

std::set<std::string> live_ssts(rocksdb::DB* db) {
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  std::set<std::string> out;
  for (auto& f : files) out.insert(f.name.substr(f.name.rfind('/') + 1));
  return out;
}

// RocksDB's words for what it skipped: "000012.log: dropping 15870 bytes; …",
// "Log #12: ignoring …", "Table #9: ignoring …".
std::vector<std::string> losses_in(const std::vector<std::string>& warnings) {
  std::vector<std::string> out;
  for (const auto& w : warnings) {
    if (w.find("dropping") != std::string::npos || w.find("ignoring") != std::string::npos) {
      out.push_back("RocksDB: " + w.substr(w.find(']') == std::string::npos ? 0 : w.rfind(']') + 2));
    }
  }
  return out;
}

std::string stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// Copies every readable record of `src` into `dst`, column family by column family. A
// read error skips the damaged table's key range and is reported in `lost`.
void copy_records(rocks_instance& src, const std::vector<std::string>& names, rocks_instance& dst,
                  store_repair_report& report) {
  std::vector<rocksdb::LiveFileMetaData> files;
  src.db->GetLiveFilesMetaData(&files);
  static const std::regex sst_re(R"(([0-9]{6,})\.(sst|ldb))");
  for (size_t i = 0; i < names.size(); ++i) {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(src.db->NewIterator(ro, src.handles[i]));
    uint64_t copied = 0;
    std::string last;
    rocksdb::WriteBatch batch;
    auto flush = [&] {
      if (batch.Count() == 0) return;
      dst.db->Write(rocksdb::WriteOptions(), &batch);
      batch.Clear();
    };
    it->SeekToFirst();
    for (int skips = 0; skips < 100;) {
      for (; it->Valid(); it->Next()) {
        // The watermark belongs to the damaged store; the new one makes its own.
        if (names[i] == rocksdb::kDefaultColumnFamilyName && it->key() == "meta/watermark") continue;
        batch.Put(dst.handles[i], it->key(), it->value());
        last = it->key().ToString();
        ++copied;
        if (batch.Count() >= 1000) flush();
      }
      if (it->status().ok()) break;
      // A damaged table: resume after its largest key in this column family.
      const std::string why = it->status().ToString();
      std::smatch m;
      std::string skip_to;
      if (std::regex_search(why, m, sst_re)) {
        for (auto& f : files) {
          if (f.column_family_name == names[i] && f.name.find(m[1].str()) != std::string::npos) {
            skip_to = f.largestkey;
          }
        }
      }
      report.not_recovered.push_back("column family " + names[i] + ": records after key \"" + last + "\"" +
                                     (skip_to.empty() ? " to the end" : " up to \"" + skip_to + "\"") +
                                     " could not be read (" + why + ")");
      if (skip_to.empty() || skip_to < last) break;
      ++skips;
      // The smallest key above the damaged table's range: the seek does not read it.
      last = skip_to + '\0';
      it.reset(src.db->NewIterator(ro, src.handles[i]));
      it->Seek(last);
    }
    flush();
    report.recovered.push_back(names[i] + ": " + std::to_string(copied) + " records");
  }
}

// The column families the MANIFEST of `dir` lists, by their number (RocksDB lists them
// in number order; a store's are numbered 0, 1, 2, … as they were created, and none is
// ever dropped). Empty when the MANIFEST cannot be read.
std::map<uint32_t, std::string> column_family_numbers(const fs::path& dir) {
  std::vector<std::string> names;
  std::map<uint32_t, std::string> out;
  if (!rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.string(), &names).ok()) return out;
  for (size_t i = 0; i < names.size(); ++i) out[static_cast<uint32_t>(i)] = names[i];
  return out;
}

// The tables a failed open could not find: "…/000020.ldb: No such file or directory".
std::set<std::string> missing_tables(const std::string& why) {
  static const std::regex missing(R"(([0-9]{6,})\.(sst|ldb): No such file)");
  std::set<std::string> out;
  for (std::sregex_iterator it(why.begin(), why.end(), missing), end; it != end; ++it)
    out.insert((*it)[1].str() + ".sst");
  return out;
}

// The write-ahead logs of `dir`, oldest first, each with its number.
std::vector<std::pair<uint64_t, fs::path>> logs_of(const fs::path& dir) {
  std::vector<std::pair<uint64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (is_wal_name(e.path().filename().string()))
      out.emplace_back(std::stoull(e.path().filename().string()), e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Applies a log's write batches to the new store, column family by number.
class replayer : public rocksdb::WriteBatch::Handler {
 public:
  replayer(rocks_instance& dst, const std::vector<std::string>& names, const std::map<uint32_t, std::string>& numbers) {
    for (const auto& [id, name] : numbers) {
      auto at = std::find(names.begin(), names.end(), name);
      if (at != names.end()) handles_[id] = dst.handles[static_cast<size_t>(at - names.begin())];
    }
  }
  rocksdb::WriteBatch batch;
  std::map<std::string, uint64_t> applied;  // writes, by column family name
  std::map<uint32_t, uint64_t> unplaced;    // writes to column families with no known name

  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    if (auto* h = handle(cf); h && !(cf == 0 && key == "meta/watermark")) return count(cf, batch.Put(h, key, value));
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
    if (auto* h = handle(cf)) return count(cf, batch.Delete(h, key));
    return rocksdb::Status::OK();
  }
  rocksdb::Status SingleDeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
    if (auto* h = handle(cf)) return count(cf, batch.Delete(h, key));
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteRangeCF(uint32_t cf, const rocksdb::Slice& from, const rocksdb::Slice& to) override {
    if (auto* h = handle(cf)) return count(cf, batch.DeleteRange(h, from, to));
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t cf, const rocksdb::Slice&, const rocksdb::Slice&) override {
    ++unplaced[cf];  // the store merges nothing
    return rocksdb::Status::OK();
  }

 private:
  rocksdb::ColumnFamilyHandle* handle(uint32_t cf) {
    auto it = handles_.find(cf);
    if (it != handles_.end()) return it->second;
    ++unplaced[cf];
    return nullptr;
  }
  rocksdb::Status count(uint32_t cf, const rocksdb::Status& s) {
    if (s.ok()) ++applied[handles_[cf]->GetName()];
    return s;
  }
  std::map<uint32_t, rocksdb::ColumnFamilyHandle*> handles_;
};

}  // namespace

result<store_check_report> check_store(const fs::path& dir) {
  const std::string where = "memory store " + dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return error{where + ": no such directory"};
  if (writer_active(dir)) {
    return error{where +
                 " is open for writing by another process (a daemon?); stop it "
                 "first, or check a copy of the directory"};
  }
  store_check_report r;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string files;
  for (const auto& n : names) files += (files.empty() ? "" : ", ") + n + " (" + human(fs::file_size(dir / n, ec)) + ")";
  r.lines.push_back("files: " + files);

  auto wm = read_watermark(dir);
  if (!wm) {
    r.lines.push_back("watermark: " + wm.message());
  } else if (!*wm) {
    r.lines.push_back("watermark: none (a store from before the watermark, or it was removed)");
  } else {
    r.lines.push_back(
        "watermark: writes acknowledged up to " + std::to_string((*wm)->acked_seq) +
        (((*wm)->manifest.empty()) ? std::string() : "; " + (*wm)->manifest + " was " + human((*wm)->manifest_size)));
  }

  // The verdict: what an open says (read-only, so nothing is written).
  store_options o;
  o.read_only = true;
  o.create_if_missing = false;
  auto opened = store::open(dir, o);
  r.verdict = opened ? "" : opened.message();
  r.lines.push_back(std::string("open: ") + (opened ? "it opens" : "refused: " + opened.message()));
  opened = error{""};  // close it before looking on our own

  // What a salvage could read: every intact write-ahead log record, every table.
  auto logger = std::make_shared<store_logger>(fs::path());
  auto mark = logger->mark();
  rocks_instance look;
  auto cfs = column_families_of(dir);
  auto s = open_plain(dir, cfs, rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords, true, logger, look);
  bool tables_ok = false;
  if (!s.ok()) {
    r.lines.push_back("salvage look: RocksDB cannot open it even skipping damaged log records: " + s.ToString());
  } else {
    r.lines.push_back("salvage look: writes up to " + std::to_string(look.db->GetLatestSequenceNumber()) + " readable");
    for (auto& l : losses_in(logger->warnings_since(mark))) r.lines.push_back("  " + l);
    auto unreferenced = sst_files(dir);
    for (auto& f : live_ssts(look.db)) unreferenced.erase(f);
    for (auto& f : unreferenced) {
      r.lines.push_back("  table " + f + " is not in the MANIFEST (an ordinary open would delete it)");
    }
    for (size_t i = 0; i < cfs.size(); ++i) {
      std::unique_ptr<rocksdb::Iterator> it(look.db->NewIterator(rocksdb::ReadOptions(), look.handles[i]));
      uint64_t n = 0;
      for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
      r.lines.push_back("  " + cfs[i] + ": " + std::to_string(n) + " records" +
                        (it->status().ok() ? "" : " before an error: " + it->status().ToString()));
    }
    auto v = look.db->VerifyChecksum();
    tables_ok = v.ok();
    r.lines.push_back("table checksums: " + (v.ok() ? std::string("all match") : v.ToString()));
    look.close();
  }
  r.healthy = r.verdict.empty() && tables_ok;
  return r;
}

namespace {

using watermark_read = result<std::optional<watermark>>;

// The acknowledged writes the watermark says, into `report` (or why they are unknown).
void read_acked(const watermark_read& wm, store_repair_report& report) {
  if (wm && *wm) report.acked_before = (*wm)->acked_seq;
  if (!wm) report.not_recovered.push_back(wm.message() + ": what was acknowledged is not known");
  if (wm && !*wm) {
    report.not_recovered.push_back(std::string("there is no ") + watermark_name +
                                   ": whether acknowledged writes are missing cannot be told");
  }
}

// A copy of the store's files (not its locks and logs) in `scratch`, to salvage from:
// RocksDB's recovery and RepairDB both write where they read.
status copy_to_scratch(const fs::path& dir, const fs::path& scratch, const std::string& where) {
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) return error{where + ": cannot create " + scratch.string() + ": " + ec.message()};
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!e.is_regular_file() || n == lock_name || n == "LOCK" || n.rfind("LOG", 0) == 0) continue;
    fs::copy_file(e.path(), scratch / n, ec);
    if (ec) {
      fs::remove_all(scratch);
      return error{where + ": cannot copy " + n + " (" + ec.message() + "); free space for a copy of the store"};
    }
  }
  return {};
}

// The MANIFEST is sound when a read-only look opens, lists every table there is, and
// matches the watermark; then RocksDB's own recovery (skipping only damaged log
// records) reads the most. Otherwise RepairDB rebuilds it from the tables and logs.
// `look_failed`: why the read-only look did not open.
bool manifest_is_sound(const fs::path& scratch, const std::vector<std::string>& cfs,
                       const std::shared_ptr<store_logger>& logger, const watermark_read& wm,
                       std::string& look_failed) {
  bool manifest_sound = false;
  rocks_instance look;
  auto opened = open_plain(scratch, cfs, rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords, true, logger, look);
  if (!opened.ok()) look_failed = opened.ToString();
  if (opened.ok()) {
    auto unreferenced = sst_files(scratch);
    for (auto& f : live_ssts(look.db)) unreferenced.erase(f);
    manifest_sound = unreferenced.empty();
    look.close();
  }
  if (manifest_sound && wm && *wm && !(*wm)->manifest.empty() && current_manifest(scratch) == (*wm)->manifest) {
    auto h = hash_prefix(scratch / (*wm)->manifest, (*wm)->manifest_size);
    manifest_sound = h && *h == (*wm)->manifest_hash;
  }
  return manifest_sound;
}

// What RepairDB's rebuild leaves to put back by hand: the logs as they were (it
// archives them), the column families' numbers from the old MANIFEST, and the column
// families it found tables of.
struct rebuild_leftovers {
  std::map<uint32_t, std::string> numbers;
  std::vector<std::pair<uint64_t, wal_contents>> logs;
  std::vector<std::string> placed;
};

// RepairDB's own way with the logs drops the records of every column family that has
// no table left (the tasks, when their one table is missing): the logs are read here
// first, with the column families' numbers from the MANIFEST. `cfs` becomes the
// rebuilt copy's column families.
status rebuild_manifest(const fs::path& scratch, std::vector<std::string>& cfs,
                        const std::shared_ptr<store_logger>& logger, const std::string& look_failed,
                        const std::string& where, store_repair_report& report, rebuild_leftovers& left) {
  std::error_code ec;
  left.numbers = column_family_numbers(scratch);
  for (const auto& [number, path] : logs_of(scratch)) left.logs.emplace_back(number, read_wal(path, number));
  std::vector<rocksdb::ColumnFamilyDescriptor> d;
  for (const auto& n : cfs) d.emplace_back(n, rocks_cf_options());
  auto o = rocks_options(false, logger, rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords);
  auto rep = rocksdb::RepairDB(scratch.string(), o, d, rocks_cf_options());
  if (!rep.ok()) {
    fs::remove_all(scratch, ec);
    return error{where + ": RocksDB's repair failed: " + rep.ToString() + " (nothing was changed)"};
  }
  const auto missing = missing_tables(look_failed);
  if (!missing.empty()) {
    std::string names;
    for (const auto& t : missing) names += (names.empty() ? "" : ", ") + t;
    report.not_recovered.push_back("table " + names +
                                   ", which the MANIFEST lists, is missing: what only it held is lost (the "
                                   "daemon's tasks above say which of them). The MANIFEST was rebuilt from the tables "
                                   "and logs that are there (RocksDB's RepairDB): look through the result");
  } else {
    report.not_recovered.push_back(
        "the MANIFEST was damaged and was rebuilt from the tables and logs (RocksDB's "
        "RepairDB): look through the result. A log record whose column family had no table "
        "left is put back from the log when the column family's number is known; each one "
        "that is not is listed below");
  }
  rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), scratch.string(), &left.placed);
  cfs = column_families_of(scratch);
  return {};
}

// After RepairDB: every whole record of the old logs written again into `dst` (the
// column families it could not place get theirs back), the report told so, and
// RepairDB's complaints that this answers dropped from `losses`.
void put_back_logs(rocks_instance& src, rocks_instance& dst, const std::vector<std::string>& cfs,
                   rebuild_leftovers& left, store_repair_report& report, std::vector<std::string>& losses) {
  std::map<uint32_t, std::string>& numbers = left.numbers;
  const std::vector<std::string>& placed = left.placed;
  // The numbers RepairDB kept (from its tables) must be the MANIFEST's, or the
  // MANIFEST's list is not the store's numbering: then only RepairDB's are used.
  bool consistent = true;
  for (auto* h : src.handles) {
    if (std::find(placed.begin(), placed.end(), h->GetName()) == placed.end()) continue;
    auto it = numbers.find(h->GetID());
    consistent = consistent && it != numbers.end() && it->second == h->GetName();
  }
  if (!consistent) numbers.clear();
  for (auto* h : src.handles)
    if (std::find(placed.begin(), placed.end(), h->GetName()) != placed.end()) numbers[h->GetID()] = h->GetName();
  // Every whole record of the logs, in order, over what was copied: for a column family
  // RepairDB placed this writes what it wrote already (a key's last write in the logs is
  // its newest), for one it could not, it puts the records back.
  replayer put_back(dst, cfs, numbers);
  rocksdb::WriteOptions plain;
  for (auto& [number, log] : left.logs) {
    for (auto& b : log.batches) {
      rocksdb::WriteBatch batch(b.rep);
      if (!batch.Iterate(&put_back).ok()) continue;
      if (put_back.batch.Count() > 0) dst.db->Write(plain, &put_back.batch);
      put_back.batch.Clear();
      if (b.count > 0) report.reached = std::max<uint64_t>(report.reached, b.sequence + b.count - 1);
    }
  }
  for (const auto& [name, n] : put_back.applied) {
    if (std::find(placed.begin(), placed.end(), name) != placed.end()) continue;
    auto line = std::find_if(report.recovered.begin(), report.recovered.end(),
                             [&](const std::string& l) { return l.rfind(name + ": ", 0) == 0; });
    if (line == report.recovered.end()) continue;
    *line += ", and " + std::to_string(n) +
             " writes put back from the write-ahead logs (the column family had no table left, so "
             "RocksDB's repair could not place them)";
  }
  for (const auto& [cf, n] : put_back.unplaced)
    report.not_recovered.push_back(std::to_string(n) + " writes in the write-ahead logs to column family number " +
                                   std::to_string(cf) + ", whose name is not known, were not recovered");
  // RepairDB's complaints about records it could not place are answered by now.
  if (put_back.unplaced.empty())
    losses.erase(std::remove_if(losses.begin(), losses.end(),
                                [](const std::string& l) {
                                  return l.find("Invalid column family specified in write batch") != std::string::npos;
                                }),
                 losses.end());
}

// What could not be recovered, in the report: the salvage's losses (with the scratch
// copy's name as the kept store's), and acknowledged writes that were not reached.
void report_losses(const std::vector<std::string>& losses, const fs::path& scratch, const std::string& wals_before,
                   store_repair_report& report) {
  for (auto& l : losses) report.not_recovered.push_back(l);
  // RocksDB names the scratch copy; the same files are in the kept store.
  for (auto& l : report.not_recovered) {
    for (auto at = l.find(scratch.string()); at != std::string::npos; at = l.find(scratch.string())) {
      l.replace(at, scratch.string().size(), report.kept.string());
    }
  }
  if (report.acked_before > report.reached) {
    report.not_recovered.push_back(
        "writes " + std::to_string(report.reached + 1) + " to " + std::to_string(report.acked_before) +
        " were acknowledged and are not in what could be read (the write-ahead logs were: " + wals_before + ")");
  }
}

// The repair's marks in the new store (when, from where, the numbers handed out
// before), synced and flushed.
rocksdb::Status mark_repaired(rocks_instance& dst, const store_repair_report& report) {
  rocksdb::WriteBatch meta;
  meta.Put(dst.db->DefaultColumnFamily(), "meta/repaired_unix_ms",
           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count()));
  meta.Put(dst.db->DefaultColumnFamily(), "meta/repaired_from", report.kept.string());
  // Numbers handed out before the repair stay used: ids derived from a counter stay
  // above this (docs/store.md, "Repair").
  meta.Put(dst.db->DefaultColumnFamily(), "meta/acked_before_repair",
           std::to_string(std::max(report.acked_before, report.reached)));
  rocksdb::WriteOptions synced;
  synced.sync = true;
  auto w = dst.db->Write(synced, &meta);
  auto f = dst.db->Flush(rocksdb::FlushOptions());
  return w.ok() ? f : w;
}

// Swap: the damaged store is kept whole, the new one takes its place.
status swap_in(const fs::path& dir, const fs::path& rebuilt, const store_repair_report& report,
               const std::string& where) {
  std::error_code ec;
  fs::rename(dir, report.kept, ec);
  if (ec)
    return error{where + ": cannot move it to " + report.kept.string() + ": " + ec.message() +
                 " (the repaired store is in " + rebuilt.string() + ")"};
  fs::rename(rebuilt, dir, ec);
  if (ec)
    return error{where + ": cannot move " + rebuilt.string() + " into its place: " + ec.message() +
                 " (the damaged store is in " + report.kept.string() + ")"};
  return {};
}

}  // namespace

result<store_repair_report> repair_store(const fs::path& dir) {
  const std::string where = "memory store " + dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || (!fs::exists(dir / "CURRENT", ec) && sst_files(dir).empty())) {
    return error{where + ": no store there to repair"};
  }
  auto lock = take_writer_lock(dir);
  if (!lock) return error{where + " is open for writing by another process (a daemon?); stop it first"};
  struct unlock {
    writer_lock l;
    ~unlock() { release_writer_lock(l); }
  } unlock_at_end{*lock};

  store_repair_report report;
  const std::string wals_before = wal_listing(dir);
  const watermark_read wm = read_watermark(dir);
  read_acked(wm, report);

  const std::string when = stamp();
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const std::string base = dir.filename().string();
  const fs::path scratch = parent / (base + ".repair-scratch-" + when);
  const fs::path rebuilt = parent / (base + ".repaired-" + when);
  report.kept = parent / (base + ".damaged-" + when);
  for (const auto& p : {scratch, rebuilt, report.kept}) {
    if (fs::exists(p, ec)) return error{where + ": " + p.string() + " already exists; try again in a second"};
  }
  if (auto st = copy_to_scratch(dir, scratch, where); !st) return error{st.message()};

  auto logger = std::make_shared<store_logger>(fs::path());
  auto cfs = column_families_of(scratch);
  std::string look_failed;  // why the read-only look did not open
  const bool manifest_sound = manifest_is_sound(scratch, cfs, logger, wm, look_failed);
  rocks_instance src;
  rocksdb::Status s;
  const auto mark = logger->mark();  // what the salvage itself skips, from here on
  if (manifest_sound) {
    s = open_plain(scratch, cfs, rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords, false, logger, src);
  }
  bool repaired = false;
  rebuild_leftovers left;
  if (!manifest_sound || !s.ok()) {
    repaired = true;
    if (auto st = rebuild_manifest(scratch, cfs, logger, look_failed, where, report, left); !st)
      return error{st.message()};
    s = open_plain(scratch, cfs, rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords, false, logger, src);
  }
  if (!s.ok()) {
    fs::remove_all(scratch, ec);
    return error{where + ": the salvaged copy cannot be opened: " + s.ToString() + " (nothing was changed)"};
  }
  report.reached = src.db->GetLatestSequenceNumber();

  // A new store holding every record that could be read.
  rocks_instance dst;
  s = open_plain(rebuilt, cfs, rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords, false, nullptr, dst);
  if (!s.ok()) {
    src.close();
    fs::remove_all(scratch, ec);
    return error{where + ": cannot create " + rebuilt.string() + ": " + s.ToString()};
  }
  copy_records(src, cfs, dst, report);
  auto losses = losses_in(logger->warnings_since(mark));
  if (repaired) put_back_logs(src, dst, cfs, left, report, losses);
  report_losses(losses, scratch, wals_before, report);
  const rocksdb::Status written = mark_repaired(dst, report);
  src.close();
  dst.close();
  if (!written.ok()) {
    fs::remove_all(scratch, ec);
    return error{where + ": writing " + rebuilt.string() + " failed: " + written.ToString() +
                 " (the damaged store was not touched; " + rebuilt.string() + " is incomplete)"};
  }
  fs::remove_all(scratch, ec);

  if (auto st = swap_in(dir, rebuilt, report, where); !st) return error{st.message()};
  auto check = store::open(dir);
  if (!check) return error{where + ": the repaired store does not open: " + check.message()};
  report.complete = report.not_recovered.empty();
  return report;
}

}  // namespace ks
