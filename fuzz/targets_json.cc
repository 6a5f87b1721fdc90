// Targets that parse JSON: the QConfig and calibration-table parsers (fuzz/targets.h).
#include <string>

#include "calib/calibration_table.h"
#include "core/error.h"
#include "quantize/qconfig.h"
#include "targets.h"

namespace qtool::fuzz {

void qconfig(std::string_view bytes) {
  const quantize::QConfig cfg = quantize::QConfig::parse(std::string(bytes), "fuzz.json");
  (void)cfg.required_opset();
  (void)cfg.range_methods();
  (void)cfg.accuracy_guard();
  (void)cfg.resolve("/backbone/conv_1/Conv", "Conv");
  (void)cfg.resolve(std::string(300, 'a'), "MatMul");
  cfg.check_names({"/backbone/conv_1/Conv"}, {"input", "logits"});
}

void calib_table(std::string_view bytes) {
  const calib::CalibrationTable table = calib::calibration_from_json(std::string(bytes), "fuzz.json");
  const std::string written = calib::calibration_to_json(table);
  try {
    (void)calib::calibration_from_json(written, "the table qtool wrote");
  } catch (const Error& e) {
    throw InternalError("a calibration table qtool wrote does not read back: " + std::string(e.what()));
  }
}

}  // namespace qtool::fuzz
