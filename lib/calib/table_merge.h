// merge_calibrations: the calibration table of the union of several tables' samples, as `qtool calibrate` would
// have written it had it seen all the samples in one run (`qtool calibrate --merge a.json b.json -o all.json`).
//
// Exact, not approximate, because every stored statistic folds: count, NaN and inf counts add; min is the min of the
// mins, max the max of the maxes; the softmax row minimum is the min of the minimums; the order-independent
// histogram (calib/histogram_observer.h) sits on a grid anchored at 0 with power-of-two widths, so two tables' bins
// nest and their counts add after the coarser one's re-binning, which is what one run would have counted. The
// percentile, entropy and mse ranges are then selected again from the merged histogram (calib/range_select.h).
// shape is the last table's (the shape of the last run, as in a single run over the samples in table order).
//
// Refused (BadInputError / UnsupportedError, exit 2, naming the table): tables of different models (model_sha256),
// different settings (methods, histogram bins, percentile, target dtype or symmetry) or batch sizes, and tables that
// record torch_histogram (PyTorch's observer depends on the order of the values; the table keeps only its range).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "calib/calibration_table.h"

namespace qtool::calib {

struct NamedTable {
  std::string name;  // for messages (the file name)
  CalibrationTable table;
};

// At least two tables (UsageError otherwise). threads: for the range selection of the merged table.
CalibrationTable merge_calibrations(const std::vector<NamedTable>& tables, int threads = 1);

}  // namespace qtool::calib
