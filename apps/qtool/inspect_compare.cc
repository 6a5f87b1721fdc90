#include "inspect_compare.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "calib/calibrate.h"
#include "core/error.h"
#include "core/file_io.h"
#include "onnx/model_io.h"
#include "report/html_report.h"
#include "runtime/session.h"
#include "text_table.h"

namespace qtool::cli {
namespace {

using nlohmann::ordered_json;

// Samples kept in memory for the comparison (the first ones), as for the accuracy guard of `qtool quantize`.
constexpr int64_t kMaxSamples = 512;

ordered_json number_or_null(const std::optional<double>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }

ordered_json to_json(const analysis::CompareReport& r, const CompareArgs& a) {
  ordered_json j;
  j["model"] = a.quant;
  j["against"] = a.against;
  j["samples"] = r.samples;
  j["outputs"] = ordered_json::array();
  for (const auto& o : r.outputs) {
    const auto& m = o.metrics;
    j["outputs"].push_back({{"output", o.output},
                            {"state", o.state},
                            {"elements", m.elements},
                            {"sqnr_db", m.sqnr_db},
                            {"cosine", m.cosine},
                            {"max_abs_error", m.max_abs_error},
                            {"mean_abs_error", m.mean_abs_error},
                            {"rows", m.rows},
                            {"argmax_agreement", number_or_null(m.argmax_agreement)},
                            {"distribution", std::string(analysis::distribution_name(m.distribution))},
                            {"kl_divergence", number_or_null(m.kl_divergence)}});
  }
  j["skipped_outputs"] = r.skipped_outputs;
  if (!r.sensitivity_ran) {
    j["sensitivity"] = nullptr;
    return j;
  }
  j["sensitivity"] = ordered_json::array();
  for (const auto& t : r.sensitivity) {
    ordered_json kept = ordered_json::object();
    for (size_t o = 0; o < r.outputs.size(); ++o) kept[r.outputs[o].output] = t.kept_float_sqnr_db[o];
    j["sensitivity"].push_back(
        {{"tensor", t.tensor}, {"gain_db", t.gain_db}, {"output", t.output}, {"kept_float_sqnr_db", kept}});
  }
  return j;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string to_text(const analysis::CompareReport& r, const CompareArgs& a) {
  std::string s = a.quant + " against " + a.against + " on " + std::to_string(r.samples) + " sample" +
                  (r.samples == 1 ? "" : "s") + "\n\n";
  std::vector<std::vector<std::string>> rows = {
      {"output", "SQNR dB", "cosine", "max |err|", "mean |err|", "argmax agree", "KL (nats)"}};
  for (const auto& o : r.outputs) {
    const auto& m = o.metrics;
    rows.push_back({o.output + (o.state ? " (state)" : ""), fmt("%.2f", m.sqnr_db), fmt("%.6f", m.cosine),
                    fmt("%.4g", m.max_abs_error), fmt("%.4g", m.mean_abs_error),
                    m.argmax_agreement ? fmt("%.4f", *m.argmax_agreement) : "-",
                    m.kl_divergence ? fmt("%.3g", *m.kl_divergence) + " (" +
                                          std::string(analysis::distribution_name(m.distribution)) + ")"
                                    : "-"});
  }
  s += table(rows, "", {false, true, true, true, true, true, true});
  for (const auto& name : r.skipped_outputs) s += "not compared (not float32): " + name + "\n";
  if (!r.sensitivity_ran) return s;
  if (r.sensitivity.empty()) return s + "\nsensitivity: no activation has its own Q/DQ\n";
  const size_t shown = std::min(r.sensitivity.size(), static_cast<size_t>(std::max(a.top, 0)));
  s += "\nsensitivity: SQNR gain with one activation kept float, most sensitive first (" + std::to_string(shown) +
       " of " + std::to_string(r.sensitivity.size()) + ")\n";
  std::vector<std::vector<std::string>> srows = {{"activation", "gain dB", "output", "SQNR dB kept float"}};
  for (size_t k = 0; k < shown; ++k) {
    const auto& t = r.sensitivity[k];
    size_t o = 0;
    while (o + 1 < r.outputs.size() && r.outputs[o].output != t.output) ++o;
    srows.push_back({t.tensor, fmt("%+.2f", t.gain_db), t.output, fmt("%.2f", t.kept_float_sqnr_db[o])});
  }
  return s + table(srows, "  ", {false, true, false, true});
}

// --report FILE.html: the histograms come from --calib, else from calibrating the float model on the same samples.
void write_report(const CompareArgs& a, const onnx::ModelProto& quant, const analysis::CompareReport& r,
                  calib::CalibrateOptions o) {
  report::ReportInput in;
  in.quant_model = a.quant;
  in.float_model = a.against;
  in.compare = r;
  in.activations = report::activation_quants(quant);
  if (!a.calib.empty()) {
    in.histograms = calib::read_calibration(a.calib);
    in.histogram_source = "calibration file " + a.calib + " (" + std::to_string(in.histograms.samples) + " samples)";
  } else {
    o.threads = a.threads;
    o.methods = {calib::RangeMethod::MinMax, calib::RangeMethod::Percentile};  // the histogram, nothing more
    const calib::CalibrateResult c = calib::calibrate_model(a.against, o);
    in.histograms = c.table;
    in.histogram_source = "the float model run on " + c.data;
  }
  fileio::write_file_atomic(a.report, report::render_html(in));
  spdlog::info("wrote {} ({} activations)", a.report, in.activations.size());
}

}  // namespace

int run_inspect_compare(const CompareArgs& a) {
  if (a.samples.data.empty() && a.samples.random <= 0)
    throw UsageError("inspect --against: give the samples to compare on with --data or --random");
  const onnxio::LoadedModel q = onnxio::load_model(a.quant);
  const onnxio::LoadedModel f = onnxio::load_model(a.against);
  calib::CalibrateOptions o;
  sample_source_options(a.samples, o);
  std::vector<std::map<std::string, Tensor>> samples;
  {
    const runtime::Session session(f, {.threads = 1});
    auto source = calib::open_samples(o, calib::input_specs(session), *f.proto);
    for (const std::string& line : source->details()) spdlog::debug("{}", line);
    if (source->samples() > kMaxSamples)
      spdlog::warn("inspect: comparing on the first {} of {} samples", kMaxSamples, source->samples());
    samples = calib::first_samples(*source, kMaxSamples);
  }
  analysis::CompareOptions co;
  co.threads = runtime::resolve_threads(a.threads);
  co.sensitivity = a.sensitivity;
  co.quant_label = a.quant;
  co.float_label = a.against;
  co.log = [](const std::string& line) { spdlog::info("{}", line); };
  const analysis::CompareReport r = analysis::compare_models(*q.proto, *f.proto, std::move(samples), co);
  if (!a.report.empty()) write_report(a, *q.proto, r, o);
  if (a.json)
    std::cout << to_json(r, a).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    std::cout << to_text(r, a);
  std::cout.flush();
  return kExitOk;
}

}  // namespace qtool::cli
