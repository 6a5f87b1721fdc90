#include "quantize/provenance.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <span>

#include "calib/sha256.h"
#include "core/version.h"

namespace qtool::quantize {

namespace {

std::string sha256_of(const std::string& text) {
  return calib::sha256_hex(std::span(reinterpret_cast<const unsigned char*>(text.data()), text.size()));
}

void set_meta(onnx::ModelProto& model, std::string_view key, const std::string* value) {
  auto* props = model.mutable_metadata_props();
  props->erase(std::remove_if(props->begin(), props->end(), [&](const onnx::StringStringEntryProto& e) {
                 return e.key() == key;
               }),
               props->end());
  if (!value) return;
  onnx::StringStringEntryProto* e = model.add_metadata_props();
  e->set_key(std::string(key));
  e->set_value(*value);
}

}  // namespace

void stamp_provenance(onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable* ranges) {
  model.set_producer_name(std::string(kProducerName));
  model.set_producer_version(QTOOL_VERSION);
  const std::string config_digest = sha256_of(config.canonical_json());
  set_meta(model, kConfigDigestKey, &config_digest);
  const std::string calib_digest = ranges ? sha256_of(calib::calibration_to_json(*ranges)) : std::string();
  set_meta(model, kCalibrationDigestKey, ranges ? &calib_digest : nullptr);
}

}  // namespace qtool::quantize
