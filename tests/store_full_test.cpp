// store_full_test: the memory store on a disk that fills up, for real.
//
// The disk is a small tmpfs in a user namespace (tests/support/disk_full.hpp): ENOSPC from the
// kernel, no mock. Where user namespaces are not allowed, the same scenario runs in a
// forked child whose RLIMIT_FSIZE is lowered (EFBIG, SIGXFSZ ignored) — also a real
// fault from the kernel, and one RocksDB reports the same way.
//
// The scenario: a write that finds no space fails (no abort) and says so, the store
// reports out_of_space() and keeps serving reads, and it writes again once space returns;
// a store opened on a full disk opens read-only (or refuses clearly when asked to), and
// becomes writable when space returns; nothing acknowledged is lost on the way.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <thread>

#include "store/store.hpp"
#include "tests/support/disk_full.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

struct disk_fault {
  std::function<void()> fill, release;
};

trajectory_entry entry(int n) {
  trajectory_entry e;
  e.kind = "note";
  e.summary = "entry " + std::to_string(n) + " " + std::string(200, 'x');
  return e;
}

// Runs the scenario on `dir`; returns what went wrong (empty: nothing) and logs the steps.
std::vector<std::string> full_disk_scenario(const fs::path& dir, const disk_fault& fault, std::string& log) {
  std::vector<std::string> bad;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) bad.push_back(what);
    return ok;
  };
  const std::string task = "full-disk";
  uint64_t acked = 0;
  auto append = [&](store& s) {
    auto seq = s.append_trajectory(task, entry(static_cast<int>(acked + 1)));
    if (seq) acked = *seq;
    return seq;
  };
  auto count = [&](store& s) {
    auto e = s.read_trajectory(task);
    return e ? e->size() : size_t{0};
  };
  // Appends every 100 ms until one succeeds (space came back), at most 20 s.
  auto until_writable = [&](store& s, const std::string& when) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) {
      if (append(s)) {
        log +=
            when + ": writable again after " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()) +
            " ms\n";
        return expect(!s.out_of_space(), when + ": out_of_space() still true after a write");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return expect(false, when + ": no write succeeded within 20 s of space returning");
  };

  {
    auto opened = store::open(dir);
    if (!expect(opened.ok(), "open: " + (opened ? std::string() : opened.message()))) return bad;
    auto& s = **opened;
    for (int i = 0; i < 30; ++i) expect(append(s).ok(), "append before the disk filled");
    for (int i = 0; i < 5; ++i) {
      expect(s.put_task_record("task/" + std::to_string(i), {{"schema", "test/1"}, {"i", i}}).ok(),
             "task record before the disk filled");
    }

    fault.fill();
    std::string failure;
    for (int i = 0; i < 20000 && failure.empty(); ++i) {
      auto seq = append(s);
      if (!seq) failure = seq.message();
    }
    log += "a write on the full disk: " + failure + "\n";
    if (!expect(!failure.empty(), "the disk never filled")) return bad;
    expect(s.out_of_space(), "out_of_space() is false after a write found no space");
    expect(failure.find("no space left for the store") != std::string::npos,
           "the failure does not say the store is out of space: " + failure);
    expect(!s.write_problem().empty(), "write_problem() is empty while out of space");
    expect(count(s) == acked, "reads on the full disk: " + std::to_string(count(s)) + " of " + std::to_string(acked) +
                                  " acknowledged entries");
    expect(s.get_task_record("task/3").ok() && s.get_task_record("task/3")->has_value(),
           "a task record cannot be read on the full disk");
    auto refused = s.put_task_record("task/9", {{"schema", "test/1"}});
    expect(!refused.ok() && s.out_of_space(), "a task record write on the full disk did not fail as out of space");

    fault.release();
    if (!until_writable(s, "space freed while open")) return bad;
    for (int i = 0; i < 10; ++i) expect(append(s).ok(), "append after space returned");
  }
  {
    auto again = store::open(dir);
    if (!expect(again.ok(), "reopen: " + (again ? std::string() : again.message()))) return bad;
    expect(count(**again) == acked, "after reopening: " + std::to_string(count(**again)) + " entries of " +
                                        std::to_string(acked) + " acknowledged");
  }

  // A start on a full disk: read-only (or a clear refusal when read-only is not wanted).
  fault.fill();
  {
    store_options strict;
    strict.read_only_when_full = false;
    auto refused = store::open(dir, strict);
    log += "a strict open on the full disk: " + (refused ? std::string("opened") : refused.message()) + "\n";
    // It may open when the disk still had room for the open itself; it must not crash,
    // and a refusal must say why.
    if (!refused) {
      expect(refused.message().find("free space") != std::string::npos ||
                 refused.message().find("space") != std::string::npos,
             "a strict open on a full disk does not say the disk is full: " + refused.message());
    }
  }
  {
    auto opened = store::open(dir);
    if (!expect(opened.ok(), "open on a full disk: " + (opened ? std::string() : opened.message()))) {
      return bad;
    }
    auto& s = **opened;
    log +=
        "opened on the full disk: out_of_space " + std::to_string(s.out_of_space()) + ", " + s.write_problem() + "\n";
    expect(count(s) == acked, "reads after opening on the full disk");
    auto w = append(s);
    if (w) {
      // Space enough for this one write: the scenario only proves something when full.
      log += "(the open found room for one more write)\n";
    } else {
      expect(s.out_of_space(), "a write after opening on a full disk is not out of space: " + w.message());
    }
    fault.release();
    if (!until_writable(s, "space freed after opening full")) return bad;
  }
  auto last = store::open(dir);
  if (expect(last.ok(), "final reopen")) {
    expect(count(**last) == acked, "after the full-disk start: " + std::to_string(count(**last)) + " of " +
                                       std::to_string(acked) + " acknowledged");
  }
  log += "acknowledged entries: " + std::to_string(acked) + "\n";
  return bad;
}

fs::path scratch() {
  std::random_device rd;
  return fs::temp_directory_path() / ("ks-store-full-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
}

}  // namespace

TEST_CASE("a full disk refuses writes, keeps reads and recovers, and a full start opens read-only", "[store][full]") {
  const fs::path work = scratch();
  ks::test::small_disk disk(work / "mnt", 8);
  std::vector<std::string> bad;
  std::string log;
  // KS_FULL_DISK=rlimit runs the fallback even where user namespaces work.
  const bool force_rlimit = std::getenv("KS_FULL_DISK") && std::string(std::getenv("KS_FULL_DISK")) == "rlimit";
  if (disk.available() && !force_rlimit) {
    disk_fault fault{[&] { disk.fill(); }, [&] { disk.release(); }};
    bad = full_disk_scenario(disk.root() / "memory", fault, log);
    std::cout << "store_full_test (tmpfs of 8 MiB in a user namespace):\n" << log;
  } else {
    // No user namespaces here: the same scenario in a child with a file size limit.
    WARN((force_rlimit ? std::string("KS_FULL_DISK=rlimit") : disk.why())
         << "; using RLIMIT_FSIZE in a child process instead");
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      ::signal(SIGXFSZ, SIG_IGN);
      auto set_limit = [](rlim_t soft) {
        rlimit r{};
        ::getrlimit(RLIMIT_FSIZE, &r);
        r.rlim_cur = std::min(soft, r.rlim_max);
        ::setrlimit(RLIMIT_FSIZE, &r);
      };
      disk_fault fault{[&] { set_limit(1); }, [&] { set_limit(RLIM_INFINITY); }};
      std::string child_log;
      auto child_bad = full_disk_scenario(work / "memory", fault, child_log);
      std::string out = child_log;
      for (auto& b : child_bad) out += "FAILED: " + b + "\n";
      (void)!::write(fds[1], out.data(), out.size());
      ::_exit(child_bad.empty() ? 0 : 1);
    }
    ::close(fds[1]);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) log.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int st = 0;
    ::waitpid(pid, &st, 0);
    std::cout << "store_full_test (RLIMIT_FSIZE in a child):\n" << log;
    INFO(log);
    REQUIRE(WIFEXITED(st));  // not killed: no SIGABRT, no SIGXFSZ
    if (WEXITSTATUS(st) != 0) bad.push_back("the child's scenario failed (see the log)");
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  for (const auto& b : bad) {
    INFO(log);
    FAIL_CHECK(b);
  }
  CHECK(bad.empty());
}
