// `kernelskill bench`, steps (b) and (c): each variant's run over the imported tasks,
// through `kernelskill run`'s own code (run_tasks) with its own store and output
// directory, and the export of every task's best kernel through `kernelskill export`'s
// (run_candidate, export_pytorch).
//
// A variant's directory records the config it ran with (config.yaml: the part results
// depend on); a later invocation that asks for another is refused rather than mixing two
// experiments in one result (other GPUs or more tasks at once are fine). A task is finished when the run wrote its
// outcome.json; the unfinished ones run again with resume (from their last completed round). The run step ends with
// rounds.json: each task's best speedup after each round and after each review, and its moves (the attempts: kernel,
// method, result), read from the variant's store (the trajectories).

#include <sstream>

#include "cli/bench_steps.hpp"
#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "export/pytorch_export.hpp"
#include "report/bench_metrics.hpp"
#include "report/run_report.hpp"
#include "store/store.hpp"
#include "task/task_loader.hpp"

namespace ks::cli::bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

fs::path outcome_path(const layout& l, const variant& v, const std::string& task) {
  return l.run_dir(v.name) / "tasks" / safe_name(task) / "outcome.json";
}

// The first line where two texts differ, for a message.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string lx, ly;
  while (true) {
    const bool gx = static_cast<bool>(std::getline(x, lx)), gy = static_cast<bool>(std::getline(y, ly));
    if (!gx && !gy) return "";
    if (lx != ly || gx != gy) return "recorded '" + (gx ? lx : "") + "', now '" + (gy ? ly : "") + "'";
  }
}

// The variant's config, recorded by its first invocation; later ones must ask for the same.
status record_config(const layout& l, const variant& v, const std::string& text) {
  const fs::path path = l.variant_dir(v.name) / "config.yaml";
  if (fs::exists(path)) {
    const std::string recorded = read_text_file(path);
    if (recorded == text) return {};
    return error{path.string() + " records the config variant " + v.name +
                 " ran with, and this invocation asks for another (" + first_difference(recorded, text) +
                 "); give another --out, or remove " + l.variant_dir(v.name).string() + " to run " + v.name + " again"};
  }
  return write_file_atomically(path, text);
}

status write_rounds(const layout& l, const variant& v, const experiment_config& cfg,
                    const std::vector<std::string>& names) {
  auto db = store::open(cfg.memory.path);
  if (!db) return error{db.message()};
  json j = {{"rounds", cfg.budgets.rounds},
            {"tasks", json::object()},
            {"by_review", json::object()},
            {"moves", json::object()}};
  for (const auto& name : names) {
    auto t = (*db)->read_trajectory(name);
    if (!t) return error{"task '" + name + "': " + t.message()};
    j["tasks"][name] = best_by_round(*t, static_cast<uint32_t>(cfg.budgets.rounds));
    j["by_review"][name] = best_by_review(*t);
    json moves = json::array();
    for (const auto& m : moves_of(*t)) moves.push_back({m.parent, m.method, m.candidate});
    j["moves"][name] = std::move(moves);
  }
  return write_file_atomically(l.variant_dir(v.name) / "rounds.json", j.dump(1) + "\n");
}

// The part of a config the results depend on: what the agents are asked to do and with
// which model, not where the GPUs are, how much runs at once, or where files go (the
// directory's own paths are written relative, so that it can move).
experiment_config experiment_identity(const experiment_config& cfg) {
  experiment_config id;
  id.name = cfg.name;
  id.budgets.seeds = cfg.budgets.seeds;
  id.budgets.rounds = cfg.budgets.rounds;
  id.budgets.repair_attempts = cfg.budgets.repair_attempts;
  id.coder.backend = cfg.coder.backend;
  id.coder.llm.provider = cfg.coder.llm.provider;
  id.coder.llm.model = cfg.coder.llm.model;
  id.coder.llm.temperature = cfg.coder.llm.temperature;
  id.coder.llm.max_tokens = cfg.coder.llm.max_tokens;
  id.review = cfg.review;
  id.ablation = cfg.ablation;
  id.memory.path = "memory";
  id.output.dir = "run";
  return id;
}

bool rounds_complete(const layout& l, const variant& v, const std::vector<std::string>& names) {
  const json j = read_json_file(l.variant_dir(v.name) / "rounds.json");
  // A file written before the moves and the reviews were recorded is written again
  // (from the variant's store, which has them).
  for (const char* key : {"tasks", "by_review", "moves"})
    if (!j.is_object() || !j.contains(key) || !j[key].is_object()) return false;
  for (const auto& n : names)
    if (!j["tasks"].contains(n) || !j["by_review"].contains(n) || !j["moves"].contains(n)) return false;
  return true;
}

}  // namespace

int run_step(const layout& l, const variant& v, experiment_config cfg, const std::vector<problem>& problems) {
  const std::string step = "run " + v.name;
  cfg.name = "bench-" + v.name;
  cfg.tasks.clear();  // the tasks are the imported ones, passed as they are
  cfg.memory.path = (l.variant_dir(v.name) / "memory").string();
  cfg.output.dir = l.run_dir(v.name).string();
  cfg.ablation.long_term_memory = v.long_term_memory;
  cfg.ablation.short_term_memory = v.short_term_memory;
  if (auto st = record_config(l, v,
                              "# What variant " + v.name + "'s results depend on (kernelskill bench).\n" +
                                  to_yaml(experiment_identity(cfg)));
      !st) {
    std::cerr << "kernelskill bench: " << st.message() << "\n";
    return 1;
  }
  std::vector<task_spec> todo;
  std::vector<std::string> names;
  size_t finished = 0;
  for (const auto& p : problems) {
    if (!p.ok()) continue;
    names.push_back(p.name);
    if (fs::exists(outcome_path(l, v, p.name))) {
      ++finished;
      continue;
    }
    auto task = load_task(p.task);
    if (task && !cfg.review.size.empty()) task = with_size(*task, cfg.review.size);
    if (!task) {
      std::cerr << "kernelskill bench: " << task.message() << "\n";
      return 1;
    }
    todo.push_back(std::move(*task));
  }
  if (todo.empty() && rounds_complete(l, v, names)) {
    progress(step, "complete: " + std::to_string(names.size()) + " tasks finished in " + l.run_dir(v.name).string() +
                       "; skipped");
    return 0;
  }
  if (!todo.empty()) {
    progress(step, std::to_string(todo.size()) + " of " + std::to_string(names.size()) + " tasks to run" +
                       (finished ? " (" + std::to_string(finished) + " finished before; unfinished ones resume)" : "") +
                       ": coder " + cfg.coder.backend + ", " + std::to_string(cfg.budgets.seeds) + " seeds, " +
                       std::to_string(cfg.budgets.rounds) + " rounds, long-term memory " +
                       (v.long_term_memory ? "on" : "off") + ", short-term memory " +
                       (v.short_term_memory ? "on" : "off"));
    auto ran = run_tasks(cfg, todo, {"kernelskill bench", "kernelskill bench: [" + step + "] ", true});
    if (ran.status != 0) return ran.status;
  }
  if (auto st = write_rounds(l, v, cfg, names); !st) {
    std::cerr << "kernelskill bench: " << st.message() << "\n";
    return 1;
  }
  size_t ok = 0;
  for (const auto& n : names) {
    const json o = read_json_file(outcome_path(l, v, n));
    ok += o.is_object() && o.value("success", false);
  }
  progress(step,
           "done: " + std::to_string(ok) + " of " + std::to_string(names.size()) + " tasks with a correct kernel");
  return 0;
}

nlohmann::json read_export_record(const layout& l, const variant& v) {
  json j = read_json_file(l.models_dir(v.name) / "export.json");
  return j.is_object() ? j : json::object();
}

namespace {

// Whether the export record `before` names the task's best candidate ("" without one)
// and, when it has a model, the file is there: exported already, and kept as it is.
bool exported_already(const layout& l, const variant& v, const json& before, const std::string& name,
                      const json& outcome) {
  const std::string best = outcome.value("success", false) ? outcome.value("best_candidate", "") : "";
  const json& had = before.contains(name) ? before[name] : json();
  return had.is_object() && had.value("candidate", "") == best &&
         (best.empty() || fs::exists(l.models_dir(v.name) / had.value("file", "")));
}

}  // namespace

bool finished_everywhere(const layout& l, const std::vector<variant>& variants, const std::string& name) {
  for (const auto& v : variants) {
    const json outcome = read_json_file(outcome_path(l, v, name));
    if (!outcome.is_object() || !exported_already(l, v, read_export_record(l, v), name, outcome)) return false;
  }
  return !variants.empty();
}

status export_step(const layout& l, const variant& v, const std::vector<problem>& problems, bool quiet) {
  const std::string step = "export " + v.name;
  const json before = read_export_record(l, v);
  auto kept = [&](const problem& p, const json& outcome) { return exported_already(l, v, before, p.name, outcome); };
  // What the run finished.
  std::vector<std::pair<const problem*, json>> finished;
  bool complete = true;
  for (const auto& p : problems) {
    if (!p.ok()) continue;
    json outcome = read_json_file(outcome_path(l, v, p.name));
    if (!outcome.is_object()) continue;  // not run (the run step stopped early)
    complete = complete && kept(p, outcome);
    finished.emplace_back(&p, std::move(outcome));
  }
  if (complete) {
    if (!quiet)
      progress(step, "complete: " + std::to_string(finished.size()) + " tasks in " + l.models_dir(v.name).string() +
                         "; skipped");
    return {};
  }
  json rec = json::object();
  size_t exported = 0;
  for (const auto& [p, outcome] : finished) {
    // Only what changed is exported again (the early measurement calls this each time a
    // task of a running variant finishes).
    if (kept(*p, outcome)) {
      rec[p->name] = before[p->name];
      exported += !before[p->name].value("file", "").empty();
      continue;
    }
    json e = {{"candidate", ""}, {"file", ""}, {"sha256", ""}, {"error", ""}};
    if (!outcome.value("success", false)) {
      e["error"] = "no correct kernel: " + outcome.value("reason", std::string("no reason given"));
      rec[p->name] = e;
      continue;
    }
    e["candidate"] = outcome.value("best_candidate", "");
    auto task = load_task(p->task);
    auto c = task ? run_candidate(*task, outcome_path(l, v, p->name).parent_path())
                  : result<candidate>(error{task.message()});
    auto ex = c ? export_pytorch(*task, *c) : result<pytorch_export>(error{c.message()});
    const fs::path file = l.models_dir(v.name) / (safe_name(p->name) + ".py");
    if (ex) {
      if (auto st = write_file_atomically(file, ex->python); !st) return st;
      e["file"] = file.filename().string();  // in models/, which may move with the directory
      e["sha256"] = file_sha256(file);
      ++exported;
    } else {
      e["error"] = ex.message();
      if (!quiet) progress(step, p->name + ": " + ex.message());
    }
    rec[p->name] = e;
  }
  if (auto st = write_file_atomically(l.models_dir(v.name) / "export.json", rec.dump(1) + "\n"); !st) return st;
  if (!quiet)
    progress(step, "done: " + std::to_string(exported) + " of " + std::to_string(finished.size()) +
                       " tasks exported to " + l.models_dir(v.name).string());
  return {};
}

}  // namespace ks::cli::bench
