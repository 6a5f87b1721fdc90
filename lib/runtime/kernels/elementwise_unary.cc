// Unary elementwise kernels: math functions and activations (ONNX opsets 6-21).
// Float ops compute in the input type (float or double) with <cmath>, except float32 Exp, Erf and Gelu, which
// use the vectorised compute::exp_approx / erf_approx (vector_math.h: within 2 and 3 ulp of <cmath>); results
// do not depend on the thread count (each element is computed independently).
#include <cmath>
#include <limits>

#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/vector_math.h"

namespace qtool::runtime::kernels {
namespace {

// Threads for a unary map and the fewest elements worth a parallel region (threading.h): smaller for
// ops whose element costs a transcendental function.
struct Par {
  Par(int t, int64_t g = kParallelGrain) : threads(t), grain(g) {}  // implicit: a bare thread count
  int threads;
  int64_t grain;
};

template <class TI, class TO, class F>
void map_unary(const Tensor& x, Tensor& y, Par par, F f) {
  const TI* in = x.data<TI>();
  TO* out = y.data<TO>();
  parallel_range(
      x.numel(), par.threads,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = f(in[i]);
      },
      par.grain);
}

// The same with an array function fn(in, out, n) (vector_math.h) on float32.
void map_float_array(const Tensor& x, Tensor& y, Par par, void (*fn)(const float*, float*, int64_t)) {
  const float* in = x.data<float>();
  float* out = y.data<float>();
  parallel_range(x.numel(), par.threads, [&](int64_t b, int64_t e) { fn(in + b, out + b, e - b); }, par.grain);
}

enum class FloatOp {
  Exp,
  Log,
  Sqrt,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  Tanh,
  Sigmoid,
  Erf,
  Reciprocal,
  Floor,
  Ceil,
  Round,
  Softplus,
  Softsign,
  HardSigmoid,
  HardSwish,
  Elu,
  Selu,
  Celu,
  LeakyRelu,
  ThresholdedRelu,
  Gelu,
  GeluTanh,
  Mish,
  Swish,
};

struct FloatOpName {
  std::string_view name;
  FloatOp op;
};
constexpr FloatOpName kFloatOps[] = {
    {"Exp", FloatOp::Exp},
    {"Log", FloatOp::Log},
    {"Sqrt", FloatOp::Sqrt},
    {"Sin", FloatOp::Sin},
    {"Cos", FloatOp::Cos},
    {"Tan", FloatOp::Tan},
    {"Asin", FloatOp::Asin},
    {"Acos", FloatOp::Acos},
    {"Atan", FloatOp::Atan},
    {"Sinh", FloatOp::Sinh},
    {"Cosh", FloatOp::Cosh},
    {"Asinh", FloatOp::Asinh},
    {"Acosh", FloatOp::Acosh},
    {"Atanh", FloatOp::Atanh},
    {"Tanh", FloatOp::Tanh},
    {"Sigmoid", FloatOp::Sigmoid},
    {"Erf", FloatOp::Erf},
    {"Reciprocal", FloatOp::Reciprocal},
    {"Floor", FloatOp::Floor},
    {"Ceil", FloatOp::Ceil},
    {"Round", FloatOp::Round},
    {"Softplus", FloatOp::Softplus},
    {"Softsign", FloatOp::Softsign},
    {"HardSigmoid", FloatOp::HardSigmoid},
    {"HardSwish", FloatOp::HardSwish},
    {"Elu", FloatOp::Elu},
    {"Selu", FloatOp::Selu},
    {"Celu", FloatOp::Celu},
    {"LeakyRelu", FloatOp::LeakyRelu},
    {"ThresholdedRelu", FloatOp::ThresholdedRelu},
    {"Gelu", FloatOp::Gelu},
    {"Mish", FloatOp::Mish},
    {"Swish", FloatOp::Swish},
};

// y = f(x) for float/double x; alpha/beta/gamma from the node's attributes with ONNX defaults.
class FloatUnaryKernel final : public Kernel {
 public:
  explicit FloatUnaryKernel(const NodeInfo& n) {
    bool found = false;
    for (const auto& e : kFloatOps)
      if (e.name == n.op_type) op_ = e.op, found = true;
    if (!found) throw InternalError("FloatUnaryKernel registered for " + n.op_type);
    switch (op_) {
      case FloatOp::HardSigmoid:
        alpha_ = n.attrs.get_float("alpha", 0.2f);
        beta_ = n.attrs.get_float("beta", 0.5f);
        break;
      case FloatOp::Elu:
        alpha_ = n.attrs.get_float("alpha", 1.0f);
        break;
      case FloatOp::Selu:
        alpha_ = n.attrs.get_float("alpha", 1.67326319217681884765625f);
        gamma_ = n.attrs.get_float("gamma", 1.05070102214813232421875f);
        break;
      case FloatOp::Celu:
        alpha_ = n.attrs.get_float("alpha", 1.0f);
        break;
      case FloatOp::LeakyRelu:
        alpha_ = n.attrs.get_float("alpha", 0.01f);
        break;
      case FloatOp::ThresholdedRelu:
      case FloatOp::Swish:
        alpha_ = n.attrs.get_float("alpha", 1.0f);
        break;
      case FloatOp::Gelu: {
        const std::string approx = n.attrs.get_string("approximate", "none");
        if (approx == "tanh")
          op_ = FloatOp::GeluTanh;
        else if (approx != "none")
          throw BadInputError("attribute approximate must be 'none' or 'tanh', got '" + approx + "'");
        break;
      }
      default:
        break;
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const bool narrow = is_narrow_float(in.dtype());  // computed in float32, rounded back
    const Tensor x = narrow ? cast_tensor(in, DType::Float32, ctx.node, ctx.threads) : in;
    Tensor y(x.dtype(), x.shape());
    const Par par{ctx.threads, cheap(op_) ? kParallelGrain : kParallelGrain / kTranscendentalCost};
    dispatch_float(x.dtype(), ctx.node, [&]<class T>() { apply<T>(x, y, par); });
    ctx.outputs[0] = narrow ? cast_tensor(y, in.dtype(), ctx.node, ctx.threads) : std::move(y);
  }

 private:
  // Ops of a few arithmetic instructions per element; the others call exp, log, erf, tanh and the like.
  static bool cheap(FloatOp op) {
    switch (op) {
      case FloatOp::Sqrt:
      case FloatOp::Reciprocal:
      case FloatOp::Floor:
      case FloatOp::Ceil:
      case FloatOp::Round:
      case FloatOp::Softsign:
      case FloatOp::HardSigmoid:
      case FloatOp::HardSwish:
      case FloatOp::LeakyRelu:
      case FloatOp::ThresholdedRelu:
        return true;
      default:
        return false;
    }
  }

  template <class T>
  void apply(const Tensor& x, Tensor& y, Par th) const {
    const T alpha = static_cast<T>(alpha_), beta = static_cast<T>(beta_), gamma = static_cast<T>(gamma_);
    const T one = 1, zero = 0, half = static_cast<T>(0.5);
    switch (op_) {
      case FloatOp::Exp:
        if constexpr (std::is_same_v<T, float>) return map_float_array(x, y, th, compute::exp_approx);
        return map_unary<T, T>(x, y, th, [](T v) { return std::exp(v); });
      case FloatOp::Log:
        return map_unary<T, T>(x, y, th, [](T v) { return std::log(v); });
      case FloatOp::Sqrt:
        return map_unary<T, T>(x, y, th, [](T v) { return std::sqrt(v); });
      case FloatOp::Sin:
        return map_unary<T, T>(x, y, th, [](T v) { return std::sin(v); });
      case FloatOp::Cos:
        return map_unary<T, T>(x, y, th, [](T v) { return std::cos(v); });
      case FloatOp::Tan:
        return map_unary<T, T>(x, y, th, [](T v) { return std::tan(v); });
      case FloatOp::Asin:
        return map_unary<T, T>(x, y, th, [](T v) { return std::asin(v); });
      case FloatOp::Acos:
        return map_unary<T, T>(x, y, th, [](T v) { return std::acos(v); });
      case FloatOp::Atan:
        return map_unary<T, T>(x, y, th, [](T v) { return std::atan(v); });
      case FloatOp::Sinh:
        return map_unary<T, T>(x, y, th, [](T v) { return std::sinh(v); });
      case FloatOp::Cosh:
        return map_unary<T, T>(x, y, th, [](T v) { return std::cosh(v); });
      case FloatOp::Asinh:
        return map_unary<T, T>(x, y, th, [](T v) { return std::asinh(v); });
      case FloatOp::Acosh:
        return map_unary<T, T>(x, y, th, [](T v) { return std::acosh(v); });
      case FloatOp::Atanh:
        return map_unary<T, T>(x, y, th, [](T v) { return std::atanh(v); });
      case FloatOp::Tanh:
        return map_unary<T, T>(x, y, th, [](T v) { return std::tanh(v); });
      case FloatOp::Sigmoid:
        // exp(-v) overflowing to inf for very negative v gives 1/inf = 0, the right limit.
        return map_unary<T, T>(x, y, th, [=](T v) { return one / (one + std::exp(-v)); });
      case FloatOp::Erf:
        if constexpr (std::is_same_v<T, float>) return map_float_array(x, y, th, compute::erf_approx);
        return map_unary<T, T>(x, y, th, [](T v) { return std::erf(v); });
      case FloatOp::Reciprocal:
        return map_unary<T, T>(x, y, th, [=](T v) { return one / v; });
      case FloatOp::Floor:
        return map_unary<T, T>(x, y, th, [](T v) { return std::floor(v); });
      case FloatOp::Ceil:
        return map_unary<T, T>(x, y, th, [](T v) { return std::ceil(v); });
      // Round half to even (ONNX Round), the default floating-point rounding mode.
      case FloatOp::Round:
        return map_unary<T, T>(x, y, th, [](T v) { return std::nearbyint(v); });
      case FloatOp::Softplus:
        return map_unary<T, T>(x, y, th,
                               [=](T v) { return v > zero ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); });
      case FloatOp::Softsign:
        return map_unary<T, T>(x, y, th, [=](T v) { return v / (one + std::abs(v)); });
      case FloatOp::HardSigmoid:
        return map_unary<T, T>(x, y, th, [=](T v) { return std::max(zero, std::min(one, alpha * v + beta)); });
      case FloatOp::HardSwish:
        return map_unary<T, T>(x, y, th,
                               [=](T v) { return v * std::max(zero, std::min(one, v / static_cast<T>(6) + half)); });
      case FloatOp::Elu:
        return map_unary<T, T>(x, y, th, [=](T v) { return v < zero ? alpha * std::expm1(v) : v; });
      case FloatOp::Selu:
        return map_unary<T, T>(x, y, th, [=](T v) { return v <= zero ? gamma * alpha * std::expm1(v) : gamma * v; });
      case FloatOp::Celu:
        return map_unary<T, T>(x, y, th,
                               [=](T v) { return std::max(zero, v) + std::min(zero, alpha * std::expm1(v / alpha)); });
      case FloatOp::LeakyRelu:
        return map_unary<T, T>(x, y, th, [=](T v) { return v < zero ? alpha * v : v; });
      case FloatOp::ThresholdedRelu:
        return map_unary<T, T>(x, y, th, [=](T v) { return v > alpha ? v : zero; });
      case FloatOp::Gelu:
        if constexpr (std::is_same_v<T, float>) return map_float_array(x, y, th, compute::gelu_approx);
        return map_unary<T, T>(
            x, y, th, [=](T v) { return half * v * (one + std::erf(v * static_cast<T>(0.70710678118654752440))); });
      case FloatOp::GeluTanh:
        return map_unary<T, T>(x, y, th, [=](T v) {
          const T k = static_cast<T>(0.79788456080286535588);  // sqrt(2/pi)
          return half * v * (one + std::tanh(k * (v + static_cast<T>(0.044715) * v * v * v)));
        });
      case FloatOp::Mish:
        return map_unary<T, T>(x, y, th, [=](T v) {
          const T sp = v > zero ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
          return v * std::tanh(sp);
        });
      // Swish (opset 24): x · sigmoid(alpha · x); exp overflowing to inf gives x / inf = 0, the right limit.
      case FloatOp::Swish:
        return map_unary<T, T>(x, y, th, [=](T v) { return v / (one + std::exp(-alpha * v)); });
    }
  }

  FloatOp op_ = FloatOp::Exp;
  float alpha_ = 0, beta_ = 0, gamma_ = 0;
};

enum class NumericOp { Abs, Neg, Sign, Relu };

// Abs, Neg, Sign, Relu on every numeric type.
class NumericUnaryKernel final : public Kernel {
 public:
  explicit NumericUnaryKernel(const NodeInfo& n) {
    if (n.op_type == "Abs")
      op_ = NumericOp::Abs;
    else if (n.op_type == "Neg")
      op_ = NumericOp::Neg;
    else if (n.op_type == "Sign")
      op_ = NumericOp::Sign;
    else if (n.op_type == "Relu")
      op_ = NumericOp::Relu;
    else
      throw InternalError("NumericUnaryKernel registered for " + n.op_type);
  }
  void run(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const bool narrow = is_narrow_float(in.dtype());  // computed in float32, rounded back (exact here)
    const Tensor x = narrow ? cast_tensor(in, DType::Float32, ctx.node, ctx.threads) : in;
    Tensor y(x.dtype(), x.shape());
    dispatch_numeric(x.dtype(), ctx.node, [&]<class T>() {
      const T zero = 0;
      switch (op_) {
        case NumericOp::Abs:
          if constexpr (std::is_unsigned_v<T>)
            map_unary<T, T>(x, y, ctx.threads, [](T v) { return v; });
          else
            map_unary<T, T>(x, y, ctx.threads, [=](T v) { return v < zero ? static_cast<T>(-v) : v; });
          break;
        case NumericOp::Neg:
          map_unary<T, T>(x, y, ctx.threads, [](T v) { return static_cast<T>(-v); });
          break;
        case NumericOp::Sign:
          map_unary<T, T>(x, y, ctx.threads, [=](T v) { return static_cast<T>((v > zero) - (v < zero)); });
          break;
        case NumericOp::Relu:
          map_unary<T, T>(x, y, ctx.threads, [=](T v) { return v > zero ? v : zero; });
          break;
      }
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  NumericOp op_ = NumericOp::Abs;
};

void not_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Bool) throw BadInputError(ctx.node.label() + ": Not takes bool input");
  Tensor y(DType::Bool, x.shape());
  map_unary<bool, bool>(x, y, ctx.threads, [](bool v) { return !v; });
  ctx.outputs[0] = std::move(y);
}

void isnan_kernel(KernelContext& ctx) {
  const Tensor x =
      cast_tensor(ctx.input(0), is_narrow_float(ctx.input(0).dtype()) ? DType::Float32 : ctx.input(0).dtype(), ctx.node,
                  ctx.threads);
  Tensor y(DType::Bool, x.shape());
  dispatch_float(x.dtype(), ctx.node,
                 [&]<class T>() { map_unary<T, bool>(x, y, ctx.threads, [](T v) { return std::isnan(v); }); });
  ctx.outputs[0] = std::move(y);
}

class IsInfKernel final : public Kernel {
 public:
  explicit IsInfKernel(const NodeInfo& n)
      : pos_(n.attrs.get_int("detect_positive", 1) != 0), neg_(n.attrs.get_int("detect_negative", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor x = cast_tensor(in, is_narrow_float(in.dtype()) ? DType::Float32 : in.dtype(), ctx.node, ctx.threads);
    Tensor y(DType::Bool, x.shape());
    dispatch_float(x.dtype(), ctx.node, [&]<class T>() {
      const bool p = pos_, ng = neg_;
      map_unary<T, bool>(x, y, ctx.threads, [=](T v) { return std::isinf(v) && ((v > 0 && p) || (v < 0 && ng)); });
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  bool pos_, neg_;
};

// Clip: y = min(max(x, lo), hi). Opset < 11: min/max attributes (default -inf/+inf); opset >= 11:
// optional scalar inputs 1 and 2 (default: the type's lowest/highest value).
class ClipKernel final : public Kernel {
 public:
  explicit ClipKernel(const NodeInfo& n) : opset_(n.opset) {
    if (n.opset < 11) {
      lo_attr_ = n.attrs.get_float("min", -std::numeric_limits<float>::infinity());
      hi_attr_ = n.attrs.get_float("max", std::numeric_limits<float>::infinity());
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const bool narrow = is_narrow_float(in.dtype());
    const Tensor x = narrow ? cast_tensor(in, DType::Float32, ctx.node, ctx.threads) : in;
    Tensor y(x.dtype(), x.shape());
    dispatch_numeric(x.dtype(), ctx.node, [&]<class T>() {
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      if (opset_ < 11) {
        lo = static_cast<T>(lo_attr_);
        hi = static_cast<T>(hi_attr_);
      } else {
        if (ctx.has_input(1)) lo = bound<T>(ctx, 1);
        if (ctx.has_input(2)) hi = bound<T>(ctx, 2);
      }
      map_unary<T, T>(x, y, ctx.threads, [=](T v) { return std::min(std::max(v, lo), hi); });
    });
    ctx.outputs[0] = narrow ? cast_tensor(y, in.dtype(), ctx.node, ctx.threads) : std::move(y);
  }

 private:
  template <class T>
  static T bound(KernelContext& ctx, size_t i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != ctx.input(0).dtype() || t.numel() != 1)
      throw BadInputError(ctx.node.label() + ": input " + std::to_string(i) + " must be a scalar of the input's dtype");
    return cast_tensor(t, dtype_of_v<T>, ctx.node, 1).template data<T>()[0];
  }
  int opset_;
  float lo_attr_ = 0, hi_attr_ = 0;
};

// Shrink: y = x < -lambd ? x + bias : (x > lambd ? x - bias : 0), any numeric dtype.
class ShrinkKernel final : public Kernel {
 public:
  explicit ShrinkKernel(const NodeInfo& n)
      : lambd_(n.attrs.get_float("lambd", 0.5f)), bias_(n.attrs.get_float("bias", 0.0f)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor y(x.dtype(), x.shape());
    dispatch_numeric(x.dtype(), ctx.node, [&]<class T>() {
      const double l = lambd_, b = bias_;
      map_unary<T, T>(x, y, ctx.threads, [=](T v) {
        const double d = static_cast<double>(v);
        return static_cast<T>(d < -l ? d + b : d > l ? d - b : 0.0);
      });
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  float lambd_, bias_;
};

}  // namespace

std::unique_ptr<Kernel> make_shrink(const NodeInfo& n) { return std::make_unique<ShrinkKernel>(n); }
std::unique_ptr<Kernel> make_float_unary(const NodeInfo& n) { return std::make_unique<FloatUnaryKernel>(n); }
std::unique_ptr<Kernel> make_numeric_unary(const NodeInfo& n) { return std::make_unique<NumericUnaryKernel>(n); }
std::unique_ptr<Kernel> make_not(const NodeInfo& n) { return make_function_kernel<not_kernel>(n); }
std::unique_ptr<Kernel> make_isnan(const NodeInfo& n) { return make_function_kernel<isnan_kernel>(n); }
std::unique_ptr<Kernel> make_isinf(const NodeInfo& n) { return std::make_unique<IsInfKernel>(n); }
std::unique_ptr<Kernel> make_clip(const NodeInfo& n) { return std::make_unique<ClipKernel>(n); }

}  // namespace qtool::runtime::kernels
