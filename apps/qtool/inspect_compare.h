// qtool inspect QUANT.onnx --against FLOAT.onnx (--data ... | --random N) [--json]: a shell over
// analysis::compare_models that prints per-output metrics and the per-activation sensitivity ranking.
#pragma once

#include <string>

#include "options.h"

namespace qtool::cli {

struct CompareArgs {
  std::string quant, against;
  std::string report, calib;  // --report FILE.html; --calib: the table whose histograms it draws (else recomputed)
  SampleArgs samples;
  int threads = 0;
  int top = 20;  // sensitivity rows in the text report
  bool json = false, sensitivity = true;
};

int run_inspect_compare(const CompareArgs& a);

}  // namespace qtool::cli
