// Control flow: If, Loop (opset 1+, 11+ semantics for optional M/cond), Scan (opset 8 batched, 9+).
// Bodies run through ctx.subgraphs, which resolves names from enclosing scopes. If branches and Loop-carried values
// may be sequences (If-13, Loop-13); Loop scan outputs and Scan values are tensors.
#include <cstring>

#include "core/checked.h"
#include "core/limits.h"

#include "runtime/graph.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

SubgraphRunner& runner(KernelContext& ctx) {
  if (!ctx.subgraphs) throw InternalError(ctx.node.label() + ": no subgraph runner");
  return *ctx.subgraphs;
}

bool truth(const Tensor& t, const NodeInfo& node, const char* what) { return read_scalar(t, node, what) != 0.0; }

// Slice i along `axis`, dropping the axis.
Tensor take(const Tensor& x, int64_t axis, int64_t i, const NodeInfo& node) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
  const int64_t dim = x.shape()[axis];
  Shape s = x.shape();
  s.erase(s.begin() + axis);
  Tensor y(x.dtype(), s);
  const size_t block = static_cast<size_t>(inner) * element_size(x.dtype(), node);
  for (int64_t o = 0; o < outer; ++o) std::memcpy(y.raw() + o * block, x.raw() + (o * dim + i) * block, block);
  return y;
}

// Stacks equally shaped tensors along a new `axis`.
Tensor stack(const std::vector<Tensor>& parts, int64_t axis, const NodeInfo& node) {
  const Tensor& first = parts.front();
  for (const Tensor& p : parts)
    if (p.shape() != first.shape() || p.dtype() != first.dtype())
      throw BadInputError(node.label() + ": scan outputs change shape between iterations (" + shape_str(first.shape()) +
                          " vs " + shape_str(p.shape()) + ")");
  Shape s = first.shape();
  s.insert(s.begin() + axis, static_cast<int64_t>(parts.size()));
  Tensor y(first.dtype(), s);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.shape()[d];
  for (int64_t d = axis; d < first.rank(); ++d) inner *= first.shape()[d];
  const size_t block = static_cast<size_t>(inner) * element_size(first.dtype(), node);
  const int64_t n = static_cast<int64_t>(parts.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i) std::memcpy(y.raw() + (o * n + i) * block, parts[i].raw() + o * block, block);
  return y;
}

// An empty scan output when the loop ran zero times: [0] of the declared dtype (float if unknown).
Tensor empty_scan_output(const ValueDecl& decl) {
  return Tensor(decl.dtype == DType::Undefined ? DType::Float32 : decl.dtype, {0});
}

class IfKernel final : public Kernel {
 public:
  explicit IfKernel(const NodeInfo& n)
      : then_(n.attrs.require_graph("then_branch")), else_(n.attrs.require_graph("else_branch")) {}
  void run(KernelContext& ctx) override {
    const Graph& body = truth(ctx.input(0), ctx.node, "cond") ? *then_ : *else_;
    std::vector<Value> outs = runner(ctx).run_values(body, {});
    if (outs.size() != ctx.outputs.size())
      throw BadInputError(ctx.node.label() + ": branch returns " + std::to_string(outs.size()) + " values for " +
                          std::to_string(ctx.outputs.size()) + " outputs");
    for (size_t i = 0; i < outs.size(); ++i) ctx.set_output(i, std::move(outs[i]));
  }

 private:
  std::shared_ptr<const Graph> then_, else_;
};

// Loop(M?, cond?, v_initial...) with body(iter, cond, v...) -> (cond, v..., scan...).
class LoopKernel final : public Kernel {
 public:
  explicit LoopKernel(const NodeInfo& n) : body_(n.attrs.require_graph("body")) {}
  void run(KernelContext& ctx) override {
    const Graph& body = *body_;
    const size_t n_carried = ctx.num_inputs() - 2;
    if (body.inputs.size() != n_carried + 2 || body.outputs.size() < n_carried + 1)
      throw BadInputError(ctx.node.label() + ": body signature does not match the loop's inputs");
    const size_t n_scan = body.outputs.size() - 1 - n_carried;
    const int64_t max_trips = !ctx.has_input(0)                  ? INT64_MAX
                              : ctx.input(0).dtype() == DType::Int64 && ctx.input(0).numel() == 1
                                  ? ctx.input(0).data<int64_t>()[0]
                                  : checked_to_int64(read_scalar(ctx.input(0), ctx.node, "M"), "trip count M");
    bool cond = ctx.has_input(1) ? truth(ctx.input(1), ctx.node, "cond") : true;
    // A carried sequence moves through the iterations with its only reference (when the frame handed this node
    // its last one), so a body appending to it appends in place (runtime/value.h).
    std::vector<Value> carried;
    for (size_t i = 0; i < n_carried; ++i)
      carried.push_back(ctx.is_sequence(2 + i) ? Value(std::move(ctx.seq_inputs[2 + i])) : Value(ctx.input(2 + i)));
    std::vector<std::vector<Tensor>> scans(n_scan);
    for (int64_t it = 0; it < max_trips && cond; ++it) {
      check_loop_iteration(it);  // --max-loop-iterations: a trip count of 2^62 must not hang
      std::vector<Value> args(body.inputs.size());
      args[0] = Tensor::scalar<int64_t>(it);
      Tensor c(DType::Bool, {});
      c.raw()[0] = std::byte{1};
      args[1] = c;
      for (size_t i = 0; i < n_carried; ++i) args[2 + i] = std::move(carried[i]);
      std::vector<Value> outs = runner(ctx).run_values(body, std::move(args));
      if (outs[0].is_sequence()) throw BadInputError(ctx.node.label() + ": the body's cond output is a sequence");
      cond = truth(outs[0].tensor, ctx.node, "body cond output");
      for (size_t i = 0; i < n_carried; ++i) carried[i] = std::move(outs[1 + i]);
      for (size_t i = 0; i < n_scan; ++i) {
        if (outs[1 + n_carried + i].is_sequence())
          throw BadInputError(ctx.node.label() + ": scan output " + std::to_string(i) +
                              " of the body is a sequence; Loop stacks tensors only");
        scans[i].push_back(std::move(outs[1 + n_carried + i].tensor));
      }
    }
    for (size_t i = 0; i < n_carried && i < ctx.outputs.size(); ++i) ctx.set_output(i, std::move(carried[i]));
    for (size_t i = 0; i < n_scan && n_carried + i < ctx.outputs.size(); ++i)
      ctx.outputs[n_carried + i] =
          scans[i].empty() ? empty_scan_output(body.outputs[1 + n_carried + i]) : stack(scans[i], 0, ctx.node);
  }

 private:
  std::shared_ptr<const Graph> body_;
};

// Scan(states..., scan_inputs...) with body(states..., slices...) -> (states..., scan_slices...).
// Scan-9+: (states..., scan_inputs...) -> (final states..., stacked scan outputs...), axes and
// directions from attributes. Scan-8: the same per batch element, with a leading batch dim on every
// input and output and an optional sequence_lens first input (only full-length sequences supported).
class ScanKernel final : public Kernel {
 public:
  explicit ScanKernel(const NodeInfo& n)
      : body_(n.attrs.require_graph("body")),
        batched_(n.opset < 9),
        n_scan_in_(n.attrs.require_int("num_scan_inputs")),
        in_axes_(n.attrs.get_ints("scan_input_axes")),
        in_dirs_(n.attrs.get_ints(n.opset < 9 ? "directions" : "scan_input_directions")),
        out_axes_(n.attrs.get_ints("scan_output_axes")),
        out_dirs_(n.attrs.get_ints("scan_output_directions")) {}

  void run(KernelContext& ctx) override {
    const size_t first = batched_ ? 1 : 0;  // Scan-8: input 0 is sequence_lens
    std::vector<Tensor> ins;
    for (size_t i = first; i < ctx.num_inputs(); ++i) ins.push_back(ctx.input(i));
    const int64_t n_state = static_cast<int64_t>(ins.size()) - n_scan_in_;
    if (n_state < 0) throw BadInputError(ctx.node.label() + ": fewer inputs than num_scan_inputs");
    if (!batched_) {
      std::vector<Tensor> outs = scan(ctx, ins, n_state);
      for (size_t i = 0; i < outs.size(); ++i) ctx.outputs[i] = std::move(outs[i]);
      return;
    }
    const int64_t batch = ins.empty() ? 0 : ins.front().dim(0);
    if (ctx.has_input(0))
      for (int64_t len : read_ints(ctx.input(0), ctx.node, "sequence_lens"))
        if (n_scan_in_ > 0 && len != ins[n_state].dim(1))
          throw UnsupportedError(ctx.node.label() + ": sequence_lens shorter than the sequence are not supported");
    std::vector<std::vector<Tensor>> per_output;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> slice;
      for (const Tensor& t : ins) slice.push_back(take(t, 0, b, ctx.node));
      std::vector<Tensor> outs = scan(ctx, slice, n_state);
      per_output.resize(outs.size());
      for (size_t i = 0; i < outs.size(); ++i) per_output[i].push_back(std::move(outs[i]));
    }
    for (size_t i = 0; i < per_output.size(); ++i) ctx.outputs[i] = stack(per_output[i], 0, ctx.node);
  }

 private:
  std::vector<Tensor> scan(KernelContext& ctx, const std::vector<Tensor>& ins, int64_t n_state) const {
    const Graph& body = *body_;
    const int64_t n_scan_out = static_cast<int64_t>(body.outputs.size()) - n_state;
    if (n_scan_out < 0) throw BadInputError(ctx.node.label() + ": body signature mismatch");
    std::vector<Tensor> states(ins.begin(), ins.begin() + n_state);
    int64_t trips = -1;
    std::vector<int64_t> axes(n_scan_in_);
    for (int64_t j = 0; j < n_scan_in_; ++j) {
      const Tensor& x = ins[n_state + j];
      axes[j] = normalize_axis(j < static_cast<int64_t>(in_axes_.size()) ? in_axes_[j] : 0, x.rank(), ctx.node);
      const int64_t len = x.shape()[axes[j]];
      if (trips >= 0 && len != trips) throw BadInputError(ctx.node.label() + ": scan inputs differ in length");
      trips = len;
    }
    if (trips < 0) trips = 0;
    std::vector<std::vector<Tensor>> scans(n_scan_out);
    std::vector<Tensor> args(n_state + n_scan_in_);
    for (int64_t t = 0; t < trips; ++t) {
      for (int64_t i = 0; i < n_state; ++i) args[i] = states[i];
      for (int64_t j = 0; j < n_scan_in_; ++j) {
        const bool rev = j < static_cast<int64_t>(in_dirs_.size()) && in_dirs_[j] == 1;
        args[n_state + j] = take(ins[n_state + j], axes[j], rev ? trips - 1 - t : t, ctx.node);
      }
      std::vector<Tensor> outs = runner(ctx).run(body, args);
      for (int64_t i = 0; i < n_state; ++i) states[i] = std::move(outs[i]);
      for (int64_t k = 0; k < n_scan_out; ++k) scans[k].push_back(std::move(outs[n_state + k]));
    }
    std::vector<Tensor> result = states;
    for (int64_t k = 0; k < n_scan_out; ++k) {
      if (scans[k].empty()) {
        result.push_back(empty_scan_output(body.outputs[n_state + k]));
        continue;
      }
      if (k < static_cast<int64_t>(out_dirs_.size()) && out_dirs_[k] == 1)
        std::reverse(scans[k].begin(), scans[k].end());
      const int64_t rank = scans[k].front().rank() + 1;
      const int64_t axis =
          normalize_axis(k < static_cast<int64_t>(out_axes_.size()) ? out_axes_[k] : 0, rank, ctx.node);
      result.push_back(stack(scans[k], axis, ctx.node));
    }
    return result;
  }

  std::shared_ptr<const Graph> body_;
  bool batched_;
  int64_t n_scan_in_;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
};

}  // namespace

std::unique_ptr<Kernel> make_if(const NodeInfo& n) { return std::make_unique<IfKernel>(n); }
std::unique_ptr<Kernel> make_loop(const NodeInfo& n) { return std::make_unique<LoopKernel>(n); }
std::unique_ptr<Kernel> make_scan(const NodeInfo& n) { return std::make_unique<ScanKernel>(n); }

}  // namespace qtool::runtime::kernels
