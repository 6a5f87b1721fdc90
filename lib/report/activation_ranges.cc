#include "report/activation_ranges.h"

#include <map>

#include "analysis/qdq_bypass.h"
#include "onnx/tensor_proto.h"

namespace qtool::report {

std::vector<ActivationQuant> activation_quants(const onnx::ModelProto& model) {
  const onnx::GraphProto& g = model.graph();
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  std::map<std::string, const onnx::NodeProto*> q_of;  // activation -> its first QuantizeLinear
  for (const auto& n : g.node())
    if (n.op_type() == "QuantizeLinear" && (n.domain().empty() || n.domain() == "ai.onnx") && n.input_size() >= 2)
      q_of.emplace(n.input(0), &n);
  std::vector<ActivationQuant> out;
  for (const std::string& tensor : analysis::quantized_activations(model)) {
    ActivationQuant a;
    a.tensor = tensor;
    const auto q = q_of.find(tensor);
    if (q != q_of.end()) {
      const onnx::NodeProto& n = *q->second;
      const auto s = inits.find(n.input(1));
      const bool has_zp = n.input_size() > 2 && !n.input(2).empty();
      const auto z = has_zp ? inits.find(n.input(2)) : inits.end();
      if (s != inits.end() && (!has_zp || z != inits.end())) {
        const Tensor scale = onnxio::tensor_from_proto(*s->second, n.input(1));
        // No zero point: uint8, zero point 0 (the ONNX default).
        const Tensor zp = has_zp ? onnxio::tensor_from_proto(*z->second, n.input(2)) : Tensor::scalar<uint8_t>(0);
        const DTypeInfo& info = dtype_info(zp.dtype());
        if (scale.numel() == 1 && zp.numel() == 1 && scale.dtype() == DType::Float32 &&
            info.cls == DTypeClass::Integer) {
          a.dtype = zp.dtype();
          a.scale = scale.span<float>()[0];
          a.zero_point = static_cast<int64_t>(info.load(zp.raw(), 0));
          a.range = calib::Range{a.scale * static_cast<float>(info.qmin - a.zero_point),
                                 a.scale * static_cast<float>(info.qmax - a.zero_point)};
        }
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace qtool::report
