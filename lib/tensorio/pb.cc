// ONNX TensorProto files and extension dispatch.
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include "onnx/tensor_proto.h"
#include "core/file_io.h"
#include "tensorio/tensorio.h"

namespace qtool::tensorio {

Tensor read_pb(const std::filesystem::path& path, std::string* name) {
  const std::string what = path.string();
  const std::vector<std::byte> bytes = fileio::read_file_bytes(path, "tensor file");
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw BadInputError(what + ": not an ONNX TensorProto (protobuf parse failed; truncated or not a .pb tensor)");
  if (!proto.has_data_type() || proto.data_type() == 0)
    throw BadInputError(what + ": not an ONNX TensorProto (no data_type)");
  if (name) *name = proto.name();
  try {
    // Every element takes at least one byte of the file (raw_data, or 1-byte varints for int64 in typed fields;
    // 4-bit types two per byte): a larger claim is a corrupt header, not a reason to allocate.
    const DTypeInfo* info = dtype_info_or_null(proto.data_type());
    if (info && info->cls != DTypeClass::String && info->cls != DTypeClass::None) {
      const int64_t numel = onnxio::proto_numel(proto);
      if (static_cast<uint64_t>(numel) / static_cast<uint64_t>(info->elems_per_byte) > bytes.size())
        throw BadInputError("shape of " + std::to_string(numel) + " elements does not fit in a " +
                            std::to_string(bytes.size()) + "-byte file; truncated or corrupt");
    }
    return onnxio::tensor_from_proto(proto, "tensor '" + proto.name() + "'");
  } catch (const BadInputError& e) {
    throw BadInputError(what + ": " + e.what());
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(what + ": " + e.what());
  }
}

std::vector<Tensor> read_sequence_pb(const std::filesystem::path& path, DType* elem) {
  const std::string what = path.string();
  const std::vector<std::byte> bytes = fileio::read_file_bytes(path, "sequence file");
  onnx::SequenceProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw BadInputError(what + ": not an ONNX SequenceProto (protobuf parse failed)");
  if (proto.elem_type() != onnx::SequenceProto::TENSOR) {
    if (proto.elem_type() == onnx::SequenceProto::UNDEFINED)
      throw BadInputError(what + ": not an ONNX SequenceProto of tensors (no elem_type)");
    throw UnsupportedError(what + ": a sequence of " + onnx::SequenceProto::DataType_Name(proto.elem_type()) +
                           " values; qtool runs sequences of tensors only");
  }
  std::vector<Tensor> items;
  items.reserve(static_cast<size_t>(proto.tensor_values_size()));
  try {
    for (int i = 0; i < proto.tensor_values_size(); ++i)
      items.push_back(onnxio::tensor_from_proto(proto.tensor_values(i), "element " + std::to_string(i)));
  } catch (const BadInputError& e) {
    throw BadInputError(what + ": " + e.what());
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(what + ": " + e.what());
  }
  for (const Tensor& t : items)
    if (t.dtype() != items.front().dtype())
      throw BadInputError(what + ": the sequence mixes " + std::string(dtype_name(items.front().dtype())) + " and " +
                          std::string(dtype_name(t.dtype())) + " tensors");
  if (elem) *elem = items.empty() ? DType::Undefined : items.front().dtype();
  return items;
}

void write_pb(const std::filesystem::path& path, const Tensor& t, const std::string& name) {
  onnx::TensorProto proto;
  onnxio::tensor_to_proto(t, name, proto);
  std::string s;
  if (!proto.SerializeToString(&s)) throw InternalError(path.string() + ": TensorProto serialization failed");
  fileio::write_file_atomic(path, s);
}

Tensor read_tensor_file(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".npy") return read_npy(path);
  if (ext == ".pb") return read_pb(path);
  if (ext == ".npz") return read_npz_single(path);
  throw UsageError(path.string() + ": unknown tensor file extension '" + ext + "' (use .npy, .npz or .pb)");
}

void write_tensor_file(const std::filesystem::path& path, const Tensor& t) {
  const std::string ext = path.extension().string();
  if (ext == ".npy") return write_npy(path, t);
  if (ext == ".pb") return write_pb(path, t, path.stem().string());
  throw UsageError(path.string() + ": unknown tensor file extension '" + ext + "' (use .npy or .pb)");
}

}  // namespace qtool::tensorio
