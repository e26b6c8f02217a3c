#include "store/rocks_support.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace ks::store_detail {

namespace fs = std::filesystem;

namespace {

// A LOG above this is rotated: RocksDB's periodic statistics make it grow without end.
constexpr uint64_t max_log_bytes = 16ull << 20;
// Rotated logs kept.
constexpr size_t kept_old_logs = 4;
// Warnings kept for error messages.
constexpr size_t kept_warnings = 64;

uint64_t now_micros() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

std::string format_line(const char* format, va_list ap) {
  char buf[1024];
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(buf, sizeof buf, format, copy);
  va_end(copy);
  if (n < 0) return "(unformattable log line)";
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_copy(copy, ap);
  std::vsnprintf(big.data(), big.size(), format, copy);
  va_end(copy);
  big.resize(static_cast<size_t>(n));
  return big;
}

const char* level_name(rocksdb::InfoLogLevel level) {
  switch (level) {
    case rocksdb::InfoLogLevel::DEBUG_LEVEL:
      return "[DEBUG] ";
    case rocksdb::InfoLogLevel::WARN_LEVEL:
      return "[WARN] ";
    case rocksdb::InfoLogLevel::ERROR_LEVEL:
      return "[ERROR] ";
    case rocksdb::InfoLogLevel::FATAL_LEVEL:
      return "[FATAL] ";
    case rocksdb::InfoLogLevel::HEADER_LEVEL:
      return "";
    default:
      return "";
  }
}

int open_log(const fs::path& file) { return ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644); }

}  // namespace

store_logger::store_logger(const fs::path& file) : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL), file_(file) {
  if (file_.empty()) return;
  // Appended to, not rotated per open: an open that refuses a damaged store changes no
  // file but this one, however often it is retried.
  fd_ = open_log(file_);
  std::error_code ec;
  written_ = fs::exists(file_, ec) ? fs::file_size(file_, ec) : 0;
}

store_logger::~store_logger() {
  if (fd_ >= 0) ::close(fd_);
}

void store_logger::write_line(const std::string& line) {
  if (fd_ < 0) return;
  if (written_ > max_log_bytes) {
    ::close(fd_);
    std::error_code ec;
    fs::rename(file_, file_.string() + ".old." + std::to_string(now_micros()), ec);
    // Keep the newest few old logs (RocksDB trims them too, but only on a writable open).
    std::vector<fs::path> old;
    for (const auto& e : fs::directory_iterator(file_.parent_path(), ec)) {
      if (e.path().filename().string().rfind("LOG.old.", 0) == 0) old.push_back(e.path());
    }
    std::sort(old.begin(), old.end());
    for (size_t i = 0; i + kept_old_logs < old.size(); ++i) fs::remove(old[i], ec);
    fd_ = open_log(file_);
    written_ = 0;
    if (fd_ < 0) return;
  }
  // A full disk makes this fail: the line is dropped, nothing else happens.
  ssize_t n = ::write(fd_, line.data(), line.size());
  if (n > 0) written_ += static_cast<uint64_t>(n);
}

void store_logger::Logv(const char* format, va_list ap) { Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap); }

void store_logger::Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) {
  if (level < GetInfoLogLevel()) return;
  std::string text = format_line(format, ap);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::lock_guard lock(mu_);
  if (level >= rocksdb::InfoLogLevel::WARN_LEVEL && level != rocksdb::InfoLogLevel::HEADER_LEVEL) {
    warnings_.push_back(text);
    ++warnings_total_;
    if (warnings_.size() > kept_warnings) warnings_.pop_front();
  }
  if (fd_ < 0) return;
  char stamp[64];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(stamp, sizeof stamp, "%Y/%m/%d-%H:%M:%S ", &tm);
  write_line(std::string(stamp) + level_name(level) + text + "\n");
}

uint64_t store_logger::mark() const {
  std::lock_guard lock(mu_);
  return warnings_total_;
}

std::vector<std::string> store_logger::warnings_since(uint64_t mark) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  uint64_t first_kept = warnings_total_ - warnings_.size();
  for (size_t i = 0; i < warnings_.size(); ++i) {
    if (first_kept + i >= mark) out.push_back(warnings_[i]);
  }
  return out;
}

rocksdb::ColumnFamilyOptions rocks_cf_options() {
  rocksdb::ColumnFamilyOptions o;
  // A store holds small JSON records; smaller memtables keep an idle daemon lean.
  o.write_buffer_size = 16 << 20;
  // Read every table back after a flush or compaction writes it: a bad write is found
  // while its source (memtable, input tables) still exists, not at the next start.
  o.paranoid_file_checks = true;
  return o;
}

rocksdb::Options rocks_options(bool create, std::shared_ptr<rocksdb::Logger> logger,
                               rocksdb::WALRecoveryMode wal_mode) {
  rocksdb::Options o(rocksdb::DBOptions(), rocks_cf_options());
  o.create_if_missing = create;
  o.create_missing_column_families = create;
  // RocksDB's own LOG files: a few are enough to diagnose a problem.
  o.keep_log_file_num = 4;
  o.info_log = std::move(logger);
  // Damage is an error, never something to work around: check every file RocksDB opens
  // (sizes against the MANIFEST, checksums of what it reads) ...
  o.paranoid_checks = true;
  // ... and never "recover" to an older consistent state by dropping what the MANIFEST
  // lists but cannot be found (best-efforts recovery also ignores the write-ahead log).
  o.best_efforts_recovery = false;
  // How a damaged write-ahead log is treated (store.cpp says which mode when, and why).
  o.wal_recovery_mode = wal_mode;
  // RocksDB reserves 4 MiB for every new MANIFEST; a store's MANIFEST holds a few KiB.
  o.manifest_preallocation_size = 256 << 10;
  return o;
}

bool is_no_space(const rocksdb::Status& s) {
  if (s.ok()) return false;
  if (s.IsNoSpace()) return true;
  const std::string text = s.ToString();
  return text.find(std::strerror(ENOSPC)) != std::string::npos ||
         text.find(std::strerror(EDQUOT)) != std::string::npos || text.find(std::strerror(EFBIG)) != std::string::npos;
}

uint64_t free_bytes(const fs::path& dir) {
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return 0;
  return static_cast<uint64_t>(v.f_bavail) * static_cast<uint64_t>(v.f_frsize);
}

bool is_wal_name(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0 &&
         std::isdigit(static_cast<unsigned char>(name[0]));
}

bool is_sst_name(const std::string& name) {
  return name.size() > 4 &&
         (name.compare(name.size() - 4, 4, ".sst") == 0 || name.compare(name.size() - 4, 4, ".ldb") == 0) &&
         std::isdigit(static_cast<unsigned char>(name[0]));
}

bool is_rocksdb_file_name(const std::string& name) {
  return is_wal_name(name) || is_sst_name(name) || name.rfind("MANIFEST-", 0) == 0 || name.rfind("OPTIONS-", 0) == 0 ||
         name == "CURRENT" || name == "IDENTITY";
}

uint64_t wal_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!is_wal_name(e.path().filename().string())) continue;
    auto n = fs::file_size(e.path(), ec);
    if (!ec) total += n;
  }
  return total;
}

}  // namespace ks::store_detail

namespace ks::store_detail {

uint64_t bytes_to_open(const fs::path& dir) { return wal_bytes(dir) + (1ull << 20); }

std::string wal_listing(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (is_wal_name(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) {
    auto size = fs::file_size(dir / n, ec);
    out += (out.empty() ? "" : ", ") + n + " (" + std::to_string(ec ? 0 : size) + " bytes)";
  }
  return out.empty() ? "none" : out;
}

}  // namespace ks::store_detail
