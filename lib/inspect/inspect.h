// Model summaries for `qtool inspect`: what a deployment engineer checks first about an ONNX file.
// The library computes the facts; apps/qtool/cmd_inspect.cc only formats them (text or JSON).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace onnx {
class ModelProto;
}

namespace qtool::inspect {

// One dimension of a graph input/output: a fixed size, a symbolic name, or unknown.
struct Dim {
  std::optional<int64_t> value;  // set for a fixed size
  std::string symbol;            // set for a named dimension (dim_param)
};

struct ValueInfo {
  std::string name;
  // A sequence's or optional's dtype and shape are those of its tensor elements ("sequence of float [?,4]").
  std::optional<DType> dtype;             // unset: no tensor (element) type, or an element type qtool does not know
  std::string type;                       // "tensor", "sequence", "map", "optional", "sparse_tensor" or "unknown"
  std::optional<std::vector<Dim>> shape;  // unset: rank unknown
};

struct DTypeTotals {
  int64_t count = 0;  // elements
  int64_t bytes = 0;  // storage bytes
  int64_t tensors = 0;
};

// Parameters: initializers (including those also listed as graph inputs, as IR < 4 models do) and the
// tensors of Constant nodes, in every graph; inline or external.
struct Parameters {
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t tensors = 0;
  int64_t external_bytes = 0;  // part of `bytes` stored in external data files
  std::map<DType, DTypeTotals> by_dtype;
};

enum class Granularity { PerTensor, PerChannel, PerBlock };
std::string_view granularity_name(Granularity g);  // "per-tensor", "per-channel", "per-block"

// Quantized weights grouped by dtype and granularity (from the DequantizeLinear scale shape, axis and
// block_size). axis is set for per-channel and per-block groups, block_size for per-block.
struct WeightGroup {
  DType dtype;
  Granularity granularity;
  std::optional<int64_t> axis;
  int64_t block_size = 0;
  int64_t count = 0;  // weight tensors
  auto key() const { return std::tuple(dtype, granularity, axis, block_size); }
};

struct Quantization {
  int64_t quantize_linear = 0;    // QuantizeLinear nodes (any domain), subgraphs included
  int64_t dequantize_linear = 0;  // DequantizeLinear nodes
  // Nodes of ONNX Runtime's QOperator, dynamic-quantization and int4 formats (QLinearConv, MatMulInteger,
  // ConvInteger, DynamicQuantizeLinear, com.microsoft QLinear*, QGemm, DynamicQuantizeMatMul, MatMulIntegerToFloat,
  // MatMulNBits, GatherBlockQuantized: onnx/quantized_ops.h), by op key. Their constant weights join `weights`, like
  // the weights of a QDQ model.
  std::map<std::string, int64_t> quantized_ops;
  std::vector<WeightGroup> weights;
  std::map<DType, int64_t> activations;  // QuantizeLinear nodes on activations, by their output dtype
  bool quantized() const { return quantize_linear > 0 || dequantize_linear > 0 || !quantized_ops.empty(); }
};

// Constants by the stored dtype of what they hold. A weight is a constant a compute node reads, directly or
// through QuantizeLinear/DequantizeLinear (an int4 MatMul weight counts as int4, used by the MatMul). A
// quantization parameter is a constant that ends as a Q/DQ scale or zero point, also when a DequantizeLinear
// first expands it from smaller codes (double-quantized block scales count as their codes' dtype). Constants
// nothing reads are in neither.
struct ConstantUse {
  int64_t bytes = 0;
  int64_t tensors = 0;
  int64_t nodes = 0;                     // distinct nodes that read them (compute nodes, or Q/DQ for parameters)
  std::map<std::string, int64_t> ops;  // those nodes by op key
};

struct WeightBytes {
  std::map<DType, ConstantUse> weights;
  std::map<DType, ConstantUse> quant_params;
};

struct ModelSummary {
  std::filesystem::path path;
  int64_t file_bytes = 0;
  int64_t ir_version = 0;
  std::vector<std::pair<std::string, int64_t>> opset_imports;  // domain ("ai.onnx" for the default), version
  std::string producer_name, producer_version;
  std::vector<std::pair<std::string, std::string>> metadata;  // metadata_props, in file order
  std::vector<ValueInfo> inputs;  // graph inputs that are not initializers
  std::vector<ValueInfo> outputs;
  std::map<std::string, int64_t> op_counts;  // op type ("domain.Op" outside the default domain), subgraphs included
  int64_t node_count = 0;
  int64_t subgraph_count = 0;
  Parameters parameters;
  Quantization quantization;
  WeightBytes weight_bytes;
};

// Summarizes a model already in memory (external tensors are counted from their dims, not read).
ModelSummary summarize(const onnx::ModelProto& model);

// Loads `path` without reading external data (references are validated) and summarizes it.
ModelSummary inspect_model(const std::filesystem::path& path);

}  // namespace qtool::inspect
