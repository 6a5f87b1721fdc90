// qtool quantize MODEL -o OUT.onnx [--config QCONFIG.json] (--calib CALIB.json | --data ... | --random N)
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "calib/calibrate.h"
#include "calib/calibration_table.h"
#include "command.h"
#include "core/error.h"
#include "onnx/model_io.h"
#include "quantize/quantize.h"

namespace qtool::cli {
namespace {

struct QuantizeArgs {
  std::string model, output, config, calib;
  std::vector<std::string> data, shapes;
  int64_t random = 0;
  uint64_t seed = 0;
  int threads = 0;
  bool json = false, explain = false, prepare_only = false;
};

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
  return j;
}

}  // namespace

Action add_quantize_command(CLI::App& app) {
  auto* sub = app.add_subcommand("quantize", "Quantize a float ONNX model to int8 QDQ form (ONNX Runtime / TensorRT)");
  auto a = std::make_shared<QuantizeArgs>();
  sub->add_option("MODEL", a->model, "Float .onnx model")->required();
  sub->add_option("-o,--output", a->output, "Output .onnx path")->required();
  sub->add_option("--config", a->config, "QConfig JSON (default: the built-in configs/int8.json)");
  auto* calib = sub->add_option("--calib", a->calib, "Calibration file from 'qtool calibrate'");
  auto* data =
      sub->add_option("--data", a->data, "Calibrate first on these inputs (NAME=FILE.npy|.npz ..., or a folder)");
  auto* random = sub->add_option("--random", a->random, "Calibrate first on N random standard-normal inputs");
  sub->add_option("--seed", a->seed, "Seed for --random (default 0)");
  sub->add_option("--shape", a->shapes, "NAME=d0,d1,... input shape for --random where the model leaves dims open");
  sub->add_option("--threads", a->threads, "Threads for calibration (default 0 = all cores)");
  calib->excludes(data)->excludes(random);
  data->excludes(random);
  sub->add_flag("--explain", a->explain, "Print, per node, the rules that applied and the resulting parameters");
  sub->add_flag(
      "--prepare-only", a->prepare_only,
      "Only run the preparation passes (constants, BatchNorm folding, opset upgrade) and write the float model");
  sub->add_flag("--json", a->json, "Print the summary as one JSON object");
  return [a]() -> int {
    // Cheap checks first, so a mistake is reported before minutes of calibration.
    if (!a->prepare_only && a->calib.empty() && a->data.empty() && a->random <= 0)
      throw UsageError(
          "quantize: give activation ranges with --calib CALIB.json, or --data / --random to calibrate first");
    std::error_code ec;
    if (std::filesystem::equivalent(a->output, a->model, ec))
      throw BadInputError("refusing to overwrite the input model '" + a->model + "': choose another path with -o");
    const quantize::QConfig cfg =
        a->config.empty() ? quantize::QConfig::builtin_default() : quantize::QConfig::load(a->config);
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
    calib::CalibrationTable ranges;
    if (!a->calib.empty()) {
      ranges = calib::read_calibration(a->calib);
    } else {  // --data or --random: calibrate first, as `qtool calibrate` would
      calib::CalibrateOptions o;
      calibrate_data_options(a->data, a->random, a->seed, a->shapes, o);
      o.threads = a->threads;
      o.methods = cfg.range_methods();  // only the observers this config's ranges need
      if (!a->config.empty()) o.target = calib::target_from_qconfig(a->config);
      calib::CalibrateResult r = calib::calibrate_model(a->model, o);
      for (const std::string& note : r.notes) spdlog::warn("{}", note);
      spdlog::info("calibrated on {} ({} runs, {:.1f} s)", r.data, r.runs, r.seconds);
      ranges = std::move(r.table);
    }
    const auto s = quantize::quantize_model(*m.proto, cfg, ranges);
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
    return kExitOk;
  };
}

}  // namespace qtool::cli
