// Minimal first version: inline models only. External data and atomic saving come with the
// foundation issue's full implementation.
#include "onnx/model_io.h"

#include <onnx/onnx_pb.h>

#include <fstream>

#include "core/error.h"

namespace qtool::onnxio {

LoadedModel::LoadedModel() = default;
LoadedModel::~LoadedModel() = default;
LoadedModel::LoadedModel(LoadedModel&&) noexcept = default;
LoadedModel& LoadedModel::operator=(LoadedModel&&) noexcept = default;

LoadedModel load_model(const std::filesystem::path& path, const LoadOptions&) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInputError("cannot open model '" + path.string() + "': check the path");
  LoadedModel m;
  m.proto = std::make_unique<onnx::ModelProto>();
  if (!m.proto->ParseFromIstream(&in))
    throw BadInputError("'" + path.string() + "' is not a valid ONNX model (protobuf parse failed)");
  m.path = path;
  m.dir = path.parent_path();
  return m;
}

void save_model(const onnx::ModelProto& model, const std::filesystem::path& out, const SaveOptions&) {
  std::ofstream os(out, std::ios::binary);
  if (!os || !model.SerializeToOstream(&os)) throw BadInputError("cannot write '" + out.string() + "'");
}

}  // namespace qtool::onnxio
