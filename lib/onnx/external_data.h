// External tensor data: parsing a TensorProto's external_data entries and resolving their location safely.
//
// The rules (checked on read and on write; the ONNX library itself shipped each hole as a CVE:
// CVE-2022-25882, CVE-2024-27318, CVE-2025-51480, CVE-2026-27489):
//  - a location is a relative path with '/' separators, resolved against the model's folder;
//  - absolute paths, empty names, backslashes and NUL bytes are rejected;
//  - `..` may not climb above the folder at any point (`a/../../x` is rejected, `a/../b` is fine);
//  - after following symlinks the file must still lie inside the (canonical) model folder;
//  - offset and length must be non-negative and the range must lie inside the file, and the length must
//    equal the tensor's byte size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace onnx {
class TensorProto;
}

namespace qtool::onnxio {

struct ExternalRef {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;  // -1: not given (the rest of the file)
};

// Reads the external_data key/value entries. `what` prefixes error messages (names model and tensor).
ExternalRef parse_external_ref(const onnx::TensorProto& tensor, const std::string& what);

// Checks `location` lexically (relative, no escaping `..`) and returns dir/location. When the target or
// any folder on its way exists, it must also resolve inside canonical(dir) after following symlinks.
// With must_exist, a missing file or one that is not a regular file is an error, and the canonical path
// (the one checked) is returned; otherwise dir/location.
std::filesystem::path resolve_external_location(const std::filesystem::path& dir, const std::string& location,
                                                bool must_exist, const std::string& what);

// Validates ref's range against the file at `file` (already resolved) for a tensor of `expected_bytes`
// (-1: unknown); returns the length to read.
int64_t checked_external_length(const std::filesystem::path& file, const ExternalRef& ref, int64_t expected_bytes,
                                const std::string& what);

// A tensor left external by load_model(load_external_data = false), or spilled by SpillFile: its reference
// was validated (or written by qtool itself), and the entry kResolvedKey holds the canonical file, so the tensor
// can be read (tensor_from_proto) and copied (save_model) without knowing the model's folder. Models on disk never
// carry the key: load_model refuses one that does, save_model writes plain location/offset/length.
inline constexpr const char* kResolvedKey = "qtool.resolved_path";
struct ResolvedRef {
  std::filesystem::path file;
  int64_t offset = 0, length = 0;
};
bool has_resolved_ref(const onnx::TensorProto& tensor);
ResolvedRef resolved_ref(const onnx::TensorProto& tensor);  // call only when has_resolved_ref
void set_resolved_ref(onnx::TensorProto& tensor, const std::string& location, const ResolvedRef& ref);
// Makes `tensor` refer to [offset, offset + length) of `location` (replacing any external_data entries).
void set_external_ref(onnx::TensorProto& tensor, const std::string& location, int64_t offset, int64_t length);

// Tensor data size in bytes from dims and data_type (-1 for strings or unknown types).
int64_t tensor_proto_bytes(const onnx::TensorProto& tensor);

}  // namespace qtool::onnxio
