// Conversion between ONNX TensorProto and qtool::Tensor.
#pragma once

#include <string>

#include "core/tensor.h"

namespace onnx {
class TensorProto;
}

namespace qtool::onnxio {

// Decodes a TensorProto held inline (raw_data or the typed repeated fields, as the ONNX spec
// assigns them per dtype), or reads the external data that load_model() resolved for it (a tensor
// pointing at external data it did not resolve is a BadInputError). `what` names the tensor in errors.
// External data of kMapMinBytes or more is mapped from the file (copy-on-write), not copied.
inline constexpr size_t kMapMinBytes = size_t{1} << 20;
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& what = "");

// Encodes `t` as raw_data (little-endian, 4-bit types packed as ONNX packs them).
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto& proto);

// Element count and byte size a TensorProto describes, without decoding it (works for external data).
int64_t proto_numel(const onnx::TensorProto& proto);

}  // namespace qtool::onnxio
