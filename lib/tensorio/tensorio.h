// Tensor files: NumPy .npy / .npz and ONNX TensorProto .pb (the test_data_set_*/input_N.pb layout).
//
// .npy: format versions 1.0, 2.0 and 3.0; little- and big-endian data (big-endian is byte-swapped on read);
//   C and Fortran order (Fortran order is transposed to C order on read). Written as version 1.0 (2.0 when the
//   header needs it), little-endian, C order. NumPy has no bfloat16, FP8 or 4-bit types: those go to .pb.
// .npz: a zip of .npy members, stored or deflate (raw deflate via zlib), zip64 where sizes or offsets need it;
//   CRC-32 is checked on read. Keys are member names without the ".npy" suffix.
// Errors: BadInputError naming the file and what is wrong (bad magic, truncated header, bad header dict,
//   data shorter than the shape, bad CRC, ...); UnsupportedError for dtypes or zip features qtool lacks.
// Limits: a file, a member's uncompressed size, the sum of the members read from one .npz and a .npy shape's
//   byte size must each stay within fileio::max_tensor_bytes() (--max-tensor-bytes); zip members that share
//   bytes (a zip bomb) are refused. All of it is checked before anything is inflated or allocated.
// Files are opened and written through core/file_io.h: regular files only, atomic writes, inputs never
//   overwritten.
#pragma once

#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qtool::tensorio {

Tensor read_npy(const std::filesystem::path& path);
void write_npy(const std::filesystem::path& path, const Tensor& t);
// In-memory forms; `what` names the source in errors (a file, or "file.npz:member").
Tensor parse_npy(std::span<const std::byte> bytes, const std::string& what);
std::vector<std::byte> encode_npy(const Tensor& t);

std::map<std::string, Tensor> read_npz(const std::filesystem::path& path);
// The one array of an .npz; BadInputError when it holds another number, before anything is inflated.
Tensor read_npz_single(const std::filesystem::path& path);
void write_npz(const std::filesystem::path& path, const std::map<std::string, Tensor>& tensors, bool compress = false);

// ONNX TensorProto file. `name` (optional) receives the proto's name field.
Tensor read_pb(const std::filesystem::path& path, std::string* name = nullptr);
void write_pb(const std::filesystem::path& path, const Tensor& t, const std::string& name = "");

// ONNX SequenceProto file of tensors (a sequence input or output in ONNX's test data): its elements, in order. `elem`
// (optional) receives their dtype, Undefined for an empty sequence (the file does not say). BadInputError for a
// file that is not one, UnsupportedError for a sequence of sequences, maps or optionals.
std::vector<Tensor> read_sequence_pb(const std::filesystem::path& path, DType* elem = nullptr);

// Dispatches on the extension: .npy, .pb, or .npz holding exactly one array.
Tensor read_tensor_file(const std::filesystem::path& path);
// .npy or .pb by extension.
void write_tensor_file(const std::filesystem::path& path, const Tensor& t);

}  // namespace qtool::tensorio
