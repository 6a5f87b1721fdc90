// Activation clean-ups that let ONNX Runtime fuse the activation into the quantized producer:
//   Relu(x) -> Min(., c) with scalar c >= 0   ==>  Clip(x, 0, c)      (Keras' relu6 as exported by tf2onnx)
//   Clip(x, lo >= 0, hi) -> Relu              ==>  Clip(x, lo, hi)    (the Relu is the identity there)
//   Relu(x) -> Min(., C >= 0) -> Relu         ==>  Relu -> Min        (same, for a per-channel C)
// The surviving node writes the last output name of the pattern, so downstream names are unchanged.
#include "core/error.h"
#include "quantize/passes/passes.h"

namespace qtool::quantize {
namespace {

class ReluMinToClip final : public NodePass {
 public:
  std::string_view name() const override { return "relu_min_to_clip"; }
  std::vector<std::string_view> op_types() const override { return {"Min"}; }
  bool match(const Graph& g, int i) const override {
    const auto& n = g.node(i);
    if (n.input_size() != 2 || g.opset() < 11) return false;
    for (int k = 0; k < 2; ++k) {
      const auto c = g.scalar_float_initializer(n.input(1 - k));
      const int p = g.producer(n.input(k));
      if (c && *c >= 0 && p >= 0 && g.node(p).op_type() == "Relu" && g.has_single_reader(n.input(k))) return true;
    }
    return false;
  }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const int k = g.producer(n.input(0)) >= 0 && g.node(g.producer(n.input(0))).op_type() == "Relu" &&
                          g.scalar_float_initializer(n.input(1))
                      ? 0
                      : 1;
    const int relu = g.producer(n.input(k));
    const std::string x = g.node(relu).input(0), c = n.input(1 - k);
    const std::string zero = g.unique_name(n.output(0) + "_min");
    g.set_initializer(zero, Tensor::scalar<float>(0.0f));
    n.set_op_type("Clip");
    g.remove_node(relu);
    g.set_inputs(i, {x, zero, c});
  }
};

class DropRedundantRelu final : public NodePass {
 public:
  std::string_view name() const override { return "drop_redundant_relu"; }
  std::vector<std::string_view> op_types() const override { return {"Relu"}; }
  bool match(const Graph& g, int i) const override {
    const auto& n = g.node(i);
    const int p = g.producer(n.input(0));
    return p >= 0 && g.has_single_reader(n.input(0)) && non_negative(g, p);
  }
  // The output of node p is >= 0: Clip with a lower bound >= 0, Relu, or Min of such with constants >= 0.
  static bool non_negative(const Graph& g, int p) {
    const auto& n = g.node(p);
    if (n.op_type() == "Relu") return true;
    if (n.op_type() == "Clip") {
      if (n.input_size() < 2 || n.input(1).empty()) return false;
      const auto lo = g.scalar_float_initializer(n.input(1));
      return lo && *lo >= 0;
    }
    if (n.op_type() == "Min") {
      for (const auto& in : n.input()) {
        if (const auto* t = g.initializer(in)) {
          if (t->data_type() != onnx::TensorProto::FLOAT) return false;
          const Tensor v = g.initializer_tensor(in);
          for (float x : v.span<float>())
            if (!(x >= 0)) return false;
          continue;
        }
        const int q = g.producer(in);
        if (q < 0 || !non_negative(g, q)) return false;
      }
      return true;
    }
    return false;
  }
  void rewrite(Graph& g, int i) const override {
    const int p = g.producer(g.node(i).input(0));
    g.remove_node(i);
    g.set_output(p, 0, g.node(i).output(0));
  }
};

}  // namespace

std::unique_ptr<NodePass> make_relu_min_to_clip_pass() { return std::make_unique<ReluMinToClip>(); }
std::unique_ptr<NodePass> make_drop_redundant_relu_pass() { return std::make_unique<DropRedundantRelu>(); }

}  // namespace qtool::quantize
