// One copy of a weight that sibling If/Loop/Scan bodies each quantized.
//
// The QDQ rewrite quantizes every body on its own (qdq.cc, quantize_bodies), so an enclosing graph's weight that
// two bodies of one node read (Hugging Face Optimum's merged decoder reads every weight from both branches of its
// If) ends up as an integer initializer in each body: the quantized model stores it twice. After the rewrite, a
// DequantizeLinear of a body's own constants (integer tensor, scale, zero point) that another body of the same node
// also holds, with the same attributes and the same dtypes, dims and bytes, has its three initializers moved once
// into the node's own graph under the first body's names (unique across the model after the rewrite, graph.cc), and
// every such body reads those. The model computes the same: a body reads an enclosing graph's initializer as its
// own. ONNX Runtime 1.30 still fuses such DequantizeLinear into QLinearMatMul / MatMulIntegerToFloat inside each
// branch (tests/quantize/kv_cache_decoder.py counts them); the three move together because ORT's Gemm -> QGemm
// fusion broke (two nodes named alike) when only a branch's zero point came from outside (tests/quantize/subgraphs.py).
#pragma once

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

// Returns the number of DequantizeLinear constant sets moved (each replacing two or more copies).
int share_body_initializers(onnx::ModelProto& model);

}  // namespace qtool::quantize
