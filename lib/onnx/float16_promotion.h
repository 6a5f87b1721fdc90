// Models that compute in float16 or bfloat16 run and quantize in float32.
//
// qtool's interpreter, observers and quantizer work in float32, and ONNX Runtime's CPU provider has no
// float16 kernels for most ops (it casts around them). promote_float16() rewrites a model so it computes in
// float32 while its interface stays as declared:
// - every 16-bit float tensor stored in the model (initializers, Constant / ConstantOfShape values, any
//   TENSOR attribute, subgraphs included) becomes float32; one still in external data (not read) stays 16-bit
//   behind a Cast to float32, so a large model's bytes are not read here;
// - an op whose output type is an attribute (Cast, EyeLike, RandomNormal/Uniform[Like], Bernoulli) gets float32
//   where it named a 16-bit float; value_info and subgraph inputs/outputs follow;
// - a 16-bit float input of the main graph keeps its type: a Cast to float32 named "<input>_float32" (made
//   unique) feeds the nodes that read it; a 16-bit float output keeps its name and type through a Cast from
//   "<output>_float32" at the end.
// Exact for the values (16-bit -> 32-bit is exact); the float32 model computes more precisely than the 16-bit
// one, so outputs differ from the original's by about one 16-bit rounding. Calibration tables and quantized
// models use the promoted tensor names: `calibrate` and `quantize` promote the same way, so they agree.
#pragma once

#include <string>

namespace onnx {
class ModelProto;
}

namespace qtool::onnxio {

struct Float16Promotion {
  int tensors = 0;      // 16-bit tensors converted (or wrapped in a Cast when external)
  int typed_nodes = 0;  // Cast / generator nodes retargeted to float32
  int inputs = 0;       // main-graph inputs cast after entry
  int outputs = 0;      // main-graph outputs cast before exit
  bool any() const { return tensors + typed_nodes + inputs + outputs > 0; }
  std::string summary() const;  // "3 inputs, 1 output, 52 tensors, 4 nodes"
};

// True when promote_float16() would change the model (a quick scan, nothing copied).
bool computes_in_float16(const onnx::ModelProto& model);

// Rewrites the model in place as above. A model of opset < 6 (Cast's `to` was a string then) with 16-bit floats
// is an UnsupportedError.
Float16Promotion promote_float16(onnx::ModelProto& model);

}  // namespace qtool::onnxio
