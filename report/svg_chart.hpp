#pragma once
// Charts as SVG text that a person opens in a browser: `kernelskill bench`'s pictures,
// written by our own code (no plotting library). Pure functions of their data.
//
// What it promises:
// - well-formed SVG (every label escaped), with its size in the root element, a title,
//   axes with labelled ticks, and a legend when there are several series;
// - values are drawn where they are: a value a log axis cannot show (0, negative, not
//   finite) is left out and counted in a note under the chart, never put at a made-up
//   place;
// - the axes are exposed (log2_axis, linear_axis) so a test can compute where a value
//   must be drawn.

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ks {

// A logarithmic axis over powers of two: lo and hi are powers of two, and 1 lies in
// [lo, hi] (a speedup chart always shows where "as fast" is).
struct log2_axis {
  double lo = 0.5, hi = 2;
  double px0 = 0, px1 = 1;  // where lo and hi are drawn
  double to_px(double v) const;
  std::vector<double> ticks() const;  // every power of two from lo to hi
};
// The smallest such axis holding every drawable value (and 1).
log2_axis fit_log2_axis(const std::vector<double>& values, double px0, double px1);

// A linear axis from lo to hi with ticks at round steps.
struct linear_axis {
  double lo = 0, hi = 1;
  double px0 = 0, px1 = 1;
  double min_step = 0;
  double to_px(double v) const;
  std::vector<double> ticks() const;  // lo, lo + step, … hi (step 1, 2 or 5 × 10^k)
};
// From lo to hi rounded out to the tick step (about five ticks, and steps of at least
// min_step: 1 for an axis of whole numbers such as rounds).
linear_axis fit_linear_axis(double lo, double hi, double px0, double px1, double min_step = 0);

// One row of a strip chart: every value a dot on a shared log2 axis.
struct strip_row {
  std::string label;
  std::vector<double> values;
};
// Rows of dots (a distribution each) over a log2 x axis, a line at 1, and per row its
// count and geometric mean at the right.
std::string svg_strip_chart(const std::string& title, const std::string& x_label, const std::vector<strip_row>& rows);

struct line_series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
};
// Lines with a dot at each point, over linear axes; y from 0 (or below, for negative
// values) to the largest y; x ticks at whole numbers when every x is one.
std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<line_series>& series);

struct bar_series {
  std::string name;
  std::vector<std::optional<double>> values;  // one per group; nullopt: no bar ("n/a")
};
// Grouped bars: for each group label, one bar per series, over a linear y axis from 0
// to y_max (or the largest value).
std::string svg_bar_chart(const std::string& title, const std::string& y_label, const std::vector<std::string>& groups,
                          const std::vector<bar_series>& series, std::optional<double> y_max = std::nullopt);

// Text made safe for SVG/XML content and attribute values.
std::string xml_escape(const std::string& text);

}  // namespace ks
