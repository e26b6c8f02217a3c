#include "llm/module_code.hpp"

#include <cstdint>
#include <optional>

namespace ks {

namespace {

// Little-endian reads within the bytes; nullopt past the end.
struct reader {
  std::string_view b;
  std::optional<uint64_t> le(size_t at, int n) const {
    if (at > b.size() || b.size() - at < static_cast<size_t>(n)) return std::nullopt;
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
    return v;
  }
};

constexpr uint32_t kEocd = 0x06054b50, kZip64Locator = 0x07064b50, kZip64Eocd = 0x06064b50, kCentral = 0x02014b50,
                   kLocal = 0x04034b50;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "ARCHIVE/code/__torch__....py" (or "code/__torch__....py").
bool is_code(const std::string& name) {
  const size_t at = name.find("code/__torch__");
  return at != std::string::npos && (at == 0 || name[at - 1] == '/') && ends_with(name, ".py");
}

}  // namespace

result<std::vector<module_code_file>> module_code(std::string_view bytes) {
  const reader r{bytes};
  auto bad = [](const std::string& why) { return error{"the module is not a readable zip archive: " + why}; };
  if (bytes.size() < 22 || bytes.compare(0, 4, "PK\x03\x04") != 0) return bad("no zip signature");
  // The end-of-central-directory record: within the last 64 KiB + 22 bytes.
  size_t eocd = std::string::npos;
  const size_t lowest = bytes.size() > 65557 ? bytes.size() - 65557 : 0;
  for (size_t i = bytes.size() - 22 + 1; i-- > lowest;)
    if (r.le(i, 4) == kEocd) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) return bad("no end-of-central-directory record");
  uint64_t entries = *r.le(eocd + 10, 2);
  uint64_t cd_offset = *r.le(eocd + 16, 4);
  if (entries == 0xFFFF || cd_offset == 0xFFFFFFFF) {  // zip64: the locator sits just before
    if (eocd < 20 || r.le(eocd - 20, 4) != kZip64Locator) return bad("a zip64 archive without its locator");
    const uint64_t z = *r.le(eocd - 12, 8);
    if (r.le(z, 4) != kZip64Eocd) return bad("the zip64 end record is not where its locator says");
    auto e = r.le(z + 32, 8), o = r.le(z + 48, 8);
    if (!e || !o) return bad("a truncated zip64 end record");
    entries = *e;
    cd_offset = *o;
  }
  std::vector<module_code_file> out;
  size_t at = cd_offset;
  for (uint64_t n = 0; n < entries; ++n) {
    if (r.le(at, 4) != kCentral) return bad("central directory entry " + std::to_string(n) + " is malformed");
    auto method = r.le(at + 10, 2), csize = r.le(at + 20, 4), usize = r.le(at + 24, 4), name_len = r.le(at + 28, 2),
         extra_len = r.le(at + 30, 2), comment_len = r.le(at + 32, 2), local = r.le(at + 42, 4);
    if (!method || !csize || !usize || !name_len || !extra_len || !comment_len || !local)
      return bad("a truncated central directory");
    if (at + 46 + *name_len > bytes.size()) return bad("a name past the end of the archive");
    const std::string name(bytes.substr(at + 46, *name_len));
    uint64_t size = *usize, stored = *csize, offset = *local;
    // Zip64 sizes and offset live in the extra field (id 1), in this order, for the
    // fields that hold 0xFFFFFFFF.
    for (size_t x = at + 46 + *name_len, end = x + *extra_len; x + 4 <= end;) {
      auto id = r.le(x, 2), len = r.le(x + 2, 2);
      if (!id || !len) break;
      if (*id == 1) {
        size_t f = x + 4;
        auto take = [&](uint64_t& v) {
          if (v != 0xFFFFFFFF) return;
          if (auto w = r.le(f, 8)) v = *w;
          f += 8;
        };
        take(size);
        take(stored);
        take(offset);
      }
      x += 4 + *len;
    }
    at += 46 + *name_len + *extra_len + *comment_len;
    if (!is_code(name) || *method != 0) continue;
    if (r.le(offset, 4) != kLocal) return bad("the local header of " + name + " is not where the directory says");
    auto lname = r.le(offset + 26, 2), lextra = r.le(offset + 28, 2);
    if (!lname || !lextra) return bad("a truncated local header for " + name);
    const uint64_t data = offset + 30 + *lname + *lextra;
    if (data > bytes.size() || bytes.size() - data < size || stored != size)
      return bad("the data of " + name + " runs past the end of the archive");
    out.push_back({name, std::string(bytes.substr(data, size))});
  }
  return out;
}

}  // namespace ks
