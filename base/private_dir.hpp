#pragma once
// A private scratch directory: created with mkdtemp (mode 0700, so no other user can
// read what a task puts there) under the system's temporary directory, and removed
// with everything in it when the object goes away, on every path out of a function.

#include <filesystem>
#include <string>

#include "base/result.hpp"

namespace ks {

class private_dir {
 public:
  // "/tmp/PREFIX-XXXXXX"; an error names the directory that could not be made.
  static result<private_dir> create(const std::string& prefix);
  private_dir(private_dir&& other) noexcept;
  private_dir& operator=(private_dir&& other) noexcept;
  private_dir(const private_dir&) = delete;
  private_dir& operator=(const private_dir&) = delete;
  ~private_dir();

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit private_dir(std::filesystem::path p) : path_(std::move(p)) {}
  std::filesystem::path path_;
};

// Makes `dir` (mode 0700) the temporary directory of this process and its children
// (TMPDIR): every private_dir, a child's scratch and a worker's live under it. What a
// previous process left there (killed with -9 mid-export: a task's files) is removed
// first. The daemon and `run` put it beside their store (memory.path/scratch), whose
// lock keeps two processes from sharing it. Returns how many entries were swept.
result<int> use_scratch_root(const std::filesystem::path& dir);

}  // namespace ks
