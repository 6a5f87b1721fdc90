// Sequence ops over runtime/value.h's TensorSequence: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt,
// SequenceErase, SequenceLength (opset 11+), SplitToSequence, ConcatFromSequence (11+), SequenceMap (17+).
//
// Element tensors are shared, never copied: SequenceAt returns the element itself, SequenceConstruct and
// SequenceInsert hold their inputs (tensors are immutable once produced). Only SplitToSequence (new parts) and
// ConcatFromSequence (one new tensor) move bytes. SequenceInsert and SequenceErase modify their input in place when
// the frame handed them its only reference (KernelContext::take_sequence), else a copy of its handles.
//
// Positions (SequenceAt, SequenceErase: [-n, n-1]; SequenceInsert: [-n, n]) are int32/int64 scalars; a negative
// position counts from the back (p + n). Outside the range: BadInputError naming the node, the position and n, as
// ONNX Runtime refuses it. Every element of a sequence has the sequence's dtype; a tensor of another dtype is a
// BadInputError.
#include <algorithm>

#include "core/checked.h"
#include "runtime/graph.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

SequenceRef make_sequence(DType elem) {
  auto s = std::make_shared<TensorSequence>();
  s->elem_dtype = elem;
  return s;
}

// A position input: one int32/int64 value, in [-n, n - 1] (or [-n, n] with `end_ok`), returned in [0, n].
int64_t position(const Tensor& p, int64_t n, bool end_ok, const NodeInfo& node) {
  if (p.dtype() != DType::Int32 && p.dtype() != DType::Int64)
    throw BadInputError(node.label() + ": position must be int32 or int64, got " + std::string(dtype_name(p.dtype())));
  if (p.numel() != 1)
    throw BadInputError(node.label() + ": position must be a scalar, got shape " + shape_str(p.shape()));
  const int64_t v = p.dtype() == DType::Int32 ? p.data<int32_t>()[0] : p.data<int64_t>()[0];
  const int64_t hi = end_ok ? n : n - 1;
  if (v < -n || v > hi)
    throw BadInputError(node.label() + ": position " + std::to_string(v) + " is outside [" + std::to_string(-n) + ", " +
                        std::to_string(hi) + "] for a sequence of " + std::to_string(n) + " tensors");
  return v < 0 ? v + n : v;
}

void check_elem_dtype(DType want, const Tensor& t, const NodeInfo& node, const std::string& what) {
  if (want != DType::Undefined && t.dtype() != want)
    throw BadInputError(node.label() + ": " + what + " is " + std::string(dtype_name(t.dtype())) +
                        ", the sequence holds " + std::string(dtype_name(want)) + " tensors");
}

// SequenceEmpty: an empty sequence of dtype `dtype` (default float).
class SequenceEmptyKernel final : public Kernel {
 public:
  explicit SequenceEmptyKernel(const NodeInfo& n) {
    const int64_t onnx_type = n.attrs.get_int("dtype", 1);
    const DTypeInfo* info = dtype_info_or_null(static_cast<int32_t>(onnx_type));
    if (!info) throw_unknown_dtype(static_cast<int32_t>(onnx_type), n.label() + " attribute 'dtype'");
    dtype_ = info->dtype;
  }
  void run(KernelContext& ctx) override { ctx.set_output(0, make_sequence(dtype_)); }

 private:
  DType dtype_;
};

// SequenceConstruct(inputs...): the sequence of its inputs, in order; all of one dtype.
void sequence_construct(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  SequenceRef s = make_sequence(first.dtype());
  s->items.reserve(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    check_elem_dtype(first.dtype(), t, ctx.node, "input " + std::to_string(i));
    s->items.push_back(t);
  }
  ctx.set_output(0, std::move(s));
}

// SequenceInsert(S, tensor, position?): S with tensor inserted before `position` (default: at the end).
void sequence_insert(KernelContext& ctx) {
  const Tensor& t = ctx.input(1);
  const int64_t n = ctx.sequence(0).size();
  check_elem_dtype(ctx.sequence(0).elem_dtype, t, ctx.node, "the tensor");
  const int64_t at = ctx.has_input(2) ? position(ctx.input(2), n, true, ctx.node) : n;
  SequenceRef s = ctx.take_sequence(0);
  if (s->elem_dtype == DType::Undefined) s->elem_dtype = t.dtype();
  s->items.insert(s->items.begin() + at, t);
  ctx.set_output(0, std::move(s));
}

// SequenceAt(S, position): the element at `position`.
void sequence_at(KernelContext& ctx) {
  const TensorSequence& s = ctx.sequence(0);
  ctx.outputs[0] = s.items[static_cast<size_t>(position(ctx.input(1), s.size(), false, ctx.node))];
}

// SequenceErase(S, position?): S without the element at `position` (default: the last).
void sequence_erase(KernelContext& ctx) {
  const int64_t n = ctx.sequence(0).size();
  if (!ctx.has_input(1) && n == 0) throw BadInputError(ctx.node.label() + ": cannot erase from an empty sequence");
  const int64_t at = ctx.has_input(1) ? position(ctx.input(1), n, false, ctx.node) : n - 1;
  SequenceRef s = ctx.take_sequence(0);
  s->items.erase(s->items.begin() + at);
  ctx.set_output(0, std::move(s));
}

// SequenceLength(S): the number of elements, an int64 scalar.
void sequence_length(KernelContext& ctx) { ctx.outputs[0] = Tensor::scalar<int64_t>(ctx.sequence(0).size()); }

// Copies parts of x along `axis` (x's shape with that axis `sizes[k]` long, in order) into new tensors.
std::vector<Tensor> split_parts(const Tensor& x, int64_t axis, const std::vector<int64_t>& sizes,
                                const NodeInfo& node) {
  const size_t es = element_size(x.dtype(), node);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
  const size_t in_row = static_cast<size_t>(x.shape()[axis] * inner) * es;
  std::vector<Tensor> parts;
  parts.reserve(sizes.size());
  size_t col = 0;
  for (int64_t size : sizes) {
    Shape s = x.shape();
    s[axis] = size;
    Tensor y(x.dtype(), s);
    const size_t row = static_cast<size_t>(size * inner) * es;
    copy_rows(y.raw(), static_cast<int64_t>(row), x.raw() + col, static_cast<int64_t>(in_row), outer, row);
    col += row;
    parts.push_back(std::move(y));
  }
  return parts;
}

// SplitToSequence(input, split?): parts of input along `axis` (default 0). split a scalar k > 0: parts of k, the
// last one shorter when k does not divide the axis; split 1-D: parts of those lengths (each >= 0, summing to the
// axis); no split: parts of 1. keepdims = 0 removes the split axis from every part, as ONNX Runtime does, with no
// split or a scalar one, which must then be 1 (ORT fails otherwise); the spec's text ignores keepdims whenever split
// is given, but torch.jit.script exports torch.unbind as SplitToSequence(x, 1, keepdims = 0) and relies on ORT's
// reading. A 1-D split ignores keepdims.
class SplitToSequenceKernel final : public Kernel {
 public:
  explicit SplitToSequenceKernel(const NodeInfo& n)
      : axis_(n.attrs.get_int("axis", 0)), keepdims_(n.attrs.get_int("keepdims", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() == 0) throw BadInputError(ctx.node.label() + ": input is a scalar; it has no axis to split");
    const int64_t axis = normalize_axis(axis_, x.rank(), ctx.node);
    const int64_t dim = x.shape()[axis];
    std::vector<int64_t> sizes;
    if (ctx.has_input(1)) {
      const Tensor& split = ctx.input(1);
      const std::vector<int64_t> v = read_ints(split, ctx.node, "split");
      if (split.rank() == 0) {
        if (v[0] <= 0) throw BadInputError(ctx.node.label() + ": split " + std::to_string(v[0]) + " must be > 0");
        const int64_t parts = dim / v[0] + (dim % v[0] != 0);
        check_sequence_elements(parts);
        sizes.assign(static_cast<size_t>(parts), v[0]);
        if (dim % v[0]) sizes.back() = dim % v[0];
      } else {
        if (split.rank() != 1)
          throw BadInputError(ctx.node.label() + ": split must be a scalar or 1-D, got " + shape_str(split.shape()));
        int64_t total = 0;
        for (int64_t s : v) {
          if (s < 0) throw BadInputError(ctx.node.label() + ": split sizes " + shape_str(v) + " must all be >= 0");
          total = checked_add(total, s, "sum of split sizes");
        }
        if (total != dim)
          throw BadInputError(ctx.node.label() + ": split sizes " + shape_str(v) + " sum to " + std::to_string(total) +
                              ", not to the axis length " + std::to_string(dim));
        sizes = v;
      }
    } else {
      check_sequence_elements(dim);
      sizes.assign(static_cast<size_t>(dim), 1);
    }
    const bool drop_axis = !keepdims_ && (!ctx.has_input(1) || ctx.input(1).rank() == 0);
    if (drop_axis && ctx.has_input(1) && !sizes.empty() && (sizes.front() != 1 || sizes.back() != 1))
      throw BadInputError(ctx.node.label() +
                          ": keepdims = 0 removes the split axis, so a scalar split must be 1, got " +
                          std::to_string(sizes.front()));
    std::vector<Tensor> parts = split_parts(x, axis, sizes, ctx.node);
    if (drop_axis)
      for (Tensor& p : parts) {
        Shape s = p.shape();
        s.erase(s.begin() + axis);
        p = p.reshaped(s);
      }
    SequenceRef out = make_sequence(x.dtype());
    out->items = std::move(parts);
    ctx.set_output(0, std::move(out));
  }

 private:
  int64_t axis_;
  bool keepdims_;
};

// ConcatFromSequence(S): its elements concatenated along `axis` (new_axis = 0: numpy.concatenate, axis in [-r, r-1],
// shapes equal but along the axis) or stacked on a new axis (new_axis = 1: numpy.stack, axis in [-r-1, r], shapes
// equal). An empty sequence is an error (ONNX Runtime refuses it too: the result's shape is unknown).
class ConcatFromSequenceKernel final : public Kernel {
 public:
  explicit ConcatFromSequenceKernel(const NodeInfo& n)
      : axis_(n.attrs.require_int("axis")), new_axis_(n.attrs.get_int("new_axis", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const TensorSequence& s = ctx.sequence(0);
    if (s.items.empty()) throw BadInputError(ctx.node.label() + ": the input sequence is empty");
    const Tensor& first = s.items.front();
    const int64_t rank = first.rank() + (new_axis_ ? 1 : 0);
    if (rank == 0) throw BadInputError(ctx.node.label() + ": the elements are scalars; use new_axis = 1 to stack them");
    const int64_t axis = normalize_axis(axis_, rank, ctx.node);
    // Each element as seen by the concatenation: with new_axis, a 1 inserted at `axis`.
    auto view = [&](const Tensor& t) {
      Shape v = t.shape();
      if (new_axis_) v.insert(v.begin() + std::min<int64_t>(axis, t.rank()), 1);
      return v;
    };
    const Shape first_view = view(first);
    Shape out_shape = first_view;
    out_shape[axis] = 0;
    for (size_t i = 0; i < s.items.size(); ++i) {
      const Tensor& t = s.items[i];
      const Shape v = view(t);
      bool ok = t.dtype() == first.dtype() && static_cast<int64_t>(v.size()) == rank;
      for (int64_t d = 0; ok && d < rank; ++d) ok = (d == axis && !new_axis_) || v[d] == first_view[d];
      if (!ok)
        throw BadInputError(ctx.node.label() + ": element " + std::to_string(i) + " (" +
                            std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()) +
                            ") does not match element 0 (" + std::string(dtype_name(first.dtype())) + " " +
                            shape_str(first.shape()) + (new_axis_ ? ")" : ") outside axis " + std::to_string(axis)));
      out_shape[axis] = checked_add(out_shape[axis], v[axis], "concatenated length");
    }
    Tensor y(first.dtype(), out_shape);
    const size_t es = element_size(first.dtype(), ctx.node);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
    const size_t out_row = static_cast<size_t>(out_shape[axis] * inner) * es;
    size_t col = 0;
    for (const Tensor& t : s.items) {
      const size_t row = static_cast<size_t>(view(t)[axis] * inner) * es;
      copy_rows(y.raw() + col, static_cast<int64_t>(out_row), t.raw(), static_cast<int64_t>(row), outer, row);
      col += row;
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t axis_;
  bool new_axis_;
};

// SequenceMap(input_sequence, additional_inputs...) -> out_sequences...: the body runs once per element i of
// input_sequence, on (input_sequence[i], then each additional input: its element i when it is a sequence, which must
// be as long, else the tensor itself); output k collects the body's output k of every run, in order. With an empty
// input_sequence every output is an empty sequence of the body output's declared dtype (float when undeclared).
class SequenceMapKernel final : public Kernel {
 public:
  explicit SequenceMapKernel(const NodeInfo& n) : body_(n.attrs.require_graph("body")) {}
  void run(KernelContext& ctx) override {
    const Graph& body = *body_;
    const TensorSequence& in = ctx.sequence(0);
    const int64_t n = in.size();
    if (body.inputs.size() != ctx.num_inputs() || body.outputs.size() != ctx.outputs.size())
      throw BadInputError(ctx.node.label() + ": the body takes " + std::to_string(body.inputs.size()) +
                          " inputs and returns " + std::to_string(body.outputs.size()) + " outputs; the node has " +
                          std::to_string(ctx.num_inputs()) + " and " + std::to_string(ctx.outputs.size()));
    for (size_t k = 1; k < ctx.num_inputs(); ++k)
      if (ctx.is_sequence(k) && ctx.sequence(k).size() != n)
        throw BadInputError(ctx.node.label() + ": input " + std::to_string(k) + " is a sequence of " +
                            std::to_string(ctx.sequence(k).size()) + " tensors, input_sequence of " +
                            std::to_string(n));
    if (!ctx.subgraphs) throw InternalError(ctx.node.label() + ": no subgraph runner");
    std::vector<SequenceRef> outs;
    for (const ValueDecl& d : body.outputs)
      outs.push_back(make_sequence(d.dtype == DType::Undefined ? DType::Float32 : d.dtype));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<Value> args;
      args.reserve(ctx.num_inputs());
      args.emplace_back(in.items[static_cast<size_t>(i)]);
      for (size_t k = 1; k < ctx.num_inputs(); ++k)
        args.emplace_back(ctx.is_sequence(k) ? Value(ctx.sequence(k).items[static_cast<size_t>(i)]) : ctx.value(k));
      std::vector<Value> res = ctx.subgraphs->run_values(body, std::move(args));
      for (size_t k = 0; k < res.size(); ++k) {
        if (res[k].is_sequence())
          throw BadInputError(ctx.node.label() + ": body output " + std::to_string(k) + " is a sequence; " +
                              "SequenceMap collects tensors");
        if (i == 0) outs[k]->elem_dtype = res[k].tensor.dtype();
        check_elem_dtype(outs[k]->elem_dtype, res[k].tensor, ctx.node, "body output " + std::to_string(k));
        outs[k]->items.push_back(std::move(res[k].tensor));
      }
    }
    for (size_t k = 0; k < outs.size(); ++k) ctx.set_output(k, std::move(outs[k]));
  }

 private:
  std::shared_ptr<const Graph> body_;
};

}  // namespace

std::unique_ptr<Kernel> make_sequence_empty(const NodeInfo& n) { return std::make_unique<SequenceEmptyKernel>(n); }
std::unique_ptr<Kernel> make_sequence_construct(const NodeInfo& n) {
  return make_function_kernel<sequence_construct>(n);
}
std::unique_ptr<Kernel> make_sequence_insert(const NodeInfo& n) { return make_function_kernel<sequence_insert>(n); }
std::unique_ptr<Kernel> make_sequence_at(const NodeInfo& n) { return make_function_kernel<sequence_at>(n); }
std::unique_ptr<Kernel> make_sequence_erase(const NodeInfo& n) { return make_function_kernel<sequence_erase>(n); }
std::unique_ptr<Kernel> make_sequence_length(const NodeInfo& n) { return make_function_kernel<sequence_length>(n); }
std::unique_ptr<Kernel> make_split_to_sequence(const NodeInfo& n) { return std::make_unique<SplitToSequenceKernel>(n); }
std::unique_ptr<Kernel> make_concat_from_sequence(const NodeInfo& n) {
  return std::make_unique<ConcatFromSequenceKernel>(n);
}
std::unique_ptr<Kernel> make_sequence_map(const NodeInfo& n) { return std::make_unique<SequenceMapKernel>(n); }

}  // namespace qtool::runtime::kernels
