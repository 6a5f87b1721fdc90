// BatchNormalization (inference) after Conv, ConvTranspose or Gemm folds into the producer:
//   s = scale / sqrt(var + eps);  W'[c] = W[c] * s[c];  b'[c] = (b[c] - mean[c]) * s[c] + B[c]
// where c is the output channel a weight element feeds (Conv: axis 0, Gemm: 0 with transB else 1;
// ConvTranspose: W is [C_in, C_out/group, ...] and W[i, o] feeds channel (i / (C_in/group))·(C_out/group) + o).
// The producer then writes the BatchNormalization's output tensor, so downstream names are unchanged.
#include <cmath>

#include "core/error.h"
#include "onnx/tensor_proto.h"
#include "quantize/passes/output_channels.h"
#include "quantize/passes/passes.h"

namespace qtool::quantize {
namespace {

class FoldBatchNorm final : public NodePass {
 public:
  std::string_view name() const override { return "fold_batchnorm"; }
  std::vector<std::string_view> op_types() const override { return {"BatchNormalization"}; }

  bool match(const Graph& g, int i) const override {
    const auto& bn = g.node(i);
    if (bn.input_size() != 5 || bn.output_size() != 1 || attr_int(bn, "training_mode", 0) != 0) return false;
    if (attr_int(bn, "spatial", 1) != 1) return false;
    for (int k = 1; k < 5; ++k)
      if (!g.is_float_initializer(bn.input(k))) return false;
    const std::string& x = bn.input(0);
    const int p = g.producer(x);
    if (p < 0 || !g.has_single_reader(x)) return false;
    const auto& prod = g.node(p);
    if (prod.output_size() != 1) return false;
    const std::string& op = prod.op_type();
    if (op != "Conv" && op != "ConvTranspose" && op != "Gemm") return false;
    if (prod.input_size() < 2 || !g.is_float_initializer(prod.input(1))) return false;
    if (prod.input_size() >= 3 && !prod.input(2).empty()) {
      if (!g.is_float_initializer(prod.input(2))) return false;
      if (op == "Gemm") {  // C must be per output column: [N] or [1,N]
        const auto* c = g.initializer(prod.input(2));
        const int64_t numel = onnxio::proto_numel(*c);
        if (c->dims_size() > 2 || (c->dims_size() == 2 && c->dims(0) != 1) || numel == 0) return false;
      }
    }
    return true;
  }

  void rewrite(Graph& g, int i) const override {
    onnx::NodeProto bn = g.node(i);
    const int p = g.producer(bn.input(0));
    auto& prod = g.node(p);
    const std::string op = prod.op_type();
    const float eps = attr_float(bn, "epsilon", 1e-5f);
    const Tensor gamma = g.initializer_tensor(bn.input(1)), beta = g.initializer_tensor(bn.input(2));
    const Tensor mean = g.initializer_tensor(bn.input(3)), var = g.initializer_tensor(bn.input(4));
    const int64_t channels = gamma.numel();
    const std::pair<const char*, const Tensor*> params[] = {{"B", &beta}, {"input_mean", &mean}, {"input_var", &var}};
    for (const auto& [pname, t] : params)
      if (t->numel() != channels)
        throw BadInputError(describe(bn) + ": " + pname + " has " + std::to_string(t->numel()) + " values but scale has " +
                            std::to_string(channels) + "; every BatchNormalization parameter needs one per channel");

    Tensor w = g.initializer_tensor(prod.input(1)).clone();
    const int64_t axis = output_channel_axis(prod);
    const int64_t group = op == "ConvTranspose" ? attr_int(prod, "group", 1) : 1;
    if (w.rank() <= axis || group < 1 || w.dim(axis) * group != channels || w.dim(0) % group != 0)
      throw BadInputError(describe(bn) + ": " + std::to_string(channels) + " channels but the weight of " +
                          describe(prod) + " has shape " + shape_str(w.shape()) +
                          (group > 1 ? " with group " + std::to_string(group) : std::string()));
    std::vector<float> s(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) s[c] = gamma.data<float>()[c] / std::sqrt(var.data<float>()[c] + eps);

    scale_output_channels(prod, w, s);

    std::vector<float> b(static_cast<size_t>(channels), 0.0f);
    if (prod.input_size() >= 3 && !prod.input(2).empty()) {
      const Tensor old_b = g.initializer_tensor(prod.input(2));
      if (old_b.numel() != 1 && old_b.numel() != channels)
        throw BadInputError(describe(prod) + ": bias has " + std::to_string(old_b.numel()) + " values, but " +
                            describe(bn) + " has " + std::to_string(channels) + " channels");
      const float beta_gemm = op == "Gemm" ? attr_float(prod, "beta", 1.0f) : 1.0f;
      for (int64_t c = 0; c < channels; ++c) b[c] = beta_gemm * old_b.data<float>()[old_b.numel() == 1 ? 0 : c];
    }
    for (int64_t c = 0; c < channels; ++c) b[c] = (b[c] - mean.data<float>()[c]) * s[c] + beta.data<float>()[c];

    // New initializers (the old ones may be shared with other nodes; dead ones are removed later).
    const std::string base = bn.output(0);
    const std::string wname = g.unique_name(prod.input(1) + "_bnfolded");
    const std::string bname = g.unique_name(base + "_bias");
    g.set_initializer(wname, w);
    g.set_initializer(bname, Tensor::from_vector<float>({channels}, b));
    g.set_input(p, 1, wname);
    // Input 2 is appended when there was no bias.
    g.set_input(p, 2, bname);
    if (op == "Gemm") remove_attr(prod, "beta");  // beta is folded into the new bias
    g.remove_node(i);
    g.set_output(p, 0, bn.output(0));
  }
};

}  // namespace

std::unique_ptr<NodePass> make_fold_batchnorm_pass() { return std::make_unique<FoldBatchNorm>(); }

}  // namespace qtool::quantize
