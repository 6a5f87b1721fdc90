#include "options.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace qtool::cli {

namespace {

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

}  // namespace

void add_threads_option(CLI::App& sub, int& threads, const std::string& what, const std::string& detail) {
  threads = 0;
  sub.add_option("-t,--threads", threads, what + " (default 0 = all cores)" + detail)->check(CLI::NonNegativeNumber);
}

void add_guard_budget_options(CLI::App& sub, GuardBudgetArgs& a) {
  a = {};
  sub.add_option("--guard-samples", a.samples,
                 "Accuracy guard: decide on the first N calibration samples (default " + std::to_string(a.samples) +
                     "; 0 = all; recurrent models keep the whole stream; the per-tensor ranking uses 16)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--guard-time", a.seconds,
                 "Accuracy guard: stop the search after SECONDS (default " +
                     std::to_string(static_cast<int>(a.seconds)) +
                     "; 0 = no limit) and keep the best state found; if that misses a threshold, exit 4 unless "
                     "--allow-below-target")
      ->check(CLI::NonNegativeNumber);
}

SampleOptions add_sample_options(CLI::App& sub, SampleArgs& a, const std::string& data_help,
                                 const std::string& random_help) {
  SampleOptions o;
  o.data = sub.add_option("--data", a.data, data_help);
  o.random = sub.add_option("--random", a.random, random_help)->check(CLI::PositiveNumber);
  sub.add_option("--seed", a.seed, "Seed for --random (default 0)");
  sub.add_option("--shape", a.shapes,
                 "NAME=d0,d1,... input shape for --random where the model leaves dims open, or SYMBOL=N for one "
                 "symbolic dim (seq=128) on every input");
  o.data->excludes(o.random);
  return o;
}

void sample_source_options(const SampleArgs& a, calib::CalibrateOptions& o) {
  for (const std::string& d : a.data) {
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
  if (a.random > 0) o.random_samples = a.random;
  o.seed = a.seed;
  for (const std::string& s : a.shapes) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--shape " + s + ": expected NAME=d0,d1,...");
    o.shapes[s.substr(0, eq)] = parse_dims(s.substr(eq + 1), "--shape " + s);
  }
}

void add_device_option(CLI::App& sub, std::string& device) {
  device = "cpu";
  sub.add_option("--device", device,
                 "Where the hot loops run: cpu, cuda or cuda:N (default cpu; cuda needs a qtool built with CUDA and a "
                 "GPU; results equal the CPU's, see docs/cuda.md)");
}

device::DeviceSpec parse_device_option(const std::string& device) {
  const device::DeviceSpec d = device::parse_device(device, "--device");
  device::select_device(d);
  return d;
}

SampleOptions add_calibration_options(CLI::App& sub, CalibrationArgs& a, const CalibrationHelp& help) {
  const SampleOptions samples = add_sample_options(sub, a.samples, help.data, help.random);
  sub.add_option("--batch-size", a.batch_size, "Samples per interpreter run (default 1)")->check(CLI::PositiveNumber);
  add_threads_option(sub, a.threads,
                     "Threads in all, for the interpreter and the observers",
                     ". With two or more, some observe tensors while the interpreter runs on the rest (see "
                     "--observer-threads)");
  sub.add_option("--observer-threads", a.observer_threads,
                 "Of --threads, how many observe beside the interpreter (default: half when a method needs a "
                 "histogram, else an eighth, at least one; 0 = observe inline, between the interpreter's nodes). "
                 "The table is the same whichever split")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--methods", a.methods,
                 "Range methods to record, comma-separated: minmax percentile entropy mse torch_histogram, or all "
                 "(default " + help.methods + "; torch_histogram runs PyTorch's order-dependent "
                 "HistogramObserver as a second pass over every value)");
  sub.add_option("--histogram-bins", a.histogram_bins,
                 "Histogram window in bins (default 8192: >= 2048 bins over any range)")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20));
  sub.add_option("--percentile", a.percentile, "Percentile for the 'percentile' range (default 99.999)")
      ->check(CLI::Range(0.0, 100.0));
  add_device_option(sub, a.device);
  return samples;
}

calib::CalibrateOptions calibrate_options(const CalibrationArgs& a, const calib::RangeMethods& defaults,
                                          const calib::RangeMethods& required) {
  calib::CalibrateOptions o;
  sample_source_options(a.samples, o);
  o.batch_size = a.batch_size;
  o.threads = a.threads;
  o.observer_threads = a.observer_threads;
  o.methods = a.methods.empty() ? defaults : calib::parse_range_methods(a.methods, "--methods");
  o.methods.insert(required.begin(), required.end());
  o.histogram_bins = a.histogram_bins;
  o.percentile = a.percentile;
  o.device = parse_device_option(a.device).kind;
  return o;
}

}  // namespace qtool::cli
