#include "base/private_dir.hpp"

#include <cerrno>
#include <cstring>
#include <vector>

#include <stdlib.h>

namespace ks {

result<private_dir> private_dir::create(const std::string& prefix) {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string tmpl = (base / (prefix + "-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    return error{"cannot create a private directory in " + base.string() + ": " + std::strerror(errno)};
  return private_dir(std::filesystem::path(buf.data()));
}

private_dir::private_dir(private_dir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }

private_dir& private_dir::operator=(private_dir&& other) noexcept {
  if (this != &other) {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

result<int> use_scratch_root(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error{"cannot create the scratch directory " + dir.string() + ": " + ec.message()};
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  int swept = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code rm;
    std::filesystem::remove_all(e.path(), rm);
    if (rm) return error{"cannot clear " + e.path().string() + " from the scratch directory: " + rm.message()};
    ++swept;
  }
  if (ec) return error{"cannot read the scratch directory " + dir.string() + ": " + ec.message()};
  ::setenv("TMPDIR", dir.c_str(), 1);
  return swept;
}

private_dir::~private_dir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace ks
