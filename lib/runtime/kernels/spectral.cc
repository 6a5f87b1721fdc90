// Signal-processing ops of audio front-ends (opset 17), computed in double, results float32 (or the requested
// output_datatype for the generators).
//
// HannWindow, HammingWindow, BlackmanWindow: input size (int scalar); w[n] for n in [0, size), with N = size
//   (periodic = 1, the default) or size - 1 (symmetric): Hann 0.5 - 0.5·cos(2πn/N); Hamming α - (1 - α)·cos(2πn/N),
//   α = 25/46; Blackman 0.42 - 0.5·cos(2πn/N) + 0.08·cos(4πn/N). output_datatype float (default) or double.
// MelWeightMatrix: [dft_length/2 + 1, num_mel_bins] triangular filters, exactly the ONNX reference's recipe: mel
//   points m_i = mel(lower) + i·(mel(upper) - mel(lower))/(num_mel_bins + 2), i in [0, num_mel_bins + 2), mel(f) =
//   2595·log10(1 + f/700), each turned back into a bin ⌊(dft_length + 1)·f_i / sample_rate⌋; filter i rises from
//   bin b_i to b_{i+1} and falls to b_{i+2}.
// DFT (opset 17: axis attribute; 20: axis input, default -2): input [..., N, 1] real or [..., N, 2] complex along
//   `axis`; dft_length (optional) zero-pads or truncates the signal; X[k] = Σ x[n]·e^{∓2πi·kn/L} (inverse: +, and
//   divided by L); onesided keeps bins [0, L/2] (real input only). Output [..., L or L/2 + 1, ..., 2].
// STFT: signal [batch, length, 1 or 2], frame_step, optional window [frame_length] and frame_length; frames
//   f = 0 .. (length - frame_length)/frame_step, each the DFT of signal[f·step + n]·window[n]; onesided (default 1,
//   real signals) keeps frame_length/2 + 1 bins. Output [batch, frames, bins, 2].
// Transforms of any length run in O(L log L): radix-2 FFT for powers of two, Bluestein's chirp-z otherwise.
#include <array>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <vector>

#include "core/checked.h"
#include "core/limits.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using cd = std::complex<double>;
using compute::float_input;
using compute::parallel_for;

// ------------------------------------------------------------------------------------------------ transforms

// In-place iterative radix-2 FFT of a power-of-two length; sign -1 forward, +1 inverse (unscaled).
void fft_pow2(std::vector<cd>& a, int sign) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const double ang = sign * 2 * std::numbers::pi / static_cast<double>(len);
    for (size_t k = 0; k < len / 2; ++k) {
      const cd w = std::polar(1.0, ang * static_cast<double>(k));
      for (size_t i = k; i < n; i += len) {
        const cd u = a[i], v = a[i + len / 2] * w;
        a[i] = u + v;
        a[i + len / 2] = u - v;
      }
    }
  }
}

// A DFT plan for one length: X[k] = Σ x[n]·e^{sign·2πi·kn/L}, unscaled.
class Dft {
 public:
  Dft(int64_t length, int sign) : n_(static_cast<size_t>(length)), sign_(sign) {
    if (length > (int64_t{1} << 31))  // keeps k² below 2^64 in the chirp's exact angle
      throw BadInputError("transform length " + std::to_string(length) + " is above 2^31");
    if (n_ == 0 || (n_ & (n_ - 1)) == 0) return;
    // Bluestein: kn = (k² + n² - (k - n)²)/2, so X[k] = c̄[k]·Σ (x[n]·c̄[n])·c[k - n] with chirp c[m] =
    // e^{-sign·πi·m²/L}: a convolution, done with power-of-two FFTs of size M >= 2L - 1.
    m_ = 1;
    while (m_ < 2 * n_ - 1) m_ <<= 1;
    chirp_.resize(n_);
    for (size_t k = 0; k < n_; ++k) {
      const double k2 = static_cast<double>((uint64_t{k} * k) % (2 * n_));  // k < 2^31: exact
      chirp_[k] = std::polar(1.0, -sign_ * std::numbers::pi * k2 / static_cast<double>(n_));
    }
    kernel_.assign(m_, cd{});
    kernel_[0] = chirp_[0];
    for (size_t k = 1; k < n_; ++k) kernel_[k] = kernel_[m_ - k] = chirp_[k];
    fft_pow2(kernel_, -1);
  }
  // a: L values in, L bins out.
  void run(std::vector<cd>& a) const {
    if (n_ <= 1) return;
    if (chirp_.empty()) return fft_pow2(a, sign_);
    std::vector<cd> b(m_, cd{});
    for (size_t k = 0; k < n_; ++k) b[k] = a[k] * std::conj(chirp_[k]);
    fft_pow2(b, -1);
    for (size_t k = 0; k < m_; ++k) b[k] *= kernel_[k];
    fft_pow2(b, +1);
    for (size_t k = 0; k < n_; ++k) a[k] = b[k] * std::conj(chirp_[k]) / static_cast<double>(m_);
  }

 private:
  size_t n_, m_ = 0;
  int sign_;
  std::vector<cd> chirp_, kernel_;
};

int64_t scalar_int(const KernelContext& ctx, size_t i, const char* what) {
  const std::vector<int64_t> v = read_ints(ctx.input(i), ctx.node, what);
  if (v.size() != 1)
    throw BadInputError(ctx.node.label() + ": input '" + what + "' must hold one value, got " +
                        std::to_string(v.size()));
  return v[0];
}

// Bytes of `n` complex doubles, checked like a tensor before the scratch is taken.
void check_scratch(int64_t n, const char* what) {
  check_tensor_allocation(checked_mul(n, int64_t{16}, what), std::string(what));
}

// ------------------------------------------------------------------------------------------------------- DFT

class DftKernel final : public Kernel {
 public:
  explicit DftKernel(const NodeInfo& n)
      : axis_attr_(n.attrs.get_int("axis", 1)),
        inverse_(n.attrs.get_int("inverse", 0) != 0),
        onesided_(n.attrs.get_int("onesided", 0) != 0) {
    if (inverse_ && onesided_) throw UnsupportedError(n.label() + ": inverse = 1 with onesided = 1 is not supported");
  }
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = float_input(ctx, 0);
    const int64_t r = X.rank();
    if (r < 2 || (X.dim(r - 1) != 1 && X.dim(r - 1) != 2))
      throw BadInputError(node.label() + ": input must be [..., signal, 1] (real) or [..., signal, 2] (complex), got " +
                          shape_str(X.shape()));
    const bool complex_in = X.dim(r - 1) == 2;
    if (complex_in && onesided_)
      throw BadInputError(node.label() + ": onesided = 1 needs a real input ([..., 1]), got " + shape_str(X.shape()));
    int64_t axis = axis_attr_;
    if (node.opset >= 20) axis = ctx.has_input(2) && ctx.input(2).numel() ? scalar_int(ctx, 2, "axis") : -2;
    const int64_t given_axis = axis;
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r - 2)
      throw BadInputError(node.label() + ": axis " + std::to_string(given_axis) + " is not a signal axis of " +
                          shape_str(X.shape()) + " (the last axis holds real/imaginary parts)");
    const int64_t N = X.dim(axis);
    int64_t L = N;
    if (ctx.has_input(1) && ctx.input(1).numel()) {
      L = scalar_int(ctx, 1, "dft_length");
      if (L < 1) throw BadInputError(node.label() + ": dft_length must be >= 1, got " + std::to_string(L));
    }
    if (L < 1)  // a DFT of no samples has no bins (and onesided's L/2 + 1 = 1 bin would read past them)
      throw BadInputError(node.label() + ": the signal axis of " + shape_str(X.shape()) +
                          " is empty; give a non-empty signal or input dft_length >= 1");
    const int64_t bins = onesided_ ? L / 2 + 1 : L;
    Shape out_shape = X.shape();
    out_shape[axis] = bins;
    out_shape[r - 1] = 2;
    check_scratch(checked_mul(L, int64_t{5}, "DFT length"), "DFT working buffers");  // a row and Bluestein's 4L
    Tensor Y(DType::Float32, out_shape);
    const int64_t inner = shape_numel(Shape(X.shape().begin() + axis + 1, X.shape().end() - 1));
    const int64_t outer = shape_numel(Shape(X.shape().begin(), X.shape().begin() + axis));
    const int64_t c_in = X.dim(r - 1);
    const Dft plan(L, inverse_ ? +1 : -1);
    const float* x = X.data<float>();
    float* y = Y.data<float>();
    parallel_for(outer * inner, threads_for(Y.numel() * 32, ctx.threads), [&](int64_t row) {
      const int64_t o = row / inner, i = row % inner;
      std::vector<cd> a(static_cast<size_t>(L), cd{});
      for (int64_t n = 0; n < std::min(N, L); ++n) {
        const float* p = x + ((o * N + n) * inner + i) * c_in;
        a[n] = cd(p[0], complex_in ? p[1] : 0.0);
      }
      plan.run(a);
      for (int64_t k = 0; k < bins; ++k) {
        const cd v = inverse_ ? a[k] / static_cast<double>(L) : a[k];
        float* q = y + ((o * bins + k) * inner + i) * 2;
        q[0] = static_cast<float>(v.real());
        q[1] = static_cast<float>(v.imag());
      }
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  int64_t axis_attr_;
  bool inverse_, onesided_;
};

// ------------------------------------------------------------------------------------------------------ STFT

class StftKernel final : public Kernel {
 public:
  explicit StftKernel(const NodeInfo& n) : onesided_(n.attrs.get_int("onesided", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& S = float_input(ctx, 0);
    if (S.rank() != 3 || (S.dim(2) != 1 && S.dim(2) != 2))
      throw BadInputError(node.label() + ": signal must be [batch, length, 1 or 2], got " + shape_str(S.shape()));
    const bool complex_in = S.dim(2) == 2;
    const int64_t step = scalar_int(ctx, 1, "frame_step");
    const Tensor* window = ctx.has_input(2) && ctx.input(2).numel() ? &float_input(ctx, 2) : nullptr;
    int64_t frame = -1;
    if (ctx.has_input(3) && ctx.input(3).numel()) frame = scalar_int(ctx, 3, "frame_length");
    if (window && window->rank() != 1)
      throw BadInputError(node.label() + ": window must be 1-D, got " + shape_str(window->shape()));
    if (frame < 0 && window) frame = window->numel();
    if (frame < 1) throw BadInputError(node.label() + ": frame_length (or a window) is required and must be >= 1");
    if (window && window->numel() != frame)
      throw BadInputError(node.label() + ": window has " + std::to_string(window->numel()) +
                          " values for frame_length " + std::to_string(frame));
    if (step < 1) throw BadInputError(node.label() + ": frame_step must be >= 1, got " + std::to_string(step));
    const int64_t B = S.dim(0), len = S.dim(1);
    if (frame > len)
      throw BadInputError(node.label() + ": frame_length " + std::to_string(frame) + " is longer than the signal (" +
                          std::to_string(len) + ")");
    if (complex_in && onesided_)
      throw BadInputError(node.label() + ": onesided = 1 needs a real signal ([batch, length, 1])");
    const int64_t frames = (len - frame) / step + 1, bins = onesided_ ? frame / 2 + 1 : frame;
    check_scratch(checked_mul(frame, int64_t{5}, "STFT frame length"), "STFT working buffers");
    Tensor Y(DType::Float32, {B, frames, bins, 2});
    const Dft plan(frame, -1);
    const float* s = S.data<float>();
    const float* w = window ? window->data<float>() : nullptr;
    const int64_t c_in = S.dim(2);
    float* y = Y.data<float>();
    parallel_for(B * frames, threads_for(Y.numel() * 32, ctx.threads), [&](int64_t bf) {
      const int64_t b = bf / frames, f = bf % frames;
      std::vector<cd> a(static_cast<size_t>(frame));
      for (int64_t n = 0; n < frame; ++n) {
        const float* p = s + (b * len + f * step + n) * c_in;
        const double wn = w ? w[n] : 1.0;
        a[n] = cd(p[0] * wn, complex_in ? p[1] * wn : 0.0);
      }
      plan.run(a);
      for (int64_t k = 0; k < bins; ++k) {
        y[(bf * bins + k) * 2] = static_cast<float>(a[k].real());
        y[(bf * bins + k) * 2 + 1] = static_cast<float>(a[k].imag());
      }
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  bool onesided_;
};

// --------------------------------------------------------------------------------------- windows, mel matrix

DType generator_dtype(const NodeInfo& node) {
  const int64_t t = node.attrs.get_int("output_datatype", 1);
  if (t == 1) return DType::Float32;
  if (t == 11) return DType::Float64;
  throw UnsupportedError(node.label() + ": output_datatype " + std::to_string(t) +
                         " is not supported (1 = float and 11 = double are)");
}

Tensor fill_generated(DType dt, const Shape& shape, const std::vector<double>& v) {
  Tensor t(dt, shape);
  if (dt == DType::Float64)
    std::copy(v.begin(), v.end(), t.data<double>());
  else
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  return t;
}

class WindowKernel final : public Kernel {
 public:
  explicit WindowKernel(const NodeInfo& n)
      : dtype_(generator_dtype(n)), periodic_(n.attrs.get_int("periodic", 1) != 0) {
    if (n.op_type == "HannWindow")
      a_ = {0.5, 0.5, 0};
    else if (n.op_type == "HammingWindow")
      a_ = {25.0 / 46, 21.0 / 46, 0};
    else
      a_ = {0.42, 0.5, 0.08};
  }
  void run(KernelContext& ctx) override {
    const int64_t size = scalar_int(ctx, 0, "size");
    if (size < 0) throw BadInputError(ctx.node.label() + ": size must be >= 0, got " + std::to_string(size));
    check_tensor_allocation(checked_mul(size, int64_t{8}, "window size"), "window of " + std::to_string(size));
    const double N = static_cast<double>(periodic_ ? size : size - 1);
    std::vector<double> w(static_cast<size_t>(size));
    for (int64_t n = 0; n < size; ++n) {
      const double t = N > 0 ? 2 * std::numbers::pi * static_cast<double>(n) / N : 0.0;
      w[n] = a_[0] - a_[1] * std::cos(t) + a_[2] * std::cos(2 * t);
    }
    ctx.outputs[0] = fill_generated(dtype_, {size}, w);
  }

 private:
  DType dtype_;
  bool periodic_;
  std::array<double, 3> a_{};
};

class MelWeightMatrixKernel final : public Kernel {
 public:
  explicit MelWeightMatrixKernel(const NodeInfo& n) : dtype_(generator_dtype(n)) {}
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const int64_t mels = scalar_int(ctx, 0, "num_mel_bins"), dft = scalar_int(ctx, 1, "dft_length");
    const int64_t rate = scalar_int(ctx, 2, "sample_rate");
    const double lo = read_scalar(ctx.input(3), node, "lower_edge_hertz");
    const double hi = read_scalar(ctx.input(4), node, "upper_edge_hertz");
    if (mels < 1 || dft < 1 || rate < 1)
      throw BadInputError(node.label() + ": num_mel_bins, dft_length and sample_rate must be >= 1");
    if (!(lo >= 0 && hi >= lo && std::isfinite(hi)))
      throw BadInputError(node.label() + ": need 0 <= lower_edge_hertz <= upper_edge_hertz (finite)");
    const int64_t spec_bins = dft / 2 + 1;
    const int64_t cells = checked_mul(spec_bins, mels, "MelWeightMatrix size");
    check_tensor_allocation(checked_mul(cells, int64_t{8}, "MelWeightMatrix size"), "MelWeightMatrix");
    auto mel = [](double f) { return 2595 * std::log10(1 + f / 700); };
    const double m_lo = mel(lo), step = (mel(hi) - m_lo) / static_cast<double>(mels + 2);
    std::vector<int64_t> bin(static_cast<size_t>(mels + 2));
    for (int64_t i = 0; i < mels + 2; ++i) {
      const double f = 700 * (std::pow(10.0, (static_cast<double>(i) * step + m_lo) / 2595) - 1);
      const double b = std::floor(static_cast<double>(dft + 1) * f / static_cast<double>(rate));
      if (!(b >= 0 && b < static_cast<double>(spec_bins)))
        throw BadInputError(node.label() + ": upper_edge_hertz " + std::to_string(hi) +
                            " maps past the last frequency bin (keep it at most sample_rate / 2)");
      bin[i] = static_cast<int64_t>(b);
    }
    std::vector<double> out(static_cast<size_t>(cells), 0.0);
    for (int64_t i = 0; i < mels; ++i) {
      const int64_t l = bin[i], c = bin[i + 1], h = bin[i + 2];
      if (c == l)
        out[c * mels + i] = 1;
      else
        for (int64_t j = l; j <= c; ++j) out[j * mels + i] = static_cast<double>(j - l) / static_cast<double>(c - l);
      for (int64_t j = c; j < h; ++j) out[j * mels + i] = static_cast<double>(h - j) / static_cast<double>(h - c);
    }
    ctx.outputs[0] = fill_generated(dtype_, {spec_bins, mels}, out);
  }

 private:
  DType dtype_;
};

}  // namespace

std::unique_ptr<Kernel> make_dft(const NodeInfo& n) { return std::make_unique<DftKernel>(n); }
std::unique_ptr<Kernel> make_stft(const NodeInfo& n) { return std::make_unique<StftKernel>(n); }
std::unique_ptr<Kernel> make_window(const NodeInfo& n) { return std::make_unique<WindowKernel>(n); }
std::unique_ptr<Kernel> make_mel_weight_matrix(const NodeInfo& n) { return std::make_unique<MelWeightMatrixKernel>(n); }

}  // namespace qtool::runtime::kernels
