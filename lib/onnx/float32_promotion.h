// Models that compute in float16, bfloat16 or float64 run and quantize in float32.
//
// qtool's interpreter, observers and quantizer work in float32, and ONNX Runtime's CPU provider has no
// float16 kernels for most ops (it casts around them); a quantized model computes in float32 around its
// integer kernels whatever the original's float type. promote_to_float32() rewrites a model so it computes in
// float32 while its interface stays as declared (a "promoted type" below is float16, bfloat16 or float64):
// - every tensor of a promoted type stored in the model (initializers, Constant / ConstantOfShape values, any
//   TENSOR attribute, subgraphs included) becomes float32; an initializer still in external data (not read)
//   keeps its type behind a Cast to float32, so a large model's bytes are not read here;
// - an op whose output type is an attribute (Cast, EyeLike, RandomNormal/Uniform[Like], Bernoulli,
//   DequantizeLinear-23 output_dtype; QuantizeLinear-23's compute type `precision`) gets float32 where it named a
//   promoted type; value_info and subgraph inputs/outputs follow;
// - a main-graph input of a promoted type keeps its type: a Cast to float32 named "<input>_float32" (made
//   unique) feeds the nodes that read it; such an output keeps its name and type through a Cast from
//   "<output>_float32" at the end.
// 16-bit values widen exactly, and the float32 model computes more precisely than the 16-bit one, so outputs
// differ from the original's by about one 16-bit rounding. float64 values round to the nearest float32 (a finite
// value beyond float32's range to the largest finite one, so a -1e300 mask fill stays finite) and the model
// computes in float32: outputs differ by float32 roundings, as any float32 export of the network would.
// Calibration tables and quantized models use the promoted tensor names: `calibrate` and `quantize` promote
// the same way, so they agree.
#pragma once

#include <string>

namespace onnx {
class ModelProto;
}

namespace qtool::onnxio {

struct Float32Promotion {
  int tensors = 0;      // tensors converted (or wrapped in a Cast when external)
  int typed_nodes = 0;  // Cast / generator nodes retargeted to float32
  int inputs = 0;       // main-graph inputs cast after entry
  int outputs = 0;      // main-graph outputs cast before exit
  bool any() const { return tensors + typed_nodes + inputs + outputs > 0; }
  std::string summary() const;  // "3 inputs, 1 output, 52 tensors, 4 nodes"
};

// True when promote_to_float32() would change the model (a quick scan, nothing copied).
bool needs_float32_promotion(const onnx::ModelProto& model);

// Rewrites the model in place as above. A model of opset < 6 (Cast's `to` was a string then) with promoted types
// is an UnsupportedError.
Float32Promotion promote_to_float32(onnx::ModelProto& model);

}  // namespace qtool::onnxio
