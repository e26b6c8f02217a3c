#include "features/ptx_scanner.hpp"

#include <cstdlib>
#include <string>
#include <vector>

namespace ks::features {

namespace {

// Splits an instruction opcode "ld.global.nc.v4.f32" into its dot-separated parts.
std::vector<std::string_view> split_dots(std::string_view op) {
  std::vector<std::string_view> parts;
  size_t b = 0;
  for (size_t i = 0; i <= op.size(); ++i) {
    if (i == op.size() || op[i] == '.') {
      parts.push_back(op.substr(b, i - b));
      b = i + 1;
    }
  }
  return parts;
}

int type_bits(std::string_view t) {
  if (t.size() < 2) return 0;
  char c = t[0];
  if (c != 'f' && c != 'b' && c != 'u' && c != 's') return 0;
  int v = std::atoi(std::string(t.substr(1)).c_str());
  return v == 8 || v == 16 || v == 32 || v == 64 || v == 128 ? v : 0;
}

// For a ld/st opcode: the vector lanes (1 when scalar) and the bits per lane.
void vector_shape(const std::vector<std::string_view>& parts, int& lanes, int& bits) {
  lanes = 1;
  bits = 0;
  for (auto p : parts) {
    if (p == "v2")
      lanes = 2;
    else if (p == "v4")
      lanes = 4;
    else if (p == "v8")
      lanes = 8;
    else if (int b = type_bits(p))
      bits = b;
  }
}

bool has_part(const std::vector<std::string_view>& parts, std::string_view w) {
  for (auto p : parts)
    if (p == w) return true;
  return false;
}

}  // namespace

ptx_stats scan_ptx(std::string_view ptx) {
  ptx_stats s;
  size_t pos = 0;
  bool in_comment = false;
  while (pos < ptx.size()) {
    size_t eol = ptx.find('\n', pos);
    if (eol == std::string_view::npos) eol = ptx.size();
    std::string_view line = ptx.substr(pos, eol - pos);
    pos = eol + 1;
    // Strip comments.
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      if (in_comment) {
        if (line[i] == '*' && i + 1 < line.size() && line[i + 1] == '/') {
          in_comment = false;
          ++i;
        }
        continue;
      }
      if (line[i] == '/' && i + 1 < line.size() && line[i + 1] == '/') break;
      if (line[i] == '/' && i + 1 < line.size() && line[i + 1] == '*') {
        in_comment = true;
        ++i;
        continue;
      }
      text += line[i];
    }
    size_t a = text.find_first_not_of(" \t\r");
    if (a == std::string::npos) continue;
    std::string_view body = std::string_view(text).substr(a);
    // Predicated instructions: "@%p1 bra ...", "@!%p2 st.global ...".
    if (!body.empty() && body[0] == '@') {
      size_t sp = body.find_first_of(" \t");
      if (sp == std::string_view::npos) continue;
      body = body.substr(sp);
      size_t b2 = body.find_first_not_of(" \t");
      if (b2 == std::string_view::npos) continue;
      body = body.substr(b2);
    }
    if (body.rfind(".version", 0) == 0) s.present = true;
    if (body.find(".entry") != std::string_view::npos &&
        (body.rfind(".entry", 0) == 0 || body.rfind(".visible", 0) == 0 || body.rfind(".weak", 0) == 0)) {
      ++s.entries;
      s.present = true;
      continue;
    }
    if (body[0] == '.') {
      // Directives and declarations.
      if (body.find(".shared") != std::string_view::npos &&
          (body.rfind(".shared", 0) == 0 || body.rfind(".extern", 0) == 0))
        s.declares_shared = true;
      if (body.rfind(".local", 0) == 0) {
        size_t d = body.find("__local_depot");
        if (d != std::string_view::npos) {
          size_t lb = body.find('[', d);
          if (lb != std::string_view::npos) {
            long long bytes = std::atoll(std::string(body.substr(lb + 1)).c_str());
            if (bytes > s.max_local_depot) s.max_local_depot = bytes;
          }
        }
      }
      continue;
    }
    // The opcode: up to the first blank.
    size_t sp = body.find_first_of(" \t;");
    std::string_view op = body.substr(0, sp);
    if (op.empty() || !(op[0] >= 'a' && op[0] <= 'z')) continue;
    auto parts = split_dots(op);
    std::string_view head = parts[0];
    if (head == "ld" || head == "st" || head == "ldu") {
      bool global = has_part(parts, "global");
      bool shared = has_part(parts, "shared");
      bool local = has_part(parts, "local");
      if (global) {
        int lanes = 1, bits = 0;
        vector_shape(parts, lanes, bits);
        bool wide = lanes > 1 && lanes * bits >= 64;
        if (head == "st") {
          ++s.global_stores;
          if (wide) ++s.vector_global_stores;
        } else {
          ++s.global_loads;
          if (wide) ++s.vector_global_loads;
        }
        if (wide && lanes > s.max_vector_lanes) s.max_vector_lanes = lanes;
      }
      if (shared) ++s.shared_accesses;
      if (local) ++s.local_accesses;
      continue;
    }
    if (head == "bar" || head == "barrier") {
      if (has_part(parts, "sync") || has_part(parts, "red") || parts.size() == 1 ||
          (parts.size() >= 2 && parts[1] == "cta"))
        ++s.barriers;
      continue;
    }
    if (head == "shfl") {
      ++s.shuffles;
      continue;
    }
    if (head == "atom" || head == "red") {
      ++s.atomics;
      if (has_part(parts, "shared")) ++s.shared_accesses;
      continue;
    }
    if (head == "mma" || head == "wmma" || head == "wgmma") {
      ++s.tensor_ops;
      continue;
    }
    if (head == "ex2" || head == "lg2" || head == "sin" || head == "cos" || head == "tanh" || head == "sqrt" ||
        head == "rsqrt" || head == "rcp") {
      if (head != "rcp") ++s.transcendental_ops;
      bool approx = has_part(parts, "approx");
      if (approx && head != "ex2" && head != "rcp") ++s.approx_math;
      continue;
    }
    if (head == "div" && (has_part(parts, "approx") || has_part(parts, "full"))) {
      ++s.approx_math;
      continue;
    }
  }
  return s;
}

}  // namespace ks::features
