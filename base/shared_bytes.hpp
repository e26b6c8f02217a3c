#pragma once
// Read-only bytes that every copy shares: a saved module's weights (up to gigabytes)
// travel in every request that carries their task (protocol/requests.hpp), and a copy
// of the struct must not copy them. Copies share one buffer (or one mapping of the
// file); nothing ever writes through it, so sharing across threads is safe.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace ks {

class shared_bytes {
 public:
  shared_bytes() = default;
  // Takes the string's bytes (explicit: a std::string compares with == directly).
  explicit shared_bytes(std::string bytes);
  shared_bytes& operator=(std::string bytes) { return *this = shared_bytes(std::move(bytes)); }

  // The file's contents, mapped read-only rather than read: pages come from the file
  // as they are used, and the kernel can drop and re-read them, so a run holding many
  // large modules keeps none of them in its own memory. The file must not be rewritten
  // in place while it is mapped (replace it by rename, as kernelskill's writers do):
  // reading a page cut off by truncation raises SIGBUS. An empty file maps to no bytes.
  static result<shared_bytes> map_file(const std::filesystem::path& path);

  std::string_view view() const { return view_; }
  operator std::string_view() const { return view_; }
  const char* data() const { return view_.data(); }
  size_t size() const { return view_.size(); }
  bool empty() const { return view_.empty(); }
  std::string str() const { return std::string(view_); }  // a copy
  void clear() { *this = shared_bytes(); }
  // Bytes [offset, offset + n) (clipped to the end), sharing this buffer: a part of a
  // module to send (protocol/module_parts.hpp). Its sha256_hex() is its own.
  shared_bytes slice(size_t offset, size_t n) const;
  // base/content_hash.hpp's sha256_hex of the bytes, computed once for all copies (a
  // review keys two caches by a module that can be 8 GB).
  const std::string& sha256_hex() const;

  friend bool operator==(const shared_bytes& a, const shared_bytes& b) { return a.view_ == b.view_; }
  friend bool operator==(const shared_bytes& a, std::string_view b) { return a.view_ == b; }

 private:
  struct state;
  std::shared_ptr<state> state_;  // owns what view_ points into; null when empty
  std::string_view view_;
};

}  // namespace ks
