// Range selection: from a histogram (calib/histogram.h) to the clipping range [lo, hi] a quantizer uses.
// All functions are pure: the same histogram and settings give the same range, bit for bit, whatever the
// thread count. Each needs a non-empty histogram (InternalError otherwise).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "calib/histogram.h"
#include "calib/observer.h"
#include "core/dtype.h"

namespace qtool::calib {

// The methods a calibration file records, in file order. Parsed from/to names only at the edges.
enum class RangeMethod : uint8_t { MinMax, Percentile, Entropy, Mse, TorchHistogram };
inline constexpr RangeMethod kRangeMethods[] = {RangeMethod::MinMax, RangeMethod::Percentile, RangeMethod::Entropy,
                                                RangeMethod::Mse, RangeMethod::TorchHistogram};
std::string_view range_method_name(RangeMethod m);  // "minmax", "percentile", "entropy", "mse", "torch_histogram"
std::optional<RangeMethod> range_method_from_name(std::string_view name);

// A set of range methods (what a calibration run records). minmax is always part of a run.
using RangeMethods = std::set<RangeMethod>;
// What `qtool calibrate` records unless told otherwise: every method of the order-independent histogram.
// torch_histogram (PyTorch's own, order-dependent histogram: a second pass over every value) is opt-in.
inline const RangeMethods kDefaultRangeMethods = {RangeMethod::MinMax, RangeMethod::Percentile, RangeMethod::Entropy,
                                                  RangeMethod::Mse};
// True when a method needs the order-independent histogram (percentile, entropy, mse).
bool needs_histogram(RangeMethod m);
// What a set of methods makes a run keep per tensor: the order-independent histogram (some method needs it);
// any histogram, PyTorch's included (the observers then cost about what the interpreter does, not a fraction).
bool records_histogram(const RangeMethods& methods);
bool records_any_histogram(const RangeMethods& methods);
// "minmax,percentile" (file order); parse: UsageError naming `what` and the unknown name.
std::string range_methods_str(const RangeMethods& methods);
// "minmax, percentile, entropy, mse, torch_histogram": every method's name, for error messages.
std::string known_range_methods();
RangeMethods parse_range_methods(std::string_view list, const std::string& what);

// What the range will be quantized to. Integer dtypes use their qmin..qmax from the dtype table.
struct QuantTarget {
  DType dtype = DType::UInt8;
  bool symmetric = false;
};
constexpr double kDefaultPercentile = 99.999;

// percentile: cuts (100 - p)/2 % of the values on each side. lo = left edge of the first bin whose cumulative
// count exceeds the cut, hi = right edge of the last bin whose count-from-the-right exceeds it; both are clamped
// to [data_min, data_max]. p >= 100 gives [data_min, data_max].
Range select_percentile(const Histogram& h, double percentile = kDefaultPercentile);

// entropy (TensorRT's entropy calibrator, KL divergence): on the histogram of |x| (folded at 0, pairs of bins
// merged until at most 2048 remain), for every candidate threshold of i bins (i from the number of levels L to
// the last bin): P = the first i bins with all counts beyond added to bin i-1; Q = the first i bins *without*
// the outliers merged into L groups (group j = bins [floor(j·i/L), floor((j+1)·i/L))), each group's mass spread
// evenly over the bins where P is non-empty. P and Q are normalised separately; the threshold minimises
// KL(P||Q) (infinite where Q = 0 < P; TensorRT smooths instead). All candidates come from prefix sums of c,
// [c>0] and c·ln c: O(L) per candidate instead of O(i).
// L = qmax - qmin + 1 for one-signed data and an asymmetric target, else half of it (128 for 8 bits).
// Result: [max(-T, data_min), min(T, data_max)] for signed data, [data_min, T] for non-negative data,
// [-T, data_max] for non-positive data. Float targets (no integer levels) get [data_min, data_max].
Range select_entropy(const Histogram& h, const QuantTarget& target, int threads = 1);

// mse: the [lo, hi] minimising the expected squared quantization error for the target:
//   E(lo, hi) = N_inside · s²/12 + Σ_bins outside n_b · ((c_b - clip(c_b))² + w²/12),   s = (hi - lo)/(qmax - qmin)
// (uniform rounding noise inside, clipping error outside; c_b the bin centre, w the bin width), evaluated from
// one sweep of the bins per side for lo ∈ {data_min·j/K} × hi ∈ {data_max·k/K}, K = 128 (lo = -hi for symmetric
// targets; lo = 0 for non-negative data, hi = 0 for non-positive data). Result: [lo, hi] for signed data,
// [data_min, hi] for non-negative data, [lo, data_max] for non-positive data. Float targets get
// [data_min, data_max]. O(bins + K²): single-threaded.
Range select_mse(const Histogram& h, const QuantTarget& target);

}  // namespace qtool::calib
