#pragma once
// An input stream over bytes held elsewhere, read in place. LibTorch reads a saved
// module from a std::istream, and std::istringstream copies its string first: a
// network's weights are gigabytes (level 3's 2_ShallowWideMLP carries 8.6 GB), so each
// such copy was another 8.6 GB at once. The bytes must outlive the stream.
// LibTorch-free header.

#include <istream>
#include <streambuf>
#include <string_view>

namespace ks {

class bytes_istream : public std::istream {
 public:
  explicit bytes_istream(std::string_view bytes) : std::istream(nullptr), buf_(bytes) { rdbuf(&buf_); }

 private:
  // Reads and seeks (PyTorch's zip reader seeks to the end first, then to each record).
  struct view_buf : std::streambuf {
    explicit view_buf(std::string_view s) {
      char* p = const_cast<char*>(s.data());  // only read: get area, no put area
      setg(p, p, p + s.size());
    }
    pos_type seekoff(off_type off, std::ios_base::seekdir dir, std::ios_base::openmode) override {
      char* at = dir == std::ios_base::beg ? eback() + off : dir == std::ios_base::cur ? gptr() + off : egptr() + off;
      if (at < eback() || at > egptr()) return pos_type(off_type(-1));
      setg(eback(), at, egptr());
      return pos_type(at - eback());
    }
    pos_type seekpos(pos_type pos, std::ios_base::openmode mode) override {
      return seekoff(off_type(pos), std::ios_base::beg, mode);
    }
  };
  view_buf buf_;
};

}  // namespace ks
