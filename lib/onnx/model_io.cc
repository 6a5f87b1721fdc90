// Model loading and saving. See model_io.h for the contract and external_data.h for the path rules.
#include "onnx/model_io.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <system_error>

#include "core/error.h"
#include "core/file_io.h"
#include "onnx/external_data.h"
#include "onnx/model_walk.h"
#include "onnx/tensor_proto.h"
#include "onnx/validate.h"

namespace qtool::onnxio {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kProtobufLimit = INT_MAX;  // protobuf cannot parse or serialize messages of 2 GiB or more
constexpr int64_t kExternalAlign = 64;       // offsets of tensors in a written data file

// Built with append: GCC 12 warns falsely (-Wrestrict, bug 105329) on "literal" + std::string&&.
std::string quoted(const fs::path& p) {
  std::string s(1, '\'');
  s.append(p.string()).push_back('\'');
  return s;
}

std::string errno_text() { return std::strerror(errno); }

// Reads [offset, offset+length) of a file; the range was validated against the file's size.
std::string read_range(const fs::path& file, int64_t offset, int64_t length, const std::string& what) {
  std::string bytes(static_cast<size_t>(length), '\0');
  try {
    fileio::InputFile(file, "external data file").read_at(offset, bytes.data(), bytes.size());
  } catch (const BadInputError& e) {
    throw BadInputError(what + ": " + e.what());
  }
  return bytes;
}

// Resolves every external reference of `model` against `dir`: validates location and range and, when
// `load` is set, replaces the reference by the bytes (raw_data). Returns the canonical files used.
struct ExternalScan {
  std::vector<fs::path> files;
  int64_t bytes = 0;
};

// Resolves every external reference of `model` against `dir`: validates location and range and, when `load` is
// set, replaces the reference by the bytes (raw_data); otherwise marks it resolved (external_data.h). Returns the
// canonical files used. `from_disk`: the model was just parsed from a file, where the resolved mark is refused
// (a model could otherwise point qtool at any file); tensors qtool marked itself are read or kept as they are.
ExternalScan resolve_external(onnx::ModelProto& model, const fs::path& dir, bool load, const std::string& prefix,
                              bool from_disk = false) {
  ExternalScan scan;
  std::map<fs::path, int64_t> used_per_file;
  for_each_tensor(model, [&](onnx::TensorProto& t, const TensorSite& site) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    const std::string what = prefix + site.label;
    if (has_resolved_ref(t)) {
      if (from_disk)
        throw BadInputError(what + ": external data key '" + kResolvedKey +
                            "' is reserved for qtool's own use; the model is corrupt or malicious");
      const ResolvedRef r = resolved_ref(t);
      if (std::find(scan.files.begin(), scan.files.end(), r.file) == scan.files.end()) scan.files.push_back(r.file);
      scan.bytes += r.length;
      if (load) {
        t.set_raw_data(read_range(r.file, r.offset, r.length, what));
        t.clear_external_data();
        t.clear_data_location();
      }
      return;
    }
    const int64_t expected = tensor_proto_bytes(t);
    if (expected < 0)
      throw UnsupportedError(what + ": external data for a " +
                             (t.data_type() == onnx::TensorProto::STRING ? std::string("string")
                                                                         : "type " + std::to_string(t.data_type())) +
                             " tensor is not supported");
    const ExternalRef ref = parse_external_ref(t, what);
    const fs::path file = resolve_external_location(dir, ref.location, true, what);  // canonical
    const int64_t length = checked_external_length(file, ref, expected, what);
    if (std::find(scan.files.begin(), scan.files.end(), file) == scan.files.end()) scan.files.push_back(file);
    scan.bytes += length;
    // Tensors may not share bytes: all those read from one file together fit in it. Otherwise a small model
    // whose tensors alias one range would make the loader read (and hold) the file many times over.
    int64_t& used = used_per_file[file];
    used += length;
    std::error_code ec;
    const auto file_bytes = static_cast<int64_t>(fs::file_size(file, ec));
    if (!ec && used > file_bytes)
      throw BadInputError(what + ": the model's tensors read " + std::to_string(used) + " bytes from external data file " +
                          quoted(file) + ", which holds " + std::to_string(file_bytes) +
                          ": several tensors alias the same bytes; the model is corrupt or malicious");
    if (load) {
      t.set_raw_data(read_range(file, ref.offset, length, what));
      t.clear_external_data();
      t.clear_data_location();
    } else {
      set_resolved_ref(t, ref.location, {file, ref.offset, length});
    }
  });
  return scan;
}

// Raw little-endian bytes of an inline tensor (raw_data, or the typed fields decoded).
std::string inline_bytes(const onnx::TensorProto& t, const std::string& what) {
  if (t.has_raw_data()) return t.raw_data();
  const Tensor decoded = tensor_from_proto(t, what);
  return std::string(reinterpret_cast<const char*>(decoded.raw()), decoded.nbytes());
}

// The bytes of a tensor that still refers to external data, resolved (save_model resolves every reference first).
std::string read_source(const onnx::TensorProto& t, const std::string& what) {
  const ResolvedRef r = resolved_ref(t);
  return read_range(r.file, r.offset, r.length, what);
}

// Copies a tensor's external bytes to `sink` in chunks of at most kCopyChunk.
constexpr size_t kCopyChunk = size_t{8} << 20;
void copy_source(const onnx::TensorProto& t, fileio::AtomicFile& sink, std::vector<char>& chunk,
                 const std::string& what) {
  const ResolvedRef r = resolved_ref(t);
  chunk.resize(kCopyChunk);
  try {
    const fileio::InputFile in(r.file, "external data file");
    for (int64_t done = 0; done < r.length;) {
      const auto n = static_cast<size_t>(std::min<int64_t>(r.length - done, static_cast<int64_t>(kCopyChunk)));
      in.read_at(r.offset + done, chunk.data(), n);
      sink.write(chunk.data(), n);
      done += static_cast<int64_t>(n);
    }
  } catch (const BadInputError& e) {
    throw BadInputError(what + ": " + e.what());
  }
}

void clear_typed_fields(onnx::TensorProto& t) {
  t.clear_raw_data();
  t.clear_float_data();
  t.clear_int32_data();
  t.clear_string_data();
  t.clear_int64_data();
  t.clear_double_data();
  t.clear_uint64_data();
}

void refuse_overwrite(const fs::path& target, const std::vector<fs::path>& protect, const std::string& role) {
  std::error_code ec;
  if (!fs::exists(target, ec)) return;
  for (const auto& p : protect) {
    if (p.empty()) continue;
    if (fs::equivalent(target, p, ec))
      throw BadInputError("refusing to overwrite " + quoted(target) + ": it is the input " + role + " " + quoted(p) +
                          "; choose another output path");
  }
}

}  // namespace

LoadedModel::LoadedModel() = default;
LoadedModel::~LoadedModel() = default;
LoadedModel::LoadedModel(LoadedModel&&) noexcept = default;
LoadedModel& LoadedModel::operator=(LoadedModel&&) noexcept = default;

LoadedModel load_model(const fs::path& path, const LoadOptions& options) {
  const std::string name = quoted(path);
  fileio::InputFile file(path, "model");  // a regular file, or BadInputError naming it (never blocks on a FIFO)
  const int64_t size = file.size();
  if (size == 0) throw BadInputError("model " + name + " is an empty file, not an ONNX model");
  if (size >= kProtobufLimit)
    throw BadInputError("model " + name + " is " + std::to_string(size) +
                        " bytes, over protobuf's 2 GB limit for one .onnx file; store the weights as external data");

  const int fd = file.release();
  LoadedModel m;
  m.proto = std::make_unique<onnx::ModelProto>();
  bool parsed = false;
  {
    google::protobuf::io::FileInputStream raw(fd);
    raw.SetCloseOnDelete(true);
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT_MAX);  // the default is lower in older protobuf releases
    parsed = m.proto->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  }
  if (!parsed)
    throw BadInputError("model " + name +
                        " is not a valid ONNX file (protobuf parse failed: truncated or not a model)");
  if (m.proto->ir_version() <= 0 || !m.proto->has_graph())
    throw BadInputError("model " + name + " is not an ONNX model (no " +
                        std::string(m.proto->ir_version() <= 0 ? "ir_version" : "graph") + ")");

  m.path = path;
  m.dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  validate_model(*m.proto, "model " + name + ": ");  // once, here: later code trusts tensors and nodes
  const ExternalScan scan =
      resolve_external(*m.proto, m.dir, options.load_external_data, "model " + name + ": ", /*from_disk=*/true);
  m.external_files = scan.files;
  m.external_bytes = scan.bytes;
  return m;
}

SaveOptions& SaveOptions::protect(const LoadedModel& input) {
  protect_input = input.path;
  protect_files.insert(protect_files.end(), input.external_files.begin(), input.external_files.end());
  external_source_dir = input.dir;
  return *this;
}

int64_t tensor_data_bytes(const onnx::ModelProto& model) {
  int64_t total = 0;
  for_each_tensor(model, [&](const onnx::TensorProto& t, const TensorSite&) {
    if (t.has_raw_data()) {
      total += static_cast<int64_t>(t.raw_data().size());
    } else {
      const int64_t n = tensor_proto_bytes(t);
      if (n > 0) total += n;
    }
  });
  return total;
}

void save_model(const onnx::ModelProto& model, const fs::path& out, const SaveOptions& options) {
  save_model(onnx::ModelProto(model), out, options);
}

// Memory: the model is consumed in place. Tensor data it still keeps external (loaded with load_external_data =
// false) is copied from the source file to the output's data file in bounded chunks, never held whole, and inline
// data moves into the data file tensor by tensor; so converting a model with external data needs memory for its
// graph and one chunk, whatever its size.
void save_model(onnx::ModelProto&& model, const fs::path& out, const SaveOptions& options) {
  const fs::path out_dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec))
    throw BadInputError("cannot write " + quoted(out) + ": folder " + quoted(out_dir) + " does not exist");
  if (out.filename().empty()) throw BadInputError("cannot write " + quoted(out) + ": not a file name");

  std::vector<fs::path> protect = options.protect_files;
  protect.push_back(options.protect_input);
  refuse_overwrite(out, protect, "model or its data");

  onnx::ModelProto& copy = model;
  // Data the model still keeps external is read from its source folder (validated like a load; those files are
  // inputs too): streamed into the output's data file below, or read inline when the output has none.
  if (!options.external_source_dir.empty()) {
    const ExternalScan scan =
        resolve_external(copy, options.external_source_dir, false, "saving " + quoted(out) + ": ");
    protect.insert(protect.end(), scan.files.begin(), scan.files.end());
    refuse_overwrite(out, protect, "model or its data");
  } else {
    for_each_tensor(copy, [&](const onnx::TensorProto& t, const TensorSite& site) {
      if (t.data_location() == onnx::TensorProto::EXTERNAL && !has_resolved_ref(t))
        throw InternalError("saving " + quoted(out) + ": " + site.label +
                            " still refers to external data and SaveOptions::external_source_dir is not set");
    });
    // Tensors left on disk (a lazily loaded model, spilled tensors): their files are inputs too.
    const ExternalScan scan = resolve_external(copy, fs::path(), false, "saving " + quoted(out) + ": ");
    protect.insert(protect.end(), scan.files.begin(), scan.files.end());
    refuse_overwrite(out, protect, "model or its data");
  }

  const int64_t total = tensor_data_bytes(copy);
  bool external = options.external_data == SaveOptions::ExternalData::Always;
  if (options.external_data == SaveOptions::ExternalData::Auto) external = total > kAutoExternalDataBytes;
  if (!external && total > kAutoExternalDataBytes)
    throw BadInputError("cannot write " + quoted(out) + " without external data: its tensors hold " +
                        std::to_string(total) + " bytes, over protobuf's 2 GB limit; use external data");
  if (!external) resolve_external(copy, options.external_source_dir, true, "saving " + quoted(out) + ": ");

  std::unique_ptr<fileio::AtomicFile> data_tmp;
  fs::path data_path;
  if (external) {
    const std::string location =
        options.external_file.empty() ? out.filename().string() + ".data" : options.external_file;
    const std::string what = "saving " + quoted(out);
    data_path = resolve_external_location(out_dir, location, false, what);
    refuse_overwrite(data_path, protect, "model or its data");
    if (fs::equivalent(data_path, out, ec) ||
        (out_dir / location).lexically_normal() == (out_dir / out.filename()).lexically_normal())
      throw BadInputError(what + ": the external data file cannot be the model file itself");
    data_tmp = std::make_unique<fileio::AtomicFile>(data_path);
    int64_t offset = 0;
    const std::string zeros(kExternalAlign, '\0');
    std::vector<char> chunk;
    for_each_tensor(copy, [&](onnx::TensorProto& t, const TensorSite& site) {
      if (is_sparse(site.kind)) return;  // sparse tensors stay inline
      const int64_t nbytes = tensor_proto_bytes(t);
      const bool source_external = t.data_location() == onnx::TensorProto::EXTERNAL;
      if (nbytes < 0) return;
      if (nbytes < options.external_min_bytes) {
        if (source_external)  // small: inline in the output
          t.set_raw_data(read_source(t, what + ": " + site.label));
        return;
      }
      const int64_t pad = (kExternalAlign - offset % kExternalAlign) % kExternalAlign;
      if (source_external) {
        data_tmp->write(zeros.data(), static_cast<size_t>(pad));
        offset += pad;
        copy_source(t, *data_tmp, chunk, what + ": " + site.label);
      } else {
        const std::string decoded = t.has_raw_data() ? std::string() : inline_bytes(t, what + ": " + site.label);
        const std::string& bytes = t.has_raw_data() ? t.raw_data() : decoded;
        if (static_cast<int64_t>(bytes.size()) != nbytes)
          throw BadInputError(what + ": " + site.label + " holds " + std::to_string(bytes.size()) +
                              " bytes of data, its shape and dtype need " + std::to_string(nbytes) +
                              "; the model is corrupt");
        data_tmp->write(zeros.data(), static_cast<size_t>(pad));
        offset += pad;
        data_tmp->write(bytes.data(), bytes.size());
      }
      clear_typed_fields(t);
      set_external_ref(t, location, offset, nbytes);
      offset += nbytes;
    });
    data_tmp->finish();
  }

  const size_t proto_bytes = copy.ByteSizeLong();
  if (proto_bytes >= static_cast<size_t>(kProtobufLimit))
    throw BadInputError("cannot write " + quoted(out) + ": the graph alone serializes to " +
                        std::to_string(proto_bytes) + " bytes, over protobuf's 2 GB limit");
  fileio::AtomicFile model_tmp(out);
  {
    google::protobuf::io::FileOutputStream raw(model_tmp.fd());
    {
      google::protobuf::io::CodedOutputStream coded(&raw);
      coded.SetSerializationDeterministic(true);
      copy.SerializeWithCachedSizes(&coded);
      if (coded.HadError()) throw BadInputError("cannot write " + quoted(out) + ": " + errno_text());
    }
    if (!raw.Flush()) throw BadInputError("cannot write " + quoted(out) + ": " + std::strerror(raw.GetErrno()));
  }
  model_tmp.finish();
  if (data_tmp) data_tmp->commit();
  model_tmp.commit();
}

}  // namespace qtool::onnxio
