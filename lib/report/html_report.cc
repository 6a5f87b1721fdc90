#include "report/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace qtool::report {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  return o;
}

std::string num(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string g4(double v) { return num("%.4g", v); }
std::string px(double v) { return num("%.1f", v); }

constexpr double kHistW = 420, kHistH = 130, kPlotH = 100;  // panel SVG and its plot area
constexpr int kDisplayBins = 120;

// The calibration histogram re-binned to kDisplayBins bars over [x0, x1] (the data's span joined with the chosen
// range); each source bin goes to the bar holding its centre. Also the share of counted values outside `range`.
struct Bars {
  double x0 = 0, x1 = 1;
  std::vector<double> counts;
  double clipped = 0;
};

Bars rebin(const calib::Histogram& h, const std::optional<calib::Range>& range) {
  Bars b;
  b.x0 = h.data_min;
  b.x1 = h.data_max;
  if (range) b.x0 = std::min<double>(b.x0, range->lo), b.x1 = std::max<double>(b.x1, range->hi);
  if (!(b.x1 > b.x0)) b.x0 -= 0.5, b.x1 += 0.5;
  b.counts.assign(kDisplayBins, 0);
  double total = 0, outside = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    const double c = static_cast<double>(h.counts[i]);
    if (c == 0) continue;
    const double centre = h.lo + h.width * (static_cast<double>(i) + 0.5);
    const double x = std::clamp(centre, static_cast<double>(h.data_min), static_cast<double>(h.data_max));
    const int k = std::clamp(static_cast<int>((x - b.x0) / (b.x1 - b.x0) * kDisplayBins), 0, kDisplayBins - 1);
    b.counts[static_cast<size_t>(k)] += c;
    total += c;
    if (range && (x < range->lo || x > range->hi)) outside += c;
  }
  b.clipped = total > 0 ? outside / total : 0;
  return b;
}

// One bar path (bars from the baseline), heights scaled by f(count) / f(max).
std::string bar_path(const Bars& b, bool log) {
  auto f = [log](double c) { return log ? std::log10(1 + c) : c; };
  double top = 0;
  for (double c : b.counts) top = std::max(top, f(c));
  if (top <= 0) return "";
  const double w = kHistW / kDisplayBins;
  std::string d;
  for (int k = 0; k < kDisplayBins; ++k) {
    const double c = b.counts[static_cast<size_t>(k)];
    if (c <= 0) continue;
    const double h = std::max(f(c) / top * kPlotH, 0.8);
    d.append("M").append(px(k * w)).append(" ").append(px(kPlotH));
    d.append("v-").append(px(h)).append("h").append(px(w * 0.9)).append("v").append(px(h)).append("z");
  }
  return d;
}

void histogram_panel(std::ostringstream& o, const ActivationQuant& a, const calib::TensorCalibration* t,
                     const std::optional<double>& gain) {
  o << "<figure class=\"hist\" data-tensor=\"" << esc(a.tensor) << "\"><figcaption><b>" << esc(a.tensor) << "</b>";
  if (a.dtype)
    o << "<br>" << dtype_name(*a.dtype) << ", scale " << g4(a.scale) << ", zero point " << a.zero_point << ", range ["
      << g4(a.range->lo) << ", " << g4(a.range->hi) << "]";
  if (gain) o << "<br>sensitivity: " << num("%+.2f", *gain) << " dB kept float";
  o << "</figcaption>";
  if (!t || t->histogram.empty()) {
    o << "<p class=\"none\">no calibration histogram for this tensor</p></figure>\n";
    return;
  }
  const Bars b = rebin(t->histogram, a.range);
  auto x = [&](double v) { return (v - b.x0) / (b.x1 - b.x0) * kHistW; };
  o << "<svg viewBox=\"0 0 " << kHistW << " " << kHistH << "\" width=\"" << kHistW << "\" height=\"" << kHistH
    << "\" role=\"img\">";
  if (a.range)
    o << "<rect class=\"kept\" x=\"" << px(x(a.range->lo)) << "\" y=\"0\" width=\""
      << px(std::max(x(a.range->hi) - x(a.range->lo), 1.0)) << "\" height=\"" << kPlotH << "\"/>";
  o << "<path class=\"bars lin\" d=\"" << bar_path(b, false) << "\"/><path class=\"bars log\" d=\"" << bar_path(b, true)
    << "\"/>";
  if (a.range)
    for (double v : {static_cast<double>(a.range->lo), static_cast<double>(a.range->hi)})
      o << "<line class=\"edge\" x1=\"" << px(x(v)) << "\" x2=\"" << px(x(v)) << "\" y1=\"0\" y2=\"" << kPlotH
        << "\"/>";
  o << "<line class=\"axis\" x1=\"0\" x2=\"" << kHistW << "\" y1=\"" << kPlotH << "\" y2=\"" << kPlotH << "\"/>"
    << "<text x=\"0\" y=\"" << kPlotH + 14 << "\">" << g4(b.x0) << "</text><text x=\"" << kHistW << "\" y=\""
    << kPlotH + 14 << "\" text-anchor=\"end\">" << g4(b.x1) << "</text>"
    << "<text x=\"" << kHistW / 2 << "\" y=\"" << kPlotH + 26 << "\" text-anchor=\"middle\">data ["
    << g4(t->histogram.data_min) << ", " << g4(t->histogram.data_max) << "], " << t->count << " values"
    << (a.range ? ", " + num("%.3g", 100 * b.clipped) + " % clipped" : std::string()) << "</text></svg></figure>\n";
}

void metrics_table(std::ostringstream& o, const analysis::CompareReport& r) {
  o << "<table class=\"metrics\"><tr><th>output</th><th>SQNR dB</th><th>cosine</th><th>max |err|</th>"
       "<th>mean |err|</th><th>argmax agreement</th><th>KL (nats)</th></tr>\n";
  for (const auto& out : r.outputs) {
    const auto& m = out.metrics;
    o << "<tr><td>" << esc(out.output) << (out.state ? " (state)" : "") << "</td><td>" << num("%.2f", m.sqnr_db)
      << "</td><td>" << num("%.6f", m.cosine) << "</td><td>" << g4(m.max_abs_error) << "</td><td>"
      << g4(m.mean_abs_error) << "</td><td>" << (m.argmax_agreement ? num("%.4f", *m.argmax_agreement) : "-")
      << "</td><td>" << (m.kl_divergence ? num("%.3g", *m.kl_divergence) : "-") << "</td></tr>\n";
  }
  o << "</table>\n";
  for (const auto& s : r.skipped_outputs) o << "<p>not compared (not float32): " << esc(s) << "</p>\n";
}

// Horizontal bars of the first `rows` entries, most sensitive first; negative gains drawn left of the zero line. The
// scale is that of all entries, so the short chart and the full one agree.
void sensitivity_bars(std::ostringstream& o, const analysis::CompareReport& r, size_t rows) {
  constexpr double label_w = 300, bar_w = 420, row = 16;
  double hi = 0, lo = 0;
  for (const auto& s : r.sensitivity) hi = std::max(hi, s.gain_db), lo = std::min(lo, s.gain_db);
  if (hi - lo <= 0) hi = 1;
  const double zero = label_w + (-lo) / (hi - lo) * bar_w;
  rows = std::min(rows, r.sensitivity.size());
  const double height = row * static_cast<double>(rows) + 24;
  o << "<svg class=\"sens\" data-rows=\"" << rows << "\" viewBox=\"0 0 " << label_w + bar_w + 70 << " " << height
    << "\" width=\"" << label_w + bar_w + 70 << "\" height=\"" << height << "\" role=\"img\">";
  for (size_t i = 0; i < rows; ++i) {
    const auto& s = r.sensitivity[i];
    const double y = row * static_cast<double>(i);
    const double w = std::fabs(s.gain_db) / (hi - lo) * bar_w;
    std::string label = s.tensor.size() > 44 ? "…" + s.tensor.substr(s.tensor.size() - 43) : s.tensor;
    o << "<g><title>" << esc(s.tensor) << ": " << num("%+.3f", s.gain_db) << " dB on " << esc(s.output)
      << "</title><text x=\"" << label_w - 6 << "\" y=\"" << px(y + 12) << "\" text-anchor=\"end\">" << esc(label)
      << "</text><rect class=\"" << (s.gain_db >= 0 ? "gain" : "loss") << "\" x=\""
      << px(s.gain_db >= 0 ? zero : zero - w) << "\" y=\"" << px(y + 2) << "\" width=\"" << px(std::max(w, 0.5))
      << "\" height=\"" << row - 4 << "\"/><text x=\"" << px(std::max(zero + w, zero) + 4) << "\" y=\"" << px(y + 12)
      << "\">" << num("%+.2f", s.gain_db) << "</text></g>";
  }
  o << "<line class=\"axis\" x1=\"" << px(zero) << "\" x2=\"" << px(zero) << "\" y1=\"0\" y2=\"" << px(height - 20)
    << "\"/><text x=\"" << px(zero) << "\" y=\"" << px(height - 6)
    << "\" text-anchor=\"middle\">0 dB (SQNR gain of the most-gaining output with the activation kept float)</text>"
    << "</svg>\n";
}

constexpr size_t kTopSensitivity = 30;

void sensitivity_chart(std::ostringstream& o, const analysis::CompareReport& r) {
  if (!r.sensitivity_ran) {
    o << "<p>Sensitivity not computed (--no-sensitivity).</p>\n";
    return;
  }
  if (r.sensitivity.empty()) {
    o << "<p>No activation has its own Q/DQ.</p>\n";
    return;
  }
  sensitivity_bars(o, r, kTopSensitivity);
  if (r.sensitivity.size() <= kTopSensitivity) return;
  o << "<details><summary>all " << r.sensitivity.size() << " activations</summary>\n";
  sensitivity_bars(o, r, r.sensitivity.size());
  o << "</details>\n";
}

constexpr const char* kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table.metrics{border-collapse:collapse}table.metrics td,table.metrics th{border:1px solid #ccc;padding:3px 8px;text-align:right}
table.metrics td:first-child{text-align:left}
.controls{margin:8px 0}.grid{display:flex;flex-wrap:wrap;gap:10px}
figure.hist{margin:0;padding:6px;border:1px solid #ddd;width:424px;font-size:12px}
figure.hist b{word-break:break-all}
svg text{font:11px system-ui,sans-serif;fill:#333}
.bars{fill:#3b6ea8}.kept{fill:#e8f2e0}.edge{stroke:#c0392b;stroke-width:1.5}.axis{stroke:#666}
body:not(.logscale) .bars.log{display:none}body.logscale .bars.lin{display:none}
rect.gain{fill:#d9822b}rect.loss{fill:#7f8c8d}.none{color:#888}
)";

constexpr const char* kScript = R"(
(function(){
  var box=document.getElementById('filter'), log=document.getElementById('logscale');
  var figs=document.querySelectorAll('figure.hist'), shown=document.getElementById('shown');
  function apply(){
    var q=box.value.toLowerCase(), n=0;
    figs.forEach(function(f){var on=f.getAttribute('data-tensor').toLowerCase().indexOf(q)>=0;f.style.display=on?'':'none';if(on)n++;});
    shown.textContent=n+' of '+figs.length;
  }
  box.addEventListener('input',apply);
  log.addEventListener('change',function(){document.body.classList.toggle('logscale',log.checked);});
  document.body.classList.toggle('logscale',log.checked);
  apply();
})();
)";

}  // namespace

std::string render_html(const ReportInput& in) {
  std::map<std::string, double> gain;
  for (const auto& s : in.compare.sensitivity) gain[s.tensor] = s.gain_db;
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>qtool report: " << esc(in.quant_model)
    << "</title><style>" << kStyle << "</style></head><body class=\"logscale\">\n"
    << "<h1>" << esc(in.quant_model) << " against " << esc(in.float_model) << "</h1>\n<p>" << in.compare.samples
    << " sample" << (in.compare.samples == 1 ? "" : "s") << " compared; histograms from " << esc(in.histogram_source)
    << ".</p>\n<h2>Outputs</h2>\n";
  metrics_table(o, in.compare);
  o << "<h2>Sensitivity</h2>\n<p>Per activation, the SQNR gain (dB) of the output that gains most when only that "
       "activation is kept float; the top of the list costs the most accuracy.</p>\n";
  sensitivity_chart(o, in.compare);
  o << "<h2>Quantized activations (" << in.activations.size()
    << ")</h2>\n<p>Bars: calibration histogram of the "
       "float values. Shaded, between red lines: the range the QuantizeLinear represents; values outside are "
       "clipped.</p>\n<div class=\"controls\"><input id=\"filter\" placeholder=\"filter by tensor name\"> "
       "<label><input type=\"checkbox\" id=\"logscale\" checked> log counts</label> <span id=\"shown\"></span></div>\n"
       "<div class=\"grid\">\n";
  for (const ActivationQuant& a : in.activations) {
    const auto g = gain.find(a.tensor);
    histogram_panel(o, a, in.histograms.find(a.tensor),
                    g == gain.end() ? std::nullopt : std::optional<double>(g->second));
  }
  o << "</div>\n<script>" << kScript << "</script>\n</body></html>\n";
  return o.str();
}

}  // namespace qtool::report
