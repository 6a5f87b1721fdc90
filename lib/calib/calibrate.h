// calibrate_model: runs a model over calibration samples with the interpreter, observes every float tensor
// it produces (model inputs included) and returns the calibration table. `qtool calibrate` is a thin shell
// over this call.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calib/calibration_data.h"
#include "calib/calibrator.h"
#include "device/device.h"

namespace onnx {
class ModelProto;
}

namespace qtool::runtime {
class Session;
}

namespace qtool::calib {

struct CalibrateOptions {
  // Exactly one data source: files per input, a folder, or random samples (see calib/calibration_data.h).
  std::map<std::string, std::filesystem::path> data_files;
  std::optional<std::filesystem::path> data_dir;
  std::optional<int64_t> random_samples;
  uint64_t seed = 0;
  std::map<std::string, Shape> shapes;  // --shape for --random: by input name, or by dim symbol (one value)

  int64_t batch_size = 1;
  int threads = 1;            // in all, for the interpreter and the observers; 0 = all cores
  int observer_threads = -1;  // observer workers beside the interpreter (see plan_threads); -1 = automatic
  RangeMethods methods = kDefaultRangeMethods;  // the ranges to record (minmax always)
  int64_t histogram_bins = kDefaultHistogramBins;
  double percentile = kDefaultPercentile;
  QuantTarget target;  // see target_from_qconfig
  // --device: the interpreter's GPU kernel rows and the "cuda" observer backend, or the CPU's (select_device first).
  device::DeviceKind device = device::DeviceKind::Cpu;

  // Called after every batch with samples done and total.
  std::function<void(int64_t done, int64_t total)> progress;
};

struct CalibrateResult {
  CalibrationTable table;
  std::vector<NonFiniteReport> non_finite;
  std::vector<std::string> notes;    // adjustments the user should hear about (e.g. batch size forced to 1)
  std::string data;                  // "6 samples from mobilenetv2_calib6.npy"
  std::vector<std::string> details;  // how the samples were made (random: values and dims), for -v
  int64_t runs = 0;                  // interpreter runs (batches)
  double seconds = 0;                // wall time of the runs and observers
};

// How a calibration run spends its threads. With observer workers, observation runs beside the interpreter
// (calib/observation_pipeline.h), which gets the remaining threads; with none, observers run inline, between
// the interpreter's nodes, on all `forward` threads.
struct ThreadPlan {
  int forward = 1;    // the interpreter's threads
  int observers = 0;  // observer worker threads
};
// threads: the total (0 = all cores). observer_threads: -1 = automatic: on one thread inline; on two or more,
// half of them when `methods` need a histogram (percentile, entropy, mse, torch_histogram), else (min/max only,
// far cheaper) an eighth, at least one. 0 = inline; K = K workers and max(1, threads - K) for the interpreter.
ThreadPlan plan_threads(int threads, int observer_threads, const RangeMethods& methods);

// Runs `session` over all of `source`'s samples in batches of `batch`, observing every float tensor with
// `calibrator` as `plan` says; progress(done, total) after every batch. Returns the number of runs.
int64_t observe_samples(const runtime::Session& session, SampleSource& source, int64_t batch, Calibrator& calibrator,
                        const ThreadPlan& plan, const std::function<void(int64_t, int64_t)>& progress = {});

CalibrateResult calibrate_model(const std::filesystem::path& model, const CalibrateOptions& options);
// A model in memory; `name` and `sha256` are what the table records as its model (file name, digest).
CalibrateResult calibrate_model(const onnx::ModelProto& model, const std::string& name, const std::string& sha256,
                                const CalibrateOptions& options);

// The sample source `options` names (files, folder or random) for a model with these inputs; calibrate_model
// reads its samples from here, and `qtool quantize` reads them again for its accuracy guard. `model`'s graph tells
// random samples which values its integer inputs may take (calib/random_inputs.h); its weights need not be loaded.
std::unique_ptr<SampleSource> open_samples(const CalibrateOptions& options, const std::vector<InputSpec>& inputs,
                                           const onnx::ModelProto& model);

// The model's inputs as the sample sources see them, each with its batch axis (see calib/calibration_data.h).
std::vector<InputSpec> input_specs(const runtime::Session& session);

// The target dtype for the mse/entropy ranges from a QConfig JSON: global.activation.dtype and
// global.activation.symmetric when present, else uint8 asymmetric. BadInputError naming the file and the
// JSON path when the file is unreadable or those fields are malformed; other content is not looked at.
QuantTarget target_from_qconfig(const std::filesystem::path& config);

}  // namespace qtool::calib
