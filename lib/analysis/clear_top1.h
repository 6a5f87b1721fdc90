// Top-1 kept on clear winners: a criterion for outputs read as class scores or token logits (metrics.h,
// Distribution), used by the accuracy guard beside the output's SQNR.
//
// What it bounds: rows of the last axis whose float top-1 the quantized model changes although no noise within the
// SQNR threshold could have changed it. Let p be a float row as a distribution (probability rows as they are,
// anything else through softmax), m = p1 - p2 the margin of its top-1 over the runner-up, and r = 10^(-min_sqnr_db/10)
// the noise power the guard's SQNR threshold allows per unit of signal power. Were that budget applied to the row
// alone, its noise energy would be at most r * |p|^2. The cheapest noise that makes another entry overtake the top-1
// lowers p1 and raises p2 by m/2 each: energy m^2 / 2. So a row with
//     m > sqrt(2 r) * |p|                                         ("a clear winner")
// cannot flip under any noise the threshold allows it; a flip there means the quantized model spent more than the
// whole budget on that one row. That is the damage an output-wide SQNR averages away (a few rows flipped, the rest
// exact), and what a held-out input then sees as a changed prediction. A near-tie (margin below the bound) may
// flip: that is noise, not damage. The bound adds no number of its own: it is the SQNR threshold read per row, and
// the criterion is that every clear winner keeps its top-1 (argmax of the raw row: softmax and renormalisation keep
// the order; the first maximum on ties).
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/metrics.h"
#include "core/tensor.h"

namespace qtool::analysis {

// The clear winners of one float output tensor (float32, last axis C >= 2, d != None).
struct ClearRows {
  int64_t classes = 0;             // C, the last axis
  int64_t rows = 0;                // all rows of the tensor
  std::vector<int64_t> row, top1;  // the clear rows (in order) and their float top-1
};

// allowed_noise_ratio: r above. Throws UnsupportedError for a dtype other than float32.
ClearRows clear_rows(const Tensor& reference, Distribution d, double allowed_noise_ratio);

// How many of `clear`'s rows have another top-1 in `test` (all of them when its shape or dtype differs, or the row
// holds NaN).
int64_t clear_top1_flips(const ClearRows& clear, const Tensor& test);

}  // namespace qtool::analysis
