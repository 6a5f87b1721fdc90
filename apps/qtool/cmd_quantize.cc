// qtool quantize MODEL -o OUT.onnx [--config QCONFIG.json] (--calib CALIB.json | --data ... | --random N)
#include <omp.h>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "calib/calibrate.h"
#include "calib/calibration_table.h"
#include "command.h"
#include "limit_options.h"
#include "core/error.h"
#include "onnx/model_io.h"
#include "quantize/quantize.h"
#include "runtime/session.h"

namespace qtool::cli {
namespace {

struct QuantizeArgs {
  std::string model, output, config, calib;
  SampleArgs samples;
  int threads = 0;
  bool json = false, explain = false, prepare_only = false, allow_calib_mismatch = false, allow_below_target = false;
  std::string guard;  // --accuracy-guard on|off
  std::optional<double> min_sqnr, state_min_sqnr;
};

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
  j["outputs"] = nlohmann::json::array();
  for (const auto& o : g.outputs)
    j["outputs"].push_back({{"output", o.output},
                            {"state", o.state},
                            {"threshold_db", o.threshold_db},
                            {"sqnr_db", o.sqnr_db},
                            {"final_sqnr_db", o.final_sqnr_db}});
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (g.outputs[k].distribution) {
      j["outputs"][k]["kl"] = g.outputs[k].kl;
      j["outputs"][k]["final_kl"] = g.outputs[k].final_kl;
      j["outputs"][k]["max_kl"] = g.outputs[k].max_kl;
    }
  j["kept_float"] = nlohmann::json::array();
  for (const auto& t : g.kept_float)
    j["kept_float"].push_back({{"tensor", t.tensor},
                               {"kind", t.weight ? "weight" : "activation"},
                               {"isolated_sqnr_db", t.isolated_sqnr_db},
                               {"worst_output", t.worst_output}});
  return j;
}

nlohmann::json summary_json(const quantize::QuantizeSummary& s, const QuantizeArgs& a) {
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
  for (const auto& o : g.outputs)
    std::printf("  output %s%s: SQNR %.1f dB -> %.1f dB (threshold %.1f dB)%s\n", o.output.c_str(),
                o.state ? " (state)" : "", o.sqnr_db, o.final_sqnr_db, o.threshold_db,
                o.distribution ? (", KL " + fmt_kl(o.kl) + " -> " + fmt_kl(o.final_kl) + " nats (limit " +
                                  fmt_kl(o.max_kl) + ")")
                                     .c_str()
                               : "");
  for (const auto& t : g.kept_float)
    std::printf("  kept float: %s %s (alone it costs %s %.1f dB)\n", t.weight ? "weight" : "activation",
                t.tensor.c_str(), t.worst_output.c_str(), t.isolated_sqnr_db);
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
  auto* calib = sub->add_option("--calib", a->calib, "Calibration file from 'qtool calibrate'");
  const SampleOptions sample_opts = add_sample_options(
      *sub, a->samples,
      "Calibrate first on these inputs (NAME=FILE.npy|.npz ..., or a folder); with --calib: samples for the "
      "accuracy guard only",
      "Calibrate first on N random standard-normal inputs");
  sub->add_option("--threads", a->threads, "Threads for calibration (default 0 = all cores)");
  calib->excludes(sample_opts.random);
  sample_opts.data->excludes(sample_opts.random);
  sub->add_option("--accuracy-guard", a->guard,
                  "on|off: compare float and quantized outputs on the calibration samples and keep the most "
                  "sensitive tensors float until each output meets its SQNR threshold (default: the config's "
                  "accuracy_guard; needs --data or --random)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--min-sqnr", a->min_sqnr, "Accuracy guard: SQNR threshold in dB for every graph output");
  sub->add_option("--state-min-sqnr", a->state_min_sqnr,
                  "Accuracy guard: SQNR threshold in dB for outputs declared like an input (recurrent state)");
  sub->add_flag("--allow-below-target", a->allow_below_target,
                "Write the model even when the accuracy guard cannot bring every output to its threshold (otherwise "
                "nothing is written and the exit code is 4)");
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
    if (!a->prepare_only && a->calib.empty() && a->samples.data.empty() && a->samples.random <= 0)
      throw UsageError(
          "quantize: give activation ranges with --calib CALIB.json, or --data / --random to calibrate first");
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
    onnxio::LoadedModel m = onnxio::load_model(a->model);
    onnxio::SaveOptions so;
    so.protect_input = a->model;
    if (a->prepare_only) {
      const auto r = quantize::prepare_model(*m.proto, cfg.required_opset());
      onnxio::save_model(*m.proto, a->output, so);
      nlohmann::json j;
      j["prepare"] = r.rewrites;
      j["opset_before"] = r.opset_before;
      j["opset_after"] = r.opset_after;
      std::printf("%s\n", j.dump().c_str());
      return kExitOk;
    }
    // Cross-layer equalization changes the float weights and the ranges of the tensors between equalized pairs:
    // calibration runs on the equalized model (written next to the output for the calibrator, then removed).
    std::filesystem::path calib_model = a->model;
    // A --calib table was measured on the unequalized model: equalizing now would invalidate its ranges, so
    // equalization needs quantize to calibrate (--data / --random).
    if (cfg.weight_algorithms().cross_layer_equalization && !a->calib.empty())
      spdlog::warn("cross-layer equalization skipped: the --calib table was measured on the unequalized model "
                   "(calibrate here with --data or --random to equalize)");
    if (cfg.weight_algorithms().cross_layer_equalization && a->calib.empty()) {
      const int pairs = quantize::equalize_for_calibration(*m.proto, cfg);
      spdlog::info("cross-layer equalization: {} convolution pairs", pairs);
      if (pairs > 0) {
        calib_model = a->output + ".equalized.onnx";
        onnxio::save_model(*m.proto, calib_model, so);
      }
    }
    calib::CalibrationTable ranges;
    calib::CalibrateOptions o;
    const bool samples = !a->samples.data.empty() || a->samples.random > 0;
    if (samples) {
      calibrate_data_options(a->samples.data, a->samples.random, a->samples.seed, a->samples.shapes, o);
      o.threads = a->threads;
      o.methods = cfg.range_methods();  // only the observers this config's ranges need
      if (!a->config.empty()) o.target = calib::target_from_qconfig(a->config);
    }
    if (!a->calib.empty()) {
      ranges = calib::read_calibration(a->calib);
      if (!a->allow_calib_mismatch) calib::check_calibration_model(ranges, a->model, a->calib);
    } else {  // --data or --random: calibrate first, as `qtool calibrate` would
      struct RemoveTemporary {
        std::filesystem::path path;
        ~RemoveTemporary() {
          std::error_code ignored;
          if (!path.empty()) std::filesystem::remove(path, ignored);
        }
      } const equalized{calib_model != a->model ? calib_model : std::filesystem::path()};
      calib::CalibrateResult r = calib::calibrate_model(calib_model, o);
      for (const std::string& note : r.notes) spdlog::warn("{}", note);
      spdlog::info("calibrated on {} ({} runs, {:.1f} s)", r.data, r.runs, r.seconds);
      ranges = std::move(r.table);
    }
    quantize::QuantizeOptions qo;
    qo.threads = runtime::resolve_threads(a->threads);
    qo.log = [](const std::string& line) { spdlog::info("{}", line); };
    if (samples && (cfg.accuracy_guard().enabled || cfg.weight_algorithms().bias_correction)) {
      const runtime::Session session(m, {.threads = 1});
      auto source = calib::open_samples(o, calib::input_specs(session));
      if (source->samples() > kGuardSamples)
        spdlog::warn("accuracy guard: using the first {} of {} samples", kGuardSamples, source->samples());
      qo.samples = calib::first_samples(*source, kGuardSamples);
    }
    const auto s = quantize::quantize_model(*m.proto, cfg, ranges, qo);
    if (s.guard.ran && !s.guard.met) {
      if (!a->allow_below_target) {
        if (a->json) {
          nlohmann::json j = summary_json(s, *a);
          j["written"] = false;
          std::printf("%s\n", j.dump().c_str());
        }
        std::fprintf(stderr, "qtool quantize: accuracy guard: %s; nothing written to %s (raise max_float_tensors, "
                     "add calibration data, or pass --allow-below-target to write it anyway)\n",
                     s.guard.note.c_str(), a->output.c_str());
        return kExitBelowTarget;
      }
      spdlog::warn("accuracy guard: {}", s.guard.note);
    }
    onnxio::save_model(*m.proto, a->output, so);
    if (a->explain) std::fputs(quantize::explain_text(s.qdq).c_str(), stdout);
    if (a->json) {
      std::printf("%s\n", summary_json(s, *a).dump().c_str());
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
