// Sending one activation of a QDQ model back to float, for the sensitivity ranking of `qtool inspect --against`.
//
// An activation's Q/DQ: a QuantizeLinear in the main graph whose input is not a constant (not an initializer, not a
// Constant node's output), and the DequantizeLinear nodes that read its output. Weights (Q/DQ of constants, or a
// DequantizeLinear of stored integers) are not activations.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace qtool::analysis {

// The activations with their own Q/DQ, each once, in node order.
std::vector<std::string> quantized_activations(const onnx::ModelProto& model);

// A copy of `model` where `tensor` is float: every DequantizeLinear reading a QuantizeLinear of `tensor` becomes
// Identity(tensor) (its output keeps its name, so graph outputs and readers are untouched), and those
// QuantizeLinear nodes are dropped when nothing else reads them. BadInputError when `tensor` has no Q/DQ.
onnx::ModelProto keep_float(const onnx::ModelProto& model, const std::string& tensor);

}  // namespace qtool::analysis
