#include "calib/table_merge.h"

#include "calib/calibrator.h"
#include "core/error.h"

namespace qtool::calib {

namespace {

std::string settings_str(const CalibrationSettings& s) {
  return "methods " + range_methods_str(s.methods) + ", " + std::to_string(s.histogram_bins) + " bins, percentile " +
         std::to_string(s.percentile) + ", target " + std::string(dtype_name(s.target_dtype)) +
         (s.target_symmetric ? " symmetric" : "");
}

bool same_settings(const CalibrationSettings& a, const CalibrationSettings& b) {
  return a.methods == b.methods && a.histogram_bins == b.histogram_bins && a.percentile == b.percentile &&
         a.target_dtype == b.target_dtype && a.target_symmetric == b.target_symmetric;
}

}  // namespace

CalibrationTable merge_calibrations(const std::vector<NamedTable>& tables, int threads) {
  if (tables.size() < 2) throw UsageError("--merge needs at least two calibration files");
  const NamedTable& first = tables.front();
  for (const NamedTable& t : tables) {
    if (t.table.model_sha256 != first.table.model_sha256)
      throw BadInputError("cannot merge '" + t.name + "' (model '" + t.table.model + "', sha256 " +
                          t.table.model_sha256.substr(0, 12) + "...) with '" + first.name + "' (model '" +
                          first.table.model + "', sha256 " + first.table.model_sha256.substr(0, 12) +
                          "...): they were calibrated on different models; merge tables of one model");
    if (!same_settings(t.table.settings, first.table.settings))
      throw BadInputError("cannot merge '" + t.name + "' (" + settings_str(t.table.settings) + ") with '" + first.name +
                          "' (" + settings_str(first.table.settings) +
                          "): calibrate both with the same --methods, --histogram-bins, --percentile and --config");
    if (t.table.batch_size != first.table.batch_size)
      throw BadInputError("cannot merge '" + t.name + "' (batch size " + std::to_string(t.table.batch_size) +
                          ") with '" + first.name + "' (batch size " + std::to_string(first.table.batch_size) +
                          "): calibrate both with the same --batch-size");
  }
  CalibratorOptions options;
  options.methods = first.table.settings.methods;
  options.histogram_bins = first.table.settings.histogram_bins;
  options.percentile = first.table.settings.percentile;
  options.target = {first.table.settings.target_dtype, first.table.settings.target_symmetric};
  options.exec.threads = threads;
  Calibrator all(options);
  int64_t samples = 0;
  for (const NamedTable& t : tables) {
    Calibrator part(options);
    part.load(t.table, t.name);
    all.merge(part);
    samples += t.table.samples;
  }
  CalibrationTable merged = all.finish();
  merged.model = first.table.model;
  merged.model_sha256 = first.table.model_sha256;
  merged.samples = samples;
  merged.batch_size = first.table.batch_size;
  return merged;
}

}  // namespace qtool::calib
