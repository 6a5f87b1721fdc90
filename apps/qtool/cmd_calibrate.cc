// qtool calibrate MODEL --data ... -o CALIB.json [--config QCONFIG.json] [--batch-size B] [--threads N]
// A thin shell over calib::calibrate_model: parses options, shows progress, writes the file, prints a summary.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "calib/calibrate.h"
#include "calib/table_merge.h"
#include "calib/trt_cache.h"
#include "command.h"
#include "core/error.h"
#include "core/file_io.h"
#include "limit_options.h"
#include "options.h"
#include "runtime/session.h"

namespace qtool::cli {

namespace {

struct CalibrateArgs {
  std::string model, output, config, trt_cache;
  std::vector<std::string> merge;
  int trt_version = calib::kDefaultTrtVersion;
  CalibrationArgs calibration;
  bool json = false;
};

// Progress on a terminal: samples done, rate and time left, redrawn in place.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void operator()(int64_t done, int64_t total) {
    if (!enabled_) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = s > 0 ? double(done) / s : 0;
    const double left = rate > 0 ? double(total - done) / rate : 0;
    std::fprintf(stderr, "\rcalibrate: %lld/%lld samples, %.2f samples/s, %.0f s left   ", static_cast<long long>(done),
                 static_cast<long long>(total), rate, left);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

namespace {

// The outputs of a calibration or a merge: the table, and the TensorRT cache when asked for.
void write_outputs(const calib::CalibrationTable& table, const CalibrateArgs& a) {
  calib::write_calibration(table, a.output);
  if (!a.trt_cache.empty()) fileio::write_file_atomic(a.trt_cache, calib::trt_cache_from_table(table, a.trt_version));
}

// --merge A.json B.json ...: one table for the union of their samples (calib/table_merge.h).
int run_merge(const CalibrateArgs& a) {
  if (!a.model.empty() || !a.calibration.samples.data.empty() || a.calibration.samples.random > 0)
    throw UsageError("calibrate --merge reads no model and no data: give only the calibration files and -o");
  std::vector<calib::NamedTable> tables;
  for (const std::string& f : a.merge) tables.push_back({f, calib::read_calibration(f)});
  const calib::CalibrationTable merged = calib::merge_calibrations(tables, runtime::resolve_threads(a.calibration.threads));
  write_outputs(merged, a);
  spdlog::info("merged {} tables ({} samples, {} tensors); wrote {}", tables.size(), merged.samples,
               merged.tensors.size(), a.output);
  return kExitOk;
}

int run_calibrate(const CalibrateArgs& a) {
  if (!a.merge.empty()) return run_merge(a);
  if (a.model.empty()) throw UsageError("calibrate: MODEL is required (or --merge A.json B.json)");
  calib::CalibrateOptions o = calibrate_options(a.calibration, calib::kDefaultRangeMethods, {calib::RangeMethod::MinMax});
  if (!a.config.empty()) o.target = calib::target_from_qconfig(a.config);
  Progress progress(isatty(STDERR_FILENO) && spdlog::default_logger()->should_log(spdlog::level::info));
  o.progress = [&](int64_t done, int64_t total) { progress(done, total); };

  const calib::CalibrateResult r = calib::calibrate_model(a.model, o);
  write_outputs(r.table, a);

  for (const std::string& note : r.notes) spdlog::warn("{}", note);
  for (const std::string& line : r.details) spdlog::debug("{}", line);
  for (const calib::NonFiniteReport& nf : r.non_finite)
    spdlog::warn("tensor '{}': {} NaN and {} inf values excluded from calibration", nf.tensor, nf.nan_count,
                 nf.inf_count);
  const double rate = r.seconds > 0 ? double(r.table.samples) / r.seconds : 0;
  spdlog::info("calibrated {} tensors on {} ({} runs of batch {}) in {:.2f} s, {:.2f} samples/s; wrote {}",
               r.table.tensors.size(), r.data, r.runs, r.table.batch_size, r.seconds, rate, a.output);
  if (a.json) {
    nlohmann::json j = {{"output", a.output},
                        {"model", r.table.model},
                        {"samples", r.table.samples},
                        {"batch_size", r.table.batch_size},
                        {"runs", r.runs},
                        {"tensors", r.table.tensors.size()},
                        {"seconds", r.seconds},
                        {"samples_per_second", rate},
                        {"target_dtype", std::string(dtype_name(r.table.settings.target_dtype))}};
    j["methods"] = nlohmann::json::array();
    for (calib::RangeMethod m : r.table.settings.methods)
      j["methods"].push_back(std::string(calib::range_method_name(m)));
    nlohmann::json nf = nlohmann::json::object();
    for (const calib::NonFiniteReport& n : r.non_finite) nf[n.tensor] = {{"nan", n.nan_count}, {"inf", n.inf_count}};
    j["non_finite"] = nf;
    std::printf("%s\n", j.dump().c_str());
  }
  return kExitOk;
}

}  // namespace

Action add_calibrate_command(CLI::App& app) {
  auto* sub = app.add_subcommand("calibrate", "Run a model on sample inputs and record activation ranges (CALIB.json)");
  add_limit_options(*sub);
  auto a = std::make_shared<CalibrateArgs>();
  sub->add_option("MODEL", a->model, "Path to an .onnx model (not with --merge)");
  sub->add_option("-o,--output", a->output, "Calibration file to write (JSON)")->required();
  sub->add_option("--config", a->config, "QConfig JSON: global.activation.dtype/symmetric pick the mse/entropy target");
  add_calibration_options(*sub, a->calibration,
                          {.data = "NAME=FILE.npy|.npz|.pb per input (first axis = samples), or a folder of "
                                   "test_data_set_* folders or one .npz per sample",
                           .random = "Calibrate on N random samples instead of --data: standard normal floats, "
                                     "token ids below the embedding's rows, masks of ones, positions (-v says what)",
                           .methods = calib::range_methods_str(calib::kDefaultRangeMethods)});
  sub->add_flag("--json", a->json, "Print a JSON summary line on stdout");
  sub->add_option("--merge", a->merge,
                  "Merge these calibration files (of one model, same settings) into -o instead of calibrating: the "
                  "table of all their samples, as one run over them would write it")
      ->expected(2, -1);
  sub->add_option("--trt-cache", a->trt_cache,
                  "Also write the ranges as a TensorRT calibration cache (trtexec --calib): entropy ranges when "
                  "recorded, else minmax");
  sub->add_option("--trt-version", a->trt_version, "TensorRT version in the cache header (default 8601 = 8.6.1)")
      ->check(CLI::PositiveNumber);
  return [a]() -> int { return run_calibrate(*a); };
}

}  // namespace qtool::cli
