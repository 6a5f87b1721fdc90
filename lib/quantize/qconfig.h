// QConfig: which nodes and tensors are quantized, and how. Parsed once from JSON (configs/*.json, the
// schema is in the README, "qtool quantize"); inside the library everything is enums and numbers.
//
// Levels, least to most specific (as PyTorch's QConfigMapping):
//   global -> op_types[op] (or op_types["*"] for unlisted ops) -> node_name_regex (first match wins)
//   -> node_names[name] -> tensors[name] (one tensor's settings).
// Each level holds a rule: an object with optional "activation", "weight", "bias" and "output" settings,
// or null, which keeps the node float. A more specific rule overrides field by field; a settings block
// set to null keeps that kind of tensor float (e.g. "bias": null keeps biases float, "output": null
// leaves node outputs without Q/DQ).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calib/range_select.h"
#include "core/dtype.h"

namespace re2 {
class RE2;
}

namespace qtool::quantize {

enum class Granularity { PerTensor, PerChannel, PerBlock };
// Range-selection methods are calibration's (the calibration file records one range per method).
using RangeMethod = calib::RangeMethod;
// Weight rounding: to nearest, or per kernel so that the rounding errors of one (output, input) channel's
// taps sum to at most half a step (see qparams.h).
enum class Rounding { Nearest, KernelSum };
// The runtime the written model is for. OrtCpu (the default): every model loads and runs in ONNX Runtime's CPU
// provider with its default graph optimizations, so configs it cannot load are refused up front. TensorRT: Q/DQ
// formats TensorRT builds (FP8 activations) that ONNX Runtime CPU runs only with graph optimizations disabled.
enum class Target { OrtCpu, TensorRT };

// How weight codes are chosen (lib/quantize/weights/): round to nearest, a per-group clipping search that minimises
// the weight's reconstruction error, or GPTQ / AWQ, which minimise the layer-output error on calibration inputs.
enum class WeightAlgorithm { Rtn, ClipSearch, Gptq, Awq };
// Algorithms that need the layer's calibration inputs (a Hessian per MatMul/Gemm input): GPTQ and AWQ.
inline bool needs_layer_inputs(WeightAlgorithm a) { return a == WeightAlgorithm::Gptq || a == WeightAlgorithm::Awq; }

std::string_view granularity_name(Granularity g);
std::string_view rounding_name(Rounding r);
std::string_view target_name(Target t);
std::string_view weight_algorithm_name(WeightAlgorithm a);

// Settings for one kind of tensor; every field optional so levels can be merged field by field. A field with no
// effect on the kind of tensor its block governs (a weight's range, a bias's symmetric, an activation's axis) is
// a parse error, not ignored; a `tensors` override is checked where it is applied (checked_override).
struct TensorSettingsPatch {
  std::optional<DType> dtype;
  std::optional<bool> symmetric;
  std::optional<Granularity> granularity;
  std::optional<int64_t> axis;        // per_channel axis; unset = the op's natural axis
  std::optional<int64_t> block_size;  // per_block
  std::optional<bool> narrow_range;   // int8 [-127,127] instead of [-128,127]
  std::optional<bool> reduce_range;   // 7-bit range (older x86 without VNNI)
  std::optional<bool> saturation_safe;  // int8 weights: no int16 overflow in u8s8 pair sums (qparams.h)
  std::optional<RangeMethod> method;
  std::optional<Rounding> rounding;
  std::optional<WeightAlgorithm> algorithm;  // weights only
  std::optional<int64_t> scale_bits;        // per_block weights: block scales as 8- or 4-bit codes (weights/double_quant.h)
  std::optional<int64_t> scale_block_size;  // with scale_bits: block scales per float
  std::optional<double> percentile;                // method percentile: selected from the tensor's histogram (qdq.cc)
  std::optional<std::pair<double, double>> range;  // fixed [lo, hi], ignores calibration
  std::optional<double> scale;                     // fixed scale (with zero_point), e.g. Sigmoid 1/256
  std::optional<int64_t> zero_point;
  std::optional<bool> shared_with_inputs;  // output slot of a Concat: inputs and output share one range
};

// A settings slot in a rule: absent (inherit), null (keep float) or a patch.
struct SettingsSlot {
  bool present = false;
  bool is_null = false;
  TensorSettingsPatch patch;
};

struct Rule {
  bool is_null = false;  // null rule: keep the node float
  SettingsSlot activation, weight, bias, output;
  std::string path;  // JSON path, for --explain and errors: "$.op_types.Conv"
};

// Fully resolved settings for one tensor.
struct TensorSettings {
  DType dtype = DType::UInt8;
  bool symmetric = false;
  Granularity granularity = Granularity::PerTensor;
  std::optional<int64_t> axis;
  int64_t block_size = 0;
  bool narrow_range = false;
  bool reduce_range = false;
  bool saturation_safe = false;
  RangeMethod method = RangeMethod::MinMax;
  // Method percentile: the percentile this tensor's range is selected at, from its calibration histogram; unset:
  // the table's own percentile range (calibrate --percentile, 99.999 by default).
  std::optional<double> percentile;
  Rounding rounding = Rounding::Nearest;
  WeightAlgorithm algorithm = WeightAlgorithm::Rtn;
  int64_t scale_bits = 0;  // 0: float block scales
  int64_t scale_block_size = 256;
  std::optional<std::pair<double, double>> range;
  std::optional<double> scale;
  std::optional<int64_t> zero_point;
  bool shared_with_inputs = false;
};

// What the mapping says about one node.
struct NodeQuant {
  bool quantized = false;
  std::optional<TensorSettings> activation, weight, bias, output;  // nullopt = keep float
  std::vector<std::string> applied;  // JSON paths of the rules that applied, least specific first
};

// The accuracy guard (quantize/accuracy_guard.h): after the QDQ rewrite, the float and the quantized model run
// on the calibration samples; a graph output whose SQNR falls below its threshold makes the most sensitive
// quantized tensors go back to float until every output meets it. JSON: "accuracy_guard": {...} or null (off).
struct AccuracyGuardSettings {
  bool enabled = false;
  double min_sqnr_db = 0;         // every graph output
  double state_min_sqnr_db = 0;   // outputs declared exactly like an input: recurrent state the caller feeds back
  int64_t max_float_tensors = 0;  // at most this many tensors go back to float
  // Outputs read as class scores / token logits: mean KL(p_float || p_quant) per row, in nats (0: not checked).
  double max_kl = 0;
  // Outputs read as class scores / token logits: every row whose float top-1 is a clear winner (its margin beyond
  // what noise at min_sqnr_db could overturn in that row: analysis/clear_top1.h) keeps its top-1.
  bool keep_clear_top1 = false;
  // Every output that is not recurrent state meets its threshold on each sample alone, not only pooled over the
  // samples (where one badly served input hides among well served ones).
  bool per_sample_sqnr = false;
  // Relative target (0: off): every output's SQNR threshold is raised to (its SQNR with the weights alone quantized,
  // activations float) - weights_only_margin_db, when that is above min_sqnr_db / state_min_sqnr_db. Independent
  // noise powers add: a margin of M dB lets the activations add up to (10^(M/10) - 1) times the weights' noise.
  double weights_only_margin_db = 0;
  // State output -> the input it is fed back to; empty: recognised by declared type and name (accuracy_guard.h).
  std::map<std::string, std::string> state;
};

// Algorithms that change the float weights before quantization (lib/quantize/weights/). JSON:
// "weight_algorithms": {"cross_layer_equalization": false, "bias_correction": false,
// "activation_bias_correction": false, "fold_scale_after_conv": false, "smooth_quant_alpha": 0}; each absent key is
// off.
struct WeightAlgorithms {
  // Rescale Conv -> Relu -> Conv channel pairs to equal weight ranges (weights/cross_layer_equalization.h).
  // It changes the ranges of the tensors between the pair: the model is calibrated after equalizing, so quantize
  // with a --calib table (measured on the unequalized model) skips it and says so.
  bool cross_layer_equalization = false;
  // Conv / Gemm biases absorb the mean output shift that weight rounding causes, measured on the calibration
  // samples (weights/bias_correction.h); needs samples (quantize --data / --random).
  bool bias_correction = false;
  // The same biases also absorb the mean shift that rounding the activations leaves in each layer's output, measured
  // on the quantized model layer by layer and applied where the calibration samples agree on it
  // (weights/bias_correction.h); needs at least three samples.
  bool activation_bias_correction = false;
  // A constant Mul after a Conv / ConvTranspose (one value, or one per output channel) folds into its weights and
  // bias before quantizing (passes/fold_affine.cc): the activation is rounded once instead of before and after the
  // Mul. Off by default: docs/weight-algorithms.md ("Folding the Mul after a Conv") has why.
  bool fold_scale_after_conv = false;
  // SmoothQuant migration strength in (0, 1]; 0: off. The channels of MatMul / Gemm inputs that a norm's scale or
  // an up projection produces are divided by max|X_j|^alpha / max|W_j|^(1-alpha) and the weights' rows multiplied
  // by it (weights/smooth_quant.h). Needs samples; the model is calibrated after smoothing, as after equalization.
  double smooth_quant_alpha = 0;
};

// node_name_regex entries are RE2 patterns (linear-time matching: no backtracking blow-up on hostile patterns
// or long names), compiled once when the config is parsed; a rule matches a node when the pattern matches
// anywhere in its name (as a search, not a full match).
struct RegexRule {
  std::string pattern;
  std::shared_ptr<const re2::RE2> re;
  Rule rule;
};

class QConfig {
 public:
  // Parses and validates; every error is a BadInputError naming `source` and the JSON path.
  static QConfig parse(const std::string& json_text, const std::string& source);
  static QConfig load(const std::filesystem::path& path);
  // The built-in default (configs/int8.json embedded at build time).
  static QConfig builtin_default();

  NodeQuant resolve(const std::string& node_name, const std::string& op_type) const;
  // Tensor-level override, if any (nullptr when none). is_null: keep the tensor float.
  const SettingsSlot* tensor_override(const std::string& tensor_name) const;
  // The same, applied to a weight (weight = true) or an activation: BadInputError naming its JSON path when it sets
  // a field with no effect on that kind (a weight's range or method, an activation's axis or rounding).
  const SettingsSlot* checked_override(const std::string& tensor_name, bool weight) const;

  // Names in node_names / tensors and regexes that matched nothing: BadInputError with the JSON path.
  void check_names(const std::vector<std::string>& node_names, const std::vector<std::string>& tensor_names) const;

  const AccuracyGuardSettings& accuracy_guard() const { return guard_; }
  const WeightAlgorithms& weight_algorithms() const { return weight_algorithms_; }
  void set_accuracy_guard(const AccuracyGuardSettings& g) { guard_ = g; }
  // This config with `names` (activations or weights) kept float, as "tensors": {name: null} would.
  QConfig with_float_tensors(const std::vector<std::string>& names) const;
  // The range methods the rules can ask of a calibration table (minmax included: it is the default).
  calib::RangeMethods range_methods() const;

  // The config as it is applied: the parsed JSON with keys sorted and no whitespace, "accuracy_guard" replaced
  // by the settings in effect (after set_accuracy_guard: --accuracy-guard, --min-sqnr, ...), null when off. Two
  // files that differ only in layout or key order give the same text (quantize/provenance.h hashes it).
  std::string canonical_json() const;

  const std::string& source() const { return source_; }
  const std::string& name() const { return name_; }
  Target target() const { return target_; }
  // Smallest opset the config's dtypes/granularities need (13 per-channel, 19 fp8, 21 int4/per-block).
  int64_t required_opset() const { return required_opset_; }

 private:
  std::string source_, name_;
  Target target_ = Target::OrtCpu;
  std::string parsed_json_;  // the parsed document, dumped (sorted keys); canonical_json() starts from it
  Rule global_;
  std::map<std::string, Rule> op_types_;
  std::optional<Rule> op_types_default_;  // "*"
  std::vector<RegexRule> regex_rules_;
  std::map<std::string, Rule> node_names_;
  std::map<std::string, SettingsSlot> tensors_;
  AccuracyGuardSettings guard_;
  WeightAlgorithms weight_algorithms_;
  int64_t required_opset_ = 10;
};

// Applies a patch on top of resolved settings.
void apply_patch(TensorSettings& s, const TensorSettingsPatch& p);

// The settings of a node's weight initializer `weight`: the node's rule (q.weight), patched by a `tensors`
// override of that name; nullopt when it stays float.
std::optional<TensorSettings> weight_settings(const QConfig& config, const NodeQuant& q, const std::string& weight);

}  // namespace qtool::quantize
