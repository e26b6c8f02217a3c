#include "tests/support/store_fault.hpp"

#include "tests/support/line_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace ks::test {

namespace fs = std::filesystem;

namespace {

using child = ks::testing::line_child;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The store's data files and their bytes: everything but RocksDB's info LOG, our lock
// file and lost/ (where an open may keep a copy of a damaged log).
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.rfind("LOG", 0) == 0 || name == "KERNELSKILL-LOCK") continue;
    files[name] = read_file(e.path());
  }
  return files;
}

bool digits_then(const std::string& name, const char* ext) {
  return !name.empty() && std::isdigit(static_cast<unsigned char>(name[0])) && name.size() > 4 &&
         name.compare(name.size() - 4, 4, ext) == 0;
}

// Runs writers on `dir`, each killed after a random number of acks; appends what they
// printed to `transcript`. Returns the highest trajectory seq acknowledged.
uint64_t build_base(const fault_options& o, const fs::path& dir, const fs::path& transcript, std::mt19937& rng) {
  std::ofstream log(transcript, std::ios::app);
  std::uniform_int_distribution<int> acks_dist(o.min_acks, o.max_acks);
  const int runs = 2 + static_cast<int>(rng() % 2);
  uint64_t max_ack = 0;
  for (int r = 0; r < runs; ++r) {
    std::vector<std::string> args = {o.writer, dir.string()};
    if (!o.sync) args.push_back("--no-sync");
    child w(args);
    const int target = acks_dist(rng);
    int acks = 0;
    auto take = [&](const std::string& line) {
      log << line << "\n";
      if (line.rfind("ack ", 0) == 0) {
        ++acks;
        max_ack = std::max<uint64_t>(max_ack, std::stoull(line.substr(4)));
      } else if (line != "opened" && line.rfind("kernel ", 0) != 0 && line.rfind("experience ", 0) != 0) {
        throw std::runtime_error("store_writer on " + dir.string() + " said: " + line);
      }
    };
    while (acks < target) {
      auto line = w.next_line();
      if (!line) throw std::runtime_error("store_writer on " + dir.string() + " stopped by itself");
      take(*line);
    }
    w.kill_now();
    while (auto line = w.next_line()) take(*line);  // acknowledged before the kill: counts
    w.wait();
  }
  return max_ack;
}

struct target {
  std::string kind, file;
};

std::vector<target> targets(const fs::path& dir) {
  std::vector<target> out;
  std::string current = read_file(dir / "CURRENT");
  while (!current.empty() && current.back() == '\n') current.pop_back();
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name == current)
      out.push_back({"MANIFEST", name});
    else if (digits_then(name, ".log") && fs::file_size(e.path()) > 0)
      out.push_back({"WAL", name});
    else if (digits_then(name, ".sst"))
      out.push_back({"SST", name});
    else if (name == "CURRENT")
      out.push_back({"CURRENT", name});
    else if (name == "KERNELSKILL-WATERMARK")
      out.push_back({"WATERMARK", name});
  }
  return out;
}

// Damages one file of `dir`; fills the case's kind, file, op, size, offset, length.
void damage(const fs::path& dir, std::mt19937& rng, fault_case& c) {
  auto all = targets(dir);
  // The four files the issue names, the watermark less often.
  std::vector<std::pair<std::string, int>> weights = {
      {"MANIFEST", 3}, {"WAL", 3}, {"SST", 3}, {"CURRENT", 1}, {"WATERMARK", 1}};
  std::vector<target> pool;
  for (auto& [kind, w] : weights) {
    std::vector<target> of_kind;
    for (auto& t : all)
      if (t.kind == kind) of_kind.push_back(t);
    if (of_kind.empty()) continue;
    for (int i = 0; i < w; ++i) pool.push_back(of_kind[rng() % of_kind.size()]);
  }
  const target t = pool[rng() % pool.size()];
  c.kind = t.kind;
  c.file = t.file;
  const fs::path p = dir / t.file;
  std::string bytes = read_file(p);
  c.size = bytes.size();
  int pick = static_cast<int>(rng() % 100);
  if (pick < 10 || bytes.empty()) {
    c.op = "remove";
    fs::remove(p);
    return;
  }
  if (pick < 45) {
    c.op = "cut";
    // A third of the cuts take a few bytes off the end (the attacker's "cut by 9"), the
    // rest cut anywhere.
    if (rng() % 3 == 0) {
      c.offset = bytes.size() - std::min<uint64_t>(bytes.size(), 1 + rng() % 16);
    } else {
      c.offset = rng() % bytes.size();
    }
    c.length = bytes.size() - c.offset;
    bytes.resize(c.offset);
  } else if (pick < 80) {
    c.op = "flip";
    c.length = 1 + rng() % 4;
    c.offset = rng() % bytes.size();
    for (uint64_t i = 0; i < c.length; ++i) {
      size_t at = (c.offset + i * (1 + rng() % 64)) % bytes.size();
      bytes[at] = static_cast<char>(bytes[at] ^ static_cast<char>(1 + rng() % 255));
    }
  } else {
    c.op = "zero";
    c.offset = rng() % bytes.size();
    c.length = std::min<uint64_t>(1 + rng() % 512, bytes.size() - c.offset);
    std::fill(bytes.begin() + static_cast<long>(c.offset), bytes.begin() + static_cast<long>(c.offset + c.length),
              '\0');
  }
  write_file(p, bytes);
}

void verify_case(const fault_options& o, const fs::path& dir, const fs::path& transcript, fault_case& c) {
  const auto before = snapshot(dir);
  auto t0 = std::chrono::steady_clock::now();
  child v({o.writer, dir.string(), "--verify", transcript.string()});
  std::string out;
  while (auto line = v.next_line()) out += *line + "\n";
  const int st = v.wait();
  c.open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  c.detail = out;
  if (WIFSIGNALED(st)) {
    c.outcome = "crashed";
    c.detail = "signal " + std::to_string(WTERMSIG(st)) + ": " + out;
    return;
  }
  const int rc = WEXITSTATUS(st);
  // The verifier's own lines; the store's log (a warning that it dropped a damaged
  // record no writer acknowledged, say) may come before them on the same stream.
  const auto says = [&](const std::string& prefix) {
    return out.rfind(prefix, 0) == 0 || out.find("\n" + prefix) != std::string::npos;
  };
  if (rc == 0 && says("verified ")) {
    c.outcome = "intact";
  } else if (rc == 4) {
    c.outcome = "LOST";
  } else if (rc == 3 && says("refused: ")) {
    // The damaged file by name, or the write-ahead log by kind when it is gone.
    static const std::regex names_file(
        R"(MANIFEST|CURRENT|[0-9]+\.log|[0-9]+\.sst|WATERMARK|a write-ahead log was cut, damaged or removed)");
    const bool says_what = out.find("is damaged") != std::string::npos && std::regex_search(out, names_file) &&
                           out.find("kernelskill store repair") != std::string::npos;
    if (!says_what)
      c.outcome = "unclear";
    else if (snapshot(dir) != before)
      c.outcome = "changed";
    else
      c.outcome = "refused";
  } else {
    c.outcome = "error";
  }
}

}  // namespace

std::string fault_case::describe() const {
  std::string s =
      "base " + std::to_string(base) + ": " + kind + " " + file + " (" + std::to_string(size) + " bytes) " + op;
  if (op == "cut") s += " to " + std::to_string(offset) + " bytes";
  if (op == "flip") s += " " + std::to_string(length) + " byte(s) from offset " + std::to_string(offset);
  if (op == "zero") s += " " + std::to_string(length) + " bytes at offset " + std::to_string(offset);
  return s + " -> " + outcome;
}

std::map<std::string, std::map<std::string, int>> fault_summary::counts() const {
  std::map<std::string, std::map<std::string, int>> n;
  for (const auto& c : cases) {
    ++n[c.kind][c.outcome];
    ++n["all"][c.outcome];
  }
  return n;
}

std::vector<const fault_case*> fault_summary::failures() const {
  std::vector<const fault_case*> out;
  for (const auto& c : cases)
    if (!c.ok()) out.push_back(&c);
  return out;
}

std::string fault_summary::table() const {
  std::string s = "| damaged file | cases | intact | refused | failures |\n|---|---|---|---|---|\n";
  for (const auto& [kind, by] : counts()) {
    int total = 0, bad = 0;
    for (const auto& [outcome, n] : by) {
      total += n;
      if (outcome != "intact" && outcome != "refused") bad += n;
    }
    auto get = [&](const char* k) {
      auto it = by.find(k);
      return it == by.end() ? 0 : it->second;
    };
    s += "| " + kind + " | " + std::to_string(total) + " | " + std::to_string(get("intact")) + " | " +
         std::to_string(get("refused")) + " | " + std::to_string(bad) + " |\n";
  }
  return s;
}

fault_summary run_fault_sweep(const fault_options& o) {
  fault_summary summary;
  auto t0 = std::chrono::steady_clock::now();
  std::mt19937 rng(o.seed);
  fs::create_directories(o.work);
  for (int b = 0; b < o.bases; ++b) {
    const fs::path base = o.work / ("base-" + std::to_string(b));
    fs::remove_all(base);
    fs::create_directories(base);
    const fs::path transcript = base / "acks.txt";
    summary.acked_writes += build_base(o, base / "memory", transcript, rng);
    for (int d = 0; d < o.damages_per_base; ++d) {
      const fs::path copy = o.work / "case";
      fs::remove_all(copy);
      fs::copy(base / "memory", copy, fs::copy_options::recursive);
      fault_case c;
      c.base = b;
      damage(copy, rng, c);
      verify_case(o, copy, transcript, c);
      if (o.progress) o.progress(c.describe() + " (" + std::to_string(static_cast<int>(c.open_ms)) + " ms)");
      summary.cases.push_back(std::move(c));
    }
    fs::remove_all(base);
  }
  fs::remove_all(o.work / "case");
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace ks::test
