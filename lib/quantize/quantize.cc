#include "quantize/quantize.h"

#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>

#include "core/error.h"
#include "onnx/model_walk.h"
#include "onnx/tensor_proto.h"
#include "quantize/provenance.h"
#include "quantize/share_body_initializers.h"
#include "quantize/slice_spread.h"
#include "quantize/weights/bias_correction.h"
#include "quantize/weights/clamp_equalization.h"
#include "quantize/weights/conv_gptq.h"
#include "quantize/weights/cross_layer_equalization.h"
#include "quantize/weights/layer_inputs.h"
#include "quantize/weights/smooth_quant.h"

namespace qtool::quantize {

int64_t initializer_bytes(const onnx::ModelProto& model) {
  int64_t total = 0;
  auto add = [&](const onnx::TensorProto& t) {
    const auto* info = dtype_info_or_null(t.data_type());
    if (info && info->cls != DTypeClass::String && info->cls != DTypeClass::None)
      total += static_cast<int64_t>(storage_bytes(info->dtype, onnxio::proto_numel(t)));
  };
  // Every graph of the model (If/Loop/Scan bodies hold weights too); weights held by Constant nodes count too.
  const auto walk = [&](const auto& self, const onnx::GraphProto& g) -> void {
    for (const auto& t : g.initializer()) add(t);
    for (const auto& n : g.node())
      for (const auto& a : n.attribute()) {
        if (n.op_type() == "Constant" && a.name() == "value" && a.has_t()) add(a.t());
        if (a.has_g()) self(self, a.g());
        for (const auto& body : a.graphs()) self(self, body);
      }
  };
  walk(walk, model.graph());
  return total;
}

PrepareOptions prepare_options(const QConfig& config) {
  PrepareOptions o;
  o.fold_scale_after_conv = config.weight_algorithms().fold_scale_after_conv;
  return o;
}

bool needs_activation_ranges(const onnx::ModelProto& model, const QConfig& config) {
  bool needed = false;  // If/Loop/Scan bodies too: a merged decoder's every MatMul sits in an If branch
  onnxio::for_each_node(model, [&](const onnx::NodeProto& n, int) {
    const NodeQuant q = config.resolve(n.name(), n.op_type());
    needed = needed || (q.quantized && q.activation);
  });
  return needed;
}

bool needs_layer_inputs(const onnx::ModelProto& model, const QConfig& config) {
  // Asked before preparation, which folds weights computed from constants (float16 weights behind a Cast, as float16
  // converters keep float inputs) into initializers: those count as weights here. The view holds names only.
  onnx::ModelProto view;
  *view.mutable_opset_import() = model.opset_import();
  auto* g = view.mutable_graph();
  std::set<std::string> constants;
  for (const auto& t : model.graph().initializer()) constants.insert(t.name());
  for (const auto& n : model.graph().node()) {
    bool constant = n.op_type() == "Constant" || n.input_size() > 0;
    for (const auto& in : n.input()) constant = constant && (in.empty() || constants.count(in));
    auto* c = g->add_node();
    c->set_op_type(n.op_type()), c->set_name(n.name()), c->set_domain(n.domain());
    *c->mutable_input() = n.input();
    *c->mutable_output() = n.output();
    if (constant) constants.insert(n.output().begin(), n.output().end());
  }
  for (const auto& name : constants) g->add_initializer()->set_name(name);
  return !gptq_layer_inputs(view, config).empty() || !conv_gptq_weights(view, config).empty();
}

int equalize_for_calibration(onnx::ModelProto& model, const QConfig& config) {
  if (!config.weight_algorithms().cross_layer_equalization) return 0;
  prepare_model(model, std::max<int64_t>(13, config.required_opset()),
                prepare_options(config));  // BatchNormalization folded first
  Graph g(model);
  return equalize_clamps(g) + equalize_cross_layer(g).pairs;
}

SmoothingReport smooth_for_calibration(onnx::ModelProto& model, const QConfig& config,
                                       const std::vector<Sample>& samples, int threads) {
  const double alpha = config.weight_algorithms().smooth_quant_alpha;
  if (alpha <= 0 || samples.empty()) return {};
  prepare_model(model, std::max<int64_t>(13, config.required_opset()), prepare_options(config));
  Graph g(model);
  const std::vector<std::string> tensors = smoothing_tensors(g);
  if (tensors.empty()) return {};
  return smooth_activations(g, smoothing_statistics(model, tensors, samples, threads), alpha);
}

namespace {

// What quantize_model does to the float model before the QDQ rewrite.
PrepareReport prepare_for_rewrite(onnx::ModelProto& model, const QConfig& config) {
  // Opset 13 at least: per-channel DequantizeLinear, and ONNX Runtime's QDQ fusions expect it.
  PrepareReport r = prepare_model(model, std::max<int64_t>(13, config.required_opset()), prepare_options(config));
  if (config.target() == Target::OrtCpu) {  // ONNX Runtime CPU layouts (passes/pin_resize_layout.cc)
    Graph g(model);
    r.rewrites["pin_resize_layout"] = run_pass(g, *make_pin_resize_layout_pass());
  }
  return r;
}

}  // namespace

std::optional<NodeExplain> first_node_to_quantize(const onnx::ModelProto& model, const QConfig& config) {
  onnx::ModelProto copy = model;
  prepare_for_rewrite(copy, config);
  return plan_qdq(copy, config);
}

QdqReport explain_model(const onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges) {
  onnx::ModelProto copy = model;
  return quantize_model(copy, config, ranges).qdq;
}

std::string explain_text(const QdqReport& report) {
  std::string out;
  char buf[512];
  for (const auto& n : report.nodes) {
    std::string rules;
    for (const auto& p : n.rules) rules += (rules.empty() ? "" : " > ") + p;
    std::snprintf(buf, sizeof buf, "%-40s %-18s %-6s ", n.node.c_str(), n.op_type.c_str(),
                  n.quantized ? "int" : "float");
    out += buf + rules + (n.note.empty() ? "" : " : " + n.note) + "\n";
    for (const auto& t : n.tensors) {
      if (t.scale_count == 1)
        std::snprintf(buf, sizeof buf, "scale=%.6g zp=%lld", t.scale[0], static_cast<long long>(t.zero_point[0]));
      else
        std::snprintf(buf, sizeof buf, "scale=[%lld values, axis %lld]", static_cast<long long>(t.scale_count),
                      static_cast<long long>(t.axis));
      out += "    " + t.role + " " + t.tensor + " " + std::string(dtype_name(t.dtype)) + " " + buf;
      if (!t.algorithm.empty()) {
        std::snprintf(buf, sizeof buf, " %s %s=%.4g", t.algorithm.c_str(), t.metric.c_str(), t.error);
        out += buf;
      }
      out += "\n";
    }
  }
  return out;
}

namespace {

// Dead nodes and unread initializers of `g` and of the If/Loop/Scan bodies inside it, innermost first (a body's
// float weights are unread once their quantized copies replaced them; then so are outer ones only bodies read).
void remove_dead(Graph& g) {
  bool bodies = false;
  for (int i = 0; i < g.node_count(); ++i)
    for (auto& a : *g.node(i).mutable_attribute()) {
      auto clean = [&](onnx::GraphProto& body) {
        Graph b(g.model(), body, g);
        remove_dead(b);
        bodies = true;
      };
      if (a.has_g()) clean(*a.mutable_g());
      for (auto& body : *a.mutable_graphs()) clean(body);
    }
  if (bodies) g.reindex();  // what the bodies read changed
  remove_dead_nodes(g);
}

// The QDQ rewrite and clean-up of an already prepared model.
QdqReport rewrite(onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges,
                  const RewriteInputs& inputs) {
  QdqReport r = insert_qdq(model, config, ranges, inputs);
  {
    Graph g(model);
    remove_dead(g);
  }
  share_body_initializers(model);
  return r;
}

// Integer tensors (shape arithmetic read by a Concat, say) are never in a table, so a few absent names are normal;
// a table that lacks most of what the config quantizes was made for another model. Checked on the full rewrite
// only (the guard's candidates keep most tensors float on purpose).
void check_table_matches(const QdqReport& r, const calib::CalibrationTable& ranges) {
  if (r.missing_ranges.empty() || r.missing_ranges.size() < r.activation_tensors.size()) return;
  std::string list;
  for (size_t i = 0; i < r.missing_ranges.size() && i < 3; ++i) list += (i ? ", '" : "'") + r.missing_ranges[i] + "'";
  if (r.missing_ranges.size() > 3) list += " and " + std::to_string(r.missing_ranges.size() - 3) + " more";
  throw BadInputError(
      "the calibration table" + (ranges.model.empty() ? std::string() : " (of model '" + ranges.model + "')") +
      " has no entry for " + list +
      ", which the config quantizes: it was made for another model; re-run qtool calibrate on this one");
}

// The config's rules are checked against its target when parsed (qconfig.cc); a "tensors" override can still
// give one activation an FP8 type, which ONNX Runtime's CPU provider cannot load: refused before anything is written.
void check_target_loads(const QdqReport& r, const QConfig& config) {
  if (config.target() != Target::OrtCpu) return;
  for (const auto& n : r.nodes)
    for (const auto& t : n.tensors)
      if ((t.role == "input" || t.role == "output") && is_float8(t.dtype))
        throw BadInputError("activation '" + t.tensor + "' of node '" + n.node + "' is " +
                            std::string(dtype_name(t.dtype)) +
                            ": ONNX Runtime's CPU provider cannot load FP8 activation Q/DQ with its default graph "
                            "optimizations; set \"target\": \"tensorrt\" in the config, or keep this tensor 8-bit integer");
}

// What the guard may keep float, from the rewrite's report.
void units_of(const QdqReport& r, Candidate& c) {
  c.activation_tensors = r.activation_tensors;
  c.weight_tensors = r.weight_tensors;
  for (const auto& n : r.nodes)
    for (const auto& w : n.tensors)
      if (w.role == "weight" || w.role == "constant")
        for (const auto& t : n.tensors)
          if (t.role == "input") c.weight_inputs[w.tensor].push_back(t.tensor);
}

}  // namespace

QuantizeSummary quantize_model(onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges,
                               const QuantizeOptions& options) {
  QuantizeSummary s;
  s.weight_bytes_before = options.stored_weight_bytes ? *options.stored_weight_bytes : initializer_bytes(model);
  s.prepare = prepare_for_rewrite(model, config);
  RewriteInputs rewrite_inputs;
  rewrite_inputs.threads = options.threads;
  if (!options.samples.empty()) {  // without samples (--calib alone) the rule has nothing to measure
    const Graph g(model);
    for (const auto& [t, sp] : slice_spreads(model, elementwise_tensors(g, config), options.samples, options.threads))
      if (sp.share < kMinSliceShare) {
        rewrite_inputs.spread.emplace(t, sp);
        spdlog::debug("spread slices: {} (axis {}, {} slices): the median one covers {:.3g} of its range", t, sp.axis,
                      sp.slices, sp.share);
      }
    if (options.log && !rewrite_inputs.spread.empty())
      options.log("spread slices: " + std::to_string(rewrite_inputs.spread.size()) +
                  " tensors whose channels (or positions) span ranges far apart; the elementwise ops on them stay "
                  "float (-v names them)");
  }
  const AccuracyGuardSettings& gs = config.accuracy_guard();
  const bool guard = gs.enabled && !options.samples.empty();
  // GPTQ and AWQ layers: the Hessians of their inputs, from the float model on the calibration samples.
  // Held a group at a time within options.hessian_budget_bytes (weights/layer_inputs.h).
  std::unique_ptr<LayerHessianSource> hessian_source;
  if (const auto inputs = gptq_layer_inputs(model, config); !inputs.empty()) {
    if (options.samples.empty())
      throw BadInputError("\"algorithm\": \"gptq\" / \"awq\" needs calibration inputs: give qtool quantize --data (or "
                          "--random)");
    hessian_source = std::make_unique<LayerHessianSource>(model, inputs, options.samples, options.threads,
                                                          options.hessian_budget_bytes);
    if (options.log && hessian_source->groups() > 1)
      options.log("gptq: layer inputs in " + std::to_string(hessian_source->groups()) + " groups of at most " +
                  std::to_string(options.hessian_budget_bytes >> 20) + " MiB of Hessians");
  }
  if (const auto weights = conv_gptq_weights(model, config); !weights.empty()) {
    if (options.samples.empty())
      throw BadInputError("\"algorithm\": \"gptq\" on Conv weights needs calibration inputs: give qtool quantize "
                          "--data (or --random)");
    if (!hessian_source)
      hessian_source = std::make_unique<LayerHessianSource>(model, std::vector<std::string>{}, options.samples,
                                                            options.threads, options.hessian_budget_bytes);
    hessian_source->add_fixed(collect_conv_hessians(model, weights, options.samples, options.threads));
  }
  rewrite_inputs.hessians = hessian_source.get();
  std::vector<BiasCorrection> corrections;
  const WeightAlgorithms& wa = config.weight_algorithms();
  if ((wa.bias_correction || wa.activation_bias_correction) && !options.samples.empty()) {
    // The shift depends on the rounded weights: rewrite once to get them. Bias changes leave the weights' grids
    // alone. The mean of each input settles in a few dozen samples.
    constexpr size_t kBiasSamples = 64;
    auto first = [&](size_t n) {
      return std::vector<Sample>(options.samples.begin(),
                                 options.samples.begin() + std::min(options.samples.size(), n));
    };
    onnx::ModelProto trial = model;
    rewrite(trial, config, ranges, rewrite_inputs);
    if (wa.bias_correction) corrections = bias_corrections(model, trial, first(kBiasSamples), options.threads);
    if (wa.activation_bias_correction && options.samples.size() < kMinActivationSamples) {
      if (options.log)
        options.log("activation bias correction: skipped (" + std::to_string(options.samples.size()) +
                    " calibration samples; it needs " + std::to_string(kMinActivationSamples) +
                    " to tell a shift of the model from one of the samples)");
    } else if (wa.activation_bias_correction) {
      // Measured on the model as it will be written (weight part applied), on fewer samples: each keeps the
      // activations at one cut of the graph while the quantized model runs a layer at a time, a few times the
      // sample's input bytes in a CNN (ppocrv4-det, 8 MB inputs: 25 MB per sample). At most 32 samples, and as many
      // as 128 MiB of inputs allow (at least kMinActivationSamples).
      size_t input_bytes = 1;
      for (const auto& [name, t] : options.samples.front()) input_bytes += t.nbytes();
      const size_t kActivationSamples =
          std::clamp<size_t>((size_t{128} << 20) / input_bytes, kMinActivationSamples, 32);
      if (!corrections.empty()) {
        trial = model;
        apply_bias_corrections(trial, corrections);
        rewrite(trial, config, ranges, rewrite_inputs);
      }
      const auto t0 = std::chrono::steady_clock::now();
      const int layers = add_activation_shifts(model, trial, first(kActivationSamples), options.threads, corrections);
      if (options.log && layers > 0)
        options.log("activation bias correction: " + std::to_string(layers) + " layers, " +
                    std::to_string(std::min(options.samples.size(), kActivationSamples)) + " samples, " +
                    std::to_string(static_cast<int>(
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() + 0.5)) +
                    " s");
    }
  }
  // The float model as prepared (the guard's reference and the base of its candidates); a candidate's biases are
  // corrected only where its weights stay quantized.
  const onnx::ModelProto prepared = guard ? model : onnx::ModelProto();
  s.bias_corrected = apply_bias_corrections(model, corrections);
  s.qdq = rewrite(model, config, ranges, rewrite_inputs);
  check_table_matches(s.qdq, ranges);
  check_target_loads(s.qdq, config);
  if (options.log)
    for (const std::string& body : s.qdq.unobserved_bodies)
      options.log("body '" + body + "': calibration never ran it (none of its tensors is in the table), so what "
                  "needs activation ranges there stays float; calibrate on samples that take it");
  if (!gs.enabled)
    s.guard.note = "off";
  else if (!guard)
    s.guard.note = "not run: no calibration samples (activation ranges came from a file)";
  if (guard) {
    const auto t0 = std::chrono::steady_clock::now();
    auto first = [&](size_t n) {
      return std::vector<Sample>(options.samples.begin(), options.samples.begin() + std::min(n, options.samples.size()));
    };
    const size_t budget_samples =
        options.guard_samples > 0 ? static_cast<size_t>(options.guard_samples) : options.samples.size();
    std::optional<AccuracyEvaluator> eval_slot;
    eval_slot.emplace(prepared, first(budget_samples), gs, options.threads);
    bool recurrent = false;
    for (const auto& o : eval_slot->outputs()) recurrent = recurrent || o.state;
    if (recurrent && budget_samples < options.samples.size())  // the whole stream
      eval_slot.emplace(prepared, options.samples, gs, options.threads);
    AccuracyEvaluator& eval = *eval_slot;
    // The per-tensor ranking runs on the first kScanSamples (recurrent models keep the whole stream).
    constexpr size_t kScanSamples = 16;
    std::optional<AccuracyEvaluator> scan;
    if (!recurrent && static_cast<size_t>(eval.samples()) > kScanSamples)
      scan.emplace(prepared, first(kScanSamples), gs, options.threads);
    auto requantize = [&](const std::vector<std::string>& float_tensors) {
      Candidate c;
      c.model = std::make_shared<onnx::ModelProto>(prepared);
      apply_bias_corrections(*c.model, corrections, float_tensors);
      units_of(rewrite(*c.model, config.with_float_tensors(float_tensors), ranges, rewrite_inputs), c);
      return c;
    };
    Candidate initial;
    initial.model = std::shared_ptr<onnx::ModelProto>(&model, [](onnx::ModelProto*) {});  // not owned
    units_of(s.qdq, initial);
    std::vector<std::string> keep;
    s.guard = guard_accuracy(eval, initial, requantize, gs, keep, options.log, scan ? &*scan : nullptr,
                             options.guard_budget);
    if (!keep.empty()) {
      model = prepared;
      s.bias_corrected = apply_bias_corrections(model, corrections, keep);
      s.qdq = rewrite(model, config.with_float_tensors(keep), ranges, rewrite_inputs);
    }
    s.guard.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  stamp_provenance(model, config, &ranges);
  s.opset = Graph(model).opset();
  s.weight_bytes_after = initializer_bytes(model);
  return s;
}

}  // namespace qtool::quantize
