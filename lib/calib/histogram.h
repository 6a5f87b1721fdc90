// A uniform histogram: what the histogram observer reports, what the calibration file stores, and what
// the range selection methods (calib/range_select.h) read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qtool::calib {

// Bin i covers [lo + i·width, lo + (i+1)·width); the last bin also holds its right edge.
// data_min/data_max are the exact extrema of the finite values counted (inside the first/last bin).
struct Histogram {
  double lo = 0;
  double width = 0;
  std::vector<uint64_t> counts;
  float data_min = 0;
  float data_max = 0;

  double hi() const { return lo + width * static_cast<double>(counts.size()); }
  double edge(size_t i) const { return lo + width * static_cast<double>(i); }
  uint64_t total() const;
  bool empty() const { return counts.empty(); }
};

}  // namespace qtool::calib
