// `kernelskill bench`: the summary's input gathered from what the steps left in the
// output directory (import records, each variant's outcomes, rounds and export record,
// the measurement's rows), and the summary files written from it
// (report/bench_summary.hpp). Gathering reads files only, so the summary is the same
// whether the steps ran now or in an earlier invocation.

#include "cli/bench_steps.hpp"
#include "report/run_report.hpp"

namespace ks::cli::bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

double number(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<double>();
}

std::string text(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// The measured row's part for one variant, into the cell.
void measured_cell(const json& m, bench_cell& c) {
  c.state = measure_state::measured;
  const json& correct = m.contains("correct") ? m["correct"] : json();
  const json& passed = m.contains("passed") ? m["passed"] : json();
  c.correct_strict = correct.is_object() && correct.value("0.0001", false);
  c.correct_loose = correct.is_object() && correct.value("0.01", false);
  c.trials = static_cast<uint32_t>(number(m, "trials"));
  c.passed_strict = passed.is_object() ? passed.value("0.0001", 0u) : 0u;
  c.passed_loose = passed.is_object() ? passed.value("0.01", 0u) : 0u;
  c.max_abs_error = number(m, "max_abs_error");
  c.ours_ms = number(m, "ours_ms");
  c.error = text(m, "error");
}

bench_cell cell_of(const layout& l, const variant& v, const problem& p, const json& exports, const json& row) {
  bench_cell c;
  if (!p.ok()) {
    c.state = measure_state::no_kernel;
    return c;
  }
  const json outcome = read_json_file(l.run_dir(v.name) / "tasks" / safe_name(p.name) / "outcome.json");
  if (!outcome.is_object()) return c;  // the run has not finished it: pending
  c.run_done = true;
  c.run_success = outcome.value("success", false);
  c.run_reason = text(outcome, "reason");
  c.run_speedup = number(outcome, "speedup");
  c.rounds = static_cast<uint32_t>(number(outcome, "rounds"));
  c.reviews = static_cast<uint32_t>(number(outcome, "reviews"));
  c.input_tokens = static_cast<int64_t>(number(outcome, "input_tokens"));
  c.output_tokens = static_cast<int64_t>(number(outcome, "output_tokens"));
  c.cost_usd = number(outcome, "cost_usd");
  if (!c.run_success) {
    c.state = measure_state::no_kernel;
    return c;
  }
  const json& e = exports.contains(p.name) ? exports[p.name] : json();
  if (!e.is_object()) return c;  // not exported yet
  c.export_error = text(e, "error");
  c.exported = c.export_error.empty() && !text(e, "file").empty();
  if (!c.exported) {
    c.state = measure_state::no_kernel;
    return c;
  }
  const json& m = row.is_object() && row.contains("variants") && row["variants"].contains(v.name)
                      ? row["variants"][v.name]
                      : json();
  // Measured, and measured as it is exported now; a failed row leaves the cell pending.
  if (m.is_object() && !measurement_failed(row) &&
      text(m, "sha256") == file_sha256(l.models_dir(v.name) / text(e, "file")))
    measured_cell(m, c);
  return c;
}

}  // namespace

bench_report gather(const layout& l, const std::vector<variant>& variants, const std::vector<problem>& problems,
                    const gather_settings& s) {
  bench_report r;
  r.out_dir = l.root.string();
  r.measurement = s.measurement.summary;
  r.measurement_ran = s.measurement.ran;
  r.coder = s.config.coder.backend;
  r.seeds = s.config.budgets.seeds;
  r.rounds = s.config.budgets.rounds;
  r.reps = s.reps;
  r.trials = s.trials;
  std::vector<json> exports;
  std::map<std::string, task_moves> moves;                                                    // by variant
  std::map<std::string, std::vector<std::pair<std::string, std::vector<double>>>> by_review;  // by variant
  for (const auto& v : variants) {
    exports.push_back(read_export_record(l, v));
    bench_variant bv;
    bv.name = v.name;
    bv.long_term_memory = v.long_term_memory;
    bv.short_term_memory = v.short_term_memory;
    const json rounds = read_json_file(l.variant_dir(v.name) / "rounds.json");
    std::vector<std::vector<double>> per_task;
    std::vector<std::pair<std::string, std::vector<double>>> named;
    const auto section = [&](const char* key) -> const json* {
      return rounds.is_object() && rounds.contains(key) && rounds[key].is_object() ? &rounds[key] : nullptr;
    };
    if (const json* tasks = section("tasks"))
      for (const auto& p : problems)
        if (p.ok() && tasks->contains(p.name)) {
          per_task.push_back((*tasks)[p.name].get<std::vector<double>>());
          named.emplace_back(p.name, per_task.back());
        }
    if (const json* reviews = section("by_review"))
      for (const auto& p : problems)
        if (p.ok() && reviews->contains(p.name))
          by_review[v.name].emplace_back(p.name, (*reviews)[p.name].get<std::vector<double>>());
    if (const json* m = section("moves")) {
      bv.moves_known = true;
      for (const auto& p : problems) {
        if (!p.ok() || !m->contains(p.name)) continue;
        std::vector<move_attempt> list;
        for (const auto& a : (*m)[p.name])
          if (a.is_array() && a.size() == 3)
            list.push_back({a[0].get<std::string>(), a[1].get<std::string>(), a[2].get<std::string>()});
        moves[v.name].emplace_back(p.name, std::move(list));
      }
      bv.moves = count_moves(moves[v.name]);
    }
    bv.rounds = speedup_by_round(per_task);
    bv.vs_seeds = compare_rounds_to_seeds(named);
    r.variants.push_back(std::move(bv));
  }
  // The ablation's comparisons with the full variant.
  for (auto& bv : r.variants)
    if (bv.name != "full" && by_review.count("full") && by_review.count(bv.name))
      bv.full_vs_this = compare_at_equal_reviews(by_review["full"], by_review[bv.name]);
  const auto has = [&](const std::string& name) {
    for (const auto& bv : r.variants)
      if (bv.name == name && bv.moves_known) return true;
    return false;
  };
  if (has("full") && has("no-stm")) r.stm_check = repeats_found_in(moves["no-stm"], moves["full"]);
  const auto rows = read_measurements(l);
  for (const auto& p : problems) {
    bench_problem bp;
    bp.key = p.key;
    bp.name = p.name;
    bp.level = p.level;
    bp.file = p.source.string();
    bp.import_error = p.error;
    const json row = rows.count(p.key) ? rows.at(p.key) : json();
    if (row.is_object()) {
      bp.eager_ms = number(row, "eager_ms");
      bp.compile_ms = number(row, "compile_ms");
      bp.compile_error = text(row, "compile_error");
      if (const std::string t = text(row, "compile_check_error"); !t.empty())
        bp.compile_error += (bp.compile_error.empty() ? "" : "; ") + t;
      bp.compile_trials = static_cast<uint32_t>(number(row, "compile_trials"));
      if (row.contains("compile_passed") && row["compile_passed"].is_object())
        bp.compile_passed_strict = row["compile_passed"].value("0.0001", 0u);
      bp.compile_max_abs_error = number(row, "compile_max_abs_error");
      bp.error = text(row, "error");
      if (const std::string t = text(row, "timing_error"); !t.empty()) bp.error += (bp.error.empty() ? "" : "; ") + t;
      if (r.device.empty() && row.value("timed", false)) {
        r.device = text(row, "device");
        r.torch_version = text(row, "torch");
      }
    }
    for (size_t k = 0; k < variants.size(); ++k) bp.cells.push_back(cell_of(l, variants[k], p, exports[k], row));
    r.problems.push_back(std::move(bp));
  }
  return r;
}

status write_summary_files(const layout& l, const bench_report& r, const results_origin& origin) {
  if (auto st = write_file_atomically(l.root / "summary.json", bench_summary_json(r).dump(1) + "\n"); !st) return st;
  if (auto st = write_file_atomically(l.root / "summary.md", bench_summary_markdown(r)); !st) return st;
  if (auto st = write_file_atomically(l.root / "speedup_by_round.csv", speedup_by_round_csv(r)); !st) return st;
  for (size_t v = 0; v < r.variants.size(); ++v)
    if (auto st =
            write_file_atomically(l.root / ("results-" + r.variants[v].name + ".csv"), bench_results_csv(r, v, origin));
        !st)
      return st;
  for (const auto& [name, svg] : bench_pictures(r))
    if (auto st = write_file_atomically(l.root / name, svg); !st) return st;
  return {};
}

}  // namespace ks::cli::bench
