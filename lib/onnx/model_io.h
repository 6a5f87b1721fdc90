// Loading and saving ONNX models, including tensors stored as external data.
//
// Safety: external data locations are resolved relative to the model's folder; absolute paths,
// paths that escape the folder (directly, through nesting such as a/../../x, or through symlinks)
// and offset/length ranges beyond the file are rejected with a BadInputError, on read and on write.
// Saving is atomic (temporary file in the target folder, then rename) and never overwrites the input.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace qtool::onnxio {

struct LoadOptions {
  // Read external tensor data into memory (raw_data), so the loaded proto is self-contained.
  // When false, external references are validated (file exists, range inside it) but not read.
  bool load_external_data = true;
};

struct LoadedModel {
  std::unique_ptr<onnx::ModelProto> proto;
  std::filesystem::path path;  // the .onnx file as given
  std::filesystem::path dir;   // folder external data locations are relative to
  // Canonical paths of the external data files the model referenced (validated), in first-use order.
  std::vector<std::filesystem::path> external_files;
  // Bytes of tensor data held in external files (read or, with load_external_data=false, only validated).
  int64_t external_bytes = 0;
  LoadedModel();
  ~LoadedModel();
  LoadedModel(LoadedModel&&) noexcept;
  LoadedModel& operator=(LoadedModel&&) noexcept;
};

LoadedModel load_model(const std::filesystem::path& path, const LoadOptions& options = {});

struct SaveOptions {
  enum class ExternalData { Auto, Always, Never };
  // Auto: external data when the tensor data exceeds kAutoExternalDataBytes (protobuf's 2 GB limit less
  // headroom for the graph); Always: every tensor of at least external_min_bytes; Never: all inline.
  ExternalData external_data = ExternalData::Auto;
  // File name (relative to the output's folder) for external data; default "<output name>.data".
  std::string external_file;
  // Tensors smaller than this stay inline when external data is used.
  int64_t external_min_bytes = 1024;
  // The model that was loaded: save_model refuses to write over it (or over its external data).
  std::filesystem::path protect_input;
  // Further files that must not be overwritten (the input's external data files); see protect().
  std::vector<std::filesystem::path> protect_files;
  // Folder that external data locations still present in the model are relative to (a model loaded with
  // load_external_data=false). Empty: the model must hold all its tensor data inline.
  std::filesystem::path external_source_dir;

  // Protects `input` and its external data files, and reads data it left external from its folder.
  SaveOptions& protect(const LoadedModel& input);
};

// Byte size of the tensor data of the model (all tensors, inline or external), as Auto decides with it.
int64_t tensor_data_bytes(const onnx::ModelProto& model);
// Auto writes external data when the tensor data exceeds this (protobuf cannot serialize >= 2 GiB).
inline constexpr int64_t kAutoExternalDataBytes = (int64_t{1} << 31) - (int64_t{1} << 27);

void save_model(const onnx::ModelProto& model, const std::filesystem::path& out, const SaveOptions& options = {});
// As above, consuming `model` (no copy of its tensor data is made): use it to save big models.
void save_model(onnx::ModelProto&& model, const std::filesystem::path& out, const SaveOptions& options = {});

}  // namespace qtool::onnxio
