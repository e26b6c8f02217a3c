// The OS sandbox of untrusted children (base/sandbox.hpp), through the launcher every
// reference goes through (base/bounded_child.hpp): real children, real files, a real
// TCP listener on loopback. Each refusal is shown against the same command run
// unconfined, which succeeds: a test that could not fail proves nothing.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/bounded_child.hpp"
#include "base/private_dir.hpp"
#include "base/sandbox.hpp"
#include "tests/support/gpu_skip.hpp"

namespace fs = std::filesystem;
using namespace ks;
using Catch::Contains;

namespace {

bool have_landlock() { return probe_sandbox().landlock_abi > 0; }

struct child {
  bool ok;
  std::string out, err;
};

// Runs `command` with its scratch in a private directory, sandboxed or not.
child run(const std::string& command, bool confined, const fs::path& scratch) {
  process_limits limits{.cpu_seconds = 20, .memory_mb = 4096, .wall_seconds = 30, .sandbox = {}};
  limits.sandbox.mode = confined ? sandbox_mode::required : sandbox_mode::off;
  limits.sandbox.scratch = scratch;
  auto r = run_bounded(command, limits, scratch / "err.txt");
  REQUIRE(r);
  return {r->ok(), r->out, r->err};
}

// A directory outside the sandbox, as a user's home or a daemon's store would be.
struct outside_dir {
  fs::path path;
  outside_dir() {
    path = fs::path(KS_BINARY_DIR) / ("sandbox-outside-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~outside_dir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("the sandbox reports what this kernel offers", "[sandbox]") {
  const sandbox_support& s = probe_sandbox();
  INFO(s.describe());
  CHECK_FALSE(s.describe().empty());
  if (s.landlock_abi > 0 && s.seccomp) CHECK(s.missing().empty());
  CHECK(parse_sandbox_mode("auto").value() == sandbox_mode::best_effort);
  CHECK(parse_sandbox_mode("required").value() == sandbox_mode::required);
  CHECK(parse_sandbox_mode("off").value() == sandbox_mode::off);
  CHECK_FALSE(parse_sandbox_mode("on"));
  CHECK(secret_variable("KS_TOKEN"));
  CHECK(secret_variable("ANTHROPIC_API_KEY"));
  CHECK(secret_variable("aws_secret_access_key"));
  CHECK_FALSE(secret_variable("PATH"));
  CHECK_FALSE(secret_variable("CUDA_VISIBLE_DEVICES"));
}

TEST_CASE("a sandboxed child reads the system but no secrets, and writes only its scratch", "[sandbox]") {
  if (!have_landlock()) KS_SKIP("this kernel has no Landlock: " << probe_sandbox().missing());
  auto scratch = private_dir::create("ks-sandbox-test");
  REQUIRE(scratch);
  const fs::path dir = scratch->path();
  outside_dir outside;
  const fs::path secret = outside.path / "token";
  std::ofstream(secret) << "s3cret-token";
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
  const std::string q_secret = shell_quote(secret.string());

  // The system's programs and libraries run.
  CHECK(run("exec cat /proc/version", true, dir).ok);
  CHECK(run("exec /usr/bin/python3 -c 'import json; print(json.dumps(1))'", true, dir).ok);

  // A file outside: read unconfined, refused confined; nothing of it leaks.
  CHECK(run("exec cat " + q_secret, false, dir).out == "s3cret-token");
  child read = run("exec cat " + q_secret, true, dir);
  CHECK_FALSE(read.ok);
  CHECK_THAT(read.err, Contains("Permission denied"));
  CHECK(read.out.find("s3cret") == std::string::npos);
  // Nor can it be listed, or the password file and the user's home be read.
  CHECK_FALSE(run("exec ls " + shell_quote(outside.path.string()), true, dir).ok);
  CHECK_FALSE(run("exec cat /etc/passwd", true, dir).ok);
  if (const char* home = std::getenv("HOME"); home && fs::is_directory(home))
    CHECK_FALSE(run("exec ls " + shell_quote(home), true, dir).ok);

  // Writes: outside refused (the file never appears), inside its scratch allowed.
  const fs::path planted = outside.path / "planted";
  CHECK_FALSE(run("echo x > " + shell_quote(planted.string()), true, dir).ok);
  CHECK_FALSE(fs::exists(planted));
  CHECK_FALSE(run("exec rm " + q_secret, true, dir).ok);
  CHECK(fs::exists(secret));
  child inside = run("echo in > " + shell_quote((dir / "note").string()) + " && mkdir " +
                         shell_quote((dir / "sub").string()) + " && exec cat " + shell_quote((dir / "note").string()),
                     true, dir);
  CHECK(inside.ok);
  CHECK(inside.out == "in\n");
  // Unconfined, the same write lands: the refusal above is the sandbox's.
  CHECK(run("echo x > " + shell_quote(planted.string()), false, dir).ok);
  CHECK(fs::exists(planted));
}

TEST_CASE("a sandboxed child gets no secrets in its environment, and its home is its scratch", "[sandbox]") {
  if (!have_landlock()) KS_SKIP("this kernel has no Landlock: " << probe_sandbox().missing());
  auto scratch = private_dir::create("ks-sandbox-test");
  REQUIRE(scratch);
  ::setenv("KS_TOKEN", "daemon-token-value", 1);
  ::setenv("OPENAI_API_KEY", "sk-test-value", 1);
  child open = run("exec env", false, scratch->path());
  child confined = run("exec env", true, scratch->path());
  ::unsetenv("KS_TOKEN");
  ::unsetenv("OPENAI_API_KEY");
  CHECK_THAT(open.out, Contains("daemon-token-value"));
  CHECK(confined.ok);
  CHECK(confined.out.find("daemon-token-value") == std::string::npos);
  CHECK(confined.out.find("sk-test-value") == std::string::npos);
  CHECK_THAT(confined.out, Contains("HOME=" + scratch->path().string() + "\n"));
  CHECK_THAT(confined.out, Contains("TMPDIR=" + scratch->path().string() + "\n"));
  CHECK_THAT(confined.out, Contains("PATH="));
}

TEST_CASE("a sandboxed child reaches no network and no other process", "[sandbox]") {
  if (!have_landlock() || !probe_sandbox().seccomp) KS_SKIP("this kernel lacks " << probe_sandbox().missing());
  auto scratch = private_dir::create("ks-sandbox-test");
  REQUIRE(scratch);
  // A listener on loopback, as a daemon's API or a worker's port would be.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 8) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const std::string connect =
      "exec /usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", " + port + "), 3)'";
  const std::string udp = "exec /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'";
  // Unconfined it connects; the connection is taken off the queue.
  CHECK(run(connect, false, scratch->path()).ok);
  int taken = ::accept(listener, nullptr, nullptr);
  CHECK(taken >= 0);
  if (taken >= 0) ::close(taken);
  child refused = run(connect, true, scratch->path());
  CHECK_FALSE(refused.ok);
  CHECK_FALSE(run(udp, true, scratch->path()).ok);
  CHECK(::accept(listener, nullptr, nullptr) < 0);  // nobody reached it
  ::close(listener);
  // Unix sockets (a pipe of its own) still work.
  CHECK(run("exec /usr/bin/python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"x\"); assert b.recv(1) == "
            "b\"x\"'",
            true, scratch->path())
            .ok);

  // The parent's /proc (its environment, its memory) is out of reach.
  const std::string parent = std::to_string(::getpid());
  CHECK(run("exec head -c 1 /proc/" + parent + "/environ", false, scratch->path()).ok);
  CHECK_FALSE(run("exec head -c 1 /proc/" + parent + "/environ", true, scratch->path()).ok);
  // Its own /proc is its to read, and a thread may name itself as the CUDA driver's
  // cuInit does (task/TID/comm, opened with O_TRUNC: without that right cuInit fails
  // with 304 on the GPU machine); another process's name is not its to write.
  CHECK(run("exec cat /proc/self/status", true, scratch->path()).ok);
  CHECK(run("echo kstest > /proc/self/comm && read n < /proc/self/comm && echo $n", true, scratch->path()).out ==
        "kstest\n");
  CHECK(run("echo named > /proc/self/task/$$/comm", true, scratch->path()).ok);
  CHECK_FALSE(run("echo hijack > /proc/" + parent + "/comm", true, scratch->path()).ok);
  // Signals to processes outside the sandbox: refused where Landlock scopes them.
  if (probe_sandbox().landlock_abi >= 6) CHECK_FALSE(run("exec kill -0 " + parent, true, scratch->path()).ok);
  CHECK(run("exec kill -0 " + parent, false, scratch->path()).ok);
}

TEST_CASE("a sandbox that cannot be built is an error before the child starts", "[sandbox]") {
  auto scratch = private_dir::create("ks-sandbox-test");
  REQUIRE(scratch);
  process_limits limits{.cpu_seconds = 5, .memory_mb = 1024, .wall_seconds = 10, .sandbox = {}};
  limits.sandbox.scratch = scratch->path() / "missing";
  const fs::path marker = scratch->path() / "ran";
  auto r = run_bounded("exec touch " + shell_quote(marker.string()), limits, scratch->path() / "err.txt");
  if (have_landlock()) {
    REQUIRE_FALSE(r);
    CHECK_THAT(r.message(), Contains("scratch directory") && Contains("missing"));
    CHECK_FALSE(fs::exists(marker));
  }
}

TEST_CASE("a scratch root is cleared of what a killed run left, and children's files go there", "[sandbox][scratch]") {
  outside_dir root;
  const fs::path scratch = root.path / "scratch";
  fs::create_directories(scratch / "ks-graph-left" / "sub");
  std::ofstream(scratch / "ks-graph-left" / "task.yaml") << "name: secret-task\n";
  std::ofstream(scratch / "stray") << "x";
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  auto swept = use_scratch_root(scratch);
  REQUIRE(swept);
  CHECK(*swept == 2);
  CHECK(fs::is_empty(scratch));
  CHECK((fs::status(scratch).permissions() & fs::perms::all) == fs::perms::owner_all);
  {
    auto dir = private_dir::create("ks-graph");
    REQUIRE(dir);
    CHECK(dir->path().parent_path() == scratch);
  }
  if (old)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
}

namespace {

const fs::path probe_program = fs::path(KS_BINARY_DIR) / "bin" / "ks_sandbox_probe";
const fs::path probe_libdir = fs::path(KS_BINARY_DIR) / "tests" / "probe-lib";

}  // namespace

TEST_CASE("a sandboxed child loads libraries from the directories the loader is pointed at", "[sandbox][libraries]") {
  if (!have_landlock()) KS_SKIP("this kernel has no Landlock: " << probe_sandbox().missing());
  auto scratch = private_dir::create("ks-sandbox-test");
  REQUIRE(scratch);
  const fs::path dir = scratch->path();
  const std::string with_lib = "LD_LIBRARY_PATH=" + shell_quote(probe_libdir.string()) + " ";
  // The program needs its library's directory: without it, it does not start.
  CHECK_FALSE(run("unset LD_LIBRARY_PATH; exec " + shell_quote(probe_program.string()), false, dir).ok);
  child open = run(with_lib + "exec " + shell_quote(probe_program.string()), false, dir);
  CHECK(open.out == "probe 42\n");
  // This process was not pointed at that directory: its sandboxes keep it closed, and a
  // child cannot open it by naming it in its own environment.
  child closed = run(with_lib + "exec " + shell_quote(probe_program.string()), true, dir);
  CHECK_FALSE(closed.ok);
  CHECK(closed.out.find("probe 42") == std::string::npos);
  // A process started with LD_LIBRARY_PATH naming it (a worker on a machine whose
  // libraries live there) gives its sandboxed children that directory to load from.
  char self[PATH_MAX] = {};
  REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  child outer = run(with_lib + "exec " + shell_quote(self) + " '[sandbox_library_child]'", false, dir);
  INFO(outer.out << outer.err);
  CHECK(outer.ok);
}

// Run by the case above in a process whose LD_LIBRARY_PATH names the probe's library.
TEST_CASE("a sandboxed child of a process pointed at a library directory loads from it", "[.][sandbox_library_child]") {
  auto scratch = private_dir::create("ks-sandbox-test");
  REQUIRE(scratch);
  child confined = run("exec " + shell_quote(probe_program.string()), true, scratch->path());
  INFO(confined.err);
  CHECK(confined.ok);
  CHECK(confined.out == "probe 42\n");
}
