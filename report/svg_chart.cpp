#include "report/svg_chart.hpp"

#include <algorithm>
#include <cmath>

#include "base/number_format.hpp"

namespace ks {

namespace {

// Colours that stay apart for the colour-blind (Okabe and Ito).
const char* colour(size_t i) {
  static const char* palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};
  return palette[i % (sizeof palette / sizeof *palette)];
}

std::string px(double v) { return format_double("%.1f", v); }

std::string header(double width, double height, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) + "\" height=\"" + px(height) +
         "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n<title>" + xml_escape(title) +
         "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" + px(width / 2) +
         "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(title) + "</text>\n";
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle",
                 const std::string& extra = "") {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + xml_escape(s) +
         "</text>\n";
}

std::string line(double x0, double y0, double x1, double y1, const std::string& stroke, double width = 1,
                 const std::string& extra = "") {
  return "<line x1=\"" + px(x0) + "\" y1=\"" + px(y0) + "\" x2=\"" + px(x1) + "\" y2=\"" + px(y1) + "\" stroke=\"" +
         stroke + "\" stroke-width=\"" + px(width) + "\"" + extra + "/>\n";
}

// "0.25x", "1x", "16x".
std::string times_label(double v) { return plain_g(v) + "x"; }

std::string legend(const std::vector<std::string>& names, double x, double y) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    const double yy = y + 18.0 * static_cast<double>(i);
    s +=
        "<rect x=\"" + px(x) + "\" y=\"" + px(yy - 10) + "\" width=\"12\" height=\"12\" fill=\"" + colour(i) + "\"/>\n";
    s += text(x + 18, yy, names[i], "start");
  }
  return s;
}

bool drawable_on_log(double v) { return v > 0 && std::isfinite(v); }

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += ' ';
        else
          out += c;
    }
  }
  return out;
}

double log2_axis::to_px(double v) const {
  return px0 + (std::log2(v) - std::log2(lo)) / (std::log2(hi) - std::log2(lo)) * (px1 - px0);
}

std::vector<double> log2_axis::ticks() const {
  std::vector<double> t;
  for (double v = lo; v <= hi * 1.0000001; v *= 2) t.push_back(v);
  return t;
}

log2_axis fit_log2_axis(const std::vector<double>& values, double px0, double px1) {
  double lo_exp = 0, hi_exp = 0;
  for (double v : values) {
    if (!drawable_on_log(v)) continue;
    lo_exp = std::min(lo_exp, std::floor(std::log2(v)));
    hi_exp = std::max(hi_exp, std::ceil(std::log2(v)));
  }
  if (hi_exp == lo_exp) hi_exp = lo_exp + 1;  // every value is 1: show 1 to 2
  return log2_axis{std::exp2(lo_exp), std::exp2(hi_exp), px0, px1};
}

double linear_axis::to_px(double v) const { return px0 + (v - lo) / (hi - lo) * (px1 - px0); }

namespace {

double nice_step(double span, double min_step) {
  const double raw = std::max(span / 5, min_step);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * mag >= raw) return f * mag;
  return 10 * mag;
}

}  // namespace

std::vector<double> linear_axis::ticks() const {
  std::vector<double> t;
  const double step = nice_step(hi - lo, min_step);
  for (double v = lo; v <= hi + step * 1e-6; v += step) t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

linear_axis fit_linear_axis(double lo, double hi, double px0, double px1, double min_step) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi <= lo) hi = lo + 1;
  const double step = nice_step(hi - lo, min_step);
  return linear_axis{std::floor(lo / step) * step, std::ceil(hi / step) * step, px0, px1, min_step};
}

std::string svg_strip_chart(const std::string& title, const std::string& x_label, const std::vector<strip_row>& rows) {
  const double left = 170, right = 190, top = 44, row_h = 44, width = 820;
  const double height = top + row_h * static_cast<double>(std::max<size_t>(rows.size(), 1)) + 62;
  std::vector<double> all;
  for (const auto& r : rows) all.insert(all.end(), r.values.begin(), r.values.end());
  const log2_axis ax = fit_log2_axis(all, left, width - right);
  const double bottom = height - 50;
  std::string s = header(width, height, title);
  for (double t : ax.ticks()) {
    const double x = ax.to_px(t);
    s += line(x, top, x, bottom, t == 1.0 ? "#444" : "#ddd", t == 1.0 ? 1.5 : 1);
    s += text(x, bottom + 16, times_label(t));
  }
  s += line(left, bottom, width - right, bottom, "#444");
  s += text((left + width - right) / 2, bottom + 36, x_label);
  size_t left_out = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double yc = top + row_h * (static_cast<double>(i) + 0.5);
    s += text(left - 10, yc + 4, rows[i].label, "end");
    std::vector<double> drawn;
    for (size_t k = 0; k < rows[i].values.size(); ++k) {
      const double v = rows[i].values[k];
      if (!drawable_on_log(v)) {
        ++left_out;
        continue;
      }
      drawn.push_back(v);
      // A fixed vertical spread by index keeps close values apart, the same every time.
      const double dy = (static_cast<double>(k % 7) - 3.0) * 3.5;
      s += "<circle cx=\"" + px(ax.to_px(v)) + "\" cy=\"" + px(yc + dy) + "\" r=\"3.5\" fill=\"" + colour(i) +
           "\" fill-opacity=\"0.6\"><title>" + xml_escape(times_label(v)) + "</title></circle>\n";
    }
    double log_sum = 0;
    for (double v : drawn) log_sum += std::log(v);
    std::string stat = "n=" + std::to_string(drawn.size());
    if (!drawn.empty()) {
      const double g = std::exp(log_sum / static_cast<double>(drawn.size()));
      s += line(ax.to_px(g), yc - 15, ax.to_px(g), yc + 15, "#000", 2);
      stat += ", geomean " + two_decimals(g) + "x";
    }
    s += text(width - right + 10, yc + 4, stat, "start");
  }
  if (left_out > 0)
    s += text(left, height - 6, std::to_string(left_out) + " value(s) not drawn (no speedup: not timed)", "start",
              " font-size=\"11\" fill=\"#666\"");
  return s + "</svg>\n";
}

std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<line_series>& series) {
  const double left = 70, right = 170, top = 44, width = 820, height = 420, bottom = height - 56;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  bool any = false, whole_x = true;
  size_t left_out = 0;
  for (const auto& sr : series)
    for (const auto& [x, y] : sr.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ++left_out;
        continue;
      }
      if (!any) x_lo = x_hi = x, y_hi = y;
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      whole_x = whole_x && x == std::floor(x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
      any = true;
    }
  const linear_axis ax = fit_linear_axis(x_lo, x_hi, left, width - right, whole_x ? 1.0 : 0.0);
  const linear_axis ay = fit_linear_axis(y_lo, y_hi, bottom, top);
  std::string s = header(width, height, title);
  for (double t : ay.ticks()) {
    s += line(left, ay.to_px(t), width - right, ay.to_px(t), "#ddd");
    s += text(left - 8, ay.to_px(t) + 4, plain_g(t), "end");
  }
  for (double t : ax.ticks()) s += text(ax.to_px(t), bottom + 16, plain_g(t));
  s += line(left, bottom, width - right, bottom, "#444") + line(left, top, left, bottom, "#444");
  s += text((left + width - right) / 2, bottom + 38, x_label);
  s += text(18, (top + bottom) / 2, y_label, "middle", " transform=\"rotate(-90 18 " + px((top + bottom) / 2) + ")\"");
  std::vector<std::string> names;
  for (size_t i = 0; i < series.size(); ++i) {
    names.push_back(series[i].name);
    std::string pts;
    std::string dots;
    for (const auto& [x, y] : series[i].points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      pts += (pts.empty() ? "" : " ") + px(ax.to_px(x)) + "," + px(ay.to_px(y));
      dots += "<circle cx=\"" + px(ax.to_px(x)) + "\" cy=\"" + px(ay.to_px(y)) + "\" r=\"3.5\" fill=\"" + colour(i) +
              "\"><title>" + xml_escape(series[i].name + ": " + plain_g(x) + ", " + short_g(y)) + "</title></circle>\n";
    }
    if (!pts.empty())
      s += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + colour(i) + "\" stroke-width=\"2\"/>\n";
    s += dots;
  }
  if (series.size() > 1) s += legend(names, width - right + 16, top + 12);
  if (left_out > 0)
    s += text(left, height - 6, std::to_string(left_out) + " point(s) not drawn (not finite)", "start",
              " font-size=\"11\" fill=\"#666\"");
  return s + "</svg>\n";
}

std::string svg_bar_chart(const std::string& title, const std::string& y_label, const std::vector<std::string>& groups,
                          const std::vector<bar_series>& series, std::optional<double> y_max) {
  const double left = 70, right = 170, top = 44, width = 820, height = 420, bottom = height - 56;
  double hi = y_max.value_or(0);
  if (!y_max)
    for (const auto& sr : series)
      for (const auto& v : sr.values)
        if (v && std::isfinite(*v)) hi = std::max(hi, *v);
  const linear_axis ay = fit_linear_axis(0, hi > 0 ? hi : 1, bottom, top);
  std::string s = header(width, height, title);
  for (double t : ay.ticks()) {
    s += line(left, ay.to_px(t), width - right, ay.to_px(t), "#ddd");
    s += text(left - 8, ay.to_px(t) + 4, plain_g(t), "end");
  }
  s += line(left, bottom, width - right, bottom, "#444") + line(left, top, left, bottom, "#444");
  s += text(18, (top + bottom) / 2, y_label, "middle", " transform=\"rotate(-90 18 " + px((top + bottom) / 2) + ")\"");
  const double group_w = (width - right - left) / static_cast<double>(std::max<size_t>(groups.size(), 1));
  const double bar_w = group_w * 0.8 / static_cast<double>(std::max<size_t>(series.size(), 1));
  std::vector<std::string> names;
  for (size_t j = 0; j < series.size(); ++j) names.push_back(series[j].name);
  for (size_t g = 0; g < groups.size(); ++g) {
    const double gx = left + group_w * static_cast<double>(g);
    s += text(gx + group_w / 2, bottom + 16, groups[g]);
    for (size_t j = 0; j < series.size(); ++j) {
      const double x = gx + group_w * 0.1 + bar_w * static_cast<double>(j);
      const auto v = g < series[j].values.size() ? series[j].values[g] : std::nullopt;
      if (!v || !std::isfinite(*v)) {
        s += text(x + bar_w / 2, bottom - 4, "n/a", "middle", " font-size=\"9\" fill=\"#666\"");
        continue;
      }
      const double y = ay.to_px(std::max(0.0, *v));
      s += "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(bar_w * 0.92) + "\" height=\"" +
           px(bottom - y) + "\" fill=\"" + colour(j) + "\"><title>" +
           xml_escape(series[j].name + ", " + groups[g] + ": " + format_double("%.3f", *v)) + "</title></rect>\n";
      s += text(x + bar_w / 2, y - 3, format_double("%.2f", *v), "middle", " font-size=\"9\"");
    }
  }
  if (series.size() > 1) s += legend(names, width - right + 16, top + 12);
  return s + "</svg>\n";
}

}  // namespace ks
