// The QDQ rewrite: given a prepared float model, a QConfig and activation ranges, inserts
// QuantizeLinear/DequantizeLinear pairs on activations and turns weights/biases into integer
// initializers followed by DequantizeLinear, in the form ONNX Runtime and TensorRT fuse.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calib/calibration_table.h"
#include "quantize/qconfig.h"
#include "quantize/slice_spread.h"
#include "quantize/weights/weight_quantizer.h"

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

class LayerHessianSource;

struct TensorExplain {
  std::string tensor, role;  // role: input, output, weight, bias
  DType dtype = DType::Undefined;
  // scale_count values; the values themselves only up to kExplainMaxValues (per tensor or per channel), none for
  // more (block-wise scales of a big weight: a report on every weight of a large model would hold a fraction of it).
  std::vector<float> scale;
  std::vector<int64_t> zero_point;
  int64_t scale_count = 0;
  int64_t axis = -1;
  // Weights: the algorithm that chose the codes and the error it minimised (weights/weight_quantizer.h).
  std::string algorithm, metric;
  double error = 0;
};
inline constexpr int64_t kExplainMaxValues = 65536;

struct NodeExplain {
  std::string node, op_type;
  std::vector<std::string> rules;  // JSON paths that applied, least specific first
  bool quantized = false;
  std::string note;  // why it stayed float, or how it was handled
  std::vector<TensorExplain> tensors;
};

struct QdqReport {
  std::map<std::string, int> quantized_ops, float_ops;  // by op type
  int qdq_pairs = 0, weights_quantized = 0, biases_quantized = 0;
  std::vector<NodeExplain> nodes;
  // Activations with Q/DQ (pass-through outputs included: when their input goes float, they are quantized with
  // their own range) and quantized weights/constants, in rewrite order: what the accuracy guard can keep float.
  std::vector<std::string> activation_tensors, weight_tensors;
  // Activations the config quantizes that a non-empty calibration table has no entry for (not even "no finite
  // value"): the table was made for another model. quantize_model refuses these.
  std::vector<std::string> missing_ranges;
  // Bodies (by graph name) none of whose tensors the table holds: calibration never ran them (an If branch its
  // samples did not take); what needs activation ranges there stays float.
  std::vector<std::string> unobserved_bodies;
};

// What the rewrite uses besides the model, the config and the ranges.
struct RewriteInputs {
  LayerHessianSource* hessians = nullptr;  // the input Hessians of the layers the config quantizes with GPTQ / AWQ
  int threads = 1;                         // for rounding weights; the model written is the same for any count
  // Tensors whose slices' ranges are spread (slice_spread.h: the median slice's share below kMinSliceShare):
  // a weightless elementwise op that reads or makes one stays float.
  std::map<std::string, SliceSpread> spread;
};

// Rewrites `model` in place; activation ranges come from the calibration table (`qtool calibrate`). Config names that
// match nothing are BadInputErrors.
QdqReport insert_qdq(onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges,
                     const RewriteInputs& inputs = {});

// The first node (main graph first, then If/Loop/Scan bodies) that insert_qdq would quantize, decided before any
// range is known; nullopt when it would quantize none. The same rules and decisions, with every activation taken to
// have a finite range (calibration can only keep more float: no range, ±inf or NaN, a body it never ran) and weights
// rounded to nearest (the algorithm decides no node's fate; GPTQ / AWQ would need samples). It stops at that node,
// leaving `model` partly rewritten: give it a copy.
std::optional<NodeExplain> plan_qdq(onnx::ModelProto& model, const QConfig& config);

}  // namespace qtool::quantize
