// Random generators: RandomNormal, RandomUniform (opset 1; shape attribute), RandomNormalLike, RandomUniformLike
// (opset 1; the input's shape, and dtype unless given), Bernoulli (opset 15), Multinomial (opset 7).
//
// qtool cannot reproduce ONNX Runtime's generator (nor does ORT promise one), so the draws are qtool's own and
// documented: each node owns a std::mt19937_64 (its output sequence is fixed by the C++ standard) seeded with the
// `seed` attribute's float bits, or with a fixed constant when the node has no seed (ORT then seeds from the clock;
// qtool stays reproducible: the same model and inputs give the same calibration table). The generator advances
// with every run, so successive runs draw fresh values, as ORT's do. Uniform u = (next() >> 11)·2^-53 in [0, 1);
// normal = Box–Muller on two uniforms; Bernoulli: 1 when u < p; Multinomial: per row, inverse CDF of
// softmax(input) at u. Float outputs are float32, float64 or float16 (dtype attribute, default float32).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "core/checked.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

enum class Draw { Normal, Uniform, Bernoulli, Multinomial };

class RandomKernel final : public Kernel {
 public:
  explicit RandomKernel(const NodeInfo& n) : node_(n) {
    const std::string& op = n.op_type;
    draw_ = op.starts_with("RandomNormal")    ? Draw::Normal
            : op.starts_with("RandomUniform") ? Draw::Uniform
            : op == "Bernoulli"               ? Draw::Bernoulli
                                              : Draw::Multinomial;
    like_ = op.ends_with("Like") || draw_ == Draw::Bernoulli;
    if (draw_ == Draw::Normal) {
      a_ = n.attrs.get_float("mean", 0.f);
      b_ = n.attrs.get_float("scale", 1.f);
    } else if (draw_ == Draw::Uniform) {
      a_ = n.attrs.get_float("low", 0.f);
      b_ = n.attrs.get_float("high", 1.f);
      if (!(a_ <= b_))
        throw BadInputError(n.label() + ": low (" + std::to_string(a_) + ") must not exceed high (" +
                            std::to_string(b_) + ")");
    }
    if (n.attrs.has("dtype")) {
      const int64_t code = n.attrs.get_int("dtype", 1);
      const DTypeInfo* info = code >= 0 && code <= 64 ? dtype_info_or_null(static_cast<int32_t>(code)) : nullptr;
      if (!info ||
          (draw_ == Draw::Multinomial ? info->dtype != DType::Int32 && info->dtype != DType::Int64
                                      : info->cls != DTypeClass::Float && draw_ != Draw::Bernoulli) ||
          info->cls == DTypeClass::String || info->elems_per_byte != 1)
        throw BadInputError(n.label() + ": dtype " + std::to_string(code) + " is not a valid output type of " + op);
      dtype_ = info->dtype;
    } else if (draw_ == Draw::Multinomial) {
      dtype_ = DType::Int32;
    }
    if (!like_ && draw_ != Draw::Multinomial) {
      shape_ = n.attrs.get_ints("shape");
      if (!n.attrs.has("shape")) throw BadInputError(n.label() + ": attribute 'shape' is required");
      for (int64_t d : shape_)
        if (d < 0) throw BadInputError(n.label() + ": shape has a negative dimension " + std::to_string(d));
    }
    samples_ = n.attrs.get_int("sample_size", 1);
    if (draw_ == Draw::Multinomial && samples_ < 0)
      throw BadInputError(n.label() + ": sample_size must be >= 0, got " + std::to_string(samples_));
    uint64_t seed = 0x5eed'0f'9709ULL;  // no seed attribute: a fixed one (see above)
    if (n.attrs.has("seed")) {
      const float s = n.attrs.get_float("seed", 0.f);
      uint32_t bits;
      std::memcpy(&bits, &s, sizeof bits);
      seed = bits;
    }
    rng_.seed(seed);
  }

  void run(KernelContext& ctx) override {
    std::lock_guard<std::mutex> lock(mutex_);  // one generator per node, shared by concurrent runs
    if (draw_ == Draw::Multinomial) return multinomial(ctx);
    Shape shape(shape_.begin(), shape_.end());
    DType dt = dtype_ == DType::Undefined ? DType::Float32 : dtype_;
    if (like_) {
      const Tensor& x = ctx.input(0);
      shape = x.shape();
      if (dtype_ == DType::Undefined) dt = x.dtype();
    }
    if (draw_ != Draw::Bernoulli && !is_float(dt))
      throw UnsupportedError(node_.label() + ": output dtype " + std::string(dtype_name(dt)) + " is not a float type");
    Tensor y(dt, shape);
    const int64_t n = y.numel();
    std::vector<double> p;
    if (draw_ == Draw::Bernoulli) {
      const Tensor& x = ctx.input(0);
      if (!is_float(x.dtype()) || dtype_info(x.dtype()).elems_per_byte != 1)
        throw UnsupportedError(node_.label() + ": input dtype " + std::string(dtype_name(x.dtype())) +
                               " is not a float type");
      p.resize(n);
      for (int64_t i = 0; i < n; ++i) p[i] = dtype_info(x.dtype()).load(x.raw(), i);
    }
    const DTypeInfo& info = dtype_info(dt);
    for (int64_t i = 0; i < n; ++i) {
      double v;
      if (draw_ == Draw::Normal)
        v = a_ + b_ * normal();
      else if (draw_ == Draw::Uniform)
        v = a_ + (b_ - a_) * uniform();
      else
        v = uniform() < p[i] ? 1.0 : 0.0;
      if (dt == DType::Float64)
        y.data<double>()[i] = v;
      else
        info.store(y.raw(), i, static_cast<float>(v), true);
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  }

  void multinomial(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2 || (x.dtype() != DType::Float32 && x.dtype() != DType::Float64))
      throw BadInputError(node_.label() + ": input must be float [batch, classes], got " +
                          std::string(dtype_name(x.dtype())) + " " + shape_str(x.shape()));
    const int64_t B = x.dim(0), C = x.dim(1);
    if (C == 0) throw BadInputError(node_.label() + ": input has no classes");
    Tensor y(dtype_, {B, samples_});
    std::vector<double> cdf(C);
    const DTypeInfo& in = dtype_info(x.dtype());
    for (int64_t b = 0; b < B; ++b) {
      double mx = -INFINITY;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, static_cast<double>(in.load(x.raw(), b * C + c)));
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) cdf[c] = sum += std::exp(in.load(x.raw(), b * C + c) - mx);
      for (int64_t s = 0; s < samples_; ++s) {
        const double u = uniform() * sum;
        const int64_t k = std::min<int64_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin(), C - 1);
        if (dtype_ == DType::Int64)
          y.data<int64_t>()[b * samples_ + s] = k;
        else
          y.data<int32_t>()[b * samples_ + s] = static_cast<int32_t>(k);
      }
    }
    ctx.outputs[0] = std::move(y);
  }

  NodeInfo node_;
  Draw draw_ = Draw::Normal;
  bool like_ = false;
  double a_ = 0, b_ = 1;
  DType dtype_ = DType::Undefined;
  std::vector<int64_t> shape_;
  int64_t samples_ = 1;
  std::mt19937_64 rng_;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<Kernel> make_random(const NodeInfo& n) { return std::make_unique<RandomKernel>(n); }

}  // namespace qtool::runtime::kernels
