#pragma once
// GPU-only test cases report "skipped", never "passed", where there is no GPU.
//
// Such a case is tagged [gpu] (and a case that can only run where there is NO driver,
// [nogpu]); tests/CMakeLists.txt gives each its own ctest entry labelled gpu (nogpu)
// with SKIP_RETURN_CODE 77 and KS_SKIP_EXIT=77 in its environment. KS_SKIP then prints
// why and ends the process with that code, so ctest lists the case as skipped.
// Run by hand (no KS_SKIP_EXIT), it warns and returns from the case instead, so the
// program's other cases still run. scripts/gpu-tests.sh runs `ctest -L gpu` on the GPU
// machine and fails if any of them skips there.

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace ks::test {

inline void skip_case(const std::string& why) {
  std::printf("SKIPPED: %s\n", why.c_str());
  std::fflush(stdout);
  if (const char* code = std::getenv("KS_SKIP_EXIT"); code && *code) std::exit(std::atoi(code));
}

}  // namespace ks::test

// Inside a TEST_CASE: skip it with a message (stream syntax, as WARN takes).
#define KS_SKIP(message)                        \
  do {                                          \
    std::ostringstream ks_skip_text_;           \
    ks_skip_text_ << message;                   \
    ::ks::test::skip_case(ks_skip_text_.str()); \
    WARN("skipped: " << ks_skip_text_.str());   \
    return;                                     \
  } while (0)
