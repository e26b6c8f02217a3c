// `kernelskill bench PROBLEMS… --out DIR`: KernelBench problems imported, optimised
// per ablation variant, exported, and measured side by side with eager and
// torch.compile, with KernelBench's and the paper's metrics in summary.md/json and
// pictures (docs/bench.md). The steps are in cli/bench_*.cpp; this file checks the
// request, makes the config and runs the steps in order.

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "cli/bench_steps.hpp"
#include "cli/build_commit.hpp"
#include "cli/commands.hpp"
#include "cli/run_setup.hpp"

namespace ks::cli {

namespace fs = std::filesystem;

namespace bench {

void progress(const std::string& step, const std::string& text) {
  std::fprintf(stderr, "kernelskill bench: [%s] %s\n", step.c_str(), text.c_str());
  std::fflush(stderr);
}

std::string read_text_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

nlohmann::json read_json_file(const fs::path& path) {
  return nlohmann::json::parse(read_text_file(path), nullptr, false);
}

namespace {

const std::vector<variant>& known_variants() {
  static const std::vector<variant> v = {
      {"full", true, true}, {"no-ltm", false, true}, {"no-stm", true, false}, {"no-ltm-stm", false, false}};
  return v;
}

}  // namespace

result<std::vector<variant>> parse_variants(const std::string& list) {
  std::vector<variant> out;
  std::set<std::string> seen;
  std::string known;
  for (const auto& v : known_variants()) known += (known.empty() ? "" : ", ") + v.name;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    std::string name = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (name.empty()) return error{"--ablation: an empty variant name in '" + list + "' (known: " + known + ")"};
    const variant* found = nullptr;
    for (const auto& v : known_variants())
      if (v.name == name) found = &v;
    if (!found) return error{"--ablation: unknown variant '" + name + "' (known: " + known + ")"};
    if (!seen.insert(name).second) return error{"--ablation: variant '" + name + "' is named twice"};
    out.push_back(*found);
  }
  return out;
}

variant variant_of(const ablation_config& a) {
  for (const auto& v : known_variants())
    if (v.long_term_memory == a.long_term_memory && v.short_term_memory == a.short_term_memory) return v;
  return known_variants().front();
}

}  // namespace bench

namespace {

// The bench's config: --config's (or the defaults), with the flags on top.
result<experiment_config> bench_config(const bench_request& r, const global_options& g) {
  auto cfg = load_for_command(r.config_path, g);
  if (!cfg) return cfg;
  if (r.seeds) cfg->budgets.seeds = *r.seeds;
  if (r.rounds) cfg->budgets.rounds = *r.rounds;
  if (!r.coder.empty()) cfg->coder.backend = r.coder;
  if (!r.devices.empty()) {
    cfg->gpus.local_all = false;
    cfg->gpus.local_devices = r.devices;
  }
  if ((cfg->coder.backend == "llm" || cfg->coder.backend == "hybrid") &&
      (cfg->coder.llm.endpoint.empty() || cfg->coder.llm.model.empty()))
    return error{"--coder " + cfg->coder.backend +
                 " needs the model's endpoint: give --config with coder.llm.endpoint "
                 "and coder.llm.model (docs/llm.md)"};
  if (cfg->budgets.seeds < 1) return error{"--seeds: at least 1"};
  if (cfg->budgets.rounds < 0) return error{"--rounds: 0 or more"};
  return cfg;
}

bool is_commit(const std::string& s) {
  return s.size() >= 7 && s.size() <= 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// What the per-problem rows name: the run, today's date (UTC), and the commit (--commit,
// else the one the binary was built from; where that had uncommitted changes, or git
// could not tell, the rows' note says so rather than name a commit that did not run).
results_origin results_origin_of(const bench_request& r, const bench::layout& l) {
  results_origin o;
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof date, "%Y-%m-%d", &utc);
  o.date = date;
  o.run = !r.run_name.empty() ? r.run_name : o.date + " kernelskill bench " + l.root.filename().string();
  if (!r.commit.empty()) {
    o.commit = r.commit;
    return o;
  }
  const std::string built(build_commit());
  const std::string hash = built.substr(0, built.find('+'));
  if (is_commit(hash)) {
    o.commit = hash;
    if (hash != built) o.commit_note = "kernelskill was built from " + hash + " with uncommitted changes";
  } else {
    o.commit = "unknown";
    o.commit_note = "commit unknown: kernelskill was built without git metadata (name it with --commit)";
  }
  return o;
}

}  // namespace

int bench_problems(const bench_request& r, const global_options& g) {
  using namespace bench;
  auto cfg = bench_config(r, g);
  if (!cfg) {
    std::cerr << "kernelskill bench: " << cfg.message() << "\n";
    return 1;
  }
  std::vector<variant> variants;
  if (r.ablation.empty()) {
    variants = {variant_of(cfg->ablation)};
  } else if (auto parsed = parse_variants(r.ablation)) {
    variants = std::move(*parsed);
  } else {
    std::cerr << "kernelskill bench: " << parsed.message() << "\n";
    return 2;
  }
  if (!r.commit.empty() && !is_commit(r.commit)) {
    std::cerr << "kernelskill bench: --commit '" << r.commit << "' is not a commit (7 to 40 lowercase hex digits)\n";
    return 2;
  }
  std::error_code ec;
  fs::create_directories(r.out_dir, ec);
  if (ec) {
    std::cerr << "kernelskill bench: cannot create " << r.out_dir << ": " << ec.message() << "\n";
    return 1;
  }
  const layout l{fs::absolute(r.out_dir).lexically_normal()};
  const unsigned jobs = r.jobs ? r.jobs : std::max(1u, std::thread::hardware_concurrency() / 2);

  kernelbench_import_options io;
  io.python = r.python;
  io.seed = r.seed;
  // A task every variant has finished and exported needs its module no more (a fresh
  // machine resuming the bench from its tarball, which leaves the modules out, does not
  // write them again: 100 s of a 65-problem resume on an H100).
  auto problems =
      import_step(l, r.paths, io, jobs, [&](const problem& p) { return !finished_everywhere(l, variants, p.name); });
  if (!problems) {
    std::cerr << "kernelskill bench: " << problems.message() << "\n";
    return 1;
  }
  measure_outcome measured{0, false, "not run"};
  int status = 0;
  measure_settings ms{r.python,        r.devices,         r.reps, r.trials, r.compile_timeout,
                      r.build_timeout, r.problem_timeout, jobs,   r.seed};
  std::optional<early_measurement> early;
  if (r.overlap) early.emplace(l, *problems, ms);
  for (const auto& v : variants) {
    if (early) early->running(&v);
    const int rc = run_step(l, v, *cfg, *problems);
    if (early) early->running(nullptr);
    if (rc == 3) {
      measured = {3, false, "not measured: the run found no GPU to review kernels on (see the message above)"};
      status = 3;
      break;
    }
    if (rc != 0) return rc;
    if (auto st = export_step(l, v, *problems); !st) {
      std::cerr << "kernelskill bench: " << st.message() << "\n";
      return 1;
    }
  }
  if (early) early->finish();
  if (status == 0) {
    measured = measure_step(l, variants, *problems, ms);
    status = measured.status;
  }
  const bench_report report = gather(l, variants, *problems, {*cfg, measured, r.reps, r.trials});
  if (auto st = write_summary_files(l, report, results_origin_of(r, l)); !st) {
    std::cerr << "kernelskill bench: " << st.message() << "\n";
    return 1;
  }
  std::printf("kernelskill bench: %s: %s\n", l.root.string().c_str(), measured.summary.c_str());
  for (size_t v = 0; v < variants.size(); ++v) {
    const metric_set m = compute_metrics(measures_of(report, v, ""));
    auto share = [](const std::optional<double>& x) {
      return x ? std::to_string(static_cast<int>(100 * *x + 0.5)) + "%" : "-";
    };
    auto times = [](const std::optional<double>& x) { return x ? std::to_string(*x).substr(0, 5) + "x" : "-"; };
    std::printf(
        "  %s: %zu problems, correct %s at 1e-4 (%s at 1e-2), mean %s and geomean %s over eager, %s over "
        "torch.compile, fast_1 %s\n",
        variants[v].name.c_str(), m.problems, share(m.correct_rate_strict).c_str(), share(m.correct_rate_loose).c_str(),
        times(m.mean_over_eager).c_str(), times(m.geomean_over_eager).c_str(), times(m.geomean_over_compile).c_str(),
        share(m.fast_p_eager[1].second).c_str());
  }
  std::printf("  summary.md, summary.json, the pictures and the per-problem rows (results-VARIANT.csv) are in %s\n",
              l.root.string().c_str());
  return status;
}

}  // namespace ks::cli
