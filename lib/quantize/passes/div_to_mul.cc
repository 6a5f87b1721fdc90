// Division by a constant becomes multiplication by its reciprocal:  Div(x, C) ==> Mul(x, 1/C).
// ONNX Runtime has an int8 Mul (QLinearMul after QDQ fusion) and no int8 Div, so a Div between quantized
// tensors (the "/ 6" of every decomposed HardSwish in PP-OCR) otherwise runs as DequantizeLinear -> Div ->
// QuantizeLinear in float: on ppocrv4-det its 24 Divs cost ~10 % of the int8 latency. Not bit-exact: x / c and
// x · fl(1/c) differ by at most about one ulp. Only float C whose every element has a finite, normal reciprocal.
#include <cmath>
#include <cstring>

#include "quantize/passes/passes.h"

namespace qtool::quantize {
namespace {

bool invertible_float_constant(const Graph& g, const std::string& name) {
  if (!g.is_float_initializer(name)) return false;
  const Tensor c = g.initializer_tensor(name);
  for (int64_t i = 0; i < c.numel(); ++i) {
    const float r = 1.0f / c.data<float>()[i];
    if (!std::isnormal(r)) return false;
  }
  return c.numel() > 0;
}

class DivToMul final : public NodePass {
 public:
  std::string_view name() const override { return "div_to_mul"; }
  std::vector<std::string_view> op_types() const override { return {"Div"}; }
  bool match(const Graph& g, int i) const override {
    const auto& n = g.node(i);
    return n.input_size() == 2 && n.output_size() == 1 && !g.is_initializer(n.input(0)) &&
           invertible_float_constant(g, n.input(1));
  }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const Tensor c = g.initializer_tensor(n.input(1));
    Tensor r = c.clone();
    for (int64_t k = 0; k < r.numel(); ++k) r.data<float>()[k] = 1.0f / c.data<float>()[k];
    const std::string name = g.unique_name(n.input(1) + "_reciprocal");
    g.set_initializer(name, r);
    n.set_op_type("Mul");
    g.set_input(i, 1, name);
  }
};

}  // namespace

std::unique_ptr<NodePass> make_div_to_mul_pass() { return std::make_unique<DivToMul>(); }

}  // namespace qtool::quantize
