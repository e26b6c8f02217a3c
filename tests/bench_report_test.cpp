// `kernelskill bench`'s numbers and pictures as pure functions, checked against values
// computed by hand: geometric means, KernelBench's fast_p (incorrect problems are not
// fast, a speedup of exactly p is not greater than p, problems without a kernel count),
// the run's best speedup by round from a trajectory, the SVG charts (where a value must
// be drawn, escaping, well-formed XML) and the summary (null, never 0, for what was not
// measured).

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "report/bench_metrics.hpp"
#include "report/bench_summary.hpp"
#include "report/svg_chart.hpp"
#include "tests/support/command_output.hpp"

using namespace ks;
using Catch::Matchers::Contains;

namespace {

problem_measure measured(bool correct, double eager_ms, double ours_ms, double compile_ms = 0, bool loose = false) {
  problem_measure m;
  m.state = measure_state::measured;
  m.correct_strict = correct;
  m.correct_loose = correct || loose;
  m.eager_ms = eager_ms;
  m.ours_ms = ours_ms;
  m.compile_ms = compile_ms;
  return m;
}

problem_measure with_state(measure_state s) {
  problem_measure m;
  m.state = s;
  return m;
}

// The x coordinates of every <circle> in an SVG text.
std::vector<std::string> circle_xs(const std::string& svg) {
  std::vector<std::string> xs;
  std::regex re("<circle cx=\"([0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    xs.push_back((*it)[1]);
  return xs;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Parses the text as XML with python3's parser: exit 0 when it is well-formed.
bool well_formed_xml(const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("ks-bench-svg-" + std::to_string(::getpid()) + ".svg");
  std::ofstream(path) << text;
  auto out = ks::test::run_shell("python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' " +
                                 path.string() + " 2>&1");
  std::filesystem::remove(path);
  INFO(out.text);
  return out.status == 0;
}

}  // namespace

TEST_CASE("geometric means are over positive finite values, and absent when there are none", "[bench][metrics]") {
  CHECK(*geometric_mean({2, 8}) == Approx(4));
  CHECK(*geometric_mean({1, 4, 16}) == Approx(4));
  CHECK(*geometric_mean({2, 0, 8, -3, NAN, INFINITY}) == Approx(4));
  CHECK_FALSE(geometric_mean({}).has_value());
  CHECK_FALSE(geometric_mean({0, -1, NAN}).has_value());
  CHECK(speedup_of(3, 1.5) == 2);
  CHECK(speedup_of(0, 1) == 0);
  CHECK(speedup_of(1, 0) == 0);
}

TEST_CASE("fast_p counts correct problems faster than p, strictly, over every problem whose outcome is known",
          "[bench][metrics]") {
  const std::vector<problem_measure> ps = {
      measured(true, 2.0, 1.0, 1.0),         // 2.0x over eager (exactly 2), 1.0x over compile (exactly 1)
      measured(true, 1.5, 1.0, 3.0),         // 1.5x (exactly 1.5), 3.0x over compile
      measured(true, 1.0, 1.0),              // 1.0x, compile not timed
      measured(false, 4.0, 1.0, 1.0, true),  // 4x but wrong at 1e-4 (right at 1e-2): not fast
      with_state(measure_state::no_kernel),  // no kernel: in the denominator, not fast
      with_state(measure_state::pending),    // not measured yet: left out
  };
  // Known: 5 problems.
  CHECK(*fast_p(ps, 0, baseline::eager) == Approx(3.0 / 5));
  CHECK(*fast_p(ps, 1, baseline::eager) == Approx(2.0 / 5));    // 2.0 and 1.5; 1.0 is not > 1
  CHECK(*fast_p(ps, 1.5, baseline::eager) == Approx(1.0 / 5));  // 2.0 only; 1.5 is not > 1.5
  CHECK(*fast_p(ps, 2, baseline::eager) == Approx(0.0));        // 2.0 is not > 2
  CHECK(*fast_p(ps, 0, baseline::compile) == Approx(2.0 / 5));  // 1.0x and 3.0x; the third has no compile time
  CHECK(*fast_p(ps, 1, baseline::compile) == Approx(1.0 / 5));

  const metric_set m = compute_metrics(ps);
  CHECK(m.problems == 6);
  CHECK(m.known == 5);
  CHECK(m.measured == 4);
  CHECK(m.correct_strict == 3);
  CHECK(m.correct_loose == 4);
  CHECK(*m.correct_rate_strict == Approx(0.6));
  CHECK(*m.correct_rate_loose == Approx(0.8));
  CHECK(*m.geomean_over_eager == Approx(std::cbrt(2.0 * 1.5 * 1.0)));  // the correct ones only
  CHECK(m.geomean_over_eager_n == 3);
  CHECK(*m.mean_over_eager == Approx((2.0 + 1.5 + 1.0) / 3));  // the paper's arithmetic mean, same problems
  CHECK(*m.geomean_over_compile == Approx(std::sqrt(1.0 * 3.0)));
  CHECK(m.geomean_over_compile_n == 2);
  // torch.compile against eager wherever both were timed: 2/1, 1.5/3, 4/1.
  CHECK(*m.compile_over_eager == Approx(std::cbrt(2.0 * 0.5 * 4.0)));
  REQUIRE(m.fast_p_eager.size() == 4);
  CHECK(m.fast_p_eager[2].first == 1.5);
  CHECK(*m.fast_p_eager[2].second == Approx(0.2));
}

TEST_CASE("nothing measured gives no rates, means or fast_p, not zeros", "[bench][metrics]") {
  const std::vector<problem_measure> ps = {with_state(measure_state::pending), with_state(measure_state::pending)};
  const metric_set m = compute_metrics(ps);
  CHECK(m.known == 0);
  CHECK_FALSE(m.correct_rate_strict.has_value());
  CHECK_FALSE(m.geomean_over_eager.has_value());
  CHECK_FALSE(m.mean_over_eager.has_value());
  for (const auto& [p, v] : m.fast_p_eager) CHECK_FALSE(v.has_value());
  // Problems known to have no kernel are known: 0% correct, fast_p 0 (KernelBench's n).
  const metric_set none = compute_metrics({with_state(measure_state::no_kernel)});
  CHECK(*none.correct_rate_strict == 0);
  CHECK(*none.fast_p_eager[0].second == 0);
  CHECK_FALSE(none.geomean_over_eager.has_value());
}

TEST_CASE("the best speedup by round is the running maximum of the reviews the run keeps", "[bench][metrics]") {
  auto review = [](uint32_t round, review_status st, double speedup, std::string summary = "") {
    trajectory_entry e;
    e.kind = "review";
    e.round = round;
    e.status = st;
    e.speedup = speedup;
    e.summary = std::move(summary);
    return e;
  };
  trajectory_entry plan;
  plan.kind = "plan";
  plan.round = 1;
  plan.speedup = 9;  // not a review
  const std::vector<trajectory_entry> t = {
      review(0, review_status::incorrect, 0),
      review(0, review_status::ok, 1.2),
      plan,
      review(1, review_status::ok, 25,
             "origin x: ok, speedup 25.00. Flag speedup_above_threshold: a speedup above 20x"),
      review(1, review_status::ok, 1.1),
      review(2, review_status::ok, 3.0,
             "origin y: ok. Flag output_independent_of_input: its outputs in trials 0 and 1"),
      review(2, review_status::ok, 1.8),
      review(3, review_status::crashed, 0),
  };
  CHECK(best_by_round(t, 3) == std::vector<double>{1.2, 1.2, 1.8, 1.8});
  // A task whose first kept kernel came in round 1.
  const std::vector<trajectory_entry> late = {review(0, review_status::compile_error, 0),
                                              review(1, review_status::ok, 1.3)};
  CHECK(best_by_round(late, 3) == std::vector<double>{0, 1.3, 1.3, 1.3});

  const auto points = speedup_by_round({best_by_round(t, 3), best_by_round(late, 3)});
  REQUIRE(points.size() == 4);
  CHECK(points[0].tasks == 1);
  CHECK(points[0].of == 2);
  CHECK(*points[0].mean == Approx(1.2));
  CHECK(points[1].tasks == 2);
  CHECK(*points[1].mean == Approx(1.25));
  CHECK(*points[1].geomean == Approx(std::sqrt(1.2 * 1.3)));
  CHECK(*points[3].mean == Approx(1.55));
  CHECK_FALSE(speedup_by_round({{0, 0}})[0].mean.has_value());
}

TEST_CASE("the rounds against the seeds: which tasks the rounds made faster, and by how much", "[bench][metrics]") {
  const rounds_vs_seeds s = compare_rounds_to_seeds({
      {"flat", {1.5, 1.5}},      // the rounds found nothing faster
      {"small", {2.0, 2.02}},    // faster, within 2 %
      {"big", {1.0, 1.25}},      // faster by 25 %
      {"also_big", {2.0, 2.5}},  // the same gain: ties by name
      {"late", {0, 1.3}},        // no seed kernel: a round found the first
      {"none", {0, 0}},          // no kernel at all
      {"empty", {}},
  });
  CHECK(s.tasks == 4);
  CHECK(s.beat == 3);
  CHECK(s.beat_by_2pct == 2);
  CHECK(s.rescued == 1);
  REQUIRE(s.geomean_gain.has_value());
  CHECK(*s.geomean_gain == Approx(std::cbrt(1.01 * 1.25 * 1.25)));
  REQUIRE(s.gains.size() == 3);
  CHECK(s.gains[0].first == "also_big");
  CHECK(s.gains[1].first == "big");
  CHECK(s.gains[2].first == "small");
  CHECK(s.gains[2].second == Approx(1.01));
  CHECK_FALSE(compare_rounds_to_seeds({{"flat", {1.5, 1.5}}}).geomean_gain.has_value());

  bench_report r;
  r.out_dir = "out";
  r.variants = {{"full", true, true, speedup_by_round({{1.5, 1.5}, {1.0, 1.25}}), {}}};
  r.variants[0].vs_seeds = compare_rounds_to_seeds({{"flat", {1.5, 1.5}}, {"big", {1.0, 1.25}}});
  const std::string md = bench_summary_markdown(r);
  CHECK_THAT(md, Contains("The rounds beat the best seed on 1 of 2 tasks with a seed kernel (by more than 2 % on 1), "
                          "by 1.250x in geometric mean where they did (big 1.250x)."));
  const auto j = bench_summary_json(r);
  CHECK(j["variants"][0]["rounds_vs_seeds"]["beat"] == 1);
  CHECK(j["variants"][0]["rounds_vs_seeds"]["gains"][0]["task"] == "big");
  // Seeds only (no round after them): no such line.
  r.variants[0].rounds = speedup_by_round({{1.5}, {1.0}});
  CHECK_THAT(bench_summary_markdown(r), !Contains("rounds beat the best seed"));
}

// The ablation's numbers (issue 48): the moves of a trajectory, how many repeat a move
// of the same task, the short-term memory's check across two variants, the best
// speedup by review and two variants compared at the same number of reviews.
TEST_CASE("moves, repeats, the short-term memory check and the comparison at equal reviews", "[bench][metrics]") {
  auto entry = [](const std::string& kind, const std::string& cand, const std::string& parent,
                  const std::string& method, double speedup, double review_s) {
    trajectory_entry e;
    e.kind = kind;
    e.candidate_id = cand;
    e.parent_id = parent;
    e.method = method;
    e.speedup = speedup;
    e.phases.compile_s = review_s;
    return e;
  };
  // s0 (seed, 1.0) --a--> k1 (0.8, slower) --back--; a again on s0 (no review: the
  // kernel is known); b on s0 -> k2 (1.5).
  const std::vector<trajectory_entry> t = {
      entry("review", "s0", "", "", 1.0, 0.5),  entry("plan", "s0", "", "a", 0, 0),
      entry("optimize", "k1", "s0", "a", 0, 0), entry("review", "k1", "s0", "a", 0.8, 0.5),
      entry("review", "k1", "s0", "a", 0.8, 0), entry("review", "k2", "s0", "b", 1.5, 0.5),
  };
  const auto moves = moves_of(t);
  REQUIRE(moves.size() == 3);
  CHECK(moves[0] == move_attempt{"s0", "a", "k1"});
  CHECK(moves[2] == move_attempt{"s0", "b", "k2"});
  // Reviews that ran: three (the repeated one has no review time).
  CHECK(best_by_review(t) == std::vector<double>{1.0, 1.0, 1.5});

  const task_moves no_stm = {{"t1", moves}, {"t2", {{"s9", "c", "k9"}, {"s9", "c", "k9"}}}};
  const move_counts c = count_moves(no_stm);
  CHECK(c.tasks == 2);
  CHECK(c.attempts == 5);
  CHECK(c.distinct == 3);
  CHECK(c.repeated == 2);
  // full made a on s0 in t1 (once), and c on s9 only in another task.
  const task_moves full = {{"t1", {{"s0", "a", "k1"}, {"k1", "b", "k3"}}}, {"t3", {{"s9", "c", "k9"}}}};
  CHECK(count_moves(full).repeated == 0);
  const repeat_check check = repeats_found_in(no_stm, full);
  CHECK(check.repeated == 2);
  CHECK(check.in_other == std::vector<std::string>{"t1: a on s0"});
  CHECK_FALSE(check.holds());
  CHECK(repeats_found_in(no_stm, {{"t1", {{"s0", "b", "k2"}}}}).holds());
  CHECK(repeats_found_in(full, no_stm).repeated == 0);

  // At equal reviews: t1: a has 3 reviews ending at 1.5, b has 2 ending at 1.2, so
  // after 2 reviews 1.0 against 1.2; t2: 2.0 against 1.0 after 1; t3 only in a.
  const auto eq = compare_at_equal_reviews({{"t1", {1.0, 1.0, 1.5}}, {"t2", {2.0, 2.0}}, {"t3", {1.0}}},
                                           {{"t1", {1.0, 1.2}}, {"t2", {1.0}}});
  CHECK(eq.tasks == 2);
  CHECK(*eq.geomean == Approx(std::sqrt(1.0 / 1.2 * 2.0)));
  CHECK(eq.mean_reviews_a == Approx(2.5));
  CHECK(eq.mean_reviews_b == Approx(1.5));
  // A task with no kept kernel by then is left out; none left: no mean.
  CHECK_FALSE(compare_at_equal_reviews({{"t1", {0, 1.0}}}, {{"t1", {1.0}}}).geomean.has_value());
}

TEST_CASE("the bench summary reports the ablation's reviews, moves and checks, and the curves as CSV",
          "[bench][summary]") {
  bench_report r;
  r.out_dir = "out";
  r.coder = "rules";
  bench_variant full{"full", true, true, speedup_by_round({{1.0, 1.5}, {1.0, 1.25}}), {}};
  full.moves = {2, 3, 3, 0};
  full.moves_known = true;
  bench_variant no_stm{"no-stm", true, false, speedup_by_round({{1.0, 1.1}, {1.0, 1.0}}), {}};
  no_stm.moves = {2, 4, 2, 2};
  no_stm.moves_known = true;
  no_stm.full_vs_this = equal_reviews{2, 1.2, 3, 2};
  r.variants = {full, no_stm};
  repeat_check check;
  check.repeated = 2;
  check.in_other = {"t1: a on s0"};
  r.stm_check = check;
  bench_problem p;
  p.key = "level1/t1";
  p.name = "t1";
  p.level = "level1";
  bench_cell cell;
  cell.run_done = cell.run_success = true;
  cell.reviews = 7;
  p.cells = {cell, cell};
  p.cells[1].reviews = 3;
  r.problems = {p};
  const auto j = bench_summary_json(r);
  CHECK(j["variants"][0]["reviews"]["total"] == 7);
  CHECK(j["variants"][1]["reviews"]["per_task"] == 3.0);
  CHECK(j["variants"][0]["moves"]["repeated"] == 0);
  CHECK(j["variants"][1]["moves"]["repeated"] == 2);
  CHECK_FALSE(j["variants"][0].contains("full_at_equal_reviews"));
  CHECK(j["variants"][1]["full_at_equal_reviews"]["geomean_full_over_this"] == 1.2);
  CHECK(j["short_term_memory_check"]["holds"] == false);
  CHECK(j["short_term_memory_check"]["of_them_in_full"] == 1);
  CHECK(j["problems"][0]["variants"]["no-stm"]["reviews"] == 3);
  const std::string md = bench_summary_markdown(r);
  CHECK_THAT(md, Contains("full: 7 reviews over 1 task (7.0 per task); 3 moves tried, 0 of them a repeat"));
  CHECK_THAT(md, Contains("full over no-stm at the same number of reviews: 1.200x in geometric mean over 2 tasks"));
  CHECK_THAT(md, Contains("Short-term memory check (no-stm repeats no move that full's trajectories hold): does not "
                          "hold; no-stm repeated 2 moves, 1 of them in full's trajectories (t1: a on s0)."));
  CHECK(speedup_by_round_csv(r) ==
        "variant,round,tasks,of,mean,geomean\n"
        "full,0,2,2,1,1\n"
        "full,1,2,2,1.375,1.36931\n"
        "no-stm,0,2,2,1,1\n"
        "no-stm,1,2,2,1.05,1.04881\n");
  // Without the moves (a rounds.json from before them): null, not zero.
  r.variants[0].moves_known = false;
  r.stm_check.reset();
  const auto k = bench_summary_json(r);
  CHECK(k["variants"][0]["moves"].is_null());
  CHECK_FALSE(k.contains("short_term_memory_check"));
}

TEST_CASE("a log2 axis spans powers of two around the values and 1", "[bench][svg]") {
  const log2_axis a = fit_log2_axis({0.3, 3}, 100, 500);
  CHECK(a.lo == 0.25);
  CHECK(a.hi == 4);
  CHECK(a.ticks() == std::vector<double>{0.25, 0.5, 1, 2, 4});
  CHECK(a.to_px(1) == Approx(300));
  CHECK(a.to_px(0.25) == Approx(100));
  CHECK(a.to_px(4) == Approx(500));
  const log2_axis b = fit_log2_axis({1.5, 1.9, 0, NAN}, 0, 10);  // 0 and NaN cannot be drawn
  CHECK(b.lo == 1);
  CHECK(b.hi == 2);
  const linear_axis l = fit_linear_axis(0, 0.93, 0, 100);
  CHECK(l.lo == 0);
  CHECK(l.hi == Approx(1.0));
  CHECK(l.ticks().size() == 6);  // 0, 0.2, … 1
}

TEST_CASE("a strip chart draws each value where the axis puts it and leaves out what it cannot draw", "[bench][svg]") {
  const std::string svg =
      svg_strip_chart("Speed <&> \"x\"", "speedup", {{"level1", {1.0, 2.0, 0.0}}, {"lvl<2>", {2.0}}});
  CHECK(well_formed_xml(svg));
  CHECK_THAT(svg, Contains("Speed &lt;&amp;&gt; &quot;x&quot;"));
  CHECK_THAT(svg, Contains("lvl&lt;2&gt;"));
  // Values 1 and 2: the axis runs from 1 at x = 170 to 2 at x = 630 (the plot's edges).
  CHECK(circle_xs(svg) == std::vector<std::string>{"170.0", "630.0", "630.0"});
  CHECK_THAT(svg, Contains("1 value(s) not drawn"));
  CHECK_THAT(svg, Contains("n=2, geomean 1.41x"));
  CHECK_THAT(svg, Contains("n=1, geomean 2.00x"));
}

TEST_CASE("line and bar charts put points and bars at their values", "[bench][svg]") {
  const std::string lines = svg_line_chart(
      "by round", "round", "speedup", {{"full", {{0, 1.0}, {1, 1.5}, {2, 2.0}}}, {"no-ltm", {{0, 1.0}, {1, NAN}}}});
  CHECK(well_formed_xml(lines));
  CHECK(count(lines, "<polyline") == 2);
  CHECK(count(lines, "<circle") == 4);  // NaN left out
  CHECK_THAT(lines, Contains("1 point(s) not drawn"));
  CHECK_THAT(lines, Contains(">no-ltm</text>"));  // the legend
  // x from 0 to 2 over [70, 650]; y from 0 to 2 over [364, 44]: (1, 1.5) is at (360, 124).
  CHECK_THAT(lines, Contains("<circle cx=\"360.0\" cy=\"124.0\""));

  const std::string bars = svg_bar_chart("shares", "share", {"a", "b"}, {{"full", {0.5, std::nullopt}}}, 1.0);
  CHECK(well_formed_xml(bars));
  // y from 0 to 1 over [364, 44]: 0.5 is at 204, a bar 160 high.
  CHECK_THAT(bars, Contains("y=\"204.0\""));
  CHECK_THAT(bars, Contains("height=\"160.0\""));
  CHECK(count(bars, "<rect x=") == 1);
  CHECK_THAT(bars, Contains(">n/a</text>"));
}

TEST_CASE("the bench summary writes null and '-' for what was not measured, and says why", "[bench][summary]") {
  bench_report r;
  r.out_dir = "out";
  r.measurement = "not measured: no CUDA GPU";
  r.coder = "rules";
  r.variants = {{"full", true, true, speedup_by_round({{1.0, 1.5}}), {}}};
  bench_problem a;
  a.key = "level1/a";
  a.name = "a";
  a.level = "level1";
  bench_cell c;
  c.run_done = c.run_success = c.exported = true;
  c.run_speedup = 1.5;
  a.cells = {c};
  bench_problem b = a;
  b.key = "level1/b";
  b.name = "b";
  b.import_error = "it does not define Model";
  b.cells[0] = bench_cell{};
  b.cells[0].state = measure_state::no_kernel;
  r.problems = {a, b};

  auto j = bench_summary_json(r);
  const auto& overall = j["variants"][0]["overall"];
  CHECK(overall["problems"] == 2);
  CHECK(overall["known"] == 1);
  CHECK(overall["correct_rate_1e-4"] == 0.0);  // b is known: no kernel
  CHECK(overall["geomean_speedup_over_eager"].is_null());
  CHECK(overall["mean_speedup_over_eager"].is_null());
  CHECK(j["variants"][0]["speedup_by_round"][1]["mean"] == 1.5);
  CHECK(j["problems"][0]["variants"]["full"]["state"] == "pending");
  CHECK(j["problems"][0]["eager_ms"].is_null());
  CHECK(j["problems"][1]["imported"] == false);

  const std::string md = bench_summary_markdown(r);
  CHECK_THAT(md, Contains("**Measurement: not measured: no CUDA GPU.**"));
  CHECK_THAT(md, Contains("| full | level1 | 2 (1 pending) | 0.0% (0/1) |"));
  CHECK_THAT(md, Contains("not measured"));
  CHECK_THAT(md, Contains("import: it does not define Model"));
  // Nothing measured: no distribution; the run's rounds: a chart; one variant: no ablation.
  auto pictures = bench_pictures(r);
  REQUIRE(pictures.size() == 1);
  CHECK(pictures[0].first == "speedup_by_round.svg");

  // Measured, with two variants: every picture.
  r.measurement_ran = true;
  r.problems[0].eager_ms = 2;
  r.problems[0].compile_ms = 1;
  r.problems[0].cells[0].state = measure_state::measured;
  r.problems[0].cells[0].correct_strict = r.problems[0].cells[0].correct_loose = true;
  r.problems[0].cells[0].ours_ms = 1;
  r.variants.push_back({"no-ltm", false, true, speedup_by_round({{1.0, 1.2}}), {}});
  for (auto& p : r.problems) {
    const bench_cell same = p.cells[0];
    p.cells.push_back(same);
  }
  j = bench_summary_json(r);
  CHECK(j["variants"][1]["overall"]["fast_p_over_eager"]["1"] == 0.5);
  CHECK(j["variants"][1]["overall"]["fast_p_over_eager"]["2"] == 0.0);  // 2.0x is not > 2
  CHECK(j["problems"][0]["variants"]["no-ltm"]["speedup_over_eager"] == 2.0);
  std::vector<std::string> names;
  for (const auto& [name, svg] : bench_pictures(r)) {
    names.push_back(name);
    CHECK(well_formed_xml(svg));
  }
  CHECK(names == std::vector<std::string>{"speedup_distribution.svg", "speedup_by_round.svg", "ablation.svg",
                                          "ablation_speedup.svg"});
}

TEST_CASE("the bench summary says where torch.compile itself is not within 1e-4 of eager", "[bench][summary]") {
  bench_report r;
  r.out_dir = "out";
  r.measurement = "measured";
  r.measurement_ran = true;
  r.variants = {{"full", true, true, {}, {}}};
  bench_problem a;
  a.key = "level2/1_conv";
  a.name = "1_conv";
  a.level = "level2";
  a.eager_ms = 4;
  a.compile_ms = 2;
  bench_cell c;
  c.run_done = c.run_success = c.exported = true;
  c.state = measure_state::measured;
  c.correct_strict = c.correct_loose = true;
  c.ours_ms = 3;
  a.cells = {c};
  bench_problem b = a;
  b.key = "level2/2_gemm";
  b.name = "2_gemm";
  bench_problem d = a;  // torch.compile not checked (it failed): neither counted nor noted
  d.key = "level2/3_pool";
  d.name = "3_pool";
  a.compile_trials = b.compile_trials = 3;
  a.compile_passed_strict = 1;
  a.compile_max_abs_error = 0.0025;
  b.compile_passed_strict = 3;
  b.compile_max_abs_error = 1e-6;
  r.problems = {a, b, d};

  const auto j = bench_summary_json(r);
  CHECK(j["problems"][0]["compile_correct"] == false);
  CHECK(j["problems"][0]["compile_max_abs_error"] == 0.0025);
  CHECK(j["problems"][1]["compile_correct"] == true);
  CHECK(j["problems"][2]["compile_correct"].is_null());
  const std::string md = bench_summary_markdown(r);
  CHECK_THAT(md, Contains("torch.compile's own outputs are within 1e-4 of eager's on 1 of 2 problems (the trials ours "
                          "is checked on); not on: 1_conv."));
  CHECK_THAT(md, Contains("torch.compile itself is not within 1e-4 of eager (1 of 3 trials; max abs error 0.0025)"));
  CHECK(md.find("2_gemm | level2 | 4.0000 | 2.0000 | 3.0000 | 1.33x | 0.67x | yes / yes | 0.00x | 0 |  |") !=
        std::string::npos);
}

// The per-problem rows `bench` writes for docs/results (scripts/results_page.py's
// columns): times only where measured, yes/no where the outcome is known (no kernel: no),
// nothing while pending, the level's number, and every error in a quoted note.
TEST_CASE("the bench's per-problem rows are docs/results' CSV, with what was and was not measured",
          "[bench][summary]") {
  bench_report r;
  r.measurement = "measured";
  r.measurement_ran = true;
  r.device = "NVIDIA H200";
  r.variants = {{"full", true, true, {}, {}}};
  bench_problem a;
  a.name = "1_conv";
  a.level = "level2";
  a.eager_ms = 4;
  a.compile_ms = 2.5;
  bench_cell c;
  c.run_done = c.run_success = c.exported = true;
  c.run_speedup = 1.25;
  c.rounds = 1;
  c.state = measure_state::measured;
  c.correct_strict = false;
  c.correct_loose = true;
  c.max_abs_error = 2e-3;
  c.ours_ms = 3;
  a.cells = {c};
  bench_problem b = a;  // failed to import: no kernel, a note with a comma and a quote
  b.name = "2_gemm";
  b.eager_ms = b.compile_ms = 0;
  b.import_error = "it does not define \"Model\", nor get_inputs";
  b.cells = {bench_cell{}};
  b.cells[0].state = measure_state::no_kernel;
  bench_problem d = a;  // exported, not measured yet; not in a levelN directory
  d.name = "relu";
  d.level = "good";
  d.cells[0].state = measure_state::pending;
  r.problems = {a, b, d};
  const std::string csv = bench_results_csv(r, 0, {"r1", "2026-12-06", "0123abc", ""});
  CHECK(csv ==
        "run,date,commit,device,level,problem,eager_ms,compile_ms,ours_ms,over_eager,over_compile,correct,correct_1e-2,"
        "review_speedup,rounds,max_abs_error,reverted,note\n"
        "r1,2026-12-06,0123abc,NVIDIA H200,2,1_conv,4.0000,2.5000,3.0000,,,no,yes,1.25,1,0.002,,\n"
        "r1,2026-12-06,0123abc,NVIDIA H200,2,2_gemm,,,,,,no,no,,,,,\"import: it does not define \"\"Model\"\", nor "
        "get_inputs\"\n"
        "r1,2026-12-06,0123abc,NVIDIA H200,,relu,4.0000,2.5000,,,,,,1.25,1,,,not measured yet\n");
  // An unknown commit says why in every row's note; nothing measured names no device.
  r.measurement_ran = false;
  r.measurement = "not measured: no CUDA GPU";
  const std::string unknown = bench_results_csv(r, 0, {"r2", "2026-12-06", "unknown", "commit unknown: no git"});
  CHECK_THAT(unknown, Contains("r2,2026-12-06,unknown,none (not measured),2,1_conv,4.0000,2.5000,3.0000,"));
  CHECK_THAT(unknown,
             Contains(",relu,4.0000,2.5000,,,,,,1.25,1,,,commit unknown: no git; not measured: no CUDA GPU\n"));
}
