// Options more than one subcommand declares, each from one table here so that their names, defaults and help
// cannot drift apart: the sample inputs (calibrate, quantize, inspect --against), the thread count (every command
// that runs a model), and the calibration options `qtool calibrate` and `qtool quantize --data/--random` share.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "device/device.h"

namespace qtool::cli {

// --threads N: every command that runs a model reads it the same way, 0 = all cores, and 0 is the default.
// Help: "<what> (default 0 = all cores)<detail>".
void add_threads_option(CLI::App& sub, int& threads, const std::string& what, const std::string& detail = "");

// --device cpu|cuda[:N]: where the hot loops run (the observers' for calibrate and quantize; run, calibrate and
// quantize take it). parse_device_option checks the device exists and makes it current: one line and exit 2
// ("no CUDA device: ...; use --device cpu") when it does not.
void add_device_option(CLI::App& sub, std::string& device);
device::DeviceSpec parse_device_option(const std::string& device);

// Where sample inputs come from: --data NAME=FILE|FILE|DIR, --random N, --seed, --shape NAME=d0,d1.
struct SampleArgs {
  std::vector<std::string> data, shapes;
  int64_t random = 0;
  uint64_t seed = 0;
};
struct SampleOptions {
  CLI::Option *data = nullptr, *random = nullptr;  // for excludes()
};
// Declares those four options on `sub`; the help of --data and --random says what the samples are for.
SampleOptions add_sample_options(CLI::App& sub, SampleArgs& a, const std::string& data_help,
                                 const std::string& random_help);
// The samples `a` names, into calibrate options (files per input, a folder, or random samples).
void sample_source_options(const SampleArgs& a, calib::CalibrateOptions& o);

// Everything `qtool calibrate` accepts about how to calibrate; `qtool quantize --data/--random` declares the same
// table, so a calibration run can be reproduced inside quantize with the same flags.
struct CalibrationArgs {
  SampleArgs samples;
  int threads = 0;            // in all; 0 = all cores
  int observer_threads = -1;  // -1 = automatic (calib::plan_threads)
  int64_t batch_size = 1;
  int64_t histogram_bins = calib::kDefaultHistogramBins;
  double percentile = calib::kDefaultPercentile;
  std::string methods;  // comma-separated; empty = the command's default
  std::string device = "cpu";
};
struct CalibrationHelp {
  std::string data, random;  // what the samples are for
  std::string methods;       // the command's default for --methods, in words
};
SampleOptions add_calibration_options(CLI::App& sub, CalibrationArgs& a, const CalibrationHelp& help);
// The calibrate options `a` says: --methods (or `defaults` when not given), with `required` always added.
calib::CalibrateOptions calibrate_options(const CalibrationArgs& a, const calib::RangeMethods& defaults,
                                          const calib::RangeMethods& required);

// The accuracy guard's budget (qtool quantize): --guard-samples N (its decisions use the first N samples; a model
// with recurrent state keeps the whole stream) and --guard-time SECONDS (its search stops there and keeps the best
// state measured; a state that misses a threshold is then exit 4 unless --allow-below-target). 0: no limit.
struct GuardBudgetArgs {
  int64_t samples = 64;
  double seconds = 600;
};
void add_guard_budget_options(CLI::App& sub, GuardBudgetArgs& a);

}  // namespace qtool::cli
