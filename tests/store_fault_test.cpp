// store_fault_test: damage a store at random and reopen it, with real processes
// (tests/support/store_fault.hpp says what one case does). A short seeded sweep for CI; the long
// one is bench/store/fault_sweep_main.cpp (ks-store-fault-sweep). Every case must end with
// everything acknowledged present, or with a refusal that names the damaged file and
// changed nothing: never a silent loss.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <random>

#include "tests/support/store_fault.hpp"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  std::random_device rd;
  return fs::temp_directory_path() / ("ks-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
}

}  // namespace

TEST_CASE("a damaged store opens with every acknowledged write or refuses, naming the file", "[store][fault]") {
  ks::test::fault_options o;
  o.writer = KS_BINARY_DIR "/bin/store_writer";
  o.work = scratch("store-fault");
  // KS_FAULT_SEED reruns another sweep (the seed goes into the failure message).
  o.seed = std::getenv("KS_FAULT_SEED") ? static_cast<uint32_t>(std::atoi(std::getenv("KS_FAULT_SEED"))) : 20261201u;
  o.bases = 6;
  o.damages_per_base = 7;
  INFO("seed " << o.seed);
  auto summary = ks::test::run_fault_sweep(o);
  std::error_code ec;
  fs::remove_all(o.work, ec);
  std::cout << "store_fault_test: " << summary.cases.size() << " damaged copies of " << o.bases << " stores ("
            << summary.acked_writes << " acknowledged appends) in " << summary.seconds << " s\n"
            << summary.table();
  for (const auto* f : summary.failures()) {
    INFO(f->describe() << "\n" << f->detail);
    CHECK(f->ok());
  }
  auto counts = summary.counts();
  // The sweep must have exercised both outcomes and every kind of file, or it proves little.
  CHECK(counts["all"]["refused"] > 0);
  CHECK(counts["all"]["intact"] > 0);
  for (const char* kind : {"MANIFEST", "WAL", "SST", "CURRENT"}) {
    INFO(kind);
    CHECK(counts.count(kind) == 1);
  }
}
