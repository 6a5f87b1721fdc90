// Observer kernels (OpenMP vs reference twins), the order-independent histogram, range selection and the
// calibration file.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "calib/calibrator.h"
#include "calib/for_each_cpu_isa.h"
#include "calib/histogram_observer.h"
#include "calib/range_select.h"
#include "core/error.h"
#include "test_paths.h"

using namespace qtool;
using namespace qtool::calib;
using qtool::test::for_each_cpu_isa;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f, bool specials = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.2f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  if (specials) {
    v[7] = std::numeric_limits<float>::quiet_NaN();
    v[n / 2] = std::numeric_limits<float>::infinity();
    v[n - 3] = -std::numeric_limits<float>::infinity();
    v[n - 1] = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

const ObserverBackend& ref_backend() { return observer_backend(BackendKind::Reference); }
const ObserverBackend& cpu_backend() { return observer_backend(BackendKind::Cpu); }

// The CPU backend's histogram_add (on `threads`) counts x as the reference twin does; returns the counts.
std::vector<uint64_t> twin_histogram(std::span<const float> x, const GridWindow& grid, int threads) {
  std::vector<uint64_t> ref(static_cast<size_t>(grid.bins), 0), cpu = ref;
  ref_backend().histogram_add(x, grid, ref, 1);
  cpu_backend().histogram_add(x, grid, cpu, threads);
  CHECK(ref == cpu);
  return ref;
}

// The same for histc_add with 2048 bins over [-2, 3].
void twin_histc(std::span<const float> x, int threads) {
  std::vector<double> ref(2048, 0), cpu = ref;
  ref_backend().histc_add(x, -2.0f, 3.0f, ref, 1);
  cpu_backend().histc_add(x, -2.0f, 3.0f, cpu, threads);
  CHECK(ref == cpu);
}

}  // namespace

TEST_CASE("OpenMP observer kernels equal their reference twins, on every instruction set the CPU has") {
  for_each_cpu_isa([] {
    for (size_t n : {size_t{1000}, size_t{300001}, size_t{17}}) {
      const std::vector<float> x = random_values(n, 7 + static_cast<uint32_t>(n), 3.0f);
      const BatchSummary a = ref_backend().summarize(x, 1), b = cpu_backend().summarize(x, 2);
      CHECK(a.count == b.count);
      CHECK(a.nan_count == 2);
      CHECK(a.inf_count == 2);
      CHECK(b.nan_count == 2);
      CHECK(b.inf_count == 2);
      CHECK(a.min == b.min);
      CHECK(a.max == b.max);

      const GridWindow grid{-6, static_cast<int64_t>(std::floor(std::ldexp(a.min, 6))), 4096};
      const std::vector<uint64_t> counts = twin_histogram(x, grid, 2);
      CHECK(std::accumulate(counts.begin(), counts.end(), uint64_t{0}) == n - 4);
      // A window holding only part of the values: the others are skipped, not clamped into the edge bins.
      twin_histogram(x, GridWindow{-6, 10, 100}, 2);
      twin_histc(x, 2);

      const int64_t outer = 3, channels = 7, inner = static_cast<int64_t>(n) / 21;
      const std::span<const float> xs(x.data(), static_cast<size_t>(outer * channels * inner));
      std::vector<float> mina(7, INFINITY), maxa(7, -INFINITY), minb = mina, maxb = maxa;
      ref_backend().channel_minmax(xs, outer, channels, inner, mina, maxa, 1);
      cpu_backend().channel_minmax(xs, outer, channels, inner, minb, maxb, 2);
      CHECK(mina == minb);
      CHECK(maxa == maxb);
    }
  });
}

TEST_CASE("instruction set names round-trip, and the limit never exceeds the CPU") {
  for (const CpuIsa isa : {CpuIsa::Baseline, CpuIsa::Avx2, CpuIsa::Avx512})
    CHECK(cpu_isa_from_name(cpu_isa_name(isa)) == isa);
  CHECK(cpu_isa_name(CpuIsa::Avx2) == "avx2");
  CHECK_FALSE(cpu_isa_from_name("sse2").has_value());
  const CpuIsa widest = set_cpu_isa_limit(CpuIsa::Avx512);
  CHECK(set_cpu_isa_limit(CpuIsa::Baseline) == CpuIsa::Baseline);
  CHECK(cpu_isa() == CpuIsa::Baseline);
  CHECK(set_cpu_isa_limit(CpuIsa::Avx512) == widest);
}

TEST_CASE("a zero min or max is +0 whichever order -0 and +0 are met in (file bytes do not depend on it)") {
  std::vector<float> x(100000, 1.0f);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = (i / 3) % 2 ? -0.0f : 0.0f;
  std::vector<float> neg(x.size());
  std::transform(x.begin(), x.end(), neg.begin(), [](float v) { return -v; });
  for_each_cpu_isa([&] {
    for (const ObserverBackend* b : {&ref_backend(), &cpu_backend()})
      for (const int threads : {1, 2, 3}) {
        INFO(b->name << " threads " << threads);
        const BatchSummary lo = b->summarize(x, threads), hi = b->summarize(neg, threads);
        CHECK((lo.min == 0 && !std::signbit(lo.min)));
        CHECK((hi.max == 0 && !std::signbit(hi.max)));
        std::vector<float> mins(2, INFINITY), maxs(2, -INFINITY);
        b->channel_minmax(neg, 1, 2, 50000, mins, maxs, threads);
        CHECK((!std::signbit(maxs[0]) && !std::signbit(maxs[1])));
      }
  });
}

TEST_CASE("OpenMP histogram kernels stay exact on long runs of one bin (sub-counter flushes) and tiny inputs") {
  // 700001 values, 1 thread: several flush chunks of the 16-bit sub-counters in one call; most values are 0
  // (a ReLU's output), so one bin gets far more than 65535 counts.
  std::vector<float> x = random_values(700001, 11, 2.0f);
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] < 0.5f) x[i] = 0.0f;
  for_each_cpu_isa([&] {
    for (const size_t n : {x.size(), size_t{5}, size_t{2047}}) {
      INFO(n);
      const std::span<const float> xs(x.data(), n);
      twin_histogram(xs, GridWindow{-6, -1000, 4096}, 1);
      twin_histc(xs, 1);
    }
  });
}

namespace {

// Six samples [1,3,16,16] whose spread grows sample after sample (the grid must coarsen on the way).
std::vector<std::vector<float>> six_samples() {
  std::vector<std::vector<float>> s;
  for (uint32_t i = 0; i < 6; ++i) s.push_back(random_values(3 * 16 * 16, 100 + i, 0.5f * float(i + 1), i == 3));
  s[2][11] = 37.5f;  // an outlier far out
  return s;
}

CalibrationTable calibrate(const std::vector<std::vector<float>>& samples, const std::vector<size_t>& order,
                           size_t batch, int threads, const RangeMethods& methods = kDefaultRangeMethods) {
  CalibratorOptions opt;
  opt.methods = methods;
  opt.exec = {&cpu_backend(), threads};
  Calibrator cal(opt);
  for (size_t b = 0; b < order.size(); b += batch) {
    const size_t m = std::min(batch, order.size() - b);
    std::vector<float> values;
    for (size_t i = 0; i < m; ++i)
      values.insert(values.end(), samples[order[b + i]].begin(), samples[order[b + i]].end());
    cal.observe("x", Tensor::from_vector<float>({int64_t(m), 3, 16, 16}, values));
  }
  return cal.finish();
}

void check_same(const TensorCalibration& a, const TensorCalibration& b) {
  CHECK(a.count == b.count);
  CHECK(a.nan_count == b.nan_count);
  CHECK(a.inf_count == b.inf_count);
  CHECK(a.histogram.lo == b.histogram.lo);
  CHECK(a.histogram.width == b.histogram.width);
  CHECK(a.histogram.counts == b.histogram.counts);
  for (RangeMethod m : {RangeMethod::MinMax, RangeMethod::Percentile, RangeMethod::Entropy, RangeMethod::Mse}) {
    INFO(range_method_name(m));
    CHECK(a.ranges.at(m) == b.ranges.at(m));
  }
}

}  // namespace

TEST_CASE("histogram counts and ranges do not depend on batching, order, threads or sharding") {
  const auto samples = six_samples();
  const std::vector<size_t> in_order = {0, 1, 2, 3, 4, 5}, shuffled = {4, 1, 5, 0, 3, 2}, reversed = {5, 4, 3, 2, 1, 0};
  const CalibrationTable base = calibrate(samples, in_order, 1, 1);
  const TensorCalibration& t = base.at("x");
  CHECK(t.count == 6 * 768 - 4);
  CHECK(t.nan_count == 2);
  CHECK(t.inf_count == 2);
  CHECK(t.histogram.total() == uint64_t(t.count));
  CHECK(t.histogram.counts.size() > 2048);  // the 8192-bin window resolves the range into > 2048 bins
  CHECK(t.minmax->hi == 37.5f);
  for (size_t batch : {1, 2, 6})
    for (const auto* order : {&in_order, &shuffled, &reversed})
      for (int threads : {1, 2}) {
        INFO("batch " << batch << " threads " << threads);
        check_same(t, calibrate(samples, *order, batch, threads).at("x"));
      }

  // Shards merged: samples {0,2,4} and {5,3,1} in two calibrators.
  CalibratorOptions opt;
  Calibrator a(opt), b(opt);
  for (size_t i : {0, 2, 4}) a.observe("x", Tensor::from_vector<float>({1, 3, 16, 16}, samples[i]));
  for (size_t i : {5, 3, 1}) b.observe("x", Tensor::from_vector<float>({1, 3, 16, 16}, samples[i]));
  b.merge(a);
  check_same(t, b.finish().at("x"));
}

TEST_CASE("histogram grid: exact bins, power-of-two widths, window growth") {
  HistogramObserver h(64);
  ExecContext ctx;
  const std::vector<float> a = {0.0f, 0.25f, 0.5f, 1.0f}, b = {-3.0f, 7.75f};
  const int64_t shape_a[] = {4}, shape_b[] = {2};
  h.observe(Batch::make(a, shape_a, ctx), ctx);
  Histogram r = h.histogram();
  CHECK(r.width == std::ldexp(1.0, h.exponent()));
  CHECK(r.lo == 0.0);
  CHECK(r.total() == 4);
  h.observe(Batch::make(b, shape_b, ctx), ctx);
  r = h.histogram();
  // [-3, 7.75] in 64 bins of a power-of-two width: 0.25 needs 44 bins, 0.125 would need 87.
  CHECK(r.width == 0.25);
  CHECK(r.lo == -3.0);
  CHECK(r.counts.size() == 44);
  CHECK(r.counts.front() == 1);  // -3
  CHECK(r.counts[12] == 1);      // 0 in [0, 0.25)
  CHECK(r.counts[13] == 1);      // 0.25
  CHECK(r.counts[14] == 1);      // 0.5
  CHECK(r.counts[16] == 1);      // 1.0
  CHECK(r.counts.back() == 1);   // 7.75
  CHECK(r.total() == 6);
}

namespace {

// KL(P||Q) for one candidate, computed bin by bin (the definition in range_select.h): the twin of the
// prefix-sum evaluation inside select_entropy.
double kl_direct(const std::vector<double>& A, int64_t i, int64_t L) {
  std::vector<double> P(A.begin(), A.begin() + i), Q(size_t(i), 0.0);
  for (size_t k = size_t(i); k < A.size(); ++k) P[size_t(i - 1)] += A[k];
  for (int64_t j = 0; j < L; ++j) {
    const int64_t a = j * i / L, b = (j + 1) * i / L;
    double S = 0, nz = 0;
    for (int64_t k = a; k < b; ++k) {
      S += A[size_t(k)];  // the kept histogram, without outliers
      nz += P[size_t(k)] > 0;
    }
    for (int64_t k = a; k < b; ++k)
      if (P[size_t(k)] > 0) Q[size_t(k)] = S / nz;
  }
  const double tp = std::accumulate(P.begin(), P.end(), 0.0), tq = std::accumulate(Q.begin(), Q.end(), 0.0);
  double kl = 0;
  for (int64_t k = 0; k < i; ++k) {
    if (P[size_t(k)] == 0) continue;
    if (Q[size_t(k)] == 0) return INFINITY;
    kl += P[size_t(k)] / tp * std::log((P[size_t(k)] / tp) / (Q[size_t(k)] / tq));
  }
  return kl;
}

Histogram histogram_of(const std::vector<float>& x, int64_t bins = kDefaultHistogramBins) {
  HistogramObserver h(bins);
  ExecContext ctx;
  const int64_t shape[] = {int64_t(x.size())};
  h.observe(Batch::make(x, shape, ctx), ctx);
  return h.histogram();
}

// Mean squared error of quantizing x to `levels` uniform levels over [lo, hi] (affine, zero on the grid).
double quant_mse(const std::vector<float>& x, Range r, int levels) {
  const double lo = std::min(0.0f, r.lo), hi = std::max(0.0f, r.hi);
  const double s = (hi - lo) / (levels - 1);
  const double zp = std::round(-lo / s);
  double e = 0;
  for (float v : x) {
    const double q = std::clamp(std::round(v / s) + zp, 0.0, double(levels - 1));
    const double d = (q - zp) * s - v;
    e += d * d;
  }
  return e / double(x.size());
}

}  // namespace

TEST_CASE("percentile range: quantiles of the data within one bin") {
  std::vector<float> x(100000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) / 1000.0f - 20.0f;  // uniform on [-20, 80)
  const Histogram h = histogram_of(x);
  const Range r = select_percentile(h, 99.0);  // 0.5 % cut on each side: 500 values
  CHECK(std::abs(r.lo - x[500]) <= h.width);
  CHECK(std::abs(r.hi - x[x.size() - 501]) <= h.width);
  CHECK(select_percentile(h, 100.0) == Range{x.front(), x.back()});
  const Range r5 = select_percentile(h, 99.999);
  CHECK(r5.lo >= x.front());
  CHECK(r5.hi <= x.back());
}

TEST_CASE("entropy range: the prefix-sum search equals the bin-by-bin KL definition") {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(200000);
  for (float& v : x) v = nd(rng);
  const Histogram h = histogram_of(x, 1024);  // a small histogram keeps the direct search quick
  const QuantTarget int8{DType::Int8, true};
  const Range r = select_entropy(h, int8, 2);
  CHECK(r.hi == -r.lo);

  // The direct search over the folded |x| histogram.
  const int64_t n = int64_t(h.counts.size()), z = std::llround(-h.lo / h.width), nA = std::max(n - z, z);
  std::vector<double> A(size_t(nA), 0);
  for (int64_t j = 0; j < nA; ++j) {
    if (z + j < n) A[size_t(j)] += double(h.counts[size_t(z + j)]);
    if (z - 1 - j >= 0) A[size_t(j)] += double(h.counts[size_t(z - 1 - j)]);
  }
  int64_t best = 128;
  double best_kl = kl_direct(A, 128, 128);
  for (int64_t i = 129; i <= nA; ++i) {
    const double kl = kl_direct(A, i, 128);
    if (kl < best_kl - 1e-12) {
      best_kl = kl;
      best = i;
    }
  }
  CHECK(r.hi == Approx(double(best) * h.width).margin(h.width));
  // A Gaussian's KL threshold for 128 levels clips the far tail but not the bulk.
  CHECK(r.hi > 2.5f);
  CHECK(r.hi < std::max(-h.data_min, h.data_max));

  // Non-negative data (after a ReLU) with an asymmetric uint8 target: [data_min, T].
  for (float& v : x) v = std::max(v, 0.0f);
  const Histogram hr = histogram_of(x);
  const Range rr = select_entropy(hr, {DType::UInt8, false});
  CHECK(rr.lo == 0.0f);
  CHECK(rr.hi > 1.5f);  // about 2σ: the spike at 0 holds half the mass
  CHECK(rr.hi <= hr.data_max);
}

TEST_CASE("mse range: lower real quantization error than min/max on heavy tails") {
  std::mt19937 rng(9);
  std::exponential_distribution<float> ed(1.0f);
  std::bernoulli_distribution sign(0.3);
  std::vector<float> x(200000);
  for (float& v : x) v = sign(rng) ? -ed(rng) : 2.0f * ed(rng);  // Laplace-like, asymmetric
  const Histogram h = histogram_of(x);
  const Range mm{h.data_min, h.data_max};
  for (DType dt : {DType::UInt8, DType::Int4}) {
    const int levels = int(dtype_info(dt).qmax - dtype_info(dt).qmin + 1);
    const Range r = select_mse(h, {dt, false});
    INFO(dtype_name(dt) << " [" << r.lo << ", " << r.hi << "]");
    CHECK(r.lo < 0.0f);
    CHECK(r.hi > 0.0f);
    CHECK(r.hi < mm.hi);
    CHECK(quant_mse(x, r, levels) < quant_mse(x, mm, levels));
    // No candidate on a coarse grid of scaled ranges does much better than the selected one.
    double best = INFINITY;
    for (int a = 1; a <= 20; ++a)
      for (int b = 1; b <= 20; ++b) best = std::min(best, quant_mse(x, Range{mm.lo * a / 20, mm.hi * b / 20}, levels));
    CHECK(quant_mse(x, r, levels) < 1.1 * best);
  }
  // Uniform data: clipping only hurts, the range stays (nearly) the full one.
  std::uniform_real_distribution<float> ud(-1.0f, 3.0f);
  for (float& v : x) v = ud(rng);
  const Range u = select_mse(histogram_of(x), {DType::UInt8, false});
  CHECK(u.lo < -0.95f);
  CHECK(u.hi > 2.9f);
}

TEST_CASE("calibration file: deterministic bytes, round trip, errors name the JSON path") {
  const auto samples = six_samples();
  CalibrationTable t = calibrate(samples, {0, 1, 2, 3, 4, 5}, 2, 2);
  t.model = "m.onnx";
  t.model_sha256 = "ab12";
  t.samples = 6;
  t.batch_size = 2;
  const std::string text = calibration_to_json(t);
  CalibrationTable t1 = calibrate(samples, {0, 1, 2, 3, 4, 5}, 2, 1);  // one thread instead of two
  t1.model = t.model;
  t1.model_sha256 = t.model_sha256;
  t1.samples = t.samples;
  t1.batch_size = t.batch_size;
  CHECK(calibration_to_json(t1) == text);
  const auto dir = test::scratch_dir("calib_file");
  write_calibration(t, dir / "c.json");
  const CalibrationTable back = read_calibration(dir / "c.json");
  CHECK(calibration_to_json(back) == text);
  const TensorCalibration& x = back.at("x");
  CHECK(x.shape == Shape{2, 3, 16, 16});
  CHECK(x.histogram.counts == t.at("x").histogram.counts);
  CHECK(x.histogram.lo == t.at("x").histogram.lo);
  CHECK(x.ranges.size() == 4);
  CHECK(back.settings.methods == kDefaultRangeMethods);
  for (const auto& [m, r] : t.at("x").ranges) CHECK(x.ranges.at(m) == r);
  // Ranges re-selected from the read histogram equal the written ones.
  CHECK(select_percentile(x.histogram, back.settings.percentile) == x.ranges.at(RangeMethod::Percentile));
  CHECK(select_entropy(x.histogram, {back.settings.target_dtype, false}) == x.ranges.at(RangeMethod::Entropy));
  CHECK(select_mse(x.histogram, {back.settings.target_dtype, false}) == x.ranges.at(RangeMethod::Mse));

  auto expect_error = [&](std::string edited, const std::string& fragment) {
    INFO(fragment);
    try {
      calibration_from_json(edited, "c.json");
      FAIL("no error");
    } catch (const BadInputError& e) {
      CHECK_THAT(e.what(), Catch::Contains(fragment));
    }
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  expect_error(replaced("\"format\": \"qtool-calibration\"", "\"format\": \"other\""), "c.json: format");
  expect_error(replaced("\"version\": 1", "\"version\": 2"), "c.json: version");
  expect_error(replaced("\"samples\": 6", "\"samples\": -1"), "c.json: samples");
  expect_error(replaced("\"nan_count\": 2", "\"nan_count\": \"2\""), "tensors[\"x\"].nan_count: expected an integer");
  expect_error(replaced("\"mse\": [", "\"mse\": [1e9, "), "tensors[\"x\"].ranges.mse");
  expect_error(replaced("\"entropy\": [", "\"kl\": ["), "tensors[\"x\"].ranges.kl: unknown range method");
  expect_error(replaced("\"entropy\", ", "\"kl\", "), "settings.methods[2]: unknown range method");
  expect_error(replaced("\"methods\": [", "\"methods\": [3, "), "settings.methods[0]: expected a string");
  expect_error(replaced("\"dtype\": \"float\"", "\"dtype\": \"int8\""), "tensors[\"x\"].dtype");
  expect_error(replaced("\"target_dtype\": \"uint8\"", "\"target_dtype\": \"u9\""), "settings.target_dtype");
  expect_error(text.substr(0, text.size() / 2), "c.json: not valid JSON");
  CHECK_THROWS_AS(read_calibration(dir / "missing.json"), BadInputError);
}

#include "calib/sha256.h"

TEST_CASE("sha256 of files matches the published digests") {
  CHECK(sha256_hex({}) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string abc = "abc";
  CHECK(sha256_hex({reinterpret_cast<const unsigned char*>(abc.data()), abc.size()}) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // The digest the shared models README publishes.
  CHECK(sha256_file(test::shared_models() / "superres-espcn-3x.onnx") ==
        "85f36ff88cc504a24af5e0602148bc56a8aa09a58eca8c0da2756f3e8186035e");
}

TEST_CASE("range selection on one-signed data far from 0 stays small and inside the data") {
  std::vector<float> x(10000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1000.0f + float(i % 997) * 1e-3f;  // [1000, 1000.996]
  const Histogram h = histogram_of(x);
  for (DType dt : {DType::UInt8, DType::Int8}) {
    const Range e = select_entropy(h, {dt, false}), m = select_mse(h, {dt, false}), p = select_percentile(h);
    for (Range r : {e, m, p}) {
      CHECK(r.lo >= h.data_min);
      CHECK(r.hi <= h.data_max);
      CHECK(r.lo <= r.hi);
    }
  }
  for (float& v : x) v = -v;
  const Histogram hn = histogram_of(x);
  const Range e = select_entropy(hn, {DType::Int8, true});
  CHECK(e.lo >= hn.data_min);
  CHECK(e.hi == hn.data_max);
}

TEST_CASE("calibrator records only the asked range methods, and the file says which") {
  const auto samples = six_samples();
  const std::vector<size_t> order{0, 1, 2, 3, 4, 5};
  const CalibrationTable minmax = calibrate(samples, order, 2, 1, {RangeMethod::MinMax});
  const TensorCalibration& m = minmax.at("x");
  CHECK(m.histogram.empty());  // no method needed the histogram: it never ran
  REQUIRE(m.ranges.size() == 1);
  CHECK(m.ranges.at(RangeMethod::MinMax) == *m.minmax);
  CHECK(m.count == 6 * 3 * 16 * 16 - 2 - 2);  // every finite value counted without a histogram (2 NaN, 2 inf)

  const RangeMethods all(std::begin(kRangeMethods), std::end(kRangeMethods));
  const CalibrationTable full = calibrate(samples, order, 2, 1, all);
  const CalibrationTable dflt = calibrate(samples, order, 2, 1);
  CHECK(full.at("x").ranges.size() == 5);
  // Adding torch_histogram changes nothing else; dropping histogram methods keeps min/max and counts.
  for (const auto& [method, r] : dflt.at("x").ranges) CHECK(full.at("x").ranges.at(method) == r);
  CHECK(full.at("x").histogram.counts == dflt.at("x").histogram.counts);
  CHECK(m.minmax == dflt.at("x").minmax);
  CHECK(m.count == dflt.at("x").count);

  CalibrationTable t = minmax;
  const CalibrationTable back = calibration_from_json(calibration_to_json(t), "m.json");
  CHECK(back.settings.methods == RangeMethods{RangeMethod::MinMax});
  CHECK(calibration_to_json(back) == calibration_to_json(t));
  // Files written before settings.methods existed recorded all five methods.
  std::string old = calibration_to_json(dflt);
  const size_t a = old.find("\"methods\": ["), b = old.find("], ", a);
  REQUIRE(a != std::string::npos);
  old.erase(a, b + 3 - a);
  CHECK(calibration_from_json(old, "old.json").settings.methods == all);

  CHECK(parse_range_methods("percentile,entropy", "--methods") ==
        RangeMethods{RangeMethod::MinMax, RangeMethod::Percentile, RangeMethod::Entropy});
  CHECK(parse_range_methods("all", "--methods") == all);
  CHECK_THROWS_WITH(parse_range_methods("minmax,kl", "--methods"),
                    Catch::Contains("--methods: unknown range method 'kl'"));
}

TEST_CASE("histogram observer: a tensor that is all zeros first, then real values (exponent jump > 63)") {
  // All zeros put the grid at its finest exponent (~-200); real values then coarsen it by ~190 steps at once,
  // which once shifted int64 bin indices by more than 63 bits (undefined; found by UBSan on silero VAD's state).
  const ExecContext ctx{&cpu_backend(), 1};
  const std::vector<float> zeros(1000, 0.0f), tiny(1000, 1e-30f);
  const std::vector<float> real = random_values(5000, 31, 2.0f, false);
  const Shape zs{1000}, rs{5000};
  HistogramObserver a, b, c, d;
  a.observe(Batch::make(zeros, zs, ctx), ctx);
  a.observe(Batch::make(tiny, zs, ctx), ctx);
  a.observe(Batch::make(real, rs, ctx), ctx);
  b.observe(Batch::make(real, rs, ctx), ctx);
  b.observe(Batch::make(tiny, zs, ctx), ctx);
  b.observe(Batch::make(zeros, zs, ctx), ctx);
  c.observe(Batch::make(zeros, zs, ctx), ctx);  // merged both ways
  c.observe(Batch::make(tiny, zs, ctx), ctx);
  d.observe(Batch::make(real, rs, ctx), ctx);
  c.merge(d);
  for (const HistogramObserver* h : {&a, &b, &c}) {
    CHECK(h->count() == 7000);
    CHECK(h->histogram().counts == b.histogram().counts);
    CHECK(h->histogram().lo == b.histogram().lo);
    CHECK(h->exponent() == b.exponent());
  }
}
