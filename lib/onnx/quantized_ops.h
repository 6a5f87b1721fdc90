// The ops that hold or compute quantized values, in one table (quantized_ops.cc): ONNX's DynamicQuantizeLinear,
// MatMulInteger, ConvInteger, QLinearConv, QLinearMatMul and ONNX Runtime's com.microsoft QOperator, dynamic and
// int4 ops (QGemm, QLinear*, DynamicQuantizeMatMul, MatMulIntegerToFloat, MatMulNBits, GatherBlockQuantized).
// QuantizeLinear / DequantizeLinear, the QDQ form, are not rows: their inputs are plain (value, scale, zero point)
// and each reader treats them apart. Readers: inspect (counts, weight groups, quantization parameters), the QDQ
// rewrite (an integer result is not quantized again) and quantize (a model holding these is already quantized).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace onnx {
class ModelProto;
class NodeProto;
}  // namespace onnx

namespace qtool::onnxio {

struct QuantizedOp {
  std::string_view op;
  // The input holding the quantized weight (-1: none), the input whose shape tells its granularity (its scale, or
  // its zero point where the op has no weight scale), the axis a per-channel weight is quantized along (-1: the
  // last), and the inputs that are scales or zero points (bit i: input i; QLinearConcat: every input but the X of
  // each triple, see is_quant_param_input). Bits / block_size attributes make a weight per-block (MatMulNBits,
  // GatherBlockQuantized).
  int weight, granularity_from, channel_axis;
  uint32_t params;
  // Its outputs hold integers (an accumulator, codes) or a scale computed at run time (DynamicQuantizeLinear's):
  // rounding them to 8 bits again would lose what they hold exactly. False where the op dequantizes to float
  // itself (MatMulIntegerToFloat, MatMulNBits, ...).
  bool integer_result;
};

// The row of `n` (ai.onnx or com.microsoft domain), or null when it is no such op.
const QuantizedOp* quantized_op(const onnx::NodeProto& n);

// Input i of `n` is a scale or zero point of a quantized op (of the table; not QuantizeLinear / DequantizeLinear).
bool is_quant_param_input(const onnx::NodeProto& n, int i);

// "Op" in the default domain, "domain.Op" elsewhere (as inspect keys op counts).
std::string op_key(const onnx::NodeProto& n);

// The nodes of every graph (If/Loop/Scan bodies included) that hold quantized values, by op key: QuantizeLinear,
// DequantizeLinear and the rows of the table. Empty for a float model.
std::map<std::string, int64_t> count_quantized_ops(const onnx::ModelProto& model);

}  // namespace qtool::onnxio
