// Constant -> initializer. Paddle2onnx exports keep every weight in a Constant node; quantization
// needs them as initializers to find and rewrite weights.
#include <onnx/onnx_pb.h>

#include "core/tensor.h"
#include "quantize/passes/passes.h"

namespace qtool::quantize {
namespace {

class LiftConstants final : public NodePass {
 public:
  std::string_view name() const override { return "lift_constants"; }
  std::vector<std::string_view> op_types() const override { return {"Constant"}; }
  bool match(const Graph& g, int i) const override {
    const auto& n = g.node(i);
    if (n.output_size() != 1 || g.is_graph_output(n.output(0)) || n.attribute_size() != 1) return false;
    const auto& a = n.attribute(0);
    return (a.name() == "value" && a.has_t() && !a.t().has_data_location()) || a.name() == "value_float" ||
           a.name() == "value_floats" || a.name() == "value_int" || a.name() == "value_ints";
  }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const auto& a = n.attribute(0);
    const std::string out = n.output(0);
    if (a.name() == "value") {
      g.set_initializer(out, a.t());
    } else if (a.name() == "value_float") {
      g.set_initializer(out, Tensor::scalar<float>(a.f()));
    } else if (a.name() == "value_floats") {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      g.set_initializer(out, Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v));
    } else if (a.name() == "value_int") {
      g.set_initializer(out, Tensor::scalar<int64_t>(a.i()));
    } else {
      std::vector<int64_t> v(a.ints().begin(), a.ints().end());
      g.set_initializer(out, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
    }
    g.remove_node(i);
  }
};

}  // namespace

std::unique_ptr<NodePass> make_lift_constants_pass() { return std::make_unique<LiftConstants>(); }

}  // namespace qtool::quantize
