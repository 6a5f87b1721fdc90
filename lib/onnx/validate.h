// Structural validation of a parsed model, run once by load_model() so later code (the interpreter, the
// preparation passes, inspect) can trust what it reads. Every failure is a BadInputError naming the model,
// the tensor or node and what is wrong.
//
// Tensors (initializers, Constant / attribute tensors, sparse values and indices, in every subgraph):
//  - data_type is a known ONNX type (not 0 / UNDEFINED, not an unknown number);
//  - dims are non-negative and their product, and the byte size, fit in int64;
//  - data held inline matches the dims: raw_data has exactly the byte size, or the typed field the ONNX spec
//    assigns to the dtype (float_data, int32_data...) has exactly one value per element (two per value for
//    4-bit types); string tensors have one string_data entry per element;
//  - external references are checked separately (external_data.h) when the data is resolved.
// Graphs: initializer names are unique and non-empty per graph (sparse initializers included); a sparse
// initializer has non-negative dims, 1-D values, int64 indices of shape [NNZ] or [NNZ, rank], and indices
// inside the dense shape.
// Nodes (default ONNX domain, checked against the ONNX schema of the model's opset): at least the required
// number of inputs and outputs, and no empty name where the schema requires a value. Every node, any domain:
// at least one output with a name.
#pragma once

#include <string>

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace qtool::onnxio {

// Validates the whole model; `prefix` starts every message (e.g. "model 'm.onnx': ").
void validate_model(const onnx::ModelProto& model, const std::string& prefix);

// Validates one tensor's header (dtype, dims, sizes) and, unless its data is external, its inline data.
// `what` names it ("model 'm.onnx': initializer 'w'").
void validate_tensor(const onnx::TensorProto& tensor, const std::string& what);

}  // namespace qtool::onnxio
