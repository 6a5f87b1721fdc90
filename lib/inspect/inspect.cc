#include "inspect/inspect.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <set>
#include <system_error>
#include <unordered_map>

#include "core/tensor.h"
#include "onnx/external_data.h"
#include "onnx/model_io.h"
#include "onnx/model_walk.h"
#include "onnx/quantized_ops.h"
#include "onnx/tensor_proto.h"

namespace qtool::inspect {
namespace {

using onnxio::is_quant_param_input;
using onnxio::op_key;
using onnxio::TensorSite;
using onnxio::TensorSiteKind;

// dtype and dims of a constant value (initializer or Constant output), for the quantization analysis.
struct ConstInfo {
  int32_t elem_type = 0;
  std::vector<int64_t> dims;
  int64_t bytes = 0;  // storage bytes
};

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

bool is_op(const onnx::NodeProto& n, std::string_view op) {
  return n.op_type() == op && (is_default_domain(n.domain()) || n.domain() == "com.microsoft");
}

ValueInfo value_info(const onnx::ValueInfoProto& v) {
  ValueInfo out;
  out.name = v.name();
  const auto& t = v.type();
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType:
      out.type = "tensor";
      break;
    case onnx::TypeProto::kSequenceType:
      out.type = "sequence";
      break;
    case onnx::TypeProto::kMapType:
      out.type = "map";
      break;
    case onnx::TypeProto::kOptionalType:
      out.type = "optional";
      break;
    case onnx::TypeProto::kSparseTensorType:
      out.type = "sparse_tensor";
      break;
    default:
      out.type = "unknown";
      break;
  }
  const onnx::TensorShapeProto* shape = nullptr;
  int32_t elem = 0;
  // A sequence or an optional holding tensors: describe the tensors it holds.
  const onnx::TypeProto* inner = &t;
  if (t.has_sequence_type() && t.sequence_type().has_elem_type()) inner = &t.sequence_type().elem_type();
  if (t.has_optional_type() && t.optional_type().has_elem_type()) inner = &t.optional_type().elem_type();
  if (inner != &t && inner->has_tensor_type()) {
    elem = inner->tensor_type().elem_type();
    if (inner->tensor_type().has_shape()) shape = &inner->tensor_type().shape();
  } else if (t.has_tensor_type()) {
    elem = t.tensor_type().elem_type();
    if (t.tensor_type().has_shape()) shape = &t.tensor_type().shape();
  } else if (t.has_sparse_tensor_type()) {
    elem = t.sparse_tensor_type().elem_type();
    if (t.sparse_tensor_type().has_shape()) shape = &t.sparse_tensor_type().shape();
  }
  if (const DTypeInfo* info = dtype_info_or_null(elem); info && info->dtype != DType::Undefined)
    out.dtype = info->dtype;
  if (shape) {
    std::vector<Dim> dims;
    for (const auto& d : shape->dim()) {
      Dim dim;
      if (d.has_dim_value())
        dim.value = d.dim_value();
      else if (d.has_dim_param())
        dim.symbol = d.dim_param();
      dims.push_back(dim);
    }
    out.shape = std::move(dims);
  }
  return out;
}

void add_param(Parameters& p, int32_t elem_type, int64_t count, int64_t bytes, bool external) {
  const DTypeInfo* info = dtype_info_or_null(elem_type);
  const DType dt = info ? info->dtype : DType::Undefined;
  auto& d = p.by_dtype[dt];
  d.count += count;
  d.bytes += bytes;
  d.tensors += 1;
  p.count += count;
  p.bytes += bytes;
  p.tensors += 1;
  if (external) p.external_bytes += bytes;
}

int64_t stored_bytes(const onnx::TensorProto& t) {
  int64_t bytes = onnxio::tensor_proto_bytes(t);
  if (t.data_type() == onnx::TensorProto::STRING) {
    bytes = 0;
    for (const auto& s : t.string_data()) bytes += static_cast<int64_t>(s.size());
  }
  return std::max<int64_t>(bytes, 0);
}

void add_tensor_param(Parameters& p, const onnx::TensorProto& t) {
  add_param(p, t.data_type(), onnxio::proto_numel(t), stored_bytes(t), t.data_location() == onnx::TensorProto::EXTERNAL);
}

// A Constant's value given as a scalar or list attribute (value_float(s), value_int(s), value_string(s)).
struct ListConstant {
  int32_t elem_type;
  std::vector<int64_t> dims;
  int64_t bytes;
};

std::optional<ListConstant> list_constant(const onnx::AttributeProto& a) {
  using T = onnx::TensorProto;
  const std::string& n = a.name();
  if (n == "value_float") return ListConstant{T::FLOAT, {}, 4};
  if (n == "value_int") return ListConstant{T::INT64, {}, 8};
  if (n == "value_floats") return ListConstant{T::FLOAT, {a.floats_size()}, 4LL * a.floats_size()};
  if (n == "value_ints") return ListConstant{T::INT64, {a.ints_size()}, 8LL * a.ints_size()};
  if (n == "value_string") return ListConstant{T::STRING, {}, static_cast<int64_t>(a.s().size())};
  if (n == "value_strings") {
    int64_t bytes = 0;
    for (const auto& str : a.strings()) bytes += static_cast<int64_t>(str.size());
    return ListConstant{T::STRING, {a.strings_size()}, bytes};
  }
  return std::nullopt;
}

DType dtype_or_undefined(int32_t elem_type) {
  const DTypeInfo* info = dtype_info_or_null(elem_type);
  return info ? info->dtype : DType::Undefined;
}

int64_t int_attr(const onnx::NodeProto& n, std::string_view name, int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The quantized dtype a QuantizeLinear produces: output_dtype attribute, else its zero point's, else uint8.
std::optional<DType> q_output_dtype(const onnx::NodeProto& q,
                                    const std::unordered_map<std::string, ConstInfo>& consts) {
  if (const int64_t od = int_attr(q, "output_dtype", 0); od != 0)
    if (const DTypeInfo* info = dtype_info_or_null(static_cast<int32_t>(od))) return info->dtype;
  if (q.input_size() > 2 && !q.input(2).empty()) {
    auto it = consts.find(q.input(2));
    if (it == consts.end()) return std::nullopt;
    if (const DTypeInfo* info = dtype_info_or_null(it->second.elem_type)) return info->dtype;
    return std::nullopt;
  }
  return DType::UInt8;
}

// Granularity of a Q or DQ node from its scale's shape and its axis / block_size attributes.
void set_granularity(WeightGroup& g, const onnx::NodeProto& node, const std::vector<int64_t>* scale_dims,
                     size_t weight_rank) {
  g.block_size = int_attr(node, "block_size", 0);
  int64_t axis = int_attr(node, "axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(weight_rank);
  if (g.block_size > 0) {
    g.granularity = Granularity::PerBlock;
    g.axis = axis;
  } else if (!scale_dims || numel(*scale_dims) == 1 || scale_dims->empty()) {
    g.granularity = Granularity::PerTensor;
    g.block_size = 0;
  } else {
    g.granularity = Granularity::PerChannel;
    g.axis = axis;
  }
}

using ConstMap = std::unordered_map<std::string, ConstInfo>;

// Initializers and Constant outputs of every graph, by name.
ConstMap collect_consts(const onnx::ModelProto& model) {
  ConstMap consts;
  onnxio::for_each_graph(model, [&](const onnx::GraphProto& g, int) {
    for (const auto& t : g.initializer())
      consts[t.name()] = {t.data_type(), std::vector<int64_t>(t.dims().begin(), t.dims().end()), stored_bytes(t)};
    for (const auto& n : g.node()) {
      if (n.op_type() != "Constant" || n.output_size() != 1) continue;
      for (const auto& a : n.attribute()) {
        if (a.name() == "value" && a.has_t())
          consts[n.output(0)] = {a.t().data_type(), std::vector<int64_t>(a.t().dims().begin(), a.t().dims().end()),
                                 stored_bytes(a.t())};
        else if (auto lc = list_constant(a))
          consts[n.output(0)] = {lc->elem_type, lc->dims, lc->bytes};
      }
    }
  });
  return consts;
}

Quantization analyze_quantization(const onnx::ModelProto& model, const ConstMap& consts) {
  Quantization q;
  std::unordered_map<std::string, const onnx::NodeProto*> producer;
  std::set<std::string> qdq_params;  // values read as a Q/DQ scale or zero point
  onnxio::for_each_node(model, [&](const onnx::NodeProto& n, int) {
    for (const auto& o : n.output()) producer[o] = &n;
    if (is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear"))
      for (int i = 1; i < n.input_size(); ++i) qdq_params.insert(n.input(i));
  });
  auto find_const = [&](const onnx::NodeProto& n, int i) -> const ConstInfo* {
    if (n.input_size() <= i || n.input(i).empty()) return nullptr;
    auto it = consts.find(n.input(i));
    return it == consts.end() ? nullptr : &it->second;
  };
  std::map<decltype(WeightGroup{}.key()), WeightGroup> groups;
  onnxio::for_each_node(model, [&](const onnx::NodeProto& n, int) {
    if (const onnxio::QuantizedOp* qop = onnxio::quantized_op(n)) {
      ++q.quantized_ops[op_key(n)];
      const ConstInfo* w = qop->weight >= 0 ? find_const(n, qop->weight) : nullptr;
      const DTypeInfo* info = w ? dtype_info_or_null(w->elem_type) : nullptr;
      if (!info) return;
      WeightGroup g{};
      g.dtype = info->dtype;
      const int64_t rank = static_cast<int64_t>(w->dims.size());
      const int64_t nbits = int_attr(n, "bits", 0);
      if (const int64_t block = int_attr(n, "block_size", 0); block > 0 && nbits > 0) {
        // uint8 codes of `bits` bits: report the codes' dtype (4-bit: uint4, as a DequantizeLinear would hold it).
        if (nbits == 4 && g.dtype == DType::UInt8) g.dtype = DType::UInt4;
        g.granularity = Granularity::PerBlock;
        g.block_size = block;
        g.axis = qop->op == "MatMulNBits" ? 1 : int_attr(n, "quantize_axis", 1);
      } else {
        const ConstInfo* sc = find_const(n, qop->granularity_from);
        if (!sc || numel(sc->dims) <= 1) {
          g.granularity = Granularity::PerTensor;
        } else {
          g.granularity = Granularity::PerChannel;
          int64_t axis = qop->channel_axis >= 0 ? qop->channel_axis : rank - 1;
          if (qop->op == "QGemm" && int_attr(n, "transB", 0) != 0) axis = 0;
          g.axis = axis;
        }
      }
      ++groups.try_emplace(g.key(), g).first->second.count;
      return;
    }
    if (is_op(n, "QuantizeLinear")) {
      ++q.quantize_linear;
      const ConstInfo* x = find_const(n, 0);
      if (!x || !is_float(dtype_or_undefined(x->elem_type)))  // not a float weight: an activation
        if (auto dt = q_output_dtype(n, consts)) ++q.activations[*dt];
      return;
    }
    if (!is_op(n, "DequantizeLinear")) return;
    ++q.dequantize_linear;
    if (n.output_size() > 0 && qdq_params.count(n.output(0))) return;  // expands double-quantized scales
    WeightGroup g{};
    const ConstInfo* x = find_const(n, 0);
    if (x) {  // a quantized weight stored as such
      const DTypeInfo* info = dtype_info_or_null(x->elem_type);
      if (!info) return;
      g.dtype = info->dtype;
      const ConstInfo* scale = find_const(n, 1);
      set_granularity(g, n, scale ? &scale->dims : nullptr, x->dims.size());
    } else {  // a float weight quantized by a QuantizeLinear right before (Q -> DQ on a constant)
      auto it = n.input_size() > 0 ? producer.find(n.input(0)) : producer.end();
      if (it == producer.end() || !is_op(*it->second, "QuantizeLinear")) return;
      const onnx::NodeProto& qn = *it->second;
      const ConstInfo* w = find_const(qn, 0);
      const auto dt = q_output_dtype(qn, consts);
      if (!w || !dt) return;
      g.dtype = *dt;
      const ConstInfo* scale = find_const(qn, 1);
      set_granularity(g, qn, scale ? &scale->dims : nullptr, w->dims.size());
    }
    auto& slot = groups.try_emplace(g.key(), g).first->second;
    ++slot.count;
  });
  for (auto& [key, g] : groups) q.weights.push_back(g);
  return q;
}

// Follows each constant through the Q/DQ nodes that take it as their input 0 to the nodes that finally read it:
// a compute node makes it a weight, a Q/DQ scale or zero point input makes it a quantization parameter.
WeightBytes analyze_weight_bytes(const onnx::ModelProto& model, const ConstMap& consts) {
  std::unordered_map<std::string, std::vector<std::pair<const onnx::NodeProto*, int>>> readers;
  onnxio::for_each_node(model, [&](const onnx::NodeProto& n, int) {
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty()) readers[n.input(i)].emplace_back(&n, i);
  });
  auto is_qdq = [](const onnx::NodeProto& n) { return is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear"); };
  WeightBytes out;
  std::map<std::pair<bool, DType>, std::set<const onnx::NodeProto*>> nodes;  // (is weight, dtype) -> readers
  for (const auto& [name, c] : consts) {
    std::set<const onnx::NodeProto*> compute, params;
    std::vector<std::pair<std::string, int>> todo = {{name, 0}};
    while (!todo.empty()) {
      auto [value, depth] = todo.back();
      todo.pop_back();
      auto it = readers.find(value);
      if (it == readers.end()) continue;
      for (const auto& [n, i] : it->second) {
        if (is_quant_param_input(*n, i))
          params.insert(n);
        else if (!is_qdq(*n))
          compute.insert(n);
        else if (i > 0)
          params.insert(n);
        else if (depth < 8 && n->output_size() > 0)  // a chain of Q/DQ on one constant is short; 8 bounds a cycle
          todo.emplace_back(n->output(0), depth + 1);
      }
    }
    if (compute.empty() && params.empty()) continue;
    const bool weight = !compute.empty();
    const DType dt = dtype_or_undefined(c.elem_type);
    ConstantUse& u = (weight ? out.weights : out.quant_params)[dt];
    u.bytes += c.bytes;
    ++u.tensors;
    nodes[{weight, dt}].merge(weight ? compute : params);
  }
  for (const auto& [key, set] : nodes) {
    ConstantUse& u = (key.first ? out.weights : out.quant_params)[key.second];
    u.nodes = static_cast<int64_t>(set.size());
    for (const onnx::NodeProto* n : set) ++u.ops[op_key(*n)];
  }
  return out;
}

}  // namespace

std::string_view granularity_name(Granularity g) {
  switch (g) {
    case Granularity::PerTensor:
      return "per-tensor";
    case Granularity::PerChannel:
      return "per-channel";
    case Granularity::PerBlock:
      return "per-block";
  }
  return "?";
}

ModelSummary summarize(const onnx::ModelProto& model) {
  ModelSummary s;
  s.ir_version = model.ir_version();
  for (const auto& o : model.opset_import())
    s.opset_imports.emplace_back(is_default_domain(o.domain()) ? "ai.onnx" : o.domain(), o.version());
  s.producer_name = model.producer_name();
  s.producer_version = model.producer_version();
  for (const auto& e : model.metadata_props()) s.metadata.emplace_back(e.key(), e.value());

  const auto& g = model.graph();
  std::vector<std::string> init_names;
  for (const auto& t : g.initializer()) init_names.push_back(t.name());
  std::sort(init_names.begin(), init_names.end());
  for (const auto& v : g.input())
    if (!std::binary_search(init_names.begin(), init_names.end(), v.name())) s.inputs.push_back(value_info(v));
  for (const auto& v : g.output()) s.outputs.push_back(value_info(v));

  onnxio::for_each_graph(model, [&](const onnx::GraphProto&, int depth) {
    if (depth > 0) ++s.subgraph_count;
  });
  onnxio::for_each_node(model, [&](const onnx::NodeProto& n, int) {
    ++s.op_counts[op_key(n)];
    ++s.node_count;
    if (n.op_type() != "Constant" || !is_default_domain(n.domain())) return;
    for (const auto& a : n.attribute())
      if (auto lc = list_constant(a)) add_param(s.parameters, lc->elem_type, numel(lc->dims), lc->bytes, false);
  });
  onnxio::for_each_tensor(model, [&](const onnx::TensorProto& t, const TensorSite& site) {
    // Initializers and Constant values (dense or sparse); other attribute tensors (e.g. ConstantOfShape's
    // fill value) and sparse indices are not parameters.
    const bool in_constant = site.node && site.node->op_type() == "Constant" && is_default_domain(site.node->domain());
    const bool counted = site.kind == TensorSiteKind::Initializer ||
                         (site.kind == TensorSiteKind::Attribute && in_constant) ||
                         (site.kind == TensorSiteKind::SparseValues && (in_constant || !site.node));
    if (counted) add_tensor_param(s.parameters, t);
  });
  const ConstMap consts = collect_consts(model);
  s.quantization = analyze_quantization(model, consts);
  s.weight_bytes = analyze_weight_bytes(model, consts);
  return s;
}

ModelSummary inspect_model(const std::filesystem::path& path) {
  onnxio::LoadOptions opts;
  opts.load_external_data = false;
  const onnxio::LoadedModel m = onnxio::load_model(path, opts);
  ModelSummary s = summarize(*m.proto);
  s.path = path;
  std::error_code ec;
  s.file_bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  return s;
}

}  // namespace qtool::inspect
