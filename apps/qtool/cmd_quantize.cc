// qtool quantize MODEL -o OUT.onnx [--config QCONFIG.json] (--calib CALIB.json | --data ... | --random N)
#include <omp.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "calib/calibrate.h"
#include "calib/calibration_table.h"
#include "calib/sha256.h"
#include "command.h"
#include "options.h"
#include "limit_options.h"
#include "core/error.h"
#include "onnx/float32_promotion.h"
#include "onnx/model_io.h"
#include "onnx/quantized_ops.h"
#include "onnx/spill.h"
#include "quantize/provenance.h"
#include "quantize/quantize.h"
#include "runtime/session.h"

namespace qtool::cli {
namespace {

// sha256 of a model's deterministic serialization (an equalized model exists only in memory).
std::string model_digest(const onnx::ModelProto& model) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    model.SerializeToCodedStream(&coded);
  }
  return calib::sha256_hex(std::span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
}

struct QuantizeArgs {
  std::string model, output, config, calib;
  CalibrationArgs calibration;  // --data/--random: calibrate first, with calibrate's options
  bool json = false, explain = false, prepare_only = false, allow_calib_mismatch = false, allow_below_target = false;
  std::string guard;  // --accuracy-guard on|off
  std::optional<double> min_sqnr, state_min_sqnr;
  GuardBudgetArgs guard_budget;
  int64_t gptq_memory_mb = 256;
};

// The model's declared inputs without its nodes and weights: what the sample reader needs to know, without the
// interpreter reading every weight of a lazily loaded model.
onnx::ModelProto inputs_only(const onnx::ModelProto& model) {
  onnx::ModelProto m;
  m.set_ir_version(model.ir_version());
  *m.mutable_opset_import() = model.opset_import();
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  for (const auto& vi : model.graph().input())
    if (!inits.count(vi.name())) *m.mutable_graph()->add_input() = vi;
  return m;
}

// "119 ConvInteger, 119 DynamicQuantizeLinear": most frequent first, then by name.
std::string op_counts_text(const std::map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  std::string out;
  for (const auto& [op, n] : v) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + op;
  return out;
}

// At most this many calibration samples are kept in memory for the accuracy guard (the first ones).
constexpr int64_t kGuardSamples = 512;

nlohmann::json guard_json(const quantize::GuardReport& g) {
  nlohmann::json j;
  j["ran"] = g.ran;
  j["met"] = g.met;
  j["note"] = g.note;
  j["samples"] = g.samples;
  j["evaluations"] = g.evaluations;
  j["seconds"] = g.seconds;
  j["timed_out"] = g.timed_out;
  j["outputs"] = nlohmann::json::array();
  for (const auto& o : g.outputs)
    j["outputs"].push_back({{"output", o.output},
                            {"state", o.state},
                            {"threshold_db", o.threshold_db},
                            {"floor_db", o.floor_db},
                            {"sqnr_db", o.sqnr_db},
                            {"final_sqnr_db", o.final_sqnr_db},
                            {"worst_sample_sqnr_db", o.worst_sample_sqnr_db},
                            {"final_worst_sample_sqnr_db", o.final_worst_sample_sqnr_db}});
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (g.outputs[k].weights_only) j["outputs"][k]["weights_only_sqnr_db"] = g.outputs[k].weights_only_sqnr_db;
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (g.outputs[k].distribution) {
      j["outputs"][k]["kl"] = g.outputs[k].kl;
      j["outputs"][k]["final_kl"] = g.outputs[k].final_kl;
      j["outputs"][k]["max_kl"] = g.outputs[k].max_kl;
    }
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (g.outputs[k].top1) {
      j["outputs"][k]["clear_rows"] = g.outputs[k].clear_rows;
      j["outputs"][k]["clear_top1_flips"] = g.outputs[k].flips;
      j["outputs"][k]["final_clear_top1_flips"] = g.outputs[k].final_flips;
    }
  if (!g.sequence_outputs.empty()) j["sequence_outputs_not_compared"] = g.sequence_outputs;
  j["kept_float"] = nlohmann::json::array();
  for (const auto& t : g.kept_float)
    j["kept_float"].push_back({{"tensor", t.tensor},
                               {"kind", t.weight ? "weight" : "activation"},
                               {"isolated_sqnr_db", t.isolated_sqnr_db},
                               {"worst_output", t.worst_output},
                               {"worst_criterion", quantize::criterion_name(t.worst_criterion)},
                               {"missed_output", t.missed_output},
                               {"missed_criterion", quantize::criterion_name(t.missed_criterion)}});
  return j;
}

// What `quantize --data/--random` calibrated, as `qtool calibrate --json` reports it; null with --calib.
nlohmann::json calibration_json(const calib::CalibrateResult& r) {
  nlohmann::json j = {{"data", r.data},
                      {"samples", r.table.samples},
                      {"batch_size", r.table.batch_size},
                      {"runs", r.runs},
                      {"seconds", r.seconds}};
  j["methods"] = nlohmann::json::array();
  for (calib::RangeMethod m : r.table.settings.methods) j["methods"].push_back(std::string(calib::range_method_name(m)));
  j["histogram_bins"] = r.table.settings.histogram_bins;
  j["percentile"] = r.table.settings.percentile;
  return j;
}

nlohmann::json summary_json(const quantize::QuantizeSummary& s, const QuantizeArgs& a, const nlohmann::json& calibration) {
  nlohmann::json j;
  j["model"] = a.model;
  j["output"] = a.output;
  j["opset"] = s.opset;
  j["quantized_nodes"] = s.qdq.quantized_ops;
  j["float_nodes"] = s.qdq.float_ops;
  j["qdq_pairs"] = s.qdq.qdq_pairs;
  j["weights_quantized"] = s.qdq.weights_quantized;
  j["biases_quantized"] = s.qdq.biases_quantized;
  j["weight_bytes_before"] = s.weight_bytes_before;
  j["weight_bytes_after"] = s.weight_bytes_after;
  j["prepare"] = s.prepare.rewrites;
  j["bias_corrected"] = s.bias_corrected;
  j["accuracy_guard"] = guard_json(s.guard);
  j["calibration"] = calibration;
  return j;
}

std::string fmt_kl(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

void print_guard(const quantize::GuardReport& g) {
  std::printf("accuracy guard: %s\n", g.note.c_str());
  if (!g.ran) return;
  for (const auto& o : g.outputs) {
    // The relative target, when measured: "; weights only 31.2 dB" (the threshold is that minus the margin) or
    // "; floor; weights only 12.0 dB" (the absolute floor was higher).
    std::string wo;
    if (o.weights_only) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "; %sweights only %.1f dB", o.threshold_db > o.floor_db ? "" : "floor; ",
                    o.weights_only_sqnr_db);
      wo = buf;
    }
    std::printf("  output %s%s: SQNR %.1f dB -> %.1f dB (threshold %.1f dB%s)%s\n", o.output.c_str(),
                o.state ? " (state)" : "", o.sqnr_db, o.final_sqnr_db, o.threshold_db, wo.c_str(),
                o.distribution ? (", KL " + fmt_kl(o.kl) + " -> " + fmt_kl(o.final_kl) + " nats (limit " +
                                  fmt_kl(o.max_kl) + ")")
                                     .c_str()
                               : "");
  }
  for (const auto& name : g.sequence_outputs)
    std::printf("  output %s: a sequence of tensors, not compared (the guard compares tensor outputs)\n", name.c_str());
  for (const auto& o : g.outputs)
    if (o.top1)
      std::printf("  output %s: clear top-1 rows flipped %lld -> %lld of %lld\n", o.output.c_str(),
                  static_cast<long long>(o.flips), static_cast<long long>(o.final_flips),
                  static_cast<long long>(o.clear_rows));
  for (const auto& t : g.kept_float)
    std::printf("  kept float: %s %s: the model missed %s on %s; alone this tensor costs %s %.1f dB (worst: %s)\n",
                t.weight ? "weight" : "activation", t.tensor.c_str(),
                std::string(quantize::criterion_name(t.missed_criterion)).c_str(), t.missed_output.c_str(),
                t.worst_output.c_str(), t.isolated_sqnr_db,
                std::string(quantize::criterion_name(t.worst_criterion)).c_str());
  std::printf("  %lld samples, %lld quantized models evaluated, %.1f s\n", static_cast<long long>(g.samples),
              static_cast<long long>(g.evaluations), g.seconds);
}

}  // namespace

Action add_quantize_command(CLI::App& app) {
  auto* sub = app.add_subcommand("quantize", "Quantize a float ONNX model to int8 QDQ form (ONNX Runtime / TensorRT)");
  add_limit_options(*sub);
  auto a = std::make_shared<QuantizeArgs>();
  sub->add_option("MODEL", a->model, "Float .onnx model")->required();
  sub->add_option("-o,--output", a->output, "Output .onnx path")->required();
  sub->add_option("--config", a->config, "QConfig JSON (default: the built-in configs/int8.json)");
  auto* calib = sub->add_option(
      "--calib", a->calib, "Calibration file from 'qtool calibrate', or a TensorRT calibration cache (TRT-... header)");
  const SampleOptions sample_opts = add_calibration_options(
      *sub, a->calibration,
      {.data = "Calibrate first on these inputs (NAME=FILE.npy|.npz ..., or a folder), as 'qtool calibrate' would; "
               "with --calib: samples for the accuracy guard only",
       .random = "Calibrate first on N random samples: standard normal floats, token ids below the embedding's "
                 "rows, masks of ones, positions (-v says what)",
       .methods = "the methods the config's rules ask, which are always recorded"});
  calib->excludes(sample_opts.random);
  sub->add_option("--accuracy-guard", a->guard,
                  "on|off: compare float and quantized outputs on the calibration samples and keep the most "
                  "sensitive tensors float until each output meets its SQNR threshold (default: the config's "
                  "accuracy_guard; needs --data or --random)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--min-sqnr", a->min_sqnr, "Accuracy guard: SQNR threshold in dB for every graph output");
  sub->add_option("--state-min-sqnr", a->state_min_sqnr,
                  "Accuracy guard: SQNR threshold in dB for outputs declared like an input (recurrent state)");
  add_guard_budget_options(*sub, a->guard_budget);
  sub->add_flag("--allow-below-target", a->allow_below_target,
                "Write the model even when the accuracy guard cannot bring every output to its threshold (otherwise "
                "nothing is written and the exit code is 4)");
  sub->add_option("--gptq-memory", a->gptq_memory_mb,
                  "GPTQ/AWQ: MiB of layer-input Hessians held at once; more are computed in groups, one graph segment "
                  "each, with the same result (default 256)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  sub->add_flag("--explain", a->explain, "Print, per node, the rules that applied and the resulting parameters");
  sub->add_flag(
      "--prepare-only", a->prepare_only,
      "Only run the preparation passes (constants, BatchNorm and Pad folding, Div by a constant -> Mul, opset "
      "upgrade) and write the float model");
  sub->add_flag("--json", a->json, "Print the summary as one JSON object");
  sub->add_flag("--allow-calib-mismatch", a->allow_calib_mismatch,
                "Accept a --calib file whose model_sha256 is not this model's (e.g. the model was re-exported "
                "unchanged); tensors the config quantizes must still be in it");
  return [a]() -> int {
    // Cheap checks first, so a mistake is reported before minutes of calibration.
    const SampleArgs& sample_args = a->calibration.samples;
    parse_device_option(a->calibration.device);  // a missing device is reported whether or not calibration runs
    std::error_code ec;
    if (std::filesystem::equivalent(a->output, a->model, ec))
      throw BadInputError("refusing to overwrite the input model '" + a->model + "': choose another path with -o");
    quantize::QConfig cfg =
        a->config.empty() ? quantize::QConfig::builtin_default() : quantize::QConfig::load(a->config);
    {
      quantize::AccuracyGuardSettings g = cfg.accuracy_guard();
      if (a->guard == "on" && !g.enabled) g = quantize::QConfig::builtin_default().accuracy_guard();
      if (a->guard == "off") g.enabled = false;
      if (a->min_sqnr) g.min_sqnr_db = *a->min_sqnr;
      if (a->state_min_sqnr) g.state_min_sqnr_db = *a->state_min_sqnr;
      cfg.set_accuracy_guard(g);
    }
    const bool samples = !sample_args.data.empty() || sample_args.random > 0;
    // External data stays on disk: each weight is read when it is quantized (or when the interpreter runs the
    // graph segment that holds it), and big results wait in a spill file beside the output (onnx/spill.h), so
    // without samples memory stays near one tensor whatever the model's size.
    onnxio::LoadedModel m = onnxio::load_model(a->model, {.load_external_data = false});
    if (onnxio::needs_float32_promotion(*m.proto))
      spdlog::info("{} computes in float16, bfloat16 or float64: quantized in float32, its inputs and outputs keep "
                   "their types through Casts", a->model);
    // The weights' bytes as the file stores them (float16 ones as float16): equalization and smoothing below prepare
    // the model, which computes in float32.
    const int64_t stored_weight_bytes = quantize::initializer_bytes(*m.proto);
    onnxio::SaveOptions so;
    so.protect(m);
    std::optional<onnxio::SpillFile> spill;
    if (!m.external_files.empty()) {
      // A model that keeps its weights in external data gets an output that does too (and so never needs them
      // all in memory at once to be written).
      so.external_data = onnxio::SaveOptions::ExternalData::Always;
      spill.emplace(a->output);
    }
    if (a->prepare_only) {
      const auto r = quantize::prepare_model(*m.proto, cfg.required_opset(), quantize::prepare_options(cfg));
      quantize::stamp_provenance(*m.proto, cfg, nullptr);
      onnxio::save_model(*m.proto, a->output, so);
      nlohmann::json j;
      j["prepare"] = r.rewrites;
      j["opset_before"] = r.opset_before;
      j["opset_after"] = r.opset_after;
      std::printf("%s\n", j.dump().c_str());
      return kExitOk;
    }
    // A model that already holds quantized ops (Q/DQ, ORT's QOperator, dynamic or int4 nodes): those stay as they
    // are. When the rewrite would quantize none of the float nodes left either (decided as it decides, ranges
    // assumed), calibrating and guarding would take minutes to write the input back: refused before they start.
    if (const auto held = onnxio::count_quantized_ops(*m.proto); !held.empty()) {
      const auto first = quantize::first_node_to_quantize(*m.proto, cfg);
      if (!first)
        throw BadInputError("'" + a->model + "' is already quantized (" + op_counts_text(held) +
                            ") and the config quantizes none of its float nodes: nothing written to '" + a->output +
                            "'; give qtool quantize the float model it was made from (this one runs as it is)");
      spdlog::warn(
          "{} already holds quantized ops ({}): they stay as they are, and the config quantizes the float "
          "nodes left (node '{}', {}, first); quantize the float original to quantize them all",
          a->model, op_counts_text(held), first->node, first->op_type);
    }
    // Weight-only configs need no activation ranges; GPTQ needs the layers' inputs.
    const bool need_ranges = quantize::needs_activation_ranges(*m.proto, cfg);
    const bool gptq = quantize::needs_layer_inputs(*m.proto, cfg);
    if (need_ranges && a->calib.empty() && !samples)
      throw UsageError(
          "quantize: give activation ranges with --calib CALIB.json, or --data / --random to calibrate first");
    if (gptq && !samples)
      throw BadInputError("quantize: the config's \"algorithm\": \"gptq\" / \"awq\" needs calibration inputs: give "
                          "--data (or --random)");
    // Cross-layer equalization changes the float weights and the ranges of the tensors between equalized pairs:
    // calibration runs on the equalized model, in memory.
    bool equalized = false;
    // A --calib table was measured on the unequalized model: equalizing now would invalidate its ranges, so
    // equalization needs quantize to calibrate (--data / --random).
    if (cfg.weight_algorithms().cross_layer_equalization && !a->calib.empty())
      spdlog::debug("cross-layer equalization skipped: the --calib table was measured on the unequalized model "
                   "(calibrate here with --data or --random to equalize)");
    if (cfg.weight_algorithms().cross_layer_equalization && a->calib.empty()) {
      const int pairs = quantize::equalize_for_calibration(*m.proto, cfg);
      spdlog::debug("cross-layer equalization: {} convolution pairs", pairs);
      equalized = pairs > 0;
    }
    // Only the observers this config's ranges need, unless --methods asks for more.
    calib::CalibrateOptions o = calibrate_options(a->calibration, cfg.range_methods(), cfg.range_methods());
    if (samples && !a->config.empty()) o.target = calib::target_from_qconfig(a->config);
    // The first kGuardSamples calibration inputs, read once: for smoothing, the accuracy guard, GPTQ and bias
    // correction.
    std::optional<std::vector<quantize::Sample>> first_samples;
    auto few_samples = [&]() -> const std::vector<quantize::Sample>& {
      if (!first_samples) {
        const runtime::Session session(inputs_only(*m.proto), {.threads = 1});
        auto source = calib::open_samples(o, calib::input_specs(session), *m.proto);
        if (source->samples() > kGuardSamples)
          spdlog::warn("smoothing / accuracy guard / gptq: using the first {} of {} samples", kGuardSamples,
                       source->samples());
        first_samples = calib::first_samples(*source, kGuardSamples);
      }
      return *first_samples;
    };
    // Smoothing, like equalization, changes the ranges of the tensors it rescales: calibration runs after it.
    if (cfg.weight_algorithms().smooth_quant_alpha > 0 && (!a->calib.empty() || !samples))
      spdlog::debug("smoothing skipped: it needs calibration inputs (--data or --random) and measures ranges itself, "
                    "so not with --calib");
    if (cfg.weight_algorithms().smooth_quant_alpha > 0 && a->calib.empty() && samples) {
      const quantize::SmoothingReport r = quantize::smooth_for_calibration(
          *m.proto, cfg, few_samples(), runtime::resolve_threads(a->calibration.threads));
      for (const auto& t : r.tensors)
        spdlog::debug("smoothing {}{}: estimated readers' error {:.3g} -> {:.3g}: {}", t.name,
                      t.divided ? " (by an inserted Mul)" : "", t.error_before, t.error_after,
                      t.applied ? "smoothed" : "kept");
      spdlog::info("smoothing: {} of {} MatMul / Gemm inputs ({} by an inserted Mul)", r.applied, r.tensors.size(),
                   r.divided);
      equalized = equalized || r.applied > 0;
    }
    calib::CalibrationTable ranges;
    nlohmann::json calibration;  // null: ranges from --calib
    if (!a->calib.empty()) {
      ranges = calib::read_calibration(a->calib);
      if (!a->allow_calib_mismatch) calib::check_calibration_model(ranges, a->model, a->calib);
    } else if (need_ranges) {  // --data or --random: calibrate first, as `qtool calibrate` would
      calib::CalibrateResult r =
          equalized ? calib::calibrate_model(*m.proto, std::filesystem::path(a->model).filename().string(),
                                             model_digest(*m.proto), o)
                    : calib::calibrate_model(a->model, o);
      for (const std::string& note : r.notes) spdlog::warn("{}", note);
      for (const std::string& line : r.details) spdlog::debug("{}", line);
      spdlog::info("calibrated on {} ({} runs, {:.1f} s)", r.data, r.runs, r.seconds);
      calibration = calibration_json(r);
      ranges = std::move(r.table);
    }
    quantize::QuantizeOptions qo;
    qo.threads = runtime::resolve_threads(a->calibration.threads);
    qo.log = [](const std::string& line) { spdlog::info("{}", line); };
    qo.guard_samples = a->guard_budget.samples;
    qo.hessian_budget_bytes = a->gptq_memory_mb << 20;
    qo.guard_budget.seconds = a->guard_budget.seconds;
    qo.stored_weight_bytes = stored_weight_bytes;
    if (samples && (cfg.accuracy_guard().enabled || gptq || cfg.weight_algorithms().bias_correction ||
                    cfg.weight_algorithms().activation_bias_correction))
      qo.samples = few_samples();
    const auto s = quantize::quantize_model(*m.proto, cfg, ranges, qo);
    if (s.guard.ran && !s.guard.met) {
      if (!a->allow_below_target) {
        if (a->json) {
          nlohmann::json j = summary_json(s, *a, calibration);
          j["written"] = false;
          std::printf("%s\n", j.dump().c_str());
        }
        std::fprintf(stderr, "qtool quantize: accuracy guard: %s; nothing written to %s (%s, or pass "
                     "--allow-below-target to write it anyway)\n",
                     s.guard.note.c_str(), a->output.c_str(),
                     s.guard.timed_out ? "raise --guard-time, or lower --guard-samples"
                                       : "raise max_float_tensors, add calibration data");
        return kExitBelowTarget;
      }
      spdlog::warn("accuracy guard: {}", s.guard.note);
    }
    onnxio::save_model(std::move(*m.proto), a->output, so);
    if (a->explain) std::fputs(quantize::explain_text(s.qdq).c_str(), stdout);
    if (a->json) {
      std::printf("%s\n", summary_json(s, *a, calibration).dump().c_str());
      return kExitOk;
    }
    auto join = [](const std::map<std::string, int>& counts) {
      std::string out;
      for (const auto& [op, n] : counts) out += (out.empty() ? "" : ", ") + op + " " + std::to_string(n);
      return out.empty() ? std::string("none") : out;
    };
    std::printf("wrote %s (opset %lld)\n", a->output.c_str(), static_cast<long long>(s.opset));
    std::printf("quantized: %s\n", join(s.qdq.quantized_ops).c_str());
    std::printf("kept float: %s\n", join(s.qdq.float_ops).c_str());
    std::printf("weights: %.2f MB -> %.2f MB (%d weights, %d biases quantized, %d activation Q/DQ pairs)\n",
                s.weight_bytes_before / 1e6, s.weight_bytes_after / 1e6, s.qdq.weights_quantized,
                s.qdq.biases_quantized, s.qdq.qdq_pairs);
    print_guard(s.guard);
    return kExitOk;
  };
}

}  // namespace qtool::cli
