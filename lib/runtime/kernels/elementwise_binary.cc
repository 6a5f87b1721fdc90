// Binary and variadic elementwise kernels with NumPy broadcasting: arithmetic, comparison, logic,
// bit shifts, PRelu and Where. Inputs must share a dtype (Pow's exponent excepted, opset >= 12).
#include <cmath>
#include <cstring>

#include "runtime/kernels/broadcast.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

enum class Arith { Add, Sub, Mul, Div, Pow, Mod, FMod, Max, Min };
enum class Compare { Equal, Less, Greater, LessOrEqual, GreaterOrEqual };
enum class Logic { And, Or, Xor };

void require_same_dtype(const Tensor& a, const Tensor& b, const NodeInfo& node) {
  if (a.dtype() != b.dtype())
    throw BadInputError(node.label() + ": inputs have different dtypes (" + std::string(dtype_name(a.dtype())) +
                        " and " + std::string(dtype_name(b.dtype())) + ")");
}

// Python-style modulo for integers (sign of the divisor), C fmod for fmod=1 / floats.
template <class T>
T int_mod(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;  // avoids INT_MIN % -1
    T r = static_cast<T>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  } else {
    return static_cast<T>(a % b);
  }
}

template <class T>
Tensor arith(Arith op, const Tensor& a, const Tensor& b, const NodeInfo& n, int th) {
  const DType dt = a.dtype();
  switch (op) {
    case Arith::Add:
      return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) { return static_cast<T>(x + y); });
    case Arith::Sub:
      return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) { return static_cast<T>(x - y); });
    case Arith::Mul:
      return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) { return static_cast<T>(x * y); });
    case Arith::Div:
      if constexpr (std::is_integral_v<T>) {
        // Integer division by zero has no value: refused before the loop (which must not throw). MIN / -1
        // wraps to MIN, as two's-complement hardware would, instead of overflowing (UB).
        const T* d = b.data<T>();
        for (int64_t i = 0; i < b.numel(); ++i)
          if (d[i] == T{0}) throw BadInputError("integer division by zero (divisor B holds 0)");
        return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) {
          if (y == 0) return T{0};
          if constexpr (std::is_signed_v<T>)
            if (y == -1) return static_cast<T>(std::make_unsigned_t<T>{0} - static_cast<std::make_unsigned_t<T>>(x));
          return static_cast<T>(x / y);
        });
      } else {
        return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) { return x / y; });
      }
    case Arith::Pow:
      if constexpr (std::is_integral_v<T>)
        return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) {
          return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
        });
      else if (b.numel() == 1 && b.data<T>()[0] == T{2})  // x·x: correctly rounded, and no pow call (RMSNorm)
        return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T) { return x * x; });
      else
        return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) { return std::pow(x, y); });
    case Arith::Mod:
      if constexpr (std::is_integral_v<T>)
        return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) { return int_mod(x, y); });
      else
        throw BadInputError(n.label() + ": Mod on floating-point inputs requires fmod=1");
    case Arith::FMod:
      if constexpr (std::is_integral_v<T>)
        return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) {
          if (y == 0) return T{0};
          if constexpr (std::is_signed_v<T>)
            if (y == -1) return T{0};
          return static_cast<T>(x % y);
        });
      else
        return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) { return std::fmod(x, y); });
    // NaN propagates as in ONNX Runtime (std::max/min would drop a NaN in the second operand). Written
    // as selects without branches so the loops vectorise (Relu6 = Min(Relu(x), 6) in mobilenets): a NaN
    // x fails the comparison and is returned; a NaN y is returned by the first select.
    case Arith::Max:
      return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) {
        const T m = x < y ? y : x;
        if constexpr (std::is_floating_point_v<T>) return y != y ? y : m;
        return m;
      });
    case Arith::Min:
      return apply_binary<T, T, T>(a, b, dt, n, th, [](T x, T y) {
        const T m = y < x ? y : x;
        if constexpr (std::is_floating_point_v<T>) return y != y ? y : m;
        return m;
      });
  }
  throw InternalError("unhandled arithmetic op");
}

// Pow with an exponent of another dtype: computed in double, cast to the base's dtype.
Tensor pow_mixed(const Tensor& a, const Tensor& b, const NodeInfo& n, int th) {
  Tensor out;
  dispatch_numeric(a.dtype(), n, [&]<class T>() {
    dispatch_numeric(b.dtype(), n, [&]<class E>() {
      out = apply_binary<T, E, T>(a, b, a.dtype(), n, th, [](T x, E y) {
        return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
      });
    });
  });
  return out;
}

// Narrow floats (float16, bfloat16, FP8) are computed in float32 and rounded back to their dtype.
Tensor widen(const Tensor& t, const NodeInfo& n, int th) {
  return is_narrow_float(t.dtype()) ? cast_tensor(t, DType::Float32, n, th) : t;
}

Tensor arith_tensor(Arith op, const Tensor& a, const Tensor& b, const NodeInfo& n, int th) {
  if (is_narrow_float(a.dtype())) {
    if (op != Arith::Pow) require_same_dtype(a, b, n);
    return cast_tensor(arith_tensor(op, widen(a, n, th), widen(b, n, th), n, th), a.dtype(), n, th);
  }
  if (op == Arith::Pow && a.dtype() != b.dtype()) return pow_mixed(widen(a, n, th), widen(b, n, th), n, th);
  require_same_dtype(a, b, n);
  Tensor out;
  dispatch_numeric(a.dtype(), n, [&]<class T>() { out = arith<T>(op, a, b, n, th); });
  return out;
}

class ArithKernel final : public Kernel {
 public:
  explicit ArithKernel(const NodeInfo& n) {
    const std::string& t = n.op_type;
    variadic_ = t == "Sum" || t == "Mean" || t == "Max" || t == "Min";
    if (t == "Add" || t == "Sum" || t == "Mean")
      op_ = Arith::Add;
    else if (t == "Sub")
      op_ = Arith::Sub;
    else if (t == "Mul")
      op_ = Arith::Mul;
    else if (t == "Div")
      op_ = Arith::Div;
    else if (t == "Pow")
      op_ = Arith::Pow;
    else if (t == "Mod")
      op_ = n.attrs.get_int("fmod", 0) ? Arith::FMod : Arith::Mod;
    else if (t == "Max")
      op_ = Arith::Max;
    else if (t == "Min")
      op_ = Arith::Min;
    else
      throw InternalError("ArithKernel registered for " + t);
    mean_ = t == "Mean";
  }
  void run(KernelContext& ctx) override {
    if (!variadic_) {
      ctx.outputs[0] = arith_tensor(op_, ctx.input(0), ctx.input(1), ctx.node, ctx.threads);
      return;
    }
    // Variadic: fold left to right; a single input is copied through.
    Tensor acc = ctx.input(0);
    for (size_t i = 1; i < ctx.num_inputs(); ++i) acc = arith_tensor(op_, acc, ctx.input(i), ctx.node, ctx.threads);
    if (mean_) {
      const DType orig = acc.dtype();
      const Tensor x = widen(acc, ctx.node, ctx.threads);
      Tensor y(x.dtype(), x.shape());
      const double count = static_cast<double>(ctx.num_inputs());
      dispatch_float(x.dtype(), ctx.node, [&]<class T>() {
        const T c = static_cast<T>(count);
        const T* in = x.data<T>();
        T* out = y.data<T>();
        parallel_range(x.numel(), ctx.threads, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[i] = in[i] / c;
        });
      });
      acc = cast_tensor(y, orig, ctx.node, ctx.threads);
    } else if (ctx.num_inputs() == 1) {
      acc = acc.clone();
    }
    ctx.outputs[0] = std::move(acc);
  }

 private:
  Arith op_ = Arith::Add;
  bool variadic_ = false, mean_ = false;
};

class CompareKernel final : public Kernel {
 public:
  explicit CompareKernel(const NodeInfo& n) {
    const std::string& t = n.op_type;
    if (t == "Equal")
      op_ = Compare::Equal;
    else if (t == "Less")
      op_ = Compare::Less;
    else if (t == "Greater")
      op_ = Compare::Greater;
    else if (t == "LessOrEqual")
      op_ = Compare::LessOrEqual;
    else if (t == "GreaterOrEqual")
      op_ = Compare::GreaterOrEqual;
    else
      throw InternalError("CompareKernel registered for " + t);
  }
  void run(KernelContext& ctx) override {
    require_same_dtype(ctx.input(0), ctx.input(1), ctx.node);
    const NodeInfo& n = ctx.node;
    const int th = ctx.threads;
    const Tensor a = widen(ctx.input(0), n, th), b = widen(ctx.input(1), n, th);
    dispatch_numeric_bool(a.dtype(), n, [&]<class T>() {
      Tensor& o = ctx.outputs[0];
      switch (op_) {
        case Compare::Equal:
          o = apply_binary<T, T, bool>(a, b, DType::Bool, n, th, [](T x, T y) { return x == y; });
          break;
        case Compare::Less:
          o = apply_binary<T, T, bool>(a, b, DType::Bool, n, th, [](T x, T y) { return x < y; });
          break;
        case Compare::Greater:
          o = apply_binary<T, T, bool>(a, b, DType::Bool, n, th, [](T x, T y) { return x > y; });
          break;
        case Compare::LessOrEqual:
          o = apply_binary<T, T, bool>(a, b, DType::Bool, n, th, [](T x, T y) { return x <= y; });
          break;
        case Compare::GreaterOrEqual:
          o = apply_binary<T, T, bool>(a, b, DType::Bool, n, th, [](T x, T y) { return x >= y; });
          break;
      }
    });
  }

 private:
  Compare op_ = Compare::Equal;
};

class LogicKernel final : public Kernel {
 public:
  explicit LogicKernel(const NodeInfo& n) {
    if (n.op_type == "And")
      op_ = Logic::And;
    else if (n.op_type == "Or")
      op_ = Logic::Or;
    else if (n.op_type == "Xor")
      op_ = Logic::Xor;
    else
      throw InternalError("LogicKernel registered for " + n.op_type);
  }
  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != DType::Bool || b.dtype() != DType::Bool)
      throw BadInputError(ctx.node.label() + ": inputs must be bool");
    const NodeInfo& n = ctx.node;
    Tensor& o = ctx.outputs[0];
    switch (op_) {
      case Logic::And:
        o = apply_binary<bool, bool, bool>(a, b, DType::Bool, n, ctx.threads, [](bool x, bool y) { return x && y; });
        break;
      case Logic::Or:
        o = apply_binary<bool, bool, bool>(a, b, DType::Bool, n, ctx.threads, [](bool x, bool y) { return x || y; });
        break;
      case Logic::Xor:
        o = apply_binary<bool, bool, bool>(a, b, DType::Bool, n, ctx.threads, [](bool x, bool y) { return x != y; });
        break;
    }
  }

 private:
  Logic op_ = Logic::And;
};

class BitShiftKernel final : public Kernel {
 public:
  explicit BitShiftKernel(const NodeInfo& n) {
    const std::string dir = n.attrs.get_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") throw BadInputError("attribute direction must be LEFT or RIGHT");
    left_ = dir == "LEFT";
  }
  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    require_same_dtype(a, b, ctx.node);
    dispatch_numeric(a.dtype(), ctx.node, [&]<class T>() {
      if constexpr (std::is_unsigned_v<T>) {
        const bool left = left_;
        ctx.outputs[0] = apply_binary<T, T, T>(a, b, a.dtype(), ctx.node, ctx.threads, [=](T x, T s) {
          if (s >= sizeof(T) * 8) return T{0};
          return static_cast<T>(left ? x << s : x >> s);
        });
      } else {
        throw BadInputError(ctx.node.label() + ": BitShift takes unsigned integer inputs");
      }
    });
  }

 private:
  bool left_ = true;
};

// PRelu: y = x < 0 ? slope * x : x, slope broadcast to x.
// Before opset 7 a 1-D slope of size C applies per channel (dim 1), as PyTorch exported it.
void prelu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor s = ctx.input(1);
  require_same_dtype(x, s, ctx.node);
  if (ctx.node.opset < 7 && s.rank() == 1 && x.rank() > 2 && s.numel() == x.dim(1)) {
    Shape per_channel(static_cast<size_t>(x.rank() - 1), 1);
    per_channel[0] = s.numel();
    s = s.reshaped(per_channel);
  }
  dispatch_numeric(x.dtype(), ctx.node, [&]<class T>() {
    ctx.outputs[0] = apply_binary<T, T, T>(x, s, x.dtype(), ctx.node, ctx.threads,
                                           [](T v, T k) { return v < T{0} ? static_cast<T>(k * v) : v; });
  });
}

// Where(cond, X, Y): elementwise select with three-way broadcasting. Moves bits, so any dtype of
// 1, 2, 4 or 8 bytes works.
template <class U>
void where_bits(const BroadcastPlan& p, const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out, int th) {
  broadcast_ternary(p, c.data<bool>(), reinterpret_cast<const U*>(x.raw()), reinterpret_cast<const U*>(y.raw()),
                    reinterpret_cast<U*>(out.raw()), th, [](bool k, U a, U b) { return k ? a : b; });
}
void where_kernel(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DType::Bool) throw BadInputError(ctx.node.label() + ": condition must be bool");
  require_same_dtype(x, y, ctx.node);
  const BroadcastPlan p = plan_broadcast({&c.shape(), &x.shape(), &y.shape()}, ctx.node);
  Tensor out(x.dtype(), p.out_shape);
  switch (element_size(x.dtype(), ctx.node)) {
    case 1:
      where_bits<uint8_t>(p, c, x, y, out, ctx.threads);
      break;
    case 2:
      where_bits<uint16_t>(p, c, x, y, out, ctx.threads);
      break;
    case 4:
      where_bits<uint32_t>(p, c, x, y, out, ctx.threads);
      break;
    case 8:
      where_bits<uint64_t>(p, c, x, y, out, ctx.threads);
      break;
    default:
      throw UnsupportedError(ctx.node.label() + ": unsupported dtype");
  }
  ctx.outputs[0] = std::move(out);
}

}  // namespace

std::unique_ptr<Kernel> make_arith(const NodeInfo& n) { return std::make_unique<ArithKernel>(n); }
std::unique_ptr<Kernel> make_compare(const NodeInfo& n) { return std::make_unique<CompareKernel>(n); }
std::unique_ptr<Kernel> make_logic(const NodeInfo& n) { return std::make_unique<LogicKernel>(n); }
std::unique_ptr<Kernel> make_bitshift(const NodeInfo& n) { return std::make_unique<BitShiftKernel>(n); }
std::unique_ptr<Kernel> make_prelu(const NodeInfo& n) { return make_function_kernel<prelu_kernel>(n); }
std::unique_ptr<Kernel> make_where(const NodeInfo& n) { return make_function_kernel<where_kernel>(n); }

}  // namespace qtool::runtime::kernels
