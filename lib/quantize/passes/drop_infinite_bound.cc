// An infinite constant operand of Max or Min changes nothing and goes away:
//   Max(x, -inf) ==> Identity(x)          Min(x, +inf) ==> Identity(x)
// (exact for every x, NaN included: max(NaN, -inf) is NaN). Exporters write such "no bound yet" sentinels, e.g.
// a stable Softmax built as x - Max(-inf, ReduceMax(x)). Left in place, the sentinel is a constant no integer
// grid can hold: Q/DQ around the Max would either fail to choose a scale or turn -inf into a finite value.
// Only when the constant has one element (any rank up to x's: broadcasting it cannot change the output shape).
#include <cmath>

#include "quantize/passes/passes.h"

namespace qtool::quantize {
namespace {

class DropInfiniteBound final : public NodePass {
 public:
  std::string_view name() const override { return "drop_infinite_bound"; }
  std::vector<std::string_view> op_types() const override { return {"Max", "Min"}; }
  bool match(const Graph& g, int i) const override {
    const auto& n = g.node(i);
    if (n.output_size() != 1 || n.input_size() < 2) return false;
    int kept = 0;
    for (const auto& in : n.input()) kept += in.empty() || !neutral(g, n.op_type(), in) ? 1 : 0;
    return kept == 1 && !n.input(kept_index(g, n)).empty() && !g.is_initializer(n.input(kept_index(g, n)));
  }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    g.set_inputs(i, {n.input(kept_index(g, n))});
    n.clear_attribute();
    n.set_op_type("Identity");
  }

 private:
  // A one-element float constant that is the identity of the op: -inf for Max, +inf for Min, and whose rank does
  // not exceed what the other operand could broadcast it to (rank 0 or 1 here: checked as numel == 1, rank <= 1).
  static bool neutral(const Graph& g, const std::string& op, const std::string& name) {
    const auto* t = g.initializer(name);
    if (!t || t->dims_size() > 1) return false;
    const std::optional<float> v = g.scalar_float_initializer(name);
    return v && std::isinf(*v) && ((op == "Max") == (*v < 0));
  }
  static int kept_index(const Graph& g, const onnx::NodeProto& n) {
    for (int k = 0; k < n.input_size(); ++k)
      if (n.input(k).empty() || !neutral(g, n.op_type(), n.input(k))) return k;
    return 0;
  }
};

}  // namespace

std::unique_ptr<NodePass> make_drop_infinite_bound_pass() { return std::make_unique<DropInfiniteBound>(); }

}  // namespace qtool::quantize
