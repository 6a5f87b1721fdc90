#include "onnx/external_data.h"

#include <onnx/onnx_pb.h>

#include <charconv>
#include <system_error>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace qtool::onnxio {
namespace fs = std::filesystem;
namespace {

int64_t parse_nonneg(const std::string& key, const std::string& value, const std::string& what) {
  int64_t v = -1;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || ptr != end || v < 0)
    throw BadInputError(what + ": external data " + key + " '" + value +
                        "' is not a non-negative integer; the model is corrupt");
  return v;
}

// True when `inner` equals `outer` or lies below it (both canonical).
bool is_within(const fs::path& outer, const fs::path& inner) {
  auto o = outer.begin(), i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (o->empty() && std::next(o) == outer.end()) break;  // trailing separator
    if (i == inner.end() || *o != *i) return false;
  }
  return true;
}

}  // namespace

ExternalRef parse_external_ref(const onnx::TensorProto& tensor, const std::string& what) {
  ExternalRef ref;
  bool have_location = false;
  for (const auto& kv : tensor.external_data()) {
    if (kv.key() == "location") {
      ref.location = kv.value();
      have_location = true;
    } else if (kv.key() == "offset") {
      ref.offset = parse_nonneg("offset", kv.value(), what);
    } else if (kv.key() == "length") {
      ref.length = parse_nonneg("length", kv.value(), what);
    }  // "checksum" and unknown keys are ignored, as ONNX does
  }
  if (!have_location)
    throw BadInputError(what + ": stored as external data but has no 'location'; the model is corrupt");
  return ref;
}

bool has_resolved_ref(const onnx::TensorProto& tensor) {
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL) return false;
  for (const auto& kv : tensor.external_data())
    if (kv.key() == kResolvedKey) return true;
  return false;
}

ResolvedRef resolved_ref(const onnx::TensorProto& tensor) {
  ResolvedRef r;
  const ExternalRef ref = parse_external_ref(tensor, "tensor '" + tensor.name() + "'");
  for (const auto& kv : tensor.external_data())
    if (kv.key() == kResolvedKey) r.file = kv.value();
  r.offset = ref.offset;
  r.length = ref.length;
  return r;
}

void set_external_ref(onnx::TensorProto& tensor, const std::string& location, int64_t offset, int64_t length) {
  tensor.clear_external_data();
  for (const auto& [key, value] : {std::pair<const char*, std::string>{"location", location},
                                   {"offset", std::to_string(offset)},
                                   {"length", std::to_string(length)}}) {
    auto* kv = tensor.add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  }
  tensor.set_data_location(onnx::TensorProto::EXTERNAL);
}

void set_resolved_ref(onnx::TensorProto& tensor, const std::string& location, const ResolvedRef& ref) {
  set_external_ref(tensor, location, ref.offset, ref.length);
  auto* kv = tensor.add_external_data();
  kv->set_key(kResolvedKey);
  kv->set_value(ref.file.string());
}

fs::path resolve_external_location(const fs::path& dir, const std::string& location, bool must_exist,
                                   const std::string& what) {
  const std::string quoted = "external data location '" + location + "'";
  if (location.empty()) throw BadInputError(what + ": empty " + quoted);
  if (location.find('\0') != std::string::npos)
    throw BadInputError(what + ": " + quoted + " contains a NUL byte; the model is corrupt or malicious");
  if (location.find('\\') != std::string::npos)
    throw BadInputError(what + ": " + quoted + " contains a backslash; locations use '/' separators");
  const fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_path())
    throw BadInputError(what + ": " + quoted +
                        " is an absolute path; external data must be a relative path inside the model's folder");
  int depth = 0;
  for (const auto& part : rel) {
    if (part == "..") {
      if (--depth < 0)
        throw BadInputError(what + ": " + quoted + " escapes the model's folder; external data must stay inside it");
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
  }
  if (depth == 0) throw BadInputError(what + ": " + quoted + " names the model's folder, not a file");

  const fs::path base = dir.empty() ? fs::path(".") : dir;
  const fs::path full = base / rel;
  std::error_code ec;
  const fs::path canon_dir = fs::canonical(base, ec);
  if (ec) throw BadInputError(what + ": cannot resolve the model's folder '" + base.string() + "': " + ec.message());
  // weakly_canonical follows every symlink on the part of the path that exists; a dangling symlink at
  // the end is followed by hand, so a link to a not-yet-existing file outside is caught too.
  fs::path target = full;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) break;
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  const fs::path canon = fs::weakly_canonical(target, ec);
  if (ec) throw BadInputError(what + ": cannot resolve " + quoted + ": " + ec.message());
  if (!is_within(canon_dir, canon))
    throw BadInputError(what + ": " + quoted + " resolves through a symlink to '" + canon.string() +
                        "', outside the model's folder; external data must stay inside it");
  if (must_exist) {
    const auto st = fs::status(full, ec);
    if (ec || !fs::exists(st))
      throw BadInputError(what + ": external data file '" + full.string() + "' is missing; copy it next to the model");
    if (!fs::is_regular_file(st))
      throw BadInputError(what + ": external data '" + full.string() + "' is not a regular file");
  }
  // Reads use the canonical path that was checked, so a later symlink swap on the way cannot redirect them.
  return must_exist ? canon : full;
}

int64_t checked_external_length(const fs::path& file, const ExternalRef& ref, int64_t expected_bytes,
                                const std::string& what) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec) throw BadInputError(what + ": cannot read external data file '" + file.string() + "': " + ec.message());
  const auto file_bytes = static_cast<int64_t>(size);
  const std::string where = "external data file '" + file.string() + "' (" + std::to_string(file_bytes) + " bytes)";
  if (ref.offset > file_bytes)
    throw BadInputError(what + ": external data offset " + std::to_string(ref.offset) + " lies past the end of " +
                        where + "; the model or its data file is corrupt");
  const int64_t length = ref.length >= 0 ? ref.length : file_bytes - ref.offset;
  if (length > file_bytes - ref.offset)
    throw BadInputError(what + ": external data range [" + std::to_string(ref.offset) + ", " +
                        std::to_string(ref.offset) + "+" + std::to_string(length) + ") lies past the end of " + where +
                        "; the model or its data file is corrupt");
  if (expected_bytes >= 0 && length != expected_bytes)
    throw BadInputError(what + ": external data length " + std::to_string(length) + " does not match the " +
                        std::to_string(expected_bytes) + " bytes its shape and dtype need; the model is corrupt");
  return length;
}

int64_t tensor_proto_bytes(const onnx::TensorProto& tensor) {
  const DTypeInfo* info = dtype_info_or_null(tensor.data_type());
  if (!info || info->dtype == DType::Undefined || info->dtype == DType::String) return -1;
  for (int64_t d : tensor.dims())
    if (d < 0) return -1;
  Shape shape(tensor.dims().begin(), tensor.dims().end());
  return static_cast<int64_t>(storage_bytes(info->dtype, shape_numel(shape)));
}

}  // namespace qtool::onnxio
