// One copy of a weight that sibling If/Loop/Scan bodies each quantized.
//
// The QDQ rewrite quantizes every body on its own (qdq.cc, quantize_bodies), so an enclosing graph's weight that
// two bodies of one node read (Hugging Face Optimum's merged decoder reads every weight from both branches of its
// If) ends up as an integer initializer in each body: the quantized model stores it twice. After the rewrite,
// initializers held by two or more bodies of one node with the same dtype, dims and bytes are moved once into the
// node's own graph under the first copy's name (names are unique across the model after the rewrite, graph.cc),
// and the bodies read that one. The model computes the same: a body reads an enclosing graph's initializer as its
// own. ONNX Runtime 1.30 still fuses DequantizeLinear of such an outer-scope initializer into QLinearMatMul /
// MatMulIntegerToFloat inside each branch (tests/quantize/kv_cache_decoder.py checks the fused op counts).
#pragma once

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

// Returns the number of initializers moved (each one replacing two or more copies).
int share_body_initializers(onnx::ModelProto& model);

}  // namespace qtool::quantize
