// Model validation at load time; the rules are listed in validate.h.
#include "onnx/validate.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <unordered_set>

#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "onnx/model_walk.h"

namespace qtool::onnxio {
namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string dims_str(const google::protobuf::RepeatedField<int64_t>& dims) {
  std::string s = "[";
  for (int i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims.Get(i));
  return s + "]";
}

// Element count of `dims`; BadInputError for negative dims or an int64 overflow.
int64_t checked_numel(const google::protobuf::RepeatedField<int64_t>& dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw BadInputError(what + ": negative dimension in shape " + dims_str(dims) + "; the model is corrupt");
    if (__builtin_mul_overflow(n, d, &n))
      throw BadInputError(what + ": shape " + dims_str(dims) + " has more elements than a 64-bit count holds; the model is corrupt");
  }
  return n;
}

// Number of values the typed repeated field for `dt` holds (the ONNX spec assigns one field per dtype).
int64_t typed_count(const onnx::TensorProto& t, DType dt, const char** field) {
  switch (dt) {
    case DType::Float32: *field = "float_data"; return t.float_data_size();
    case DType::Float64: *field = "double_data"; return t.double_data_size();
    case DType::Int64: *field = "int64_data"; return t.int64_data_size();
    case DType::UInt32:
    case DType::UInt64: *field = "uint64_data"; return t.uint64_data_size();
    case DType::String: *field = "string_data"; return t.string_data_size();
    default: *field = "int32_data"; return t.int32_data_size();
  }
}

void validate_sparse(const onnx::SparseTensorProto& s, const std::string& what) {
  const int64_t dense = checked_numel(s.dims(), what);
  const auto& v = s.values();
  const auto& ix = s.indices();
  if (v.dims_size() != 1)
    throw BadInputError(what + ": sparse values must be 1-D, got shape " + dims_str(v.dims()) + "; the model is corrupt");
  const int64_t nnz = v.dims(0);
  if (nnz > dense)
    throw BadInputError(what + ": " + std::to_string(nnz) + " sparse values for a dense shape " + dims_str(s.dims()) +
                        " of " + std::to_string(dense) + " elements; the model is corrupt");
  if (nnz == 0 && ix.dims_size() == 0) return;
  if (ix.data_type() != onnx::TensorProto::INT64)
    throw BadInputError(what + ": sparse indices must be int64, got data type " + std::to_string(ix.data_type()) +
                        "; the model is corrupt");
  const bool linear = ix.dims_size() == 1 && ix.dims(0) == nnz;
  const bool coords = ix.dims_size() == 2 && ix.dims(0) == nnz && ix.dims(1) == s.dims_size();
  if (!linear && !coords)
    throw BadInputError(what + ": sparse indices have shape " + dims_str(ix.dims()) + ", expected [" +
                        std::to_string(nnz) + "] or [" + std::to_string(nnz) + "," + std::to_string(s.dims_size()) +
                        "] for " + std::to_string(nnz) + " values; the model is corrupt");
  if (ix.data_location() == onnx::TensorProto::EXTERNAL || ix.has_raw_data()) return;  // bounds checked on decode
  for (int64_t k = 0; k < ix.int64_data_size(); ++k) {
    const int64_t i = ix.int64_data(static_cast<int>(k));
    const int64_t bound = linear ? dense : s.dims(static_cast<int>(k % s.dims_size()));
    if (i < 0 || i >= bound)
      throw BadInputError(what + ": sparse index " + std::to_string(i) + " lies outside the dense shape " +
                          dims_str(s.dims()) + "; the model is corrupt");
  }
}

void validate_graph_names(const onnx::GraphProto& g, const std::string& prefix) {
  const std::string where = g.name().empty() ? std::string() : " in graph " + q(g.name());
  std::unordered_set<std::string> names;
  auto add = [&](const std::string& name, const char* kind) {
    if (name.empty()) throw BadInputError(prefix + std::string("a ") + kind + where + " has an empty name; the model is corrupt");
    if (!names.insert(name).second)
      throw BadInputError(prefix + "initializer " + q(name) + where +
                          " is defined twice (duplicate initializer names); the model is corrupt");
  };
  for (const auto& t : g.initializer()) add(t.name(), "initializer");
  for (const auto& s : g.sparse_initializer()) {
    const std::string what = prefix + "sparse initializer " + q(s.values().name()) + where;
    add(s.values().name(), "sparse initializer");
    validate_sparse(s, what);
  }
}

// Checks a default-domain node against the ONNX schema for the model's opset (the newest schema libonnx knows
// when the opset is newer). Only counts and names the schema requires are checked, which no later opset relaxed
// into an error.
void validate_node(const onnx::NodeProto& n, const std::map<std::string, int>& opsets, const std::string& prefix) {
  const std::string label = prefix + "node " + q(n.name()) + " (" + n.op_type() + ")";
  bool any_output = false;
  for (const auto& o : n.output()) any_output = any_output || !o.empty();
  if (!any_output)
    throw BadInputError(label + (n.output_size() ? " has only empty output names" : " has no outputs") +
                        "; the model is corrupt");
  const std::string domain = n.domain() == "ai.onnx" ? std::string() : n.domain();
  if (!domain.empty()) return;
  const auto it = opsets.find("");
  const int version = it == opsets.end() ? 1 : it->second;
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), version, "");
  if (!schema) return;  // unknown ops are reported by whoever needs to run them
  auto check = [&](const std::vector<onnx::OpSchema::FormalParameter>& formal,
                   const google::protobuf::RepeatedPtrField<std::string>& actual, int min_count, const char* kind) {
    if (actual.size() < min_count)
      throw BadInputError(label + " has " + std::to_string(actual.size()) + " " + kind + "s, " + n.op_type() +
                          " needs at least " + std::to_string(min_count) + "; the model is corrupt");
    for (size_t i = 0; i < formal.size() && static_cast<int>(i) < actual.size(); ++i) {
      if (formal[i].GetOption() != onnx::OpSchema::Single) continue;
      if (actual.Get(static_cast<int>(i)).empty())
        throw BadInputError(label + ": required " + kind + " " + std::to_string(i) + " ('" + formal[i].GetName() +
                            "') has an empty name; the model is corrupt");
    }
  };
  check(schema->inputs(), n.input(), schema->min_input(), "input");
  check(schema->outputs(), n.output(), schema->min_output(), "output");
}

}  // namespace

void validate_tensor(const onnx::TensorProto& t, const std::string& what) {
  const DTypeInfo* info = dtype_info_or_null(t.data_type());
  if (!info || info->dtype == DType::Undefined) throw_unknown_dtype(t.data_type(), what);
  const int64_t numel = checked_numel(t.dims(), what);
  const DType dt = info->dtype;
  int64_t bytes = 0;
  if (dt != DType::String && info->elems_per_byte == 1 && __builtin_mul_overflow(numel, int64_t{info->bits / 8}, &bytes))
    throw BadInputError(what + ": shape " + dims_str(t.dims()) + " of " + std::string(info->name) +
                        " elements would overflow a 64-bit byte count; the model is corrupt");
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return;  // checked against the file on resolve
  if (t.has_segment())
    throw UnsupportedError(what + ": segmented tensors (TensorProto.segment) are not supported");
  const char* field = "";
  if (dt != DType::String && t.has_raw_data()) {
    const auto need = static_cast<int64_t>(storage_bytes(dt, numel));
    const auto have = static_cast<int64_t>(t.raw_data().size());
    if (have != need)
      throw BadInputError(what + ": raw_data holds " + std::to_string(have) + " bytes, its dtype " +
                          std::string(info->name) + " and shape " + dims_str(t.dims()) + " need " +
                          std::to_string(need) + "; the model is corrupt");
    return;
  }
  const int64_t have = typed_count(t, dt, &field);
  const int64_t need = info->elems_per_byte == 2 ? numel / 2 + numel % 2 : numel;
  if (have != need)
    throw BadInputError(what + ": " + field + " holds " + std::to_string(have) + " values, its dtype " +
                        std::string(info->name) + " and shape " + dims_str(t.dims()) + " need " + std::to_string(need) +
                        "; the model is corrupt");
}

void validate_model(const onnx::ModelProto& model, const std::string& prefix) {
  for_each_tensor(model, [&](const onnx::TensorProto& t, const TensorSite& site) {
    if (is_sparse(site.kind)) {
      // Sparse parts: header checks (their shapes were checked with the sparse tensor).
      const std::string what = prefix + site.label;
      const DTypeInfo* info = dtype_info_or_null(t.data_type());
      if (!info || info->dtype == DType::Undefined) throw_unknown_dtype(t.data_type(), what);
    }
    validate_tensor(t, prefix + site.label);
  });
  for_each_graph(model, [&](const onnx::GraphProto& g, int) { validate_graph_names(g, prefix); });
  // Sparse tensors held in attributes.
  for_each_node(model, [&](const onnx::NodeProto& n, int) {
    for (const auto& a : n.attribute()) {
      const std::string what = prefix + "node " + q(n.name()) + " (" + n.op_type() + ") attribute " + q(a.name());
      if (a.has_sparse_tensor()) validate_sparse(a.sparse_tensor(), what);
      for (const auto& s : a.sparse_tensors()) validate_sparse(s, what);
    }
  });
  std::map<std::string, int> opsets;
  for (const auto& op : model.opset_import())
    opsets[op.domain() == "ai.onnx" ? std::string() : op.domain()] = static_cast<int>(op.version());
  for_each_graph(model, [&](const onnx::GraphProto& g, int) {
    for (const auto& n : g.node()) validate_node(n, opsets, prefix);
  });
}

}  // namespace qtool::onnxio
