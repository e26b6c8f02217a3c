#include "store/ack_watermark.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace ks::store_detail {

namespace fs = std::filesystem;

namespace {

constexpr size_t block_size = 256;
constexpr const char* magic = "kernelskill-watermark 1";

// FNV-1a, 64 bits: enough to tell a damaged block from a written one.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string body(const watermark& w) {
  return std::string(magic) + "\nacked_seq " + std::to_string(w.acked_seq) + "\nmanifest " +
         (w.manifest.empty() ? "-" : w.manifest) + " " + std::to_string(w.manifest_size) + " " +
         hex16(w.manifest_hash) + "\n";
}

template <class T>
bool parse_uint(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

void sync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string encode_watermark(const watermark& w) {
  std::string b = body(w);
  std::string text = b + "check " + hex16(fnv1a(b)) + "\n";
  // Pad to the block so that a rewrite always covers the whole previous content.
  if (text.size() < block_size) text += std::string(block_size - text.size() - 1, ' ') + "\n";
  return text;
}

result<std::optional<watermark>> read_watermark(const fs::path& dir) {
  const fs::path file = dir / watermark_name;
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::optional<watermark>();
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  auto damaged = [&](const std::string& why) -> result<std::optional<watermark>> {
    return error{file.string() + " is damaged (" + why + ")"};
  };
  if (!in && !in.eof()) return damaged("cannot be read");
  auto check_at = text.find("check ");
  if (text.rfind(magic, 0) != 0 || check_at == std::string::npos) return damaged("not a watermark block");
  const std::string b = text.substr(0, check_at);
  std::string_view stored = std::string_view(text).substr(check_at + 6, 16);
  if (stored != hex16(fnv1a(b))) return damaged("its checksum does not match");
  watermark w;
  std::istringstream lines(b);
  std::string line;
  std::getline(lines, line);  // magic
  std::string key;
  if (!(lines >> key) || key != "acked_seq") return damaged("no acked_seq");
  std::string seq;
  lines >> seq;
  if (!parse_uint(seq, w.acked_seq)) return damaged("acked_seq is not a number");
  std::string size, hash;
  if (!(lines >> key) || key != "manifest" || !(lines >> w.manifest >> size >> hash) ||
      !parse_uint(size, w.manifest_size) || hash.size() != 16) {
    return damaged("no manifest line");
  }
  auto parsed = std::from_chars(hash.data(), hash.data() + hash.size(), w.manifest_hash, 16);
  if (parsed.ec != std::errc() || parsed.ptr != hash.data() + hash.size()) {
    return damaged("the manifest hash is not hex");
  }
  if (w.manifest == "-") w.manifest.clear();
  return std::optional<watermark>(std::move(w));
}

result<std::unique_ptr<watermark_file>> watermark_file::create(const fs::path& dir, const watermark& initial) {
  const fs::path file = dir / watermark_name;
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return error{file.string() + ": cannot open: " + std::strerror(errno)};
  std::unique_ptr<watermark_file> w(new watermark_file(fd, initial));
  {
    std::lock_guard lock(w->mu_);
    w->write_locked();
  }
  if (w->unwritten_ || ::fdatasync(fd) != 0) {
    return error{file.string() + ": cannot write: " + std::strerror(errno)};
  }
  sync_dir(dir);
  return w;
}

watermark_file::~watermark_file() {
  sync();
  ::close(fd_);
}

void watermark_file::write_locked() {
  const std::string text = encode_watermark(w_);
  // A failed write (a full disk) leaves the previous, lower mark: the check is weaker
  // until the next write succeeds, and never wrong.
  unwritten_ = ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size());
  if (!unwritten_) unsynced_ = true;
}

void watermark_file::advance(uint64_t seq) {
  std::lock_guard lock(mu_);
  if (seq <= w_.acked_seq) return;
  w_.acked_seq = seq;
  write_locked();
}

void watermark_file::set_manifest(const std::string& name, uint64_t size, uint64_t hash) {
  std::lock_guard lock(mu_);
  if (w_.manifest == name && w_.manifest_size == size && w_.manifest_hash == hash) return;
  w_.manifest = name;
  w_.manifest_size = size;
  w_.manifest_hash = hash;
  write_locked();
}

std::optional<uint64_t> hash_prefix(const fs::path& file, uint64_t size) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes(size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size) return std::nullopt;
  return fnv1a(bytes);
}

void watermark_file::sync() {
  std::lock_guard lock(mu_);
  if (unwritten_) write_locked();
  if (!unsynced_) return;
  if (::fdatasync(fd_) == 0) unsynced_ = false;
}

watermark watermark_file::current() const {
  std::lock_guard lock(mu_);
  return w_;
}

}  // namespace ks::store_detail
