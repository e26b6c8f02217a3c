// The token bill where a user reads it: per task and per run in `kernelskill run`'s
// summary, per problem and per variant in `kernelskill bench`'s. Pure report functions.

#include <catch2/catch.hpp>

#include "report/bench_summary.hpp"
#include "report/run_report.hpp"

using Catch::Matchers::Contains;

namespace {

ks::task_outcome outcome(const std::string& task, int64_t in, int64_t out, double cost) {
  ks::task_outcome o;
  o.task = task;
  o.success = true;
  o.best_review.speedup = 1.5;
  o.input_tokens = in;
  o.output_tokens = out;
  o.cost_usd = cost;
  o.reason = "round budget spent";
  return o;
}

ks::bench_report report(const std::string& coder) {
  ks::bench_report r;
  r.out_dir = "out";
  r.coder = coder;
  r.variants.push_back({"full", true, true, {}, {}});
  r.variants.push_back({"no-ltm", false, true, {}, {}});
  for (int i = 0; i < 2; ++i) {
    ks::bench_problem p;
    p.key = "level1/p" + std::to_string(i);
    p.name = "p" + std::to_string(i);
    p.level = "level1";
    for (int v = 0; v < 2; ++v) {
      ks::bench_cell c;
      c.run_done = true;
      c.run_success = true;
      c.input_tokens = 1000 * (v + 1);
      c.output_tokens = 100 * (v + 1);
      c.cost_usd = 0.01 * (v + 1);
      p.cells.push_back(c);
    }
    r.problems.push_back(p);
  }
  return r;
}

}  // namespace

TEST_CASE("the run summary bills tokens and cost per task and per run", "[llm][accounting]") {
  ks::run_summary s;
  s.experiment = "e";
  s.coder = "hybrid";
  s.outcomes = {outcome("a", 12000, 800, 0.0456), outcome("b", 0, 0, 0)};
  const std::string md = ks::summary_markdown(s);
  CHECK_THAT(md, Contains("Tokens: 12000 in, 800 out ($0.0456), 6400 per task."));
  CHECK_THAT(md, Contains("| tokens in / out | cost |"));
  CHECK_THAT(md, Contains("| 12000 / 800 | $0.0456 |"));
  CHECK_THAT(md, Contains("| 0 / 0 | $0.0000 |"));
}

TEST_CASE("the bench summary bills each variant's run when a model wrote kernels", "[llm][accounting]") {
  const auto r = report("hybrid");
  const std::string md = ks::bench_summary_markdown(r);
  CHECK_THAT(md,
             Contains("Model tokens (hybrid coder, the run's finished tasks): full 2000 in, 200 out ($0.0200) "
                      "over 2 tasks, 1100 per task; no-ltm 4000 in, 400 out ($0.0400) over 2 tasks, 2200 per task."));
  const auto j = ks::bench_summary_json(r);
  CHECK(j["variants"][0]["llm"]["input_tokens"] == 2000);
  CHECK(j["variants"][1]["llm"]["output_tokens"] == 400);
  CHECK(j["variants"][1]["llm"]["cost_usd"].get<double>() == Approx(0.04));
  CHECK(j["problems"][0]["variants"]["no-ltm"]["input_tokens"] == 2000);
  // The rules coder spends nothing: no bill line.
  CHECK_THAT(ks::bench_summary_markdown(report("rules")), !Contains("Model tokens"));
}
