// The dashboard in a real browser: headless Chromium (Debian's `chromium`) opens the
// page a real daemon serves, and the test reads the live DOM through the DevTools
// protocol (over --remote-debugging-pipe: no port, no extra client library) while the
// daemon works. One page load, no reloads: what changes, the page's own polling changed.
//
// Exits with status 77 (ctest: skipped) when chromium is not installed, and only then.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <regex>
#include <string>

#include "daemon/dashboard.hpp"
#include "tests/support/daemon_fixture.hpp"

namespace {

using namespace ks;
using namespace ks::testing;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string softmax = std::string(KS_SOURCE_DIR) + "/examples/tasks/softmax.yaml";
const std::string gelu = std::string(KS_SOURCE_DIR) + "/examples/tasks/gelu.yaml";

std::string find_chromium() {
  if (const char* env = std::getenv("KS_CHROMIUM"); env && *env) return env;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

std::string chromium_or_skip() {
  std::string bin = find_chromium();
  if (bin.empty()) {
    std::cout << "SKIPPED: chromium is not installed (Debian: apt-get install chromium; or set "
                 "KS_CHROMIUM to a Chromium binary)\n"
              << std::flush;
    std::_Exit(77);
  }
  return bin;
}

// Headless Chromium driven through the DevTools protocol on fds 3 (commands in) and 4
// (replies out), messages separated by NUL bytes.
class chromium {
 public:
  chromium(const std::string& bin, const fs::path& profile_dir, const fs::path& log) {
    int in[2], out[2];
    REQUIRE(::pipe(in) == 0);
    REQUIRE(::pipe(out) == 0);
    pid_t parent = ::getpid();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      // fds 3 and 4 may be the pipe ends themselves; move them out of the way first.
      int r = ::fcntl(in[0], F_DUPFD, 10), w = ::fcntl(out[1], F_DUPFD, 10);
      ::dup2(r, 3);
      ::dup2(w, 4);
      int logfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (logfd >= 0) {
        ::dup2(logfd, 1);
        ::dup2(logfd, 2);
      }
      for (int fd = 5; fd < 1024; ++fd) ::close(fd);
      std::string profile = "--user-data-dir=" + profile_dir.string();
      const char* argv[] = {bin.c_str(),
                            "--headless=new",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-dev-shm-usage",
                            "--no-first-run",
                            "--no-default-browser-check",
                            "--disable-extensions",
                            "--remote-debugging-pipe",
                            profile.c_str(),
                            "about:blank",
                            nullptr};
      ::execv(bin.c_str(), const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    ::signal(SIGPIPE, SIG_IGN);
  }

  ~chromium() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      for (int i = 0; i < 100; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
        ::usleep(50000);
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Sends a command and waits for its reply; events in between are dropped.
  json call(const std::string& method, const json& params, const std::string& session = "",
            std::chrono::seconds timeout = 30s) {
    int id = ++next_id_;
    json msg = {{"id", id}, {"method", method}, {"params", params}};
    if (!session.empty()) msg["sessionId"] = session;
    std::string text = msg.dump();
    text.push_back('\0');
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = ::write(to_, text.data() + off, text.size() - off);
      REQUIRE(n > 0);
      off += n;
    }
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto nul = buf_.find('\0');
      if (nul != std::string::npos) {
        json reply = json::parse(buf_.substr(0, nul), nullptr, false);
        buf_.erase(0, nul + 1);
        if (reply.is_object() && reply.value("id", -1) == id) {
          if (reply.contains("error")) FAIL(method << ": " << reply["error"].dump());
          return reply.value("result", json::object());
        }
        continue;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) FAIL(method << ": chromium did not answer within " << timeout.count() << " s");
      pollfd pfd{from_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[65536];
      ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) FAIL(method << ": chromium closed the DevTools pipe (did it crash?)");
      buf_.append(chunk, n);
    }
  }

  // Opens url in a new tab and returns the session that talks to it.
  std::string open(const std::string& url) {
    auto target = call("Target.createTarget", {{"url", url}});
    auto attached = call("Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}});
    return attached["sessionId"].get<std::string>();
  }

  // The value of a JavaScript expression in the page (JSON-serialisable values only).
  json eval(const std::string& session, const std::string& expression) {
    auto r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}},
                  session);
    if (r.contains("exceptionDetails")) FAIL("page exception: " << r["exceptionDetails"].dump());
    return r["result"].value("value", json());
  }

  // Evaluates until pred(value) holds; fails after timeout with the last value.
  template <class Pred>
  json eval_until(const std::string& session, const std::string& expression, Pred pred, std::chrono::seconds timeout,
                  const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    json v;
    for (;;) {
      v = eval(session, expression);
      if (pred(v)) return v;
      if (std::chrono::steady_clock::now() > deadline)
        FAIL("the dashboard did not show " << what << " within " << timeout.count() << " s; last: " << v.dump());
      std::this_thread::sleep_for(200ms);
    }
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int next_id_ = 0;
  std::string buf_;
};

// A row of the queue table as the page shows it.
std::string row_js(const std::string& id) {
  return "(() => { const r = document.querySelector('tr[data-task-id=\"" + id +
         "\"]'); return r ? {state: r.dataset.state, round: Number(r.dataset.round), text: "
         "r.textContent} : null; })()";
}

}  // namespace

TEST_CASE("the dashboard page is self-contained", "[dashboard]") {
  std::string page(dashboard_page());
  REQUIRE(page.size() > 1000);
  CHECK(page.find("<!doctype html>") == 0);
  // Nothing may be fetched from elsewhere: the daemon's machines are often offline.
  std::regex external(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase);
  CHECK(!std::regex_search(page, external));
  std::regex import_url(R"(@import|url\(\s*["']?https?:)", std::regex::icase);
  CHECK(!std::regex_search(page, import_url));
}

TEST_CASE("the dashboard shows a submitted task and follows it as it advances", "[dashboard]") {
  std::string bin = chromium_or_skip();
  // One task at a time with slow reviews: the first task runs (longer than Chromium
  // takes to start on a busy machine: its line may stop after one review, so one
  // review must outlast that, 20 s), the second waits in the queue until the test
  // frees the GPU.
  running_daemon d({.tasks_in_flight = 1, .rounds = 2, .review_ms = 20000, .token = "dash-token"});
  auto first = d.client().submit(read_text(softmax));
  REQUIRE(first.ok());
  d.wait_for(
      first->id, [](const api_task& t) { return t.state == "running"; }, 60s, "running");
  auto second = d.client().submit(read_text(gelu));
  REQUIRE(second.ok());
  const std::string id = second->id;

  // The page itself, as the daemon serves it.
  auto html = d.client().get_text("/");
  REQUIRE(html.ok());
  CHECK(*html == std::string(dashboard_page()));

  chromium browser(bin, d.dir() / "chromium-profile", d.dir() / "chromium.log");
  std::string page = browser.open(d.url() + "/#token=dash-token&interval=300");

  // The queued task appears with its state, as the API has it now.
  auto row = browser.eval_until(
      page, row_js(id), [](const json& v) { return v.is_object(); }, 60s, "the submitted task " + id);
  INFO("daemon log:\n" << d.log());
  CHECK(row["state"] == "queued");
  CHECK(row["text"].get<std::string>().find(id) != std::string::npos);
  auto api_state = d.client().status(id);
  REQUIRE(api_state.ok());

  // Free the GPU: the waiting task starts and finishes; the open page must follow.
  REQUIRE(d.client().cancel(first->id).ok());
  auto done = browser.eval_until(
      page, row_js(id), [](const json& v) { return v.is_object() && v["state"] == "done"; }, 120s,
      "task " + id + " done");
  CHECK(done["round"].get<int>() >= 1);
  auto api_done = d.client().status(id);
  REQUIRE(api_done.ok());
  CHECK(done["round"].get<uint32_t>() == api_done->task.round);
  auto first_row = browser.eval(page, row_js(first->id));
  REQUIRE(first_row.is_object());
  CHECK(first_row["state"] == "cancelled");

  // Select it: its chart has a point per round of its history, and its decisions carry
  // the planner's explanations.
  browser.eval(page, "document.querySelector('tr[data-task-id=\"" + id + "\"]').click(); true");
  auto points = browser.eval_until(
      page,
      "document.getElementById('task-title').textContent === '" + id +
          "' ? document.querySelectorAll('#speedup-chart circle').length : -1",
      [&](const json& v) { return v.is_number() && v.get<int>() == int(api_done->history.size()); }, 30s,
      "the speedup chart of " + id);
  CHECK(points.get<int>() >= 1);
  // The task has ended, so its trajectory is final. The page may have followed the
  // task while it ran (it shows the running one until one is picked) and fetches the
  // rest incrementally on its next refresh: wait until it has them all.
  auto traj = d.client().trajectory(id);
  REQUIRE(traj.ok());
  std::vector<std::string> plan_summaries;
  for (auto& e : *traj)
    if (e.kind == "plan") plan_summaries.push_back(e.summary);
  REQUIRE(!plan_summaries.empty());
  auto plans = browser.eval_until(
      page, "Array.from(document.querySelectorAll('#decisions li.plan .summary')).map(e => e.textContent)",
      [&](const json& v) { return v.is_array() && v.size() == plan_summaries.size(); }, 30s, "the planner's decisions");
  CHECK(plans.size() == plan_summaries.size());
  // Newest first on the page.
  if (!plan_summaries.empty()) CHECK(plans[0] == plan_summaries.back());
  CHECK(browser.eval(page, "document.querySelectorAll('#decisions li.review').length").get<int>() >= 1);
}

TEST_CASE("the dashboard without the daemon's token says how to give it", "[dashboard]") {
  std::string bin = chromium_or_skip();
  running_daemon d({.token = "dash-token"});
  chromium browser(bin, d.dir() / "chromium-profile", d.dir() / "chromium.log");
  std::string page = browser.open(d.url() + "/");
  auto conn = browser.eval_until(
      page, "(document.getElementById('conn') || {}).textContent",  // null until the page loads
      [](const json& v) { return v.is_string() && v.get<std::string>().find("token") != std::string::npos; }, 30s,
      "the token hint");
  CHECK(conn.get<std::string>().find("#token=") != std::string::npos);
}
