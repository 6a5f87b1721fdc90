// The HTML report of `qtool inspect QUANT --against FLOAT --report FILE`: one self-contained file (inline CSS, SVG
// and a few lines of JS; nothing fetched from the network) that shows
//   - per float graph output, the metrics of analysis::compare_models (SQNR, cosine, errors, argmax, KL);
//   - the sensitivity ranking as a bar chart (SQNR gain with one activation kept float);
//   - per quantized activation, the histogram of its float values (calibration) under the range its
//     QuantizeLinear represents, with the share of values that range clips.
// Each activation's panel is a <figure data-tensor="NAME">; its SVG holds a linear and a log-count drawing (a
// checkbox switches between them) and a search box filters panels by name.
#pragma once

#include <string>
#include <vector>

#include "analysis/compare.h"
#include "calib/calibration_table.h"
#include "report/activation_ranges.h"

namespace qtool::report {

struct ReportInput {
  std::string quant_model, float_model;  // as the user named them
  std::string histogram_source;          // "calibration file calib.json (128 samples)"
  analysis::CompareReport compare;
  std::vector<ActivationQuant> activations;
  calib::CalibrationTable histograms;  // the float values of the activations (tensors without one: no histogram)
};

std::string render_html(const ReportInput& in);

}  // namespace qtool::report
