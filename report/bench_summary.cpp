#include "report/bench_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/number_format.hpp"
#include "model/json_codec.hpp"
#include "report/svg_chart.hpp"

namespace ks {

namespace {

using json = nlohmann::json;

json opt_json(const std::optional<double>& v) { return v ? double_to_json(*v) : json(nullptr); }
json ms_json(double v) { return v > 0 ? double_to_json(v) : json(nullptr); }

std::string p_key(double p) { return plain_g(p); }

// "-" for a number that is not there.
std::string times(const std::optional<double>& v) { return v ? format_double("%.3f", *v) + "x" : "-"; }
std::string share(const std::optional<double>& v) { return v ? format_double("%.1f%%", 100 * *v) : "-"; }
std::string ms(double v) { return v > 0 ? format_double("%.4f", v) : "-"; }
std::string cell_text(std::string s) {
  for (auto& c : s)
    if (c == '|' || c == '\n') c = ' ';
  return s;
}

const char* state_name(measure_state s) {
  switch (s) {
    case measure_state::pending:
      return "pending";
    case measure_state::no_kernel:
      return "no_kernel";
    case measure_state::measured:
      return "measured";
  }
  return "pending";
}

json metrics_json(const metric_set& m) {
  json j;
  j["problems"] = m.problems;
  j["known"] = m.known;
  j["measured"] = m.measured;
  j["correct_1e-4"] = m.correct_strict;
  j["correct_1e-2"] = m.correct_loose;
  j["correct_rate_1e-4"] = opt_json(m.correct_rate_strict);
  j["correct_rate_1e-2"] = opt_json(m.correct_rate_loose);
  j["geomean_speedup_over_eager"] = opt_json(m.geomean_over_eager);
  j["geomean_speedup_over_eager_n"] = m.geomean_over_eager_n;
  j["mean_speedup_over_eager"] = opt_json(m.mean_over_eager);
  j["geomean_speedup_over_compile"] = opt_json(m.geomean_over_compile);
  j["geomean_speedup_over_compile_n"] = m.geomean_over_compile_n;
  j["compile_geomean_speedup_over_eager"] = opt_json(m.compile_over_eager);
  j["compile_geomean_speedup_over_eager_n"] = m.compile_over_eager_n;
  for (const auto& [p, v] : m.fast_p_eager) j["fast_p_over_eager"][p_key(p)] = opt_json(v);
  for (const auto& [p, v] : m.fast_p_compile) j["fast_p_over_compile"][p_key(p)] = opt_json(v);
  return j;
}

// What the model cost one variant's run, over the tasks it finished.
struct token_bill {
  int64_t input = 0, output = 0;
  double cost = 0;
  int tasks = 0;
};

token_bill bill_of(const bench_report& r, size_t v) {
  token_bill b;
  for (const auto& p : r.problems) {
    if (v >= p.cells.size() || !p.cells[v].run_done) continue;
    b.input += p.cells[v].input_tokens;
    b.output += p.cells[v].output_tokens;
    b.cost += p.cells[v].cost_usd;
    ++b.tasks;
  }
  return b;
}

// The reviews one variant's run spent, over the tasks it finished.
std::pair<uint64_t, size_t> reviews_of(const bench_report& r, size_t v) {
  uint64_t reviews = 0;
  size_t tasks = 0;
  for (const auto& p : r.problems) {
    if (v >= p.cells.size() || !p.cells[v].run_done) continue;
    reviews += p.cells[v].reviews;
    ++tasks;
  }
  return {reviews, tasks};
}

json cell_json(const bench_cell& c) {
  json j;
  j["run_done"] = c.run_done;
  j["run_success"] = c.run_success;
  j["run_reason"] = c.run_reason;
  j["run_speedup"] = c.run_success ? double_to_json(c.run_speedup) : json(nullptr);
  j["rounds"] = c.rounds;
  j["reviews"] = c.reviews;
  j["input_tokens"] = c.input_tokens;
  j["output_tokens"] = c.output_tokens;
  j["cost_usd"] = double_to_json(c.cost_usd);
  j["exported"] = c.exported;
  j["export_error"] = c.export_error;
  j["state"] = state_name(c.state);
  if (c.state == measure_state::measured) {
    j["correct_1e-4"] = c.correct_strict;
    j["correct_1e-2"] = c.correct_loose;
    j["trials"] = c.trials;
    j["trials_passed_1e-4"] = c.passed_strict;
    j["trials_passed_1e-2"] = c.passed_loose;
    j["max_abs_error"] = double_to_json(c.max_abs_error);
    j["ours_ms"] = ms_json(c.ours_ms);
  }
  j["error"] = c.error;
  return j;
}

}  // namespace

std::vector<std::string> report_levels(const bench_report& r) {
  std::vector<std::string> levels;
  for (const auto& p : r.problems)
    if (std::find(levels.begin(), levels.end(), p.level) == levels.end()) levels.push_back(p.level);
  return levels;
}

std::vector<problem_measure> measures_of(const bench_report& r, size_t v, const std::string& level) {
  std::vector<problem_measure> out;
  for (const auto& p : r.problems) {
    if (!level.empty() && p.level != level) continue;
    problem_measure m;
    m.level = p.level;
    m.eager_ms = p.eager_ms;
    m.compile_ms = p.compile_ms;
    if (v < p.cells.size()) {
      const bench_cell& c = p.cells[v];
      m.state = c.state;
      m.correct_strict = c.correct_strict;
      m.correct_loose = c.correct_loose;
      m.ours_ms = c.ours_ms;
    }
    out.push_back(m);
  }
  return out;
}

nlohmann::json bench_summary_json(const bench_report& r) {
  json j;
  j["schema"] = "ks.bench_summary/1";
  j["out_dir"] = r.out_dir;
  j["measurement"] = {{"status", r.measurement},   {"ran", r.measurement_ran}, {"device", r.device},
                      {"torch", r.torch_version},  {"reps", r.reps},           {"trials", r.trials},
                      {"tolerances", {1e-4, 1e-2}}};
  j["run"] = {{"coder", r.coder}, {"seeds", r.seeds}, {"rounds", r.rounds}};
  j["levels"] = report_levels(r);
  j["variants"] = json::array();
  for (size_t v = 0; v < r.variants.size(); ++v) {
    const bench_variant& var = r.variants[v];
    json jv;
    jv["name"] = var.name;
    jv["ablation"] = {{"long_term_memory", var.long_term_memory}, {"short_term_memory", var.short_term_memory}};
    jv["overall"] = metrics_json(compute_metrics(measures_of(r, v, "")));
    for (const auto& level : report_levels(r))
      jv["levels"][level] = metrics_json(compute_metrics(measures_of(r, v, level)));
    jv["speedup_by_round"] = json::array();
    for (const auto& p : var.rounds)
      jv["speedup_by_round"].push_back({{"round", p.round},
                                        {"tasks", p.tasks},
                                        {"of", p.of},
                                        {"mean", opt_json(p.mean)},
                                        {"geomean", opt_json(p.geomean)}});
    const rounds_vs_seeds& vs = var.vs_seeds;
    json gains = json::array();
    for (const auto& [name, g] : vs.gains) gains.push_back({{"task", name}, {"gain", g}});
    jv["rounds_vs_seeds"] = {{"tasks", vs.tasks},
                             {"beat", vs.beat},
                             {"beat_by_2pct", vs.beat_by_2pct},
                             {"rescued", vs.rescued},
                             {"geomean_gain", opt_json(vs.geomean_gain)},
                             {"gains", gains}};
    const auto [reviews, reviewed_tasks] = reviews_of(r, v);
    jv["reviews"] = {
        {"total", reviews},
        {"tasks", reviewed_tasks},
        {"per_task", reviewed_tasks ? double_to_json(double(reviews) / double(reviewed_tasks)) : json(nullptr)}};
    jv["moves"] = var.moves_known ? json{{"tasks", var.moves.tasks},
                                         {"attempts", var.moves.attempts},
                                         {"distinct", var.moves.distinct},
                                         {"repeated", var.moves.repeated}}
                                  : json(nullptr);
    if (var.full_vs_this)
      jv["full_at_equal_reviews"] = {{"tasks", var.full_vs_this->tasks},
                                     {"geomean_full_over_this", opt_json(var.full_vs_this->geomean)},
                                     {"mean_reviews_full", double_to_json(var.full_vs_this->mean_reviews_a)},
                                     {"mean_reviews_this", double_to_json(var.full_vs_this->mean_reviews_b)}};
    const token_bill bill = bill_of(r, v);
    jv["llm"] = {{"input_tokens", bill.input},
                 {"output_tokens", bill.output},
                 {"cost_usd", double_to_json(bill.cost)},
                 {"tasks", bill.tasks}};
    j["variants"].push_back(std::move(jv));
  }
  if (r.stm_check)
    j["short_term_memory_check"] = {{"check", "no-stm repeats no move that full's trajectories hold"},
                                    {"holds", r.stm_check->holds()},
                                    {"no_stm_repeated_moves", r.stm_check->repeated},
                                    {"of_them_in_full", r.stm_check->in_other.size()},
                                    {"moves", r.stm_check->in_other}};
  j["problems"] = json::array();
  for (const auto& p : r.problems) {
    json jp;
    jp["key"] = p.key;
    jp["name"] = p.name;
    jp["level"] = p.level;
    jp["file"] = p.file;
    jp["imported"] = p.import_error.empty();
    jp["import_error"] = p.import_error;
    jp["eager_ms"] = ms_json(p.eager_ms);
    jp["compile_ms"] = ms_json(p.compile_ms);
    jp["compile_error"] = p.compile_error;
    jp["compile_trials"] = p.compile_trials;
    jp["compile_correct"] = p.compile_trials > 0 ? json(p.compile_correct_strict()) : json(nullptr);
    jp["compile_max_abs_error"] = p.compile_trials > 0 ? double_to_json(p.compile_max_abs_error) : json(nullptr);
    jp["error"] = p.error;
    for (size_t v = 0; v < r.variants.size() && v < p.cells.size(); ++v) {
      json c = cell_json(p.cells[v]);
      c["speedup_over_eager"] =
          p.cells[v].state == measure_state::measured && speedup_of(p.eager_ms, p.cells[v].ours_ms) > 0
              ? double_to_json(speedup_of(p.eager_ms, p.cells[v].ours_ms))
              : json(nullptr);
      c["speedup_over_compile"] =
          p.cells[v].state == measure_state::measured && speedup_of(p.compile_ms, p.cells[v].ours_ms) > 0
              ? double_to_json(speedup_of(p.compile_ms, p.cells[v].ours_ms))
              : json(nullptr);
      jp["variants"][r.variants[v].name] = std::move(c);
    }
    j["problems"].push_back(std::move(jp));
  }
  return j;
}

namespace {

std::string counts_line(const metric_set& m) {
  if (!m.correct_rate_strict) return "-";
  return share(m.correct_rate_strict) + " (" + std::to_string(m.correct_strict) + "/" + std::to_string(m.known) + ")";
}

std::string metrics_table(const bench_report& r) {
  std::string md =
      "| variant | level | problems | correct @1e-4 | correct @1e-2 | mean over eager | geomean over eager "
      "| geomean over torch.compile | fast_0 | fast_1 | fast_1.5 | fast_2 |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  std::vector<std::string> levels = report_levels(r);
  if (levels.size() > 1) levels.push_back("");
  for (size_t v = 0; v < r.variants.size(); ++v)
    for (const auto& level : levels) {
      const metric_set m = compute_metrics(measures_of(r, v, level));
      md += "| " + r.variants[v].name + " | " + (level.empty() ? "all" : level) + " | " + std::to_string(m.problems) +
            (m.known < m.problems ? " (" + std::to_string(m.problems - m.known) + " pending)" : "") + " | " +
            counts_line(m) + " | " + share(m.correct_rate_loose) + " | " + times(m.mean_over_eager) + " | " +
            times(m.geomean_over_eager) + " (" + std::to_string(m.geomean_over_eager_n) + ") | " +
            times(m.geomean_over_compile) + " (" + std::to_string(m.geomean_over_compile_n) + ")";
      for (const auto& [p, x] : m.fast_p_eager) md += " | " + share(x);
      md += " |\n";
    }
  return md;
}

std::string fast_p_compile_table(const bench_report& r) {
  std::string md =
      "| variant | level | fast_0 | fast_1 | fast_1.5 | fast_2 | torch.compile over eager |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
  std::vector<std::string> levels = report_levels(r);
  if (levels.size() > 1) levels.push_back("");
  for (size_t v = 0; v < r.variants.size(); ++v)
    for (const auto& level : levels) {
      const metric_set m = compute_metrics(measures_of(r, v, level));
      md += "| " + r.variants[v].name + " | " + (level.empty() ? "all" : level);
      for (const auto& [p, x] : m.fast_p_compile) md += " | " + share(x);
      md += " | " + times(m.compile_over_eager) + " (" + std::to_string(m.compile_over_eager_n) + ") |\n";
    }
  return md;
}

std::string rounds_table(const bench_report& r) {
  size_t rounds = 0;
  for (const auto& v : r.variants) rounds = std::max(rounds, v.rounds.size());
  if (rounds == 0) return "No round data (the run has not finished any task).\n";
  std::string md = "| round |";
  std::string rule = "| ---: |";
  for (const auto& v : r.variants) md += " " + v.name + ": mean (tasks) |", rule += " ---: |";
  md += "\n" + rule + "\n";
  for (size_t k = 0; k < rounds; ++k) {
    md += "| " + std::to_string(k) + " |";
    for (const auto& v : r.variants) {
      if (k >= v.rounds.size()) {
        md += " - |";
        continue;
      }
      const round_point& p = v.rounds[k];
      md += " " + times(p.mean) + " (" + std::to_string(p.tasks) + "/" + std::to_string(p.of) + ") |";
    }
    md += "\n";
  }
  return md;
}

// Each variant's rounds against its seeds, a line each: how many tasks the rounds made
// faster than their best seed, by how much, and the largest gains.
std::string rounds_vs_seeds_lines(const bench_report& r) {
  std::string md;
  for (const auto& v : r.variants) {
    if (v.rounds.size() < 2) continue;  // no round after the seeds
    const rounds_vs_seeds& s = v.vs_seeds;
    md += "\n" + (r.variants.size() > 1 ? v.name + ": the" : std::string("The")) + " rounds beat the best seed on " +
          std::to_string(s.beat) + " of " + std::to_string(s.tasks) +
          " tasks with a seed kernel (by more than 2 % on " + std::to_string(s.beat_by_2pct) + ")";
    if (s.geomean_gain) md += ", by " + times(s.geomean_gain) + " in geometric mean where they did";
    std::string top;
    for (size_t i = 0; i < s.gains.size() && i < 5; ++i)
      top += (i ? ", " : "") + s.gains[i].first + " " + times(s.gains[i].second);
    if (!top.empty()) md += " (" + top + (s.gains.size() > 5 ? ", ..." : "") + ")";
    if (s.rescued) md += "; on " + std::to_string(s.rescued) + " more only a round found a kernel";
    md += ".\n";
  }
  return md;
}

// The ablation's budget and memory checks: each variant's reviews and moves, full
// against each other variant at the same number of reviews, and the short-term
// memory's check.
std::string ablation_lines(const bench_report& r) {
  std::string md;
  for (size_t v = 0; v < r.variants.size(); ++v) {
    const bench_variant& var = r.variants[v];
    const auto [reviews, tasks] = reviews_of(r, v);
    if (tasks == 0) continue;
    md += "\n" + var.name + ": " + std::to_string(reviews) + " reviews over " + std::to_string(tasks) + " task" +
          (tasks == 1 ? "" : "s") + " (" + format_double("%.1f", double(reviews) / double(tasks)) + " per task)";
    if (var.moves_known)
      md += "; " + std::to_string(var.moves.attempts) + " moves tried, " + std::to_string(var.moves.repeated) +
            " of them a repeat of the task's earlier move";
    if (var.full_vs_this && var.full_vs_this->geomean)
      md += "; full over " + var.name + " at the same number of reviews: " + times(var.full_vs_this->geomean) +
            " in geometric mean over " + std::to_string(var.full_vs_this->tasks) + " tasks (the run's own reviews)";
    md += ".\n";
  }
  if (r.stm_check) {
    md += "\nShort-term memory check (no-stm repeats no move that full's trajectories hold): " +
          std::string(r.stm_check->holds() ? "holds" : "does not hold") + "; no-stm repeated " +
          std::to_string(r.stm_check->repeated) + " move" + (r.stm_check->repeated == 1 ? "" : "s") + ", " +
          std::to_string(r.stm_check->in_other.size()) + " of them in full's trajectories";
    std::string some;
    for (size_t i = 0; i < r.stm_check->in_other.size() && i < 5; ++i)
      some += (i ? ", " : "") + cell_text(r.stm_check->in_other[i]);
    if (!some.empty()) md += " (" + some + (r.stm_check->in_other.size() > 5 ? ", ..." : "") + ")";
    md += ".\n";
  }
  return md;
}

// How many of the problems whose torch.compile was checked are within 1e-4 of eager
// themselves: the baseline's own correctness, by KernelBench's rule.
std::string compile_correct_line(const bench_report& r) {
  size_t checked = 0, correct = 0;
  std::vector<std::string> off;
  for (const auto& p : r.problems) {
    if (p.compile_trials == 0) continue;
    ++checked;
    if (p.compile_correct_strict())
      ++correct;
    else
      off.push_back(p.name);
  }
  if (checked == 0) return "";
  std::string line = "\ntorch.compile's own outputs are within 1e-4 of eager's on " + std::to_string(correct) + " of " +
                     std::to_string(checked) + " problems (the trials ours is checked on)";
  if (!off.empty()) {
    line += "; not on: ";
    for (size_t k = 0; k < off.size(); ++k) line += (k ? ", " : "") + cell_text(off[k]);
  }
  return line + ".\n";
}

std::string problem_note(const bench_problem& p, const bench_cell& c) {
  std::vector<std::string> notes;
  if (!p.import_error.empty()) notes.push_back("import: " + p.import_error);
  if (c.run_done && !c.run_success) notes.push_back("run: " + c.run_reason);
  if (!c.export_error.empty()) notes.push_back("export: " + c.export_error);
  if (!p.error.empty()) notes.push_back(p.error);
  if (!c.error.empty()) notes.push_back(c.error);
  if (!p.compile_error.empty()) notes.push_back(p.compile_error);
  if (p.compile_trials > 0 && !p.compile_correct_strict())
    notes.push_back("torch.compile itself is not within 1e-4 of eager (" + std::to_string(p.compile_passed_strict) +
                    " of " + std::to_string(p.compile_trials) + " trials; max abs error " +
                    plain_g(p.compile_max_abs_error) + ")");
  std::string s;
  for (const auto& n : notes) s += (s.empty() ? "" : "; ") + n;
  return cell_text(s.size() > 300 ? s.substr(0, 297) + "..." : s);
}

std::string correct_text(const bench_cell& c) {
  switch (c.state) {
    case measure_state::pending:
      return c.exported ? "not measured" : "-";
    case measure_state::no_kernel:
      return "no kernel";
    case measure_state::measured:
      return std::string(c.correct_strict ? "yes" : "no") + " / " + (c.correct_loose ? "yes" : "no") +
             (c.trials && !c.correct_loose
                  ? " (" + std::to_string(c.passed_loose) + "/" + std::to_string(c.trials) + ")"
                  : "");
  }
  return "-";
}

std::string problems_table(const bench_report& r) {
  std::string md = "| problem | level | eager ms | compile ms |";
  std::string rule = "| --- | --- | ---: | ---: |";
  for (const auto& v : r.variants) {
    md += " " + v.name + " ms | over eager | over compile | correct 1e-4 / 1e-2 | run speedup | rounds |";
    rule += " ---: | ---: | ---: | --- | ---: | ---: |";
  }
  md += " note |\n" + rule + " --- |\n";
  for (const auto& p : r.problems) {
    md += "| " + cell_text(p.name) + " | " + cell_text(p.level) + " | " + ms(p.eager_ms) + " | " + ms(p.compile_ms) +
          " |";
    std::string note;
    for (size_t v = 0; v < r.variants.size(); ++v) {
      const bench_cell c = v < p.cells.size() ? p.cells[v] : bench_cell{};
      const bool timed = c.state == measure_state::measured && c.ours_ms > 0;
      const double se = speedup_of(p.eager_ms, c.ours_ms), sc = speedup_of(p.compile_ms, c.ours_ms);
      md += " " + (timed ? ms(c.ours_ms) : "-") + " | " + (timed && se > 0 ? two_decimals(se) + "x" : "-") + " | " +
            (timed && sc > 0 ? two_decimals(sc) + "x" : "-") + " | " + correct_text(c) + " | " +
            (c.run_success ? two_decimals(c.run_speedup) + "x" : "-") + " | " +
            (c.run_done ? std::to_string(c.rounds) : "-") + " |";
      const std::string n = problem_note(p, c);
      if (!n.empty()) note += (note.empty() ? "" : " ") + (r.variants.size() > 1 ? r.variants[v].name + ": " : "") + n;
    }
    md += " " + note + " |\n";
  }
  return md;
}

}  // namespace

std::string bench_summary_markdown(const bench_report& r) {
  std::string md = "# KernelSkill bench: " + r.out_dir + "\n\n";
  std::string levels;
  for (const auto& level : report_levels(r)) {
    size_t n = 0;
    for (const auto& p : r.problems) n += p.level == level;
    levels += (levels.empty() ? "" : ", ") + level + ": " + std::to_string(n);
  }
  size_t failed_import = 0;
  for (const auto& p : r.problems) failed_import += !p.import_error.empty();
  md += "Problems: " + std::to_string(r.problems.size()) + " (" + levels + "); " +
        std::to_string(r.problems.size() - failed_import) + " imported, " + std::to_string(failed_import) +
        " not (they count as not correct). Run: coder " + r.coder + ", " + std::to_string(r.seeds) + " seeds, " +
        std::to_string(r.rounds) + " rounds; variants: ";
  for (size_t v = 0; v < r.variants.size(); ++v) md += (v ? ", " : "") + r.variants[v].name;
  md += ".\n\n";
  if (r.coder == "llm" || r.coder == "hybrid") {
    // The model's bill, per variant: what a run of this bench costs in tokens.
    md += "Model tokens (" + r.coder + " coder, the run's finished tasks):";
    for (size_t v = 0; v < r.variants.size(); ++v) {
      const token_bill b = bill_of(r, v);
      char cost[32];
      std::snprintf(cost, sizeof cost, "$%.4f", b.cost);
      md += std::string(v ? ";" : "") + " " + r.variants[v].name + " " + std::to_string(b.input) + " in, " +
            std::to_string(b.output) + " out (" + cost + ") over " + std::to_string(b.tasks) + " task" +
            (b.tasks == 1 ? "" : "s");
      if (b.tasks > 0) md += ", " + std::to_string((b.input + b.output) / b.tasks) + " per task";
    }
    md += ".\n\n";
  }
  md += "**Measurement: " + r.measurement + ".**";
  if (r.measurement_ran)
    md +=
        " Device: " + r.device + ", PyTorch " + r.torch_version + ". Eager (the problem's `Model`), torch.compile " +
        "(default mode) and ours (`ModelNew`) in one process per GPU, alternated call by call, the L2 flushed before " +
        "each call, medians of " + std::to_string(r.reps) + "; correct means every one of " + std::to_string(r.trials) +
        " trials passes `torch.allclose(model(x), model_new(x), atol=tol, rtol=tol)` on fresh inputs, at tol = 1e-4 " +
        "(KernelBench's fp32 tolerance) and at 1e-2 (KernelBench v0/v0.1).";
  md +=
      "\n\n## Metrics\n\nSpeedups are eager (or torch.compile) time / ours; arithmetic (the paper's) and "
      "geometric means over the problems correct at 1e-4 (their number in brackets); fast_p: the share of all problems "
      "that are correct at 1e-4 and "
      "more than p times faster than eager (KernelBench's definition; a problem without a kernel counts as not "
      "fast).\n\n";
  md += metrics_table(r);
  md += "\n### fast_p over torch.compile\n\n" + fast_p_compile_table(r) + compile_correct_line(r);
  md +=
      "\n## Speedup by round (the run's own reviews)\n\nThe mean of each task's best speedup over the reference "
      "after each round, as the run's reviewer measured it (round 0: the seeds), over the tasks with a kernel by "
      "then.\n\n" +
      rounds_table(r) + rounds_vs_seeds_lines(r) + ablation_lines(r);
  md += "\n## Pictures\n\n";
  const auto pictures = bench_pictures(r);
  if (pictures.empty()) md += "None yet (nothing measured and no round data).\n";
  for (const auto& [name, svg] : pictures) md += "- [" + name + "](" + name + ")\n";
  md += "\n## Per problem\n\n" + problems_table(r);
  return md;
}

namespace {

// A CSV field: quoted where it holds a comma, a quote or a line break (line breaks
// become spaces: one row a line).
std::string csv_field(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.find_first_of(",\"") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// "level2" → "2"; a directory not named levelN has no level.
std::string level_number(const std::string& level) {
  if (level.size() <= 5 || level.compare(0, 5, "level") != 0) return "";
  for (size_t i = 5; i < level.size(); ++i)
    if (level[i] < '0' || level[i] > '9') return "";
  return level.substr(5);
}

}  // namespace

std::string bench_results_csv(const bench_report& r, size_t v, const results_origin& origin) {
  std::string csv =
      "run,date,commit,device,level,problem,eager_ms,compile_ms,ours_ms,over_eager,over_compile,correct,"
      "correct_1e-2,review_speedup,rounds,max_abs_error,reverted,note\n";
  const std::string device = !r.measurement_ran ? "none (not measured)" : r.device.empty() ? "unknown" : r.device;
  const auto time = [](double x) { return x > 0 && std::isfinite(x) ? format_double("%.4f", x) : std::string(); };
  for (const auto& p : r.problems) {
    const bench_cell c = v < p.cells.size() ? p.cells[v] : bench_cell{};
    const bool measured = c.state == measure_state::measured;
    std::string correct, loose;
    if (measured) correct = c.correct_strict ? "yes" : "no", loose = c.correct_loose ? "yes" : "no";
    if (c.state == measure_state::no_kernel) correct = loose = "no";
    std::vector<std::string> notes;
    if (!origin.commit_note.empty()) notes.push_back(origin.commit_note);
    if (c.state == measure_state::pending)
      notes.push_back(r.measurement.rfind("not measured", 0) == 0 ? r.measurement : "not measured yet");
    if (c.state == measure_state::no_kernel && p.import_error.empty() && c.export_error.empty() &&
        (!c.run_done || c.run_success))
      notes.push_back("no kernel to measure");
    const std::string why = problem_note(p, c);
    if (!why.empty()) notes.push_back(why);
    std::string note;
    for (const auto& n : notes) note += (note.empty() ? "" : "; ") + n;
    const std::vector<std::string> cells = {
        origin.run,
        origin.date,
        origin.commit,
        device,
        level_number(p.level),
        p.name,
        time(p.eager_ms),
        time(p.compile_ms),
        measured ? time(c.ours_ms) : "",
        "",
        "",
        correct,
        loose,
        c.run_success && c.run_speedup > 0 && std::isfinite(c.run_speedup) ? format_double("%.4g", c.run_speedup) : "",
        c.run_done ? std::to_string(c.rounds) : "",
        measured && std::isfinite(c.max_abs_error) && c.max_abs_error >= 0 ? format_double("%.3g", c.max_abs_error)
                                                                           : "",
        "",
        note};
    for (size_t i = 0; i < cells.size(); ++i) csv += (i ? "," : "") + csv_field(cells[i]);
    csv += "\n";
  }
  return csv;
}

std::string speedup_by_round_csv(const bench_report& r) {
  const auto value = [](const std::optional<double>& x) { return x ? format_double("%.6g", *x) : std::string(); };
  std::string csv = "variant,round,tasks,of,mean,geomean\n";
  for (const auto& v : r.variants)
    for (const auto& p : v.rounds)
      csv += v.name + "," + std::to_string(p.round) + "," + std::to_string(p.tasks) + "," + std::to_string(p.of) + "," +
             value(p.mean) + "," + value(p.geomean) + "\n";
  return csv;
}

std::vector<std::pair<std::string, std::string>> bench_pictures(const bench_report& r) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto levels = report_levels(r);
  bool any_measured = false;
  std::vector<strip_row> rows;
  for (const auto& level : levels)
    for (size_t v = 0; v < r.variants.size(); ++v) {
      strip_row row;
      row.label = level + (r.variants.size() > 1 ? " · " + r.variants[v].name : "");
      for (const auto& m : measures_of(r, v, level)) {
        if (m.state != measure_state::measured) continue;
        any_measured = true;
        if (m.correct_strict) row.values.push_back(speedup_of(m.eager_ms, m.ours_ms));
      }
      rows.push_back(std::move(row));
    }
  if (any_measured)
    out.emplace_back("speedup_distribution.svg",
                     svg_strip_chart("Speedup over eager per level (problems correct at 1e-4)",
                                     "speedup over PyTorch eager (log scale; bar: geometric mean)", rows));
  std::vector<line_series> lines;
  bool any_round = false;
  for (const auto& v : r.variants) {
    line_series s{v.name, {}};
    for (const auto& p : v.rounds)
      if (p.mean) {
        s.points.emplace_back(p.round, *p.mean);
        any_round = true;
      }
    lines.push_back(std::move(s));
  }
  if (any_round)
    out.emplace_back("speedup_by_round.svg",
                     svg_line_chart("Mean best speedup by round (the run's reviews)", "round (0: seeds)",
                                    "mean speedup over the reference", lines));
  if (any_measured && r.variants.size() > 1) {
    std::vector<std::string> groups = {"correct @1e-4", "correct @1e-2"};
    for (double p : fast_p_thresholds()) groups.push_back("fast_" + plain_g(p));
    std::vector<bar_series> shares, speeds;
    for (size_t v = 0; v < r.variants.size(); ++v) {
      const metric_set m = compute_metrics(measures_of(r, v, ""));
      bar_series s{r.variants[v].name, {m.correct_rate_strict, m.correct_rate_loose}};
      for (const auto& [p, x] : m.fast_p_eager) s.values.push_back(x);
      shares.push_back(std::move(s));
      speeds.push_back({r.variants[v].name, {m.geomean_over_eager, m.geomean_over_compile}});
    }
    out.emplace_back("ablation.svg", svg_bar_chart("Ablation: correctness and fast_p over eager (all problems)",
                                                   "share of problems", groups, shares, 1.0));
    out.emplace_back("ablation_speedup.svg",
                     svg_bar_chart("Ablation: geometric-mean speedup (problems correct at 1e-4)", "speedup",
                                   {"over eager", "over torch.compile"}, speeds));
  }
  return out;
}

}  // namespace ks
