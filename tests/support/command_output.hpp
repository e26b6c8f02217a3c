#pragma once
// Runs a shell command line for a test and captures what it prints on stdout (append
// " 2>&1" for stderr too) and its exit status (-1 when it did not exit normally).
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

namespace ks::test {

struct command_output {
  int status = -1;
  std::string text;
};

inline command_output run_shell(const std::string& cmd) {
  command_output out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.text.append(buf.data(), n);
  int ws = pclose(p);
  out.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  return out;
}

}  // namespace ks::test
