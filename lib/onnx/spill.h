// Spilling big tensors to disk while a model is rewritten, so that quantizing a model with external data needs
// memory for the graph and the tensors in use, not for all its weights.
//
// While a SpillFile is active (one at a time, on the thread that rewrites the model), quantize::Graph stores every
// initializer of at least kSpillMinBytes it creates in the spill file instead of the model: the TensorProto becomes
// a resolved external reference (external_data.h), which tensor_from_proto reads back and save_model copies into
// the output's data file in chunks. The spill file is a temporary file beside the output (unpredictable name,
// removed when the SpillFile goes, and on SIGINT/SIGTERM as every temporary file is: core/file_io.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace onnx {
class TensorProto;
}
namespace qtool::fileio {
class AtomicFile;
}

namespace qtool::onnxio {

inline constexpr int64_t kSpillMinBytes = int64_t{1} << 16;

class SpillFile {
 public:
  // Creates the spill file beside `output` and makes it the active one.
  explicit SpillFile(const std::filesystem::path& output);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // The active spill file, or nullptr.
  static SpillFile* active();
  // Writes `t` to the spill file; `proto` becomes the tensor `name` referring to it.
  void store(const Tensor& t, const std::string& name, onnx::TensorProto& proto);
  int64_t bytes() const { return offset_; }

 private:
  std::unique_ptr<fileio::AtomicFile> file_;
  std::filesystem::path canonical_;
  int64_t offset_ = 0;
  SpillFile* previous_ = nullptr;
};

}  // namespace qtool::onnxio
