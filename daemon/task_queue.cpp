#include "daemon/task_queue.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "actors/task_coordinator.hpp"
#include "base/secret.hpp"
#include "model/json_codec.hpp"
#include "store/store.hpp"

namespace ks {

namespace {

using json = nlohmann::json;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* const kCounter = "counter/task_seq";
constexpr size_t kIdLetters = 26;  // base32 of 16 random bytes
std::string task_key(const std::string& id) { return "task/" + id; }
std::string spec_key(const std::string& id) { return "spec/" + id; }
std::string result_key(const std::string& id) { return "result/" + id; }

result<queued_task> from_record(const json& j) {
  try {
    queued_task t;
    t.id = j.at("id").get<std::string>();
    t.name = j.at("name").get<std::string>();
    auto st = parse_task_state(j.at("state").get<std::string>());
    if (!st) return error{"task record '" + t.id + "': unknown state"};
    t.state = *st;
    t.priority = j.at("priority").get<int>();
    t.seq = j.at("seq").get<uint64_t>();
    t.submitted_unix_ms = j.value("submitted_unix_ms", int64_t{0});
    t.started_unix_ms = j.value("started_unix_ms", int64_t{0});
    t.finished_unix_ms = j.value("finished_unix_ms", int64_t{0});
    t.round = j.value("round", 0u);
    t.rounds_budget = j.value("rounds_budget", 0u);
    t.reviews = j.value("reviews", 0u);
    t.best_speedup = j.contains("best_speedup") ? double_from_json(j["best_speedup"]) : 0.0;
    t.best_candidate = j.value("best_candidate", "");
    t.detail = j.value("detail", "");
    t.reason = j.value("reason", "");
    t.cancel_requested = j.value("cancel_requested", false);
    t.resumed = j.value("resumed", 0u);
    for (const auto& h : j.value("history", json::array()))
      t.history.push_back(round_point{h.at("round").get<uint32_t>(), double_from_json(h.at("best_speedup")),
                                      h.at("reviews").get<uint32_t>(), h.at("unix_ms").get<int64_t>()});
    return t;
  } catch (const std::exception& e) {
    return error{std::string("a task record that cannot be read: ") + e.what()};
  }
}

}  // namespace

const char* to_string(task_state s) {
  switch (s) {
    case task_state::queued:
      return "queued";
    case task_state::running:
      return "running";
    case task_state::done:
      return "done";
    case task_state::failed:
      return "failed";
    case task_state::cancelled:
      return "cancelled";
  }
  return "?";
}

std::optional<task_state> parse_task_state(const std::string& s) {
  for (auto st : {task_state::queued, task_state::running, task_state::done, task_state::failed, task_state::cancelled})
    if (s == to_string(st)) return st;
  return std::nullopt;
}

json to_json(const queued_task& t, bool with_history) {
  json j{{"id", t.id},
         {"name", t.name},
         {"state", to_string(t.state)},
         {"priority", t.priority},
         {"seq", t.seq},
         {"submitted_unix_ms", t.submitted_unix_ms},
         {"started_unix_ms", t.started_unix_ms},
         {"finished_unix_ms", t.finished_unix_ms},
         {"round", t.round},
         {"rounds_budget", t.rounds_budget},
         {"reviews", t.reviews},
         {"best_speedup", double_to_json(t.best_speedup)},
         {"best_candidate", t.best_candidate},
         {"detail", t.detail},
         {"reason", t.reason},
         {"cancel_requested", t.cancel_requested},
         {"resumed", t.resumed}};
  if (with_history) {
    json h = json::array();
    for (const auto& p : t.history)
      h.push_back({{"round", p.round},
                   {"best_speedup", double_to_json(p.best_speedup)},
                   {"reviews", p.reviews},
                   {"unix_ms", p.unix_ms}});
    j["history"] = std::move(h);
  }
  return j;
}

namespace {

// 1–64 of A–Z a–z 0–9 _ . -, not starting with '.': the names tasks were ever given.
bool name_characters(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

}  // namespace

bool valid_task_name(const std::string& name) { return name_characters(name) && name[0] != '-'; }

bool valid_task_id(const std::string& id) {
  auto dash = id.rfind('-');
  if (dash == std::string::npos) return false;
  const std::string_view tail = std::string_view(id).substr(dash + 1);
  // 26 letters of base32 (128 random bits), or the six or more digits of a store made
  // before ids were random: those tasks keep their ids.
  const bool random = tail.size() == kIdLetters && std::all_of(tail.begin(), tail.end(), [](char c) {
                        return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
                      });
  const bool sequential =
      tail.size() >= 6 && std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; });
  // A task submitted before names starting with '-' were refused keeps its id.
  return (random || sequential) && name_characters(id.substr(0, dash));
}

json outcome_json(const task_outcome& o) {
  return json{{"schema", "ks.task_outcome/1"},
              {"task", o.task},
              {"success", o.success},
              {"reason", o.reason},
              {"best", o.best},
              {"best_review", o.best_review},
              {"rounds", o.rounds},
              {"reviews", o.reviews},
              {"agent_restarts", o.agent_restarts},
              {"input_tokens", o.input_tokens},
              {"output_tokens", o.output_tokens},
              {"cost_usd", double_to_json(o.cost_usd)},
              {"wall_s", double_to_json(o.wall_s)}};
}

result<std::unique_ptr<task_queue>> task_queue::open(std::shared_ptr<store> db) {
  std::unique_ptr<task_queue> q(new task_queue(std::move(db)));
  auto counter = q->db_->get_task_record(kCounter);
  if (!counter) return counter.error();
  if (*counter) q->next_seq_ = (**counter).value("next", uint64_t{1});
  // A repaired store may have lost tasks and the counter with them: numbers the damaged
  // store had handed out are never handed out again.
  q->next_seq_ = std::max(q->next_seq_, q->db_->writes_before_repair() + 1);
  auto records = q->db_->list_task_records("task/");
  if (!records) return records.error();
  for (const auto& [key, j] : *records) {
    auto t = from_record(j);
    if (!t) return error{q->db_->dir().string() + ": " + key + ": " + t.message()};
    q->index_[t->id] = entry{t->state, t->priority, t->seq};
    q->next_seq_ = std::max(q->next_seq_, t->seq + 1);
  }
  return q;
}

result<lost_tasks> find_lost_tasks(const store& db) {
  lost_tasks out;
  auto counter = db.get_task_record(kCounter);
  if (!counter) return counter.error();
  if (*counter) out.handed_out = (**counter).value("next", uint64_t{1}) - 1;
  auto records = db.list_task_records();
  if (!records) return records.error();
  std::set<uint64_t> numbers;
  std::set<std::string> tasks;
  std::map<std::string, std::set<std::string>> named;  // id → what names it
  for (const auto& [key, j] : *records) {
    if (key.rfind("task/", 0) == 0) {
      tasks.insert(key.substr(5));
      if (j.is_object() && j.contains("seq") && j["seq"].is_number_unsigned()) numbers.insert(j["seq"].get<uint64_t>());
    } else if (key.rfind("spec/", 0) == 0) {
      named[key.substr(5)].insert("spec");
    } else if (key.rfind("result/", 0) == 0) {
      named[key.substr(7)].insert("result");
    } else if (key.rfind("checkpoint/", 0) == 0) {
      named[key.substr(11, key.find('/', 11) - 11)].insert("checkpoint");
    }
  }
  auto trajectories = db.list_trajectory_tasks();
  if (!trajectories) return trajectories.error();
  for (const auto& id : *trajectories)
    if (valid_task_id(id)) named[id].insert("trajectory");
  for (const auto& [id, what] : named) {
    if (tasks.count(id)) continue;
    std::string list;
    for (const auto& w : what) list += (list.empty() ? "" : ", ") + w;
    out.named.emplace_back(id, list);
  }
  out.last_found = numbers.empty() ? 0 : *numbers.rbegin();
  const uint64_t top = std::max(out.handed_out, out.last_found);
  uint64_t expect = 1;
  for (uint64_t n : numbers) {
    if (n > expect) out.missing.emplace_back(expect, n - 1);
    expect = n + 1;
  }
  if (top >= expect) out.missing.emplace_back(expect, top);
  return out;
}

result<queued_task> task_queue::load(const std::string& id) const {
  auto r = db_->get_task_record(task_key(id));
  if (!r) return r.error();
  if (!*r) return error{"no task '" + id + "'"};
  return from_record(**r);
}

status task_queue::save(const queued_task& t) {
  json j = to_json(t, true);
  j["schema"] = "ks.daemon_task/1";
  if (auto s = db_->put_task_record(task_key(t.id), j); !s) return s;
  index_[t.id] = entry{t.state, t.priority, t.seq};
  return {};
}

result<queued_task> task_queue::submit(const task_spec& spec, int priority, uint32_t rounds_budget) {
  if (!valid_task_name(spec.name))
    return error{"name: '" + spec.name + "' is not a valid task name (1-64 of A-Z a-z 0-9 _ . -)"};
  std::lock_guard lock(mu_);
  const uint64_t seq = next_seq_++;
  // The counter first: a crash between the two writes wastes a number, never reuses one.
  if (auto s = db_->put_task_record(kCounter, json{{"schema", "ks.counter/1"}, {"next", next_seq_}}); !s)
    return error{s.message()};
  queued_task t;
  // 128 bits from the kernel's generator: one task's id says nothing of another's
  // (sequential ids let anyone who sees one walk the others). Drawn again on the
  // (2^-128) chance of meeting an id this store has had.
  do {
    t.id = spec.name + "-" + base32_lower(random_bytes(16));
  } while (index_.count(t.id));
  t.name = spec.name;
  t.priority = std::clamp(priority, min_priority, max_priority);
  t.seq = seq;
  t.submitted_unix_ms = now_ms();
  t.rounds_budget = rounds_budget;
  t.detail = "queued";
  json sj = spec;
  sj["schema"] = "ks.task_spec/1";
  if (auto s = db_->put_task_record(spec_key(t.id), sj); !s) return error{s.message()};
  if (auto s = save(t); !s) return error{s.message()};
  return t;
}

result<std::optional<queued_task>> task_queue::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  if (!index_.count(id)) return std::optional<queued_task>();
  auto t = load(id);
  if (!t) return t.error();
  return std::optional<queued_task>(std::move(*t));
}

result<task_spec> task_queue::spec(const std::string& id) const {
  auto r = db_->get_task_record(spec_key(id));
  if (!r) return r.error();
  if (!*r) return error{"no spec for task '" + id + "'"};
  return decode_json<task_spec>(**r, "the spec of task '" + id + "'");
}

result<std::vector<queued_task>> task_queue::list(std::optional<task_state> state, size_t limit, size_t* total) const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint64_t, std::string>> ids;
  for (const auto& [id, e] : index_)
    if (!state || e.state == *state) ids.emplace_back(e.seq, id);
  std::sort(ids.begin(), ids.end(), std::greater<>());
  if (total) *total = ids.size();
  std::vector<queued_task> out;
  for (size_t i = 0; i < ids.size() && i < limit; ++i) {
    auto t = load(ids[i].second);
    if (!t) return t.error();
    out.push_back(std::move(*t));
  }
  return out;
}

std::map<task_state, size_t> task_queue::counts() const {
  std::lock_guard lock(mu_);
  std::map<task_state, size_t> n;
  for (auto st : {task_state::queued, task_state::running, task_state::done, task_state::failed, task_state::cancelled})
    n[st] = 0;
  for (const auto& [_, e] : index_) ++n[e.state];
  return n;
}

std::vector<std::string> task_queue::interrupted() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint64_t, std::string>> ids;
  for (const auto& [id, e] : index_)
    if (e.state == task_state::running) ids.emplace_back(e.seq, id);
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> out;
  for (auto& [_, id] : ids) out.push_back(id);
  return out;
}

result<queued_task> task_queue::resume(const std::string& id, const std::string& detail) {
  std::lock_guard lock(mu_);
  auto t = load(id);
  if (!t) return t;
  ++t->resumed;
  t->detail = detail;
  if (auto s = save(*t); !s) return error{s.message()};
  return t;
}

result<std::optional<queued_task>> task_queue::start_next() {
  std::lock_guard lock(mu_);
  const std::string* best = nullptr;
  const entry* be = nullptr;
  for (const auto& [id, e] : index_) {
    if (e.state != task_state::queued) continue;
    if (!be || e.priority > be->priority || (e.priority == be->priority && e.seq < be->seq)) {
      best = &id;
      be = &e;
    }
  }
  if (!best) return std::optional<queued_task>();
  auto t = load(*best);
  if (!t) return t.error();
  t->state = task_state::running;
  t->started_unix_ms = now_ms();
  t->detail = "starting";
  if (auto s = save(*t); !s) return error{s.message()};
  return std::optional<queued_task>(std::move(*t));
}

status task_queue::progress(const std::string& id, const task_progress& p) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end() || it->second.state != task_state::running) return {};
  auto t = load(id);
  if (!t) return error{t.message()};
  const bool new_round = p.round > t->round || t->history.empty();
  t->round = p.round;
  t->reviews = p.reviews;
  if (p.best_speedup > 0) {
    t->best_speedup = p.best_speedup;
    t->best_candidate = p.best_candidate;
  }
  t->detail = p.detail;
  if (new_round && (p.best_speedup > 0 || p.round > 0)) {
    if (!t->history.empty() && t->history.back().round == p.round) t->history.pop_back();
    t->history.push_back(round_point{p.round, t->best_speedup, p.reviews, now_ms()});
  } else if (!t->history.empty() && t->history.back().round == p.round &&
             t->best_speedup > t->history.back().best_speedup) {
    t->history.back().best_speedup = t->best_speedup;
    t->history.back().reviews = p.reviews;
  }
  return save(*t);
}

status task_queue::finish(const std::string& id, const task_outcome& o) {
  std::lock_guard lock(mu_);
  auto t = load(id);
  if (!t) return error{t.message()};
  if (has_ended(t->state)) return {};  // reported twice (an outcome, then a down message)
  json oj = outcome_json(o);
  if (auto s = db_->put_task_record(result_key(id), oj); !s) return s;
  t->state = t->cancel_requested ? task_state::cancelled : o.success ? task_state::done : task_state::failed;
  t->finished_unix_ms = now_ms();
  t->reason = o.reason;
  t->detail = std::string(to_string(t->state)) + ": " + o.reason;
  t->rounds_budget = std::max(t->rounds_budget, t->round);
  if (o.success) {
    t->best_speedup = o.best_review.speedup;
    t->best_candidate = o.best.id;
  }
  t->reviews = std::max(t->reviews, o.reviews);
  if (auto s = save(*t); !s) return s;
  // Only now: until the state above is stored, a restart must be able to resume.
  return db_->delete_task_records(checkpoint_prefix(id));
}

result<std::optional<json>> task_queue::outcome(const std::string& id) const {
  return db_->get_task_record(result_key(id));
}

result<queued_task> task_queue::cancel(const std::string& id, refusal* why) {
  std::lock_guard lock(mu_);
  *why = refusal::none;
  if (!index_.count(id)) {
    *why = refusal::not_found;
    return error{"no task '" + id + "'"};
  }
  auto t = load(id);
  if (!t) return t;
  if (has_ended(t->state)) {
    *why = refusal::conflict;
    return error{"task '" + id + "' has already ended (" + to_string(t->state) + ")"};
  }
  t->cancel_requested = true;
  if (t->state == task_state::queued) {
    t->state = task_state::cancelled;
    t->finished_unix_ms = now_ms();
    t->reason = "cancelled before it started";
    t->detail = "cancelled";
  } else {
    t->detail = "cancelling at the next step";
  }
  if (auto s = save(*t); !s) return error{s.message()};
  return t;
}

result<queued_task> task_queue::set_priority(const std::string& id, int priority, refusal* why) {
  std::lock_guard lock(mu_);
  *why = refusal::none;
  if (!index_.count(id)) {
    *why = refusal::not_found;
    return error{"no task '" + id + "'"};
  }
  auto t = load(id);
  if (!t) return t;
  if (t->state != task_state::queued) {
    *why = refusal::conflict;
    return error{"task '" + id + "' is " + to_string(t->state) + "; only a queued task can be reprioritised"};
  }
  t->priority = std::clamp(priority, min_priority, max_priority);
  if (auto s = save(*t); !s) return error{s.message()};
  return t;
}

}  // namespace ks
