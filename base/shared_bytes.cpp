#include "base/shared_bytes.hpp"

#include "base/content_hash.hpp"

#include <cerrno>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ks {

// The bytes' owner (a string, or a mapping) and their digest once asked for.
struct shared_bytes::state {
  std::string owned;
  void* mapped = MAP_FAILED;
  size_t mapped_size = 0;
  std::shared_ptr<const state> parent;  // a slice's: the buffer it views into
  std::once_flag hashed;
  std::string digest;
  ~state() {
    if (mapped != MAP_FAILED) ::munmap(mapped, mapped_size);
  }
};

shared_bytes::shared_bytes(std::string bytes) {
  if (bytes.empty()) return;
  state_ = std::make_shared<state>();
  state_->owned = std::move(bytes);
  view_ = state_->owned;
}

shared_bytes shared_bytes::slice(size_t offset, size_t n) const {
  shared_bytes out;
  if (offset >= view_.size() || n == 0) return out;
  out.state_ = std::make_shared<state>();
  out.state_->parent = state_;
  out.view_ = view_.substr(offset, n);
  return out;
}

const std::string& shared_bytes::sha256_hex() const {
  static const std::string of_nothing = ks::sha256_hex("");
  if (!state_) return of_nothing;
  std::call_once(state_->hashed, [this] { state_->digest = ks::sha256_hex(view_); });
  return state_->digest;
}

result<shared_bytes> shared_bytes::map_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error{"cannot open " + path.string() + ": " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return error{"cannot stat " + path.string() + ": " + std::strerror(e)};
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return error{path.string() + " is not a regular file"};
  }
  shared_bytes out;
  if (st.st_size == 0) {
    ::close(fd);
    return out;
  }
  auto m = std::make_shared<state>();
  m->mapped_size = static_cast<size_t>(st.st_size);
  m->mapped = ::mmap(nullptr, m->mapped_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  ::close(fd);  // the mapping keeps the file open
  if (m->mapped == MAP_FAILED) return error{"cannot map " + path.string() + ": " + std::strerror(e)};
  out.view_ = std::string_view(static_cast<const char*>(m->mapped), m->mapped_size);
  out.state_ = std::move(m);
  return out;
}

}  // namespace ks
