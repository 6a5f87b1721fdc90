// Data-movement kernels: Transpose, Concat, Split, Slice, DepthToSpace, SpaceToDepth, Trilu.
// They move elements by size (any dtype of 1/2/4/8 bytes), so results are exact.
#include <cstring>

#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm, const NodeInfo& node, int threads) {
  const auto xs = strides_of(x.shape());
  Shape out_shape;
  std::vector<int64_t> strides;
  for (int64_t p : perm) {
    out_shape.push_back(x.shape()[p]);
    strides.push_back(xs[p]);
  }
  Tensor y(x.dtype(), out_shape);
  strided_copy(y, x, 0, strides, node, threads);
  return y;
}

class TransposeKernel final : public Kernel {
 public:
  explicit TransposeKernel(const NodeInfo& n) : perm_(n.attrs.get_ints("perm")) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> perm = perm_;
    if (perm.empty())
      for (int64_t i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != x.rank())
      throw BadInputError(ctx.node.label() + ": perm has " + std::to_string(perm.size()) + " entries for rank " +
                          std::to_string(x.rank()));
    std::vector<bool> seen(perm.size(), false);
    for (int64_t& p : perm) {
      p = normalize_axis(p, x.rank(), ctx.node);
      if (seen[p]) throw BadInputError(ctx.node.label() + ": perm is not a permutation");
      seen[p] = true;
    }
    ctx.outputs[0] = transpose(x, perm, ctx.node, ctx.threads);
  }

 private:
  std::vector<int64_t> perm_;
};

class ConcatKernel final : public Kernel {
 public:
  explicit ConcatKernel(const NodeInfo& n) : axis_(n.attrs.require_int("axis")) {}
  void run(KernelContext& ctx) override {
    const Tensor& first = ctx.input(0);
    const int64_t rank = first.rank();
    const int64_t axis = normalize_axis(axis_, rank, ctx.node);
    Shape out_shape = first.shape();
    out_shape[axis] = 0;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      bool ok = t.rank() == rank && t.dtype() == first.dtype();
      for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis || t.shape()[d] == first.shape()[d];
      if (!ok)
        throw BadInputError(ctx.node.label() + ": input " + std::to_string(i) + " (" +
                            std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()) +
                            ") does not match input 0 (" + std::string(dtype_name(first.dtype())) + " " +
                            shape_str(first.shape()) + ") outside axis " + std::to_string(axis));
      out_shape[axis] += t.shape()[axis];
    }
    Tensor y(first.dtype(), out_shape);
    const size_t es = element_size(first.dtype(), ctx.node);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
    const size_t out_row = static_cast<size_t>(out_shape[axis] * inner) * es;
    size_t col = 0;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      const size_t row = static_cast<size_t>(t.shape()[axis] * inner) * es;
      copy_rows(y.raw() + col, static_cast<int64_t>(out_row), t.raw(), static_cast<int64_t>(row), outer, row);
      col += row;
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

// Split: sizes from the 'split' attribute (opset < 13), the second input (opset >= 13), or equal
// parts (num_outputs at opset 18: the last part may be smaller).
class SplitKernel final : public Kernel {
 public:
  explicit SplitKernel(const NodeInfo& n)
      : axis_(n.attrs.get_int("axis", 0)), attr_(n.attrs.get_ints("split")), opset_(n.opset) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t axis = normalize_axis(axis_, x.rank(), ctx.node);
    const int64_t dim = x.shape()[axis];
    const int64_t n_out = static_cast<int64_t>(ctx.outputs.size());
    std::vector<int64_t> sizes;
    if (opset_ >= 13 && ctx.has_input(1))
      sizes = read_ints(ctx.input(1), ctx.node, "split");
    else if (opset_ < 13)
      sizes = attr_;
    if (sizes.empty()) {
      const int64_t part = opset_ >= 18 ? (dim + n_out - 1) / n_out : dim / n_out;
      if (opset_ < 18 && dim % n_out != 0)
        throw BadInputError(ctx.node.label() + ": dim " + std::to_string(dim) + " does not split into " +
                            std::to_string(n_out) + " equal parts");
      for (int64_t i = 0; i < n_out; ++i) sizes.push_back(std::max<int64_t>(0, std::min(part, dim - i * part)));
    }
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    if (static_cast<int64_t>(sizes.size()) != n_out || total != dim)
      throw BadInputError(ctx.node.label() + ": split sizes " + shape_str(sizes) + " do not cover dim " +
                          std::to_string(dim) + " with " + std::to_string(n_out) + " outputs");
    const size_t es = element_size(x.dtype(), ctx.node);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    const size_t in_row = static_cast<size_t>(dim * inner) * es;
    size_t col = 0;
    for (int64_t i = 0; i < n_out; ++i) {
      Shape s = x.shape();
      s[axis] = sizes[i];
      Tensor y(x.dtype(), s);
      const size_t row = static_cast<size_t>(sizes[i] * inner) * es;
      copy_rows(y.raw(), static_cast<int64_t>(row), x.raw() + col, static_cast<int64_t>(in_row), outer, row);
      col += row;
      ctx.outputs[i] = std::move(y);
    }
  }

 private:
  int64_t axis_;
  std::vector<int64_t> attr_;
  int opset_;
};

// Slice: starts/ends/axes from attributes (opset < 10) or inputs (opset >= 10, with steps).
// Clamping follows the ONNX spec, including negative steps.
class SliceKernel final : public Kernel {
 public:
  explicit SliceKernel(const NodeInfo& n) : opset_(n.opset) {
    if (opset_ < 10) {
      starts_ = n.attrs.get_ints("starts");
      ends_ = n.attrs.get_ints("ends");
      axes_ = n.attrs.get_ints("axes");
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> starts = starts_, ends = ends_, axes = axes_, steps;
    if (opset_ >= 10) {
      starts = read_ints(ctx.input(1), ctx.node, "starts");
      ends = read_ints(ctx.input(2), ctx.node, "ends");
      if (ctx.has_input(3)) axes = read_ints(ctx.input(3), ctx.node, "axes");
      if (ctx.has_input(4)) steps = read_ints(ctx.input(4), ctx.node, "steps");
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      throw BadInputError(ctx.node.label() + ": starts, ends, axes and steps must have the same length");
    const int64_t rank = x.rank();
    std::vector<int64_t> begin(rank, 0), step(rank, 1);
    Shape out_shape = x.shape();
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t a = normalize_axis(axes[i], rank, ctx.node);
      const int64_t dim = x.shape()[a];
      const int64_t st = steps[i];
      if (st == 0) throw BadInputError(ctx.node.label() + ": steps must not be 0");
      int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
      int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
      if (st > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
      }
      // Element count without overflow for steps near INT64_MIN / INT64_MAX (s and e lie in [-1, dim]).
      const uint64_t abs_step = st > 0 ? static_cast<uint64_t>(st) : uint64_t{0} - static_cast<uint64_t>(st);
      const int64_t span = st > 0 ? e - s : s - e;
      const int64_t len = span <= 0 ? 0 : static_cast<int64_t>((static_cast<uint64_t>(span) - 1) / abs_step + 1);
      out_shape[a] = len;
      begin[a] = s;
      step[a] = len > 1 ? st : 1;  // |step| < dim when two or more elements are taken, so strides cannot overflow
    }
    const auto xs = strides_of(x.shape());
    int64_t offset = 0;
    std::vector<int64_t> strides(rank);
    for (int64_t d = 0; d < rank; ++d) {
      strides[d] = xs[d] * step[d];
      offset += begin[d] * xs[d];
    }
    Tensor y(x.dtype(), out_shape);
    if (y.numel() > 0) strided_copy(y, x, offset, strides, ctx.node, ctx.threads);
    ctx.outputs[0] = std::move(y);
  }

 private:
  int opset_;
  std::vector<int64_t> starts_, ends_, axes_;
};

// DepthToSpace (DCR or CRD) and SpaceToDepth as reshape + transpose of an NCHW tensor.
class DepthToSpaceKernel final : public Kernel {
 public:
  explicit DepthToSpaceKernel(const NodeInfo& n)
      : block_(n.attrs.require_int("blocksize")),
        crd_(n.attrs.get_string("mode", "DCR") == "CRD"),
        to_depth_(n.op_type == "SpaceToDepth") {
    if (block_ <= 0) throw BadInputError("blocksize must be positive");
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) throw BadInputError(ctx.node.label() + ": input must be 4-D NCHW");
    const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), b = block_;
    Tensor view;
    std::vector<int64_t> perm;
    Shape out_shape;
    if (to_depth_) {
      if (H % b || W % b) throw BadInputError(ctx.node.label() + ": H and W must be multiples of blocksize");
      view = x.reshaped({N, C, H / b, b, W / b, b});
      perm = {0, 3, 5, 1, 2, 4};
      out_shape = {N, C * b * b, H / b, W / b};
    } else {
      if (C % (b * b)) throw BadInputError(ctx.node.label() + ": C must be a multiple of blocksize^2");
      if (crd_) {
        view = x.reshaped({N, C / (b * b), b, b, H, W});
        perm = {0, 1, 4, 2, 5, 3};
      } else {
        view = x.reshaped({N, b, b, C / (b * b), H, W});
        perm = {0, 3, 4, 1, 5, 2};
      }
      out_shape = {N, C / (b * b), H * b, W * b};
    }
    ctx.outputs[0] = transpose(view, perm, ctx.node, ctx.threads).reshaped(out_shape);
  }

 private:
  int64_t block_;
  bool crd_, to_depth_;
};

// Trilu: keep the upper (upper=1) or lower triangle of the last two dims relative to diagonal k.
class TriluKernel final : public Kernel {
 public:
  explicit TriluKernel(const NodeInfo& n) : upper_(n.attrs.get_int("upper", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) throw BadInputError(ctx.node.label() + ": input must have rank >= 2");
    const int64_t k = ctx.has_input(1) ? static_cast<int64_t>(read_scalar(ctx.input(1), ctx.node, "k")) : 0;
    const int64_t R = x.dim(-2), C = x.dim(-1);
    const int64_t mats = R * C == 0 ? 0 : x.numel() / (R * C);
    Tensor y = x.clone();
    const size_t es = element_size(x.dtype(), ctx.node);
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) {
          const bool keep = upper_ ? j - i >= k : j - i <= k;
          if (!keep) std::memset(y.raw() + ((m * R + i) * C + j) * es, 0, es);
        }
    ctx.outputs[0] = std::move(y);
  }

 private:
  bool upper_;
};

// ReverseSequence: for each batch entry b, reverse the first sequence_lens[b] elements along time_axis.
class ReverseSequenceKernel final : public Kernel {
 public:
  explicit ReverseSequenceKernel(const NodeInfo& n)
      : batch_axis_(n.attrs.get_int("batch_axis", 1)), time_axis_(n.attrs.get_int("time_axis", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> lens = read_ints(ctx.input(1), ctx.node, "sequence_lens");
    const int64_t ba = normalize_axis(batch_axis_, x.rank(), ctx.node),
                  ta = normalize_axis(time_axis_, x.rank(), ctx.node);
    if (static_cast<int64_t>(lens.size()) != x.shape()[ba])
      throw BadInputError(ctx.node.label() + ": sequence_lens must have one entry per batch element");
    Tensor y = x.clone();
    const auto xs = strides_of(x.shape());
    const size_t es = element_size(x.dtype(), ctx.node);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t rem = i, b = 0, t = 0;
      for (int64_t d = x.rank() - 1; d >= 0; --d) {
        const int64_t c = rem % x.shape()[d];
        rem /= x.shape()[d];
        if (d == ba) b = c;
        if (d == ta) t = c;
      }
      const int64_t len = std::clamp<int64_t>(lens[b], 0, x.shape()[ta]);
      if (t >= len) continue;
      const int64_t src = i + (len - 1 - 2 * t) * xs[ta];
      std::memcpy(y.raw() + i * es, x.raw() + src * es, es);
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t batch_axis_, time_axis_;
};

}  // namespace

std::unique_ptr<Kernel> make_reverse_sequence(const NodeInfo& n) { return std::make_unique<ReverseSequenceKernel>(n); }
std::unique_ptr<Kernel> make_transpose(const NodeInfo& n) { return std::make_unique<TransposeKernel>(n); }
std::unique_ptr<Kernel> make_concat(const NodeInfo& n) { return std::make_unique<ConcatKernel>(n); }
std::unique_ptr<Kernel> make_split(const NodeInfo& n) { return std::make_unique<SplitKernel>(n); }
std::unique_ptr<Kernel> make_slice(const NodeInfo& n) { return std::make_unique<SliceKernel>(n); }
std::unique_ptr<Kernel> make_depth_space(const NodeInfo& n) { return std::make_unique<DepthToSpaceKernel>(n); }
std::unique_ptr<Kernel> make_trilu(const NodeInfo& n) { return std::make_unique<TriluKernel>(n); }

}  // namespace qtool::runtime::kernels
