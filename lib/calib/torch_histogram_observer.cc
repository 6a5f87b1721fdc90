#include "calib/torch_histogram_observer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "core/error.h"

namespace qtool::calib {

namespace {

// torch.histc(x, bins, min=lo, max=hi) with lo/hi the Python ints of HistogramObserver.forward.
void histc(const Batch& batch, double lo, double hi, std::vector<double>& out, const ExecContext& ctx) {
  if (lo == hi) {  // histc falls back to the data's own range, widened by 1 when that is a point
    lo = batch.summary.min;
    hi = batch.summary.max;
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  std::fill(out.begin(), out.end(), 0.0);
  ctx.backend->histc_add(batch.values, static_cast<float>(lo), static_cast<float>(hi), out, ctx.threads);
}

// Python's int(float): truncation toward zero.
double py_int(float v) { return std::trunc(static_cast<double>(v)); }

// torch.round: half to even.
int64_t round_half_even(float v) { return static_cast<int64_t>(std::nearbyint(v)); }

}  // namespace

TorchHistogramObserver::TorchHistogramObserver(int64_t bins, int64_t upsample_rate)
    : bins_(bins), upsample_(upsample_rate), hist_(static_cast<size_t>(bins), 0.0) {
  if (bins < 2 || upsample_rate < 1)
    throw UsageError("torch_histogram observer: bins must be >= 2 and upsample_rate >= 1");
}

void TorchHistogramObserver::observe(const Batch& batch, const ExecContext& ctx) {
  if (!batch.summary.has_finite()) return;
  const float new_min = batch.summary.min, new_max = batch.summary.max;
  if (!initialized_ || min_ == max_) {
    min_ = new_min;
    max_ = new_max;
    initialized_ = true;
    histc(batch, py_int(min_), py_int(max_), hist_, ctx);
    return;
  }
  // _adjust_min_max (float32 tensor arithmetic).
  float cmin = std::min(new_min, min_), cmax = std::max(new_max, max_);
  const float B = static_cast<float>(bins_);
  const float hist_bin_width = (max_ - min_) / static_cast<float>(bins_ * upsample_);
  const int64_t downsample = static_cast<int64_t>(std::ceil((cmax - cmin) / (B * hist_bin_width)));
  const float e = static_cast<float>(downsample) * (B * hist_bin_width) - (cmax - cmin);
  cmax = cmax + e;
  const int64_t start_idx = round_half_even((min_ - cmin) / hist_bin_width);

  std::vector<double> combined(static_cast<size_t>(bins_));
  histc(batch, py_int(cmin), py_int(cmax), combined, ctx);
  if (cmin == min_ && cmax == max_) {
    for (size_t i = 0; i < combined.size(); ++i) combined[i] += hist_[i];
  } else {
    // _combine_histograms without materialising the Nbins·downsample array: entry t of that array is
    // hist[(t - start_idx) / U] for start_idx <= t < start_idx + Nbins·U, so its cumulative sum up to position
    // p is U·prefix[full] + rem·hist[full] with (full, rem) = divmod(p - start_idx, U).
    std::vector<double> prefix(hist_.size() + 1, 0.0);
    for (size_t i = 0; i < hist_.size(); ++i) prefix[i + 1] = prefix[i] + hist_[i];
    const int64_t U = upsample_, N = bins_;
    auto cum = [&](int64_t p) {  // sum of the first p entries
      const int64_t q = std::clamp<int64_t>(p - start_idx, 0, N * U);
      const int64_t full = q / U, rem = q % U;
      return static_cast<double>(U) * prefix[static_cast<size_t>(full)] +
             (full < N ? static_cast<double>(rem) * hist_[static_cast<size_t>(full)] : 0.0);
    };
    double previous = 0;  // torch keeps the shifted integral in a float32 tensor
    for (int64_t j = 0; j < N; ++j) {
      const double integral = cum((j + 1) * downsample);
      const double interpolated = (integral - previous) / static_cast<double>(U);
      combined[static_cast<size_t>(j)] =
          static_cast<double>(static_cast<float>(combined[static_cast<size_t>(j)]) + static_cast<float>(interpolated));
      previous = static_cast<double>(static_cast<float>(integral));
    }
  }
  hist_ = std::move(combined);
  min_ = cmin;
  max_ = cmax;
}

void TorchHistogramObserver::merge(const Observer& other) {
  const auto& o = same_kind<TorchHistogramObserver>(*this, other);
  if (o.bins_ != bins_) throw InternalError("torch_histogram observer: merging different bin counts");
  if (!o.initialized_) return;
  if (!initialized_) {
    *this = o;
    return;
  }
  // Resample both piecewise-constant densities onto the union range with the same bin count.
  const double lo = std::min(min_, o.min_), hi = std::max(max_, o.max_);
  std::vector<double> out(static_cast<size_t>(bins_), 0.0);
  auto add = [&](const TorchHistogramObserver& src) {
    const double w = (static_cast<double>(src.max_) - src.min_) / static_cast<double>(src.bins_);
    const double W = (hi - lo) / static_cast<double>(bins_);
    for (int64_t i = 0; i < src.bins_; ++i) {
      const double c = src.hist_[static_cast<size_t>(i)];
      if (c == 0) continue;
      if (w <= 0 || W <= 0) {
        out[0] += c;
        continue;
      }
      const double a = src.min_ + w * static_cast<double>(i), b = a + w;
      int64_t k = std::clamp<int64_t>(static_cast<int64_t>((a - lo) / W), 0, bins_ - 1);
      for (; k < bins_; ++k) {
        const double ka = lo + W * static_cast<double>(k), kb = ka + W;
        const double overlap = std::min(b, kb) - std::max(a, ka);
        if (overlap > 0) out[static_cast<size_t>(k)] += c * overlap / w;
        if (kb >= b) break;
      }
    }
  };
  add(*this);
  add(o);
  hist_ = std::move(out);
  min_ = static_cast<float>(lo);
  max_ = static_cast<float>(hi);
}

Range TorchHistogramObserver::range(int dst_bits) const {
  if (!initialized_) return {0, 0};
  const double dst_nbins = std::ldexp(1.0, dst_bits);
  const int64_t N = bins_;
  const double bin_width = (static_cast<double>(max_) - static_cast<double>(min_)) / static_cast<double>(N);

  // _compute_quantization_error(next_start_bin, next_end_bin).
  auto norm_of = [&](double b, double e, double density) { return density * (e * e * e - b * b * b) / 3.0; };
  auto quant_error = [&](int64_t start, int64_t end) {
    const double dst_w = bin_width * static_cast<double>(end - start + 1) / dst_nbins;
    if (dst_w == 0.0) return 0.0;
    double norm = 0;
    for (int64_t i = 0; i < N; ++i) {
      const double c = hist_[static_cast<size_t>(i)];
      if (c == 0) continue;
      const double density = c / bin_width;
      const double src_begin = static_cast<double>(i - start) * bin_width, src_end = src_begin + bin_width;
      const double db = std::clamp(std::floor(src_begin / dst_w), 0.0, dst_nbins - 1);
      const double de = std::clamp(std::floor(src_end / dst_w), 0.0, dst_nbins - 1);
      norm += norm_of(src_begin - (db + 0.5) * dst_w, dst_w / 2, density);
      norm += (de - db - 1) * norm_of(-dst_w / 2, dst_w / 2, density);
      norm += norm_of(-dst_w / 2, src_end - (de * dst_w + dst_w / 2), density);
    }
    return norm;
  };

  // _non_linear_param_search. cSum is a float32 cumulative sum accumulated in double, as torch.cumsum does.
  std::vector<float> csum(static_cast<size_t>(N));
  double acc = 0;
  for (int64_t i = 0; i < N; ++i)
    csum[static_cast<size_t>(i)] = static_cast<float>(acc += hist_[static_cast<size_t>(i)]);
  const double total = static_cast<float>(acc);
  const double stepsize = 1e-5;
  double alpha = 0.0, beta = 1.0;
  int64_t start_bin = 0, end_bin = N - 1;
  double norm_min = std::numeric_limits<double>::infinity();
  while (alpha < beta) {
    const double next_alpha = alpha + stepsize, next_beta = beta - stepsize;
    // l: first index in [start_bin, end_bin) with cSum[l] >= next_alpha·total, else end_bin.
    // r: last index in (start_bin, end_bin] with cSum[r] <= next_beta·total, else start_bin. (cSum is sorted.)
    const double la = next_alpha * total, rb = next_beta * total;
    int64_t l = std::lower_bound(csum.begin() + start_bin, csum.begin() + end_bin, la,
                                 [](float v, double t) { return static_cast<double>(v) < t; }) -
                csum.begin();
    int64_t r = (std::upper_bound(csum.begin() + start_bin + 1, csum.begin() + end_bin + 1, rb,
                                  [](double t, float v) { return t < static_cast<double>(v); }) -
                 csum.begin()) -
                1;
    if (r < start_bin + 1) r = start_bin;
    int64_t next_start = start_bin, next_end = end_bin;
    if (l - start_bin > end_bin - r) {
      next_start = l;
      alpha = next_alpha;
    } else {
      next_end = r;
      beta = next_beta;
    }
    if (next_start == start_bin && next_end == end_bin) continue;
    const double norm = quant_error(next_start, next_end);
    if (norm > norm_min) break;
    norm_min = norm;
    start_bin = next_start;
    end_bin = next_end;
  }
  const float bw = (max_ - min_) / static_cast<float>(N);
  return {min_ + bw * static_cast<float>(start_bin), min_ + bw * static_cast<float>(end_bin + 1)};
}

}  // namespace qtool::calib
