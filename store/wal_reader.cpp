#include "store/wal_reader.hpp"

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ks::store_detail {

namespace {

// RocksDB's log format (db/log_format.h): 32 KiB blocks of records, each a header —
// masked crc32c (4 bytes), payload length (2), type (1), and for the recyclable types
// the log's number (4) — then the payload. A logical record (a write batch) is one
// full record or a first, middles and a last; a block's tail too short for a header is
// zeros.
constexpr size_t kBlock = 32768;
constexpr size_t kHeader = 7, kRecyclableHeader = 11;
enum : uint8_t {
  kZero = 0,
  kFull = 1,
  kFirst = 2,
  kMiddle = 3,
  kLast = 4,
  kRecyclableFull = 5,
  kRecyclableLast = 8,
  kSetCompressionType = 9
};

// crc32c (Castagnoli), as RocksDB's util/crc32c.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> out{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      out[i] = c;
    }
    return out;
  }();
  return t;
}

uint32_t crc32c(uint32_t crc, const char* data, size_t n) {
  const auto& t = crc_table();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = t[(crc ^ static_cast<uint8_t>(data[i])) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// RocksDB stores crc32c masked (a crc of data holding crcs is weak otherwise).
uint32_t unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

uint32_t fixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian, as RocksDB writes on every platform it runs on
  return v;
}

uint64_t fixed64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

wal_contents read_wal(const std::filesystem::path& file, uint64_t log_number) {
  wal_contents out;
  const std::string name = file.filename().string();
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    out.problems.push_back(name + ": cannot be read");
    return out;
  }
  std::string pending;  // a logical record being put together from its fragments
  bool in_fragments = false;
  auto take = [&](std::string rep) {
    if (rep.size() < 12) {
      out.problems.push_back(name + ": a record of " + std::to_string(rep.size()) + " bytes is not a write batch");
      return;
    }
    out.batches.push_back({fixed64(rep.data()), fixed32(rep.data() + 8), std::move(rep)});
  };
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t block_end = std::min(bytes.size(), (pos / kBlock + 1) * kBlock);
    if (block_end - pos < kHeader) {  // the block's zero tail
      pos = block_end;
      continue;
    }
    const char* h = bytes.data() + pos;
    const uint8_t type = static_cast<uint8_t>(h[6]);
    const size_t length = static_cast<uint8_t>(h[4]) | (static_cast<size_t>(static_cast<uint8_t>(h[5])) << 8);
    const bool recyclable = type >= kRecyclableFull && type <= kRecyclableLast;
    const size_t header = recyclable ? kRecyclableHeader : kHeader;
    auto skip_block = [&](const std::string& why) {
      out.problems.push_back(name + ": bytes " + std::to_string(pos) + "-" + std::to_string(block_end - 1) +
                             " skipped: " + why);
      pending.clear();
      in_fragments = false;
      pos = block_end;
    };
    if (type == kZero && length == 0) {  // preallocated space, never written
      pos = block_end;
      continue;
    }
    if (pos + header + length > block_end) {
      // Cut: at the end of the file, an incomplete last write (never acknowledged).
      if (pos + header + length > bytes.size()) {
        out.problems.push_back(name + ": the last " + std::to_string(bytes.size() - pos) +
                               " bytes are an incomplete record");
        break;
      }
      skip_block("a record longer than its block");
      continue;
    }
    uint32_t crc = crc32c(0, h + 6, 1 + (recyclable ? 4 : 0));
    crc = crc32c(crc, h + header, length);
    if (unmask(fixed32(h)) != crc) {
      skip_block("checksum mismatch");
      continue;
    }
    if (recyclable && fixed32(h + 7) != static_cast<uint32_t>(log_number)) break;  // an older log's bytes
    const std::string payload(h + header, length);
    pos += header + length;
    const uint8_t kind = recyclable ? static_cast<uint8_t>(type - (kRecyclableFull - kFull)) : type;
    switch (kind) {
      case kFull:
        if (in_fragments) out.problems.push_back(name + ": a record without its last part was dropped");
        in_fragments = false;
        pending.clear();
        take(payload);
        break;
      case kFirst:
        if (in_fragments) out.problems.push_back(name + ": a record without its last part was dropped");
        pending = payload;
        in_fragments = true;
        break;
      case kMiddle:
        if (in_fragments) pending += payload;
        break;
      case kLast:
        if (in_fragments) {
          pending += payload;
          take(std::move(pending));
          pending.clear();
        }
        in_fragments = false;
        break;
      case kSetCompressionType:
        if (!payload.empty() && payload[0] != 0) {
          out.problems.push_back(name + ": the log is compressed; its records were not read");
          return out;
        }
        break;
      default:
        out.problems.push_back(name + ": a record of unknown type " + std::to_string(type) + " was skipped");
        break;
    }
  }
  return out;
}

}  // namespace ks::store_detail
