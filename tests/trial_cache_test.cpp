// The reviewer's trial cache without a GPU: its byte budget, least-recently-used
// eviction across tasks, what it refuses, and the sizing rules (default budget, the cap
// while a trial runs, whether a task fits the device at all). The reviewer stores
// tensors in it; here the values are strings, so that what comes back can be checked.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gpu/trial_cache.hpp"

using namespace ks;
using Catch::Matchers::Contains;
using cache = trial_cache<std::string>;
using names = std::vector<std::string>;

TEST_CASE("a trial cache gives back what was put, and counts its bytes", "[trial_cache]") {
  cache c(100);
  CHECK(c.find("a", 0) == nullptr);
  REQUIRE(c.put("a", 0, "a0", 30));
  REQUIRE(c.put("a", 1, "a1", 20));
  CHECK(c.used() == 50);
  CHECK(c.size() == 2);
  REQUIRE(c.find("a", 1) != nullptr);
  CHECK(*c.find("a", 1) == "a1");
  CHECK(c.find("a", 2) == nullptr);
  CHECK(c.find("b", 0) == nullptr);
  // Replacing an entry (inputs first, then inputs and reference outputs) counts it once.
  REQUIRE(c.put("a", 0, "a0+ref", 45));
  CHECK(*c.find("a", 0) == "a0+ref");
  CHECK(c.used() == 65);
  CHECK(c.size() == 2);
  c.erase("a", 1);
  CHECK(c.used() == 45);
  CHECK_FALSE(c.contains("a", 1));
  c.erase("a", 0);
  CHECK(c.used() == 0);
  CHECK(c.tasks().empty());
}

TEST_CASE("room is made by dropping the least recently used task's trials, highest first", "[trial_cache]") {
  cache c(100);
  REQUIRE(c.put("a", 0, "a0", 20));
  REQUIRE(c.put("a", 1, "a1", 20));
  REQUIRE(c.put("b", 0, "b0", 20));
  REQUIRE(c.put("b", 1, "b1", 20));
  CHECK(c.tasks() == names{"b", "a"});
  // A hit makes a task the most recently used: now b is the one to go first.
  REQUIRE(c.find("a", 0) != nullptr);
  CHECK(c.tasks() == names{"a", "b"});
  // 30 more bytes need 10 freed: b's highest trial goes, its trial 0 stays.
  REQUIRE(c.put("c", 0, "c0", 30));
  CHECK(c.used() == 90);
  CHECK(c.contains("b", 0));
  CHECK_FALSE(c.contains("b", 1));
  CHECK(c.contains("a", 0));
  CHECK(c.contains("a", 1));
  CHECK(c.tasks() == names{"c", "a", "b"});
  // 50 more need 40 freed: b's last trial, then a's trial 1; a's trial 0 stays.
  REQUIRE(c.put("d", 0, "d0", 50));
  CHECK(c.tasks() == names{"d", "c", "a"});
  CHECK(c.used() == 100);
  CHECK(c.contains("a", 0));
  CHECK_FALSE(c.contains("a", 1));
  CHECK(c.size() == 3);
}

TEST_CASE(
    "a task whose trials do not all fit keeps its first ones, and nothing is dropped for "
    "what cannot fit",
    "[trial_cache]") {
  cache c(100);
  REQUIRE(c.put("other", 0, "o0", 40));
  // Trials of 30 bytes: 0, 1 and 2 fit once "other" is gone; 3 and 4 never do.
  for (uint32_t k = 0; k < 5; ++k) {
    INFO("trial " << k);
    const bool fits = c.fits("big", k, 30);
    CHECK(c.put("big", k, "big" + std::to_string(k), 30) == fits);
    CHECK(fits == (k < 3));
  }
  CHECK(c.tasks() == names{"big"});
  CHECK(c.used() == 90);
  // The next review of the task asks in the same order: no thrashing, the first three
  // are still there, the last two are refused again.
  for (uint32_t k = 0; k < 5; ++k) {
    INFO("trial " << k);
    if (k < 3) {
      REQUIRE(c.find("big", k) != nullptr);
      CHECK(*c.find("big", k) == "big" + std::to_string(k));
    } else {
      CHECK(c.find("big", k) == nullptr);
      CHECK_FALSE(c.put("big", k, "x", 30));
    }
  }
  CHECK(c.used() == 90);
  // An entry larger than the budget is refused and drops nothing.
  CHECK_FALSE(c.fits("huge", 0, 101));
  CHECK_FALSE(c.put("huge", 0, "h", 101));
  CHECK(c.used() == 90);
  CHECK(c.size() == 3);
  // A refused replacement leaves the old entry in place.
  CHECK_FALSE(c.put("big", 0, "big0 grown", 50));
  CHECK(*c.find("big", 0) == "big0");
}

TEST_CASE("a cap lowers the budget for one put, and trim frees memory for a trial's working set", "[trial_cache]") {
  cache c(100);
  REQUIRE(c.put("a", 0, "a0", 30));
  REQUIRE(c.put("b", 0, "b0", 30));
  REQUIRE(c.put("b", 1, "b1", 30));
  // With a cap of 70 an entry of 40 for b does not fit beside b's own 60.
  CHECK_FALSE(c.put("b", 2, "b2", 40, 70));
  CHECK(c.used() == 90);
  // One of 10 does, once a is gone.
  REQUIRE(c.put("b", 2, "b2", 10, 70));
  CHECK(c.tasks() == names{"b"});
  CHECK(c.used() == 70);
  // trim: other tasks first, then the task's own trials from the highest.
  REQUIRE(c.put("a", 0, "a0", 30));
  CHECK(c.used() == 100);
  c.trim("b", 65);
  CHECK(c.tasks() == names{"b"});
  CHECK(c.used() == 70 - 10);
  CHECK_FALSE(c.contains("b", 2));
  c.trim("b", 0);
  CHECK(c.used() == 0);
  CHECK(c.tasks().empty());
  // The budget bounds a cap that is larger.
  REQUIRE(c.put("a", 0, "a0", 100, 1000));
  CHECK_FALSE(c.put("b", 0, "b0", 101, 1000));
}

TEST_CASE(
    "the sizing rules: half the device by default, the cap beside a trial's working set, "
    "and a clear error for a task that does not fit the device",
    "[trial_cache]") {
  constexpr uint64_t GB = 1000ull * 1000 * 1000;
  const uint64_t h200 = 150754820096ull;  // what the driver reports for an H200 (140.4 GiB)
  CHECK(default_trial_cache_bytes(h200) == h200 / 2);

  // A KernelBench level-1 softmax: a float32 [4096, 393216] input and output, 6.44 GB each.
  const uint64_t numel = 4096ull * 393216;
  trial_footprint f;
  f.inputs = numel * 4;
  f.outputs = numel * 4;
  f.compare = estimate_compare_bytes(numel, 4);
  CHECK(f.compare == numel * 19);
  CHECK(f.cached() == 2 * numel * 4);
  CHECK(f.working() == 4 * numel * 4 + numel * 19);
  // The default holds the task's five trials (64.4 GB) ...
  CHECK(5 * f.cached() <= default_trial_cache_bytes(h200));
  // ... and the cap beside one trial's working set leaves them there.
  const uint64_t cap = trial_cache_cap(default_trial_cache_bytes(h200), h200, f);
  CHECK(cap >= 5 * f.cached());
  CHECK(cap + f.cached() + f.working() + kDeviceReserveBytes <= h200);
  CHECK(check_fits_device(f, h200, "NVIDIA H200").ok());

  // A configured budget larger than the device is capped to what the working set leaves.
  CHECK(trial_cache_cap(1000 * GB, h200, f) == h200 - kDeviceReserveBytes - f.working() - f.cached());
  // Where the working set alone takes the device, the cache may hold nothing.
  trial_footprint big = f;
  big.inputs = 60 * GB;
  CHECK(trial_cache_cap(h200 / 2, h200, big) == 0);

  // One that does not fit at all: the error names what is needed and what there is.
  trial_footprint huge;
  huge.inputs = 100 * GB;
  huge.outputs = 100 * GB;
  auto st = check_fits_device(huge, h200, "NVIDIA H200");
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(),
             Contains("the task does not fit NVIDIA H200") && Contains("inputs 100.00 GB (100000000000 bytes)") &&
                 Contains("outputs 100.00 GB (100000000000 bytes)") &&
                 Contains("but the device has 150.75 GB (150754820096 bytes)") && Contains("review.size"));
  CHECK(describe_bytes(6442450944ull) == "6.44 GB (6442450944 bytes)");
  // Exactly at the limit fits; one byte more does not.
  trial_footprint edge;
  edge.inputs = (h200 - kDeviceReserveBytes) / 3;
  const uint64_t need = edge.cached() + edge.working() + kDeviceReserveBytes;
  CHECK(check_fits_device(edge, need, "d").ok());
  CHECK_FALSE(check_fits_device(edge, need - 1, "d").ok());
}
