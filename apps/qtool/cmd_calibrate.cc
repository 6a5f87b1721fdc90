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
#include "runtime/session.h"

namespace qtool::cli {

namespace {

struct CalibrateArgs {
  std::string model, output, config, trt_cache;
  std::vector<std::string> merge;
  int trt_version = calib::kDefaultTrtVersion;
  SampleArgs samples;
  int64_t batch_size = 1, bins = calib::kDefaultHistogramBins;
  int threads = 0, observer_threads = -1;
  double percentile = calib::kDefaultPercentile;
  std::string methods = calib::range_methods_str(calib::kDefaultRangeMethods);
  bool json = false;
};

Shape parse_dims(const std::string& text, const std::string& what) {
  Shape s;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1) throw UsageError(what + ": '" + item + "' is not a positive dimension");
    s.push_back(v);
    pos = comma + 1;
  }
  return s;
}

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

// --data / --random / --seed / --shape into calibrate options (shared with `qtool quantize`, command.h).
void calibrate_data_options(const std::vector<std::string>& data, int64_t random, uint64_t seed,
                            const std::vector<std::string>& shapes, calib::CalibrateOptions& o) {
  for (const std::string& d : data) {
    const size_t eq = d.find('=');
    if (eq == std::string::npos) {
      if (!std::filesystem::is_directory(d)) {
        if (!std::filesystem::exists(d)) throw BadInputError("--data " + d + ": no such file or folder");
        o.data_files[""] = d;  // a single-input model may omit the name
      } else {
        if (o.data_dir) throw UsageError("--data DIR may be given once");
        o.data_dir = d;
      }
    } else {
      const std::string name = d.substr(0, eq);
      if (name.empty() || eq + 1 == d.size()) throw UsageError("--data " + d + ": expected NAME=FILE");
      if (!o.data_files.emplace(name, d.substr(eq + 1)).second)
        throw UsageError("--data names input '" + name + "' twice");
    }
  }
  if (random > 0) o.random_samples = random;
  o.seed = seed;
  for (const std::string& s : shapes) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--shape " + s + ": expected NAME=d0,d1,...");
    o.shapes[s.substr(0, eq)] = parse_dims(s.substr(eq + 1), "--shape " + s);
  }
}

SampleOptions add_sample_options(CLI::App& sub, SampleArgs& a, const std::string& data_help,
                                 const std::string& random_help) {
  SampleOptions o;
  o.data = sub.add_option("--data", a.data, data_help);
  o.random = sub.add_option("--random", a.random, random_help)->check(CLI::PositiveNumber);
  sub.add_option("--seed", a.seed, "Seed for --random (default 0)");
  sub.add_option("--shape", a.shapes, "NAME=d0,d1,... input shape for --random where the model leaves dims open");
  return o;
}

namespace {

// The outputs of a calibration or a merge: the table, and the TensorRT cache when asked for.
void write_outputs(const calib::CalibrationTable& table, const CalibrateArgs& a) {
  calib::write_calibration(table, a.output);
  if (!a.trt_cache.empty()) fileio::write_file_atomic(a.trt_cache, calib::trt_cache_from_table(table, a.trt_version));
}

// --merge A.json B.json ...: one table for the union of their samples (calib/table_merge.h).
int run_merge(const CalibrateArgs& a) {
  if (!a.model.empty() || !a.samples.data.empty() || a.samples.random > 0)
    throw UsageError("calibrate --merge reads no model and no data: give only the calibration files and -o");
  std::vector<calib::NamedTable> tables;
  for (const std::string& f : a.merge) tables.push_back({f, calib::read_calibration(f)});
  const calib::CalibrationTable merged = calib::merge_calibrations(tables, runtime::resolve_threads(a.threads));
  write_outputs(merged, a);
  spdlog::info("merged {} tables ({} samples, {} tensors); wrote {}", tables.size(), merged.samples,
               merged.tensors.size(), a.output);
  return kExitOk;
}

int run_calibrate(const CalibrateArgs& a) {
  if (!a.merge.empty()) return run_merge(a);
  if (a.model.empty()) throw UsageError("calibrate: MODEL is required (or --merge A.json B.json)");
  calib::CalibrateOptions o;
  calibrate_data_options(a.samples.data, a.samples.random, a.samples.seed, a.samples.shapes, o);
  o.batch_size = a.batch_size;
  o.threads = a.threads;
  o.observer_threads = a.observer_threads;
  o.methods = calib::parse_range_methods(a.methods, "--methods");
  o.histogram_bins = a.bins;
  o.percentile = a.percentile;
  if (!a.config.empty()) o.target = calib::target_from_qconfig(a.config);
  Progress progress(isatty(STDERR_FILENO) && spdlog::default_logger()->should_log(spdlog::level::info));
  o.progress = [&](int64_t done, int64_t total) { progress(done, total); };

  const calib::CalibrateResult r = calib::calibrate_model(a.model, o);
  write_outputs(r.table, a);

  for (const std::string& note : r.notes) spdlog::warn("{}", note);
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
  add_sample_options(*sub, a->samples,
                     "NAME=FILE.npy|.npz|.pb per input (first axis = samples), or a folder of test_data_set_* "
                     "folders or one .npz per sample",
                     "Calibrate on N random standard-normal samples instead of --data");
  sub->add_option("-o,--output", a->output, "Calibration file to write (JSON)")->required();
  sub->add_option("--config", a->config, "QConfig JSON: global.activation.dtype/symmetric pick the mse/entropy target");
  sub->add_option("--batch-size", a->batch_size, "Samples per interpreter run (default 1)")->check(CLI::PositiveNumber);
  sub->add_option("--threads", a->threads,
                  "Threads in all, for the interpreter and the observers (default 0 = all cores). With two or more, "
                  "some observe tensors while the interpreter runs on the rest (see --observer-threads)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--observer-threads", a->observer_threads,
                  "Of --threads, how many observe beside the interpreter (default: half when a method needs a "
                  "histogram, else an eighth, at least one; 0 = observe inline, between the interpreter's nodes). "
                  "The table is the same whichever split")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--methods", a->methods,
                  "Range methods to record, comma-separated: minmax percentile entropy mse torch_histogram, or all "
                  "(default minmax,percentile,entropy,mse; torch_histogram runs PyTorch's order-dependent "
                  "HistogramObserver as a second pass over every value)");
  sub->add_option("--histogram-bins", a->bins, "Histogram window in bins (default 8192: >= 2048 bins over any range)")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20));
  sub->add_option("--percentile", a->percentile, "Percentile for the 'percentile' range (default 99.999)")
      ->check(CLI::Range(0.0, 100.0));
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
