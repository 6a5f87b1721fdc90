// The accuracy guard: measures what quantization did to each graph output on the calibration samples, and when
// an output misses its threshold, sends the most sensitive quantized tensors back to float until it does not.
//
// Error figure: SQNR per graph output, over all samples and elements,
//   SQNR_dB = 10 * log10( sum(f^2) / sum((f - q)^2) ),  f = float model's output, q = quantized model's,
// both run by qtool's interpreter (Q/DQ simulated in float, as ONNX defines them). It is scale-free (an output in
// logits or in probabilities, in volts or in millivolts, gets the same figure) and is the figure ONNX Runtime's
// qdq_loss_debug and PyTorch's Numeric Suite report. An output declared exactly like a graph input (same dtype,
// same dims, symbolic dims by the same name) whose name starts like that input's (silero VAD's state -> stateN,
// h0 -> hn; the input with the longest common prefix), or named in "accuracy_guard": {"state": {output: input}}, is
// taken as recurrent state that the caller feeds
// back, so its error compounds chunk after chunk: such a model is evaluated in closed loop (the samples taken as
// consecutive steps of one stream; every step after the first reads the state the model itself returned, float
// and quantized model each their own), and state outputs get their own threshold.
//
// Outputs read as class scores or token logits (analysis::Distribution: probability rows, or rank <= 3; not state)
// may be held to two more criteria: mean KL per row <= max_kl, and with keep_clear_top1 every clear winner keeps its
// top-1 (analysis/clear_top1.h: a row whose float margin no noise within min_sqnr_db could overturn in that row).
//
// Relative target (weights_only_margin_db > 0): the model with only its weights quantized (activations float) is
// measured first; its SQNR per output is what weight rounding alone allows, the ceiling activation quantization can
// approach. Independent noise powers add, so the full model's noise is the weights' plus the activations'; each
// output's threshold becomes max(floor, SQNR_weights_only - margin): activations may add up to
// (10^(margin/10) - 1) times the weights' noise (3 dB: as much again; 7 dB: four times, one bit's worth).
//
// Search (deterministic: fixed orders, ties broken by rewrite order, per-sample sums added in sample order):
//   1. units (an activation with its own Q/DQ, a quantized weight or constant) are ranked by their cost alone (the
//      worst output's noise relative to its allowed noise, with only that unit quantized, everything else float),
//      best first and lazily (quantize/guard_ranking.h: groups of units measured together, split only where the
//      costliest unit may be), so only the units step 2 takes are measured alone;
//   2. units go back to float in decreasing cost order, the whole model re-measured after each, until every output
//      meets its threshold or max_float_tensors is reached;
//   3. units are then tried back in quantized, least sensitive first, and stay quantized when the model still
//      meets every threshold.
// A time budget (GuardBudget) stops the search between evaluations and keeps the best state measured.
// A node whose inputs went float keeps its weights quantized (weight only) unless its weight is a unit sent back;
// a weight sent back takes its node's activation inputs with it (see accuracy_guard.cc: ONNX Runtime would
// otherwise quantize the float weight itself).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/clear_top1.h"
#include "core/tensor.h"
#include "quantize/qconfig.h"

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

using Sample = std::map<std::string, Tensor>;  // one run's inputs, by name

// The criterion behind a figure or a decision.
enum class Criterion { Sqnr, Kl, Top1, Sample };
std::string_view criterion_name(Criterion c);  // "sqnr", "kl", "top1", "sample"

struct OutputAccuracy {
  std::string output;
  bool state = false;  // declared like an input: recurrent state
  double threshold_db = 0;   // in effect: floor_db, or the weights-only target when that is higher
  double floor_db = 0;       // min_sqnr_db (state_min_sqnr_db for state)
  // The same output with only the weights quantized (activations float): the ceiling activation quantization can
  // approach. Measured when weights_only_margin_db > 0 and the model has quantized weights.
  bool weights_only = false;
  double weights_only_sqnr_db = 0;
  double sqnr_db = 0;        // fully quantized, before the guard acted
  double final_sqnr_db = 0;  // the model written
  double worst_sample_sqnr_db = 0, final_worst_sample_sqnr_db = 0;  // the worst one sample's SQNR (not state)
  // Outputs read as class scores or token logits (analysis::Distribution: probability rows, or rank <= 3 and not
  // state): the mean KL(p_float || p_quantized) per row in nats, before and after, and its limit (max_kl).
  bool distribution = false;
  double kl = 0, final_kl = 0, max_kl = 0;
  // keep_clear_top1 on a distribution output: its clear rows over all samples, and how many changed top-1.
  bool top1 = false;
  int64_t clear_rows = 0, flips = 0, final_flips = 0;
};

struct FloatTensor {
  std::string tensor;
  bool weight = false;          // a weight or constant initializer, else an activation
  double isolated_sqnr_db = 0;  // the worst output's SQNR with only this tensor quantized
  std::string worst_output;
  Criterion worst_criterion = Criterion::Sqnr;  // the criterion that output came closest to missing, alone
  // Why it went back: the output and criterion the model missed worst just before this tensor went float.
  std::string missed_output;
  Criterion missed_criterion = Criterion::Sqnr;
};

struct GuardReport {
  bool ran = false;
  bool met = true;                       // every output meets its threshold in the model written
  bool timed_out = false;                // the time budget cut the search short (GuardBudget)
  std::string note;                      // why it did not run, or what it did, in one line
  int64_t samples = 0, evaluations = 0;  // evaluations: quantized candidates run over the samples
  double seconds = 0;                    // wall time, the float reference run included (set by quantize_model)
  std::vector<OutputAccuracy> outputs;
  std::vector<FloatTensor> kept_float;  // in the order they went back to float
  // Graph outputs that are sequences of tensors (runtime/value.h): not compared, named in the report.
  std::vector<std::string> sequence_outputs;
};

// Runs float models and candidates on the samples and compares graph outputs.
class AccuracyEvaluator {
 public:
  // `float_model` is the reference; float32 outputs are compared, other outputs ignored.
  AccuracyEvaluator(const onnx::ModelProto& float_model, std::vector<Sample> samples,
                    const AccuracyGuardSettings& settings, int threads);

  // Per compared output: sum((f - q)^2) / sum(f^2) of `candidate` against the float model (0 when identical).
  std::vector<double> noise_ratios(const onnx::ModelProto& candidate) const;
  // max over outputs of noise / allowed noise: <= 1 meets every SQNR threshold.
  double score(const std::vector<double>& ratios) const;
  // Every criterion of one candidate: per output its noise ratio, (distribution outputs, else 0) its mean KL and
  // its clear rows that changed top-1.
  struct Measurement {
    std::vector<double> noise, kl;
    std::vector<int64_t> flips;
    std::vector<double> worst_sample;  // per output: the largest noise ratio of one sample (not state), else 0
  };
  Measurement measure(const onnx::ModelProto& candidate) const;
  // The output and criterion furthest from its limit, and how far: noise / allowed noise, KL / max_kl, and for
  // top-1 1 + flips / clear rows when any clear row flipped (else 0). score <= 1 meets every threshold.
  struct Worst {
    double score = 0;
    size_t output = 0;
    Criterion criterion = Criterion::Sqnr;
  };
  Worst worst(const Measurement& m) const;
  double score(const Measurement& m) const { return worst(m).score; }
  const std::vector<OutputAccuracy>& outputs() const { return outputs_; }
  // Graph outputs that are sequences of tensors: the guard compares tensors only, so these are left out.
  const std::vector<std::string>& sequence_outputs() const { return sequence_outputs_; }
  // The relative target: per output, `noise` is the weights-only model's noise ratio (measure().noise); the
  // threshold becomes max(floor, SQNR_weights_only - margin_db) where the weights-only SQNR is below the cap
  // (noise 0, or no weights: no relative target). Clear top-1 rows keep the floor's definition.
  void set_weights_only(const std::vector<double>& noise, double margin_db);
  int64_t samples() const { return static_cast<int64_t>(samples_.size()); }
  // The float model's compared outputs: per sample, per output (in outputs() order).
  const std::vector<std::vector<Tensor>>& reference() const { return reference_; }
  // Every graph output of `model` per sample, run as the float model was (closed loop with recurrent state).
  std::vector<std::map<std::string, Tensor>> run(const onnx::ModelProto& model) const;

 private:

  std::vector<Sample> samples_;
  std::vector<std::pair<std::string, std::string>> feedback_;  // (state input, state output)
  std::vector<OutputAccuracy> outputs_;                        // name, state, threshold
  std::vector<std::string> sequence_outputs_;
  std::vector<double> allowed_;                                // 10^(-threshold/10)
  double max_kl_ = 0;                                          // 0: no KL criterion
  bool per_sample_ = false;                                    // each sample alone meets the SQNR threshold
  std::vector<std::vector<Tensor>> reference_;                 // per sample, per output
  std::vector<double> signal_;                                 // per output: sum(f^2)
  std::vector<std::vector<analysis::ClearRows>> clear_;        // per output (top1 ones), per sample
  int threads_ = 1;
};

// SQNR in dB of a noise ratio, capped at 200 dB (identical outputs).
double sqnr_db(double noise_ratio);

// What the guard may spend. seconds > 0: the search stops at the first evaluation that ends past it and keeps the
// best state measured (report.timed_out; report.met says whether that state meets every threshold).
struct GuardBudget {
  double seconds = 0;  // 0: no limit
};

// Quantizes the prepared float model with these tensors kept float; returns the model and the units it quantized.
struct Candidate {
  std::shared_ptr<onnx::ModelProto> model;
  std::vector<std::string> activation_tensors, weight_tensors;
  std::map<std::string, std::vector<std::string>> weight_inputs;  // weight -> activation inputs of its node
};
using Requantize = std::function<Candidate(const std::vector<std::string>& float_tensors)>;

// Runs the search above from the fully quantized `initial`; returns the report and the tensors to keep float.
// `scan` (optional): a cheaper evaluator (fewer samples) for step 1, which only ranks the units; every decision of
// steps 2 and 3 and the reported figures use `eval`. Each step-2 evaluation logs a progress line.
// Before anything else, with settings.weights_only_margin_db > 0, the weights-only model (every activation unit
// float) is measured on `eval` and both evaluators get the relative target (set_weights_only).
GuardReport guard_accuracy(AccuracyEvaluator& eval, const Candidate& initial, const Requantize& requantize,
                           const AccuracyGuardSettings& settings, std::vector<std::string>& float_tensors,
                           const std::function<void(const std::string&)>& log = {},
                           AccuracyEvaluator* scan = nullptr, const GuardBudget& budget = {});

}  // namespace qtool::quantize
