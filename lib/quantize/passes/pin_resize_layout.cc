// Keeps nearest Resizes where ONNX Runtime's CPU provider runs them fast (target ORT CPU only):
//   Resize(x, scales = [1, 1, 2^k, 2^k], nearest, asymmetric, floor) -> y
//   ==>  Resize(x, [1, 1, 2, 2]) -> ... k times ... -> y' -> Reshape(y', [0, 0, 0, 0]) -> y
// Exact: with asymmetric coordinates and floor, output index i reads input floor(i / 2^k), and k halvings
// floor(floor(i / 2) / 2)... give the same index (and the same output size, in * 2^k); shape [0, 0, 0, 0] copies
// each of the four dimensions (allowzero unset), so the Reshape is the identity, and it writes the Resize's old
// output name, so calibration tables and downstream names are unchanged.
// Why (ONNX Runtime 1.30, measured in docs/benchmarks.md): its layout transformer runs QLinearConv in NHWC and
// pushes the Transposes it adds through every op that can take them, Resize included (EPAwareHandleResize), so a
// Resize between integer kernels runs on NHWC data with scales [1, 2, 2, 1]. Its nearest kernel has one fast path,
// UpsampleNearest2x, taken only for 4-D scales exactly [1, 1, 2, 2] with asymmetric / floor coordinates; any other
// form runs the generic per-element index loop, about 7x slower (ppocrv4-det's four x2 Resizes: 14.8 ms against 2.3 ms
// for the same nodes in fp32). A Transpose cannot be pushed through a Reshape whose shape is not a permutation of
// its input's, so the Transpose back to NCHW stops before the Reshape and the Resizes stay NCHW: two uint8
// Transposes (one of the input, one of the output) cost less than the generic loop. Other factors (3x, or
// unequal ones) have no fast form in either layout and are left alone: pinning them would only add the Transposes.
#include "quantize/passes/passes.h"

namespace qtool::quantize {
namespace {

bool is_pin(const Graph& g, const onnx::NodeProto& n) {
  if (n.op_type() != "Reshape" || n.input_size() != 2 || !g.is_initializer(n.input(1))) return false;
  const Tensor s = g.initializer_tensor(n.input(1));
  if (s.dtype() != DType::Int64 || s.numel() != 4) return false;
  for (int64_t k = 0; k < 4; ++k)
    if (s.data<int64_t>()[k] != 0) return false;
  return true;
}

// k when f = 2^k for an integer k in [1, 16], else 0.
int halvings(float f) {
  for (int k = 1; k <= 16; ++k)
    if (f == static_cast<float>(1 << k)) return k;
  return 0;
}

class PinResizeLayout final : public NodePass {
 public:
  std::string_view name() const override { return "pin_resize_layout"; }
  std::vector<std::string_view> op_types() const override { return {"Resize"}; }

  bool match(const Graph& g, int i) const override {
    const auto& n = g.node(i);
    // Resize-11 and later: X, roi, scales, sizes. Sizes (instead of scales) leave the factor to run time.
    if (g.opset() < 11 || n.input_size() < 3 || n.output_size() != 1 || !g.is_initializer(n.input(2))) return false;
    if (n.input_size() > 3 && !n.input(3).empty()) return false;
    if (attr_string(n, "mode", "nearest") != "nearest" ||
        attr_string(n, "coordinate_transformation_mode", "half_pixel") != "asymmetric" ||
        attr_string(n, "nearest_mode", "round_prefer_floor") != "floor")
      return false;
    const Tensor s = g.initializer_tensor(n.input(2));
    if (s.dtype() != DType::Float32 || s.numel() != 4) return false;
    const float* v = s.data<float>();
    if (v[0] != 1.0f || v[1] != 1.0f || v[2] != v[3] || halvings(v[2]) == 0) return false;
    const std::string& y = n.output(0);
    if (g.has_single_reader(y) && is_pin(g, g.node(g.consumers(y)[0]))) return false;  // already pinned
    return true;
  }

  void rewrite(Graph& g, int i) const override {
    const onnx::NodeProto resize = g.node(i);
    const std::string& y = resize.output(0);
    const int k = halvings(g.initializer_tensor(resize.input(2)).data<float>()[2]);
    std::string x2 = resize.input(2);
    if (k > 1) {
      x2 = g.unique_name(y + "_x2_scales");
      g.set_initializer(x2, Tensor::from_vector<float>({4}, {1, 1, 2, 2}));
      g.set_input(i, 2, x2);
    }
    std::string cur = g.unique_name(y + "_nchw");
    g.set_output(i, 0, cur);
    for (int step = 1; step < k; ++step) {  // the remaining halvings, each a 2x Resize of the previous one
      onnx::NodeProto r = resize;
      r.set_name(g.unique_name(resize.name() + "_x2"));
      r.set_input(0, cur);
      r.set_input(2, x2);
      cur = g.unique_name(y + "_nchw");
      r.set_output(0, cur);
      g.insert_before(i + 1, std::move(r));
    }
    const std::string shape = g.unique_name(y + "_pin_shape");
    g.set_initializer(shape, Tensor::from_vector<int64_t>({4}, {0, 0, 0, 0}));
    onnx::NodeProto pin;
    pin.set_op_type("Reshape");
    pin.set_name(g.unique_name(resize.name() + "_pin_layout"));
    pin.add_input(cur);
    pin.add_input(shape);
    pin.add_output(y);
    g.insert_before(i + 1, std::move(pin));
  }
};

}  // namespace

std::unique_ptr<NodePass> make_pin_resize_layout_pass() { return std::make_unique<PinResizeLayout>(); }

}  // namespace qtool::quantize
