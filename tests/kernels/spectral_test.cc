// DFT, STFT, windows and MelWeightMatrix (kernels/spectral.cc) beyond the ONNX 1.12 backend vectors (run by
// backend_conformance_test.cc): the FFT paths (radix-2 and Bluestein) against a plain O(L²) DFT in double, dft_length
// padding and truncation, opset 20's axis input, and hostile sizes.
#include <catch2/catch.hpp>
#include <cmath>
#include <complex>
#include <numbers>

#include "core/error.h"
#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

namespace {
Tensor i64(int64_t v) { return Tensor::from_vector<int64_t>({}, {v}); }

// The plain DFT of x[0..N) zero-padded or truncated to L, bins [0, bins).
std::vector<std::complex<double>> plain_dft(const std::vector<std::complex<double>>& x, int64_t L, int sign) {
  std::vector<std::complex<double>> out(L);
  for (int64_t k = 0; k < L; ++k)
    for (int64_t n = 0; n < std::min<int64_t>(L, x.size()); ++n)
      out[k] += x[n] * std::polar(1.0, sign * 2 * std::numbers::pi * double((k * n) % L) / double(L));
  return out;
}
}  // namespace

TEST_CASE("DFT: radix-2 and Bluestein lengths equal the plain DFT: dft_length pads and truncates") {
  const int64_t N = 37;
  const Tensor x = random_tensor({1, N, 2}, 11);  // one complex signal
  std::vector<std::complex<double>> xs(N);
  for (int64_t n = 0; n < N; ++n) xs[n] = {x.data<float>()[2 * n], x.data<float>()[2 * n + 1]};
  for (int64_t L : {1, 8, 16, 30, 37, 50, 64, 400}) {
    for (int inverse : {0, 1}) {
      INFO("dft_length " << L << " inverse " << inverse);
      runtime::NodeAttrs a;
      a.values["axis"] = attr_int(1);
      a.values["inverse"] = attr_int(inverse);
      const Tensor y = run_kernel("DFT", 17, a, {x, i64(L)})[0];
      REQUIRE(y.shape() == Shape{1, L, 2});
      const auto want = plain_dft(xs, L, inverse ? 1 : -1);
      double err = 0;
      for (int64_t k = 0; k < L; ++k) {
        const std::complex<double> w = inverse ? want[k] / double(L) : want[k];
        err = std::max(err, std::abs(std::complex<double>(y.data<float>()[2 * k], y.data<float>()[2 * k + 1]) - w));
      }
      CHECK(err < 1e-5);
    }
  }
  // Opset 20: the axis is an input (here the first of two signal axes), onesided keeps L/2 + 1 bins.
  runtime::NodeAttrs ones;
  ones.values["onesided"] = attr_int(1);
  const Tensor real = random_tensor({2, 6, 3, 1}, 12);
  const Tensor y20 = run_kernel("DFT", 20, ones, {real, i64(12), i64(-3)})[0];
  CHECK(y20.shape() == Shape{2, 7, 3, 2});
}

TEST_CASE("DFT / STFT / windows / MelWeightMatrix: bad and hostile inputs are one-line errors") {
  runtime::NodeAttrs a;
  a.values["axis"] = attr_int(1);
  const Tensor x = random_tensor({1, 8, 1}, 13);
  CHECK_THROWS_AS(run_kernel("DFT", 17, a, {x, i64(0)}), BadInputError);
  CHECK_THROWS_AS(run_kernel("DFT", 17, a, {x, i64(int64_t{1} << 40)}), BadInputError);  // memory limit
  a.values["axis"] = attr_int(2);                                                        // the real/imaginary axis
  CHECK_THROWS_AS(run_kernel("DFT", 17, a, {x}), BadInputError);

  const Tensor sig = random_tensor({1, 64, 1}, 14);
  CHECK_THROWS_AS(run_kernel("STFT", 17, {}, {sig, i64(0), Tensor(), i64(16)}), BadInputError);
  CHECK_THROWS_AS(run_kernel("STFT", 17, {}, {sig, i64(8), Tensor(), i64(65)}), BadInputError);
  CHECK_THROWS_AS(run_kernel("STFT", 17, {}, {sig, i64(8)}), BadInputError);  // no frame length at all
  const Tensor y = run_kernel("STFT", 17, {}, {sig, i64(8), Tensor(), i64(16)})[0];
  CHECK(y.shape() == Shape{1, 7, 9, 2});

  CHECK_THROWS_AS(run_kernel("HannWindow", 17, {}, {i64(-1)}), BadInputError);
  CHECK_THROWS_AS(run_kernel("HannWindow", 17, {}, {i64(int64_t{1} << 60)}), BadInputError);
  CHECK(run_kernel("HammingWindow", 17, {}, {i64(0)})[0].numel() == 0);
  runtime::NodeAttrs dt;
  dt.values["output_datatype"] = attr_int(7);
  CHECK_THROWS_AS(run_kernel("BlackmanWindow", 17, dt, {i64(4)}), UnsupportedError);

  auto f32 = [](float v) { return Tensor::from_vector<float>({}, {v}); };
  // upper_edge_hertz past the Nyquist frequency maps beyond the last bin.
  CHECK_THROWS_AS(run_kernel("MelWeightMatrix", 17, {}, {i64(8), i64(16), i64(8000), f32(0), f32(7000)}),
                  BadInputError);
  const Tensor mel = run_kernel("MelWeightMatrix", 17, {}, {i64(80), i64(400), i64(16000), f32(0), f32(8000)})[0];
  CHECK(mel.shape() == Shape{201, 80});
}
