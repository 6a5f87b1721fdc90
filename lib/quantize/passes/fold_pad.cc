// A zero constant Pad of the spatial axes in front of a Conv folds into the Conv's own padding:
//   Pad(x, pads, 0) -> Conv(pads = p)   ==>   Conv(x, pads = p + spatial part of pads)
// Exact (a Conv pads with zeros). It matters after quantization: ONNX Runtime does not run a Pad between
// quantized tensors in uint8, so each one became DequantizeLinear -> Pad -> QuantizeLinear in float (the
// four Pads of mobilenetv2: 29 % of its int8 time), while QLinearConv pads with the input's zero point itself.
// The rule is runtime/conv_fold.h pads_with_pad (the interpreter's graph preparation folds the same). Only mode
// "constant" with value 0 (absent, or a zero initializer), no padding on the batch and channel axes, no negative
// pads, no `axes` input, and a Conv with explicit padding (auto_pad NOTSET) as the only reader.
#include "quantize/passes/passes.h"
#include "runtime/conv_fold.h"

namespace qtool::quantize {
namespace {

// The Pad's pads as [begin..., end...] over all axes, if constant.
std::optional<std::vector<int64_t>> pad_amounts(const Graph& g, const onnx::NodeProto& pad) {
  if (g.opset() < 11) return attr_ints(pad, "pads");
  if (pad.input_size() < 2 || !g.is_initializer(pad.input(1))) return std::nullopt;
  const Tensor p = g.initializer_tensor(pad.input(1));
  if (p.dtype() != DType::Int64) return std::nullopt;
  return std::vector<int64_t>(p.data<int64_t>(), p.data<int64_t>() + p.numel());
}

bool zero_value(const Graph& g, const onnx::NodeProto& pad) {
  if (g.opset() < 11) return attr_float(pad, "value", 0.0f) == 0.0f;
  if (pad.input_size() < 3 || pad.input(2).empty()) return true;
  const std::optional<float> v = g.scalar_float_initializer(pad.input(2));
  return v && *v == 0.0f;
}

class FoldPadIntoConv final : public NodePass {
 public:
  std::string_view name() const override { return "fold_pad_into_conv"; }
  std::vector<std::string_view> op_types() const override { return {"Pad"}; }

  bool match(const Graph& g, int i) const override {
    const auto& pad = g.node(i);
    if (pad.output_size() != 1 || attr_string(pad, "mode", "constant") != "constant" || !zero_value(g, pad))
      return false;
    if (pad.input_size() >= 4 && !pad.input(3).empty()) return false;  // axes (opset 18)
    const std::string& y = pad.output(0);
    if (!g.has_single_reader(y)) return false;
    const auto& conv = g.node(g.consumers(y)[0]);
    if (conv.op_type() != "Conv" || conv.input(0) != y || attr_string(conv, "auto_pad", "NOTSET") != "NOTSET")
      return false;
    const auto p = pad_amounts(g, pad);
    return p && runtime::conv_fold::pads_with_pad(*p, attr_ints(conv, "pads"));
  }

  void rewrite(Graph& g, int i) const override {
    const auto pad = g.node(i);
    const int c = g.consumers(pad.output(0))[0];
    auto& conv = g.node(c);
    const std::vector<int64_t> cp = *runtime::conv_fold::pads_with_pad(*pad_amounts(g, pad), attr_ints(conv, "pads"));
    remove_attr(conv, "pads");
    auto* a = conv.add_attribute();
    a->set_name("pads");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : cp) a->add_ints(v);
    g.remove_node(i);
    g.set_input(c, 0, pad.input(0));
  }
};

}  // namespace

std::unique_ptr<NodePass> make_fold_pad_into_conv_pass() { return std::make_unique<FoldPadIntoConv>(); }

}  // namespace qtool::quantize
