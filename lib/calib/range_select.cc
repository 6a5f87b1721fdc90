#include "calib/range_select.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"

namespace qtool::calib {

namespace {

constexpr std::array<std::pair<RangeMethod, std::string_view>, 5> kMethodNames = {{
    {RangeMethod::MinMax, "minmax"},
    {RangeMethod::Percentile, "percentile"},
    {RangeMethod::Entropy, "entropy"},
    {RangeMethod::Mse, "mse"},
    {RangeMethod::TorchHistogram, "torch_histogram"},
}};

void require_data(const Histogram& h, const char* method) {
  if (h.empty() || h.width <= 0) throw InternalError(std::string(method) + " range selection on an empty histogram");
}

constexpr int64_t kEntropyBins = 2048;

// Number of integer levels of the target, 0 for non-integer targets.
int64_t integer_levels(const QuantTarget& t) {
  const DTypeInfo& info = dtype_info(t.dtype);
  if (info.cls != DTypeClass::Integer) return 0;
  return info.qmax - info.qmin + 1;
}

float clampf(double v, float lo, float hi) { return static_cast<float>(std::clamp(v, double{lo}, double{hi})); }

}  // namespace

std::string_view range_method_name(RangeMethod m) {
  for (const auto& [k, n] : kMethodNames)
    if (k == m) return n;
  return "?";
}

std::optional<RangeMethod> range_method_from_name(std::string_view name) {
  for (const auto& [k, n] : kMethodNames)
    if (n == name) return k;
  return std::nullopt;
}

bool needs_histogram(RangeMethod m) {
  return m == RangeMethod::Percentile || m == RangeMethod::Entropy || m == RangeMethod::Mse;
}

bool records_histogram(const RangeMethods& methods) {
  return std::any_of(methods.begin(), methods.end(), needs_histogram);
}

bool records_any_histogram(const RangeMethods& methods) {
  return records_histogram(methods) || methods.count(RangeMethod::TorchHistogram) != 0;
}

std::string range_methods_str(const RangeMethods& methods) {
  std::string out;
  for (RangeMethod m : methods) {
    if (!out.empty()) out += ',';
    out += range_method_name(m);
  }
  return out;
}

std::string known_range_methods() {
  std::string out;
  for (const auto& [m, name] : kMethodNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

RangeMethods parse_range_methods(std::string_view list, const std::string& what) {
  RangeMethods out{RangeMethod::MinMax};
  if (list == "all") return {std::begin(kRangeMethods), std::end(kRangeMethods)};
  for (size_t p = 0; p <= list.size();) {
    const size_t c = std::min(list.find(',', p), list.size());
    const std::string_view name = list.substr(p, c - p);
    const auto m = range_method_from_name(name);
    if (!m)
      throw UsageError(what + ": unknown range method '" + std::string(name) + "' (known: " + known_range_methods() +
                       ", or all)");
    out.insert(*m);
    p = c + 1;
  }
  return out;
}

Range select_percentile(const Histogram& h, double percentile) {
  require_data(h, "percentile");
  if (percentile >= 100.0) return {h.data_min, h.data_max};
  const double cut = static_cast<double>(h.total()) * (100.0 - percentile) / 200.0;
  const size_t n = h.counts.size();
  size_t a = 0, b = n - 1;
  for (uint64_t cum = 0; a < n; ++a) {
    cum += h.counts[a];
    if (static_cast<double>(cum) > cut) break;
  }
  for (uint64_t cum = 0;; --b) {
    cum += h.counts[b];
    if (static_cast<double>(cum) > cut || b == 0) break;
  }
  if (a > b) a = b;  // only when p <= 0: a degenerate range inside one bin
  return {clampf(h.edge(a), h.data_min, h.data_max), clampf(h.edge(b + 1), h.data_min, h.data_max)};
}

Range select_entropy(const Histogram& h, const QuantTarget& target, int threads) {
  require_data(h, "entropy");
  const int64_t levels_all = integer_levels(target);
  if (levels_all == 0) return {h.data_min, h.data_max};
  const bool has_neg = h.data_min<0, has_pos = h.data_max> 0;
  const bool one_signed = !(has_neg && has_pos);
  const int64_t L = one_signed && !target.symmetric ? levels_all : levels_all / 2;

  // Fold at 0: A[j] counts |x| in [j·w, (j+1)·w). The grid has an edge at 0: histogram bin i is grid bin g0 + i,
  // covering [g·w, (g+1)·w), which folds to |x| bin g (g >= 0) or -g-1 (g < 0). Like TensorRT, the search runs
  // over at most kEntropyBins bins: w doubles (merging pairs, exact on the power-of-two grid) until the folded
  // range fits, computed up front so that data far from 0 never needs a huge array.
  const int64_t n = static_cast<int64_t>(h.counts.size());
  const int64_t g0 = std::llround(h.lo / h.width);
  const int64_t top = std::max(std::llabs(g0), std::llabs(g0 + n - 1) + 1);  // folded bins needed at width w
  int shift = 0;
  while ((top >> shift) + 1 > kEntropyBins) ++shift;
  const double w = std::ldexp(h.width, shift);
  std::vector<double> A(static_cast<size_t>((top >> shift) + 1), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = g0 + i;
    A[static_cast<size_t>((g >= 0 ? g : -g - 1) >> shift)] += static_cast<double>(h.counts[static_cast<size_t>(i)]);
  }
  while (A.size() > 1 && A.back() == 0) A.pop_back();
  const int64_t nB = static_cast<int64_t>(A.size());

  const double absmax = std::max(std::fabs(double{h.data_min}), std::fabs(double{h.data_max}));
  double threshold = absmax;
  if (nB > L) {
    // Prefix sums of c, [c > 0] and c·ln c.
    std::vector<double> C(static_cast<size_t>(nB + 1), 0), Z(C.size(), 0), Lg(C.size(), 0);
    for (int64_t j = 0; j < nB; ++j) {
      const double c = A[static_cast<size_t>(j)];
      C[static_cast<size_t>(j + 1)] = C[static_cast<size_t>(j)] + c;
      Z[static_cast<size_t>(j + 1)] = Z[static_cast<size_t>(j)] + (c > 0 ? 1 : 0);
      Lg[static_cast<size_t>(j + 1)] = Lg[static_cast<size_t>(j)] + (c > 0 ? c * std::log(c) : 0);
    }
    const double total = C[static_cast<size_t>(nB)];
    const int64_t first = L, count = nB - L + 1;
    std::vector<double> kl(static_cast<size_t>(count));
#pragma omp parallel for num_threads(std::max(threads, 1)) schedule(static)
    for (int64_t t = 0; t < count; ++t) {
      const int64_t i = first + t;
      const double kept = C[static_cast<size_t>(i)];
      const double outliers = total - kept;
      // KL = (1/T)·Σ_j [Σ_{b in j, P_b > 0} P_b ln P_b − S_j ln(S'_j / nz_j)] − ln T + ln kept,
      // S_j = group mass of P (with outliers), S'_j = of the kept histogram (without), nz_j = non-empty P bins.
      double sum = 0;
      for (int64_t j = 0; j < L && std::isfinite(sum); ++j) {
        const int64_t a = j * i / L, b = (j + 1) * i / L;
        double S, Sk, Lsum, nz;
        if (j == L - 1) {  // holds bin i-1, which also gets the outliers in P
          const double v = A[static_cast<size_t>(i - 1)] + outliers;
          Sk = C[static_cast<size_t>(i)] - C[static_cast<size_t>(a)];
          S = Sk + outliers;
          Lsum = Lg[static_cast<size_t>(i - 1)] - Lg[static_cast<size_t>(a)] + (v > 0 ? v * std::log(v) : 0);
          nz = Z[static_cast<size_t>(i - 1)] - Z[static_cast<size_t>(a)] + (v > 0 ? 1 : 0);
        } else {
          S = Sk = C[static_cast<size_t>(b)] - C[static_cast<size_t>(a)];
          Lsum = Lg[static_cast<size_t>(b)] - Lg[static_cast<size_t>(a)];
          nz = Z[static_cast<size_t>(b)] - Z[static_cast<size_t>(a)];
        }
        if (S == 0) continue;
        if (Sk == 0)
          sum = std::numeric_limits<double>::infinity();  // Q = 0 where P > 0
        else
          sum += Lsum - S * std::log(Sk / nz);
      }
      kl[static_cast<size_t>(t)] =
          kept > 0 ? sum / total - std::log(total) + std::log(kept) : std::numeric_limits<double>::infinity();
    }
    int64_t best = 0;
    for (int64_t t = 1; t < count; ++t)
      if (kl[static_cast<size_t>(t)] < kl[static_cast<size_t>(best)]) best = t;
    threshold = std::min(absmax, static_cast<double>(first + best) * w);
  }
  if (!has_neg) return {h.data_min, clampf(threshold, h.data_min, h.data_max)};
  if (!has_pos) return {clampf(-threshold, h.data_min, h.data_max), h.data_max};
  return {clampf(-threshold, h.data_min, h.data_max), clampf(threshold, h.data_min, h.data_max)};
}

Range select_mse(const Histogram& h, const QuantTarget& target) {
  require_data(h, "mse");
  const int64_t levels = integer_levels(target);
  if (levels == 0) return {h.data_min, h.data_max};
  const double steps = static_cast<double>(levels - 1);
  const double w = h.width, var_w = w * w / 12.0;
  const size_t n = h.counts.size();
  const double total = static_cast<double>(h.total());
  constexpr int K = 128;
  const bool has_neg = h.data_min<0, has_pos = h.data_max> 0;
  const double absmax = std::max(std::fabs(double{h.data_min}), std::fabs(double{h.data_max}));
  const bool symmetric = target.symmetric && has_neg && has_pos;

  // Candidate bounds, and for each the clipping error and count of the bins beyond it.
  auto candidates = [&](double extreme, bool active) {
    std::vector<double> v;
    if (!active) return std::vector<double>{0.0};
    for (int k = 1; k <= K; ++k) v.push_back(extreme * k / K);
    return v;
  };
  const std::vector<double> his = candidates(symmetric ? absmax : double{h.data_max}, has_pos);
  const std::vector<double> los = symmetric ? std::vector<double>{} : candidates(double{h.data_min}, has_neg);
  struct Clip {
    double err = 0, count = 0;
  };
  // All candidates of one side in one sweep, from the outermost bound inwards, so that the clipped set only
  // grows: O(bins + candidates) instead of O(bins · candidates). With d = a clipped bin's distance beyond the
  // bound, moving the bound inwards by δ turns Σn·d² into Σn·d² + 2δ·Σn·d + δ²·Σn (every term non-negative:
  // no cancellation, unlike prefix sums of n·c and n·c²); the bins it passes then join with their own d.
  // `bounds` are ordered from the innermost to the outermost candidate.
  auto sweep = [&](const std::vector<double>& bounds, bool right) {
    std::vector<Clip> out(bounds.size());
    double s0 = 0, s1 = 0, s2 = 0, prev = 0;
    size_t next = 0;  // bins already considered, counted from the clipped end
    for (size_t r = bounds.size(); r-- > 0;) {
      const double bound = bounds[r];
      if (r + 1 < bounds.size()) {
        const double d = std::fabs(prev - bound);
        s2 += 2 * d * s1 + d * d * s0;
        s1 += d * s0;
      }
      prev = bound;
      for (; next < n; ++next) {
        const size_t b = right ? n - 1 - next : next;
        const double centre = h.lo + (static_cast<double>(b) + 0.5) * w;
        if (!(right ? centre > bound : centre < bound)) break;
        const auto nb = static_cast<double>(h.counts[b]);
        const double d = right ? centre - bound : bound - centre;
        s0 += nb;
        s1 += nb * d;
        s2 += nb * d * d;
      }
      out[r] = {s2 + var_w * s0, s0};
    }
    return out;
  };
  const std::vector<Clip> right = sweep(his, true);
  std::vector<double> left_bounds = los;
  if (symmetric)
    for (double b : his) left_bounds.push_back(-b);
  const std::vector<Clip> left = sweep(left_bounds, false);

  double best_err = std::numeric_limits<double>::infinity();
  double best_lo = 0, best_hi = 0;
  auto consider = [&](double lo, double hi, const Clip& l, const Clip& r) {
    const double s = (hi - lo) / steps;
    const double inside = std::max(0.0, total - l.count - r.count);
    const double err = inside * s * s / 12.0 + l.err + r.err;
    if (err < best_err) {
      best_err = err;
      best_lo = lo;
      best_hi = hi;
    }
  };
  if (symmetric) {
    for (size_t k = 0; k < his.size(); ++k) consider(-his[k], his[k], left[k], right[k]);
  } else {
    for (size_t j = 0; j < los.size(); ++j)
      for (size_t k = 0; k < his.size(); ++k) consider(los[j], his[k], left[j], right[k]);
  }
  const float lo = has_neg ? clampf(best_lo, h.data_min, h.data_max) : h.data_min;
  const float hi = has_pos ? clampf(best_hi, h.data_min, h.data_max) : h.data_max;
  return {lo, hi};
}

}  // namespace qtool::calib
