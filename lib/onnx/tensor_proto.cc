#include "onnx/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <cstring>

#include "core/error.h"
#include "core/file_io.h"
#include "onnx/external_data.h"

namespace qtool::onnxio {
namespace {

std::string label(const onnx::TensorProto& p, const std::string& what) {
  if (!what.empty()) return what;
  return p.name().empty() ? std::string("tensor") : "tensor '" + p.name() + "'";
}

template <class Dst, class Field>
void copy_field(const Field& field, Tensor& t, const std::string& what) {
  if (field.size() != t.numel())
    throw BadInputError(what + ": holds " + std::to_string(field.size()) + " values, shape " + shape_str(t.shape()) +
                        " needs " + std::to_string(t.numel()) + "; the model is corrupt");
  Dst* out = reinterpret_cast<Dst*>(t.raw());
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<Dst>(field.Get(i));
}

// int32_data carries 16-bit floats and 8-bit types as one value per element (low bits);
// 4-bit types are stored packed, two per int32 value (low byte holds both nibbles).
template <class Dst>
void copy_int32_bits(const onnx::TensorProto& p, Tensor& t, const std::string& what) {
  copy_field<Dst>(p.int32_data(), t, what);
}

// Number of values in the repeated field the ONNX spec assigns to dtype `dt`.
int64_t typed_field_size(const onnx::TensorProto& p, DType dt) {
  switch (dt) {
    case DType::Float32: return p.float_data_size();
    case DType::Float64: return p.double_data_size();
    case DType::Int64: return p.int64_data_size();
    case DType::UInt32:
    case DType::UInt64: return p.uint64_data_size();
    default: return p.int32_data_size();
  }
}

}  // namespace

int64_t proto_numel(const onnx::TensorProto& p) {
  Shape shape(p.dims().begin(), p.dims().end());
  return shape_numel(shape);
}

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& what_in) {
  const std::string what = label(p, what_in);
  if (p.data_location() == onnx::TensorProto::EXTERNAL && !has_resolved_ref(p))
    throw BadInputError(what + ": data is stored externally and was not loaded");
  const DTypeInfo* info = dtype_info_or_null(p.data_type());
  if (!info || info->dtype == DType::Undefined || info->dtype == DType::String)
    throw UnsupportedError(what + ": data type " + std::to_string(p.data_type()) + " is not supported");
  const DType dt = info->dtype;
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) throw BadInputError(what + ": negative dimension in " + shape_str(shape));

  if (p.data_location() == onnx::TensorProto::EXTERNAL) {  // validated when it was loaded: read it now
    const ResolvedRef ref = resolved_ref(p);
    const size_t nbytes = storage_bytes(dt, shape_numel(shape));
    if (ref.length != static_cast<int64_t>(nbytes))
      throw InternalError(what + ": external data length " + std::to_string(ref.length) + " is not its size");
    const fileio::InputFile file(ref.file, "external data file");
    // A large weight is mapped rather than read into fresh memory (InputFile::map_private says why); a tensor's
    // data must start 64-byte aligned, so an offset that is not falls back to a read, as small tensors do.
    if (nbytes >= kMapMinBytes && ref.offset % 64 == 0)
      if (auto mapped = file.map_private(ref.offset, nbytes)) return Tensor::from_storage(dt, shape, std::move(mapped));
    Tensor t(dt, shape);
    file.read_at(ref.offset, t.raw(), t.nbytes());
    return t;
  }
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    return Tensor::from_bytes(dt, shape, std::as_bytes(std::span(raw.data(), raw.size())));
  }
  // The typed field must hold every element before anything is allocated for them.
  const int64_t want = info->elems_per_byte == 2 ? (shape_numel(shape) + 1) / 2 : shape_numel(shape);
  if (typed_field_size(p, dt) != want)
    throw BadInputError(what + ": holds " + std::to_string(typed_field_size(p, dt)) + " values, shape " +
                        shape_str(shape) + " needs " + std::to_string(want) + "; the file is corrupt");
  Tensor t(dt, shape);
  switch (dt) {
    case DType::Float32: copy_field<float>(p.float_data(), t, what); break;
    case DType::Float64: copy_field<double>(p.double_data(), t, what); break;
    case DType::Int64: copy_field<int64_t>(p.int64_data(), t, what); break;
    case DType::UInt32: copy_field<uint32_t>(p.uint64_data(), t, what); break;
    case DType::UInt64: copy_field<uint64_t>(p.uint64_data(), t, what); break;
    case DType::Int32: copy_field<int32_t>(p.int32_data(), t, what); break;
    case DType::Int16: copy_int32_bits<int16_t>(p, t, what); break;
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16: copy_int32_bits<uint16_t>(p, t, what); break;
    case DType::Int8: copy_int32_bits<int8_t>(p, t, what); break;
    case DType::UInt8:
    case DType::Bool:
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ: copy_int32_bits<uint8_t>(p, t, what); break;
    case DType::Int4:
    case DType::UInt4: {
      const auto& f = p.int32_data();
      if (static_cast<size_t>(f.size()) != t.nbytes())
        throw BadInputError(what + ": holds " + std::to_string(f.size()) + " packed values, shape " +
                            shape_str(shape) + " needs " + std::to_string(t.nbytes()));
      for (int i = 0; i < f.size(); ++i) t.raw()[i] = static_cast<std::byte>(f.Get(i) & 0xFF);
      break;
    }
    default: throw UnsupportedError(what + ": data type " + std::string(dtype_name(dt)) + " is not supported");
  }
  return t;
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto& p) {
  p.Clear();
  p.set_name(name);
  p.set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p.add_dims(d);
  p.set_raw_data(reinterpret_cast<const char*>(t.raw()), t.nbytes());
}

}  // namespace qtool::onnxio
